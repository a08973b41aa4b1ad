//! Cluster mode as the shard sees it: the roster, the replica's live status, and the ops that
//! are replicated before they are applied.
//!
//! One consensus group per cluster orders every change the shard replicates — metadata ops
//! and message appends ([`ReplicatedOp`]) — so its primary is the primary of metadata and of
//! every partition. The primary's sequencer and send path turn a change into an op and
//! [`Replication::submit`] it; the replica driver (in the binary, over `crates/vsr`) prepares
//! it, and once a quorum has written it every node applies it in op order through
//! [`Server::apply_replicated`]. Apply is deterministic: the op carries everything decided at
//! the primary (the partition chosen, the append time), and the same ops in the same order
//! give every node the same metadata, offsets and producer state.
//!
//! Sessions, stored consumer offsets, purges and `DELETE_SEGMENTS` are ops too. What is not
//! replicated (so it lives on the primary alone and is lost when it moves) is consumer-group
//! membership; retention runs on each node by its own clock. A node that is not the primary
//! refuses what it cannot serve with [`Replication::refusal`], so clients go to the primary.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};

use proto::batch::Producer;
use proto::commands::Request;
use proto::commands::messages::SendConfirmations;

use segment::offsets::OffsetOwner;

use crate::data::PartitionKey;
use crate::metadata::MetadataOp;
use crate::metadata::op_codec::{decode_op, encode_op};
use crate::retries::Origin;

/// The cluster as `GET_CLUSTER_METADATA` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roster {
    pub cluster_name: String,
    /// This node's `replica_id`.
    pub replica_id: u8,
    /// Every node, this one included, by replica id.
    pub nodes: Vec<RosterNode>,
}

impl Roster {
    /// A one-node roster (outside cluster mode): replica 0, ports filled in from the
    /// listeners the server bound ([`crate::server::ServerInfo`]).
    pub fn one_node(cluster_name: &str, node_name: &str, ip: &str) -> Self {
        Self {
            cluster_name: cluster_name.to_owned(),
            replica_id: 0,
            nodes: vec![RosterNode {
                replica_id: 0,
                name: node_name.to_owned(),
                ip: ip.to_owned(),
                tcp_port: 0,
                quic_port: 0,
                http_port: 0,
                websocket_port: 0,
            }],
        }
    }
}

/// One roster entry: what a client dials. A port of 0: the node does not serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RosterNode {
    pub replica_id: u8,
    pub name: String,
    pub ip: String,
    pub tcp_port: u16,
    pub quic_port: u16,
    pub http_port: u16,
    pub websocket_port: u16,
}

/// The replica's state as the driver last published it; read by any request.
#[derive(Debug, Default)]
pub struct ClusterStatus {
    view: AtomicU32,
    primary: AtomicU8,
    /// In normal operation (not between views, not recovering).
    normal: AtomicBool,
    /// Peers this node has a live connection to, one bit per replica id.
    reachable: AtomicU16,
    /// Normal, and every op it knows committed is applied: its state is the cluster's.
    caught_up: AtomicBool,
    /// The replica log's highest op, its commit and how far this node applied it.
    op: AtomicU64,
    commit: AtomicU64,
    applied: AtomicU64,
    /// On the primary: the highest op each replica acknowledged in this view.
    acked: [AtomicU64; 16],
}

/// Where a replica's log stands, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogProgress {
    pub op: u64,
    pub commit: u64,
    pub applied: u64,
}

impl ClusterStatus {
    /// Publishes the replica's view, its primary, whether it is normal, and the peers it
    /// reaches.
    pub fn publish(&self, view: u32, primary: u8, normal: bool, reachable: u16, caught_up: bool) {
        self.caught_up.store(normal && caught_up, Ordering::Relaxed);
        self.view.store(view, Ordering::Relaxed);
        self.primary.store(primary, Ordering::Relaxed);
        self.normal.store(normal, Ordering::Relaxed);
        self.reachable.store(reachable, Ordering::Relaxed);
    }

    /// Publishes where the log stands and, on the primary, each replica's acknowledged op.
    pub fn publish_progress(&self, progress: LogProgress, acked: impl Fn(u8) -> u64) {
        self.op.store(progress.op, Ordering::Relaxed);
        self.commit.store(progress.commit, Ordering::Relaxed);
        self.applied.store(progress.applied, Ordering::Relaxed);
        for (replica, slot) in (0..=u8::MAX).zip(&self.acked) {
            slot.store(acked(replica), Ordering::Relaxed);
        }
    }

