//! Placeholder: filled by the topics codecs.
