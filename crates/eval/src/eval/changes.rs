//! Monte Carlo of the change-point search as a nightly uses it (`infergate changes-eval`).
//!
//! Each trial draws a nightly history of the synthetic 20-cell profile with the gate's runner
//! noise ([`NoiseSpec`]: run and cell terms, slow drift, one outlier run in 20) and replays it
//! night by night: every night the real [`analyse_series`] runs over the history so far and a
//! change point that is not [`same_change`] as an alert already open is a new alert (one that
//! is updates it, as the GitHub issue is). Measured:
//! false alerts per 100 nights of a stable series; for a step and for creeps, the share found,
//! the detection delay (nights after the onset until the alert) and the location error.

use serde::{Deserialize, Serialize};

use infergate_schema::results::RunResults;
use infergate_schema::verdict::Metric;

use super::gate::{NoiseSpec, nightly_history};
use infergate_model::stats::StatsError;
use infergate_model::stats::build::quantile;
use infergate_model::stats::changepoint::{
    ChangeKind, ChangeSettings, Scope, analyse_series, same_change, series_of,
};
use infergate_model::stats::noise::median;

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeEvalConfig {
    pub trials: usize,
    pub seed: u64,
    /// Nights of the stable history.
    pub stable_nights: usize,
    /// Nights before the first analysis (a nightly needs some history to say anything).
    pub warmup: usize,
    /// The step's relative size and the night it starts.
    pub step: f64,
    pub step_at: usize,
    /// Creeps (relative change per night) and the night they start.
    pub creeps: Vec<f64>,
    pub creep_at: usize,
    /// Nights watched after an onset before a change counts as missed.
    pub follow: usize,
    /// "Alerted while still small": the share found within this many nights of the onset is
    /// reported too (`detected_early`).
    #[serde(default = "default_early")]
    pub early: usize,
    /// Length of the must-show history (step and slowest creep in one history).
    pub must_show_nights: usize,
    pub settings: ChangeSettings,
    pub noise: NoiseSpec,
}

impl Default for ChangeEvalConfig {
    fn default() -> Self {
        ChangeEvalConfig {
            trials: 200,
            seed: 20_261_117,
            stable_nights: 100,
            warmup: 10,
            step: -0.03,
            step_at: 40,
            creeps: vec![-0.003, -0.002],
            creep_at: 45,
            follow: 30,
            early: default_early(),
            must_show_nights: 60,
            settings: ChangeSettings::default(),
            noise: NoiseSpec::default(),
        }
    }
}

fn default_early() -> usize {
    10
}

/// Which series of the matrix a figure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeriesKind {
    /// The matrix-wide series (mean over 20 cells).
    Matrix,
    /// One cell (C=1, 8k), the change in it alone.
    Cell,
}

/// False alerts on a stable history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StableOutcome {
    pub series: SeriesKind,
    /// Alerts per 100 analysed nights (all false: nothing changed).
    pub false_per_100_nights: f64,
    /// Monte Carlo standard error of that figure.
    pub std_error: f64,
    /// Share of histories with at least one false alert.
    pub histories_with_alert: f64,
}

/// A change's detection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShiftOutcome {
    /// `step_-3%` or `creep_-0.3%/night`.
    pub scenario: String,
    pub series: SeriesKind,
    pub(crate) onset: usize,
    /// Share of trials alerted within `follow` nights of the onset.
    pub detected: f64,
    /// Share of trials alerted within `early` nights of the onset (delay ≤ `early`).
    #[serde(default)]
    pub detected_early: f64,
    /// Nights after the onset until the alert (0 = the night of the first changed run), over
    /// detected trials: median, 90th percentile, mean.
    pub delay_median: f64,
    pub delay_p90: f64,
    pub delay_mean: f64,
    /// Mean absolute error of the alerted location, nights.
    pub location_mae: f64,
    /// Share of detected trials located within ±2 nights.
    pub within_2: f64,
    /// The same at the end of the follow window (the alert updated to the latest analysis).
    pub latest_location_mae: f64,
    pub latest_within_2: f64,
    /// Share of detected trials whose alert calls the change a creep at the end.
    pub latest_creep: f64,
    /// Share of trials with any alert opened in the direction of the change within `follow`
    /// nights of the onset, also one placed more than `min_segment` nights early (which
    /// `detected` does not count): the alerts whose intervals are scored below.
    #[serde(default)]
    pub alerted: f64,
    /// Share of those first alerts whose location interval holds the onset when the alert
    /// opened, and as the last analysis left it; the interval's width (nights) median at both.
    #[serde(default)]
    pub interval_holds: f64,
    #[serde(default)]
    pub latest_interval_holds: f64,
    #[serde(default)]
    pub interval_width_median: f64,
    #[serde(default)]
    pub latest_interval_width_median: f64,
    /// Mean alerts from the onset to the end of the follow window (1 = one alert per change).
    pub alerts_after_onset: f64,
    /// False alerts per 100 nights before the onset.
    pub false_before_per_100: f64,
}

/// The evaluation's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeEvalReport {
    pub config: ChangeEvalConfig,
    pub stable: Vec<StableOutcome>,
    pub shifts: Vec<ShiftOutcome>,
    /// The issue's must-show history (a step, then a creep; and a stable one), matrix series.
    pub must_show: MustShowOutcome,
    /// Location intervals of the step (`must_show_nights` nights, the step alone at
    /// `step_at`), at the last night: matrix series and one cell.
    #[serde(default)]
    pub location: Vec<LocationOutcome>,
}

/// How well the location intervals place a step: each trial's history holds the step alone,
/// analysed at its last night; the step's change point is the one whose estimate lies nearest
/// the true first changed night, within [`STEP_NEAR`] nights.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocationOutcome {
    pub series: SeriesKind,
    /// The stated confidence of the intervals.
    pub confidence: f64,
    /// Share of trials with a change point within [`STEP_NEAR`] nights of the step.
    pub found: f64,
    /// Share of those whose interval holds the true night.
    pub covered_when_found: f64,
    /// Share of all trials (a missed step is not covered).
    pub covered: f64,
    /// The interval's width in runs (1 = one run pair) over found trials: median, 90th
    /// percentile, mean.
    pub width_median: f64,
    pub width_p90: f64,
    pub width_mean: f64,
    /// Share of found trials placed at one run pair (width 1).
    pub one_pair: f64,
}

