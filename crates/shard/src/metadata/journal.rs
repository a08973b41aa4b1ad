//! The metadata journal, `metadata/journal.wal`, and its compaction into the snapshot,
//! `metadata/snapshot.bin` ([`super::snapshot`]): together they rebuild [`Metadata`] at
//! start-up. The bytes are handled by [`super::replay`]; this file does the I/O.
//!
//! # Format
//!
//! The file is a sequence of entries and nothing else (no file header):
//!
//! ```text
//! [length:u32 LE][checksum:u64 LE][body: length bytes]
//! ```
//!
//! - `length` counts the body only, `1..=ENTRY_LENGTH_MAX`.
//! - `checksum` is XXH3-64 (seed 0) of the body.
//! - A body is an op in `op_codec.rs`'s versioned encoding (`[version:u8 >= 1][tag][fields]`)
//!   or, as the first entry only, a *base record* `[0:u8][commit:u64]`: the commit the
//!   journal continues. Without one the journal continues commit 0. The op at index `i`
//!   (base record not counted) made commit `base + i + 1`.
//!
//! # Torn tails and corruption
//!
//! An entry is appended with one write followed by `fdatasync`; an op is acknowledged only
//! after that sync, so a crash can leave at most the last entry torn: any prefix of it, or
//! parts of it zero-filled when the file was extended but not all written. Replay reads
//! entries until one is damaged (a header fragment, a length out of range or past the end,
//! a checksum mismatch). If no intact entry starts at any later byte, the damage is a torn
//! tail: [`Journal::open`] truncates the file there (and syncs), so the next append starts
//! from a clean tail. If an intact entry does follow, cutting would drop acknowledged ops:
//! open fails with [`JournalError::Corrupt`] naming the file and the byte. (A damaged last
//! entry is indistinguishable from a torn one and is cut: it was the last op.) Every later
//! byte is searched, so a torn op whose own bytes hold a whole valid entry (a crafted name)
//! reads as corruption: the mistake is loud, never a silent cut. An intact entry that does
//! not decode is a foreign or newer format and also refuses to open.
//!
//! # Compaction
//!
//! After an append that leaves more than [`CompactionLimits::ops`] ops or
//! [`CompactionLimits::bytes`] bytes in the journal, the leader compacts:
//!
//! 1. it writes the state after that op to `snapshot.bin.tmp` (mode 0600), syncs it, renames
//!    it over `snapshot.bin` and syncs the directory;
//! 2. it writes `journal.wal.tmp` holding only a base record naming the snapshot's commit,
//!    syncs it, renames it over `journal.wal`, syncs the directory and appends there.
//!
//! Start-up loads the snapshot (if any) and applies only the journal ops whose commit is
//! above the snapshot's. So a crash anywhere leaves a state that recovers exactly: the old
//! snapshot and journal (before the first rename), the new snapshot and the old journal
//! (between the renames: every op in it is at or below the snapshot's commit and is
//! skipped, and open finishes the compaction), or both new. A journal whose base is above
//! the snapshot's commit means the snapshot was lost or replaced by an older one: open
//! refuses it ([`JournalError::Gap`]) rather than start without the ops in between. A
//! journal that ends before the snapshot's commit (empty, missing, or damaged from its first
//! byte, so its base record is gone) cannot be an interrupted compaction's, since the old
//! journal holds the op the snapshot was taken after: the ops after the snapshot are lost
//! with it, and starting from the snapshot would silently undo them (a deleted user or a
//! revoked token would return). Open refuses it ([`JournalError::Short`]) unless the
//! operator accepts the loss ([`Journal::open_with`]).
//! Leftover `.tmp` files are removed at open. Compaction runs inline, under the commit lock,
//! on the op that crosses a limit: that one commit pays for writing the snapshot.
//!
//! # Failures
//!
//! A refused append write (a full disk, say) leaves the file's tail unknown: part of the
//! entry may be there. So does a failed sync of an appended entry: its pages may or may not
//! have reached the disk, and a refused op found at the next start would be applied then (a
//! user whose creation was answered with an error could log in after a restart). Either
//! way the journal cuts the file back to its last intact entry and syncs the cut; once that
//! sync succeeds the file holds exactly the acknowledged ops (every one of them was synced
//! by its own append, so only the refused entry's pages were unsynced, and the cut removes
//! them), the op is refused and later appends go on, so a metadata change refused on a full
//! or failing disk succeeds once the fault clears. If the cut or its sync fails, the journal
//! refuses every further append: the refused entry may still be in the file, and only a
//! restart, which reads the file again, knows. Either way the op is not applied and reads
//! of the metadata go on.
//!
//! A compaction that fails before the journal's rename leaves valid files behind: it is
//! logged and tried again after another [`CompactionLimits::ops`] ops. One that fails after
//! the rename leaves the open handle on what may no longer be the journal, so the journal
//! closes.

