//! The log's errors, one per operation.

use std::io;
use std::path::PathBuf;

use crate::format::state::StateError;

/// Opening (and recovering) a partition failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{operation} {path}")]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("partition state {path}")]
    State {
        path: PathBuf,
        #[source]
        source: StateError,
    },
    #[error("segment {path} is not contiguous with the one before it")]
    Gap { path: PathBuf },
}

/// An append was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("invalid batch")]
    Invalid(#[source] proto::DecodeError),
    #[error("frame {index} has offset delta {found}; stored batches number frames 0, 1, 2, …")]
    OffsetDelta { index: u32, found: u32 },
    #[error("{operation} {path}")]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Recovery found damage it may not cut (`FORMAT.md` §7): the log refuses appends until
    /// the file is repaired and the partition reopened.
    #[error("the partition is quarantined: {path} is damaged at byte {position}")]
    Quarantined { path: PathBuf, position: u64 },
    /// An fdatasync failed: what the kernel held may be gone while the page cache says
    /// clean, so no later sync can be trusted and the log refuses appends until reopened.
    #[error("an fdatasync of {path} failed earlier; the partition refuses appends")]
    Poisoned { path: PathBuf },
    /// The batch's offsets would pass `u64::MAX` (only a `partition.state` written by hand
    /// gets near it): offsets are never handed out twice, so the append is refused.
    #[error("offsets {next} and {count} more pass the largest offset")]
    OffsetsExhausted { next: u64, count: u32 },
}

/// A read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("stored record at byte {position} of {path} is invalid")]
    Corrupt {
        path: PathBuf,
        position: u64,
        #[source]
        source: proto::DecodeError,
    },
}

/// Wraps an I/O error with the operation and path, for `map_err`.
pub(crate) fn io_error<E>(
    operation: &'static str,
    path: &std::path::Path,
    wrap: fn(&'static str, PathBuf, io::Error) -> E,
) -> impl FnOnce(io::Error) -> E {
    let path = path.to_path_buf();
    move |source| wrap(operation, path, source)
}
