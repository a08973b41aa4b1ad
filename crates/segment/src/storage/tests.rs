//! The contract every [`Storage`] backend meets, run against each of them: memory always,
//! compio and io-uring under their features, the latter two in a fresh directory under
//! `std::env::temp_dir()` that is removed afterwards.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::memory::MemoryStorage;
use super::{Storage, StorageFile, block_on_ready, read_all, read_exact_at};

#[test]
fn memory_meets_the_contract() {
    let storage = MemoryStorage::new();
    block_on_ready(contract(&storage, Path::new("/memory/root")));
}

#[cfg(feature = "compio")]
#[test]
fn compio_meets_the_contract() {
    let directory = TempDir::new("compio");
    let storage = super::compio::CompioStorage::new();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(contract(&storage, &directory.0));
    assert_private_modes(&directory.0);
}

#[cfg(feature = "uring")]
#[test]
fn uring_meets_the_contract() {
    let directory = TempDir::new("uring");
    let storage = super::uring::UringStorage::new().unwrap();
    block_on_ready(contract(&storage, &directory.0));
    assert_private_modes(&directory.0);
}

async fn contract<S: Storage>(storage: &S, root: &Path) {
    contract_positional_io(storage, root).await;
    contract_large_write(storage, root).await;
    contract_directories(storage, root).await;
    contract_rename_and_private(storage, root).await;
    contract_preallocate(storage, root).await;
}

/// A reservation changes neither the size nor the bytes; writes into it land as any others.
async fn contract_preallocate<S: Storage>(storage: &S, root: &Path) {
    let space = storage.space(root).expect("the space is known");
    assert!(space.available <= space.total, "{space:?}");
    let path = root.join("reserved");
    let mut file = storage.open(&path, true).await.unwrap();
    write(&mut file, b"head", 0).await;
    if let Err(error) = file.preallocate(2, 1 << 20).await {
        // A file system without `fallocate` (95), or a ring without the operation (22),
        // may refuse; nothing else may fail.
        assert!(matches!(error.raw_os_error(), Some(95 | 22)), "{error}");
    }
    assert_eq!(file.size().await.unwrap(), 4, "the size stays");
    write(&mut file, b"tail", 4).await;
    assert_eq!(read_all(&file).await.unwrap(), b"headtail");
    file.set_len(6).await.unwrap();
    assert_eq!(read_all(&file).await.unwrap(), b"headta");
    drop(file);
    storage.remove_file(&path).await.unwrap();
}

/// Renames replace their target; private files and directories are created like the others.
async fn contract_rename_and_private<S: Storage>(storage: &S, root: &Path) {
    let directory = root.join("private").join("metadata");
    storage.create_dir_all_private(&directory).await.unwrap();
    assert!(storage.exists(&directory).await);
    let target = directory.join("snapshot.bin");
    let temporary = directory.join("snapshot.bin.tmp");
    write(&mut storage.open_private(&target).await.unwrap(), b"old", 0).await;
    let mut file = storage.open_private(&temporary).await.unwrap();
    write(&mut file, b"new!", 0).await;
    file.sync_data().await.unwrap();
    drop(file);
    storage.rename(&temporary, &target).await.unwrap();
    storage.sync_dir(&directory).await.unwrap();
    assert!(!storage.exists(&temporary).await);
    let file = storage.open_private(&target).await.unwrap();
    assert_eq!(
        read_all(&file).await.unwrap(),
        b"new!",
        "opening keeps the bytes"
    );
    let missing = storage.rename(&temporary, &target).await.err().unwrap();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
}

/// The private file and directories [`contract_rename_and_private`] made are owner-only.
#[cfg(any(feature = "compio", feature = "uring"))]
fn assert_private_modes(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: PathBuf| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let directory = root.join("private").join("metadata");
    assert_eq!(
        mode(directory.join("snapshot.bin")),
        super::PRIVATE_FILE_MODE
    );
    assert_eq!(mode(directory.clone()), super::PRIVATE_DIRECTORY_MODE);
    assert_eq!(mode(root.join("private")), super::PRIVATE_DIRECTORY_MODE);
}

