//! Change points in a baseline store's history: where a cell's (or the whole matrix's) level
//! moved, by how much, and between which runs (so between which commits).
//!
//! The method is binary segmentation with a rank statistic and a permutation test (see
//! `docs/statistics.md`, "Change points"): in a segment of `m` runs the split `t` is scored by
//! the standardised Mann–Whitney statistic of "before t" against "from t" (ranks, so one outlier
//! run moves the score by at most one rank), the best split's score is compared with the same
//! maximum over seeded random permutations of the segment, and a split with a permutation
//! p-value at most `alpha` is kept and both halves are searched again. Under a stable series
//! the first test fails with probability at most `alpha`, so one night's analysis of one
//! series reports a false change point with probability at most `alpha` (measured with
//! `infergate changes-eval`). Each change is sized by the Hodges–Lehmann shift of the logs
//! between its neighbouring segments, with the distribution-free interval from the
//! Mann–Whitney order statistics.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use crate::results::{CellStatus, RunResults};
use crate::verdict::{Direction, Metric};

use super::StatsError;
use super::compare::metric_value;
use super::noise::median;

/// Parameters of the change-point search. The defaults are the measured ones in
/// `docs/statistics.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct ChangeSettings {
    /// Level of each permutation test: the chance that one analysis of one stable series
    /// reports a change point.
    pub alpha: f64,
    /// Random permutations per test (the p-value's resolution is `1 / (permutations + 1)`).
    pub permutations: usize,
    /// Fewest runs on each side of a change point: fewer cannot tell a step from outlier runs.
    pub min_segment: usize,
    /// Smallest relative change reported (a significant but tinier shift is not an alert).
    pub min_effect: f64,
    /// Confidence level of the change's interval.
    pub confidence: f64,
    /// Seed of the permutations (same store, same seed, same answer).
    pub seed: u64,
}

impl Default for ChangeSettings {
    fn default() -> Self {
        ChangeSettings {
            alpha: 0.005,
            permutations: 999,
            min_segment: 3,
            min_effect: 0.01,
            confidence: 0.90,
            seed: 0x0c4a_9e17,
        }
    }
}

impl ChangeSettings {
    /// Checks the parameters are in range; the error names the field and the valid range.
    pub(crate) fn validate(&self) -> Result<(), StatsError> {
        let bad = |msg: String| Err(StatsError::InvalidRule(msg));
        if !(self.alpha > 0.0 && self.alpha < 0.5) {
            return bad(format!("change alpha = {} must be in (0, 0.5)", self.alpha));
        }
        if ((self.permutations + 1) as f64) * self.alpha < 1.0 {
            return bad(format!(
                "permutations = {} cannot reach alpha = {}: use at least {}",
                self.permutations,
                self.alpha,
                (1.0 / self.alpha).ceil() as usize
            ));
        }
        if self.min_segment < 2 {
            return bad(format!(
                "min_segment = {} must be at least 2",
                self.min_segment
            ));
        }
        if !(self.min_effect.is_finite() && (0.0..1.0).contains(&self.min_effect)) {
            return bad(format!(
                "change min_effect = {} must be in [0, 1)",
                self.min_effect
            ));
        }
        if !(self.confidence > 0.5 && self.confidence < 1.0) {
            return bad(format!(
                "change confidence = {} must be in (0.5, 1)",
                self.confidence
            ));
        }
        Ok(())
    }
}

/// One change point of one series (indices are positions in the series).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SeriesChange {
    /// Position of the first value after the change.
    pub index: usize,
    /// Permutation p-value of the split that found it.
    pub p_value: f64,
    /// Relative change from the segment before to the segment after (negative = worse).
    pub change: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Values in the neighbouring segments the change is sized on.
    pub before: usize,
    pub after: usize,
}

/// A stretch of a series between change points and its level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Segment {
    /// Positions `start..end` in the series.
    pub start: usize,
    pub end: usize,
    /// Median of the segment's values (the series' unit).
    pub level: f64,
    /// Robust band: level × exp(±2 × 1.4826 × MAD of the logs).
    pub band_low: f64,
    pub band_high: f64,
}

