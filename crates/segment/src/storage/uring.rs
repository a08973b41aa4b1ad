//! A comparison backend on the raw `io-uring` crate: each read, write and sync is one SQE on
//! a ring owned by the storage, submitted and waited for on the spot, so every future this
//! backend returns is already complete. It needs no runtime and shows what compio's driver
//! costs or saves.
//!
//! Invariant: at most one operation is in flight per ring, and [`Ring::complete`] does not
//! return while the kernel may still touch the operation's buffer. File size, truncation and
//! directory operations are plain blocking std calls.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::future::{Future, ready};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::rc::Rc;

use compio_buf::{IoBuf, IoBufMut};
use io_uring::{IoUring, opcode, squeue, types};

use super::{BufResult, PRIVATE_DIRECTORY_MODE, PRIVATE_FILE_MODE, Storage, StorageFile};

/// Entries in the submission queue; one is ever used at a time.
const QUEUE_DEPTH: u32 = 4;

/// Tags this backend's SQEs so a stray completion is caught.
const USER_DATA: u64 = 0x5e67_0001;

/// The io-uring file system; clones share one ring.
#[derive(Clone)]
pub struct UringStorage {
    ring: Rc<RefCell<Ring>>,
}

impl std::fmt::Debug for UringStorage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("UringStorage")
            .finish_non_exhaustive()
    }
}

impl UringStorage {
    pub fn new() -> io::Result<Self> {
        let uring = IoUring::new(QUEUE_DEPTH)?;
        let ring = Ring {
            uring,
            poisoned: false,
        };
        Ok(Self {
            ring: Rc::new(RefCell::new(ring)),
        })
    }
}

impl Storage for UringStorage {
    fn boot_id(&self) -> Option<[u8; 16]> {
        super::system_boot_id()
    }

    fn space(&self, path: &Path) -> Option<super::Space> {
        super::file_system_space(path)
    }

    type File = UringFile;

    async fn open(&self, path: &Path, create: bool) -> io::Result<UringFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(UringFile {
            ring: Rc::clone(&self.ring),
            file,
        })
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    async fn open_private(&self, path: &Path) -> io::Result<UringFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(PRIVATE_FILE_MODE)
            .open(path)?;
        Ok(UringFile {
            ring: Rc::clone(&self.ring),
            file,
        })
    }

    async fn create_dir_all_private(&self, path: &Path) -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIRECTORY_MODE)
            .create(path)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let directory = File::open(path)?;
        let entry = opcode::Fsync::new(types::Fd(directory.as_raw_fd())).build();
        // SAFETY: a fsync SQE points at no memory, and `directory` stays open until
        // `complete` has reaped the completion.
        unsafe { self.ring.borrow_mut().complete(&entry) }.map(drop)
    }

    async fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
}

/// An open file whose I/O goes through its storage's ring.
pub struct UringFile {
    ring: Rc<RefCell<Ring>>,
    file: File,
}

impl UringFile {
    fn descriptor(&self) -> types::Fd {
        types::Fd(self.file.as_raw_fd())
    }
}

impl StorageFile for UringFile {
    fn read_at<B: IoBufMut>(
        &self,
        mut buffer: B,
        position: u64,
    ) -> impl Future<Output = BufResult<usize, B>> {
        let start = buffer.buf_len();
        let spare = &mut buffer.as_uninit()[start..];
        let length = u32::try_from(spare.len()).unwrap_or(u32::MAX);
        let pointer = spare.as_mut_ptr().cast::<u8>();
        let entry = opcode::Read::new(self.descriptor(), pointer, length)
            .offset(position)
            .build();
        // SAFETY: `pointer..pointer + length` is the spare capacity of `buffer`, which this
        // function owns and neither moves nor drops before `complete` returns, and `complete`
        // returns only after the kernel has finished writing into it.
        let result = unsafe { self.ring.borrow_mut().complete(&entry) };
        let result = result.map(|count| {
            let count = count as usize;
            assert!(count <= length as usize, "read past the buffer");
            // SAFETY: the kernel initialised `count` bytes from `start`, within capacity.
            unsafe { buffer.set_len(start + count) };
            count
        });
        ready((result, buffer))
    }

