//! The rules users know, decided on `stats-eval`'s own trials (the same histories and candidate
//! boots the gate decides), so the harness says where a simpler rule wins.
//!
//! Each rule is a score per unit (a cell, or the matrix mean) of one boot's tok/s against the
//! history's, and alarms when a score exceeds a threshold: Bencher's `t_test` and `z_score`
//! (`bencher_boundary`), github-action-benchmark's ratio against the previous run, Perfherder's
//! t-test with its 2% floor. Each is measured at its documented defaults (one boot) and moved to
//! the gate's own A/A false-alarm rate with the gate's budget: a second boot only when the first
//! alarms, a regression when the same unit crosses the threshold again. The constants and the
//! source lines they were read from are in docs/statistics.md ("Peers").

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

use infergate_model::stats::build::{mean, sd};
use infergate_model::stats::interval::t_quantile;

/// Bencher's default boundary of its `t_test` threshold (`Boundary::NINETY_NINE`), also the one
/// its docs use for `z_score`.
pub(crate) const BENCHER_BOUNDARY: f64 = 0.99;
/// Bencher's default `max_sample_size`: the newest 64 values of the history.
pub(crate) const BENCHER_MAX_SAMPLE_SIZE: usize = 64;
/// github-action-benchmark's default `alert-threshold` (`'200%'`).
pub(crate) const GAB_DEFAULT_THRESHOLD: f64 = 2.0;
/// A tighter `alert-threshold` users set (`'110%'`).
pub(crate) const GAB_TIGHT_THRESHOLD: f64 = 1.1;
/// Perfherder's `t_threshold` (`detect_changes`).
pub(crate) const PERFHERDER_T: f64 = 7.0;
/// Perfherder's `PERFHERDER_REGRESSION_THRESHOLD` (2%): smaller changes are not alerted.
pub(crate) const PERFHERDER_MIN_CHANGE: f64 = 0.02;
/// Perfherder's `min_back_window`: fewer history values, no verdict.
pub(crate) const PERFHERDER_MIN_BACK: usize = 12;
/// Perfherder's `max_back_window`: the newest 24 history values.
pub(crate) const PERFHERDER_MAX_BACK: usize = 24;

/// Bencher's score of a new value `x` (higher is better): how many sample SDs (n − 1, Bessel's
/// correction) it lies below the mean of the newest [`BENCHER_MAX_SAMPLE_SIZE`] values of
/// `history` (oldest first). Its lower boundary limit is `mean − k·sd`, and it alarms when
/// `x` is below it, i.e. when the score exceeds `k`. `None` where Bencher computes no limit:
/// fewer than two values or no spread.
pub(crate) fn bencher_score(history: &[f64], x: f64) -> Option<f64> {
    let h = &history[history.len().saturating_sub(BENCHER_MAX_SAMPLE_SIZE)..];
    let s = sd(h);
    (h.len() >= 2 && s > 0.0 && s.is_finite()).then(|| (mean(h) - x) / s)
}

/// `t_test`'s `k` for `n` history values at `boundary`: the Student t quantile with n − 1 df,
/// times `√(1 + 1/n)` (a prediction interval for a new value).
pub(crate) fn bencher_t_k(n: usize, boundary: f64) -> f64 {
    let n = n.min(BENCHER_MAX_SAMPLE_SIZE) as f64;
    t_quantile(boundary, n - 1.0) * (1.0 + 1.0 / n).sqrt()
}

/// `z_score`'s `k` at `boundary`: the standard normal quantile.
pub(crate) fn bencher_z_k(boundary: f64) -> f64 {
    Normal::standard().inverse_cdf(boundary)
}

/// github-action-benchmark's ratio for a bigger-is-better benchmark: the previous run's value
/// over the current one (1 when both are 0); it alerts when the ratio exceeds the threshold.
pub(crate) fn ratio_score(prev: f64, x: f64) -> f64 {
    if prev == 0.0 && x == 0.0 {
        1.0
    } else {
        prev / x
    }
}