/// Change points of a series of log values (better = larger; pass `-ln` for latencies),
/// oldest first. Values must be finite. Deterministic for a given `settings.seed`.
pub(crate) fn detect(
    logs: &[f64],
    settings: &ChangeSettings,
) -> Result<Vec<SeriesChange>, StatsError> {
    settings.validate()?;
    if logs.iter().any(|v| !v.is_finite()) {
        return Err(StatsError::InvalidRule(
            "change-point series holds a value that is not finite".into(),
        ));
    }
    let mut found = Vec::new();
    split(logs, 0, logs.len(), settings, &mut found);
    found.sort_by_key(|f| f.0);
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(found.iter().map(|f| f.0))
        .chain(std::iter::once(logs.len()))
        .collect();
    let z = normal_quantile(0.5 + settings.confidence / 2.0);
    let mut out = Vec::new();
    for (k, &(index, p_value)) in found.iter().enumerate() {
        let before = &logs[bounds[k]..index];
        let after = &logs[index..bounds[k + 2]];
        let (shift, lo, hi) = hodges_lehmann(before, after, z);
        let change = shift.exp_m1();
        if change.abs() < settings.min_effect {
            continue;
        }
        out.push(SeriesChange {
            index,
            p_value,
            change,
            ci_low: lo.exp_m1(),
            ci_high: hi.exp_m1(),
            before: before.len(),
            after: after.len(),
        });
    }
    Ok(out)
}

/// The segments between `changes` of a series of positive values, each with its level and band.
pub(crate) fn segments(values: &[f64], changes: &[SeriesChange]) -> Vec<Segment> {
    let mut bounds: Vec<usize> = vec![0];
    bounds.extend(changes.iter().map(|c| c.index));
    bounds.push(values.len());
    bounds
        .windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| {
            let mut logs: Vec<f64> = values[w[0]..w[1]].iter().map(|v| v.ln()).collect();
            let centre = median(&mut logs.clone());
            let mut dev: Vec<f64> = logs.iter_mut().map(|l| (*l - centre).abs()).collect();
            let spread = if dev.len() >= 2 {
                2.0 * 1.4826 * median(&mut dev)
            } else {
                0.0
            };
            Segment {
                start: w[0],
                end: w[1],
                level: centre.exp(),
                band_low: (centre - spread).exp(),
                band_high: (centre + spread).exp(),
            }
        })
        .collect()
}

/// Binary segmentation of `logs[a..b]`: pushes (index, p-value) of each significant split.
fn split(logs: &[f64], a: usize, b: usize, s: &ChangeSettings, out: &mut Vec<(usize, f64)>) {
    let m = b - a;
    if m < 2 * s.min_segment {
        return;
    }
    let centred = centred_ranks(&logs[a..b]);
    let Some((t, observed)) = best_split(&centred, s.min_segment) else {
        return;
    };
    // One stream per segment: the answer does not depend on the order segments are searched.
    let seed = s.seed ^ (a as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((b as u64) << 32);
    let Some(p) = permutation_p(&centred, observed, s, seed) else {
        return;
    };
    out.push((a + t, p));
    split(logs, a, a + t, s, out);
    split(logs, a + t, b, s, out);
}

/// Ranks (ties averaged) minus their mean.
fn centred_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&i, &j| x[i].total_cmp(&x[j]));
    let mut ranks = vec![0.0; x.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && x[order[j + 1]] == x[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = avg;
        }
        i = j + 1;
    }
    let mean = (x.len() as f64 + 1.0) / 2.0;
    ranks.iter().map(|r| r - mean).collect()
}

/// The split `t` (first index of the second part) maximising the standardised rank-sum
/// `|S_t| / sqrt(t (m - t))`, with at least `min_seg` values on each side; `None` when every
/// value ties.
fn best_split(centred: &[f64], min_seg: usize) -> Option<(usize, f64)> {
    let m = centred.len();
    let mut sum = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for (i, c) in centred.iter().enumerate().take(m - min_seg) {
        sum += c;
        let t = i + 1;
        if t < min_seg {
            continue;
        }
        let score = sum.abs() / ((t * (m - t)) as f64).sqrt();
        if best.is_none_or(|(_, b)| score > b + 1e-12) {
            best = Some((t, score));
        }
    }
    best.filter(|(_, s)| *s > 1e-12)
}

