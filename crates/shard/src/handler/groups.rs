//! The consumer-group family (600–606, PROTOCOL.md §4.9): groups themselves are metadata
//! (create/delete go through `server.commit`); membership, assignment and generations live in
//! the data plane's [`crate::data::GroupRuntime`]s, keyed by the header's VSR client id.

use proto::codec::WireName;
use proto::commands::Empty;
use proto::commands::Request;
use proto::commands::groups::{
    ConsumerGroupAssignment, ConsumerGroupDetails, ConsumerGroupMember, ConsumerGroupResponse,
    ConsumerGroups, SyncConsumerGroup,
};
use proto::header::{Operation, RequestHeader};
use proto::primitives::Identifier;

use crate::connection::Connection;
use crate::data::{DataPlane, GroupKey, GroupRuntime, resolve_group, resolve_topic};
use crate::metadata::{Metadata, MetadataOp};
use crate::outcome::{Body, Outcome};
use crate::refusal::{Missing, Refusal, Taken};
use crate::server::Server;

pub(crate) async fn handle(
    server: &Server,
    _connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let operation = header.operation().unwrap_or(Operation::NonReplicated);
    let commit = server.metadata.borrow().commit;
    let (client_id, now) = (header.client.get(), server.now_us());
    let origin = crate::retries::Origin::of(client_id, header.request.get());
    let result = match request {
        Request::GetConsumerGroup(get) => {
            let metadata = server.metadata.borrow();
            group_key(&metadata, &get.stream_id, &get.topic_id, &get.group_id).map(|key| {
                key.ok()
                    .and_then(|key| details(&metadata, &server.data, key))
                    .map_or(Body::Empty, |details| Body::Value(Box::new(details)))
            })
        }
        Request::GetConsumerGroups(list) => {
            let metadata = server.metadata.borrow();
            list_groups(&metadata, &server.data, &list.stream_id, &list.topic_id)
                .map(|groups| Body::Value(Box::new(groups)))
        }
        Request::CreateConsumerGroup(create) => {
            let (stream, topic) = (&create.stream_id, &create.topic_id);
            let created = create_group(server, origin, (stream, topic), &create.name).await;
            return committed_or_refused(server, operation, created, commit);
        }
        Request::DeleteConsumerGroup(delete) => {
            let deleted = if let Some((_, commit)) = server.committed_change(origin) {
                // A retry whose first attempt deleted the group: answered as that one was.
                Ok(commit)
            } else {
                let check = |metadata: &Metadata| {
                    let (stream, topic) = (&delete.stream_id, &delete.topic_id);
                    let key = group_key(metadata, stream, topic, &delete.group_id)??;
                    Ok(MetadataOp::DeleteConsumerGroup {
                        stream_id: key.stream_id,
                        topic_id: key.topic_id,
                        id: key.group_id,
                    })
                };
                let committed = server.commit_validated(origin, check).await;
                committed.map(|(_, commit)| commit)
            };
            let deleted = deleted.map(|commit| (Body::Value(Box::new(Empty)), commit));
            return committed_or_refused(server, operation, deleted, commit);
        }
        Request::SyncConsumerGroup(sync) => sync_member(server, sync, client_id, now).await,
        request @ (Request::JoinConsumerGroup(_) | Request::LeaveConsumerGroup(_)) => {
            membership(server, request, client_id, now)
        }
        _ => Err(Refusal::Malformed),
    };
    match result {
        Ok(body) => Outcome::with_body(operation, body, commit),
        Err(refusal) => Outcome::refused(operation, refusal, commit),
    }
}

/// The answer to a group created or deleted: its body and the commit that made it, or the
/// refusal at `commit`, the one before the request.
fn committed_or_refused(
    server: &Server,
    operation: Operation,
    result: Result<(Body, u64), Refusal>,
    commit: u64,
) -> Outcome {
    match result {
        Ok((body, committed)) => super::commit::committed_reply(server, operation, body, committed),
        Err(refusal) => Outcome::refused(operation, refusal, commit),
    }
}