/// A change point this close to a step (nights) is the step's.
pub const STEP_NEAR: usize = 5;

/// Shares of trials of the must-show scenario: `nights` nights, the step at `step_at`, the
/// (slowest) creep from `creep_at`, replayed night by night on the matrix series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MustShowOutcome {
    pub nights: usize,
    /// Exactly one alert is nearer the step than the creep, and at the last night it is a step
    /// within ±2 nights.
    pub step_one_alert_within_2: f64,
    /// The same for the creep (a creep, within ±2 nights of its onset).
    pub creep_one_alert_within_2: f64,
    /// Both, and no alert farther than 2 nights from both onsets.
    pub both: f64,
    /// A stable history of the same length raises no alert.
    pub stable_no_alert: f64,
    /// The best achievable: on the same histories at the last night, the least-squares fit
    /// that *knows* the history holds one step and then one creep ([`oracle_step_creep`]):
    /// share with the step within ±2 nights, the creep's onset within ±2, and both.
    pub oracle_step_within_2: f64,
    pub oracle_creep_within_2: f64,
    pub oracle_both_within_2: f64,
}

/// Solves the 3×3 system `a x = b` (Cramer's rule); `None` when singular.
fn solve3(a: [[f64; 3]; 3], b: [f64; 3]) -> Option<[f64; 3]> {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(a);
    if d.abs() < 1e-12 {
        return None;
    }
    let mut x = [0.0; 3];
    for (k, xk) in x.iter_mut().enumerate() {
        let mut m = a;
        for r in 0..3 {
            m[r][k] = b[r];
        }
        *xk = det(m) / d;
    }
    Some(x)
}

/// The known-model bound of the must-show: the least-squares fit of "level, a step at `s`,
/// then a hinge (a straight trend) from onset `tau > s`" to `logs`, over every `s` and `tau`,
/// with outlier runs (more than 4 noise SD off the running median of 5) left out. It knows
/// what a detector must find out (that there is exactly one step and one creep, in that
/// order) and least squares is efficient for the Gaussian run noise, so no detector locates
/// the two better on average: (s, tau).
pub(crate) fn oracle_step_creep(logs: &[f64], min_seg: usize) -> Option<(usize, usize)> {
    let n = logs.len();
    if n < 2 * min_seg + 3 {
        return None;
    }
    let smooth: Vec<f64> = (0..n)
        .map(|i| median(&mut logs[i.saturating_sub(2)..(i + 3).min(n)].to_vec()))
        .collect();
    let mut d: Vec<f64> = logs.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let sd = infergate_model::stats::noise::mad_sd(&mut d) / std::f64::consts::SQRT_2;
    let keep: Vec<usize> = (0..n)
        .filter(|&i| (logs[i] - smooth[i]).abs() <= 4.0 * sd.max(1e-12))
        .collect();
    let mut best: Option<(f64, usize, usize)> = None;
    for st in min_seg..n - min_seg {
        for tau in st + 1..n - 1 {
            let row = |i: usize| {
                [
                    1.0,
                    f64::from(u8::from(i >= st)),
                    if i >= tau { (i + 1 - tau) as f64 } else { 0.0 },
                ]
            };
            let mut a = [[0.0; 3]; 3];
            let mut b = [0.0; 3];
            for &i in &keep {
                let x = row(i);
                for r in 0..3 {
                    b[r] += x[r] * logs[i];
                    for c in 0..3 {
                        a[r][c] += x[r] * x[c];
                    }
                }
            }
            let Some(beta) = solve3(a, b) else { continue };
            let rss: f64 = keep
                .iter()
                .map(|&i| {
                    let x = row(i);
                    (logs[i] - (beta[0] + beta[1] * x[1] + beta[2] * x[2])).powi(2)
                })
                .sum();
            if best.is_none_or(|(r, _, _)| rss < r) {
                best = Some((rss, st, tau));
            }
        }
    }
    best.map(|(_, st, tau)| (st, tau))
}

/// The must-show history's effect at `night`: `step` from `step_at`, then `creep` per night
/// from `creep_at` (compounded).
pub(crate) fn step_then_creep(
    night: usize,
    step: f64,
    step_at: usize,
    creep: f64,
    creep_at: usize,
) -> f64 {
    let s = if night >= step_at { step.ln_1p() } else { 0.0 };
    let c = if night >= creep_at {
        creep.ln_1p() * (night - creep_at + 1) as f64
    } else {
        0.0
    };
    (s + c).exp_m1()
}

/// One must-show trial: (step ok, creep ok, no other alert) as [`MustShowOutcome`] defines them.
pub(crate) fn must_show_trial(
    alerts: &[NightlyAlert],
    step_at: usize,
    creep_at: usize,
) -> (bool, bool, bool) {
    let within = 2;
    // Each alert is about the onset it lies nearer (ties: the step).
    let step_side =
        |a: &&NightlyAlert| a.latest_at.abs_diff(step_at) <= a.latest_at.abs_diff(creep_at);
    let (step, creep): (Vec<&NightlyAlert>, Vec<&NightlyAlert>) =
        alerts.iter().partition(step_side);
    let ok = |v: &[&NightlyAlert], at: usize, kind: ChangeKind| {
        v.len() == 1 && v[0].latest_at.abs_diff(at) <= within && v[0].latest_kind == kind
    };
    let far = |a: &&NightlyAlert| {
        a.latest_at.abs_diff(step_at) > within && a.latest_at.abs_diff(creep_at) > within
    };
    (
        ok(&step, step_at, ChangeKind::Step),
        ok(&creep, creep_at, ChangeKind::Creep),
        !alerts.iter().any(|a| far(&a)),
    )
}

/// One alert of the nightly replay: opened at `night` for a change at run position `at`;
/// `latest_*` is where the same change stood at the last night (its issue is updated, not
/// duplicated, as the change is relocated or a creep grows).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NightlyAlert {
    pub(crate) night: usize,
    pub(crate) at: usize,
    pub(crate) up: bool,
    /// What the alert called the change when it opened.
    pub(crate) kind: ChangeKind,
    pub(crate) latest_at: usize,
    pub(crate) latest_kind: ChangeKind,
    /// A creep's newest run at the last night it was seen.
    pub(crate) latest_until: Option<usize>,
    /// The location interval (first and last night it may have started) when the alert
    /// opened, and as the last analysis left it: what a reader bisects.
    pub(crate) interval: (usize, usize),
    pub(crate) latest_interval: (usize, usize),
}

