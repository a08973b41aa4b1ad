//! The request pipeline every command shares: header validation for the connection's
//! dialect, what an unauthenticated connection may send (PROTOCOL.md §1.9), the session
//! checks, body decoding, and where the request is answered — here, or on the metadata
//! sequencer ([`super::route`]) — before its family in [`super::dispatch`] handles it.

use proto::codes::CommandCode;
use proto::commands::Request;
use proto::header::{EvictionReason, HEADER_SIZE, Operation, RequestHeader};
use proto::{DecodeError, Subject};

use super::messages::PreparedSend;
use crate::connection::{BoundSession, ClientRecord, Connection};
use crate::mail::{Forwarded, ShardMessage};
use crate::metadata::auth::IdentityLost;
use crate::metrics::RequestSpan;
use crate::outcome::Outcome;
use crate::refusal::Refusal;
use crate::server::Server;

/// What the pipeline made of a frame: an outcome, or a send ready for its batch bytes.
enum Handled {
    Done(Outcome),
    Send(PreparedSend),
}

impl From<Outcome> for Handled {
    fn from(outcome: Outcome) -> Self {
        Self::Done(outcome)
    }
}

/// Logs a refused request at debug level: what a client was told, to follow its retries.
fn log_refusal(connection: &Connection, outcome: &Outcome) {
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    let Outcome::Reply(reply) = outcome else {
        return;
    };
    let ((Some(refusal), _) | (None, crate::outcome::Body::Refused(refusal))) =
        (&reply.status, &reply.body)
    else {
        return;
    };
    log::debug!(
        "client {}: {:?} refused: {refusal:?}",
        connection.client_number,
        reply.operation
    );
}