async fn contract_positional_io<S: Storage>(storage: &S, root: &Path) {
    storage.create_dir_all(root).await.unwrap();
    let path = root.join("00000000000000000000.log");
    let missing = storage.open(&path, false).await.err().unwrap();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);

    let mut file = storage.open(&path, true).await.unwrap();
    assert_eq!(file.size().await.unwrap(), 0);
    write(&mut file, b"hello", 0).await;
    // Past the end: the gap reads as zeros.
    write(&mut file, b"world", 10).await;
    assert_eq!(file.size().await.unwrap(), 15);
    assert_eq!(read_all(&file).await.unwrap(), b"hello\0\0\0\0\0world");
    // Overwrite in the middle.
    write(&mut file, b"__", 4).await;
    assert_eq!(read_exact_at(&file, 3, 4).await.unwrap(), b"l__\0");

    // A read straddling the end is short; at and past the end it reads nothing.
    let (count, bytes) = read(&file, Vec::with_capacity(8), 13).await;
    assert_eq!((count, bytes.as_slice()), (2, &b"ld"[..]));
    assert_eq!(read(&file, Vec::with_capacity(8), 15).await.0, 0);
    assert_eq!(read(&file, Vec::with_capacity(8), 1 << 20).await.0, 0);
    // Reads fill the spare room and keep the bytes already in the buffer.
    let mut prefix = Vec::with_capacity(7);
    prefix.extend_from_slice(b">>");
    let (count, bytes) = read(&file, prefix, 0).await;
    assert_eq!((count, bytes.as_slice()), (5, &b">>hell_"[..]));
    let full = vec![7_u8; 4];
    assert_eq!(read(&file, full, 0).await, (0, vec![7; 4]));

    file.set_len(18).await.unwrap();
    assert_eq!(read_exact_at(&file, 13, 5).await.unwrap(), b"ld\0\0\0");
    file.set_len(3).await.unwrap();
    assert_eq!(file.size().await.unwrap(), 3);
    let short = read_exact_at(&file, 0, 4).await.err().unwrap();
    assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
    file.sync_data().await.unwrap();
    drop(file);

    let reopened = storage.open(&path, false).await.unwrap();
    assert_eq!(read_all(&reopened).await.unwrap(), b"hel");
}

async fn contract_large_write<S: Storage>(storage: &S, root: &Path) {
    let path = root.join("large");
    let bytes: Vec<u8> = (0..3_u32 << 18).map(|index| (index % 251) as u8).collect();
    let mut file = storage.open(&path, true).await.unwrap();
    let (result, returned) = file.write_all_at(bytes, 1).await;
    result.unwrap();
    file.sync_data().await.unwrap();
    assert_eq!(file.size().await.unwrap(), returned.len() as u64 + 1);
    assert_eq!(
        read_exact_at(&file, 1, returned.len()).await.unwrap(),
        returned
    );
    drop(file);
    storage.remove_file(&path).await.unwrap();
}

async fn contract_directories<S: Storage>(storage: &S, root: &Path) {
    let partition = root.join("partitions").join("1");
    let nested = partition.join("nested");
    storage.create_dir_all(&nested).await.unwrap();
    assert!(storage.exists(&partition).await);
    assert!(storage.exists(&nested).await);
    let segment = partition.join("segment.log");
    let inner = nested.join("inner.log");
    assert!(!storage.exists(&segment).await);
    drop(storage.open(&segment, true).await.unwrap());
    drop(storage.open(&inner, true).await.unwrap());
    storage.sync_dir(&partition).await.unwrap();
    assert!(storage.exists(&segment).await);
    assert_eq!(names(storage, &partition).await, ["nested", "segment.log"]);

    storage.remove_file(&segment).await.unwrap();
    let again = storage.remove_file(&segment).await.err().unwrap();
    assert_eq!(again.kind(), io::ErrorKind::NotFound);
    assert!(!storage.exists(&segment).await);
    storage.sync_dir(&partition).await.unwrap();
    assert_eq!(names(storage, &partition).await, ["nested"]);

    storage.remove_dir_all(&partition).await.unwrap();
    assert!(!storage.exists(&inner).await);
    assert!(!storage.exists(&nested).await);
    assert!(!storage.exists(&partition).await);
    assert_eq!(names(storage, &root.join("partitions")).await, [""; 0]);
}

async fn write<F: StorageFile>(file: &mut F, bytes: &[u8], position: u64) {
    let (result, _) = file.write_all_at(bytes.to_vec(), position).await;
    result.unwrap();
}

