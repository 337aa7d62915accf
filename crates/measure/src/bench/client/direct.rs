//! A stream's own HTTP/1.1 connection to a plain-`http://` engine, read by the stream's task
//! itself: one socket read per arrival into a buffer the connection keeps, the response head
//! parsed by `httparse`, the body's framing (chunked or `Content-Length`) taken off in place,
//! and the body bytes lent to the SSE parser without a copy into a new allocation. This is the
//! measuring client's hot path (one call per streamed chunk), so it does what the physical floor
//! of a streaming client does (`scripts/bench/floor.c`) and little more. The `GET`s of a
//! plain-HTTP engine (metrics pages every few hundred milliseconds, probes) go on the same kind
//! of connection ([`get`]); the JSON `POST`s and everything of an `https://` engine go through
//! reqwest.
//!
//! Reuse follows the client's [`ConnectionPolicy`] as the pool does for everything else: a
//! connection idle longer than its idle time-out, closed by the engine, or left in the middle
//! of a response is replaced by a fresh one, and a request that got no response at all is
//! sent once more on a fresh connection (never one that got its response head).

use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{ConnectionPolicy, RequestFailure, excerpt};

/// Where a plain-HTTP engine is: what to connect to and what to ask for.
#[derive(Debug)]
pub(super) struct Target {
    /// `host:port` to connect to (an IP literal needs no resolver thread).
    addr: String,
    /// The base URL's path (no trailing `/`): what every request path is appended to.
    path: String,
    /// The header lines every request carries: `Host` and, when a key is set, `Authorization`.
    common: String,
    /// The completion request's head up to (not including) its `content-length` line.
    head: Vec<u8>,
}

impl Target {
    /// The target of a `http://` base URL; `None` for any other (then the pool streams).
    pub(super) fn of(base: &str, api_key: Option<&str>) -> Option<Target> {
        let url = reqwest::Url::parse(base).ok()?;
        // Credentials in the URL (sent as basic auth) are the pooled client's to handle.
        if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        // An IPv6 host comes in brackets, as `host:port` and `Host` want it.
        let host = url.host_str()?.to_string();
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let path = url.path().trim_end_matches('/').to_string();
        // The URL parser percent-encodes what a request line cannot hold; a key goes into a
        // header as given, so one with a line break (a header of its own) is refused.
        if !printable(&authority) || !printable(&path) || !api_key.is_none_or(printable) {
            return None;
        }
        let mut common = format!("host: {authority}\r\n");
        if let Some(key) = api_key {
            common.push_str(&format!("authorization: Bearer {key}\r\n"));
        }
        let head = format!(
            "POST {path}/v1/completions HTTP/1.1\r\n{common}content-type: application/json\r\naccept: text/event-stream\r\n"
        );
        Some(Target {
            addr: format!("{host}:{port}"),
            path,
            common,
            head: head.into_bytes(),
        })
    }

    /// A `GET` of `path` (which starts with `/`); `None` when it cannot go on a request line.
    fn get_request(&self, path: &str) -> Option<Vec<u8>> {
        printable(path).then(|| {
            format!("GET {}{path} HTTP/1.1\r\n{}\r\n", self.path, self.common).into_bytes()
        })
    }

    /// The whole request: head, `content-length`, blank line, body.
    fn request(&self, body: &[u8]) -> Vec<u8> {
        let length = format!("content-length: {}\r\n\r\n", body.len());
        let mut req = Vec::with_capacity(self.head.len() + length.len() + body.len());
        req.extend_from_slice(&self.head);
        req.extend_from_slice(length.as_bytes());
        req.extend_from_slice(body);
        req
    }
}

