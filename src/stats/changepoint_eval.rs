//! Monte Carlo of the change-point search as a nightly uses it (`infergate changes-eval`).
//!
//! Each trial draws a nightly history of the synthetic 20-cell profile with the gate's runner
//! noise ([`NoiseSpec`]: run and cell terms, slow drift, one outlier run in 20) and replays it
//! night by night: every night the real [`analyse_series`] runs over the history so far and a
//! change point not within `min_segment` runs of one already alerted is a new alert. Measured:
//! false alerts per 100 nights of a stable series; for a step and for creeps, the share found,
//! the detection delay (nights after the onset until the alert) and the location error.

use serde::{Deserialize, Serialize};

use crate::results::RunResults;
use crate::verdict::Metric;

use super::StatsError;
use super::changepoint::{ChangeSettings, Scope, analyse_series};
use super::eval::{NoiseSpec, nightly_history};

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChangeEvalConfig {
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
            settings: ChangeSettings::default(),
            noise: NoiseSpec::default(),
        }
    }
}

/// Which series of the matrix a figure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SeriesKind {
    /// The matrix-wide series (mean over 20 cells).
    Matrix,
    /// One cell (C=1, 8k).
    Cell,
}

/// False alerts on a stable history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct StableOutcome {
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
pub(crate) struct ShiftOutcome {
    /// `step_-3%` or `creep_-0.3%/night`.
    pub scenario: String,
    pub series: SeriesKind,
    pub onset: usize,
    /// Share of trials alerted within `follow` nights of the onset.
    pub detected: f64,
    /// Nights after the onset until the alert (0 = the night of the first changed run), over
    /// detected trials: median, 90th percentile, mean.
    pub delay_median: f64,
    pub delay_p90: f64,
    pub delay_mean: f64,
    /// Mean absolute error of the alerted location, nights.
    pub location_mae: f64,
    /// Share of detected trials located within ±2 nights.
    pub within_2: f64,
    /// Mean alerts from the onset to the end of the follow window (1 = one alert per change).
    pub alerts_after_onset: f64,
    /// False alerts per 100 nights before the onset.
    pub false_before_per_100: f64,
}

/// The evaluation's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChangeEvalReport {
    pub config: ChangeEvalConfig,
    pub stable: Vec<StableOutcome>,
    pub shifts: Vec<ShiftOutcome>,
}

/// Nightly alerts of one series over `runs`: (night, run position of the change) each time a
/// change point appears that is not within `tolerance` runs of one alerted before.
pub(crate) fn nightly_alerts(
    runs: &[RunResults],
    scope: &Scope,
    warmup: usize,
    settings: &ChangeSettings,
) -> Result<Vec<(usize, usize)>, StatsError> {
    let mut alerted: Vec<(usize, usize)> = Vec::new();
    for night in warmup.max(1)..runs.len() {
        let s = analyse_series(
            &runs[..=night],
            scope.clone(),
            Metric::AggregateTps,
            settings,
        )?;
        for c in &s.changes {
            let at = s.runs[c.index];
            if is_new_alert(at, alerted.iter().map(|a| a.1), settings.min_segment) {
                alerted.push((night, at));
            }
        }
    }
    Ok(alerted)
}

