//! The ways one append could reach the kernel, timed as the server's acknowledgement path
//! waits for them: one appender, one record at a time, each write waited for before the
//! next (the client keeps one request in flight). It answers issue 11's "measure `O_DIRECT`
//! appends from aligned pool blocks and `io_uring` registered buffers" before either is
//! built into the log.
//!
//! - `uring buffered`: an `io_uring` write into the page cache (today's log; ext4 hands it
//!   to an io-wq worker);
//! - `uring buffered fixed`: the same from a registered buffer (`WRITE_FIXED`);
//! - `pwrite buffered`: a blocking `pwrite` on the appending thread;
//! - `uring direct`: an `O_DIRECT` write of the record's blocks, the partial last block
//!   rewritten by the next append;
//! - `uring direct fixed`: the same from a registered buffer;
//! - `uring direct prealloc`: the same into blocks reserved ahead with `fallocate`
//!   (64 MiB at a time).
//!
//! Each path also runs durable (an fdatasync after every append, `persisted`) and is then
//! read back with buffered 1 MiB reads, as a consumer right behind the producer would read:
//! what `O_DIRECT` leaves out of the page cache must come from the disk.
//!
//! The record is copied into the aligned block once, not per append: the server would
//! receive a body straight into place (pool blocks are 4 KiB aligned), so the bench times
//! the write alone.
//!
//! Settings from the environment: `SEGMENT_BENCH_DIR` (default `target/bench-tmp`; a real
//! disk, not a tmpfs), `SEGMENT_BENCH_BYTES` per measurement (default 256 MiB),
//! `SEGMENT_BENCH_RUNS` (default 3; paths interleaved in every run, medians reported) and
//! `SEGMENT_BENCH_RECORD` (record bytes, default 1,048,640: 1000 × 1 KiB messages with their
//! headers; use 10,304 for 100 × 100 B).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::Instant;

use io_uring::{IoUring, opcode, types};

const ALIGNMENT: usize = 4096;
const READ_CHUNK: usize = 1 << 20;
const PREALLOCATE_STEP: u64 = 64 << 20;

#[derive(Clone, Copy, PartialEq)]
enum Path {
    UringBuffered,
    UringBufferedFixed,
    PwriteBuffered,
    UringDirect,
    UringDirectFixed,
    UringDirectPrealloc,
}

impl Path {
    const ALL: [Self; 6] = [
        Self::UringBuffered,
        Self::UringBufferedFixed,
        Self::PwriteBuffered,
        Self::UringDirect,
        Self::UringDirectFixed,
        Self::UringDirectPrealloc,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::UringBuffered => "uring buffered",
            Self::UringBufferedFixed => "uring buffered fixed",
            Self::PwriteBuffered => "pwrite buffered",
            Self::UringDirect => "uring direct",
            Self::UringDirectFixed => "uring direct fixed",
            Self::UringDirectPrealloc => "uring direct prealloc",
        }
    }

    fn direct(self) -> bool {
        matches!(
            self,
            Self::UringDirect | Self::UringDirectFixed | Self::UringDirectPrealloc
        )
    }

    fn fixed(self) -> bool {
        matches!(self, Self::UringBufferedFixed | Self::UringDirectFixed)
    }
}

/// One measurement: per-append latencies (ns), elapsed write time and read-back rate.
struct Measured {
    latencies: Vec<u64>,
    write_mb_per_s: f64,
    read_mb_per_s: f64,
}

/// A 4 KiB aligned heap block (what a pool block is), zeroed.
struct Aligned {
    pointer: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(length: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(length.max(ALIGNMENT), ALIGNMENT)
            .expect("a non-zero length rounded to the alignment is a valid layout");
        // SAFETY: the layout has a non-zero size.
        let pointer = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!pointer.is_null(), "allocation failed");
        Self { pointer, layout }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the block is `layout.size()` bytes, allocated and owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.pointer, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.pointer, self.layout) }
    }
}

