//! The eviction header (command 13): a header-only frame that ends the session on a
//! connection (PROTOCOL.md §1.6).

use zerocopy::little_endian::{U32, U128};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{Command, HEADER_SIZE, header_bytes, invalid, reserved};
use crate::dialect::ProtocolVersion;
use crate::error::DecodeError;
use crate::status::ErrorCode;

/// The eviction header as laid out on the wire.
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct EvictionHeader {
    pub checksum: U128,
    pub checksum_body: U128,
    pub cluster: U128,
    pub size: U32,
    pub view: U32,
    pub release: U32,
    pub command: u8,
    pub replica: u8,
    pub reserved_frame: [u8; 66],
    pub client: U128,
    /// Highest accepted packed version (reason 14 only).
    pub server_protocol_version: U32,
    /// Lowest accepted packed version (reason 14 only).
    pub server_protocol_version_min: U32,
    pub reserved: [u8; 103],
    pub reason: u8,
}

const _: () = assert!(size_of::<EvictionHeader>() == HEADER_SIZE);
const _: () = assert!(core::mem::offset_of!(EvictionHeader, client) == 128);
const _: () = assert!(core::mem::offset_of!(EvictionHeader, server_protocol_version) == 144);
const _: () = assert!(core::mem::offset_of!(EvictionHeader, reason) == 255);

/// Why a session was ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EvictionReason {
    NoSession = 1,
    ClientReleaseTooLow = 2,
    ClientReleaseTooHigh = 3,
    InvalidRequestOperation = 4,
    InvalidRequestBody = 5,
    InvalidRequestBodySize = 6,
    SessionTooLow = 7,
    SessionReleaseMismatch = 8,
    InvalidCredentials = 9,
    InvalidToken = 10,
    UserInactive = 11,
    SessionError = 12,
    StaleClient = 13,
    IncompatibleProtocol = 14,
    MalformedLogin = 15,
}

impl EvictionReason {
    pub const ALL: [Self; 15] = [
        Self::NoSession,
        Self::ClientReleaseTooLow,
        Self::ClientReleaseTooHigh,
        Self::InvalidRequestOperation,
        Self::InvalidRequestBody,
        Self::InvalidRequestBodySize,
        Self::SessionTooLow,
        Self::SessionReleaseMismatch,
        Self::InvalidCredentials,
        Self::InvalidToken,
        Self::UserInactive,
        Self::SessionError,
        Self::StaleClient,
        Self::IncompatibleProtocol,
        Self::MalformedLogin,
    ];

    pub fn from_u8(value: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.as_u8() == value)
    }

    // A fieldless `repr(u8)` enum converts to its discriminant losslessly.
    #[allow(clippy::as_conversions)]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The error the SDK raises for this reason (§1.6 table).
    pub const fn client_error(self) -> ErrorCode {
        match self {
            Self::NoSession
            | Self::SessionTooLow
            | Self::SessionReleaseMismatch
            | Self::UserInactive
            | Self::SessionError => ErrorCode::Unauthenticated,
            Self::ClientReleaseTooLow
            | Self::ClientReleaseTooHigh
            | Self::InvalidRequestOperation
            | Self::InvalidRequestBody
            | Self::InvalidRequestBodySize => ErrorCode::InvalidCommand,
            Self::InvalidCredentials => ErrorCode::InvalidCredentials,
            Self::InvalidToken => ErrorCode::InvalidPersonalAccessToken,
            Self::StaleClient => ErrorCode::StaleClient,
            Self::IncompatibleProtocol => ErrorCode::IncompatibleProtocolVersion,
            Self::MalformedLogin => ErrorCode::InvalidFormat,
        }
    }
}

impl EvictionHeader {
    /// An eviction of `client` for `reason`; reason 14 carries the accepted version window.
    pub fn new(client: u128, reason: EvictionReason) -> Self {
        let mut header = Self::new_zeroed();
        header.command = Command::Eviction.as_u8();
        header.size = U32::new(256);
        header.client = U128::new(client);
        header.reason = reason.as_u8();
        if reason == EvictionReason::IncompatibleProtocol {
            header.server_protocol_version = U32::new(ProtocolVersion::ACCEPTED_MAX.0);
            header.server_protocol_version_min = U32::new(ProtocolVersion::ACCEPTED_MIN.0);
        }
        header
    }

    /// Views and validates an eviction header.
    pub fn parse(frame: &[u8]) -> Result<&Self, DecodeError> {
        let header =
            Self::ref_from_bytes(header_bytes(frame)?).map_err(|_size| invalid("header", 0, 0))?;
        if header.command != Command::Eviction.as_u8() {
            return Err(invalid("eviction.command", 60, u64::from(header.command)));
        }
        if header.size.get() != 256 {
            return Err(invalid("eviction.size", 48, u64::from(header.size.get())));
        }
        if header.reason().is_none() {
            return Err(invalid("eviction.reason", 255, u64::from(header.reason)));
        }
        if header
            .reserved
            .iter()
            .chain(&header.reserved_frame)
            .any(|&byte| byte != 0)
        {
            return Err(reserved("eviction.reserved", 152));
        }
        Ok(header)
    }

    pub fn reason(&self) -> Option<EvictionReason> {
        EvictionReason::from_u8(self.reason)
    }
}
