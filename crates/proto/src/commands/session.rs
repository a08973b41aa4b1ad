//! Placeholder: filled by the session codecs.
