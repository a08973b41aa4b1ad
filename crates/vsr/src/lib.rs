//! Viewstamped Replication Revisited (Liskov and Cowling, 2012) as a pure state machine.
//!
//! A [`Replica`] takes messages, ticks and I/O completions in and pushes effects (send, write,
//! persist the view, commit, reply) onto an [`Outbox`] that its caller executes: no clock, no
//! runtime, no I/O. The cluster simulator (`tests/sim`) drives replicas with a lossy,
//! reordering network, crashes and lost disks, and checks the safety invariants after every
//! step.
//!
//! What this implementation adds to the paper, and why:
//! - **A durable log.** A backup acknowledges a prepare (`PrepareOk`) only after the entry is
//!   written ([`Completion::Written`]), and a primary counts itself only for entries it has
//!   written, so a committed op is durable on a quorum.
//! - **A durable view.** `view` and `log_view` are persisted ([`Effect::Persist`]) before any
//!   message that depends on them is sent, so a replica that restarts with its disk keeps the
//!   promises it made in view changes and may take part at once; only a replica whose disk was
//!   lost runs the paper's recovery protocol, and it votes only after it has caught up.
//! - **A primary that restarts never resumes its view**: it may have lost entries it had
//!   prepared but not written, so it starts a view change instead.
//! - **Hash-chained entries**: every entry carries its predecessor's checksum, so a backup
//!   appends a prepare only if it continues the log it holds.
//!
//! Bounded by design: replica sets are `u16` bitsets (at most [`REPLICAS_MAX`]), the pipeline
//! holds at most [`PIPELINE_MAX`] uncommitted ops, a repair request covers at most
//! [`REPAIR_PREPARES_MAX`] ops and the client table at most [`CLIENTS_MAX`] clients. Memory
//! holds only the log above what is both applied and written (and [`EVICT_SLACK`] ops more):
//! older entries are read back from disk ([`Effect::SendPrepares`]) for a lagging replica,
//! and view changes and recovery carry only the log after the sender's commit (a
//! [`Suffix`]); a replica missing committed ops below it fetches them from the sender
//! before it takes the log.
//!
//! A replica rebuilding a lost disk makes the committed ops it fetches its own log as they
//! come (written and applied a batch at a time), so its memory does not grow with the log;
//! it still votes only once its recovery is durable.
//!
//! Not yet here (issue 13 lists them): checkpoints (a restarted replica reads and replays
//! its whole log, and a recovering one fetches all of it), and state transfer for a replica
//! too far behind.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

mod bounded;
mod catch_up;
mod client_table;
mod config;
mod entry;
pub mod journal;
mod message;
mod outbox;
mod recovery;
mod replica;
mod restore;
mod view_change;
pub mod wire;

pub use client_table::ClientTable;
pub use config::{Break, Config, quorum};
pub use entry::{Checksum, Entry, Op, ROOT_CHECKSUM};
pub use message::{Command, Message, Suffix};
pub use outbox::{Completion, Effect, Outbox};
pub use replica::{Durable, Replica, Status};
pub use restore::Restore;

/// Replica sets are `u16` bitsets.
pub const REPLICAS_MAX: usize = 16;
/// Uncommitted ops the primary prepares at once; requests beyond wait in its queue.
pub const PIPELINE_MAX: usize = 64;
/// Client requests waiting for room in the pipeline; more are dropped (the client retries).
pub const REQUEST_QUEUE_MAX: usize = 256;
/// Ops one `RequestPrepares` asks for (and one answer sends).
pub const REPAIR_PREPARES_MAX: u64 = 32;
/// Applied and written entries a replica keeps in memory beyond what it needs (to resend
/// recent prepares without a disk read); older ones are dropped and read back from the
/// durable log when a lagging replica asks for them.
pub const EVICT_SLACK: u64 = 16;
/// Clients the table remembers; the one that committed least recently is forgotten first.
pub const CLIENTS_MAX: usize = 1024;

/// The index of a replica in the cluster (`0..replica_count`).
pub type ReplicaId = u8;
/// A view number; `view % replica_count` is its primary.
pub type View = u32;
/// A set of replicas, one bit per replica id.
pub type ReplicaSet = u16;

const _: () = assert!(REPLICAS_MAX <= ReplicaSet::BITS as usize);
const _: () = assert!(PIPELINE_MAX <= REQUEST_QUEUE_MAX);

#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod suffix_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire_tests;
