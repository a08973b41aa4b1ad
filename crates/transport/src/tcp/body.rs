//! Request bodies read into the shard's buffer pool (`crates/pool`): a body lands in a
//! 4 KiB-aligned block of its size class, which returns to the pool when the request is
//! answered, so steady traffic reuses the same memory instead of allocating (and faulting in)
//! megabytes per request.
//!
//! The pool's budget bounds the bytes of bodies in flight on the shard. A body that does not
//! fit waits, which stops reading that connection (TCP backpressure), until answered requests
//! give memory back; there is no fallback to the heap. Only a body larger than the largest
//! class (512 MiB, above any sane `message_bus.max_message_size`) is read into a `Vec`.

use std::future::Future;
use std::io;
use std::ops::Deref;
use std::time::{Duration, Instant};

use compio::BufResult;
use compio::buf::{IntoInner, IoBuf};
use compio::io::{AsyncRead, AsyncReadExt};
use compio::net::TcpStream;
use pool::{Buffer, Pool, PoolError};
use proto::header::HEADER_SIZE;

use super::Ended;

/// A request body.
#[derive(Debug)]
pub(super) enum Body {
    Pooled(Buffer),
    Heap(Vec<u8>),
}

impl Deref for Body {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Pooled(buffer) => buffer,
            Self::Heap(bytes) => bytes,
        }
    }
}

/// Reads a body of `length` bytes into a pool buffer; the bytes must arrive by `deadline`
/// (time spent waiting for pool memory does not count: that wait is the server's).
pub(super) async fn read_body(
    stream: &mut TcpStream,
    length: usize,
    pool: &Pool,
    deadline: Instant,
) -> Result<Body, Ended> {
    if length == 0 {
        return Ok(Body::Heap(Vec::new()));
    }
    let waited_from = Instant::now();
    let Some(buffer) = acquire(pool, length).await else {
        return read_heap_until(stream, length, deadline)
            .await
            .map(Body::Heap);
    };
    let deadline = deadline + waited_from.elapsed();
    let read = stream.read_exact(buffer.slice(..length));
    let BufResult(result, buffer) = within(deadline, "a frame body", read).await?;
    finish(result).map(|()| Body::Pooled(buffer.into_inner()))
}

/// Reads a frame header: waits for its first bytes until `idle_deadline` (none: forever),
/// then for the rest within `frame_timeout`. Returns the header and when its first bytes came.
pub(super) async fn read_header(
    stream: &mut TcpStream,
    idle_deadline: Option<Instant>,
    frame_timeout: Duration,
) -> Result<(Vec<u8>, Instant), Ended> {
    let first = stream.read(Vec::with_capacity(HEADER_SIZE));
    let BufResult(result, header) = match idle_deadline {
        Some(deadline) => within(deadline, "the login (handshake grace)", first).await?,
        None => first.await,
    };
    let started = Instant::now();
    match result {
        Ok(0) => return Err(Ended::PeerClosed),
        Ok(_) => {}
        Err(error) => return Err(Ended::Io(error)),
    }
    let got = header.len();
    if got == HEADER_SIZE {
        return Ok((header, started));
    }
    let rest = stream.read_exact(header.slice(got..HEADER_SIZE));
    let BufResult(result, header) = within(started + frame_timeout, "a frame header", rest).await?;
    finish(result).map(|()| (header.into_inner(), started))
}

/// `future`, unless `deadline` passes first: then the connection ends as timed out.
async fn within<F: Future>(
    deadline: Instant,
    what: &'static str,
    future: F,
) -> Result<F::Output, Ended> {
    compio::time::timeout_at(deadline, future)
        .await
        .map_err(|_elapsed| Ended::TimedOut(what))
}

/// A buffer of at least `length` bytes, waiting while the pool is exhausted until a buffer
/// comes back (an event, not a poll); `None` when no class is large enough.
async fn acquire(pool: &Pool, length: usize) -> Option<Buffer> {
    let mut warned = false;
    loop {
        // Listening first: a buffer returned between the failed acquire and the wait wakes it.
        let returned = pool.returned();
        match pool.acquire(length) {
            Ok(buffer) => return Some(buffer),
            Err(PoolError::TooLarge { .. }) => return None,
            Err(error @ PoolError::Exhausted { .. }) => {
                if !warned {
                    log::warn!("tcp: {error}; reading waits for memory to come back");
                    warned = true;
                }
                returned.await;
            }
        }
    }
}

/// Reads exactly `length` bytes into a fresh `Vec` by `deadline` (bodies of unauthenticated
/// connections, which are small, and bodies beyond the pool's largest class).
pub(super) async fn read_heap_until(
    stream: &mut TcpStream,
    length: usize,
    deadline: Instant,
) -> Result<Vec<u8>, Ended> {
    if length == 0 {
        return Ok(Vec::new());
    }
    let buffer = Vec::with_capacity(length).slice(..length);
    let BufResult(result, buffer) =
        within(deadline, "a frame body", stream.read_exact(buffer)).await?;
    finish(result).map(|()| buffer.into_inner())
}

fn finish(result: io::Result<()>) -> Result<(), Ended> {
    match result {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Err(Ended::PeerClosed),
        Err(error) => Err(Ended::Io(error)),
    }
}
