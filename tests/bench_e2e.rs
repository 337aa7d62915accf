//! End-to-end tests of `infergate bench` against `infergate sim` (started and stopped here).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use infergate::results::{CellResult, CellStatus, EventKind, RunResults, TokenSource};

const BIN: &str = env!("CARGO_BIN_EXE_infergate");

/// A running simulated engine; killed on drop.
struct Sim {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Sim {
    fn start(args: &[&str]) -> Sim {
        let dir = tempfile::tempdir().expect("tempdir");
        let port_file = dir.path().join("port");
        let child = Command::new(BIN)
            .arg("sim")
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn infergate sim");
        let mut sim = Sim {
            child,
            url: String::new(),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Ok(port) = text.trim().parse::<u16>()
            {
                sim.url = format!("http://127.0.0.1:{port}");
                return sim;
            }
            if let Ok(Some(status)) = sim.child.try_wait() {
                panic!("infergate sim exited early: {status}");
            }
            assert!(Instant::now() < deadline, "sim did not write its port file");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn with_profile_file(toml: &str, extra: &[&str]) -> (Sim, PathBuf, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("profile.toml");
        std::fs::write(&path, toml).expect("write profile");
        let p = path.to_string_lossy().to_string();
        let mut args = vec!["--profile", p.as_str()];
        args.extend_from_slice(extra);
        (Sim::start(&args), path, dir)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct BenchRun {
    code: i32,
    stdout: String,
    stderr: String,
    results: Option<RunResults>,
}

/// Runs `infergate bench` with a 90 s safety time-out.
fn bench(url: &str, out: &Path, args: &[&str]) -> BenchRun {
    let mut child = Command::new(BIN)
        .arg("bench")
        .args(["--url", url, "--out"])
        .arg(out)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn infergate bench");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("infergate bench did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("output");
    let results = std::fs::read_to_string(out)
        .ok()
        .map(|t| serde_json::from_str::<RunResults>(&t).expect("results file parses"));
    BenchRun {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        results,
    }
}

/// Short cells for tests.
const FAST: &[&str] = &[
    "--duration",
    "1.5s",
    "--warmup",
    "0.3s",
    "--ready-stable",
    "0.5s",
    "--capacity-stall",
    "2s",
    "--sub-windows",
    "3",
    "--max-tokens",
    "128",
];

/// The fast defaults with `extra` appended; a flag given in `extra` replaces the default.
fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for pair in FAST.chunks(2) {
        if !extra.contains(&pair[0]) {
            v.extend_from_slice(pair);
        }
    }
    v.extend_from_slice(extra);
    v
}

fn cell(r: &RunResults, c: u32, l: u64) -> &CellResult {
    r.cells
        .iter()
        .find(|x| x.coord() == (c, l))
        .unwrap_or_else(|| panic!("cell C={c} ctx={l} missing"))
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

#[test]
fn two_by_two_matrix_has_samples_in_every_cell() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sub/results.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "1,2", "--contexts", "0,1k"]),
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let r = run.results.expect("results file");
    assert_eq!(r.schema_version, infergate::results::SCHEMA_VERSION);
    assert_eq!(r.cells.len(), 4);
    assert_eq!(r.engine.metrics_flavor.as_deref(), Some("vllm"));
    assert_contains(&r.profile.key, "__vllm__");
    assert_eq!(
        r.matrix.model, r.engine.models[0],
        "model defaults to the first id"
    );
    for c in &r.cells {
        assert_eq!(c.status, CellStatus::Ok, "{c:?}");
        assert!(c.samples.len() >= 3, "{c:?}");
        assert!(c.samples.iter().all(|s| *s > 0.0), "{c:?}");
        assert!(c.aggregate_tps > 0.0 && c.output_tokens > 0);
        assert!(c.ttft_s.is_some() && c.itl_s.is_some() && c.per_user_tps.is_some());
        assert_eq!(c.token_source, Some(TokenSource::ContinuousUsage));
        assert_eq!(c.errors, 0);
    }
    // Calibration: the 1k cell's prompts are within 2% of 1024 tokens.
    let p = cell(&r, 1, 1024).prompt_tokens.expect("prompt tokens");
    assert!(rel(p as f64, 1024.0) <= 0.02, "prompt tokens {p}");
    // Events: every cell started and finished; the console shows the matrix.
    assert_eq!(
        r.events
            .iter()
            .filter(|e| e.kind == EventKind::CellDone)
            .count(),
        4
    );
    assert_contains(&run.stdout, "ctx \\ conc");
    assert_contains(&run.stderr, "cell done C=2 ctx=1k");
}

#[test]
fn kv_overflow_is_capacity_limited_within_15_s() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "8", "--contexts", "32k"]),
    );
    assert_eq!(
        run.code, 0,
        "capacity-limited cells are results: {}",
        run.stderr
    );
    let r = run.results.unwrap();
    let c = cell(&r, 8, 32768);
    assert_eq!(c.status, CellStatus::CapacityLimited, "{c:?}");
    assert!(c.ready_after_s.unwrap() <= 15.0, "{c:?}");
    let reason = c.reason.as_deref().unwrap();
    assert!(
        reason.contains("KV capacity") && reason.contains("/8"),
        "{reason}"
    );
    let running = c.effective_concurrency.unwrap();
    assert!((1.0..8.0).contains(&running), "{running}");
    assert!(c.aggregate_tps > 0.0 && c.samples.len() >= 3);
    assert!(run.stdout.contains("/8)*"), "{}", run.stdout);
}

