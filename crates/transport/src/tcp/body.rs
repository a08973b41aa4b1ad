//! Request bodies read into the shard's buffer pool (`crates/pool`): a body lands in a
//! 4 KiB-aligned block of its size class, which returns to the pool when the request is
//! answered, so steady traffic reuses the same memory instead of allocating (and faulting in)
//! megabytes per request.
//!
//! The pool's budget bounds the bytes of bodies in flight on the shard. A body that does not
//! fit waits, which stops reading that connection (TCP backpressure), until answered requests
//! give memory back; there is no fallback to the heap. Only a body larger than the largest
//! class (512 MiB, above any sane `message_bus.max_message_size`) is read into a `Vec`.
//!
//! Memory is taken as a body's bytes arrive, not as its header declares: a large body is
//! read [`FIRST_PART_BYTES`] first, then into buffers at most [`GROWTH`] times what has come,
//! each taking over the bytes before it. A header declaring 64 MiB and no body behind it
//! holds 256 KiB, so cheap headers cannot empty the pool for everyone else.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::ops::Deref;
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio::BufResult;
use compio::buf::{IntoInner, IoBuf};
use compio::io::{AsyncRead, AsyncReadExt};
use compio::net::TcpStream;
use futures_util::future::{Either, select};
use pool::{Buffer, Pool, PoolError};
use proto::header::HEADER_SIZE;

use super::Ended;

/// Bytes of unauthenticated request bodies one shard holds at once, over all its
/// connections: with each such body at most `max_unauthenticated_message_size`, connections
/// that proved nothing cannot take more than this together. One more waits for room (until
/// its handshake grace runs out), pausing only its own connection.
pub(super) const UNAUTHENTICATED_BUDGET_BYTES: usize = 16 << 20;

/// What the unauthenticated bodies of one shard's connections hold now.
#[derive(Debug, Default)]
pub(super) struct UnauthenticatedBudget {
    held: Cell<usize>,
    /// Notified when a hold returns its bytes.
    returned: event_listener::Event,
}

/// Bytes taken from the shard's [`UnauthenticatedBudget`], returned on drop.
#[derive(Debug)]
pub(super) struct Held {
    budget: Rc<UnauthenticatedBudget>,
    bytes: usize,
}

impl UnauthenticatedBudget {
    /// Takes `bytes`, or `None` when that would pass [`UNAUTHENTICATED_BUDGET_BYTES`].
    pub(super) fn take(self: &Rc<Self>, bytes: usize) -> Option<Held> {
        let held = self.held.get().checked_add(bytes)?;
        if held > UNAUTHENTICATED_BUDGET_BYTES {
            return None;
        }
        self.held.set(held);
        Some(Held {
            budget: Rc::clone(self),
            bytes,
        })
    }

    /// Takes `bytes`, waiting for room (woken by returns) until `deadline`.
    pub(super) async fn take_by(
        self: &Rc<Self>,
        bytes: usize,
        deadline: Instant,
    ) -> Result<Held, Ended> {
        loop {
            // Listening first: a return between the failed take and the wait wakes it.
            let returned = self.returned.listen();
            if let Some(held) = self.take(bytes) {
                return Ok(held);
            }
            within(deadline, "room for an unauthenticated body", returned).await?;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let held = self.budget.held.get();
        debug_assert!(held >= self.bytes, "a hold returns only what it took");
        self.budget.held.set(held.saturating_sub(self.bytes));
        self.budget.returned.notify(usize::MAX);
    }
}

/// A request body.
#[derive(Debug)]
pub(super) enum Body {
    Pooled(Buffer),
    Heap(Vec<u8>),
    /// An unauthenticated connection's body, counted against the shard's budget while held
    /// (the hold is never read: dropping it with the body returns the bytes).
    Unauthenticated(Vec<u8>, #[allow(dead_code)] Held),
}

impl Deref for Body {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Pooled(buffer) => buffer,
            Self::Heap(bytes) | Self::Unauthenticated(bytes, _) => bytes,
        }
    }
}

