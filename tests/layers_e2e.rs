//! The gate's layers end to end on the simulated engine (issue 57's must-show): a store of 10
//! clean runs with the prefill layer is recorded here, then a 4x and a 1.3x slower prefill
//! fail the gate naming the prefill layer, a 10% slower engine fails it naming decode
//! throughput (not prefill: its 10% margin), and a clean rerun passes. Its 14 gates run in this
//! process against the simulated engine in process ([`support::gate_in_process`]): the
//! subject is the judge's layers, not the engine process.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use std::path::Path;

use support::gate_in_process;

/// The default config's small variant at C=1,2 × 8k with the prefill layer's 8 cold samples
/// (as the default `pr` suite), at the engine's own speed (`--time-scale 1`) and the default
/// config's prefill speed (`--prefill-tps 50000`: an 8k sample lasts 164 ms, so a loaded host's
/// milliseconds do not hide a 1.3x slower prefill, as they did at the profile's 41 ms).
const LAYERS_CONFIG: &str = r#"model = "sim-test"

[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "1", "--prefill-tps", "50000", "--seed", "5"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"

[profile]
hardware = "sim"

[suites.pr]
concurrency = [1, 2]
contexts = ["8k"]
duration = "1s"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 128
sub_windows = 4
prefill_samples = 8

[thresholds]
metrics = ["aggregate_tps", "prefill_tps"]
"#;

/// The config with `sim_args` added to the engine command; its path.
fn config(dir: &Path, name: &str, sim_args: &[&str]) -> std::path::PathBuf {
    support::config_with_sim_args(LAYERS_CONFIG, dir, name, sim_args)
}

/// The verdict's first line, as `verdict.json` records it.
fn headline(out: &Path) -> String {
    support::read_json(out, "verdict.json")["headline"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn prefill_and_decode_regressions_are_named_by_layer_and_a_clean_rerun_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("store dir");
    let clean = config(dir.path(), "clean", &[]);
    for i in 0..10 {
        let out = dir.path().join(format!("base-{i}"));
        let run = gate_in_process(&clean, &out, &store, &["--update-baseline"]);
        assert_eq!(run.code, 0, "baseline run {i}: {}", run.events);
    }

    let cases: [(&str, &[&str], i32, &str); 4] = [
        (
            "prefill4x",
            &["--fault", "prefill-slowdown=4"],
            1,
            "prefill tok/s",
        ),
        (
            "prefill13",
            &["--fault", "prefill-slowdown=1.3"],
            1,
            "prefill tok/s",
        ),
        // Decode 10% slower, prefill as before: the sim's --slowdown slows prefill by the same
        // 10% (−9% read, at its 10% margin), which the fault gives back.
        (
            "decode11",
            &["--slowdown", "1.1", "--fault", "prefill-slowdown=0.90909"],
            1,
            "aggregate tok/s",
        ),
        ("clean", &[], 0, "no regression"),
    ];
    for (name, args, want, names) in cases {
        let out = dir.path().join(format!("out-{name}"));
        let run = gate_in_process(&config(dir.path(), name, args), &out, &store, &[]);
        let first = headline(&out);
        assert_eq!(run.code, want, "{name}: {first}\n{}", run.events);
        assert!(first.contains(names), "{name}: {first}");
        if name == "decode11" {
            // Decode named, and no prefill regression.
            assert!(!first.contains("prefill"), "{name}: {first}");
        }
    }
}
