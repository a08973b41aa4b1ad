//! `GET_ME` (20), `GET_CLIENT` (21) and `GET_CLIENTS` (22): the client request, the client
//! records with and without their consumer groups, and the transport byte. `GET_ME` and
//! `GET_CLIENTS` send an empty request ([`crate::commands::Empty`]).

use alloc::string::String;
use alloc::vec::Vec;

use super::wire::{decode_counted, decode_enum, decode_text, encode_counted};
#[cfg(test)]
use super::wire::{small_vec, text_strategy};
use crate::codec::{Codec, Reader, Writer};
use crate::commands::{decode_concatenated, encode_concatenated};
use crate::error::DecodeError;

/// Consumer groups one client may be listed in.
pub const CLIENT_GROUPS_MAX: usize = 100_000;

/// How a client reaches the server (TLS variants report their base transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum Transport {
    Tcp,
    Quic,
    Http,
    WebSocket,
}

impl Transport {
    pub const fn as_u8(self) -> u8 {
        match self {
            Self::Tcp => 1,
            Self::Quic => 2,
            Self::Http => 3,
            Self::WebSocket => 4,
        }
    }

    pub const fn from_u8(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Tcp),
            2 => Some(Self::Quic),
            3 => Some(Self::Http),
            4 => Some(Self::WebSocket),
            _ => None,
        }
    }
}

/// `GET_CLIENT` (21) request: `[client_id:u32]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct GetClient {
    pub client_id: u32,
}

impl Codec<'_> for GetClient {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.client_id);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let client_id = reader.u32("get_client.client_id")?;
        Ok(Self { client_id })
    }
}

/// A consumer group a client belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClientGroup {
    pub stream_id: u32,
    pub topic_id: u32,
    pub group_id: u32,
}

impl Codec<'_> for ClientGroup {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.stream_id);
        writer.u32(self.topic_id);
        writer.u32(self.group_id);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: reader.u32("client_group.stream_id")?,
            topic_id: reader.u32("client_group.topic_id")?,
            group_id: reader.u32("client_group.group_id")?,
        })
    }
}

/// One `GET_CLIENTS` (22) record: the client without its group entries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClientInfo {
    pub client_id: u32,
    /// [`ClientInfo::USER_ID_UNAUTHENTICATED`] before login.
    pub user_id: u32,
    pub transport: Transport,
    /// `ip:port` of the peer.
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub address: String,
    pub consumer_groups_count: u32,
}

impl ClientInfo {
    pub const USER_ID_UNAUTHENTICATED: u32 = u32::MAX;
}

impl Codec<'_> for ClientInfo {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_client_head(
            self.client_id,
            self.user_id,
            self.transport,
            &self.address,
            writer,
        );
        writer.u32(self.consumer_groups_count);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client_id: reader.u32("client.client_id")?,
            user_id: reader.u32("client.user_id")?,
            transport: decode_enum(reader, "client.transport", Transport::from_u8)?,
            address: decode_text(reader, "client.address")?,
            consumer_groups_count: reader.u32("client.consumer_groups_count")?,
        })
    }
}

/// `GET_CLIENT` (21) and `GET_ME` (20) reply: the client with its groups. An empty
/// `GET_CLIENT` body (not found) is `None` at the call site.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct ClientDetails {
    pub client_id: u32,
    pub user_id: u32,
    pub transport: Transport,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub address: String,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub consumer_groups: Vec<ClientGroup>,
}

impl Codec<'_> for ClientDetails {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_client_head(
            self.client_id,
            self.user_id,
            self.transport,
            &self.address,
            writer,
        );
        encode_counted(&self.consumer_groups, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            client_id: reader.u32("client.client_id")?,
            user_id: reader.u32("client.user_id")?,
            transport: decode_enum(reader, "client.transport", Transport::from_u8)?,
            address: decode_text(reader, "client.address")?,
            consumer_groups: decode_counted(
                reader,
                CLIENT_GROUPS_MAX,
                12,
                "client.consumer_groups_count",
            )?,
        })
    }
}

/// `GET_CLIENTS` (22) reply: concatenated records, no count prefix; empty = no clients.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Clients(#[cfg_attr(test, proptest(strategy = "small_vec()"))] pub Vec<ClientInfo>);

impl<'a> Codec<'a> for Clients {
    fn encode(&self, writer: &mut Writer<'_>) {
        encode_concatenated(&self.0, writer);
    }

    fn decode(reader: &mut Reader<'a>) -> Result<Self, DecodeError> {
        decode_concatenated(reader).map(Self)
    }
}

fn encode_client_head(
    client_id: u32,
    user_id: u32,
    transport: Transport,
    address: &str,
    writer: &mut Writer<'_>,
) {
    writer.u32(client_id);
    writer.u32(user_id);
    writer.u8(transport.as_u8());
    writer.bytes_u32(address.as_bytes());
}

#[cfg(test)]
#[path = "clients_tests.rs"]
mod tests;
