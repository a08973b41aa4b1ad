//! Stream commands (PROTOCOL.md §4.6, §12.3): the `StreamResponse` record in both dialects,
//! `StreamDetails`, `GET_STREAM` (200), `GET_STREAMS` (201, request body empty), `CREATE_STREAM`
//! (202) and `DELETE_STREAM` (203).
//!
//! 0.12.2 follows the record with an explicit and a derived option block; 0.11.0 has only the
//! explicit one.

#[cfg(test)]
mod tests;

use alloc::vec::Vec;

use crate::codec::{Codec, Reader, WireName, Writer, check_length, len_u32};
use crate::commands::topics::{
    TOPIC_HEADER_LENGTH_MIN, TOPICS_PER_STREAM_MAX, TopicHeader, decode_records,
};
use crate::commands::{decode_concatenated, encode_concatenated};
use crate::dialect::Dialect;
use crate::error::DecodeError;
use crate::primitives::{Identifier, OptionsBlock};

/// A stream's summary: each record of `GET_STREAMS` and the head of `GET_STREAM`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StreamResponse {
    pub id: u32,
    pub created_at_micros: u64,
    pub topics_count: u32,
    /// Sum over the stream's topics.
    pub size_bytes: u64,
    pub messages_count: u64,
    pub name: WireName,
    /// The keys the client set at create, as stored.
    pub options: OptionsBlock,
    /// 0.12.2 only: values the server computed (e.g. `encryption_key_source`); 0.11.0 has
    /// one block and neither writes nor reads this one.
    pub derived_options: OptionsBlock,
}

impl StreamResponse {
    /// Encodes with `topics_count` in place of the field, so `StreamDetails` always
    /// announces exactly the topics it carries.
    fn encode_counted(&self, writer: &mut Writer<'_>, topics_count: u32) {
        writer.u32(self.id);
        writer.u64(self.created_at_micros);
        writer.u32(topics_count);
        writer.u64(self.size_bytes);
        writer.u64(self.messages_count);
        self.name.encode(writer);
        self.options.encode_prefixed(writer);
        if writer.dialect() == Dialect::V0_12_2 {
            self.derived_options.encode_prefixed(writer);
        }
    }
}

impl Codec<'_> for StreamResponse {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.encode_counted(writer, self.topics_count);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut stream = Self {
            id: reader.u32("stream.id")?,
            created_at_micros: reader.u64("stream.created_at")?,
            topics_count: reader.u32("stream.topics_count")?,
            size_bytes: reader.u64("stream.size_bytes")?,
            messages_count: reader.u64("stream.messages_count")?,
            name: WireName::decode(reader)?,
            options: OptionsBlock::decode_prefixed(reader)?,
            derived_options: OptionsBlock::default(),
        };
        if reader.dialect() == Dialect::V0_12_2 {
            stream.derived_options = OptionsBlock::decode_prefixed(reader)?;
        }
        Ok(stream)
    }
}

/// `GET_STREAM` (200) reply and `CREATE_STREAM` (202) reply payload: the stream followed by
/// exactly `topics_count` topic headers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StreamDetails {
    /// Its `topics_count` is ignored by the encoder, which writes `topics.len()`.
    pub stream: StreamResponse,
    #[cfg_attr(
        test,
        proptest(
            strategy = "proptest::collection::vec(proptest::prelude::any::<TopicHeader>(), 0..4)"
        )
    )]
    pub topics: Vec<TopicHeader>,
}

impl Codec<'_> for StreamDetails {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream
            .encode_counted(writer, len_u32(self.topics.len()));
        for topic in &self.topics {
            topic.encode(writer);
        }
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = reader.offset();
        let stream = StreamResponse::decode(reader)?;
        let count = check_length(
            u64::from(stream.topics_count),
            0,
            TOPICS_PER_STREAM_MAX,
            "stream.topics_count",
            offset,
        )?;
        let topics = decode_records(reader, count, TOPIC_HEADER_LENGTH_MIN)?;
        Ok(Self { stream, topics })
    }
}

/// `GET_STREAM` (200) request: `[stream_id]`. "Not found" is an empty reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetStream {
    pub stream_id: Identifier,
}

impl Codec<'_> for GetStream {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Identifier::decode(reader).map(|stream_id| Self { stream_id })
    }
}

/// `GET_STREAMS` (201) reply: concatenated records with no count (empty = none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Streams(
    #[cfg_attr(
        test,
        proptest(
            strategy = "proptest::collection::vec(proptest::prelude::any::<StreamResponse>(), 0..4)"
        )
    )]
    pub Vec<StreamResponse>,
);

impl Codec<'_> for Streams {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_concatenated(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        decode_concatenated(reader).map(Self)
    }
}

/// `CREATE_STREAM` (202) request: `[name][options to end of body]`. The reply payload is
/// [`StreamDetails`] with no topics.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CreateStream {
    pub name: WireName,
    pub options: OptionsBlock,
}

impl Codec<'_> for CreateStream {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.name.encode(writer);
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            name: WireName::decode(reader)?,
            options: OptionsBlock::decode(reader)?,
        })
    }
}

/// `DELETE_STREAM` (203) request: `[stream_id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeleteStream {
    pub stream_id: Identifier,
}

impl Codec<'_> for DeleteStream {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Identifier::decode(reader).map(|stream_id| Self { stream_id })
    }
}
