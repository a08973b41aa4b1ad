#![no_main]
//! Fuzzes the segment scan recovery and `iggy check` share; the checks live in
//! `segment::fuzzing::fuzz_scan` so the seeded replay test in the crate runs the same code.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| segment::fuzzing::fuzz_scan(bytes));
