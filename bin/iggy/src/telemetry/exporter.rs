//! The exporter thread: takes log lines and spans from a bounded queue, and posts them in
//! batches (at most [`BATCH_MAX`] items, or what came within [`BATCH_WAIT`]) to their OTLP/HTTP
//! endpoints. Producers never wait: when the queue is full an item is dropped and counted.
//! The thread reports its own failures on stderr only, never through the logger (whose
//! lines it exports).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use super::endpoint::Endpoint;
use super::otlp::{LogItem, SpanItem, logs_body, traces_body};

/// Items that may wait for the thread.
pub(crate) const QUEUE_MAX: usize = 65_536;
const BATCH_MAX: usize = 512;
const BATCH_WAIT: Duration = Duration::from_secs(1);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// At most one failure line per this long.
const COMPLAINT_EVERY: Duration = Duration::from_mins(1);

pub(crate) enum Item {
    Log(LogItem),
    Span(SpanItem),
}

/// The producers' end.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    sender: SyncSender<Item>,
    dropped: Arc<AtomicU64>,
}

impl Queue {
    /// Queues `item` unless the queue is full (then it is dropped and counted).
    pub(crate) fn push(&self, item: Item) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.sender.try_send(item)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Where batches go.
#[derive(Debug, Clone)]
pub(crate) struct Destinations {
    pub(crate) service_name: String,
    pub(crate) logs: Endpoint,
    pub(crate) traces: Endpoint,
}

/// Starts the thread; it ends when every [`Queue`] is dropped.
pub(crate) fn start(destinations: Destinations) -> std::io::Result<Queue> {
    let (sender, receiver) = sync_channel(QUEUE_MAX);
    let dropped = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&dropped);
    std::thread::Builder::new()
        .name("otlp-export".into())
        .spawn(move || run(&receiver, &destinations, &counted))?;
    Ok(Queue { sender, dropped })
}

fn run(receiver: &Receiver<Item>, destinations: &Destinations, dropped: &AtomicU64) {
    let mut logs = Vec::new();
    let mut spans = Vec::new();
    let mut complained: Option<Instant> = None;
    let mut reported_drops = 0;
    loop {
        let Ok(first) = receiver.recv() else { return };
        let deadline = Instant::now() + BATCH_WAIT;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Item::Log(log) => logs.push(log),
                Item::Span(span) => spans.push(span),
            }
            if logs.len() + spans.len() >= BATCH_MAX {
                break;
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            next = receiver.recv_timeout(wait).ok();
        }
        let mut failures = Vec::new();
        if !logs.is_empty() {
            let body = logs_body(&destinations.service_name, &logs);
            failures.extend(post(&destinations.logs, &body).err());
            logs.clear();
        }
        if !spans.is_empty() {
            let body = traces_body(&destinations.service_name, &spans);
            failures.extend(post(&destinations.traces, &body).err());
            spans.clear();
        }
        let drops = dropped.load(Ordering::Relaxed);
        if (!failures.is_empty() || drops > reported_drops)
            && complained.is_none_or(|at| at.elapsed() >= COMPLAINT_EVERY)
        {
            complained = Some(Instant::now());
            eprintln!(
                "telemetry: {} ({drops} item(s) dropped on a full queue so far)",
                if failures.is_empty() {
                    "export ok".into()
                } else {
                    failures.join("; ")
                }
            );
            reported_drops = drops;
        }
    }
}

/// One `POST` of `body`; `Ok` on a 2xx answer.
fn post(endpoint: &Endpoint, body: &str) -> Result<(), String> {
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        format!(
            "{what} {}:{}{}: {error}",
            endpoint.host, endpoint.port, endpoint.path
        )
    };
    let address = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .map_err(|error| failed("resolve", &error))?
        .next()
        .ok_or_else(|| failed("resolve", &"no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, CONNECT_TIMEOUT)
        .map_err(|error| failed("connect to", &error))?;
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    // An IPv6 address goes in brackets in the Host header, as in a URL.
    let host = if endpoint.host.contains(':') {
        format!("[{}]", endpoint.host)
    } else {
        endpoint.host.clone()
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}:{}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        endpoint.path,
        endpoint.port,
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .map_err(|error| failed("send to", &error))?;
    let mut status_line = [0_u8; 12];
    stream
        .read_exact(&mut status_line)
        .map_err(|error| failed("read the answer of", &error))?;
    // `HTTP/1.1 200`: the status is bytes 9..12.
    match status_line.get(9) {
        Some(b'2') => Ok(()),
        _ => Err(failed("refused by", &String::from_utf8_lossy(&status_line))),
    }
}
