//! `iggy check`: an offline verifier of a data directory. It decodes the metadata snapshot,
//! replays the journal over it without applying anything to disk, and runs
//! [`segment::check`] over every partition. Each problem is a [`Finding`] naming the file
//! and the byte it starts at, with the repair that applies ([`Finding::repair`]).
//!
//! The checker reads the same bytes with the same code start-up uses (`replay`, `recover`,
//! the log scan), so what it reports is exactly what start-up would cut or refuse. It never
//! writes; run it on a stopped server's directory or a copy.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use proto::DecodeError;
use segment::layout::metadata_directory;
use segment::storage::compio::CompioStorage;
use segment::storage::{Storage, read_all};

use crate::metadata::journal::JOURNAL_FILE;
use crate::metadata::replay::{EntryDamage, reaches_snapshot, recover, replay};
use crate::metadata::snapshot::{SNAPSHOT_FILE, SnapshotError, decode_snapshot};
use crate::metadata::{ApplyError, JournalError, Metadata};

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    /// The byte of the file the problem starts at.
    pub position: u64,
    pub problem: Problem,
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file could not be read.
    Io {
        action: &'static str,
        kind: io::ErrorKind,
    },
    /// The snapshot does not decode: the server refuses to start.
    Snapshot(SnapshotError),
    /// A damaged journal entry with intact ones after it: the server refuses to start.
    JournalCorrupt { reason: EntryDamage, intact_at: u64 },
    /// A torn last journal entry: the server cuts it at start-up (that op was never
    /// acknowledged, or its acknowledgement raced the crash).
    JournalTorn(EntryDamage),
    /// An intact entry that does not decode (a newer or foreign format).
    JournalUndecodable(DecodeError),
    /// An op that does not apply to the state before it.
    JournalReplay(ApplyError),
    /// The journal continues a commit the snapshot does not reach.
    JournalGap { base: u64, snapshot_commit: u64 },
    /// The journal ends before the snapshot's commit: it lost its start, and the changes
    /// after the snapshot with it. The server refuses to start.
    JournalShort { end: u64, snapshot_commit: u64 },
    /// A partition's file.
    Partition(segment::check::Problem),
    /// A partition the metadata holds has no directory: its data was removed (or a crash
    /// came right after its creation); the server creates it empty at start.
    PartitionMissing,
    /// A partition directory the metadata does not hold: left by a delete that did not
    /// finish (the server moves it to `orphaned/` at start), or, when the metadata holds no
    /// change at all, data whose metadata was lost (the server refuses to start).
    Orphaned { metadata_lost: bool },
}

impl Finding {
    /// What to do about it.
    pub fn repair(&self) -> &'static str {
        match &self.problem {
            Problem::Io { .. } => "check the file's permissions and the disk, then run again",
            Problem::Snapshot(_) | Problem::JournalGap { .. } => {
                "restore metadata/snapshot.bin from a backup; the journal only holds the ops \
                 after it"
            }
            Problem::JournalCorrupt { .. } => {
                "restore metadata/journal.wal from a backup, or truncate it at this byte \
                 (`truncate -s <byte> <file>`) to start without this and every later metadata op"
            }
            Problem::JournalTorn(_) => "none needed: the server cuts the torn entry at start-up",
            Problem::JournalShort { .. } => {
                "restore metadata/journal.wal from a backup, or start the server once with \
                 --accept-metadata-loss to go on from the snapshot alone, without every metadata \
                 change after it (users, tokens, permissions, streams, topics)"
            }
            Problem::JournalUndecodable(_) => {
                "run the build that wrote it, or truncate the journal at this byte"
            }
            Problem::JournalReplay(_) => {
                "the journal does not continue its snapshot: restore both from one backup"
            }
            Problem::Partition(problem) => partition_repair(problem),
            Problem::PartitionMissing => {
                "restore the directory from a backup; otherwise none: the server creates the \
                 partition empty at start (offsets from 0)"
            }
            Problem::Orphaned {
                metadata_lost: false,
            } => {
                "none needed: the server moves it to orphaned/ at start, where it can be read \
                 or deleted"
            }
            Problem::Orphaned {
                metadata_lost: true,
            } => {
                "restore metadata/ from a backup, or start the server once with \
                 --accept-metadata-loss to begin with empty metadata, this data moved to \
                 orphaned/"
            }
        }
    }
}

/// Checks the data directory `root` on disk (through compio; call inside its runtime),
/// opening every file for reading only: a read-only mount or a copy is checked as it is.
pub async fn check_directory(root: &Path) -> Vec<Finding> {
    check_data_directory(&CompioStorage::read_only(), root).await
}

