//! The supervisor on its failure paths: SIGTERM to the gate mid-cell, an engine that crashes
//! mid-run, one that never becomes ready, and a command that does not exist. In every case the
//! gate exits 3 and no engine process is left behind.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infergate::results::{CellStatus, RunResults, RunStatus};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::{engine_pgid, group_gone};

fn write_config(dir: &Path, command: &str, suite: &str, readiness: &str) -> std::path::PathBuf {
    let text = format!(
        r#"model = "sim-test"

[engine]
command = {command}
name = "infergate-sim"
readiness_timeout = "{readiness}"
stop_grace = "3s"

[profile]
hardware = "sim"

[suites.t]
{suite}
"#
    );
    let p = dir.join("gate.toml");
    std::fs::write(&p, text).expect("write config");
    // The default store (`baselines/` beside the config) exists and is empty.
    std::fs::create_dir_all(dir.join("baselines")).expect("an empty store");
    p
}

const SIM: &str =
    r#"["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "4""#;

fn pgid_from_line(line: &str) -> Option<i32> {
    line.split("engine process group ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
}

fn read_results(out: &Path) -> RunResults {
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json written");
    serde_json::from_str(&text).expect("results.json parses")
}

/// Kills the gate if a test fails before it exits.
struct Gate(std::process::Child);

impl Drop for Gate {
    fn drop(&mut self) {
        // SIGTERM first so the gate stops its engine; SIGKILL only if it hangs.
        let pid = Pid::from_raw(self.0.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn sigterm_mid_cell_stops_the_engine_and_writes_partial_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let config = write_config(
        dir.path(),
        &format!("{SIM}]"),
        "concurrency = [1, 2]\ncontexts = [\"0\"]\nduration = \"20s\"\nwarmup = \"0.5s\"\nready_stable = \"1s\"",
        "30s",
    );
    let mut gate = Gate(
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["run", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(&out)
            .env_remove("GITHUB_ACTIONS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gate"),
    );
    let stderr = gate.0.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut pgid = None;
    let mut seen = Vec::new();
    // Wait until the first cell is measuring (its window is 20 s long).
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        if pgid.is_none() {
            pgid = pgid_from_line(&line);
        }
        let ready = line.contains("ready C=1");
        seen.push(line);
        if ready {
            break;
        }
    }
    let pgid = pgid.unwrap_or_else(|| panic!("no engine process group in:\n{}", seen.join("\n")));
    std::thread::sleep(Duration::from_millis(500));
    assert!(!group_gone(pgid), "engine should be running mid-cell");
    let t0 = Instant::now();
    kill(Pid::from_raw(gate.0.id() as i32), Signal::SIGTERM).expect("SIGTERM the gate");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = gate.0.wait().expect("wait gate");
    assert_eq!(
        status.code(),
        Some(3),
        "stderr:\n{}\n{}",
        seen.join("\n"),
        rest.join("\n")
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "teardown took {:?}",
        t0.elapsed()
    );
    assert!(group_gone(pgid), "engine process group {pgid} survived");
    let results = read_results(&out);
    assert_eq!(results.status, RunStatus::Cancelled);
    assert_eq!(results.cells.len(), 2);
    assert_eq!(results.cells[0].status, CellStatus::Error);
    assert_eq!(results.cells[0].reason.as_deref(), Some("cancelled"));
    assert_eq!(results.cells[1].status, CellStatus::Skipped);
    // The cancelled cell does not wait for the engine to go idle, so it has nothing to say
    // about an engine "still busy 10 s after the cell ended".
    let busy = |text: &str| text.contains("still busy");
    assert!(
        !rest.iter().any(|l| busy(l)) && !results.events.iter().any(|e| busy(&e.message)),
        "a cancelled cell reported a busy engine:\n{}",
        rest.join("\n")
    );
}

#[test]
fn engine_crash_mid_run_exits_3_with_the_log_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let config = write_config(
        dir.path(),
        &format!("{SIM}, \"--fault\", \"crash-after=3\"]"),
        "concurrency = [1, 2]\ncontexts = [\"0\"]\nduration = \"4s\"\nwarmup = \"0.5s\"\nready_stable = \"1s\"",
        "30s",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run gate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_contains(&stderr, "engine exited with status 1");
    assert_contains(&stderr, "last lines of the engine log");
    let results = read_results(&out);
    assert_eq!(results.status, RunStatus::Partial);
    assert!(
        results.cells.iter().all(|c| c.status == CellStatus::Error
            && c.reason.as_deref() == Some("engine exited with status 1")),
        "{:?}",
        results.cells
    );
    let pgid = engine_pgid(&results);
    assert!(group_gone(pgid));
}

#[test]
fn engine_that_never_becomes_ready_times_out_in_the_configured_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let config = write_config(
        dir.path(),
        &format!("{SIM}, \"--fault\", \"never-ready\"]"),
        "concurrency = [1]\ncontexts = [\"0\"]\nduration = \"1s\"",
        "3s",
    );
    let t0 = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run gate");
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert_contains(&stderr, "engine not ready after 3.0s");
    assert_contains(&stderr, "/health answered HTTP 503");
    // 3 s readiness + teardown (grace 3 s at most) + start-up, with room for a loaded machine.
    assert!(took < Duration::from_secs(12), "took {took:?}");
    let results = read_results(&out);
    assert_eq!(results.status, RunStatus::Partial);
    assert!(results.cells.iter().all(|c| c.status == CellStatus::Error));
    let pgid = engine_pgid(&results);
    assert!(group_gone(pgid));
}

/// A program that does not exist is a config error found before any boot: exit 2, nothing
/// measured, no results file.
#[test]
fn engine_command_that_does_not_exist_is_a_clear_exit_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let config = write_config(
        dir.path(),
        r#"["/nonexistent/bin/vllm-engine-xyz", "serve", "--port", "{port}"]"#,
        "concurrency = [1]\ncontexts = [\"0\"]",
        "5s",
    );
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run gate");
    let stderr = support::flat(&String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(
        &stderr,
        "[engine] command: its program `/nonexistent/bin/vllm-engine-xyz` does not exist",
    );
    assert_lacks(&stderr, "starting engine");
    assert!(!out.join("results.json").exists());
}
