//! The bridge between a transport and the shard: connection state lives in the shard, frames
//! go to [`Server::handle`], outcomes come back as transport answers.
//!
//! Requests of one connection run concurrently, so each works on a copy of the connection
//! state and writes back only what it changed (the dialect and session a login, bind or
//! logout sets, and where its data requests went); a long poll never holds a borrow across
//! its wait. A connection whose data requests keep reaching partitions of another shard is
//! moved there by the transport ([`shard::affinity`]); its state travels with it. A
//! connection is evicted between requests when the leader fires its liveness's eviction
//! signal.

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use proto::Dialect;
use proto::header::{EvictionReason, HEADER_SIZE};
use shard::{Connection, Outcome, Server, TransportKind};
use transport::{Answer, ConnectionHandler};

/// Serves the connections of one transport kind from one shard.
pub(crate) struct ShardHandler {
    pub(crate) server: Rc<Server>,
    pub(crate) transport: TransportKind,
}

/// A request body as the transport hands it over.
enum Body<'a> {
    Bytes(&'a [u8]),
    /// Read into the shard's pool: a send gives its block to the partition without a copy.
    Pooled(pool::Buffer),
}

impl ShardHandler {
    async fn answer(
        &self,
        connection: &RefCell<Connection>,
        body: Body<'_>,
        header: &[u8; HEADER_SIZE],
    ) -> Answer {
        let before = connection.borrow().clone();
        let mut local = before.clone();
        let outcome = match body {
            Body::Bytes(body) => self.server.handle(&mut local, header, body).await,
            Body::Pooled(body) => self.server.handle_pooled(&mut local, header, body).await,
        };

        // What a request may change of its connection: a login's dialect and session, the
        // partitions' shard it moves toward, the session `ATTACH_CONSUMER_SESSION` acts as.
        if local.dialect != before.dialect
            || local.session != before.session
            || local.affinity != before.affinity
            || local.consumer_session != before.consumer_session
        {
            let mut shared = connection.borrow_mut();
            shared.dialect = local.dialect;
            shared.session = local.session;
            shared.affinity = local.affinity;
            shared.consumer_session = local.consumer_session;
        }
        match outcome {
            // The edge's one binary encoding of the reply's typed body, in the dialect the
            // connection speaks after the request (a login sets it).
            Outcome::Reply(reply) => Answer::Reply {
                committed_op: reply.committed_op,
                operation: reply.operation,
                status: reply.status_code(),
                commit: reply.commit,
                body: reply.encode_body(local.dialect),
                tail: reply.tail,
            },
            Outcome::Evict(reason) => Answer::Evict(reason),
            Outcome::Silent => Answer::Silent,
        }
    }
}

impl ConnectionHandler for ShardHandler {
    type Connection = RefCell<Connection>;

    fn open(&self, peer: SocketAddr) -> RefCell<Connection> {
        RefCell::new(self.server.open_connection(peer, self.transport))
    }

    async fn handle(
        &self,
        connection: &RefCell<Connection>,
        header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Answer {
        self.answer(connection, Body::Bytes(body), header).await
    }

    async fn handle_pooled(
        &self,
        connection: &RefCell<Connection>,
        header: &[u8; HEADER_SIZE],
        body: pool::Buffer,
    ) -> Answer {
        self.answer(connection, Body::Pooled(body), header).await
    }

    fn move_to(&self, connection: &RefCell<Connection>) -> Option<usize> {
        self.server.move_to(&connection.borrow())
    }

    fn may_move(&self, connection: &RefCell<Connection>) -> bool {
        self.server.may_move(&connection.borrow())
    }

    fn detach(
        &self,
        connection: RefCell<Connection>,
    ) -> Result<Box<dyn Any + Send>, RefCell<Connection>> {
        Ok(Box::new(connection.into_inner()))
    }

    fn attach(&self, detached: Box<dyn Any + Send>) -> Option<RefCell<Connection>> {
        detached
            .downcast::<Connection>()
            .ok()
            .map(|connection| RefCell::new(*connection))
    }

    async fn replies_short(&self) {
        self.server.replies_short().await;
    }

    async fn metrics(&self) -> Option<String> {
        Some(self.server.scrape_metrics().await)
    }

    fn evicted(&self, connection: &RefCell<Connection>) -> impl Future<Output = EvictionReason> {
        // The record's liveness, which the leader's tick fires for a stale client.
        let liveness = Arc::clone(&connection.borrow().liveness);
        async move { liveness.eviction().fired().await }
    }

    fn dialect(&self, connection: &RefCell<Connection>) -> Dialect {
        connection.borrow().dialect
    }

    fn authenticated(&self, connection: &RefCell<Connection>) -> bool {
        connection.borrow().session.is_some()
    }

    fn close(&self, connection: RefCell<Connection>) {
        let connection = connection.into_inner();
        self.server.close_connection(&connection);
        if let Some(bound) = connection.session {
            let server = Rc::clone(&self.server);
            compio::runtime::spawn(async move {
                server.connection_closed(bound.client_id).await;
            })
            .detach();
        }
    }
}
