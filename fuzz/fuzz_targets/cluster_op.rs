#![no_main]
//! Fuzzes cluster mode's replicated entry body decoder; the checks live in
//! `shard::fuzzing::fuzz_cluster_op` so the seeded replay test in the crate runs the same code.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| shard::fuzzing::fuzz_cluster_op(bytes));
