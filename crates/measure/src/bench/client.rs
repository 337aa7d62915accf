//! The OpenAI-compatible HTTP client: plain-HTTP engines' streams and `GET`s on connections of
//! its own ([`direct`]), everything else on a pooled `reqwest::Client`, and a lean incremental
//! SSE parser for streamed completions.
//!
//! Connection reuse must not make errors a healthy engine did not: an engine closes an idle
//! keep-alive connection after a few seconds (llama.cpp's cpp-httplib
//! `CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND` = 5; uvicorn's `timeout_keep_alive` = 5, used by vLLM
//! via `VLLM_HTTP_TIMEOUT_KEEP_ALIVE` and by SGLang), and a request sent on it as it closes dies
//! unanswered. So the pool drops idle connections well before that ([`ConnectionPolicy`]), and a
//! request that got no response at all is sent once more on a fresh connection. A request that
//! got its response head (and so possibly streamed tokens) is never retried.
//!
//! The hot path (one call per streamed chunk) avoids allocation where it can: the SSE parser
//! reuses its buffers; what a chunk's JSON says is read by [`super::chunk`].

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::BenchError;

mod direct;

/// HTTP access to one engine. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub(crate) struct EngineClient {
    http: reqwest::Client,
    /// No idle pool: every request on it opens its own connection (the retry path).
    fresh: reqwest::Client,
    policy: ConnectionPolicy,
    /// A plain-HTTP engine's streams go on their own connections ([`direct`]); `None` for
    /// `https://`, whose streams go through the pool.
    direct: Option<Arc<direct::Target>>,
    /// Idle connections of a plain-HTTP engine's `GET`s (metrics pages, probes).
    idle: Arc<direct::IdleConns>,
    base: String,
    api_key: Option<String>,
    /// When the engine last sent anything ([`super::liveness`]).
    activity: Arc<super::liveness::Activity>,
}

/// How connections to the engine are reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionPolicy {
    /// Idle pooled connections are dropped after this long; `None` keeps them forever.
    pub(crate) pool_idle_timeout: Option<Duration>,
    /// A request that failed before any response arrived (on a connection the engine had just
    /// closed) is sent once more on a fresh connection.
    pub(crate) retry_unanswered: bool,
}

/// The shortest idle keep-alive time-out of the engines infergate knows (llama.cpp, vLLM,
/// SGLang and TensorRT-LLM's uvicorn front ends all use 5 s).
pub(crate) const ENGINE_KEEPALIVE_S: f64 = 5.0;

/// How long the pool keeps an idle connection by default: well under [`ENGINE_KEEPALIVE_S`]
/// (the engine's timer starts when it wrote the response, the pool's when it read it).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(2);
const _: () = assert!(POOL_IDLE_TIMEOUT.as_secs_f64() < ENGINE_KEEPALIVE_S);

impl Default for ConnectionPolicy {
    /// Idle connections live [`POOL_IDLE_TIMEOUT`]; unanswered requests retried.
    fn default() -> Self {
        ConnectionPolicy {
            pool_idle_timeout: Some(POOL_IDLE_TIMEOUT),
            retry_unanswered: true,
        }
    }
}

/// Why one streamed request failed; `kind` is short and groups alike failures in reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFailure {
    /// e.g. `HTTP 500 Internal Server Error`, `connection refused`, `malformed SSE`.
    pub(crate) kind: String,
    /// Extra detail (a body excerpt, the error text).
    pub(crate) detail: String,
}

impl std::fmt::Display for RequestFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

impl RequestFailure {
    pub(crate) fn new(kind: impl Into<String>, detail: impl Into<String>) -> Self {
        RequestFailure {
            kind: kind.into(),
            detail: detail.into(),
        }
    }
}

/// Normalises a base URL: no trailing `/`, no trailing `/v1`.
pub(crate) fn normalize_base(url: &str) -> String {
    let mut base = url.trim().trim_end_matches('/').to_string();
    if base.ends_with("/v1") {
        base.truncate(base.len() - 3);
    }
    base
}

