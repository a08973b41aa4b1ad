//! `iggy bench …`: the benchmark subcommand, a thin front of the `bench` crate.

use std::process::ExitCode;

/// Parses the arguments after `bench`, runs, and prints an error with its causes.
pub(crate) fn run(arguments: Vec<String>) -> ExitCode {
    let options = match bench::Options::parse(arguments) {
        Ok(options) => options,
        Err(bench::OptionsError::Help) => {
            println!("{}", bench::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(error) => {
            eprintln!("error: {error}\n\n{}", bench::USAGE);
            return ExitCode::FAILURE;
        }
    };
    match bench::run(&options) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => crate::failure(&error),
    }
}
