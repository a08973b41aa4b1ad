//! Retention: which sealed segments to delete for age and for size, as a pure plan over
//! segment descriptions (so it is tested against a model), and its application to a log.

use crate::storage::Storage;

use super::PartitionLog;
use super::error::{AppendError, io_error};
use super::segment::{SegmentInfo, append_io};

/// A topic's retention settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionPolicy {
    /// Delete sealed segments whose newest message is older than this, µs.
    pub message_expiry_us: Option<u64>,
    /// Delete the oldest sealed segments while the topic is bigger than this.
    pub max_size_bytes: Option<u64>,
}

/// A segment of one partition of the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SegmentRef {
    pub partition_id: u32,
    pub start_offset: u64,
}

/// The sealed segments to delete from a topic whose partitions hold `partitions` at
/// `now_us`: every expired one, then the oldest remaining ones (by newest message, across
/// partitions) while the topic exceeds its size. Active segments are never chosen.
pub fn retention_plan(
    partitions: &[(u32, Vec<SegmentInfo>)],
    policy: RetentionPolicy,
    now_us: u64,
) -> Vec<SegmentRef> {
    let mut sealed: Vec<(u64, SegmentRef, u64)> = partitions
        .iter()
        .flat_map(|(partition_id, segments)| {
            segments
                .iter()
                .filter(|segment| segment.sealed)
                .map(move |segment| {
                    let reference = SegmentRef {
                        partition_id: *partition_id,
                        start_offset: segment.start_offset,
                    };
                    (segment.last_timestamp, reference, segment.size_bytes)
                })
        })
        .collect();
    sealed.sort_unstable();
    let mut total: u64 = partitions
        .iter()
        .flat_map(|(_, segments)| segments)
        .map(|segment| segment.size_bytes)
        .sum();
    let mut plan = Vec::new();
    for (last_timestamp, reference, size) in sealed {
        let expired = policy
            .message_expiry_us
            .is_some_and(|expiry| last_timestamp.saturating_add(expiry) < now_us);
        let oversized = policy.max_size_bytes.is_some_and(|max| total > max);
        if expired || oversized {
            plan.push(reference);
            total -= size;
        }
    }
    plan.sort_unstable();
    plan
}

impl<S: Storage> PartitionLog<S> {
    /// Deletes the sealed segment starting at `start_offset`; returns whether it existed.
    /// The active segment is never deleted.
    pub async fn delete_segment(&mut self, start_offset: u64) -> Result<bool, AppendError> {
        let last = self.segments.len() - 1;
        let Some(index) = self.segments[..last]
            .iter()
            .position(|segment| segment.start_offset == start_offset)
        else {
            return Ok(false);
        };
        let segment = self.segments.remove(index);
        // The `.log` goes first: a crash before the indexes leaves only them (reported at
        // start as a segment without its records), never a whole `.log` that the next start
        // would open and serve again, deleted records back.
        for path in [
            &segment.paths.log,
            &segment.paths.index,
            &segment.paths.time_index,
        ] {
            if self.storage.exists(path).await {
                self.storage
                    .remove_file(path)
                    .await
                    .map_err(io_error("remove", path, append_io))?;
            }
        }
        self.storage
            .sync_dir(&self.directory)
            .await
            .map_err(io_error("sync", &self.directory, append_io))?;
        Ok(true)
    }

    /// Deletes the oldest `count` sealed segments (`DELETE_SEGMENTS`); returns how many went.
    pub async fn delete_oldest_segments(&mut self, count: usize) -> Result<usize, AppendError> {
        let sealed: Vec<u64> = self
            .segments
            .iter()
            .rev()
            .skip(1)
            .rev()
            .take(count)
            .map(|segment| segment.start_offset)
            .collect();
        for start_offset in &sealed {
            self.delete_segment(*start_offset).await?;
        }
        Ok(sealed.len())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn info(start_offset: u64, size_bytes: u64, last_timestamp: u64, sealed: bool) -> SegmentInfo {
        SegmentInfo {
            start_offset,
            next_offset: start_offset + 10,
            size_bytes,
            last_timestamp,
            sealed,
        }
    }

    fn partitions() -> impl Strategy<Value = Vec<(u32, Vec<SegmentInfo>)>> {
        proptest::collection::vec(
            proptest::collection::vec((1..100_u64, 0..1000_u64), 1..6),
            1..4,
        )
        .prop_map(|parts| {
            parts
                .into_iter()
                .enumerate()
                .map(|(partition, segments)| {
                    let count = segments.len();
                    let mut time = 0;
                    let infos = segments
                        .into_iter()
                        .enumerate()
                        .map(|(index, (size, step))| {
                            time += step;
                            info(index as u64 * 10, size, time, index + 1 < count)
                        })
                        .collect();
                    (u32::try_from(partition).unwrap(), infos)
                })
                .collect()
        })
    }

    /// The model: repeatedly delete the single oldest deletable segment while a rule asks.
    fn model(
        partitions: &[(u32, Vec<SegmentInfo>)],
        policy: RetentionPolicy,
        now: u64,
    ) -> Vec<SegmentRef> {
        let mut remaining: Vec<(u32, SegmentInfo)> = partitions
            .iter()
            .flat_map(|(p, segments)| segments.iter().map(move |s| (*p, *s)))
            .collect();
        let mut deleted = Vec::new();
        loop {
            let total: u64 = remaining.iter().map(|(_, s)| s.size_bytes).sum();
            let candidate = remaining
                .iter()
                .enumerate()
                .filter(|(_, (_, s))| s.sealed)
                .min_by_key(|(_, (p, s))| (s.last_timestamp, *p, s.start_offset))
                .map(|(index, (p, s))| (index, *p, *s));
            let Some((index, partition_id, segment)) = candidate else {
                break;
            };
            let expired = policy
                .message_expiry_us
                .is_some_and(|e| segment.last_timestamp.saturating_add(e) < now);
            let oversized = policy.max_size_bytes.is_some_and(|max| total > max);
            if !(expired || oversized) {
                // Expiry is monotonic in age: if the oldest is not expired, later ones may
                // still be (same age ties aside), so keep scanning only expired ones.
                let rest: Vec<_> = remaining
                    .iter()
                    .filter(|(_, s)| {
                        s.sealed
                            && policy
                                .message_expiry_us
                                .is_some_and(|e| s.last_timestamp.saturating_add(e) < now)
                    })
                    .map(|(p, s)| SegmentRef {
                        partition_id: *p,
                        start_offset: s.start_offset,
                    })
                    .collect();
                deleted.extend(rest);
                break;
            }
            deleted.push(SegmentRef {
                partition_id,
                start_offset: segment.start_offset,
            });
            remaining.remove(index);
        }
        deleted.sort_unstable();
        deleted.dedup();
        deleted
    }

    proptest! {
        #[test]
        fn plan_matches_model(
            partitions in partitions(),
            expiry in proptest::option::of(0..2000_u64),
            max_size in proptest::option::of(0..600_u64),
            now in 0..4000_u64,
        ) {
            let policy = RetentionPolicy { message_expiry_us: expiry, max_size_bytes: max_size };
            let plan = retention_plan(&partitions, policy, now);
            prop_assert_eq!(&plan, &model(&partitions, policy, now));
            let active: Vec<_> =
                partitions.iter().map(|(p, s)| (*p, s.last().unwrap().start_offset)).collect();
            for reference in &plan {
                prop_assert!(!active.contains(&(reference.partition_id, reference.start_offset)));
            }
        }
    }
}
