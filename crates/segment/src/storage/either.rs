//! One of two storages chosen at run time: the server runs on real files and the
//! deterministic simulator on [`super::memory::MemoryStorage`], through the same concrete
//! type, so the code above the storage is compiled once and is not generic over it.

use std::io;
use std::path::Path;

use compio_buf::{IoBuf, IoBufMut};

use super::{BufResult, Storage, StorageFile};

/// Either storage `L` or storage `R`; every call goes to the one it holds.
#[derive(Debug, Clone)]
pub enum Either<L, R> {
    Left(L),
    Right(R),
}

/// A file of [`Either`]'s storage.
#[derive(Debug)]
pub enum EitherFile<L, R> {
    Left(L),
    Right(R),
}

/// Forwards a call to whichever side `$value` holds.
macro_rules! both {
    ($value:expr, $side:ident => $call:expr) => {
        match $value {
            Either::Left($side) => $call,
            Either::Right($side) => $call,
        }
    };
}

impl<L: Storage, R: Storage> Storage for Either<L, R> {
    type File = EitherFile<L::File, R::File>;

    async fn open(&self, path: &Path, create: bool) -> io::Result<Self::File> {
        match self {
            Self::Left(storage) => storage.open(path, create).await.map(EitherFile::Left),
            Self::Right(storage) => storage.open(path, create).await.map(EitherFile::Right),
        }
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        both!(self, storage => storage.remove_file(path).await)
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        both!(self, storage => storage.remove_dir_all(path).await)
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        both!(self, storage => storage.create_dir_all(path).await)
    }

    async fn open_private(&self, path: &Path) -> io::Result<Self::File> {
        match self {
            Self::Left(storage) => storage.open_private(path).await.map(EitherFile::Left),
            Self::Right(storage) => storage.open_private(path).await.map(EitherFile::Right),
        }
    }

    async fn create_dir_all_private(&self, path: &Path) -> io::Result<()> {
        both!(self, storage => storage.create_dir_all_private(path).await)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        both!(self, storage => storage.rename(from, to).await)
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        both!(self, storage => storage.list_dir(path).await)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        both!(self, storage => storage.sync_dir(path).await)
    }

    async fn exists(&self, path: &Path) -> bool {
        both!(self, storage => storage.exists(path).await)
    }

    fn boot_id(&self) -> Option<[u8; 16]> {
        both!(self, storage => storage.boot_id())
    }

    fn space(&self, path: &Path) -> Option<super::Space> {
        both!(self, storage => storage.space(path))
    }
}

/// Forwards a call to whichever side the file `$value` is.
macro_rules! either_file {
    ($value:expr, $side:ident => $call:expr) => {
        match $value {
            EitherFile::Left($side) => $call,
            EitherFile::Right($side) => $call,
        }
    };
}

impl<L: StorageFile, R: StorageFile> StorageFile for EitherFile<L, R> {
    async fn read_at<B: IoBufMut>(&self, buffer: B, position: u64) -> BufResult<usize, B> {
        either_file!(self, file => file.read_at(buffer, position).await)
    }

    async fn write_all_at<B: IoBuf>(&mut self, buffer: B, position: u64) -> BufResult<(), B> {
        either_file!(self, file => file.write_all_at(buffer, position).await)
    }

    async fn sync_data(&self) -> io::Result<()> {
        either_file!(self, file => file.sync_data().await)
    }

    fn duplicate(&self) -> io::Result<Self> {
        Ok(match self {
            EitherFile::Left(file) => EitherFile::Left(file.duplicate()?),
            EitherFile::Right(file) => EitherFile::Right(file.duplicate()?),
        })
    }

    async fn size(&self) -> io::Result<u64> {
        either_file!(self, file => file.size().await)
    }

    async fn set_len(&self, length: u64) -> io::Result<()> {
        either_file!(self, file => file.set_len(length).await)
    }

    async fn preallocate(&self, position: u64, length: u64) -> io::Result<()> {
        either_file!(self, file => file.preallocate(position, length).await)
    }
}