/// How long a `SYNC` waits for partitions being handed to its caller.
const SYNC_HANDOFF_WAIT_US: u64 = 500_000;
/// How often the waiting `SYNC` looks again (the leader checks hand-offs as often).
const SYNC_HANDOFF_RECHECK_US: u64 = 10_000;

/// Holds a `SYNC` (at most [`SYNC_HANDOFF_WAIT_US`]) while partitions are being handed to
/// its caller, so the reply names them. The SDKs poll only what `SYNC` names and sync again
/// at their next heartbeat (5 s), so a member that joined while its partitions were still
/// in flight at their old owners read nothing from them for up to 5 s (iggy-bench's
/// end-to-end consumer groups: messages of up to 4.9 s). Naming them before they move
/// would not do: their polls are refused until then, and the 0.11.1-edge.9 reader backs off
/// from such a refusal for seconds, a 0.11.0 client restarts its round-robin on it.
async fn await_incoming(server: &Server, sync: &SyncConsumerGroup, client_id: u128, now: u64) {
    let key = {
        let metadata = server.metadata.borrow();
        group_key(&metadata, &sync.stream_id, &sync.topic_id, &sync.group_id)
    };
    let Ok(Ok(key)) = key else {
        return;
    };
    let deadline = now.saturating_add(SYNC_HANDOFF_WAIT_US);
    while server
        .data
        .with_group(key, |group| group.has_incoming(client_id))
        == Some(true)
    {
        let now = server.now_us();
        if now >= deadline {
            return;
        }
        let next = now.saturating_add(SYNC_HANDOFF_RECHECK_US).min(deadline);
        server.node.clock.sleep_until(next).await;
    }
}

/// `SYNC` (606), once the partitions on their way to the caller arrived or stopped being
/// waited for ([`await_incoming`]).
async fn sync_member(
    server: &Server,
    sync: SyncConsumerGroup,
    client_id: u128,
    now: u64,
) -> Result<Body, Refusal> {
    await_incoming(server, &sync, client_id, now).await;
    let request = Request::SyncConsumerGroup(sync);
    membership(server, request, client_id, server.now_us())
}

/// `JOIN` (604), `LEAVE` (605) and `SYNC` (606): the caller's membership.
fn membership(
    server: &Server,
    request: Request<'_>,
    client_id: u128,
    now: u64,
) -> Result<Body, Refusal> {
    match request {
        Request::JoinConsumerGroup(join) => {
            let key = {
                let metadata = server.metadata.borrow();
                group_key(&metadata, &join.stream_id, &join.topic_id, &join.group_id)
            };
            key.and_then(|key| key).and_then(|key| {
                server
                    .data
                    .change_group(key, |group| group.join(client_id, now))
                    .ok_or(Refusal::Missing(Missing::Group))
                    .map(|_| Body::Value(Box::new(Empty)))
            })
        }
        Request::LeaveConsumerGroup(leave) => {
            let key = {
                let metadata = server.metadata.borrow();
                group_key(
                    &metadata,
                    &leave.stream_id,
                    &leave.topic_id,
                    &leave.group_id,
                )
            };
            key.and_then(|key| key).and_then(|key| {
                server
                    .data
                    .change_group(key, |group| group.leave(client_id, now))
                    .unwrap_or(Err(Refusal::Missing(Missing::Group)))
                    .map(|()| Body::Value(Box::new(Empty)))
            })
        }
        Request::SyncConsumerGroup(sync) => {
            let key = {
                let metadata = server.metadata.borrow();
                group_key(&metadata, &sync.stream_id, &sync.topic_id, &sync.group_id)
            };
            let config = server.data.group_config();
            key.map(|key| {
                let assignment = key.ok().and_then(|key| {
                    server.data.change_group(key, |group| {
                        let partition_ids = group.sync(client_id, now, &config)?;
                        Some(ConsumerGroupAssignment {
                            generation: group.generation(),
                            partition_ids,
                        })
                    })?
                });
                assignment.map_or(Body::Empty, |reply| Body::Value(Box::new(reply)))
            })
        }
        _ => Err(Refusal::Malformed),
    }
}

