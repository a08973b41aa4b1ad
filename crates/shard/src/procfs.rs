//! Process and host numbers for `GET_STATS`, read from Linux `/proc` where that is cheap.
//! Anything unreadable is reported as 0 or empty: stats are informational.

use std::fs;

/// What `/proc` tells about this process and its host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessNumbers {
    pub memory_usage_bytes: u64,
    pub total_memory_bytes: u64,
    pub available_memory_bytes: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub threads_count: u32,
    pub open_files_count: u64,
    pub open_files_limit: u64,
    pub hostname: String,
    pub os_name: String,
    pub os_version: String,
    pub kernel_version: String,
}

impl ProcessNumbers {
    pub fn read() -> Self {
        let status = read("/proc/self/status");
        let meminfo = read("/proc/meminfo");
        let io = read("/proc/self/io");
        let limits = read("/proc/self/limits");
        let os_release = read("/etc/os-release");
        Self {
            memory_usage_bytes: field_kib(&status, "VmRSS:"),
            total_memory_bytes: field_kib(&meminfo, "MemTotal:"),
            available_memory_bytes: field_kib(&meminfo, "MemAvailable:"),
            read_bytes: field(&io, "read_bytes:"),
            written_bytes: field(&io, "write_bytes:"),
            threads_count: u32::try_from(field(&status, "Threads:")).unwrap_or(u32::MAX),
            open_files_count: fs::read_dir("/proc/self/fd").map_or(0, |entries| {
                u64::try_from(entries.count()).unwrap_or(u64::MAX)
            }),
            open_files_limit: open_files_limit(&limits),
            hostname: read("/proc/sys/kernel/hostname").trim().to_owned(),
            os_name: read("/proc/sys/kernel/ostype").trim().to_owned(),
            os_version: os_pretty_name(&os_release),
            kernel_version: read("/proc/sys/kernel/osrelease").trim().to_owned(),
        }
    }
}

fn read(path: &str) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// The first number after `name` on its line (`VmRSS:   1234 kB`).
fn field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or(0)
}

fn field_kib(text: &str, name: &str) -> u64 {
    field(text, name).saturating_mul(1024)
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn open_files_limit(limits: &str) -> u64 {
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or(0)
}

fn os_pretty_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))
        .map(|value| value.trim_matches('"').to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{field, field_kib, open_files_limit, os_pretty_name};

    #[test]
    fn parses_proc_lines() {
        let status = "Name:\tiggy\nVmRSS:\t  2048 kB\nThreads:\t3\n";
        assert_eq!(field_kib(status, "VmRSS:"), 2048 * 1024);
        assert_eq!(field(status, "Threads:"), 3);
        assert_eq!(field(status, "Missing:"), 0);
        let limits = "Limit Soft Hard Units\nMax open files            1024  524288  files\n";
        assert_eq!(open_files_limit(limits), 1024);
        assert_eq!(
            os_pretty_name("ID=x\nPRETTY_NAME=\"Debian 13\"\n"),
            "Debian 13"
        );
    }
}
