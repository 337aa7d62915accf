//! Reads are bounded: an engine whose `/metrics` page is 200 MB stops `infergate bench` with an
//! error naming the page, the limit and the fix, and the gate's peak memory stays under
//! 200 MB (it used to read the whole page: 3.6 GB). The page is streamed by a server in this
//! test on 127.0.0.1, generated as it goes (no 200 MB buffer on either side).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::assert_contains;
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
    assert_contains(
        &stderr,
        "/metrics answered more than 16 MiB, infergate's limit",
    );
    assert_contains(&stderr, "point --url at the engine");
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

/// Runs infergate with `args`; returns its exit code, stderr (its words: error lines are wrapped
/// at 100 columns) and peak resident set size (MB).
/// A run still going after 120 s (a FIFO read that blocks) is killed and fails the test.
fn infergate_rss(args: &[&std::ffi::OsStr]) -> (i32, String, f64) {
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, for its rusage"
    )]
    let child = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let stderr = child.stderr.unwrap();
    let reader = std::thread::spawn(move || {
        let text = std::io::read_to_string(stderr).unwrap_or_default();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    });
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..1200 {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            // SAFETY: kill(2) of the child this test spawned and has not reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            true
        })
    };
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(r, pid);
    let hung = watchdog.join().unwrap();
    let stderr = reader.join().unwrap();
    assert!(!hung, "{args:?} still ran after 120 s: {stderr}");
    assert!(libc::WIFEXITED(status), "{args:?}: {stderr}");
    (
        libc::WEXITSTATUS(status),
        stderr,
        usage.ru_maxrss as f64 / 1024.0,
    )
}

/// Issue 59, door 6: every reader of a file someone gives the gate refuses a FIFO (it blocked
/// for ever), `/dev/zero` (it grew until memory ran out) and a sparse 2 GiB file (2 GB of
/// memory) with the file named, the limit and the fix, exit 2 for a named input file and a
/// failed gate (3) for a store file, in a few MB.
#[test]
fn every_input_reader_refuses_fifos_devices_and_files_over_256_mib() {
    use std::ffi::OsStr;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let sparse = d.join("sparse.json");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json");
    let zero = std::path::PathBuf::from("/dev/zero");
    let store = d.join("store");
    let out = d.join("out.json");
    for (bad, what) in [
        (&fifo, "a FIFO (named pipe), not a regular file"),
        (&zero, "a character device, not a regular file"),
        (&sparse, "2048 MiB, over infergate's limit of 256 MiB"),
    ] {
        let commands: Vec<Vec<&OsStr>> = vec![
            vec![
                "compare".as_ref(),
                "--candidate".as_ref(),
                bad.as_os_str(),
                "--baseline".as_ref(),
                good.as_os_str(),
            ],
            vec![
                "compare".as_ref(),
                "--candidate".as_ref(),
                good.as_os_str(),
                "--baseline".as_ref(),
                bad.as_os_str(),
            ],
            vec![
                "import".as_ref(),
                bad.as_os_str(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
            vec![
                "export".as_ref(),
                "--format".as_ref(),
                "csv".as_ref(),
                "--results".as_ref(),
                bad.as_os_str(),
            ],
            vec![
                "baseline".as_ref(),
                "add".as_ref(),
                "--dir".as_ref(),
                store.as_os_str(),
                bad.as_os_str(),
            ],
            vec!["report".as_ref(), "--results".as_ref(), bad.as_os_str()],
            vec!["run".as_ref(), "--config".as_ref(), bad.as_os_str()],
        ];
        for args in commands {
            let (code, stderr, peak_mb) = infergate_rss(&args);
            assert_eq!(code, 2, "{args:?}: {stderr}");
            assert!(
                stderr.contains(&*bad.to_string_lossy()) && stderr.contains(what),
                "{args:?}: {stderr}"
            );
            assert!(peak_mb < 100.0, "{args:?}: peak RSS {peak_mb:.0} MB");
        }
    }
    // A store run file of 2 GiB: the readers of the store fail closed, naming it.
    let (code, stderr, _) = infergate_rss(&[
        "baseline".as_ref(),
        "add".as_ref(),
        "--dir".as_ref(),
        store.as_os_str(),
        good.as_os_str(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let runs = walk_runs_dir(&store);
    let planted = runs.join("zz-huge.json");
    std::fs::rename(&sparse, &planted).unwrap();
    for args in [
        vec![
            "changes".as_ref(),
            "--baseline-dir".as_ref(),
            store.as_os_str(),
        ],
        vec![
            "compare".as_ref(),
            "--candidate".as_ref(),
            good.as_os_str(),
            "--baseline-dir".as_ref(),
            store.as_os_str(),
        ],
    ] {
        let (code, stderr, peak_mb) = infergate_rss(&args);
        assert!(code == 2 || code == 3, "{args:?}: exit {code}: {stderr}");
        assert!(
            stderr.contains("zz-huge.json") && stderr.contains("over infergate's limit of 256 MiB"),
            "{args:?}: {stderr}"
        );
        assert!(peak_mb < 100.0, "{args:?}: peak RSS {peak_mb:.0} MB");
    }
}

/// The one `runs` directory under `store`.
fn walk_runs_dir(store: &std::path::Path) -> std::path::PathBuf {
    for key in std::fs::read_dir(store).unwrap() {
        let key = key.unwrap().path();
        if !key.is_dir() {
            continue;
        }
        for suite in std::fs::read_dir(&key).unwrap() {
            let runs = suite.unwrap().path().join("runs");
            if runs.is_dir() {
                return runs;
            }
        }
    }
    panic!("no runs directory under {}", store.display());
}
