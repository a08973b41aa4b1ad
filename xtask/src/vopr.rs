//! `cargo xtask vopr`: the deterministic simulator of `crates/sim`, in a release build.
//!
//! CI runs [`CI_SEEDS`] seeds of the default size (1,000 requests and at least
//! one crash each), then builds every deliberately broken variant (the `__` features of
//! `crates/sim`) and requires each to be caught within [`BROKEN_SEEDS`] seeds.

use xshell::{Shell, cmd};

use crate::DynError;

/// Seeds CI runs on every build.
const CI_SEEDS: &str = "100";
/// Seeds within which every broken build must fail.
const BROKEN_SEEDS: &str = "100";
/// The broken builds, each one feature of `crates/sim`.
const BROKEN: [&str; 3] = [
    "__ack_before_write",
    "__reuse_offset_after_crash",
    "__double_group_owner",
];
/// Broken builds go to their own target directory, so the normal build is not rebuilt.
const BROKEN_TARGET: &str = "target/vopr-broken";

/// Runs the simulator with `args`; `--broken` checks the broken builds instead.
pub(crate) fn run(sh: &Shell, args: &[String]) -> Result<(), DynError> {
    if args.iter().any(|arg| arg == "--broken") {
        return broken(sh);
    }
    cmd!(sh, "cargo run --release --quiet -p sim -- {args...}").run()?;
    Ok(())
}

/// The CI step: the seeds, then the broken builds.
pub(crate) fn ci(sh: &Shell) -> Result<(), DynError> {
    cmd!(
        sh,
        "cargo run --release --quiet -p sim -- --seed 0 --seeds {CI_SEEDS}"
    )
    .run()?;
    broken(sh)
}

fn broken(sh: &Shell) -> Result<(), DynError> {
    for feature in BROKEN {
        let run = cmd!(
            sh,
            "cargo run --release --quiet -p sim --features {feature} --target-dir {BROKEN_TARGET}
             -- --seed 0 --seeds {BROKEN_SEEDS}"
        )
        .ignore_status()
        .output()?;
        let stderr = String::from_utf8_lossy(&run.stderr);
        let caught = stderr.lines().find(|line| line.starts_with("VIOLATION"));
        match caught {
            Some(line) if !run.status.success() => println!("{feature}: caught, {line}"),
            _ => {
                return Err(format!(
                    "the simulator did not catch the broken build `{feature}` within \
                     {BROKEN_SEEDS} seeds:\n{stderr}"
                )
                .into());
            }
        }
    }
    Ok(())
}
