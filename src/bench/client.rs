//! The OpenAI-compatible HTTP client: one pooled `reqwest::Client`, probe requests, and a lean
//! incremental SSE parser for streamed completions.
//!
//! The hot path (one call per streamed chunk) avoids allocation where it can: the SSE parser
//! reuses its buffers and chunk JSON is deserialised into borrowed fields.

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;

use super::BenchError;

/// HTTP access to one engine. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub(crate) struct EngineClient {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
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
    /// A client for `base_url` with a pool big enough for `max_streams` concurrent streams.
    pub(crate) fn new(
        base_url: &str,
        api_key: Option<String>,
        max_streams: usize,
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
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(max_streams.max(16) + 8)
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| BenchError::Unreachable {
                url: base.clone(),
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(EngineClient {
            http,
            base,
            api_key,
        })
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
        let resp = self
            .auth(self.http.get(self.url(path)))
            .timeout(timeout)
            .send()
            .await?;
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
        let resp = self
            .auth(self.http.post(self.url(path)))
            .timeout(timeout)
            .json(body)
            .send()
            .await?;
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
        let resp = self
            .auth(self.http.post(self.url("/v1/completions")))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .body(body)
            .send()
            .await
            .map_err(|e| classify_transport(&e))?;
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

/// Groups a transport error into a short kind.
pub(crate) fn classify_transport(e: &reqwest::Error) -> RequestFailure {
    let text = format!("{e:#}");
    let source_text = {
        let mut s = String::new();
        let mut cur: Option<&dyn std::error::Error> = Some(e);
        while let Some(err) = cur {
            s.push_str(&err.to_string());
            s.push_str(": ");
            cur = err.source();
        }
        s
    };
    let kind = if source_text.contains("Connection refused") || source_text.contains("refused") {
        "connection refused"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "stream broken"
    } else {
        "request failed"
    };
    RequestFailure::new(
        kind,
        excerpt(&source_text, 300)
            .trim_end_matches(": ")
            .to_string(),
    )
    .with_fallback(&text)
}

impl RequestFailure {
    fn with_fallback(mut self, text: &str) -> Self {
        if self.detail.is_empty() {
            self.detail = excerpt(text, 300);
        }
        self
    }
}

/// At most `max` characters of `s`, on a char boundary, single line.
pub(crate) fn excerpt(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    one_line.trim().to_string()
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
        self.buf.extend_from_slice(bytes);
        let mut consumed = 0;
        let mut keep_going = true;
        while keep_going {
            let Some(nl) = memchr(b'\n', &self.buf[consumed..]) else {
                break;
            };
            let line_end = consumed + nl;
            let mut line = &self.buf[consumed..line_end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                if self.has_data {
                    keep_going = on_event(&self.data);
                    self.data.clear();
                    self.has_data = false;
                }
            } else if let Some(value) = line.strip_prefix(b"data:") {
                let value = value.strip_prefix(b" ").unwrap_or(value);
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            consumed = line_end + 1;
        }
        self.buf.drain(..consumed);
        keep_going
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

    #[test]
    fn base_urls_are_normalised() {
        assert_eq!(normalize_base("http://h:1/v1/"), "http://h:1");
        assert_eq!(normalize_base(" http://h:1 "), "http://h:1");
    }
}
