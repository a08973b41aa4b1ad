//! Resolving an [`Identifier`] (numeric id or name) to the entity it names, with the
//! not-found code each family answers: streams `1009`, topics `2010`, consumer groups
//! `5000`, users `20` (PROTOCOL.md §4.2, §4.6, §4.7, §4.9).
//!
//! One code per family whichever identifier kind missed: the SDKs accept the id form for a
//! name miss too (§4.6).

use proto::primitives::Identifier;

use super::model::{ConsumerGroup, Metadata, Stream, Topic, User};
use crate::refusal::{Missing, Refusal};

impl Metadata {
    /// The stream `id` names, or `1009 StreamIdNotFound`.
    pub fn stream(&self, id: &Identifier) -> Result<&Stream, Refusal> {
        let found = match id {
            Identifier::Numeric(id) => self.streams.get(id),
            Identifier::Name(name) => self.streams.values().find(|s| s.name == name.as_str()),
        };
        found.ok_or(Refusal::Missing(Missing::Stream))
    }

    /// The stream and topic the pair names: `1009` or `2010` for the level that missed.
    pub fn topic(
        &self,
        stream_id: &Identifier,
        topic_id: &Identifier,
    ) -> Result<(&Stream, &Topic), Refusal> {
        let stream = self.stream(stream_id)?;
        Ok((stream, stream.topic(topic_id)?))
    }

    /// The user `id` names, or `20 ResourceNotFound`.
    pub fn user(&self, id: &Identifier) -> Result<&User, Refusal> {
        let found = match id {
            Identifier::Numeric(id) => self.users.get(id),
            Identifier::Name(name) => self.users.values().find(|u| u.username == name.as_str()),
        };
        found.ok_or(Refusal::Missing(Missing::Resource))
    }

    /// The topic with these numeric ids, if any (ops and partition keys carry ids).
    pub fn topic_by_ids(&self, stream_id: u32, topic_id: u32) -> Option<&Topic> {
        self.streams.get(&stream_id)?.topics.get(&topic_id)
    }

    /// The user with this exact username, if any (login).
    pub fn user_by_name(&self, username: &str) -> Option<&User> {
        self.users.values().find(|user| user.username == username)
    }
}

impl Stream {
    /// The topic `id` names, or `2010 TopicIdNotFound`.
    pub fn topic(&self, id: &Identifier) -> Result<&Topic, Refusal> {
        let found = match id {
            Identifier::Numeric(id) => self.topics.get(id),
            Identifier::Name(name) => self.topics.values().find(|t| t.name == name.as_str()),
        };
        found.ok_or(Refusal::Missing(Missing::Topic))
    }
}

impl Topic {
    /// The consumer group `id` names, or `5000 ConsumerGroupIdNotFound`.
    pub fn group(&self, id: &Identifier) -> Result<&ConsumerGroup, Refusal> {
        let found = match id {
            Identifier::Numeric(id) => self.groups.get(id),
            Identifier::Name(name) => self.groups.values().find(|g| g.name == name.as_str()),
        };
        found.ok_or(Refusal::Missing(Missing::Group))
    }

    /// Partitions as a count (a topic holds far fewer than `u32::MAX`).
    pub fn partitions_count(&self) -> u32 {
        u32::try_from(self.partitions.len()).unwrap_or(u32::MAX)
    }
}

/// The lowest id not in `ids` (a sorted iterator): streams, topics and users reuse ids.
pub fn lowest_free_id(ids: impl Iterator<Item = u32>) -> Option<u32> {
    let mut candidate = 0_u32;
    for id in ids {
        if id != candidate {
            return Some(candidate);
        }
        candidate = candidate.checked_add(1)?;
    }
    Some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_id_fills_gaps() {
        assert_eq!(lowest_free_id([].into_iter()), Some(0));
        assert_eq!(lowest_free_id([0, 1, 2].into_iter()), Some(3));
        assert_eq!(lowest_free_id([1, 2].into_iter()), Some(0));
        assert_eq!(lowest_free_id([0, 2].into_iter()), Some(1));
    }
}
