//! `Replicated`'s threshold sync, off the acknowledgement path.
//!
//! `Replicated` acknowledges a record once it reached the kernel; the thresholds
//! (`messages_required_to_save`, `size_of_messages_required_to_save`) and the interval
//! (`sync_interval_us`) only bound what a power loss can take. So the sync they ask for need
//! not delay anyone: the partition task starts it after answering a round
//! ([`PartitionLog::start_sync`]), through a second handle on the active segment's file, and
//! keeps appending while the kernel flushes; when it completes, [`PartitionLog::finish_sync`]
//! records what it covered.
//!
//! Why an interval for the message count: a sync costs about the same whatever it covers (a
//! journal commit and a device flush), and with 100-byte messages the count threshold alone
//! asked for one per 100 KB, so one was always in flight beside the appends; on this
//! project's test machine that cost 1.36x in messages per second (bench/RESULTS.md). The
//! size threshold still starts a sync at once, so what a power loss can take stays bounded
//! by it, or by about one interval when appends are slow (the owner's ticks start a sync
//! that waits, see `PartitionHandle::tick`).
//!
//! Invariants:
//! - a finished sync covers at most the bytes the active segment held when it started, so
//!   `synced_size` never claims a byte written after the start;
//! - a sync that finishes after a roll changes nothing (the seal synced the old segment
//!   whole and the new one starts its own count), unless it failed;
//! - a failed sync poisons the log, as an inline one does: later appends are refused, and
//!   the records already acknowledged stay acknowledged (a retry would duplicate them).

use std::future::Future;
use std::io;
use std::path::PathBuf;

use super::PartitionLog;
use super::config::Durability;
use super::error::AppendError;
use crate::storage::{Storage, StorageFile};

/// What a started sync will cover, handed back to [`PartitionLog::finish_sync`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncStart {
    segment_start: u64,
    size: u64,
    messages: u64,
    path: PathBuf,
}

impl<S: Storage> PartitionLog<S> {
    /// Whether `Replicated`'s thresholds ask for a sync, whenever the interval lets it
    /// start (never under `Persisted`, whose appends sync before their acknowledgement, nor
    /// once the log refuses appends).
    pub fn sync_wanted(&self) -> bool {
        let (by_count, by_size) = self.thresholds_reached();
        by_count || by_size
    }

    /// Whether a threshold sync should start at `now_us`: at once when the size threshold is
    /// reached, and when only the message count is, once no sync started within the last
    /// `sync_interval_us` (append time, which never goes backwards here). A sync's cost is
    /// mostly fixed (a journal commit and a device flush), so small messages must not buy
    /// one per 1,024 of them.
    pub fn sync_due(&self, now_us: u64) -> bool {
        let (by_count, by_size) = self.thresholds_reached();
        let interval_over = self
            .last_sync_start_us
            .is_none_or(|started| now_us.saturating_sub(started) >= self.config.sync_interval_us);
        by_size || (by_count && interval_over)
    }

    /// (by message count, by size): which of `Replicated`'s thresholds the unsynced appends
    /// reached.
    fn thresholds_reached(&self) -> (bool, bool) {
        if self.config.durability != Durability::Replicated || self.refusal.is_some() {
            return (false, false);
        }
        let unsynced_bytes = self.active().size_bytes - self.synced_size;
        let by_count = self.unsynced_messages >= u64::from(self.config.messages_required_to_save);
        let by_size = unsynced_bytes >= self.config.size_of_messages_required_to_save;
        (by_count, by_size)
    }

    /// Starts the threshold sync: an fdatasync of the active segment's `.log` through a
    /// second handle, so appends may go on while it runs. Hand its result and the
    /// [`SyncStart`] to [`Self::finish_sync`]. Fails only when the handle cannot be had
    /// (no descriptor left); the caller then syncs inline with [`Self::sync_if_due`].
    /// `now_us` starts the interval before the next one may start.
    pub fn start_sync(
        &mut self,
        now_us: u64,
    ) -> io::Result<(impl Future<Output = io::Result<()>> + 'static, SyncStart)>
    where
        S::File: 'static,
    {
        let active = self.active();
        let file = active.log.duplicate()?;
        let start = SyncStart {
            segment_start: active.start_offset,
            size: active.size_bytes,
            messages: self.unsynced_messages,
            path: active.paths.log.clone(),
        };
        self.last_sync_start_us = Some(now_us);
        Ok((async move { file.sync_data().await }, start))
    }

    /// Records a finished threshold sync: what it covered is synced, unless a roll came
    /// between (see the module invariants); a failure poisons the log.
    pub async fn finish_sync(&mut self, synced: io::Result<()>, start: SyncStart) {
        if let Err(error) = synced {
            log::error!(
                "partition {}: threshold sync of {}: {error}",
                self.directory.display(),
                start.path.display()
            );
            self.poison(&start.path).await;
            return;
        }
        if self.active().start_offset == start.segment_start && self.synced_size < start.size {
            self.synced_size = start.size;
            self.unsynced_messages = self.unsynced_messages.saturating_sub(start.messages);
        }
    }

    /// Writes the index entries that wait in memory once there are at least `at_least`, so
    /// the files stay near the log between seals (for `iggy check` after a crash; start-up
    /// rebuilds them either way). A failure (a full disk) leaves them waiting.
    pub async fn write_waiting_entries(&mut self, at_least: usize) -> Result<(), AppendError> {
        if self.active().waiting_entries() < at_least.max(1) {
            return Ok(());
        }
        self.active_mut().write_entries().await
    }

    /// The threshold sync inline, when due: for callers without a task to run it beside
    /// their appends, and the fallback when [`Self::start_sync`] cannot.
    pub async fn sync_if_due(&mut self, now_us: u64) {
        if !self.sync_due(now_us) {
            return;
        }
        self.last_sync_start_us = Some(now_us);
        if self.sync().await.is_err() {
            assert!(self.refusal.is_some(), "a failed sync poisons the log");
        }
    }
}
