//! The read half of a WebSocket connection's socket, counted against the link's
//! [`ReadMeter`]: before login it refuses to read past the meter's bound, so tungstenite
//! (whose message limit is the authenticated one for the whole connection) never holds more
//! of an unauthenticated message than that.

use std::io;
use std::rc::Rc;

use compio::buf::{BufResult, IoBufMut};
use compio::io::AsyncRead;
use compio::net::TcpStream;

use crate::message_link::ReadMeter;

/// Room for what comes before and around an unauthenticated frame: the TLS handshake, the
/// HTTP upgrade request, WebSocket frame headers and TLS record overheads.
const UNAUTHENTICATED_SLACK: usize = 64 << 10;

/// The bound on what one unauthenticated message may take from the socket.
pub(super) fn unauthenticated_read_max(unauthenticated_frame_size_max: u32) -> usize {
    usize::try_from(unauthenticated_frame_size_max)
        .unwrap_or(usize::MAX)
        .saturating_add(UNAUTHENTICATED_SLACK)
}

/// A socket's read half that counts what it reads and fails a read the meter refuses.
pub(super) struct MeteredRead {
    pub(super) socket: TcpStream,
    pub(super) meter: Rc<ReadMeter>,
}

impl AsyncRead for MeteredRead {
    async fn read<B: IoBufMut>(&mut self, buffer: B) -> BufResult<usize, B> {
        if !self.meter.allows_reading() {
            let error = io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "over {} bytes read toward one message before login",
                    self.meter.unauthenticated_max()
                ),
            );
            return BufResult(Err(error), buffer);
        }
        let BufResult(result, buffer) = self.socket.read(buffer).await;
        if let Ok(bytes) = result {
            self.meter.count(bytes);
        }
        BufResult(result, buffer)
    }
}
