//! The partition task: one compio task per partition owns its [`PartitionLog`], its
//! [`ConsumerOffsets`] and its [`ProducerTable`], and serves jobs from a local queue in order.
//!
//! Group commit: consecutive appends found in the queue form a round (at most [`GROUP_MAX`]);
//! the round ends when the queue runs dry, the limit is hit or another kind of job comes
//! next; then one [`PartitionLog::sync`] covers every append of the round that needs it
//! (`Durability::Persisted`) and only then are the appenders answered. Reads, offset writes
//! and purges wait for the round before them, so they see its appends.
//!
//! Invariants: replies to a round's appends follow its sync; after a failed sync the task is
//! poisoned (a retried fdatasync could succeed and lie) and refuses every later append.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use proto::ErrorCode;
use proto::batch::Producer;
use segment::log::{
    AppendError, Durability, LogConfig, OpenError, PartitionLog, ReadError, ReadStart, Records,
};
use segment::offsets::{ConsumerOffsets, OffsetError, OffsetOwner};
use segment::storage::Storage;

use super::producers::{Admission, ProducerTable};
use super::signal::{Notify, Sender, oneshot};

/// Appends one round may take before it syncs and replies.
pub const GROUP_MAX: usize = 64;

/// A partition job failed.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("open partition")]
    Open(#[source] OpenError),
    #[error("load consumer offsets")]
    LoadOffsets(#[source] OffsetError),
    #[error("append")]
    Append(#[source] AppendError),
    #[error("group sync")]
    Sync(#[source] Arc<AppendError>),
    #[error("partition poisoned by an earlier failed sync")]
    Poisoned(#[source] Arc<AppendError>),
    #[error("read")]
    Read(#[source] ReadError),
    #[error("consumer offset")]
    Offset(#[source] OffsetError),
    #[error("remove {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("close")]
    Close(#[source] AppendError),
    /// The idempotent-producer check refused the batch (§5.5); nothing was appended.
    #[error("producer batch refused with {0:?}")]
    Producer(ErrorCode),
    /// The task is gone (closed or deleted) or lost its log in a failed purge.
    #[error("the partition is closed")]
    Closed,
}

/// Counters kept by the task after every change, readable without waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionStats {
    pub size_bytes: u64,
    pub messages_count: u64,
    /// Offset of the last message; 0 when empty (the protocol's `current_offset`).
    pub current_offset: u64,
    /// The offset the next message gets.
    pub next_offset: u64,
    pub segments_count: u32,
}

impl PartitionStats {
    fn of<S: Storage>(log: &PartitionLog<S>) -> Self {
        let next_offset = log.next_offset();
        Self {
            size_bytes: log.size_bytes(),
            messages_count: log.messages_count(),
            current_offset: next_offset.saturating_sub(1),
            next_offset,
            segments_count: u32::try_from(log.segments().count()).unwrap_or(u32::MAX),
        }
    }

    /// Whether the partition holds no message at all.
    pub fn is_empty(&self) -> bool {
        self.next_offset == 0
    }
}

/// Where an append landed, or the confirmation of a deduplicated retransmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: u64,
    pub messages_count: u32,
    /// An exact retransmission: nothing was appended.
    pub duplicate: bool,
}

/// How a partition is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    pub directory: PathBuf,
    pub log: LogConfig,
    pub offsets_durability: Durability,
}

type Reply<T> = Sender<Result<T, PartitionError>>;

enum Job {
    Append {
        batch: Vec<u8>,
        now_us: u64,
        producer: Option<(Producer, u32)>,
        reply: Reply<AppendOutcome>,
    },
    Read {
        start: ReadStart,
        count: u32,
        max_bytes: u64,
        reply: Reply<Records>,
    },
    StoreOffset {
        owner: OffsetOwner,
        offset: u64,
        reply: Reply<()>,
    },
    DeleteOffset {
        owner: OffsetOwner,
        reply: Reply<bool>,
    },
    Purge {
        reply: Reply<()>,
    },
    Close {
        remove: bool,
        reply: Reply<()>,
    },
}

/// What callers and the task share.
#[derive(Default)]
struct Shared {
    queue: RefCell<VecDeque<Job>>,
    /// Wakes the task when a job is queued.
    queued: Notify,
    /// Wakes parked polls after every append round.
    appended: Notify,
    stats: Cell<PartitionStats>,
    offsets: RefCell<BTreeMap<OffsetOwner, u64>>,
    closed: Cell<bool>,
}

/// A cloneable handle to one partition's task.
#[derive(Clone)]
pub struct PartitionHandle {
    shared: Rc<Shared>,
}

impl std::fmt::Debug for PartitionHandle {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PartitionHandle")
            .field("stats", &self.shared.stats.get())
            .finish_non_exhaustive()
    }
}

struct Task<S: Storage> {
    storage: S,
    spec: PartitionSpec,
    /// `None` only after a purge failed to reopen the log.
    log: Option<PartitionLog<S>>,
    offsets: ConsumerOffsets<S>,
    producers: ProducerTable,
    poison: Option<Arc<AppendError>>,
    shared: Rc<Shared>,
}

struct Pending {
    reply: Reply<AppendOutcome>,
    result: Result<AppendOutcome, PartitionError>,
    needs_sync: bool,
}

impl PartitionHandle {
    /// Opens (creating if needed) the partition and spawns its task on the current compio
    /// runtime.
    pub async fn open<S: Storage + Clone + 'static>(
        storage: S,
        spec: PartitionSpec,
    ) -> Result<Self, PartitionError> {
        let (log, _) = PartitionLog::open(storage.clone(), &spec.directory, spec.log)
            .await
            .map_err(PartitionError::Open)?;
        let offsets = ConsumerOffsets::load(storage.clone(), &spec.directory)
            .await
            .map_err(PartitionError::LoadOffsets)?;
        let shared = Rc::new(Shared::default());
        shared.stats.set(PartitionStats::of(&log));
        *shared.offsets.borrow_mut() = offsets.iter().collect();
        let task = Task {
            storage,
            spec,
            log: Some(log),
            offsets,
            producers: ProducerTable::new(),
            poison: None,
            shared: Rc::clone(&shared),
        };
        compio::runtime::spawn(task.run()).detach();
        Ok(Self { shared })
    }

    pub fn stats(&self) -> PartitionStats {
        self.shared.stats.get()
    }

    /// The stored offset of `owner`, as of the last completed offset write.
    pub fn stored_offset(&self, owner: OffsetOwner) -> Option<u64> {
        self.shared.offsets.borrow().get(&owner).copied()
    }

    /// Every stored offset.
    pub fn stored_offsets(&self) -> Vec<(OffsetOwner, u64)> {
        let offsets = self.shared.offsets.borrow();
        offsets
            .iter()
            .map(|(owner, offset)| (*owner, *offset))
            .collect()
    }

    /// Completes after the next append round (for parked polls).
    pub fn appended(&self) -> super::signal::Notified<'_> {
        self.shared.appended.notified()
    }

    /// Appends one batch record; `producer` carries the batch's producer section and message
    /// count when it has one. Acknowledged after the sync that covers it under `Persisted`.
    pub async fn append(
        &self,
        batch: Vec<u8>,
        now_us: u64,
        producer: Option<(Producer, u32)>,
    ) -> Result<AppendOutcome, PartitionError> {
        self.call(|reply| Job::Append {
            batch,
            now_us,
            producer,
            reply,
        })
        .await
    }

    pub async fn read(
        &self,
        start: ReadStart,
        count: u32,
        max_bytes: u64,
    ) -> Result<Records, PartitionError> {
        self.call(|reply| Job::Read {
            start,
            count,
            max_bytes,
            reply,
        })
        .await
    }

    pub async fn store_offset(
        &self,
        owner: OffsetOwner,
        offset: u64,
    ) -> Result<(), PartitionError> {
        self.call(|reply| Job::StoreOffset {
            owner,
            offset,
            reply,
        })
        .await
    }

    /// Deletes `owner`'s offset; returns whether there was one.
    pub async fn delete_offset(&self, owner: OffsetOwner) -> Result<bool, PartitionError> {
        self.call(|reply| Job::DeleteOffset { owner, reply }).await
    }

    /// Deletes every message and stored offset; offsets start over at 0.
    pub async fn purge(&self) -> Result<(), PartitionError> {
        self.call(|reply| Job::Purge { reply }).await
    }

    /// Finishes the queued jobs and closes the log cleanly; with `remove`, deletes the
    /// partition directory afterwards.
    pub async fn close(&self, remove: bool) -> Result<(), PartitionError> {
        self.call(|reply| Job::Close { remove, reply }).await
    }

    async fn call<T>(&self, job: impl FnOnce(Reply<T>) -> Job) -> Result<T, PartitionError> {
        if self.shared.closed.get() {
            return Err(PartitionError::Closed);
        }
        let (sender, receiver) = oneshot();
        self.shared.queue.borrow_mut().push_back(job(sender));
        self.shared.queued.notify_all();
        receiver.await.unwrap_or(Err(PartitionError::Closed))
    }
}

impl<S: Storage + Clone + 'static> Task<S> {
    async fn run(mut self) {
        let mut round: Vec<Pending> = Vec::with_capacity(GROUP_MAX);
        loop {
            let waiting = self.shared.queued.notified();
            let job = self.shared.queue.borrow_mut().pop_front();
            let Some(job) = job else {
                waiting.await;
                continue;
            };
            match job {
                Job::Append {
                    batch,
                    now_us,
                    producer,
                    reply,
                } => {
                    let (result, needs_sync) = self.append(batch, now_us, producer).await;
                    round.push(Pending {
                        reply,
                        result,
                        needs_sync,
                    });
                    let queue_dry = self.shared.queue.borrow().is_empty();
                    if queue_dry || round.len() >= GROUP_MAX {
                        self.finish_round(&mut round).await;
                    }
                }
                other => {
                    self.finish_round(&mut round).await;
                    if self.serve(other).await {
                        return;
                    }
                }
            }
        }
    }

    async fn append(
        &mut self,
        batch: Vec<u8>,
        now_us: u64,
        producer: Option<(Producer, u32)>,
    ) -> (Result<AppendOutcome, PartitionError>, bool) {
        if let Some(poison) = &self.poison {
            return (Err(PartitionError::Poisoned(Arc::clone(poison))), false);
        }
        if let Some((producer, count)) = producer {
            match self.producers.admit(producer, count) {
                Ok(Admission::Append) => {}
                Ok(Admission::Duplicate { base_offset }) => {
                    let outcome = AppendOutcome {
                        base_offset,
                        messages_count: count,
                        duplicate: true,
                    };
                    return (Ok(outcome), false);
                }
                Err(code) => return (Err(PartitionError::Producer(code)), false),
            }
        }
        let Some(log) = self.log.as_mut() else {
            return (Err(PartitionError::Closed), false);
        };
        let (result, _) = log.append(batch, now_us).await;
        let appended = match result {
            Ok(appended) => appended,
            Err(error) => return (Err(PartitionError::Append(error)), false),
        };
        if let Some((producer, count)) = producer {
            self.producers.record(producer, count, appended.base_offset);
        }
        let outcome = AppendOutcome {
            base_offset: appended.base_offset,
            messages_count: appended.message_count,
            duplicate: false,
        };
        (Ok(outcome), appended.needs_sync)
    }

    /// Syncs once if any append of the round needs it, then answers every appender.
    async fn finish_round(&mut self, round: &mut Vec<Pending>) {
        if round.is_empty() {
            return;
        }
        let needs_sync = round.iter().any(|pending| pending.needs_sync);
        let mut failure = None;
        if needs_sync
            && let Some(log) = self.log.as_mut()
            && let Err(error) = log.sync().await
        {
            let error = Arc::new(error);
            self.poison = Some(Arc::clone(&error));
            failure = Some(error);
        }
        if let Some(log) = &self.log {
            self.shared.stats.set(PartitionStats::of(log));
        }
        for pending in round.drain(..) {
            let result = match (&failure, pending.result) {
                (Some(error), Ok(outcome)) if !outcome.duplicate => {
                    Err(PartitionError::Sync(Arc::clone(error)))
                }
                (_, result) => result,
            };
            pending.reply.send(result);
        }
        self.shared.appended.notify_all();
    }

    /// Serves a job other than an append; returns `true` when the task ends.
    async fn serve(&mut self, job: Job) -> bool {
        match job {
            Job::Append { reply, .. } => reply.send(Err(PartitionError::Closed)),
            Job::Read {
                start,
                count,
                max_bytes,
                reply,
            } => {
                let result = match &self.log {
                    Some(log) => log
                        .read(start, count, max_bytes)
                        .await
                        .map_err(PartitionError::Read),
                    None => Err(PartitionError::Closed),
                };
                reply.send(result);
            }
            Job::StoreOffset {
                owner,
                offset,
                reply,
            } => reply.send(self.store_offset(owner, offset).await),
            Job::DeleteOffset { owner, reply } => reply.send(self.delete_offset(owner).await),
            Job::Purge { reply } => reply.send(self.purge().await),
            Job::Close { remove, reply } => {
                reply.send(self.close(remove).await);
                return true;
            }
        }
        false
    }

    async fn store_offset(
        &mut self,
        owner: OffsetOwner,
        offset: u64,
    ) -> Result<(), PartitionError> {
        self.offsets
            .store(owner, offset, self.spec.offsets_durability)
            .await
            .map_err(PartitionError::Offset)?;
        self.shared.offsets.borrow_mut().insert(owner, offset);
        Ok(())
    }

    async fn delete_offset(&mut self, owner: OffsetOwner) -> Result<bool, PartitionError> {
        let existed = self
            .offsets
            .delete(owner)
            .await
            .map_err(PartitionError::Offset)?;
        self.shared.offsets.borrow_mut().remove(&owner);
        Ok(existed)
    }

    /// Closes the log, removes the directory and opens a fresh, empty partition there.
    async fn purge(&mut self) -> Result<(), PartitionError> {
        if let Some(log) = self.log.take() {
            log.close().await.map_err(PartitionError::Close)?;
        }
        self.offsets.clear().await.map_err(PartitionError::Offset)?;
        self.shared.offsets.borrow_mut().clear();
        self.producers.clear();
        self.poison = None;
        self.remove_directory().await?;
        let (log, _) =
            PartitionLog::open(self.storage.clone(), &self.spec.directory, self.spec.log)
                .await
                .map_err(PartitionError::Open)?;
        self.offsets = ConsumerOffsets::load(self.storage.clone(), &self.spec.directory)
            .await
            .map_err(PartitionError::LoadOffsets)?;
        self.shared.stats.set(PartitionStats::of(&log));
        self.log = Some(log);
        self.shared.appended.notify_all();
        Ok(())
    }

    async fn close(&mut self, remove: bool) -> Result<(), PartitionError> {
        self.shared.closed.set(true);
        let queued: Vec<Job> = self.shared.queue.borrow_mut().drain(..).collect();
        let result = match self.log.take() {
            Some(log) if self.poison.is_none() => log.close().await.map_err(PartitionError::Close),
            _ => Ok(()),
        };
        for job in queued {
            refuse(job);
        }
        self.shared.appended.notify_all();
        if remove {
            self.remove_directory().await?;
        }
        result
    }

    async fn remove_directory(&self) -> Result<(), PartitionError> {
        let directory = &self.spec.directory;
        if !self.storage.exists(directory).await {
            return Ok(());
        }
        self.storage
            .remove_dir_all(directory)
            .await
            .map_err(|source| PartitionError::Remove {
                path: directory.clone(),
                source,
            })
    }
}

/// Answers a job queued behind a close.
fn refuse(job: Job) {
    match job {
        Job::Append { reply, .. } => reply.send(Err(PartitionError::Closed)),
        Job::Read { reply, .. } => reply.send(Err(PartitionError::Closed)),
        Job::StoreOffset { reply, .. } | Job::Purge { reply } | Job::Close { reply, .. } => {
            reply.send(Err(PartitionError::Closed));
        }
        Job::DeleteOffset { reply, .. } => reply.send(Err(PartitionError::Closed)),
    }
}

#[cfg(test)]
#[path = "partition_tests.rs"]
pub(crate) mod tests;