/// Whether `v` can go into a request line or header value as it is (no line break).
fn printable(v: &str) -> bool {
    v.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// How many bytes one socket read takes at most, and the largest response head accepted.
const READ_BUFFER_BYTES: usize = 64 << 10;

/// One open connection.
pub(super) struct Conn {
    tcp: TcpStream,
    /// Bytes read and not yet taken: `raw[start..]`. Its capacity ([`READ_BUFFER_BYTES`]) is
    /// never zeroed: a read writes only what arrived, so a stream whose chunks are a few
    /// hundred bytes touches a page or two of it, not 64 KiB per connection.
    raw: Vec<u8>,
    start: usize,
    /// The last response was read to its end and the engine allows another request.
    reusable: bool,
    /// When its last response ended.
    idle_since: Instant,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Conn {
    async fn open(target: &Target) -> Result<Conn, RequestFailure> {
        let tcp =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target.addr)).await {
                Err(_) => {
                    return Err(RequestFailure::new(
                        "timed out",
                        format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()),
                    ));
                }
                Ok(Err(e)) => {
                    let kind = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                        "connection refused"
                    } else {
                        "connection failed"
                    };
                    return Err(RequestFailure::new(kind, excerpt(&e.to_string(), 300)));
                }
                Ok(Ok(tcp)) => tcp,
            };
        let _ = tcp.set_nodelay(true);
        Ok(Conn {
            tcp,
            raw: Vec::with_capacity(READ_BUFFER_BYTES),
            start: 0,
            reusable: false,
            idle_since: Instant::now(),
        })
    }

    /// Whether a new request can go on this connection now: its last response was read to
    /// the end, it has been idle no longer than the policy allows, nothing stray is buffered,
    /// and the engine has not closed it (a non-blocking peek at the socket sees its close or
    /// stray bytes at once, whether or not the reactor has seen them yet).
    fn reusable(&self, idle_timeout: Option<Duration>) -> bool {
        if !self.reusable
            || self.start != self.raw.len()
            || idle_timeout.is_some_and(|t| self.idle_since.elapsed() >= t)
        {
            return false;
        }
        let mut probe = 0u8;
        // SAFETY: a one-byte peek into a local on the connection's own open socket; the flags
        // make it return at once and leave the socket's data and state as they were.
        let n = unsafe {
            libc::recv(
                self.tcp.as_raw_fd(),
                (&raw mut probe).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && {
            let e = std::io::Error::last_os_error().kind();
            e == std::io::ErrorKind::WouldBlock
        }
    }

    /// Reads what the socket has into the buffer (waiting until it has something); the
    /// number of bytes, 0 at the engine's close.
    async fn fill(&mut self) -> std::io::Result<usize> {
        if self.start == self.raw.len() {
            self.clear();
        } else if self.raw.len() == READ_BUFFER_BYTES && self.start > 0 {
            self.raw.drain(..self.start);
            self.start = 0;
        }
        if self.raw.len() == READ_BUFFER_BYTES {
            // Only a head can fill the buffer (a body's bytes are taken as they are read).
            return Err(std::io::Error::other("the read buffer is full"));
        }
        // Into the spare capacity only (`read_buf` would grow a full vector).
        let room = READ_BUFFER_BYTES - self.raw.len();
        let mut spare = (&mut self.raw).limit(room);
        self.tcp.read_buf(&mut spare).await
    }

    /// Forgets whatever is buffered.
    fn clear(&mut self) {
        self.raw.clear();
        self.start = 0;
    }

    /// Sends `request` and reads the response head (skipping interim 1xx answers).
    async fn exchange(&mut self, request: &[u8]) -> Result<Head, Exchange> {
        self.reusable = false;
        self.clear();
        if let Err(e) = self.tcp.write_all(request).await {
            return Err(Exchange::Unanswered(e.to_string()));
        }
        let mut answered = false;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&self.raw[self.start..]) {
                Ok(httparse::Status::Complete(len)) => {
                    let code = parsed.code.unwrap_or(0);
                    self.start += len;
                    if (100..200).contains(&code) && code != 101 {
                        continue;
                    }
                    return Head::of(&parsed).map_err(Exchange::Malformed);
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(Exchange::Malformed(format!("malformed response head: {e}"))),
            }
            if self.start == 0 && self.raw.len() == READ_BUFFER_BYTES {
                return Err(Exchange::Malformed(format!(
                    "a response head longer than {} KiB",
                    READ_BUFFER_BYTES >> 10
                )));
            }
            match self.fill().await {
                Ok(0) if !answered => {
                    return Err(Exchange::Unanswered(
                        "connection closed before message completed".into(),
                    ));
                }
                Ok(0) => {
                    return Err(Exchange::Closed(
                        "connection closed before message completed".into(),
                    ));
                }
                Ok(_) => answered = true,
                Err(e) if !answered && is_reset(&e) => {
                    return Err(Exchange::Unanswered(e.to_string()));
                }
                Err(e) => return Err(Exchange::Closed(e.to_string())),
            }
        }
    }
}

fn is_reset(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe)
}

