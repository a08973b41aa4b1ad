//! Permission rules (PROTOCOL.md §7.5), one function per action, shared by every handler
//! family. Global flags short-circuit stream and topic flags; a stream flag covers every
//! topic of the stream. The root user (id 0) may do everything.
//!
//! Each function answers `true` = allowed; [`require`] turns `false` into
//! `41 Unauthorized`.

use proto::primitives::{GlobalPermissions, Permissions, StreamPermissions, TopicPermissions};

use super::model::User;
use crate::refusal::Refusal;

/// The root user's id.
pub const ROOT_USER_ID: u32 = 0;

/// `Ok` when `allowed`, else `41 Unauthorized`.
pub fn require(allowed: bool) -> Result<(), Refusal> {
    if allowed {
        Ok(())
    } else {
        Err(Refusal::Forbidden)
    }
}

fn global(user: &User, test: impl Fn(&GlobalPermissions) -> bool) -> bool {
    user.id == ROOT_USER_ID || user.permissions.as_ref().is_some_and(|p| test(&p.global))
}

fn stream(user: &User, stream_id: u32, test: impl Fn(&StreamPermissions) -> bool) -> bool {
    let streams = user.permissions.as_ref().map(|p: &Permissions| &p.streams);
    streams
        .and_then(|streams| streams.get(&stream_id))
        .is_some_and(test)
}

fn topic(
    user: &User,
    stream_id: u32,
    topic_id: u32,
    test: impl Fn(&TopicPermissions) -> bool,
) -> bool {
    let streams = user.permissions.as_ref().map(|p: &Permissions| &p.streams);
    streams
        .and_then(|streams| streams.get(&stream_id))
        .and_then(|stream| stream.topics.get(&topic_id))
        .is_some_and(test)
}

/// `GET_STATS`, `GET_CLIENT(S)`, `GET_SNAPSHOT_FILE`.
pub fn can_read_server(user: &User) -> bool {
    global(user, |g| g.manage_servers || g.read_servers)
}

/// `GET_USER(S)`.
pub fn can_read_users(user: &User) -> bool {
    global(user, |g| g.manage_users || g.read_users)
}

/// CREATE/DELETE/UPDATE user, `UPDATE_PERMISSIONS`.
pub fn can_manage_users(user: &User) -> bool {
    global(user, |g| g.manage_users)
}

/// `CHANGE_PASSWORD`: one's own always, another's with `manage_users`.
pub fn can_change_password(user: &User, target_user_id: u32) -> bool {
    user.id == target_user_id || can_manage_users(user)
}

/// `GET_STREAMS`.
pub fn can_list_streams(user: &User) -> bool {
    global(user, |g| g.manage_streams || g.read_streams)
}

/// `GET_STREAM`.
pub fn can_read_stream(user: &User, stream_id: u32) -> bool {
    can_list_streams(user) || stream(user, stream_id, |s| s.manage_stream || s.read_stream)
}

/// `CREATE_STREAM`.
pub fn can_create_stream(user: &User) -> bool {
    global(user, |g| g.manage_streams)
}

/// DELETE/UPDATE stream (and the 0.11.0 purge).
pub fn can_manage_stream(user: &User, stream_id: u32) -> bool {
    can_create_stream(user) || stream(user, stream_id, |s| s.manage_stream)
}

/// `GET_TOPICS` and the consumer-group commands (600–606): stream-level read.
pub fn can_read_topics(user: &User, stream_id: u32) -> bool {
    global(user, |g| {
        g.read_streams || g.manage_streams || g.manage_topics || g.read_topics
    }) || stream(user, stream_id, |s| {
        s.manage_stream || s.read_stream || s.manage_topics || s.read_topics
    })
}

/// `GET_TOPIC`: stream-level read or the topic's own read flags.
pub fn can_read_topic(user: &User, stream_id: u32, topic_id: u32) -> bool {
    can_read_topics(user, stream_id)
        || topic(user, stream_id, topic_id, |t| {
            t.manage_topic || t.read_topic
        })
}

