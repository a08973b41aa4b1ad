#![no_main]
//! Fuzzes the decoder of a partition directory's `partition.id`; the checks live in
//! `shard::fuzzing::fuzz_partition_identity` so the seeded replay test in the crate runs the
//! same code.

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| shard::fuzzing::fuzz_partition_identity(bytes));
