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

#[cfg(test)]
mod tests {
    #[test]
    fn the_open_file_limit_is_raised_to_the_hard_one() {
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(super::raise_open_file_limit(), hard);
    }
}
