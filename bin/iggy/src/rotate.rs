//! `iggy encryption rotate <data directory>`: the offline re-encryption of a stopped
//! server's data under a new key, a thin front of [`shard::rotate`]. The keys come from
//! the environment, never the command line (which other users can read in `ps` and which
//! lands in shell history).

use std::path::Path;
use std::process::ExitCode;

use shard::rotate::{Rotated, plan, rotate};

/// The variable holding the key the data is encrypted with now.
const OLD_KEY: &str = "IGGY_ENCRYPTION_OLD_KEY";
/// The variable holding the key to encrypt with from now on.
const NEW_KEY: &str = "IGGY_ENCRYPTION_NEW_KEY";

pub(crate) const USAGE: &str = "\
usage: iggy encryption rotate <data directory> [--to-plain]

Re-encrypts a stopped server's data directory (system.path) under a new key: every message
of every segment, and the password hashes and token digests of the metadata. Keys are read
from the environment, as base64 of 32 bytes (the form of system.encryption.key):

  IGGY_ENCRYPTION_OLD_KEY   the key the data is encrypted with now; leave it unset to
                            encrypt data written without encryption
  IGGY_ENCRYPTION_NEW_KEY   the key to encrypt with from now on

  --to-plain                decrypt instead: leave IGGY_ENCRYPTION_NEW_KEY unset

Stop the server first. Then start it with the new key (system.encryption.key or
IGGY_SYSTEM_ENCRYPTION_KEY). A rotation that stops half way (a crash, a full disk) leaves
encryption.rotating beside the data: the server refuses to start until the same command,
with the same new key, runs again and finishes. Exit status: 0 done, 1 refused or failed,
2 bad arguments. A cluster node's directory is refused.";

/// Runs `iggy encryption` with the arguments after `encryption`.
pub(crate) fn run(arguments: &[String]) -> ExitCode {
    let (root, to_plain) = match arguments {
        [flag, ..] if flag == "-h" || flag == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [rotate, root] if rotate == "rotate" => (Path::new(root), false),
        [rotate, root, flag] if rotate == "rotate" && flag == "--to-plain" => {
            (Path::new(root), true)
        }
        _ => return usage_error("`iggy encryption` takes `rotate <data directory>`"),
    };
    let old = std::env::var(OLD_KEY)
        .ok()
        .filter(|key| !key.trim().is_empty());
    let new = std::env::var(NEW_KEY)
        .ok()
        .filter(|key| !key.trim().is_empty());
    match (&new, to_plain) {
        (None, false) => return usage_error("set IGGY_ENCRYPTION_NEW_KEY (or pass --to-plain)"),
        (Some(_), true) => return usage_error("--to-plain takes no IGGY_ENCRYPTION_NEW_KEY"),
        _ => {}
    }
    if !root.is_dir() {
        eprintln!("error: {} is not a directory", root.display());
        return ExitCode::from(2);
    }
    let runtime = match compio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: start the compio runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let _lock = match crate::data_lock::acquire(root) {
        Ok(lock) => lock,
        Err(error) => return crate::failure(&error),
    };
    let storage = shard::disk::compio();
    let done = runtime.block_on(async {
        let rotation = plan(&storage, root, old.as_deref(), new.as_deref()).await?;
        rotate(&storage, root, &rotation).await
    });
    match done {
        Ok(rotated) => {
            report(root, &rotated, to_plain);
            ExitCode::SUCCESS
        }
        Err(error) => crate::failure(&error),
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{USAGE}");
    ExitCode::from(2)
}

fn report(root: &Path, rotated: &Rotated, to_plain: bool) {
    let state = if to_plain {
        "decrypted"
    } else {
        "encrypted under the new key"
    };
    println!(
        "{}: {state}: {} records in {} segments, {} credentials",
        root.display(),
        rotated.records,
        rotated.segments,
        rotated.credentials
    );
    if rotated.torn_bytes > 0 {
        println!(
            "  dropped {} bytes of torn tails (a crash's unacknowledged writes; start-up \
             would cut them too)",
            rotated.torn_bytes
        );
    }
}