/// Nightly alerts of one series over `runs`: every night from `warmup` on the history so far
/// is analysed, and a change point that is not [`same_change`] as an alert already open (same
/// direction) opens a new one; one that is updates it.
pub(crate) fn nightly_alerts(
    runs: &[RunResults],
    scope: &Scope,
    warmup: usize,
    settings: &ChangeSettings,
) -> Result<Vec<NightlyAlert>, StatsError> {
    let mut alerted: Vec<NightlyAlert> = Vec::new();
    for night in warmup.max(1)..runs.len() {
        let s = analyse_series(
            &runs[..=night],
            scope.clone(),
            Metric::AggregateTps,
            settings,
        )?;
        let mut touched: Vec<usize> = Vec::new();
        for c in &s.changes {
            let at = s.runs[c.index];
            let until = (c.kind == ChangeKind::Creep).then(|| s.runs[c.index + c.after - 1]);
            let (lo, hi) = c.location.unwrap_or((c.index, c.index));
            let interval = (s.runs[lo], s.runs[hi]);
            let up = c.change > 0.0;
            let same = alerted
                .iter()
                .enumerate()
                .filter(|(i, a)| a.up == up && !touched.contains(i))
                .filter(|(_, a)| {
                    same_change(a.latest_at, a.latest_until, at, until, settings.min_segment)
                })
                .min_by_key(|(_, a)| a.latest_at.abs_diff(at))
                .map(|(i, _)| i);
            match same {
                Some(i) => {
                    touched.push(i);
                    let a = &mut alerted[i];
                    a.latest_at = at;
                    a.latest_kind = c.kind;
                    a.latest_until = until;
                    a.latest_interval = interval;
                }
                None => {
                    touched.push(alerted.len());
                    alerted.push(NightlyAlert {
                        night,
                        at,
                        up,
                        kind: c.kind,
                        latest_at: at,
                        latest_kind: c.kind,
                        latest_until: until,
                        interval,
                        latest_interval: interval,
                    });
                }
            }
        }
    }
    Ok(alerted)
}

fn scope_of(kind: SeriesKind, runs: &[RunResults]) -> Scope {
    match kind {
        SeriesKind::Matrix => Scope::Matrix,
        SeriesKind::Cell => {
            let c = runs.first().and_then(|r| r.cells.first());
            Scope::Cell {
                concurrency: c.map_or(1, |c| c.concurrency),
                context_tokens: c.map_or(0, |c| c.context_tokens),
            }
        }
    }
}

/// The relative change of every cell at a night.
type Effect = Box<dyn Fn(usize) -> f64>;

/// The seed of trial `t`'s histories (every scenario's history of trial `t` shares it).
fn trial_seed(cfg: &ChangeEvalConfig, t: usize) -> u64 {
    cfg.seed.wrapping_add((t as u64).wrapping_mul(0x9e37_79b9))
}

/// The change scenarios: (name, onset night, effect on every cell): the step, then each creep.
fn scenarios(cfg: &ChangeEvalConfig) -> Vec<(String, usize, Effect)> {
    let (step, step_at, creep_at) = (cfg.step, cfg.step_at, cfg.creep_at);
    let mut out: Vec<(String, usize, Effect)> = vec![(
        format!("step_{:+}%", step * 100.0),
        step_at,
        Box::new(move |n: usize| if n >= step_at { step } else { 0.0 }),
    )];
    for &creep in &cfg.creeps {
        out.push((
            format!("creep_{:+}%/night", creep * 100.0),
            creep_at,
            Box::new(move |n| step_then_creep(n, 0.0, 0, creep, creep_at)),
        ));
    }
    out
}

/// One exported nightly alert (a [`NightlyAlert`] as JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExportedAlert {
    pub(crate) night: usize,
    pub(crate) at: usize,
    pub(crate) up: bool,
    /// Whether the alert called the change a creep when it opened.
    pub(crate) creep: bool,
    pub(crate) latest_at: usize,
    pub(crate) latest_creep: bool,
    pub(crate) latest_until: Option<usize>,
    /// The location interval when the alert opened and at the last night (first and last
    /// night the change may have started).
    pub(crate) interval: (usize, usize),
    pub(crate) latest_interval: (usize, usize),
}

impl From<&NightlyAlert> for ExportedAlert {
    fn from(a: &NightlyAlert) -> Self {
        ExportedAlert {
            night: a.night,
            at: a.at,
            up: a.up,
            creep: a.kind == ChangeKind::Creep,
            latest_at: a.latest_at,
            latest_creep: a.latest_kind == ChangeKind::Creep,
            latest_until: a.latest_until,
            interval: a.interval,
            latest_interval: a.latest_interval,
        }
    }
}

/// One exported history: the series every comparator replays night by night (the prefix up
/// to night `n` is what the nightly saw on night `n`), and infergate's own nightly alerts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportedHistory {
    pub(crate) trial: usize,
    pub(crate) seed: u64,
    /// The matrix-wide series' logs (mean over cells of log(value / the cell's median)), one
    /// per night. A prefix's own medians shift it by a constant only.
    pub(crate) matrix_log: Vec<f64>,
    /// Every cell's aggregate tok/s logs, `cells_log[c][night]`, from the same draw with the
    /// change in cell 0 alone (a single-cell change; cell 0's series is the same as in the
    /// history with the change in every cell, which the matrix series comes from).
    pub(crate) cells_log: Vec<Vec<f64>>,
    /// infergate's nightly alerts on the matrix series (change in every cell).
    pub(crate) infergate_matrix: Vec<ExportedAlert>,
    /// infergate's nightly alerts on cell 0's series, in the history with the change in cell 0
    /// alone (`cells_log`'s).
    pub(crate) infergate_cell: Vec<ExportedAlert>,
}

/// One scenario's exported histories (`<dir>/<name>.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportedScenario {
    pub scenario: String,
    /// The first changed night (`None`: stable).
    pub(crate) onset: Option<usize>,
    pub(crate) nights: usize,
    /// The first night analysed.
    pub(crate) warmup: usize,
    /// Nights after the onset within which a find counts as early.
    pub(crate) early: usize,
    pub(crate) min_segment: usize,
    pub(crate) settings: ChangeSettings,
    pub(crate) noise: NoiseSpec,
    pub histories: Vec<ExportedHistory>,
}

