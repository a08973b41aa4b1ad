//! Placeholder: filled by the messages codecs.
