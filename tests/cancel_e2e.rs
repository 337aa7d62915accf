//! Cancellation that keeps the data, end to end (the real binary, the simulated engine, a local
//! mock of the GitHub REST API):
//!
//! - a GitHub-style cancel mid-matrix (SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s after that,
//!   sent to the gate): the cells finished before the cancel are in `results.json`, `ok`, and no
//!   engine process is left (marker variable in the engine's environment);
//! - a SIGKILL of the gate mid-matrix: `results.json` (status `in_progress`) holds every cell
//!   finished before the kill;
//! - a SIGTERM while GitHub hangs on the check-run creation: the gate exits at once and never
//!   boots the engine;
//! - `infergate close-stale-checks` completes this run's `in_progress` check as `cancelled`.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::assert_contains;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use support::actions::PrStep;
use support::{eventually, marked};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use support::actions::REPO;
const HEAD_SHA: &str = "feedfacefeedfacefeedfacefeedfacefeedface";
const TOKEN: &str = "ghs_CANCELTEST_token_never_printed";

/// Six ~1 s cells on the simulated engine, with a marker variable in the engine's environment.
fn config(dir: &Path, marker: &str) -> PathBuf {
    // An existing, empty store: "no baseline yet" (a missing store is a usage error).
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    let text = format!(
        r#"model = "sim-test"

[engine]
command = ["{{infergate}}", "sim", "--profile", "test", "--port", "{{port}}", "--time-scale", "2", "--seed", "5"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"
env = {{ CONTAIN_MARKER = "{marker}" }}
env_allow = ["CONTAIN_MARKER"]

[profile]
hardware = "sim"

[suites.pr]
concurrency = [1, 2, 3, 4, 5, 6]
contexts = ["0"]
duration = "1s"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 128
sub_windows = 4
"#
    );
    let p = dir.join("gate.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Starts `infergate run` outside Actions, stderr to `dir/stderr.txt`.
fn spawn_gate(dir: &Path, config: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(config)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--baseline-dir")
        .arg(dir.join("baselines"))
        .env_remove("GITHUB_ACTIONS")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
        .spawn()
        .unwrap()
}

/// `results.json` as JSON, when it exists and parses.
fn results(out: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(out.join("results.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Waits (polling the file, at most 120 s) until the in-progress results hold `n` cells.
fn wait_for_cells(dir: &Path, n: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(r) = results(&dir.join("out"))
            && r["status"] == "in_progress"
            && r["cells"].as_array().is_some_and(|c| c.len() >= n)
        {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "no in-progress results with {n} cells; stderr:\n{}",
            std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn coords(r: &Value) -> Vec<(u64, u64)> {
    r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["concurrency"].as_u64().unwrap(),
                c["context_tokens"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn cell(r: &Value, (c, l): (u64, u64)) -> Option<&Value> {
    r["cells"]
        .as_array()?
        .iter()
        .find(|x| x["concurrency"].as_u64() == Some(c) && x["context_tokens"].as_u64() == Some(l))
}

/// Waits up to `limit` for the child to exit.
fn exited_within(child: &mut Child, limit: Duration) -> bool {
    eventually(limit, || child.try_wait().unwrap().is_some())
}

fn signal(child: &Child, sig: Signal) {
    let _ = kill(Pid::from_raw(child.id() as i32), sig);
}

#[test]
fn a_github_style_cancel_mid_matrix_keeps_the_finished_cells_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("cancel-{}", std::process::id());
    let config = config(dir.path(), &marker);
    let mut gate = spawn_gate(dir.path(), &config);
    let before = wait_for_cells(dir.path(), 2);
    let finished = coords(&before);

    // What the runner does to a cancelled step: SIGINT, SIGTERM 7.5 s later, SIGKILL 2.5 s
    // after that.
    let t0 = Instant::now();
    signal(&gate, Signal::SIGINT);
    if !exited_within(&mut gate, Duration::from_millis(7500)) {
        signal(&gate, Signal::SIGTERM);
        if !exited_within(&mut gate, Duration::from_millis(2500)) {
            signal(&gate, Signal::SIGKILL);
        }
    }
    let status = gate.wait().unwrap();
    eprintln!(
        "gate exited {:.2} s after SIGINT ({status})",
        t0.elapsed().as_secs_f64()
    );

    let after = results(&dir.path().join("out")).expect("results.json is valid JSON");
    for coord in &finished {
        let c = cell(&after, *coord).unwrap_or_else(|| panic!("cell {coord:?} lost: {after}"));
        assert_eq!(c["status"], "ok", "{c}");
    }
    assert!(
        after["status"] == "cancelled" || after["status"] == "in_progress",
        "{}",
        after["status"]
    );
    assert!(
        eventually(Duration::from_secs(30), || marked(&marker).is_empty()),
        "left running: {:?}",
        marked(&marker)
    );
}

#[test]
fn a_sigkilled_gate_leaves_every_cell_finished_before_the_kill() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("kill-{}", std::process::id());
    let config = config(dir.path(), &marker);
    let mut gate = spawn_gate(dir.path(), &config);
    let before = wait_for_cells(dir.path(), 2);
    gate.kill().unwrap();
    let _ = gate.wait();

    let after = results(&dir.path().join("out")).expect("results.json is valid JSON");
    assert_eq!(after["status"], "in_progress", "{after}");
    let kept = coords(&after);
    for coord in coords(&before) {
        assert!(kept.contains(&coord), "cell {coord:?} lost: {after}");
        assert_eq!(cell(&after, coord).unwrap()["status"], "ok");
    }
    // The unfinished file is never taken for a complete run.
    let compare = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["compare", "--candidate"])
        .arg(dir.path().join("out/results.json"))
        .arg("--baseline")
        .arg(dir.path().join("baselines"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&compare.stderr);
    assert_eq!(compare.status.code(), Some(3), "{stderr}");
    assert_contains(&stderr, "in_progress");
    assert!(
        eventually(Duration::from_secs(30), || marked(&marker).is_empty()),
        "left running: {:?}",
        marked(&marker)
    );
}

/// The environment of a pull-request step against the mock GitHub at `uri`.
fn actions_env(cmd: &mut Command, dir: &Path, uri: &str) {
    let step = PrStep::write(dir, HEAD_SHA);
    cmd.envs(step.env(uri, TOKEN)).env("GITHUB_SHA", HEAD_SHA);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigterm_while_github_hangs_exits_at_once_and_never_boots_the_engine() {
    let server = MockServer::start().await;
    // GitHub hangs on every request.
    Mock::given(path_regex(".*"))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_json(json!({"id": 1}))
                .set_delay(Duration::from_secs(120)),
        )
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("slow-gh-{}", std::process::id());
    let config = config(dir.path(), &marker);
    let mut cmd = gate_command(dir.path(), &config);
    actions_env(&mut cmd, dir.path(), &server.uri());
    let mut gate = cmd.spawn().unwrap();

    // Wait until the check-run creation is in flight.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reqs = server.received_requests().await.unwrap_or_default();
        if reqs.iter().any(|r| r.url.path().ends_with("/check-runs")) {
            break;
        }
        assert!(Instant::now() < deadline, "the check was never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t0 = Instant::now();
    signal(&gate, Signal::SIGTERM);
    let exited = {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if gate.try_wait().unwrap().is_some() {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let took = t0.elapsed().as_secs_f64();
    if !exited {
        let _ = gate.kill();
    }
    let status = gate.wait().unwrap();
    let stderr = std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap_or_default();
    eprintln!("gate exited {took:.2} s after SIGTERM ({status})");
    assert!(exited, "still running 20 s after SIGTERM:\n{stderr}");
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(!stderr.contains(TOKEN));

    // The engine was never booted: no engine log, no engine_spawned event, no process.
    let out = dir.path().join("out");
    assert!(!out.join("engine.log").exists(), "{stderr}");
    let r = results(&out).expect("results.json");
    assert_eq!(r["status"], "cancelled", "{r}");
    let kinds: Vec<&str> = r["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert!(
        !kinds.contains(&"engine_spawned") && !kinds.contains(&"engine_start"),
        "{kinds:?}"
    );
    assert!(marked(&marker).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cleanup_step_completes_the_check_a_killed_gate_left_in_progress_as_cancelled() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 4242})))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path_regex(format!("^/repos/{REPO}/check-runs/[0-9]+$")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 4242})))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("stale-{}", std::process::id());
    let config = config(dir.path(), &marker);
    let job_env = |cmd: &mut Command| {
        actions_env(cmd, dir.path(), &server.uri());
        cmd.env("RUNNER_NAME", "gpu-1")
            .env("GITHUB_RUN_ATTEMPT", "1");
    };

    // The gate starts its check in progress, then is killed mid-matrix.
    let mut cmd = gate_command(dir.path(), &config);
    job_env(&mut cmd);
    let mut gate = cmd.spawn().unwrap();
    let dir_path = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || wait_for_cells(&dir_path, 1))
        .await
        .unwrap();
    gate.kill().unwrap();
    let _ = gate.wait();
    let started: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path().ends_with("/check-runs"))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    let started = &started[0];
    assert_eq!(started["status"], "in_progress");
    assert_eq!(started["external_id"], "infergate/99/1/gpu-1");
    assert!(
        !server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .any(|r| r.method.as_str() == "PATCH"),
        "the killed gate completed nothing"
    );

    // GitHub lists it in progress, beside a parallel job's check and another tool's.
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/commits/{HEAD_SHA}/check-runs")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "total_count": 3,
            "check_runs": [
                {"id": 4242, "name": started["name"], "status": "in_progress",
                 "external_id": started["external_id"]},
                {"id": 5, "name": "infergate / other-gpu / pr", "status": "in_progress",
                 "external_id": "infergate/99/1/gpu-2"},
                {"id": 6, "name": "build", "status": "in_progress", "external_id": ""},
            ]
        })))
        .mount(&server)
        .await;
    let before = server.received_requests().await.unwrap().len();
    let mut cleanup = Command::new(env!("CARGO_BIN_EXE_infergate"));
    cleanup.arg("close-stale-checks");
    job_env(&mut cleanup);
    let out = tokio::task::spawn_blocking(move || cleanup.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(TOKEN) && !String::from_utf8_lossy(&out.stdout).contains(TOKEN));

    let reqs = server.received_requests().await.unwrap();
    let patches: Vec<_> = reqs[before..]
        .iter()
        .filter(|r| r.method.as_str() == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "only this job's check: {stderr}");
    assert!(patches[0].url.path().ends_with("/check-runs/4242"));
    let body: Value = serde_json::from_slice(&patches[0].body).unwrap();
    assert_eq!(body["status"], "completed");
    assert_eq!(body["conclusion"], "cancelled");
    assert_contains(&stderr, "completed");
    assert!(
        eventually(Duration::from_secs(30), || marked(&marker).is_empty()),
        "left running: {:?}",
        marked(&marker)
    );
}

/// `infergate run` of `config` writing under `dir` (out/, baselines/), stderr to
/// `dir/stderr.txt`.
fn gate_command(dir: &Path, config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_infergate"));
    cmd.args(["run", "--config"])
        .arg(config)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--baseline-dir")
        .arg(dir.join("baselines"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap());
    cmd
}
