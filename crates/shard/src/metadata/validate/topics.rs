//! Topic-level requests: `CREATE_TOPIC` (302), `DELETE_TOPIC` (303), 0.11.0 `UPDATE_TOPIC`
//! (304), `CREATE_PARTITIONS` (402), `DELETE_PARTITIONS` (403), and the metadata half of
//! `CREATE_CONSUMER_GROUP` (602) / `DELETE_CONSUMER_GROUP` (603).

use proto::commands::groups::{CreateConsumerGroup, DeleteConsumerGroup};
use proto::commands::legacy::UpdateTopic;
use proto::commands::partitions::{CreatePartitions, DeletePartitions};
use proto::commands::topics::TOPICS_PER_STREAM_MAX;
use proto::commands::topics::{CreateTopic, DeleteTopic, PARTITIONS_PER_TOPIC_MAX};

use crate::metadata::option_text::canonical_topic_options;
use crate::metadata::options::{patch_topic_options, resolve_topic_options};
use crate::metadata::permissions::{can_create_topic, can_manage_topic, can_use_groups, require};
use crate::metadata::resolve::lowest_free_id;
use crate::metadata::{Metadata, MetadataOp, Stream, Topic, TopicSettings, User};
use crate::refusal::{Invalid, Limit, Refusal, Taken, Unavailable};

/// Partitions one create or delete request may name (`MAX_PARTITIONS_PER_REQUEST`).
pub const PARTITIONS_PER_REQUEST_MAX: u32 = 1000;

/// `CREATE_TOPIC`: `1009`, `41`, `2015` too many partitions, `2013` name taken, `2021` too
/// many topics, option refusals (§7.4). `defaults` are the server's configured settings.
pub fn create_topic(
    metadata: &Metadata,
    actor: &User,
    request: &CreateTopic,
    now_micros: u64,
    defaults: &TopicSettings,
) -> Result<MetadataOp, Refusal> {
    let stream = metadata.stream(&request.stream_id)?;
    require(can_create_topic(actor, stream.id))?;
    if request.partitions_count > PARTITIONS_PER_REQUEST_MAX {
        return Err(Refusal::Limit(Limit::Partitions));
    }
    check_topic_name_free(stream, request.name.as_str(), None)?;
    if stream.topics.len() >= TOPICS_PER_STREAM_MAX {
        return Err(Refusal::Limit(Limit::Topics));
    }
    let options = canonical_topic_options(&request.options)?;
    let settings = resolve_topic_options(&options, defaults, request.partitions_count)?;
    let id = lowest_free_id(stream.topics.keys().copied()).ok_or(Refusal::Limit(Limit::Topics))?;
    Ok(MetadataOp::CreateTopic {
        stream_id: stream.id,
        id,
        name: String::from(request.name.as_str()),
        created_at: now_micros,
        partitions_count: request.partitions_count,
        options,
        settings,
    })
}

/// `DELETE_TOPIC`: `1009`, `2010`, `41`.
pub fn delete_topic(
    metadata: &Metadata,
    actor: &User,
    request: &DeleteTopic,
) -> Result<MetadataOp, Refusal> {
    let (stream, topic) = metadata.topic(&request.stream_id, &request.topic_id)?;
    require(can_manage_topic(actor, stream.id, topic.id))?;
    Ok(MetadataOp::DeleteTopic {
        stream_id: stream.id,
        id: topic.id,
    })
}

/// 0.11.0 `UPDATE_TOPIC`: the name (current one when unchanged) and the option keys to
/// change; create-only keys are refused with `4103`.
pub fn update_topic_legacy(
    metadata: &Metadata,
    actor: &User,
    request: &UpdateTopic,
    defaults: &TopicSettings,
) -> Result<MetadataOp, Refusal> {
    let (stream, topic) = metadata.topic(&request.stream_id, &request.topic_id)?;
    require(can_manage_topic(actor, stream.id, topic.id))?;
    let mut patch = patch_topic_options(
        &topic.options,
        &topic.settings,
        &request.options,
        &[],
        defaults,
        topic.partitions_count(),
    )?;
    patch.name = Some(String::from(request.name.as_str()));
    update_topic_op(stream, topic, patch)
}

/// The op for a checked topic patch; a new name must be free in the stream.
pub(super) fn update_topic_op(
    stream: &Stream,
    topic: &Topic,
    patch: crate::metadata::options::TopicPatch,
) -> Result<MetadataOp, Refusal> {
    if let Some(name) = &patch.name {
        check_topic_name_free(stream, name, Some(topic.id))?;
    }
    Ok(MetadataOp::UpdateTopic {
        stream_id: stream.id,
        id: topic.id,
        name: patch.name,
        options: Some(patch.options),
        settings: Some(patch.settings),
    })
}

