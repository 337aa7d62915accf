//! The confirmation boot end to end: a baseline built around a calibration run of this machine,
//! then a candidate engine 4% slower in every cell. Its first boot leans worse past the
//! futility screen (a matrix-wide change is never decided on one boot), so `run` stops that
//! engine, boots it again, measures the matrix a second time, and decides on both boots: two
//! engine logs, `results-confirm.json`, a verdict over two candidate runs and a summary
//! section. The gate runs in this process against the simulated engine in process
//! ([`support::gate_in_process`]): its subject is the judge's plan, not process teardown
//! (`run_signals.rs`, `engine_supervisor.rs` and `ab_e2e.rs` test that).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::{EventKind, RunStatus};
use infergate::verdict::{ComparisonReport, GateVerdict};
use infergate_schema::asserts::{assert_contains, assert_lacks};
use support::{SMALL_SIM_CONFIG, baseline_around, gate_in_process, read_results};

#[test]
fn a_first_boot_leaning_worse_is_confirmed_by_a_second_boot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, SMALL_SIM_CONFIG).expect("write config");
    let store_dir = dir.path().join("baselines");
    std::fs::create_dir_all(&store_dir).expect("an empty store");

    // 1. Calibrate on this machine: no baseline yet, nothing to compare, nothing to confirm.
    let first = dir.path().join("calibration");
    let calibration = gate_in_process(&config, &first, &store_dir, &[]);
    assert_eq!(calibration.code, 0, "{}", calibration.events);
    assert_lacks(&calibration.events, "confirmation");
    assert!(!first.join("results-confirm.json").exists());
    let calib = read_results(&first.join("results.json"));

    // 2. Ten baseline runs around it: run factor and cell terms of about 1%.
    baseline_around(&store_dir, &calib, 10, |_, _| 1.0);

    // 3. The candidate: 4% slower everywhere (about 4 boot-noise SDs: it leans worse past the
    //    screen's 1.7 however loaded the machine is).
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let candidate = gate_in_process(
        &config,
        &out,
        &store_dir,
        &["--engine-arg=--slowdown", "--engine-arg=1.04"],
    );
    let (code, events) = (candidate.code, &candidate.events);
    eprintln!(
        "{events}\ncandidate run took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(matches!(code, 0 | 1), "{events}");
    assert_contains(
        events,
        "confirmation: the first boot's matrix-wide change is",
    );

    // Two boots, two result files that point at each other, two logs.
    let results = read_results(&out.join("results.json"));
    let second = read_results(&out.join("results-confirm.json"));
    assert_eq!(results.status, RunStatus::Complete);
    assert_eq!(second.status, RunStatus::Complete);
    assert_ne!(results.run_id, second.run_id);
    assert_eq!(results.labels.get("confirmed_by"), Some(&second.run_id));
    assert_eq!(second.labels.get("confirms"), Some(&results.run_id));
    assert!(
        results
            .events
            .iter()
            .any(|e| e.kind == EventKind::Confirmation)
    );
    assert_eq!(second.cells.len(), results.cells.len());
    for log in ["engine.log", "engine-confirm.log"] {
        let len = std::fs::metadata(out.join(log)).map_or(0, |m| m.len());
        assert!(len > 0, "{log} is empty or missing");
    }
    // Both boots were the in-process engine, each stopped.
    for run in [&results, &second] {
        assert_eq!(run.engine.containment.as_deref(), Some("in-process"));
    }

    // The verdict tests both boots; the exit code follows it.
    let verdict: ComparisonReport = serde_json::from_str(
        &std::fs::read_to_string(out.join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict parses");
    assert_eq!(
        verdict.candidate_runs,
        vec![results.run_id.clone(), second.run_id.clone()]
    );
    assert_contains(&verdict.headline, "on a second boot");
    let matrix = verdict.matrix_test.as_ref().expect("matrix-wide test");
    assert!(matrix.change < 0.0, "{matrix:?}");
    assert_eq!(
        code == 1,
        verdict.gate == GateVerdict::Regression,
        "exit {code:?} vs gate {:?}",
        verdict.gate
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert_contains(&summary, "Second boot: ");
    let confirmation = verdict
        .confirmation
        .as_ref()
        .expect("the verdict records the confirmation");
    assert_eq!(confirmation.second_results, "results-confirm.json");
    let first_boot = confirmation
        .first_boot
        .as_ref()
        .expect("the first boot's matrix test");
    assert!(first_boot.p_value < 0.05, "{first_boot:?}");
    // The arithmetic of the matrix-wide test at the second look, as one line.
    let lines = verdict.check_lines();
    assert!(
        lines[0].starts_with("matrix: t = −") && lines[0].contains("both boots"),
        "{lines:?}"
    );
    // Details: the two boots together, and the first boot alone.
    assert_contains(&summary, "the verdict tests both boots together");
    assert_contains(&summary, "First boot alone, matrix-wide: ");
    assert_contains(&summary, "results-confirm.json");
    // The charts draw the two boots the verdict is over, each named.
    assert!(
        summary.contains(r#""boot 1", "boot 2"]"#) && !summary.contains(r#""this run"]"#),
        "{summary}"
    );
}
