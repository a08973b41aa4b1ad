//! The binary permissions block (§3.7): global flags, then per-stream and per-topic flags.
//!
//! Old structure: any non-zero flag byte reads as true. Streams and topics are encoded sorted
//! by id (they are held in `BTreeMap`s), so encoding is canonical.

use alloc::collections::BTreeMap;

use crate::codec::{Codec, Reader, Writer};
use crate::error::{DecodeError, DecodeErrorKind};

/// Streams a block may list before the decoder refuses it.
pub const PERMISSION_STREAMS_MAX: usize = 100_000;
/// Topics per stream a block may list before the decoder refuses it.
pub const PERMISSION_TOPICS_MAX: usize = 100_000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GlobalPermissions {
    pub manage_servers: bool,
    pub read_servers: bool,
    pub manage_users: bool,
    pub read_users: bool,
    pub manage_streams: bool,
    pub read_streams: bool,
    pub manage_topics: bool,
    pub read_topics: bool,
    pub poll_messages: bool,
    pub send_messages: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StreamPermissions {
    pub manage_stream: bool,
    pub read_stream: bool,
    pub manage_topics: bool,
    pub read_topics: bool,
    pub poll_messages: bool,
    pub send_messages: bool,
    #[cfg_attr(test, proptest(strategy = "topics_strategy()"))]
    pub topics: BTreeMap<u32, TopicPermissions>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TopicPermissions {
    pub manage_topic: bool,
    pub read_topic: bool,
    pub poll_messages: bool,
    pub send_messages: bool,
}

/// A user's permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Permissions {
    pub global: GlobalPermissions,
    #[cfg_attr(test, proptest(strategy = "streams_strategy()"))]
    pub streams: BTreeMap<u32, StreamPermissions>,
}

impl Permissions {
    /// Everything allowed: the root user.
    pub fn root() -> Self {
        let all = GlobalPermissions {
            manage_servers: true,
            read_servers: true,
            manage_users: true,
            read_users: true,
            manage_streams: true,
            read_streams: true,
            manage_topics: true,
            read_topics: true,
            poll_messages: true,
            send_messages: true,
        };
        Self {
            global: all,
            streams: BTreeMap::new(),
        }
    }
}

impl Codec<'_> for Permissions {
    fn encode(&self, writer: &mut Writer<'_>) {
        let g = &self.global;
        for flag in [
            g.manage_servers,
            g.read_servers,
            g.manage_users,
            g.read_users,
            g.manage_streams,
            g.read_streams,
            g.manage_topics,
            g.read_topics,
            g.poll_messages,
            g.send_messages,
        ] {
            writer.bool(flag);
        }
        writer.bool(!self.streams.is_empty());
        let mut streams = self.streams.iter().peekable();
        while let Some((id, stream)) = streams.next() {
            encode_stream(*id, stream, writer);
            writer.bool(streams.peek().is_some());
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let flags: [u8; 10] = reader.array("permissions.global")?;
        let [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9] = flags.map(|flag| flag != 0);
        let global = GlobalPermissions {
            manage_servers: f0,
            read_servers: f1,
            manage_users: f2,
            read_users: f3,
            manage_streams: f4,
            read_streams: f5,
            manage_topics: f6,
            read_topics: f7,
            poll_messages: f8,
            send_messages: f9,
        };
        let mut streams = BTreeMap::new();
        let mut more = reader.u8("permissions.has_streams")? != 0;
        while more {
            let offset = reader.offset();
            let (id, stream) = decode_stream(reader)?;
            if streams.len() >= PERMISSION_STREAMS_MAX || streams.insert(id, stream).is_some() {
                return Err(DecodeError::new(
                    "permissions.stream_id",
                    offset,
                    DecodeErrorKind::Duplicate,
                ));
            }
            more = reader.u8("permissions.has_next_stream")? != 0;
        }
        Ok(Self { global, streams })
    }
}

fn encode_stream(id: u32, stream: &StreamPermissions, writer: &mut Writer<'_>) {
    writer.u32(id);
    for flag in [
        stream.manage_stream,
        stream.read_stream,
        stream.manage_topics,
        stream.read_topics,
        stream.poll_messages,
        stream.send_messages,
    ] {
        writer.bool(flag);
    }
    writer.bool(!stream.topics.is_empty());
    let mut topics = stream.topics.iter().peekable();
    while let Some((topic_id, topic)) = topics.next() {
        writer.u32(*topic_id);
        for flag in [
            topic.manage_topic,
            topic.read_topic,
            topic.poll_messages,
            topic.send_messages,
        ] {
            writer.bool(flag);
        }
        writer.bool(topics.peek().is_some());
    }
}

fn decode_stream(reader: &mut Reader<'_>) -> Result<(u32, StreamPermissions), DecodeError> {
    let id = reader.u32("permissions.stream_id")?;
    let flags: [u8; 6] = reader.array("permissions.stream")?;
    let [f0, f1, f2, f3, f4, f5] = flags.map(|flag| flag != 0);
    let mut stream = StreamPermissions {
        manage_stream: f0,
        read_stream: f1,
        manage_topics: f2,
        read_topics: f3,
        poll_messages: f4,
        send_messages: f5,
        topics: BTreeMap::new(),
    };
    let mut more = reader.u8("permissions.has_topics")? != 0;
    while more {
        let offset = reader.offset();
        let topic_id = reader.u32("permissions.topic_id")?;
        let flags: [u8; 4] = reader.array("permissions.topic")?;
        let [t0, t1, t2, t3] = flags.map(|flag| flag != 0);
        let topic = TopicPermissions {
            manage_topic: t0,
            read_topic: t1,
            poll_messages: t2,
            send_messages: t3,
        };
        if stream.topics.len() >= PERMISSION_TOPICS_MAX
            || stream.topics.insert(topic_id, topic).is_some()
        {
            return Err(DecodeError::new(
                "permissions.topic_id",
                offset,
                DecodeErrorKind::Duplicate,
            ));
        }
        more = reader.u8("permissions.has_next_topic")? != 0;
    }
    Ok((id, stream))
}

#[cfg(test)]
fn topics_strategy() -> impl proptest::strategy::Strategy<Value = BTreeMap<u32, TopicPermissions>> {
    proptest::collection::btree_map(
        proptest::prelude::any::<u32>(),
        proptest::prelude::any::<TopicPermissions>(),
        0..4,
    )
}

#[cfg(test)]
fn streams_strategy() -> impl proptest::strategy::Strategy<Value = BTreeMap<u32, StreamPermissions>>
{
    proptest::collection::btree_map(
        proptest::prelude::any::<u32>(),
        proptest::prelude::any::<StreamPermissions>(),
        0..4,
    )
}