    fn write_all_at<B: IoBuf>(
        &mut self,
        buffer: B,
        position: u64,
    ) -> impl Future<Output = BufResult<(), B>> {
        let mut written = 0;
        while written < buffer.buf_len() {
            let remaining = &buffer.as_init()[written..];
            let length = u32::try_from(remaining.len()).unwrap_or(u32::MAX);
            let entry = opcode::Write::new(self.descriptor(), remaining.as_ptr(), length)
                .offset(position + written as u64)
                .build();
            // SAFETY: the SQE points into `buffer`, which this function owns and keeps in
            // place until `complete` has reaped the completion.
            match unsafe { self.ring.borrow_mut().complete(&entry) } {
                Ok(0) => return ready((Err(io::ErrorKind::WriteZero.into()), buffer)),
                Ok(count) => written += count as usize,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return ready((Err(error), buffer)),
            }
        }
        ready((Ok(()), buffer))
    }

    fn duplicate(&self) -> io::Result<Self> {
        Ok(Self {
            ring: Rc::clone(&self.ring),
            file: self.file.try_clone()?,
        })
    }

    fn sync_data(&self) -> impl Future<Output = io::Result<()>> {
        let entry = opcode::Fsync::new(self.descriptor())
            .flags(types::FsyncFlags::DATASYNC)
            .build();
        // SAFETY: a fsync SQE points at no memory, and `self.file` outlives the call.
        ready(unsafe { self.ring.borrow_mut().complete(&entry) }.map(drop))
    }

    fn size(&self) -> impl Future<Output = io::Result<u64>> {
        ready(self.file.metadata().map(|metadata| metadata.len()))
    }

    fn set_len(&self, length: u64) -> impl Future<Output = io::Result<()>> {
        ready(self.file.set_len(length))
    }

    fn preallocate(&self, position: u64, length: u64) -> impl Future<Output = io::Result<()>> {
        const FALLOC_FL_KEEP_SIZE: i32 = 1;
        let entry = opcode::Fallocate::new(self.descriptor(), length)
            .offset(position)
            .mode(FALLOC_FL_KEEP_SIZE)
            .build();
        // SAFETY: a fallocate SQE points at no memory, and `self.file` outlives the call.
        ready(unsafe { self.ring.borrow_mut().complete(&entry) }.map(drop))
    }
}

/// The ring and whether it may still be entered.
struct Ring {
    uring: IoUring,
    /// Set when a submission failed with its SQE still queued: entering the ring again could
    /// hand the kernel a pointer into a buffer already returned, so the ring is retired.
    poisoned: bool,
}

impl Ring {
    /// Submits `entry`, waits for its completion and returns the completion's result.
    ///
    /// # Safety
    ///
    /// Every buffer and file descriptor `entry` refers to must stay valid until this returns.
    unsafe fn complete(&mut self, entry: &squeue::Entry) -> io::Result<u32> {
        if self.poisoned {
            return Err(io::Error::other(
                "io_uring ring retired after a submission failure",
            ));
        }
        assert!(
            self.uring.completion().is_empty(),
            "a completion nobody waits for"
        );
        let entry = entry.clone().user_data(USER_DATA);
        // SAFETY: the caller keeps the entry's memory valid until we return, and we return
        // only once its completion is reaped or the ring is retired (never entered again).
        unsafe { self.uring.submission().push(&entry) }.map_err(io::Error::other)?;
        loop {
            let submitted = self.uring.submit_and_wait(1);
            if let Some(completion) = self.uring.completion().next() {
                assert_eq!(completion.user_data(), USER_DATA, "a stray completion");
                return completion_result(completion.result());
            }
            match submitted {
                Ok(_) => {}
                // In flight: the kernel owns the buffer until the completion arrives.
                Err(_) if self.uring.submission().is_empty() => {}
                Err(error) if is_transient(&error) => {}
                Err(error) => {
                    self.poisoned = true;
                    return Err(error);
                }
            }
        }
    }
}

fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::ResourceBusy
    )
}

fn completion_result(result: i32) -> io::Result<u32> {
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    Ok(result.unsigned_abs())
}
