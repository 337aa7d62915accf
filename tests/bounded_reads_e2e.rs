//! Reads are bounded: an engine whose `/metrics` page is 200 MB stops `infergate bench` with an
//! error naming the page, the limit and the fix, and the gate's peak memory stays under
//! 200 MB (it used to read the whole page: 3.6 GB). The page is streamed by a server in this
//! test on 127.0.0.1, generated as it goes (no 200 MB buffer on either side).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::process::{Command, Stdio};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::routing::get;

const PAGE_BYTES: usize = 200 << 20;

async fn metrics_page() -> Body {
    let line = Bytes::from_static(
        b"# HELP vllm:padding_total A metric name that goes on and on to fill the page.\n",
    );
    let lines = PAGE_BYTES / line.len();
    Body::from_stream(futures::stream::iter(
        (0..lines / 64).map(move |_| Ok::<Bytes, std::io::Error>(Bytes::from(line.repeat(64)))),
    ))
}

/// Serves `routes` plus `/health` and `/v1/models` (answering `models`) on 127.0.0.1 from
/// `rt`; returns the base URL.
fn serve(rt: &tokio::runtime::Runtime, models: &'static str, routes: Router) -> String {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = routes
        .route("/health", get(|| async { "" }))
        .route("/v1/models", get(move || async move { models }));
    rt.spawn(async move { axum::serve(listener, app).await });
    url
}

#[test]
fn a_200_mb_metrics_page_is_refused_with_bounded_memory() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = serve(
        &rt,
        r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#,
        Router::new().route("/metrics", get(metrics_page)),
    );

    let dir = tempfile::tempdir().unwrap();
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, for its rusage"
    )]
    let child = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args([
            "bench",
            "--url",
            &url,
            "--concurrency",
            "1",
            "--contexts",
            "0",
        ])
        .arg("--out")
        .arg(dir.path().join("r.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let stderr = child.stderr.unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    // wait4 gives the child's own peak resident set size (KiB on Linux).
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    let stderr = reader.join().unwrap();
    let peak_mb = usage.ru_maxrss as f64 / 1024.0;
    assert!(libc::WIFEXITED(status), "{stderr}");
    assert_ne!(libc::WEXITSTATUS(status), 0, "{stderr}");
    assert!(
        stderr.contains("/metrics answered more than 16 MiB, infergate's limit"),
        "{stderr}"
    );
    assert!(stderr.contains("point --url at the engine"), "{stderr}");
    assert!(peak_mb < 200.0, "peak RSS {peak_mb:.0} MB: {stderr}");
    eprintln!(
        "peak RSS of infergate bench: {peak_mb:.1} MB; exit {}",
        libc::WEXITSTATUS(status)
    );
}

/// A completions server that streams what `model` names, for ever: `line` one SSE line that
/// never ends (100 MB and more), `pings` SSE comments every millisecond and never a token.
/// Non-streamed requests (calibration) get a usage answer.
async fn completions(body: String) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !body.contains("\"stream\":true") {
        return axum::Json(serde_json::json!({
            "choices": [{"text": "a", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 1}
        }))
        .into_response();
    }
    let endless_line = body.contains("\"model\":\"line\"");
    let stream = futures::stream::unfold(0u64, move |i| async move {
        let piece = if endless_line {
            if i == 0 {
                Bytes::from_static(b"data: {\"choices\":[{\"text\":\"")
            } else {
                Bytes::from(vec![b'x'; 64 * 1024])
            }
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            Bytes::from_static(b": ping\n\n")
        };
        Some((Ok::<Bytes, std::io::Error>(piece), i + 1))
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Data that never brings a token cannot hold the time-outs off: an endless SSE line ends its
/// requests as malformed past 1 MiB, and an endless run of pings ends them at the first-token
/// time-out (3 s here), so each `bench` ends in seconds with the reason.
#[test]
fn endless_lines_and_pings_end_on_time() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = serve(
        &rt,
        r#"{"object":"list","data":[{"id":"line"},{"id":"pings"}]}"#,
        Router::new().route("/v1/completions", axum::routing::post(completions)),
    );
    for (model, reason) in [
        ("line", "longer than 1 MiB"),
        ("pings", "no first token within 3 s"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        let t0 = std::time::Instant::now();
        let run = Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["bench", "--url", &url, "--model", model])
            .args([
                "--concurrency",
                "1",
                "--contexts",
                "0",
                "--ready-timeout",
                "3s",
            ])
            .args(["--duration", "1s", "--warmup", "0s"])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let took = t0.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&run.stderr);
        let results: infergate::results::RunResults =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let cell = &results.cells[0];
        assert_eq!(
            cell.status,
            infergate::results::CellStatus::Error,
            "{model}: {cell:?}"
        );
        let why = cell.reason.as_deref().unwrap_or_default();
        assert!(why.contains(reason), "{model}: {why}");
        assert!(took < 30.0, "{model}: {took:.1} s: {stderr}");
        eprintln!("{model}: cell error after {took:.1} s: {why}");
    }
}
