//! The file backend a shard runs on, chosen at start (`[system] io_backend`): compio's
//! `io_uring` driver (the default), or, with feature `uring`, `segment`'s backend on the raw
//! `io-uring` crate, which submits each operation and waits for it on the spot (no runtime
//! in between). Both sit behind one concrete type so the code above compiles once.

use std::io;

use segment::storage::compio::CompioStorage;
use segment::storage::either::Either;
use segment::storage::memory::MemoryStorage;

/// The storage a shard runs on: real files, or memory under the simulator.
pub type ShardStorage = Either<DiskStorage, MemoryStorage>;

/// Which backend a shard's files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    #[default]
    Compio,
    /// `segment::storage::uring` (feature `uring`).
    IoUring,
}

/// The storage of a shard on real files.
#[cfg(feature = "uring")]
pub type DiskStorage = Either<CompioStorage, segment::storage::uring::UringStorage>;
/// The storage of a shard on real files.
#[cfg(not(feature = "uring"))]
pub type DiskStorage = CompioStorage;

/// The backend cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("the io_uring backend is not in this build (feature `uring`)")]
    NotBuilt,
    #[error("open an io_uring instance")]
    Ring(#[source] io::Error),
}

/// compio's backend.
pub fn compio() -> DiskStorage {
    #[cfg(feature = "uring")]
    {
        Either::Left(CompioStorage::new())
    }
    #[cfg(not(feature = "uring"))]
    {
        CompioStorage::new()
    }
}

/// A shard's storage on `backend`'s files, made on the thread that will use it (a ring is
/// per thread).
pub fn shard_storage(backend: Backend) -> Result<ShardStorage, BackendError> {
    storage(backend).map(Either::Left)
}

/// A storage on `backend`.
pub fn storage(backend: Backend) -> Result<DiskStorage, BackendError> {
    match backend {
        Backend::Compio => Ok(compio()),
        #[cfg(feature = "uring")]
        Backend::IoUring => segment::storage::uring::UringStorage::new()
            .map(Either::Right)
            .map_err(BackendError::Ring),
        #[cfg(not(feature = "uring"))]
        Backend::IoUring => Err(BackendError::NotBuilt),
    }
}
