//! Codecs of the Apache Iggy 0.9 client protocol, in both dialects spoken by the published
//! clients: 0.12.2 (Rust SDK 0.11.1-edge.9, CLI 0.14.1-edge.7) and 0.11.0 (Python
//! `apache-iggy` 0.9.0, Rust SDK 0.11.0). `spec/PROTOCOL.md` is the contract.
//!
//! Invariants every module keeps:
//! - Decoders are total: any bytes give a value or a [`DecodeError`] naming the field and its
//!   offset; nothing here panics on input, indexes unchecked or overflows.
//! - Lengths read from the wire are checked against named maxima before anything is
//!   allocated.
//! - The data plane borrows: a `SEND_MESSAGES` body or a stored batch decodes into views of
//!   the input, and iterating its messages allocates nothing.
//! - Encoders never fail: the types they take can only hold encodable values.
//!
//! The crate is `no_std` + `alloc`; the `std` feature only adds `std::error::Error` impls.
#![no_std]
#![forbid(unsafe_code)]
// Decoders must not panic, index unchecked or overflow on any input; tests may.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects,
        clippy::as_conversions
    )
)]
#![deny(
    clippy::std_instead_of_core,
    clippy::alloc_instead_of_core,
    clippy::unwrap_used,
    clippy::panic
)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

pub mod batch;
pub mod codec;
pub mod codes;
pub mod commands;
pub mod dialect;
pub mod error;
pub mod header;
pub mod primitives;
pub mod result;
pub mod status;
pub mod units;

#[cfg(any(test, fuzzing, feature = "fuzz-replay"))]
pub mod fuzzing;

pub use codec::{Codec, Reader, Writer};
pub use dialect::Dialect;
pub use error::{DecodeError, DecodeErrorKind, Subject};
pub use status::ErrorCode;
