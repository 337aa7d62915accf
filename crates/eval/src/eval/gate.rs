//! Monte Carlo evaluation of the decision rule (`infergate stats-eval`).
//!
//! Synthetic 20-cell matrices (5 concurrency levels x 4 contexts, levels shaped like the seed's
//! RTX 5090 run) with multiplicative GPU-runner noise: a run factor shared by every cell of a
//! run, a per-cell per-run term, a within-run sub-window term and a slow random-walk drift —
//! and, one condition at a time and combined, what real runners add: Student-t(3) cells, slow
//! boots, a cell that flips to capacity-limited, a per-run row factor, autocorrelated (AR(1))
//! sub-windows, a drift and a step, and outlier history runs (one in 20, −8%, a condition of
//! their own; the others have none). Each trial builds real
//! [`RunResults`] and decides with the gate's own two-boot plan
//! ([`replay`](infergate_model::stats::replay), the one judge), so the figures measure the product;
//! the same histories and boots are decided by the rules users know too ([`super::peers`]).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use infergate_schema::results::{
    BurstRecord, BurstSettings, BurstSlo, CellStatus, Percentiles, PrefillAgreement,
    PrefillCrossCheck, PrefillRecord, PrefillSample, PrefillSampleKind, RunResults,
};
use infergate_schema::verdict::{CellVerdict, GateVerdict};

use super::peers::{Family, GATE_AA_RATE, GateBudget, Look, outcomes};
use infergate_model::stats::{DecisionRule, History, Plan, StatsError, replay};
use infergate_model::synthetic::CONCURRENCY;
pub(crate) use infergate_model::synthetic::{CellDraw, cell_levels, synthetic_cell, template};

/// The synthetic runner's noise (all CVs are SDs of the log, i.e. multiplicative).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseSpec {
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
    pub cell_df: Option<f64>,
    /// Share of boots (baseline runs and candidates) that come up slow by `slow_boot_effect`
    /// everywhere: below the outlier screen, a bad boot rather than a bad run.
    pub slow_boot_rate: f64,
    /// Relative effect of a slow boot on every cell.
    pub slow_boot_effect: f64,
    /// Share of runs (baseline and candidates) in which the largest cell (C=12 / 128k) is
    /// `capacity_limited`: a cell at its capacity limit that tips over at random.
    pub capacity_flip_rate: f64,
    /// Linear drift of every cell over the history window (relative, oldest to newest; the
    /// candidate continues it one run on).
    pub drift_total: f64,
    /// A step of every cell (relative) from the middle of the history window on (the
    /// candidate is at the new level).
    pub step: f64,
    /// SD of a per-run factor shared by the cells of one context row (a row that runs hot or
    /// cold on some boots).
    pub row_cv: f64,
    /// Lag-1 autocorrelation of the sub-window terms within a cell's window (AR(1)).
    pub window_ar: f64,
}

impl NoiseSpec {
    /// The gate's synthetic runner: the default noise without a built-in outlier run.
    pub fn gate_runner() -> NoiseSpec {
        NoiseSpec {
            outlier_every: 0,
            ..NoiseSpec::default()
        }
    }
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
            row_cv: 0.0,
            window_ar: 0.0,
        }
    }
}

/// What the candidate changed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "effect")]
pub enum Scenario {
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
pub(crate) const SCENARIOS: [Scenario; 4] = [
    Scenario::AA,
    Scenario::Uniform(-0.05),
    Scenario::Row(-0.07),
    Scenario::SingleCell(-0.10),
];

/// The row a [`Scenario::Row`] changes (cells 5..10: every concurrency at 32k context).
const ROW_CELLS: std::ops::Range<usize> = 5..10;

/// One runner of the grid: a name and its noise.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Condition {
    pub name: String,
    pub noise: NoiseSpec,
}

/// The runner with heavy-tailed cells and slow boots, whose clean gates must still pass.
const T3_SLOW_BOOTS: &str = "t3 cells + slow boots";

