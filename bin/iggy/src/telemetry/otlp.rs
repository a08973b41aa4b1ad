//! OTLP/JSON bodies (OpenTelemetry protocol, JSON encoding of `ExportLogsServiceRequest` and
//! `ExportTraceServiceRequest`): ids as hex strings, 64-bit integers as decimal strings,
//! enums as numbers, as the OTLP/HTTP specification has them.

use std::fmt::Write;

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogItem {
    pub(crate) unix_ns: u64,
    pub(crate) level: log::Level,
    pub(crate) target: String,
    pub(crate) body: String,
}

/// One finished span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanItem {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) name: String,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// `(key, value)` string attributes.
    pub(crate) attributes: Vec<(&'static str, String)>,
    /// The reply's status: 0 is OK, anything else an error.
    pub(crate) status: u32,
}

pub(crate) fn logs_body(service: &str, logs: &[LogItem]) -> String {
    let mut records = String::new();
    for (index, log) in logs.iter().enumerate() {
        if index > 0 {
            records.push(',');
        }
        let _ = write!(
            records,
            concat!(
                r#"{{"timeUnixNano":"{}","observedTimeUnixNano":"{}","#,
                r#""severityNumber":{},"severityText":"{}","#,
                r#""body":{{"stringValue":{}}},"attributes":[{}]}}"#
            ),
            log.unix_ns,
            log.unix_ns,
            severity_number(log.level),
            log.level,
            quoted(&log.body),
            attribute("log.target", &log.target),
        );
    }
    format!(
        concat!(
            r#"{{"resourceLogs":[{{"resource":{},"scopeLogs":[{{"scope":{{"name":"iggy"}},"#,
            r#""logRecords":[{}]}}]}}]}}"#
        ),
        resource(service),
        records
    )
}

pub(crate) fn traces_body(service: &str, spans: &[SpanItem]) -> String {
    let mut items = String::new();
    for (index, span) in spans.iter().enumerate() {
        if index > 0 {
            items.push(',');
        }
        let attributes: Vec<String> = span
            .attributes
            .iter()
            .map(|(key, value)| attribute(key, value))
            .chain([format!(
                r#"{{"key":"iggy.status","value":{{"intValue":"{}"}}}}"#,
                span.status
            )])
            .collect();
        // SPAN_KIND_SERVER = 2; STATUS_CODE_OK = 1, STATUS_CODE_ERROR = 2.
        let status = if span.status == 0 { 1 } else { 2 };
        let _ = write!(
            items,
            concat!(
                r#"{{"traceId":"{}","spanId":"{}","name":{},"kind":2,"#,
                r#""startTimeUnixNano":"{}","endTimeUnixNano":"{}","#,
                r#""attributes":[{}],"status":{{"code":{}}}}}"#
            ),
            hex(&span.trace_id),
            hex(&span.span_id),
            quoted(&span.name),
            span.start_ns,
            span.end_ns,
            attributes.join(","),
            status,
        );
    }
    format!(
        concat!(
            r#"{{"resourceSpans":[{{"resource":{},"scopeSpans":[{{"scope":{{"name":"iggy"}},"#,
            r#""spans":[{}]}}]}}]}}"#
        ),
        resource(service),
        items
    )
}

fn resource(service: &str) -> String {
    format!(
        r#"{{"attributes":[{}]}}"#,
        attribute("service.name", service)
    )
}

fn attribute(key: &str, value: &str) -> String {
    format!(
        r#"{{"key":{},"value":{{"stringValue":{}}}}}"#,
        quoted(key),
        quoted(value)
    )
}

/// OpenTelemetry's severity numbers: TRACE 1, DEBUG 5, INFO 9, WARN 13, ERROR 17.
fn severity_number(level: log::Level) -> u8 {
    match level {
        log::Level::Trace => 1,
        log::Level::Debug => 5,
        log::Level::Info => 9,
        log::Level::Warn => 13,
        log::Level::Error => 17,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// A JSON string literal.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_body_is_otlp_json() {
        let body = logs_body(
            "iggy",
            &[LogItem {
                unix_ns: 1_700_000_000_000_000_123,
                level: log::Level::Warn,
                target: "shard::data".into(),
                body: "a \"quoted\"\nline\u{1}".into(),
            }],
        );
        assert_eq!(
            body,
            concat!(
                r#"{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","#,
                r#""value":{"stringValue":"iggy"}}]},"scopeLogs":[{"scope":{"name":"iggy"},"#,
                r#""logRecords":[{"timeUnixNano":"1700000000000000123","#,
                r#""observedTimeUnixNano":"1700000000000000123","severityNumber":13,"#,
                r#""severityText":"WARN","#,
                r#""body":{"stringValue":"a \"quoted\"\nline\u0001"},"#,
                r#""attributes":[{"key":"log.target","#,
                r#""value":{"stringValue":"shard::data"}}]}]}]}]}"#
            )
        );
    }

    #[test]
    fn a_trace_body_is_otlp_json() {
        let span = SpanItem {
            trace_id: [0xab; 16],
            span_id: [1, 2, 3, 4, 5, 6, 7, 8],
            name: "send_messages".into(),
            start_ns: 10,
            end_ns: 20,
            attributes: vec![("iggy.transport", "tcp".into())],
            status: 4100,
        };
        let body = traces_body("svc", &[span]);
        assert!(
            body.contains(
                r#""traceId":"abababababababababababababababab","spanId":"0102030405060708""#
            ),
            "{body}"
        );
        assert!(
            body.contains(
                r#""name":"send_messages","kind":2,"startTimeUnixNano":"10","endTimeUnixNano":"20""#
            ),
            "{body}"
        );
        assert!(
            body.contains(
                r#"{"key":"iggy.status","value":{"intValue":"4100"}}],"status":{"code":2}"#
            ),
            "{body}"
        );
        let resource = concat!(
            r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","#,
            r#""value":{"stringValue":"svc"}}]}"#
        );
        assert!(body.starts_with(resource), "{body}");
    }
}
