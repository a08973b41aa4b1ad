//! An in-memory file system for tests, with the crash model of `FORMAT.md` §8: every file
//! keeps the bytes written (`live`) and the bytes made durable by `sync_data` (`durable`).
//! [`MemoryStorage::crash`] throws away what was not durable, optionally keeping a torn
//! prefix of it, and [`Faults`] make operations fail on demand. A rename is durable once its
//! directory is synced; a power loss before that puts back the source and the file it
//! replaced. [`MemoryStorage::fail_after`] stops all changes after a given number of them,
//! so a test can crash a multi-step update at every step. [`MemoryStorage::set_capacity`]
//! models a full disk: a write or extension past the capacity stores what fits and fails
//! with `ENOSPC`, as a short write followed by a failed one does on a real file system.
//! Space a file reserved with `preallocate` counts as used, and writes into it always fit,
//! until a cut of that file (`set_len` to at most its size) releases it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use compio_buf::{IoBuf, IoBufMut};

use super::{BufResult, Storage, StorageFile};

/// Failures to inject; each counter fails that many upcoming operations of its kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    pub write_errors: u32,
    pub sync_errors: u32,
    pub read_errors: u32,
}

#[derive(Debug, Default, Clone)]
struct FileState {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// The directory entry survives a crash (set by a sync of the directory).
    entry_durable: bool,
    /// Set by a rename until its directory is synced.
    origin: Option<Origin>,
    /// The end of the space [`StorageFile::preallocate`] reserved; it counts against the
    /// capacity beyond `live` until a cut releases it.
    reserved: usize,
}

impl FileState {
    /// Bytes the file takes from the capacity: its contents, or its reservation if larger.
    fn allocated(&self) -> usize {
        self.live.len().max(self.reserved)
    }
}

/// What a power loss restores when it undoes a rename that was not made durable.
#[derive(Debug, Clone)]
struct Origin {
    /// The name the file had before the rename, and whether that entry was durable.
    from: PathBuf,
    from_durable: bool,
    /// The file whose durable entry the rename replaced.
    replaced: Option<Box<FileState>>,
}

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, FileState>,
    directories: BTreeSet<PathBuf>,
    faults: Faults,
    syncs: u64,
    /// Bumped by every power-loss crash: a new boot.
    boots: u64,
    /// Changes still allowed before every further one fails (`None`: unlimited).
    operations_left: Option<u64>,
    /// Live bytes all files together may hold (`None`: unlimited).
    capacity_bytes: Option<u64>,
}

impl State {
    /// Moves a directory and everything under it (a rename of one directory entry: the files
    /// keep their contents and durability; the move is not modelled as lost by a crash).
    fn rename_directory(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if self.files.contains_key(to) || self.directories.contains(to) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", to.display()),
            ));
        }
        let moved = |path: &Path| path.strip_prefix(from).ok().map(|rest| to.join(rest));
        let files: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|path| path.starts_with(from))
            .cloned()
            .collect();
        for path in files {
            if let (Some(file), Some(target)) = (self.files.remove(&path), moved(&path)) {
                self.files.insert(target, file);
            }
        }
        let directories: Vec<PathBuf> = self
            .directories
            .iter()
            .filter(|path| path.starts_with(from))
            .cloned()
            .collect();
        for path in directories {
            self.directories.remove(&path);
            if let Some(target) = moved(&path) {
                self.directories.insert(target);
            }
        }
        for ancestor in to.ancestors().skip(1) {
            self.directories.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    /// Bytes of every file: its contents, or its reservation if larger.
    fn used_bytes(&self) -> u64 {
        self.files
            .values()
            .map(|file| file.allocated() as u64)
            .sum()
    }

    /// The length `path` may grow to before the capacity is reached.
    fn length_max(&self, path: &Path) -> usize {
        let Some(capacity) = self.capacity_bytes else {
            return usize::MAX;
        };
        let own = self.files.get(path).map_or(0, FileState::allocated);
        let free = capacity.saturating_sub(self.used_bytes());
        own.saturating_add(usize::try_from(free).unwrap_or(usize::MAX))
    }
}

