#![no_main]
//! Fuzzes every reply decoder; the checks live in `proto::fuzzing::fuzz_reply` so the seeded
//! replay test in the crate runs the same code on stable.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| proto::fuzzing::fuzz_reply(bytes));