/// The permutation p-value of `observed` when it is at most `alpha`; `None` (stopping early)
/// as soon as enough permutations reach it that it cannot be.
fn permutation_p(centred: &[f64], observed: f64, s: &ChangeSettings, seed: u64) -> Option<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut shuffled = centred.to_vec();
    // p = (1 + hits) / (1 + permutations) <= alpha  ⇔  hits <= alpha (1 + permutations) − 1.
    let allowed = (s.alpha * (s.permutations + 1) as f64 - 1.0).floor();
    let mut hits = 0.0;
    for _ in 0..s.permutations {
        for i in (1..shuffled.len()).rev() {
            let j = rng.random_range(0..=i);
            shuffled.swap(i, j);
        }
        if best_split(&shuffled, s.min_segment).is_some_and(|(_, v)| v >= observed - 1e-12) {
            hits += 1.0;
            if hits > allowed {
                return None;
            }
        }
    }
    Some((1.0 + hits) / (1.0 + s.permutations as f64))
}

/// Hodges–Lehmann shift `after − before` (median of all pairwise differences) and its
/// distribution-free interval from the Mann–Whitney order statistics (normal approximation).
fn hodges_lehmann(before: &[f64], after: &[f64], z: f64) -> (f64, f64, f64) {
    let mut d: Vec<f64> = after
        .iter()
        .flat_map(|y| before.iter().map(move |x| y - x))
        .collect();
    d.sort_by(f64::total_cmp);
    let n = d.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let shift = median(&mut d.clone());
    let (m1, m2) = (before.len() as f64, after.len() as f64);
    let k = (m1 * m2 / 2.0 - z * (m1 * m2 * (m1 + m2 + 1.0) / 12.0).sqrt()).floor();
    let k = if k < 0.0 {
        0
    } else {
        (k as usize).min((n - 1) / 2)
    };
    (shift, d[k], d[n - 1 - k])
}

fn normal_quantile(p: f64) -> f64 {
    Normal::new(0.0, 1.0)
        .map(|n| n.inverse_cdf(p))
        .unwrap_or(1.645)
}

/// What a series follows: one cell, or the whole matrix.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Scope {
    /// The matrix-wide level: per run, the mean over its cells of log(value / cell median).
    Matrix,
    /// One (concurrency, context) cell.
    Cell {
        concurrency: u32,
        context_tokens: u64,
    },
}

/// One series of a history: where its values come from, and what changed in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistorySeries {
    pub scope: Scope,
    pub metric: Metric,
    /// Positions in the history's runs of the values (runs where the cell was not ok are left
    /// out).
    pub runs: Vec<usize>,
    /// The metric's values (the matrix series: relative to the cells' medians, 1 = typical).
    pub values: Vec<f64>,
    pub changes: Vec<SeriesChange>,
    pub segments: Vec<Segment>,
}

/// The commits around a change: the last run before it and the first run after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CommitRange {
    pub before: Option<String>,
    pub after: Option<String>,
    /// `before..after` (git's range syntax) when both are known.
    pub range: Option<String>,
}

/// One change point of a history, named by runs and commits (what `infergate changes` lists).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChangePoint {
    pub scope: Scope,
    pub metric: Metric,
    /// The first run after the change.
    pub run_id: String,
    /// The last run before the change.
    pub previous_run_id: String,
    /// Relative change (negative = slower / worse) and its interval.
    pub change: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub p_value: f64,
    pub commits: CommitRange,
    /// Whether a person accepted it (`infergate baseline accept --since RUN`).
    #[serde(default)]
    pub accepted: bool,
}

/// A run of the history as the report shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunRef {
    pub run_id: String,
    pub started_at: String,
    pub commit: Option<String>,
}

/// Change points of every series of one baseline group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistoryChanges {
    pub settings: ChangeSettings,
    pub runs: Vec<RunRef>,
    pub series: Vec<HistorySeries>,
    /// All change points, newest first.
    pub change_points: Vec<ChangePoint>,
}

