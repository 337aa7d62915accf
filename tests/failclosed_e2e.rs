//! The gate fails closed, replayed end to end: the real binary boots the simulated engine with
//! the fault that fools a lenient gate, and must not pass (issue 13's list):
//!
//! - an engine that fails whenever two or more streams run → exit 3 (`unmeasured`), the
//!   `error_regression` cells and their reason in the console, `verdict.json`, the job summary
//!   and the check run;
//! - a truncated baseline store and a 33% slower build → exit 3 naming every file;
//! - `--baseline-dir` that does not exist → exit 2; with `--update-baseline` it is created;
//! - a run of schema version 0 and a duplicate run are refused by `baseline add`;
//! - "no baseline yet" (exit 0, said loudly) only for a store that exists and holds no runs;
//! - a hung engine on the default nightly suite ends in seconds, not a time-out per cell.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use infergate::results::{CellStatus, RunStatus};
use infergate::verdict::{CellVerdict, ComparisonReport, GateVerdict};
use support::actions;
use support::{SMALL_SIM_CONFIG, baseline_around, engine_pgid, gate, group_gone, read_results};

/// The tests of this file boot engines; one at a time, so their timings do not disturb each
/// other on a small machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn infergate(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// A working directory with `gate.toml` (the small sim config, store `baselines/` beside it,
/// created empty) and a baseline of 5 runs around a calibration run of this machine.
struct Bench {
    dir: tempfile::TempDir,
    config: PathBuf,
    store: PathBuf,
}

fn with_baseline() -> Bench {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(
        &config,
        format!("{SMALL_SIM_CONFIG}\n[baseline]\ndir = \"baselines\"\n"),
    )
    .expect("write config");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("an empty store");
    // An existing store with no runs of the profile is the one "no baseline yet": exit 0,
    // said loudly.
    let calibration = dir.path().join("calibration");
    let (code, stderr) = gate(&config, &calibration, &store, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_contains(&stderr, "NO BASELINE YET");
    let calib = read_results(&calibration.join("results.json"));
    assert_eq!(
        calib.status,
        RunStatus::Complete,
        "{:?}",
        calib.status_reason
    );
    baseline_around(&store, &calib, 5, |_, _| 1.0);
    Bench { dir, config, store }
}

fn read_verdict(out: &Path) -> ComparisonReport {
    let text = std::fs::read_to_string(out.join("verdict.json")).expect("verdict.json written");
    serde_json::from_str(&text).expect("verdict.json parses")
}

#[test]
fn an_engine_that_fails_above_one_stream_never_passes() {
    let _serial = serial();
    let b = with_baseline();
    let out = b.dir.path().join("candidate");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let run = runtime.block_on(actions::run_in_actions(
        b.dir.path(),
        "gate.toml",
        "pr",
        &out,
        &[
            "--engine-arg",
            "--fault",
            "--engine-arg",
            "fail-above-concurrency=1",
        ],
    ));
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(run.code, Some(3), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        !stdout.contains(actions::TOKEN) && !stderr.contains(actions::TOKEN),
        "the token must never be printed"
    );

    // verdict.json: C=1 measured, C=2 and C=4 error regressions with the engine's reason, and
    // the gate cannot decide on one cell of three.
    let v = read_verdict(&out);
    assert_eq!(v.gate, GateVerdict::Unmeasured, "{}", v.headline);
    let cov = v.coverage.expect("coverage recorded");
    assert_eq!((cov.measured, cov.expected), (1, 3), "{cov:?}");
    for c in &v.cells {
        let reason = c
            .reason
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        if c.concurrency == 1 {
            assert_ne!(c.verdict, CellVerdict::ErrorRegression, "{c:?}");
        } else {
            assert_eq!(c.verdict, CellVerdict::ErrorRegression, "{c:?}");
            assert!(
                reason.contains("error now") && reason.contains("HTTP 500"),
                "{reason}"
            );
        }
    }
    assert_contains(&v.headline, "1 of 3");
    // The results: partial (cells errored), never a baseline.
    let results = read_results(&out.join("results.json"));
    assert_eq!(results.status, RunStatus::Partial);
    assert!(
        results
            .status_reason
            .as_deref()
            .is_some_and(|r| r.contains("2 of 3 cells errored")),
        "{:?}",
        results.status_reason
    );
    assert!(group_gone(engine_pgid(&results)));

    // The console: the verdict table with the error regressions and why.
    assert_contains(stdout, "error regression");
    assert_contains(stdout, "HTTP 500");
    assert_contains(stderr, "verdict: unmeasured");
    // The job summary (the output directory's and the step's).
    for summary in [
        std::fs::read_to_string(out.join("summary.md")).expect("summary.md"),
        run.summary.clone(),
    ] {
        assert_contains(&summary, "‼ unmeasured: ");
        assert_contains(&summary, "error regression");
        assert_contains(&summary, "HTTP 500");
    }
    // The step outputs and the check run: failed, with the reason in title and text.
    assert_eq!(
        run.output("verdict").as_deref(),
        Some("error"),
        "{}",
        run.outputs
    );
    let checks = run.check_bodies();
    let last = checks.last().expect("a check run");
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["conclusion"], "failure", "{last}");
    let title = last["output"]["title"].as_str().unwrap_or_default();
    assert_contains(title, "cannot decide");
    // The matrix and its Details (each cell's reason) are the check's summary.
    let text = last["output"]["summary"].as_str().unwrap_or_default();
    assert!(
        text.contains("error regression") && text.contains("HTTP 500"),
        "{text}"
    );
}

