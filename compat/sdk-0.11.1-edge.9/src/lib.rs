//! Nothing but tests: `tests/*.rs` start the real `iggy` server binary on a loopback port with
//! a fresh data directory and drive it with the published Rust SDK `iggy` 0.11.1-edge.9, which
//! speaks dialect 0.12.2.
//!
//! Build the server first (`cargo build --release --bin iggy`), then run from the repository
//! root (outside the main workspace, with a lockfile of its own):
//! `CARGO_TARGET_DIR=target/compat cargo test --manifest-path compat/sdk-0.11.1-edge.9/Cargo.toml`.
//! `IGGY_SERVER_BIN` names another server binary.
