//! The scripted handler and request frames the WebSocket, QUIC and TCP-with-TLS loop tests
//! share: request 1 waits until request 2 has been handled (so an answer in order proves
//! nothing was handled concurrently), a body `login` logs the handler in (after 20 ms, as a
//! password check takes a while), a body `reply:N` is answered with N bytes (a large answer
//! from a small request), and every other answer echoes the request body, its first half as
//! the reply body and the rest as the tail.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use proto::Dialect;
use proto::header::{EvictionReason, HEADER_SIZE, Operation, RequestHeader};
use zerocopy::{FromBytes, IntoBytes};

use crate::{Answer, ConnectionHandler};

/// See the module. Its login is shared by every connection it serves.
#[derive(Default)]
pub(crate) struct Scripted {
    second_seen: Cell<bool>,
    /// Unauthenticated until a `login` body was answered (else always authenticated).
    pub(crate) login_needed: bool,
    /// The server is short of reply memory the whole time.
    replies_short: bool,
    logged_in: Cell<bool>,
    /// Connections opened and closed: equal once the server has stopped, else a connection
    /// task ended without closing its state (a panic in it, for one).
    opened: Cell<usize>,
    closed: Cell<usize>,
}

impl Scripted {
    pub(crate) fn logging_in() -> Self {
        Self {
            login_needed: true,
            ..Self::default()
        }
    }

    /// A handler of a server short of reply memory the whole time.
    pub(crate) fn short_of_reply_memory() -> Self {
        Self {
            replies_short: true,
            ..Self::default()
        }
    }
}

impl Scripted {
    /// Connections opened so far.
    pub(crate) fn opened(&self) -> usize {
        self.opened.get()
    }

    /// Asserts that every connection opened was closed (call once the server stopped).
    pub(crate) fn assert_all_closed(&self) {
        assert_eq!(
            self.opened.get(),
            self.closed.get(),
            "connections opened and closed"
        );
    }
}

impl ConnectionHandler for Scripted {
    type Connection = ();

    fn open(&self, _peer: SocketAddr) {
        self.opened.set(self.opened.get() + 1);
    }

    async fn handle(&self, (): &(), header: &[u8; HEADER_SIZE], body: &[u8]) -> Answer {
        let request =
            RequestHeader::ref_from_bytes(header).map_or(0, |header| header.request.get());
        if request == 1 {
            while !self.second_seen.get() {
                compio::time::sleep(Duration::from_millis(1)).await;
            }
        } else if request == 2 {
            self.second_seen.set(true);
        }
        if body == b"login" {
            // A real login waits for its password hash: the reader is already waiting for
            // the next frame by the time the login is answered.
            compio::time::sleep(Duration::from_millis(20)).await;
            self.logged_in.set(true);
        }
        let asked = body.strip_prefix(b"reply:").and_then(|length| {
            std::str::from_utf8(length)
                .ok()
                .and_then(|length| length.parse::<usize>().ok())
        });
        if let Some(length) = asked {
            return Answer::Reply {
                committed_op: 0,
                operation: Operation::NonReplicated,
                status: 0,
                commit: 0,
                body: Vec::new(),
                tail: vec![7; length],
            };
        }
        Answer::Reply {
            committed_op: 0,
            operation: Operation::NonReplicated,
            status: 0,
            commit: 0,
            body: body[..body.len() / 2].to_vec(),
            tail: body[body.len() / 2..].to_vec(),
        }
    }

    fn evicted(&self, (): &()) -> impl Future<Output = EvictionReason> {
        std::future::pending()
    }

    async fn replies_short(&self) {
        if !self.replies_short {
            std::future::pending::<()>().await;
        }
    }

    fn authenticated(&self, (): &()) -> bool {
        !self.login_needed || self.logged_in.get()
    }

    fn dialect(&self, (): &()) -> Dialect {
        Dialect::V0_12_2
    }

    fn close(&self, (): ()) {
        self.closed.set(self.closed.get() + 1);
    }
}

/// A request frame numbered `number` (session 1) carrying `body`.
pub(crate) fn request(number: u64, body: &[u8]) -> Vec<u8> {
    let mut header = RequestHeader::new(7, Operation::NonReplicated, body.len());
    header.request = number.into();
    header.session = 1.into();
    let mut frame = header.as_bytes().to_vec();
    frame.extend_from_slice(body);
    frame
}