fn main() -> io::Result<()> {
    let directory = std::env::var("SEGMENT_BENCH_DIR")
        .map_or_else(|_| PathBuf::from("target/bench-tmp"), PathBuf::from);
    let bytes = setting("SEGMENT_BENCH_BYTES", 256 << 20);
    let runs = setting("SEGMENT_BENCH_RUNS", 3);
    let record =
        usize::try_from(setting("SEGMENT_BENCH_RECORD", 1_048_640)).map_err(io::Error::other)?;
    std::fs::create_dir_all(&directory)?;
    let count = bytes.div_ceil(record as u64);
    println!(
        "{count} appends of {record} B per measurement, {runs} runs, in {}",
        directory.display()
    );
    let mut results: Vec<(Path, bool, Vec<Measured>)> = Vec::new();
    for path in Path::ALL {
        for durable in [false, true] {
            results.push((path, durable, Vec::new()));
        }
    }
    // A pass that is not counted: the first files written after start pay for the io-wq
    // workers' creation and the disk's warm-up.
    let warm_up = directory.join("write-paths-warm-up.log");
    measure(Path::UringBuffered, false, &warm_up, record, count)?;
    std::fs::remove_file(&warm_up)?;
    for run in 0..runs {
        for (path, durable, measured) in &mut results {
            let file = directory.join(format!("write-paths-{run}.log"));
            measured.push(measure(*path, *durable, &file, record, count)?);
            std::fs::remove_file(&file)?;
        }
    }
    println!(
        "| path | durable | write MB/s | p50 µs | p99 µs | vs uring buffered | read back MB/s |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let reference = |durable: bool| {
        results
            .iter()
            .find(|(path, is_durable, _)| *path == Path::UringBuffered && *is_durable == durable)
            .map_or(f64::NAN, |(_, _, measured)| {
                median(measured.iter().map(|m| m.write_mb_per_s).collect())
            })
    };
    for (path, durable, measured) in &results {
        let write = median(measured.iter().map(|m| m.write_mb_per_s).collect());
        let read = median(measured.iter().map(|m| m.read_mb_per_s).collect());
        let mut all: Vec<u64> = measured.iter().flat_map(|m| m.latencies.clone()).collect();
        all.sort_unstable();
        println!(
            "| {} | {} | {write:.0} | {:.0} | {:.0} | {:.2} | {read:.0} |",
            path.name(),
            if *durable { "fdatasync" } else { "no" },
            percentile(&all, 0.50),
            percentile(&all, 0.99),
            write / reference(*durable),
        );
    }
    Ok(())
}

