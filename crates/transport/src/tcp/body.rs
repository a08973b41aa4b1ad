//! Request bodies read into the shard's buffer pool (`crates/pool`): a body lands in a
//! 4 KiB-aligned block of its size class, which returns to the pool when the request is
//! answered, so steady traffic reuses the same memory instead of allocating (and faulting in)
//! megabytes per request.
//!
//! The pool's budget bounds the bytes of bodies in flight on the shard. A body that does not
//! fit waits, which stops reading that connection (TCP backpressure), until answered requests
//! give memory back; there is no fallback to the heap. Only a body larger than the largest
//! class (512 MiB, above any sane `message_bus.max_message_size`) is read into a `Vec`.

use std::io;
use std::ops::Deref;
use std::time::Duration;

use compio::BufResult;
use compio::buf::{IntoInner, IoBuf};
use compio::io::AsyncReadExt;
use compio::net::TcpStream;
use pool::{Buffer, Pool, PoolError};

use super::Ended;

/// How long a read waits before asking an exhausted pool again.
const EXHAUSTED_RETRY: Duration = Duration::from_millis(1);

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

/// Reads a body of `length` bytes into a pool buffer.
pub(super) async fn read_body(
    stream: &mut TcpStream,
    length: usize,
    pool: &Pool,
) -> Result<Body, Ended> {
    if length == 0 {
        return Ok(Body::Heap(Vec::new()));
    }
    let Some(buffer) = acquire(pool, length).await else {
        return read_heap(stream, length).await.map(Body::Heap);
    };
    let BufResult(result, buffer) = stream.read_exact(buffer.slice(..length)).await;
    finish(result).map(|()| Body::Pooled(buffer.into_inner()))
}

/// A buffer of at least `length` bytes, waiting while the pool is exhausted; `None` when no
/// class is large enough.
async fn acquire(pool: &Pool, length: usize) -> Option<Buffer> {
    let mut warned = false;
    loop {
        match pool.acquire(length) {
            Ok(buffer) => return Some(buffer),
            Err(PoolError::TooLarge { .. }) => return None,
            Err(error @ PoolError::Exhausted { .. }) => {
                if !warned {
                    log::warn!("tcp: {error}; reading waits for memory to come back");
                    warned = true;
                }
                compio::time::sleep(EXHAUSTED_RETRY).await;
            }
        }
    }
}

/// Reads exactly `length` bytes into a fresh `Vec` (headers, and bodies beyond the pool).
pub(super) async fn read_heap(stream: &mut TcpStream, length: usize) -> Result<Vec<u8>, Ended> {
    if length == 0 {
        return Ok(Vec::new());
    }
    let buffer = Vec::with_capacity(length).slice(..length);
    let BufResult(result, buffer) = stream.read_exact(buffer).await;
    finish(result).map(|()| buffer.into_inner())
}

fn finish(result: io::Result<()>) -> Result<(), Ended> {
    match result {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Err(Ended::PeerClosed),
        Err(error) => Err(Ended::Io(error)),
    }
}
