//! What a shard does with each [`ShardMessage`] it receives ([`Receive`] for the server):
//! commits and forwarded requests on the sequencer, committed ops on the replicas.

use crate::clock::{Clock, LocalFuture};
use crate::inbox::Receive;
use crate::mail::{Forwarded, ShardMessage};
use crate::server::Server;

impl Receive for Server {
    fn receive(&self, message: ShardMessage) -> LocalFuture<'_, ()> {
        Box::pin(async move { self.receive_now(message).await })
    }

    fn clock(&self) -> &dyn Clock {
        &*self.node.clock
    }
}

impl Server {
    /// Handles one message from another shard and sends its reply.
    async fn receive_now(&self, message: ShardMessage) {
        match message {
            ShardMessage::Commit { op, reply } => reply.send(self.commit(op).await),
            ShardMessage::Apply { op, reply } => reply.send(self.apply_committed(&op).await),
            ShardMessage::Forward(forwarded) => {
                let Forwarded {
                    mut connection,
                    header,
                    body,
                    reply,
                } = *forwarded;
                let outcome = self
                    .handle_unmeasured(&mut connection, &header, &body)
                    .await;
                reply.send((outcome, connection));
            }
            ShardMessage::ConnectionClosed { client_id, reply } => {
                self.connection_closed(client_id).await;
                reply.send(());
            }
        }
    }
}
