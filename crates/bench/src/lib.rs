//! `iggy bench`: drives any server that speaks the Iggy binary protocol over TCP with the
//! scenarios iggy-bench names, and reports throughput and latency per actor and in aggregate,
//! as a table, as JSON and as SVG charts. With `--calibrate` it also measures loopback TCP and
//! the disk with the same batch sizes and reports the server's results as a share of them.
//!
//! Layers: [`options`] parses the command line, [`client`] speaks the protocol through
//! `proto`, [`scenario`] and `actors` run the actors, [`metrics`] measures, [`report`] and
//! [`chart`] present, [`calibrate`] measures the machine.

mod actors;
pub mod calibrate;
pub mod chart;
pub mod client;
mod http_link;
pub mod idle;
pub mod link;
pub mod metrics;
pub mod options;
pub mod report;
pub mod scenario;

use std::path::{Path, PathBuf};

pub use options::{Options, OptionsError, USAGE};

use crate::calibrate::{Calibration, CalibrationError};
use crate::client::ClientError;
use crate::report::Report;

/// Why a benchmark could not run to the end.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error("the benchmark run failed")]
    Run(#[from] ClientError),
    #[error(transparent)]
    Calibrate(#[from] CalibrationError),
    #[error("write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What a finished benchmark produced.
pub struct Outcome {
    pub report: Report,
    /// What the server reported about itself around the run.
    pub server: scenario::ServerTrace,
    pub calibration: Option<Calibration>,
    /// The JSON file written.
    pub json_path: PathBuf,
}

/// Runs the benchmark `options` describe, prints the tables and writes the files.
pub fn run(options: &Options) -> Result<Outcome, BenchError> {
    create_dir(&options.output)?;
    eprintln!(
        "{}: {} producing and {} consuming actors, {} streams × {} partitions, {} batches of \
         {} × {} B per actor, durability {}",
        options.scenario.name(),
        options.producing_actors(),
        options.consuming_actors(),
        options.streams,
        options.partitions,
        options.batches,
        options.messages_per_batch,
        options.message_size_bytes,
        options.durability.as_str(),
    );
    let run = scenario::run(options)?;
    let report = Report::new(&run.results);
    println!("{}", report.table());
    if let Some(line) = run.server.describe(options) {
        println!("{line}");
    }
    let calibration = if options.calibrate {
        Some(calibrate_for(options)?)
    } else {
        None
    };
    if let Some(calibration) = &calibration {
        println!(
            "{}",
            report.calibration_table(calibration, options.durability)
        );
    }
    let name = options.scenario.name();
    let json_path = options.output.join(format!("{name}.json"));
    write(
        &json_path,
        &report.json(options, calibration.as_ref(), &run.server),
    )?;
    let title = format!("{name}: latency over time");
    let svg = chart::latency_over_time(&title, &run.results);
    write(
        &options.output.join(format!("{name}-latency-over-time.svg")),
        &svg,
    )?;
    let title = format!("{name}: latency distribution");
    let svg = chart::latency_distribution(&title, &run.results);
    write(
        &options
            .output
            .join(format!("{name}-latency-distribution.svg")),
        &svg,
    )?;
    eprintln!("wrote {} and its charts", json_path.display());
    Ok(Outcome {
        report,
        server: run.server,
        calibration,
        json_path,
    })
}

/// Calibrates with the frame size of one batch and the bytes the run moved.
fn calibrate_for(options: &Options) -> Result<Calibration, BenchError> {
    eprintln!("calibrating loopback tcp and the disk...");
    // A batch frame: request header, send metadata, batch header, one 64-byte frame header
    // per message, the payloads.
    let messages = u64::from(options.messages_per_batch);
    let frame = 256 + 32 + 256 + messages * 64 + options.batch_payload_bytes();
    let actors = u64::from(options.producing_actors().max(options.consuming_actors()));
    let total = options.batch_payload_bytes() * options.batches * actors.max(1);
    let directory = options.calibrate_dir.as_deref().unwrap_or(&options.output);
    create_dir(directory)?;
    let batch_bytes = usize::try_from(frame).expect("a batch frame fits in memory");
    Ok(calibrate::calibrate(batch_bytes, total, directory)?)
}

fn create_dir(path: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(path).map_err(|source| BenchError::Write {
        path: path.to_owned(),
        source,
    })
}

fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::write(path, text).map_err(|source| BenchError::Write {
        path: path.to_owned(),
        source,
    })
}
