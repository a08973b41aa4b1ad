//! The metadata side of an offline key rotation (`iggy encryption rotate`), as a plain
//! function over the files' bytes: the snapshot and the journal are recovered into one
//! state, every stored credential is opened under the old key and sealed under the new one
//! ([`crate::at_rest::credentials`]), and the result is a new snapshot plus a journal holding
//! only a base record, so no op sealed under the old key is left behind. The caller
//! writes them as a compaction does (snapshot first), which recovers exactly after a crash
//! between the two.

use std::path::Path;

use super::journal::JournalError;
use super::model::Metadata;
use super::replay::{encode_base_entry, recover, replay};
use super::snapshot::{decode_snapshot, encode_snapshot};
use crate::at_rest::credentials::{CredentialSeal, CredentialSealed};

/// Why the metadata could not be re-keyed.
#[derive(Debug, thiserror::Error)]
pub enum RekeyError {
    #[error("{path}: {source}")]
    Snapshot {
        path: std::path::PathBuf,
        source: super::snapshot::SnapshotError,
    },
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("the credentials of user {user_id}: {source}")]
    Credential {
        user_id: u32,
        source: CredentialSealed,
    },
}

/// The re-keyed files: the snapshot's bytes and the journal's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rekeyed {
    pub snapshot: Vec<u8>,
    pub journal: Vec<u8>,
    /// Credentials re-sealed (or opened, when `new` seals nothing).
    pub credentials: usize,
}

/// Re-keys the metadata of `snapshot` (`None`: no snapshot file) and `journal`: each
/// credential is opened with `old` (or, if that fails, with `new`: a rotation interrupted
/// after the snapshot was written) and stored as `new` stores it.
pub fn rekey(
    snapshot: Option<(&[u8], &Path)>,
    journal: (&[u8], &Path),
    old: &CredentialSeal,
    new: &CredentialSeal,
) -> Result<Rekeyed, RekeyError> {
    let state = match snapshot {
        Some((bytes, path)) => decode_snapshot(bytes).map_err(|source| RekeyError::Snapshot {
            path: path.to_path_buf(),
            source,
        })?,
        None => Metadata::default(),
    };
    let (journal_bytes, journal_path) = journal;
    let replayed = replay(journal_bytes, journal_path)?;
    let mut state = recover(state, &replayed, journal_path)?;
    let mut credentials = 0;
    for user in state.users.values_mut() {
        let user_id = user.id;
        let error = |source| RekeyError::Credential { user_id, source };
        user.password_hash = reseal(&user.password_hash, old, new).map_err(error)?;
        credentials += 1;
        for token in user.tokens.values_mut() {
            token.token_hash = reseal(&token.token_hash, old, new).map_err(error)?;
            credentials += 1;
        }
    }
    Ok(Rekeyed {
        snapshot: encode_snapshot(&state),
        journal: encode_base_entry(state.commit),
        credentials,
    })
}

fn reseal(
    stored: &str,
    old: &CredentialSeal,
    new: &CredentialSeal,
) -> Result<String, CredentialSealed> {
    let plain = old.reveal(stored).or_else(|_| new.reveal(stored))?;
    Ok(new.protect(plain.into_owned()))
}
