//! `infergate stats-eval` in its reduced CI form: runs the real binary (which calls the real
//! `compare`) and checks the Monte Carlo figures are sane. The full form and its targets are in
//! docs/statistics.md.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::process::Command;

fn stats_eval(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("stats-eval")
        .args(args)
        .output()
        .expect("the infergate binary runs")
}

#[test]
fn reduced_monte_carlo_has_few_false_alarms_and_finds_ten_percent() {
    let out = stats_eval(&[
        "--trials",
        "100",
        "--history",
        "20",
        "--seed",
        "11",
        "--format",
        "json",
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
    let scenarios = v["histories"][0]["scenarios"]
        .as_array()
        .expect("scenarios");
    let rate = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["regression_rate"].as_f64())
            .unwrap_or_else(|| panic!("scenario {name} missing: {scenarios:?}"))
    };
    assert!(rate("aa") <= 0.05, "A/A false alarms {}", rate("aa"));
    assert!(
        rate("uniform_-10%") >= 0.90,
        "power at -10% {}",
        rate("uniform_-10%")
    );
    assert!(
        rate("single_cell_-10%") >= 0.5,
        "single cell {}",
        rate("single_cell_-10%")
    );
    // Power grows with the effect.
    assert!(
        rate("uniform_-2%") <= rate("uniform_-5%") && rate("uniform_-5%") <= rate("uniform_-10%")
    );
    for s in scenarios {
        for key in [
            "gate_inconclusive_rate",
            "cell_inconclusive_rate",
            "cell_unchanged_rate",
        ] {
            let x = s[key].as_f64().expect(key);
            assert!((0.0..=1.0).contains(&x), "{key} = {x}");
        }
    }
    // The default evaluates the gate as `run` makes it: a confirmation boot for some gates,
    // never more than two boots, and none at uniform -10% (decided at the first boot).
    assert!(v["confirm"]["p_below"].as_f64().is_some(), "{v}");
    for s in scenarios {
        let boots = s["mean_boots"].as_f64().expect("mean_boots");
        let rate = s["confirm_rate"].as_f64().expect("confirm_rate");
        assert!((1.0..=2.0).contains(&boots), "{s}");
        assert!((boots - 1.0 - rate).abs() < 1e-9, "{s}");
    }
    let boots = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["mean_boots"].as_f64())
            .expect("mean_boots")
    };
    assert!(boots("aa") < 1.2, "A/A boots {}", boots("aa"));
    assert!(boots("uniform_-2%") > boots("aa"));
    // Targets are only checked for a 20-run history, and each names what it measured.
    assert_eq!(v["targets"].as_array().map(Vec::len), Some(4));
}

#[test]
fn without_confirmation_every_gate_is_one_boot() {
    let out = stats_eval(&[
        "--trials",
        "30",
        "--history",
        "20",
        "--seed",
        "3",
        "--no-confirm",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    assert!(v["confirm"].is_null(), "{v}");
    for s in v["histories"][0]["scenarios"]
        .as_array()
        .expect("scenarios")
    {
        assert_eq!(s["mean_boots"].as_f64(), Some(1.0), "{s}");
    }
    // A confirmation plan outside its range is a usage error.
    assert_eq!(
        stats_eval(&["--trials", "1", "--confirm-p", "0.9"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn text_form_prints_the_tables() {
    let out = stats_eval(&["--trials", "20", "--history", "5,20"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("A/A false alarm"), "{text}");
    assert!(
        text.contains("5 runs") && text.contains("20 runs"),
        "{text}"
    );
    assert!(text.contains("Targets:"), "{text}");
    assert!(text.contains("Confirmation boots"), "{text}");
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
