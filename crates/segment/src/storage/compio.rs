//! The server's default backend: files through `compio::fs`, so reads, writes, syncs and
//! truncation are `io_uring` operations driven by the shard's compio runtime.
//!
//! `list_dir` and `remove_dir_all` are the exceptions that block the thread (`std::fs`):
//! they run at start-up and during retention only.
//! Futures must be polled inside a compio runtime.

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use compio::fs::{DirBuilder, File, OpenOptions};
use compio::io::{AsyncReadAt, AsyncWriteAt};
use compio_buf::{IntoInner, IoBuf, IoBufMut};

use super::{BufResult, PRIVATE_DIRECTORY_MODE, PRIVATE_FILE_MODE, Storage, StorageFile};

/// The compio file system; stateless, so it is `Copy`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompioStorage;

impl CompioStorage {
    pub fn new() -> Self {
        Self
    }
}

impl Storage for CompioStorage {
    type File = CompioFile;

    fn boot_id(&self) -> Option<[u8; 16]> {
        super::system_boot_id()
    }

    async fn open(&self, path: &Path, create: bool) -> io::Result<CompioFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
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
            .write(true)
            .create(true)
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
}