/// Checks the data directory `root` on `storage`: the metadata, then every partition.
pub async fn check_data_directory<S: Storage>(storage: &S, root: &Path) -> Vec<Finding> {
    let (mut findings, metadata) = check_metadata(storage, &metadata_directory(root)).await;
    if let Some(metadata) = metadata {
        let metadata_lost = metadata.commit == 0;
        let orphans = crate::data::find_orphans(storage, root, &metadata).await;
        findings.extend(orphans.into_iter().map(|(_, path)| Finding {
            path,
            position: 0,
            problem: Problem::Orphaned { metadata_lost },
        }));
        for directory in partition_directories(root, &metadata) {
            if !storage.exists(&directory).await {
                findings.push(finding(&directory, 0, Problem::PartitionMissing));
            }
        }
    }
    let partitions = segment::check::check_partitions(storage, root).await;
    findings.extend(partitions.into_iter().map(|found| Finding {
        path: found.path,
        position: found.position,
        problem: Problem::Partition(found.problem),
    }));
    findings
}

/// The directory of every partition `metadata` holds.
fn partition_directories(root: &Path, metadata: &Metadata) -> Vec<PathBuf> {
    let mut directories = Vec::new();
    for (stream_id, stream) in &metadata.streams {
        for (topic_id, topic) in &stream.topics {
            for partition_id in topic.partitions.keys() {
                let directory = segment::layout::partition_directory(
                    root,
                    *stream_id,
                    *topic_id,
                    *partition_id,
                );
                directories.push(directory);
            }
        }
    }
    directories
}

/// The snapshot and the journal of `directory`, decoded and replayed as start-up would; the
/// metadata they hold when they hold one.
async fn check_metadata<S: Storage>(
    storage: &S,
    directory: &Path,
) -> (Vec<Finding>, Option<Metadata>) {
    let mut findings = Vec::new();
    let snapshot_path = directory.join(SNAPSHOT_FILE);
    let snapshot = match read_if_present(storage, &snapshot_path).await {
        Ok(None) => Some(Metadata::default()),
        Ok(Some(bytes)) => match decode_snapshot(&bytes) {
            Ok(snapshot) => Some(snapshot),
            Err(source) => {
                let position = source.position();
                findings.push(finding(&snapshot_path, position, Problem::Snapshot(source)));
                None
            }
        },
        Err(found) => {
            findings.push(found);
            None
        }
    };
    let journal_path = directory.join(JOURNAL_FILE);
    let bytes = match read_if_present(storage, &journal_path).await {
        Ok(bytes) => bytes.unwrap_or_default(),
        Err(found) => {
            findings.push(found);
            return (findings, None);
        }
    };
    let mut metadata = None;
    match replay(&bytes, &journal_path) {
        Ok(replayed) => {
            if let Some(damage) = replayed.torn {
                let problem = Problem::JournalTorn(damage);
                findings.push(finding(&journal_path, replayed.valid_length, problem));
            }
            // Without a readable snapshot there is no state to replay onto.
            if let Some(snapshot) = snapshot {
                let commit = snapshot.commit;
                let recovered = reaches_snapshot(&replayed, commit, &journal_path)
                    .and_then(|()| recover(snapshot, &replayed, &journal_path));
                match recovered {
                    Ok(recovered) => metadata = Some(recovered),
                    Err(error) => findings.push(journal_finding(error)),
                }
            }
        }
        Err(error) => findings.push(journal_finding(error)),
    }
    (findings, metadata)
}

/// The file's bytes, or `None` when it does not exist.
async fn read_if_present<S: Storage>(storage: &S, path: &Path) -> Result<Option<Vec<u8>>, Finding> {
    if !storage.exists(path).await {
        return Ok(None);
    }
    let io = |action| {
        move |error: io::Error| {
            let kind = error.kind();
            finding(path, 0, Problem::Io { action, kind })
        }
    };
    let file = storage.open(path, false).await.map_err(io("open"))?;
    read_all(&file).await.map(Some).map_err(io("read"))
}