async fn read<F: StorageFile>(file: &F, buffer: Vec<u8>, position: u64) -> (usize, Vec<u8>) {
    let (result, buffer) = file.read_at(buffer, position).await;
    (result.unwrap(), buffer)
}

async fn names<S: Storage>(storage: &S, path: &Path) -> Vec<String> {
    let mut names = storage.list_dir(path).await.unwrap();
    names.sort();
    names
}

/// A directory under the system's temp dir, unique to this process and test, removed on
/// drop (also when the test panics).
struct TempDir(PathBuf);

impl TempDir {
    fn new(backend: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "segment-storage-{backend}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Self(std::env::temp_dir().join(name))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover directory under the temp dir harms nobody.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh directory, the compio storage and a runtime to drive it.
#[cfg(feature = "compio")]
fn compio_setup(
    backend: &str,
) -> (
    TempDir,
    super::compio::CompioStorage,
    compio::runtime::Runtime,
) {
    let directory = TempDir::new(backend);
    let runtime = compio::runtime::Runtime::new().unwrap();
    (directory, super::compio::CompioStorage::new(), runtime)
}

/// Creates `directory` and a file `log` in it.
#[cfg(feature = "compio")]
async fn open_log(
    storage: &super::compio::CompioStorage,
    directory: &TempDir,
) -> (PathBuf, super::compio::CompioFile) {
    storage.create_dir_all(&directory.0).await.unwrap();
    let path = directory.0.join("log");
    let file = storage.open(&path, true).await.unwrap();
    (path, file)
}

/// A write of at most `INLINE_WRITE_MAX` bytes is done on the spot (its future is ready at
/// its first poll, no ring round trip); a larger one goes to the ring (pending at first).
#[cfg(feature = "compio")]
#[test]
fn compio_writes_small_records_inline_and_large_ones_through_the_ring() {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::compio::INLINE_WRITE_MAX;

    let (directory, storage, runtime) = compio_setup("compio-inline");
    runtime.block_on(async {
        let (_, mut file) = open_log(&storage, &directory).await;
        let small = vec![7_u8; INLINE_WRITE_MAX];
        let mut context = Context::from_waker(Waker::noop());
        let first_poll = pin!(file.write_all_at(small, 0)).poll(&mut context);
        assert!(
            matches!(first_poll, Poll::Ready((Ok(()), _))),
            "a small write completes without the ring"
        );
        let large = vec![9_u8; INLINE_WRITE_MAX + 1];
        let position = INLINE_WRITE_MAX as u64;
        {
            let mut write = pin!(file.write_all_at(large, position));
            assert!(
                write.as_mut().poll(&mut context).is_pending(),
                "a large write is submitted"
            );
            write.await.0.unwrap();
        }
        let stored = read_all(&file).await.unwrap();
        assert_eq!(stored.len(), 2 * INLINE_WRITE_MAX + 1);
        assert!(stored[..INLINE_WRITE_MAX].iter().all(|&byte| byte == 7));
        assert!(stored[INLINE_WRITE_MAX..].iter().all(|&byte| byte == 9));
    });
}

/// A refused write reports its error on both paths, inline and through the ring: writes to
/// `/dev/full` fail with `ENOSPC`, as a full disk's do.
#[cfg(feature = "compio")]
#[test]
fn compio_reports_a_refused_write_on_both_paths() {
    use super::compio::INLINE_WRITE_MAX;

    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let storage = super::compio::CompioStorage::new();
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut file = storage.open(full, false).await.unwrap();
        for length in [1, INLINE_WRITE_MAX, INLINE_WRITE_MAX + 1] {
            let (result, returned) = file.write_all_at(vec![1_u8; length], 0).await;
            let error = result.expect_err("a write to /dev/full fails");
            assert_eq!(error.raw_os_error(), Some(28), "{length} bytes: {error}");
            assert_eq!(returned.len(), length, "the buffer comes back whole");
        }
    });
}

/// A file of `bytes` that returns at most `step` bytes per read and records where each read
/// wrote.
struct ShortReads {
    bytes: Vec<u8>,
    step: usize,
    targets: std::cell::RefCell<Vec<usize>>,
}

