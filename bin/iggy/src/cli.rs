//! Command-line flags: `--fresh`, `--with-default-root-credentials`, `--config <path>`,
//! `--version`, `--help`.

use std::path::PathBuf;

pub(crate) const USAGE: &str = "\
usage: iggy [--fresh] [--with-default-root-credentials] [--config <path>]
       iggy check <data directory>        verify a stopped server's data (iggy check --help)

  --fresh                            wipe the data directory (system.path) before starting
  --with-default-root-credentials    on first boot create the root user iggy/iggy
  --config <path>                    read this configuration file over the built-in defaults
  -V, --version                      print the version and the features built in
  -h, --help                         print this help";

/// The parsed flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cli {
    pub(crate) fresh: bool,
    pub(crate) default_root_credentials: bool,
    pub(crate) config: Option<PathBuf>,
    pub(crate) help: bool,
    pub(crate) version: bool,
}

/// A flag the server does not know, or `--config` without its path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CliError {
    #[error("unknown argument `{0}`")]
    Unknown(String),
    #[error("`--config` needs a path")]
    MissingPath,
}

impl Cli {
    pub(crate) fn parse(arguments: impl IntoIterator<Item = String>) -> Result<Self, CliError> {
        let mut cli = Self::default();
        let mut arguments = arguments.into_iter();
        while let Some(argument) = arguments.next() {
            match argument.as_str() {
                "--fresh" => cli.fresh = true,
                "--with-default-root-credentials" => cli.default_root_credentials = true,
                "--config" => {
                    let path = arguments.next().ok_or(CliError::MissingPath)?;
                    cli.config = Some(PathBuf::from(path));
                }
                "-h" | "--help" => cli.help = true,
                "-V" | "--version" => cli.version = true,
                other => match other.strip_prefix("--config=") {
                    Some(path) if !path.is_empty() => cli.config = Some(PathBuf::from(path)),
                    Some(_) => return Err(CliError::MissingPath),
                    None => return Err(CliError::Unknown(other.to_owned())),
                },
            }
        }
        Ok(cli)
    }
}

#[cfg(test)]
mod tests {
    use super::{Cli, CliError};

    fn parse(arguments: &[&str]) -> Result<Cli, CliError> {
        Cli::parse(arguments.iter().map(|a| (*a).to_owned()))
    }

    #[test]
    fn flags() {
        let cli = parse(&[
            "--fresh",
            "--config",
            "a.toml",
            "--with-default-root-credentials",
        ]);
        let cli = cli.unwrap();
        assert!(cli.fresh && cli.default_root_credentials);
        assert_eq!(cli.config.unwrap().to_str(), Some("a.toml"));
        assert_eq!(
            parse(&["--config=b.toml"])
                .unwrap()
                .config
                .unwrap()
                .to_str(),
            Some("b.toml")
        );
        assert!(parse(&["--version"]).unwrap().version && parse(&["-V"]).unwrap().version);
        assert_eq!(parse(&["--config"]), Err(CliError::MissingPath));
        assert_eq!(parse(&["--frsh"]), Err(CliError::Unknown("--frsh".into())));
    }
}