/// The group's key; the outer error is a missing stream/topic, the inner one an unknown
/// group (some commands answer that with an empty body rather than a status).
fn group_key(
    metadata: &Metadata,
    stream: &Identifier,
    topic: &Identifier,
    group: &Identifier,
) -> Result<Result<GroupKey, Refusal>, Refusal> {
    let (stream_id, topic) = resolve_topic(metadata, stream, topic)?;
    Ok(resolve_group(topic, group)
        .map(|group_id| GroupKey {
            stream_id,
            topic_id: topic.id,
            group_id,
        })
        .ok_or(Refusal::Missing(Missing::Group)))
}

fn details(metadata: &Metadata, data: &DataPlane, key: GroupKey) -> Option<ConsumerGroupDetails> {
    let topic = metadata
        .streams
        .get(&key.stream_id)?
        .topics
        .get(&key.topic_id)?;
    let group = topic.groups.get(&key.group_id)?;
    let members = data
        .with_group(key, GroupRuntime::members)
        .unwrap_or_default();
    Some(ConsumerGroupDetails {
        group: ConsumerGroupResponse {
            id: group.id,
            partitions_count: u32::try_from(topic.partitions.len()).unwrap_or(u32::MAX),
            members_count: u32::try_from(members.len()).unwrap_or(u32::MAX),
            name: WireName::new(group.name.clone())?,
        },
        members: members
            .into_iter()
            .map(|member| ConsumerGroupMember {
                id: member.slot,
                partition_ids: member.partitions,
            })
            .collect(),
    })
}

fn list_groups(
    metadata: &Metadata,
    data: &DataPlane,
    stream: &Identifier,
    topic: &Identifier,
) -> Result<ConsumerGroups, Refusal> {
    let (stream_id, topic) = resolve_topic(metadata, stream, topic)?;
    let groups = topic
        .groups
        .keys()
        .filter_map(|group_id| {
            let key = GroupKey {
                stream_id,
                topic_id: topic.id,
                group_id: *group_id,
            };
            details(metadata, data, key).map(|details| details.group)
        })
        .collect();
    Ok(ConsumerGroups(groups))
}

/// Creates the group, or answers a retry of a create that committed (cluster mode) as
/// its first attempt was.
async fn create_group(
    server: &Server,
    origin: Option<crate::retries::Origin>,
    (stream, topic): (&Identifier, &Identifier),
    name: &WireName,
) -> Result<(Body, u64), Refusal> {
    if let Some((first, commit)) = server.committed_change(origin) {
        return group_created(server, &first, commit);
    }
    let check = |metadata: &Metadata| {
        let (stream_id, topic) = resolve_topic(metadata, stream, topic)?;
        if topic
            .groups
            .values()
            .any(|group| group.name == name.as_str())
        {
            return Err(Refusal::Taken(Taken::GroupName));
        }
        Ok(MetadataOp::CreateConsumerGroup {
            stream_id,
            topic_id: topic.id,
            id: topic.next_group_id,
            name: name.as_str().to_owned(),
            created_at: server.now_us(),
        })
    };
    let (op, commit) = server.commit_validated(origin, check).await?;
    // A retry validated before its first attempt applied committed as nothing: the group
    // is the first attempt's.
    let applied = server
        .committed_change(origin)
        .map_or(op, |(first, _)| first);
    group_created(server, &applied, commit)
}

/// The reply to the create `op`, committed as `commit`: the group's details.
fn group_created(server: &Server, op: &MetadataOp, commit: u64) -> Result<(Body, u64), Refusal> {
    let MetadataOp::CreateConsumerGroup {
        stream_id,
        topic_id,
        id,
        ..
    } = *op
    else {
        return Err(Refusal::Internal);
    };
    let metadata = server.metadata.borrow();
    let key = GroupKey {
        stream_id,
        topic_id,
        group_id: id,
    };
    let details = details(&metadata, &server.data, key).ok_or(Refusal::Internal)?;
    Ok((Body::Value(Box::new(details)), commit))
}
