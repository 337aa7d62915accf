//! Monte Carlo evaluation of the decision rule (`infergate stats-eval`).
//!
//! Synthetic 20-cell matrices (5 concurrency levels x 4 contexts, levels shaped like the seed's
//! RTX 5090 run) with multiplicative GPU-runner noise: a run factor shared by every cell of a
//! run, a per-cell per-run term, a within-run sub-window term, a slow random-walk drift and one
//! outlier run in 20. Each trial builds real [`RunResults`] and calls the real
//! [`compare`](super::compare), so the figures measure the product, not a copy of it.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::results::{
    CellResult, CellStatus, EngineIdentity, HardwareFingerprint, MatrixSpec, ProfileKey,
    ResultsSource, RunResults, RunStatus, ToolInfo,
};
use crate::verdict::{CellVerdict, ComparisonReport, GateVerdict};

use super::{ConfirmPlan, DecisionRule, StatsError};

/// The synthetic runner's noise (all CVs are SDs of the log, i.e. multiplicative).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct NoiseSpec {
    /// Shared by all cells of one run (clocks, thermals, the boot).
    pub run_cv: f64,
    /// Per cell, per run.
    pub cell_cv: f64,
    /// Per sub-window within a cell's window.
    pub window_cv: f64,
    /// Sub-windows per cell.
    pub windows: usize,
    /// Random-walk step of the slow drift per run (shared by all cells).
    pub drift_per_run: f64,
    /// One run in this many (in the history) is an outlier.
    pub outlier_every: usize,
    /// Relative effect of an outlier run on every cell.
    pub outlier_effect: f64,
    /// Degrees of freedom of a Student-t per-cell term (scaled to SD `cell_cv`); `None`:
    /// Gaussian. Heavy tails make single cells stray far more often than the SD says.
    #[serde(default)]
    pub cell_df: Option<f64>,
    /// Share of boots (baseline runs and candidates) that come up slow by `slow_boot_effect`
    /// everywhere: below the outlier screen, a bad boot rather than a bad run.
    #[serde(default)]
    pub slow_boot_rate: f64,
    /// Relative effect of a slow boot on every cell.
    #[serde(default)]
    pub slow_boot_effect: f64,
    /// Share of runs (baseline and candidates) in which the largest cell (C=12 / 128k) is
    /// `capacity_limited`: a cell at its capacity limit that tips over at random.
    #[serde(default)]
    pub capacity_flip_rate: f64,
    /// Linear drift of every cell over the history window (relative, oldest to newest; the
    /// candidate continues it one run on).
    #[serde(default)]
    pub drift_total: f64,
    /// A step of every cell (relative) from the middle of the history window on (the
    /// candidate is at the new level).
    #[serde(default)]
    pub step: f64,
}

impl Default for NoiseSpec {
    fn default() -> Self {
        NoiseSpec {
            run_cv: 0.01,
            cell_cv: 0.02,
            window_cv: 0.01,
            windows: 5,
            drift_per_run: 0.001,
            outlier_every: 20,
            outlier_effect: -0.08,
            cell_df: None,
            slow_boot_rate: 0.0,
            slow_boot_effect: 0.0,
            capacity_flip_rate: 0.0,
            drift_total: 0.0,
            step: 0.0,
        }
    }
}

/// What the candidate changed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "effect")]
pub(crate) enum Scenario {
    /// A/A: no change (the gate's answer is a false alarm if it says regression).
    AA,
    /// Every cell changes by this relative amount.
    Uniform(f64),
    /// One (random) cell changes by this relative amount.
    SingleCell(f64),
    /// Every cell of the 32k context row changes by this relative amount.
    Row(f64),
}

impl Scenario {
    /// Short name used in outputs (`aa`, `uniform_-5%`, `single_cell_-10%`).
    pub(crate) fn name(&self) -> String {
        match self {
            Scenario::AA => "aa".into(),
            Scenario::Uniform(e) => format!("uniform_{:+}%", (e * 100.0).round()),
            Scenario::SingleCell(e) => format!("single_cell_{:+}%", (e * 100.0).round()),
            Scenario::Row(e) => format!("row_{:+}%", (e * 100.0).round()),
        }
    }
}

