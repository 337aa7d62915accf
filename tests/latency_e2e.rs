//! Latency gated by default, end to end on the simulated engine (issue 57's must-show): a store
//! of 10 clean runs is recorded here, then a p99-only ITL regression (`itl-tail`: a rare gap
//! stretched, throughput and ITL p50 untouched) fails the gate naming ITL p99 (where the store's
//! own tails scatter too much to tell, the gate says it cannot vouch for ITL p99: never a pass),
//! a 10% slower decode fails it naming decode throughput and no latency, and a clean rerun
//! finds no regression. The rule
//! is the default one (`[thresholds]` left out: `aggregate_tps`, `prefill_tps`, `itl_p99`,
//! ITL p99's design effect +50%).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use std::path::Path;

use infergate_schema::asserts::assert_contains;
use support::gate;

/// The default config's small variant at C=4,8 × 0 (1.5 s windows: 320–460 gaps a cell, so
/// ITL p99, which needs 299, gates in both cells), at half the engine's speed (`--time-scale
/// 0.5`: a step every 18–26 ms). At its own speed (7–9 ms steps) the p99 is mostly this host's
/// scheduling: a store recorded while other builds ran read it 11–27 ms from run to run (a
/// log SD of 0.2–0.3, against 0.11 on a quieter moment), and the stretched gaps of the fault
/// below were then missed in 2 of 3 gates.
const LATENCY_CONFIG: &str = r#"model = "sim-test"