/// What of a large body is read before more pool memory is taken for it: all a header
/// whose body never comes can hold. A batch of a thousand 1 KB messages needs one more part.
const FIRST_PART_BYTES: usize = 256 << 10;

/// Each further part grows the buffer to at most this many times the bytes already come:
/// a connection holds at most four times what its client sent, and the copies into each
/// larger buffer add up to at most a third of the body.
const GROWTH: usize = 4;

/// Reads a body of `length` bytes into a pool buffer, taking memory as the bytes arrive
/// (module docs); the bytes must arrive by `deadline`, and time spent waiting for pool
/// memory does not count (that wait is the server's).
///
/// No part is held while the pool is waited for: were every part waiting for another's
/// memory to grow, none would ever be answered to give memory back. A part that cannot grow
/// at once moves to the heap (it is bytes the client sent, at most a quarter of the body),
/// and the body waits, holding nothing of the pool, for a buffer of its whole length, until
/// its deadline (not moved by that wait: the heap it holds is in no budget).
pub(super) async fn read_body(
    stream: &mut TcpStream,
    length: usize,
    pool: &Pool,
    deadline: Instant,
) -> Result<Body, Ended> {
    if length == 0 {
        return Ok(Body::Heap(Vec::new()));
    }
    if pool::bucket_for(length).is_none() {
        return read_heap_until(stream, length, deadline)
            .await
            .map(Body::Heap);
    }
    let mut deadline = deadline;
    // The bytes come so far, in the buffer the next part replaces.
    let mut come: Option<Buffer> = None;
    loop {
        let received = come.as_ref().map_or(0, |buffer| buffer.len());
        let (mut buffer, part_end) = match come.take() {
            None => {
                let part_end = length.min(FIRST_PART_BYTES);
                (wait_for(pool, part_end, &mut deadline).await?, part_end)
            }
            Some(previous) => {
                let part_end = length.min(received.saturating_mul(GROWTH));
                match pool.acquire(part_end) {
                    Ok(mut buffer) => {
                        buffer.extend_from_slice(&previous);
                        (buffer, part_end)
                    }
                    Err(_exhausted) => {
                        let come_bytes = previous.to_vec();
                        drop(previous);
                        // Holding heap memory no budget counts, the body waits for the pool
                        // only until its deadline, which this wait does not move.
                        let acquired = acquire(pool, length);
                        let whole = within(deadline, "memory for a frame body", acquired).await?;
                        let mut whole = whole.ok_or_else(out_of_classes)?;
                        whole.extend_from_slice(&come_bytes);
                        (whole, length)
                    }
                }
            }
        };
        debug_assert_eq!(buffer.len(), received, "a part starts with the bytes come");
        let read = read_all(stream, buffer, received, part_end);
        let BufResult(result, read) = within(deadline, "a frame body", read).await?;
        finish(result)?;
        buffer = read;
        if part_end == length {
            return Ok(Body::Pooled(buffer));
        }
        come = Some(buffer);
    }
}

/// A pool buffer of `length` bytes, waiting while the pool is exhausted; the wait moves
/// `deadline` on by its length.
async fn wait_for(pool: &Pool, length: usize, deadline: &mut Instant) -> Result<Buffer, Ended> {
    let waited_from = Instant::now();
    let acquired = acquire(pool, length).await;
    *deadline += waited_from.elapsed();
    acquired.ok_or_else(out_of_classes)
}

/// A body over the largest class never reaches a pool wait (`read_body` reads it into a
/// `Vec`), so this is an invariant broken, answered as an I/O failure of the connection.
fn out_of_classes() -> Ended {
    Ended::Io(io::ErrorKind::OutOfMemory.into())
}

