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
                          integration fuzz,
                          or a comma-separated list of them
  vopr [--seed S] [--seeds N] [--requests R]
                          the deterministic simulator (crates/sim), release build
  vopr --broken           each deliberately broken build (`__` features of crates/sim)
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
    /// The simulator's arguments, passed through; `--broken` runs the broken builds.
    Vopr {
        args: Vec<String>,
    },
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
    Integration,
    Fuzz,
}

impl Step {
    pub(crate) const ALL: [Step; 11] = [
        Step::Install,
        Step::Fmt,
        Step::Clippy,
        Step::Tidy,
        Step::Test,
        Step::NoStd,
        Step::Deny,
        Step::Vopr,
        Step::Compat,
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
