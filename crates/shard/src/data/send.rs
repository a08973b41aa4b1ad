//! `SEND_MESSAGES` (101, PROTOCOL.md §5): choosing the partition (Balanced round-robin per
//! topic, explicit id, or `xxh32(key) % partitions_count`), the send checks of §5.5, and the
//! append through the partition task, which applies idempotent-producer dedupe.

use proto::batch::Producer;
use proto::commands::messages::{Confirmation, SendConfirmations, SendMessages};
use proto::primitives::Partitioning;
use segment::log::{AppendError, ReadError};
use segment::partition::AppendBuffer;
use segment::storage::Storage;

use super::resolve::resolve_topic;
use super::{DataError, DataPlane, PartitionError, PartitionHandle, PartitionKey};
use crate::metadata::Metadata;
use crate::refusal::{Invalid, Limit, Missing, Refusal, StorageFault, Unavailable};

/// A send ready to run.
#[derive(Debug, Clone)]
pub struct SendPlan {
    pub key: PartitionKey,
    pub handle: PartitionHandle,
    /// The batch's producer section and message count, for dedupe.
    pub producer: Option<(Producer, u32)>,
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// Resolves a send: namespace, partition, stamped incarnation and the message checks.
    pub fn plan_send(
        &self,
        metadata: &Metadata,
        request: &SendMessages<'_>,
        stamped_incarnation: u64,
    ) -> Result<SendPlan, Refusal> {
        let (stream_id, topic) = resolve_topic(metadata, &request.stream_id, &request.topic_id)?;
        let batch = &request.batch;
        if batch.message_count() == 0 {
            return Err(Refusal::Invalid(Invalid::MessagesCount));
        }
        if batch.messages().any(|message| message.payload.is_empty()) {
            return Err(Refusal::Invalid(Invalid::PayloadLength));
        }
        let producer = batch.producer();
        if producer.is_some() && !matches!(request.partitioning, Partitioning::PartitionId(_)) {
            return Err(Refusal::Invalid(Invalid::ProducerPartitioning));
        }
        let partitions_count = u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX);
        let balanced = match request.partitioning {
            Partitioning::Balanced => self.next_balanced(stream_id, topic.id),
            _ => 0,
        };
        let chosen = request
            .partitioning
            .resolve(partitions_count, balanced)
            .ok_or(Refusal::Missing(Missing::Partition))?;
        let partition = match request.partitioning {
            Partitioning::PartitionId(_) => topic.partitions.get(&chosen),
            Partitioning::Balanced | Partitioning::MessagesKey(_) => {
                let index = usize::try_from(chosen).unwrap_or(usize::MAX);
                topic.partitions.values().nth(index)
            }
        }
        .ok_or(Refusal::Missing(Missing::Partition))?;
        if stamped_incarnation != 0 && stamped_incarnation != partition.incarnation {
            return Err(Refusal::Unavailable(Unavailable::History));
        }
        let key = PartitionKey {
            stream_id,
            topic_id: topic.id,
            partition_id: partition.id,
        };
        let handle = self
            .partition(key)
            .ok_or(Refusal::Missing(Missing::Partition))?;
        Ok(SendPlan {
            key,
            handle,
            producer: producer.map(|producer| (producer, batch.message_count())),
        })
    }

    /// Appends `batch` (the request's batch record, owned so the partition's task can stamp
    /// it: the body's pool block, or a copy) and returns the confirmation; under `Persisted`
    /// only after the fdatasync that covers it.
    pub async fn send(
        &self,
        plan: &SendPlan,
        batch: AppendBuffer,
        now_us: u64,
    ) -> Result<SendConfirmations, DataError> {
        let append = plan.handle.append(batch, now_us, plan.producer);
        let appended = self.timed(|metrics| &metrics.append_us, append).await;
        if let Err(error) = &appended
            && is_no_space(error)
        {
            self.metrics().add(|metrics| &metrics.no_space_refusals, 1);
        }
        let outcome = appended.map_err(|source| DataError::Partition {
            key: plan.key,
            source,
        })?;
        Ok(SendConfirmations(vec![Confirmation {
            stream_id: plan.key.stream_id,
            topic_id: plan.key.topic_id,
            partition_id: plan.key.partition_id,
            base_offset: outcome.base_offset,
        }]))
    }
}

/// Whether the append failed for a full disk: its write, or the group commit's sync.
fn is_no_space(error: &PartitionError) -> bool {
    let failed = match error {
        PartitionError::Append(error) => error,
        PartitionError::Sync(error) => &**error,
        _ => return false,
    };
    matches!(failed, AppendError::Io { source, .. }
        if source.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()))
}

impl DataError {
    /// What a client should be told: the producer refusals of §5.5 as they are, a
    /// quarantined partition as unable to append, a stored record that fails its checksums
    /// as unreadable, too many offsets as a limit, everything else (I/O, a full disk) as
    /// an internal error. The server's own failures (the last three) are logged too.
    pub fn refusal(&self) -> Refusal {
        let refusal = self.refusal_of();
        if matches!(refusal, Refusal::Internal | Refusal::Storage(_)) {
            super::fault_log::log_fault(|| format!("data: {}", super::causes(self)));
        }
        refusal
    }

    fn refusal_of(&self) -> Refusal {
        match self {
            Self::Partition {
                source: PartitionError::Producer(producer),
                ..
            } => Refusal::Producer(*producer),
            Self::Partition {
                source: PartitionError::Append(AppendError::Invalid(_)),
                ..
            }
            | Self::Partition {
                source: PartitionError::Append(AppendError::OffsetDelta { .. }),
                ..
            } => Refusal::Malformed,
            // The partition closed under the request: deleted with its topic or stream (or
            // the server stopping). The client's answer is that it is gone.
            Self::Partition {
                source: PartitionError::Closed,
                ..
            } => Refusal::Missing(Missing::Partition),
            Self::Partition {
                source: PartitionError::OffsetsLimit,
                ..
            } => Refusal::Limit(Limit::ConsumerOffsets),
            Self::NotOwner => Refusal::NotOwned,
            // The partition is quarantined (damage found at open, or a failed sync): not
            // worth a blind retry.
            Self::Partition {
                source:
                    PartitionError::Sync(_)
                    | PartitionError::Poisoned(_)
                    | PartitionError::Append(
                        AppendError::Quarantined { .. }
                        | AppendError::Poisoned { .. }
                        | AppendError::OffsetsExhausted { .. },
                    ),
                ..
            } => Refusal::Storage(StorageFault::CannotAppend),
            Self::Partition {
                source: PartitionError::Read(ReadError::Corrupt { .. }),
                ..
            }
            | Self::Unopenable { .. } => Refusal::Storage(StorageFault::CannotRead),
            _ => Refusal::Internal,
        }
    }
}
