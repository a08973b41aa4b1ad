//! Placeholder: filled by the system codecs.