impl EngineClient {
    /// A client for `base_url` with a pool big enough for `max_streams` concurrent streams,
    /// reusing connections by the default [`ConnectionPolicy`].
    pub(crate) fn new(
        base_url: &str,
        api_key: Option<String>,
        max_streams: usize,
    ) -> Result<Self, BenchError> {
        Self::with_policy(base_url, api_key, max_streams, ConnectionPolicy::default())
    }

    /// [`EngineClient::new`] with an explicit connection policy.
    pub(crate) fn with_policy(
        base_url: &str,
        api_key: Option<String>,
        max_streams: usize,
        policy: ConnectionPolicy,
    ) -> Result<Self, BenchError> {
        let base = normalize_base(base_url);
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(BenchError::Unreachable {
                url: base,
                reason: "the URL must start with http:// or https://".into(),
            });
        }
        // reqwest is built without a default TLS crypto provider; install ring's once per
        // process (an error only means one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A plain-HTTP engine needs no certificates: an empty root store instead of the
        // platform's (loading it reads every file of the system's certificate directory, for
        // each client — a fixed cost of every run).
        let plain = base.starts_with("http://");
        let build = |max_idle: usize| {
            let builder = reqwest::Client::builder()
                .pool_max_idle_per_host(max_idle)
                .pool_idle_timeout(policy.pool_idle_timeout)
                .tcp_nodelay(true)
                .connect_timeout(Duration::from_secs(10));
            let builder = if plain {
                builder.tls_certs_only(Vec::new())
            } else {
                builder
            };
            builder.build().map_err(|e| BenchError::Unreachable {
                url: base.clone(),
                reason: format!("cannot build the HTTP client: {e}"),
            })
        };
        let http = build(max_streams.max(16) + 8)?;
        let fresh = build(0)?;
        let direct = direct::Target::of(&base, api_key.as_deref()).map(Arc::new);
        Ok(EngineClient {
            http,
            fresh,
            policy,
            direct,
            idle: Arc::default(),
            base,
            api_key,
            activity: super::liveness::Activity::new(),
        })
    }

    /// When the engine last sent anything (shared by every clone of this client).
    pub(crate) fn activity(&self) -> &super::liveness::Activity {
        &self.activity
    }

    /// Sends the request `build` makes; when it died before any response arrived (the engine
    /// closed the reused connection as the request went out), sends it once more on a fresh
    /// connection. Errors after the response head are the caller's, never retried here.
    async fn send(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, reqwest::Error> {
        match build(&self.http).send().await {
            Err(e) if self.policy.retry_unanswered && is_unanswered(&e) => {
                build(&self.fresh).send().await
            }
            other => other,
        }
    }

    /// The normalised base URL (no secrets in it).
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// Absolute URL of `path` (which starts with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    fn auth(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(key) => rb.bearer_auth(key),
            None => rb,
        }
    }

    /// GET `path`; returns status and body text (at most [`MAX_BODY_BYTES`]).
    pub(crate) async fn get_text(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<(u16, String), ReadError> {
        if let Some(target) = &self.direct {
            let get = direct::get(target, &self.policy, &self.idle, path, MAX_BODY_BYTES);
            let (status, body) = match tokio::time::timeout(timeout, get).await {
                Err(_) => {
                    return Err(ReadError::Failed(RequestFailure::new(
                        "timed out",
                        format!("no answer to GET {path} within {} s", timeout.as_secs_f64()),
                    )));
                }
                Ok(Err(direct::GetFailure::Failed(f))) => return Err(ReadError::Failed(f)),
                Ok(Err(direct::GetFailure::TooLarge)) => {
                    return Err(ReadError::TooLarge {
                        what: format!("GET {}", self.url(path)),
                        limit: MAX_BODY_BYTES,
                    });
                }
                Ok(Ok(answer)) => answer,
            };
            self.activity.note();
            return Ok((status, utf8_lossy(body)));
        }
        let url = self.url(path);
        let resp = self
            .send(|http| self.auth(http.get(&url)).timeout(timeout))
            .await
            .map_err(ReadError::Transport)?;
        self.activity.note();
        let status = resp.status().as_u16();
        let text = read_limited(&format!("GET {url}"), resp, MAX_BODY_BYTES).await?;
        Ok((status, text))
    }

    /// POST a JSON body to `path`; returns status and body text (at most
    /// [`MAX_BODY_BYTES`]).
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<(u16, String), ReadError> {
        let url = self.url(path);
        let resp = self
            .send(|http| self.auth(http.post(&url)).timeout(timeout).json(body))
            .await
            .map_err(ReadError::Transport)?;
        self.activity.note();
        let status = resp.status().as_u16();
        let text = read_limited(&format!("POST {url}"), resp, MAX_BODY_BYTES).await?;
        Ok((status, text))
    }

    /// Sends a streaming completion request with a pre-serialised body on the stream's
    /// connection `conn`; the response is returned once headers arrive (non-2xx answers
    /// become a [`RequestFailure`]).
    pub(crate) async fn start_stream<'c>(
        &self,
        conn: &'c mut StreamConn,
        body: bytes::Bytes,
    ) -> Result<StreamResponse<'c>, RequestFailure> {
        let (status, resp) = match &self.direct {
            Some(target) => {
                let (status, resp) = direct::send(target, &self.policy, &mut conn.0, body).await?;
                (status, StreamResponse::Direct(resp))
            }
            None => {
                let url = self.url("/v1/completions");
                let resp = self
                    .send(|http| {
                        self.auth(http.post(&url))
                            .header(reqwest::header::CONTENT_TYPE, "application/json")
                            .header(reqwest::header::ACCEPT, "text/event-stream")
                            .body(body.clone())
                    })
                    .await
                    .map_err(|e| classify_transport(&e))?;
                (
                    resp.status(),
                    StreamResponse::Pooled {
                        resp,
                        held: bytes::Bytes::new(),
                    },
                )
            }
        };
        self.activity.note();
        if status.is_success() {
            return Ok(resp);
        }
        let kind = format!(
            "HTTP {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        )
        .trim_end()
        .to_string();
        let body = match resp {
            StreamResponse::Pooled { resp, .. } => tokio::time::timeout(
                Duration::from_secs(5),
                read_limited("", resp, ERROR_BODY_BYTES),
            )
            .await
            .ok()
            .and_then(|r| r.ok())
            .unwrap_or_default(),
            StreamResponse::Direct(resp) => direct::error_body(resp).await,
        };
        Err(RequestFailure::new(kind, excerpt(&body, 200)))
    }
}

