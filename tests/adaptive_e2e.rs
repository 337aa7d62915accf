//! Adaptive re-measurement end to end: a 3-cell matrix whose baseline is built so that one
//! cell (C=2) lands exactly on the margin — its interval must straddle it, `inconclusive` —
//! while the other two are clearly within it. `run` with `[adaptive]` re-measures only that
//! cell on the still-running engine, and results.json records the extra rounds with the
//! verdict after each.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::EventKind;
use infergate::verdict::ComparisonReport;
use support::{SMALL_SIM_CONFIG, baseline_around, gate, read_results};

/// Appended to [`support::SMALL_SIM_CONFIG`].
const TABLES: &str = r#"
[thresholds]
# A wide margin so the two ordinary cells are clearly `unchanged` on a busy machine; the
# matrix-wide test is off so the borderline cell keeps its own (cell-specific) verdict.
min_effect = 0.10
matrix_test = false

[adaptive]
max_rounds = 2
max_extra_seconds = "60s"
"#;

#[test]
fn only_the_borderline_cell_is_remeasured_and_its_rounds_are_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, format!("{SMALL_SIM_CONFIG}{TABLES}")).expect("write config");
    let store_dir = dir.path().join("baselines");

    // 1. Calibrate: one run with no baseline yet (nothing to compare, nothing re-measured).
    let first = dir.path().join("first");
    let (code, stderr) = gate(&config, &first, &store_dir, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let calib = read_results(&first.join("results.json"));
    assert!(calib.cells.iter().all(|c| c.rounds.is_empty()));

    // 2. A baseline of 8 runs around the calibration: run factor and cell terms of ~1%, and
    //    C=2 15% faster, so the candidate's C=2 relative to its own run (the cell-specific
    //    test: −15% · 2/3 of the cells) sits on the −10% margin, the others at +5%.
    baseline_around(&store_dir, &calib, 8, |cell| {
        if cell.concurrency == 2 {
            0.15f64.exp()
        } else {
            1.0
        }
    });

    // 3. The candidate run: C=2 inconclusive at the first look, re-measured; the others not.
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let (code, stderr) = gate(&config, &out, &store_dir, &[]);
    eprintln!(
        "{stderr}\ncandidate run took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    // The borderline cell may end inconclusive (exit 0) or, on a strongly disturbed machine,
    // be decided either way; the run itself must succeed.
    assert!(matches!(code, Some(0) | Some(1)), "{stderr}");
    let results = read_results(&out.join("results.json"));
    let verdict: ComparisonReport = serde_json::from_str(
        &std::fs::read_to_string(out.join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict parses");

    let cell = |c: u32| {
        results
            .cells
            .iter()
            .find(|x| x.concurrency == c)
            .expect("cell")
    };
    let borderline = cell(2);
    assert!(
        borderline.rounds.len() >= 2,
        "C=2 re-measured: {:?}\n{stderr}",
        borderline.rounds
    );
    assert_eq!(borderline.rounds[0].round, 0);
    assert_eq!(
        borderline.rounds[0].verdict_after.as_deref(),
        Some("inconclusive"),
        "the first look left C=2 undecided"
    );
    for (i, r) in borderline.rounds.iter().enumerate() {
        assert_eq!(r.round as usize, i);
        assert!(r.aggregate_tps > 0.0 && !r.samples.is_empty(), "{r:?}");
        assert!(r.verdict_after.is_some(), "round {i} has its verdict");
    }
    // Only a cell still inconclusive after a round gets another one.
    for w in borderline.rounds.windows(2) {
        assert_eq!(w[0].verdict_after.as_deref(), Some("inconclusive"));
    }
    // Pooled evidence: the cell's samples are all rounds' samples.
    let pooled: usize = borderline.rounds.iter().map(|r| r.samples.len()).sum();
    assert_eq!(borderline.samples.len(), pooled);
    // The decided cells were measured once.
    for c in [1, 4] {
        assert!(
            cell(c).rounds.is_empty(),
            "C={c} was decided at the first look and not re-measured: {:?}",
            verdict.cells
        );
    }
    let remeasured: Vec<&str> = results
        .events
        .iter()
        .filter(|e| e.kind == EventKind::AdaptiveRound)
        .map(|e| e.message.as_str())
        .collect();
    assert!(!remeasured.is_empty());
    assert!(
        remeasured.iter().all(|m| m.contains("C=2 ")),
        "{remeasured:?}"
    );
    assert_eq!(
        results.labels.get("adaptive_rounds").map(String::as_str),
        Some((borderline.rounds.len() - 1).to_string().as_str())
    );
    // The verdict file holds the final look's answer for C=2 and the first look's for the rest.
    let v2 = verdict
        .cells
        .iter()
        .find(|c| c.concurrency == 2)
        .expect("C=2 verdict");
    assert_eq!(
        Some(v2.verdict.as_str()),
        borderline
            .rounds
            .last()
            .and_then(|r| r.verdict_after.as_deref())
    );
    assert!(stderr.contains("adaptive:"), "{stderr}");
}
