//! `GET_METADATA_CHANGES` (17, 0.12.2): the request (where to start, time window, groups)
//! and the reply page of log records or state items. Cursors and page tokens live in
//! `metadata_cursor`.

use alloc::vec::Vec;

use super::metadata_cursor::{MetadataCursor, MetadataGroup, PageToken};
#[cfg(test)]
use super::wire::small_vec;
use super::wire::{decode_counted, decode_enum, encode_counted};
use crate::codec::{Codec, Reader, Writer, len_u8};
use crate::error::{DecodeError, DecodeErrorKind};

/// Records or items one metadata-changes page may carry.
pub const METADATA_ENTRIES_MAX: usize = 100_000;
/// Bytes of one record or item body.
pub const METADATA_BODY_LENGTH_MAX: usize = 1 << 20;
const METADATA_RECORD_LENGTH_MIN: usize = 43;
const METADATA_ITEM_LENGTH_MIN: usize = 5;

/// Where a `GET_METADATA_CHANGES` read starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataStart {
    Earliest,
    Latest,
    After(MetadataCursor),
    /// State pages; `Some` resumes a listing.
    Current(Option<PageToken>),
}

/// `GET_METADATA_CHANGES` (17) request (0.12.2 only; the layout does not depend on the
/// dialect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataChangesRequest {
    pub start: MetadataStart,
    /// Microseconds since the Unix epoch, as is `until`.
    pub since: Option<u64>,
    pub until: Option<u64>,
    pub limit: u32,
    /// Empty = all groups. At most 255 are sent.
    pub groups: Vec<MetadataGroup>,
}

impl Codec<'_> for MetadataChangesRequest {
    fn encode(&self, writer: &mut Writer<'_>) {
        let (mode, cursor, token) = match &self.start {
            MetadataStart::Earliest => (0, MetadataCursor::default(), None),
            MetadataStart::Latest => (1, MetadataCursor::default(), None),
            MetadataStart::After(cursor) => (2, *cursor, None),
            MetadataStart::Current(token) => (3, MetadataCursor::default(), token.as_ref()),
        };
        writer.u8(mode);
        cursor.encode(writer);
        encode_optional_u64(self.since, writer);
        encode_optional_u64(self.until, writer);
        writer.u32(self.limit);
        let groups = self
            .groups
            .get(..usize::from(u8::MAX))
            .unwrap_or(&self.groups);
        writer.u8(len_u8(groups.len()));
        for group in groups {
            writer.u8(group.as_u8());
        }
        PageToken::encode_optional(token, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mode_offset = reader.offset();
        let mode = reader.u8("metadata_changes.start")?;
        let cursor_offset = reader.offset();
        let cursor = MetadataCursor::decode(reader)?;
        let since = decode_optional_u64(reader, "metadata_changes.since")?;
        let until = decode_optional_u64(reader, "metadata_changes.until")?;
        let limit = reader.u32("metadata_changes.limit")?;
        let count = reader.length_u8(0, usize::from(u8::MAX), "metadata_changes.groups")?;
        let mut groups = Vec::with_capacity(count.min(reader.remaining()));
        for _ in 0..count {
            groups.push(decode_enum(
                reader,
                "metadata_changes.group",
                MetadataGroup::from_u8,
            )?);
        }
        let token_offset = reader.offset();
        let token = PageToken::decode_optional(reader)?;
        if mode != 2 && cursor != MetadataCursor::default() {
            let kind = DecodeErrorKind::NonZeroReserved;
            return Err(DecodeError::new(
                "metadata_changes.cursor",
                cursor_offset,
                kind,
            ));
        }
        if mode != 3 && token.is_some() {
            let kind = DecodeErrorKind::NonZeroReserved;
            return Err(DecodeError::new(
                "metadata_changes.page_token",
                token_offset,
                kind,
            ));
        }
        let start = match mode {
            0 => MetadataStart::Earliest,
            1 => MetadataStart::Latest,
            2 => MetadataStart::After(cursor),
            3 => MetadataStart::Current(token),
            value => {
                let kind = DecodeErrorKind::InvalidValue {
                    value: u64::from(value),
                };
                return Err(DecodeError::new(
                    "metadata_changes.start",
                    mode_offset,
                    kind,
                ));
            }
        };
        Ok(Self {
            start,
            since,
            until,
            limit,
            groups,
        })
    }
}

/// One change of the metadata log; the body layout depends on `kind` and stays opaque here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MetadataRecord {
    pub op: u64,
    pub ordinal: u32,
    pub checksum: u128,
    /// Microseconds since the Unix epoch.
    pub timestamp: u64,
    pub actor_user_id: Option<u32>,
    /// Raw codes, kept for forward compatibility.
    pub group: u8,
    pub kind: u8,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub body: Vec<u8>,
}

impl Codec<'_> for MetadataRecord {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u64(self.op);
        writer.u32(self.ordinal);
        writer.u128(self.checksum);
        writer.u64(self.timestamp);
        writer.bool(self.actor_user_id.is_some());
        if let Some(actor) = self.actor_user_id {
            writer.u32(actor);
        }
        writer.u8(self.group);
        writer.u8(self.kind);
        writer.bytes_u32(&self.body);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            op: reader.u64("record.op")?,
            ordinal: reader.u32("record.ordinal")?,
            checksum: reader.u128("record.checksum")?,
            timestamp: reader.u64("record.timestamp")?,
            actor_user_id: if reader.bool("record.has_actor")? {
                Some(reader.u32("record.actor_user_id")?)
            } else {
                None
            },
            group: reader.u8("record.group")?,
            kind: reader.u8("record.kind")?,
            body: Vec::from(reader.bytes_u32(METADATA_BODY_LENGTH_MAX, "record.body")?),
        })
    }
}

