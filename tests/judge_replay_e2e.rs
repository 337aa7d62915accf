//! One judge, three drivers: over a grid of real gates of the simulated engine (a clean one,
//! a regression a second boot confirms, a lean the second boot settles, adaptive rounds, a
//! one-run store), `compare --as-verdict` on the run's files and `report --trusted-config`
//! give the verdict `run` gave — its gate and its first line. After more runs were added to
//! the store, `compare --as-verdict` still does (it judges on the history the verdict lists);
//! `report --trusted-config` judges on the trusted store as it is (the untrusted files may not
//! choose their history), so its verdict may then differ. The gates run in this process against
//! the simulated engine in process ([`support::gate_in_process`]); `compare` and `report` are
//! the binary's.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use std::path::Path;
use std::process::Command;

use infergate::baseline::BaselineStore;
use infergate::verdict::ComparisonReport;
use support::{SMALL_SIM_CONFIG, baseline_around, gate_in_process, read_results};

fn read_verdict(path: &Path) -> ComparisonReport {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("verdict parses")
}

/// `compare --as-verdict` on a run's files: its verdict.
fn compare_files(out: &Path, store: &Path) -> ComparisonReport {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_infergate"));
    cmd.arg("compare")
        .arg("--baseline-dir")
        .arg(store)
        .arg("--candidate")
        .arg(out.join("results.json"))
        .arg("--as-verdict")
        .arg(out.join("verdict.json"))
        .args(["--format", "json"]);
    let second = out.join("results-confirm.json");
    if second.is_file() {
        cmd.arg("--confirmation").arg(second);
    }
    let output = cmd.output().expect("compare runs");
    assert!(
        matches!(output.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("compare's JSON")
}

/// `report --trusted-config` on a run's files: the verdict it recomputed.
fn report_trusted(config: &Path, out: &Path, store: &Path) -> ComparisonReport {
    let verdict = out.join("trusted-verdict.json");
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("report")
        .arg("--results")
        .arg(out.join("results.json"))
        .arg("--trusted-config")
        .arg(config)
        .arg("--baseline-dir")
        .arg(store)
        .arg("--verdict-out")
        .arg(&verdict)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("report runs");
    assert!(
        matches!(output.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    read_verdict(&verdict)
}

/// Adds `n` runs around `calib`, newer than every gate of the test, 3% faster (so a verdict
/// judged on the current store would differ from the run's).
fn add_later_runs(store: &Path, calib: &infergate::results::RunResults, n: usize) {
    let store = BaselineStore::open(store).expect("store");
    for i in 0..n {
        let mut r = calib.clone();
        r.run_id = format!("20991231T0000{i:02}Z-later{i}");
        r.started_at = chrono::Utc::now() + chrono::Duration::days(1 + i as i64);
        for cell in &mut r.cells {
            cell.aggregate_tps *= 1.03;
            for s in &mut cell.samples {
                *s *= 1.03;
            }
        }
        store.add(&r).expect("add a later run");
    }
}

#[test]
fn compare_and_trusted_report_give_runs_verdict_on_every_path_of_the_plan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, SMALL_SIM_CONFIG).expect("write config");
    // Adaptive rounds need a plan without a second boot (a leaning first boot would ask for
    // one and end the rounds).
    let adaptive = dir.path().join("adaptive.toml");
    std::fs::write(
        &adaptive,
        format!("{SMALL_SIM_CONFIG}\n[confirm]\nenabled = false\n\n[adaptive]\nmax_rounds = 2\n"),
    )
    .expect("write config");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("store dir");
    let calibration = dir.path().join("calibration");
    let first = gate_in_process(&config, &calibration, &store, &[]);
    assert_eq!(first.code, 0, "{}", first.events);
    let calib = read_results(&calibration.join("results.json"));
    baseline_around(&store, &calib, 10, |_, _| 1.0);
    // A store whose C=4 cell was 3% faster than this machine measures it: that cell alone
    // leans worse, which adaptive rounds measure again.
    let one_cell = dir.path().join("one-cell");
    baseline_around(&one_cell, &calib, 10, |_, cell| {
        if cell.concurrency == 4 { 1.03 } else { 1.0 }
    });
    // A one-run store: too little history to vouch for anything.
    let thin = dir.path().join("thin");
    baseline_around(&thin, &calib, 1, |_, _| 1.0);

    let slow = |f: &str| {
        vec![
            "--engine-arg=--slowdown".to_string(),
            format!("--engine-arg={f}"),
        ]
    };
    let cases: Vec<(&str, &Path, &Path, Vec<String>)> = vec![
        ("clean", &config, &store, Vec::new()),
        ("10% slower", &config, &store, slow("1.10")),
        ("4% slower", &config, &store, slow("1.04")),
        (
            "adaptive, one cell 3% slower",
            &adaptive,
            &one_cell,
            Vec::new(),
        ),
        ("one-run store", &config, &thin, Vec::new()),
    ];
    let mut gates = Vec::new();
    for (name, config, store, extra) in &cases {
        let out = dir.path().join(name.replace([' ', ',', '%'], "-"));
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let gated = gate_in_process(config, &out, store, &extra);
        assert!(matches!(gated.code, 0 | 1), "{name}: {}", gated.events);
        let run = read_verdict(&out.join("verdict.json"));
        let results = read_results(&out.join("results.json"));
        eprintln!(
            "{name}: {} (second boot: {}, adaptive rounds: {})",
            run.headline,
            out.join("results-confirm.json").is_file(),
            results
                .labels
                .get("adaptive_rounds")
                .map_or("-", String::as_str)
        );
        assert!(run.judged_by.is_some(), "{name}: the plan is recorded");
        assert!(
            !run.baseline.runs.is_empty(),
            "{name}: the history is recorded"
        );
        gates.push((*name, *config, *store, out, run));
    }
    // The grid covers the plan's paths.
    let verdicts: Vec<_> = gates.iter().map(|g| g.4.gate).collect();
    assert!(
        verdicts.contains(&infergate::verdict::GateVerdict::Regression),
        "{verdicts:?}"
    );
    assert!(
        verdicts.contains(&infergate::verdict::GateVerdict::Insufficient),
        "{verdicts:?}"
    );
    assert!(
        gates
            .iter()
            .any(|g| g.4.confirmation.as_ref().is_some_and(|c| c.used)),
        "a gate booted twice"
    );

    for later in [false, true] {
        if later {
            add_later_runs(&store, &calib, 5);
            add_later_runs(&thin, &calib, 5);
            add_later_runs(&one_cell, &calib, 5);
        }
        for (name, config, store, out, run) in &gates {
            let when = if later {
                "after 5 more runs"
            } else {
                "at once"
            };
            let compared = compare_files(out, store);
            assert_eq!(
                (compared.gate, &compared.headline),
                (run.gate, &run.headline),
                "{name}, compare {when}"
            );
            assert_eq!(compared.baseline.runs, run.baseline.runs, "{name}, {when}");
            if !later {
                let trusted = report_trusted(config, out, store);
                assert_eq!(
                    (trusted.gate, &trusted.headline),
                    (run.gate, &run.headline),
                    "{name}, report --trusted-config {when}"
                );
            }
        }
    }
}