/// The series of `metric` for `scope` over `runs`: (positions, values).
pub(crate) fn series_of(
    runs: &[RunResults],
    scope: &Scope,
    metric: Metric,
) -> (Vec<usize>, Vec<f64>) {
    let value = |r: &RunResults, conc: u32, ctx: u64| {
        r.cells
            .iter()
            .find(|c| c.concurrency == conc && c.context_tokens == ctx)
            .filter(|c| c.status == CellStatus::Ok)
            .and_then(|c| metric_value(c, metric))
    };
    match scope {
        Scope::Cell {
            concurrency,
            context_tokens,
        } => runs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| value(r, *concurrency, *context_tokens).map(|v| (i, v)))
            .unzip(),
        Scope::Matrix => {
            let coords = coords(runs);
            let centres: Vec<f64> = coords
                .iter()
                .map(|&(conc, ctx)| {
                    let mut logs: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| value(r, conc, ctx))
                        .map(f64::ln)
                        .collect();
                    median(&mut logs)
                })
                .collect();
            runs.iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let logs: Vec<f64> = coords
                        .iter()
                        .zip(&centres)
                        .filter_map(|(&(conc, ctx), centre)| {
                            value(r, conc, ctx).map(|v| v.ln() - centre)
                        })
                        .collect();
                    (!logs.is_empty())
                        .then(|| (i, (logs.iter().sum::<f64>() / logs.len() as f64).exp()))
                })
                .unzip()
        }
    }
}

/// The (concurrency, context) cells present in any run, sorted by context then concurrency.
fn coords(runs: &[RunResults]) -> Vec<(u32, u64)> {
    let set: BTreeSet<(u64, u32)> = runs
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| (c.context_tokens, c.concurrency)))
        .collect();
    set.into_iter().map(|(ctx, conc)| (conc, ctx)).collect()
}

/// Log values with "larger is better" whatever the metric's direction.
fn better_logs(values: &[f64], metric: Metric) -> Vec<f64> {
    let sign = match metric.direction() {
        Direction::HigherIsBetter => 1.0,
        Direction::LowerIsBetter => -1.0,
    };
    values.iter().map(|v| sign * v.ln()).collect()
}

/// One series' change points (`detect` on the metric's "better" logs), with its segments.
pub(crate) fn analyse_series(
    runs: &[RunResults],
    scope: Scope,
    metric: Metric,
    settings: &ChangeSettings,
) -> Result<HistorySeries, StatsError> {
    let (positions, values) = series_of(runs, &scope, metric);
    let changes = detect(&better_logs(&values, metric), settings)?;
    let segments = segments(&values, &changes);
    Ok(HistorySeries {
        scope,
        metric,
        runs: positions,
        values,
        changes,
        segments,
    })
}

