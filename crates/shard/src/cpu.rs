//! CPU usage for `GET_STATS`: the server process's share (percent of one core, as the
//! reference server reports it, so up to 100 × cores) and the whole host's (0–100), each
//! over the time since the previous `GET_STATS` on this shard, or since start / boot for
//! the first one. Read from `/proc/self/stat` and `/proc/stat`; unreadable reads as 0.

use std::cell::Cell;
use std::time::Instant;

/// Cumulative counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    at: Instant,
    /// User + system clock ticks of this process.
    process_ticks: u64,
    /// Non-idle and all clock ticks of every CPU of the host.
    host_busy_ticks: u64,
    host_total_ticks: u64,
}

/// CPU usage in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuUsage {
    pub process_percent: f32,
    pub host_percent: f32,
}

/// Remembers the previous sample, so each reading covers the time since the last one.
#[derive(Debug)]
pub struct CpuSampler {
    last: Cell<Option<Sample>>,
    /// When the sampler was made: the first reading's window starts there.
    started: Instant,
}

impl CpuSampler {
    pub fn new() -> Self {
        Self {
            last: Cell::new(None),
            started: Instant::now(),
        }
    }

    /// Usage since the previous call (or since the sampler was made).
    pub fn read(&self) -> CpuUsage {
        let (host_busy_ticks, host_total_ticks) = host_ticks(&read("/proc/stat"));
        let now = Sample {
            at: Instant::now(),
            process_ticks: process_ticks(&read("/proc/self/stat")),
            host_busy_ticks,
            host_total_ticks,
        };
        let before = self.last.replace(Some(now)).unwrap_or(Sample {
            at: self.started,
            process_ticks: 0,
            host_busy_ticks: 0,
            host_total_ticks: 0,
        });
        usage(before, now, ticks_per_second())
    }
}

impl Default for CpuSampler {
    fn default() -> Self {
        Self::new()
    }
}

fn usage(before: Sample, now: Sample, ticks_per_second: u64) -> CpuUsage {
    let seconds = now.at.saturating_duration_since(before.at).as_secs_f64();
    let process_seconds = ratio(
        now.process_ticks.saturating_sub(before.process_ticks),
        ticks_per_second,
    );
    let process_percent = if seconds > 0.0 {
        process_seconds / seconds * 100.0
    } else {
        0.0
    };
    let busy = now.host_busy_ticks.saturating_sub(before.host_busy_ticks);
    let total = now.host_total_ticks.saturating_sub(before.host_total_ticks);
    let host_percent = ratio(busy, total) * 100.0;
    #[allow(clippy::cast_possible_truncation)] // a percentage fits an f32
    CpuUsage {
        process_percent: process_percent as f32,
        host_percent: host_percent.clamp(0.0, 100.0) as f32,
    }
}

/// User + system CPU time of this process since it started, in seconds (0 if unreadable).
pub fn process_cpu_seconds() -> f64 {
    ratio(process_ticks(&read("/proc/self/stat")), ticks_per_second())
}

/// `numerator / denominator`, 0 when the denominator is.
fn ratio(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 {
        return 0.0;
    }
    #[allow(clippy::cast_precision_loss)] // tick counts stay far below 2^52
    {
        numerator as f64 / denominator as f64
    }
}

fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `utime + stime` of a `/proc/<pid>/stat` line: fields 14 and 15, counted after the
/// parenthesised command name (which may itself hold spaces and parentheses).
fn process_ticks(stat: &str) -> u64 {
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let number = |index: usize| {
        fields
            .get(index)
            .and_then(|field| field.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the name, field 3 (state) is index 0, so utime (14) is 11 and stime (15) is 12.
    number(11).saturating_add(number(12))
}

/// (busy, total) ticks of the aggregate `cpu` line of `/proc/stat`; idle and iowait are
/// not busy.
fn host_ticks(stat: &str) -> (u64, u64) {
    let Some(line) = stat.lines().find(|line| line.starts_with("cpu ")) else {
        return (0, 0);
    };
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    let total = ticks.iter().take(8).sum::<u64>();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// (free for unprivileged users, total) bytes of the file system holding `path`; zeros when
/// it cannot be read.
pub fn disk_space(path: &std::path::Path) -> (u64, u64) {
    match rustix::fs::statvfs(path) {
        Ok(stat) => (
            stat.f_bavail.saturating_mul(stat.f_frsize),
            stat.f_blocks.saturating_mul(stat.f_frsize),
        ),
        Err(_) => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn parses_proc_stat_lines() {
        let own = "4242 (iggy (shard) 1) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 3 0 100";
        assert_eq!(process_ticks(own), 300);
        assert_eq!(process_ticks("garbage"), 0);
        let host = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n";
        assert_eq!(host_ticks(host), (150, 1000));
        assert_eq!(host_ticks(""), (0, 0));
    }

    #[test]
    fn usage_is_the_share_of_the_window() {
        let start = Instant::now();
        let before = Sample {
            at: start,
            process_ticks: 100,
            host_busy_ticks: 1000,
            host_total_ticks: 4000,
        };
        let now = Sample {
            at: start + Duration::from_secs(2),
            process_ticks: 400,
            host_busy_ticks: 1400,
            host_total_ticks: 4800,
        };
        let usage = usage(before, now, 100);
        assert!((usage.process_percent - 150.0).abs() < 0.01, "{usage:?}");
        assert!((usage.host_percent - 50.0).abs() < 0.01, "{usage:?}");
    }

    /// Burning CPU shows up in the next reading.
    #[test]
    fn a_busy_process_reads_busy() {
        let sampler = CpuSampler::new();
        let _ = sampler.read();
        let deadline = Instant::now() + Duration::from_millis(300);
        let mut spins = 0u64;
        while Instant::now() < deadline {
            spins = std::hint::black_box(spins.wrapping_add(1));
        }
        let usage = sampler.read();
        assert!(usage.process_percent > 20.0, "{usage:?}");
        assert!(usage.host_percent > 0.0, "{usage:?}");
        let (free, total) = disk_space(std::path::Path::new("/"));
        assert!(total > 0 && free <= total);
    }
}
