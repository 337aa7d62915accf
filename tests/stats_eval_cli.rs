//! `infergate stats-eval` in its reduced CI form: runs the real binary (which decides with the
//! gate's own two-boot plan) and checks the Monte Carlo figures are sane. The full grid and its
//! targets are in docs/statistics.md.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::assert_contains;
use std::process::Command;

fn stats_eval(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("stats-eval")
        .args(args)
        .output()
        .expect("the infergate binary runs")
}

/// The gate's answers on one runner, by scenario name.
fn scenarios(v: &serde_json::Value, runner: &str) -> Vec<serde_json::Value> {
    v["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["condition"] == runner)
        .unwrap_or_else(|| panic!("runner {runner} missing"))["scenarios"]
        .as_array()
        .expect("scenarios")
        .clone()
}

/// The peer rules' outcomes on one runner.
fn peers(v: &serde_json::Value, runner: &str) -> Vec<serde_json::Value> {
    v["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .find(|c| c["condition"] == runner)
        .unwrap_or_else(|| panic!("runner {runner} missing"))["peers"]
        .as_array()
        .expect("peers")
        .clone()
}

fn field(scenarios: &[serde_json::Value], name: &str, key: &str) -> f64 {
    scenarios
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s[key].as_f64())
        .unwrap_or_else(|| panic!("{name}.{key} missing: {scenarios:?}"))
}

#[test]
fn reduced_monte_carlo_on_one_runner_has_few_false_alarms_passes_clean_gates_and_finds_five_percent()
 {
    let out = stats_eval(&[
        "--trials", "100", "--seed", "11", "--custom", "--format", "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["trials"], 100);
    assert_eq!(v["cells"], 20);
    assert_eq!(v["history"], 20);
    let s = scenarios(&v, "custom");
    let rate = |name: &str| field(&s, name, "regression_rate");
    assert!(rate("aa") <= 0.05, "A/A false alarms {}", rate("aa"));
    assert!(field(&s, "aa", "pass_rate") >= 0.8, "{s:?}");
    assert!(
        rate("uniform_-5%") >= 0.8,
        "power at -5% {}",
        rate("uniform_-5%")
    );
    assert!(rate("row_-7%") >= 0.8, "row {}", rate("row_-7%"));
    // One boot for most clean gates, two for a uniform slowdown, never more.
    assert!(field(&s, "aa", "mean_boots") < 1.2, "{s:?}");
    assert!(field(&s, "uniform_-5%", "mean_boots") > 1.8, "{s:?}");
    for x in &s {
        let boots = x["mean_boots"].as_f64().expect("mean_boots");
        assert!((1.0..=2.0).contains(&boots), "{x}");
        let sum = x["regression_rate"].as_f64().unwrap_or(0.0)
            + x["pass_rate"].as_f64().unwrap_or(0.0)
            + x["insufficient_rate"].as_f64().unwrap_or(0.0);
        assert!(
            (sum - 1.0).abs() < 1e-9,
            "every gate says one of the three words: {x}"
        );
    }
    // The peers on the same trials: each family at its defaults (one boot) and moved to the
    // gate's budget, which alarms and boots on the A/A trials no more than the gate did.
    let p = peers(&v, "custom");
    for family in ["bencher_cell", "bencher_mean", "ratio", "perfherder"] {
        let rows: Vec<_> = p.iter().filter(|r| r["family"] == family).collect();
        assert!(rows.len() >= 2, "{family}: {p:?}");
        for r in &rows {
            let rs = r["scenarios"].as_array().expect("peer scenarios").clone();
            let (aa, boots) = (
                field(&rs, "aa", "alarm_rate"),
                field(&rs, "aa", "mean_boots"),
            );
            if r["setting"] == "gate_aa_rate" {
                assert!(aa <= rate("aa") + 1e-12, "{r}");
                assert!(boots <= field(&s, "aa", "mean_boots") + 1e-12, "{r}");
            } else {
                assert_eq!(boots, 1.0, "{r}");
            }
        }
    }
}

#[test]
fn without_confirmation_every_gate_is_one_boot() {
    let out = stats_eval(&[
        "--trials",
        "30",
        "--seed",
        "3",
        "--custom",
        "--no-confirm",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert_eq!(v["confirm"], serde_json::Value::Bool(false), "{v}");
    for s in scenarios(&v, "custom") {
        assert_eq!(s["mean_boots"].as_f64(), Some(1.0), "{s}");
    }
    // The peers get the gate's budget: one look.
    for p in peers(&v, "custom") {
        assert_eq!(p["confirm_threshold"], serde_json::Value::Null, "{p}");
        for s in p["scenarios"].as_array().expect("peer scenarios") {
            assert_eq!(s["mean_boots"].as_f64(), Some(1.0), "{s}");
        }
    }
}

#[test]
fn text_form_prints_the_grid_and_the_targets() {
    let out = stats_eval(&["--trials", "5"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for runner in [
        "gaussian",
        "t3 cells",
        "slow boots",
        "capacity flips",
        "AR(1)",
        "step -2%",
    ] {
        assert!(text.contains(runner), "{runner}: {text}");
    }
    assert_contains(&text, "Clean gates (A/A)");
    assert_contains(&text, "Regressions found");
    assert_contains(&text, "Targets:");
    assert_contains(&text, "Peers on the same trials");
    assert_contains(&text, "Latency on a busy host");
    assert_contains(&text, "ITL p99 2x alone");
    for plant in [
        "decode -10%",
        "prefill 1.3x slower",
        "prefill 4x slower",
        "burst TTFT p90 +30%",
    ] {
        assert!(text.contains(plant), "{plant}: {text}");
    }
    // Read at the console's width.
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
}

#[test]
fn bad_arguments_exit_2() {
    assert_eq!(stats_eval(&["--trials", "0"]).status.code(), Some(2));
    assert_eq!(stats_eval(&["--history", "0"]).status.code(), Some(2));
    let dir = tempfile::tempdir().expect("temp dir");
    let rule = dir.path().join("rule.toml");
    std::fs::write(&rule, "alpha = 3.0\n").expect("write rule");
    let out = stats_eval(&[
        "--rule",
        rule.to_str().expect("utf-8 path"),
        "--trials",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("alpha"));
    std::fs::write(&rule, "alpah = 0.01\n").expect("write rule");
    let out = stats_eval(&[
        "--rule",
        rule.to_str().expect("utf-8 path"),
        "--trials",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
