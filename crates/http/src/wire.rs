//! HTTP/1.1 messages on a byte stream: a request read whole under size and time limits, a
//! response written whole.
//!
//! The head is parsed by `httparse`; the body comes by `Content-Length` or chunked transfer
//! coding, never both (a request with both is refused: two lengths invite request smuggling).
//! A body over the limit is refused from its declared length before it is read; a chunked one
//! as soon as it passes the limit. Keep-alive follows HTTP/1.1 (HTTP/1.0 closes unless asked).

use std::io;
use std::time::{Duration, Instant};

use futures_util::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use http::{Method, StatusCode};

/// Headers a request may carry.
const HEADERS_MAX: usize = 64;
/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// What one connection may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The request line and headers together.
    pub head_size_max: usize,
    /// The body after transfer decoding (`[http] max_request_size`).
    pub body_size_max: usize,
    /// How long a request may take to arrive once its first byte has.
    pub request_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
}

/// One request as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The request target as sent: path and query, still percent-encoded.
    pub target: String,
    /// Header names in lower case, values as sent (invalid UTF-8 dropped).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
}

impl Request {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Why no request came.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The peer closed between requests: the normal end of a connection.
    #[error("closed")]
    Closed,
    #[error("timed out")]
    TimedOut,
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The request cannot be served; the connection gets this status, then closes.
    #[error("{status}: {reason}")]
    Refused {
        status: StatusCode,
        reason: &'static str,
    },
}

impl ReadError {
    fn refused(status: StatusCode, reason: &'static str) -> Self {
        Self::Refused { status, reason }
    }

    fn bad(reason: &'static str) -> Self {
        Self::refused(StatusCode::BAD_REQUEST, reason)
    }
}

/// One response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: StatusCode,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: StatusCode) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn with_body(status: StatusCode, content_type: &str, body: Vec<u8>) -> Self {
        Self::new(status)
            .header("content-type", content_type.to_owned())
            .body(body)
    }

    pub fn header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    /// The status line and headers, up to the blank line before the body (whose length they
    /// give, a HEAD request's too).
    fn encode_head(&self, keep_alive: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        let reason = self.status.canonical_reason().unwrap_or("Unknown");
        out.extend_from_slice(format!("HTTP/1.1 {} {reason}\r\n", self.status.as_u16()).as_bytes());
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        let connection = if keep_alive { "keep-alive" } else { "close" };
        let length = self.body.len();
        out.extend_from_slice(
            format!("content-length: {length}\r\nconnection: {connection}\r\n\r\n").as_bytes(),
        );
        out
    }
}

