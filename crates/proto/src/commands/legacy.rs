//! Placeholder: filled by the legacy codecs.
