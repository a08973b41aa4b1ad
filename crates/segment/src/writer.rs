//! The partition writer: one compio task owns a [`PartitionLog`] and serves appends sent to it
//! over a bounded crossfire channel, giving group commit (`FORMAT.md` §9) to concurrent
//! appenders.
//!
//! A round waits for one request, then keeps taking requests already queued (up to
//! [`GROUP_MAX`]), appending each as it is taken; if any of them needs a sync, the round calls
//! [`PartitionLog::sync`] once, then replies to all. So *n* appenders waiting together share
//! one fdatasync.
//!
//! Invariants:
//! - replies of a round go out only after the round's sync (when one was needed) returned, so
//!   a `Persisted` acknowledgement always follows an fdatasync that covers it;
//! - after a failed group sync the writer is poisoned: what the kernel held may be gone while
//!   the page cache says clean (a retried fdatasync would succeed and lie), so every later
//!   append and the close fail, and the log is never marked cleanly closed;
//! - requests are appended in channel order, one at a time, so offsets are dense and follow
//!   that order.

use std::sync::Arc;

use compio_buf::IoBufMut;
use crossfire::oneshot::{RxOneshot, TxOneshot, oneshot};
use crossfire::{AsyncRx, MAsyncTx, mpsc};

use crate::log::{AppendError, Appended, PartitionLog};
use crate::storage::Storage;

/// Requests that may wait in a writer's channel; a full channel makes appenders wait
/// (backpressure) instead of growing memory.
pub const QUEUE_MAX: usize = 128;

/// Appends one round may take before it syncs and replies, so the first appender of a round
/// waits for a bounded amount of work.
pub const GROUP_MAX: usize = 64;

const _: () = assert!(GROUP_MAX >= 1 && GROUP_MAX <= QUEUE_MAX);

