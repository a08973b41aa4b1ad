//! The HTTP REST API (PROTOCOL.md §8–§9) on compio sockets, HTTP/1.1 with keep-alive.
//!
//! Each JSON request becomes the binary request the SDK would send, on a session of the
//! shard's [`transport::ConnectionHandler`] that stands for the request's credential
//! ([`session`], [`auth`]); the typed reply comes back as JSON ([`reply_json`]). So every
//! rule of the binary protocol (permissions, limits, revocation) holds over HTTP by
//! construction, and the core has one implementation of each operation.
//!
//! The HTTP/1.1 layer is ours over `httparse` ([`wire`]): hyper, the usual choice, needs
//! tokio's types, which the project bans; an API of small JSON bodies needs only
//! `Content-Length` and chunked bodies, keep-alive and strict limits, which [`wire`] keeps
//! under our control (head and body size, read, idle and write timeouts).

pub mod api;
pub mod auth;
pub mod console;
pub mod cors;
pub mod error;
#[cfg(any(test, fuzzing))]
pub mod fuzzing;
pub mod jwt;
pub mod reply_json;
pub mod request_json;
pub mod route;
pub mod server;
pub mod session;
pub mod ui;
pub mod values;
pub mod wire;

pub use auth::SessionLimits;
pub use server::{HttpConfig, HttpServer, ListenError, check_metrics_endpoint};
