//! The Prometheus text exposition format (version 0.0.4): `# HELP`, `# TYPE`, then one line
//! per sample, a family's samples together. Label values are escaped, so a stream named
//! `a"b\` or holding a newline cannot break a line or forge another series.

use std::fmt::{Display, Write};

use super::histogram::HistogramSnapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// A scrape's text, written family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
    /// The family being written: its samples must follow its header.
    family: String,
}

/// `(name, value)` pairs of one sample.
pub(super) type Labels<'a> = [(&'a str, &'a str)];

impl Exposition {
    /// Starts the family `name` (a metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        debug_assert!(is_metric_name(name), "{name} is a metric name");
        self.family.clear();
        self.family.push_str(name);
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.as_str());
    }

    /// A sample of the current family.
    pub fn sample(&mut self, labels: &Labels<'_>, value: impl Display) {
        let name = std::mem::take(&mut self.family);
        self.line(&name, labels, None, value);
        self.family = name;
    }

    /// One family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl Display) {
        self.family(name, kind, help);
        self.sample(&[], value);
    }

    /// A histogram sample of the current family: `_bucket` lines with cumulative counts,
    /// `_sum` and `_count`. Bounds and sum are divided by `divisor` (µs to seconds: 1e6).
    pub fn histogram(&mut self, labels: &Labels<'_>, snapshot: &HistogramSnapshot, divisor: f64) {
        let name = std::mem::take(&mut self.family);
        let bucket = format!("{name}_bucket");
        for (bound, count) in snapshot.cumulative() {
            let le = match bound {
                Some(bound) => format_float(to_f64(bound) / divisor),
                None => "+Inf".to_owned(),
            };
            self.line(&bucket, labels, Some(&le), count);
        }
        let sum = format_float(to_f64(snapshot.sum) / divisor);
        self.line(&format!("{name}_sum"), labels, None, sum);
        self.line(&format!("{name}_count"), labels, None, snapshot.count());
        self.family = name;
    }

    pub fn finish(self) -> String {
        self.text
    }

    fn line(&mut self, name: &str, labels: &Labels<'_>, le: Option<&str>, value: impl Display) {
        self.text.push_str(name);
        let extra = le.map(|le| ("le", le));
        let mut all = labels.iter().copied().chain(extra).peekable();
        if all.peek().is_some() {
            self.text.push('{');
            for (index, (key, value)) in all.enumerate() {
                if index > 0 {
                    self.text.push(',');
                }
                self.text.push_str(key);
                self.text.push_str("=\"");
                escape_label_into(&mut self.text, value);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

// Counts and µs stay far below 2^53 in practice; the rounding of larger ones is harmless.
#[allow(clippy::cast_precision_loss, clippy::as_conversions)]
fn to_f64(value: u64) -> f64 {
    value as f64
}

/// A float as Prometheus reads it (Rust's `Display` never uses an exponent).
fn format_float(value: f64) -> String {
    format!("{value}")
}

/// `SendMessages` → `send_messages`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (index, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if index > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_' || first == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn escape_label_into(text: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => text.push_str("\\\\"),
            '"' => text.push_str("\\\""),
            '\n' => text.push_str("\\n"),
            c => text.push(c),
        }
    }
}

fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::histogram::Histogram;

    #[test]
    fn families_samples_and_escaped_labels() {
        let mut out = Exposition::default();
        out.family("iggy_messages", Kind::Gauge, "Messages stored.");
        out.sample(&[("stream", "a\"b\\c\nd"), ("topic", "t")], 7);
        out.single("iggy_up", Kind::Gauge, "Up.", 1);
        let text = out.finish();
        let expected = "# HELP iggy_messages Messages stored.\n\
                        # TYPE iggy_messages gauge\n\
                        iggy_messages{stream=\"a\\\"b\\\\c\\nd\",topic=\"t\"} 7\n\
                        # HELP iggy_up Up.\n\
                        # TYPE iggy_up gauge\n\
                        iggy_up 1\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn histograms_are_cumulative_in_seconds() {
        let histogram = Histogram::new(&[100, 1_000]);
        for micros in [50, 100, 900, 5_000] {
            histogram.record(micros);
        }
        let mut out = Exposition::default();
        out.family("iggy_x_seconds", Kind::Histogram, "X.");
        out.histogram(&[("command", "ping")], &histogram.snapshot(), 1e6);
        let text = out.finish();
        let lines: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(
            lines,
            vec![
                "iggy_x_seconds_bucket{command=\"ping\",le=\"0.0001\"} 2",
                "iggy_x_seconds_bucket{command=\"ping\",le=\"0.001\"} 3",
                "iggy_x_seconds_bucket{command=\"ping\",le=\"+Inf\"} 4",
                "iggy_x_seconds_sum{command=\"ping\"} 0.00605",
                "iggy_x_seconds_count{command=\"ping\"} 4",
            ]
        );
    }
}
