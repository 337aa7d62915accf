//! The confirmation boot end to end: a baseline built around a calibration run of this machine,
//! then a candidate engine 1.5% slower in every cell. Its first boot leans towards a
//! regression without proving one, so `run` stops that engine, boots it again, measures the
//! matrix a second time, and decides on both boots: two engine logs, `results-confirm.json`,
//! a verdict over two candidate runs, a summary section, and no process left behind.

use std::path::Path;
use std::process::Command;

use infergate::baseline::BaselineStore;
use infergate::results::{RunResults, RunStatus};
use infergate::verdict::{ComparisonReport, GateVerdict};

const CONFIG: &str = r#"model = "sim-test"

[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "2", "--seed", "5"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"

[profile]
hardware = "sim"

[suites.pr]
concurrency = [1, 2, 4]
contexts = ["0"]
duration = "1s"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 128
sub_windows = 4

[confirm]
# Confirm whenever the first boot leans worse at all, so the test does not depend on how
# strongly this machine's noise lets a 1.5% slowdown show.
p_below = 0.5
"#;

fn gate(config: &Path, out: &Path, store: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .arg("--baseline-dir")
        .arg(store)
        .args(extra)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

fn read_results(path: &Path) -> RunResults {
    serde_json::from_str(&std::fs::read_to_string(path).expect("results file")).expect("parses")
}

fn engine_pgid(results: &RunResults) -> i32 {
    results
        .events
        .iter()
        .find(|e| e.kind == "engine_spawned")
        .and_then(|e| e.message.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("an engine_spawned event with the process group")
}

fn group_gone(pgid: i32) -> bool {
    matches!(
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

#[test]
fn a_first_boot_leaning_worse_is_confirmed_by_a_second_boot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, CONFIG).expect("write config");
    let store_dir = dir.path().join("baselines");

    // 1. Calibrate on this machine: no baseline yet, nothing to compare, nothing to confirm.
    let first = dir.path().join("calibration");
    let (code, stderr) = gate(&config, &first, &store_dir, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("confirm:"), "{stderr}");
    assert!(!first.join("results-confirm.json").exists());
    let calib = read_results(&first.join("results.json"));

    // 2. Ten baseline runs around it: run factor and cell terms of about 1%.
    let store = BaselineStore::open(&store_dir).expect("store");
    let z: [f64; 12] = [
        0.3, -1.1, 0.8, -0.4, 1.4, -0.9, 0.1, -0.2, 1.0, -1.3, 0.6, -0.5,
    ];
    for run in 0..10 {
        let mut r = calib.clone();
        r.run_id = format!("20260101T0000{run:02}Z-base{run}");
        let run_f = (0.01 * z[run]).exp();
        for (k, cell) in r.cells.iter_mut().enumerate() {
            let f = run_f * (0.01 * z[(run * 3 + k + 5) % z.len()]).exp();
            cell.aggregate_tps *= f;
            for s in &mut cell.samples {
                *s *= f;
            }
        }
        store.add(&r).expect("add baseline run");
    }

    // 3. The candidate: 1.5% slower everywhere.
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let (code, stderr) = gate(
        &config,
        &out,
        &store_dir,
        &["--engine-arg=--slowdown", "--engine-arg=1.015"],
    );
    eprintln!(
        "{stderr}\ncandidate run took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(matches!(code, Some(0) | Some(1)), "{stderr}");
    assert!(
        stderr.contains("confirm: the first boot's matrix-wide change is"),
        "{stderr}"
    );

    // Two boots, two result files that point at each other, two logs.
    let results = read_results(&out.join("results.json"));
    let second = read_results(&out.join("results-confirm.json"));
    assert_eq!(results.status, RunStatus::Complete);
    assert_eq!(second.status, RunStatus::Complete);
    assert_ne!(results.run_id, second.run_id);
    assert_eq!(results.labels.get("confirmed_by"), Some(&second.run_id));
    assert_eq!(second.labels.get("confirms"), Some(&results.run_id));
    assert!(results.events.iter().any(|e| e.kind == "confirmation"));
    assert_eq!(second.cells.len(), results.cells.len());
    for log in ["engine.log", "engine-confirm.log"] {
        let len = std::fs::metadata(out.join(log)).map_or(0, |m| m.len());
        assert!(len > 0, "{log} is empty or missing");
    }
    // Each boot's engine is gone, and they were two different process groups.
    let (g1, g2) = (engine_pgid(&results), engine_pgid(&second));
    assert_ne!(g1, g2);
    assert!(group_gone(g1) && group_gone(g2));

    // The verdict tests both boots; the exit code follows it.
    let verdict: ComparisonReport = serde_json::from_str(
        &std::fs::read_to_string(out.join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict parses");
    assert_eq!(
        verdict.candidate_runs,
        vec![results.run_id.clone(), second.run_id.clone()]
    );
    assert!(
        verdict.headline.contains("tested over 2 boots"),
        "{}",
        verdict.headline
    );
    let matrix = verdict.matrix_test.as_ref().expect("matrix-wide test");
    assert!(matrix.change < 0.0, "{matrix:?}");
    assert_eq!(
        code == Some(1),
        verdict.gate == GateVerdict::Regression,
        "exit {code:?} vs gate {:?}",
        verdict.gate
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(summary.contains("### Confirmation boot"), "{summary}");
    assert!(summary.contains("| first boot | 1 |"), "{summary}");
    assert!(summary.contains("| both boots | 2 |"), "{summary}");
    assert!(summary.contains("results-confirm.json"), "{summary}");
}
