//! The I/O boundary of the partition log: a small file-system trait with owned buffers, so
//! completion-based backends (`io_uring`) and in-memory test backends fit the same shape.
//!
//! Backends: [`memory::MemoryStorage`] (tests; crash and fault injection), `compio` (the
//! server's default, feature `compio`) and `uring` (raw io-uring, feature `uring`).
//! Futures are not `Send`: every partition lives on one shard thread.

#[cfg(feature = "compio")]
pub mod compio;
pub mod either;
pub mod memory;
#[cfg(test)]
mod tests;
#[cfg(feature = "uring")]
pub mod uring;

use std::future::Future;
use std::io;
use std::path::Path;
#[cfg(test)]
use std::pin::pin;
#[cfg(test)]
use std::task::{Context, Poll, Waker};

use compio_buf::{IoBuf, IoBufMut};

/// Owner read and write: the mode of files [`Storage::open_private`] creates.
pub const PRIVATE_FILE_MODE: u32 = 0o600;
/// Owner only: the mode of directories [`Storage::create_dir_all_private`] creates.
pub const PRIVATE_DIRECTORY_MODE: u32 = 0o700;

/// A result that hands the buffer back, as completion-based I/O must.
pub type BufResult<T, B> = (io::Result<T>, B);

/// A file system rooted wherever the caller's paths point.
pub trait Storage {
    type File: StorageFile;

    /// Opens `path` for reading and writing, creating it when `create` is set.
    fn open(&self, path: &Path, create: bool) -> impl Future<Output = io::Result<Self::File>>;

    fn remove_file(&self, path: &Path) -> impl Future<Output = io::Result<()>>;

    /// Removes a directory and everything below it.
    fn remove_dir_all(&self, path: &Path) -> impl Future<Output = io::Result<()>>;

    fn create_dir_all(&self, path: &Path) -> impl Future<Output = io::Result<()>>;

    /// Opens `path`, creating it readable and writable by its owner only (mode 0600) when
    /// it is missing: for files that hold credentials (the metadata journal and snapshot).
    fn open_private(&self, path: &Path) -> impl Future<Output = io::Result<Self::File>>;

    /// Like [`Self::create_dir_all`], but the directories it creates are accessible to
    /// their owner only (mode 0700).
    fn create_dir_all_private(&self, path: &Path) -> impl Future<Output = io::Result<()>>;

    /// Renames `from` to `to` (in the same directory), atomically replacing `to`. The new
    /// name is durable only after a [`Self::sync_dir`] of the directory; a crash before it
    /// may leave either name.
    fn rename(&self, from: &Path, to: &Path) -> impl Future<Output = io::Result<()>>;

    /// Names of the entries directly inside `path` (files and directories), unsorted.
    fn list_dir(&self, path: &Path) -> impl Future<Output = io::Result<Vec<String>>>;

    /// Makes the directory's entries (created, removed files) durable.
    fn sync_dir(&self, path: &Path) -> impl Future<Output = io::Result<()>>;

    fn exists(&self, path: &Path) -> impl Future<Output = bool>;

    /// Identifies the current boot of the machine (`None` when unknown): a crash within one
    /// boot loses no write the kernel accepted, a new boot may have lost every unsynced one.
    fn boot_id(&self) -> Option<[u8; 16]>;

    /// The space of the file system holding `path` (`None` when unknown).
    fn space(&self, path: &Path) -> Option<Space>;
}

/// A file system's size and what an unprivileged writer may still use of it, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    pub available: u64,
    pub total: u64,
}

/// `statvfs` of the file system holding `path`. Metadata only on a local file system, so it
/// is called on the shard's thread (once per reservation range; a network file system may
/// make it wait).
#[cfg(any(feature = "compio", feature = "uring"))]
pub(crate) fn file_system_space(path: &Path) -> Option<Space> {
    let stats = rustix::fs::statvfs(path).ok()?;
    Some(Space {
        available: stats.f_bavail.saturating_mul(stats.f_frsize),
        total: stats.f_blocks.saturating_mul(stats.f_frsize),
    })
}

/// An open file with positional I/O.
pub trait StorageFile {
    /// Reads into `buffer`'s spare room (from its length to its capacity) starting at
    /// `position`; returns the bytes read, 0 at the end of the file, and sets the buffer's
    /// length accordingly.
    fn read_at<B: IoBufMut>(
        &self,
        buffer: B,
        position: u64,
    ) -> impl Future<Output = BufResult<usize, B>>;

    /// Writes all of `buffer`'s bytes at `position`.
    fn write_all_at<B: IoBuf>(
        &mut self,
        buffer: B,
        position: u64,
    ) -> impl Future<Output = BufResult<(), B>>;

    /// `fdatasync`: everything written so far survives power loss once this returns.
    fn sync_data(&self) -> impl Future<Output = io::Result<()>>;

    /// A second handle on the same open file, so a sync can run beside later writes
    /// through this one (a sync through either covers what both wrote before it).
    fn duplicate(&self) -> io::Result<Self>
    where
        Self: Sized;

    /// The file size in bytes.
    fn size(&self) -> impl Future<Output = io::Result<u64>>;

    /// Truncates or extends (with zeros) the file. A cut (a length at most the size)
    /// releases the blocks [`Self::preallocate`] reserved past the new length.
    fn set_len(&self, length: u64) -> impl Future<Output = io::Result<()>>;

    /// Reserves disk blocks for `position..position + length` without changing the file's
    /// size (`fallocate` with `FALLOC_FL_KEEP_SIZE`), so later writes there land in allocated
    /// space instead of extending the file through the file system's delayed allocation. A
    /// full disk may leave part of the range reserved and fails with `ENOSPC`; a file system
    /// without the call fails with `EOPNOTSUPP`.
    fn preallocate(&self, position: u64, length: u64) -> impl Future<Output = io::Result<()>>;
}

/// Reads exactly `length` bytes at `position` into a fresh vector; a short file is an
/// `UnexpectedEof` error. Each read fills the vector's spare room, so the bytes are copied
/// once, by the kernel (a poll's records are read here: a second copy cost every polled
/// byte a memmove).
pub async fn read_exact_at<F: StorageFile>(
    file: &F,
    position: u64,
    length: usize,
) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(length);
    while bytes.len() < length {
        let offset = position + bytes.len() as u64;
        let (result, returned) = file.read_at(bytes, offset).await;
        bytes = returned;
        if result? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file ends early",
            ));
        }
    }
    // The capacity may exceed `length`, and a read may fill it.
    bytes.truncate(length);
    Ok(bytes)
}

/// Reads a whole file.
pub async fn read_all<F: StorageFile>(file: &F) -> io::Result<Vec<u8>> {
    let length = usize::try_from(file.size().await?).map_err(io::Error::other)?;
    read_exact_at(file, 0, length).await
}

/// Drives a future that completes on its first poll, as every future of the memory and
/// io-uring backends does; panics if it does not.
#[cfg(test)]
pub(crate) fn block_on_ready<F: Future>(future: F) -> F::Output {
    let mut context = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut context) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("block_on_ready: the future was not ready"),
    }
}

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`), or `None` if it cannot be read.
pub fn system_boot_id() -> Option<[u8; 16]> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    let mut id = [0_u8; 16];
    if hex.len() != 32 {
        return None;
    }
    for (byte, pair) in id.iter_mut().zip(hex.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(id)
}