/// Why a request got no usable response head.
enum Exchange {
    /// Nothing came back on a connection that was open (the engine closed it as the request
    /// went out): a fresh connection may succeed.
    Unanswered(String),
    /// The connection ended partway through the head.
    Closed(String),
    /// The head is not HTTP/1.1 as an engine sends it.
    Malformed(String),
}

/// What the response head says.
struct Head {
    status: http::StatusCode,
    framing: Framing,
    /// The engine keeps the connection open after this response.
    keep_alive: bool,
}

impl Head {
    fn of(parsed: &httparse::Response<'_, '_>) -> Result<Head, String> {
        let code = parsed.code.unwrap_or(0);
        let status = http::StatusCode::from_u16(code)
            .map_err(|_| format!("malformed response head: status {code}"))?;
        let mut chunked = false;
        let mut length: Option<u64> = None;
        let mut keep_alive = parsed.version == Some(1);
        for h in parsed.headers.iter() {
            let value = String::from_utf8_lossy(h.value);
            let value = value.trim();
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // The last coding decides: only `chunked` frames the body.
                chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let n: u64 = value
                    .parse()
                    .map_err(|_| format!("malformed response head: content-length {value:?}"))?;
                if length.is_some_and(|m| m != n) {
                    return Err("malformed response head: two different content-lengths".into());
                }
                length = Some(n);
            } else if h.name.eq_ignore_ascii_case("connection") {
                let has = |token: &str| {
                    value
                        .split(',')
                        .any(|t| t.trim().eq_ignore_ascii_case(token))
                };
                if has("close") {
                    keep_alive = false;
                } else if has("keep-alive") {
                    keep_alive = true;
                }
            }
        }
        let framing = if chunked {
            Framing::Chunked(Chunked::Size {
                value: 0,
                digits: 0,
            })
        } else if let Some(n) = length {
            Framing::Length(n)
        } else if code == 204 || code == 304 {
            Framing::Length(0)
        } else {
            keep_alive = false;
            Framing::UntilClose
        };
        Ok(Head {
            status,
            framing,
            keep_alive,
        })
    }
}

/// How the body's end is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `Transfer-Encoding: chunked`, at this point of a chunk.
    Chunked(Chunked),
    /// `Content-Length`: this many bytes left.
    Length(u64),
    /// Neither: the body ends when the engine closes the connection.
    UntilClose,
}

/// Where the chunked decoder is (RFC 9112 §7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunked {
    /// In a chunk-size line: the hex digits so far.
    Size { value: u64, digits: u8 },
    /// After the size, in the chunk extensions (ignored) up to the line's end.
    Extension { value: u64, len: usize },
    /// In a chunk's data: bytes left.
    Data(u64),
    /// After a chunk's data, expecting its line break.
    DataEnd { cr: bool },
    /// After the last chunk, in the trailer section: bytes of the current line (CRs aside).
    Trailer { len: usize },
    /// The body ended.
    Done,
}

/// The longest chunk-size or trailer line accepted.
const MAX_FRAMING_LINE: usize = 4096;

