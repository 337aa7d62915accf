//! `infergate run` end to end on the embedded default config: boots the simulated engine,
//! measures the `pr` suite, compares with the bundled baseline, tears down, exits 0.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::assert_contains;
use std::path::Path;
use std::process::Command;

use infergate::results::{CellStatus, RunResults, RunStatus};
use infergate::verdict::{ComparisonReport, GateVerdict};
use support::{engine_pgid, gate_in_process, group_gone, read_results};

/// The tests of this file boot engines; they run one at a time so the measured numbers are not
/// disturbed by each other on a small CI machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn run_on_the_default_config_passes_end_to_end() {
    let _serial = serial();
    let out = tempfile::tempdir().expect("tempdir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("infergate.toml");
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(out.path())
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    eprintln!("run took {:.1}s", started.elapsed().as_secs_f64());

    let text = std::fs::read_to_string(out.path().join("results.json")).expect("results.json");
    let results: RunResults = serde_json::from_str(&text).expect("results.json parses");
    assert_eq!(results.status, RunStatus::Complete);
    assert_eq!(results.suite.as_deref(), Some("pr"));
    assert_eq!(results.cells.len(), 6);
    for c in &results.cells {
        assert_eq!(c.status, CellStatus::Ok, "{c:?}");
        assert!(c.samples.len() >= 3, "{c:?}");
        assert!(c.aggregate_tps > 0.0, "{c:?}");
    }
    // The pinned hardware profile makes the bundled baseline apply on any machine.
    assert!(
        results
            .profile
            .key
            .starts_with("cpu-sim__infergate-sim__sim-test__"),
        "{}",
        results.profile.key
    );
    // Compared with the bundled baseline, and passed.
    let verdict: ComparisonReport = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict.json parses");
    // Pass (or insufficient, which passes unless fail_on = "insufficient"): never a regression
    // against the bundled baseline of the same simulated engine.
    assert!(
        matches!(verdict.gate, GateVerdict::Pass | GateVerdict::Insufficient),
        "{:?}: {}\nstderr:\n{stderr}",
        verdict.gate,
        verdict.headline
    );
    assert_eq!(verdict.regressions().count(), 0);
    assert!(out.path().join("engine.log").exists());
    // The matrix is printed.
    assert_contains(&stdout, "Aggregate tok/s");
    // One answer: verdict.json's headline is the console's first line (wrapped there at 100
    // columns) and the summary's heading.
    let unwrapped = stdout.replace("\n  ", " ");
    assert!(
        unwrapped.lines().any(|l| l == verdict.headline),
        "{}\n{stdout}",
        verdict.headline
    );
    let summary = std::fs::read_to_string(out.path().join("summary.md")).expect("summary.md");
    assert!(
        summary.contains(&verdict.headline.replace('[', "\\[").replace(']', "\\]")),
        "{}\n{summary}",
        verdict.headline
    );

    // Teardown: no process of the engine's group is left.
    assert!(group_gone(engine_pgid(&results)));

    // Without NVML (this machine has no NVIDIA driver): one notice, telemetry unavailable,
    // exit code unaffected (asserted above).
    let telemetry = results.telemetry.expect("a telemetry summary");
    if telemetry.status == "unavailable" {
        assert!(telemetry.reason.as_deref().is_some_and(|r| !r.is_empty()));
        // One notice per boot (a second boot when the first leaned worse on a loaded machine).
        let boots = 1 + usize::from(out.path().join("results-confirm.json").exists());
        assert_eq!(
            stderr.matches("GPU telemetry unavailable").count(),
            boots,
            "{stderr}"
        );
    } else {
        assert_eq!(telemetry.status, "available");
        assert!(!telemetry.devices.is_empty());
    }
}

/// In process ([`support::gate_in_process`]): the subject is the matrix loop's capacity rule.
#[test]
fn a_cell_that_cannot_fit_dooms_larger_concurrency_at_that_context() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    // The `test` profile's KV budget (200k tokens) admits 4 x 32k but not 8 x 32k.
    std::fs::write(
        &config,
        r#"model = "sim-test"

[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "4"]
name = "infergate-sim"

[profile]
hardware = "sim"

[suites.cap]
concurrency = [4, 8, 12]
contexts = ["32k"]
duration = "1s"
warmup = "0.25s"
ready_stable = "0.5s"
capacity_stall = "1s"
"#,
    )
    .expect("write config");
    let out = dir.path().join("out");
    // An existing, empty store: "no baseline yet".
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("an empty store");
    let gate = gate_in_process(&config, &out, &store, &[]);
    // Capacity-limited cells are results, not failures; no baseline yet → pass.
    assert_eq!(gate.code, 0, "{}", gate.events);
    let run = gate.run.expect("the gate ran");
    assert!(run.verdict.is_none() && run.failure.is_none());
    assert!(
        run.notices
            .iter()
            .any(|n| n.to_lowercase().contains("no baseline")),
        "{:?}",
        run.notices
    );
    let results = read_results(&out.join("results.json"));
    let status: Vec<CellStatus> = results.cells.iter().map(|c| c.status).collect();
    assert_eq!(
        status,
        vec![
            CellStatus::Ok,
            CellStatus::CapacityLimited,
            CellStatus::CapacityLimited
        ],
        "{:?}",
        results.cells
    );
    assert_eq!(
        results.cells[2].reason.as_deref(),
        Some("C=8 already capacity-limited at 32k: not measured")
    );
    assert_eq!(results.cells[2].measured_s, 0.0);
    assert!(!out.join("verdict.json").exists());
}