/// Perfherder's `|t|` of a new value `x` (higher is better) against `history` (oldest first),
/// where it would alert: `None` with fewer than [`PERFHERDER_MIN_BACK`] history values, for a
/// change toward faster, or for one smaller than [`PERFHERDER_MIN_CHANGE`] of the history's
/// mean. The back window is the newest [`PERFHERDER_MAX_BACK`] values, weighted linearly (the
/// newest 1, the oldest 1/n) for the t; the fore window is the boot alone (one value: its
/// variance counts 0), so `t = (x − weighted mean) / √(s²/n)`, `s²` around the weighted mean
/// over n − 1. The change is against the unweighted mean.
pub(crate) fn perfherder_score(history: &[f64], x: f64) -> Option<f64> {
    let back: Vec<f64> = history
        .iter()
        .rev()
        .take(PERFHERDER_MAX_BACK)
        .copied()
        .collect();
    if back.len() < PERFHERDER_MIN_BACK {
        return None;
    }
    let n = back.len() as f64;
    let weights = (0..back.len()).map(|i| (n - i as f64) / n);
    let weighted = back
        .iter()
        .zip(weights.clone())
        .map(|(v, w)| v * w)
        .sum::<f64>()
        / weights.sum::<f64>();
    let s2 = back.iter().map(|v| (v - weighted).powi(2)).sum::<f64>() / (n - 1.0);
    let delta = x - weighted;
    let t = if delta == 0.0 {
        0.0
    } else if s2 == 0.0 {
        f64::INFINITY
    } else {
        (delta / (s2 / n).sqrt()).abs()
    };
    let prev = mean(&back);
    let regression = x < prev;
    let change = (x - prev).abs() / prev;
    (regression && change >= PERFHERDER_MIN_CHANGE).then_some(t)
}

/// A family of peer rules: one way of scoring a boot, several thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Bencher's `t_test` / `z_score` on every cell (the same score, two boundaries).
    BencherCell,
    /// Bencher's `t_test` / `z_score` on the mean of the cells' tok/s (one benchmark).
    BencherMean,
    /// github-action-benchmark: every cell against the previous run.
    Ratio,
    /// Perfherder's t-test on every cell.
    Perfherder,
}

impl Family {
    pub(crate) const ALL: [Family; 4] = [
        Family::BencherCell,
        Family::BencherMean,
        Family::Ratio,
        Family::Perfherder,
    ];

    /// The family's short name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Family::BencherCell => "Bencher, cell",
            Family::BencherMean => "Bencher, mean",
            Family::Ratio => "github-action-benchmark",
            Family::Perfherder => "Perfherder",
        }
    }

    /// The documented defaults, `(setting, threshold)`, for a history of `n` runs.
    pub(crate) fn defaults(self, n: usize) -> Vec<(String, f64)> {
        let sds = |test: &str, k: f64| (format!("{test} {BENCHER_BOUNDARY}: {k:.2} sd"), k);
        match self {
            Family::BencherCell | Family::BencherMean => vec![
                sds("t_test", bencher_t_k(n, BENCHER_BOUNDARY)),
                sds("z_score", bencher_z_k(BENCHER_BOUNDARY)),
            ],
            Family::Ratio => [GAB_DEFAULT_THRESHOLD, GAB_TIGHT_THRESHOLD]
                .map(|k| (format!("{:.0}%", 100.0 * k), k))
                .to_vec(),
            Family::Perfherder => vec![(
                format!(
                    "t > {PERFHERDER_T}, >= {:.0}%",
                    100.0 * PERFHERDER_MIN_CHANGE
                ),
                PERFHERDER_T,
            )],
        }
    }

    /// A threshold in the rule's units (and a confirming one after `/`), as the report prints
    /// it: `3.23 / 1.04 sd`, `107.1 / 110.0%`, `t 14.4 / 4.7`.
    pub fn show(self, threshold: f64, confirm: Option<f64>) -> String {
        let (scale, digits, lead, unit) = match self {
            Family::BencherCell | Family::BencherMean => (1.0, 2, "", " sd"),
            Family::Ratio => (100.0, 1, "", "%"),
            Family::Perfherder => (1.0, 1, "t ", ""),
        };
        let second = confirm.map_or_else(String::new, |k| format!(" / {:.digits$}", scale * k));
        format!("{lead}{:.digits$}{second}{unit}", scale * threshold)
    }

    /// The scores of one `boot` (tok/s per cell) against `history` (runs oldest first, tok/s
    /// per cell), one per unit; `-∞` where the rule cannot alarm.
    pub(crate) fn scores(self, history: &[Vec<f64>], boot: &[f64]) -> Vec<f64> {
        let column = |i: usize| history.iter().map(|r| r[i]).collect::<Vec<f64>>();
        let none = f64::NEG_INFINITY;
        match self {
            Family::BencherCell => (0..boot.len())
                .map(|i| bencher_score(&column(i), boot[i]).unwrap_or(none))
                .collect(),
            Family::BencherMean => {
                let means: Vec<f64> = history.iter().map(|r| mean(r)).collect();
                vec![bencher_score(&means, mean(boot)).unwrap_or(none)]
            }
            Family::Ratio => match history.last() {
                Some(prev) => boot
                    .iter()
                    .zip(prev)
                    .map(|(x, p)| ratio_score(*p, *x))
                    .collect(),
                None => vec![none; boot.len()],
            },
            Family::Perfherder => (0..boot.len())
                .map(|i| perfherder_score(&column(i), boot[i]).unwrap_or(none))
                .collect(),
        }
    }
}