/// The error a full disk gives.
fn no_space() -> io::Error {
    io::Error::from_raw_os_error(ENOSPC)
}

/// `ENOSPC` on Linux.
const ENOSPC: i32 = 28;

/// The in-memory storage; clones share one file system.
#[derive(Debug, Clone, Default)]
pub struct MemoryStorage {
    state: Rc<RefCell<State>>,
}

/// What a crash keeps of the bytes written after the last sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Power loss: only synced bytes survive.
    DropUnsynced,
    /// Power loss mid-write: each file keeps synced bytes plus this many of the unsynced
    /// ones (capped by what was written).
    TornAt(usize),
    /// The process died but the machine did not: everything written survives.
    ProcessOnly,
}

impl MemoryStorage {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_faults(&self, faults: Faults) {
        self.state.borrow_mut().faults = faults;
    }

    /// Lets the next `operations` changes (writes, syncs, truncations, creations, renames,
    /// removals) succeed and fails every one after them, as a process that stopped at that
    /// point would leave the files; `None` lifts the limit. Follow with [`Self::crash`].
    pub fn fail_after(&self, operations: Option<u64>) {
        self.state.borrow_mut().operations_left = operations;
    }

    /// Limits the bytes of all files together, their contents or reservations
    /// (`None` lifts the limit). A write or an extension by `set_len` that would pass it
    /// stores the bytes that fit (a short write) and fails with `ENOSPC`, but a write into a
    /// file's own reservation always fits; truncations and removals free space. Lowering the
    /// capacity below what is stored removes nothing.
    pub fn set_capacity(&self, capacity_bytes: Option<u64>) {
        self.state.borrow_mut().capacity_bytes = capacity_bytes;
    }

    /// Bytes of all files together, their contents or reservations.
    pub fn used_bytes(&self) -> u64 {
        self.state.borrow().used_bytes()
    }

    /// Bytes `path` takes from the capacity: its contents, or its reservation if larger.
    pub fn allocated_bytes(&self, path: &Path) -> Option<u64> {
        let state = self.state.borrow();
        state.files.get(path).map(|file| file.allocated() as u64)
    }

    /// `fdatasync` calls so far, for group-commit tests.
    pub fn syncs(&self) -> u64 {
        self.state.borrow().syncs
    }

    /// Simulates a crash. Files whose entry was never made durable vanish under the
    /// power-loss modes.
    pub fn crash(&self, mode: CrashMode) {
        let mut state = self.state.borrow_mut();
        if mode != CrashMode::ProcessOnly {
            state.boots += 1;
            undo_unsynced_renames(&mut state.files);
        }
        state
            .files
            .retain(|_, file| mode == CrashMode::ProcessOnly || file.entry_durable);
        for file in state.files.values_mut() {
            match mode {
                CrashMode::ProcessOnly => {}
                CrashMode::DropUnsynced => file.live.clone_from(&file.durable),
                CrashMode::TornAt(kept) => {
                    let common = common_prefix(&file.live, &file.durable);
                    let end = common.saturating_add(kept).min(file.live.len()).max(common);
                    let mut torn = file.live[..end].to_vec();
                    if torn.len() < file.durable.len() {
                        torn.extend_from_slice(&file.durable[torn.len()..]);
                    }
                    file.live = torn;
                }
            }
            file.durable.clone_from(&file.live);
        }
    }

    /// The live bytes of a file, for assertions.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.state
            .borrow()
            .files
            .get(path)
            .map(|file| file.live.clone())
    }

    /// Overwrites a file's bytes (live and durable), for corruption tests.
    pub fn replace(&self, path: &Path, bytes: Vec<u8>) {
        let mut state = self.state.borrow_mut();
        let file = state.files.entry(path.to_path_buf()).or_default();
        file.durable.clone_from(&bytes);
        file.live = bytes;
        file.entry_durable = true;
    }

    /// Counts one change against [`Self::fail_after`]'s limit.
    fn take_operation(&self) -> io::Result<()> {
        let mut state = self.state.borrow_mut();
        match &mut state.operations_left {
            None => Ok(()),
            Some(0) => Err(io::Error::other("injected stop")),
            Some(left) => {
                *left -= 1;
                Ok(())
            }
        }
    }

    fn take_fault(&self, pick: fn(&mut Faults) -> &mut u32) -> io::Result<()> {
        let mut state = self.state.borrow_mut();
        let counter = pick(&mut state.faults);
        if *counter == 0 {
            return Ok(());
        }
        *counter -= 1;
        Err(io::Error::other("injected fault"))
    }
}