/// `CREATE_PARTITIONS`: `1009`, `2010`, `41`, `2015` count outside 1..=1000, `2023` fixed
/// topic, `3013` partition ids exhausted.
pub fn create_partitions(
    metadata: &Metadata,
    actor: &User,
    request: &CreatePartitions,
    now_micros: u64,
) -> Result<MetadataOp, Refusal> {
    let (stream, topic) = metadata.topic(&request.stream_id, &request.topic_id)?;
    check_partitions_change(actor, stream, topic, request.partitions_count)?;
    let next_id = topic
        .partitions
        .keys()
        .next_back()
        .map_or(0, |id| id.saturating_add(1));
    let end = u64::from(next_id).saturating_add(u64::from(request.partitions_count));
    if end > u64::try_from(PARTITIONS_PER_TOPIC_MAX).unwrap_or(u64::MAX) {
        return Err(Refusal::Limit(Limit::PartitionIds));
    }
    Ok(MetadataOp::CreatePartitions {
        stream_id: stream.id,
        topic_id: topic.id,
        count: request.partitions_count,
        created_at: now_micros,
    })
}

/// `DELETE_PARTITIONS`: as create, plus `2019` when deleting more than exist.
pub fn delete_partitions(
    metadata: &Metadata,
    actor: &User,
    request: &DeletePartitions,
) -> Result<MetadataOp, Refusal> {
    let (stream, topic) = metadata.topic(&request.stream_id, &request.topic_id)?;
    check_partitions_change(actor, stream, topic, request.partitions_count)?;
    if request.partitions_count > topic.partitions_count() {
        return Err(Refusal::Invalid(Invalid::PartitionsCount));
    }
    Ok(MetadataOp::DeletePartitions {
        stream_id: stream.id,
        topic_id: topic.id,
        count: request.partitions_count,
    })
}

fn check_partitions_change(
    actor: &User,
    stream: &Stream,
    topic: &Topic,
    count: u32,
) -> Result<(), Refusal> {
    require(can_manage_topic(actor, stream.id, topic.id))?;
    if !(1..=PARTITIONS_PER_REQUEST_MAX).contains(&count) {
        return Err(Refusal::Limit(Limit::Partitions));
    }
    if topic.settings.partitions_fixed {
        return Err(Refusal::Unavailable(Unavailable::PartitionResize));
    }
    Ok(())
}

/// `CREATE_CONSUMER_GROUP`: `1009`, `2010`, `41`, `5004` name taken, `5010` ids exhausted.
/// Group ids come from the topic's counter and are never reused.
pub fn create_consumer_group(
    metadata: &Metadata,
    actor: &User,
    request: &CreateConsumerGroup,
    now_micros: u64,
) -> Result<MetadataOp, Refusal> {
    let (stream, topic) = metadata.topic(&request.stream_id, &request.topic_id)?;
    require(can_use_groups(actor, stream.id, topic.id))?;
    let name = request.name.as_str();
    if topic.groups.values().any(|group| group.name == name) {
        return Err(Refusal::Taken(Taken::GroupName));
    }
    if topic.next_group_id == u32::MAX {
        return Err(Refusal::Limit(Limit::Groups));
    }
    Ok(MetadataOp::CreateConsumerGroup {
        stream_id: stream.id,
        topic_id: topic.id,
        id: topic.next_group_id,
        name: String::from(name),
        created_at: now_micros,
    })
}

/// `DELETE_CONSUMER_GROUP`: `1009`, `2010`, `41`, `5000`.
pub fn delete_consumer_group(
    metadata: &Metadata,
    actor: &User,
    request: &DeleteConsumerGroup,
) -> Result<MetadataOp, Refusal> {
    let (stream, topic) = metadata.topic(&request.stream_id, &request.topic_id)?;
    require(can_use_groups(actor, stream.id, topic.id))?;
    let group = topic.group(&request.group_id)?;
    Ok(MetadataOp::DeleteConsumerGroup {
        stream_id: stream.id,
        topic_id: topic.id,
        id: group.id,
    })
}

fn check_topic_name_free(stream: &Stream, name: &str, except: Option<u32>) -> Result<(), Refusal> {
    let taken = stream
        .topics
        .values()
        .any(|topic| topic.name == name && Some(topic.id) != except);
    if taken {
        return Err(Refusal::Taken(Taken::TopicName));
    }
    Ok(())
}
