use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{AsyncRead, AsyncWrite};
use http::{Method, StatusCode};
use proptest::prelude::*;

use super::{Conn, Limits, ReadError, Request};

/// A peer that sends `input` in pieces of `piece` bytes, then closes; what the server
/// writes is kept.
struct Scripted {
    input: Vec<u8>,
    position: usize,
    piece: usize,
    written: Vec<u8>,
}

impl Scripted {
    fn new(input: &[u8], piece: usize) -> Self {
        Self {
            input: input.to_vec(),
            position: 0,
            piece: piece.max(1),
            written: Vec::new(),
        }
    }
}

impl AsyncRead for Scripted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buffer: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let end = (self.position + self.piece.min(buffer.len())).min(self.input.len());
        let chunk = self.input[self.position..end].to_vec();
        buffer[..chunk.len()].copy_from_slice(&chunk);
        self.position = end;
        Poll::Ready(Ok(chunk.len()))
    }
}

impl AsyncWrite for Scripted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written.extend_from_slice(bytes);
        Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

const LIMITS: Limits = Limits {
    head_size_max: 1024,
    body_size_max: 64,
    request_timeout: Duration::from_secs(5),
    idle_timeout: Duration::from_secs(5),
};

/// Every request `input` holds (sent `piece` bytes at a time), and how reading ended.
fn read_all(input: &[u8], piece: usize) -> (Vec<Request>, ReadError, Vec<u8>) {
    compio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let mut conn = Conn::new(Scripted::new(input, piece));
            let mut requests = Vec::new();
            loop {
                match conn.read_request(&LIMITS, async |_| usize::MAX).await {
                    Ok(request) => requests.push(request),
                    Err(error) => return (requests, error, conn.stream.written),
                }
            }
        })
}

fn refused_with(error: &ReadError) -> Option<StatusCode> {
    match error {
        ReadError::Refused { status, .. } => Some(*status),
        _ => None,
    }
}

#[test]
fn pipelined_requests_arrive_whole_in_any_pieces() {
    let input = b"POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
                  GET /ping HTTP/1.1\r\n\r\n";
    for piece in [1, 3, 7, 4096] {
        let (requests, end, _) = read_all(input, piece);
        assert!(matches!(end, ReadError::Closed), "{piece}: {end:?}");
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].method, Method::POST);
        assert_eq!(requests[0].body, b"hello");
        assert_eq!(requests[0].header("host"), Some("x"));
        assert_eq!(requests[1].target, "/ping");
        assert!(requests[1].keep_alive);
    }
}

#[test]
fn chunked_bodies_are_decoded() {
    let input = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                  3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: t\r\n\r\n";
    for piece in [1, 5, 4096] {
        let (requests, end, _) = read_all(input, piece);
        assert!(matches!(end, ReadError::Closed), "{end:?}");
        assert_eq!(requests[0].body, b"abcde");
    }
}

#[test]
fn limits_and_ambiguities_are_refused() {
    let cases: [(&[u8], StatusCode); 9] = [
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 1\xff\r\n\r\nx",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n",
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n",
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            StatusCode::BAD_REQUEST,
        ),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            StatusCode::NOT_IMPLEMENTED,
        ),
        (b"\x00\x01 junk\r\n\r\n", StatusCode::BAD_REQUEST),
    ];
    for (input, status) in cases {
        let (requests, end, _) = read_all(input, 4096);
        assert!(requests.is_empty());
        assert_eq!(
            refused_with(&end),
            Some(status),
            "{}",
            String::from_utf8_lossy(input)
        );
    }
    let long_head = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(2000));
    let (_, end, _) = read_all(long_head.as_bytes(), 4096);
    assert_eq!(
        refused_with(&end),
        Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
    );
}

#[test]
fn a_body_of_one_byte_chunks_is_read_whole() {
    let mut input = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..60 {
        input.extend_from_slice(b"1\r\nX\r\n");
    }
    input.extend_from_slice(b"0\r\n\r\nGET /ping HTTP/1.1\r\n\r\n");
    for piece in [1, 5, 4096] {
        let (requests, _, _) = read_all(&input, piece);
        assert_eq!(requests.len(), 2, "{piece}");
        assert_eq!(requests[0].body, vec![b'X'; 60]);
        assert_eq!(requests[1].target, "/ping");
    }
}

#[test]
fn the_caller_limits_a_body_from_the_head() {
    let input = b"POST /x HTTP/1.1\r\nContent-Length: 20\r\n\r\n01234567890123456789";
    let result = compio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let mut conn = Conn::new(Scripted::new(input, 4096));
            let small = async |head: &super::Head| {
                assert_eq!(head.header("content-length"), Some("20"));
                16
            };
            conn.read_request(&LIMITS, small).await
        });
    let error = result.expect_err("over the caller's limit");
    assert_eq!(refused_with(&error), Some(StatusCode::PAYLOAD_TOO_LARGE));
}

#[test]
fn keep_alive_follows_the_version() {
    let (requests, _, _) = read_all(
        b"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n\
          GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
        4096,
    );
    let kept: Vec<bool> = requests.iter().map(|request| request.keep_alive).collect();
    assert_eq!(kept, [false, true, false]);
}

#[test]
fn a_body_sent_after_expect_gets_continue_first() {
    let (requests, _, written) = read_all(
        b"PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
        4096,
    );
    assert!(requests.is_empty());
    assert!(written.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n"));
}

#[test]
fn a_truncated_request_is_an_error_not_a_request() {
    let (requests, end, _) = read_all(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", 4096);
    assert!(requests.is_empty());
    assert!(matches!(end, ReadError::Io(_)), "{end:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes end in requests and an error, never a panic, and no body over the limit.
    #[test]
    fn any_bytes_are_read_or_refused(
        input in proptest::collection::vec(any::<u8>(), 0..600),
        piece in 1_usize..64,
    ) {
        let (requests, _, _) = read_all(&input, piece);
        for request in requests {
            prop_assert!(request.body.len() <= LIMITS.body_size_max);
        }
    }

    /// Framed requests with arbitrary bodies come back byte for byte.
    #[test]
    fn bodies_round_trip(
        body in proptest::collection::vec(any::<u8>(), 0..64),
        chunked in any::<bool>(),
        piece in 1_usize..32,
    ) {
        let mut input = b"POST /x HTTP/1.1\r\n".to_vec();
        if chunked {
            input.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for chunk in body.chunks(7) {
                input.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                input.extend_from_slice(chunk);
                input.extend_from_slice(b"\r\n");
            }
            input.extend_from_slice(b"0\r\n\r\n");
        } else {
            input.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            input.extend_from_slice(&body);
        }
        let (requests, _, _) = read_all(&input, piece);
        prop_assert_eq!(requests.len(), 1);
        prop_assert_eq!(&requests[0].body, &body);
    }
}
