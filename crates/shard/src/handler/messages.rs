//! The message family: `SEND_MESSAGES` (101), `POLL_MESSAGES` (100), `POLL_MESSAGES_DEFERRED`
//! (106) and `FETCH_MESSAGES` (109). Planning runs against a short borrow of the metadata;
//! the I/O runs on the partition tasks of [`crate::data::DataPlane`] afterwards.
//!
//! Parked requests (106, 109) register with [`Server::park`] under (client id, request
//! number), so a `CANCEL_DEFERRED_REQUEST` (108) ends them early.

use std::ops::Range;
use std::sync::Arc;

use proto::commands::Request;
use proto::commands::messages::SendMessages;
use proto::header::{Operation, PartitionContext, RequestHeader};
use proto::primitives::Identifier;
use segment::partition::AppendBuffer;

use crate::affinity::Affinity;
use crate::connection::Connection;
use crate::data::{PartitionKey, PollRefusal, PollRequest, Polled, SendPlan};
use crate::metadata::User;
use crate::metadata::permissions::{self, can_poll, can_send};
use crate::outcome::Outcome;
use crate::refusal::{Refusal, Unavailable};
use crate::reply_budget::{ReplyPermits, ReplyRoom};
use crate::server::Server;

/// Budget of a `POLL_MESSAGES` (100) reply, which carries none of its own.
const POLL_BYTES_DEFAULT: u64 = crate::data::REPLY_RECORD_BYTES_MAX;

/// The most record bytes one poll of an HTTP connection reads: its reply becomes JSON with
/// every payload in base64 and every header spelled out, up to about four times as large
/// (1-byte messages: 65 bytes each as records, about 240 as JSON), and is built whole
/// before it is written.
const HTTP_POLL_BYTES_MAX: u64 = 4 << 20;

/// The most record bytes a poll of `connection` may read, at most `asked`.
fn poll_bytes(connection: &Connection, asked: u64) -> u64 {
    let most = if connection.transport == crate::connection::TransportKind::Http {
        HTTP_POLL_BYTES_MAX
    } else {
        crate::data::REPLY_RECORD_BYTES_MAX
    };
    asked.min(most)
}

/// `41 Unauthorized` unless the connection's user may do `allowed` on the named topic
/// (PROTOCOL.md §7.5); an unknown stream or topic passes, so the plan refuses it with its
/// own code.
pub(crate) fn check_topic_access(
    server: &Server,
    connection: &Connection,
    stream: &Identifier,
    topic: &Identifier,
    allowed: fn(&User, u32, u32) -> bool,
) -> Result<(), Refusal> {
    let metadata = server.metadata.borrow();
    let Ok((stream, topic)) = metadata.topic(stream, topic) else {
        return Ok(());
    };
    let user = connection
        .user_id()
        .and_then(|id| metadata.users.get(&id))
        .ok_or(Refusal::Unauthenticated)?;
    permissions::require(allowed(user, stream.id, topic.id))
}

pub(crate) async fn handle(
    server: &Server,
    connection: &mut Connection,
    header: &RequestHeader,
    request: Request<'_>,
) -> Outcome {
    let operation = header.operation().unwrap_or(Operation::NonReplicated);
    let commit = server.metadata.borrow().commit;
    let client_id = match acting_client(server, connection, header, &request) {
        Ok(client_id) => client_id,
        Err(refusal) => return Outcome::refused(operation, refusal, commit),
    };
    let context = partition_context(header);
    let dialect = connection.dialect;
    let number = header.request.get();
    let access = check_access(server, connection, &request);
    if let Err(refusal) = access {
        return Outcome::refused(operation, refusal, commit);
    }
    match request {
        // The pipeline takes sends before dispatch (`prepare_send`), so it can hand the
        // partition the body's own block; one reaching here is appended from a copy.
        Request::SendMessages(send) => {
            let batch = send.batch.as_bytes().to_vec();
            match prepare_send(server, connection, header, &send, send.batch.as_bytes()) {
                Ok(prepared) => append_prepared(server, prepared, batch.into()).await,
                Err(refusal) => Outcome::refused(operation, refusal, commit),
            }
        }
        Request::PollMessages(selector) => {
            let request = PollRequest {
                selector: &selector,
                client_id,
                dialect,
                context,
                max_bytes: poll_bytes(connection, POLL_BYTES_DEFAULT),
            };
            let _replies = reply_room(server, connection, request.max_bytes)
                .take()
                .await;
            let affinity = &mut connection.affinity;
            poll(server, operation, commit, &request, None, number, affinity).await
        }
        Request::PollMessagesDeferred(deferred) => {
            let request = PollRequest {
                selector: &deferred.selector,
                client_id,
                dialect,
                context,
                max_bytes: poll_bytes(connection, u64::from(deferred.max_bytes)),
            };
            // Reply room is taken only while the poll reads and answers, not while it waits
            // for messages (`ReplyRoom`).
            let room = reply_room(server, connection, request.max_bytes);
            let wait = Some((deferred.min_count, deferred.wait_us, &room));
            let affinity = &mut connection.affinity;
            poll(server, operation, commit, &request, wait, number, affinity).await
        }
        Request::FetchMessages(fetch) => {
            // What a fetch reads at most, whatever its `max_bytes` asks.
            let bytes = u64::from(fetch.max_bytes).min(crate::data::REPLY_RECORD_BYTES_MAX);
            let room = reply_room(server, connection, bytes);
            let request = (&fetch, client_id, number);
            fetch_messages(server, operation, commit, request, &room).await
        }
        Request::FlushUnsavedBuffer(_) => flush_unsaved_buffer(operation, commit),
        _ => Outcome::refused(operation, Refusal::Malformed, commit),
    }
}

