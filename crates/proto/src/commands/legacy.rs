//! Codes only the 0.11.0 dialect knows (PROTOCOL.md §12.2): `ATTACH_CONSUMER_SESSION` (14),
//! `UPDATE_USER` (35), `FLUSH_UNSAVED_BUFFER` (102), the routing codes 103, 104 and 123 with
//! the routing reply, and the retired stream and topic updates and purges (204, 205, 304,
//! 305).
//!
//! A 0.12.2 server must keep these codes unknown; the codecs still encode the same bytes in
//! either dialect, and dispatch decides whether a connection may use them.

#[cfg(test)]
mod tests;

use alloc::string::String;

use crate::codec::{Codec, LONG_TEXT_LENGTH_MAX, Reader, WireName, Writer};
use crate::commands::offsets::OffsetSelector;
use crate::commands::poll_selector::PollSelector;
use crate::error::DecodeError;
use crate::primitives::{Identifier, OptionsBlock};

/// `ATTACH_CONSUMER_SESSION` (14) request: `[client_id:u128][session:u64]
/// [metadata_watermark:u64]`. Multi-node only: it attaches a data connection to the
/// coordinator's group identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct AttachConsumerSession {
    pub client: u128,
    pub session: u64,
    pub metadata_watermark: u64,
}

impl Codec<'_> for AttachConsumerSession {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u128(self.client);
        writer.u64(self.session);
        writer.u64(self.metadata_watermark);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client: reader.u128("attach.client")?,
            session: reader.u64("attach.session")?,
            metadata_watermark: reader.u64("attach.metadata_watermark")?,
        })
    }
}

/// `UPDATE_USER` (35) request: `[user_id][has_username:u8][username if 1][has_status:u8]
/// [status:u8 if 1][options to end of body]`. The presence flags must be 0 or 1: the SDK
/// writes nothing else, and a stray byte would shift every field after it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UpdateUser {
    pub user_id: Identifier,
    pub username: Option<WireName>,
    /// The raw status byte (1 active, 2 inactive): the users module owns its meaning, and
    /// the server answers an unknown value with its own error code.
    pub status: Option<u8>,
    pub options: OptionsBlock,
}

impl Codec<'_> for UpdateUser {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.user_id.encode(writer);
        writer.bool(self.username.is_some());
        if let Some(username) = &self.username {
            username.encode(writer);
        }
        writer.bool(self.status.is_some());
        if let Some(status) = self.status {
            writer.u8(status);
        }
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let user_id = Identifier::decode(reader)?;
        let username = if reader.bool("update_user.has_username")? {
            Some(WireName::decode(reader)?)
        } else {
            None
        };
        let status = if reader.bool("update_user.has_status")? {
            Some(reader.u8("update_user.status")?)
        } else {
            None
        };
        Ok(Self {
            user_id,
            username,
            status,
            options: OptionsBlock::decode(reader)?,
        })
    }
}

/// `FLUSH_UNSAVED_BUFFER` (102) request: `[stream_id][topic_id][partition_id:u32][fsync:u8]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct FlushUnsavedBuffer {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub partition_id: u32,
    /// Any non-zero byte asks for an fsync, as the 0.11.0 decoder reads it.
    pub fsync: bool,
}

impl Codec<'_> for FlushUnsavedBuffer {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        writer.u32(self.partition_id);
        writer.bool(self.fsync);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            partition_id: reader.u32("flush.partition_id")?,
            fsync: reader.u8("flush.fsync")? != 0,
        })
    }
}

/// `GET_POLL_ROUTING` (103) request: the poll selector. The reply is [`ConsumerRouting`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetPollRouting {
    pub selector: PollSelector,
}

/// `POLL_MESSAGES_ON_PRIMARY` (104) request: the poll selector; the reply is a poll reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PollMessagesOnPrimary {
    pub selector: PollSelector,
}

macro_rules! poll_selector_codec {
    ($type:ty) => {
        impl Codec<'_> for $type {
            fn encode(&self, writer: &mut Writer<'_>) {
                self.selector.encode(writer);
            }

            fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
                PollSelector::decode(reader).map(|selector| Self { selector })
            }
        }
    };
}

poll_selector_codec!(GetPollRouting);
poll_selector_codec!(PollMessagesOnPrimary);

/// `GET_CONSUMER_OFFSET_ROUTING` (123) request: the offset selector of
/// `GET_CONSUMER_OFFSET`. The reply is [`ConsumerRouting`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetConsumerOffsetRouting {
    pub selector: OffsetSelector,
}

