//! The metadata state machine: what exists (streams, topics, partitions, consumer groups,
//! users, personal access tokens) and the operations that change it.
//!
//! Every change is a [`MetadataOp`] carrying every value it needs (ids, timestamps, hashes),
//! chosen before it is logged; [`Metadata::apply`] is then a pure function of the state and
//! the op, so replaying the journal rebuilds the same state.

mod model;
mod op;

pub use model::{
    ConsumerGroup, Metadata, Partition, PersonalAccessToken, Stream, Topic, TopicSettings, User,
    UserStatus,
};
pub use op::MetadataOp;