/// Each cell's log series; a cell without an `ok` value on some night (the synthetic
/// histories draw none) is an error.
fn cell_logs(runs: &[RunResults]) -> Result<Vec<Vec<f64>>, StatsError> {
    let Some(first) = runs.first() else {
        return Ok(Vec::new());
    };
    first
        .cells
        .iter()
        .map(|c| {
            let scope = Scope::Cell {
                concurrency: c.concurrency,
                context_tokens: c.context_tokens,
            };
            let (idx, values) = series_of(runs, &scope, Metric::AggregateTps);
            if idx.len() != runs.len() {
                return Err(StatsError::InvalidRule(
                    "changes-eval export: a cell misses a night".into(),
                ));
            }
            Ok(values.iter().map(|v| v.ln()).collect())
        })
        .collect()
}

/// A history of `nights` with `effect`: in every cell for the matrix series, in cell 0 alone
/// for the cell's (a single-cell change: the same draw, so cell 0's own values are the same).
fn changed_history(
    noise: &NoiseSpec,
    kind: SeriesKind,
    nights: usize,
    effect: &dyn Fn(usize) -> f64,
    seed: u64,
) -> Vec<RunResults> {
    match kind {
        SeriesKind::Matrix => nightly_history(noise, nights, effect, seed),
        SeriesKind::Cell => {
            let mut runs = nightly_history(noise, nights, &|_| 0.0, seed);
            scale_cell(&mut runs, 0, effect);
            runs
        }
    }
}

/// Multiplies cell `cell`'s measurements by `1 + effect(night)` (a change in that cell alone).
fn scale_cell(runs: &mut [RunResults], cell: usize, effect: &dyn Fn(usize) -> f64) {
    for (night, run) in runs.iter_mut().enumerate() {
        let f = 1.0 + effect(night);
        if let Some(c) = run.cells.get_mut(cell) {
            c.aggregate_tps *= f;
            c.samples.iter_mut().for_each(|s| *s *= f);
            c.output_tokens = (c.output_tokens as f64 * f) as u64;
        }
    }
}

/// Draws the same histories as [`run_change_eval`] (same seeds, same scenarios) and returns
/// them with infergate's nightly alerts, for comparators outside the crate
/// (`scripts/eval/changes_peers.py`). The stable scenario is `stable`.
pub fn export_histories(cfg: &ChangeEvalConfig) -> Result<Vec<ExportedScenario>, StatsError> {
    cfg.settings.validate()?;
    let mut all: Vec<(String, Option<usize>, usize, Effect)> =
        vec![("stable".into(), None, cfg.stable_nights, Box::new(|_| 0.0))];
    for (name, onset, effect) in scenarios(cfg) {
        all.push((name, Some(onset), onset + cfg.follow, effect));
    }
    let mut out = Vec::new();
    for (name, onset, nights, effect) in all {
        let mut histories = Vec::new();
        for t in 0..cfg.trials {
            let seed = trial_seed(cfg, t);
            let every = nightly_history(&cfg.noise, nights, &effect, seed);
            let matrix = nightly_alerts(&every, &Scope::Matrix, cfg.warmup, &cfg.settings)?;
            let single = changed_history(&cfg.noise, SeriesKind::Cell, nights, &effect, seed);
            let cell_scope = scope_of(SeriesKind::Cell, &single);
            let cell = nightly_alerts(&single, &cell_scope, cfg.warmup, &cfg.settings)?;
            let (_, mvals) = series_of(&every, &Scope::Matrix, Metric::AggregateTps);
            histories.push(ExportedHistory {
                trial: t,
                seed,
                matrix_log: mvals.iter().map(|v| v.ln()).collect(),
                cells_log: cell_logs(&single)?,
                infergate_matrix: matrix.iter().map(ExportedAlert::from).collect(),
                infergate_cell: cell.iter().map(ExportedAlert::from).collect(),
            });
        }
        out.push(ExportedScenario {
            scenario: name,
            onset,
            nights,
            warmup: cfg.warmup,
            early: cfg.early,
            min_segment: cfg.settings.min_segment,
            settings: cfg.settings.clone(),
            noise: cfg.noise.clone(),
            histories,
        });
    }
    Ok(out)
}

