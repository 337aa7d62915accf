//! `infergate ab` end to end: two simulated engines booted alternately (A B B A A B B A), one of
//! them a third slower → regression, exit 1; two identical ones → no regression, exit 0; every
//! boot torn down (its process group gone) before the next one starts.
//!
//! The outcomes must hold on a loaded 2-core machine (other builds, busy loops): there the
//! gate's wall-clock windows lose a few percent to scheduling delays, which once turned a 5%
//! slowdown into "inconclusive" (−3.2% measured against a 3% margin). So the slower engine is
//! 50% slower per step (−33% throughput) and the margin is 10%: no scheduling noise can close a
//! gap of three margins, and two identical engines cannot drift a whole margin apart across
//! the interleaved boots. The 5%-class power of the paired design is measured by
//! `scripts/eval/ab-vs-baseline-sim.sh`, not asserted here.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks, assert_starts_with};
use std::path::Path;
use std::process::Command;

use infergate::results::{Event, EventKind, RunResults};
use infergate::verdict::{ComparisonReport, GateVerdict};
use support::group_gone;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn config(dir: &Path, b_slowdown: &str) -> std::path::PathBuf {
    config_with(dir, &format!(r#""--slowdown", "{b_slowdown}""#), 4, "[2]")
}

/// The A/B config: B's sim gets `b_args` (TOML array items), `rounds` pairs, `concurrency`.
fn config_with(dir: &Path, b_args: &str, rounds: u32, concurrency: &str) -> std::path::PathBuf {
    let path = dir.join("ab.toml");
    let sim = |extra: &str| {
        format!(
            r#"["{{infergate}}", "sim", "--profile", "test", "--port", "{{port}}", "--time-scale", "2", "--seed", "3", {extra}]"#
        )
    };
    std::fs::write(
        &path,
        format!(
            r#"model = "sim-test"

[engine]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"

[engine.a]
command = {}

[engine.b]
command = {}

[ab]
rounds = {rounds}

[thresholds]
min_effect = 0.10

[profile]
hardware = "sim"

[suites.pr]
concurrency = {concurrency}
contexts = ["0"]
duration = "0.6s"
warmup = "0.2s"
ready_stable = "0.3s"
max_tokens = 128
sub_windows = 3
"#,
            sim(r#""--slowdown", "1.0""#),
            sim(b_args)
        ),
    )
    .expect("write config");
    path
}

struct AbOutcome {
    code: Option<i32>,
    stderr: String,
    verdict: ComparisonReport,
    events: Vec<Event>,
}

/// `infergate ab --config CFG --out OUT` outside GitHub Actions.
fn ab(cfg: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["ab", "--config"])
        .arg(cfg)
        .arg("--out")
        .arg(out)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate ab")
}

fn run_ab(b_slowdown: &str) -> AbOutcome {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config(dir.path(), b_slowdown);
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let output = ab(&cfg, &out);
    eprintln!("ab took {:.1}s", started.elapsed().as_secs_f64());
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let read = |name: &str| {
        std::fs::read_to_string(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}\n{stderr}"))
    };
    let verdict: ComparisonReport = serde_json::from_str(&read("verdict.json")).expect("verdict");
    let b: RunResults = serde_json::from_str(&read("results.json")).expect("results.json");
    let a: RunResults = serde_json::from_str(&read("results-a.json")).expect("results-a.json");
    // Every surface names the sides: B is compared with A's boots, never with "the baseline".
    let summary = read("summary.md");
    assert_contains(&summary, "Paired A/B run");
    assert_contains(&summary, "change of B vs A in %");
    assert_contains(&summary, " vs 4 A boots");
    assert_lacks(&summary, "baseline run");
    assert_eq!(verdict.against, infergate::verdict::Against::PairedAb);
    assert_contains(&verdict.headline, "B vs A");
    assert_contains(&summary, "A's level from 4 boots, noise from 4 pairs");
    // Each side's file records one round per boot.
    for side in [&a, &b] {
        assert_eq!(side.cells.len(), 1);
        assert_eq!(side.cells[0].rounds.len(), 4, "{:?}", side.cells[0].rounds);
    }
    let mut events: Vec<Event> = a.events.into_iter().chain(b.events).collect();
    events.sort_by_key(|e| e.at);
    AbOutcome {
        code: output.status.code(),
        stderr,
        verdict,
        events,
    }
}

/// Eight boots, one engine at a time: every `engine_spawned` is followed by that boot's
/// `engine_stopped` (group gone) before the next spawn, and no group is left now.
fn assert_torn_down_between_boots(events: &[Event]) {
    let mut spawned = 0;
    let mut running: Option<i32> = None;
    for e in events {
        match e.kind {
            EventKind::EngineSpawned => {
                assert!(
                    running.is_none(),
                    "engine {running:?} still running when another was spawned: {events:#?}"
                );
                let pgid = e.process_group.expect("process group in engine_spawned");
                running = Some(pgid);
                spawned += 1;
            }
            EventKind::EngineStopped => {
                let pgid = running.take().expect("a stop follows a spawn");
                assert_contains(
                    &e.message,
                    &format!("engine process group {pgid} stopped; no process left"),
                );
                assert!(group_gone(pgid), "process group {pgid} still exists");
            }
            _ => {}
        }
    }
    assert_eq!(spawned, 8, "A B B A A B B A = 8 boots");
    assert!(running.is_none());
}

#[test]
fn ab_finds_a_slower_candidate() {
    let _s = serial();
    let r = run_ab("1.5");
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert_eq!(
        r.verdict.gate,
        GateVerdict::Regression,
        "{}",
        r.verdict.headline
    );
    let change = r.verdict.cells[0]
        .primary()
        .expect("aggregate tok/s")
        .change;
    // 1/1.5 − 1 = −33%; delays common to both engines only shrink the gap a little.
    assert!((-0.45..-0.15).contains(&change), "change {change}");
    assert_eq!(r.verdict.candidate_runs.len(), 4);
    assert_eq!(r.verdict.baseline.level_runs.len(), 4);
    assert_torn_down_between_boots(&r.events);
    // A notice every boot repeats (no GPU telemetry here) is said once on the console, not
    // once per boot of the 8.
    assert!(
        r.stderr.matches("GPU telemetry unavailable").count() <= 1,
        "{}",
        r.stderr
    );
}

#[test]
fn ab_of_two_identical_engines_passes() {
    let _s = serial();
    let r = run_ab("1.0");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_ne!(
        r.verdict.gate,
        GateVerdict::Regression,
        "{}",
        r.verdict.headline
    );
    assert_eq!(r.verdict.regressions().count(), 0);
    assert_torn_down_between_boots(&r.events);
}

#[test]
fn ab_without_two_engines_is_a_usage_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["ab", "--config"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("infergate.toml"))
        .arg("--out")
        .arg(std::env::temp_dir().join("infergate-ab-usage"))
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate ab");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_contains(&stderr, "[engine.a]");
}

#[test]
fn ab_of_a_candidate_that_errors_where_the_base_serves_fails_closed() {
    let _s = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    // B answers HTTP 500 above one stream; A serves both cells. Two pairs of boots.
    let cfg = config_with(
        dir.path(),
        r#""--fault", "fail-above-concurrency=1""#,
        2,
        "[1, 2]",
    );
    let out = dir.path().join("out");
    let output = ab(&cfg, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}\n{stderr}");
    let v: ComparisonReport = serde_json::from_str(
        &std::fs::read_to_string(out.join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict");
    assert_eq!(v.gate, GateVerdict::Unmeasured, "{}", v.headline);
    assert_starts_with(
        &v.headline,
        "‼ unmeasured: cannot decide, B was not measured well enough: 1 of 2 cells A measured \
             were measured by B",
    );
    let cov = v.coverage.expect("coverage recorded");
    assert_eq!((cov.measured, cov.expected), (1, 2), "{cov:?}");
    let c2 = v.cells.iter().find(|c| c.concurrency == 2).expect("C=2");
    assert_eq!(
        c2.verdict,
        infergate::verdict::CellVerdict::ErrorRegression,
        "{c2:?}"
    );
    assert!(
        c2.reason
            .as_ref()
            .is_some_and(|r| r.to_string().contains("HTTP 500")),
        "{c2:?}"
    );
    assert_contains(&v.headline, "1 of 2");
}