[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "0.5", "--seed", "5"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"

[profile]
hardware = "sim"

[suites.pr]
concurrency = [4, 8]
contexts = ["0"]
duration = "1.5s"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 256
sub_windows = 4
"#;

/// The config with `sim_args` added to the engine command; its path.
fn config(dir: &Path, name: &str, sim_args: &[&str]) -> std::path::PathBuf {
    support::config_with_sim_args(LATENCY_CONFIG, dir, name, sim_args)
}

/// The store's ITL p99 scatter (log SD, [`itl_p99_scatter`]) up to which the tripled tail
/// must be found, not only left unvouched. Measured 2026-12-07 on the 2-core VM: 0.017 on a
/// quiet host, 0.064–0.194 beside six or nine busy loops, the tail found in each of those five
/// runs; the store of the run it was missed in (load 7–8) scattered more. Set with room below
/// the busy runs', so a loaded CI host accepts `insufficient` where the store allows no more.
const QUIET_SCATTER: f64 = 0.10;

/// The metrics a cell of `verdict` found regressed (`metrics[].verdict`), by name.
fn regressed_metrics(verdict: &serde_json::Value) -> Vec<String> {
    let cells = verdict["cells"].as_array().cloned().unwrap_or_default();
    cells
        .iter()
        .flat_map(|c| c["metrics"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["verdict"] == "regression")
        .filter_map(|m| m["metric"].as_str().map(str::to_string))
        .collect()
}

/// The latency tests that decided the gate (`check.rejected`: a gating latency's regression
/// or improvement; a reported-only one's never is), by metric.
fn decided_latency(verdict: &serde_json::Value) -> Vec<String> {
    let cells = verdict["cells"].as_array().cloned().unwrap_or_default();
    cells
        .iter()
        .flat_map(|c| c["metrics"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["check"]["rejected"] == true)
        .filter_map(|m| m["metric"].as_str().map(str::to_string))
        .filter(|m| ["ttft", "itl", "tpot"].iter().any(|p| m.starts_with(p)))
        .collect()
}

/// Each cell's ITL p99 comparison and what did not gate, for a failure's message.
fn itl_p99_lines(verdict: &serde_json::Value) -> String {
    let cells = verdict["cells"].as_array().cloned().unwrap_or_default();
    let lines: Vec<String> = cells
        .iter()
        .flat_map(|c| c["metrics"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["metric"] == "itl_p99")
        .map(|m| {
            format!(
                "{} → {} ({}): {}",
                m["baseline"], m["candidate"], m["verdict"], m["check"]["outcome"]
            )
        })
        .collect();
    format!("{lines:?} not gated: {}", verdict["not_gated"])
}

/// The store's scatter in the tail: the largest run-to-run SD of a cell's log ITL p99 over
/// the runs recorded into it (their `results.json` in `outs`).
fn itl_p99_scatter(outs: &[std::path::PathBuf]) -> f64 {
    let mut by_cell: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for out in outs {
        let r = support::read_json(out, "results.json");
        for c in r["cells"].as_array().cloned().unwrap_or_default() {
            if let Some(p99) = c["itl_s"]["p99"].as_f64().filter(|v| *v > 0.0) {
                let key = format!("{}/{}", c["concurrency"], c["context_tokens"]);
                by_cell.entry(key).or_default().push(p99.ln());
            }
        }
    }
    use statrs::statistics::Statistics;
    by_cell
        .values()
        .filter(|v| v.len() > 1)
        .map(|v| v.iter().std_dev())
        .fold(0.0, f64::max)
}

/// Whether a first line speaks of a latency.
fn names_latency(first: &str) -> bool {
    ["ITL", "TTFT", "TPOT"].iter().any(|w| first.contains(w))
}

#[test]
fn a_p99_only_itl_regression_and_a_decode_slowdown_are_named_and_a_clean_rerun_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("store dir");
    let clean = config(dir.path(), "clean", &[]);
    let base: Vec<_> = (0..10)
        .map(|i| dir.path().join(format!("base-{i}")))
        .collect();
    let mut young = 0;
    let step_outputs = dir.path().join("github-output");
    for (i, out) in base.iter().enumerate() {
        // As a workflow step (local-only: no token), so the step outputs are written too.
        let run = support::gate_command(&clean, out, &store)
            .args(["--update-baseline", "--github"])
            .env("GITHUB_OUTPUT", &step_outputs)
            .env("GITHUB_STEP_SUMMARY", dir.path().join("summary.md"))
            .output()
            .expect("run infergate");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(0), "baseline run {i}: {stderr}");
        // On a store younger than a tail gates from, a green check says it did not cover it,
        // and so does the step output a workflow can fail on.
        if i == 0 {
            continue; // no baseline yet: nothing compared, no verdict
        }
        let v = support::read_json(out, "verdict.json");
        if matches!(v["gate"].as_str(), Some("pass" | "insufficient")) {
            let first = v["headline"].as_str().unwrap_or_default();
            let runs = format!("not gated: ITL p99 ({i} run");
            assert!(first.contains(&runs), "baseline run {i}: {first}");
            let outputs = std::fs::read_to_string(&step_outputs).expect("step outputs");
            let said = outputs
                .lines()
                .rev()
                .find_map(|l| l.strip_prefix("not-gated="));
            // This suite measures neither layer (context 0 only, no burst): not gated either.
            let not_gated = "itl_p99,prefill_tps,burst_tps,burst_ttft_p90";
            assert_eq!(said, Some(not_gated), "baseline run {i}: {outputs}");
            assert_contains(first, "prefill tok/s and the burst layer (not measured)");
            young += 1;
        }
    }
    assert!(
        young >= 8,
        "only {young} of the young store's gates decided"
    );
    let scatter = itl_p99_scatter(&base);

    // After every 50th token one gap lasts 3 steps (2% of the gaps; the tokens held back
    // come together after it, none lost): the p99, a step and a little of the host's
    // scheduling (19–35 ms here), becomes three steps (54–78 ms); the p90, the p50 and
    // throughput stay. A loaded host's own hiccups can bury the stretched gaps for a whole
    // gate: up to three gates, none failing on anything but ITL p99, and none passing. A store
    // recorded on a host 3.5 times over its cores scattered so that the tripled tail read
    // +47% to +105% and `unchanged`: the gate then says ITL p99 could be +50% or worse.
    let itl = config(dir.path(), "itl_p99", &["--fault", "itl-tail=50:3"]);
    let mut missed = Vec::new();
    let found = (0..3).any(|k| {
        let out = dir.path().join(format!("out-itl_p99-{k}"));
        let (code, stderr) = gate(&itl, &out, &store, &[]);
        let v = support::read_json(&out, "verdict.json");
        let first = v["headline"].as_str().unwrap_or_default().to_string();
        let regressed = regressed_metrics(&v);
        // The p99 alone: throughput, the median and the other gating metrics are no
        // regression. (The reported-only ITL p90 may read higher: the tokens held back come
        // together after the long gap, and once in a CI run it was listed; it fails nothing.)
        assert!(
            !regressed.iter().any(|m| [
                "aggregate_tps",
                "itl_p50",
                "prefill_tps",
                "burst_tps",
                "burst_ttft_p90"
            ]
            .contains(&m.as_str())),
            "itl_p99: {regressed:?}"
        );
        if code == Some(1) {
            assert!(first.starts_with("✗ ITL p99 +"), "itl_p99: {first}");
            return true;
        }
        assert_eq!(code, Some(0), "itl_p99: {first}\n{stderr}");
        let not_vouched = [
            "ITL p99 could be +50.0% or worse",
            "ITL p99 not vouched for",
        ];
        assert!(
            first.starts_with("? insufficient: ") && not_vouched.iter().any(|w| first.contains(w)),
            "a tripled ITL p99 passed: {first}: {}",
            itl_p99_lines(&v)
        );
        missed.push(first);
        false
    });
    // Where the store's tail scatters little, the tripled tail is found, not only left unvouched.
    assert!(
        found || scatter > QUIET_SCATTER,
        "a tripled ITL p99 was not found in three gates on a store whose ITL p99 scatters {scatter:.3} (log SD): {missed:?}"
    );
    eprintln!(
        "store ITL p99 scatter {scatter:.3} (log SD); found: {found}; not vouched for: {missed:?}"
    );

    let cases: [(&str, &[&str], i32); 2] =
        [("decode11", &["--slowdown", "1.1"], 1), ("clean", &[], 0)];
    for (name, args, want) in cases {
        let out = dir.path().join(format!("out-{name}"));
        let (code, stderr) = gate(&config(dir.path(), name, args), &out, &store, &[]);
        let v = support::read_json(&out, "verdict.json");
        let first = v["headline"].as_str().unwrap_or_default().to_string();
        let regressed = regressed_metrics(&v);
        assert_eq!(code, Some(want), "{name}: {first}\n{stderr}");
        match name {
            "decode11" => {
                assert!(first.contains("aggregate tok/s"), "{name}: {first}");
                assert!(!names_latency(&first), "{name}: {first}");
                // Every gap is 10% longer, within ITL p99's design effect: no latency fails
                // the gate (the reported-only ITL p50 may say it rose 10%, which it did).
                let gating_latency = regressed.iter().any(|m| m == "itl_p99");
                assert!(!gating_latency, "{name}: {regressed:?}");
                let decided = decided_latency(&v);
                assert!(decided.is_empty(), "{name}: {decided:?}");
            }
            _ => {
                assert!(first.contains("no regression"), "{name}: {first}");
                assert!(regressed.is_empty(), "{name}: {regressed:?}");
                let decided = decided_latency(&v);
                assert!(decided.is_empty(), "{name}: {decided:?}");
            }
        }
    }
}