/// Runs the Monte Carlo.
pub fn run_change_eval(cfg: &ChangeEvalConfig) -> Result<ChangeEvalReport, StatsError> {
    cfg.settings.validate()?;
    if cfg.warmup >= cfg.stable_nights || cfg.step_at <= cfg.warmup || cfg.creep_at <= cfg.warmup {
        return Err(StatsError::InvalidRule(
            "changes-eval: warmup must be shorter than the stable history and end before the onsets".into(),
        ));
    }
    let kinds = [SeriesKind::Matrix, SeriesKind::Cell];
    let trials = cfg.trials.max(1) as f64;
    let trial_seed = |t: usize| trial_seed(cfg, t);
    let mut stable = Vec::new();
    for kind in kinds {
        let (mut with_alert, mut per_trial) = (0.0, Vec::new());
        for t in 0..cfg.trials {
            let runs = nightly_history(&cfg.noise, cfg.stable_nights, &|_| 0.0, trial_seed(t));
            let a = nightly_alerts(&runs, &scope_of(kind, &runs), cfg.warmup, &cfg.settings)?;
            with_alert += f64::from(u8::from(!a.is_empty()));
            per_trial.push(a.len() as f64);
        }
        let nights = (cfg.stable_nights - cfg.warmup) as f64;
        let mean = per_trial.iter().sum::<f64>() / trials;
        let var =
            per_trial.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (trials - 1.0).max(1.0);
        stable.push(StableOutcome {
            series: kind,
            false_per_100_nights: mean / nights * 100.0,
            std_error: (var / trials).sqrt() / nights * 100.0,
            histories_with_alert: with_alert / trials,
        });
    }
    let (step, step_at, creep_at) = (cfg.step, cfg.step_at, cfg.creep_at);
    let step_alone = move |n: usize| if n >= step_at { step } else { 0.0 };
    let scenarios = scenarios(cfg);
    let mut shifts = Vec::new();
    for (name, onset, effect) in &scenarios {
        for kind in kinds {
            let mut early = 0.0;
            let (mut delays, mut errors, mut after, mut before) =
                (Vec::new(), Vec::new(), 0.0, 0.0);
            let (mut latest, mut creeps) = (Vec::new(), 0.0);
            let up = effect(onset + cfg.follow) > 0.0;
            let (mut holds, mut latest_holds) = (0.0, 0.0);
            let (mut widths, mut latest_widths) = (Vec::new(), Vec::new());
            for t in 0..cfg.trials {
                let runs =
                    changed_history(&cfg.noise, kind, onset + cfg.follow, effect, trial_seed(t));
                let a = nightly_alerts(&runs, &scope_of(kind, &runs), cfg.warmup, &cfg.settings)?;
                before += a.iter().filter(|x| x.night < *onset).count() as f64;
                after += a.iter().filter(|x| x.night >= *onset).count() as f64;
                if let Some(x) = a.iter().find(|x| x.night >= *onset && x.up == up) {
                    let holds_onset =
                        |(lo, hi): (usize, usize)| f64::from(u8::from((lo..=hi).contains(onset)));
                    holds += holds_onset(x.interval);
                    latest_holds += holds_onset(x.latest_interval);
                    widths.push((x.interval.1 + 1 - x.interval.0) as f64);
                    latest_widths.push((x.latest_interval.1 + 1 - x.latest_interval.0) as f64);
                }
                if let Some(x) = a
                    .iter()
                    .find(|x| x.night >= *onset && x.at + cfg.settings.min_segment >= *onset)
                {
                    delays.push((x.night - onset) as f64);
                    early += f64::from(u8::from(x.night - onset <= cfg.early));
                    errors.push(x.at as f64 - *onset as f64);
                    latest.push(x.latest_at as f64 - *onset as f64);
                    creeps += f64::from(u8::from(x.latest_kind == ChangeKind::Creep));
                }
            }
            let found = delays.len().max(1) as f64;
            let mae = |e: &[f64]| e.iter().map(|e| e.abs()).sum::<f64>() / found;
            let near = |e: &[f64]| e.iter().filter(|e| e.abs() <= 2.0).count() as f64 / found;
            delays.sort_by(f64::total_cmp);
            let n_alerted = widths.len().max(1) as f64;
            widths.sort_by(f64::total_cmp);
            latest_widths.sort_by(f64::total_cmp);
            shifts.push(ShiftOutcome {
                scenario: name.clone(),
                series: kind,
                onset: *onset,
                detected: delays.len() as f64 / trials,
                detected_early: early / trials,
                delay_median: quantile(&delays, 0.5),
                delay_p90: quantile(&delays, 0.9),
                delay_mean: delays.iter().sum::<f64>() / found,
                location_mae: mae(&errors),
                within_2: near(&errors),
                latest_location_mae: mae(&latest),
                latest_within_2: near(&latest),
                latest_creep: creeps / found,
                alerted: widths.len() as f64 / trials,
                interval_holds: holds / n_alerted,
                latest_interval_holds: latest_holds / n_alerted,
                interval_width_median: quantile(&widths, 0.5),
                latest_interval_width_median: quantile(&latest_widths, 0.5),
                alerts_after_onset: after / trials,
                false_before_per_100: before / trials / (onset - cfg.warmup) as f64 * 100.0,
            });
        }
    }
    let creep =
        cfg.creeps.iter().copied().fold(
            0.0,
            |a: f64, c: f64| if c.abs() < a.abs() || a == 0.0 { c } else { a },
        );
    let nights = cfg.must_show_nights;
    let (mut s_ok, mut c_ok, mut both, mut quiet) = (0.0, 0.0, 0.0, 0.0);
    let (mut o_step, mut o_creep, mut o_both) = (0.0, 0.0, 0.0);
    for t in 0..cfg.trials {
        let effect = move |n: usize| step_then_creep(n, step, step_at, creep, creep_at);
        let runs = nightly_history(&cfg.noise, nights, &effect, trial_seed(t));
        let a = nightly_alerts(&runs, &Scope::Matrix, cfg.warmup, &cfg.settings)?;
        let (so, co, only) = must_show_trial(&a, step_at, creep_at);
        s_ok += f64::from(u8::from(so));
        c_ok += f64::from(u8::from(co));
        both += f64::from(u8::from(so && co && only));
        let (_, values) = series_of(&runs, &Scope::Matrix, Metric::AggregateTps);
        let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        if let Some((st, tau)) = oracle_step_creep(&logs, cfg.settings.min_segment) {
            let (so, co) = (st.abs_diff(step_at) <= 2, tau.abs_diff(creep_at) <= 2);
            o_step += f64::from(u8::from(so));
            o_creep += f64::from(u8::from(co));
            o_both += f64::from(u8::from(so && co));
        }
        let runs = nightly_history(&cfg.noise, nights, &|_| 0.0, trial_seed(t));
        let a = nightly_alerts(&runs, &Scope::Matrix, cfg.warmup, &cfg.settings)?;
        quiet += f64::from(u8::from(a.is_empty()));
    }
    let mut location = Vec::new();
    for kind in kinds {
        let (mut covered, mut widths) = (0.0, Vec::new());
        for t in 0..cfg.trials {
            let runs = changed_history(&cfg.noise, kind, nights, &step_alone, trial_seed(t));
            if let Some((lo, hi)) =
                step_location(&runs, &scope_of(kind, &runs), step_at, &cfg.settings)?
            {
                covered += f64::from(u8::from((lo..=hi).contains(&step_at)));
                widths.push((hi - lo + 1) as f64);
            }
        }
        let n = widths.len().max(1) as f64;
        let one = widths.iter().filter(|w| **w == 1.0).count() as f64;
        widths.sort_by(f64::total_cmp);
        location.push(LocationOutcome {
            series: kind,
            confidence: cfg.settings.confidence,
            found: widths.len() as f64 / trials,
            covered_when_found: covered / n,
            covered: covered / trials,
            width_median: quantile(&widths, 0.5),
            width_p90: quantile(&widths, 0.9),
            width_mean: widths.iter().sum::<f64>() / n,
            one_pair: one / n,
        });
    }
    Ok(ChangeEvalReport {
        config: cfg.clone(),
        stable,
        shifts,
        must_show: MustShowOutcome {
            nights,
            step_one_alert_within_2: s_ok / trials,
            creep_one_alert_within_2: c_ok / trials,
            both: both / trials,
            stable_no_alert: quiet / trials,
            oracle_step_within_2: o_step / trials,
            oracle_creep_within_2: o_creep / trials,
            oracle_both_within_2: o_both / trials,
        },
        location,
    })
}

