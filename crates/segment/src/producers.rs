//! Idempotent-producer deduplication of one partition (PROTOCOL.md §5.5): per producer id the
//! latest epoch, the next expected sequence and the last appended batch, so an exact
//! retransmission gets its original confirmation instead of a second append.
//!
//! Pure: the partition task ([`crate::partition`]) asks [`ProducerTable::admit`] before an
//! append and calls [`ProducerTable::record`] after it, both in its own serial order, so two
//! sends of one producer can never both pass the check.

use std::collections::BTreeMap;

use proto::batch::Producer;

/// Producers remembered per partition; past it the oldest id is forgotten (ids are minted as
/// `session << 20 | n`, so the lowest id belongs to the oldest session).
pub const PRODUCERS_MAX: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LastBatch {
    base_sequence: u32,
    message_count: u32,
    base_offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProducerState {
    epoch: u16,
    next_sequence: u32,
    last: LastBatch,
}

/// Why a producer batch is refused (§5.5); nothing was appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProducerRefusal {
    /// A sequence other than 0 from a producer id this partition does not remember.
    #[error("unknown producer")]
    Unknown,
    /// An epoch older than the producer's latest: a newer instance took over.
    #[error("producer epoch fenced")]
    EpochFenced,
    /// A sequence that is neither the next one nor a retransmission of the last batch.
    #[error("producer sequence out of order")]
    OutOfOrder,
}

/// What to do with a producer batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Append,
    /// An exact retransmission of the last appended batch: confirm it again.
    Duplicate {
        base_offset: u64,
    },
}

/// The producers of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerTable {
    producers: BTreeMap<u64, ProducerState>,
}

impl ProducerTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks a batch of `message_count` messages against the producer's state.
    pub fn admit(
        &self,
        producer: Producer,
        message_count: u32,
    ) -> Result<Admission, ProducerRefusal> {
        let Some(state) = self.producers.get(&producer.producer_id) else {
            return if producer.base_sequence == 0 {
                Ok(Admission::Append)
            } else {
                Err(ProducerRefusal::Unknown)
            };
        };
        if producer.epoch < state.epoch {
            return Err(ProducerRefusal::EpochFenced);
        }
        if producer.epoch > state.epoch {
            // A new epoch starts its sequence over.
            return if producer.base_sequence == 0 {
                Ok(Admission::Append)
            } else {
                Err(ProducerRefusal::OutOfOrder)
            };
        }
        if producer.base_sequence == state.next_sequence {
            return Ok(Admission::Append);
        }
        let last = state.last;
        if producer.base_sequence == last.base_sequence && message_count == last.message_count {
            return Ok(Admission::Duplicate {
                base_offset: last.base_offset,
            });
        }
        Err(ProducerRefusal::OutOfOrder)
    }

    /// Records an appended batch (after [`Self::admit`] said [`Admission::Append`]).
    pub fn record(&mut self, producer: Producer, message_count: u32, base_offset: u64) {
        let is_new = !self.producers.contains_key(&producer.producer_id);
        if is_new && self.producers.len() >= PRODUCERS_MAX {
            self.producers.pop_first();
        }
        self.producers.insert(
            producer.producer_id,
            ProducerState {
                epoch: producer.epoch,
                next_sequence: producer.base_sequence.saturating_add(message_count),
                last: LastBatch {
                    base_sequence: producer.base_sequence,
                    message_count,
                    base_offset,
                },
            },
        );
    }

    /// Forgets every producer (the partition was purged).
    pub fn clear(&mut self) {
        self.producers.clear();
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn producer(id: u64, epoch: u16, base_sequence: u32) -> Producer {
        Producer {
            producer_id: id,
            epoch,
            base_sequence,
        }
    }

    #[test]
    fn sequence_rules() {
        let mut table = ProducerTable::new();
        assert_eq!(
            table.admit(producer(1, 0, 3), 1),
            Err(ProducerRefusal::Unknown)
        );
        assert_eq!(table.admit(producer(1, 0, 0), 2), Ok(Admission::Append));
        table.record(producer(1, 0, 0), 2, 10);
        assert_eq!(
            table.admit(producer(1, 0, 0), 2),
            Ok(Admission::Duplicate { base_offset: 10 })
        );
        assert_eq!(
            table.admit(producer(1, 0, 0), 3),
            Err(ProducerRefusal::OutOfOrder)
        );
        assert_eq!(
            table.admit(producer(1, 0, 5), 1),
            Err(ProducerRefusal::OutOfOrder)
        );
        assert_eq!(table.admit(producer(1, 0, 2), 1), Ok(Admission::Append));
        table.record(producer(1, 1, 0), 1, 12);
        assert_eq!(
            table.admit(producer(1, 0, 1), 1),
            Err(ProducerRefusal::EpochFenced)
        );
        assert_eq!(
            table.admit(producer(1, 2, 4), 1),
            Err(ProducerRefusal::OutOfOrder)
        );
        assert_eq!(table.admit(producer(1, 2, 0), 1), Ok(Admission::Append));
    }

    #[test]
    fn forgets_the_oldest_producer_past_the_limit() {
        let mut table = ProducerTable::new();
        for id in 0..=u64::try_from(PRODUCERS_MAX).unwrap() {
            table.record(producer(id, 0, 0), 1, id);
        }
        assert_eq!(table.len(), PRODUCERS_MAX);
        assert_eq!(
            table.admit(producer(0, 0, 1), 1),
            Err(ProducerRefusal::Unknown)
        );
    }

    proptest! {
        /// A producer that sends in order, retransmitting at random, appends every batch
        /// exactly once.
        #[test]
        fn in_order_sends_with_retransmissions_append_once(
            batches in proptest::collection::vec((1_u32..5, any::<bool>()), 1..40)
        ) {
            let mut table = ProducerTable::new();
            let (mut sequence, mut offset, mut appended) = (0_u32, 0_u64, 0_u32);
            for (count, retransmit) in batches {
                let batch = producer(7, 0, sequence);
                prop_assert_eq!(table.admit(batch, count), Ok(Admission::Append));
                table.record(batch, count, offset);
                appended += count;
                if retransmit {
                    prop_assert_eq!(
                        table.admit(batch, count),
                        Ok(Admission::Duplicate { base_offset: offset })
                    );
                }
                sequence += count;
                offset += u64::from(count);
            }
            prop_assert_eq!(u64::from(appended), offset);
        }
    }
}
