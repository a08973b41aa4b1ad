//! One process per data directory: the server holds an exclusive lock on
//! `<system.path>/iggy.lock` for its whole life, and so does `iggy encryption rotate`, so a
//! second server, or a rotation, on a directory in use stops at once instead of writing
//! over files another process appends to. The lock is the kernel's (`flock`): it ends with
//! the process, even a killed one, so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub(crate) const LOCK_FILE: &str = "iggy.lock";

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub(crate) struct DataLock {
    _file: File,
}

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    #[error(
        "{0} is in use by another process (a running server, or a key rotation): stop it \
         first"
    )]
    Held(PathBuf),
    #[error("lock {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Takes the lock of `directory` (created if missing), or says who holds it.
pub(crate) fn acquire(directory: &Path) -> Result<DataLock, LockError> {
    let path = directory.join(LOCK_FILE);
    let io = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(directory).map_err(io)?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(DataLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(LockError::Held(directory.to_owned())),
        Err(TryLockError::Error(source)) => Err(io(source)),
    }
}

#[cfg(test)]
mod tests {
    use super::{LockError, acquire};

    #[test]
    fn a_directory_is_locked_by_one_holder_at_a_time() {
        let directory = std::env::temp_dir().join(format!("iggy-lock-{}", std::process::id()));
        let held = acquire(&directory).unwrap();
        assert!(matches!(acquire(&directory), Err(LockError::Held(_))));
        drop(held);
        assert!(acquire(&directory).is_ok());
        let _ = std::fs::remove_dir_all(&directory);
    }
}
