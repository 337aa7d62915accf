//! The OpenAI-compatible HTTP client: one pooled `reqwest::Client`, probe requests, and a lean
//! incremental SSE parser for streamed completions.
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
//! reuses its buffers and chunk JSON is deserialised into borrowed fields.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::BenchError;

/// HTTP access to one engine. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub(crate) struct EngineClient {
    http: reqwest::Client,
    /// No idle pool: every request on it opens its own connection (the retry path).
    fresh: reqwest::Client,
    policy: ConnectionPolicy,
    base: String,
    api_key: Option<String>,
    /// When the engine last sent anything ([`super::liveness`]).
    activity: Arc<super::liveness::Activity>,
}

/// How connections to the engine are reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnectionPolicy {
    /// Idle pooled connections are dropped after this long; `None` keeps them forever.
    pub pool_idle_timeout: Option<Duration>,
    /// A request that failed before any response arrived (on a connection the engine had just
    /// closed) is sent once more on a fresh connection.
    pub retry_unanswered: bool,
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
pub(crate) struct RequestFailure {
    /// e.g. `HTTP 500 Internal Server Error`, `connection refused`, `malformed SSE`.
    pub kind: String,
    /// Extra detail (a body excerpt, the error text).
    pub detail: String,
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
        Ok(EngineClient {
            http,
            fresh,
            policy,
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

    /// GET `path`; returns status and body text.
    pub(crate) async fn get_text(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<(u16, String), reqwest::Error> {
        let url = self.url(path);
        let resp = self
            .send(|http| self.auth(http.get(&url)).timeout(timeout))
            .await?;
        self.activity.note();
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, text))
    }

    /// POST a JSON body to `path`; returns status and body text.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
        timeout: Duration,
    ) -> Result<(u16, String), reqwest::Error> {
        let url = self.url(path);
        let resp = self
            .send(|http| self.auth(http.post(&url)).timeout(timeout).json(body))
            .await?;
        self.activity.note();
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        Ok((status, text))
    }

    /// Sends a streaming completion request with a pre-serialised body; the response is
    /// returned once headers arrive (non-2xx answers become a [`RequestFailure`]).
    pub(crate) async fn start_stream(
        &self,
        body: bytes::Bytes,
    ) -> Result<reqwest::Response, RequestFailure> {
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
        self.activity.note();
        let status = resp.status();
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
        let body = tokio::time::timeout(Duration::from_secs(5), resp.text())
            .await
            .ok()
            .and_then(|r| r.ok())
            .unwrap_or_default();
        Err(RequestFailure::new(kind, excerpt(&body, 200)))
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

/// Incremental Server-Sent-Events parser over raw bytes. Calls back with each event's `data`
/// payload (multi-line data joined with `\n`); other fields and comments are ignored.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    buf: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    pub(crate) fn new() -> Self {
        SseParser {
            buf: Vec::with_capacity(4096),
            data: Vec::with_capacity(1024),
            has_data: false,
        }
    }

    /// Feeds bytes as they arrive; `on_event` runs for every complete event. Returns early
    /// (and keeps the rest buffered) when `on_event` returns `false`.
    pub(crate) fn feed(&mut self, bytes: &[u8], mut on_event: impl FnMut(&[u8]) -> bool) -> bool {
        if self.buf.is_empty() {
            // The usual case (a chunk holds whole lines): parse straight from the received
            // bytes and keep only an incomplete tail.
            let (consumed, keep_going) =
                Self::lines(&mut self.data, &mut self.has_data, bytes, &mut on_event);
            self.buf.extend_from_slice(&bytes[consumed..]);
            return keep_going;
        }
        self.buf.extend_from_slice(bytes);
        let (consumed, keep_going) =
            Self::lines(&mut self.data, &mut self.has_data, &self.buf, &mut on_event);
        self.buf.drain(..consumed);
        keep_going
    }

    /// Parses the complete lines of `buf`; returns how many bytes they took and whether
    /// `on_event` asked to go on.
    fn lines(
        data: &mut Vec<u8>,
        has_data: &mut bool,
        buf: &[u8],
        on_event: &mut impl FnMut(&[u8]) -> bool,
    ) -> (usize, bool) {
        let mut consumed = 0;
        let mut keep_going = true;
        while keep_going {
            let Some(nl) = memchr(b'\n', &buf[consumed..]) else {
                break;
            };
            let line_end = consumed + nl;
            let mut line = &buf[consumed..line_end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                if *has_data {
                    keep_going = on_event(data);
                    data.clear();
                    *has_data = false;
                }
            } else if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                if *has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                *has_data = true;
            }
            consumed = line_end + 1;
        }
        (consumed, keep_going)
    }

    /// End of stream: delivers a last event that lacked its blank line (lenient, as browsers).
    pub(crate) fn finish(&mut self, mut on_event: impl FnMut(&[u8]) -> bool) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
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

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|b| *b == needle)
}

