#![no_main]
//! Fuzzes the metadata journal replay; the checks live in `shard::fuzzing::fuzz_journal`
//! so the seeded replay test in the crate runs the same code.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| shard::fuzzing::fuzz_journal(bytes));
