//! [`Metadata::apply`]: the deterministic state machine. An op either applies whole and
//! advances `commit` by one, or is refused with an [`ApplyError`] and changes nothing.
//!
//! Validation (`validate.rs`) refuses bad requests before an op is ever logged; `apply`
//! re-checks the structural preconditions it relies on (the target exists, an id is free),
//! so a corrupt or foreign journal can never panic it or leave half an op applied.

use std::collections::BTreeMap;

use super::model::{ConsumerGroup, Metadata, Partition, PersonalAccessToken, Stream, Topic, User};
use super::op::MetadataOp;
use super::validate::PARTITIONS_PER_REQUEST_MAX;

/// Why an op could not be applied to the current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("stream {stream_id} does not exist")]
    StreamNotFound { stream_id: u32 },
    #[error("topic {topic_id} of stream {stream_id} does not exist")]
    TopicNotFound { stream_id: u32, topic_id: u32 },
    #[error("consumer group {group_id} does not exist")]
    GroupNotFound { group_id: u32 },
    #[error("user {user_id} does not exist")]
    UserNotFound { user_id: u32 },
    #[error("personal access token {name:?} of user {user_id} does not exist")]
    TokenNotFound { user_id: u32, name: String },
    #[error("{resource} id {id} is already taken")]
    IdTaken { resource: &'static str, id: u32 },
    #[error("{resource} name {name:?} is already taken")]
    NameTaken {
        resource: &'static str,
        name: String,
    },
    #[error("cannot delete {count} partitions of {existing}")]
    PartitionsUnderflow { count: u32, existing: u32 },
    #[error("partition ids of the topic would exceed u32")]
    PartitionIdsExhausted,
    #[error("{count} partitions in one op exceed the {max} a request may create")]
    TooManyPartitions { count: u32, max: u32 },
    #[error("the commit counter is exhausted")]
    CommitExhausted,
    #[error("commit {commit} is not above the current {current}")]
    CommitNotAbove { commit: u64, current: u64 },
}

impl Metadata {
    /// Applies `op`; on success `commit` is one higher, on error nothing changed.
    pub fn apply(&mut self, op: &MetadataOp) -> Result<(), ApplyError> {
        let commit = self
            .commit
            .checked_add(1)
            .ok_or(ApplyError::CommitExhausted)?;
        self.apply_at(op, commit)
    }

    /// Applies `op` as commit number `commit`, which must be above the current one; on
    /// error nothing changed. Cluster mode numbers each metadata commit by its op in the
    /// replica log, the same on every node, so a reply's commit names the op that made it
    /// (the committed-result marker, PROTOCOL.md §1.5, requires `op == commit`).
    pub fn apply_at(&mut self, op: &MetadataOp, commit: u64) -> Result<(), ApplyError> {
        if commit <= self.commit {
            return Err(ApplyError::CommitNotAbove {
                commit,
                current: self.commit,
            });
        }
        match op {
            MetadataOp::CreateStream { .. }
            | MetadataOp::UpdateStream { .. }
            | MetadataOp::DeleteStream { .. } => self.apply_stream(op)?,
            MetadataOp::CreateTopic { .. }
            | MetadataOp::UpdateTopic { .. }
            | MetadataOp::DeleteTopic { .. } => self.apply_topic(op, commit)?,
            MetadataOp::CreatePartitions { .. }
            | MetadataOp::DeletePartitions { .. }
            | MetadataOp::CreateConsumerGroup { .. }
            | MetadataOp::DeleteConsumerGroup { .. } => self.apply_topic_child(op, commit)?,
            MetadataOp::CreateUser { .. }
            | MetadataOp::UpdateUser { .. }
            | MetadataOp::DeleteUser { .. }
            | MetadataOp::ChangePassword { .. }
            | MetadataOp::UpdatePermissions { .. } => self.apply_user(op)?,
            MetadataOp::CreatePersonalAccessToken { .. }
            | MetadataOp::DeletePersonalAccessToken { .. } => self.apply_token(op)?,
        }
        self.commit = commit;
        Ok(())
    }

    fn apply_stream(&mut self, op: &MetadataOp) -> Result<(), ApplyError> {
        match op {
            MetadataOp::CreateStream {
                id,
                name,
                created_at,
                options,
            } => {
                if self.streams.contains_key(id) {
                    return Err(ApplyError::IdTaken {
                        resource: "stream",
                        id: *id,
                    });
                }
                check_name_free(self.streams.values().map(|s| &s.name), name, "stream")?;
                let stream = Stream {
                    id: *id,
                    name: name.clone(),
                    created_at: *created_at,
                    options: options.clone(),
                    topics: BTreeMap::new(),
                };
                self.streams.insert(*id, stream);
            }
            MetadataOp::UpdateStream { id, name, options } => {
                if let Some(name) = name {
                    let others = self.streams.values().filter(|s| s.id != *id);
                    check_name_free(others.map(|s| &s.name), name, "stream")?;
                }
                let stream = self.stream_mut(*id)?;
                if let Some(name) = name {
                    stream.name.clone_from(name);
                }
                if let Some(options) = options {
                    stream.options = options.clone();
                }
            }
            MetadataOp::DeleteStream { id } => {
                self.streams
                    .remove(id)
                    .ok_or(ApplyError::StreamNotFound { stream_id: *id })?;
                self.revoke_grants(*id, None);
            }
            _ => {}
        }
        Ok(())
    }