/// A writer's request failed.
#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    /// The log refused or failed this append; the writer goes on.
    #[error("append")]
    Append(#[source] AppendError),
    /// The round's fdatasync failed; this append may not be durable and the writer is now
    /// poisoned.
    #[error("group sync")]
    Sync(#[source] Arc<AppendError>),
    /// An earlier group sync failed, so the writer refuses appends and a clean close.
    #[error("writer poisoned by an earlier failed sync")]
    Poisoned(#[source] Arc<AppendError>),
    /// Closing the log failed.
    #[error("close")]
    Close(#[source] AppendError),
    /// The writer task is gone (closed, or the request came after a close).
    #[error("the partition writer is closed")]
    Closed,
}

/// Spawns the writer task; the log is reached only through [`WriterHandle`]s afterwards.
pub struct PartitionWriter<S: Storage, B: 'static> {
    log: PartitionLog<S>,
    receiver: AsyncRx<mpsc::Array<Request<B>>>,
    /// Set by the first failed group sync; see the module invariants.
    poison: Option<Arc<AppendError>>,
}

/// A cloneable sender to one partition's writer task.
pub struct WriterHandle<B: 'static> {
    sender: MAsyncTx<mpsc::Array<Request<B>>>,
}

/// An append's outcome with its buffer, handed back for reuse.
pub type AppendReply<B> = (Result<Appended, WriterError>, B);

enum Request<B> {
    Append {
        batch: B,
        now_us: u64,
        reply: TxOneshot<AppendReply<B>>,
    },
    Close {
        reply: TxOneshot<Result<(), WriterError>>,
    },
}

/// An append done in the current round, waiting for the round's sync.
struct Pending<B> {
    reply: TxOneshot<AppendReply<B>>,
    result: Result<Appended, WriterError>,
    batch: B,
}

impl<S, B> PartitionWriter<S, B>
where
    S: Storage + 'static,
    B: IoBufMut + Unpin + 'static,
{
    /// Spawns the task owning `log` on the current compio runtime. When every handle is
    /// dropped without [`WriterHandle::close`], the task still closes the log, but nobody
    /// learns the result.
    pub fn spawn(log: PartitionLog<S>) -> WriterHandle<B> {
        let (sender, receiver) = mpsc::bounded_async(QUEUE_MAX);
        let writer = Self {
            log,
            receiver,
            poison: None,
        };
        compio::runtime::spawn(writer.run()).detach();
        WriterHandle { sender }
    }

    async fn run(mut self) {
        let mut round: Vec<Pending<B>> = Vec::with_capacity(GROUP_MAX);
        loop {
            let Ok(first) = self.receiver.recv().await else {
                // Every handle is gone; close as well as we can, with nobody to tell.
                let _ = self.close().await;
                return;
            };
            let close = self.run_round(first, &mut round).await;
            self.run_round_reply(&mut round).await;
            assert!(round.is_empty());
            if let Some(reply) = close {
                reply.send(self.close().await);
                return;
            }
        }
    }

    /// Appends `first` and then the requests already queued, up to [`GROUP_MAX`] appends or
    /// a close request, which ends the round and is returned.
    async fn run_round(
        &mut self,
        first: Request<B>,
        round: &mut Vec<Pending<B>>,
    ) -> Option<TxOneshot<Result<(), WriterError>>> {
        let mut next = Some(first);
        while let Some(request) = next.take() {
            match request {
                Request::Append {
                    batch,
                    now_us,
                    reply,
                } => {
                    let (result, batch) = self.append(batch, now_us).await;
                    round.push(Pending {
                        reply,
                        result,
                        batch,
                    });
                }
                Request::Close { reply } => return Some(reply),
            }
            if round.len() < GROUP_MAX {
                next = self.receiver.try_recv().ok();
            }
        }
        None
    }

    async fn append(&mut self, batch: B, now_us: u64) -> AppendReply<B> {
        if let Some(poison) = &self.poison {
            return (Err(WriterError::Poisoned(Arc::clone(poison))), batch);
        }
        let (result, batch) = self.log.append(batch, now_us).await;
        (result.map_err(WriterError::Append), batch)
    }

    /// Syncs once if any append of the round needs it, then replies to every appender.
    async fn run_round_reply(&mut self, round: &mut Vec<Pending<B>>) {
        let needs_sync = round
            .iter()
            .any(|pending| matches!(pending.result, Ok(appended) if appended.needs_sync));
        let mut failure = None;
        if needs_sync && let Err(error) = self.log.sync().await {
            let error = Arc::new(error);
            self.poison = Some(Arc::clone(&error));
            failure = Some(error);
        }
        for mut pending in round.drain(..) {
            if let Ok(appended) = &mut pending.result {
                match &failure {
                    Some(error) => pending.result = Err(WriterError::Sync(Arc::clone(error))),
                    // The round's sync covered this record: nothing is left for the caller.
                    None => appended.needs_sync = false,
                }
            }
            // An appender that stopped waiting dropped its receiver; its record stays.
            pending.reply.send((pending.result, pending.batch));
        }
    }

    async fn close(self) -> Result<(), WriterError> {
        if let Some(poison) = self.poison {
            return Err(WriterError::Poisoned(poison));
        }
        self.log.close().await.map_err(WriterError::Close)
    }
}

impl<B: Unpin + 'static> WriterHandle<B> {
    /// Appends one batch record (see [`PartitionLog::append`]) and waits for its
    /// acknowledgement: under `Persisted`, after the fdatasync that covers it.
    pub async fn append(&self, batch: B, now_us: u64) -> Result<Appended, WriterError> {
        self.append_returning(batch, now_us).await.0
    }

    /// As [`Self::append`], handing the buffer back unless the writer task is gone.
    pub async fn append_returning(
        &self,
        batch: B,
        now_us: u64,
    ) -> (Result<Appended, WriterError>, Option<B>) {
        let (reply, receiver) = oneshot();
        let request = Request::Append {
            batch,
            now_us,
            reply,
        };
        if let Err(crossfire::SendError(request)) = self.sender.send(request).await {
            let batch = match request {
                Request::Append { batch, .. } => Some(batch),
                Request::Close { .. } => None,
            };
            return (Err(WriterError::Closed), batch);
        }
        match receiver.await {
            Ok((result, batch)) => (result, Some(batch)),
            Err(crossfire::RecvError) => (Err(WriterError::Closed), None),
        }
    }

    /// Lets the appends queued before it finish, then syncs and closes the log cleanly.
    /// Appends sent after it fail with [`WriterError::Closed`].
    pub async fn close(self) -> Result<(), WriterError> {
        let (reply, receiver): (_, RxOneshot<Result<(), WriterError>>) = oneshot();
        if self.sender.send(Request::Close { reply }).await.is_err() {
            return Err(WriterError::Closed);
        }
        receiver.await.unwrap_or(Err(WriterError::Closed))
    }
}

impl<B: 'static> Clone for WriterHandle<B> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
        }
    }
}

impl<B: 'static> std::fmt::Debug for WriterHandle<B> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WriterHandle")
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