impl Codec<'_> for GetConsumerOffsetRouting {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.selector.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        OffsetSelector::decode(reader).map(|selector| Self { selector })
    }
}

/// A cluster node in the 0.11.0 layout (no leading `replica_id`): `[name u32+UTF-8]
/// [ip u32+UTF-8][tcp u16][quic u16][http u16][ws u16][role u8][status u8]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct LegacyClusterNode {
    /// At most [`LONG_TEXT_LENGTH_MAX`] bytes when decoded.
    pub name: String,
    /// An IP literal or host name, no port; at most [`LONG_TEXT_LENGTH_MAX`] bytes.
    pub ip: String,
    /// 0 means the node does not serve that transport.
    pub tcp_port: u16,
    pub quic_port: u16,
    pub http_port: u16,
    pub websocket_port: u16,
    /// 0 Leader, 1 Follower; raw, as the 0.11.0 wire carries it.
    pub role: u8,
    /// 0 Healthy, 1 Starting, 2 Stopping, 3 Unreachable, 4 Maintenance; raw.
    pub status: u8,
}

impl Codec<'_> for LegacyClusterNode {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.bytes_u32(self.name.as_bytes());
        writer.bytes_u32(self.ip.as_bytes());
        writer.u16(self.tcp_port);
        writer.u16(self.quic_port);
        writer.u16(self.http_port);
        writer.u16(self.websocket_port);
        writer.u8(self.role);
        writer.u8(self.status);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            name: String::from(reader.text_u32(LONG_TEXT_LENGTH_MAX, "node.name")?),
            ip: String::from(reader.text_u32(LONG_TEXT_LENGTH_MAX, "node.ip")?),
            tcp_port: reader.u16("node.tcp_port")?,
            quic_port: reader.u16("node.quic_port")?,
            http_port: reader.u16("node.http_port")?,
            websocket_port: reader.u16("node.websocket_port")?,
            role: reader.u8("node.role")?,
            status: reader.u8("node.status")?,
        })
    }
}

/// Reply of `GET_POLL_ROUTING` (103) and `GET_CONSUMER_OFFSET_ROUTING` (123): the consumer
/// session to act as, then the node that serves the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ConsumerRouting {
    pub client: u128,
    pub session: u64,
    pub metadata_watermark: u64,
    pub primary: LegacyClusterNode,
}

impl Codec<'_> for ConsumerRouting {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u128(self.client);
        writer.u64(self.session);
        writer.u64(self.metadata_watermark);
        self.primary.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client: reader.u128("routing.client")?,
            session: reader.u64("routing.session")?,
            metadata_watermark: reader.u64("routing.metadata_watermark")?,
            primary: LegacyClusterNode::decode(reader)?,
        })
    }
}

/// `UPDATE_STREAM` (204) request: `[stream_id][name][options to end of body]`; the name is
/// always sent, the current one when unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UpdateStream {
    pub stream_id: Identifier,
    pub name: WireName,
    pub options: OptionsBlock,
}

impl Codec<'_> for UpdateStream {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.name.encode(writer);
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            name: WireName::decode(reader)?,
            options: OptionsBlock::decode(reader)?,
        })
    }
}

/// `PURGE_STREAM` (205) request: `[stream_id]`; deletes the messages, keeps the resources.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PurgeStream {
    pub stream_id: Identifier,
}

impl Codec<'_> for PurgeStream {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Identifier::decode(reader).map(|stream_id| Self { stream_id })
    }
}

/// `UPDATE_TOPIC` (304) request: `[stream_id][topic_id][name][options to end of body]`; the
/// options carry the keys to change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct UpdateTopic {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
    pub name: WireName,
    pub options: OptionsBlock,
}

impl Codec<'_> for UpdateTopic {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
        self.name.encode(writer);
        self.options.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
            name: WireName::decode(reader)?,
            options: OptionsBlock::decode(reader)?,
        })
    }
}

/// `PURGE_TOPIC` (305) request: `[stream_id][topic_id]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct PurgeTopic {
    pub stream_id: Identifier,
    pub topic_id: Identifier,
}

impl Codec<'_> for PurgeTopic {
    fn encode(&self, writer: &mut Writer<'_>) {
        self.stream_id.encode(writer);
        self.topic_id.encode(writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: Identifier::decode(reader)?,
            topic_id: Identifier::decode(reader)?,
        })
    }
}
