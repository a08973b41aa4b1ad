//! A shard: the metadata state machine (streams, topics, partitions, users, tokens, consumer
//! groups), its journal, sessions, authentication and authorisation, and the handling of
//! every request.
//!
//! The logic is synchronous and deterministic where it can be: metadata changes are
//! [`metadata::MetadataOp`]s that are validated, appended to the journal, then applied by
//! [`metadata::Metadata::apply`], so a replicated log can later take the journal's place
//! without a redesign. Only the data plane (partition logs) awaits I/O.

pub mod affinity;
pub mod at_rest;
pub mod check;
pub mod clock;
pub mod cluster;
pub mod connection;
pub mod cpu;
pub mod data;
pub mod disk;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod handler;
pub mod hashing;
pub mod inbox;
pub mod liveness;
pub mod login_limit;
pub mod mail;
pub mod metadata;
pub mod metrics;
pub mod node;
pub mod outcome;
pub mod procfs;
pub mod refusal;
pub mod reply_budget;
pub mod retries;
pub mod rotate;
pub mod server;
pub mod sessions;

pub use connection::{BoundSession, Connection, TransportKind};
pub use outcome::{Outcome, Reply};
pub use server::Server;
