//! Appends of 1000 × 1 KiB batches through the partition task, each scenario next to the
//! raw throughput of the same disk with the same record size and sync pattern, measured in
//! the same run with plain `std::fs` writes:
//!
//! | scenario | writer | raw counterpart |
//! |---|---|---|
//! | `replicated` | 1 appender | buffered writes, fdatasync every ≥ 1 MiB (the default threshold) |
//! | `persisted` | 1 appender | buffered writes, fdatasync after each record |
//! | `persisted` ×8 | 8 concurrent appenders | `O_DIRECT` writes of 8 records, then one fdatasync |
//! | `persisted` ×8 | 8 concurrent appenders | buffered writes of 8 records, then one fdatasync |
//!
//! The last row has no target: it separates the cost of the page cache, which the log writes
//! through, from the task's own.
//!
//! Settings come from the environment: `SEGMENT_BENCH_DIR` (default `target/bench-tmp`; it
//! must be a real disk, not a tmpfs), `SEGMENT_BENCH_BYTES` per measurement (default
//! 512 MiB) and `SEGMENT_BENCH_RUNS` (default 5). Each run interleaves the scenarios and
//! alternates which side goes first; MB/s figures are medians over runs, and the ratio is the
//! median of the runs' back-to-back writer / raw ratios. Files are deleted after each
//! measurement. The table is printed and written as JSON to `target/segment-bench.json`.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io;
use std::num::ParseIntError;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proto::batch::{BatchEncodeError, OutgoingMessage, encode_batch};
use segment::log::{Durability, LogConfig};
use segment::partition::{AppendBuffer, PartitionError, PartitionHandle, PartitionSpec};
use segment::storage::compio::CompioStorage;

const MESSAGES_PER_BATCH: usize = 1000;
const PAYLOAD_BYTES: usize = 1024;
/// `O_DIRECT` needs buffers, lengths and file positions aligned to the logical block size.
const DIRECT_ALIGNMENT: usize = 4096;
const BYTES_DEFAULT: u64 = 512 << 20;
const RUNS_DEFAULT: usize = 5;

/// One writer configuration and the raw pattern it is compared with.
struct Scenario {
    name: &'static str,
    durability: Durability,
    appenders: usize,
    raw: RawPattern,
    /// The target for writer / raw, when it sets one.
    target: Option<f64>,
}

#[derive(Clone, Copy)]
enum RawPattern {
    /// Buffered positional writes; fdatasync once this many bytes are unsynced.
    Buffered { sync_every_bytes: u64 },
    /// Buffered positional writes; fdatasync after each group of records.
    BufferedGroup { group: usize },
    /// `O_DIRECT` writes of records padded to the alignment; fdatasync after each group.
    Direct { group: usize },
}

struct Settings {
    directory: PathBuf,
    bytes: u64,
    runs: usize,
    /// Where the JSON goes; `None` in a smoke test.
    output: Option<PathBuf>,
}