/// The grid `stats-eval` measures by default: the Gaussian runner, each rough feature alone,
/// drift of either sign and a step alone, the rough features combined, and the combined runner
/// under drift and a step.
pub fn grid() -> Vec<Condition> {
    type Feature = fn(&mut NoiseSpec);
    let rough: [(&str, Feature); 5] = [
        ("t3 cells", |n| n.cell_df = Some(3.0)),
        ("slow boots 5% x -4%", |n| {
            n.slow_boot_rate = 0.05;
            n.slow_boot_effect = -0.04;
        }),
        ("capacity flips 10%", |n| n.capacity_flip_rate = 0.10),
        ("row factor 1.5%", |n| n.row_cv = 0.015),
        ("AR(1) 0.6 sub-windows", |n| n.window_ar = 0.6),
    ];
    let drift: Feature = |n| n.drift_total = 0.03;
    // A runner slowing down over its window: the level lags it (docs/statistics.md).
    let slowing: Feature = |n| n.drift_total = -0.03;
    let step: Feature = |n| n.step = -0.02;
    let c = |name: &str, features: &[Feature]| {
        let mut noise = NoiseSpec::gate_runner();
        features.iter().for_each(|f| f(&mut noise));
        Condition {
            name: name.into(),
            noise,
        }
    };
    let all: Vec<Feature> = rough.iter().map(|r| r.1).collect();
    // One history run in 20 (on average) 8% slow everywhere: the issue's "one wild history
    // run", which the run noise must be estimated robustly against.
    let outliers: Feature = |n| {
        n.outlier_every = 20;
        n.outlier_effect = -0.08;
    };
    let mut grid = vec![c("gaussian", &[])];
    grid.extend(rough.iter().map(|&(name, f)| c(name, &[f])));
    grid.extend([
        c("outlier runs 1 in 20 x -8%", &[outliers]),
        c("drift +3%", &[drift]),
        c("drift -3%", &[slowing]),
        c("step -2%", &[step]),
        c("rough (all of the above but drift/step)", &all),
        c(
            "rough + drift +3% + step -2%",
            &[&all[..], &[drift, step]].concat(),
        ),
        // Issue 56's second runner: heavy-tailed cells on boots that are sometimes slow (last,
        // so the other runners keep their seeds).
        c(T3_SLOW_BOOTS, &[all[0], all[1]]),
    ]);
    grid
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalConfig {
    pub trials: usize,
    pub seed: u64,
    /// Baseline history length (runs).
    pub history: usize,
    /// The gate as `run` makes it (the two-boot plan); false = one look decides everything.
    pub confirm: bool,
    pub conditions: Vec<Condition>,
    pub rule: DecisionRule,
}

/// Measured rates of one scenario on one runner.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioOutcome {
    pub scenario: Scenario,
    pub name: String,
    /// Share of trials where the gate said `regression` (false-alarm rate for A/A, else power).
    pub regression_rate: f64,
    /// Wilson 95% interval of `regression_rate`.
    pub(crate) wilson_low: f64,
    /// Upper end of the Wilson interval.
    pub(crate) wilson_high: f64,
    /// Share of trials where the gate said `pass`.
    pub pass_rate: f64,
    /// Share of trials where the gate said `insufficient`.
    pub insufficient_rate: f64,
    /// Single-cell and row scenarios: share of trials where a changed cell itself regressed.
    pub(crate) target_cell_rate: Option<f64>,
    /// Mean candidate boots per gate.
    pub mean_boots: f64,
    /// Which tests said regression (shares of trials; a gate can have several).
    pub alarms: AlarmSources,
    /// Share of the trials whose A/A gate said `pass` in which this scenario said
    /// `regression` (the same history and boots, common random numbers): at the design effect,
    /// the power a `pass` promised (`design_power`), as kept. `None` without such trials.
    pub found_when_aa_passed: Option<f64>,
}

/// Which tests of the gate said regression, as shares of trials: where the false alarms of a
/// runner come from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AlarmSources {
    /// A cell's own test (both boots).
    pub cell: f64,
    /// A row or column test (both boots).
    pub line: f64,
    /// The matrix-wide test (both boots).
    pub matrix: f64,
    /// A capacity, saturation or error regression.
    pub capacity: f64,
}

