//! Command-line flags of `cargo xtask`, parsed by hand: two commands and one repeatable option.
//!
//! `Step::ALL` is the single list of CI steps, in the order `ci` runs them.

use std::error::Error;
use std::fmt;

pub(crate) const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  tidy                    line length, function length, banned text, module docs,
                          features.md sync and the no_std dependency rule
  ci [--skip <step>]...   every check and test, failing fast; <step> is one of
                          install fmt clippy tidy test no-std deny vopr compat
                          features dist integration fuzz,
                          or a comma-separated list of them
  dist [--variant minimal|full|all]
                          release archives under target/dist: the stripped binary,
                          README.md, LICENSE and config.toml per variant, SHA256SUMS
  check-features          builds bin/iggy with each feature alone, minimal and full
  vopr [--seed S] [--seeds N] [--requests R]
                          the deterministic simulator (crates/sim), release build
  vopr --broken           each deliberate break (one build with `__broken`, one run each)
                          must be caught within 100 seeds
  help                    this text
";

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Help,
    Tidy,
    Ci {
        skip: Vec<Step>,
    },
    Dist {
        variant: Variant,
    },
    CheckFeatures,
    /// The simulator's arguments, passed through; `--broken` runs every deliberate break.
    Vopr {
        args: Vec<String>,
    },
}

/// Which release archives `dist` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Minimal,
    Full,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Install,
    Fmt,
    Clippy,
    Tidy,
    Test,
    NoStd,
    Deny,
    Vopr,
    Compat,
    Features,
    Dist,
    Integration,
    Fuzz,
}

impl Step {
    pub(crate) const ALL: [Step; 13] = [
        Step::Install,
        Step::Fmt,
        Step::Clippy,
        Step::Tidy,
        Step::Test,
        Step::NoStd,
        Step::Deny,
        Step::Vopr,
        Step::Compat,
        Step::Features,
        Step::Dist,
        Step::Integration,
        Step::Fuzz,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Install => "install",
            Step::Fmt => "fmt",
            Step::Clippy => "clippy",
            Step::Tidy => "tidy",
            Step::Test => "test",
            Step::NoStd => "no-std",
            Step::Deny => "deny",
            Step::Vopr => "vopr",
            Step::Compat => "compat",
            Step::Features => "features",
            Step::Dist => "dist",
            Step::Integration => "integration",
            Step::Fuzz => "fuzz",
        }
    }

    fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|step| step.name() == name)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FlagsError {
    UnknownCommand(String),
    UnknownStep(String),
    MissingValue(&'static str),
    UnexpectedArgument(String),
}

impl fmt::Display for FlagsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagsError::UnknownCommand(command) => write!(f, "unknown command `{command}`"),
            FlagsError::UnknownStep(step) => write!(f, "unknown ci step `{step}`"),
            FlagsError::MissingValue(flag) => write!(f, "`{flag}` needs a value"),
            FlagsError::UnexpectedArgument(arg) => write!(f, "unexpected argument `{arg}`"),
        }
    }
}

impl Error for FlagsError {}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, FlagsError> {
    let mut args = args.into_iter();
    let Some(command) = args.next() else {
        return Ok(Command::Help);
    };
    match command.as_str() {
        "help" | "-h" | "--help" => no_more_arguments(args, Command::Help),
        "tidy" => no_more_arguments(args, Command::Tidy),
        "ci" => parse_ci(args),
        "dist" => parse_dist(args),
        "check-features" => no_more_arguments(args, Command::CheckFeatures),
        "vopr" => Ok(Command::Vopr {
            args: args.collect(),
        }),
        _ => Err(FlagsError::UnknownCommand(command)),
    }
}

fn no_more_arguments(
    mut args: impl Iterator<Item = String>,
    command: Command,
) -> Result<Command, FlagsError> {
    match args.next() {
        Some(arg) => Err(FlagsError::UnexpectedArgument(arg)),
        None => Ok(command),
    }
}

fn parse_dist(mut args: impl Iterator<Item = String>) -> Result<Command, FlagsError> {
    let mut variant = Variant::All;
    while let Some(arg) = args.next() {
        let value = if let Some(value) = arg.strip_prefix("--variant=") {
            value.to_owned()
        } else if arg == "--variant" {
            args.next().ok_or(FlagsError::MissingValue("--variant"))?
        } else {
            return Err(FlagsError::UnexpectedArgument(arg));
        };
        variant = match value.as_str() {
            "minimal" => Variant::Minimal,
            "full" => Variant::Full,
            "all" => Variant::All,
            _ => return Err(FlagsError::UnexpectedArgument(value)),
        };
    }
    Ok(Command::Dist { variant })
}

fn parse_ci(mut args: impl Iterator<Item = String>) -> Result<Command, FlagsError> {
    let mut skip = Vec::new();
    while let Some(arg) = args.next() {
        let value = if let Some(value) = arg.strip_prefix("--skip=") {
            value.to_owned()
        } else if arg == "--skip" {
            args.next().ok_or(FlagsError::MissingValue("--skip"))?
        } else {
            return Err(FlagsError::UnexpectedArgument(arg));
        };
        for name in value.split(',').filter(|name| !name.is_empty()) {
            let step = Step::from_name(name).ok_or_else(|| FlagsError::UnknownStep(name.into()))?;
            skip.push(step);
        }
    }
    Ok(Command::Ci { skip })
}

#[cfg(test)]
mod tests {
    use super::{Command, FlagsError, Step, parse};

    fn parse_str(args: &str) -> Result<Command, FlagsError> {
        parse(args.split_whitespace().map(String::from))
    }

    #[test]
    fn commands() {
        assert_eq!(parse_str(""), Ok(Command::Help));
        assert_eq!(parse_str("tidy"), Ok(Command::Tidy));
        assert_eq!(parse_str("ci"), Ok(Command::Ci { skip: vec![] }));
        assert_eq!(
            parse_str("dist"),
            Ok(Command::Dist {
                variant: super::Variant::All
            })
        );
        assert_eq!(
            parse_str("dist --variant minimal"),
            Ok(Command::Dist {
                variant: super::Variant::Minimal
            })
        );
        assert!(parse_str("dist --variant tiny").is_err());
        assert_eq!(parse_str("check-features"), Ok(Command::CheckFeatures));
        assert_eq!(
            parse_str("vopr --seed 7"),
            Ok(Command::Vopr {
                args: vec!["--seed".into(), "7".into()]
            })
        );
        assert_eq!(
            parse_str("lint"),
            Err(FlagsError::UnknownCommand("lint".into()))
        );
        assert_eq!(
            parse_str("tidy x"),
            Err(FlagsError::UnexpectedArgument("x".into()))
        );
    }

    #[test]
    fn ci_skip() {
        let skip = vec![Step::Test, Step::Deny, Step::NoStd];
        assert_eq!(
            parse_str("ci --skip test --skip=deny,no-std"),
            Ok(Command::Ci { skip })
        );
        assert_eq!(
            parse_str("ci --skip"),
            Err(FlagsError::MissingValue("--skip"))
        );
        assert_eq!(
            parse_str("ci --skip nap"),
            Err(FlagsError::UnknownStep("nap".into()))
        );
    }

    #[test]
    fn step_names_round_trip() {
        for step in Step::ALL {
            assert_eq!(Step::from_name(step.name()), Some(step));
        }
    }
}