/// A connection's stream and the bytes read past the last request (pipelined requests).
#[derive(Debug)]
pub struct Conn<S> {
    stream: S,
    /// Bytes read and not yet parsed start at `consumed`; the parsed prefix is dropped only
    /// before the next read, so a read of many pipelined requests costs one shift, not one
    /// per request.
    buffer: Vec<u8>,
    consumed: usize,
    /// Where each read lands before it joins `buffer` (on the heap: a future holding it on
    /// the stack would be as large).
    chunk: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            buffer: Vec::new(),
            consumed: 0,
            chunk: vec![0; READ_CHUNK],
        }
    }

    /// Reads the next request: the first byte within the idle timeout, the rest within the
    /// request timeout. `body_max` says, from the head, how large a body this request may
    /// have (at most `limits.body_size_max`): a caller holds a request without a credential
    /// to a small one before any of it is read.
    pub async fn read_request(
        &mut self,
        limits: &Limits,
        body_max: impl AsyncFn(&Head) -> usize,
    ) -> Result<Request, ReadError> {
        if self.pending().is_empty() {
            let read = self.fill(limits.idle_timeout).await?;
            if read == 0 {
                return Err(ReadError::Closed);
            }
        }
        let deadline = Instant::now() + limits.request_timeout;
        // Searched for the blank line that ends the head: each byte is looked at about once,
        // so a head sent a byte at a time costs no more than one sent whole.
        let mut searched: usize = 0;
        let (head, head_length) = loop {
            // A blank line: "\n\n" or "\n\r\n" (httparse takes bare LF line ends too).
            let rest = self
                .pending()
                .get(searched.saturating_sub(2)..)
                .unwrap_or_default();
            let ended = rest.windows(2).any(|two| two == b"\n\n")
                || rest.windows(3).any(|three| three == b"\n\r\n");
            searched = self.pending().len();
            if ended && let Some(parsed) = parse_head(self.pending())? {
                break parsed;
            }
            if self.pending().len() >= limits.head_size_max {
                return Err(ReadError::refused(
                    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                    "request head too large",
                ));
            }
            self.fill_until(deadline).await?;
        };
        if head_length > limits.head_size_max {
            return Err(ReadError::refused(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "request head too large",
            ));
        }
        self.take(head_length);
        let max = body_max(&head).await.min(limits.body_size_max);
        let body = match head.framing()? {
            Framing::None => Vec::new(),
            Framing::Length(length) => {
                if length > max {
                    return Err(too_large());
                }
                self.continue_if_expected(&head).await?;
                self.read_exact_body(length, deadline).await?
            }
            Framing::Chunked => {
                self.continue_if_expected(&head).await?;
                self.read_chunked(max, deadline).await?
            }
        };
        Ok(Request {
            keep_alive: head.keep_alive(),
            method: head.method,
            target: head.target,
            headers: head.headers,
            body,
        })
    }

    /// Writes `response` whole within `timeout` (a client that stops reading loses its
    /// connection, not the server's memory).
    pub async fn write_response(
        &mut self,
        response: &Response,
        keep_alive: bool,
        head_only: bool,
        timeout: Duration,
    ) -> io::Result<()> {
        // The head and the body apart: a large body (a poll's JSON) is not copied again.
        let head = response.encode_head(keep_alive);
        let body: &[u8] = if head_only { &[] } else { &response.body };
        self.write_parts(&[&head, body], timeout).await
    }

    async fn write_all(&mut self, bytes: &[u8], timeout: Duration) -> io::Result<()> {
        self.write_parts(&[bytes], timeout).await
    }

    async fn write_parts(&mut self, parts: &[&[u8]], timeout: Duration) -> io::Result<()> {
        let write = async {
            for part in parts {
                self.stream.write_all(part).await?;
            }
            self.stream.flush().await
        };
        compio::time::timeout(timeout, write)
            .await
            .map_err(|_elapsed| io::Error::new(io::ErrorKind::TimedOut, "write timed out"))?
    }

    async fn continue_if_expected(&mut self, head: &Head) -> Result<(), ReadError> {
        let expects = head
            .header("expect")
            .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"));
        if expects && self.pending().is_empty() {
            let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
            self.write_all(interim, Duration::from_secs(10)).await?;
        }
        Ok(())
    }

    async fn read_exact_body(
        &mut self,
        length: usize,
        deadline: Instant,
    ) -> Result<Vec<u8>, ReadError> {
        while self.pending().len() < length {
            self.fill_until(deadline).await?;
        }
        let body = self.pending().get(..length).unwrap_or_default().to_vec();
        self.take(length);
        Ok(body)
    }

    async fn read_chunked(&mut self, max: usize, deadline: Instant) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        // Bytes of the pending ones already taken; given back to `take` only before a read.
        let mut at = 0;
        loop {
            let (start, size) = loop {
                let rest = self.pending().get(at..).unwrap_or_default();
                match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((start, size))) => break (at + start, size),
                    Ok(httparse::Status::Partial) if rest.len() < 1024 => {
                        self.take(at);
                        at = 0;
                        self.fill_until(deadline).await?;
                    }
                    _ => return Err(ReadError::bad("bad chunk size")),
                }
            };
            let size = usize::try_from(size).map_err(|_overflow| too_large())?;
            if body.len().saturating_add(size) > max {
                return Err(too_large());
            }
            if size == 0 {
                self.take(start);
                return self.skip_trailers(deadline).await.map(|()| body);
            }
            let (mut start, mut end) = (start, start.saturating_add(size).saturating_add(2));
            while self.pending().len() < end {
                self.take(at);
                (start, end) = (start - at, end - at);
                at = 0;
                self.fill_until(deadline).await?;
            }
            if self.pending().get(end - 2..end) != Some(b"\r\n") {
                return Err(ReadError::bad("chunk not followed by CRLF"));
            }
            body.extend_from_slice(self.pending().get(start..end - 2).unwrap_or_default());
            at = end;
        }
    }

    /// Reads past the trailer section after the last chunk (trailers are ignored).
    async fn skip_trailers(&mut self, deadline: Instant) -> Result<(), ReadError> {
        loop {
            if let Some(line_end) = self.pending().windows(2).position(|pair| pair == b"\r\n") {
                self.take(line_end + 2);
                if line_end == 0 {
                    return Ok(());
                }
                continue;
            }
            if self.pending().len() > 8 * 1024 {
                return Err(ReadError::bad("trailers too large"));
            }
            self.fill_until(deadline).await?;
        }
    }

    async fn fill_until(&mut self, deadline: Instant) -> Result<(), ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.fill(left).await? {
            0 => Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into())),
            _ => Ok(()),
        }
    }

    /// The bytes read and not yet parsed.
    fn pending(&self) -> &[u8] {
        self.buffer.get(self.consumed..).unwrap_or_default()
    }

    /// Marks the first `length` pending bytes parsed.
    fn take(&mut self, length: usize) {
        self.consumed = self.consumed.saturating_add(length).min(self.buffer.len());
    }

    /// Ends the sending side, then reads and drops what the peer still sends, until `most`
    /// bytes went, `within` passed or it closed: a connection closed with bytes unread is
    /// reset, and the reset can destroy the refusal just written before the client reads it.
    /// The end of the sending side first tells a client that waits for it (a request with
    /// `Connection: close`) that the response is complete, so it closes instead of waiting.
    pub async fn linger(&mut self, most: usize, within: Duration) {
        let deadline = Instant::now() + within;
        if compio::time::timeout(within, self.stream.close())
            .await
            .is_err()
        {
            return;
        }
        self.buffer.clear();
        self.consumed = 0;
        let mut dropped = 0_usize;
        while dropped < most {
            let left = deadline.saturating_duration_since(Instant::now());
            match compio::time::timeout(left, self.stream.read(&mut self.chunk)).await {
                Ok(Ok(read)) if read > 0 => dropped = dropped.saturating_add(read),
                _ => return,
            }
        }
    }

    async fn fill(&mut self, timeout: Duration) -> Result<usize, ReadError> {
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.consumed = 0;
        }
        let read = compio::time::timeout(timeout, self.stream.read(&mut self.chunk))
            .await
            .map_err(|_elapsed| ReadError::TimedOut)??;
        self.buffer
            .extend_from_slice(self.chunk.get(..read).unwrap_or_default());
        Ok(read)
    }
}