/// Which families of tests found a regression in `report`: cell, line, matrix, capacity.
fn alarm_families(report: &infergate_schema::verdict::ComparisonReport) -> [bool; 4] {
    let cell = report.cells.iter().any(|c| {
        c.primary()
            .and_then(|m| m.check.as_ref())
            .is_some_and(|k| k.rejected)
    });
    let line = report
        .lines
        .iter()
        .any(|l| l.test.verdict == CellVerdict::Regression);
    let matrix = report
        .matrix_test
        .as_ref()
        .is_some_and(|m| m.verdict == CellVerdict::Regression);
    let capacity = report.cells.iter().any(|c| {
        matches!(
            c.verdict,
            CellVerdict::CapacityRegression
                | CellVerdict::SaturationRegression
                | CellVerdict::ErrorRegression
        )
    });
    [cell, line, matrix, capacity]
}

/// All scenarios on one runner.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConditionOutcome {
    pub condition: String,
    pub(crate) noise: NoiseSpec,
    pub scenarios: Vec<ScenarioOutcome>,
    /// The rules users know on the same trials ([`peers`](super::peers)): each at its
    /// defaults, then at the gate's A/A rate with its second-boot budget.
    pub peers: Vec<super::peers::PeerOutcome>,
}

/// A target of the issue and whether it was met.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetCheck {
    pub description: String,
    pub condition: String,
    pub measured: f64,
    pub met: bool,
}

/// The evaluation's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvalReport {
    pub trials: usize,
    pub seed: u64,
    pub cells: usize,
    pub history: usize,
    pub confirm: bool,
    pub(crate) rule: DecisionRule,
    pub conditions: Vec<ConditionOutcome>,
    pub targets: Vec<TargetCheck>,
}

impl EvalReport {
    /// The outcome of `scenario` on the runner `condition`, when measured.
    pub(crate) fn outcome(&self, condition: &str, scenario: Scenario) -> Option<&ScenarioOutcome> {
        self.conditions
            .iter()
            .find(|c| c.condition == condition)?
            .scenarios
            .iter()
            .find(|s| s.scenario == scenario)
    }
}

pub(super) struct Sampler {
    rng: StdRng,
    std: Normal<f64>,
}

impl Sampler {
    pub(super) fn new(seed: u64) -> Sampler {
        Sampler {
            rng: StdRng::seed_from_u64(seed),
            std: Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!()),
        }
    }

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
    pub(super) fn capacity_flip(&mut self, noise: &NoiseSpec) -> bool {
        noise.capacity_flip_rate > 0.0 && self.rng.random::<f64>() < noise.capacity_flip_rate
    }
}

/// Marks the largest cell of `run` capacity-limited (as the engine reports a cell it could not
/// admit all streams of).
pub(super) fn capacity_limited(run: &mut RunResults) {
    if let Some(cell) = run.cells.last_mut() {
        cell.status = CellStatus::CapacityLimited;
        cell.reason = Some("10/12 running".into());
    }
}

