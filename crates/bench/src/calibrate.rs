//! `--calibrate`: what this machine allows for the run's batch size, measured with plain std
//! I/O so the server's numbers can be read as a fraction of them.
//!
//! - loopback TCP, streaming: one thread writes batch-sized buffers, another reads them;
//! - loopback TCP, request/reply: one batch out, a 256-byte ack back, one in flight, which is
//!   the shape of a producer's traffic;
//! - disk, sequential writes of batch-sized buffers: buffered with one `fdatasync` at the
//!   end, `fdatasync` after every batch (the pattern of `durability = persisted`), and
//!   `O_DIRECT` (buffers and sizes aligned to 4 KiB).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Instant;

use crate::metrics::to_f64;

/// The most bytes each measurement moves.
const CALIBRATION_BYTES_MAX: u64 = 1 << 30;
/// `O_DIRECT` alignment.
const DIRECT_ALIGNMENT: usize = 4096;
/// Bytes of the ack in the request/reply measurement (a reply header).
const ACK_BYTES: usize = 256;

/// Throughputs in MB/s (10^6 bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub batch_bytes: usize,
    pub total_bytes: u64,
    pub tcp_stream: f64,
    pub tcp_request_reply: f64,
    pub disk_buffered: f64,
    pub disk_fdatasync: f64,
    /// `None` when the file system refuses `O_DIRECT` (tmpfs does).
    pub disk_direct: Option<f64>,
}

/// A calibration step failed.
#[derive(Debug, thiserror::Error)]
#[error("calibration: {step}")]
pub struct CalibrationError {
    step: &'static str,
    #[source]
    source: io::Error,
}

/// Measures everything with `batch_bytes` buffers, `total_bytes` (capped at 1 GiB) each.
pub fn calibrate(
    batch_bytes: usize,
    total_bytes: u64,
    directory: &Path,
) -> Result<Calibration, CalibrationError> {
    let total_bytes = total_bytes.clamp(1, CALIBRATION_BYTES_MAX);
    let batches = total_bytes.div_ceil(u64::try_from(batch_bytes).unwrap_or(u64::MAX));
    let step = |step| move |source| CalibrationError { step, source };
    let path = directory.join("calibration.tmp");
    let result = Calibration {
        batch_bytes,
        total_bytes,
        tcp_stream: tcp_stream(batch_bytes, batches).map_err(step("loopback tcp"))?,
        tcp_request_reply: tcp_request_reply(batch_bytes, batches)
            .map_err(step("loopback tcp request/reply"))?,
        disk_buffered: disk(&path, batch_bytes, batches, Sync::End).map_err(step("disk"))?,
        disk_fdatasync: disk(&path, batch_bytes, batches, Sync::EveryBatch)
            .map_err(step("disk fdatasync"))?,
        disk_direct: disk_direct(&path, batch_bytes, batches).ok(),
    };
    let _ = std::fs::remove_file(&path);
    Ok(result)
}

fn rate(bytes: u64, started: Instant) -> f64 {
    to_f64(bytes) / started.elapsed().as_secs_f64().max(1e-9) / 1e6
}

fn pair() -> io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    Ok((client, server))
}

fn tcp_stream(batch_bytes: usize, batches: u64) -> io::Result<f64> {
    let (mut client, mut server) = pair()?;
    let total = u64::try_from(batch_bytes).unwrap_or(u64::MAX) * batches;
    let reader = thread::spawn(move || -> io::Result<()> {
        let mut buffer = vec![0u8; batch_bytes];
        let mut left = total;
        while left > 0 {
            let read = server.read(&mut buffer)?;
            if read == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            left = left.saturating_sub(u64::try_from(read).unwrap_or(u64::MAX));
        }
        Ok(())
    });
    let buffer = vec![0x5au8; batch_bytes];
    let started = Instant::now();
    for _ in 0..batches {
        client.write_all(&buffer)?;
    }
    reader.join().expect("the reader thread does not panic")?;
    Ok(rate(total, started))
}

fn tcp_request_reply(batch_bytes: usize, batches: u64) -> io::Result<f64> {
    let (mut client, mut server) = pair()?;
    let replier = thread::spawn(move || -> io::Result<()> {
        let mut buffer = vec![0u8; batch_bytes];
        let ack = [0u8; ACK_BYTES];
        for _ in 0..batches {
            server.read_exact(&mut buffer)?;
            server.write_all(&ack)?;
        }
        Ok(())
    });
    let buffer = vec![0x5au8; batch_bytes];
    let mut ack = [0u8; ACK_BYTES];
    let started = Instant::now();
    for _ in 0..batches {
        client.write_all(&buffer)?;
        client.read_exact(&mut ack)?;
    }
    let total = u64::try_from(batch_bytes).unwrap_or(u64::MAX) * batches;
    let result = rate(total, started);
    replier.join().expect("the replier thread does not panic")?;
    Ok(result)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sync {
    End,
    EveryBatch,
}

fn create(path: &PathBuf, flags: i32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(flags)
        .open(path)
}

fn disk(path: &PathBuf, batch_bytes: usize, batches: u64, sync: Sync) -> io::Result<f64> {
    let mut file = create(path, 0)?;
    let buffer = vec![0x5au8; batch_bytes];
    let started = Instant::now();
    for _ in 0..batches {
        file.write_all(&buffer)?;
        if sync == Sync::EveryBatch {
            file.sync_data()?;
        }
    }
    file.sync_data()?;
    Ok(rate(
        u64::try_from(batch_bytes).unwrap_or(u64::MAX) * batches,
        started,
    ))
}

fn disk_direct(path: &PathBuf, batch_bytes: usize, batches: u64) -> io::Result<f64> {
    let length = batch_bytes.next_multiple_of(DIRECT_ALIGNMENT);
    let storage = vec![0x5au8; length + DIRECT_ALIGNMENT];
    let start = storage.as_ptr().align_offset(DIRECT_ALIGNMENT);
    let buffer = &storage[start..start + length];
    let mut file = create(path, libc::O_DIRECT)?;
    let started = Instant::now();
    for _ in 0..batches {
        file.write_all(buffer)?;
    }
    file.sync_data()?;
    Ok(rate(
        u64::try_from(length).unwrap_or(u64::MAX) * batches,
        started,
    ))
}
