//! One stored record moved from one key to another, for the offline key rotation
//! (`iggy encryption rotate`): opened with the old key and sealed again under the new one
//! with a fresh salt. A plain record (stored before encryption was on) is sealed; with no
//! new key (decrypting a data directory) records are left plain.

use proto::Dialect;
use proto::batch::seal::SEAL_SALT_SIZE;
use proto::batch::{Batch, Integrity};

use crate::key::MasterKey;
use crate::record::{OpenError, SealError, open_record, seal_record};

/// Why a record could not be moved to the new key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RekeyError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Seal(#[from] SealError),
}

/// `stored`, one record as a segment holds it, re-sealed under `new` (or plain when `new`
/// is `None`). A sealed record is opened with `old`; when that fails it is tried with
/// `new`, as a record a rotation already moved (a rerun after an interrupted one).
/// `salt` must be fresh random bytes.
pub fn reseal_record(
    old: Option<&MasterKey>,
    new: Option<&MasterKey>,
    stored: &[u8],
    salt: [u8; SEAL_SALT_SIZE],
) -> Result<Vec<u8>, RekeyError> {
    let batch = Batch::parse_stored(stored, Dialect::V0_12_2, Integrity::LayoutOnly, 0)
        .map_err(OpenError::Layout)?;
    let plain = if batch.seal_salt().is_some() {
        open_with_either(old, new, &batch)?
    } else {
        stored.to_vec()
    };
    match new {
        Some(new) => Ok(seal_record(new, &plain, salt)?),
        None => Ok(plain),
    }
}

fn open_with_either(
    old: Option<&MasterKey>,
    new: Option<&MasterKey>,
    batch: &Batch<'_>,
) -> Result<Vec<u8>, OpenError> {
    let mut plain = Vec::with_capacity(batch.as_bytes().len());
    let Some(old) = old else {
        let new = new.ok_or(OpenError::NoKey)?;
        open_record(new, batch, &mut plain)?;
        return Ok(plain);
    };
    match open_record(old, batch, &mut plain) {
        Ok(()) => Ok(plain),
        Err(first) => {
            plain.clear();
            match new {
                Some(new) if open_record(new, batch, &mut plain).is_ok() => Ok(plain),
                _ => Err(first),
            }
        }
    }
}
