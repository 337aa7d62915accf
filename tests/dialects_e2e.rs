//! `infergate bench` (the real binary) against local mock engines that serve the recorded
//! pages of each dialect (tests/fixtures/README.md says where each comes from) and a recorded
//! llama-server completion stream:
//!
//! - SGLang without `--enable-metrics` (`/metrics` 404, `/model_info` answers): named
//!   `sglang`, not `openai-compatible`, with the warning, tokenized via `/v1/tokenize`, and no
//!   cross-check against an engine counter;
//! - `trtllm-serve` with `return_perf_metrics`: its Prometheus page read at
//!   `/prometheus/metrics` (its `/metrics` is JSON), the per-request reconciliation chosen.
//!   The recorded page is static, so the engine's counter never moves while the client counts
//!   tokens: the cross-check must catch that;
//! - llama.cpp: the refreshed page read at `/metrics` (no further probes), `/tokenize` used,
//!   the per-request counter reconciled (no `/slots` here), and spec-decode counters that did
//!   not move give no figure.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::assert_contains;
use std::convert::Infallible;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::{get, post};
use infergate::results::{CounterMoves, EventKind, RunResults};

fn fixture(name: &str) -> String {
    let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// A mock engine on 127.0.0.1: `/health`, one model, the given GET pages and POST answers,
/// and `/v1/completions` streaming the recorded llama-server answer (24 tokens) one event
/// every 5 ms, as a real engine streams (a request with `"stream": false` is the calibration
/// probe, answered with one token). Every path it was asked for is kept; other paths
/// are 404, as on the real engines. Stopped when dropped.
struct MockEngine {
    url: String,
    asked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Counts a stream as running from its request until its body is done or dropped.
struct Running(Arc<AtomicUsize>);

impl Running {
    fn new(n: &Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        Running(n.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for MockEngine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockEngine {
    /// `pages` are GET answers; in them `{running}` becomes the number of streams running
    /// now, so a recorded metrics page reads like a live engine's.
    async fn start(pages: Vec<(&'static str, String)>, posts: Vec<(&'static str, String)>) -> Self {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(AtomicUsize::new(0));
        let in_flight = running.clone();
        let events: Arc<Vec<String>> = Arc::new(
            fixture("llamacpp-stream.txt")
                .split("\n\n")
                .filter(|e| !e.trim().is_empty())
                .map(|e| format!("{}\n\n", e.trim()))
                .collect(),
        );
        let mut app = Router::new()
            .route("/health", get(|| async { "" }))
            .route(
                "/v1/models",
                get(|| async { r#"{"object":"list","data":[{"id":"tiny-llama","object":"model"}]}"# }),
            )
            .route(
                "/v1/completions",
                post(move |request: Bytes| {
                    let events = events.clone();
                    let in_flight = in_flight.clone();
                    async move {
                        let streamed = serde_json::from_slice::<serde_json::Value>(&request)
                            .ok()
                            .and_then(|v| v.get("stream").and_then(|s| s.as_bool()))
                            .unwrap_or(false);
                        if !streamed {
                            // The calibration probe (one token, not streamed), as llama-server
                            // answers it for the 4-token prompt of the recording.
                            return Response::builder()
                                .header(header::CONTENT_TYPE, "application/json")
                                .body(Body::from(
                                    r#"{"choices":[{"text":" the","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":1,"prompt_tokens":4,"total_tokens":5}}"#,
                                ))
                                .unwrap();
                        }
                        let state = (0usize, Running::new(&in_flight));
                        let body = futures::stream::unfold(state, move |(i, guard)| {
                            let events = events.clone();
                            async move {
                                let e = events.get(i)?.clone();
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                Some((Ok::<_, Infallible>(Bytes::from(e)), (i + 1, guard)))
                            }
                        });
                        Response::builder()
                            .header(header::CONTENT_TYPE, "text/event-stream")
                            .body(Body::from_stream(body))
                            .unwrap()
                    }
                }),
            );
        for (at, body) in pages {
            let running = running.clone();
            app = app.route(
                at,
                get(move || async move {
                    body.replace("{running}", &running.load(Ordering::SeqCst).to_string())
                }),
            );
        }
        for (at, body) in posts {
            app = app.route(at, post(move || async move { body }));
        }
        let seen = asked.clone();
        let app =
            app.fallback(|| async { StatusCode::NOT_FOUND })
                .layer(axum::middleware::from_fn(
                    move |uri: Uri, req: axum::extract::Request, next: axum::middleware::Next| {
                        let seen = seen.clone();
                        async move {
                            seen.lock().unwrap().push(uri.path().to_string());
                            next.run(req).await
                        }
                    },
                ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        MockEngine { url, asked, task }
    }

    fn asked_for(&self, path: &str) -> bool {
        self.asked.lock().unwrap().iter().any(|p| p == path)
    }
}

struct Bench {
    results: RunResults,
    stderr: String,
}

async fn bench(url: String, dir: &Path) -> Bench {
    let out = dir.join("r.json");
    let out2 = out.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args([
                "bench",
                "--url",
                &url,
                "--concurrency",
                "1",
                "--contexts",
                "0",
            ])
            .args(["--duration", "1s", "--warmup", "0.2s", "--max-tokens", "24"])
            .args(["--ready-stable", "0.2s", "--ready-timeout", "20s"])
            .arg("--out")
            .arg(&out2)
            .output()
            .expect("run infergate bench")
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("no results ({e}); stderr:\n{stderr}"));
    Bench {
        results: serde_json::from_str(&text).expect("results parse"),
        stderr,
    }
}

fn startup_notes(r: &RunResults) -> Vec<&str> {
    r.events
        .iter()
        .filter(|e| e.kind == EventKind::Startup)
        .map(|e| e.message.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_without_metrics_is_named_and_warned_about() {
    let engine = MockEngine::start(
        vec![("/model_info", fixture("sglang-model-info.json"))],
        vec![("/v1/tokenize", fixture("sglang-tokenize.json"))],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let b = bench(engine.url.clone(), dir.path()).await;
    let r = &b.results;
    assert_eq!(r.engine.name, "sglang", "{}", b.stderr);
    assert_eq!(
        r.profile.engine, "sglang",
        "the profile key keeps the family"
    );
    assert_eq!(
        r.engine.metrics_flavor.as_deref(),
        Some("sglang-metrics-disabled")
    );
    let notes = startup_notes(r);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("SGLang without --enable-metrics")),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("metrics=sglang (metrics disabled)")),
        "{notes:#?}"
    );
    assert_contains(&b.stderr, "--enable-metrics");
    assert!(engine.asked_for("/metrics"), "probed first");
    assert!(
        engine.asked_for("/v1/tokenize"),
        "SGLang's tokenizer counted the prompt"
    );
    let cell = &r.cells[0];
    assert!(cell.engine_counter.is_none() && cell.server_tps.is_none());
    let names: Vec<&str> = cell.cross_checks.iter().map(|c| c.name.as_str()).collect();
    assert!(
        !names.iter().any(|n| n.starts_with("usage_vs_counter")),
        "no counter to check against: {names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trtllm_prometheus_page_is_read_and_its_static_counter_is_caught() {
    // The recorded page with the streams running now and none queued (so readiness and the
    // drain read it as they would a live engine's); its generation counter is static.
    let prometheus = fixture("metrics-trtllm.txt")
        .replace(
            "trtllm_num_requests_running{engine_type=\"undefined\",model_name=\"undefined\"} 16.0",
            "trtllm_num_requests_running{engine_type=\"undefined\",model_name=\"undefined\"} {running}",
        )
        .replace(
            "trtllm_num_requests_waiting{engine_type=\"undefined\",model_name=\"undefined\"} 4.0",
            "trtllm_num_requests_waiting{engine_type=\"undefined\",model_name=\"undefined\"} 0.0",
        );
    let engine = MockEngine::start(
        vec![
            ("/prometheus/metrics", prometheus),
            ("/metrics", fixture("trtllm-iteration-stats.json")),
        ],
        Vec::new(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let b = bench(engine.url.clone(), dir.path()).await;
    let r = &b.results;
    assert_eq!(r.engine.name, "trtllm", "{}", b.stderr);
    assert_eq!(r.engine.metrics_flavor.as_deref(), Some("trtllm"));
    let cell = &r.cells[0];
    let w = cell
        .engine_counter
        .as_ref()
        .unwrap_or_else(|| panic!("no counter window: {cell:#?}"));
    assert_eq!(w.metric, "trtllm_generation_tokens_total");
    assert_eq!(w.moves, CounterMoves::PerRequest);
    let check = cell
        .cross_checks
        .iter()
        .find(|c| c.name == "usage_vs_counter_requests")
        .unwrap_or_else(|| panic!("{:#?}", cell.cross_checks));
    // Requests of 24 tokens finished between the readings; the static counter moved 0.
    assert_eq!(check.expected, 0.0);
    assert!(check.reported >= 24.0 && !check.ok, "{check:#?}");
    let reason = cell.reason.as_deref().unwrap_or_default();
    assert_contains(reason, "usage disagrees with the engine's counters");
    assert!(
        !engine.asked_for("/tokenize") && !engine.asked_for("/v1/tokenize"),
        "trtllm-serve has no tokenize route: calibrated by probes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llamacpp_page_is_read_with_its_spec_counters_and_tokenizer() {
    // The refreshed llama-server page (draft model, per-position counters) with the streams
    // running now; no /slots, so the per-request reconciliation runs against a static counter.
    let page = fixture("metrics-llamacpp.txt").replace(
        "llamacpp:requests_processing 4",
        "llamacpp:requests_processing {running}",
    );
    let engine = MockEngine::start(
        vec![("/metrics", page)],
        vec![("/tokenize", r#"{"tokens":[1,15043]}"#.to_string())],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let b = bench(engine.url.clone(), dir.path()).await;
    let r = &b.results;
    assert_eq!(r.engine.name, "llamacpp", "{}", b.stderr);
    assert_eq!(r.engine.metrics_flavor.as_deref(), Some("llamacpp"));
    assert!(engine.asked_for("/tokenize"));
    assert!(
        !engine.asked_for("/prometheus/metrics"),
        "found at /metrics: no further probes"
    );
    let cell = &r.cells[0];
    let w = cell.engine_counter.as_ref().expect("counter window");
    assert_eq!(w.metric, "llamacpp:tokens_predicted_total");
    assert!(!w.in_flight_added(), "no /slots here");
    assert!(
        cell.cross_checks
            .iter()
            .any(|c| c.name == "usage_vs_counter_requests" && !c.ok),
        "{:#?}",
        cell.cross_checks
    );
    // The spec-decode counters did not move (no request finished as far as the static page
    // says): no figure rather than a zero one.
    assert!(cell.spec_decode.is_none(), "{:?}", cell.spec_decode);
}