impl Server {
    /// Handles one request frame from `connection`: `header` is the raw 256-byte header
    /// whose frame prefix the transport checked. A send's batch is copied out of `body`.
    pub async fn handle(
        &self,
        connection: &mut Connection,
        raw_header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Outcome {
        let started_us = self.request_started();
        let outcome = self.handle_unmeasured(connection, raw_header, body).await;
        self.request_done(connection, raw_header, started_us, &outcome);
        outcome
    }

    /// As [`Self::handle`], without recording the request's latency: for a request another
    /// shard forwarded here, which that shard measures whole.
    pub(crate) async fn handle_unmeasured(
        &self,
        connection: &mut Connection,
        raw_header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Outcome {
        let outcome = match self.handle_frame(connection, raw_header, body).await {
            Handled::Done(outcome) => outcome,
            Handled::Send(prepared) => {
                let batch = body.get(prepared.batch.clone()).unwrap_or_default();
                super::messages::append_prepared(self, prepared, batch.to_vec().into()).await
            }
        };
        self.note_user(connection);
        log_refusal(connection, &outcome);
        outcome
    }

    /// As [`Self::handle`] for a body read into the shard's pool: a send hands the body's
    /// block itself to the partition's task (on whichever shard owns the partition), which
    /// stamps and writes the batch where it landed, without a copy.
    pub async fn handle_pooled(
        &self,
        connection: &mut Connection,
        raw_header: &[u8; HEADER_SIZE],
        body: pool::Buffer,
    ) -> Outcome {
        let started_us = self.request_started();
        let outcome = match self.handle_frame(connection, raw_header, &body).await {
            Handled::Done(outcome) => outcome,
            Handled::Send(prepared) => {
                let batch = body.into_send(prepared.batch.clone());
                super::messages::append_prepared(self, prepared, batch.into()).await
            }
        };
        self.request_done(connection, raw_header, started_us, &outcome);
        self.note_user(connection);
        log_refusal(connection, &outcome);
        outcome
    }

    /// The time a request arrived, when metrics record or spans are traced (`None`
    /// otherwise: no clock read).
    fn request_started(&self) -> Option<u64> {
        let wanted = self.metrics().enabled() || self.node.spans.get().is_some();
        wanted.then(|| self.now_us())
    }

    /// Records the request's latency under its command and the connection's transport, and
    /// hands it to the span sink; a frame whose header names no known command is neither.
    fn request_done(
        &self,
        connection: &Connection,
        raw_header: &[u8; HEADER_SIZE],
        started: Option<u64>,
        outcome: &Outcome,
    ) {
        let Some(start_us) = started else { return };
        let Some(command) = RequestHeader::claimed_code(raw_header) else {
            return;
        };
        let end_us = self.now_us();
        if self.metrics().enabled() {
            let histogram = self
                .metrics()
                .request(command, connection.transport.index());
            histogram.record(end_us.saturating_sub(start_us));
        }
        if let Some(sink) = self.node.spans.get() {
            sink.request(RequestSpan {
                command,
                transport: connection.transport.label(),
                start_us,
                end_us,
                status: match outcome {
                    Outcome::Reply(reply) => reply.status_code(),
                    Outcome::Evict(_) => u32::MAX,
                    Outcome::Silent => 0,
                },
            });
        }
    }

    async fn handle_frame(
        &self,
        connection: &mut Connection,
        raw_header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Handled {
        connection.liveness.stamp(self.now_us());
        let header = match RequestHeader::parse(raw_header, header_dialect(connection, raw_header))
        {
            Ok(header) => header,
            Err(error) => {
                log::warn!(
                    "client {}: bad request header: {error}",
                    connection.client_number
                );
                let bound = connection.session.is_some();
                return Outcome::Evict(header_eviction(&error, bound)).into();
            }
        };
        self.handle_request(connection, raw_header, header, body)
            .await
    }

    /// Has the leader handle the request with a copy of the connection state, then takes
    /// back what the leader changed (a login's dialect and session, an attached session).
    async fn forward(
        &self,
        connection: &mut Connection,
        header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Outcome {
        let sequencer = self.node.sequencer();
        let answered = self
            .ask(sequencer, |reply| {
                ShardMessage::Forward(Box::new(Forwarded {
                    connection: connection.clone(),
                    header: *header,
                    body: body.to_vec(),
                    reply,
                }))
            })
            .await;
        match answered {
            Ok((outcome, remote)) => {
                connection.dialect = remote.dialect;
                connection.session = remote.session;
                connection.consumer_session = remote.consumer_session;
                outcome
            }
            Err(gone) => {
                log::warn!("client {}: {gone}", connection.client_number);
                Outcome::Evict(EvictionReason::SessionError)
            }
        }
    }

    /// A login (`Register`), answered on the leader. A bound connection may repeat its own
    /// Register (a lost reply); a new client id comes only after LOGOUT (§2.6).
    async fn register(
        &self,
        connection: &mut Connection,
        raw_header: &[u8; HEADER_SIZE],
        header: &RequestHeader,
        body: &[u8],
    ) -> Outcome {
        if let Some(bound) = connection.session
            && bound.client_id != header.client.get()
        {
            return Outcome::Evict(EvictionReason::SessionError);
        }
        if !self.place().is_leader() {
            return self.forward(connection, raw_header, body).await;
        }
        super::session::login(self, connection, header, body).await
    }

    /// `raw_header` is the frame's header as sent, `header` its parsed view.
    async fn handle_request(
        &self,
        connection: &mut Connection,
        raw_header: &[u8; HEADER_SIZE],
        header: &RequestHeader,
        body: &[u8],
    ) -> Handled {
        let operation = header
            .operation()
            .expect("RequestHeader::parse accepts known operations only");
        let commit = self.commit_number();
        let leader = self.place().is_leader();
        if operation == Operation::Register {
            return self
                .register(connection, raw_header, header, body)
                .await
                .into();
        }
        if let Some(bound) = connection.session
            && let Err(reason) = self.session_holds(bound, header.client.get())
        {
            log::info!(
                "client {}: session {} no longer holds: {reason:?}",
                connection.client_number,
                bound.session
            );
            connection.session = None;
            return Outcome::Evict(reason).into();
        }
        if let Some(bound) = connection.session
            && let Some(reason) = session_mismatch(header.session.get(), bound.session)
        {
            log::info!(
                "client {}: request for session {} on a link bound to {}: {reason:?}",
                connection.client_number,
                header.session.get(),
                bound.session
            );
            return Outcome::Evict(reason).into();
        }
        let code = header.code().and_then(CommandCode::from_u32);
        if connection.session.is_none()
            && let Some(outcome) = unauthenticated(operation, code, commit)
        {
            return outcome.into();
        }
        let Some(code) = code else {
            let raw = header.code.get();
            log::info!(
                "client {}: unknown command code {raw}",
                connection.client_number
            );
            return Outcome::refused(operation, Refusal::Malformed, commit).into();
        };
        let request = match Request::decode(code, body, request_dialect(connection, code)) {
            Ok(request) => request,
            Err(error) => {
                log::info!(
                    "client {}: undecodable {code:?}: {error}",
                    connection.client_number
                );
                return Outcome::refused(operation, Refusal::Undecodable(error), commit).into();
            }
        };
        if !leader && super::route::needs_leader(&request) {
            return self.forward(connection, raw_header, body).await.into();
        }
        self.route_decoded(connection, header, request, body).await
    }

    /// A decoded request this shard answers: a send is prepared for the pipeline to append
    /// (with the body's own block when it has one), everything else dispatched.
    async fn route_decoded(
        &self,
        connection: &mut Connection,
        header: &RequestHeader,
        request: Request<'_>,
        body: &[u8],
    ) -> Handled {
        if let Some(replication) = self.replication()
            && let Some(partition_plane) = crate::cluster::primary_only(&request)
            && let Some(refusal) = replication.refusal(partition_plane)
        {
            let operation = header.operation().unwrap_or(Operation::NonReplicated);
            return Outcome::refused(operation, refusal, self.commit_number()).into();
        }
        match super::prepare_send(self, connection, header, &request, body) {
            Some(Ok(prepared)) => {
                connection.affinity.note(self.place().owner(prepared.key()));
                Handled::Send(prepared)
            }
            Some(Err(outcome)) => outcome.into(),
            None => super::dispatch(self, connection, header, request)
                .await
                .into(),
        }
    }

    /// Whether the connection's bound session may still act, checked before every request:
    /// the session is live (not ended by a logout elsewhere, expiry or an eviction), the
    /// header's `client` is the id the connection registered or bound, and the session's user
    /// still exists and is active and its login token (if any) still valid. Deleting or
    /// deactivating a user, or deleting or expiry of its token, so takes effect at once.
    fn session_holds(&self, bound: BoundSession, client: u128) -> Result<(), EvictionReason> {
        let live = self.sessions.borrow().live(bound.client_id, bound.session);
        let entry = live.ok_or(EvictionReason::NoSession)?;
        if client != bound.client_id {
            return Err(EvictionReason::SessionError);
        }
        let metadata = self.metadata.borrow();
        let identity = metadata.session_identity(
            entry.user_id,
            entry.token.as_ref(),
            self.now_us(),
            &self.credentials,
        );
        identity.map_err(|lost| match lost {
            IdentityLost::UserGone => EvictionReason::NoSession,
            IdentityLost::UserInactive => EvictionReason::UserInactive,
            IdentityLost::TokenRevoked => EvictionReason::InvalidToken,
        })
    }

    /// The shard `connection` should move to now: its data requests keep reaching
    /// partitions that shard owns ([`crate::affinity`]).
    pub fn move_to(&self, connection: &Connection) -> Option<usize> {
        let here = self.place().index;
        connection
            .affinity
            .move_to(here)
            .filter(|&target| target < self.place().count)
    }

    /// Whether `connection` may move soon (its transport then reads frames in lockstep).
    pub fn may_move(&self, connection: &Connection) -> bool {
        connection.affinity.may_move(self.place().index)
    }

    fn note_user(&self, connection: &Connection) {
        let user_id = connection.user_id();
        let client_id = connection.session.map(|session| session.client_id);
        let clients = self.node.clients.pin();
        let stale = clients
            .get(&connection.client_number)
            .is_some_and(|record| record.user_id != user_id || record.client_id != client_id);
        if stale {
            // Only while the connection is registered: a closed one is not brought back.
            clients.update(connection.client_number, |record| ClientRecord {
                user_id,
                client_id,
                ..record.clone()
            });
        }
    }
}

/// What an unauthenticated connection gets instead of dispatch (§1.9), or `None` for the
/// codes it may send: `PING` and `BIND_SESSION`.
fn unauthenticated(
    operation: Operation,
    code: Option<CommandCode>,
    commit: u64,
) -> Option<Outcome> {
    match (operation, code) {
        (Operation::NonReplicated, Some(CommandCode::Ping | CommandCode::BindSession)) => None,
        (
            Operation::NonReplicated,
            Some(CommandCode::LoginUser | CommandCode::LoginWithPersonalAccessToken),
        ) => Some(Outcome::Evict(EvictionReason::MalformedLogin)),
        (Operation::NonReplicated, _) => Some(Outcome::refused(
            operation,
            Refusal::Unauthenticated,
            commit,
        )),
        _ => Some(Outcome::Evict(EvictionReason::NoSession)),
    }
}

/// The eviction for a request whose header names another session than the one its link is
/// bound to (§1.7): an older one is `SessionTooLow`; a newer one is not this link's
/// (`NoSession`). Session 0 is what an unbound request carries; the header check already
/// refuses it where a session is required.
pub(crate) fn session_mismatch(sent: u64, bound: u64) -> Option<EvictionReason> {
    match sent {
        0 => None,
        sent if sent == bound => None,
        sent if sent < bound => Some(EvictionReason::SessionTooLow),
        _ => Some(EvictionReason::NoSession),
    }
}

/// The eviction for a header that fails validation; a replicated request without a session
/// on an unauthenticated connection is the `NoSession` case of §1.9.
fn header_eviction(error: &DecodeError, bound: bool) -> EvictionReason {
    match error.subject {
        Subject::Operation => EvictionReason::InvalidRequestOperation,
        Subject::SessionNumber | Subject::RequestNumber if !bound => EvictionReason::NoSession,
        Subject::SessionNumber => EvictionReason::SessionTooLow,
        _ => EvictionReason::InvalidRequestBody,
    }
}

/// Byte of the request header holding its operation (PROTOCOL.md §1.2).
const OPERATION_AT: usize = 176;

/// The dialect a request's header and body are read in: the connection's, except that the
/// HTTP API's purge routes (PROTOCOL.md §8, kept from Iggy's API for the web UI and older
/// clients) reach the core as the retired purge operations, whose bodies are the same in
/// both dialects. Only the server's own HTTP edge makes such connections; a binary 0.12.2
/// client still cannot send a purge.
fn header_dialect(connection: &Connection, raw_header: &[u8; HEADER_SIZE]) -> proto::Dialect {
    let operation = Operation::from_u8(raw_header[OPERATION_AT]);
    let purge = matches!(
        operation,
        Some(Operation::PurgeStream | Operation::PurgeTopic)
    );
    purge_dialect(connection, purge)
}

/// The connection's dialect, or 0.11.0 for a purge on an HTTP connection.
fn purge_dialect(connection: &Connection, purge: bool) -> proto::Dialect {
    if purge && connection.transport == crate::connection::TransportKind::Http {
        proto::Dialect::V0_11_0
    } else {
        connection.dialect
    }
}

/// The dialect `code`'s body is decoded in ([`header_dialect`]'s rule).
fn request_dialect(connection: &Connection, code: CommandCode) -> proto::Dialect {
    let purge = matches!(code, CommandCode::PurgeStream | CommandCode::PurgeTopic);
    purge_dialect(connection, purge)
}
