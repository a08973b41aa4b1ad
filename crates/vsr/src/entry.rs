//! A log entry: one client request at one op, chained to its predecessor by checksum.

use alloc::sync::Arc;

use xxhash_rust::xxh3::Xxh3;

use crate::View;

/// An op number: the position of an entry in the log, counted from 1 (0 is "none").
pub type Op = u64;
/// An entry's checksum (xxh3-128 over its fields and its predecessor's checksum).
pub type Checksum = u128;

/// The checksum the first entry names as its parent.
pub const ROOT_CHECKSUM: Checksum = 0x0069_6767_792d_7673_722d_726f_6f74;

/// One prepared request. Cheap to clone: the body is shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub op: Op,
    /// The view in which a primary prepared it.
    pub view: View,
    pub client: u128,
    /// The client's request number (one per request, kept across retries).
    pub request: u64,
    /// The checksum of the entry at `op - 1` ([`ROOT_CHECKSUM`] for op 1).
    pub parent: Checksum,
    pub checksum: Checksum,
    pub body: Arc<[u8]>,
}

impl Entry {
    /// The entry at `op` after `parent`, with its checksum computed.
    pub fn new(
        op: Op,
        view: View,
        client: u128,
        request: u64,
        parent: Checksum,
        body: Arc<[u8]>,
    ) -> Self {
        let checksum = Self::compute(op, view, client, request, parent, &body);
        Self {
            op,
            view,
            client,
            request,
            parent,
            checksum,
            body,
        }
    }

    /// Whether the stored checksum matches the fields (a torn or flipped entry does not).
    pub fn is_intact(&self) -> bool {
        self.checksum
            == Self::compute(
                self.op,
                self.view,
                self.client,
                self.request,
                self.parent,
                &self.body,
            )
    }

    pub(crate) fn compute(
        op: Op,
        view: View,
        client: u128,
        request: u64,
        parent: Checksum,
        body: &[u8],
    ) -> Checksum {
        let mut hasher = Xxh3::new();
        hasher.update(&op.to_le_bytes());
        hasher.update(&view.to_le_bytes());
        hasher.update(&client.to_le_bytes());
        hasher.update(&request.to_le_bytes());
        hasher.update(&parent.to_le_bytes());
        hasher.update(body);
        hasher.digest128()
    }
}

/// How many entries at the start of `log` form a chain from op `first`, the first naming
/// `head` as its parent.
pub(crate) fn chain_length_from(log: &[Entry], first: Op, head: Checksum) -> usize {
    let mut parent = head;
    for (index, entry) in log.iter().enumerate() {
        let expected = u64::try_from(index).map_or(Op::MAX, |index| index.saturating_add(first));
        if entry.op != expected || entry.parent != parent || !entry.is_intact() {
            return index;
        }
        parent = entry.checksum;
    }
    log.len()
}