#[test]
fn measured_rate_matches_the_engine_counter_within_2_percent() {
    let sim = Sim::start(&["--jitter", "0"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&[
            "--concurrency",
            "1,4",
            "--contexts",
            "0",
            "--duration",
            "3s",
        ]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    for c in &run.results.unwrap().cells {
        let server = c.server_tps.expect("server_tps");
        assert!(
            rel(c.aggregate_tps, server) <= 0.02,
            "C={}: client {:.1} vs engine {:.1}",
            c.concurrency,
            c.aggregate_tps,
            server
        );
    }
}

#[test]
fn slowdown_of_10_percent_is_measured() {
    let base = Sim::start(&["--jitter", "0", "--seed", "7"]);
    let slow = Sim::start(&["--jitter", "0", "--seed", "7", "--slowdown", "1.10"]);
    let dir = tempfile::tempdir().unwrap();
    let (a_out, b_out) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let a_args = args(&["--concurrency", "4", "--contexts", "1k", "--duration", "3s"]);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| bench(&base.url, &a_out, &a_args));
        let b = s.spawn(|| bench(&slow.url, &b_out, &a_args));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(b.code, 0, "{}", b.stderr);
    let ta = a.results.unwrap().cells[0].aggregate_tps;
    let tb = b.results.unwrap().cells[0].aggregate_tps;
    let drop = 1.0 - tb / ta;
    assert!(
        (0.07..=0.13).contains(&drop),
        "slowdown 1.10 lowered tok/s by {:.1}% ({ta:.1} → {tb:.1})",
        drop * 100.0
    );
}

#[test]
fn unreachable_url_exits_3_with_a_clear_message() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(&format!("http://127.0.0.1:{port}"), &out, &args(&[]));
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_contains(&run.stderr, "cannot reach");
    assert_contains(&run.stderr, "connection refused");
    assert_lacks(&run.stderr, "panicked");
    assert!(!out.exists());
}

#[test]
fn malformed_arguments_exit_2_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench("http://127.0.0.1:9", &out, &["--contexts", "0,8q"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("--contexts: '8q' is not a size; use e.g. 0,8k,32k"),
        "{}",
        run.stderr
    );
    let run = bench("http://127.0.0.1:9", &out, &["--duration", "soon"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_contains(&run.stderr, "use e.g. 10s");
}

#[test]
fn http_500s_make_error_cells_with_reasons() {
    let sim = Sim::start(&["--fault", "http-500=1.0"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "1,2", "--contexts", "0"]),
    );
    assert_eq!(run.code, 3, "every cell errored: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"));
    let r = run.results.expect("the results file is still written");
    for c in &r.cells {
        assert_eq!(c.status, CellStatus::Error, "{c:?}");
        let reason = c.reason.as_deref().unwrap();
        assert_contains(reason, "requests failed: HTTP 500");
        assert!(c.errors > 0);
    }
    assert!(run.stdout.contains("ERR ("), "{}", run.stdout);
}

#[test]
fn broken_sse_makes_error_cells_with_reasons() {
    let sim = Sim::start(&["--fault", "malformed-sse=1.0"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "2", "--contexts", "0"]),
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    let r = run.results.expect("results");
    let c = &r.cells[0];
    assert_eq!(c.status, CellStatus::Error, "{c:?}");
    assert!(
        c.reason.as_deref().unwrap().contains("malformed SSE"),
        "{c:?}"
    );
    assert!(c.errors > 0);
}

