//! `cargo xtask vopr`: the deterministic simulator of `crates/sim`, in a release build.
//!
//! CI runs [`CI_SEEDS`] seeds of the default size (1,000 requests and at least
//! one crash each), then builds the simulator once more with the test-only feature
//! `__broken` (in the dev profile: a break is caught in the first seeds, so the build, not
//! the run, is the cost) and requires each deliberate break of `segment::broken`, turned on
//! one per run, to be caught within [`BROKEN_SEEDS`] seeds.
//!
//! `vopr --cluster N` runs the replication simulator of `crates/vsr` instead (its seeds and
//! planted bugs also run in CI's test step, in `tests/cluster.rs`).

use xshell::{Shell, cmd};

use crate::DynError;

/// Seeds CI runs on every build.
const CI_SEEDS: &str = "100";
/// Seeds within which every broken build must fail.
const BROKEN_SEEDS: &str = "100";
/// The breaks of `segment::broken`, each turned on by `vopr --break NAME`.
const BROKEN: [&str; 3] = [
    "ack_before_write",
    "reuse_offset_after_crash",
    "double_group_owner",
];

/// Runs the simulator with `args`; `--broken` checks every deliberate break instead.
pub(crate) fn run(sh: &Shell, args: &[String]) -> Result<(), DynError> {
    if args.iter().any(|arg| arg == "--broken") {
        return broken(sh);
    }
    if let Some(replicas) = value_of(args, "--cluster") {
        return cluster(
            sh,
            &replicas,
            value_of(args, "--seed"),
            value_of(args, "--seeds"),
        );
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
    // One build for every break, in the dev profile whose dependencies the test step built
    // (only `segment`, `shard` and `sim` change features): about 20 s against 150 s in
    // release, and seed 0 catches every break today.
    for name in BROKEN {
        let run = cmd!(
            sh,
            "cargo run --quiet -p sim --features __broken
             -- --break {name} --seed 0 --seeds {BROKEN_SEEDS}"
        )
        .ignore_status()
        .output()?;
        let stderr = String::from_utf8_lossy(&run.stderr);
        let caught = stderr.lines().find(|line| line.starts_with("VIOLATION"));
        match caught {
            Some(line) if !run.status.success() => println!("{name}: caught, {line}"),
            _ => {
                return Err(format!(
                    "the simulator did not catch the break `{name}` within \
                     {BROKEN_SEEDS} seeds:\n{stderr}"
                )
                .into());
            }
        }
    }
    Ok(())
}

/// The value after `flag` in `args`.
fn value_of(args: &[String], flag: &str) -> Option<String> {
    let position = args.iter().position(|arg| arg == flag)?;
    args.get(position + 1).cloned()
}

/// `vopr --cluster N [--seed S] [--seeds K]`: the replication simulator of `crates/vsr`
/// (`tests/cluster.rs`) with N replicas: one seed replayed, or K seeds from S.
fn cluster(
    sh: &Shell,
    replicas: &str,
    seed: Option<String>,
    seeds: Option<String>,
) -> Result<(), DynError> {
    let _replicas = sh.push_env("VSR_REPLICAS", replicas);
    let start = seed.unwrap_or_else(|| "0".to_owned());
    if let Some(count) = seeds {
        let _start = sh.push_env("VSR_SEED_START", &start);
        let _count = sh.push_env("VSR_SEEDS", count);
        cmd!(
            sh,
            "cargo test --release -q -p vsr --test cluster seeds_keep -- --nocapture"
        )
        .run()?;
    } else {
        let _seed = sh.push_env("VSR_SEED", &start);
        cmd!(
            sh,
            "cargo test --release -q -p vsr --test cluster -- --exact replay --nocapture"
        )
        .run()?;
    }
    Ok(())
}
