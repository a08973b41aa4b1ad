//! Placeholder: filled by the offsets codecs.