/// Appends `count` records of `record` bytes through `path`, then reads the file back.
fn measure(
    path: Path,
    durable: bool,
    file_path: &std::path::Path,
    record: usize,
    count: u64,
) -> io::Result<Measured> {
    let mut appender = Appender::open(path, file_path, record)?;
    let mut latencies = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let started = Instant::now();
    for _ in 0..count {
        let begun = Instant::now();
        appender.append()?;
        if durable {
            appender.sync()?;
        }
        latencies.push(u64::try_from(begun.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    let write_elapsed = started.elapsed();
    let end = appender.end;
    drop(appender);
    let read_mb_per_s = read_back(file_path, end)?;
    #[allow(clippy::cast_precision_loss)] // Byte counts far below 2^52.
    let write_mb_per_s = end as f64 / 1e6 / write_elapsed.as_secs_f64();
    Ok(Measured {
        latencies,
        write_mb_per_s,
        read_mb_per_s,
    })
}

/// One log file written through one path. Fields drop in order: the ring (unregistering
/// its buffer) before the block it names.
struct Appender {
    ring: IoUring,
    file: File,
    block: Aligned,
    path: Path,
    record: usize,
    /// The log's end: where the next record goes.
    end: u64,
    /// Bytes reserved by `fallocate` so far (`UringDirectPrealloc`).
    preallocated: u64,
}

impl Appender {
    fn open(path: Path, file_path: &std::path::Path, record: usize) -> io::Result<Self> {
        let flags = if path.direct() { libc::O_DIRECT } else { 0 };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .custom_flags(flags)
            .open(file_path)?;
        let ring = IoUring::new(8)?;
        // Room for the partial block before the record and the rounding after it.
        let mut block = Aligned::new(record + 2 * ALIGNMENT);
        for (index, byte) in block.as_mut_slice().iter_mut().enumerate() {
            *byte = u8::try_from(index % 251).unwrap_or(0);
        }
        if path.fixed() {
            let buffer = libc::iovec {
                iov_base: block.pointer.cast(),
                iov_len: block.layout.size(),
            };
            // SAFETY: the block outlives its registration: `Appender` drops the ring first.
            unsafe { ring.submitter().register_buffers(&[buffer])? };
        }
        Ok(Self {
            ring,
            file,
            block,
            path,
            record,
            end: 0,
            preallocated: 0,
        })
    }

    fn append(&mut self) -> io::Result<()> {
        let record = self.record as u64;
        if self.path == Path::UringDirectPrealloc && self.end + record > self.preallocated {
            self.preallocate()?;
        }
        if self.path == Path::PwriteBuffered {
            // SAFETY: the block holds at least `record` initialised bytes.
            let bytes = unsafe { std::slice::from_raw_parts(self.block.pointer, self.record) };
            self.file.write_all_at(bytes, self.end)?;
        } else {
            self.submit_write()?;
        }
        self.end += record;
        Ok(())
    }

    fn preallocate(&mut self) -> io::Result<()> {
        self.preallocated += PREALLOCATE_STEP;
        let length = i64::try_from(self.preallocated).map_err(io::Error::other)?;
        // SAFETY: a plain syscall on an open descriptor.
        let result =
            unsafe { libc::fallocate(self.file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, length) };
        if result != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// An `io_uring` write of the record. `O_DIRECT` writes whole blocks from the block
    /// holding the old end: the partial block's head is already in place in the aligned
    /// buffer (the server would keep it), its tail rounded up with whatever follows.
    fn submit_write(&mut self) -> io::Result<()> {
        let (position, length) = if self.path.direct() {
            let start = self.end - self.end % ALIGNMENT as u64;
            let stop = (self.end + self.record as u64).next_multiple_of(ALIGNMENT as u64);
            (start, stop - start)
        } else {
            (self.end, self.record as u64)
        };
        let length = u32::try_from(length).map_err(io::Error::other)?;
        let fd = types::Fd(self.file.as_raw_fd());
        let entry = if self.path.fixed() {
            opcode::WriteFixed::new(fd, self.block.pointer, length, 0)
                .offset(position)
                .build()
        } else {
            opcode::Write::new(fd, self.block.pointer, length)
                .offset(position)
                .build()
        };
        let written = submit_and_wait(&mut self.ring, &entry)?;
        if written != length as usize {
            return Err(io::Error::other(format!(
                "short write: {written} of {length}"
            )));
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let entry = opcode::Fsync::new(types::Fd(self.file.as_raw_fd()))
            .flags(types::FsyncFlags::DATASYNC)
            .build();
        submit_and_wait(&mut self.ring, &entry).map(drop)
    }
}

/// Buffered reads of the first `length` bytes, 1 MiB at a time.
fn read_back(file_path: &std::path::Path, length: u64) -> io::Result<f64> {
    let file = File::open(file_path)?;
    let mut buffer = vec![0_u8; READ_CHUNK];
    let started = Instant::now();
    let mut position = 0;
    while position < length {
        let read = file.read_at(&mut buffer, position)?;
        if read == 0 {
            break;
        }
        position += read as u64;
    }
    #[allow(clippy::cast_precision_loss)] // Byte counts far below 2^52.
    Ok(position as f64 / 1e6 / started.elapsed().as_secs_f64())
}

fn submit_and_wait(ring: &mut IoUring, entry: &io_uring::squeue::Entry) -> io::Result<usize> {
    // SAFETY: the buffers the entry names live until its completion is reaped below.
    unsafe {
        ring.submission().push(entry).map_err(io::Error::other)?;
    }
    ring.submit_and_wait(1)?;
    let completion = ring
        .completion()
        .next()
        .ok_or_else(|| io::Error::other("no completion"))?;
    let result = completion.result();
    if result < 0 {
        return Err(io::Error::from_raw_os_error(-result));
    }
    Ok(usize::try_from(result).unwrap_or(0))
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)] // µs figures; `share` is in 0..=1.
fn percentile(sorted: &[u64], share: f64) -> f64 {
    let index = ((sorted.len() as f64 * share) as usize).min(sorted.len().saturating_sub(1));
    sorted
        .get(index)
        .map_or(f64::NAN, |&nanos| nanos as f64 / 1000.0)
}