use std::io;
use std::path::{Path, PathBuf};

use segment::storage::{Storage, StorageFile, read_all};

use super::apply::ApplyError;
use super::model::Metadata;
use super::op::MetadataOp;
use super::replay::{
    EntryDamage, encode_base_entry, encode_entry, reaches_snapshot, recover, replay,
};
use super::snapshot::{SNAPSHOT_FILE, SnapshotError, decode_snapshot, encode_snapshot};

pub use super::replay::{ENTRY_HEADER_BYTES, ENTRY_LENGTH_MAX};

/// The journal's file name in the metadata directory.
pub const JOURNAL_FILE: &str = "journal.wal";

/// When the journal is compacted into a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionLimits {
    /// Ops the journal may hold before compaction.
    pub ops: u64,
    /// Bytes the journal may hold before compaction.
    pub bytes: u64,
}

impl Default for CompactionLimits {
    /// 1024 ops or 1 MiB: replay at start-up stays in the milliseconds, and a snapshot (a
    /// few kilobytes per topic and user) is written rarely.
    fn default() -> Self {
        Self {
            ops: 1024,
            bytes: 1 << 20,
        }
    }
}

/// Why the journal or snapshot could not be opened or appended to.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} is corrupt at byte {position}: {reason}; an intact entry follows at byte \
         {intact_at}, so this is not a torn last write"
    )]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: EntryDamage,
        intact_at: u64,
    },
    #[error("entry at byte {position} of {path} passes its checksum but does not decode")]
    Undecodable {
        path: PathBuf,
        position: u64,
        #[source]
        source: proto::DecodeError,
    },
    #[error("{path} is not a valid metadata snapshot (at byte {})", .source.position())]
    Snapshot {
        path: PathBuf,
        #[source]
        source: SnapshotError,
    },
    #[error("the op at byte {position} of {path} does not apply to the state before it")]
    Replay {
        path: PathBuf,
        position: u64,
        #[source]
        source: ApplyError,
    },
    #[error(
        "{path} continues commit {base} but the snapshot holds commit {snapshot_commit}: \
         the snapshot is missing or older than the journal"
    )]
    Gap {
        path: PathBuf,
        base: u64,
        snapshot_commit: u64,
    },
    #[error(
        "{path} ends at commit {end}, before the snapshot's {snapshot_commit}: it lost its start \
         (a compaction's journal always reaches its snapshot), and the metadata changes after \
         the snapshot with it; restore it from a backup, or start once with \
         --accept-metadata-loss to go on from the snapshot alone"
    )]
    Short {
        path: PathBuf,
        end: u64,
        snapshot_commit: u64,
    },
    #[error("op of {length} bytes exceeds the journal's entry limit")]
    EntryTooLarge { length: usize },
    #[error("an earlier write or sync of {path} failed; the journal is closed")]
    Failed { path: PathBuf },
}

/// The open journal: appends after its intact entries and compacts itself.
#[derive(Debug)]
pub struct Journal<S: Storage> {
    storage: S,
    directory: PathBuf,
    path: PathBuf,
    file: S::File,
    /// The commit the file continues: its base record's, or 0.
    base: u64,
    /// Ops in the file (the base record not counted).
    ops: u64,
    length_bytes: u64,
    limits: CompactionLimits,
    /// Ops the file must hold before compaction is tried again after a failure.
    retry_at_ops: u64,
    failed: bool,
}

impl<S: Storage + Clone> Journal<S> {
    /// Opens (creating it and the directory, mode 0700, if needed) the journal and snapshot
    /// in `directory` and returns the journal with the state they hold. Cuts a torn tail,
    /// removes leftovers of an interrupted compaction and finishes it. A journal that ends
    /// before the snapshot's commit is refused ([`JournalError::Short`]).
    pub async fn open(storage: &S, directory: &Path) -> Result<(Self, Metadata), JournalError> {
        Self::open_with(storage, directory, false).await
    }

