//! The server's default backend: files through `compio::fs`, so reads, writes, syncs and
//! truncation are `io_uring` operations driven by the shard's compio runtime.
//!
//! `list_dir` and `remove_dir_all` are the exceptions that block the thread (`std::fs`):
//! they run at start-up and during retention only. So does a write of at most
//! [`INLINE_WRITE_MAX`] bytes, which is a plain `pwrite` (see there).
//! Futures must be polled inside a compio runtime.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use compio::fs::{DirBuilder, File, OpenOptions};
use compio::io::{AsyncReadAt, AsyncWriteAt};
use compio_buf::{IntoInner, IoBuf, IoBufMut};

use super::{BufResult, PRIVATE_DIRECTORY_MODE, PRIVATE_FILE_MODE, Storage, StorageFile};

/// The largest write made with a plain `pwrite` on the shard's thread instead of an
/// `io_uring` operation.
///
/// `io_uring` cannot write to an ext4 file's page cache without blocking, so it hands every
/// buffered write to a kernel worker thread: a wake-up there and one back per write, which
/// for a small record costs far more than its copy. Measured with `iggy bench`
/// pinned-producer, 5 alternating pairs in one run (bench/RESULTS.md): one-message batches
/// 1.16× msg/s, batches of 100 × 100 B 1.27×; 1 MB batches, eight producers and consumers
/// unchanged.
///
/// The price is that a write the kernel makes wait now stalls every task of the shard, not
/// only the partition's appenders: dirty-page throttling once the disk falls behind the
/// producers (up to the kernel's 200 ms per pause), a journal commit, memory reclaim. The
/// kernel throttles a thread by the pages it dirtied, so keeping the large writes, which
/// dirty most of them, on the ring makes the shard thread's pauses rarer, not shorter. The
/// tails measured here did not grow (p99 lower in every shape); a disk slower than the
/// producers would show the cost.
pub const INLINE_WRITE_MAX: usize = 64 << 10;

/// The compio file system; stateless but for its mode, so it is `Copy`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompioStorage {
    /// Files are opened for reading only and never created (`iggy check`, which writes
    /// nothing and so works on a read-only mount or a copy it may only read).
    read_only: bool,
}

impl CompioStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// A storage that opens files for reading only: every write through it fails.
    pub fn read_only() -> Self {
        Self { read_only: true }
    }
}

impl Storage for CompioStorage {
    type File = CompioFile;

    fn boot_id(&self) -> Option<[u8; 16]> {
        super::system_boot_id()
    }

    fn space(&self, path: &Path) -> Option<super::Space> {
        super::file_system_space(path)
    }

    async fn open(&self, path: &Path, create: bool) -> io::Result<CompioFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .create(create && !self.read_only)
            .open(path)
            .await?;
        Ok(CompioFile { file })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        compio::fs::remove_file(path).await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        // Blocking: retention removes whole partitions rarely, and compio has no recursive
        // removal.
        std::fs::remove_dir_all(path)
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        compio::fs::create_dir_all(path).await
    }

    async fn open_private(&self, path: &Path) -> io::Result<CompioFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .create(!self.read_only)
            .mode(PRIVATE_FILE_MODE)
            .open(path)
            .await?;
        Ok(CompioFile { file })
    }

    async fn create_dir_all_private(&self, path: &Path) -> io::Result<()> {
        DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIRECTORY_MODE)
            .create(path)
            .await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        compio::fs::rename(from, to).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        // Blocking: directories are listed at start-up and by retention only.
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let directory = OpenOptions::new().read(true).open(path).await?;
        directory.sync_all().await?;
        directory.close().await
    }

    async fn exists(&self, path: &Path) -> bool {
        compio::fs::metadata(path).await.is_ok()
    }
}

/// An open compio file.
#[derive(Debug)]
pub struct CompioFile {
    file: File,
}

impl StorageFile for CompioFile {
    async fn read_at<B: IoBufMut>(&self, buffer: B, position: u64) -> BufResult<usize, B> {
        // compio reads into the whole buffer from index 0; a slice starting at the current
        // length turns that into the trait's "spare room" and keeps the bytes already there.
        let start = buffer.buf_len();
        let compio_buf::BufResult(result, slice) =
            self.file.read_at(buffer.slice(start..), position).await;
        (result, slice.into_inner())
    }

    async fn write_all_at<B: IoBuf>(&mut self, buffer: B, position: u64) -> BufResult<(), B> {
        let length = buffer.buf_len();
        if length <= INLINE_WRITE_MAX {
            let result = write_inline(&self.file, buffer.as_init(), position);
            return (result, buffer);
        }
        let mut buffer = buffer;
        let mut written = 0;
        while written < length {
            let offset = position + written as u64;
            let compio_buf::BufResult(result, slice) =
                self.file.write_at(buffer.slice(written..), offset).await;
            buffer = slice.into_inner();
            match result {
                Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buffer),
                Ok(count) => written += count,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return (Err(error), buffer),
            }
        }
        (Ok(()), buffer)
    }

    fn duplicate(&self) -> io::Result<Self> {
        // compio's file is a shared descriptor: a clone is the same open file.
        Ok(Self {
            file: self.file.clone(),
        })
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data().await
    }

    async fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata().await?.len())
    }

    async fn set_len(&self, length: u64) -> io::Result<()> {
        self.file.set_len(length).await
    }

    async fn preallocate(&self, position: u64, length: u64) -> io::Result<()> {
        use compio::driver::ToSharedFd;
        use compio::driver::op::AsyncifyFd;
        // compio has no fallocate operation: the call runs on its blocking pool, so a
        // journal wait inside it (ext4's p99 is a few hundred µs) never stalls the shard.
        let op = AsyncifyFd::new(self.file.to_shared_fd(), move |file: &std::fs::File| {
            let result = fallocate_keep_size(file, position, length);
            compio::BufResult(result.map(|()| 0), ())
        });
        compio::runtime::submit(op).await.0.map(drop)
    }
}

/// Writes `bytes` at `position` with blocking `pwrite` calls (short writes and `EINTR`
/// retried, as the asynchronous path does).
fn write_inline(file: &File, bytes: &[u8], position: u64) -> io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::FileExt;
    // SAFETY: the descriptor is open for the whole call (`file` owns it and is borrowed
    // here), and `ManuallyDrop` keeps this second handle from closing it.
    let borrowed =
        std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(file.as_raw_fd()) });
    borrowed.write_all_at(bytes, position)
}

/// `fallocate(FALLOC_FL_KEEP_SIZE)` over `position..position + length`.
fn fallocate_keep_size(file: &std::fs::File, position: u64, length: u64) -> io::Result<()> {
    use rustix::fs::{FallocateFlags, fallocate};
    fallocate(file, FallocateFlags::KEEP_SIZE, position, length).map_err(io::Error::from)
}
