//! The metadata state machine: what exists (streams, topics, partitions, consumer groups,
//! users, personal access tokens) and the operations that change it.
//!
//! Every change is a [`MetadataOp`] carrying every value it needs (ids, timestamps, hashes),
//! chosen before it is logged ([`validate`]); [`Metadata::apply`] is then a pure function of
//! the state and the op, so the [`Journal`] (a [`snapshot`] and the ops after it) rebuilds
//! the same state. Replies are built from the state by [`responses`]; [`permissions`] holds
//! the access rules every handler family checks.

mod apply;
pub mod auth;
pub mod journal;
mod model;
mod op;
pub mod op_codec;
mod option_text;
pub mod options;
pub mod permissions;
pub mod rekey;
pub mod replay;
mod resolve;
pub mod responses;
pub mod snapshot;
pub mod validate;

#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod tests;

pub use apply::ApplyError;
pub use journal::{CompactionLimits, Journal, JournalError};
pub use model::{
    ConsumerGroup, Metadata, Partition, PersonalAccessToken, Stream, Topic, TopicSettings, User,
    UserStatus,
};
pub use op::MetadataOp;
pub use resolve::lowest_free_id;