    /// [`Self::open`], except that with `accept_loss` a journal that ends before the
    /// snapshot's commit is logged and replaced, and the state is the snapshot's: what an
    /// operator asks for when the journal is lost and no backup holds it.
    pub async fn open_with(
        storage: &S,
        directory: &Path,
        accept_loss: bool,
    ) -> Result<(Self, Metadata), JournalError> {
        prepare_directory(storage, directory).await?;
        let snapshot = read_snapshot(storage, directory).await?;
        let snapshot_commit = snapshot.commit;
        let path = directory.join(JOURNAL_FILE);
        let (file, bytes) = open_journal_file(storage, &path).await?;
        // The names read here may come from a rename that a process crash left in the page
        // cache only; appending before they are durable could put ops in a file a power loss
        // then unnames.
        storage
            .sync_dir(directory)
            .await
            .map_err(io_error("sync", directory))?;
        let replay = replay(&bytes, &path)?;
        match reaches_snapshot(&replay, snapshot_commit, &path) {
            Err(error) if accept_loss => {
                log::error!(
                    "metadata: {error}; --accept-metadata-loss: going on from the snapshot"
                );
            }
            reached => reached?,
        }
        let metadata = recover(snapshot, &replay, &path)?;
        let mut journal = Self {
            storage: storage.clone(),
            directory: directory.to_path_buf(),
            path,
            file,
            base: replay.base,
            ops: u64::try_from(replay.entries.len()).unwrap_or(u64::MAX),
            length_bytes: replay.valid_length,
            limits: CompactionLimits::default(),
            retry_at_ops: 0,
            failed: false,
        };
        if let Some(damage) = replay.torn {
            journal.cut_torn_tail(bytes.len(), damage).await?;
        }
        if replay.base < snapshot_commit {
            log::info!(
                "metadata: {} predates the snapshot (commit {snapshot_commit}); replacing it",
                journal.path.display()
            );
            journal.compact(&metadata).await?;
        }
        log::info!(
            "metadata: snapshot at commit {snapshot_commit}, {} journal op(s) replayed, commit {}",
            metadata.commit.saturating_sub(snapshot_commit),
            metadata.commit
        );
        Ok((journal, metadata))
    }