/// A stream's own connection to a plain-HTTP engine, kept between its requests (empty for an
/// `https://` engine, whose streams use the pool).
#[derive(Default)]
pub(crate) struct StreamConn(Option<direct::Conn>);

/// A streamed response being read.
pub(crate) enum StreamResponse<'c> {
    /// Through the pooled client (`https://`), with the piece it read last.
    Pooled {
        resp: reqwest::Response,
        held: bytes::Bytes,
    },
    /// On the stream's own connection (`http://`).
    Direct(direct::Response<'c>),
}

impl StreamResponse<'_> {
    /// The next piece of the body as it arrived; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<&[u8]>, RequestFailure> {
        match self {
            StreamResponse::Pooled { resp, held } => {
                match resp.chunk().await.map_err(|e| classify_transport(&e))? {
                    Some(piece) => {
                        *held = piece;
                        Ok(Some(held))
                    }
                    None => Ok(None),
                }
            }
            StreamResponse::Direct(resp) => resp.chunk().await,
        }
    }
}

/// The most bytes read of an answer that is not a stream (a metrics page, a model list, a
/// probe's answer): vLLM's `/metrics` is a few hundred KiB, so an answer beyond this is not
/// an engine's, and reading it whole would cost memory without bound.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// The most bytes read of a failed request's body (its excerpt goes into the reason).
pub(crate) const ERROR_BODY_BYTES: usize = 64 << 10;

