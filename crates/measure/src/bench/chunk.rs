//! What one streamed completion chunk says: the few fields the accounting needs (text or not,
//! cumulative usage, finish reason, an error), from the SSE `data` payload of any engine's
//! completions or chat stream.
//!
//! Every chunk goes through here, so the usual chunk is read by a scan ([`scan::chunk`]) that
//! walks the JSON once and reads only those fields; it answers only for JSON it fully
//! validated and whose answer is certain, and leaves everything else (an `error` in the
//! stream, escaped keys, surrogate escapes, floats where counts belong, malformed JSON, …)
//! to `serde_json`, which stays the meaning of a chunk (the unit tests hold the scan to it).

use std::borrow::Cow;

use serde::Deserialize;

use super::client::{RequestFailure, excerpt};

/// What one streamed completion chunk says, in engine-neutral terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChunkInfo {
    /// The chunk carries generated text (completions `text` or chat `delta.content`).
    pub(crate) has_text: bool,
    /// Cumulative `usage.completion_tokens`, when the chunk carries usage.
    pub(crate) completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`, when present.
    pub(crate) prompt_tokens: Option<u64>,
    /// The first `finish_reason` of the chunk's choices, when one has one.
    pub(crate) finish: Option<Finish>,
    /// Chunk carries choices (a usage-only chunk has none).
    pub(crate) has_choices: bool,
}

/// A `finish_reason`, as far as the accounting cares: `length` and `stop` end a request as
/// asked; anything else (`abort`, `error`, `content_filter`, an empty string) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// `length`: the request reached its `max_tokens`.
    Length,
    /// `stop`: the model stopped (EOS or a stop string).
    Stop,
    /// Any other reason.
    Other,
}

impl Finish {
    /// The kind of a `finish_reason` string.
    pub(crate) fn of(reason: &[u8]) -> Finish {
        match reason {
            b"length" => Finish::Length,
            b"stop" => Finish::Stop,
            _ => Finish::Other,
        }
    }
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
    if let Some(info) = scan::chunk(trimmed) {
        return Ok(StreamEvent::Chunk(info));
    }
    deserialize(trimmed)
}

/// The full deserialisation of a chunk: the answer for everything [`scan::chunk`] leaves.
fn deserialize(trimmed: &[u8]) -> Result<StreamEvent, RequestFailure> {
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
        if info.finish.is_none() {
            info.finish = c.finish_reason.as_ref().map(|r| Finish::of(r.as_bytes()));
        }
    }
    if let Some(u) = msg.usage {
        info.completion_tokens = u.completion_tokens;
        info.prompt_tokens = u.prompt_tokens;
    }
    Ok(StreamEvent::Chunk(info))
}

mod scan;

#[cfg(test)]
mod tests {
    use super::*;

    /// The chunk `payload` parses to; anything else fails the test.
    #[track_caller]
    fn chunk_info(payload: &[u8]) -> ChunkInfo {
        match parse_stream_event(payload).unwrap() {
            StreamEvent::Chunk(c) => c,
            other => panic!("{other:?}"),
        }
    }

    /// The kind of failure `payload` parses to.
    #[track_caller]
    fn failure_kind(payload: &[u8]) -> String {
        parse_stream_event(payload).unwrap_err().kind
    }

    /// Asserts `serde_json` reads `payload` as the chunk the scan read from it.
    #[track_caller]
    fn assert_serde_agrees(payload: &[u8], info: ChunkInfo) {
        let text = String::from_utf8_lossy(payload);
        assert_eq!(deserialize(payload), Ok(StreamEvent::Chunk(info)), "{text}");
    }

    #[test]
    fn vllm_continuous_usage_chunk() {
        let c = chunk_info(br#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":8192,"total_tokens":8195,"completion_tokens":3}}"#);
        assert_eq!(
            c,
            ChunkInfo {
                has_text: true,
                completion_tokens: Some(3),
                prompt_tokens: Some(8192),
                finish: None,
                has_choices: true
            }
        );
    }

    #[test]
    fn chat_delta_usage_only_and_done() {
        let c = chunk_info(
            br#"{"choices":[{"index":0,"delta":{"content":"hi \"x\""},"finish_reason":"length"}]}"#,
        );
        assert!(c.has_text && c.finish == Some(Finish::Length) && c.completion_tokens.is_none());
        let c = chunk_info(br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":64}}"#);
        assert!(!c.has_choices && !c.has_text);
        assert_eq!(c.completion_tokens, Some(64));
        assert_eq!(parse_stream_event(b" [DONE] ").unwrap(), StreamEvent::Done);
    }

    #[test]
    fn llamacpp_final_chunk_with_timings() {
        let c = chunk_info(br#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"created":1,"model":"m","system_fingerprint":"b1","object":"text_completion","id":"x","usage":{"completion_tokens":128,"prompt_tokens":512,"total_tokens":640},"timings":{"prompt_n":512,"predicted_n":128}}"#);
        assert!(c.finish == Some(Finish::Length) && !c.has_text);
        assert_eq!(c.completion_tokens, Some(128));
    }

    #[test]
    fn malformed_and_error_payloads_fail_with_a_kind() {
        assert_eq!(failure_kind(b"{not json"), "malformed SSE");
        let e =
            parse_stream_event(br#"{"error":{"message":"out of memory","code":500}}"#).unwrap_err();
        assert_eq!(e.kind, "engine error in stream");
        assert!(e.detail.contains("out of memory"));
    }

    /// Chunks as the engines send them: the scan reads each (no fallback) and agrees with
    /// `serde_json`.
    #[test]
    fn engine_chunks_take_the_scan_and_agree_with_serde() {
        let llamacpp = include_str!("../../../../tests/fixtures/llamacpp-stream.txt");
        let mut chunks: Vec<String> = llamacpp
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(str::to_string)
            .collect();
        assert!(chunks.len() > 10);
        chunks.extend(
            [
                // vLLM completions with continuous usage, and its final usage-only chunk.
                r#"{"id":"cmpl-9f","object":"text_completion","created":1733000000,"model":"meta-llama/Llama-3.1-8B","choices":[{"index":0,"text":" caf\u00e9\n","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":{"prompt_tokens":8192,"total_tokens":8195,"completion_tokens":3,"prompt_tokens_details":null}}"#,
                r#"{"id":"cmpl-9f","object":"text_completion","created":1733000000,"model":"m","choices":[],"usage":{"prompt_tokens":8192,"total_tokens":8448,"completion_tokens":256}}"#,
                // vLLM chat: role chunk, content with escapes, reasoning, finish.
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"say \"hi\" \\ 日本"},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":"think","content":null},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","stop_reason":null}]}"#,
                // SGLang: `usage` null on content chunks, `matched_stop`.
                r#"{"id":"a1b2","object":"text_completion","created":1733000000,"model":"default","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
                r#"{"id":"a1b2","object":"text_completion","created":1733000000,"model":"default","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":{"prompt_tokens":512,"completion_tokens":128,"total_tokens":640,"prompt_tokens_details":null,"reasoning_tokens":0}}"#,
                // TensorRT-LLM's trtllm-serve.
                r#"{"id":"cmpl-3","object":"text_completion","created":1733000000,"model":"llama","choices":[{"index":0,"text":" a","logprobs":null,"context_logits":null,"finish_reason":null,"stop_reason":null,"disaggregated_params":null,"avg_decoded_tokens_per_iter":1.0}],"usage":null,"prompt_token_ids":null}"#,
                // Whitespace between tokens (Python's json.dumps default separators).
                "{\"choices\": [{\"text\": \" x\", \"finish_reason\": null}], \"usage\": {\"completion_tokens\": 7}}",
                "{}",
                r#"{"error":null,"choices":[]}"#,
            ]
            .map(str::to_string),
        );
        for c in &chunks {
            let info = scan::chunk(c.as_bytes()).unwrap_or_else(|| panic!("scan fell back: {c}"));
            assert_serde_agrees(c.as_bytes(), info);
        }
    }

    /// What the scan leaves to `serde_json`, and what that then says.
    #[test]
    fn unusual_chunks_are_left_to_serde() {
        let left = [
            r#"{"error":{"message":"out of memory"}}"#,
            r#"{"choices":[{"text":"a"}],"error":"boom"}"#,
            r#"{"choi\u0063es":[{"text":"a"}]}"#,
            r#"{"choices":[],"choices":[]}"#,
            r#"{"choices":[{"text":"a","text":"b"}]}"#,
            r#"{"usage":{"completion_tokens":3.0}}"#,
            r#"{"usage":{"completion_tokens":-1}}"#,
            r#"{"usage":{"completion_tokens":18446744073709551616}}"#,
            r#"{"choices":[{"text":"\ud83d\ude00"}]}"#,
            r#"{"choices":null}"#,
            r#"{"choices":[{"text":5}]}"#,
            r#"{"choices":[{"text":"a"}]} x"#,
            r#"{"choices":[{"text":"a"},]}"#,
            "{\"choices\":[{\"text\":\"a\tb\"}]}",
            r#"[[],null,null]"#,
            r#"{"x":01}"#,
        ];
        for c in left {
            assert_eq!(scan::chunk(c.as_bytes()), None, "{c}");
        }
        assert_eq!(failure_kind(left[0].as_bytes()), "engine error in stream");
        assert_eq!(failure_kind(left[5].as_bytes()), "malformed SSE");
        assert!(
            chunk_info(left[8].as_bytes()).has_text,
            "a surrogate pair is text"
        );
    }

    /// Random chunks, valid and mutated: whenever the scan answers, `serde_json` gives the
    /// same answer (the scan is never more lenient nor different), and on valid chunks the
    /// scan does answer.
    #[test]
    fn the_scan_never_disagrees_with_serde() {
        use rand::rngs::StdRng;
        use rand::{RngExt, SeedableRng};
        let mut rng = StdRng::seed_from_u64(19);
        let (mut valid, mut valid_scanned, mut mutated_scanned) = (0, 0, 0);
        for _ in 0..6000 {
            let chunk = random_chunk(&mut rng);
            let p = chunk.as_bytes();
            let serde = deserialize(p);
            if serde.is_ok() && !chunk.contains("\"error\"") && !chunk.contains("\\ud") {
                valid += 1;
            }
            if let Some(info) = scan::chunk(p) {
                valid_scanned += 1;
                assert_eq!(serde, Ok(StreamEvent::Chunk(info)), "{chunk}");
            }
            for _ in 0..4 {
                let m = mutate(&mut rng, p);
                let m = m.trim_ascii();
                if let Some(info) = scan::chunk(m) {
                    mutated_scanned += 1;
                    assert_serde_agrees(m, info);
                }
            }
        }
        // The generator mostly writes valid chunks, and the scan reads most of them.
        assert!(
            valid > 2000 && valid_scanned * 10 > valid * 8,
            "{valid} {valid_scanned}"
        );
        assert!(mutated_scanned > 1000, "{mutated_scanned}");

        fn random_chunk(rng: &mut StdRng) -> String {
            let mut members = Vec::new();
            if rng.random_range(0..10) < 9 {
                let n = rng.random_range(0..3);
                let choices: Vec<String> = (0..n).map(|_| random_choice(rng)).collect();
                members.push(format!("\"choices\":[{}]", choices.join(",")));
            }
            match rng.random_range(0..4) {
                0 => members.push("\"usage\":null".into()),
                1 => {
                    let mut u = vec![
                        format!("\"completion_tokens\":{}", random_count(rng)),
                        format!("\"total_tokens\":{}", random_count(rng)),
                    ];
                    if rng.random_range(0..2) == 0 {
                        u.push(format!("\"prompt_tokens\":{}", random_count(rng)));
                    }
                    members.push(format!("\"usage\":{{{}}}", shuffled(rng, u).join(",")));
                }
                _ => {}
            }
            if rng.random_range(0..30) == 0 {
                members.push(format!("\"error\":{}", random_value(rng, 2)));
            }
            for key in ["id", "object", "created", "model", "timings", "x"] {
                if rng.random_range(0..2) == 0 {
                    members.push(format!("\"{key}\":{}", random_value(rng, 3)));
                }
            }
            let sep = if rng.random_range(0..3) == 0 {
                ", "
            } else {
                ","
            };
            format!("{{{}}}", shuffled(rng, members).join(sep))
        }

        fn random_choice(rng: &mut StdRng) -> String {
            let mut m = vec![format!("\"index\":{}", rng.random_range(0..4))];
            match rng.random_range(0..3) {
                0 => m.push(format!("\"text\":{}", random_text(rng))),
                1 => {
                    let mut d = Vec::new();
                    if rng.random_range(0..2) == 0 {
                        d.push("\"role\":\"assistant\"".to_string());
                    }
                    for key in ["content", "reasoning_content"] {
                        if rng.random_range(0..2) == 0 {
                            d.push(format!("\"{key}\":{}", random_text(rng)));
                        }
                    }
                    m.push(format!("\"delta\":{{{}}}", d.join(",")));
                }
                _ => {}
            }
            m.push(format!(
                "\"finish_reason\":{}",
                ["null", "\"length\"", "\"stop\"", "\"\""][rng.random_range(0..4)]
            ));
            m.push(format!("\"logprobs\":{}", random_value(rng, 2)));
            format!("{{{}}}", shuffled(rng, m).join(","))
        }

        fn random_text(rng: &mut StdRng) -> String {
            const PIECES: [&str; 14] = [
                "",
                "a",
                " the",
                "é",
                "日本",
                "\\n",
                "\\\"",
                "\\\\",
                "\\u00e9",
                "\\ud83d\\ude00",
                "\\/",
                "\\t",
                "\\u0000",
                "😀",
            ];
            if rng.random_range(0..8) == 0 {
                return "null".into();
            }
            let n = rng.random_range(0..4);
            let s: String = (0..n)
                .map(|_| PIECES[rng.random_range(0..PIECES.len())])
                .collect();
            format!("\"{s}\"")
        }

        fn random_count(rng: &mut StdRng) -> String {
            const COUNTS: [&str; 9] = [
                "0",
                "7",
                "128",
                "8192",
                "null",
                "18446744073709551615",
                "1.0",
                "1e2",
                "-3",
            ];
            if rng.random_range(0..4) == 0 {
                COUNTS[rng.random_range(0..COUNTS.len())].into()
            } else {
                rng.random_range(0..100_000u64).to_string()
            }
        }

        fn random_value(rng: &mut StdRng, depth: u32) -> String {
            match rng.random_range(0..if depth == 0 { 5 } else { 7 }) {
                0 => "null".into(),
                1 => ["true", "false"][rng.random_range(0..2)].into(),
                2 => ["0", "-12", "3.25", "1e-7", "6.02E+23", "1733000000"][rng.random_range(0..6)]
                    .into(),
                3 | 4 => random_text(rng),
                5 => {
                    let n = rng.random_range(0..3);
                    let v: Vec<String> = (0..n).map(|_| random_value(rng, depth - 1)).collect();
                    format!("[{}]", v.join(" , "))
                }
                _ => {
                    let n = rng.random_range(0..3);
                    let v: Vec<String> = (0..n)
                        .map(|i| format!("\"k{i}\" : {}", random_value(rng, depth - 1)))
                        .collect();
                    format!("{{{}}}", v.join(","))
                }
            }
        }

        fn shuffled(rng: &mut StdRng, mut v: Vec<String>) -> Vec<String> {
            for i in (1..v.len()).rev() {
                v.swap(i, rng.random_range(0..=i));
            }
            v
        }

        fn mutate(rng: &mut StdRng, p: &[u8]) -> Vec<u8> {
            const ALPHABET: &[u8] = b"{}[]\":,\\ 0123456789.eE-+tfnulax\t\x01\xc3\xa9";
            let mut m = p.to_vec();
            for _ in 0..rng.random_range(1..3) {
                if m.is_empty() {
                    break;
                }
                let at = rng.random_range(0..m.len());
                let c = ALPHABET[rng.random_range(0..ALPHABET.len())];
                match rng.random_range(0..4) {
                    0 => {
                        m.remove(at);
                    }
                    1 => m.insert(at, c),
                    2 => m[at] = c,
                    _ => {
                        let end = (at + rng.random_range(1..12)).min(m.len());
                        let piece = m[at..end].to_vec();
                        m.splice(at..at, piece);
                    }
                }
            }
            m
        }
    }
}
