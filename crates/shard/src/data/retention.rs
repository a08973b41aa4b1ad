//! The message cleaner (`[data_maintenance.messages]`): deletes the oldest sealed segments of
//! topics past their `message_expiry` or `max_topic_size`. The plan is segment's pure
//! [`retention_plan`] over every partition of the topic (the size cap is the topic's, across
//! its partitions); the deletions go to each partition's task, whichever shard owns it.
//! Active segments are never deleted, so a topic holds at most its cap plus one active
//! segment per partition.

use segment::log::{RetentionPolicy, SegmentInfo, retention_plan};
use segment::storage::Storage;

use super::{DataPlane, PartitionKey};
use crate::metadata::Metadata;

/// One topic's partitions and what the cleaner enforces on it.
struct Retained {
    partitions: Vec<PartitionKey>,
    policy: RetentionPolicy,
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// One cleaner pass at `now_us`; returns how many segments it deleted.
    pub async fn enforce_retention(&self, metadata: &Metadata, now_us: u64) -> usize {
        let mut deleted = 0;
        for topic in retained_topics(metadata) {
            deleted += self.clean_topic(&topic, now_us).await;
        }
        deleted
    }

    async fn clean_topic(&self, topic: &Retained, now_us: u64) -> usize {
        let mut segments: Vec<(u32, Vec<SegmentInfo>)> = Vec::new();
        for key in &topic.partitions {
            let Some(handle) = self.partition(*key) else {
                continue;
            };
            match handle.segments().await {
                Ok(list) => segments.push((key.partition_id, list)),
                Err(error) => log::warn!("retention: segments of {key:?}: {error}"),
            }
        }
        let mut deleted = 0;
        for doomed in retention_plan(&segments, topic.policy, now_us) {
            let Some(key) = topic
                .partitions
                .iter()
                .find(|key| key.partition_id == doomed.partition_id)
            else {
                continue;
            };
            let Some(handle) = self.partition(*key) else {
                continue;
            };
            match handle.delete_segment(doomed.start_offset).await {
                Ok(true) => {
                    deleted += 1;
                    log::info!(
                        "retention: deleted segment {} of {}/{}/{}",
                        doomed.start_offset,
                        key.stream_id,
                        key.topic_id,
                        key.partition_id
                    );
                }
                Ok(false) => {}
                Err(error) => log::warn!("retention: delete segment of {key:?}: {error}"),
            }
        }
        deleted
    }
}

/// The topics with an expiry or a size cap, with their partitions.
fn retained_topics(metadata: &Metadata) -> Vec<Retained> {
    let mut retained = Vec::new();
    for stream in metadata.streams.values() {
        for topic in stream.topics.values() {
            let policy = RetentionPolicy {
                message_expiry_us: topic.settings.message_expiry_us,
                max_size_bytes: topic.settings.max_topic_size_bytes,
            };
            if policy.message_expiry_us.is_none() && policy.max_size_bytes.is_none() {
                continue;
            }
            let partitions = topic
                .partitions
                .keys()
                .map(|partition_id| PartitionKey {
                    stream_id: stream.id,
                    topic_id: topic.id,
                    partition_id: *partition_id,
                })
                .collect();
            retained.push(Retained { partitions, policy });
        }
    }
    retained
}