/// Why an answer that is not a stream could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The request or the body failed in transport.
    Transport(reqwest::Error),
    /// The same, on a plain-HTTP engine's own connection.
    Failed(RequestFailure),
    /// The body was larger than the limit (`what` is the request, e.g. `GET http://…/metrics`).
    TooLarge { what: String, limit: usize },
}

impl ReadError {
    /// The failure as a short kind and detail, as for streams.
    pub(crate) fn failure(&self) -> RequestFailure {
        match self {
            ReadError::Transport(e) => classify_transport(e),
            ReadError::Failed(f) => f.clone(),
            ReadError::TooLarge { .. } => RequestFailure::new("answer too large", self.to_string()),
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Transport(e) => classify_transport(e).fmt(f),
            ReadError::Failed(r) => r.fmt(f),
            ReadError::TooLarge { what, limit } => write!(
                f,
                "{what} answered more than {} MiB, infergate's limit for an answer that is not a stream (an engine's metrics page or model list is well under 1 MiB): the server at this URL is not the engine, or its page is broken; point --url at the engine, or start the engine without whatever fills that page",
                limit >> 20
            ),
        }
    }
}

/// Reads a body of at most `limit` bytes as text; a longer one is refused as soon as it
/// passes the limit (by its `Content-Length`, or while reading), so memory stays bounded.
pub async fn read_limited(
    what: &str,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<String, ReadError> {
    let too_large = || ReadError::TooLarge {
        what: what.to_string(),
        limit,
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut out: Vec<u8> = Vec::new();
    while let Some(piece) = resp.chunk().await.map_err(ReadError::Transport)? {
        if out.len() + piece.len() > limit {
            return Err(too_large());
        }
        out.extend_from_slice(&piece);
    }
    Ok(utf8_lossy(out))
}

/// Bytes as text, without a copy when they are valid UTF-8.
fn utf8_lossy(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Whether `e` is a request that got no response at all on a connection that was open: the
/// engine closed it (idle keep-alive) as the request went out. Connect failures and time-outs
/// are not: a fresh connection would fail the same way, or the engine is just slow.
fn is_unanswered(e: &reqwest::Error) -> bool {
    e.is_request() && !e.is_connect() && !e.is_timeout() && e.status().is_none()
}

/// The messages of an error and its sources, outermost first, without repeats.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let msg = err.to_string();
        if !msg.is_empty() && !out.iter().any(|m| m.contains(&msg)) {
            out.push(msg);
        }
        cur = err.source();
    }
    out
}

/// Groups a transport error into a short kind; the detail is the whole cause (without the
/// URL, which every request of a cell shares).
pub(crate) fn classify_transport(e: &reqwest::Error) -> RequestFailure {
    let mut chain = error_chain(e);
    let all = chain.join(": ");
    let kind = if all.contains("Connection refused") || all.contains("refused") {
        "connection refused"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "stream broken"
    } else if all.contains("connection closed before message completed")
        || all.contains("reset by peer")
        || all.contains("Broken pipe")
    {
        "connection closed by the engine before a response"
    } else {
        "request failed"
    };
    // reqwest's outer message is "error sending request for url (…)": the URL is known.
    if chain.len() > 1 && chain[0].contains("for url (") {
        chain.remove(0);
    }
    RequestFailure::new(kind, excerpt(&chain.join(": "), 300))
}

/// At most `max` characters of `s` on one line; a longer text is cut at a word boundary and
/// ends with `…`, so a reason is never cut mid-word.
pub(crate) fn excerpt(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let one_line = one_line.trim();
    if one_line.chars().count() <= max {
        return one_line.to_string();
    }
    let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    let cut = match cut.rfind(' ') {
        Some(i) if i > cut.len() / 2 => &cut[..i],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end_matches([' ', ':', ',', ';']))
}

/// The longest SSE line or event the parser holds: a streamed chunk is a few hundred bytes,
/// so anything near this is not a completion stream (and would cost memory without bound).
pub(crate) const MAX_SSE_EVENT_BYTES: usize = 1 << 20;

/// Incremental Server-Sent-Events parser over raw bytes. Calls back with each event's `data`
/// payload (multi-line data joined with `\n`); other fields and comments are ignored. A line
/// or event longer than [`MAX_SSE_EVENT_BYTES`] is dropped and reported by
/// [`SseParser::overflow`].
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// `buf[..scanned]` holds no newline (an incomplete line already searched).
    scanned: usize,
    /// A line or event went over the limit.
    overflowed: bool,
}