    pub fn progress(&self) -> LogProgress {
        LogProgress {
            op: self.op.load(Ordering::Relaxed),
            commit: self.commit.load(Ordering::Relaxed),
            applied: self.applied.load(Ordering::Relaxed),
        }
    }

    /// On the primary: the highest op `replica` acknowledged in this view.
    pub fn acked(&self, replica: u8) -> u64 {
        self.acked
            .get(usize::from(replica))
            .map_or(0, |slot| slot.load(Ordering::Relaxed))
    }

    pub fn view(&self) -> u32 {
        self.view.load(Ordering::Relaxed)
    }

    /// The primary of the current view.
    pub fn primary(&self) -> u8 {
        self.primary.load(Ordering::Relaxed)
    }

    pub fn is_normal(&self) -> bool {
        self.normal.load(Ordering::Relaxed)
    }

    /// Normal and applied up to the commit it knows (a restarted node replaying is not).
    pub fn is_caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Relaxed)
    }

    pub fn reaches(&self, replica: u8) -> bool {
        replica < 16 && self.reachable.load(Ordering::Relaxed) & (1 << replica) != 0
    }
}

/// Whether only the primary serves `request` in cluster mode: `Some(true)` for the
/// partition plane (messages and offsets), `Some(false)` for what lives only on the primary
/// (consumer groups) or that the primary turns into an op (purges, segment deletion), `None`
/// for what any node answers from its replicated state
/// (metadata reads, sessions, routes, the roster). Metadata writes are refused at
/// `Replication::submit`.
pub fn primary_only(request: &Request<'_>) -> Option<bool> {
    match request {
        Request::SendMessages(_)
        | Request::PollMessages(_)
        | Request::PollMessagesDeferred(_)
        | Request::PollMessagesOnPrimary(_)
        | Request::FetchMessages(_)
        | Request::FlushUnsavedBuffer(_)
        | Request::GetConsumerOffset(_)
        | Request::StoreConsumerOffset(_)
        | Request::DeleteConsumerOffset(_) => Some(true),
        Request::GetConsumerGroup(_)
        | Request::GetConsumerGroups(_)
        | Request::JoinConsumerGroup(_)
        | Request::LeaveConsumerGroup(_)
        | Request::SyncConsumerGroup(_)
        | Request::PurgeStream(_)
        | Request::PurgeTopic(_)
        | Request::DeleteSegments(_) => Some(false),
        _ => None,
    }
}

/// A change replicated before it is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicatedOp {
    Metadata(MetadataOp),
    /// A metadata change with the SDK identity of the request that asked for it, by which
    /// a retry is answered rather than applied again (`crate::retries`).
    MetadataFrom {
        op: MetadataOp,
        origin: Origin,
    },
    /// A batch record appended to a partition at `now_us`, with the producer section the
    /// primary read from it (dedupe runs at apply, on every node alike), and the SDK
    /// identity of the send, by which a retry of it is answered rather than applied again
    /// (`crate::retries`).
    Append {
        key: PartitionKey,
        now_us: u64,
        producer: Option<(Producer, u32)>,
        origin: Option<Origin>,
        batch: Vec<u8>,
    },
    /// A consumer's or group's offset stored (`forward_only`: a group's auto-commit, which
    /// never moves it back).
    StoreOffset {
        key: PartitionKey,
        owner: OffsetOwner,
        offset: u64,
        forward_only: bool,
    },
    DeleteOffset {
        key: PartitionKey,
        owner: OffsetOwner,
    },
    /// Every message, stored offset and producer of a stream's partitions, or of one
    /// topic's (`PURGE_STREAM`, `PURGE_TOPIC`), with the SDK identity of the request, by which
    /// a retry is answered rather than applied again (`crate::retries`).
    Purge {
        stream_id: u32,
        topic_id: Option<u32>,
        origin: Option<Origin>,
    },
    /// `DELETE_SEGMENTS` as the primary resolved it: every sealed segment of the partition
    /// that ends at or before `below` goes. An offset rather than a count: a node whose
    /// retention already took some of the oldest segments still deletes no message at or
    /// after the cut.
    DeleteSegments {
        key: PartitionKey,
        below: u64,
        origin: Option<Origin>,
    },
    /// A login: the session of `client_id` on every node, numbered by the op that
    /// registered it (so `BIND_SESSION` works on any node).
    Register {
        client_id: u128,
        user_id: u32,
        bind_secret: [u8; 32],
        token: Option<[u8; 32]>,
    },
}

