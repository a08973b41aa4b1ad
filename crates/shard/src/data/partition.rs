//! A partition as the data plane holds it: the task of [`segment::partition`] (log, stored
//! offsets, producer dedupe, group commit) plus the [`Notify`] it rings after every append
//! round, purge and close, which wakes the polls parked on the partition.
//!
//! The task runs on the shard that owns the partition; the handle works from every shard
//! (its jobs travel over the task's crossfire channel, its notification crosses threads).

use std::ops::Deref;
use std::sync::Arc;

use segment::partition::IoObserver;
pub use segment::partition::{
    AppendOutcome, GROUP_MAX, PartitionError, PartitionSpec, PartitionStats,
};
use segment::storage::Storage;

use super::signal::{Notified, Notify};

/// A cloneable handle to one partition's task; every job of [`segment::partition`] is
/// reached through `Deref`.
#[derive(Debug, Clone)]
pub struct PartitionHandle {
    task: segment::partition::PartitionHandle,
    changed: Arc<Notify>,
}

impl PartitionHandle {
    /// Opens (creating if needed) the partition and spawns its task on the current compio
    /// runtime; its syncs are reported to `observer`.
    pub async fn open<S: Storage + Clone + 'static>(
        storage: S,
        spec: PartitionSpec,
        observer: Arc<dyn IoObserver>,
    ) -> Result<Self, PartitionError> {
        let changed = Arc::new(Notify::new());
        let ringer = Arc::clone(&changed);
        let ring = move || ringer.notify_all();
        let task =
            segment::partition::PartitionHandle::open_observed(storage, spec, ring, observer)
                .await?;
        Ok(Self { task, changed })
    }

    /// Completes after the next append round, purge or close (for parked polls).
    pub fn appended(&self) -> Notified {
        self.changed.notified()
    }
}

impl Deref for PartitionHandle {
    type Target = segment::partition::PartitionHandle;

    fn deref(&self) -> &Self::Target {
        &self.task
    }
}
