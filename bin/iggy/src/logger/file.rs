//! The log file under `[system.logging] path`: `iggy-server.log`, rotated to
//! `iggy-server.log.<UTC time>` when it would pass `max_file_size`; rotated files older than
//! `retention`, and the oldest beyond `max_total_size` in all, are deleted at each rotation
//! and every `rotation_check_interval`.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NAME: &str = "iggy-server.log";

/// Where and how much is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rotation {
    pub(crate) directory: PathBuf,
    /// 0: one file, never rotated.
    pub(crate) max_file_size: u64,
    /// 0: no limit on the rotated files' total.
    pub(crate) max_total_size: u64,
    pub(crate) retention: Duration,
}

/// The file being written.
#[derive(Debug)]
pub(crate) struct RotatingFile {
    rotation: Rotation,
    file: File,
    /// Bytes in the current file.
    written: u64,
}

impl RotatingFile {
    pub(crate) fn open(rotation: Rotation) -> io::Result<Self> {
        fs::create_dir_all(&rotation.directory)?;
        let file = open_current(&rotation.directory)?;
        let written = file.metadata()?.len();
        Ok(Self {
            rotation,
            file,
            written,
        })
    }

    /// Appends `line`, first rotating when it would take the file past its size.
    pub(crate) fn write_line(&mut self, line: &str, now: SystemTime) -> io::Result<()> {
        let length = u64::try_from(line.len()).unwrap_or(u64::MAX);
        let max = self.rotation.max_file_size;
        if max > 0 && self.written > 0 && self.written.saturating_add(length) > max {
            self.rotate(now)?;
        }
        self.file.write_all(line.as_bytes())?;
        self.written = self.written.saturating_add(length);
        Ok(())
    }

    fn rotate(&mut self, now: SystemTime) -> io::Result<()> {
        let directory = &self.rotation.directory;
        let mut rotated = directory.join(format!("{NAME}.{}", stamp(now)));
        // Two rotations within one millisecond (a tiny max_file_size): keep both.
        let mut suffix = 1;
        while rotated.exists() {
            rotated = directory.join(format!("{NAME}.{}-{suffix}", stamp(now)));
            suffix += 1;
        }
        let renamed = fs::rename(directory.join(NAME), &rotated);
        // Lines go on to a file named NAME whatever happened: a new one after the rename, a
        // re-made one if an operator removed it, or the same one if it cannot be renamed.
        self.file = open_current(directory)?;
        self.written = self.file.metadata().map_or(0, |metadata| metadata.len());
        match renamed {
            Ok(()) => {
                self.rotation.prune(now);
                Ok(())
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(error),
        }
    }
}

impl Rotation {
    /// Deletes rotated files past the retention, then the oldest while the rest exceed the
    /// total size. Files it cannot read or delete are left. Needs no lock on the file being
    /// written: it touches only rotated files.
    pub(crate) fn prune(&self, now: SystemTime) {
        let mut rotated = rotated_files(&self.directory);
        rotated.retain(|(path, _, modified)| {
            let expired = now
                .duration_since(*modified)
                .is_ok_and(|age| age > self.retention);
            !(expired && fs::remove_file(path).is_ok())
        });
        let max_total = self.max_total_size;
        if max_total == 0 {
            return;
        }
        let mut total: u64 = rotated.iter().map(|(_, size, _)| size).sum();
        // Names carry the rotation time, so name order is age order.
        for (path, size, _) in &rotated {
            if total <= max_total {
                break;
            }
            if fs::remove_file(path).is_ok() {
                total = total.saturating_sub(*size);
            }
        }
    }
}

fn open_current(directory: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(directory.join(NAME))
}

/// `(path, size, modified)` of every rotated file, oldest name first.
fn rotated_files(directory: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let Ok(entries) = fs::read_dir(directory) else {
        return Vec::new();
    };
    let prefix = format!("{NAME}.");
    let mut files: Vec<(PathBuf, u64, SystemTime)> = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|entry| {
            let metadata = entry.metadata().ok()?;
            Some((entry.path(), metadata.len(), metadata.modified().ok()?))
        })
        .collect();
    files.sort();
    files
}

/// `20261205T235901.123Z`: sorts by time.
fn stamp(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    super::format_utc(since.as_secs(), since.subsec_millis()).replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory(name: &str) -> PathBuf {
        let directory =
            std::env::temp_dir().join(format!("iggy-log-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&directory);
        directory
    }

    fn names(directory: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn files_rotate_at_their_size_and_the_oldest_go_past_the_total() {
        let directory = directory("rotate");
        let rotation = Rotation {
            directory: directory.clone(),
            max_file_size: 100,
            max_total_size: 250,
            retention: Duration::from_hours(1),
        };
        let mut file = RotatingFile::open(rotation).unwrap();
        let line = format!("{}\n", "x".repeat(59));
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for second in 0..10 {
            let now = start + Duration::from_secs(second);
            file.write_line(&line, now).unwrap();
        }
        // Each file holds one 60-byte line (two would pass 100): 9 rotations, of which the
        // newest 4 fit in 250 bytes.
        let names = names(&directory);
        assert_eq!(names.len(), 5, "{names:?}");
        assert_eq!(names[0], NAME);
        assert_eq!(
            names[1],
            format!("{NAME}.{}", stamp(start + Duration::from_secs(6)))
        );
        assert_eq!(fs::read_to_string(directory.join(NAME)).unwrap(), line);
        fs::remove_dir_all(&directory).unwrap();
    }

    /// An operator removing the file being written does not stop the logging: the next
    /// rotation makes a new one.
    #[test]
    fn a_removed_log_file_is_made_again() {
        let directory = directory("removed");
        let rotation = Rotation {
            directory: directory.clone(),
            max_file_size: 20,
            max_total_size: 0,
            retention: Duration::from_hours(1),
        };
        let mut file = RotatingFile::open(rotation).unwrap();
        let now = SystemTime::now();
        file.write_line("first line, 20 bytes\n", now).unwrap();
        fs::remove_file(directory.join(NAME)).unwrap();
        file.write_line("second line\n", now).unwrap();
        assert_eq!(
            fs::read_to_string(directory.join(NAME)).unwrap(),
            "second line\n"
        );
        fs::remove_dir_all(&directory).unwrap();
    }

    #[test]
    fn rotated_files_past_the_retention_are_deleted() {
        let directory = directory("retention");
        let rotation = Rotation {
            directory: directory.clone(),
            max_file_size: 10,
            max_total_size: 0,
            retention: Duration::from_mins(1),
        };
        let mut file = RotatingFile::open(rotation.clone()).unwrap();
        let now = SystemTime::now();
        for _ in 0..3 {
            file.write_line("0123456789\n", now).unwrap();
        }
        assert_eq!(names(&directory).len(), 3);
        rotation.prune(now + Duration::from_secs(30));
        assert_eq!(names(&directory).len(), 3, "within the retention");
        rotation.prune(now + Duration::from_mins(2));
        assert_eq!(names(&directory), vec![NAME.to_owned()]);
        fs::remove_dir_all(&directory).unwrap();
    }
}