#[test]
fn final_only_usage_is_counted_from_chunks_and_reconciled() {
    let sim = Sim::start(&["--jitter", "0", "--usage-mode", "final-only"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "4", "--contexts", "0", "--duration", "3s"]),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = run.results.unwrap();
    let c = &r.cells[0];
    assert_eq!(c.token_source, Some(TokenSource::ChunksReconciled), "{c:?}");
    let server = c.server_tps.unwrap();
    assert!(
        rel(c.aggregate_tps, server) <= 0.03,
        "client {:.1} vs engine {server:.1}",
        c.aggregate_tps
    );
}

fn profile_toml(cpt: f64) -> String {
    format!(
        r#"name = "cpt{cpt}"
model = "sim-cpt"
max_model_len = 131072
kv_budget_tokens = 1000000
kv_cost_per_token = 1.0
base_ms = 5.0
per_seq_ms = 1.0
per_kv_token_us = 0.0
prefill_tps = 1000000.0
chars_per_token = {cpt}
jitter_cv = 0.0
"#
    )
}

#[test]
fn calibration_within_2_percent_at_1_and_6_chars_per_token() {
    for cpt in [1.0, 6.0] {
        let (sim, _path, _dir) = Sim::with_profile_file(&profile_toml(cpt), &[]);
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        let run = bench(
            &sim.url,
            &out,
            &[
                "--concurrency",
                "1",
                "--contexts",
                "3k,32k",
                "--duration",
                "0.6s",
                "--warmup",
                "0s",
                "--ready-stable",
                "0.3s",
                "--sub-windows",
                "3",
                "--max-tokens",
                "32",
            ],
        );
        assert_eq!(run.code, 0, "cpt {cpt}: {}", run.stderr);
        let r = run.results.unwrap();
        for c in &r.cells {
            let p = c.prompt_tokens.expect("prompt tokens") as f64;
            let target = c.context_tokens as f64;
            assert!(
                rel(p, target) <= 0.02,
                "cpt {cpt}: ctx {target} got {p} prompt tokens"
            );
        }
        // The density was measured, not assumed.
        let measured: f64 = r
            .events
            .iter()
            .find_map(|e| e.message.strip_prefix("calibrated: "))
            .and_then(|m| m.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("a calibration event");
        assert!(rel(measured, cpt) <= 0.02, "cpt {cpt}: measured {measured}");
    }
}

#[test]
fn engine_dying_mid_run_gives_a_partial_run_with_reasons() {
    let sim = Sim::start(&["--fault", "crash-after=5"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "1", "--contexts", "0,1k,2k,4k"]),
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert_lacks(&run.stderr, "panicked");
    let r = run.results.expect("results are written for a partial run");
    assert_eq!(r.status, infergate::results::RunStatus::Partial);
    assert_eq!(r.cells.len(), 4, "every cell is present");
    assert!(
        r.cells
            .iter()
            .all(|c| c.status == CellStatus::Ok || c.reason.is_some()),
        "{:?}",
        r.cells
    );
    let last = r.cells.last().unwrap();
    assert_eq!(last.status, CellStatus::Error);
    assert!(
        last.reason
            .as_deref()
            .unwrap()
            .contains("engine unreachable"),
        "{last:?}"
    );
}

#[test]
fn stalled_streams_are_detected_and_reported() {
    let sim = Sim::start(&["--fault", "stall-after=20"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&[
            "--concurrency",
            "2",
            "--contexts",
            "0",
            "--request-timeout",
            "500ms",
        ]),
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    let r = run.results.expect("results");
    let c = &r.cells[0];
    assert_eq!(c.status, CellStatus::Error, "{c:?}");
    assert!(
        c.reason.as_deref().unwrap().contains("stream stalled"),
        "{c:?}"
    );
}

/// The engine serves `max_model_len` (65536 in `/v1/models`): a 96k context is refused before
/// anything is calibrated or measured, naming the cell, the limit and the fix (exit 2).
#[test]
fn a_context_beyond_the_model_length_is_refused_before_measuring() {
    let sim = Sim::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = bench(
        &sim.url,
        &out,
        &args(&["--concurrency", "1", "--contexts", "0,96k"]),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.results.is_none(), "nothing is written");
    assert!(
        run.stderr
            .contains("max_model_len is 65536 tokens (GET /v1/models"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("C=1 / 96k (98304 context + "),
        "{}",
        run.stderr
    );
    assert_lacks(&run.stderr, "cell start");
}