impl SseParser {
    pub(crate) fn new() -> Self {
        SseParser {
            buf: Vec::with_capacity(4096),
            data: Vec::with_capacity(1024),
            has_data: false,
            scanned: 0,
            overflowed: false,
        }
    }

    /// Feeds bytes as they arrive; `on_event` runs for every complete event. Returns early
    /// (and keeps the rest buffered) when `on_event` returns `false`.
    pub(crate) fn feed(&mut self, bytes: &[u8], mut on_event: impl FnMut(&[u8]) -> bool) -> bool {
        if self.overflowed {
            return false;
        }
        let keep_going = if self.buf.is_empty() {
            // The usual case (a chunk holds whole lines): parse straight from the received
            // bytes and keep only an incomplete tail.
            let (consumed, keep_going) =
                Self::lines(&mut self.data, &mut self.has_data, bytes, 0, &mut on_event);
            self.buf.extend_from_slice(&bytes[consumed..]);
            self.scanned = if keep_going { self.buf.len() } else { 0 };
            keep_going
        } else {
            // Only the new bytes can hold the newline an incomplete line waits for.
            let from = self.scanned;
            self.buf.extend_from_slice(bytes);
            let (consumed, keep_going) = Self::lines(
                &mut self.data,
                &mut self.has_data,
                &self.buf,
                from,
                &mut on_event,
            );
            self.buf.drain(..consumed);
            self.scanned = if keep_going { self.buf.len() } else { 0 };
            keep_going
        };
        if self.buf.len() > MAX_SSE_EVENT_BYTES || self.data.len() > MAX_SSE_EVENT_BYTES {
            self.overflowed = true;
            self.buf = Vec::new();
            self.data = Vec::new();
            self.has_data = false;
            self.scanned = 0;
            return false;
        }
        keep_going
    }

    /// Why the stream cannot be read any further: a line or event over the limit.
    pub(crate) fn overflow(&self) -> Option<RequestFailure> {
        self.overflowed.then(|| {
            RequestFailure::new(
                "malformed SSE",
                format!(
                    "an SSE line or event longer than {} MiB (infergate's limit; a completion chunk is a few hundred bytes): the server at this URL does not stream OpenAI completions, point --url at the engine's OpenAI API",
                    MAX_SSE_EVENT_BYTES >> 20
                ),
            )
        })
    }

