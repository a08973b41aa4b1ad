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
    // Every idle connection and actor holds a descriptor.
    let limit = crate::process::raise_open_file_limit();
    let needed = u64::from(options.idle_connections).saturating_add(64);
    if limit.is_some_and(|limit| limit < needed) {
        eprintln!(
            "warning: the open-file limit ({limit:?}) is below the {needed} connections asked"
        );
    }
    match bench::run(&options) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => crate::failure(&error),
    }
}
