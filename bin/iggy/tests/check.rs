//! `iggy check` on a data directory the built server wrote: clean, then with a corrupt
//! journal entry before an intact one, which the check reports by file and byte (exit 1) and
//! the server refuses to start over, naming the same file and byte.

// The helpers are test steps: a failed step is the test failing.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

/// Starts the server on `data` until it listens, then stops it with SIGTERM.
fn run_server_once(data: &Path) {
    let mut server = common::start(data, &[]);
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(server.child.wait().unwrap().code(), Some(0));
}

fn iggy(arguments: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iggy"))
        .args(arguments)
        .env("IGGY_SYSTEM_PATH", data)
        .env("IGGY_TCP_ADDRESS", "127.0.0.1:0")
        .output()
        .unwrap()
}

#[test]
fn check_reports_a_corrupt_journal_and_the_server_refuses_it() {
    let directory = tempfile::tempdir().unwrap();
    let data = directory.path().join("data");
    run_server_once(&data);
    let data_text = data.to_str().unwrap();
    let clean = iggy(&["check", data_text], &data);
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");
    assert!(String::from_utf8_lossy(&clean.stdout).contains("no problems found"));

    // The root user's entry twice, the first one damaged: not a torn tail.
    let journal = data.join("metadata").join("journal.wal");
    let entry = std::fs::read(&journal).unwrap();
    let mut damaged = entry.clone();
    damaged[14] ^= 0x01;
    damaged.extend_from_slice(&entry);
    std::fs::write(&journal, &damaged).unwrap();

    let found = iggy(&["check", data_text], &data);
    assert_eq!(found.status.code(), Some(1), "{found:?}");
    let report = String::from_utf8_lossy(&found.stdout);
    assert!(
        report.contains("metadata/journal.wal: byte 0: corrupt"),
        "{report}"
    );
    assert!(
        report.contains(&format!("intact entry at byte {}", entry.len())),
        "{report}"
    );
    assert!(report.contains("repair: "), "{report}");

    let refused = iggy(&[], &data);
    assert_ne!(refused.status.code(), Some(0));
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(
        error.contains("journal.wal is corrupt at byte 0"),
        "{error}"
    );

    let usage = iggy(&["check"], &data);
    assert_eq!(usage.status.code(), Some(2));
}