/// One scenario's medians.
struct Row {
    scenario: &'static str,
    raw: String,
    writer_mb_per_s: f64,
    raw_mb_per_s: f64,
    /// The median of the runs' writer / raw ratios, and their range.
    ratio: f64,
    ratio_min: f64,
    ratio_max: f64,
    target: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("{operation} {path}")]
    Io {
        operation: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("environment variable {name}")]
    Setting {
        name: &'static str,
        #[source]
        source: ParseIntError,
    },
    #[error("encode the batch")]
    Encode(#[source] BatchEncodeError),
    #[error("open the partition")]
    Open(#[source] PartitionError),
    #[error("append through the partition task")]
    Writer(#[source] PartitionError),
    #[error("appender task")]
    Task(#[source] compio::runtime::JoinError),
}

fn main() -> Result<(), BenchError> {
    let settings = Settings::from_env()?;
    std::fs::create_dir_all(&settings.directory)
        .map_err(io_error("create", &settings.directory))?;
    let batch = batch()?;
    let sync_every_bytes = LogConfig::default().size_of_messages_required_to_save;
    let scenarios = [
        Scenario {
            name: "replicated",
            durability: Durability::Replicated,
            appenders: 1,
            raw: RawPattern::Buffered { sync_every_bytes },
            target: Some(0.7),
        },
        Scenario {
            name: "persisted",
            durability: Durability::Persisted,
            appenders: 1,
            raw: RawPattern::Buffered {
                sync_every_bytes: 1,
            },
            target: None,
        },
        Scenario {
            name: "persisted x8",
            durability: Durability::Persisted,
            appenders: 8,
            raw: RawPattern::Direct { group: 8 },
            target: Some(0.5),
        },
        // Not a target: separates the page cache's cost (the log writes through it) from
        // the writer's own.
        Scenario {
            name: "persisted x8 (ref)",
            durability: Durability::Persisted,
            appenders: 8,
            raw: RawPattern::BufferedGroup { group: 8 },
            target: None,
        },
    ];
    // Both sides write the same number of records, a multiple of every group and appender
    // count so each appender gets the same share.
    let count = settings
        .bytes
        .div_ceil(batch.len() as u64)
        .next_multiple_of(8);
    let rows = measure_all(&settings, &scenarios, &batch, count)?;
    print_table(&settings, batch.len(), &rows);
    write_json(&settings, batch.len(), count, &rows)
}

/// Measures every scenario once per run, scenarios interleaved and the raw side first on
/// even runs, last on odd ones, so a disk whose speed drifts during the bench (as virtual
/// disks do) skews no scenario and no side; a discarded raw pass warms the disk first.
fn measure_all(
    settings: &Settings,
    scenarios: &[Scenario],
    batch: &[u8],
    count: u64,
) -> Result<Vec<Row>, BenchError> {
    let runtime = compio::runtime::Runtime::new().map_err(io_error("start", Path::new("")))?;
    let warm_up = settings.directory.join("warm-up");
    measure_raw(scenarios[0].raw, &warm_up, batch, count)?;
    let mut raw = vec![Vec::new(); scenarios.len()];
    let mut writer = vec![Vec::new(); scenarios.len()];
    for run in 0..settings.runs {
        for (index, scenario) in scenarios.iter().enumerate() {
            let directory = settings.directory.join(format!("{}-{run}", scenario.name));
            if run % 2 == 0 {
                raw[index].push(measure_raw(scenario.raw, &directory, batch, count)?);
            }
            let future = measure_writer(scenario, &directory, batch, count);
            writer[index].push(runtime.block_on(future)?);
            if run % 2 == 1 {
                raw[index].push(measure_raw(scenario.raw, &directory, batch, count)?);
            }
        }
    }
    let rows = scenarios
        .iter()
        .zip(raw.into_iter().zip(writer))
        .map(|(scenario, (raw, writer))| {
            // Each run's pair was measured back to back, so its ratio cancels the drift
            // between runs that a ratio of medians would keep.
            let ratios = writer.iter().zip(&raw).map(|(writer, raw)| writer / raw);
            let ratios: Vec<f64> = ratios.collect();
            Row {
                scenario: scenario.name,
                raw: scenario.raw.describe(),
                ratio_min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
                ratio_max: ratios.iter().copied().fold(0.0, f64::max),
                ratio: median(ratios),
                writer_mb_per_s: median(writer),
                raw_mb_per_s: median(raw),
                target: scenario.target,
            }
        })
        .collect();
    Ok(rows)
}

impl Settings {
    fn from_env() -> Result<Self, BenchError> {
        // Benches run with `target/tmp` as `CARGO_TARGET_TMPDIR`; its parent is `target`.
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
        let directory = std::env::var_os("SEGMENT_BENCH_DIR")
            .map_or_else(|| target.join("bench-tmp"), PathBuf::from);
        // `cargo bench` passes `--bench`; without it (`cargo test --benches`) the bench is a
        // smoke test: one small run, and the JSON of the last real run is kept.
        if !std::env::args().any(|argument| argument == "--bench") {
            return Ok(Self {
                directory,
                bytes: 1,
                runs: 1,
                output: None,
            });
        }
        Ok(Self {
            directory,
            bytes: setting("SEGMENT_BENCH_BYTES")?.unwrap_or(BYTES_DEFAULT),
            runs: setting("SEGMENT_BENCH_RUNS")?.map_or(RUNS_DEFAULT, |runs: u64| {
                usize::try_from(runs.max(1)).unwrap_or(RUNS_DEFAULT)
            }),
            output: Some(target.join("segment-bench.json")),
        })
    }
}

impl RawPattern {
    fn describe(self) -> String {
        match self {
            Self::Buffered {
                sync_every_bytes: 1,
            } => "buffered, fdatasync per record".to_owned(),
            Self::Buffered { sync_every_bytes } => {
                format!(
                    "buffered, fdatasync every >= {} KiB",
                    sync_every_bytes >> 10
                )
            }
            Self::BufferedGroup { group } => format!("buffered, fdatasync per {group} records"),
            Self::Direct { group } => format!("O_DIRECT, fdatasync per {group} records"),
        }
    }
}

/// Runs one raw measurement in a fresh `directory`, removed afterwards; returns MB/s.
fn measure_raw(
    pattern: RawPattern,
    directory: &Path,
    record: &[u8],
    count: u64,
) -> Result<f64, BenchError> {
    std::fs::create_dir_all(directory).map_err(io_error("create", directory))?;
    let path = directory.join("raw.log");
    let measured = match pattern {
        RawPattern::Buffered { sync_every_bytes } => {
            raw_buffered(&path, record, count, sync_every_bytes)
        }
        RawPattern::BufferedGroup { group } => {
            let sync_every_bytes = record.len() as u64 * group as u64;
            raw_buffered(&path, record, count, sync_every_bytes)
        }
        RawPattern::Direct { group } => raw_direct(&path, record, count, group),
    };
    std::fs::remove_dir_all(directory).map_err(io_error("remove", directory))?;
    let (bytes, elapsed) = measured?;
    Ok(mb_per_s(bytes, elapsed))
}

fn raw_buffered(
    path: &Path,
    record: &[u8],
    count: u64,
    sync_every_bytes: u64,
) -> Result<(u64, Duration), BenchError> {
    let file = create(path, 0)?;
    let length = record.len() as u64;
    let started = Instant::now();
    let mut unsynced_bytes = 0;
    for index in 0..count {
        file.write_all_at(record, index * length)
            .map_err(io_error("write", path))?;
        unsynced_bytes += length;
        if unsynced_bytes >= sync_every_bytes {
            file.sync_data().map_err(io_error("sync", path))?;
            unsynced_bytes = 0;
        }
    }
    Ok((count * length, started.elapsed()))
}

fn raw_direct(
    path: &Path,
    record: &[u8],
    count: u64,
    group: usize,
) -> Result<(u64, Duration), BenchError> {
    let file = create(path, libc::O_DIRECT)?;
    let length = record.len().next_multiple_of(DIRECT_ALIGNMENT);
    // An over-allocated vector sliced at the first aligned address: no unsafe needed.
    let mut storage = vec![0_u8; length + DIRECT_ALIGNMENT];
    let start = storage.as_ptr().align_offset(DIRECT_ALIGNMENT);
    let aligned = &mut storage[start..start + length];
    aligned[..record.len()].copy_from_slice(record);
    let started = Instant::now();
    for index in 0..count {
        file.write_all_at(aligned, index * length as u64)
            .map_err(io_error("write", path))?;
        if (index + 1) % group as u64 == 0 {
            file.sync_data().map_err(io_error("sync", path))?;
        }
    }
    file.sync_data().map_err(io_error("sync", path))?;
    Ok((count * length as u64, started.elapsed()))
}

/// Runs one writer measurement in a fresh `directory`, removed afterwards; returns MB/s of
/// acknowledged appends (the clean close comes after the clock stops).
async fn measure_writer(
    scenario: &Scenario,
    directory: &Path,
    batch: &[u8],
    count: u64,
) -> Result<f64, BenchError> {
    let spec = PartitionSpec {
        directory: directory.to_path_buf(),
        log: LogConfig {
            durability: scenario.durability,
            ..LogConfig::default()
        },
        offsets_durability: scenario.durability,
    };
    let handle = PartitionHandle::open(CompioStorage::new(), spec, || {})
        .await
        .map_err(BenchError::Open)?;
    let share = count / scenario.appenders as u64;
    let buffers: Vec<Vec<u8>> = (0..scenario.appenders).map(|_| batch.to_vec()).collect();
    let started = Instant::now();
    let tasks: Vec<_> = buffers
        .into_iter()
        .map(|buffer| compio::runtime::spawn(append_many(handle.clone(), buffer, share)))
        .collect();
    let mut outcome = Ok(());
    for task in tasks {
        let result = task
            .await
            .map_err(BenchError::Task)
            .and_then(|result| result);
        outcome = outcome.and(result);
    }
    let elapsed = started.elapsed();
    let closed = handle.close(false).await.map_err(BenchError::Writer);
    std::fs::remove_dir_all(directory).map_err(io_error("remove", directory))?;
    outcome.and(closed)?;
    Ok(mb_per_s(count * batch.len() as u64, elapsed))
}

/// One appender: `count` appends of the same buffer, handed back by each acknowledgement.
async fn append_many(
    handle: PartitionHandle,
    batch: Vec<u8>,
    count: u64,
) -> Result<(), BenchError> {
    let mut buffer = Some(batch);
    for now_us in 0..count {
        let Some(batch) = buffer.take() else {
            return Err(BenchError::Writer(PartitionError::Closed));
        };
        let (result, returned) = handle.append_returning(batch.into(), now_us, None).await;
        result.map_err(BenchError::Writer)?;
        buffer = returned.and_then(AppendBuffer::into_heap);
    }
    Ok(())
}

fn batch() -> Result<Vec<u8>, BenchError> {
    let payloads: Vec<Vec<u8>> = (0..MESSAGES_PER_BATCH)
        .map(|index| {
            (0..PAYLOAD_BYTES)
                .map(|byte| u8::try_from((byte ^ index) & 0xff).unwrap_or(0))
                .collect()
        })
        .collect();
    let messages: Vec<OutgoingMessage<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(index, payload)| OutgoingMessage {
            id: index as u128 + 1,
            origin_timestamp: 1_000,
            payload,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&messages, None, &mut bytes).map_err(BenchError::Encode)?;
    Ok(bytes)
}

fn print_table(settings: &Settings, record_bytes: usize, rows: &[Row]) {
    println!(
        "\nrecords of {} messages ({record_bytes} B), {} MiB per measurement, median of {} \
         runs, in {}",
        MESSAGES_PER_BATCH,
        settings.bytes >> 20,
        settings.runs,
        settings.directory.display()
    );
    println!(
        "{:<18} | {:>8} | {:>8} | {:>6} | {:>11} | {:>6} | raw pattern",
        "scenario", "MB/s", "raw MB/s", "ratio", "ratio range", "target"
    );
    for row in rows {
        let target = row
            .target
            .map_or_else(|| "-".to_owned(), |target| format!(">={target:.2}"));
        println!(
            "{:<18} | {:>8.0} | {:>8.0} | {:>6.2} | {:>4.2} - {:>4.2} | {:>6} | {}",
            row.scenario,
            row.writer_mb_per_s,
            row.raw_mb_per_s,
            row.ratio,
            row.ratio_min,
            row.ratio_max,
            target,
            row.raw
        );
    }
}

fn write_json(
    settings: &Settings,
    record_bytes: usize,
    count: u64,
    rows: &[Row],
) -> Result<(), BenchError> {
    let mut json = format!(
        "{{\n  \"record_bytes\": {record_bytes},\n  \"records_per_measurement\": {count},\n  \
         \"runs\": {},\n  \"rows\": [\n",
        settings.runs
    );
    for (index, row) in rows.iter().enumerate() {
        let target = row
            .target
            .map_or_else(|| "null".to_owned(), |target| target.to_string());
        let separator = if index + 1 == rows.len() { "" } else { "," };
        // Writing to a String cannot fail.
        let _ = writeln!(
            json,
            "    {{\"scenario\": \"{}\", \"mb_per_s\": {:.1}, \"raw_mb_per_s\": {:.1}, \
             \"ratio\": {:.3}, \"ratio_min\": {:.3}, \"ratio_max\": {:.3}, \
             \"target\": {target}, \"raw\": \"{}\"}}{separator}",
            row.scenario,
            row.writer_mb_per_s,
            row.raw_mb_per_s,
            row.ratio,
            row.ratio_min,
            row.ratio_max,
            row.raw
        );
    }
    json.push_str("  ]\n}\n");
    if let Some(output) = &settings.output {
        std::fs::write(output, json).map_err(io_error("write", output))?;
        println!("written to {}", output.display());
    }
    Ok(())
}

fn create(path: &Path, flags: i32) -> Result<File, BenchError> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flags)
        .open(path)
        .map_err(io_error("create", path))
}

fn setting(name: &'static str) -> Result<Option<u64>, BenchError> {
    std::env::var(name)
        .ok()
        .map(|value| value.parse())
        .transpose()
        .map_err(|source| BenchError::Setting { name, source })
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

#[allow(clippy::cast_precision_loss)] // Byte counts far below 2^52.
fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

fn io_error(operation: &'static str, path: &Path) -> impl FnOnce(io::Error) -> BenchError {
    let path = path.to_path_buf();
    move |source| BenchError::Io {
        operation,
        path,
        source,
    }
}