impl Chunked {
    /// Decodes `input` up to the end of its first run of data bytes: how many bytes it took
    /// and where that data lies in `input` (lent out as it is, not copied). It takes all of
    /// `input` when no data comes before its end or the body's.
    fn next_data(&mut self, input: &[u8]) -> Result<(usize, Option<Range<usize>>), String> {
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            *self = match *self {
                Chunked::Size { value, digits } => match (b as char).to_digit(16) {
                    Some(d) if digits < 16 => Chunked::Size {
                        value: value << 4 | u64::from(d),
                        digits: digits + 1,
                    },
                    Some(_) => return Err("a chunk size over 16 hex digits".into()),
                    None if digits == 0 => {
                        return Err(format!("a chunk size line starting with {:?}", b as char));
                    }
                    None if b == b'\n' => Self::after_size(value),
                    None if matches!(b, b'\r' | b';' | b' ' | b'\t') => {
                        Chunked::Extension { value, len: 1 }
                    }
                    None => return Err(format!("{:?} in a chunk size", b as char)),
                },
                Chunked::Extension { value, len } => match b {
                    b'\n' => Self::after_size(value),
                    _ if len >= MAX_FRAMING_LINE => return Err("a chunk size line too long".into()),
                    _ => Chunked::Extension {
                        value,
                        len: len + 1,
                    },
                },
                Chunked::Data(left) => {
                    let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                    let left = left - take as u64;
                    *self = if left == 0 {
                        Chunked::DataEnd { cr: false }
                    } else {
                        Chunked::Data(left)
                    };
                    return Ok((i + take, Some(i..i + take)));
                }
                Chunked::DataEnd { cr } => match b {
                    b'\r' if !cr => Chunked::DataEnd { cr: true },
                    b'\n' => Chunked::Size {
                        value: 0,
                        digits: 0,
                    },
                    _ => return Err("a chunk's data longer than its size".into()),
                },
                Chunked::Trailer { len } => match b {
                    b'\n' if len == 0 => Chunked::Done,
                    b'\n' => Chunked::Trailer { len: 0 },
                    b'\r' => Chunked::Trailer { len },
                    _ if len >= MAX_FRAMING_LINE => return Err("a trailer line too long".into()),
                    _ => Chunked::Trailer { len: len + 1 },
                },
                Chunked::Done => return Ok((i, None)),
            };
            i += 1;
            if *self == Chunked::Done {
                return Ok((i, None));
            }
        }
        Ok((i, None))
    }

    fn after_size(value: u64) -> Chunked {
        if value == 0 {
            Chunked::Trailer { len: 0 }
        } else {
            Chunked::Data(value)
        }
    }
}

/// A response being read on a stream's connection.
pub(crate) struct Response<'c> {
    conn: &'c mut Conn,
    framing: Framing,
    keep_alive: bool,
    ended: bool,
}

impl Response<'_> {
    /// The body bytes that arrived with the next read (one arrival); `None` at the body's end.
    pub(super) async fn chunk(&mut self) -> Result<Option<&[u8]>, RequestFailure> {
        loop {
            if self.ended {
                return Ok(None);
            }
            if self.conn.start < self.conn.raw.len() {
                let base = self.conn.start;
                let input = &self.conn.raw[base..];
                let (took, data, done) = match &mut self.framing {
                    Framing::Chunked(state) => {
                        let (took, data) = state.next_data(input).map_err(|e| {
                            RequestFailure::new(
                                "stream broken",
                                format!("malformed chunked body: {e}"),
                            )
                        })?;
                        (took, data, *state == Chunked::Done)
                    }
                    Framing::Length(left) => {
                        let take = input
                            .len()
                            .min(usize::try_from(*left).unwrap_or(usize::MAX));
                        *left -= take as u64;
                        (take, Some(0..take), *left == 0)
                    }
                    Framing::UntilClose => (input.len(), Some(0..input.len()), false),
                };
                self.conn.start += took;
                if done {
                    self.end_body();
                }
                if let Some(data) = data.filter(|d| !d.is_empty()) {
                    return Ok(Some(&self.conn.raw[base + data.start..base + data.end]));
                }
                if done {
                    return Ok(None);
                }
            } else if self.framing == Framing::Length(0) {
                self.end_body();
                return Ok(None);
            }
            match self.conn.fill().await {
                Ok(0) if self.framing == Framing::UntilClose => {
                    self.ended = true;
                    return Ok(None);
                }
                Ok(0) => {
                    return Err(RequestFailure::new(
                        "stream broken",
                        "error reading a body from connection: connection closed before message completed",
                    ));
                }
                Ok(_) => {}
                Err(e) => {
                    return Err(RequestFailure::new(
                        "stream broken",
                        excerpt(&format!("error reading a body from connection: {e}"), 300),
                    ));
                }
            }
        }
    }

    fn end_body(&mut self) {
        self.ended = true;
        self.conn.reusable = self.keep_alive;
    }
}

impl Drop for Response<'_> {
    fn drop(&mut self) {
        self.conn.idle_since = Instant::now();
    }
}

/// Sends the streaming request on the stream's connection (`slot`), opening one when there is
/// none or it cannot be reused; retries once on a fresh connection when the request got no
/// response at all. Returns the status and the response.
pub(super) async fn send<'c>(
    target: &Target,
    policy: &ConnectionPolicy,
    slot: &'c mut Option<Conn>,
    body: Bytes,
) -> Result<(http::StatusCode, Response<'c>), RequestFailure> {
    exchange(target, policy, slot, &target.request(&body)).await
}

