//! What a shard does with each [`ShardMessage`] it receives.

use crate::mail::{Forwarded, ShardMessage};

use super::Server;

impl Server {
    /// Handles one message from another shard and sends its reply.
    pub(crate) async fn receive(&self, message: ShardMessage) {
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
                let outcome = self.handle(&mut connection, &header, &body).await;
                reply.send((outcome, connection));
            }
            ShardMessage::ConnectionClosed { client_id, reply } => {
                self.connection_closed(client_id).await;
                reply.send(());
            }
        }
    }
}