/// The client a request acts as: a data connection attached to a session polls a consumer
/// group as that session's client (`routing`); anything else is the request's own.
fn acting_client(
    server: &Server,
    connection: &Connection,
    header: &RequestHeader,
    request: &Request<'_>,
) -> Result<u128, Refusal> {
    let consumer = match request {
        Request::PollMessages(selector) => Some(&selector.consumer),
        Request::PollMessagesDeferred(deferred) => Some(&deferred.selector.consumer),
        _ => None,
    };
    super::routing::consumer_client(server, connection, header, consumer)
}

/// The partition context a request's header carries (§2.9).
fn partition_context(header: &RequestHeader) -> PartitionContext {
    PartitionContext {
        incarnation: header.partition_incarnation.get(),
        owner_generation: header.owner_generation.get(),
        metadata_op: header.minimum_metadata_op.get(),
    }
}

/// The 0.11.0 `FLUSH_UNSAVED_BUFFER` (§12.2), answered `5` as the reference does. Nothing
/// waits in a buffer here anyway: an acknowledged send has reached the kernel (or the disk,
/// by its topic's durability).
fn flush_unsaved_buffer(operation: Operation, commit: u64) -> Outcome {
    Outcome::refused(
        operation,
        Refusal::Unavailable(Unavailable::Feature),
        commit,
    )
}

/// Room for a reply of up to `bytes` in the connection's budget, then in the server's: a
/// plain poll takes it before it reads, a read that may wait for each read
/// ([`ReplyRoom`]); either holds it until the reply is handed to the transport.
fn reply_room(server: &Server, connection: &Connection, bytes: u64) -> ReplyRoom {
    let budgets = vec![
        Arc::clone(&connection.replies),
        Arc::clone(&server.node.replies),
    ];
    ReplyRoom::new(budgets, bytes)
}

/// The §7.5 check of a message command: send needs `can_send`, the polls `can_poll`.
fn check_access(
    server: &Server,
    connection: &Connection,
    request: &Request<'_>,
) -> Result<(), Refusal> {
    match request {
        Request::SendMessages(send) => check_topic_access(
            server,
            connection,
            &send.stream_id,
            &send.topic_id,
            can_send,
        ),
        Request::PollMessages(selector) => check_topic_access(
            server,
            connection,
            &selector.stream_id,
            &selector.topic_id,
            can_poll,
        ),
        Request::PollMessagesDeferred(deferred) => {
            let selector = &deferred.selector;
            check_topic_access(
                server,
                connection,
                &selector.stream_id,
                &selector.topic_id,
                can_poll,
            )
        }
        Request::FetchMessages(fetch) => check_topic_access(
            server,
            connection,
            &fetch.stream_id,
            &fetch.topic_id,
            can_poll,
        ),
        _ => Ok(()),
    }
}

