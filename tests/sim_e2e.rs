//! End-to-end tests of `infergate sim`: the real binary on 127.0.0.1, spoken to over HTTP the
//! way an OpenAI client or metrics scraper would.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

/// A running `infergate sim` child; killed (and reaped) on drop so none outlives a test.
struct SimProc {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl SimProc {
    fn start(args: &[&str]) -> SimProc {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_infergate"));
        cmd.arg("sim")
            .args(args)
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Ok(port) = text.trim().parse::<u16>()
            {
                return SimProc {
                    child,
                    port,
                    _dir: dir,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("infergate sim exited early: {status}");
            }
            assert!(Instant::now() < deadline, "no port file after 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for SimProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client() -> reqwest::Client {
    // reqwest is built without a bundled TLS provider; plain HTTP still needs one installed
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// The `data:` payloads of an SSE body, in order.
/// POSTs `body` as JSON and returns the response text (any status).
async fn post_text(c: &reqwest::Client, url: &str, body: serde_json::Value) -> String {
    c.post(url)
        .json(&body)
        .send()
        .await
        .expect("request sent")
        .text()
        .await
        .expect("response body")
}

/// GETs `url` and returns the response text (any status).
async fn get_text(c: &reqwest::Client, url: &str) -> String {
    c.get(url)
        .send()
        .await
        .expect("request sent")
        .text()
        .await
        .expect("response body")
}

fn sse_payloads(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| ev.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("metric {name} missing in:\n{text}"))
}

#[tokio::test]
async fn endpoints_look_like_vllm() {
    let sim = SimProc::start(&["--profile", "test", "--time-scale", "10"]);
    let c = client();
    let r = c.get(sim.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.unwrap().is_empty());

    let models: Value = c
        .get(sim.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "sim-test");
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"][0]["owned_by"], "vllm");
    assert_eq!(models["data"][0]["max_model_len"], 65536);

    let v: Value = c
        .get(sim.url("/version"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["version"], "0.0.0-infergate-sim+test");

    // count = ceil(chars / 4)
    let tok: Value = c
        .post(sim.url("/tokenize"))
        .json(&serde_json::json!({"model": "sim-test", "prompt": "x".repeat(1001)}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tok["count"], 251);
    assert_eq!(tok["tokens"].as_array().unwrap().len(), 251);
    assert_eq!(tok["max_model_len"], 65536);

    // unknown model -> 404, bad JSON -> 400, too long -> 400, each with an error object
    let r = c
        .post(sim.url("/v1/completions"))
        .json(&serde_json::json!({"model": "nope", "prompt": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let e: Value = r.json().await.unwrap();
    assert!(e["error"]["message"].as_str().unwrap().contains("nope"));
    let r = c
        .post(sim.url("/v1/completions"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], 400);
    let r = c
        .post(sim.url("/v1/completions"))
        .json(&serde_json::json!({"prompt": "y".repeat(4 * 65536), "max_tokens": 4}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // non-streaming completion: text has completion_tokens words
    let r: Value = c
        .post(sim.url("/v1/completions"))
        .json(&serde_json::json!({"prompt": "abcdefgh", "max_tokens": 7, "ignore_eos": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["object"], "text_completion");
    assert_eq!(r["usage"]["prompt_tokens"], 2);
    assert_eq!(r["usage"]["completion_tokens"], 7);
    assert_eq!(r["choices"][0]["finish_reason"], "length");
    assert_eq!(
        r["choices"][0]["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        7
    );
}

#[tokio::test]
async fn streaming_usage_is_cumulative_and_matches_the_engine_counter() {
    let sim = SimProc::start(&["--profile", "test", "--time-scale", "10", "--seed", "3"]);
    let c = client();
    let mut streamed_total = 0u64;

    // completions, continuous usage: cumulative usage on every chunk
    let body = post_text(
        &c,
        &sim.url("/v1/completions"),
        serde_json::json!({
            "model": "sim-test", "prompt": "hello world", "max_tokens": 30,
            "ignore_eos": true, "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true}
        }),
    )
    .await;
    let payloads = sse_payloads(&body);
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let mut words = 0u64;
    let mut last_usage = 0u64;
    let chunks: Vec<Value> = payloads[..payloads.len() - 1]
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    for ch in &chunks {
        let usage = &ch["usage"];
        assert_eq!(usage["prompt_tokens"], 3);
        if let Some(choice) = ch["choices"].as_array().unwrap().first() {
            words += choice["text"].as_str().unwrap().split_whitespace().count() as u64;
            let done = usage["completion_tokens"].as_u64().unwrap();
            assert_eq!(done, words, "usage is cumulative and counts every token");
            assert!(done > last_usage);
            last_usage = done;
        }
    }
    let last = chunks.last().unwrap();
    assert!(last["choices"].as_array().unwrap().is_empty());
    assert_eq!(last["usage"]["completion_tokens"], 30);
    assert_eq!(last["usage"]["total_tokens"], 33);
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "length"
    );
    streamed_total += words;

    // chat streaming: role chunk first, content deltas, finish reason, [DONE]
    let body = post_text(
        &c,
        &sim.url("/v1/chat/completions"),
        serde_json::json!({
            "messages": [{"role": "user", "content": "hi there"}],
            "max_tokens": 12, "ignore_eos": true, "stream": true
        }),
    )
    .await;
    let payloads = sse_payloads(&body);
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let first: Value = serde_json::from_str(&payloads[0]).unwrap();
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert!(first.get("usage").is_none());
    let mut chat_words = 0u64;
    for p in &payloads[1..payloads.len() - 1] {
        let v: Value = serde_json::from_str(p).unwrap();
        chat_words += v["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count() as u64;
    }
    assert_eq!(chat_words, 12);
    streamed_total += chat_words;

    // several concurrent streams without EOS suppression (they may stop early)
    let mut tasks = Vec::new();
    for i in 0..4 {
        let c = c.clone();
        let url = sim.url("/v1/completions");
        tasks.push(tokio::spawn(async move {
            let body = post_text(
                &c,
                &url,
                serde_json::json!({
                    "prompt": format!("request {i}"), "max_tokens": 40, "stream": true,
                    "stream_options": {"include_usage": true}
                }),
            )
            .await;
            let payloads = sse_payloads(&body);
            let last: Value = serde_json::from_str(&payloads[payloads.len() - 2]).unwrap();
            let n = last["usage"]["completion_tokens"].as_u64().unwrap();
            assert!((1..=40).contains(&n));
            n
        }));
    }
    for t in tasks {
        streamed_total += t.await.unwrap();
    }

    let m = get_text(&c, &sim.url("/metrics")).await;
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
    ] {
        assert!(m.contains(&format!("# TYPE {name} ")), "{name}");
        assert!(
            m.contains(&format!("{name}{{model_name=\"sim-test\"}}")),
            "{name}"
        );
    }
    assert_eq!(
        metric(&m, "vllm:generation_tokens_total") as u64,
        streamed_total
    );
    assert_eq!(metric(&m, "vllm:num_requests_running"), 0.0);
}

#[tokio::test]
async fn spec_decoding_chunks_carry_several_tokens_and_metrics_add_up() {
    let sim = SimProc::start(&[
        "--profile",
        "ldb-rtx5090",
        "--time-scale",
        "2",
        "--seed",
        "1",
    ]);
    let c = client();
    let body = post_text(
        &c,
        &sim.url("/v1/completions"),
        serde_json::json!({
            "prompt": "p".repeat(600), "max_tokens": 60, "ignore_eos": true, "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true}
        }),
    )
    .await;
    let payloads = sse_payloads(&body);
    let mut max_per_chunk = 0;
    let mut n_chunks = 0u64;
    for p in &payloads[..payloads.len() - 2] {
        let v: Value = serde_json::from_str(p).unwrap();
        let words = v["choices"][0]["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count();
        max_per_chunk = max_per_chunk.max(words);
        n_chunks += 1;
    }
    assert!(
        max_per_chunk >= 2,
        "speculative decoding emits multi-token chunks"
    );
    let m = get_text(&c, &sim.url("/metrics")).await;
    let drafts = metric(&m, "vllm:spec_decode_num_drafts_total");
    let accepted = metric(&m, "vllm:spec_decode_num_accepted_tokens_total");
    let draft_tokens = metric(&m, "vllm:spec_decode_num_draft_tokens_total");
    let generated = metric(&m, "vllm:generation_tokens_total");
    assert_eq!(generated, 60.0);
    // one chunk per step (steps share a chunk only when the engine had to catch up on a
    // loaded machine); the first token comes from prefill, every later step drafts
    assert!(
        n_chunks as f64 <= drafts + 1.0,
        "{n_chunks} chunks, {drafts} drafts"
    );
    if n_chunks as f64 == drafts + 1.0 {
        assert!(
            max_per_chunk <= 3,
            "2 draft positions: at most 3 tokens per step"
        );
    }
    assert_eq!(generated, 1.0 + drafts + accepted);
    assert_eq!(draft_tokens, 2.0 * drafts);
    assert!(m.contains("vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"deepseek-v4-flash-dspark\",position=\"1\"}"));
}

#[tokio::test]
async fn requests_beyond_the_kv_budget_wait_in_the_queue() {
    // test profile: 200k-token KV budget; 8 x (32k prompt + 1000) -> 5 admitted, 3 waiting
    let sim = SimProc::start(&["--profile", "test", "--jitter", "0"]);
    let c = client();
    let prompt = "z".repeat(4 * 32_768);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let c = c.clone();
        let url = sim.url("/v1/completions");
        let prompt = prompt.clone();
        tasks.push(tokio::spawn(async move {
            let resp = c
                .post(url)
                .json(&serde_json::json!({"prompt": prompt, "max_tokens": 1000, "ignore_eos": true, "stream": true}))
                .send()
                .await
                .unwrap();
            let mut body = resp.bytes_stream();
            while body.next().await.is_some() {}
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let (running, waiting) = loop {
        let m = get_text(&c, &sim.url("/metrics")).await;
        let r = metric(&m, "vllm:num_requests_running");
        let w = metric(&m, "vllm:num_requests_waiting");
        if r + w == 8.0 && r > 0.0 || Instant::now() > deadline {
            break (r, w);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((running, waiting), (5.0, 3.0));
    // the prefix cache: admitted requests 2..5 find the whole (identical) prompt cached but
    // its last token, which is always computed
    let m = get_text(&c, &sim.url("/metrics")).await;
    assert_eq!(metric(&m, "vllm:prefix_cache_hits_total"), 4.0 * 32_767.0);
    assert_eq!(
        metric(&m, "vllm:prefix_cache_queries_total"),
        5.0 * 32_768.0
    );
    for t in tasks {
        t.abort();
    }
}

#[tokio::test]
async fn fault_http_500_and_never_ready() {
    let sim = SimProc::start(&["--profile", "test", "--fault", "http-500=1.0"]);
    let c = client();
    for _ in 0..3 {
        let r = c
            .post(sim.url("/v1/completions"))
            .json(&serde_json::json!({"prompt": "hi", "max_tokens": 2}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 500);
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], 500);
    }
    let sim = SimProc::start(&["--profile", "test", "--fault", "never-ready"]);
    for _ in 0..5 {
        assert_eq!(
            c.get(sim.url("/health")).send().await.unwrap().status(),
            503
        );
        assert_eq!(
            c.get(sim.url("/v1/models")).send().await.unwrap().status(),
            503
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn fault_malformed_sse_and_stall() {
    let sim = SimProc::start(&[
        "--profile",
        "test",
        "--time-scale",
        "10",
        "--fault",
        "malformed-sse=1.0",
    ]);
    let c = client();
    let body = post_text(
        &c,
        &sim.url("/v1/completions"),
        serde_json::json!({"prompt": "hi", "max_tokens": 5, "ignore_eos": true, "stream": true}),
    )
    .await;
    let payloads = sse_payloads(&body);
    let garbage = payloads
        .iter()
        .filter(|p| p.as_str() != "[DONE]" && serde_json::from_str::<Value>(p).is_err())
        .count();
    assert_eq!(garbage, 1, "{body}");

    let sim = SimProc::start(&["--profile", "test", "--fault", "stall-after=3"]);
    let resp = c
        .post(sim.url("/v1/completions"))
        .json(&serde_json::json!({"prompt": "hi", "max_tokens": 50, "ignore_eos": true, "stream": true}))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    loop {
        match tokio::time::timeout(Duration::from_millis(1500), body.next()).await {
            Ok(Some(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk.unwrap())),
            Ok(None) => panic!("stream ended instead of stalling: {text}"),
            Err(_) => break, // silent, connection still open
        }
    }
    let words: usize = sse_payloads(&text)
        .iter()
        .map(|p| {
            let v: Value = serde_json::from_str(p).unwrap();
            v["choices"][0]["text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count()
        })
        .sum();
    assert_eq!(words, 3);
    assert!(!text.contains("[DONE]"));
}

#[test]
fn fault_crash_after_exits_nonzero_and_bad_flags_exit_2() {
    let mut sim = SimProc::start(&["--profile", "test", "--fault", "crash-after=0.5"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = sim.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "crash-after did not crash");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));

    for bad in [
        &["--fault", "explode"][..],
        &["--slowdown", "0"],
        &["--profile", "/no/such.toml"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
            .arg("sim")
            .args(bad)
            .args(["--port", "0"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn sigterm_shuts_down_cleanly_and_prints_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let port_file: PathBuf = dir.path().join("port");
    let mut child = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["sim", "--profile", "zero", "--port", "0", "--port-file"])
        .arg(&port_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !port_file.exists() {
        assert!(Instant::now() < deadline, "no port file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let port = std::fs::read_to_string(&port_file).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline + Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sim did not exit on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(out.code(), Some(0));
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert!(
        stdout.contains(&format!("listening on http://127.0.0.1:{}", port.trim())),
        "{stdout}"
    );
}

#[tokio::test]
async fn profile_file_with_one_char_per_token_and_final_only_usage() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("dense.toml");
    std::fs::write(
        &profile,
        r#"
name = "dense"
model = "dense-model"
max_model_len = 4096
kv_budget_tokens = 100000
kv_cost_per_token = 1.0
base_ms = 2.0
per_seq_ms = 0.5
per_kv_token_us = 0.0
prefill_tps = 100000.0
chars_per_token = 1.0
usage_mode = "final-only"
"#,
    )
    .unwrap();
    let sim = SimProc::start(&["--profile", profile.to_str().unwrap()]);
    let c = client();
    let tok: Value = c
        .post(sim.url("/tokenize"))
        .json(&serde_json::json!({"prompt": "hello world"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tok["count"], 11);
    let v: Value = c
        .get(sim.url("/version"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["version"], "0.0.0-infergate-sim+dense");

    // llama.cpp style: no usage until the final chunk, whatever the client asks
    let body = post_text(
        &c,
        &sim.url("/v1/completions"),
        serde_json::json!({
            "model": "dense-model", "prompt": "hello world", "max_tokens": 8,
            "ignore_eos": true, "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true}
        }),
    )
    .await;
    let payloads = sse_payloads(&body);
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = payloads[..payloads.len() - 1]
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect();
    let (last, rest) = chunks.split_last().unwrap();
    assert!(rest.iter().all(|ch| ch.get("usage").is_none()));
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(last["usage"]["completion_tokens"], 8);
    assert_eq!(last["usage"]["prompt_tokens"], 11);

    // a profile file with an unknown key is a usage error naming the key
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&profile).unwrap() + "turbo = true\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["sim", "--port", "0", "--profile"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("turbo"));
}
