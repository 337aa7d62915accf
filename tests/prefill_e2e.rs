//! The prefill layer end to end against the simulated engine: a 4x slower prefill
//! (`prefill-slowdown=4`) shows as a 4x lower prefill tok/s in `results.json` with the
//! engine's own counters agreeing; a lying prompt counter is caught; and the embedded default
//! config still passes against its bundled baseline, whose runs have the prefill layer and
//! gate it.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::assert_contains;
use std::path::Path;
use std::process::Command;

use infergate::results::{PrefillAgreement, PrefillRecord, PrefillSampleKind, RunResults};
use support::{SMALL_SIM_CONFIG, gate, read_results};

/// The tests of this file boot engines; they run one at a time so the measured numbers are not
/// disturbed by each other on a small CI machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The small sim config at C=1 × 32k (where the 6 ms decode step inside a TTFT is small beside
/// a 164 ms prefill), with `sim_args` added to the engine command; its results.
fn run_32k(sim_args: &[&str]) -> RunResults {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra: String = sim_args.iter().map(|a| format!(", \"{a}\"")).collect();
    let text = SMALL_SIM_CONFIG
        .replacen(
            "\"--seed\", \"5\"]",
            &format!("\"--seed\", \"5\"{extra}]"),
            1,
        )
        .replacen("\"--time-scale\", \"2\"", "\"--time-scale\", \"1\"", 1)
        .replacen("concurrency = [1, 2, 4]", "concurrency = [1]", 1)
        .replacen("contexts = [\"0\"]", "contexts = [\"32k\"]", 1);
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, text).expect("write config");
    let out = dir.path().join("out");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("store dir");
    let (_code, stderr) = gate(&config, &out, &store, &[]);
    let results = read_results(&out.join("results.json"));
    assert_eq!(results.prefill.len(), 1, "{stderr}");
    results
}

fn cold_rate(p: &PrefillRecord) -> f64 {
    p.prefill_tps.expect("a cold sample")
}

#[test]
fn a_4x_slower_prefill_is_4x_lower_prefill_tps_and_the_counters_agree() {
    let _serial = serial();
    let clean = run_32k(&[]);
    let slow = run_32k(&["--fault", "prefill-slowdown=4"]);
    for run in [&clean, &slow] {
        let p = &run.prefill[0];
        assert_eq!(p.context_tokens, 32_768);
        assert!(p.error.is_none(), "{p:?}");
        // The warm-up (the decode prompt, cold: the sim counts tokens with /tokenize) and
        // the suite's default 3 unique samples.
        assert_eq!(p.samples.len(), 4, "{p:?}");
        assert_eq!(p.samples[0].kind, PrefillSampleKind::Warmup);
        assert!(p.samples.iter().all(|s| s.cold), "{p:?}");
        for s in &p.samples {
            // calibrated within 2% of the context
            assert!(
                (s.prompt_tokens as f64 / 32_768.0 - 1.0).abs() < 0.03,
                "{s:?}"
            );
        }
        assert_eq!(
            p.cross_check.verdict,
            PrefillAgreement::WithinTolerance,
            "{:?}",
            p.cross_check
        );
        let names: Vec<&str> = p
            .cross_check
            .checks
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["prompt_tokens_vs_counter", "prefill_time_vs_counter"]
        );
        let counters = p.engine_counters.as_ref().expect("vLLM-style counters");
        assert_eq!(counters.prompt_metric, "vllm:prompt_tokens_total");
    }
    // The test profile prefills at 200k tok/s: 164 ms for 32k, plus a ~6 ms decode step. The
    // engine's own prefill time runs on the sim's schedule, so its rate is checked tightly;
    // the client's TTFT also holds the host's HTTP and scheduling delay, which a loaded
    // machine stretches, so the client side is checked by the prefill time it added (the
    // delay is in both runs and cancels): 4x slower is 3 x 164 ms more per sample.
    let engine = |r: &RunResults| {
        let c = r.prefill[0]
            .engine_counters
            .as_ref()
            .expect("vLLM-style counters");
        c.engine_prefill_tps.expect("a prefill-time counter")
    };
    let (e_clean, e_slow) = (engine(&clean), engine(&slow));
    assert!(
        e_clean > 170_000.0 && e_clean < 210_000.0,
        "engine, clean: {e_clean}"
    );
    let ratio = e_clean / e_slow;
    assert!(
        ratio > 3.6 && ratio < 4.3,
        "engine: {e_clean} / {e_slow} = {ratio}"
    );
    let mean_cold_ttft = |r: &RunResults| {
        let cold: Vec<f64> = r.prefill[0]
            .samples
            .iter()
            .filter(|s| s.cold)
            .map(|s| s.ttft_s)
            .collect();
        cold.iter().sum::<f64>() / cold.len() as f64
    };
    let added = mean_cold_ttft(&slow) - mean_cold_ttft(&clean);
    let want = 3.0 * 32_768.0 / 200_000.0;
    assert!(
        (added / want - 1.0).abs() < 0.12,
        "4x slower prefill added {added:.3} s per cold sample, {want:.3} s expected"
    );
    assert!(cold_rate(&clean.prefill[0]) > cold_rate(&slow.prefill[0]) * 2.5);
}

#[test]
fn a_lying_prompt_counter_disagrees() {
    let _serial = serial();
    let run = run_32k(&["--fault", "prompt-counter-lies=1.5"]);
    let p = &run.prefill[0];
    assert_eq!(p.cross_check.verdict, PrefillAgreement::Disagrees, "{p:?}");
    let check = &p.cross_check.checks[0];
    assert_eq!(check.name, "prompt_tokens_vs_counter");
    assert!(
        !check.ok && (check.disagreement + 1.0 / 3.0).abs() < 0.02,
        "{check:?}"
    );
    // The decode layer is not affected: its cell is measured as ever.
    assert_eq!(
        run.cells[0].status,
        infergate::results::CellStatus::Ok,
        "{:?}",
        run.cells[0]
    );
}

/// `infergate run` on the embedded default: the prefill layer samples 8k (not context 0) and
/// the run passes against the bundled baseline, whose runs have the layer, which gates.
#[test]
fn the_default_config_passes_with_the_prefill_layer() {
    let _serial = serial();
    let out = tempfile::tempdir().expect("tempdir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("infergate.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(out.path())
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let results = read_results(&out.path().join("results.json"));
    let contexts: Vec<u64> = results.prefill.iter().map(|p| p.context_tokens).collect();
    assert_eq!(contexts, [8192]);
    assert_eq!(
        results.prefill[0].cross_check.verdict,
        PrefillAgreement::WithinTolerance
    );
    assert_contains(&stdout, "Prefill 8k: ");
    // The prefill layer was compared and gates (10 bundled runs have it).
    let verdict: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("verdict.json")).expect("verdict.json"),
    )
    .expect("verdict json");
    assert_eq!(verdict["prefill_gated"], serde_json::Value::Bool(true));
    assert_eq!(verdict["prefill"][0]["context_tokens"], 8192);
    // The bundled baseline's runs load, and have the prefill layer at 8k.
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("baselines");
    let mut loaded = 0;
    for entry in walk(&store) {
        if entry.extension().is_some_and(|e| e == "json")
            && let Ok(text) = std::fs::read_to_string(&entry)
            && let Ok(run) = serde_json::from_str::<RunResults>(&text)
        {
            assert_eq!(run.prefill.len(), 1, "{}", entry.display());
            loaded += 1;
        }
    }
    assert!(
        loaded > 0,
        "no bundled baseline run under {}",
        store.display()
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
