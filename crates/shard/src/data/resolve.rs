//! Resolving the references of data-plane requests against metadata: stream and topic
//! identifiers, consumer-group identifiers and consumer offset slots (PROTOCOL.md §3.1,
//! §3.2, §4.5).

use proto::primitives::{Consumer, ConsumerKind, Identifier};
use segment::offsets::OffsetOwner;

use crate::metadata::{Metadata, Topic};
use crate::refusal::{Missing, Refusal};

/// The stream id and the topic named by a request. Unknown stream: `1009` (by id) or `1010`
/// (by name); unknown topic: `2010` / `2011`.
pub fn resolve_topic<'m>(
    metadata: &'m Metadata,
    stream: &Identifier,
    topic: &Identifier,
) -> Result<(u32, &'m Topic), Refusal> {
    let stream = match stream {
        Identifier::Numeric(id) => metadata.streams.get(id),
        Identifier::Name(name) => metadata
            .streams
            .values()
            .find(|stream| stream.name == name.as_str()),
    }
    .ok_or(match stream {
        Identifier::Numeric(_) => Refusal::Missing(Missing::Stream),
        Identifier::Name(_) => Refusal::Missing(Missing::StreamName),
    })?;
    let found = match topic {
        Identifier::Numeric(id) => stream.topics.get(id),
        Identifier::Name(name) => stream
            .topics
            .values()
            .find(|topic| topic.name == name.as_str()),
    };
    let topic_missing = match topic {
        Identifier::Numeric(_) => Refusal::Missing(Missing::Topic),
        Identifier::Name(_) => Refusal::Missing(Missing::TopicName),
    };
    found.map(|topic| (stream.id, topic)).ok_or(topic_missing)
}

/// A consumer group of `topic` by id or name.
pub fn resolve_group(topic: &Topic, group: &Identifier) -> Option<u32> {
    match group {
        Identifier::Numeric(id) => topic.groups.contains_key(id).then_some(*id),
        Identifier::Name(name) => topic
            .groups
            .values()
            .find(|candidate| candidate.name == name.as_str())
            .map(|candidate| candidate.id),
    }
}

/// The offset slot of an individual consumer: its numeric id, or `xxh32(seed 0, name)`.
pub fn consumer_slot(id: &Identifier) -> u32 {
    match id {
        Identifier::Numeric(id) => *id,
        Identifier::Name(name) => xxhash_rust::xxh32::xxh32(name.as_str().as_bytes(), 0),
    }
}

/// Whose offset a consumer reference names; an unknown group is `5000`.
pub fn offset_owner(topic: &Topic, consumer: &Consumer) -> Result<OffsetOwner, Refusal> {
    match consumer.kind {
        ConsumerKind::Consumer => Ok(OffsetOwner::Consumer(consumer_slot(&consumer.id))),
        ConsumerKind::ConsumerGroup | ConsumerKind::ExternalGroup => {
            resolve_group(topic, &consumer.id)
                .map(OffsetOwner::Group)
                .ok_or(Refusal::Missing(Missing::Group))
        }
    }
}