/// What one streamed completion chunk says, in engine-neutral terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChunkInfo {
    /// The chunk carries generated text (completions `text` or chat `delta.content`).
    pub has_text: bool,
    /// Cumulative `usage.completion_tokens`, when the chunk carries usage.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`, when present.
    pub prompt_tokens: Option<u64>,
    /// A choice has a `finish_reason`.
    pub finished: bool,
    /// Chunk carries choices (a usage-only chunk has none).
    pub has_choices: bool,
}

/// One SSE `data` payload.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StreamEvent {
    Chunk(ChunkInfo),
    /// `[DONE]`.
    Done,
}

#[derive(Deserialize)]
struct ChunkMsg<'a> {
    #[serde(default, borrow)]
    choices: Vec<ChoiceMsg<'a>>,
    #[serde(default)]
    usage: Option<UsageMsg>,
    #[serde(default, borrow)]
    error: Option<ErrorMsg<'a>>,
}

#[derive(Deserialize)]
struct ChoiceMsg<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<DeltaMsg<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct DeltaMsg<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageMsg {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorMsg<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Object {
        #[serde(default, borrow)]
        message: Option<Cow<'a, str>>,
    },
}

/// Parses one SSE data payload of a streamed completion. An `error` object in the stream or
/// unparsable JSON is a [`RequestFailure`].
pub(crate) fn parse_stream_event(payload: &[u8]) -> Result<StreamEvent, RequestFailure> {
    let trimmed = payload.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(StreamEvent::Done);
    }
    let msg: ChunkMsg<'_> = serde_json::from_slice(trimmed).map_err(|e| {
        RequestFailure::new(
            "malformed SSE",
            format!(
                "{e}: {}",
                excerpt(
                    &String::from_utf8_lossy(&trimmed[..trimmed.len().min(120)]),
                    120
                )
            ),
        )
    })?;
    if let Some(err) = msg.error {
        let detail = match err {
            ErrorMsg::Text(t) => t.into_owned(),
            ErrorMsg::Object { message } => message.map(|m| m.into_owned()).unwrap_or_default(),
        };
        return Err(RequestFailure::new(
            "engine error in stream",
            excerpt(&detail, 200),
        ));
    }
    let mut info = ChunkInfo {
        has_choices: !msg.choices.is_empty(),
        ..ChunkInfo::default()
    };
    for c in &msg.choices {
        let text_len = c.text.as_ref().map(|t| t.len()).unwrap_or(0)
            + c.delta
                .as_ref()
                .map(|d| {
                    d.content.as_ref().map(|t| t.len()).unwrap_or(0)
                        + d.reasoning_content.as_ref().map(|t| t.len()).unwrap_or(0)
                })
                .unwrap_or(0);
        info.has_text |= text_len > 0;
        info.finished |= c.finish_reason.is_some();
    }
    if let Some(u) = msg.usage {
        info.completion_tokens = u.completion_tokens;
        info.prompt_tokens = u.prompt_tokens;
    }
    Ok(StreamEvent::Chunk(info))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let stream = b"data: {\"a\":1}\n\n: comment\r\nevent: x\ndata: {\"b\":\r\ndata: 2}\r\n\r\ndata: [DONE]\n\n";
        for split in 0..stream.len() {
            let mut p = SseParser::new();
            let mut got = collect(&mut p, &stream[..split]);
            got.extend(collect(&mut p, &stream[split..]));
            assert_eq!(
                got,
                vec!["{\"a\":1}", "{\"b\":\n2}", "[DONE]"],
                "split at {split}"
            );
            assert_eq!(p.pending(), 0);
        }
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

    #[test]
    fn vllm_continuous_usage_chunk() {
        let ev = parse_stream_event(br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":8192,"total_tokens":8195,"completion_tokens":3}}"#).unwrap();
        assert_eq!(
            ev,
            StreamEvent::Chunk(ChunkInfo {
                has_text: true,
                completion_tokens: Some(3),
                prompt_tokens: Some(8192),
                finished: false,
                has_choices: true
            })
        );
    }

    #[test]
    fn chat_delta_usage_only_and_done() {
        let ev = parse_stream_event(
            br#"{"choices":[{"index":0,"delta":{"content":"hi \"x\""},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        let StreamEvent::Chunk(c) = ev else { panic!() };
        assert!(c.has_text && c.finished && c.completion_tokens.is_none());
        let ev = parse_stream_event(
            br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":64}}"#,
        )
        .unwrap();
        let StreamEvent::Chunk(c) = ev else { panic!() };
        assert!(!c.has_choices && !c.has_text);
        assert_eq!(c.completion_tokens, Some(64));
        assert_eq!(parse_stream_event(b" [DONE] ").unwrap(), StreamEvent::Done);
    }

    #[test]
    fn llamacpp_final_chunk_with_timings() {
        let ev = parse_stream_event(br#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1,"model":"m","system_fingerprint":"b1","object":"text_completion","id":"x","usage":{"completion_tokens":128,"prompt_tokens":512,"total_tokens":640},"timings":{"prompt_n":512,"predicted_n":128}}"#).unwrap();
        let StreamEvent::Chunk(c) = ev else { panic!() };
        assert!(c.finished && !c.has_text);
        assert_eq!(c.completion_tokens, Some(128));
    }

    #[test]
    fn malformed_and_error_payloads_fail_with_a_kind() {
        let e = parse_stream_event(b"{not json").unwrap_err();
        assert_eq!(e.kind, "malformed SSE");
        let e =
            parse_stream_event(br#"{"error":{"message":"out of memory","code":500}}"#).unwrap_err();
        assert_eq!(e.kind, "engine error in stream");
        assert!(e.detail.contains("out of memory"));
    }

    /// A keep-alive HTTP/1.1 server on 127.0.0.1 that closes connections idle for `idle`: a
    /// request arriving on a connection idle that long is read and the connection closed
    /// without an answer — the losing side of the keep-alive race, made deterministic (a real
    /// engine's close and the client's request cross on the wire). Each answer is a short SSE
    /// completion; with `break_after_head` the connection is closed after the first event.
    async fn idle_closing_server(
        idle: Duration,
        break_after_head: bool,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicU32>) {
        use std::sync::atomic::{AtomicU32, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(AtomicU32::new(0));
        let counter = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut idle_since: Option<std::time::Instant> = None;
                    let mut buf = Vec::new();
                    loop {
                        // Read one request: head, then Content-Length bytes of body.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        while buf.len() < head_end + len {
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head_end + len);
                        counter.fetch_add(1, Ordering::SeqCst);
                        if idle_since.is_some_and(|t| t.elapsed() >= idle) {
                            return; // idle time-out: close, unanswered
                        }
                        let event = "data: {\"choices\":[{\"text\":\"a\",\"finish_reason\":\"length\"}]}\n\n";
                        let body = if break_after_head {
                            event.to_string()
                        } else {
                            format!("{event}data: [DONE]\n\n")
                        };
                        let len = if break_after_head {
                            body.len() + 100
                        } else {
                            body.len()
                        };
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
        (format!("http://{addr}"), requests)
    }

    /// One streamed request read to its end; the failure kind if it failed anywhere.
    async fn one_stream(client: &EngineClient) -> Result<(), RequestFailure> {
        let mut resp = client
            .start_stream(bytes::Bytes::from_static(b"{}"))
            .await?;
        while resp
            .chunk()
            .await
            .map_err(|e| classify_transport(&e))?
            .is_some()
        {}
        Ok(())
    }

    #[tokio::test]
    async fn keepalive_race_fails_the_old_pool_and_not_the_default_policy() {
        let (url, requests) = idle_closing_server(Duration::from_secs(1), false).await;
        // reqwest's defaults, which infergate used before: idle connections kept 90 s, no
        // retry. The second request reuses the connection the server has timed out.
        let old = ConnectionPolicy {
            pool_idle_timeout: Some(Duration::from_secs(90)),
            retry_unanswered: false,
        };
        let client = EngineClient::with_policy(&url, None, 1, old).unwrap();
        one_stream(&client).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let err = one_stream(&client).await.unwrap_err();
        assert_eq!(
            err.kind,
            "connection closed by the engine before a response"
        );
        assert!(
            err.detail
                .ends_with("connection closed before message completed"),
            "the reason is kept whole: {err:?}"
        );
        assert!(!err.detail.contains("127.0.0.1"), "{err:?}");

        // The same stale connection with the retry: answered on a fresh connection (the
        // server saw the raced request and its retry).
        let retrying = ConnectionPolicy {
            retry_unanswered: true,
            ..old
        };
        let client = EngineClient::with_policy(&url, None, 1, retrying).unwrap();
        one_stream(&client).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1300)).await;
        let before = requests.load(std::sync::atomic::Ordering::SeqCst);
        one_stream(&client).await.unwrap();
        assert_eq!(
            requests.load(std::sync::atomic::Ordering::SeqCst) - before,
            2
        );

        // The default policy (short idle pool and the retry): no failures.
        let client = EngineClient::new(&url, None, 1).unwrap();
        let before = requests.load(std::sync::atomic::Ordering::SeqCst);
        let mut failures = Vec::new();
        for _ in 0..3 {
            if let Err(f) = one_stream(&client).await {
                failures.push(f);
            }
            tokio::time::sleep(Duration::from_millis(1300)).await;
        }
        assert!(failures.is_empty(), "{failures:?}");
        assert!(requests.load(std::sync::atomic::Ordering::SeqCst) - before >= 3);
    }

    #[tokio::test]
    async fn a_request_that_got_its_response_is_never_retried() {
        let (url, requests) = idle_closing_server(Duration::from_secs(60), true).await;
        let client = EngineClient::new(&url, None, 1).unwrap();
        let err = one_stream(&client).await.unwrap_err();
        assert_eq!(err.kind, "stream broken", "{err:?}");
        assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
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