/// Fills bytes `from..to` of `buffer`: one `recv` with `MSG_WAITALL`, which the kernel
/// completes only once all of them arrived (a large body comes in many segments; without
/// it every segment was a completion and a resubmission), then plain reads for whatever a
/// signal or a short return left. The buffer's length is `to` once it returns `Ok`.
async fn read_all(
    stream: &mut TcpStream,
    buffer: Buffer,
    from: usize,
    to: usize,
) -> BufResult<(), Buffer> {
    use compio::driver::ToSharedFd;
    use compio::driver::op::{Recv, RecvFlags};
    let op = Recv::new(
        stream.to_shared_fd(),
        buffer.slice(from..to),
        RecvFlags::WAITALL,
    );
    let BufResult(result, slice) = compio::runtime::submit(op).await.into_inner();
    let mut buffer = slice.into_inner();
    let received = match result {
        Ok(received) => received.min(to - from),
        Err(error) => return BufResult(Err(error), buffer),
    };
    if received == 0 {
        return BufResult(Err(io::ErrorKind::UnexpectedEof.into()), buffer);
    }
    // A pool buffer is initialised to its capacity, so its length may move freely.
    let filled = from + received;
    buffer.set_len(filled);
    if filled == to {
        return BufResult(Ok(()), buffer);
    }
    let rest = stream.read_exact(buffer.slice(filled..to));
    let BufResult(result, rest) = rest.await;
    let mut buffer = rest.into_inner();
    if result.is_ok() {
        buffer.set_len(to);
    }
    BufResult(result, buffer)
}

/// Reads a frame header: waits for its first bytes as `login` says, then for the rest within
/// `frame_timeout` (and, before login, the handshake grace). Returns the header and when its
/// first bytes came.
pub(super) async fn read_header(
    stream: &mut TcpStream,
    login: &LoginWatch<'_>,
    frame_timeout: Duration,
) -> Result<(Vec<u8>, Instant), Ended> {
    let BufResult(result, header) = {
        let first = std::pin::pin!(stream.read(Vec::with_capacity(HEADER_SIZE)));
        login.wait(first).await?
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
    let mut deadline = started + frame_timeout;
    if !login.authenticated.get() {
        // Before login the frame must also come within the handshake grace.
        deadline = deadline.min(login.unauthenticated_since.get() + login.grace);
    }
    let rest = stream.read_exact(header.slice(got..HEADER_SIZE));
    let BufResult(result, header) = within(deadline, "a frame header", rest).await?;
    finish(result).map(|()| (header.into_inner(), started))
}

/// What decides how long a connection may wait for its next frame: unauthenticated, until
/// the handshake grace (from its accept or its last logout) runs out; authenticated, for
/// ever. Both can change while the wait is on (a logout's answer), so the wait re-checks after
/// every answer without dropping the read (a dropped read could lose bytes it took).
pub(super) struct LoginWatch<'w> {
    pub(super) authenticated: &'w Cell<bool>,
    pub(super) unauthenticated_since: &'w Cell<Instant>,
    pub(super) answered: &'w event_listener::Event,
    pub(super) grace: Duration,
}