const KIND_METADATA: u8 = 1;
const KIND_APPEND: u8 = 2;
const KIND_STORE_OFFSET: u8 = 3;
const KIND_DELETE_OFFSET: u8 = 4;
const KIND_REGISTER: u8 = 5;
/// An append with its origin: [`KIND_APPEND`]'s layout after the kind, then the origin's
/// client (16 bytes) and request (8) before the batch. Logs written before origins keep
/// decoding as [`KIND_APPEND`].
const KIND_APPEND_FROM: u8 = 6;
const ORIGIN_SIZE: usize = 16 + 8;
/// A metadata change with its origin: the kind, the origin's client (16 bytes) and request
/// (8), then the op as [`KIND_METADATA`] holds it.
const KIND_METADATA_FROM: u8 = 7;
/// Kind, stream, topic flag, topic, then the origin (flag, client, request).
const KIND_PURGE: u8 = 8;
const PURGE_SIZE: usize = 1 + 4 + 1 + 4 + OPTIONAL_ORIGIN_SIZE;
/// Kind, partition key, the offset below which sealed segments go, then the origin.
const KIND_DELETE_SEGMENTS: u8 = 9;
const DELETE_SEGMENTS_SIZE: usize = 1 + 12 + 8 + OPTIONAL_ORIGIN_SIZE;
/// An origin that may be absent: a flag, then the client and request (zeros when absent).
const OPTIONAL_ORIGIN_SIZE: usize = 1 + ORIGIN_SIZE;
/// Kind, client id, user id, bind secret, token flag, token.
const REGISTER_SIZE: usize = 1 + 16 + 4 + 32 + 1 + 32;
/// Kind, partition key, owner kind and id; then a store's offset and direction.
const OFFSET_FIXED: usize = 1 + 12 + 1 + 4;
/// An append's fixed part: kind, stream, topic, partition, time, producer flag, producer id,
/// epoch, base sequence, message count.
const APPEND_FIXED: usize = 1 + 4 + 4 + 4 + 8 + 1 + 8 + 2 + 4 + 4;

