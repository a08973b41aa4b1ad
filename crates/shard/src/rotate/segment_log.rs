//! One segment moved to the new key: its `.log` read in chunks and scanned with the
//! validation recovery uses, each record re-sealed into `<log>.tmp`, and both indexes
//! written from the new positions (sealing a plain record makes it longer).

use std::path::Path;

use segment::format::SEGMENT_SIZE_MAX;
use segment::format::index::{IndexEntry, serialize};
use segment::format::scan::{Scan, StopReason, scan_more};
use segment::layout::SegmentPaths;
use segment::log::find_intact;
use segment::storage::{Storage, StorageFile, read_exact_at};

use super::{
    CHUNK_BYTES, RotateError, Rotated, Rotation, create_empty, io_error, rename_synced, temporary,
};
use crate::at_rest::reseal;

/// Where the rewrite of one log stands.
struct Rewrite<F> {
    out: F,
    /// Bytes written to the new log.
    written: u64,
    entries: Vec<IndexEntry>,
}

pub(super) async fn rotate_segment<S: Storage>(
    storage: &S,
    paths: &SegmentPaths,
    start: u64,
    active: bool,
    rotation: &Rotation,
    rotated: &mut Rotated,
) -> Result<(), RotateError> {
    let log = storage
        .open(&paths.log, false)
        .await
        .map_err(io_error("open", &paths.log))?;
    let size = log.size().await.map_err(io_error("size", &paths.log))?;
    let log_tmp = temporary(&paths.log);
    let mut rewrite = Rewrite {
        out: create_empty(storage, &log_tmp).await?,
        written: 0,
        entries: Vec::new(),
    };
    let mut scan = Scan::new(start);
    // The bytes read but not yet moved; they start at `scan.valid_length` in the old log.
    let mut pending = Vec::new();
    let mut read = 0_u64;
    loop {
        read_chunk(&log, &paths.log, size, &mut read, &mut pending).await?;
        let position = scan.valid_length;
        scan_more(&mut scan, &pending);
        let (consumed, moved) = move_records(
            &scan,
            &pending,
            position,
            &paths.log,
            rotation,
            &mut rewrite,
        )?;
        if !moved.is_empty() {
            let length = moved.len() as u64;
            let (result, _) = rewrite.out.write_all_at(moved, rewrite.written).await;
            result.map_err(io_error("write", &log_tmp))?;
            rewrite.written += length;
        }
        rotated.records += scan.records.len() as u64;
        scan.records.clear();
        pending.drain(..consumed);
        if read_through(&log, paths, &scan, (read, size), active, rotated).await? {
            break;
        }
    }
    drop(log);
    finish(storage, paths, &log_tmp, rewrite).await
}

/// Whether the log has been read through after the scan stopped with `scan.stop` having
/// read `read` of `size` bytes: at its end, or at a damaged tail of the active segment with
/// no intact record after it, which start-up (`segment::log::open`) would cut alike.
/// Anything else is damage the server would quarantine, which the rotation will not move
/// past.
async fn read_through<F: StorageFile>(
    log: &F,
    paths: &SegmentPaths,
    scan: &Scan,
    (read, size): (u64, u64),
    active: bool,
    rotated: &mut Rotated,
) -> Result<bool, RotateError> {
    match &scan.stop {
        StopReason::End => return Ok(read >= size),
        StopReason::Torn { .. } if read < size => return Ok(false),
        _ => {}
    }
    let intact_at = if active {
        find_intact(log, &paths.log, scan, size, CHUNK_BYTES)
            .await
            .map_err(|error| RotateError::Record {
                path: paths.log.clone(),
                position: scan.valid_length,
                reason: error.to_string(),
            })?
    } else {
        None
    };
    if active && intact_at.is_none() {
        rotated.torn_bytes += size - scan.valid_length;
        return Ok(true);
    }
    Err(RotateError::Damaged {
        path: paths.log.clone(),
        position: scan.valid_length,
        stop: scan.stop.clone(),
    })
}

/// Appends the next chunk of the old log (from byte `*read` of its `size`) to `pending`.
async fn read_chunk<F: StorageFile>(
    log: &F,
    path: &Path,
    size: u64,
    read: &mut u64,
    pending: &mut Vec<u8>,
) -> Result<(), RotateError> {
    if *read >= size {
        return Ok(());
    }
    // A chunk is at most CHUNK_BYTES (8 MiB): it fits a usize.
    let length = usize::try_from(CHUNK_BYTES.min(size - *read)).unwrap_or(usize::MAX);
    let chunk = read_exact_at(log, *read, length)
        .await
        .map_err(io_error("read", path))?;
    *read += chunk.len() as u64;
    pending.extend_from_slice(&chunk);
    Ok(())
}

/// Re-seals the records `scan` found in `pending` (which starts at byte `position` of the
/// old log), indexing them at their new positions; returns the bytes of `pending` they
/// took and their new form, to append to the new log.
fn move_records<F>(
    scan: &Scan,
    pending: &[u8],
    position: u64,
    path: &Path,
    rotation: &Rotation,
    rewrite: &mut Rewrite<F>,
) -> Result<(usize, Vec<u8>), RotateError> {
    let mut cursor = 0_usize;
    let mut moved = Vec::new();
    for record in &scan.records {
        // The scan measured every record inside `pending`.
        let length = usize::try_from(record.length).unwrap_or(usize::MAX);
        let bytes = &pending[cursor..cursor + length];
        let resealed =
            reseal(rotation.old.as_deref(), rotation.new.as_deref(), bytes).map_err(|reason| {
                RotateError::Record {
                    path: path.to_path_buf(),
                    position: position + cursor as u64,
                    reason,
                }
            })?;
        let new_position = rewrite.written + moved.len() as u64;
        let too_large = || RotateError::TooLarge(path.to_path_buf());
        if new_position + resealed.len() as u64 > SEGMENT_SIZE_MAX {
            return Err(too_large());
        }
        rewrite.entries.push(IndexEntry {
            position: u32::try_from(new_position).map_err(|_past_u32| too_large())?,
            ..record.entry
        });
        moved.extend_from_slice(&resealed);
        cursor += length;
    }
    Ok((cursor, moved))
}

/// Syncs the new log, writes both indexes beside it, and renames the three over the old
/// files.
async fn finish<S: Storage>(
    storage: &S,
    paths: &SegmentPaths,
    log_tmp: &Path,
    rewrite: Rewrite<S::File>,
) -> Result<(), RotateError> {
    rewrite
        .out
        .sync_data()
        .await
        .map_err(io_error("sync", log_tmp))?;
    drop(rewrite.out);
    let (offsets, times) = serialize(&rewrite.entries);
    for (path, bytes) in [(&paths.index, offsets), (&paths.time_index, times)] {
        let temporary = temporary(path);
        let mut file = create_empty(storage, &temporary).await?;
        let (result, _) = file.write_all_at(bytes, 0).await;
        result.map_err(io_error("write", &temporary))?;
        file.sync_data()
            .await
            .map_err(io_error("sync", &temporary))?;
    }
    rename_synced(storage, log_tmp, &paths.log).await?;
    for path in [&paths.index, &paths.time_index] {
        rename_synced(storage, &temporary(path), path).await?;
    }
    Ok(())
}
