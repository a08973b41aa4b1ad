//! Placeholder: filled by the streams codecs.