/// Bytes that are no [`ReplicatedOp`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a replicated op: {0}")]
pub struct OpDecodeError(&'static str);

impl ReplicatedOp {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::Metadata(op) => {
                let mut bytes = vec![KIND_METADATA];
                bytes.extend_from_slice(&encode_op(op));
                bytes
            }
            Self::MetadataFrom { op, origin } => {
                let mut bytes = vec![KIND_METADATA_FROM];
                bytes.extend_from_slice(&origin.client.to_le_bytes());
                bytes.extend_from_slice(&origin.request.to_le_bytes());
                bytes.extend_from_slice(&encode_op(op));
                bytes
            }
            Self::Append {
                key,
                now_us,
                producer,
                origin,
                batch,
            } => AppendRef {
                key: *key,
                now_us: *now_us,
                producer: *producer,
                origin: *origin,
                batch,
            }
            .op_bytes(),
            Self::StoreOffset {
                key,
                owner,
                offset,
                forward_only,
            } => {
                let mut bytes = offset_prefix(KIND_STORE_OFFSET, *key, *owner);
                bytes.extend_from_slice(&offset.to_le_bytes());
                bytes.push(u8::from(*forward_only));
                bytes
            }
            Self::DeleteOffset { key, owner } => offset_prefix(KIND_DELETE_OFFSET, *key, *owner),
            Self::Purge {
                stream_id,
                topic_id,
                origin,
            } => {
                let mut bytes = Vec::with_capacity(PURGE_SIZE);
                bytes.push(KIND_PURGE);
                bytes.extend_from_slice(&stream_id.to_le_bytes());
                bytes.push(u8::from(topic_id.is_some()));
                bytes.extend_from_slice(&topic_id.unwrap_or(0).to_le_bytes());
                push_optional_origin(&mut bytes, *origin);
                bytes
            }
            Self::DeleteSegments { key, below, origin } => {
                let mut bytes = Vec::with_capacity(DELETE_SEGMENTS_SIZE);
                bytes.push(KIND_DELETE_SEGMENTS);
                push_key(&mut bytes, *key);
                bytes.extend_from_slice(&below.to_le_bytes());
                push_optional_origin(&mut bytes, *origin);
                bytes
            }
            Self::Register {
                client_id,
                user_id,
                bind_secret,
                token,
            } => encode_register(*client_id, *user_id, bind_secret, *token),
        }
    }

    /// Total: any bytes give an op or an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, OpDecodeError> {
        match bytes.split_first() {
            Some((&KIND_METADATA, rest)) => decode_op(rest)
                .map(Self::Metadata)
                .map_err(|_undecodable| OpDecodeError("metadata op")),
            Some((&KIND_METADATA_FROM, rest)) => decode_metadata_from(rest),
            Some((&(KIND_APPEND | KIND_APPEND_FROM), _)) if bytes.len() > APPEND_FIXED => {
                decode_append(bytes)
            }
            Some((&KIND_STORE_OFFSET, _)) if bytes.len() == OFFSET_FIXED + 9 => {
                let mut reader = Fields(&bytes[1..]);
                let (key, owner) = reader.offset_target()?;
                let offset = reader.u64();
                let forward_only = match reader.u8() {
                    0 => false,
                    1 => true,
                    _ => return Err(OpDecodeError("offset direction")),
                };
                Ok(Self::StoreOffset {
                    key,
                    owner,
                    offset,
                    forward_only,
                })
            }
            Some((&KIND_DELETE_OFFSET, _)) if bytes.len() == OFFSET_FIXED => {
                let (key, owner) = Fields(&bytes[1..]).offset_target()?;
                Ok(Self::DeleteOffset { key, owner })
            }
            Some((&KIND_REGISTER, _)) if bytes.len() == REGISTER_SIZE => decode_register(bytes),
            Some((&KIND_PURGE, _)) if bytes.len() == PURGE_SIZE => decode_purge(bytes),
            Some((&KIND_DELETE_SEGMENTS, _)) if bytes.len() == DELETE_SEGMENTS_SIZE => {
                let mut reader = Fields(&bytes[1..]);
                let key = reader.partition_key();
                let below = reader.u64();
                let origin = reader.optional_origin()?;
                Ok(Self::DeleteSegments { key, below, origin })
            }
            _ => Err(OpDecodeError("kind or length")),
        }
    }
}

/// An append as [`ReplicatedOp::Append`] holds it, its batch borrowed: what a send submits
/// (`Replication::submit_append`), encoded straight into the entry body without a copy of
/// the batch of its own.
#[derive(Debug, Clone, Copy)]
pub struct AppendRef<'a> {
    pub key: PartitionKey,
    pub now_us: u64,
    pub producer: Option<(Producer, u32)>,
    pub origin: Option<Origin>,
    pub batch: &'a [u8],
}

impl AppendRef<'_> {
    /// The bytes of the op alone.
    fn op_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(APPEND_FIXED + ORIGIN_SIZE + self.batch.len());
        encode_append(*self, &mut bytes);
        bytes
    }

    /// The entry body of this append: the sync flag, then the op's bytes, in one allocation.
    pub fn entry_body(&self, sync: bool) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(1 + APPEND_FIXED + ORIGIN_SIZE + self.batch.len());
        bytes.push(u8::from(sync));
        encode_append(*self, &mut bytes);
        bytes
    }
}

/// Appends the bytes of a [`ReplicatedOp::Append`] ([`KIND_APPEND_FROM`] when it has an
/// origin) to `bytes`.
fn encode_append(append: AppendRef<'_>, bytes: &mut Vec<u8>) {
    let AppendRef {
        key,
        now_us,
        producer,
        origin,
        batch,
    } = append;
    bytes.push(if origin.is_some() {
        KIND_APPEND_FROM
    } else {
        KIND_APPEND
    });
    push_key(bytes, key);
    bytes.extend_from_slice(&now_us.to_le_bytes());
    let (section, count) = producer.map_or(
        (
            Producer {
                producer_id: 0,
                epoch: 0,
                base_sequence: 0,
            },
            0,
        ),
        |producer| producer,
    );
    bytes.push(u8::from(producer.is_some()));
    bytes.extend_from_slice(&section.producer_id.to_le_bytes());
    bytes.extend_from_slice(&section.epoch.to_le_bytes());
    bytes.extend_from_slice(&section.base_sequence.to_le_bytes());
    bytes.extend_from_slice(&count.to_le_bytes());
    if let Some(origin) = origin {
        bytes.extend_from_slice(&origin.client.to_le_bytes());
        bytes.extend_from_slice(&origin.request.to_le_bytes());
    }
    bytes.extend_from_slice(batch);
}

