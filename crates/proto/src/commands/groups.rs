//! Placeholder: filled by the groups codecs.
