#![no_main]
//! Fuzzes the primitive decoders; the checks live in `proto::fuzzing::fuzz_primitives` so the
//! seeded replay test in the crate runs the same code on stable.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| proto::fuzzing::fuzz_primitives(bytes));