/// The scenarios `stats-eval` measures.
pub(crate) const SCENARIOS: [Scenario; 6] = [
    Scenario::AA,
    Scenario::Uniform(-0.02),
    Scenario::Uniform(-0.05),
    Scenario::Uniform(-0.10),
    Scenario::SingleCell(-0.10),
    Scenario::Row(-0.07),
];

/// The row a [`Scenario::Row`] changes (cells 5..10: every concurrency at 32k context).
const ROW_CELLS: std::ops::Range<usize> = 5..10;

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct EvalConfig {
    pub trials: usize,
    pub seed: u64,
    /// History lengths (baseline runs) to evaluate.
    pub histories: Vec<usize>,
    /// Candidate runs (repetitions) per comparison; each has its own run factor.
    #[serde(default = "one")]
    pub candidate_runs: usize,
    /// The gate as `run` makes it: a confirmation boot (as many runs again) when the first
    /// boot's matrix-wide change looks like a regression. `None` = one comparison only.
    #[serde(default)]
    pub confirm: Option<ConfirmPlan>,
    pub noise: NoiseSpec,
    pub rule: DecisionRule,
}

fn one() -> usize {
    1
}

/// Measured rates of one scenario at one history length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ScenarioOutcome {
    pub scenario: Scenario,
    pub name: String,
    /// Share of trials where the gate said `regression` (false-alarm rate for A/A, else power).
    pub regression_rate: f64,
    /// Share of trials where the matrix-wide test said `regression`.
    pub matrix_regression_rate: f64,
    /// Share of trials where the gate said `inconclusive`.
    pub gate_inconclusive_rate: f64,
    /// Mean share of cells whose verdict was `inconclusive`.
    pub cell_inconclusive_rate: f64,
    /// Mean share of cells whose verdict was `unchanged`.
    pub cell_unchanged_rate: f64,
    /// Single-cell scenario: share of trials where the changed cell itself was a regression.
    #[serde(default)]
    pub target_cell_rate: Option<f64>,
    /// Monte Carlo standard error of `regression_rate`.
    pub std_error: f64,
    /// Wilson 95% interval of `regression_rate`.
    #[serde(default)]
    pub wilson_low: f64,
    /// Upper end of the Wilson interval.
    #[serde(default)]
    pub wilson_high: f64,
    /// Mean half-width of the matrix-wide interval (relative).
    pub matrix_half_width: f64,
    /// Mean half-width of the cells' intervals of the total change (relative).
    pub cell_half_width: f64,
    /// Mean margin of the cells (relative).
    pub cell_margin: f64,
    /// Share of trials that booted a second time (confirmation); 0 without a plan.
    #[serde(default)]
    pub confirm_rate: f64,
    /// Mean candidate boots per gate (1 + confirm rate, times the candidate runs).
    #[serde(default)]
    pub mean_boots: f64,
}

/// All scenarios at one history length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistoryOutcome {
    pub history: usize,
    pub scenarios: Vec<ScenarioOutcome>,
}

/// A target of the issue and whether it was met.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct TargetCheck {
    pub description: String,
    pub history: usize,
    pub measured: f64,
    pub met: bool,
}

/// The evaluation's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct EvalReport {
    pub trials: usize,
    pub seed: u64,
    pub cells: usize,
    pub candidate_runs: usize,
    #[serde(default)]
    pub confirm: Option<ConfirmPlan>,
    pub noise: NoiseSpec,
    pub rule: DecisionRule,
    pub histories: Vec<HistoryOutcome>,
    pub targets: Vec<TargetCheck>,
}

impl EvalReport {
    /// The outcome of `scenario` at history length `history`, when measured.
    pub(crate) fn outcome(&self, history: usize, scenario: Scenario) -> Option<&ScenarioOutcome> {
        self.histories
            .iter()
            .find(|h| h.history == history)?
            .scenarios
            .iter()
            .find(|s| s.scenario == scenario)
    }
}