/// The trend and step of every cell at history run `r` of `len` (the candidate: `r = len`).
pub(super) fn shift(noise: &NoiseSpec, r: usize, len: usize) -> f64 {
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

pub(super) fn make_run(
    template: &RunResults,
    levels: &[(u32, u64, f64)],
    cell_log: &[f64],
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
    let phi = noise.window_ar.clamp(0.0, 0.99);
    run.cells = levels
        .iter()
        .enumerate()
        .map(|(i, &(c, ctx, level))| {
            let mean = level * cell_log[i].exp() * (1.0 + effects[i]);
            // AR(1) with unit variance: z_k = φ z_{k−1} + √(1 − φ²) e_k.
            let mut prev: Option<f64> = None;
            synthetic_cell(c, ctx, mean, cell, &mut || {
                let e = sampler.normal(1.0);
                let z = prev.map_or(e, |p| phi * p + (1.0 - phi * phi).sqrt() * e);
                prev = Some(z);
                z
            })
        })
        .collect();
    run.prefill = synthetic_prefill(levels, cell_log);
    run.burst = synthetic_burst(cell_log);
    run
}

/// The burst layer of a synthetic run (the default config's shape: 32 requests, every one
/// completed): its total tok/s 60k and its TTFT p90 0.3 s, times and over the exp of the log
/// level drawn for the matrix's last cell (the most loaded: the run's factor, its row's and
/// its own term, no draw of its own), so the layer gates in every trial with the other
/// families and a seed's other figures do not move.
fn synthetic_burst(cell_log: &[f64]) -> Option<BurstRecord> {
    let speed = cell_log.last()?.exp();
    let ttft = |q: f64| Percentiles {
        mean: q,
        p50: q * 0.6,
        p90: q,
        p99: q * 1.1,
        count: 32,
    };
    Some(BurstRecord {
        settings: BurstSettings {
            requests: 32,
            request_rate: Some(100.0),
            seed: 0,
            prompt_tokens: 3072,
            max_tokens: 16,
            slo: BurstSlo::default(),
        },
        sent: 32,
        completed: 32,
        incomplete: 0,
        errors: 0,
        duration_s: 1.8 / speed,
        prompt_tokens: 32 * 3072,
        output_tokens: 32 * 16,
        request_throughput: 17.8 * speed,
        output_tps: 285.0 * speed,
        total_tps: 60_000.0 * speed,
        ttft_s: Some(ttft(0.3 / speed)),
        tpot_s: None,
        itl_s: None,
        e2el_s: None,
        good: None,
        goodput: None,
        first_problem: None,
    })
}

/// The prefill layer of a synthetic run: one record per context of the matrix (not 0), its
/// prefill tok/s 100k times the exp of the log level drawn for the context's first cell (the
/// run's factor, its row's and that cell's own term: no draw of its own, so a seed's other
/// figures do not move), agreeing with the engine's counters.
fn synthetic_prefill(levels: &[(u32, u64, f64)], cell_log: &[f64]) -> Vec<PrefillRecord> {
    let mut out: Vec<PrefillRecord> = Vec::new();
    for (i, &(_, ctx, _)) in levels.iter().enumerate() {
        if ctx == 0 || out.iter().any(|p| p.context_tokens == ctx) {
            continue;
        }
        let tps = 100_000.0 * cell_log[i].exp();
        out.push(PrefillRecord {
            context_tokens: ctx,
            samples: vec![PrefillSample {
                kind: PrefillSampleKind::Unique,
                prompt_tokens: ctx,
                ttft_s: ctx as f64 / tps,
                prefill_tps: tps,
                cold: true,
            }],
            prefill_tps: Some(tps),
            engine_counters: None,
            cross_check: PrefillCrossCheck {
                verdict: PrefillAgreement::WithinTolerance,
                checks: Vec::new(),
                detail: None,
            },
            error: None,
        });
    }
    out
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
    let mut sampler = Sampler::new(seed);
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
            let cell_log: Vec<f64> = (0..levels.len())
                .map(|_| run_log + sampler.normal(noise.cell_cv))
                .collect();
            let effects = vec![effect(night); levels.len()];
            let mut run = make_run(
                &tpl,
                &levels,
                &cell_log,
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

/// A run of `noise`'s runner at position `r` of a `len`-run window (`r = len`: a candidate
/// boot) with no change planted: its levels, sub-windows and, where the runner flips it, the
/// largest cell capacity-limited. The draws are those of the history runs `stats-eval` makes.
pub(super) fn unplanted_run(
    noise: &NoiseSpec,
    sampler: &mut Sampler,
    drift: &mut f64,
    (r, len): (usize, usize),
    id: String,
) -> RunResults {
    let levels = cell_levels();
    let n_cells = levels.len();
    let mut cell_log = draw_run(noise, sampler, drift, shift(noise, r, len), n_cells);
    // An outlier run of the history (never a candidate boot): one run in `outlier_every` on
    // average, every cell off by `outlier_effect` (drawn only where the runner has them, so
    // the other runners' draws stay as they were).
    if noise.outlier_every > 0
        && r < len
        && sampler.rng.random::<f64>() < 1.0 / noise.outlier_every as f64
    {
        let off = noise.outlier_effect.ln_1p();
        cell_log.iter_mut().for_each(|c| *c += off);
    }
    let mut run = make_run(
        &template(),
        &levels,
        &cell_log,
        &vec![0.0; n_cells],
        noise,
        sampler,
        id,
    );
    if sampler.capacity_flip(noise) {
        capacity_limited(&mut run);
    }
    run
}

/// One boot's log level per cell before sub-windows: the run factor (the drift's next step,
/// run noise, the trend/step `shift`, a slow boot), a row factor per context row, and each
/// cell's own term.
pub(super) fn draw_run(
    noise: &NoiseSpec,
    sampler: &mut Sampler,
    drift: &mut f64,
    shift: f64,
    n_cells: usize,
) -> Vec<f64> {
    *drift += sampler.normal(noise.drift_per_run);
    let run_log = *drift + sampler.normal(noise.run_cv) + shift + sampler.slow_boot(noise);
    let rows: Vec<f64> = (0..n_cells.div_ceil(CONCURRENCY.len()))
        .map(|_| sampler.normal(noise.row_cv))
        .collect();
    (0..n_cells)
        .map(|i| run_log + rows[i / CONCURRENCY.len()] + sampler.cell(noise.cell_cv, noise.cell_df))
        .collect()
}

/// Runs the Monte Carlo: every condition, every scenario, `trials` gates each.
pub fn run_eval(cfg: &EvalConfig) -> Result<EvalReport, StatsError> {
    cfg.rule.validate()?;
    // One thread per runner, at most as many as the machine has cores; each runner's seed is
    // its own, so the figures do not depend on the threads.
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut conditions = Vec::with_capacity(cfg.conditions.len());
    for chunk in cfg
        .conditions
        .iter()
        .enumerate()
        .collect::<Vec<_>>()
        .chunks(threads)
    {
        let done: Vec<Result<ConditionOutcome, StatsError>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&(k, c)| {
                    s.spawn(move || run_condition(cfg, c, cfg.seed.wrapping_add(k as u64)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(StatsError::InvalidRule(
                            "a stats-eval worker panicked".into(),
                        ))
                    })
                })
                .collect()
        });
        for d in done {
            conditions.push(d?);
        }
    }
    let mut report = EvalReport {
        trials: cfg.trials,
        seed: cfg.seed,
        cells: cell_levels().len(),
        history: cfg.history,
        confirm: cfg.confirm,
        rule: cfg.rule.clone(),
        conditions,
        targets: Vec::new(),
    };
    report.targets = targets(&report);
    Ok(report)
}