impl LoginWatch<'_> {
    /// Awaits `read` under the rule above.
    async fn wait<F: Future + Unpin>(&self, mut read: F) -> Result<F::Output, Ended> {
        loop {
            let answered = self.answered.listen();
            if self.authenticated.get() {
                match select(&mut read, answered).await {
                    Either::Left((output, _)) => return Ok(output),
                    Either::Right(((), _)) => continue,
                }
            }
            let deadline = self.unauthenticated_since.get() + self.grace;
            let expired = std::pin::pin!(compio::time::sleep_until(deadline));
            match select(&mut read, select(expired, answered)).await {
                Either::Left((output, _)) => return Ok(output),
                Either::Right((Either::Left(((), _)), _)) if !self.authenticated.get() => {
                    return Err(Ended::TimedOut("the login (handshake grace)"));
                }
                Either::Right(_) => {}
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use pool::{Pool, PoolConfig};

    use super::{FIRST_PART_BYTES, UNAUTHENTICATED_BUDGET_BYTES, UnauthenticatedBudget};

    /// A header declaring 8 MiB with a few bytes behind it holds the first part of the pool
    /// and no more while the rest does not come; the body, read in growing parts, arrives
    /// whole and in order.
    #[test]
    fn a_large_body_takes_pool_memory_as_its_bytes_arrive() {
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let listener = compio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let length = 8 << 20;
            let body: Vec<u8> = (0..length)
                .map(|index| u8::try_from(index % 251).unwrap())
                .collect();
            let (rest_tx, rest_rx) = std::sync::mpsc::channel::<()>();
            let sent = body.clone();
            let client = std::thread::spawn(move || {
                let mut stream = std::net::TcpStream::connect(address).unwrap();
                stream.write_all(&sent[..1000]).unwrap();
                rest_rx.recv().unwrap();
                stream.write_all(&sent[1000..]).unwrap();
                stream
            });
            let (mut stream, _) = listener.accept().await.unwrap();
            let pool = Pool::new(PoolConfig::default()).unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut read = std::pin::pin!(super::read_body(&mut stream, length, &pool, deadline));
            let early = compio::time::timeout(Duration::from_millis(300), &mut read).await;
            assert!(early.is_err(), "the body is not all there");
            assert_eq!(pool.allocated_bytes(), FIRST_PART_BYTES as u64);
            rest_tx.send(()).unwrap();
            let Ok(read) = read.await else {
                panic!("the body did not arrive");
            };
            assert!(*read == body[..], "the body arrived whole and in order");
            drop(client.join().unwrap());
        });
    }

    /// Two bodies whose next parts the pool cannot hold together, each holding the part
    /// before: had they waited holding them, neither could grow until the other gave memory
    /// back, and none would. The part moves to the heap instead and the body waits for its
    /// whole length holding nothing of the pool: both come whole once their clients send
    /// the rest, one after the other.
    #[test]
    fn bodies_that_cannot_grow_in_a_full_pool_wait_holding_nothing() {
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let listener = compio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            let length = 2 << 20;
            let body: Vec<u8> = (0..length)
                .map(|index| u8::try_from(index % 251).unwrap())
                .collect();
            let sent = body.clone();
            let clients = std::thread::spawn(move || {
                let mut streams: Vec<std::net::TcpStream> = (0..2)
                    .map(|_| {
                        let mut stream = std::net::TcpStream::connect(address).unwrap();
                        // Past the first part (256 KiB), then a pause, then the rest.
                        stream.write_all(&sent[..(300 << 10)]).unwrap();
                        stream
                    })
                    .collect();
                std::thread::sleep(Duration::from_millis(300));
                for stream in &mut streams {
                    stream.write_all(&sent[(300 << 10)..]).unwrap();
                }
                std::thread::sleep(Duration::from_secs(2));
                drop(streams);
            });
            let (mut first, _) = listener.accept().await.unwrap();
            let (mut second, _) = listener.accept().await.unwrap();
            // Room for both first parts (256 KiB each) and one whole body (2 MiB), not for
            // both second parts (1 MiB each) beside a whole body.
            let pool = Pool::new_unchecked(PoolConfig {
                size_bytes: (2 << 20) + (512 << 10),
                ..PoolConfig::default()
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            let read_first = async {
                let read = super::read_body(&mut first, length, &pool, deadline).await;
                // Answered: its memory goes back to the pool for the other body.
                read.map(|read| read.to_vec())
            };
            let read_second = async {
                let read = super::read_body(&mut second, length, &pool, deadline).await;
                read.map(|read| read.to_vec())
            };
            let both = futures_util::future::join(read_first, read_second);
            let ended = compio::time::timeout(Duration::from_secs(5), both).await;
            let Ok((Ok(first), Ok(second))) = ended else {
                panic!("the bodies did not both come whole in time");
            };
            assert!(
                first == body && second == body,
                "both arrived whole and in order"
            );
            clients.join().unwrap();
        });
    }

    #[test]
    fn the_unauthenticated_budget_refuses_past_its_size_and_returns_on_drop() {
        let budget = Rc::new(UnauthenticatedBudget::default());
        let most = budget.take(UNAUTHENTICATED_BUDGET_BYTES - 10).unwrap();
        assert!(budget.take(11).is_none());
        let rest = budget.take(10).unwrap();
        assert!(budget.take(1).is_none());
        drop(most);
        assert!(budget.take(UNAUTHENTICATED_BUDGET_BYTES - 10).is_some());
        drop(rest);
        assert!(budget.take(UNAUTHENTICATED_BUDGET_BYTES).is_some());
    }
}