#[test]
fn a_truncated_store_and_a_slower_build_is_an_error_naming_the_files() {
    let _serial = serial();
    let b = with_baseline();
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in walk(&b.store) {
        if entry.parent().is_some_and(|p| p.ends_with("runs")) {
            files.push(entry);
        }
    }
    assert_eq!(files.len(), 5, "{files:?}");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        std::fs::write(f, &text[..text.len() / 2]).unwrap();
    }
    let out = b.dir.path().join("slow");
    let (code, stderr) = gate(
        &b.config,
        &out,
        &b.store,
        &["--engine-arg", "--slowdown", "--engine-arg", "1.33"],
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        support::flat(&stderr).contains("5 run files cannot be used"),
        "{stderr}"
    );
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(stderr.contains(name), "{name} not named:\n{stderr}");
    }
    assert_lacks(&stderr, "NO BASELINE YET");
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert_contains(&summary, "cannot be used");
    // The profile's group is known before boot (engine and model are configured), so the
    // store is read first: no engine is booted and no cell measured for a gate that could not
    // be decided, and a merge of the shard fails closed.
    assert_lacks(&stderr, "engine_start");
    assert!(!out.join("engine.log").exists());
    assert!(!out.join("verdict.json").exists());
    let results = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    assert_contains(&results, "\"status\": \"partial\"");
    let merged = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["merge", "--shard"])
        .arg(&out)
        .output()
        .expect("run merge");
    let text = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(3), "{text}");
    assert_contains(&text, "not measured: comparison with the baseline failed");
    assert_lacks(&text, "no_baseline");
}

#[test]
fn a_store_that_does_not_exist_is_a_usage_error_unless_the_first_baseline_creates_it() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, SMALL_SIM_CONFIG).expect("write config");
    let started = Instant::now();
    let (code, stderr) = gate(
        &config,
        &dir.path().join("out"),
        Path::new("/no/such/dir"),
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("baseline store /no/such/dir does not exist (--baseline-dir)")
            && stderr.contains("--update-baseline"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("out").join("results.json").exists(),
        "nothing was booted"
    );
    eprintln!("usage error after {:.2} s", started.elapsed().as_secs_f64());
    // The config's own `[baseline] dir` (default `baselines/` beside it) likewise.
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.path().join("out"))
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(&stderr, "([baseline] dir)");

    // Creating the first baseline creates the store.
    let store = dir.path().join("new").join("store");
    let (code, stderr) = gate(
        &config,
        &dir.path().join("first"),
        &store,
        &["--update-baseline"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_contains(&stderr, "NO BASELINE YET");
    assert_contains(&stderr, "baseline: run added as");
    let added: Vec<PathBuf> = walk(&store)
        .into_iter()
        .filter(|p| p.parent().is_some_and(|d| d.ends_with("runs")))
        .collect();
    assert_eq!(added.len(), 1, "{added:?}");

    // Adding the same run again is refused: a run counts once.
    let first = dir.path().join("first").join("results.json");
    let (code, _, err) = infergate(&["baseline", "add", "--dir", s(&store), s(&first)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        support::flat(&err).contains("is already in the baseline store"),
        "{err}"
    );

    // A run of schema version 0 is refused, naming the file.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&first).unwrap()).unwrap();
    doc["schema_version"] = 0.into();
    doc["run_id"] = "schema-zero".into();
    let zero = dir.path().join("zero.json");
    std::fs::write(&zero, doc.to_string()).unwrap();
    let (code, _, err) = infergate(&["baseline", "add", "--dir", s(&store), s(&zero)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("zero.json") && err.contains("schema_version 0 is not supported"),
        "{err}"
    );
}

#[test]
fn a_hung_engine_on_the_nightly_suite_ends_in_seconds() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).unwrap();
    let out = dir.path().join("out");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("infergate.toml");
    const HANG_AFTER_S: f64 = 12.0;
    let started = Instant::now();
    let hang = format!("hang-after={HANG_AFTER_S}");
    let (code, stderr) = gate(
        &config,
        &out,
        &store,
        &[
            "--suite",
            "nightly",
            "--engine-arg",
            "--fault",
            "--engine-arg",
            &hang,
        ],
    );
    let total = started.elapsed();
    // The engine starts after the gate does, so this overstates the time since the hang.
    let after_hang = total.saturating_sub(Duration::from_secs_f64(HANG_AFTER_S));
    eprintln!(
        "hung engine: gate exited {:.1} s after the hang ({:.1} s in all; the issue's target is < 30 s, a time-out per cell took 722 s)",
        after_hang.as_secs_f64(),
        total.as_secs_f64()
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert_contains(&stderr, "engine unresponsive");
    assert_contains(&stderr, "health probes in a row");
    let results = read_results(&out.join("results.json"));
    assert_eq!(results.status, RunStatus::Partial);
    assert_eq!(results.cells.len(), 15, "every cell is recorded");
    let last = results.cells.last().unwrap();
    assert_eq!(last.status, CellStatus::Error, "{last:?}");
    assert_eq!(last.reason.as_deref(), Some("engine unresponsive"));
    assert!(
        results.cells.iter().any(|c| c.status == CellStatus::Ok),
        "cells before the hang were measured"
    );
    assert!(group_gone(engine_pgid(&results)));
    // Generous for a loaded machine; the figure above is the measurement.
    assert!(
        after_hang < Duration::from_secs(60),
        "took {:.1} s after the hang",
        after_hang.as_secs_f64()
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert_contains(&summary, "engine unresponsive");
}

/// Every file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
