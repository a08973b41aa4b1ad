#![no_main]
//! Fuzzes the replica message decoder; the checks live in `vsr::wire::fuzz_decode` so the
//! seeded replay test in the crate runs the same code on stable.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| vsr::wire::fuzz_decode(bytes));
