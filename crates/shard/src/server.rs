//! The server state one shard owns, and the entry point for every request.

use proto::header::RequestHeader;

use crate::connection::Connection;
use crate::outcome::Outcome;

/// Everything a shard serves from: metadata, partitions, sessions, consumer groups.
#[derive(Debug, Default)]
pub struct Server {}

impl Server {
    /// Handles one request frame from `connection`.
    pub async fn handle(
        &self,
        connection: &mut Connection,
        header: &RequestHeader,
        body: &[u8],
    ) -> Outcome {
        let _ = (connection, header, body);
        Outcome::Silent
    }
}