    /// Parses the complete lines of `buf` (no newline before `from`); returns how many bytes
    /// they took and whether `on_event` asked to go on.
    fn lines(
        data: &mut Vec<u8>,
        has_data: &mut bool,
        buf: &[u8],
        from: usize,
        on_event: &mut impl FnMut(&[u8]) -> bool,
    ) -> (usize, bool) {
        let mut consumed = 0;
        let mut search = from;
        let mut keep_going = true;
        // The event's only data line so far, lent from `buf` instead of copied into `data`
        // (the usual event: one `data:` line); copied once a second line comes or `buf` is
        // left with the event unfinished.
        let mut lent: Option<Range<usize>> = None;
        while keep_going {
            let Some(nl) = memchr::memchr(b'\n', &buf[search..]) else {
                break;
            };
            let line_end = search + nl;
            let mut end = line_end;
            if end > consumed && buf[end - 1] == b'\r' {
                end -= 1;
            }
            let line = &buf[consumed..end];
            if line.is_empty() {
                if *has_data {
                    match lent.take() {
                        Some(value) => keep_going = on_event(&buf[value]),
                        None => {
                            keep_going = on_event(data);
                            data.clear();
                        }
                    }
                    *has_data = false;
                }
            } else if line.starts_with(b"data:") {
                let start = consumed + if line.starts_with(b"data: ") { 6 } else { 5 };
                if !*has_data {
                    lent = Some(start..end);
                    *has_data = true;
                } else {
                    if let Some(first) = lent.take() {
                        data.extend_from_slice(&buf[first]);
                    }
                    data.push(b'\n');
                    data.extend_from_slice(&buf[start..end]);
                }
            }
            consumed = line_end + 1;
            search = consumed;
        }
        if let Some(first) = lent {
            data.extend_from_slice(&buf[first]);
        }
        (consumed, keep_going)
    }