/// A [`ReplicatedOp::Append`] of more than [`APPEND_FIXED`] bytes, with its origin when the
/// kind is [`KIND_APPEND_FROM`].
fn decode_append(bytes: &[u8]) -> Result<ReplicatedOp, OpDecodeError> {
    let mut reader = Fields(&bytes[1..]);
    let key = reader.partition_key();
    let now_us = reader.u64();
    let flag = reader.u8();
    let section = Producer {
        producer_id: reader.u64(),
        epoch: reader.u16(),
        base_sequence: reader.u32(),
    };
    let count = reader.u32();
    let producer = match flag {
        0 => None,
        1 => Some((section, count)),
        _ => return Err(OpDecodeError("producer flag")),
    };
    let (origin, batch_at) = if bytes[0] == KIND_APPEND_FROM {
        if bytes.len() <= APPEND_FIXED + ORIGIN_SIZE {
            return Err(OpDecodeError("append origin"));
        }
        let client = u128::from_le_bytes(reader.take());
        let request = u64::from_le_bytes(reader.take());
        let origin = Origin::of(client, request).ok_or(OpDecodeError("origin"))?;
        (Some(origin), APPEND_FIXED + ORIGIN_SIZE)
    } else {
        (None, APPEND_FIXED)
    };
    Ok(ReplicatedOp::Append {
        key,
        now_us,
        producer,
        origin,
        batch: bytes[batch_at..].to_vec(),
    })
}

/// A [`ReplicatedOp::Purge`] of exactly [`PURGE_SIZE`] bytes.
fn decode_purge(bytes: &[u8]) -> Result<ReplicatedOp, OpDecodeError> {
    let mut reader = Fields(&bytes[1..]);
    let stream_id = reader.u32();
    let topic_id = match (reader.u8(), reader.u32()) {
        (0, 0) => None,
        (1, topic_id) => Some(topic_id),
        _ => return Err(OpDecodeError("purge topic flag")),
    };
    let origin = reader.optional_origin()?;
    Ok(ReplicatedOp::Purge {
        stream_id,
        topic_id,
        origin,
    })
}

/// The bytes of a [`ReplicatedOp::Register`].
fn encode_register(
    client_id: u128,
    user_id: u32,
    bind_secret: &[u8; 32],
    token: Option<[u8; 32]>,
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(REGISTER_SIZE);
    bytes.push(KIND_REGISTER);
    bytes.extend_from_slice(&client_id.to_le_bytes());
    bytes.extend_from_slice(&user_id.to_le_bytes());
    bytes.extend_from_slice(bind_secret);
    bytes.push(u8::from(token.is_some()));
    bytes.extend_from_slice(&token.unwrap_or([0; 32]));
    bytes
}

/// A [`ReplicatedOp::Register`] of exactly [`REGISTER_SIZE`] bytes.
fn decode_register(bytes: &[u8]) -> Result<ReplicatedOp, OpDecodeError> {
    let mut reader = Fields(&bytes[1..]);
    let client_id = u128::from_le_bytes(reader.take());
    let user_id = reader.u32();
    let bind_secret = reader.take::<32>();
    let flag = reader.u8();
    let token = reader.take::<32>();
    let token = match flag {
        0 if token == [0; 32] => None,
        1 => Some(token),
        _ => return Err(OpDecodeError("token flag")),
    };
    Ok(ReplicatedOp::Register {
        client_id,
        user_id,
        bind_secret,
        token,
    })
}

fn offset_prefix(kind: u8, key: PartitionKey, owner: OffsetOwner) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(OFFSET_FIXED + 9);
    bytes.push(kind);
    push_key(&mut bytes, key);
    let (kind, id) = match owner {
        OffsetOwner::Consumer(id) => (0u8, id),
        OffsetOwner::Group(id) => (1, id),
    };
    bytes.push(kind);
    bytes.extend_from_slice(&id.to_le_bytes());
    bytes
}

/// An origin that may be absent: a flag, then its client and request (zeros when absent).
fn push_optional_origin(bytes: &mut Vec<u8>, origin: Option<Origin>) {
    bytes.push(u8::from(origin.is_some()));
    let (client, request) = origin.map_or((0, 0), |origin| (origin.client, origin.request));
    bytes.extend_from_slice(&client.to_le_bytes());
    bytes.extend_from_slice(&request.to_le_bytes());
}

