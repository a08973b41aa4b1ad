//! `cargo xtask`: the project's scripts, written in Rust rather than shell (STYLE §2.8).
//!
//! Every command runs from the workspace root, whatever the caller's directory, and
//! reports failure through a non-zero exit status with the error chain on stderr.

mod ci;
mod dist;
mod flags;
mod tidy;
mod vopr;

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use xshell::Shell;

/// xtask's only error currency: each command adds its context and keeps the source.
pub(crate) type DynError = Box<dyn Error>;

fn main() -> ExitCode {
    let command = match flags::parse(std::env::args().skip(1)) {
        Ok(command) => command,
        Err(error) => {
            eprintln!("error: {error}\n\n{}", flags::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn run(command: flags::Command) -> Result<(), DynError> {
    let sh = Shell::new()?;
    sh.change_dir(project_root());
    match command {
        flags::Command::Help => {
            print!("{}", flags::USAGE);
            Ok(())
        }
        flags::Command::Tidy => tidy::run(&sh),
        flags::Command::Ci { skip } => ci::run(&sh, &skip),
        flags::Command::Dist { variant } => dist::run(&sh, variant).map(drop),
        flags::Command::CheckFeatures => dist::check_features(&sh),
        flags::Command::Vopr { args } => vopr::run(&sh, &args),
    }
}

/// The workspace root: xtask's manifest sits one directory below it.
fn project_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A manifest directory is absolute and always has a parent.
    manifest_dir
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}