    /// The same journal with other compaction limits.
    pub fn with_compaction_limits(mut self, limits: CompactionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Appends `op` and syncs it; `after` is the state with `op` applied, which a compaction
    /// due now writes as the snapshot. Once this returns `Ok` the op survives a crash; a
    /// failed compaction is logged, not returned, because the op is durable all the same.
    pub async fn append(&mut self, op: &MetadataOp, after: &Metadata) -> Result<(), JournalError> {
        self.append_op(op).await?;
        // Open returned the state at `base + ops`, and every later op went through here.
        assert_eq!(
            after.commit,
            self.base.saturating_add(self.ops),
            "the journal and the state it rebuilds agree on the commit"
        );
        if self.compaction_due()
            && let Err(error) = self.compact(after).await
        {
            log::error!(
                "metadata: compaction at commit {} failed: {error}",
                after.commit
            );
            self.retry_at_ops = self.ops.saturating_add(self.limits.ops);
        }
        Ok(())
    }

    /// Bytes of intact entries in the file.
    pub fn length_bytes(&self) -> u64 {
        self.length_bytes
    }

    /// The commit the journal file continues (that of the snapshot it follows).
    pub fn base(&self) -> u64 {
        self.base
    }

    async fn append_op(&mut self, op: &MetadataOp) -> Result<(), JournalError> {
        if self.failed {
            return Err(JournalError::Failed {
                path: self.path.clone(),
            });
        }
        let entry = encode_entry(op)?;
        let entry_bytes = u64::try_from(entry.len()).unwrap_or(u64::MAX);
        let (written, _entry) = self.file.write_all_at(entry, self.length_bytes).await;
        // See "Failures" in the module doc: the op is refused either way.
        if let Err(source) = written {
            self.failed = self.cut_refused_entry().await.is_err();
            return Err(io_error("append to", &self.path)(source));
        }
        if let Err(source) = self.file.sync_data().await {
            self.failed = self.cut_refused_entry().await.is_err();
            return Err(io_error("sync", &self.path)(source));
        }
        self.length_bytes = self.length_bytes.saturating_add(entry_bytes);
        self.ops = self.ops.saturating_add(1);
        Ok(())
    }

    /// Cuts whatever part of a refused entry reached the file, and syncs the cut.
    async fn cut_refused_entry(&mut self) -> io::Result<()> {
        self.file.set_len(self.length_bytes).await?;
        self.file.sync_data().await
    }

    fn compaction_due(&self) -> bool {
        let full = self.ops > self.limits.ops || self.length_bytes > self.limits.bytes;
        full && self.ops >= self.retry_at_ops
    }

    /// Writes `metadata` as the snapshot, then replaces the journal with one continuing it.
    async fn compact(&mut self, metadata: &Metadata) -> Result<(), JournalError> {
        let snapshot = encode_snapshot(metadata);
        let target = self.directory.join(SNAPSHOT_FILE);
        let temporary = self.write_temporary(&target, snapshot).await?;
        // Failures up to the journal's rename leave files that recover exactly (module doc).
        let storage = &self.storage;
        storage
            .rename(&temporary, &target)
            .await
            .map_err(io_error("rename into place", &target))?;
        storage
            .sync_dir(&self.directory)
            .await
            .map_err(io_error("sync the directory of", &target))?;
        self.rotate(metadata.commit).await
    }

    /// Replaces the journal with an empty one continuing `commit`.
    async fn rotate(&mut self, commit: u64) -> Result<(), JournalError> {
        let entry = encode_base_entry(commit);
        let entry_bytes = u64::try_from(entry.len()).unwrap_or(u64::MAX);
        let temporary = self.write_temporary(&self.path.clone(), entry).await?;
        self.storage
            .rename(&temporary, &self.path)
            .await
            .map_err(io_error("rename into place", &self.path))?;
        // The handle now names a removed file: until a new one is open, nothing may append.
        self.failed = true;
        self.storage
            .sync_dir(&self.directory)
            .await
            .map_err(io_error("sync the directory of", &self.path))?;
        self.file = self
            .storage
            .open(&self.path, false)
            .await
            .map_err(io_error("reopen", &self.path))?;
        self.failed = false;
        self.base = commit;
        self.ops = 0;
        self.length_bytes = entry_bytes;
        self.retry_at_ops = 0;
        log::info!("metadata: compacted the journal into a snapshot at commit {commit}");
        Ok(())
    }

    /// Writes `bytes` to `<target>.tmp` (owner-only) and syncs it; returns its path.
    async fn write_temporary(
        &self,
        target: &Path,
        bytes: Vec<u8>,
    ) -> Result<PathBuf, JournalError> {
        let temporary = temporary_path(target);
        let error = |action| io_error(action, &temporary);
        let mut file = self
            .storage
            .open_private(&temporary)
            .await
            .map_err(error("create"))?;
        // A leftover of an earlier failed attempt may be longer.
        file.set_len(0).await.map_err(error("truncate"))?;
        let (written, _bytes) = file.write_all_at(bytes, 0).await;
        written.map_err(error("write"))?;
        file.sync_data().await.map_err(error("sync"))?;
        Ok(temporary)
    }

    async fn cut_torn_tail(
        &mut self,
        length: usize,
        damage: EntryDamage,
    ) -> Result<(), JournalError> {
        log::warn!(
            "metadata: cutting a torn last entry of {} at byte {} ({damage}; {} byte(s))",
            self.path.display(),
            self.length_bytes,
            u64::try_from(length)
                .unwrap_or(u64::MAX)
                .saturating_sub(self.length_bytes)
        );
        self.file
            .set_len(self.length_bytes)
            .await
            .map_err(io_error("truncate", &self.path))?;
        self.file
            .sync_data()
            .await
            .map_err(io_error("sync", &self.path))
    }
}

/// Creates the directory (owner-only) when missing and removes what an interrupted
/// compaction left behind.
async fn prepare_directory<S: Storage>(storage: &S, directory: &Path) -> Result<(), JournalError> {
    if !storage.exists(directory).await {
        storage
            .create_dir_all_private(directory)
            .await
            .map_err(io_error("create", directory))?;
        if let Some(parent) = directory.parent() {
            storage
                .sync_dir(parent)
                .await
                .map_err(io_error("sync the parent of", directory))?;
        }
    }
    for name in [SNAPSHOT_FILE, JOURNAL_FILE] {
        let temporary = temporary_path(&directory.join(name));
        if storage.exists(&temporary).await {
            storage
                .remove_file(&temporary)
                .await
                .map_err(io_error("remove", &temporary))?;
        }
    }
    Ok(())
}

/// The snapshot's state, or the empty state at commit 0 when there is none.
async fn read_snapshot<S: Storage>(
    storage: &S,
    directory: &Path,
) -> Result<Metadata, JournalError> {
    let path = directory.join(SNAPSHOT_FILE);
    if !storage.exists(&path).await {
        return Ok(Metadata::default());
    }
    let file = storage
        .open(&path, false)
        .await
        .map_err(io_error("open", &path))?;
    let bytes = read_all(&file).await.map_err(io_error("read", &path))?;
    decode_snapshot(&bytes).map_err(|source| JournalError::Snapshot { path, source })
}

/// Opens the journal (creating it owner-only) and reads it whole.
async fn open_journal_file<S: Storage>(
    storage: &S,
    path: &Path,
) -> Result<(S::File, Vec<u8>), JournalError> {
    let file = storage
        .open_private(path)
        .await
        .map_err(io_error("open", path))?;
    let bytes = read_all(&file).await.map_err(io_error("read", path))?;
    Ok((file, bytes))
}

fn temporary_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    target.with_file_name(name)
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> JournalError {
    let path = path.to_path_buf();
    move |source| JournalError::Io {
        action,
        path,
        source,
    }
}
