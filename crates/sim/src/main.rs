//! `vopr`: runs simulator seeds. `cargo xtask vopr --seed S` runs one seed and prints its
//! trace tail on failure; `--seeds N` runs N seeds from S; `--requests R` sizes each run;
//! `--trace S` prints the whole trace of seed S; `--break NAME` (first, in a build with the
//! test-only feature `__broken`) runs with one deliberate break of `segment::broken` on.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut seed = 0_u64;
    let mut seeds = 1_u64;
    let mut options = sim::Options::default();
    let mut arguments = std::env::args().skip(1).peekable();
    if arguments.peek().is_some_and(|flag| flag == "--break") {
        arguments.next();
        if let Err(message) = choose_break(arguments.next().as_deref()) {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    }
    if arguments.peek().is_some_and(|flag| flag == "--trace") {
        arguments.next();
        let seed = arguments
            .next()
            .and_then(|value| value.parse().ok())
            .unwrap_or(0);
        return match sim::trace_of(seed, options) {
            Ok(lines) => {
                for line in &lines {
                    println!("{line}");
                }
                ExitCode::SUCCESS
            }
            Err(failure) => {
                for line in &failure.trace {
                    println!("{line}");
                }
                eprintln!("VIOLATION {failure}");
                ExitCode::FAILURE
            }
        };
    }
    while let Some(flag) = arguments.next() {
        let value = arguments.next().and_then(|value| value.parse::<u64>().ok());
        match (flag.as_str(), value) {
            ("--seed", Some(value)) => seed = value,
            ("--seeds", Some(value)) => seeds = value,
            ("--requests", Some(value)) => options.requests = value,
            _ => {
                eprintln!("usage: vopr [--break NAME] [--seed S] [--seeds N] [--requests R]");
                return ExitCode::from(2);
            }
        }
    }
    run_seeds(seed, seeds, options)
}

/// Turns on the break called `name`, in a build that has them.
fn choose_break(name: Option<&str>) -> Result<(), String> {
    let Some(chosen) = name.and_then(segment::broken::Break::from_name) else {
        let names: Vec<&str> = segment::broken::Break::ALL
            .iter()
            .map(|each| each.name())
            .collect();
        return Err(format!("--break takes one of: {}", names.join(", ")));
    };
    if cfg!(feature = "__broken") {
        #[cfg(feature = "__broken")]
        segment::broken::choose(chosen);
        Ok(())
    } else {
        Err(format!(
            "--break {} needs a build with the test-only feature `__broken`",
            chosen.name()
        ))
    }
}

/// Runs `seeds` seeds from `seed`; prints the totals, or the first violation.
fn run_seeds(seed: u64, seeds: u64, options: sim::Options) -> ExitCode {
    let mut totals = sim::Report {
        seed,
        shards: 0,
        requests: 0,
        acked_messages: 0,
        crashes: 0,
        power_losses: 0,
        faults: 0,
        trace_digest: 0,
    };
    for seed in seed..seed.saturating_add(seeds) {
        match sim::run(seed, options) {
            Ok(report) => {
                totals.requests += report.requests;
                totals.acked_messages += report.acked_messages;
                totals.crashes += report.crashes;
                totals.power_losses += report.power_losses;
                totals.faults += report.faults;
                if seeds == 1 {
                    println!("{report:?}");
                }
            }
            Err(failure) => {
                let tail = failure.trace.len().saturating_sub(40);
                for line in &failure.trace[tail..] {
                    eprintln!("  {line}");
                }
                eprintln!("VIOLATION {failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!(
        "{seeds} seed(s) from {seed}: {} requests, {} acknowledged messages, {} crashes \
         ({} power losses), {} storage faults, no violation",
        totals.requests,
        totals.acked_messages,
        totals.crashes,
        totals.power_losses,
        totals.faults,
        seed = totals.seed,
    );
    ExitCode::SUCCESS
}