/// Sends `request` on the connection in `slot` (opening one when there is none or it cannot be
/// reused), once more on a fresh connection when it got no response at all; the status and
/// the response once its head arrived.
async fn exchange<'c>(
    target: &Target,
    policy: &ConnectionPolicy,
    slot: &'c mut Option<Conn>,
    request: &[u8],
) -> Result<(http::StatusCode, Response<'c>), RequestFailure> {
    let mut attempts = if policy.retry_unanswered { 2 } else { 1 };
    let head = loop {
        attempts -= 1;
        if !slot
            .as_ref()
            .is_some_and(|c| c.reusable(policy.pool_idle_timeout))
        {
            *slot = None;
            *slot = Some(Conn::open(target).await?);
        }
        let Some(conn) = slot.as_mut() else {
            unreachable!("a connection was just put in the slot")
        };
        match conn.exchange(request).await {
            Ok(head) => break head,
            Err(e) => {
                *slot = None;
                match e {
                    Exchange::Unanswered(_) if attempts > 0 => {}
                    Exchange::Unanswered(why) | Exchange::Closed(why) => {
                        return Err(RequestFailure::new(
                            "connection closed by the engine before a response",
                            excerpt(&why, 300),
                        ));
                    }
                    Exchange::Malformed(why) => {
                        return Err(RequestFailure::new("request failed", excerpt(&why, 300)));
                    }
                }
            }
        }
    };
    let Some(conn) = slot.as_mut() else {
        unreachable!("the slot holds the connection the request went on")
    };
    Ok((
        head.status,
        Response {
            conn,
            framing: head.framing,
            keep_alive: head.keep_alive,
            ended: false,
        },
    ))
}

/// Idle connections for answers that are not streams (metrics pages, probes), reused by the
/// same rules as a stream's: a scrape every few hundred milliseconds costs one request and one
/// read, not a new connection or the pooled client's per-request machinery.
#[derive(Default)]
pub(super) struct IdleConns(Mutex<Vec<Conn>>);

/// The most idle connections kept (a probe and a scrape may overlap; more is a leak).
const MAX_IDLE_CONNS: usize = 4;

impl IdleConns {
    fn take(&self) -> Option<Conn> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    fn put(&self, conn: Conn) {
        let mut idle = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if conn.reusable && idle.len() < MAX_IDLE_CONNS {
            idle.push(conn);
        }
    }
}

/// Why a `GET` got no body.
pub(super) enum GetFailure {
    /// No usable answer (as a stream's request fails).
    Failed(RequestFailure),
    /// The body was longer than the limit.
    TooLarge,
}

/// `GET path` on an idle connection of `idle` (or a fresh one): the status and the body, at
/// most `limit` bytes of it.
pub(super) async fn get(
    target: &Target,
    policy: &ConnectionPolicy,
    idle: &IdleConns,
    path: &str,
    limit: usize,
) -> Result<(u16, Vec<u8>), GetFailure> {
    let Some(request) = target.get_request(path) else {
        return Err(GetFailure::Failed(RequestFailure::new(
            "request failed",
            format!("{path:?} cannot go on a request line"),
        )));
    };
    let mut slot = idle.take();
    let (status, mut resp) = exchange(target, policy, &mut slot, &request)
        .await
        .map_err(GetFailure::Failed)?;
    let mut body = Vec::new();
    while let Some(piece) = resp.chunk().await.map_err(GetFailure::Failed)? {
        if body.len() + piece.len() > limit {
            return Err(GetFailure::TooLarge);
        }
        body.extend_from_slice(piece);
    }
    drop(resp);
    if let Some(conn) = slot {
        idle.put(conn);
    }
    Ok((status.as_u16(), body))
}