/// What one rule family saw in one trial: the first boot's largest score (the first look alarms
/// above the threshold) and, with a second boot, the largest over units of the smaller of the
/// two boots' scores (the same unit crosses again).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Look {
    pub(crate) first: f64,
    pub(crate) confirmed: f64,
}

impl Look {
    /// The look of `first` and, when booted, `second` (scores per unit, same order).
    pub(crate) fn of(first: &[f64], second: Option<&[f64]>) -> Look {
        let max = |v: &mut dyn Iterator<Item = f64>| v.fold(f64::NEG_INFINITY, f64::max);
        Look {
            first: max(&mut first.iter().copied()),
            confirmed: match second {
                Some(s) => max(&mut first.iter().zip(s).map(|(a, b)| a.min(*b))),
                None => max(&mut first.iter().copied()),
            },
        }
    }
}

/// The threshold at which at most `alarms` of the A/A trials' confirmed scores `aa` lie above
/// it: the `(alarms + 1)`-th largest (`-∞` when every trial may alarm).
pub(crate) fn calibrate(aa: &[f64], alarms: usize) -> f64 {
    let mut sorted = aa.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    sorted.get(alarms).copied().unwrap_or(f64::NEG_INFINITY)
}

/// The setting of a rule moved to the gate's A/A rate with the gate's second-boot budget.
pub const GATE_AA_RATE: &str = "gate_aa_rate";

/// One rule's rates over a runner's trials.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerOutcome {
    pub family: Family,
    pub rule: &'static str,
    /// The documented default, or [`GATE_AA_RATE`] (moved to the gate's A/A rate, second boot).
    pub setting: String,
    /// The first boot alarms above this, in the rule's units: Bencher SDs,
    /// github-action-benchmark's ratio, Perfherder's t.
    pub threshold: f64,
    /// With a second boot: the regression needs the same unit above this on both boots.
    pub confirm_threshold: Option<f64>,
    /// Per scenario (in `stats-eval`'s order): the share of trials that alarmed, its Wilson
    /// 95% interval, and boots per trial.
    pub scenarios: Vec<PeerRate>,
}

/// One rule on one scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerRate {
    pub name: String,
    pub alarm_rate: f64,
    pub wilson_low: f64,
    pub(crate) wilson_high: f64,
    pub mean_boots: f64,
}

/// What the gate spent on a runner's A/A trials: its regressions and, with the two-boot plan,
/// the gates that booted twice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct GateBudget {
    pub(crate) alarms: usize,
    pub(crate) second_boots: Option<usize>,
}

/// The thresholds at which a rule's A/A looks spend `gate`'s budget: the first look alarms in as
/// many A/A trials as the gate booted twice, and of those, the second look confirms as many as
/// the gate's regressions. Without a second boot, one threshold at the gate's regressions.
pub(crate) fn calibrate_to(aa: &[Look], gate: GateBudget) -> (f64, Option<f64>) {
    let first: Vec<f64> = aa.iter().map(|l| l.first).collect();
    let Some(twice) = gate.second_boots else {
        return (calibrate(&first, gate.alarms), None);
    };
    let k1 = calibrate(&first, twice);
    let confirmed: Vec<f64> = aa
        .iter()
        .filter(|l| l.first > k1)
        .map(|l| l.confirmed)
        .collect();
    (k1, Some(calibrate(&confirmed, gate.alarms)))
}

