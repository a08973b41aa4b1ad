//! `iggy check <data directory>`: the offline verifier, a thin front of [`shard::check`].

use std::path::Path;
use std::process::ExitCode;

pub(crate) const USAGE: &str = "\
usage: iggy check <data directory>

Verifies a data directory (system.path) offline, reading every file and writing none: the
metadata snapshot and journal (metadata/), and every partition's segments, indexes, state and
stored offsets (streams/*/topics/*/partitions/*). Run it on a stopped server or a copy.

Each problem is printed as `<file>: byte <offset>: <what>` with its repair. Exit status: 0
when the data is clean, 1 when problems were found, 2 when the check could not run.

Repairs, by file:
  metadata/journal.wal    a torn last entry needs nothing (the server cuts it); a corrupt
                          entry followed by intact ones stops the server: restore the file,
                          or `truncate -s <offset> journal.wal` to drop that op and all later;
                          one that ends before the snapshot (emptied, removed) stops it too:
                          restore it, or start once with --accept-metadata-loss
  metadata/snapshot.bin   restore it from a backup
  <segment>.log           a torn tail of the active (last) segment after a crash needs
                          nothing (the server cuts it); other damage, and any after a clean
                          close, quarantines the partition (reads up to the damage, sends
                          refused): `truncate -s <offset>` the .log and delete
                          its .index and .timeindex, or move a sealed segment's three files
                          aside; the partition then opens, with offsets after the damage gone
  .index, .timeindex      delete both; the server rebuilds them from the .log; beside no
                          .log, that segment's records are gone: restore the .log, or delete
                          them (its offsets are a gap)
  partition.state         unreadable: the server goes on from the segments without its offset
                          reservation; restore it to keep that; closed cleanly at more offsets
                          than the segments hold: a .log was cut or removed since, restore it
                          (otherwise the lost offsets are a gap, never given again)
  <id>.offset             delete it; the consumer stores its offset again
  streams/S/topics/T/partitions/P
                          missing for a partition the metadata holds: its data was removed
                          (restore it; otherwise the server creates it empty at start);
                          a partition the metadata does not hold (a delete that did not
                          finish) needs nothing: the server moves it to orphaned/ at start;
                          beside metadata with no change at all, the metadata was lost and
                          the server refuses to start: restore metadata/, or start once with
                          --accept-metadata-loss (the data is moved to orphaned/)";

/// Runs `iggy check` with the arguments after `check`.
pub(crate) fn run(arguments: &[String]) -> ExitCode {
    let root = match arguments {
        [flag] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [root] => Path::new(root),
        _ => {
            eprintln!("error: `iggy check` takes one data directory\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if !root.is_dir() {
        eprintln!("error: {} is not a directory", root.display());
        return ExitCode::from(2);
    }
    // Neither metadata nor partitions: not a data directory (a wrong path would otherwise
    // check clean).
    if !root.join("metadata").is_dir() && !root.join("streams").is_dir() {
        eprintln!(
            "error: {} is not a data directory (no metadata/ or streams/ in it)",
            root.display()
        );
        return ExitCode::from(2);
    }
    let runtime = match compio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: start the compio runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let findings = runtime.block_on(shard::check::check_directory(root));
    for finding in &findings {
        println!("{finding}\n  repair: {}", finding.repair());
    }
    if findings.is_empty() {
        println!("{}: no problems found", root.display());
        return ExitCode::SUCCESS;
    }
    println!("{}: {} problem(s) found", root.display(), findings.len());
    ExitCode::from(1)
}
