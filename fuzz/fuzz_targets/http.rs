#![no_main]
//! Fuzzes the HTTP API's decoders; the checks live in `http_api::fuzzing::fuzz_request` so
//! the seeded test in the crate runs the same code on stable.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| http_api::fuzzing::fuzz_request(bytes));
