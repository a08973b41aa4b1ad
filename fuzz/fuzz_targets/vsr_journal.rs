#![no_main]
//! Fuzzes a replica's on-disk log scan and superblock decoder; the checks live in
//! `vsr::journal::fuzz_decode` so the seeded replay test in the crate runs the same code.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| vsr::journal::fuzz_decode(bytes));
