//! The synthetic 20-cell runner profile (5 concurrency levels x 4 contexts, levels shaped like
//! the seed's RTX 5090 run): the template run and cell draws `stats-eval` and `ab-eval` build
//! their histories from, and the synthetic runs the unit tests of every crate above this one
//! share (`testkit` feature). Moved out of `eval::gate` by the workspace cut.

#[cfg(any(test, feature = "testkit"))]
use rand::rngs::StdRng;
#[cfg(any(test, feature = "testkit"))]
use rand_distr::{Distribution, Normal};

use infergate_schema::results::{
    CellResult, CellStatus, EngineIdentity, HardwareFingerprint, MatrixSpec, ProfileKey,
    ResultsSource, RunResults, RunStatus, ToolInfo,
};

pub const CONCURRENCY: [u32; 5] = [1, 2, 4, 8, 12];

pub(crate) const CONTEXTS: [u64; 4] = [8192, 32768, 65536, 131072];

/// Mean aggregate tok/s of each cell, shaped like the seed (RTX 5090, vLLM, 8B-class model):
/// sub-linear in concurrency, falling with context.
pub fn cell_levels() -> Vec<(u32, u64, f64)> {
    let mut out = Vec::new();
    for (i, &ctx) in CONTEXTS.iter().enumerate() {
        for &c in &CONCURRENCY {
            let level = 45.0 * f64::from(c).powf(0.62) * (1.0 - 0.08 * i as f64);
            out.push((c, ctx, level));
        }
    }
    out
}

/// A template run of the synthetic profile.
pub fn template() -> RunResults {
    let matrix = MatrixSpec {
        model: "synthetic/model-8b".into(),
        concurrency: CONCURRENCY.to_vec(),
        contexts: CONTEXTS.to_vec(),
        timing: infergate_schema::results::CellTiming {
            duration_s: 30.0,
            warmup_s: 5.0,
            max_tokens: 512,
            unique_context_percent: 100.0,
            sub_windows: 5,
            ..infergate_schema::results::CellTiming::DEFAULT
        },
        repetitions: 1,
    };
    let hardware = HardwareFingerprint {
        kind: "gpu".into(),
        gpu_model: Some("Synthetic GPU".into()),
        gpu_count: 1,
        driver_version: None,
        cpu_model: None,
    };
    RunResults {
        schema_version: infergate_schema::results::SCHEMA_VERSION,
        tool: ToolInfo::current(),
        run_id: String::new(),
        suite: Some("stats-eval".into()),
        started_at: chrono::DateTime::UNIX_EPOCH,
        finished_at: None,
        status: RunStatus::Complete,
        status_reason: None,
        profile: ProfileKey::derive(hardware, "synthetic", &matrix.model, &matrix),
        engine: EngineIdentity {
            name: "synthetic".into(),
            ..EngineIdentity::default()
        },
        matrix,
        cells: Vec::new(),
        telemetry: None,
        events: Vec::new(),
        source: ResultsSource::Infergate,
        labels: Default::default(),
        prefill: Vec::new(),
        burst: None,
        gate_failure: None,
    }
}

/// How one synthetic measurement of a cell is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellDraw {
    /// Sub-window samples per measurement.
    pub windows: usize,
    /// SD of the log of each sub-window sample around the cell's level.
    pub window_cv: f64,
    /// Length of the measurement window, seconds (sets `measured_s` and `output_tokens`).
    pub measured_s: f64,
}

/// The synthetic measurement shared by `stats-eval`, `ab-eval` and the unit tests: a measured
/// cell at level `mean` tok/s with `draw.windows` sub-window samples `mean * exp(window_cv * z)`,
/// the `z` taken from `z` in order; the aggregate is their mean, as a real window's rate is.
pub fn synthetic_cell(
    c: u32,
    ctx: u64,
    mean: f64,
    draw: CellDraw,
    z: &mut dyn FnMut() -> f64,
) -> CellResult {
    let samples: Vec<f64> = (0..draw.windows)
        .map(|_| mean * (draw.window_cv * z()).exp())
        .collect();
    let tps = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    let mut cell = CellResult::unmeasured(c, ctx, CellStatus::Ok, "");
    cell.reason = None;
    cell.aggregate_tps = tps;
    cell.samples = samples;
    cell.measured_s = draw.measured_s;
    cell.output_tokens = (tps * draw.measured_s) as u64;
    cell
}

/// A test history of `runs` runs with a 1% run factor and 2% cell terms, from `rng`.
#[cfg(any(test, feature = "testkit"))]
pub fn noisy_history(rng: &mut StdRng, runs: usize) -> Vec<RunResults> {
    (0..runs)
        .map(|i| synthetic_run(&format!("b{i}"), rng, 0.01, 0.02, &|_| 1.0))
        .collect()
}

/// A run of the synthetic 20-cell profile for unit tests: each cell's level times
/// `factor(cell index)`, with run noise `run_cv`, cell noise `cell_cv` and 5 sub-windows of 1%.
#[cfg(any(test, feature = "testkit"))]
pub fn synthetic_run(
    id: &str,
    rng: &mut StdRng,
    run_cv: f64,
    cell_cv: f64,
    factor: &dyn Fn(usize) -> f64,
) -> RunResults {
    let n = Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!());
    let draw = CellDraw {
        windows: 5,
        window_cv: 0.01,
        measured_s: 30.0,
    };
    let mut r = template();
    r.run_id = id.into();
    let run_f = (run_cv * n.sample(rng)).exp();
    r.cells = cell_levels()
        .into_iter()
        .enumerate()
        .map(|(i, (c, ctx, level))| {
            let mean = level * run_f * (cell_cv * n.sample(rng)).exp() * factor(i);
            synthetic_cell(c, ctx, mean, draw, &mut || n.sample(rng))
        })
        .collect();
    r
}

/// A prefill layer's record at `context_tokens`: one cold sample at `tps`, the cross-check's
/// verdict `agreement`.
#[cfg(test)]
pub(crate) fn prefill_record(
    context_tokens: u64,
    tps: f64,
    agreement: infergate_schema::results::PrefillAgreement,
) -> infergate_schema::results::PrefillRecord {
    use infergate_schema::results::{
        PrefillCrossCheck, PrefillRecord, PrefillSample, PrefillSampleKind,
    };
    PrefillRecord {
        context_tokens,
        samples: vec![PrefillSample {
            kind: PrefillSampleKind::Unique,
            prompt_tokens: context_tokens,
            ttft_s: context_tokens as f64 / tps,
            prefill_tps: tps,
            cold: true,
        }],
        prefill_tps: Some(tps),
        engine_counters: None,
        cross_check: PrefillCrossCheck {
            verdict: agreement,
            checks: Vec::new(),
            detail: None,
        },
        error: None,
    }
}

/// Sets a cell's ITL percentiles (p99 `p99` over 5000 gaps) and the gate's probe's p99
/// lateness at `late` times that tail (the probe read the host late where `late` reaches the
/// rule's share, a fifth for ITL p99).
#[cfg(test)]
pub(crate) fn set_itl_tail(cell: &mut CellResult, p99: f64, late: f64) {
    let p = infergate_schema::results::Percentiles {
        mean: 0.01,
        p50: 0.01,
        p90: 0.015,
        p99,
        count: 5000,
    };
    cell.itl_s = Some(p);
    cell.host_lateness_s = Some(infergate_schema::results::Percentiles {
        p99: late * p99,
        count: 1500,
        ..p
    });
}