/// `41 Unauthorized` for a batch whose idempotent producer id was minted by a live session of
/// another user: ids are `session << 20 | index` (PROTOCOL.md §1.7), so one user cannot write
/// as another's producer and fence or forge its sequence. The SDK keeps an id across its own
/// sessions (a reconnect, a restart of the server), so an id whose session is not live, or
/// is the caller's user's, passes.
fn check_producer(
    server: &Server,
    connection: &Connection,
    send: &SendMessages<'_>,
) -> Result<(), Refusal> {
    let (Some(producer), Some(user_id)) = (send.batch.producer(), connection.user_id()) else {
        return Ok(());
    };
    let minted_by = producer.producer_id >> PRODUCER_INDEX_BITS;
    let owner = server.node.session_owners.pin().get(&minted_by).copied();
    match owner {
        Some(owner) if owner != user_id => {
            log::info!(
                "client {}: producer id {:#x} belongs to a session of user {owner}",
                connection.client_number,
                producer.producer_id
            );
            Err(Refusal::Forbidden)
        }
        _ => Ok(()),
    }
}

/// Bits of a producer id below its session number.
const PRODUCER_INDEX_BITS: u32 = 20;

/// `FETCH_MESSAGES` (109): plan, then wait (cancellable) for the sections.
async fn fetch_messages(
    server: &Server,
    operation: Operation,
    commit: u64,
    (fetch, client_id, number): (&proto::commands::messages::FetchMessages, u128, u64),
    room: &ReplyRoom,
) -> Outcome {
    let plan = {
        let metadata = server.metadata.borrow();
        server.data.plan_fetch(&metadata, fetch, client_id)
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(refusal) => return Outcome::refused(operation, refusal, commit),
    };
    let parked = server.park(client_id, number);
    match server.data.fetch(&plan, &parked.cancel, room).await {
        // The permits are held until the reply is encoded for the transport.
        Ok((fetched, _permits)) => {
            Outcome::encoded(operation, fetched.encode(), Vec::new(), commit)
        }
        Err(error) => Outcome::refused(operation, error.refusal(), commit),
    }
}

/// A send checked and planned, waiting for its batch record: the pipeline appends it once
/// the decoded request no longer borrows the body, handing the partition the body's own pool
/// block when it has one ([`crate::Server::handle_pooled`]) and a copy otherwise.
pub(crate) struct PreparedSend {
    plan: SendPlan,
    /// Where the batch record lies in the request body.
    pub(crate) batch: Range<usize>,
    operation: Operation,
    commit: u64,
    /// The send's SDK identity (cluster mode dedupes a retry by it).
    origin: Option<crate::retries::Origin>,
}

/// The checks and the plan of a `SEND_MESSAGES` (101) whose caller passed
/// [`super::authorize_caller`].
pub(crate) fn prepare_send(
    server: &Server,
    connection: &Connection,
    header: &RequestHeader,
    send: &SendMessages<'_>,
    body: &[u8],
) -> Result<PreparedSend, Refusal> {
    let operation = header.operation().unwrap_or(Operation::NonReplicated);
    let commit = server.metadata.borrow().commit;
    check_topic_access(
        server,
        connection,
        &send.stream_id,
        &send.topic_id,
        can_send,
    )?;
    check_producer(server, connection, send)?;
    let incarnation = header.partition_incarnation.get();
    let plan = {
        let metadata = server.metadata.borrow();
        server.data.plan_send(&metadata, send, incarnation)?
    };
    let batch = range_within(body, send.batch.as_bytes()).ok_or(Refusal::Internal)?;
    Ok(PreparedSend {
        plan,
        batch,
        operation,
        commit,
        origin: crate::retries::Origin::of(header.client.get(), header.request.get()),
    })
}

impl PreparedSend {
    /// The partition the send goes to.
    pub(crate) fn key(&self) -> PartitionKey {
        self.plan.key
    }
}

/// Appends a prepared send's batch record and confirms it.
pub(crate) async fn append_prepared(
    server: &Server,
    prepared: PreparedSend,
    batch: AppendBuffer,
) -> Outcome {
    let PreparedSend {
        plan,
        operation,
        commit,
        origin,
        ..
    } = prepared;
    // Sealed here, on the receiving shard, so the replica log and the segment alike hold
    // only the sealed form.
    let batch = match server.data.seal_send(batch) {
        Ok(batch) => batch,
        Err(refusal) => return Outcome::refused(operation, refusal, commit),
    };
    if let Some(replication) = server.replication() {
        let send = (plan, origin);
        return append_replicated(server, replication, send, &batch, operation, commit).await;
    }
    match server.data.send(&plan, batch, server.now_us()).await {
        Ok(confirmations) => Outcome::value(operation, confirmations, commit),
        Err(error) => Outcome::refused(operation, error.refusal(), commit),
    }
}