impl StorageFile for ShortReads {
    async fn read_at<B: compio_buf::IoBufMut>(
        &self,
        mut buffer: B,
        position: u64,
    ) -> super::BufResult<usize, B> {
        let from = usize::try_from(position).unwrap().min(self.bytes.len());
        let length = buffer.buf_len();
        let room = buffer.buf_capacity() - length;
        let count = room.min(self.step).min(self.bytes.len() - from);
        let target = &mut buffer.ensure_init()[length..length + count];
        self.targets.borrow_mut().push(target.as_ptr() as usize);
        target.copy_from_slice(&self.bytes[from..from + count]);
        // SAFETY: the bytes up to `length + count` were initialised just above.
        unsafe { buffer.set_len(length + count) };
        (Ok(count), buffer)
    }

    async fn write_all_at<B: compio_buf::IoBuf>(
        &mut self,
        buffer: B,
        _position: u64,
    ) -> super::BufResult<(), B> {
        (Err(io::ErrorKind::Unsupported.into()), buffer)
    }

    async fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn duplicate(&self) -> io::Result<Self> {
        Err(io::ErrorKind::Unsupported.into())
    }

    async fn size(&self) -> io::Result<u64> {
        Ok(self.bytes.len() as u64)
    }

    async fn set_len(&self, _length: u64) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }

    async fn preallocate(&self, _position: u64, _length: u64) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

#[test]
fn read_exact_at_reads_into_the_vector_it_returns() {
    let file = ShortReads {
        bytes: (0..100_u8).collect(),
        step: 16,
        targets: std::cell::RefCell::new(Vec::new()),
    };
    let bytes = block_on_ready(read_exact_at(&file, 10, 40)).unwrap();
    assert_eq!(bytes, (10..50_u8).collect::<Vec<_>>());
    // Three short reads, each into the returned vector's memory right after the previous
    // one's bytes: nothing was read elsewhere and copied in.
    let base = bytes.as_ptr() as usize;
    assert_eq!(*file.targets.borrow(), [base, base + 16, base + 32]);
}

/// On a real file system a reservation takes blocks past the end without changing the size,
/// and cutting the file to its size gives them back (as a seal's trim does).
#[cfg(feature = "compio")]
#[test]
fn compio_reserves_blocks_past_the_end_and_a_cut_releases_them() {
    use std::os::unix::fs::MetadataExt;

    let (directory, storage, runtime) = compio_setup("compio-reserve");
    runtime.block_on(async {
        let (path, mut file) = open_log(&storage, &directory).await;
        write(&mut file, &[5; 4096], 0).await;
        let allocated = || std::fs::metadata(&path).unwrap().blocks() * 512;
        match file.preallocate(4096, 4 << 20).await {
            Ok(()) => {}
            Err(error) if error.raw_os_error() == Some(95) => {
                println!("skipped: the temp directory's file system has no fallocate");
                return;
            }
            Err(error) => panic!("{error}"),
        }
        assert_eq!(file.size().await.unwrap(), 4096);
        assert!(allocated() >= 4096 + (4 << 20), "reserved: {}", allocated());
        file.set_len(4096).await.unwrap();
        assert!(allocated() < 1 << 20, "released: {}", allocated());
    });
}

/// A read-only compio storage (`iggy check`) reads what is there, creates nothing and
/// writes nothing: a check of a read-only mount or a copy leaves it as it was.
#[cfg(feature = "compio")]
#[test]
fn a_read_only_compio_storage_reads_and_never_writes_or_creates() {
    let directory = TempDir::new("compio-read-only");
    let runtime = compio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let path = directory.0.join("log");
        std::fs::create_dir_all(&directory.0).unwrap();
        std::fs::write(&path, b"recorded").unwrap();
        let storage = super::compio::CompioStorage::read_only();
        let mut file = storage.open(&path, false).await.unwrap();
        assert_eq!(read_all(&file).await.unwrap(), b"recorded");
        let written = file.write_all_at(b"over".to_vec(), 0).await;
        assert!(written.0.is_err(), "a read-only open cannot write");
        assert!(storage.open(&directory.0.join("new"), true).await.is_err());
        assert!(!directory.0.join("new").exists(), "nothing created");
        assert_eq!(std::fs::read(&path).unwrap(), b"recorded");
    });
}