/// A partition key's three ids, little-endian.
fn push_key(bytes: &mut Vec<u8>, key: PartitionKey) {
    bytes.extend_from_slice(&key.stream_id.to_le_bytes());
    bytes.extend_from_slice(&key.topic_id.to_le_bytes());
    bytes.extend_from_slice(&key.partition_id.to_le_bytes());
}

/// Little-endian fields read in order from a slice whose length the caller checked.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut field = [0u8; N];
        if let Some((head, rest)) = self.0.split_at_checked(N) {
            field.copy_from_slice(head);
            self.0 = rest;
        }
        field
    }

    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    /// An origin that may be absent: flag 0 and zeros, or flag 1 and a valid origin.
    fn optional_origin(&mut self) -> Result<Option<Origin>, OpDecodeError> {
        let flag = self.u8();
        let client = u128::from_le_bytes(self.take());
        let request = u64::from_le_bytes(self.take());
        match (flag, Origin::of(client, request)) {
            (0, None) if client == 0 && request == 0 => Ok(None),
            (1, Some(origin)) => Ok(Some(origin)),
            _ => Err(OpDecodeError("origin flag")),
        }
    }

    fn partition_key(&mut self) -> PartitionKey {
        PartitionKey {
            stream_id: self.u32(),
            topic_id: self.u32(),
            partition_id: self.u32(),
        }
    }

    fn offset_target(&mut self) -> Result<(PartitionKey, OffsetOwner), OpDecodeError> {
        let key = self.partition_key();
        let owner = match (self.u8(), self.u32()) {
            (0, id) => OffsetOwner::Consumer(id),
            (1, id) => OffsetOwner::Group(id),
            _ => return Err(OpDecodeError("offset owner")),
        };
        Ok((key, owner))
    }
}

/// [`KIND_METADATA_FROM`]'s bytes after the kind: the origin, then the op.
fn decode_metadata_from(rest: &[u8]) -> Result<ReplicatedOp, OpDecodeError> {
    if rest.len() <= ORIGIN_SIZE {
        return Err(OpDecodeError("metadata origin"));
    }
    let mut reader = Fields(rest);
    let client = u128::from_le_bytes(reader.take());
    let request = u64::from_le_bytes(reader.take());
    let origin = Origin::of(client, request).ok_or(OpDecodeError("origin"))?;
    let op =
        decode_op(&rest[ORIGIN_SIZE..]).map_err(|_undecodable| OpDecodeError("metadata op"))?;
    Ok(ReplicatedOp::MetadataFrom { op, origin })
}

/// A committed op this node could not apply for a reason of its own (its disk failed, a
/// partition did not open here), not one every node shares. Its state is no longer the
/// others': going on, it would vote and acknowledge as if it held the op and, as primary,
/// serve without it and hand its offsets out again. The replica driver stops the node; its
/// restart replays the log and stops again until the fault is mended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("committed op {op} could not be applied on this node: {cause}")]
pub struct LocalFault {
    pub op: u64,
    pub cause: String,
}

/// What applying an op gave, for the request that submitted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The metadata commit number after the op.
    Metadata { commit: u64 },
    /// A batch appended, and the op that appended it (the committed-result marker's).
    Appended(SendConfirmations, u64),
    /// An offset stored, or deleted (`false`: there was none to delete), and the op that did
    /// it (the committed-result marker's).
    Offset(bool, u64),
    /// The session a login registered.
    Session(u64),
    /// A purge or a segment deletion done, and the op that did it (the committed-result
    /// marker's).
    Truncated(u64),
}

