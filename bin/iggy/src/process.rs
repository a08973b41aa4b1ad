//! Process-wide settings made once at start-up, before any file is created or connection
//! accepted: private file modes and the open-file limit.

use std::path::Path;

use rustix::fs::Mode;
use rustix::process::{Resource, getrlimit, setrlimit, umask};

/// Files the server creates are readable by its user only (0600, directories 0700): the
/// metadata holds password hashes and the logs hold messages.
pub(crate) fn private_files() {
    let _previous = umask(Mode::from_raw_mode(0o077));
}

/// Makes an existing data directory private too (it may predate [`private_files`]).
pub(crate) fn private_directory(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
}

/// Raises the soft open-file limit to the hard one: every connection, segment and index
/// holds a descriptor, and the usual soft limit of 1024 is reached long before memory is.
/// Returns the limit in force.
pub(crate) fn raise_open_file_limit() -> Option<u64> {
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(error) = setrlimit(Resource::Nofile, limit) {
            log::warn!("could not raise the open-file limit: {error}");
        }
    }
    getrlimit(Resource::Nofile).current
}

/// Descriptors kept for everything but connections: partitions' segment, index and offset
/// files, the metadata journal, listeners, `io_uring` and logs.
const DESCRIPTORS_FOR_FILES: u64 = 4096;

/// The connections the enabled listeners may hold at once (QUIC's share one socket and are
/// not counted), when they and [`DESCRIPTORS_FOR_FILES`] do not fit `limit`: at that many,
/// accepts and partition files would fail for want of a descriptor.
pub(crate) fn connections_past_limit(
    limit: u64,
    connections: &[(&str, bool, usize)],
) -> Option<u64> {
    let held: u64 = connections
        .iter()
        .filter(|(_, enabled, _)| *enabled)
        .map(|(_, _, max)| u64::try_from(*max).unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    (held.saturating_add(DESCRIPTORS_FOR_FILES) > limit).then_some(held)
}

#[cfg(test)]
mod tests {
    #[test]
    fn connection_limits_past_the_open_file_limit_are_found() {
        let listeners = [
            ("tcp", true, 10_000),
            ("websocket", true, 10_000),
            ("http", false, 10_000),
        ];
        assert_eq!(
            super::connections_past_limit(20_000, &listeners),
            Some(20_000)
        );
        assert_eq!(super::connections_past_limit(1 << 20, &listeners), None);
        let tcp_only = [("tcp", true, 10_000)];
        assert_eq!(super::connections_past_limit(20_000, &tcp_only), None);
    }

    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one() {
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(super::raise_open_file_limit(), hard);
    }
}
