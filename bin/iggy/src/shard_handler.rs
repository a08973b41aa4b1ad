//! The bridge between a transport and the shard: connection state lives in the shard, frames
//! go to [`Server::handle`], outcomes come back as transport answers.

use std::net::SocketAddr;
use std::rc::Rc;

use proto::Dialect;
use proto::header::HEADER_SIZE;
use shard::{Connection, Outcome, Server, TransportKind};
use transport::{Answer, ConnectionHandler};

/// Serves the connections of one transport kind from one shard.
pub(crate) struct ShardHandler {
    pub(crate) server: Rc<Server>,
    pub(crate) transport: TransportKind,
}

impl ConnectionHandler for ShardHandler {
    type Connection = Connection;

    fn open(&self, peer: SocketAddr) -> Connection {
        self.server.open_connection(peer, self.transport)
    }

    async fn handle(
        &self,
        connection: &mut Connection,
        header: &[u8; HEADER_SIZE],
        body: &[u8],
    ) -> Answer {
        match self.server.handle(connection, header, body).await {
            Outcome::Reply(reply) => Answer::Reply {
                operation: reply.operation,
                status: reply.status,
                commit: reply.commit,
                body: reply.body,
            },
            Outcome::Evict(reason) => Answer::Evict(reason),
            Outcome::Silent => Answer::Silent,
        }
    }

    fn dialect(&self, connection: &Connection) -> Dialect {
        connection.dialect
    }

    fn close(&self, connection: Connection) {
        self.server.close_connection(&connection);
    }
}
