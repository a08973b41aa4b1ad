//! Nothing but tests: `tests/*.rs` start the real `iggy` server binary on a loopback port with
//! a fresh data directory and drive it with the published Rust SDK `iggy` 0.11.0 (stable), which
//! speaks dialect 0.11.0 (lockstep, one request in flight) like iggy-bench and the Python SDK.
//!
//! Build the server first (`cargo build --release --bin iggy`), then run from the repository
//! root (outside the main workspace, with a lockfile of its own):
//! `CARGO_TARGET_DIR=target/compat cargo test --manifest-path compat/sdk-0.11.0/Cargo.toml`.
//! `IGGY_SERVER_BIN` names another server binary.
//!
//! The tests are those of `sdk-0.11.0-edge.4` (the two releases share the client API), linked
//! rather than copied.
