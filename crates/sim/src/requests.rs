//! Request bodies the simulated clients send, built with `proto`'s codecs as an SDK builds
//! them, and what each request was for (so its answer can be checked).

use proto::batch::{OutgoingMessage, Producer, encode_batch};
use proto::codec::{Codec, Writer};
use proto::codes::CommandCode;
use proto::commands::groups::JoinConsumerGroup;
use proto::commands::messages::{PollMessagesDeferred, REQUEST_TIMEOUT_MARGIN_US};
use proto::commands::offsets::{GetConsumerOffset, OffsetSelector, StoreConsumerOffset};
use proto::commands::poll_selector::PollSelector;
use proto::header::PartitionContext;
use proto::primitives::{
    AckLevel, Consumer, ConsumerKind, Identifier, OptionalPartition, Partitioning, PollingStrategy,
};

use crate::model::{Place, payload_of};
use crate::wire::{DIALECT, Frame, Numbering};

/// The stream every fixed topic lives in.
pub const STREAM_ID: u32 = 0;

/// Whose offsets a poll or a store is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConsumerKey {
    /// A plain consumer with this numeric id.
    Plain(u32),
    /// The consumer group of topic `.0` with id `.1`.
    Group(u32, u32),
}

impl ConsumerKey {
    pub fn wire(self) -> Consumer {
        match self {
            Self::Plain(id) => Consumer {
                kind: ConsumerKind::Consumer,
                id: Identifier::Numeric(id),
            },
            Self::Group(_, group_id) => Consumer {
                kind: ConsumerKind::ConsumerGroup,
                id: Identifier::Numeric(group_id),
            },
        }
    }
}

/// What a request in flight was for.
#[derive(Debug, Clone)]
pub enum Intent {
    Login,
    Send {
        place: Place,
        ids: Vec<u128>,
        producer: Option<Producer>,
        /// The base offset the first acknowledgement of this very batch gave (a retry).
        retry_of: Option<u64>,
    },
    Poll {
        topic_id: u32,
        /// `None`: the server picks (a group member's poll).
        partition_id: Option<u32>,
        consumer: ConsumerKey,
        strategy: PollingStrategy,
        auto_commit: bool,
        /// The consumer's acknowledged stored offsets by partition when the poll was sent:
        /// a `next` poll must return only offsets past them.
        stored_before: Vec<(u32, u64)>,
    },
    Store {
        consumer: ConsumerKey,
        place: Place,
        offset: u64,
    },
    Join(u32),
    Leave(u32),
    Sync(u32),
    /// A metadata change whose outcome only the shards' agreement checks.
    Admin(&'static str),
    /// A vandal's frame: any answer will do, as long as the others see nothing of it.
    Garbage,
}

/// A send of messages `ids` to `place`, as an idempotent producer when `producer` is set.
pub fn send(
    numbering: &mut Numbering,
    place: Place,
    ids: &[u128],
    producer: Option<Producer>,
    now_us: u64,
) -> Frame {
    let payloads: Vec<Vec<u8>> = ids.iter().map(|id| payload_of(*id)).collect();
    let messages: Vec<OutgoingMessage<'_>> = ids
        .iter()
        .zip(&payloads)
        .map(|(id, payload)| OutgoingMessage {
            id: *id,
            origin_timestamp: now_us,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut batch = Vec::new();
    encode_batch(&messages, producer, &mut batch).expect("the simulator's batches are valid");
    let mut body = Vec::with_capacity(batch.len() + 64);
    let mut writer = Writer::new(&mut body, DIALECT);
    writer.u32(0);
    Identifier::Numeric(STREAM_ID).encode(&mut writer);
    Identifier::Numeric(place.topic_id).encode(&mut writer);
    Partitioning::PartitionId(place.partition_id).encode(&mut writer);
    writer.u32(u32::try_from(ids.len()).unwrap_or(u32::MAX));
    let metadata_length = u32::try_from(writer.len() - 4).unwrap_or(0);
    writer.patch_u32(0, metadata_length);
    writer.bytes(&batch);
    numbering.call(CommandCode::SendMessages, body, PartitionContext::default())
}

/// What one poll asks for.
#[derive(Debug, Clone, Copy)]
pub struct PollAsk {
    pub consumer: ConsumerKey,
    pub topic_id: u32,
    pub partition_id: Option<u32>,
    pub strategy: PollingStrategy,
    pub count: u32,
    pub auto_commit: bool,
    /// The group generation the member last synced (0 for plain consumers).
    pub generation: u64,
    /// A deferred poll (106) waits up to this long for `min_count` messages; 0 polls at once.
    pub wait_us: u64,
    pub min_count: u32,
}

/// A poll of up to `ask.count` messages.
pub fn poll(numbering: &mut Numbering, ask: PollAsk) -> Frame {
    let PollAsk {
        consumer,
        topic_id,
        partition_id,
        strategy,
        count,
        auto_commit,
        generation,
        wait_us,
        min_count,
    } = ask;
    let selector = PollSelector {
        consumer: consumer.wire(),
        stream_id: Identifier::Numeric(STREAM_ID),
        topic_id: Identifier::Numeric(topic_id),
        partition: OptionalPartition(partition_id),
        strategy,
        count,
        auto_commit,
    };
    let mut body = Vec::new();
    let code = if wait_us == 0 {
        selector.encode(&mut Writer::new(&mut body, DIALECT));
        CommandCode::PollMessages
    } else {
        let deferred = PollMessagesDeferred {
            selector,
            wait_us,
            min_count: min_count.clamp(1, count),
            max_bytes: 1 << 20,
            request_timeout_us: wait_us + REQUEST_TIMEOUT_MARGIN_US,
        };
        deferred.encode(&mut Writer::new(&mut body, DIALECT));
        CommandCode::PollMessagesDeferred
    };
    let context = PartitionContext {
        owner_generation: generation,
        ..PartitionContext::default()
    };
    numbering.call(code, body, context)
}

fn selector(consumer: ConsumerKey, place: Place) -> OffsetSelector {
    OffsetSelector {
        consumer: consumer.wire(),
        stream_id: Identifier::Numeric(STREAM_ID),
        topic_id: Identifier::Numeric(place.topic_id),
        partition: OptionalPartition(Some(place.partition_id)),
    }
}

pub fn store_offset(
    numbering: &mut Numbering,
    consumer: ConsumerKey,
    place: Place,
    offset: u64,
) -> Frame {
    let store = StoreConsumerOffset {
        selector: selector(consumer, place),
        offset,
        ack: AckLevel::Quorum,
    };
    numbering.encode(CommandCode::StoreConsumerOffset, &store)
}

pub fn get_offset(numbering: &mut Numbering, consumer: ConsumerKey, place: Place) -> Frame {
    let get = GetConsumerOffset {
        selector: selector(consumer, place),
    };
    numbering.encode(CommandCode::GetConsumerOffset, &get)
}

/// A group request (join, leave, sync) for the group of `topic_id`.
pub fn group(numbering: &mut Numbering, code: CommandCode, topic_id: u32, group_id: u32) -> Frame {
    let body = JoinConsumerGroup {
        stream_id: Identifier::Numeric(STREAM_ID),
        topic_id: Identifier::Numeric(topic_id),
        group_id: Identifier::Numeric(group_id),
    };
    numbering.encode(code, &body)
}