    /// Drops every user's grants on a deleted stream (`topic_id` `None`) or topic, so a
    /// stream or topic created later under the same id inherits none of them.
    fn revoke_grants(&mut self, stream_id: u32, topic_id: Option<u32>) {
        let grants = self
            .users
            .values_mut()
            .filter_map(|user| user.permissions.as_mut());
        for permissions in grants {
            match topic_id {
                None => {
                    permissions.streams.remove(&stream_id);
                }
                Some(topic_id) => {
                    if let Some(stream) = permissions.streams.get_mut(&stream_id) {
                        stream.topics.remove(&topic_id);
                    }
                }
            }
        }
    }

    fn apply_topic(&mut self, op: &MetadataOp, commit: u64) -> Result<(), ApplyError> {
        match op {
            MetadataOp::CreateTopic {
                stream_id,
                id,
                name,
                created_at,
                partitions_count,
                options,
                settings,
            } => {
                let stream = self.stream_mut(*stream_id)?;
                if stream.topics.contains_key(id) {
                    return Err(ApplyError::IdTaken {
                        resource: "topic",
                        id: *id,
                    });
                }
                check_name_free(stream.topics.values().map(|t| &t.name), name, "topic")?;
                let mut topic = Topic {
                    id: *id,
                    name: name.clone(),
                    created_at: *created_at,
                    options: options.clone(),
                    settings: *settings,
                    partitions: BTreeMap::new(),
                    groups: BTreeMap::new(),
                    next_group_id: 0,
                };
                add_partitions(&mut topic, *partitions_count, *created_at, commit)?;
                stream.topics.insert(*id, topic);
            }
            MetadataOp::UpdateTopic {
                stream_id,
                id,
                name,
                options,
                settings,
            } => {
                let stream = self.stream_mut(*stream_id)?;
                if let Some(name) = name {
                    let others = stream.topics.values().filter(|t| t.id != *id);
                    check_name_free(others.map(|t| &t.name), name, "topic")?;
                }
                let topic = topic_mut(stream, *id)?;
                if let Some(name) = name {
                    topic.name.clone_from(name);
                }
                if let Some(options) = options {
                    topic.options = options.clone();
                }
                if let Some(settings) = settings {
                    topic.settings = *settings;
                }
            }
            MetadataOp::DeleteTopic { stream_id, id } => {
                let stream = self.stream_mut(*stream_id)?;
                stream.topics.remove(id).ok_or(ApplyError::TopicNotFound {
                    stream_id: *stream_id,
                    topic_id: *id,
                })?;
                self.revoke_grants(*stream_id, Some(*id));
            }
            _ => {}
        }
        Ok(())
    }

    fn apply_topic_child(&mut self, op: &MetadataOp, commit: u64) -> Result<(), ApplyError> {
        match op {
            MetadataOp::CreatePartitions {
                stream_id,
                topic_id,
                count,
                created_at,
            } => {
                let topic = self.topic_mut(*stream_id, *topic_id)?;
                add_partitions(topic, *count, *created_at, commit)?;
            }
            MetadataOp::DeletePartitions {
                stream_id,
                topic_id,
                count,
            } => {
                let topic = self.topic_mut(*stream_id, *topic_id)?;
                remove_partitions(topic, *count)?;
            }
            MetadataOp::CreateConsumerGroup {
                stream_id,
                topic_id,
                id,
                name,
                created_at,
            } => {
                let topic = self.topic_mut(*stream_id, *topic_id)?;
                add_group(topic, *id, name, *created_at)?;
            }
            MetadataOp::DeleteConsumerGroup {
                stream_id,
                topic_id,
                id,
            } => {
                let topic = self.topic_mut(*stream_id, *topic_id)?;
                topic
                    .groups
                    .remove(id)
                    .ok_or(ApplyError::GroupNotFound { group_id: *id })?;
            }
            _ => {}
        }
        Ok(())
    }

    fn apply_user(&mut self, op: &MetadataOp) -> Result<(), ApplyError> {
        match op {
            MetadataOp::CreateUser {
                id,
                username,
                password_hash,
                status,
                permissions,
                created_at,
            } => {
                if self.users.contains_key(id) {
                    return Err(ApplyError::IdTaken {
                        resource: "user",
                        id: *id,
                    });
                }
                check_name_free(self.users.values().map(|u| &u.username), username, "user")?;
                let user = User {
                    id: *id,
                    username: username.clone(),
                    password_hash: password_hash.clone(),
                    status: *status,
                    permissions: permissions.clone(),
                    created_at: *created_at,
                    tokens: BTreeMap::new(),
                };
                self.users.insert(*id, user);
            }
            MetadataOp::UpdateUser {
                id,
                username,
                status,
            } => {
                if let Some(username) = username {
                    let others = self.users.values().filter(|u| u.id != *id);
                    check_name_free(others.map(|u| &u.username), username, "user")?;
                }
                let user = self.user_mut(*id)?;
                if let Some(username) = username {
                    user.username.clone_from(username);
                }
                if let Some(status) = status {
                    user.status = *status;
                }
            }
            MetadataOp::DeleteUser { id } => {
                self.users
                    .remove(id)
                    .ok_or(ApplyError::UserNotFound { user_id: *id })?;
            }
            MetadataOp::ChangePassword { id, password_hash } => {
                self.user_mut(*id)?.password_hash.clone_from(password_hash);
            }
            MetadataOp::UpdatePermissions { id, permissions } => {
                self.user_mut(*id)?.permissions.clone_from(permissions);
            }
            _ => {}
        }
        Ok(())
    }