/// Every rule's outcome from its looks, `looks[scenario][trial]` (the A/A scenario at `aa`):
/// the family's defaults for a history of `n` runs, then moved to the gate's budget `gate`.
pub(crate) fn outcomes(
    family: Family,
    looks: &[Vec<Look>],
    names: &[String],
    aa: usize,
    gate: GateBudget,
    n: usize,
) -> Vec<PeerOutcome> {
    let row = |setting: String, k1: f64, k2: Option<f64>| PeerOutcome {
        family,
        rule: family.name(),
        setting,
        threshold: k1,
        confirm_threshold: k2,
        scenarios: looks
            .iter()
            .zip(names)
            .map(|(l, name)| {
                let trials = l.len().max(1) as f64;
                let share =
                    |f: &dyn Fn(&Look) -> bool| l.iter().filter(|x| f(x)).count() as f64 / trials;
                let alarm_rate = share(&|x| x.first > k1 && k2.is_none_or(|k| x.confirmed > k));
                let (wilson_low, wilson_high) = crate::eval::gate::wilson(alarm_rate, trials);
                PeerRate {
                    name: name.clone(),
                    alarm_rate,
                    wilson_low,
                    wilson_high,
                    mean_boots: 1.0 + share(&|x| k2.is_some() && x.first > k1),
                }
            })
            .collect(),
    };
    let mut out: Vec<PeerOutcome> = family
        .defaults(n)
        .into_iter()
        .map(|(setting, k)| row(setting, k, None))
        .collect();
    let (k1, k2) = calibrate_to(&looks[aa], gate);
    out.push(row(GATE_AA_RATE.into(), k1, k2));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bencher's own worked examples (its docs, thresholds/en/test/t-test.mdx and
    /// z-score.mdx): 25 values of mean 100 and sample SD 10, lower boundary 0.977: the limit is
    /// 78.54 for `t_test` and 80.05 for `z_score`; at 0.99 with 20 values `t_test`'s k is
    /// t(0.99, 19) = 2.539 times √1.05.
    #[test]
    fn bencher_boundaries_are_its_documented_limits() {
        assert!((100.0 - 10.0 * bencher_t_k(25, 0.977) - 78.54).abs() < 0.005);
        assert!((100.0 - 10.0 * bencher_z_k(0.977) - 80.05).abs() < 0.005);
        assert!((bencher_t_k(20, 0.99) - 2.539_483 * 1.05_f64.sqrt()).abs() < 1e-4);
        assert!((bencher_z_k(0.99) - 2.326_348).abs() < 1e-5);
    }

    /// The score is in sample SDs (n − 1) below the mean: 1, 2, 3 have mean 2 and SD 1, so 0.5
    /// is 1.5 SDs below; no spread or one value, no limit; only the newest 64 values count.
    #[test]
    fn bencher_score_is_sample_sds_below_the_mean() {
        assert_eq!(bencher_score(&[1.0, 2.0, 3.0], 0.5), Some(1.5));
        assert_eq!(bencher_score(&[2.0, 2.0], 1.0), None);
        assert_eq!(bencher_score(&[2.0], 1.0), None);
        let mut long = vec![1000.0; 10];
        long.extend([1.0, 2.0, 3.0].repeat(22)[..64].iter().copied());
        let recent = &long[long.len() - 64..];
        assert_eq!(bencher_score(&long, 0.5), bencher_score(recent, 0.5));
        // At k = 1.5 the limit is 0.5 itself: Bencher alarms only strictly below it.
        let k = 1.5;
        assert!(bencher_score(&[1.0, 2.0, 3.0], 0.5).unwrap() <= k);
        assert!(bencher_score(&[1.0, 2.0, 3.0], 0.499).unwrap() > k);
    }

    /// github-action-benchmark's bigger-is-better ratio is previous over current: 100 tok/s
    /// after 200 is 2.0, which does not exceed the default 200% (it alerts above it); 90 after
    /// 100 is 1.111, over 110%.
    #[test]
    fn the_ratio_is_previous_over_current() {
        assert_eq!(ratio_score(200.0, 100.0), 2.0);
        assert!(ratio_score(200.0, 100.0) <= GAB_DEFAULT_THRESHOLD);
        assert!(ratio_score(200.0, 99.9) > GAB_DEFAULT_THRESHOLD);
        assert!(ratio_score(100.0, 90.0) > GAB_TIGHT_THRESHOLD);
        assert!(ratio_score(100.0, 91.0) <= GAB_TIGHT_THRESHOLD);
        assert_eq!(ratio_score(0.0, 0.0), 1.0);
    }

    /// Perfherder by hand: twelve values alternating 99 and 101, the newest 101 (weights 12/12,
    /// 11/12, …, 1/12: the 101s weigh 42/12 and the 99s 36/12, weighted mean 100 + 6/78),
    /// `s² = Σ(v − m_w)²/11`; a new 97 is 3% below the plain mean 100 and alerts when `|t|`
    /// passes 7. A 98.1 (1.9%) never alerts, nor does a faster value, nor 11 history values.
    #[test]
    fn perfherder_matches_its_t_by_hand() {
        let history: Vec<f64> = (0..12)
            .map(|i| if i % 2 == 0 { 99.0 } else { 101.0 })
            .collect();
        let m_w = 100.0 + 6.0 / 78.0;
        let s2 = history.iter().map(|v| (v - m_w).powi(2)).sum::<f64>() / 11.0;
        let t = (97.0 - m_w).abs() / (s2 / 12.0).sqrt();
        let got = perfherder_score(&history, 97.0).unwrap();
        assert!((got - t).abs() < 1e-9, "{got} vs {t}");
        assert!(got > PERFHERDER_T);
        assert_eq!(perfherder_score(&history, 98.1), None);
        assert_eq!(perfherder_score(&history, 104.0), None);
        assert_eq!(perfherder_score(&history[1..], 90.0), None);
        // Only the newest 24 values form the back window.
        let mut long = vec![1.0; 30];
        long.extend(history.repeat(2));
        assert_eq!(
            perfherder_score(&long, 97.0),
            perfherder_score(&history.repeat(2), 97.0)
        );
    }

    /// A look confirms a unit only where both boots cross; the threshold lets exactly the
    /// allowed number of A/A trials alarm, ties included.
    #[test]
    fn looks_confirm_the_same_unit_and_calibrate_to_a_count() {
        let look = Look::of(&[3.0, 0.0], Some(&[0.0, 3.0]));
        assert_eq!(look.first, 3.0);
        assert_eq!(look.confirmed, 0.0);
        assert_eq!(Look::of(&[3.0, 1.0], Some(&[2.0, 5.0])).confirmed, 2.0);
        assert_eq!(Look::of(&[3.0, 1.0], None).confirmed, 3.0);
        let aa = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(calibrate(&aa, 0), 5.0);
        assert_eq!(calibrate(&aa, 2), 3.0);
        assert_eq!(aa.iter().filter(|&&x| x > calibrate(&aa, 2)).count(), 2);
        assert_eq!(calibrate(&aa, 5), f64::NEG_INFINITY);
    }

    /// The gate's budget: of four A/A trials the gate booted two twice and alarmed once, so the
    /// first look's threshold lets the two largest first scores through, and the second look's
    /// lets one of their confirmed scores through.
    #[test]
    fn calibration_spends_the_gates_budget() {
        let look = |first, confirmed| Look { first, confirmed };
        let aa = [
            look(4.0, 1.0),
            look(3.0, 2.5),
            look(2.0, 2.0),
            look(1.0, 1.0),
        ];
        let gate = GateBudget {
            alarms: 1,
            second_boots: Some(2),
        };
        assert_eq!(calibrate_to(&aa, gate), (2.0, Some(1.0)));
        let one_look = GateBudget {
            alarms: 1,
            second_boots: None,
        };
        assert_eq!(calibrate_to(&aa, one_look), (3.0, None));
        let names = ["aa".to_string()];
        let out = outcomes(Family::Ratio, &[aa.to_vec()], &names, 0, gate, 20);
        let moved = out.last().unwrap();
        assert_eq!(moved.setting, GATE_AA_RATE);
        assert_eq!(moved.scenarios[0].alarm_rate, 0.25);
        assert_eq!(moved.scenarios[0].mean_boots, 1.5);
    }

    /// The matrix-mean family scores one unit, the per-cell ones one per cell; a runner whose
    /// history has no spread gives Bencher no limit (`-∞`, never an alarm).
    #[test]
    fn families_score_their_units() {
        let history = vec![vec![100.0, 50.0], vec![102.0, 52.0], vec![98.0, 48.0]];
        let boot = [90.0, 50.0];
        let cell = Family::BencherCell.scores(&history, &boot);
        assert_eq!(cell, vec![5.0, 0.0]);
        let matrix = Family::BencherMean.scores(&history, &boot);
        assert_eq!(matrix, vec![(75.0 - 70.0) / 2.0]);
        let ratio = Family::Ratio.scores(&history, &boot);
        assert_eq!(ratio, vec![98.0 / 90.0, 48.0 / 50.0]);
        let flat = vec![vec![1.0]; 3];
        assert_eq!(
            Family::BencherCell.scores(&flat, &[0.5]),
            vec![f64::NEG_INFINITY]
        );
    }
}
