//! Message batches (PROTOCOL.md §5.2–§5.4).
