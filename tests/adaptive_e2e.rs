//! Adaptive re-measurement end to end: a 3-cell matrix whose baseline is built so that one
//! cell (C=2) leans worse at the first look (its statistic about −2.4: past the futility
//! bound, short of its boundary) however loaded the machine is, while C=1 sits at its level and
//! C=4 is far better. `run` with `[adaptive]` re-measures exactly the leaning cells on the
//! still-running engine, and results.json records the extra rounds with the verdict after
//! each. The gate runs in this process against the simulated engine in process
//! ([`support::gate_in_process`]): the subject is the judge's rounds, not the engine process.
//!
//! Load-robustness: C=2's baseline runs spread by ±12% (a fixed, zero-mean pattern), so its
//! standard error is about 10% and a load shift of several percent moves its statistic by
//! about half a unit, not past either bound. C=2 is 25% faster and C=4 25% slower in the
//! baseline, so the candidate's run effect (and the matrix-wide test) does not move.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::EventKind;
use infergate::verdict::ComparisonReport;
use support::{SMALL_SIM_CONFIG, baseline_around, gate_in_process, read_results};

/// Appended to [`support::SMALL_SIM_CONFIG`].
const TABLES: &str = r#"
[thresholds]
min_effect = 0.10

# One boot decides all (the matrix-wide test does not move here).
[confirm]
enabled = false

[adaptive]
max_rounds = 2
max_extra_seconds = "60s"
"#;

/// Log-scale spread of C=2's baseline runs: zero mean over all 8 runs and over the newest 5
/// (the level), standard deviation 0.93 × [`C2_SPREAD`].
const C2_PATTERN: [f64; 8] = [1.0, -1.0, 0.0, 1.0, -1.0, 1.0, -1.0, 0.0];
const C2_SPREAD: f64 = 0.12;

#[test]
fn only_the_borderline_cell_is_remeasured_and_its_rounds_are_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, format!("{SMALL_SIM_CONFIG}{TABLES}")).expect("write config");
    let store_dir = dir.path().join("baselines");
    std::fs::create_dir_all(&store_dir).expect("an empty store");

    // 1. Calibrate: one run with no baseline yet (nothing to compare, nothing re-measured).
    let first = dir.path().join("first");
    let calibration = gate_in_process(&config, &first, &store_dir, &[]);
    assert_eq!(calibration.code, 0, "{}", calibration.events);
    let calib = read_results(&first.join("results.json"));
    assert!(calib.cells.iter().all(|c| c.rounds.is_empty()));

    // 2. A baseline of 8 runs around the calibration: run factor and cell terms of ~1%, C=2
    //    25% faster (spread ±12%) and C=4 25% slower, so the candidate's C=2 is −25% against
    //    the rest of its run with a standard error of about 10%: it leans worse.
    baseline_around(&store_dir, &calib, 8, |run, cell| match cell.concurrency {
        2 => (0.25 + C2_SPREAD * C2_PATTERN[run]).exp(),
        4 => (-0.25f64).exp(),
        _ => 1.0,
    });

    // 3. The candidate run: C=2 leans worse at the first look, re-measured; the others not.
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let candidate = gate_in_process(&config, &out, &store_dir, &[]);
    let stderr = &candidate.events;
    eprintln!(
        "{stderr}\ncandidate run took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    // The leaning cell may end unchanged (exit 0) or, on a strongly disturbed machine, be
    // decided; the run itself must succeed.
    assert!(matches!(candidate.code, 0 | 1), "{stderr}");
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
        Some("unchanged"),
        "the first look left C=2 undecided"
    );
    for (i, r) in borderline.rounds.iter().enumerate() {
        assert_eq!(r.round as usize, i);
        assert!(r.aggregate_tps > 0.0 && !r.samples.is_empty(), "{r:?}");
        assert!(r.verdict_after.is_some(), "round {i} has its verdict");
    }
    // Only a cell still undecided after a round gets another one.
    for w in borderline.rounds.windows(2) {
        assert_eq!(w[0].verdict_after.as_deref(), Some("unchanged"));
    }
    // Pooled evidence: the cell's samples are all rounds' samples.
    let pooled: usize = borderline.rounds.iter().map(|r| r.samples.len()).sum();
    assert_eq!(borderline.samples.len(), pooled);
    // Exactly the leaning cells are re-measured: a cell without rounds did not lean worse at
    // the first look (its verdict is final), a cell with rounds was undecided at it.
    let mut remeasured_cells = Vec::new();
    for c in [1, 2, 4] {
        let v = verdict
            .cells
            .iter()
            .find(|x| x.concurrency == c)
            .expect("cell verdict");
        if cell(c).rounds.is_empty() {
            let leaning =
                v.verdict.as_str() == "unchanged" && v.primary().is_some_and(|m| m.p_value < 0.05);
            assert!(
                !leaning,
                "C={c} leans worse but was not re-measured: {:?}",
                verdict.cells
            );
        } else {
            assert_eq!(
                cell(c).rounds[0].verdict_after.as_deref(),
                Some("unchanged"),
                "C={c} was re-measured although decided at the first look"
            );
            remeasured_cells.push(format!("C={c} "));
        }
    }
    let remeasured: Vec<&str> = results
        .events
        .iter()
        .filter(|e| e.kind == EventKind::AdaptiveRound)
        .map(|e| e.message.as_str())
        .collect();
    assert!(!remeasured.is_empty());
    assert!(
        remeasured
            .iter()
            .all(|m| remeasured_cells.iter().any(|c| m.contains(c.as_str()))),
        "{remeasured:?} names only re-measured cells {remeasured_cells:?}"
    );
    let extra_rounds = [1, 2, 4]
        .iter()
        .map(|&c| cell(c).rounds.len().saturating_sub(1))
        .max()
        .unwrap_or(0);
    assert_eq!(
        results.labels.get("adaptive_rounds").map(String::as_str),
        Some(extra_rounds.to_string().as_str())
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
    let run = candidate.run.expect("the gate ran");
    let adaptive = run.adaptive.expect("the adaptive summary `run` prints");
    assert_eq!(
        results.labels.get("adaptive_rounds"),
        Some(&adaptive.rounds.to_string())
    );
}