fn too_large() -> ReadError {
    ReadError::refused(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")
}

/// A parsed request head.
#[derive(Debug)]
pub struct Head {
    method: Method,
    target: String,
    /// HTTP/1.x minor version.
    minor: u8,
    headers: Vec<(String, String)>,
}

enum Framing {
    None,
    Length(usize),
    Chunked,
}

impl Head {
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn framing(&self) -> Result<Framing, ReadError> {
        let mut lengths = self
            .headers
            .iter()
            .filter(|(key, _)| key == "content-length");
        let length = lengths.next().map(|(_, value)| value);
        if lengths.any(|(_, other)| Some(other) != length) {
            return Err(ReadError::bad("conflicting content-length"));
        }
        match (self.header("transfer-encoding"), length) {
            (Some(_), Some(_)) => Err(ReadError::bad("content-length with transfer-encoding")),
            (Some(coding), None) => {
                let last = coding.rsplit(',').next().unwrap_or_default().trim();
                if last.eq_ignore_ascii_case("chunked") && !coding.contains(',') {
                    Ok(Framing::Chunked)
                } else {
                    Err(ReadError::refused(
                        StatusCode::NOT_IMPLEMENTED,
                        "transfer coding other than chunked",
                    ))
                }
            }
            (None, Some(length)) => {
                let valid = !length.is_empty() && length.bytes().all(|b| b.is_ascii_digit());
                let parsed = valid.then(|| length.parse::<usize>().ok()).flatten();
                parsed
                    .map(Framing::Length)
                    .ok_or_else(|| ReadError::bad("bad content-length"))
            }
            (None, None) => Ok(Framing::None),
        }
    }

    fn keep_alive(&self) -> bool {
        let connection = self.header("connection").unwrap_or_default();
        let has = |token: &str| {
            connection
                .split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        };
        if self.minor == 0 {
            has("keep-alive")
        } else {
            !has("close")
        }
    }
}

/// The head at the start of `buffer` and its length, or `None` if it has not all arrived.
fn parse_head(buffer: &[u8]) -> Result<Option<(Head, usize)>, ReadError> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(buffer) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ReadError::refused(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "too many headers",
            ));
        }
        Err(_malformed) => return Err(ReadError::bad("malformed request head")),
    };
    let method = request
        .method
        .and_then(|method| Method::from_bytes(method.as_bytes()).ok())
        .ok_or_else(|| ReadError::bad("bad method"))?;
    let target = request.path.unwrap_or("/").to_owned();
    let minor = request.version.unwrap_or(1);
    // A value that is not UTF-8 is refused rather than dropped: a dropped Content-Length
    // would make the body the next request.
    let headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|header| {
            let value = std::str::from_utf8(header.value)
                .map_err(|_utf8| ReadError::bad("a header value is not UTF-8"))?;
            Ok((header.name.to_ascii_lowercase(), value.trim().to_owned()))
        })
        .collect::<Result<_, ReadError>>()?;
    let codings = headers
        .iter()
        .filter(|(name, _)| name == "transfer-encoding")
        .count();
    if codings > 1 {
        return Err(ReadError::bad("transfer-encoding repeated"));
    }
    let head = Head {
        method,
        target,
        minor,
        headers,
    };
    Ok(Some((head, length)))
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