/// The location interval (history positions, inclusive) of the change point of `scope` whose
/// estimate lies nearest `at` within [`STEP_NEAR`] nights, in the analysis of all of `runs`;
/// `None` when there is none.
pub(crate) fn step_location(
    runs: &[RunResults],
    scope: &Scope,
    at: usize,
    settings: &ChangeSettings,
) -> Result<Option<(usize, usize)>, StatsError> {
    let s = analyse_series(runs, scope.clone(), Metric::AggregateTps, settings)?;
    Ok(s.changes
        .iter()
        .filter(|c| s.runs[c.index].abs_diff(at) <= STEP_NEAR)
        .min_by_key(|c| s.runs[c.index].abs_diff(at))
        .map(|c| {
            let (lo, hi) = c.location.unwrap_or((c.index, c.index));
            (s.runs[lo], s.runs[hi])
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_evaluation_runs_and_finds_the_step() {
        let cfg = ChangeEvalConfig {
            trials: 2,
            stable_nights: 20,
            warmup: 8,
            step: -0.08,
            step_at: 12,
            creeps: vec![-0.01],
            creep_at: 12,
            follow: 10,
            must_show_nights: 20,
            settings: ChangeSettings {
                permutations: 199,
                ..ChangeSettings::default()
            },
            ..ChangeEvalConfig::default()
        };
        let r = run_change_eval(&cfg).unwrap();
        assert_eq!(r.stable.len(), 2);
        assert_eq!(r.shifts.len(), 4);
        let step = r
            .shifts
            .iter()
            .find(|s| s.scenario.starts_with("step") && s.series == SeriesKind::Matrix)
            .unwrap();
        assert_eq!(step.detected, 1.0, "{step:?}");
        assert!(step.delay_median >= 2.0, "needs min_segment runs: {step:?}");
        // An −8% step in 1% noise: its first alert's interval holds the night, and is the
        // width of a few runs at most.
        assert_eq!((step.alerted, step.interval_holds), (1.0, 1.0), "{step:?}");
        assert!(
            (1.0..=6.0).contains(&step.interval_width_median),
            "{step:?}"
        );
    }

    #[test]
    fn the_export_holds_the_evaluations_histories_with_the_change_in_cell_0_alone() {
        let cfg = ChangeEvalConfig {
            trials: 1,
            stable_nights: 20,
            warmup: 8,
            step: -0.08,
            step_at: 12,
            creeps: vec![],
            follow: 10,
            settings: ChangeSettings {
                permutations: 199,
                ..ChangeSettings::default()
            },
            ..ChangeEvalConfig::default()
        };
        let out = export_histories(&cfg).unwrap();
        let names: Vec<&str> = out.iter().map(|s| s.scenario.as_str()).collect();
        assert_eq!(names, ["stable", "step_-8%"]);
        let step = &out[1];
        let h = &step.histories[0];
        assert_eq!(
            (step.onset, step.nights, h.matrix_log.len()),
            (Some(12), 22, 22)
        );
        assert_eq!(h.cells_log.len(), 20);
        // Cell 0 carries the step, cell 1 does not; both are the evaluation's own draw.
        let jump =
            |c: &[f64]| c[12..].iter().sum::<f64>() / 10.0 - c[..12].iter().sum::<f64>() / 12.0;
        assert!(jump(&h.cells_log[0]) < -0.04, "{:?}", h.cells_log[0]);
        assert!(jump(&h.cells_log[1]).abs() < 0.04, "{:?}", h.cells_log[1]);
        let every = nightly_history(
            &cfg.noise,
            22,
            &|n| if n >= 12 { -0.08 } else { 0.0 },
            h.seed,
        );
        let (_, cell0) = series_of(
            &every,
            &scope_of(SeriesKind::Cell, &every),
            Metric::AggregateTps,
        );
        let same = cell0
            .iter()
            .zip(&h.cells_log[0])
            .all(|(v, l)| (v.ln() - l).abs() < 1e-9);
        assert!(same, "cell 0 differs from the every-cell history's");
        assert!(
            h.infergate_matrix
                .iter()
                .any(|a| !a.up && a.at.abs_diff(12) <= 3),
            "the −8% step is found: {:?}",
            h.infergate_matrix
        );
    }

    /// Multiplies every cell of night `n` by `factor(n)` (a whole night moved: heavy tails,
    /// an outlier night, more drift than the model's).
    fn scale_nights(runs: &mut [RunResults], factor: &dyn Fn(usize) -> f64) {
        for cell in 0..runs.first().map_or(0, |r| r.cells.len()) {
            scale_cell(runs, cell, &|n| factor(n) - 1.0);
        }
    }

    #[test]
    #[ignore = "measurement for docs/changes.md (issue 60): cargo test --lib location_coverage_off_model -- --ignored --nocapture"]
    #[allow(clippy::print_stderr)] // a measurement run by hand prints its figures
    fn location_coverage_off_model() {
        use rand::SeedableRng;
        use rand_distr::Distribution;
        let trials: u64 = std::env::var("TRIALS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        let settings = ChangeSettings::default();
        let step = |n: usize| if n >= 40 { -0.03 } else { 0.0 };
        type Bend = Box<dyn Fn(u64) -> Box<dyn Fn(usize) -> f64>>;
        let cases: Vec<(&str, Bend)> = vec![
            (
                "the model's own (gate noise)",
                Box::new(|_| Box::new(|_| 1.0)),
            ),
            (
                "heavy-tailed nights (Student t, 3 df, 1% scale, every night)",
                Box::new(|seed| {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed);
                    let t = rand_distr::StudentT::<f64>::new(3.0).unwrap();
                    let f: Vec<f64> = (0..60)
                        .map(|_| f64::exp(0.01 * t.sample(&mut rng)))
                        .collect();
                    Box::new(move |n| f[n])
                }),
            ),
            (
                "an outlier night (−8%) just after the step (night 41)",
                Box::new(|_| Box::new(|n| if n == 41 { 0.92 } else { 1.0 })),
            ),
            (
                "an outlier night (−8%) just before the step (night 39)",
                Box::new(|_| Box::new(|n| if n == 39 { 0.92 } else { 1.0 })),
            ),
            (
                "3× the model's drift (0.3%/night random walk in all)",
                Box::new(|seed| {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xd71f);
                    let nd = rand_distr::Normal::new(0.0, 0.002_828).unwrap();
                    let mut walk = 0.0;
                    let f: Vec<f64> = (0..60)
                        .map(|_| {
                            walk += nd.sample(&mut rng);
                            f64::exp(walk)
                        })
                        .collect();
                    Box::new(move |n| f[n])
                }),
            ),
        ];
        for (name, bend) in &cases {
            for kind in [SeriesKind::Matrix, SeriesKind::Cell] {
                let (mut found, mut covered, mut widths) = (0u32, 0u32, Vec::new());
                for seed in 1000..1000 + trials {
                    // A cell's change in that cell alone (whole nights move every cell).
                    let mut runs = changed_history(&NoiseSpec::default(), kind, 60, &step, seed);
                    scale_nights(&mut runs, &*bend(seed));
                    let loc = step_location(&runs, &scope_of(kind, &runs), 40, &settings).unwrap();
                    if let Some((lo, hi)) = loc {
                        found += 1;
                        covered += u32::from((lo..=hi).contains(&40));
                        widths.push((hi - lo + 1) as f64);
                    }
                }
                widths.sort_by(f64::total_cmp);
                eprintln!(
                    "{name}, {kind:?}: found {found}/{trials}, 90% interval holds night 40 in {covered}/{found} ({:.1}%), width median {}",
                    100.0 * f64::from(covered) / f64::from(found.max(1)),
                    quantile(&widths, 0.5)
                );
            }
        }
    }

    /// Over `seeds` at the gate's noise: (stable 60-night matrix histories without any alert,
    /// −0.2%/night creeps from night 45 alerted within 10 nights of the onset, −3% steps at
    /// night 40 whose 90% location interval at night 59 holds night 40).
    fn issue_counts(
        noise: &NoiseSpec,
        settings: &ChangeSettings,
        seeds: std::ops::Range<u64>,
    ) -> [u32; 3] {
        let mut n = [0u32; 3];
        for seed in seeds {
            let stable = nightly_history(noise, 60, &|_| 0.0, seed);
            let a = nightly_alerts(&stable, &Scope::Matrix, 10, settings).unwrap();
            n[0] += u32::from(a.is_empty());
            let creep = |night: usize| step_then_creep(night, 0.0, 0, -0.002, 45);
            let runs = nightly_history(noise, 56, &creep, seed);
            let a = nightly_alerts(&runs, &Scope::Matrix, 10, settings).unwrap();
            n[1] += u32::from(a.iter().any(|x| {
                x.night >= 45 && x.night <= 55 && x.at + settings.min_segment >= 45 && !x.up
            }));
            let step = |night: usize| if night >= 40 { -0.03 } else { 0.0 };
            let runs = nightly_history(noise, 60, &step, seed);
            let loc = step_location(&runs, &Scope::Matrix, 40, settings).unwrap();
            n[2] += u32::from(loc.is_some_and(|(lo, hi)| (lo..=hi).contains(&40)));
        }
        n
    }

    #[test]
    #[ignore = "calibration of creep_z for docs/changes.md: cargo test --release --lib creep_z_calibration -- --ignored --nocapture"]
    #[allow(clippy::print_stderr)] // a measurement run by hand prints its figures
    fn creep_z_calibration() {
        // CREEP_Z="3.0,3.5" CREEP_WINDOW="15,30" SEEDS=80 pick the grid and the seeds 1000..
        let list = |name: &str, default: &str| -> Vec<f64> {
            std::env::var(name)
                .unwrap_or_else(|_| default.into())
                .split(',')
                .filter_map(|v| v.trim().parse().ok())
                .collect()
        };
        let seeds = list("SEEDS", "40").first().map_or(40, |v| *v as u64);
        let noise = match std::env::var("NOISE").as_deref() {
            Ok("quiet") => quiet(),
            Ok("sim") => sim_engine(),
            _ => NoiseSpec::default(),
        };
        for window in list("CREEP_WINDOW", "30") {
            for z in list("CREEP_Z", "2.6,2.8,3.0,3.2") {
                let s = ChangeSettings {
                    creep_z: z,
                    creep_window: window as usize,
                    ..ChangeSettings::default()
                };
                let t = std::time::Instant::now();
                let [silent, creep, cover] = issue_counts(&noise, &s, 1000..1000 + seeds);
                eprintln!(
                    "creep_z {z} window {window}: stable silent {silent}/{seeds}, creep within 10 nights {creep}/{seeds}, step interval covers {cover}/{seeds} ({:.0} s)",
                    t.elapsed().as_secs_f64()
                );
            }
        }
    }

    #[test]
    fn the_creep_and_location_must_show_on_the_quiet_runner() {
        // The issue's must-show where it is reachable (see docs/changes.md: at the gate's
        // 1.1% matrix noise it is not): on the quiet runner, over seeds 1000..1040
        // (`creep_z_calibration`, NOISE=quiet), a −0.2%/night creep was alerted within 10
        // nights in 38/40 (29/40 without the creep test), a stable 60-night history silent in
        // 40/40, the −3% step's 90% interval held night 40 in 40/40; on these ten seeds the
        // creep 7/10 (45/50 in all). "At least 7 of 10" fails with probability about 1.3% at
        // 90%; "at least 9 of 10" under 1% at 40/40.
        let [silent, creep, cover] = issue_counts(&quiet(), &ChangeSettings::default(), 2000..2010);
        assert!(creep >= 7, "creep within 10 nights: {creep}/10");
        assert!(silent >= 9, "stable 60 nights silent: {silent}/10");
        assert!(
            cover >= 9,
            "the step's interval holds its night: {cover}/10"
        );
    }

    #[test]
    fn the_oracle_finds_a_clean_step_then_creep_and_skips_an_outlier_run() {
        let mut logs: Vec<f64> = (0..60)
            .map(|n| step_then_creep(n, -0.03, 40, -0.002, 45).ln_1p())
            .collect();
        logs[20] += (0.92f64).ln();
        assert_eq!(oracle_step_creep(&logs, 3), Some((40, 45)));
        assert_eq!(oracle_step_creep(&logs[..8], 3), None);
    }

    /// A quieter runner than [`NoiseSpec::default`] (0.3% per run, 1% per cell, 0.02%/night
    /// drift, the −8% outlier run kept): the must-show test's design, where the outcome it
    /// asserts is near certain (see `docs/changes.md`; at the default noise the Monte Carlo
    /// states how often it holds).
    fn quiet() -> NoiseSpec {
        NoiseSpec {
            run_cv: 0.003,
            cell_cv: 0.01,
            window_cv: 0.005,
            drift_per_run: 0.0002,
            ..NoiseSpec::default()
        }
    }

    /// The simulated engine's own run-to-run noise, from the bundled baseline
    /// (`baselines/`, 10 runs of 6 cells): 0.16–0.33% per cell and 0.14% matrix-wide. Here
    /// 0.1% per run, 0.2% per cell and 0.2% per sub-window (0.24% per cell, 0.11% on the
    /// matrix series), with the quiet runner's 0.02%/night drift and the −8% outlier run kept.
    fn sim_engine() -> NoiseSpec {
        NoiseSpec {
            run_cv: 0.001,
            cell_cv: 0.002,
            window_cv: 0.002,
            drift_per_run: 0.0002,
            ..NoiseSpec::default()
        }
    }

    /// Over `seeds`: (both within ±2 with one alert each and nothing else, the step alone,
    /// the creep alone, stable histories silent).
    fn must_show_counts(noise: &NoiseSpec, seeds: std::ops::Range<u64>) -> [u32; 4] {
        let mut n = [0u32; 4];
        for seed in seeds {
            let ((s, c, only), stable) = must_show(noise, seed);
            n[0] += u32::from(s && c && only);
            n[1] += u32::from(s);
            n[2] += u32::from(c);
            n[3] += u32::from(stable);
        }
        n
    }

    #[test]
    #[ignore = "measurement for docs/changes.md: cargo test --release --lib must_show_figures -- --ignored --nocapture"]
    #[allow(clippy::print_stderr)] // a measurement run by hand prints its figures
    fn must_show_figures() {
        for (name, noise) in [("quiet", quiet()), ("sim engine", sim_engine())] {
            let n = must_show_counts(&noise, 1000..1040);
            eprintln!(
                "{name}: both {}/40, step {}/40, creep {}/40, stable silent {}/40",
                n[0], n[1], n[2], n[3]
            );
            let s = ChangeSettings::default();
            for seed in 1000..1040u64 {
                let ((a, b, c), _) = must_show(&noise, seed);
                if !(a && b && c) {
                    let effect = |n: usize| step_then_creep(n, -0.03, 40, -0.002, 45);
                    let runs = nightly_history(&noise, 60, &effect, seed);
                    let al = nightly_alerts(&runs, &Scope::Matrix, 10, &s).unwrap();
                    eprintln!("  seed {seed}: {al:?}");
                }
            }
        }
    }

    fn must_show(noise: &NoiseSpec, seed: u64) -> ((bool, bool, bool), bool) {
        let s = ChangeSettings::default();
        let effect = |n: usize| step_then_creep(n, -0.03, 40, -0.002, 45);
        let runs = nightly_history(noise, 60, &effect, seed);
        let a = nightly_alerts(&runs, &Scope::Matrix, 10, &s).unwrap();
        let stable = nightly_history(noise, 60, &|_| 0.0, seed);
        let quiet_ok = nightly_alerts(&stable, &Scope::Matrix, 10, &s)
            .unwrap()
            .is_empty();
        (must_show_trial(&a, 40, 45), quiet_ok)
    }

    #[test]
    fn must_show_step_and_creep_one_alert_each_and_a_stable_history_none() {
        // 60 nights, −3% at night 40 and −0.2%/night from night 45, replayed night by night on
        // the matrix series, ten seeded histories (and ten stable ones) of the quiet design.
        // Measured over 40 other seeds (1000..1040, `must_show_figures`): both within ±2
        // nights with one alert each in 36/40, the step alone 38/40, the creep alone 36/40; no
        // alert on the stable history in 40/40. So "at least 6 of 10" fails with probability
        // about 0.2% at the measured 90%, "at least 7 of 10" steps about 0.2% at 95%, and "at
        // least 9 of 10 stable" under 1% at 40/40. (At the gate's own noise the must-show is
        // not reachable: see `docs/changes.md` and the oracle bound `oracle_step_creep`.)
        let [both, step, _, quiet_ok] = must_show_counts(&quiet(), 2000..2010);
        assert!(both >= 6, "both found within ±2, one alert each: {both}/10");
        assert!(step >= 7, "the step, one alert within ±2: {step}/10");
        assert!(
            quiet_ok >= 9,
            "stable 60 nights without any alert: {quiet_ok}/10"
        );
    }

    #[test]
    fn must_show_on_the_simulated_engines_own_noise() {
        // The same must-show on the noise the simulated engine itself measures (`sim_engine`:
        // 0.11% on the matrix series). Over seeds 1000..1040 (`must_show_figures`): both
        // within ±2 with one alert each and nothing else in 39/40 (36/40 before a creep had to
        // agree with the levels: an outlier run just after the step made a creep upward), no
        // alert on the stable history in 40/40. "At least 8 of 10" fails with probability
        // about 0.2% at 97.5%.
        let [both, _, _, stable] = must_show_counts(&sim_engine(), 2000..2010);
        assert!(both >= 8, "both found within ±2, one alert each: {both}/10");
        assert!(
            stable >= 9,
            "stable 60 nights without any alert: {stable}/10"
        );
    }

    #[test]
    fn at_the_gates_own_noise_a_stable_history_is_mostly_silent() {
        // The gate's noise model (1% run factor, 2% per cell, 0.1%/night drift, a −8% run in
        // 20): over seeds 1000..1040 a stable 60-night history raised no alert in 38/40 and
        // the must-show step was one step alert within ±2 in 17/40. "At least 7 of 10" silent
        // fails with probability about 0.1% at 95%; "at least 1 of 10" steps 0.4% at 42.5%.
        let [_, step, _, quiet_ok] = must_show_counts(&NoiseSpec::default(), 2000..2010);
        assert!(quiet_ok >= 7, "stable 60 nights silent: {quiet_ok}/10");
        assert!(step >= 1, "the step, one alert within ±2: {step}/10");
    }
}