    fn apply_token(&mut self, op: &MetadataOp) -> Result<(), ApplyError> {
        match op {
            MetadataOp::CreatePersonalAccessToken {
                user_id,
                name,
                token_hash,
                expiry_at,
            } => {
                let user = self.user_mut(*user_id)?;
                if user.tokens.contains_key(name) {
                    return Err(ApplyError::NameTaken {
                        resource: "personal access token",
                        name: name.clone(),
                    });
                }
                let token = PersonalAccessToken {
                    name: name.clone(),
                    token_hash: token_hash.clone(),
                    expiry_at: *expiry_at,
                };
                user.tokens.insert(name.clone(), token);
            }
            MetadataOp::DeletePersonalAccessToken { user_id, name } => {
                let user = self.user_mut(*user_id)?;
                user.tokens
                    .remove(name)
                    .ok_or_else(|| ApplyError::TokenNotFound {
                        user_id: *user_id,
                        name: name.clone(),
                    })?;
            }
            _ => {}
        }
        Ok(())
    }

    fn stream_mut(&mut self, stream_id: u32) -> Result<&mut Stream, ApplyError> {
        self.streams
            .get_mut(&stream_id)
            .ok_or(ApplyError::StreamNotFound { stream_id })
    }

    fn topic_mut(&mut self, stream_id: u32, topic_id: u32) -> Result<&mut Topic, ApplyError> {
        topic_mut(self.stream_mut(stream_id)?, topic_id)
    }

    fn user_mut(&mut self, user_id: u32) -> Result<&mut User, ApplyError> {
        self.users
            .get_mut(&user_id)
            .ok_or(ApplyError::UserNotFound { user_id })
    }
}

fn topic_mut(stream: &mut Stream, topic_id: u32) -> Result<&mut Topic, ApplyError> {
    let stream_id = stream.id;
    stream
        .topics
        .get_mut(&topic_id)
        .ok_or(ApplyError::TopicNotFound {
            stream_id,
            topic_id,
        })
}

fn check_name_free<'a>(
    mut names: impl Iterator<Item = &'a String>,
    name: &str,
    resource: &'static str,
) -> Result<(), ApplyError> {
    if names.any(|existing| existing == name) {
        return Err(ApplyError::NameTaken {
            resource,
            name: String::from(name),
        });
    }
    Ok(())
}

/// Appends `count` partitions after the highest id; their incarnation is `commit`, the
/// number of the op creating them.
fn add_partitions(
    topic: &mut Topic,
    count: u32,
    created_at: u64,
    commit: u64,
) -> Result<(), ApplyError> {
    // Validation never logs more; an op beyond it comes from a foreign journal, and applying
    // it would allocate without bound.
    if count > PARTITIONS_PER_REQUEST_MAX {
        return Err(ApplyError::TooManyPartitions {
            count,
            max: PARTITIONS_PER_REQUEST_MAX,
        });
    }
    let first = topic
        .partitions
        .keys()
        .next_back()
        .map_or(Some(0), |id| id.checked_add(1));
    let first = first.ok_or(ApplyError::PartitionIdsExhausted)?;
    first
        .checked_add(count)
        .ok_or(ApplyError::PartitionIdsExhausted)?;
    for id in (0..count).filter_map(|offset| first.checked_add(offset)) {
        let partition = Partition {
            id,
            created_at,
            incarnation: commit,
        };
        topic.partitions.insert(id, partition);
    }
    Ok(())
}

/// Removes the `count` partitions with the highest ids.
fn remove_partitions(topic: &mut Topic, count: u32) -> Result<(), ApplyError> {
    let existing = u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX);
    if count > existing {
        return Err(ApplyError::PartitionsUnderflow { count, existing });
    }
    for _ in 0..count {
        topic.partitions.pop_last();
    }
    Ok(())
}

fn add_group(topic: &mut Topic, id: u32, name: &str, created_at: u64) -> Result<(), ApplyError> {
    if id < topic.next_group_id || topic.groups.contains_key(&id) {
        return Err(ApplyError::IdTaken {
            resource: "consumer group",
            id,
        });
    }
    check_name_free(
        topic.groups.values().map(|g| &g.name),
        name,
        "consumer group",
    )?;
    let group = ConsumerGroup {
        id,
        name: String::from(name),
        created_at,
    };
    topic.groups.insert(id, group);
    topic.next_group_id = id.saturating_add(1);
    Ok(())
}
