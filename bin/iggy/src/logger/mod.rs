//! The logger: one line per record, `<UTC time> <LEVEL> <target>: <message>`, on stderr and,
//! with `[system.logging] file_enabled`, in a rotating file ([`file`]); records that pass
//! the filter also go to the OpenTelemetry log exporter when `[telemetry]` enables it.
//!
//! Each line is also handed to a tail set at start ([`tail_to`]): the HTTP console's
//! memory of recent lines, in builds that serve it.
//!
//! The filter ([`filter`]) is `RUST_LOG` when set, else `[system.logging] level` (both in
//! `RUST_LOG`'s directive syntax); until the configuration is read, `RUST_LOG` or `info`.

pub(crate) mod file;
pub(crate) mod filter;

use std::io::Write;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::{LevelFilter, Log, Metadata, Record};

use self::file::{RotatingFile, Rotation};
use self::filter::Filter;
use crate::config::LoggingSettings;

/// Where a record goes beside stderr and the file: the OpenTelemetry exporter.
pub(crate) trait Export: Send + Sync {
    fn export(&self, record: &Record<'_>, unix_ns: u64);
}

struct Logger {
    filter: RwLock<Filter>,
    file: Mutex<Option<RotatingFile>>,
    export: OnceLock<Box<dyn Export>>,
}

static LOGGER: Logger = Logger {
    filter: RwLock::new(Filter::at(LevelFilter::Info)),
    file: Mutex::new(None),
    export: OnceLock::new(),
};

/// Installs the logger on stderr with `RUST_LOG`'s filter (or `info`); a second call keeps
/// the first.
pub(crate) fn init() {
    let filter = rust_log().unwrap_or(Filter::at(LevelFilter::Info));
    if log::set_logger(&LOGGER).is_ok() {
        set_filter(filter);
    }
}

/// Applies `[system.logging]`: its level unless `RUST_LOG` is set, and the log file with a
/// thread that prunes rotated files every `rotation_check_interval`.
pub(crate) fn configure(settings: &LoggingSettings) -> std::io::Result<()> {
    if let Some(filter) = rust_log().or_else(|| Filter::parse(&settings.level).ok()) {
        set_filter(filter);
    }
    if !settings.file_enabled {
        return Ok(());
    }
    let rotation = Rotation {
        directory: settings.directory.clone(),
        max_file_size: settings.max_file_size,
        max_total_size: settings.max_total_size,
        retention: settings.retention,
    };
    let file = RotatingFile::open(rotation.clone())?;
    rotation.prune(SystemTime::now());
    *lock_file() = Some(file);
    let interval = settings.rotation_check_interval.max(Duration::from_secs(1));
    std::thread::Builder::new()
        .name("log-rotation".into())
        .spawn(move || {
            loop {
                std::thread::sleep(interval);
                rotation.prune(SystemTime::now());
            }
        })?;
    Ok(())
}

/// Where each line also goes once written (set once, at start).
static TAIL: OnceLock<fn(&str)> = OnceLock::new();

/// Hands every line written from now on to `tail` too (set once).
pub(crate) fn tail_to(tail: fn(&str)) {
    let _ = TAIL.set(tail);
}

/// Sends every logged record to `export` too (set once).
pub(crate) fn export_to(export: Box<dyn Export>) {
    let _ = LOGGER.export.set(export);
}

fn rust_log() -> Option<Filter> {
    let text = std::env::var("RUST_LOG").ok()?;
    match Filter::parse(&text) {
        Ok(filter) => Some(filter),
        Err(reason) => {
            eprintln!("RUST_LOG ignored: {reason}");
            None
        }
    }
}

fn set_filter(filter: Filter) {
    log::set_max_level(filter.max_level());
    *LOGGER
        .filter
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = filter;
}

fn lock_file() -> std::sync::MutexGuard<'static, Option<RotatingFile>> {
    // A panic while writing a line leaves the file usable.
    LOGGER
        .file
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
            && self
                .filter
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .enabled(metadata.target(), metadata.level())
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let now = SystemTime::now();
        let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let line = format!(
            "{} {:5} {}: {}\n",
            format_utc(since_epoch.as_secs(), since_epoch.subsec_millis()),
            record.level(),
            record.target(),
            record.args()
        );
        // A failed write to stderr or the file has nowhere better to be reported.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        if let Some(tail) = TAIL.get() {
            tail(line.trim_end());
        }
        if let Some(file) = lock_file().as_mut() {
            let _ = file.write_line(&line, now);
        }
        if let Some(export) = self.export.get() {
            let unix_ns = u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX);
            export.export(record, unix_ns);
        }
    }

    fn flush(&self) {}
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn format_utc(seconds: u64, millis: u32) -> String {
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::format_utc;

    #[test]
    fn formats_utc() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(1_700_000_000, 5), "2023-11-14T22:13:20.005Z");
        assert_eq!(format_utc(951_782_400, 0), "2000-02-29T00:00:00.000Z");
    }
}
