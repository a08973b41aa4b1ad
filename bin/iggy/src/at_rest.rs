//! Encryption at rest at start-up (`[system.encryption]`): the key is parsed and checked
//! against the check value stored beside the data (`<system.path>/encryption.check`, written
//! at the first start with a key), so a start with another key, or with none over encrypted
//! data, refuses to serve instead of handing clients errors or ciphertext.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use shard::at_rest::{KeyFailure, RecordKey};

use crate::config::Config;

use shard::rotate::{CHECK_FILE, MARKER_FILE};

/// Why the at-rest key could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AtRestError {
    #[error(
        "{0} holds encrypted data: enable [system.encryption] with the key it was written \
         with (system.encryption.key or IGGY_SYSTEM_ENCRYPTION_KEY)"
    )]
    KeyMissing(PathBuf),
    #[error("{failure} (data under {directory}); nothing was served")]
    Key {
        failure: KeyFailure,
        directory: PathBuf,
    },
    #[error(
        "{0} holds an unfinished key rotation ({MARKER_FILE}): run `iggy encryption rotate` \
         again with the same new key before starting the server"
    )]
    Rotating(PathBuf),
    #[error("{action} {path}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The key every shard seals and opens records with, or `None` when encryption is off and
/// the data directory holds no encrypted data.
pub(crate) fn prepare(config: &Config) -> Result<Option<Arc<RecordKey>>, AtRestError> {
    if config.system_path.join(MARKER_FILE).exists() {
        return Err(AtRestError::Rotating(config.system_path.clone()));
    }
    let check_path = config.system_path.join(CHECK_FILE);
    let stored = read_check(&check_path)?;
    let Some(text) = &config.encryption_key else {
        return match stored {
            Some(_) => Err(AtRestError::KeyMissing(config.system_path.clone())),
            None => Ok(None),
        };
    };
    let (key, check) =
        shard::at_rest::unlock(&text.0, stored.as_deref()).map_err(|failure| AtRestError::Key {
            failure,
            directory: config.system_path.clone(),
        })?;
    if let Some(check) = check {
        write_check(&check_path, &check)?;
    }
    log::info!("encryption at rest: on (AES-256-GCM, the key matches {CHECK_FILE})");
    Ok(Some(Arc::new(key)))
}

fn read_check(path: &Path) -> Result<Option<Vec<u8>>, AtRestError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AtRestError::Io {
            action: "read",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes the check file durably (a temporary file synced, renamed, the directory synced),
/// before any record is sealed under the key.
fn write_check(path: &Path, bytes: &[u8]) -> Result<(), AtRestError> {
    use std::io::Write;
    let io = |action, path: &Path| {
        let path = path.to_owned();
        move |source| AtRestError::Io {
            action,
            path,
            source,
        }
    };
    let temporary = path.with_extension("check.tmp");
    let mut file = std::fs::File::create(&temporary).map_err(io("create", &temporary))?;
    file.write_all(bytes).map_err(io("write", &temporary))?;
    file.sync_all().map_err(io("sync", &temporary))?;
    std::fs::rename(&temporary, path).map_err(io("rename", path))?;
    let directory = path.parent().unwrap_or(path);
    std::fs::File::open(directory)
        .and_then(|directory| directory.sync_all())
        .map_err(io("sync", directory))?;
    Ok(())
}