/// The finding of an error `replay` or `recover` returned.
fn journal_finding(error: JournalError) -> Finding {
    let (path, position, problem) = match error {
        JournalError::Corrupt {
            path,
            position,
            reason,
            intact_at,
        } => (
            path,
            position,
            Problem::JournalCorrupt { reason, intact_at },
        ),
        JournalError::Undecodable {
            path,
            position,
            source,
        } => (path, position, Problem::JournalUndecodable(source)),
        JournalError::Replay {
            path,
            position,
            source,
        } => (path, position, Problem::JournalReplay(source)),
        JournalError::Gap {
            path,
            base,
            snapshot_commit,
        } => (
            path,
            0,
            Problem::JournalGap {
                base,
                snapshot_commit,
            },
        ),
        JournalError::Short {
            path,
            end,
            snapshot_commit,
        } => (
            path,
            0,
            Problem::JournalShort {
                end,
                snapshot_commit,
            },
        ),
        JournalError::Snapshot { path, source } => {
            (path, source.position(), Problem::Snapshot(source))
        }
        JournalError::Io {
            action,
            path,
            source,
        } => {
            let kind = source.kind();
            (path, 0, Problem::Io { action, kind })
        }
        // Appends alone fail these ways; the checker never appends.
        JournalError::EntryTooLarge { .. } | JournalError::Failed { .. } => {
            unreachable!("replay returned an append error: {error}")
        }
    };
    Finding {
        path,
        position,
        problem,
    }
}

fn partition_repair(problem: &segment::check::Problem) -> &'static str {
    use segment::check::Problem as Partition;
    match problem {
        Partition::Io { .. } => "check the file's permissions and the disk, then run again",
        Partition::State(_) => {
            "restore partition.state from a backup; deleting it makes the server derive the \
             next offset from the log, which may reuse offsets a power loss cut"
        }
        Partition::Log(_) => {
            "a torn tail of the active (last) segment after a crash needs nothing: the server \
             cuts it at start-up; other damage, and any after a clean close, quarantines the \
             partition (readable up to here, sends refused) until you truncate the .log at \
             this byte (`truncate -s <byte> <file>`) and delete its .index and .timeindex, or \
             move a sealed segment's three files aside"
        }
        Partition::Overlap { .. } => {
            "two segments claim the same offsets: move the later one's three files aside"
        }
        Partition::LogMissing => {
            "after a crash during a segment deletion, delete the .index and .timeindex; \
             otherwise restore the segment's .log from a backup, or delete them: its offsets \
             are served as a gap"
        }
        Partition::RecordsLost { .. } => {
            "restore the cut or removed .log from a backup; otherwise none: the server does \
             not give the lost offsets again, and serves them as a gap"
        }
        Partition::IndexMissing
        | Partition::IndexPartialEntry
        | Partition::IndexMismatch { .. }
        | Partition::IndexShort { .. }
        | Partition::IndexLong { .. } => {
            "delete the segment's .index and .timeindex: the server rebuilds both from the .log"
        }
        Partition::OffsetLost => {
            "delete the offset file; the consumer stores its offset again on its next commit"
        }
    }
}

fn finding(path: &Path, position: u64, problem: Problem) -> Finding {
    Finding {
        path: path.to_path_buf(),
        position,
        problem,
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, position) = (self.path.display(), self.position);
        write!(f, "{path}: byte {position}: {}", self.problem)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { action, kind } => write!(f, "cannot {action}: {kind}"),
            Self::Snapshot(error) => write!(f, "invalid snapshot: {error}"),
            Self::JournalCorrupt { reason, intact_at } => write!(
                f,
                "corrupt journal entry ({reason}) with an intact entry at byte {intact_at}"
            ),
            Self::JournalTorn(damage) => write!(f, "torn last journal entry ({damage})"),
            Self::JournalUndecodable(error) => write!(f, "undecodable journal entry: {error}"),
            Self::JournalReplay(error) => write!(f, "journal op does not apply: {error}"),
            Self::JournalGap {
                base,
                snapshot_commit,
            } => write!(
                f,
                "the journal continues commit {base}, the snapshot holds commit {snapshot_commit}"
            ),
            Self::JournalShort {
                end,
                snapshot_commit,
            } => write!(
                f,
                "the journal ends at commit {end}, before the snapshot's {snapshot_commit}: the \
                 metadata changes after the snapshot are lost"
            ),
            Self::Partition(problem) => write!(f, "{problem}"),
            Self::PartitionMissing => write!(f, "a partition the metadata holds has no directory"),
            Self::Orphaned {
                metadata_lost: false,
            } => write!(f, "a partition directory the metadata does not hold"),
            Self::Orphaned {
                metadata_lost: true,
            } => write!(
                f,
                "a partition directory holding data, beside metadata that holds no change at \
                 all: the metadata was lost"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
