//! Command-line flags: `--fresh`, `--with-default-root-credentials`, `--config <path>`,
//! `--replica-id <N>`, `--recover`, `--accept-metadata-loss`, `--version`, `--help`.

use std::path::PathBuf;

pub(crate) const USAGE: &str = "\
usage: iggy [--fresh] [--with-default-root-credentials] [--config <path>]
            [--replica-id <N>] [--recover] [--accept-metadata-loss]
       iggy check <data directory>        verify a stopped server's data (iggy check --help)
       iggy encryption rotate <data directory>
                                          re-encrypt a stopped server's data under a new key
                                          (iggy encryption --help)

  --fresh                            wipe the data directory (system.path) before starting
  --with-default-root-credentials    on first boot create the root user iggy/iggy
  --config <path>                    read this configuration file over the built-in defaults
  --replica-id <N>                   which `[[cluster.nodes]]` entry this process is (default 0)
  --recover                          cluster mode: this node lost its data directory; take the
                                     cluster's state from the other nodes before taking part
  --accept-metadata-loss             start from metadata/snapshot.bin alone when journal.wal
                                     lost its start (emptied, removed, damaged from byte 0),
                                     dropping every metadata change after the snapshot; or,
                                     when no metadata is left beside partition data, start
                                     with empty metadata, the data moved to orphaned/; without
                                     it either stops the start (iggy check reports it)
  -V, --version                      print the version and the features built in
  -h, --help                         print this help";

/// The parsed flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cli {
    pub(crate) fresh: bool,
    pub(crate) default_root_credentials: bool,
    pub(crate) config: Option<PathBuf>,
    pub(crate) replica_id: u8,
    pub(crate) recover: bool,
    pub(crate) accept_metadata_loss: bool,
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
    #[error("`--replica-id` needs a number from 0 to 255")]
    ReplicaId,
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
                "--recover" => cli.recover = true,
                "--accept-metadata-loss" => cli.accept_metadata_loss = true,
                "--replica-id" => {
                    let id = arguments.next().ok_or(CliError::ReplicaId)?;
                    cli.replica_id = id.parse().map_err(|_not_id| CliError::ReplicaId)?;
                }
                "-h" | "--help" => cli.help = true,
                "-V" | "--version" => cli.version = true,
                other if other.starts_with("--replica-id=") => {
                    let id = &other["--replica-id=".len()..];
                    cli.replica_id = id.parse().map_err(|_not_id| CliError::ReplicaId)?;
                }
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

    #[test]
    fn replica_flags() {
        let cli = parse(&["--replica-id", "2", "--recover"]).unwrap();
        assert_eq!((cli.replica_id, cli.recover), (2, true));
        assert_eq!(parse(&["--replica-id=1"]).unwrap().replica_id, 1);
        assert_eq!(parse(&[]).unwrap().replica_id, 0);
        for bad in [
            &["--replica-id"][..],
            &["--replica-id", "x"],
            &["--replica-id=256"],
        ] {
            assert_eq!(parse(bad), Err(CliError::ReplicaId));
        }
    }
}