fn run_condition(
    cfg: &EvalConfig,
    condition: &Condition,
    seed: u64,
) -> Result<ConditionOutcome, StatsError> {
    let noise = &condition.noise;
    let stages = if cfg.confirm { 2 } else { 1 };
    let levels = cell_levels();
    let n_cells = levels.len();
    let h = cfg.history.max(1);
    let tpl = template();
    let mut sampler = Sampler::new(seed);
    let mut counts = vec![Tally::default(); SCENARIOS.len()];
    // looks[family][scenario][trial]: what each peer rule saw on the gate's own boots.
    let mut looks = vec![vec![Vec::with_capacity(cfg.trials); SCENARIOS.len()]; Family::ALL.len()];
    let zero = vec![0.0; n_cells];
    for trial in 0..cfg.trials {
        let mut drift = 0.0;
        let mut history = Vec::with_capacity(h);
        for r in 0..h {
            history.push(unplanted_run(
                noise,
                &mut sampler,
                &mut drift,
                (r, h),
                format!("t{trial}-b{r}"),
            ));
        }
        let history_tps: Vec<Vec<f64>> = history.iter().map(tok_per_s).collect();
        // Candidate boots, shared by all scenarios of this trial (common random numbers).
        let draws: Vec<(Vec<f64>, bool)> = (0..stages)
            .map(|_| {
                let cell_log =
                    draw_run(noise, &mut sampler, &mut drift, shift(noise, h, h), n_cells);
                (cell_log, sampler.capacity_flip(noise))
            })
            .collect();
        let target = sampler.rng.random_range(0..n_cells);
        let window_seed: u64 = sampler.rng.random();
        let mut aa_passed = false;
        for (s, scenario) in SCENARIOS.iter().enumerate() {
            let mut effects = zero.clone();
            match *scenario {
                Scenario::AA => {}
                Scenario::Uniform(e) => effects.fill(e),
                Scenario::SingleCell(e) => effects[target] = e,
                Scenario::Row(e) => effects[ROW_CELLS].fill(e),
            }
            let mut window_sampler = Sampler::new(window_seed);
            let candidate: Vec<RunResults> = draws
                .iter()
                .enumerate()
                .map(|(k, (cell_log, flipped))| {
                    let mut run = make_run(
                        &tpl,
                        &levels,
                        cell_log,
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
            let boots: Vec<Vec<f64>> = candidate.iter().map(tok_per_s).collect();
            for (f, family) in Family::ALL.iter().enumerate() {
                let first = family.scores(&history_tps, &boots[0]);
                let second = boots.get(1).map(|b| family.scores(&history_tps, b));
                looks[f][s].push(Look::of(&first, second.as_deref()));
            }
            let second = cfg.confirm.then(|| (&candidate[1..2], "second boot"));
            let plan = Plan {
                confirm: cfg.confirm,
                max_rounds: 0,
            };
            let judged = replay(
                std::sync::Arc::new(History::new(&history[..])),
                &cfg.rule,
                plan,
                &candidate[..1],
                second,
            )?;
            let (report, confirmed) = (judged.report, judged.used_second);
            let c = &mut counts[s];
            c.regression += u32::from(report.gate == GateVerdict::Regression);
            c.pass += u32::from(report.gate == GateVerdict::Pass);
            c.insufficient += u32::from(report.gate == GateVerdict::Insufficient);
            let found = match scenario {
                Scenario::Row(_) => report.cells[ROW_CELLS]
                    .iter()
                    .any(|x| x.verdict == CellVerdict::Regression),
                _ => report.cells[target].verdict == CellVerdict::Regression,
            };
            c.target_cell += u32::from(found);
            c.boots += if confirmed { 2 } else { 1 };
            for (n, hit) in c.alarms.iter_mut().zip(alarm_families(&report)) {
                *n += u32::from(hit);
            }
            if *scenario == Scenario::AA {
                aa_passed = report.gate == GateVerdict::Pass;
            } else if aa_passed {
                c.after_aa_pass += 1;
                c.regression_after_aa_pass += u32::from(report.gate == GateVerdict::Regression);
            }
        }
    }
    let trials = cfg.trials.max(1) as f64;
    let names: Vec<String> = SCENARIOS.iter().map(Scenario::name).collect();
    let aa = SCENARIOS
        .iter()
        .position(|s| *s == Scenario::AA)
        .unwrap_or(0);
    let peers = Family::ALL
        .iter()
        .zip(&looks)
        .flat_map(|(&family, l)| {
            let gate = GateBudget {
                alarms: counts[aa].regression as usize,
                second_boots: cfg.confirm.then(|| counts[aa].boots as usize - cfg.trials),
            };
            outcomes(family, l, &names, aa, gate, h)
        })
        .collect();
    Ok(ConditionOutcome {
        condition: condition.name.clone(),
        noise: noise.clone(),
        peers,
        scenarios: SCENARIOS
            .iter()
            .zip(&counts)
            .map(|(&scenario, c)| {
                let share = |n: u32| f64::from(n) / trials;
                let rate = share(c.regression);
                let (wilson_low, wilson_high) = wilson(rate, trials);
                ScenarioOutcome {
                    scenario,
                    name: scenario.name(),
                    regression_rate: rate,
                    wilson_low,
                    wilson_high,
                    pass_rate: share(c.pass),
                    insufficient_rate: share(c.insufficient),
                    target_cell_rate: matches!(
                        scenario,
                        Scenario::SingleCell(_) | Scenario::Row(_)
                    )
                    .then_some(share(c.target_cell)),
                    mean_boots: share(c.boots),
                    alarms: AlarmSources {
                        cell: share(c.alarms[0]),
                        line: share(c.alarms[1]),
                        matrix: share(c.alarms[2]),
                        capacity: share(c.alarms[3]),
                    },
                    found_when_aa_passed: (c.after_aa_pass > 0).then(|| {
                        f64::from(c.regression_after_aa_pass) / f64::from(c.after_aa_pass)
                    }),
                }
            })
            .collect(),
    })
}

/// A run's aggregate tok/s per cell, as the peer rules read it (whatever the cell's status).
fn tok_per_s(run: &RunResults) -> Vec<f64> {
    run.cells.iter().map(|c| c.aggregate_tps).collect()
}

/// What one scenario's gates said over a runner's trials (counts).
#[derive(Clone, Default)]
struct Tally {
    regression: u32,
    pass: u32,
    insufficient: u32,
    /// Single-cell and row scenarios: gates where a changed cell itself regressed.
    target_cell: u32,
    /// Candidate boots over all gates.
    boots: u32,
    /// Gates in which the cell, line, matrix and capacity tests said regression.
    alarms: [u32; 4],
    /// Trials whose A/A gate said pass, and this scenario's regressions among them.
    after_aa_pass: u32,
    regression_after_aa_pass: u32,
}

/// Wilson score interval (95%) of a share `p` of `n` trials: honest near 0 and 1, where the
/// normal approximation's interval would reach below zero.
pub fn wilson(p: f64, n: f64) -> (f64, f64) {
    let z = 1.959_964;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The peer rule that finds `scenario` most often at the gate's A/A rate and budget on one
/// runner, with that rate.
fn best_peer(c: &ConditionOutcome, scenario: Scenario) -> Option<(&'static str, f64)> {
    let name = scenario.name();
    c.peers
        .iter()
        .filter(|p| p.setting == GATE_AA_RATE)
        .filter_map(|p| {
            let r = p.scenarios.iter().find(|s| s.name == name)?;
            Some((p.rule, r.alarm_rate))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The targets, where their runner was measured.
fn targets(report: &EvalReport) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    let mut check =
        |desc: &str, condition: &str, measured: Option<f64>, ok: &dyn Fn(f64) -> bool| {
            if let Some(m) = measured {
                out.push(TargetCheck {
                    description: desc.into(),
                    condition: condition.into(),
                    measured: m,
                    met: ok(m),
                });
            }
        };
    let (aa, uniform) = (Scenario::AA, Scenario::Uniform(-0.05));
    let (row, one) = (Scenario::Row(-0.07), Scenario::SingleCell(-0.10));
    for c in &report.conditions {
        check(
            "A/A false alarms <= 1%",
            &c.condition,
            report.outcome(&c.condition, aa).map(|o| o.regression_rate),
            &|r| r <= 0.01,
        );
    }
    // Each target: a share of that runner's gates at that scenario at least this large.
    let at_least = [
        ("clean A/A says pass >= 90%", "gaussian", aa, 0.90),
        ("clean A/A says pass >= 80%", T3_SLOW_BOOTS, aa, 0.80),
        ("uniform -5% found >= 90%", "gaussian", uniform, 0.90),
        ("uniform -5% found >= 90%", "drift +3%", uniform, 0.90),
        ("uniform -5% found >= 90%", "step -2%", uniform, 0.90),
        // Issue 56: a uniform −5% found with the design power's margin on the Gaussian runner,
        // also when its history holds an outlier run (the run noise estimated robustly).
        ("uniform -5% found >= 95%", "gaussian", uniform, 0.95),
        (
            "uniform -5% found >= 95%",
            "outlier runs 1 in 20 x -8%",
            uniform,
            0.95,
        ),
        ("row -7% found >= 80%", "gaussian", row, 0.80),
        ("single cell -10% found >= 80%", "gaussian", one, 0.80),
    ];
    // The A/A targets count passes, the others regressions found.
    for (desc, cond, scenario, min) in at_least {
        let pass = scenario == aa;
        let o = report.outcome(cond, scenario);
        let measured = o.map(|o| if pass { o.pass_rate } else { o.regression_rate });
        check(desc, cond, measured, &|r| r >= min);
    }
    // A green check vouches for every cell at the rule's `cell_effect` (10%): one cell that
    // much slower is found, or the gate says `insufficient` and names it.
    for c in &report.conditions {
        check(
            "single cell -10% says pass <= 5%",
            &c.condition,
            report.outcome(&c.condition, one).map(|o| o.pass_rate),
            &|r| r <= 0.05,
        );
    }
    out.extend(peer_targets(report));
    out
}

/// On heavy-tailed cells the gate finds one cell 10% slower at least as often as the best rule
/// users know does at the gate's own A/A rate and budget (issue 56).
fn peer_targets(report: &EvalReport) -> Vec<TargetCheck> {
    let single = Scenario::SingleCell(-0.10);
    report
        .conditions
        .iter()
        .filter(|c| ["t3 cells", T3_SLOW_BOOTS].contains(&c.condition.as_str()))
        .filter_map(|c| {
            let (rule, peer) = best_peer(c, single)?;
            let o = report.outcome(&c.condition, single)?;
            Some(TargetCheck {
                description: format!(
                    "single cell -10% found >= the best peer at the gate's A/A rate and budget \
                     ({rule}: {:.1}%)",
                    100.0 * peer
                ),
                condition: c.condition.clone(),
                measured: o.regression_rate,
                met: o.regression_rate >= peer,
            })
        })
        .collect()
}