/// A replicated entry's body: whether it must be synced before it is acknowledged, then
/// the op's bytes. `None` for a body too short or with another first byte.
pub fn entry_body(body: &[u8]) -> Option<(bool, &[u8])> {
    match body.split_first()? {
        (0, op) => Some((false, op)),
        (1, op) => Some((true, op)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{PartitionKey, Producer, ReplicatedOp};
    use crate::metadata::MetadataOp;

    #[test]
    fn ops_round_trip() {
        let ops = [
            ReplicatedOp::Metadata(MetadataOp::DeleteStream { id: 4 }),
            ReplicatedOp::MetadataFrom {
                op: MetadataOp::DeleteStream { id: 5 },
                origin: crate::retries::Origin::of(u128::MAX, 7).unwrap(),
            },
            ReplicatedOp::Append {
                key: PartitionKey {
                    stream_id: 1,
                    topic_id: 2,
                    partition_id: 3,
                },
                now_us: 99,
                producer: Some((
                    Producer {
                        producer_id: 7,
                        epoch: 2,
                        base_sequence: 40,
                    },
                    10,
                )),
                origin: crate::retries::Origin::of(0xfeed, 12),
                batch: vec![5; 300],
            },
            ReplicatedOp::Append {
                key: PartitionKey {
                    stream_id: 1,
                    topic_id: 1,
                    partition_id: 1,
                },
                now_us: 1,
                producer: None,
                origin: None,
                batch: vec![1],
            },
            ReplicatedOp::StoreOffset {
                key: PartitionKey {
                    stream_id: 3,
                    topic_id: 2,
                    partition_id: 0,
                },
                owner: segment::offsets::OffsetOwner::Group(9),
                offset: 1 << 40,
                forward_only: true,
            },
            ReplicatedOp::DeleteOffset {
                key: PartitionKey {
                    stream_id: 3,
                    topic_id: 2,
                    partition_id: 0,
                },
                owner: segment::offsets::OffsetOwner::Consumer(4),
            },
            ReplicatedOp::Register {
                client_id: u128::MAX - 3,
                user_id: 2,
                bind_secret: [9; 32],
                token: Some([4; 32]),
            },
            ReplicatedOp::Register {
                client_id: 1,
                user_id: 0,
                bind_secret: [0; 32],
                token: None,
            },
            ReplicatedOp::Purge {
                stream_id: 3,
                topic_id: None,
                origin: None,
            },
            ReplicatedOp::Purge {
                stream_id: u32::MAX,
                topic_id: Some(0),
                origin: crate::retries::Origin::of(9, 1),
            },
            ReplicatedOp::DeleteSegments {
                key: PartitionKey {
                    stream_id: 1,
                    topic_id: 2,
                    partition_id: 3,
                },
                below: u64::MAX - 1,
                origin: crate::retries::Origin::of(u128::MAX, u64::MAX),
            },
        ];
        for op in ops {
            assert_eq!(ReplicatedOp::decode(&op.encode()), Ok(op));
        }
    }

    /// An append encoded from its borrowed batch is the entry body of the op that owns it.
    #[test]
    fn a_borrowed_append_encodes_as_its_op() {
        let batch = vec![3u8; 500];
        let append = super::AppendRef {
            key: PartitionKey {
                stream_id: 4,
                topic_id: 5,
                partition_id: 6,
            },
            now_us: 77,
            producer: None,
            origin: crate::retries::Origin::of(8, 9),
            batch: &batch,
        };
        let op = ReplicatedOp::Append {
            key: append.key,
            now_us: append.now_us,
            producer: append.producer,
            origin: append.origin,
            batch: batch.clone(),
        };
        for sync in [false, true] {
            let mut expected = vec![u8::from(sync)];
            expected.extend_from_slice(&op.encode());
            assert_eq!(append.entry_body(sync), expected);
        }
    }

    /// A purge names a topic, and an origin, by a flag of 0 (none, and zeros) or 1: any other
    /// pair is refused, so every decoded purge encodes back to its bytes.
    #[test]
    fn a_purge_with_a_stray_topic_flag_or_topic_is_refused() {
        let mut bytes = ReplicatedOp::Purge {
            stream_id: 1,
            topic_id: None,
            origin: None,
        }
        .encode();
        assert!(ReplicatedOp::decode(&bytes).is_ok());
        bytes[5] = 2;
        assert!(ReplicatedOp::decode(&bytes).is_err());
        bytes[5] = 0;
        bytes[6] = 1;
        assert!(ReplicatedOp::decode(&bytes).is_err());
        bytes[6] = 0;
        bytes[10] = 1;
        assert!(
            ReplicatedOp::decode(&bytes).is_err(),
            "an origin flag with no origin"
        );
        bytes[10] = 0;
        bytes[11] = 1;
        assert!(
            ReplicatedOp::decode(&bytes).is_err(),
            "no origin flag, a client"
        );
    }

    proptest! {
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = ReplicatedOp::decode(&bytes);
        }
    }
}