/// One resource of a `Current` page; the body stays opaque here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MetadataItem {
    pub group: u8,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub body: Vec<u8>,
}

impl Codec<'_> for MetadataItem {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.group);
        writer.bytes_u32(&self.body);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            group: reader.u8("item.group")?,
            body: Vec::from(reader.bytes_u32(METADATA_BODY_LENGTH_MAX, "item.body")?),
        })
    }
}

/// How a metadata-changes page relates to the requested start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum MetadataChangesStatus {
    Ok = 0,
    Behind = 1,
    Expired = 2,
    Reset = 3,
}

impl MetadataChangesStatus {
    const ALL: [Self; 4] = [Self::Ok, Self::Behind, Self::Expired, Self::Reset];

    // A fieldless enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_u8() == value)
    }
}

/// What a page carries: log records (`Changes`) or state items and a token (`Current`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataPage {
    Changes(Vec<MetadataRecord>),
    Current {
        items: Vec<MetadataItem>,
        token: Option<PageToken>,
    },
}

/// `GET_METADATA_CHANGES` reply. A page holds records or items, never both, by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataChanges {
    pub status: MetadataChangesStatus,
    pub log_id: Option<u128>,
    pub oldest_op: u64,
    pub retained_since: u64,
    pub head_op: u64,
    pub next: Option<MetadataCursor>,
    pub has_more: bool,
    pub page: MetadataPage,
}

impl Codec<'_> for MetadataChanges {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u8(self.status.as_u8());
        writer.bool(matches!(self.page, MetadataPage::Current { .. }));
        writer.bool(self.log_id.is_some());
        if let Some(log_id) = self.log_id {
            writer.u128(log_id);
        }
        writer.u64(self.oldest_op);
        writer.u64(self.retained_since);
        writer.u64(self.head_op);
        writer.bool(self.next.is_some());
        if let Some(next) = &self.next {
            next.encode(writer);
        }
        writer.bool(self.has_more);
        let (records, items, token): (&[MetadataRecord], &[MetadataItem], _) = match &self.page {
            MetadataPage::Changes(records) => (records, &[], None),
            MetadataPage::Current { items, token } => (&[], items, token.as_ref()),
        };
        encode_counted(records, writer);
        encode_counted(items, writer);
        PageToken::encode_optional(token, writer);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let status = decode_enum(reader, "metadata.status", MetadataChangesStatus::from_u8)?;
        let current = reader.bool("metadata.phase")?;
        let log_id = if reader.bool("metadata.has_log_id")? {
            Some(reader.u128("metadata.log_id")?)
        } else {
            None
        };
        let oldest_op = reader.u64("metadata.oldest_op")?;
        let retained_since = reader.u64("metadata.retained_since")?;
        let head_op = reader.u64("metadata.head_op")?;
        let next = if reader.bool("metadata.has_next")? {
            Some(MetadataCursor::decode(reader)?)
        } else {
            None
        };
        let has_more = reader.bool("metadata.has_more")?;
        let records_offset = reader.offset();
        let records: Vec<MetadataRecord> = decode_counted(
            reader,
            METADATA_ENTRIES_MAX,
            METADATA_RECORD_LENGTH_MIN,
            "metadata.records_count",
        )?;
        let items_offset = reader.offset();
        let items: Vec<MetadataItem> = decode_counted(
            reader,
            METADATA_ENTRIES_MAX,
            METADATA_ITEM_LENGTH_MIN,
            "metadata.items_count",
        )?;
        let token = PageToken::decode_optional(reader)?;
        let page = match (
            current,
            records.is_empty(),
            items.is_empty() && token.is_none(),
        ) {
            (false, _, true) => MetadataPage::Changes(records),
            (true, true, _) => MetadataPage::Current { items, token },
            (false, _, false) => return Err(mixed_page("metadata.items", items_offset)),
            (true, false, _) => return Err(mixed_page("metadata.records", records_offset)),
        };
        Ok(Self {
            status,
            log_id,
            oldest_op,
            retained_since,
            head_op,
            next,
            has_more,
            page,
        })
    }
}

fn mixed_page(field: &'static str, offset: usize) -> DecodeError {
    let kind = DecodeErrorKind::CountMismatch {
        declared: 0,
        actual: 1,
    };
    DecodeError::new(field, offset, kind)
}

fn encode_optional_u64(value: Option<u64>, writer: &mut Writer<'_>) {
    writer.bool(value.is_some());
    if let Some(value) = value {
        writer.u64(value);
    }
}

fn decode_optional_u64(
    reader: &mut Reader<'_>,
    field: &'static str,
) -> Result<Option<u64>, DecodeError> {
    if reader.bool(field)? {
        reader.u64(field).map(Some)
    } else {
        Ok(None)
    }
}

#[cfg(test)]
#[path = "metadata_changes_tests.rs"]
mod tests;