const CONCURRENCY: [u32; 5] = [1, 2, 4, 8, 12];
const CONTEXTS: [u64; 4] = [8192, 32768, 65536, 131072];

/// Mean aggregate tok/s of each cell, shaped like the seed (RTX 5090, vLLM, 8B-class model):
/// sub-linear in concurrency, falling with context.
pub(crate) fn cell_levels() -> Vec<(u32, u64, f64)> {
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
pub(crate) fn template() -> RunResults {
    let matrix = MatrixSpec {
        model: "synthetic/model-8b".into(),
        concurrency: CONCURRENCY.to_vec(),
        contexts: CONTEXTS.to_vec(),
        timing: crate::results::CellTiming {
            duration_s: 30.0,
            warmup_s: 5.0,
            max_tokens: 512,
            unique_context_percent: 100.0,
            sub_windows: 5,
            ..crate::results::CellTiming::DEFAULT
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
        schema_version: crate::results::SCHEMA_VERSION,
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
    }
}

/// How one synthetic measurement of a cell is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CellDraw {
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
pub(crate) fn synthetic_cell(
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

/// A run of the synthetic 20-cell profile for unit tests: each cell's level times
/// `factor(cell index)`, with run noise `run_cv`, cell noise `cell_cv` and 5 sub-windows of 1%.
#[cfg(test)]
pub(crate) fn synthetic_run(
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

/// Draws the noise of one run: `log_level[c]` per cell before sub-windows.
struct RunDraw {
    cell_log: Vec<f64>,
}

struct Sampler {
    rng: StdRng,
    std: Normal<f64>,
}

impl Sampler {
    fn normal(&mut self, sd: f64) -> f64 {
        sd * self.std.sample(&mut self.rng)
    }

    /// A per-cell term of SD `sd`: Gaussian, or Student t with `df` (> 2) scaled to that SD.
    fn cell(&mut self, sd: f64, df: Option<f64>) -> f64 {
        match df.and_then(|d| rand_distr::StudentT::new(d).ok().map(|t| (d, t))) {
            Some((d, t)) if d > 2.0 => sd * ((d - 2.0) / d).sqrt() * t.sample(&mut self.rng),
            _ => self.normal(sd),
        }
    }

    /// The log factor of a slow boot (0 for most boots).
    fn slow_boot(&mut self, noise: &NoiseSpec) -> f64 {
        if noise.slow_boot_rate > 0.0 && self.rng.random::<f64>() < noise.slow_boot_rate {
            noise.slow_boot_effect.ln_1p()
        } else {
            0.0
        }
    }

    /// Whether the flipping cell is capacity-limited in this run.
    fn capacity_flip(&mut self, noise: &NoiseSpec) -> bool {
        noise.capacity_flip_rate > 0.0 && self.rng.random::<f64>() < noise.capacity_flip_rate
    }
}

/// Marks the largest cell of `run` capacity-limited (as the engine reports a cell it could not
/// admit all streams of).
fn capacity_limited(run: &mut RunResults) {
    if let Some(cell) = run.cells.last_mut() {
        cell.status = CellStatus::CapacityLimited;
        cell.reason = Some("10/12 running".into());
    }
}

/// The trend and step of every cell at history run `r` of `len` (the candidate: `r = len`).
fn shift(noise: &NoiseSpec, r: usize, len: usize) -> f64 {
    let trend = if len > 1 {
        noise.drift_total.ln_1p() * r as f64 / (len - 1) as f64
    } else {
        0.0
    };
    let step = if r >= len / 2 {
        noise.step.ln_1p()
    } else {
        0.0
    };
    trend + step
}

fn make_run(
    template: &RunResults,
    levels: &[(u32, u64, f64)],
    draw: &RunDraw,
    effects: &[f64],
    noise: &NoiseSpec,
    sampler: &mut Sampler,
    id: String,
) -> RunResults {
    let mut run = template.clone();
    run.run_id = id;
    let cell = CellDraw {
        windows: noise.windows,
        window_cv: noise.window_cv,
        measured_s: 30.0,
    };
    run.cells = levels
        .iter()
        .enumerate()
        .map(|(i, &(c, ctx, level))| {
            let mean = level * (draw.cell_log[i]).exp() * (1.0 + effects[i]);
            synthetic_cell(c, ctx, mean, cell, &mut || sampler.normal(1.0))
        })
        .collect();
    run
}

/// A synthetic nightly history of `nights` runs of the 20-cell profile under `noise` (run and
/// cell terms, the slow drift, one outlier run per `outlier_every`), every cell's level times
/// `1 + effect(night)`: the change-point Monte Carlo's input, drawn as the gate's is.
pub(crate) fn nightly_history(
    noise: &NoiseSpec,
    nights: usize,
    effect: &dyn Fn(usize) -> f64,
    seed: u64,
) -> Vec<RunResults> {
    let levels = cell_levels();
    let tpl = template();
    let mut sampler = Sampler {
        rng: StdRng::seed_from_u64(seed),
        std: Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!()),
    };
    let every = noise.outlier_every.max(1);
    let mut drift = 0.0;
    let mut outlier = usize::MAX;
    (0..nights)
        .map(|night| {
            if noise.outlier_every > 0 && night % every == 0 {
                outlier = night + sampler.rng.random_range(0..every);
            }
            drift += sampler.normal(noise.drift_per_run);
            let mut run_log = drift + sampler.normal(noise.run_cv);
            if night == outlier {
                run_log += noise.outlier_effect.ln_1p();
            }
            let draw = RunDraw {
                cell_log: (0..levels.len())
                    .map(|_| run_log + sampler.normal(noise.cell_cv))
                    .collect(),
            };
            let effects = vec![effect(night); levels.len()];
            let mut run = make_run(
                &tpl,
                &levels,
                &draw,
                &effects,
                noise,
                &mut sampler,
                format!("night-{night:03}"),
            );
            run.started_at += chrono::Duration::days(night as i64);
            run
        })
        .collect()
}

/// Runs the Monte Carlo.
pub(crate) fn run_eval(cfg: &EvalConfig) -> Result<EvalReport, StatsError> {
    cfg.rule.validate()?;
    let noise = &cfg.noise;
    let runs_per_stage = cfg.candidate_runs.max(1);
    let stages = if cfg.confirm.is_some() { 2 } else { 1 };
    let levels = cell_levels();
    let n_cells = levels.len();
    let max_h = cfg.histories.iter().copied().max().unwrap_or(0);
    let tpl = template();
    let std = Normal::new(0.0, 1.0).map_err(|e| StatsError::InvalidRule(e.to_string()))?;
    let mut sampler = Sampler {
        rng: StdRng::seed_from_u64(cfg.seed),
        std,
    };
    // counters[h][s] = (regression, matrix regression, gate inconclusive, cell inconclusive,
    // cell unchanged, target cell)
    let mut counts = vec![vec![[0.0f64; 11]; SCENARIOS.len()]; cfg.histories.len()];
    let zero = vec![0.0; n_cells];
    for trial in 0..cfg.trials {
        // History: oldest first, drift as a random walk, one outlier per `outlier_every` runs.
        let mut drift = 0.0;
        let outlier_at: Vec<usize> = (0..max_h.div_ceil(noise.outlier_every.max(1)))
            .map(|b| b * noise.outlier_every + sampler.rng.random_range(0..noise.outlier_every))
            .collect();
        let mut history = Vec::with_capacity(max_h);
        for r in 0..max_h {
            drift += sampler.normal(noise.drift_per_run);
            let mut run_log = drift + sampler.normal(noise.run_cv) + shift(noise, r, max_h);
            run_log += sampler.slow_boot(noise);
            if noise.outlier_every > 0 && outlier_at.contains(&r) {
                run_log += noise.outlier_effect.ln_1p();
            }
            let draw = RunDraw {
                cell_log: (0..n_cells)
                    .map(|_| run_log + sampler.cell(noise.cell_cv, noise.cell_df))
                    .collect(),
            };
            let mut run = make_run(
                &tpl,
                &levels,
                &draw,
                &zero,
                noise,
                &mut sampler,
                format!("t{trial}-b{r}"),
            );
            if sampler.capacity_flip(noise) {
                capacity_limited(&mut run);
            }
            history.push(run);
        }
        // Candidate noise, shared by all scenarios of this trial (common random numbers).
        let draws: Vec<(RunDraw, bool)> = (0..runs_per_stage * stages)
            .map(|_| {
                drift += sampler.normal(noise.drift_per_run);
                let cand_log = drift
                    + sampler.normal(noise.run_cv)
                    + shift(noise, max_h, max_h)
                    + sampler.slow_boot(noise);
                let draw = RunDraw {
                    cell_log: (0..n_cells)
                        .map(|_| cand_log + sampler.cell(noise.cell_cv, noise.cell_df))
                        .collect(),
                };
                (draw, sampler.capacity_flip(noise))
            })
            .collect();
        let target = sampler.rng.random_range(0..n_cells);
        let window_seed: u64 = sampler.rng.random();
        for (s, scenario) in SCENARIOS.iter().enumerate() {
            let effects: Vec<f64> = match *scenario {
                Scenario::AA => zero.clone(),
                Scenario::Uniform(e) => vec![e; n_cells],
                Scenario::SingleCell(e) => {
                    let mut v = zero.clone();
                    v[target] = e;
                    v
                }
                Scenario::Row(e) => {
                    let mut v = zero.clone();
                    v[ROW_CELLS].fill(e);
                    v
                }
            };
            // Same sub-window noise for every scenario of the trial.
            let mut window_sampler = Sampler {
                rng: StdRng::seed_from_u64(window_seed),
                std,
            };
            let candidate: Vec<RunResults> = draws
                .iter()
                .enumerate()
                .map(|(k, (draw, flipped))| {
                    let mut run = make_run(
                        &tpl,
                        &levels,
                        draw,
                        &effects,
                        noise,
                        &mut window_sampler,
                        format!("t{trial}-c{s}-{k}"),
                    );
                    if *flipped {
                        capacity_limited(&mut run);
                    }
                    run
                })
                .collect();
            let candidate = candidate.as_slice();
            for (h, &len) in cfg.histories.iter().enumerate() {
                let base = &history[max_h - len.min(max_h)..];
                let (report, confirmed) = gate_comparison(base, candidate, runs_per_stage, cfg)?;
                let c = &mut counts[h][s];
                if confirmed {
                    c[9] += 1.0;
                }
                if report.gate == GateVerdict::Regression {
                    c[0] += 1.0;
                }
                if report
                    .matrix_test
                    .as_ref()
                    .is_some_and(|m| m.verdict == CellVerdict::Regression)
                {
                    c[1] += 1.0;
                }
                if report.gate == GateVerdict::Insufficient {
                    c[2] += 1.0;
                }
                let n = report.cells.len().max(1) as f64;
                let share = |v: CellVerdict| {
                    report.cells.iter().filter(|x| x.verdict == v).count() as f64 / n
                };
                c[3] += share(CellVerdict::Inconclusive);
                c[4] += share(CellVerdict::Unchanged);
                let found = match scenario {
                    Scenario::Row(_) => report.cells[ROW_CELLS]
                        .iter()
                        .any(|x| x.verdict == CellVerdict::Regression),
                    _ => report.cells[target].verdict == CellVerdict::Regression,
                };
                if found {
                    c[5] += 1.0;
                }
                if let Some(m) = &report.matrix_test {
                    c[6] += (m.ci_high - m.ci_low) / 2.0;
                }
                let prim: Vec<_> = report.cells.iter().filter_map(|x| x.primary()).collect();
                let np = prim.len().max(1) as f64;
                c[7] += prim
                    .iter()
                    .map(|m| (m.ci_high - m.ci_low) / 2.0)
                    .sum::<f64>()
                    / np;
                c[8] += prim.iter().map(|m| m.margin).sum::<f64>() / np;
            }
        }
    }
    let trials = cfg.trials.max(1) as f64;
    let histories: Vec<HistoryOutcome> = cfg
        .histories
        .iter()
        .enumerate()
        .map(|(h, &len)| HistoryOutcome {
            history: len,
            scenarios: SCENARIOS
                .iter()
                .enumerate()
                .map(|(s, &scenario)| {
                    let c = counts[h][s];
                    let rate = c[0] / trials;
                    ScenarioOutcome {
                        scenario,
                        name: scenario.name(),
                        regression_rate: rate,
                        matrix_regression_rate: c[1] / trials,
                        gate_inconclusive_rate: c[2] / trials,
                        cell_inconclusive_rate: c[3] / trials,
                        cell_unchanged_rate: c[4] / trials,
                        target_cell_rate: matches!(
                            scenario,
                            Scenario::SingleCell(_) | Scenario::Row(_)
                        )
                        .then_some(c[5] / trials),
                        std_error: (rate * (1.0 - rate) / trials).sqrt(),
                        wilson_low: wilson(rate, trials).0,
                        wilson_high: wilson(rate, trials).1,
                        matrix_half_width: c[6] / trials,
                        cell_half_width: c[7] / trials,
                        cell_margin: c[8] / trials,
                        confirm_rate: c[9] / trials,
                        mean_boots: (1.0 + c[9] / trials) * runs_per_stage as f64,
                    }
                })
                .collect(),
        })
        .collect();
    let mut report = EvalReport {
        trials: cfg.trials,
        seed: cfg.seed,
        cells: n_cells,
        candidate_runs: cfg.candidate_runs.max(1),
        confirm: cfg.confirm.clone(),
        noise: cfg.noise.clone(),
        rule: cfg.rule.clone(),
        histories,
        targets: Vec::new(),
    };
    report.targets = targets(&report);
    Ok(report)
}

/// The gate's comparison of one trial: one comparison of the first `per_stage` candidate runs,
/// or — with a confirmation plan — the two-stage test `run` makes (the second stage adds the
/// next `per_stage` runs). Returns the final report and whether it confirmed.
fn gate_comparison(
    base: &[RunResults],
    candidate: &[RunResults],
    per_stage: usize,
    cfg: &EvalConfig,
) -> Result<(ComparisonReport, bool), StatsError> {
    let second = cfg
        .confirm
        .as_ref()
        .map(|_| (&candidate[per_stage..2 * per_stage], "second boot"));
    super::confirm::two_boot_verdict(
        cfg.confirm.as_ref(),
        &cfg.rule,
        base,
        &candidate[..per_stage],
        second,
    )
}

/// Wilson score interval (95%) of a share `p` of `n` trials: honest near 0 and 1, where the
/// normal approximation's interval would reach below zero.
pub(crate) fn wilson(p: f64, n: f64) -> (f64, f64) {
    let z = 1.959_964;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The targets, checked at the longest history measured when it has 20 runs or more.
fn targets(report: &EvalReport) -> Vec<TargetCheck> {
    let Some(h) = report
        .histories
        .iter()
        .map(|h| h.history)
        .filter(|h| *h >= 20)
        .max()
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut check = |desc: &str, scenario: Scenario, ok: &dyn Fn(f64) -> bool| {
        if let Some(o) = report.outcome(h, scenario) {
            out.push(TargetCheck {
                description: desc.into(),
                history: h,
                measured: o.regression_rate,
                met: ok(o.regression_rate),
            });
        }
    };
    check("false alarms per matrix <= 1%", Scenario::AA, &|r| {
        r <= 0.01
    });
    check(
        "power at uniform -5% >= 95%",
        Scenario::Uniform(-0.05),
        &|r| r >= 0.95,
    );
    check(
        "power at single-cell -10% >= 80%",
        Scenario::SingleCell(-0.10),
        &|r| r >= 0.80,
    );
    check("power at a row -7% >= 80%", Scenario::Row(-0.07), &|r| {
        r >= 0.80
    });
    out
}
