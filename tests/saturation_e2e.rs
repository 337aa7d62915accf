//! Truncation and saturation end to end against the simulated engine: an engine that preempts
//! requests (`--fault preempt`) is `saturated` where its history never was, a provisional alarm
//! that the confirmation boot turns into a `saturation_regression` (exit 1), named in the
//! console, `verdict.json` and the job summary; and a suite whose context + max_tokens does not
//! fit the engine's `max_model_len` is refused before any cell is measured (exit 3).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::CellStatus;
use infergate::verdict::{CellVerdict, ComparisonReport, GateVerdict};
use infergate_schema::asserts::{assert_contains, assert_lacks};
use support::{SMALL_SIM_CONFIG, baseline_around, engine_pgid, gate, group_gone, read_results};

#[test]
fn a_preempting_engine_is_saturated_and_confirmed_as_a_regression() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    // Throughput alone: the baseline below copies one calibration run's latencies 20 times
    // (no spread), so a loaded machine's ITL tail on the candidate (+100% at C=1 once under
    // a full `cargo test` on 2 cores) would be judged against none; latency gating has its
    // own tests.
    let text = format!("{SMALL_SIM_CONFIG}\n[thresholds]\nmetrics = [\"aggregate_tps\"]\n");
    std::fs::write(&config, text).expect("write config");
    let store_dir = dir.path().join("baselines");
    std::fs::create_dir_all(&store_dir).expect("an empty store");

    // 1. A clean run of this machine, then 20 baseline runs around it: no cell ever saturated.
    let calibration = dir.path().join("calibration");
    let (code, stderr) = gate(&config, &calibration, &store_dir, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let calib = read_results(&calibration.join("results.json"));
    assert!(
        calib
            .cells
            .iter()
            .all(|c| c.status == CellStatus::Ok && c.preemptions == Some(0)),
        "{:?}",
        calib
            .cells
            .iter()
            .map(|c| (c.status, c.preemptions))
            .collect::<Vec<_>>()
    );
    // (The helper's sequence of terms repeats after 12 runs: the later ones are set apart.)
    // Boots ±3% apart, as a shared runner's are: the candidate's C=1 speed, which a loaded
    // machine moves by a few percent, is then no regression, and the saturation (decided on
    // counts, not speed) is what the gate names.
    baseline_around(&store_dir, &calib, 20, |run, _| {
        (1.0 + 0.002 * (run / 12) as f64) * if run % 2 == 0 { 1.03 } else { 0.97 }
    });

    // 2. The candidate really holds 200 KV tokens: four streams of up to 128 + a short prompt
    // outgrow it (C=1 never does), so the engine preempts them, and counts it.
    let out = dir.path().join("out");
    let (code, stderr) = gate(
        &config,
        &out,
        &store_dir,
        &["--engine-arg=--fault", "--engine-arg=preempt=200"],
    );
    let results = read_results(&out.join("results.json"));
    let c4 = results
        .cells
        .iter()
        .find(|c| c.concurrency == 4)
        .expect("C=4");
    assert_eq!(c4.status, CellStatus::Saturated, "{c4:?}\n{stderr}");
    assert!(c4.preemptions.unwrap_or(0) > 0, "{c4:?}");
    assert!(
        c4.reason
            .as_deref()
            .unwrap_or("")
            .contains("vllm:num_preemptions_total"),
        "{c4:?}"
    );
    let c1 = results
        .cells
        .iter()
        .find(|c| c.concurrency == 1)
        .expect("C=1");
    assert_eq!(c1.status, CellStatus::Ok, "{c1:?}");

    // One saturated boot is only a provisional alarm: the engine was booted again, and the
    // cell was saturated there too, so both boots make it a saturation regression.
    let second = read_results(&out.join("results-confirm.json"));
    let c4b = second
        .cells
        .iter()
        .find(|c| c.concurrency == 4)
        .expect("C=4");
    assert_eq!(c4b.status, CellStatus::Saturated, "{c4b:?}");
    assert_contains(&stderr, "provisional alarm");
    let verdict: ComparisonReport = serde_json::from_str(
        &std::fs::read_to_string(out.join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict parses");
    assert_eq!(verdict.candidate_runs.len(), 2, "{}", verdict.headline);
    let v4 = verdict
        .cells
        .iter()
        .find(|c| c.concurrency == 4)
        .expect("C=4 verdict");
    assert_eq!(v4.verdict, CellVerdict::SaturationRegression, "{v4:?}");
    assert!(
        v4.reason
            .as_ref()
            .is_some_and(|r| r.to_string().contains("saturated on 2 of 2 boots")),
        "{v4:?}"
    );
    assert_eq!(verdict.gate, GateVerdict::Regression);
    assert_eq!(code, Some(1), "{stderr}");
    assert_contains(&stderr, "cell saturated C=4 ctx=0");
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    // The first line names the saturation regression and the cells.
    assert_contains(&summary, "## ✗ saturation regression at C=");
    assert_contains(&summary, "sat ⊘");
    assert_contains(&summary, "saturation");
    for r in [&results, &second] {
        assert!(group_gone(engine_pgid(r)));
    }
}

/// The simulated engine's `test` profile with a short context (1000 tokens), from a profile
/// file, so the engine command does not declare the limit.
const SHORT_PROFILE: &str = r#"
name = "test-short"
model = "sim-test"
max_model_len = 1000
kv_budget_tokens = 200000
kv_cost_per_token = 1.0
base_ms = 5.0
per_seq_ms = 1.0
per_kv_token_us = 0.01
prefill_tps = 200000.0
chars_per_token = 4.0
"#;

#[test]
fn a_context_longer_than_max_model_len_is_refused_before_the_matrix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store_dir = dir.path().join("baselines");
    std::fs::create_dir_all(&store_dir).expect("an empty store");
    // Contexts 0 and 1k with max_tokens 128 against an engine that takes 1000 tokens.
    let suite = |text: &str| text.replace("contexts = [\"0\"]", "contexts = [\"0\", \"1k\"]");

    // 1. The limit is only known once the engine serves it (GET /v1/models): refused after
    // boot, before any cell is calibrated or measured, exit 3.
    let profile = dir.path().join("short.toml");
    std::fs::write(&profile, SHORT_PROFILE).expect("write profile");
    let text = suite(SMALL_SIM_CONFIG).replace(
        "\"--profile\", \"test\"",
        &format!("\"--profile\", {:?}", profile.to_str().unwrap()),
    );
    assert!(text.contains("short.toml") && text.contains("1k"));
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, text).expect("write config");
    let out = dir.path().join("out");
    let (code, stderr) = gate(&config, &out, &store_dir, &[]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains("max_model_len is 1000 tokens (GET /v1/models"),
        "{stderr}"
    );
    assert_contains(
        &stderr,
        "C=1,2,4 / 1k (1024 context + 128 max_tokens = 1152 tokens)",
    );
    assert_contains(&stderr, "--max-model-len");
    // Nothing was measured: no cell calibrated or run, not even those that fit.
    let results = read_results(&out.join("results.json"));
    assert!(
        results.cells.iter().all(|c| c.status == CellStatus::Error),
        "{:?}",
        results.cells.iter().map(|c| c.status).collect::<Vec<_>>()
    );
    assert_lacks(&stderr, "cell start");
    assert!(group_gone(engine_pgid(&results)));

    // 2. The engine command declares it (`--max-model-len 1000`): refused before booting,
    // a config error (exit 2), naming the config.
    let text = suite(SMALL_SIM_CONFIG).replace(
        "\"--seed\", \"5\"]",
        "\"--seed\", \"5\", \"--max-model-len\", \"1000\"]",
    );
    assert!(text.contains("--max-model-len"));
    std::fs::write(&config, text).expect("write config");
    let out = dir.path().join("out-declared");
    let (code, stderr) = gate(&config, &out, &store_dir, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    // The error line is wrapped at 100 columns: its phrases are read with the breaks folded.
    let stderr = support::flat(&stderr);
    assert_contains(&stderr, "gate.toml");
    assert_contains(
        &stderr,
        "max_model_len is 1000 tokens (`--max-model-len 1000` in the engine command)",
    );
    assert_contains(&stderr, "C=1,2,4 / 1k");
    assert_lacks(&stderr, "starting engine");
}