/// Whether a change point at run position `at` is new: no alert already names a run within
/// `tolerance` of it (a change's location wanders by a run or two as nights are added).
pub(crate) fn is_new_alert(
    at: usize,
    alerted: impl IntoIterator<Item = usize>,
    tolerance: usize,
) -> bool {
    alerted.into_iter().all(|a| a.abs_diff(at) > tolerance)
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

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// The relative change of every cell at a night.
type Effect = Box<dyn Fn(usize) -> f64>;

/// Runs the Monte Carlo.
pub(crate) fn run_change_eval(cfg: &ChangeEvalConfig) -> Result<ChangeEvalReport, StatsError> {
    cfg.settings.validate()?;
    if cfg.warmup >= cfg.stable_nights || cfg.step_at <= cfg.warmup || cfg.creep_at <= cfg.warmup {
        return Err(StatsError::InvalidRule(
            "changes-eval: warmup must be shorter than the stable history and end before the onsets".into(),
        ));
    }
    let kinds = [SeriesKind::Matrix, SeriesKind::Cell];
    let trial_seed = |t: usize| cfg.seed.wrapping_add((t as u64).wrapping_mul(0x9e37_79b9));
    let mut stable = Vec::new();
    for kind in kinds {
        let (mut alerts, mut with_alert, mut per_trial) = (0.0, 0.0, Vec::new());
        for t in 0..cfg.trials {
            let runs = nightly_history(&cfg.noise, cfg.stable_nights, &|_| 0.0, trial_seed(t));
            let a = nightly_alerts(&runs, &scope_of(kind, &runs), cfg.warmup, &cfg.settings)?;
            alerts += a.len() as f64;
            with_alert += f64::from(u8::from(!a.is_empty()));
            per_trial.push(a.len() as f64);
        }
        let nights = (cfg.stable_nights - cfg.warmup) as f64;
        let trials = cfg.trials.max(1) as f64;
        let mean = alerts / trials;
        let var =
            per_trial.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (trials - 1.0).max(1.0);
        stable.push(StableOutcome {
            series: kind,
            false_per_100_nights: mean / nights * 100.0,
            std_error: (var / trials).sqrt() / nights * 100.0,
            histories_with_alert: with_alert / trials,
        });
    }
    let mut scenarios: Vec<(String, usize, Effect)> = Vec::new();
    let (step, step_at) = (cfg.step, cfg.step_at);
    scenarios.push((
        format!("step_{:+}%", step * 100.0),
        step_at,
        Box::new(move |n| if n >= step_at { step } else { 0.0 }),
    ));
    for &creep in &cfg.creeps {
        let at = cfg.creep_at;
        scenarios.push((
            format!("creep_{:+}%/night", creep * 100.0),
            at,
            Box::new(move |n| {
                if n >= at {
                    (creep.ln_1p() * (n - at + 1) as f64).exp_m1()
                } else {
                    0.0
                }
            }),
        ));
    }
    let mut shifts = Vec::new();
    for (name, onset, effect) in &scenarios {
        for kind in kinds {
            let (mut delays, mut errors, mut after, mut before) =
                (Vec::new(), Vec::new(), 0.0, 0.0);
            for t in 0..cfg.trials {
                let runs = nightly_history(&cfg.noise, onset + cfg.follow, effect, trial_seed(t));
                let a = nightly_alerts(&runs, &scope_of(kind, &runs), cfg.warmup, &cfg.settings)?;
                before += a.iter().filter(|x| x.0 < *onset).count() as f64;
                after += a.iter().filter(|x| x.0 >= *onset).count() as f64;
                if let Some(&(night, at)) = a
                    .iter()
                    .find(|x| x.0 >= *onset && x.1 + cfg.settings.min_segment >= *onset)
                {
                    delays.push((night - onset) as f64);
                    errors.push(at as f64 - *onset as f64);
                }
            }
            let trials = cfg.trials.max(1) as f64;
            let found = delays.len().max(1) as f64;
            delays.sort_by(f64::total_cmp);
            shifts.push(ShiftOutcome {
                scenario: name.clone(),
                series: kind,
                onset: *onset,
                detected: delays.len() as f64 / trials,
                delay_median: quantile(&delays, 0.5),
                delay_p90: quantile(&delays, 0.9),
                delay_mean: delays.iter().sum::<f64>() / found,
                location_mae: errors.iter().map(|e| e.abs()).sum::<f64>() / found,
                within_2: errors.iter().filter(|e| e.abs() <= 2.0).count() as f64 / found,
                alerts_after_onset: after / trials,
                false_before_per_100: before / trials / (onset - cfg.warmup) as f64 * 100.0,
            });
        }
    }
    Ok(ChangeEvalReport {
        config: cfg.clone(),
        stable,
        shifts,
    })
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
        assert!(is_new_alert(10, [3, 20], 3));
        assert!(!is_new_alert(10, [8], 3));
    }
}
