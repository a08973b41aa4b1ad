//! The primitive encodings the commands are built from (PROTOCOL.md §3).

pub mod consumer;
pub mod identifier;
pub mod partitioning;
pub mod permissions;
pub mod polling;
pub mod tlv;

pub use consumer::{Consumer, ConsumerKind};
pub use identifier::Identifier;
pub use partitioning::Partitioning;
pub use permissions::{GlobalPermissions, Permissions, StreamPermissions, TopicPermissions};
pub use polling::{AckLevel, OptionalPartition, PollingKind, PollingStrategy};
pub use tlv::{HeaderKind, OptionsBlock, TlvEntry, UserHeaders};