/// Puts back the source and the replaced target of every rename whose directory was not
/// synced, as a power loss would.
fn undo_unsynced_renames(files: &mut BTreeMap<PathBuf, FileState>) {
    let renamed: Vec<PathBuf> = files
        .iter()
        .filter(|(_, file)| !file.entry_durable && file.origin.is_some())
        .map(|(path, _)| path.clone())
        .collect();
    for path in renamed {
        let Some(mut file) = files.remove(&path) else {
            continue;
        };
        let Some(origin) = file.origin.take() else {
            continue;
        };
        if origin.from_durable {
            file.entry_durable = true;
            files.insert(origin.from, file);
        }
        if let Some(replaced) = origin.replaced {
            files.insert(path, *replaced);
        }
    }
}

fn common_prefix(left: &[u8], right: &[u8]) -> usize {
    left.iter().zip(right).take_while(|(a, b)| a == b).count()
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

impl Storage for MemoryStorage {
    type File = MemoryFile;

    fn boot_id(&self) -> Option<[u8; 16]> {
        let mut id = [0_u8; 16];
        // Never all zeros, which means "unknown".
        let boot = self.state.borrow().boots + 1;
        id[..8].copy_from_slice(&boot.to_le_bytes());
        Some(id)
    }

    /// The capacity as the file system's size (unlimited: `u64::MAX` of each).
    fn space(&self, _path: &Path) -> Option<super::Space> {
        let state = self.state.borrow();
        let total = state.capacity_bytes.unwrap_or(u64::MAX);
        let available = match state.capacity_bytes {
            Some(capacity) => capacity.saturating_sub(state.used_bytes()),
            None => u64::MAX,
        };
        Some(super::Space { available, total })
    }

    async fn open(&self, path: &Path, create: bool) -> io::Result<MemoryFile> {
        let missing = !self.state.borrow().files.contains_key(path);
        if missing {
            if !create {
                return Err(not_found(path));
            }
            self.take_operation()?;
            let mut state = self.state.borrow_mut();
            state.files.insert(path.to_path_buf(), FileState::default());
        }
        Ok(MemoryFile {
            storage: self.clone(),
            path: path.to_path_buf(),
        })
    }

    async fn open_private(&self, path: &Path) -> io::Result<MemoryFile> {
        // No permissions in memory: the mode is the real backends' business.
        self.open(path, true).await
    }

    async fn create_dir_all_private(&self, path: &Path) -> io::Result<()> {
        self.create_dir_all(path).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.take_operation()?;
        let mut state = self.state.borrow_mut();
        if state.directories.contains(from) {
            return state.rename_directory(from, to);
        }
        let mut file = state.files.remove(from).ok_or_else(|| not_found(from))?;
        let replaced = state.files.remove(to).and_then(|target| {
            // A target renamed in without a directory sync since hands its own origin on.
            match target.origin {
                Some(origin) => origin.replaced,
                None => target.entry_durable.then(|| Box::new(target)),
            }
        });
        let origin = match file.origin.take() {
            Some(earlier) => Origin {
                replaced,
                ..earlier
            },
            None => Origin {
                from: from.to_path_buf(),
                from_durable: file.entry_durable,
                replaced,
            },
        };
        file.origin = Some(origin);
        file.entry_durable = false;
        state.files.insert(to.to_path_buf(), file);
        Ok(())
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.take_operation()?;
        self.state
            .borrow_mut()
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    /// File by file, each removal a change of its own (as the real call unlinks one entry
    /// at a time): a fault or crash part way leaves some of the files.
    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let files: Vec<PathBuf> = {
            let state = self.state.borrow();
            let under = state.files.keys().filter(|file| file.starts_with(path));
            under.cloned().collect()
        };
        for file in files {
            self.take_operation()?;
            self.state.borrow_mut().files.remove(&file);
        }
        self.take_operation()?;
        let mut state = self.state.borrow_mut();
        state
            .directories
            .retain(|directory| !directory.starts_with(path));
        Ok(())
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.take_operation()?;
        let mut state = self.state.borrow_mut();
        for ancestor in path.ancestors() {
            state.directories.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let state = self.state.borrow();
        let files = state.files.keys();
        let directories = state.directories.iter();
        let mut names: Vec<String> = files
            .chain(directories)
            .filter(|entry| entry.parent() == Some(path))
            .filter_map(|entry| entry.file_name()?.to_str().map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.take_operation()?;
        let mut state = self.state.borrow_mut();
        for (file, entry) in &mut state.files {
            if file.parent() == Some(path) {
                entry.entry_durable = true;
                entry.origin = None;
            }
        }
        Ok(())
    }

    async fn exists(&self, path: &Path) -> bool {
        let state = self.state.borrow();
        state.files.contains_key(path) || state.directories.contains(path)
    }
}

/// A handle on one in-memory file.
#[derive(Debug)]
pub struct MemoryFile {
    storage: MemoryStorage,
    path: PathBuf,
}

impl MemoryFile {
    fn with_file<T>(&self, action: impl FnOnce(&mut FileState) -> T) -> io::Result<T> {
        let mut state = self.storage.state.borrow_mut();
        let file = state
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        Ok(action(file))
    }
}

impl StorageFile for MemoryFile {
    async fn read_at<B: IoBufMut>(&self, mut buffer: B, position: u64) -> BufResult<usize, B> {
        if let Err(error) = self.storage.take_fault(|faults| &mut faults.read_errors) {
            return (Err(error), buffer);
        }
        let start = buffer.buf_len();
        let result = self.with_file(|file| {
            let from = usize::try_from(position)
                .unwrap_or(usize::MAX)
                .min(file.live.len());
            let spare = buffer.buf_capacity() - start;
            let count = spare.min(file.live.len() - from);
            let target = buffer.ensure_init();
            target[start..start + count].copy_from_slice(&file.live[from..from + count]);
            count
        });
        if let Ok(count) = result {
            // SAFETY: the bytes up to `start + count` were initialised just above.
            unsafe { buffer.set_len(start + count) };
        }
        (result, buffer)
    }

    async fn write_all_at<B: IoBuf>(&mut self, buffer: B, position: u64) -> BufResult<(), B> {
        let allowed = self.storage.take_operation();
        let allowed = allowed.and_then(|()| self.storage.take_fault(|f| &mut f.write_errors));
        if let Err(error) = allowed {
            return (Err(error), buffer);
        }
        let length_max = self.storage.state.borrow().length_max(&self.path);
        let result = self.with_file(|file| {
            let start = usize::try_from(position).unwrap_or(usize::MAX);
            let bytes = buffer.as_init();
            let end = start + bytes.len();
            // On a full disk only the bytes that fit are stored: a short write.
            let stored_end = end.min(length_max.max(file.live.len()));
            if file.live.len() < stored_end {
                file.live.resize(stored_end, 0);
            }
            if let Some(stored) = stored_end.checked_sub(start) {
                file.live[start..stored_end].copy_from_slice(&bytes[..stored]);
            }
            stored_end == end
        });
        match result {
            Ok(true) => (Ok(()), buffer),
            Ok(false) => (Err(no_space()), buffer),
            Err(error) => (Err(error), buffer),
        }
    }

    fn duplicate(&self) -> io::Result<Self> {
        Ok(Self {
            storage: self.storage.clone(),
            path: self.path.clone(),
        })
    }

    async fn sync_data(&self) -> io::Result<()> {
        self.storage.take_operation()?;
        self.storage.take_fault(|faults| &mut faults.sync_errors)?;
        self.storage.state.borrow_mut().syncs += 1;
        // Only the file's bytes: its directory entry needs a `sync_dir` (FORMAT.md §8).
        self.with_file(|file| file.durable.clone_from(&file.live))
    }

    async fn size(&self) -> io::Result<u64> {
        self.with_file(|file| file.live.len() as u64)
    }

    async fn set_len(&self, length: u64) -> io::Result<()> {
        self.storage.take_operation()?;
        let length = usize::try_from(length).map_err(io::Error::other)?;
        let length_max = self.storage.state.borrow().length_max(&self.path);
        let fits = self.with_file(|file| {
            let stored = length.min(length_max.max(file.live.len()));
            if stored <= file.live.len() {
                // A cut: the reservation past it goes, as on ext4.
                file.reserved = 0;
            }
            file.live.resize(stored, 0);
            stored == length
        })?;
        if fits { Ok(()) } else { Err(no_space()) }
    }

    async fn preallocate(&self, position: u64, length: u64) -> io::Result<()> {
        self.storage.take_operation()?;
        let end = position
            .checked_add(length)
            .and_then(|end| usize::try_from(end).ok())
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let length_max = self.storage.state.borrow().length_max(&self.path);
        // As on a real file system, a full disk reserves what fits and fails.
        let reserved = end.min(length_max);
        self.with_file(|file| file.reserved = file.reserved.max(reserved))?;
        if reserved == end {
            Ok(())
        } else {
            Err(no_space())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{CrashMode, Faults, MemoryFile, MemoryStorage};
    use crate::storage::{Storage, StorageFile, block_on_ready};

    const DIRECTORY: &str = "/partition";
    const LOG: &str = "/partition/0.log";

    /// A storage holding `synced` durably in [`LOG`] and `unsynced` written after it.
    fn storage_with(synced: &[u8], unsynced: &[u8]) -> MemoryStorage {
        let storage = MemoryStorage::new();
        let mut file = open(&storage, LOG);
        write(&mut file, synced, 0);
        block_on_ready(file.sync_data()).unwrap();
        write(&mut file, unsynced, synced.len() as u64);
        storage
    }

    /// Creates (or opens) a file and makes its directory entry durable.
    fn open(storage: &MemoryStorage, path: &str) -> MemoryFile {
        block_on_ready(storage.create_dir_all(Path::new(DIRECTORY))).unwrap();
        let file = block_on_ready(storage.open(Path::new(path), true)).unwrap();
        block_on_ready(storage.sync_dir(Path::new(DIRECTORY))).unwrap();
        file
    }

    fn write(file: &mut MemoryFile, bytes: &[u8], position: u64) {
        block_on_ready(file.write_all_at(bytes.to_vec(), position))
            .0
            .unwrap();
    }

    fn contents(storage: &MemoryStorage, path: &str) -> Option<Vec<u8>> {
        storage.contents(Path::new(path))
    }

    #[test]
    fn power_loss_drops_unsynced_bytes() {
        let storage = storage_with(b"abc", b"def");
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"abc");
        // What survived is durable now: a second crash keeps it.
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"abc");
    }

    #[test]
    fn torn_write_keeps_a_prefix_of_the_unsynced_bytes() {
        for (kept, expected) in [(0, &b"abc"[..]), (2, b"abcde"), (5, b"abcdefgh")] {
            let storage = storage_with(b"abc", b"defgh");
            storage.crash(CrashMode::TornAt(kept));
            assert_eq!(contents(&storage, LOG).unwrap(), expected, "kept {kept}");
        }
        let storage = storage_with(b"abc", b"defgh");
        storage.crash(CrashMode::TornAt(usize::MAX - 1));
        assert_eq!(contents(&storage, LOG).unwrap(), b"abcdefgh");
    }

    #[test]
    fn torn_write_restores_synced_bytes_after_the_tear() {
        // Synced "abcdef", then unsynced: overwrite from 2 and truncate to 4.
        let storage = storage_with(b"abcdef", b"");
        let mut file = open(&storage, LOG);
        write(&mut file, b"XY", 2);
        block_on_ready(file.set_len(4)).unwrap();
        storage.crash(CrashMode::TornAt(1));
        assert_eq!(contents(&storage, LOG).unwrap(), b"abXdef");
        let storage = storage_with(b"abcdef", b"");
        block_on_ready(open(&storage, LOG).set_len(2)).unwrap();
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"abcdef");
    }

    #[test]
    fn process_crash_keeps_everything_written() {
        let storage = storage_with(b"abc", b"def");
        let mut fresh = open(&storage, "/partition/1.log");
        write(&mut fresh, b"never synced", 0);
        storage.crash(CrashMode::ProcessOnly);
        assert_eq!(contents(&storage, LOG).unwrap(), b"abcdef");
        assert_eq!(
            contents(&storage, "/partition/1.log").unwrap(),
            b"never synced"
        );
    }

    #[test]
    fn files_whose_entry_was_never_synced_vanish() {
        let storage = MemoryStorage::new();
        block_on_ready(storage.create_dir_all(Path::new(DIRECTORY))).unwrap();
        let mut file = block_on_ready(storage.open(Path::new(LOG), true)).unwrap();
        write(&mut file, b"lost", 0);
        block_on_ready(file.sync_data()).unwrap();
        for mode in [CrashMode::DropUnsynced, CrashMode::TornAt(2)] {
            let storage = storage.clone();
            storage.replace(Path::new("/partition/kept"), b"kept".to_vec());
            storage.crash(mode);
            assert_eq!(contents(&storage, LOG), None);
            assert!(!block_on_ready(storage.exists(Path::new(LOG))));
            assert_eq!(contents(&storage, "/partition/kept").unwrap(), b"kept");
        }
        // A synced directory keeps the entry but not the unsynced bytes.
        let storage = MemoryStorage::new();
        let mut file = open(&storage, LOG);
        write(&mut file, b"lost", 0);
        block_on_ready(storage.sync_dir(Path::new(DIRECTORY))).unwrap();
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"");
    }

    /// [`LOG`] durably holds "old"; a synced "new" in a fresh temporary file is renamed
    /// over it, and the directory is synced when `sync` is set.
    fn renamed_over(sync: bool) -> MemoryStorage {
        let storage = storage_with(b"old", b"");
        let temporary = Path::new("/partition/0.log.tmp");
        let mut file = block_on_ready(storage.open(temporary, true)).unwrap();
        write(&mut file, b"new", 0);
        block_on_ready(file.sync_data()).unwrap();
        block_on_ready(storage.rename(temporary, Path::new(LOG))).unwrap();
        if sync {
            block_on_ready(storage.sync_dir(Path::new(DIRECTORY))).unwrap();
        }
        storage
    }

    #[test]
    fn a_rename_is_durable_once_its_directory_is_synced() {
        let storage = renamed_over(false);
        assert_eq!(contents(&storage, LOG).unwrap(), b"new");
        assert_eq!(contents(&storage, "/partition/0.log.tmp"), None);
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(
            contents(&storage, LOG).unwrap(),
            b"old",
            "the rename is undone"
        );
        assert_eq!(
            contents(&storage, "/partition/0.log.tmp"),
            None,
            "never durable"
        );

        let storage = renamed_over(true);
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"new");

        let storage = renamed_over(false);
        storage.crash(CrashMode::ProcessOnly);
        assert_eq!(contents(&storage, LOG).unwrap(), b"new");
    }

    #[test]
    fn an_undone_rename_puts_a_durable_source_back() {
        let storage = storage_with(b"abc", b"");
        let moved = Path::new("/partition/moved.log");
        block_on_ready(storage.rename(Path::new(LOG), moved)).unwrap();
        assert!(block_on_ready(storage.open(Path::new(LOG), false)).is_err());
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"abc");
        assert_eq!(contents(&storage, "/partition/moved.log"), None);
    }

    #[test]
    fn fail_after_stops_every_change_past_the_limit() {
        let storage = storage_with(b"abc", b"");
        let mut file = open(&storage, LOG);
        storage.fail_after(Some(1));
        write(&mut file, b"d", 3);
        let (result, _) = block_on_ready(file.write_all_at(b"e".to_vec(), 4));
        assert!(result.is_err());
        assert!(block_on_ready(file.sync_data()).is_err());
        assert!(block_on_ready(storage.rename(Path::new(LOG), Path::new("/x"))).is_err());
        let (count, _) = block_on_ready(file.read_at(Vec::with_capacity(8), 0));
        assert_eq!(count.unwrap(), 4, "reads still work");
        storage.fail_after(None);
        block_on_ready(file.sync_data()).unwrap();
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"abcd");
    }

    #[test]
    fn faults_fail_the_requested_number_of_operations() {
        let storage = MemoryStorage::new();
        let mut file = open(&storage, LOG);
        let faults = Faults {
            write_errors: 2,
            sync_errors: 1,
            read_errors: 1,
        };
        storage.set_faults(faults);
        for _ in 0..2 {
            let (result, returned) = block_on_ready(file.write_all_at(b"ab".to_vec(), 0));
            assert!(result.is_err());
            assert_eq!(returned, b"ab", "the buffer comes back on failure");
        }
        write(&mut file, b"ab", 0);
        assert!(block_on_ready(file.sync_data()).is_err());
        assert_eq!(storage.syncs(), 0);
        block_on_ready(file.sync_data()).unwrap();
        assert_eq!(storage.syncs(), 1);
        let (result, returned) = block_on_ready(file.read_at(Vec::with_capacity(2), 0));
        assert!(result.is_err());
        assert!(returned.is_empty());
        let (result, returned) = block_on_ready(file.read_at(Vec::with_capacity(2), 0));
        assert_eq!((result.unwrap(), returned.as_slice()), (2, &b"ab"[..]));
        // A failed sync left nothing durable behind it.
        storage.crash(CrashMode::DropUnsynced);
        assert_eq!(contents(&storage, LOG).unwrap(), b"ab");
    }

    #[test]
    fn a_full_disk_stores_what_fits_and_fails_with_enospc() {
        let storage = storage_with(b"abc", b"");
        let mut other = open(&storage, "/partition/1.log");
        write(&mut other, b"xy", 0);
        storage.set_capacity(Some(8));
        let mut file = open(&storage, LOG);
        write(&mut file, b"ABC", 0);
        let (result, returned) = block_on_ready(file.write_all_at(b"defgh".to_vec(), 3));
        assert_eq!(result.unwrap_err().raw_os_error(), Some(28));
        assert_eq!(returned, b"defgh", "the buffer comes back");
        assert_eq!(contents(&storage, LOG).unwrap(), b"ABCdef", "a short write");
        assert_eq!(storage.used_bytes(), 8);
        let error = block_on_ready(file.set_len(7)).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(28));
        block_on_ready(file.set_len(4)).unwrap();
        block_on_ready(storage.remove_file(Path::new("/partition/1.log"))).unwrap();
        write(&mut file, b"defg", 3);
        assert_eq!(
            contents(&storage, LOG).unwrap(),
            b"ABCdefg",
            "freed space is usable"
        );
        storage.set_capacity(None);
        write(&mut file, &[7; 64], 7);
        assert_eq!(storage.used_bytes(), 71);
    }

    #[test]
    fn a_reservation_counts_as_used_and_writes_into_it_fit_on_a_full_disk() {
        let storage = MemoryStorage::new();
        let mut file = open(&storage, LOG);
        write(&mut file, b"abc", 0);
        storage.set_capacity(Some(10));
        block_on_ready(file.preallocate(3, 5)).unwrap();
        assert_eq!(storage.used_bytes(), 8, "reserved up to 8");
        assert_eq!(contents(&storage, LOG).unwrap(), b"abc", "the size stays");
        // Another file gets only what the reservation left.
        let mut other = open(&storage, "/partition/1.log");
        let (result, _) = block_on_ready(other.write_all_at(b"xyz".to_vec(), 0));
        assert_eq!(result.unwrap_err().raw_os_error(), Some(28));
        assert_eq!(contents(&storage, "/partition/1.log").unwrap(), b"xy");
        // The disk is full, but the reservation takes the write.
        write(&mut file, b"defgh", 3);
        assert_eq!(storage.used_bytes(), 10);
        // A reservation past what is free takes what fits and fails.
        let error = block_on_ready(file.preallocate(8, 4)).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(28));
        // Cutting the file releases its reservation.
        block_on_ready(file.set_len(2)).unwrap();
        assert_eq!(storage.used_bytes(), 4);
        write(&mut other, b"xyzuvw", 0);
        assert_eq!(storage.used_bytes(), 8);
    }
}
