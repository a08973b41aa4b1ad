//! Placeholder: filled by the tokens codecs.
