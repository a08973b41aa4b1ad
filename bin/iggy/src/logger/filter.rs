//! Which records are logged: `RUST_LOG`'s directive syntax, as `[system.logging] level`
//! takes it (`info`, `warn,shard=debug,transport::tcp=trace`, `off`).

use log::{Level, LevelFilter};

/// A default level and per-target levels; the longest matching target wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Filter {
    default: LevelFilter,
    /// `(target prefix, level)`, longest prefix first.
    targets: Vec<(String, LevelFilter)>,
}

impl Filter {
    /// Everything at `level` and above.
    pub(crate) const fn at(level: LevelFilter) -> Self {
        Self {
            default: level,
            targets: Vec::new(),
        }
    }

    /// Parses comma-separated directives: a level (`info`) sets the default, `target=level`
    /// a target's (a module path and everything under it). Levels: `off` (or `none`),
    /// `error`, `warn`, `info`, `debug`, `trace`.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut filter = Self::at(LevelFilter::Info);
        for directive in text.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match directive.split_once('=') {
                Some((target, level)) => {
                    let target = target.trim();
                    if target.is_empty() {
                        return Err(format!("`{directive}` names no target"));
                    }
                    filter
                        .targets
                        .push((target.to_owned(), level_of(level.trim())?));
                }
                // A bare target, as in RUST_LOG, logs everything of that target.
                None => match level_of(directive) {
                    Ok(level) => filter.default = level,
                    Err(_) if is_target(directive) => {
                        filter
                            .targets
                            .push((directive.to_owned(), LevelFilter::Trace));
                    }
                    Err(reason) => return Err(reason),
                },
            }
        }
        filter
            .targets
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Ok(filter)
    }

    pub(crate) fn enabled(&self, target: &str, level: Level) -> bool {
        level <= self.level_for(target)
    }

    /// The most verbose level any target may log at (the `log` crate's global cut).
    pub(crate) fn max_level(&self) -> LevelFilter {
        self.targets
            .iter()
            .map(|(_, level)| *level)
            .fold(self.default, Ord::max)
    }

    fn level_for(&self, target: &str) -> LevelFilter {
        self.targets
            .iter()
            .find(|(prefix, _)| {
                target == prefix
                    || target
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|rest| rest.starts_with("::"))
            })
            .map_or(self.default, |(_, level)| *level)
    }
}

/// A module path: `shard`, `transport::tcp`.
fn is_target(text: &str) -> bool {
    text.split("::")
        .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

fn level_of(text: &str) -> Result<LevelFilter, String> {
    match text.to_ascii_lowercase().as_str() {
        "none" => Ok(LevelFilter::Off),
        other => other
            .parse()
            .map_err(|error| format!("`{text}`: {error} (off, error, warn, info, debug or trace)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_target_wins() {
        let filter = Filter::parse("warn, shard=debug, shard::data=trace,iggy=off").unwrap();
        assert!(filter.enabled("shard::data::poll", Level::Trace));
        assert!(filter.enabled("shard::handler", Level::Debug));
        assert!(!filter.enabled("shard::handler", Level::Trace));
        assert!(
            !filter.enabled("sharding", Level::Info),
            "a prefix ends at `::`"
        );
        assert!(filter.enabled("sharding", Level::Warn));
        assert!(!filter.enabled("iggy", Level::Error));
        assert_eq!(filter.max_level(), LevelFilter::Trace);
    }

    #[test]
    fn bare_levels_and_bad_directives() {
        assert_eq!(
            Filter::parse("debug").unwrap(),
            Filter::at(LevelFilter::Debug)
        );
        assert_eq!(Filter::parse("none").unwrap(), Filter::at(LevelFilter::Off));
        assert_eq!(Filter::parse("").unwrap(), Filter::at(LevelFilter::Info));
        let bare = Filter::parse("warn,transport::tcp").unwrap();
        assert!(
            bare.enabled("transport::tcp::reader", Level::Trace),
            "a bare target: all"
        );
        assert!(!bare.enabled("transport::ws", Level::Info));
        assert!(Filter::parse("no such!").is_err());
        assert!(Filter::parse("=debug").is_err());
        assert!(Filter::parse("shard=verbose").is_err());
    }
}