/// Change points of the matrix-wide series and of every cell, for each of `metrics`, over
/// `runs` (oldest → newest). `accepted` names runs a person accepted a change at: a change
/// point at one of them, or within `settings.min_segment` runs of one, is marked accepted.
pub(crate) fn analyse(
    runs: &[RunResults],
    metrics: &[Metric],
    accepted: &[String],
    settings: &ChangeSettings,
) -> Result<HistoryChanges, StatsError> {
    settings.validate()?;
    let mut series = Vec::new();
    for &metric in metrics {
        series.push(analyse_series(runs, Scope::Matrix, metric, settings)?);
        for (concurrency, context_tokens) in coords(runs) {
            let scope = Scope::Cell {
                concurrency,
                context_tokens,
            };
            series.push(analyse_series(runs, scope, metric, settings)?);
        }
    }
    let accepted_at: Vec<usize> = accepted
        .iter()
        .filter_map(|id| runs.iter().position(|r| &r.run_id == id))
        .collect();
    let mut change_points = Vec::new();
    for s in &series {
        for c in &s.changes {
            let at = s.runs[c.index];
            let prev = s.runs[c.index - 1];
            let (before, after) = (runs[prev].commit(), runs[at].commit());
            change_points.push(ChangePoint {
                scope: s.scope.clone(),
                metric: s.metric,
                run_id: runs[at].run_id.clone(),
                previous_run_id: runs[prev].run_id.clone(),
                change: c.change,
                ci_low: c.ci_low,
                ci_high: c.ci_high,
                p_value: c.p_value,
                commits: CommitRange {
                    before: before.map(String::from),
                    after: after.map(String::from),
                    range: before.zip(after).map(|(b, a)| format!("{b}..{a}")),
                },
                accepted: accepted_at
                    .iter()
                    .any(|&a| a.abs_diff(at) <= settings.min_segment),
            });
        }
    }
    change_points.sort_by(|a, b| {
        let pos = |id: &str| runs.iter().position(|r| r.run_id == id);
        pos(&b.run_id)
            .cmp(&pos(&a.run_id))
            .then(a.scope.cmp(&b.scope))
    });
    Ok(HistoryChanges {
        settings: settings.clone(),
        runs: runs
            .iter()
            .map(|r| RunRef {
                run_id: r.run_id.clone(),
                started_at: r.started_at.to_rfc3339(),
                commit: r.commit().map(String::from),
            })
            .collect(),
        series,
        change_points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, Normal as Gauss};

    fn noisy(n: usize, sd: f64, seed: u64, shift: &dyn Fn(usize) -> f64) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(seed);
        let g = Gauss::new(0.0, sd).unwrap();
        (0..n).map(|i| shift(i) + g.sample(&mut rng)).collect()
    }

    #[test]
    fn finds_a_step_sizes_it_and_is_deterministic() {
        let logs = noisy(60, 0.01, 7, &|i| if i >= 40 { (0.97f64).ln() } else { 0.0 });
        let s = ChangeSettings::default();
        let found = detect(&logs, &s).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        let c = &found[0];
        assert!(c.index.abs_diff(40) <= 2, "{c:?}");
        assert!(c.ci_low < -0.03 + 0.01 && c.ci_high > -0.03 - 0.01, "{c:?}");
        assert!(c.ci_low <= c.change && c.change <= c.ci_high, "{c:?}");
        assert!(c.p_value <= s.alpha);
        assert_eq!(detect(&logs, &s).unwrap(), found, "same seed, same answer");
    }

    #[test]
    fn outlier_runs_and_a_stable_series_raise_nothing() {
        let mut logs = noisy(60, 0.01, 11, &|_| 0.0);
        for i in [10, 33, 58, 59] {
            logs[i] += (0.90f64).ln();
        }
        let found = detect(&logs, &ChangeSettings::default()).unwrap();
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn ties_and_short_series_are_handled() {
        assert!(
            detect(&[0.0; 20], &ChangeSettings::default())
                .unwrap()
                .is_empty()
        );
        assert!(
            detect(&[0.0, 1.0, 2.0], &ChangeSettings::default())
                .unwrap()
                .is_empty()
        );
        assert_eq!(centred_ranks(&[1.0, 1.0, 3.0]), vec![-0.5, -0.5, 1.0]);
        assert!(detect(&[f64::NAN; 8], &ChangeSettings::default()).is_err());
        let bad = ChangeSettings {
            permutations: 10,
            ..ChangeSettings::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn history_names_runs_commits_and_the_matrix() {
        let mut rng = StdRng::seed_from_u64(3);
        let runs: Vec<RunResults> = (0..30)
            .map(|i| {
                let f = if i >= 20 { 0.95 } else { 1.0 };
                let mut r = super::super::eval::synthetic_run(
                    &format!("n{i:02}"),
                    &mut rng,
                    0.005,
                    0.01,
                    &|_| f,
                );
                r.started_at += chrono::Duration::days(i);
                r.labels.insert("sha".into(), format!("c{i:02}"));
                r
            })
            .collect();
        let h = analyse(
            &runs,
            &[Metric::AggregateTps],
            &["n20".into()],
            &ChangeSettings::default(),
        )
        .unwrap();
        let matrix: Vec<_> = h
            .change_points
            .iter()
            .filter(|c| c.scope == Scope::Matrix)
            .collect();
        assert_eq!(matrix.len(), 1, "{matrix:?}");
        let m = matrix[0];
        assert_eq!(m.run_id, "n20");
        assert_eq!(m.previous_run_id, "n19");
        assert_eq!(m.commits.range.as_deref(), Some("c19..c20"));
        assert!(m.accepted);
        assert!((m.change + 0.05).abs() < 0.01, "{m:?}");
        assert_eq!(h.series.len(), 21);
        let json = serde_json::to_value(m).unwrap();
        assert_eq!(json["scope"], "matrix");
        let cell = h
            .change_points
            .iter()
            .find(|c| c.scope != Scope::Matrix)
            .map(|c| serde_json::to_value(c).unwrap())
            .unwrap();
        assert!(cell["scope"]["cell"]["concurrency"].is_u64(), "{cell}");
        let seg = &h.series[0].segments;
        assert_eq!(seg.len(), 2);
        assert!(seg[1].level < seg[0].level && seg[1].band_low < seg[1].level);
    }
}