/// The body of a failed (non-2xx) response, at most 64 KiB and 5 s of it.
pub(super) async fn error_body(mut resp: Response<'_>) -> String {
    const LIMIT: usize = 64 * 1024;
    let mut text = Vec::new();
    let read = async {
        while let Ok(Some(piece)) = resp.chunk().await {
            text.extend_from_slice(&piece[..piece.len().min(LIMIT - text.len())]);
            if text.len() >= LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    String::from_utf8_lossy(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_starts_with;

    #[test]
    fn targets_of_plain_http_bases() {
        let t = Target::of("http://127.0.0.1:8000", Some("k")).unwrap();
        assert_eq!(t.addr, "127.0.0.1:8000");
        assert_eq!(
            String::from_utf8(t.request(b"{}")).unwrap(),
            "POST /v1/completions HTTP/1.1\r\nhost: 127.0.0.1:8000\r\nauthorization: Bearer k\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: 2\r\n\r\n{}"
        );
        assert_eq!(
            String::from_utf8(t.get_request("/metrics").unwrap()).unwrap(),
            "GET /metrics HTTP/1.1\r\nhost: 127.0.0.1:8000\r\nauthorization: Bearer k\r\n\r\n"
        );
        assert!(t.get_request("/x\r\nx-injected: 1").is_none());
        let t = Target::of("http://[::1]/engine", None).unwrap();
        assert_eq!(t.addr, "[::1]:80");
        let head = String::from_utf8(t.head.clone()).unwrap();
        assert_starts_with(
            &head,
            "POST /engine/v1/completions HTTP/1.1\r\nhost: [::1]\r\n",
        );
        assert!(!head.contains("authorization"));
        assert_eq!(
            String::from_utf8(t.get_request("/health").unwrap()).unwrap(),
            "GET /engine/health HTTP/1.1\r\nhost: [::1]\r\n\r\n"
        );
        assert!(Target::of("https://h:1", None).is_none());
        assert!(Target::of("http://u:p@h:1", None).is_none());
        assert!(Target::of("http://h:1", Some("k\r\nx-injected: 1")).is_none());
    }

    /// Decodes all of `input`, appending its data to `out`: how many bytes it took.
    fn decode(state: &mut Chunked, input: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
        let mut at = 0;
        loop {
            let (took, data) = state.next_data(&input[at..])?;
            if let Some(d) = data {
                out.extend_from_slice(&input[at + d.start..at + d.end]);
            }
            at += took;
            if took == 0 || at == input.len() || *state == Chunked::Done {
                return Ok(at);
            }
        }
    }

    /// A chunked body decodes the same however its bytes are split between reads.
    #[test]
    fn chunked_bodies_decode_split_anywhere() {
        let second = "\n\ndata: {\"x\":\"0123456\"}\n\n";
        let wire = format!(
            "7\r\ndata: a\r\n{:x};ext=1\r\n{second}\r\n0\r\nx-trailer: 1\r\n\r\nSTRAY",
            second.len()
        );
        let wire = wire.as_bytes();
        let body_end = wire.len() - b"STRAY".len();
        for split in 0..=body_end {
            let mut state = Chunked::Size {
                value: 0,
                digits: 0,
            };
            let mut out = Vec::new();
            let took = decode(&mut state, &wire[..split], &mut out).unwrap();
            assert_eq!(took, split, "split {split}");
            let rest = decode(&mut state, &wire[split..], &mut out).unwrap();
            assert_eq!(state, Chunked::Done, "split {split}");
            assert_eq!(split + rest, body_end, "split {split}");
            assert_eq!(out, format!("data: a{second}").as_bytes(), "split {split}");
        }
    }

    #[test]
    fn malformed_chunked_framing_is_refused() {
        for wire in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"3\r\nabcd\r\n",
            b"11111111111111111\r\n",
        ] {
            let mut state = Chunked::Size {
                value: 0,
                digits: 0,
            };
            assert!(
                decode(&mut state, wire, &mut Vec::new()).is_err(),
                "{wire:?}"
            );
        }
        let mut long = b"1;".to_vec();
        long.resize(MAX_FRAMING_LINE + 10, b'x');
        let mut state = Chunked::Size {
            value: 0,
            digits: 0,
        };
        assert!(decode(&mut state, &long, &mut Vec::new()).is_err());
    }

    #[test]
    fn heads_say_how_the_body_ends() {
        let head = |text: &[u8]| {
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut parsed = httparse::Response::new(&mut headers);
            assert!(parsed.parse(text).unwrap().is_complete());
            Head::of(&parsed)
        };
        let h = head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert!(matches!(h.framing, Framing::Chunked(_)) && h.keep_alive);
        let h =
            head(b"HTTP/1.1 500 Oops\r\ncontent-length: 12\r\nconnection: close\r\n\r\n").unwrap();
        assert_eq!(
            (h.status.as_u16(), h.framing, h.keep_alive),
            (500, Framing::Length(12), false)
        );
        let h = head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
        let h = head(b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Length(0), true));
        assert!(head(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
        assert!(
            head(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n").is_err()
        );
    }
}
