//! The partition log: segment files of batch records, their offset and time indexes,
//! recovery, durability and retention. `FORMAT.md` beside this crate is the contract.
//!
//! Layering: [`format`] is the byte format as plain functions (no I/O); [`storage`] is the
//! I/O boundary (a file-system trait with in-memory, compio and io-uring backends); the log
//! itself drives the format through a storage, and [`partition`] (feature `compio`) runs it
//! with the consumer [`offsets`] and the idempotent [`producers`] as one task per partition,
//! which gives concurrent appenders group commit.

extern crate alloc;

#[cfg(feature = "compio")]
pub mod append_buffer;
pub mod broken;
pub mod check;
pub mod format;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod layout;
pub mod log;
pub mod offsets;
#[cfg(feature = "compio")]
pub mod partition;
pub mod producers;
#[cfg(feature = "compio")]
mod stats_cell;
pub mod storage;