/// Cluster mode: the append is replicated with the time and partition decided here, and
/// confirmed once this node has applied it (after a quorum wrote it; synced by the quorum
/// for a `persisted` topic).
async fn append_replicated(
    server: &Server,
    replication: &crate::server::Replication,
    (plan, origin): (SendPlan, Option<crate::retries::Origin>),
    batch: &[u8],
    operation: Operation,
    commit: u64,
) -> Outcome {
    let persisted = {
        let metadata = server.metadata.borrow();
        let topic = metadata
            .streams
            .get(&plan.key.stream_id)
            .and_then(|stream| stream.topics.get(&plan.key.topic_id));
        topic.is_some_and(|topic| topic.settings.durability == segment::log::Durability::Persisted)
    };
    let append = crate::cluster::AppendRef {
        key: plan.key,
        now_us: server.now_us(),
        producer: plan.producer,
        origin,
        batch,
    };
    match replication.submit_append(append, persisted).await {
        Ok(crate::cluster::Applied::Appended(confirmations, op)) => {
            Outcome::value(operation, confirmations, commit).committed(op)
        }
        Ok(_) => Outcome::refused(operation, Refusal::Internal, commit),
        Err(refusal) => Outcome::refused(operation, refusal, commit),
    }
}

/// Cluster mode: a poll's auto-commit, replicated after the read. The messages count as
/// consumed only once their offset is; a group's offset only moves forward.
async fn commit_replicated(
    server: &Server,
    plan: &crate::data::PollPlan,
    owner: segment::offsets::OffsetOwner,
    last: u64,
) -> Result<(), Refusal> {
    let Some(replication) = server.replication() else {
        return Ok(());
    };
    let op = crate::cluster::ReplicatedOp::StoreOffset {
        key: plan.key,
        owner,
        offset: last,
        forward_only: plan.group.is_some(),
    };
    let synced = super::offsets::offsets_synced(server, plan.key);
    replication.submit(&op, synced).await.map(|_| ())
}

/// Where `part`, a subslice of `whole`, lies in it; `None` if it is not one.
fn range_within(whole: &[u8], part: &[u8]) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}

/// Plans and runs a poll; `wait` = (`min_count`, `wait_us`, its reply room in the
/// connection's and the server's budgets) for a deferred one. The
/// partition's owner is noted in `affinity`.
async fn poll(
    server: &Server,
    operation: Operation,
    commit: u64,
    request: &PollRequest<'_>,
    wait: Option<(u32, u64, &ReplyRoom)>,
    request_number: u64,
    affinity: &mut Affinity,
) -> Outcome {
    let plan = {
        let metadata = server.metadata.borrow();
        server.data.plan_poll(&metadata, request)
    };
    let mut plan = match plan {
        Ok(plan) => {
            affinity.note(server.place().owner(plan.key));
            plan
        }
        Err(PollRefusal::Status(refusal)) => return Outcome::refused(operation, refusal, commit),
        Err(PollRefusal::Empty { partition_id }) => {
            let body = Polled::empty(partition_id).encode(request.dialect);
            return Outcome::encoded(operation, body, Vec::new(), commit);
        }
    };
    // Cluster mode: an auto-commit is replicated after the read instead of stored by it.
    let replicated_commit = if server.replication().is_some() {
        plan.auto_commit.take()
    } else {
        None
    };
    // A deferred poll's permits for its reply room, held until the reply is encoded.
    let (polled, _permit) = match wait {
        Some((min_count, wait_us, room)) => {
            let parked = server.park(request.client_id, request_number);
            let deferred = (min_count, wait_us);
            match server
                .data
                .poll_deferred(&plan, deferred, &parked.cancel, room)
                .await
            {
                Ok((polled, permits)) => (Ok(polled), permits),
                Err(error) => (Err(error), ReplyPermits::default()),
            }
        }
        None => (server.data.poll(&plan).await, ReplyPermits::default()),
    };
    if let (Some(owner), Ok(polled)) = (replicated_commit, &polled)
        && let Some(last) = polled.records.last_offset
        && let Err(refusal) = commit_replicated(server, &plan, owner, last).await
    {
        return Outcome::refused(operation, refusal, commit);
    }
    match polled {
        Ok(polled) => {
            let (head, records) = polled.into_head_and_records(request.dialect);
            Outcome::encoded(operation, head, records, commit)
        }
        Err(error) => Outcome::refused(operation, error.refusal(), commit),
    }
}
