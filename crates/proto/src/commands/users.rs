//! Placeholder: filled by the users codecs.