    /// End of stream: delivers a last event that lacked its blank line (lenient, as browsers).
    pub(crate) fn finish(&mut self, mut on_event: impl FnMut(&[u8]) -> bool) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.scanned = 0;
            self.feed(&rest, &mut on_event);
            self.feed(b"\n\n", &mut on_event);
        } else if self.has_data {
            on_event(&self.data);
            self.data.clear();
            self.has_data = false;
        }
    }

    /// Bytes buffered but not yet part of a complete line or event.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() + self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_ends_with;
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

    fn collect(parser: &mut SseParser, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        parser.feed(bytes, |d| {
            out.push(String::from_utf8_lossy(d).into_owned());
            true
        });
        out
    }

    #[test]
    fn sse_events_split_anywhere_are_reassembled() {
        let stream = b"data: {\"a\":1}\n\n: comment\r\nevent: x\ndata: {\"b\":\r\ndata: 2}\r\n\r\ndata:{\"c\":3}\r\n\r\ndata: [DONE]\n\n";
        for split in 0..stream.len() {
            let mut p = SseParser::new();
            let mut got = collect(&mut p, &stream[..split]);
            got.extend(collect(&mut p, &stream[split..]));
            assert_eq!(
                got,
                vec!["{\"a\":1}", "{\"b\":\n2}", "{\"c\":3}", "[DONE]"],
                "split at {split}"
            );
            assert_eq!(p.pending(), 0);
        }
    }

    /// Fed a byte at a time (an incomplete line searched once, not again per byte), the
    /// events are the same.
    #[test]
    fn sse_events_fed_byte_by_byte_are_the_same() {
        let stream =
            b"data: {\"a\":1}\n\n: ping\r\ndata: {\"b\":\r\ndata: 2}\r\n\r\ndata: [DONE]\n\n";
        let mut p = SseParser::new();
        let mut got = Vec::new();
        for b in stream.chunks(1) {
            got.extend(collect(&mut p, b));
        }
        assert_eq!(got, vec!["{\"a\":1}", "{\"b\":\n2}", "[DONE]"]);
        assert_eq!(p.pending(), 0);
    }

    /// A line that never ends is refused once past the limit, and nothing of it is kept.
    #[test]
    fn an_over_long_line_is_refused_without_holding_it() {
        let mut p = SseParser::new();
        let piece = vec![b'x'; 64 * 1024];
        let mut fed = 0;
        while p.overflow().is_none() {
            p.feed(&piece, |_| true);
            fed += piece.len();
            assert!(fed <= MAX_SSE_EVENT_BYTES + piece.len());
        }
        assert!(fed > MAX_SSE_EVENT_BYTES);
        assert_eq!(p.pending(), 0);
        assert!(!p.feed(b"data: x\n\n", |_| panic!("nothing after the overflow")));
        let f = p.overflow().unwrap();
        assert_eq!(f.kind, "malformed SSE");
        assert!(f.detail.contains("longer than 1 MiB"), "{f:?}");
    }

    #[test]
    fn an_early_stop_keeps_the_rest_for_the_next_feed() {
        let mut p = SseParser::new();
        let mut got = Vec::new();
        assert!(!p.feed(b"data: a\n\ndata: b\n\ndata: c", |d| {
            got.push(d.to_vec());
            false
        }));
        assert_eq!(got, vec![b"a".to_vec()]);
        assert!(p.pending() > 0);
        assert_eq!(collect(&mut p, b"\n\n"), vec!["b", "c"]);
        assert_eq!(p.pending(), 0);
    }

    #[test]
    fn finish_delivers_an_unterminated_event() {
        let mut p = SseParser::new();
        assert!(collect(&mut p, b"data: [DONE]").is_empty());
        let mut got = Vec::new();
        p.finish(|d| {
            got.push(d.to_vec());
            true
        });
        assert_eq!(got, vec![b"[DONE]".to_vec()]);
    }

    /// A keep-alive HTTP/1.1 server on 127.0.0.1 that closes connections idle for `idle`: a
    /// request arriving on a connection idle that long is read and the connection closed
    /// without an answer — the losing side of the keep-alive race, made deterministic (a real
    /// engine's close and the client's request cross on the wire). Each answer is a short SSE
    /// completion; with `break_after_head` the connection is closed after the first event.
    async fn idle_closing_server(
        idle: Duration,
        break_after_head: bool,
    ) -> (String, Arc<AtomicU32>, Arc<AtomicU32>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU32::new(0));
        let counter = requests.clone();
        let connections = Arc::new(AtomicU32::new(0));
        let accepted = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                accepted.fetch_add(1, SeqCst);
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut idle_since: Option<std::time::Instant> = None;
                    let mut buf = Vec::new();
                    loop {
                        // Read one request: head, then Content-Length bytes of body.
                        let request_len = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                                let len: usize = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .and_then(|v| v.trim().parse().ok())
                                    .unwrap_or(0);
                                if buf.len() >= i + 4 + len {
                                    break i + 4 + len;
                                }
                            }
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        buf.drain(..request_len);
                        counter.fetch_add(1, SeqCst);
                        if idle_since.is_some_and(|t| t.elapsed() >= idle) {
                            return; // idle time-out: close, unanswered
                        }
                        let event = "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n";
                        // Broken after the head: 100 bytes short of the length promised.
                        let (body, short_by) = if break_after_head {
                            (event.to_string(), 100)
                        } else {
                            (format!("{event}data: [DONE]\n\n"), 0)
                        };
                        let len = body.len() + short_by;
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len}\r\nconnection: keep-alive\r\n\r\n{body}"
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                        if break_after_head {
                            return;
                        }
                        idle_since = Some(std::time::Instant::now());
                    }
                });
            }
        });
        (format!("http://{addr}"), requests, connections)
    }

    /// One streamed request read to its end; the failure kind if it failed anywhere.
    async fn one_stream(
        client: &EngineClient,
        conn: &mut StreamConn,
    ) -> Result<(), RequestFailure> {
        let mut resp = client
            .start_stream(conn, bytes::Bytes::from_static(b"{}"))
            .await?;
        while resp.chunk().await?.is_some() {}
        Ok(())
    }

    /// A client for `url` whose streams go through the pool (as for `https://`) or on their
    /// own connections (as for `http://`).
    fn client(url: &str, policy: ConnectionPolicy, direct: bool) -> EngineClient {
        let mut client = EngineClient::with_policy(url, None, 1, policy).unwrap();
        assert!(client.direct.is_some(), "a plain-HTTP URL streams directly");
        if !direct {
            client.direct = None;
        }
        client
    }

    /// Both stream transports, each against its own server, at the same time.
    #[tokio::test]
    async fn keepalive_race_fails_the_old_pool_and_not_the_default_policy() {
        tokio::join!(keepalive_race(false), keepalive_race(true));
    }

    async fn keepalive_race(direct: bool) {
        let (url, requests, _) = idle_closing_server(Duration::from_secs(1), false).await;
        // reqwest's defaults, which infergate used before: idle connections kept 90 s, no
        // retry. The second request reuses the connection the server has timed out.
        let old = ConnectionPolicy {
            pool_idle_timeout: Some(Duration::from_secs(90)),
            retry_unanswered: false,
        };
        let client = client(&url, old, direct);
        let mut conn = StreamConn::default();
        one_stream(&client, &mut conn).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let err = one_stream(&client, &mut conn).await.unwrap_err();
        assert_eq!(
            err.kind, "connection closed by the engine before a response",
            "direct {direct}"
        );
        // The reason is kept whole.
        assert_ends_with(&err.detail, "connection closed before message completed");
        assert!(!err.detail.contains("127.0.0.1"), "{err:?}");

        // The same stale connection with the retry: answered on a fresh connection (the
        // server saw the raced request and its retry).
        let retrying = ConnectionPolicy {
            retry_unanswered: true,
            ..old
        };
        let client = self::client(&url, retrying, direct);
        let mut conn = StreamConn::default();
        one_stream(&client, &mut conn).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let before = requests.load(SeqCst);
        one_stream(&client, &mut conn).await.unwrap();
        assert_eq!(requests.load(SeqCst) - before, 2, "direct {direct}");

        // The default policy (short idle pool and the retry): no failures.
        let client = self::client(&url, ConnectionPolicy::default(), direct);
        let mut conn = StreamConn::default();
        let before = requests.load(SeqCst);
        let mut failures = Vec::new();
        for _ in 0..3 {
            if let Err(f) = one_stream(&client, &mut conn).await {
                failures.push(f);
            }
            tokio::time::sleep(Duration::from_millis(1300)).await;
        }
        assert!(failures.is_empty(), "direct {direct}: {failures:?}");
        assert!(requests.load(SeqCst) - before >= 3);
    }

    #[tokio::test]
    async fn a_request_that_got_its_response_is_never_retried() {
        for direct in [false, true] {
            let (url, requests, _) = idle_closing_server(Duration::from_secs(60), true).await;
            let client = client(&url, ConnectionPolicy::default(), direct);
            let err = one_stream(&client, &mut StreamConn::default())
                .await
                .unwrap_err();
            assert_eq!(err.kind, "stream broken", "direct {direct}: {err:?}");
            assert_eq!(requests.load(SeqCst), 1);
        }
    }

    /// A stream's requests go back to back on its one connection.
    #[tokio::test]
    async fn a_stream_reuses_its_connection() {
        let (url, requests, connections) =
            idle_closing_server(Duration::from_secs(60), false).await;
        let client = client(&url, ConnectionPolicy::default(), true);
        let mut conn = StreamConn::default();
        for _ in 0..5 {
            one_stream(&client, &mut conn).await.unwrap();
        }
        assert_eq!(requests.load(SeqCst), 5);
        assert_eq!(connections.load(SeqCst), 1);
    }

    #[test]
    fn excerpts_cut_at_a_word_with_an_ellipsis() {
        assert_eq!(excerpt("short\nline", 40), "short line");
        let e = excerpt("connection closed before message completed", 30);
        assert_eq!(e, "connection closed before…");
        assert!(e.chars().count() <= 30);
    }

    #[test]
    fn base_urls_are_normalised() {
        assert_eq!(normalize_base("http://h:1/v1/"), "http://h:1");
        assert_eq!(normalize_base(" http://h:1 "), "http://h:1");
    }
}
