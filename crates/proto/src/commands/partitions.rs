//! Placeholder: filled by the partitions codecs.