/// Consumer-group commands (600–606).
pub fn can_use_groups(user: &User, stream_id: u32, topic_id: u32) -> bool {
    can_read_topic(user, stream_id, topic_id)
}

/// `CREATE_TOPIC`.
pub fn can_create_topic(user: &User, stream_id: u32) -> bool {
    global(user, |g| g.manage_streams || g.manage_topics)
        || stream(user, stream_id, |s| s.manage_stream || s.manage_topics)
}

/// DELETE/UPDATE topic, CREATE/`DELETE_PARTITIONS`, `DELETE_SEGMENTS` (and the 0.11.0 purge).
pub fn can_manage_topic(user: &User, stream_id: u32, topic_id: u32) -> bool {
    can_create_topic(user, stream_id) || topic(user, stream_id, topic_id, |t| t.manage_topic)
}

/// POLL (100/106/109) and consumer offsets (120–122).
pub fn can_poll(user: &User, stream_id: u32, topic_id: u32) -> bool {
    global(user, |g| {
        g.poll_messages || g.read_topics || g.manage_topics || g.read_streams || g.manage_streams
    }) || stream(user, stream_id, |s| {
        s.manage_stream || s.read_stream || s.manage_topics || s.read_topics || s.poll_messages
    }) || topic(user, stream_id, topic_id, |t| {
        t.manage_topic || t.read_topic || t.poll_messages
    })
}

/// `SEND_MESSAGES`.
pub fn can_send(user: &User, stream_id: u32, topic_id: u32) -> bool {
    global(user, |g| {
        g.send_messages || g.manage_streams || g.manage_topics
    }) || stream(user, stream_id, |s| {
        s.manage_stream || s.manage_topics || s.send_messages
    }) || topic(user, stream_id, topic_id, |t| {
        t.manage_topic || t.send_messages
    })
}

/// `GET_PARTITION_ROUTE`: whoever may send to or poll the topic.
pub fn can_route(user: &User, stream_id: u32, topic_id: u32) -> bool {
    can_send(user, stream_id, topic_id) || can_poll(user, stream_id, topic_id)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::metadata::UserStatus;

    fn user(id: u32, permissions: Option<Permissions>) -> User {
        User {
            id,
            username: String::from("someone"),
            password_hash: String::new(),
            status: UserStatus::Active,
            permissions,
            created_at: 0,
            tokens: BTreeMap::new(),
        }
    }

    #[test]
    fn root_may_do_everything_and_nobody_else_by_default() {
        let root = user(ROOT_USER_ID, None);
        let plain = user(1, None);
        assert!(can_create_stream(&root) && can_manage_users(&root) && can_poll(&root, 3, 4));
        assert!(!can_create_stream(&plain) && !can_read_users(&plain) && !can_poll(&plain, 3, 4));
        assert!(can_change_password(&plain, 1) && !can_change_password(&plain, 2));
    }

    #[test]
    fn topic_flags_cover_only_their_topic() {
        let mut permissions = Permissions::default();
        let mut stream = StreamPermissions::default();
        let topic = TopicPermissions {
            send_messages: true,
            ..TopicPermissions::default()
        };
        stream.topics.insert(2, topic);
        permissions.streams.insert(5, stream);
        let sender = user(1, Some(permissions));
        assert!(can_send(&sender, 5, 2) && can_route(&sender, 5, 2));
        assert!(!can_send(&sender, 5, 3) && !can_poll(&sender, 5, 2));
        assert!(!can_read_topic(&sender, 5, 2) && !can_manage_topic(&sender, 5, 2));
    }

    #[test]
    fn stream_flags_cover_every_topic() {
        let mut permissions = Permissions::default();
        let stream = StreamPermissions {
            read_stream: true,
            ..StreamPermissions::default()
        };
        permissions.streams.insert(5, stream);
        let reader = user(1, Some(permissions));
        assert!(can_read_stream(&reader, 5) && can_poll(&reader, 5, 9));
        assert!(can_use_groups(&reader, 5, 9) && !can_send(&reader, 5, 9));
        assert!(!can_read_stream(&reader, 6) && !can_list_streams(&reader));
    }
}
