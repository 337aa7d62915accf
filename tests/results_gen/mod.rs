//! Deterministic generator of realistic results files for the `compare` / `baseline` e2e tests:
//! a run-level factor shared by all cells (clocks, thermals), a per-cell per-run term, and
//! sub-window samples around each cell's value, all multiplicative (log-normal).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use chrono::{Duration, TimeZone, Utc};
use infergate::results::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, LogNormal};

/// What to generate.
#[derive(Clone, Debug)]
pub struct Gen {
    pub model: String,
    pub suite: Option<String>,
    /// Multiplies every cell's true level (0.9 = 10% slower).
    pub factor: f64,
    pub run_cv: f64,
    pub cell_cv: f64,
    pub sample_cv: f64,
}

impl Default for Gen {
    fn default() -> Self {
        Gen {
            model: "Qwen/Qwen3-8B".into(),
            suite: Some("pr".into()),
            factor: 1.0,
            run_cv: 0.004,
            cell_cv: 0.006,
            sample_cv: 0.008,
        }
    }
}

pub const CONCURRENCY: [u32; 3] = [1, 4, 16];
pub const CONTEXTS: [u64; 2] = [0, 8192];

fn lognormal(cv: f64) -> LogNormal<f64> {
    // A log-normal with mean 1 and the given coefficient of variation.
    let sigma2 = (1.0 + cv * cv).ln();
    LogNormal::new(-sigma2 / 2.0, sigma2.sqrt()).expect("valid log-normal")
}

/// The true level of a cell (tok/s), shaped like a real decode matrix.
fn level(conc: u32, ctx: u64) -> f64 {
    let c = conc as f64;
    140.0 * c / (1.0 + 0.06 * c) * (1.0 - ctx as f64 / 400_000.0)
}

/// One run, numbered `index` (its seed and start time follow from it).
pub fn run(g: &Gen, index: u64) -> RunResults {
    let mut rng = StdRng::seed_from_u64(0x5eed_0000 + index * 7919 + (g.factor * 1000.0) as u64);
    let matrix = MatrixSpec {
        model: g.model.clone(),
        concurrency: CONCURRENCY.to_vec(),
        contexts: CONTEXTS.to_vec(),
        timing: infergate::results::CellTiming {
            duration_s: 30.0,
            warmup_s: 5.0,
            max_tokens: 256,
            unique_context_percent: 25.0,
            sub_windows: 6,
            ..infergate::results::CellTiming::DEFAULT
        },
        repetitions: 1,
    };
    let hw = HardwareFingerprint {
        kind: "gpu".into(),
        gpu_model: Some("NVIDIA H200".into()),
        gpu_count: 1,
        driver_version: Some("580.82".into()),
        cpu_model: None,
    };
    let profile = ProfileKey::derive(hw, "vllm", &g.model, &matrix);
    let run_factor = lognormal(g.run_cv).sample(&mut rng);
    let mut cells = Vec::new();
    for &conc in &CONCURRENCY {
        for &ctx in &CONTEXTS {
            let value =
                level(conc, ctx) * g.factor * run_factor * lognormal(g.cell_cv).sample(&mut rng);
            let samples: Vec<f64> = (0..6)
                .map(|_| value * lognormal(g.sample_cv).sample(&mut rng))
                .collect();
            let agg = samples.iter().sum::<f64>() / samples.len() as f64;
            let itl = conc as f64 / agg;
            let pct = |v: f64| Percentiles {
                mean: v,
                p50: v,
                p90: v * 1.1,
                p99: v * 1.3,
                count: 100,
            };
            let mut cell = CellResult::unmeasured(conc, ctx, CellStatus::Ok, "ready");
            cell.aggregate_tps = agg;
            cell.samples = samples;
            cell.per_user_tps = Some(pct(1.0 / itl));
            cell.ttft_s = Some(pct(0.05 + ctx as f64 / 50_000.0));
            cell.itl_s = Some(pct(itl));
            cell.output_tokens = (agg * 30.0) as u64;
            cell.measured_s = 30.0;
            cell.token_source = Some(TokenSource::ContinuousUsage);
            cells.push(cell);
        }
    }
    let started = Utc
        .with_ymd_and_hms(2026, 11, 1, 2, 0, 0)
        .single()
        .expect("date")
        + Duration::hours(index as i64);
    RunResults {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo::current(),
        run_id: format!("20261101T{:02}0000Z-gen{index:03}", index % 24),
        suite: g.suite.clone(),
        started_at: started,
        finished_at: Some(started + Duration::minutes(10)),
        status: RunStatus::Complete,
        status_reason: None,
        profile,
        engine: EngineIdentity {
            name: "vllm".into(),
            ..Default::default()
        },
        matrix,
        cells,
        telemetry: None,
        events: Vec::new(),
        source: ResultsSource::Infergate,
        labels: Default::default(),
        prefill: Vec::new(),
        burst: None,
        gate_failure: None,
    }
}

/// Writes a run as `<dir>/<name>` and returns the path.
pub fn write(dir: &Path, name: &str, run: &RunResults) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(run).expect("serialise")).expect("write");
    path
}

/// Writes runs `range` of `g` as `<prefix>-<i>.json`.
pub fn write_many(dir: &Path, prefix: &str, g: &Gen, range: std::ops::Range<u64>) -> Vec<PathBuf> {
    range
        .map(|i| write(dir, &format!("{prefix}-{i}.json"), &run(g, i)))
        .collect()
}

/// Path of the real seed file.
pub fn seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json")
}

/// Runs the binary; returns (exit code, stdout, stderr).
pub fn infergate(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .output()
        .expect("run infergate");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
