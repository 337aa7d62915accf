//! Builds a [`ComparisonReport`] from baseline history and candidate runs at one look of the
//! gate's plan: cell status logic (capacity, missing, errors), the model fitted per metric
//! ([`super::noise`]), and one test per family member — the matrix, each row and column, each
//! cell — each a standardized log change against its boundary at this look (Bonferroni over
//! the members, [`Look`]); the report itself is assembled by [`super::build`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use infergate_schema::results::{
    CellResult, CellStatus, Percentiles, PrefillAgreement, RunResults,
};
use infergate_schema::verdict::{
    Against, BaselineSummary, CellComparison, CellReason, CellVerdict, Check, CheckOutcome,
    ComparisonReport, Coverage, DecidedChange, DecisionBasis, Direction, Found, HistoryHostLate,
    HostLateCell, Layer, Limit, LimitCounts, LineAxis, LineTest, LoneBoot, MatrixTest, Metric,
    MetricComparison, MetricSince, NotCompared, NotGated, Sensitivity,
};

use super::build::{self, Coord, find, mean, var, within_run_var};
use super::capacity::{self, LimitDecision};
use super::interval::{
    LogChange, each_boot_p, judge, judge_each_boot, log_margin, note_overruled, points, relative,
    reported_only, signed,
};
use super::noise::{self, LogTable, trimmed_mean};
use super::rule::{
    CONFIDENCE, FUTILITY_P, LATENCY_MIN_RUNS, LINE_SHARE, MATRIX_MARGIN, SECONDARY_SHARE,
    level_window, percentile_min_count,
};
use super::sensitivity;
use super::{DecisionRule, StatsError};

/// One look of the gate's plan (`docs/statistics.md`): which tests may claim a regression
/// here, and with what alpha. The looks' alphas add up to the rule's `alpha`.
#[derive(Clone, Debug, PartialEq)]
pub struct Look {
    /// For people and the checks: `one boot`, `first boot`, `round 1`, `both boots`.
    pub name: String,
    /// Alpha of the rows, columns and cells together at this look (positive).
    pub local_alpha: f64,
    /// Alpha of the matrix-wide test at this look; `None`: only its futility screen (a boot
    /// whose matrix change does not lean worse at p < `FUTILITY_P` ends the matrix test).
    pub matrix_alpha: Option<f64>,
    /// Boots the plan takes for the matrix-wide test (its sensitivity is that of the plan).
    pub design_boots: usize,
    /// The candidate's runs from this index on are the confirmation's second boot: a test
    /// (matrix, line or cell) that finds a regression on both boots stands only if the second
    /// boot alone leans worse in it past the futility bound, so one slow boot or one wild cell
    /// cannot carry a regression alone (`stats::confirm`).
    pub second_boot_from: Option<usize>,
    /// Whether a row's, column's or cell's alarm at this look is only provisional (the plan's
    /// first boot): a cell's own noise is drawn anew each boot, heavy-tailed on real runners,
    /// so a second boot decides it as it decides the matrix-wide test (`stats::confirm`).
    pub local_provisional: bool,
}

impl Look {
    /// The look of a plain comparison: everything decided at once, on the runs given.
    pub fn single(rule: &DecisionRule) -> Look {
        Look {
            name: "one look".into(),
            local_alpha: rule.local_alpha(),
            matrix_alpha: Some(rule.matrix_alpha()),
            design_boots: 1,
            second_boot_from: None,
            local_provisional: false,
        }
    }

    /// The look over both boots of the plan, the second boot's runs from `second_from` on.
    pub(crate) fn both_boots(rule: &DecisionRule, second_from: usize) -> Look {
        Look {
            name: "both boots".into(),
            design_boots: 2,
            second_boot_from: Some(second_from),
            ..Look::single(rule)
        }
    }
}

/// A baseline history (accepted runs of one profile, oldest → newest) with the models fitted
/// on it. Every look of one gate is made on one `History`, so the history is loaded once and
/// each metric's model fitted once: a later look with the same cells reuses it.
#[derive(Debug)]
pub struct History<'a> {
    runs: Cow<'a, [RunResults]>,
    /// Metrics restarted at a later accepted run than the rest ([`History::with_metric_since`]).
    metric_since: Vec<MetricSince>,
    /// Fitted models by metric, window length and the cells fitted.
    models: Mutex<Vec<(ModelKey, Arc<noise::NoiseModel>)>>,
}

/// What a fitted model depends on besides the runs: the metric, how many of the newest runs
/// are the window, the cells, and the share of a tail the host may explain (its runs' tails
/// left out, [`history_table`]; as `f64` bits).
type ModelKey = (Metric, usize, Vec<Coord>, u64);

impl<'a> History<'a> {
    /// The history of these runs, nothing fitted yet.
    pub fn new(runs: impl Into<Cow<'a, [RunResults]>>) -> History<'a> {
        History {
            runs: runs.into(),
            metric_since: Vec::new(),
            models: Mutex::new(Vec::new()),
        }
    }

    /// The history of `runs` where each metric of `since` keeps only the figures of the runs
    /// started since its accepted change (`baseline accept --metric`): an older run's figure of
    /// it is withheld ([`withhold`]), so the metric is compared with its new level alone while
    /// every other metric keeps every run. A tail's accepted rise does not thin throughput's
    /// history (a gate right after a whole-group accept can only say `insufficient`).
    pub fn with_metric_since(mut runs: Vec<RunResults>, since: Vec<MetricSince>) -> History<'a> {
        for s in &since {
            for run in runs
                .iter_mut()
                .filter(|r| r.started_at < s.since_started_at)
            {
                withhold(run, s.metric);
            }
        }
        History {
            metric_since: since,
            ..History::new(runs)
        }
    }

    /// The runs, oldest first, as compared (a withheld figure reads as not measured).
    pub fn runs(&self) -> &[RunResults] {
        &self.runs
    }

    /// The model of `key`, fitted by `fit` the first time it is asked for.
    fn model(
        &self,
        key: ModelKey,
        fit: impl FnOnce() -> noise::NoiseModel,
    ) -> Arc<noise::NoiseModel> {
        let mut models = self.models.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, m)) = models.iter().find(|(k, _)| *k == key) {
            return Arc::clone(m);
        }
        let m = Arc::new(fit());
        models.push((key, Arc::clone(&m)));
        m
    }

    /// How many models were fitted on this history (each metric and set of cells once).
    #[cfg(test)]
    pub(crate) fn fitted(&self) -> usize {
        self.models.lock().map_or(0, |m| m.len())
    }
}

/// Every metric compared, primary first (the tails and TPOT, added 2026-12-05, last).
pub const ALL_METRICS: [Metric; 12] = [
    Metric::AggregateTps,
    Metric::PerUserTps,
    Metric::TtftP50,
    Metric::TtftP90,
    Metric::ItlP50,
    Metric::ItlP90,
    Metric::StepsPerS,
    Metric::JoulesPerToken,
    Metric::TtftP99,
    Metric::ItlP99,
    Metric::TpotP50,
    Metric::TpotP90,
];

/// A metric's value in one cell, when the cell has it (finite and positive): what the cell
/// measured, as the reports and exports show it.
pub fn metric_value(cell: &CellResult, metric: Metric) -> Option<f64> {
    let v = match metric {
        Metric::AggregateTps => Some(cell.aggregate_tps),
        Metric::PerUserTps => cell.per_user_tps.map(|p| p.p50),
        Metric::TtftP50
        | Metric::TtftP90
        | Metric::TtftP99
        | Metric::ItlP50
        | Metric::ItlP90
        | Metric::ItlP99
        | Metric::TpotP50
        | Metric::TpotP90 => latency_percentile(cell, metric).map(|(v, _, _)| v),
        Metric::StepsPerS => cell.spec_decode.as_ref().map(|s| s.steps_per_s),
        Metric::JoulesPerToken => cell.telemetry.as_ref().and_then(|t| t.joules_per_token),
        // The layers are the run's, not a decode cell's ([`layer_value`]).
        Metric::PrefillTps | Metric::BurstTps | Metric::BurstTtftP90 => None,
    }?;
    (v.is_finite() && v > 0.0).then_some(v)
}

/// Takes a history run's figure of `metric` out (every decode cell's, or its layer's): the run
/// then counts for the metric as one that did not measure it ([`History::with_metric_since`]).
/// Aggregate tok/s is the group's level, restarted only by a whole-group accept: the store
/// never gives it here, and it is left as it is.
fn withhold(run: &mut RunResults, metric: Metric) {
    let gone = f64::NAN;
    let pick = |p: &mut Option<Percentiles>, q: fn(&mut Percentiles) -> &mut f64| {
        if let Some(p) = p.as_mut() {
            *q(p) = gone;
        }
    };
    match metric {
        Metric::AggregateTps => {}
        Metric::PrefillTps => run.prefill.iter_mut().for_each(|p| p.prefill_tps = None),
        Metric::BurstTps => run.burst.iter_mut().for_each(|b| b.total_tps = gone),
        Metric::BurstTtftP90 => {
            if let Some(b) = run.burst.as_mut() {
                pick(&mut b.ttft_s, |p| &mut p.p90);
            }
        }
        _ => {
            for c in &mut run.cells {
                match metric {
                    Metric::TtftP50 => pick(&mut c.ttft_s, |p| &mut p.p50),
                    Metric::TtftP90 => pick(&mut c.ttft_s, |p| &mut p.p90),
                    Metric::TtftP99 => pick(&mut c.ttft_s, |p| &mut p.p99),
                    Metric::ItlP50 => pick(&mut c.itl_s, |p| &mut p.p50),
                    Metric::ItlP90 => pick(&mut c.itl_s, |p| &mut p.p90),
                    Metric::ItlP99 => pick(&mut c.itl_s, |p| &mut p.p99),
                    Metric::TpotP50 => pick(&mut c.tpot_s, |p| &mut p.p50),
                    Metric::TpotP90 => pick(&mut c.tpot_s, |p| &mut p.p90),
                    Metric::PerUserTps => pick(&mut c.per_user_tps, |p| &mut p.p50),
                    Metric::StepsPerS => {
                        c.spec_decode.iter_mut().for_each(|s| s.steps_per_s = gone);
                    }
                    Metric::JoulesPerToken => {
                        c.telemetry
                            .iter_mut()
                            .for_each(|t| t.joules_per_token = None);
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A latency percentile metric's value in one cell, with the observations behind it and its
/// quantile; `None` for the other metrics.
fn latency_percentile(cell: &CellResult, metric: Metric) -> Option<(f64, u64, f64)> {
    match metric {
        Metric::TtftP50 => cell.ttft_s.map(|p| (p.p50, p.count, 0.5)),
        Metric::TtftP90 => cell.ttft_s.map(|p| (p.p90, p.count, 0.9)),
        Metric::ItlP50 => cell.itl_s.map(|p| (p.p50, p.count, 0.5)),
        Metric::ItlP90 => cell.itl_s.map(|p| (p.p90, p.count, 0.9)),
        Metric::TtftP99 => cell.ttft_s.map(|p| (p.p99, p.count, 0.99)),
        Metric::ItlP99 => cell.itl_s.map(|p| (p.p99, p.count, 0.99)),
        Metric::TpotP50 => cell.tpot_s.map(|p| (p.p50, p.count, 0.5)),
        Metric::TpotP90 => cell.tpot_s.map(|p| (p.p90, p.count, 0.9)),
        _ => None,
    }
}

/// A metric's value in one cell as the tests take it: [`metric_value`], and a latency
/// percentile only from the observations that bound it ([`percentile_min_count`]).
pub(crate) fn compared_value(cell: &CellResult, metric: Metric) -> Option<f64> {
    if latency_percentile(cell, metric).is_some_and(|(_, n, q)| n < percentile_min_count(q)) {
        return None;
    }
    metric_value(cell, metric)
}

/// Where the host's own lateness could explain a cell's tail latency (a p90 or p99): the
/// probe's p99 lateness and the percentile, seconds, when the lateness is the rule's
/// [`DecisionRule::host_late_share`] of the percentile or more. A cell of results without the
/// probe (other tools, older versions) is never host-late.
pub(crate) fn host_late(
    cell: &CellResult,
    metric: Metric,
    rule: &DecisionRule,
) -> Option<(f64, f64)> {
    let (value, _, q) = latency_percentile(cell, metric)?;
    let late = cell.host_lateness_s?.p99;
    (q >= 0.9 && late >= rule.host_late_share(metric) * value).then_some((late, value))
}

/// A run's cell at `coord` and its [`compared_value`] of `metric`, where the cell ran clean
/// (`ok`): what a history, a change-point series or an A/B pair takes from a run.
pub(crate) fn ok_value(
    run: &RunResults,
    coord: Coord,
    metric: Metric,
) -> Option<(&CellResult, f64)> {
    let c = find(run, coord).filter(|c| c.status == CellStatus::Ok)?;
    Some((c, compared_value(c, metric)?))
}

/// A run's prefill tok/s at `context` as the prefill layer compares it: the median of its cold
/// samples, never where the engine's own counters disagree with the client's figure (an
/// inflated number is not compared: fail closed, [`prefill_disagrees`]).
pub(crate) fn prefill_value(run: &RunResults, context: u64) -> Option<f64> {
    let record = run.prefill.iter().find(|p| p.context_tokens == context)?;
    if record.cross_check.verdict == PrefillAgreement::Disagrees {
        return None;
    }
    record.prefill_tps.filter(|v| v.is_finite() && *v > 0.0)
}

/// One cell of a layer (a prefill context, the burst): `not_comparable` with why and the
/// reason where the candidate's figure is refused (`refused`: it fails the gate closed where
/// the layer gates), else built from its test entries.
fn layer_cell(
    coord: Coord,
    refused: Option<(NotCompared, CellReason)>,
    entries: Vec<(MetricComparison, Option<CellReason>)>,
    provisional: bool,
    gating: impl Fn(Metric) -> bool,
    none: CellReason,
) -> CellComparison {
    match refused {
        Some((kind, why)) => {
            let settled = LimitDecision::settled(CellVerdict::NotComparable, why);
            CellComparison {
                not_compared: Some(kind),
                ..build::cell(coord, Some(settled), Vec::new(), gating, none)
            }
        }
        None => CellComparison {
            provisional,
            ..build::cell(coord, None, entries, gating, none)
        },
    }
}

/// A run's burst-layer figure of `metric` as the layer compares it: only from a burst whose
/// every request completed (one that ended early or failed is not compared: fail closed,
/// [`burst_incomplete`]), and its TTFT p90 only from the completed requests that bound it
/// ([`percentile_min_count`]).
pub(crate) fn burst_value(run: &RunResults, metric: Metric) -> Option<f64> {
    let b = run.burst.as_ref().filter(|b| b.all_completed())?;
    let v = match metric {
        Metric::BurstTps => b.total_tps,
        Metric::BurstTtftP90 => {
            let t = b.ttft_s?;
            if t.count < percentile_min_count(0.9) {
                return None;
            }
            t.p90
        }
        _ => return None,
    };
    (v.is_finite() && v > 0.0).then_some(v)
}

/// Why a run's burst is not compared: some of its requests did not complete.
pub(crate) fn burst_incomplete(run: &RunResults) -> Option<CellReason> {
    let b = run.burst.as_ref()?;
    (!b.all_completed()).then(|| CellReason::BurstIncomplete {
        run: run.run_id.clone(),
        completed: b.completed,
        sent: b.sent,
        incomplete: b.incomplete,
        errors: b.errors,
        first_problem: b.first_problem.clone(),
    })
}

/// A layer metric's figure in one run: the prefill layer's at `coord`'s context, the burst's.
fn layer_value(run: &RunResults, coord: Coord, metric: Metric) -> Option<f64> {
    if metric.is_burst() {
        return burst_value(run, metric);
    }
    prefill_value(run, coord.1)
}

/// Why a run's prefill figure at `context` is not compared: the engine's counters disagree.
fn prefill_disagrees(run: &RunResults, context: u64) -> Option<CellReason> {
    let record = run.prefill.iter().find(|p| p.context_tokens == context)?;
    (record.cross_check.verdict == PrefillAgreement::Disagrees).then(|| {
        CellReason::PrefillDisagrees {
            context,
            run: run.run_id.clone(),
            detail: record.cross_check.detail.clone(),
        }
    })
}

/// The prefill layer's "cells": one per context either side measured, `concurrency` 0.
fn prefill_coords<'r>(runs: impl IntoIterator<Item = &'r RunResults>) -> Vec<Coord> {
    build::first_seen(
        runs.into_iter()
            .flat_map(|r| r.prefill.iter().map(|p| (0, p.context_tokens))),
    )
}

/// A history run's value of `metric` at `coord` (a decode cell's, or the prefill layer's).
fn history_value(run: &RunResults, coord: Coord, metric: Metric) -> Option<f64> {
    if metric.is_layer() {
        return layer_value(run, coord, metric);
    }
    ok_value(run, coord, metric).map(|(_, v)| v)
}

/// A candidate run's log measurements at `coord` ([`candidate_logs`], or its prefill figure).
fn run_logs(
    run: &RunResults,
    coord: Coord,
    metric: Metric,
    rule: &DecisionRule,
) -> Option<Vec<f64>> {
    if metric.is_layer() {
        return Some(
            layer_value(run, coord, metric)
                .map(f64::ln)
                .into_iter()
                .collect(),
        );
    }
    find(run, coord).map(|c| candidate_logs(c, metric, rule))
}

/// The candidate's log measurements of one cell and metric in one run: the re-measurement
/// rounds of the primary metric count as repetitions (a fresh set of streams each).
fn candidate_logs(cell: &CellResult, metric: Metric, rule: &DecisionRule) -> Vec<f64> {
    if metric == Metric::AggregateTps && !cell.rounds.is_empty() {
        let v = build::positive_logs(cell.rounds.iter().map(|r| r.aggregate_tps));
        if !v.is_empty() {
            return v;
        }
    }
    // A tail the host alone could have moved by its design effect is no measurement of the
    // engine's: the boot is not compared on it (the history's runs leave theirs out where
    // enough runs remain, [`history_table`]).
    if host_late(cell, metric, rule).is_some() {
        return Vec::new();
    }
    compared_value(cell, metric)
        .map(f64::ln)
        .into_iter()
        .collect()
}

/// The comparable cells whose gating tail latency the host's lateness could explain on a
/// candidate boot ([`host_late`]; a cell is compared on a metric only where every boot has it),
/// with the latest of them: the gate cannot vouch for the metric there. A paired A/B passes
/// both sides' boots: either side's tail is no measurement of its build there.
pub(crate) fn host_late_cells(
    rule: &DecisionRule,
    metrics: &[Metric],
    comparable: &[Coord],
    candidate: &[RunResults],
) -> Vec<HostLateCell> {
    let mut out = Vec::new();
    for &metric in metrics {
        for &coord in comparable {
            let latest = candidate
                .iter()
                .filter_map(|r| find(r, coord))
                .filter(|c| compared_value(c, metric).is_some())
                .filter_map(|c| host_late(c, metric, rule))
                .max_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
            if let Some((late, value)) = latest {
                out.push(HostLateCell {
                    concurrency: coord.0,
                    context_tokens: coord.1,
                    metric,
                    lateness_p99_s: late,
                    value_s: value,
                });
            }
        }
    }
    out
}

/// Whether a cell can be compared (`None`), and if not, its decision: verdict, reason, and
/// whether it is a provisional alarm or waits for a longer history. A paired A/B decides its
/// cells by the same rule, its A boots the history and the level (`against` names the sides
/// in the reasons).
pub(super) fn eligibility(
    coord: Coord,
    history: &[RunResults],
    level: &[RunResults],
    candidate: &[RunResults],
    capacity_alpha: f64,
    against: Against,
) -> Option<LimitDecision> {
    let levels = LevelStatuses::of(level, coord);
    let now = match candidate_cells(coord, candidate, &levels, against) {
        Ok(now) => now,
        Err(decision) => return Some(decision),
    };
    if levels.runs == 0 {
        let why = CellReason::MissingInBase(against);
        return Some(LimitDecision::settled(CellVerdict::NotComparable, why));
    }
    // Capacity and saturation are judged against the whole history window (how often the
    // cell was so), not the level runs alone: `super::capacity`.
    let hist: Vec<CellStatus> = history
        .iter()
        .filter_map(|r| find(r, coord).map(|c| c.status))
        .filter(|s| s.measured())
        .collect();
    let limits = LimitEvidence {
        now,
        hist,
        boots: candidate.len(),
        capacity_alpha,
        against,
    };
    // Saturation counts the history runs at their capacity limit too: they were at the
    // engine's limit.
    let capacity_hits = limits.limited(CellStatus::CapacityLimited);
    let saturation_hits = limits.limited(CellStatus::Saturated) + capacity_hits;
    limits
        .verdict(Limit::Capacity, CellStatus::CapacityLimited, capacity_hits)
        .or_else(|| limits.verdict(Limit::Saturation, CellStatus::Saturated, saturation_hits))
        .or_else(|| unmeasured_level(&levels, against))
}

/// The statuses of a cell in the level runs that have it: how many, and how many of them
/// measured it ok, capacity-limited, saturated.
struct LevelStatuses {
    runs: usize,
    ok: usize,
    cap: usize,
    sat: usize,
}

impl LevelStatuses {
    fn of(level: &[RunResults], coord: Coord) -> LevelStatuses {
        let statuses: Vec<CellStatus> = level
            .iter()
            .filter_map(|r| find(r, coord).map(|c| c.status))
            .collect();
        let count = |want: CellStatus| statuses.iter().filter(|s| **s == want).count();
        LevelStatuses {
            runs: statuses.len(),
            ok: count(CellStatus::Ok),
            cap: count(CellStatus::CapacityLimited),
            sat: count(CellStatus::Saturated),
        }
    }
}

/// The candidate's cell in each of its runs when every run measured it (ok, capacity-limited
/// or saturated); else the decision of the first run that did not: missing, skipped, or an
/// error (which fails closed where the level measured the cell).
fn candidate_cells<'c>(
    coord: Coord,
    candidate: &'c [RunResults],
    levels: &LevelStatuses,
    against: Against,
) -> Result<Vec<&'c CellResult>, LimitDecision> {
    let decided = |verdict, reason| Err(LimitDecision::settled(verdict, reason));
    let measured_level = levels.ok + levels.cap + levels.sat;
    let mut now = Vec::with_capacity(candidate.len());
    for run in candidate {
        let Some(c) = find(run, coord) else {
            let run = run.run_id.clone();
            let why = CellReason::MissingInRun { against, run };
            return decided(CellVerdict::NotComparable, why);
        };
        let why = c.reason.as_deref().unwrap_or("no reason given").to_string();
        match c.status {
            CellStatus::Ok | CellStatus::CapacityLimited | CellStatus::Saturated => now.push(c),
            // Fail closed: an engine that errors where it used to serve regressed, however
            // the cells it still serves compare.
            CellStatus::Error if measured_level > 0 => {
                let why = CellReason::ErrorNow {
                    why,
                    measured: measured_level,
                    runs: levels.runs,
                    against,
                };
                return decided(CellVerdict::ErrorRegression, why);
            }
            CellStatus::Error => {
                return decided(
                    CellVerdict::NotComparable,
                    CellReason::Error { why, against },
                );
            }
            CellStatus::Skipped => {
                return decided(
                    CellVerdict::NotComparable,
                    CellReason::Skipped { why, against },
                );
            }
        }
    }
    Ok(now)
}

/// What a cell's capacity or saturation is judged on: the candidate's cells, the history's
/// measured statuses of it, and the candidate's boots.
struct LimitEvidence<'c> {
    now: Vec<&'c CellResult>,
    hist: Vec<CellStatus>,
    boots: usize,
    capacity_alpha: f64,
    against: Against,
}

impl LimitEvidence<'_> {
    /// The history runs in `state`.
    fn limited(&self, state: CellStatus) -> usize {
        self.hist.iter().filter(|s| **s == state).count()
    }

    /// The candidate's boots in `state` (with the first reason given), against `hits` such
    /// history runs; `None` where no boot is in `state`.
    fn verdict(&self, limit: Limit, state: CellStatus, hits: usize) -> Option<LimitDecision> {
        let boots: Vec<_> = self.now.iter().filter(|c| c.status == state).collect();
        if boots.is_empty() {
            return None;
        }
        if self.hist.is_empty() {
            let against = self.against;
            let why = CellReason::LimitWithoutBase { limit, against };
            return Some(LimitDecision::settled(CellVerdict::NotComparable, why));
        }
        let why = boots
            .iter()
            .filter_map(|c| c.reason.as_deref())
            .find(|w| !w.is_empty())
            .unwrap_or_default();
        let counts = LimitCounts {
            runs: self.hist.len(),
            hits,
            boots: self.boots,
            boot_hits: boots.len(),
        };
        Some(capacity::decide(
            limit,
            counts,
            self.capacity_alpha,
            why,
            self.against,
        ))
    }
}

/// A cell the level never measured ok: an improvement where it was capacity-limited or
/// saturated there (and is not now), else not comparable; `None` where a level run measured
/// it ok.
fn unmeasured_level(levels: &LevelStatuses, against: Against) -> Option<LimitDecision> {
    if levels.ok > 0 {
        return None;
    }
    let out_of = |limit| CellReason::OutOfLimit { limit, against };
    let (v, why) = if levels.cap > 0 {
        (CellVerdict::Improvement, out_of(Limit::Capacity))
    } else if levels.sat > 0 {
        (CellVerdict::Improvement, out_of(Limit::Saturation))
    } else {
        let why = CellReason::NoBaseMeasurement(against);
        (CellVerdict::NotComparable, why)
    };
    Some(LimitDecision::settled(v, why))
}

/// The candidate's coverage of what the level runs measured: a cell is expected when a level
/// run measured it and the candidate's matrix asked for it (has it, not skipped on purpose by
/// the skip list), and measured when every candidate run measured it. Also the floor of a
/// paired A/B (`stats::paired`: A's boots are the level, B's the candidate).
pub(super) fn coverage(
    coords: &[Coord],
    level: &[RunResults],
    candidate: &[RunResults],
) -> Coverage {
    let mut cov = Coverage {
        expected: 0,
        measured: 0,
    };
    for &coord in coords {
        let in_baseline = level
            .iter()
            .filter_map(|r| find(r, coord))
            .any(|c| c.status.measured());
        let cand: Vec<Option<CellStatus>> = candidate
            .iter()
            .map(|r| find(r, coord).map(|c| c.status))
            .collect();
        // A cell the candidate's matrix does not have (a comparison across matrices) or that
        // it skipped on purpose was not asked of it.
        let not_asked = cand
            .iter()
            .all(|s| matches!(s, None | Some(CellStatus::Skipped)));
        if !in_baseline || not_asked {
            continue;
        }
        cov.expected += 1;
        if cand.iter().all(|s| s.is_some_and(CellStatus::measured)) {
            cov.measured += 1;
        }
    }
    cov
}

/// One metric of one cell: its own test (against the rest of its run) and its total change.
struct CellTest {
    metric: Metric,
    cell: usize,
    /// Column of the cell in the history's table.
    column: usize,
    /// Cell relative to its own run (run effect removed): what its row and column test pool.
    specific: LogChange,
    /// The cell's own test: `specific` less its row's predicted share in it (the run × row
    /// effect, from the row's other cells of the same boots), so a row factor cancels out of
    /// it as the run effect does; `specific` itself where the history shows no row factor.
    own: LogChange,
    /// Total change (what people see).
    total: LogChange,
    baseline: f64,
    candidate: f64,
    /// The first boot's own test (the runs before [`Look::second_boot_from`]).
    first: Option<LogChange>,
    /// The second boot's own test ([`Look::second_boot_from`]).
    second: Option<LogChange>,
}

impl CellTest {
    /// Each boot's own test, where the cell is judged on each boot alone
    /// ([`judge_each_boot`]): throughput's cells with a fitted heavy tail, on two boots.
    fn each_boot(&self) -> Option<(&LogChange, &LogChange)> {
        let heavy = self.metric == Metric::AggregateTps && self.own.tail_df.is_finite();
        self.first
            .as_ref()
            .zip(self.second.as_ref())
            .filter(|_| heavy)
    }
}

/// The matrix-wide change of one metric (run effect of the candidate vs the baseline's).
struct MatrixChange {
    change: LogChange,
    cells: usize,
    /// What the plan's sensitivity is computed from: the boot-to-boot noise, the level runs,
    /// the history's boots.
    design: sensitivity::MatrixDesign,
    /// The second boot's own change ([`Look::second_boot_from`]).
    second_boot: Option<LogChange>,
    /// The first boot's own change (the runs before [`Look::second_boot_from`]).
    first_boot: Option<LogChange>,
}

/// A row's or column's change: the mean cell-specific change of its cells minus that of the
/// other cells (the run factor and a uniform change cancel).
struct LineChange {
    axis: LineAxis,
    at: u64,
    change: LogChange,
    /// Indices (into the comparable cells) of the line's cells.
    members: Vec<usize>,
    /// The second boot's own change ([`Look::second_boot_from`]).
    second: Option<LogChange>,
}

/// The location of a line's (or the rest's) cell changes: the mean without the lowest and the
/// highest cell (20% of each end from 10 cells on) when there are 4 or more, else the mean.
/// One wild cell of a heavy-tailed runner then moves a line only as much as the cell itself is
/// allowed to (the cell's own test), not as a whole row would; a change of the whole line moves
/// it fully. Sorts `v`.
fn line_mean(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let cut = line_cut(n);
    mean(&v[cut..n - cut])
}

/// Cells [`line_mean`] drops at each end of a line of `n`.
fn line_cut(n: usize) -> usize {
    if n >= 4 { (n / 5).max(1) } else { 0 }
}

/// The tail degrees of freedom of a line's contrast when its cells' noise is a t of `cell_df`:
/// a mean that drops `k` cells at each end moves far only when `k + 1` cells are wild at once,
/// so its tail falls like a t of `(k + 1)·ν` (one-big-jump: a sum's tail is its largest
/// terms'); Gaussian cells give a Gaussian line.
fn line_tail_df(n: usize, cell_df: f64) -> f64 {
    (line_cut(n) + 1) as f64 * cell_df
}

/// The row (context) and column (concurrency) contrasts of one metric from its cell tests; an
/// axis with a single line has none (its line is the whole matrix). A line's noise is read
/// from the same contrast in every history run (`resid[column][run]`, the model's residuals):
/// cells of one row or column can move together from boot to boot (a row factor), which the
/// cells' own variances do not show.
fn line_changes(
    tests: &[&CellTest],
    cells: &[Coord],
    resid: &[Vec<f64>],
    candidate_runs: usize,
) -> Vec<LineChange> {
    let runs = resid.first().map_or(0, Vec::len);
    let mut out = Vec::new();
    for axis in [LineAxis::Context, LineAxis::Concurrency] {
        let key = |t: &CellTest| match axis {
            LineAxis::Context => cells[t.cell].1,
            LineAxis::Concurrency => u64::from(cells[t.cell].0),
        };
        let mut keys: Vec<u64> = tests.iter().map(|t| key(t)).collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.len() < 2 {
            continue;
        }
        for at in keys {
            let (line, rest): (Vec<&CellTest>, Vec<&CellTest>) =
                tests.iter().copied().partition(|t| key(t) == at);
            if line.len() < 2 || rest.is_empty() {
                continue;
            }
            let part = |v: &[&CellTest]| {
                let n = v.len() as f64;
                let mut x: Vec<f64> = v.iter().map(|t| t.specific.estimate).collect();
                let var = v.iter().map(|t| t.specific.se.powi(2)).sum::<f64>() / (n * n);
                (line_mean(&mut x), var)
            };
            let (e1, v1) = part(&line);
            let (e2, v2) = part(&rest);
            let mean_at = |v: &[&CellTest], r: usize| {
                let mut x: Vec<f64> = v
                    .iter()
                    .map(|t| resid[t.column][r])
                    .filter(|x| x.is_finite())
                    .collect();
                (!x.is_empty()).then(|| line_mean(&mut x))
            };
            let history: Vec<f64> = (0..runs)
                .filter_map(|r| Some(mean_at(&line, r)? - mean_at(&rest, r)?))
                .collect();
            let (se, df) = if history.len() >= 3 {
                let n = history.len() as f64;
                (
                    (var(&history) * (1.0 / candidate_runs.max(1) as f64 + 1.0 / n)).sqrt(),
                    n - 1.0,
                )
            } else {
                let df = tests
                    .iter()
                    .map(|t| t.specific.df)
                    .fold(f64::INFINITY, f64::min);
                ((v1 + v2).sqrt(), df)
            };
            out.push(LineChange {
                axis,
                at,
                change: LogChange {
                    estimate: e1 - e2,
                    se,
                    df,
                    tail_df: line_tail_df(
                        line.len(),
                        tests.first().map_or(f64::INFINITY, |t| t.specific.tail_df),
                    ),
                },
                members: line.iter().map(|t| t.cell).collect(),
                second: None,
            });
        }
    }
    out
}

/// One metric's model fitted on the history: its cell tests and matrix change, and what its
/// row and column contrasts are built from once the cells' own verdicts are known
/// ([`MetricTests::lines`]).
struct MetricTests {
    metric: Metric,
    tests: Vec<CellTest>,
    matrix: Option<MatrixChange>,
    /// The model's residuals, `resid[column][run]`: each line's noise in the history.
    resid: Vec<Vec<f64>>,
    /// Candidate runs the tests pool.
    runs: usize,
    /// The second boot's own cell tests (in the order of `tests`) and its runs.
    second: Option<(Vec<CellTest>, usize)>,
    /// Lines are tested for the gating throughput only (a secondary metric's cells are
    /// tested one by one, in its own family).
    gating: bool,
}

impl MetricTests {
    /// The row and column contrasts of the cells `keep` admits, each with the second boot's
    /// own contrast where there is one. A cell its own test decided is left out of them: one
    /// slow cell is that cell's regression, not its row's and its column's, and the cells
    /// beside it are not faster for it.
    fn lines(&self, cells: &[Coord], keep: impl Fn(&CellTest) -> bool) -> Vec<LineChange> {
        if !self.gating {
            return Vec::new();
        }
        let of = |tests: &[CellTest], runs: usize| {
            let kept: Vec<&CellTest> = tests.iter().filter(|t| keep(t)).collect();
            line_changes(&kept, cells, &self.resid, runs)
        };
        let mut lines = of(&self.tests, self.runs);
        if let Some((second, runs)) = &self.second {
            let own = of(second, *runs);
            for line in &mut lines {
                line.second = own
                    .iter()
                    .find(|o| o.axis == line.axis && o.at == line.at)
                    .map(|o| o.change);
            }
        }
        lines
    }
}

/// Fits one metric's model on the history and produces its per-cell tests and matrix change
/// (and the second boot's own cell tests, from the sample's `second_from`).
fn test_metric(metric: Metric, cells: &[Coord], s: &Sample, gating: bool) -> MetricTests {
    let (idx, cand_logs) = measured_cells(metric, cells, s);
    if idx.is_empty() {
        return MetricTests {
            metric,
            tests: Vec::new(),
            matrix: None,
            resid: Vec::new(),
            runs: s.candidate.len(),
            second: None,
            gating,
        };
    }
    let fit = MetricFit::new(metric, cells, s, idx, cand_logs);
    let j = fit.j;
    // A second boot has runs of its own and follows a first boot's.
    let second_from = s.second_from.filter(|&from| from > 0 && from < j);
    let matrix = fit.matrix(second_from);
    let resid = fit.residuals();
    let mut tests = fit.cell_tests(0..j);
    // Each boot's own tests, for the second boot's screen (`Look::second_boot_from`) and a
    // heavy-tailed cell's test on each boot ([`judge_each_boot`]): the same cells, in the same
    // order, on its runs alone.
    let second = second_from.map(|from| (fit.cell_tests(from..j), j - from));
    if let Some((second, _)) = &second {
        for (t, own) in tests.iter_mut().zip(second) {
            t.second = Some(own.own);
        }
    }
    if let Some(from) = second_from {
        for (t, own) in tests.iter_mut().zip(fit.cell_tests(0..from)) {
            t.first = Some(own.own);
        }
    }
    MetricTests {
        metric,
        tests,
        matrix,
        resid,
        runs: j,
        second,
        gating,
    }
}

/// The cells (indices into `cells`) where the candidate has the metric in every run and the
/// history has it at least once, with the candidate's logs of each (per run, per repetition).
fn measured_cells(metric: Metric, cells: &[Coord], s: &Sample) -> (Vec<usize>, Vec<Vec<Vec<f64>>>) {
    let (history, candidate) = (s.history, s.candidate);
    let mut idx = Vec::new();
    let mut cand_logs: Vec<Vec<Vec<f64>>> = Vec::new();
    for (i, &coord) in cells.iter().enumerate() {
        let logs: Vec<Vec<f64>> = candidate
            .iter()
            .filter_map(|r| run_logs(r, coord, metric, s.rule))
            .collect();
        if logs.len() != candidate.len() || logs.iter().any(Vec::is_empty) {
            continue;
        }
        if history
            .iter()
            .any(|r| history_value(r, coord, metric).is_some())
        {
            idx.push(i);
            cand_logs.push(logs);
        }
    }
    (idx, cand_logs)
}

/// The history's table of one metric's logs on the cells `idx`, and each cell's summed
/// within-run variance of throughput's samples with the runs that had them. A cell's tail
/// that the host alone could have moved on its run ([`host_late`], the rule the candidate's
/// boots are held to) is left out where the cell keeps at least [`LATENCY_MIN_RUNS`] runs
/// without: a history run on a busy host raises the level and widens the noise, hiding a rise
/// the gate could otherwise vouch for. Where fewer would remain every run is kept, as in
/// results without the probe, and the tail's coverage bound says what the scatter hides.
fn history_table(
    metric: Metric,
    cells: &[Coord],
    history: &[RunResults],
    idx: &[usize],
    rule: &DecisionRule,
) -> (LogTable, Vec<(f64, usize)>) {
    let mut table = LogTable::new(history.len(), idx.len());
    let mut base_within = vec![(0.0, 0usize); idx.len()];
    for (k, &i) in idx.iter().enumerate() {
        if metric.is_layer() {
            for (r, run) in history.iter().enumerate() {
                if let Some(v) = layer_value(run, cells[i], metric) {
                    table.set(r, k, v.ln());
                }
            }
            continue;
        }
        let left_out = history_left_out(history, cells[i], metric, rule);
        for (r, run) in history.iter().enumerate() {
            let Some((c, v)) = ok_value(run, cells[i], metric).filter(|_| !left_out[r]) else {
                continue;
            };
            table.set(r, k, v.ln());
            if metric == Metric::AggregateTps && c.samples.len() >= 2 {
                base_within[k].0 += within_run_var(&c.samples);
                base_within[k].1 += 1;
            }
        }
    }
    (table, base_within)
}

/// Which history runs leave their tail of `metric` at `coord` out ([`history_table`]): those
/// the host ran the probe late on ([`host_late`]), where the cell keeps at least
/// [`LATENCY_MIN_RUNS`] runs without; none where fewer would remain.
fn history_left_out(
    history: &[RunResults],
    coord: Coord,
    metric: Metric,
    rule: &DecisionRule,
) -> Vec<bool> {
    if !metric.is_latency_percentile() {
        return vec![false; history.len()];
    }
    let late: Vec<Option<bool>> = history
        .iter()
        .map(|run| ok_value(run, coord, metric).map(|(c, _)| host_late(c, metric, rule).is_some()))
        .collect();
    let clean = late.iter().filter(|l| **l == Some(false)).count();
    late.iter()
        .map(|l| clean >= LATENCY_MIN_RUNS && *l == Some(true))
        .collect()
}

/// The gating tail latencies whose history left runs out in some of the comparable cells
/// ([`history_left_out`]), with those runs: what `verdict.json` and the Details account for.
fn history_host_late(
    rule: &DecisionRule,
    metrics: &[Metric],
    comparable: &[Coord],
    history: &[RunResults],
) -> Vec<HistoryHostLate> {
    metrics
        .iter()
        .filter_map(|&metric| {
            let mut runs = vec![false; history.len()];
            let mut cells = 0;
            for &coord in comparable {
                let out = history_left_out(history, coord, metric, rule);
                cells += usize::from(out.contains(&true));
                runs.iter_mut().zip(out).for_each(|(any, o)| *any |= o);
            }
            let ids: Vec<String> = history
                .iter()
                .zip(runs)
                .filter(|(_, out)| *out)
                .map(|(r, _)| r.run_id.clone())
                .collect();
            (!ids.is_empty()).then_some(HistoryHostLate {
                metric,
                runs: ids,
                cells,
            })
        })
        .collect()
}

/// One metric's model fitted on the history's measured cells, with the candidate's run
/// effects and the matrix-wide noise: what its matrix change and cell tests are made from.
struct MetricFit<'a> {
    metric: Metric,
    cells: &'a [Coord],
    candidate: &'a [RunResults],
    history_len: usize,
    level_n: usize,
    /// The cells tested (indices into `cells`); column `k` of the table is `idx[k]`.
    idx: Vec<usize>,
    /// The candidate's logs of each tested cell, per run, per repetition.
    cand_logs: Vec<Vec<Vec<f64>>>,
    table: LogTable,
    /// Each cell's summed within-run variance in the history, and the runs it sums.
    base_within: Vec<(f64, usize)>,
    model: Arc<noise::NoiseModel>,
    /// The level runs with a fitted run effect.
    level_rows: Vec<usize>,
    /// Candidate runs.
    j: usize,
    /// Candidate run effects (same robust centre as the baseline's).
    cand_effect: Vec<f64>,
    /// The level runs' run effects, and their mean.
    base_effects: Vec<f64>,
    level: f64,
    /// The boot-to-boot noise of the run effect (the candidate's boots in it where they
    /// count) and the level's lag.
    run_sigma: f64,
    run_df: f64,
    lag_var: f64,
    /// The level's lead on a runner that speeds up (`MatrixDesign::level_lead_var`): in a
    /// cell's total change, not in any test.
    lead_var: f64,
}

impl<'a> MetricFit<'a> {
    fn new(
        metric: Metric,
        cells: &'a [Coord],
        s: &Sample<'a>,
        idx: Vec<usize>,
        cand_logs: Vec<Vec<Vec<f64>>>,
    ) -> MetricFit<'a> {
        let history = s.history;
        let (table, base_within) = history_table(metric, cells, history, &idx, s.rule);
        let rows: Vec<u64> = idx.iter().map(|&i| cells[i].1).collect();
        let key = (
            metric,
            history.len(),
            idx.iter().map(|&i| cells[i]).collect(),
            s.rule.host_late_share(metric).to_bits(),
        );
        let model = s.models.model(key, || noise::fit(&table, &rows));
        // The level runs with a fitted run effect, outlier runs left out.
        let outliers = noise::outlier_runs(&model.run_effect);
        let level_rows: Vec<usize> = (history.len() - s.level_n..history.len())
            .filter(|&r| model.run_effect[r].is_finite() && !outliers[r])
            .collect();
        let j = s.candidate.len();
        let cand_effect = candidate_effects(&cand_logs, &model, j);
        // Matrix-wide change: candidate run effect vs the level runs' run effects (of the runs
        // given: all of them, or the second boot's).
        let base_effects: Vec<f64> = level_rows.iter().map(|&r| model.run_effect[r]).collect();
        let level = mean(&base_effects);
        let (run_sigma, run_df) = matrix_noise(metric, &model, history.len(), &cand_effect);
        let design =
            sensitivity::MatrixDesign::new(model.run, base_effects.len(), j, &model.run_effect);
        let lag_var = design.level_lag_var();
        let lead_var = design.level_lead_var();
        MetricFit {
            metric,
            cells,
            candidate: s.candidate,
            history_len: history.len(),
            level_n: s.level_n,
            idx,
            cand_logs,
            table,
            base_within,
            model,
            level_rows,
            j,
            cand_effect,
            base_effects,
            level,
            run_sigma,
            run_df,
            lag_var,
            lead_var,
        }
    }

    /// The matrix-wide change of the candidate's run effects `runs` against the level.
    fn matrix_change(&self, runs: &[f64]) -> LogChange {
        LogChange {
            estimate: mean(runs) - self.level,
            se: sensitivity::matrix_se(
                self.run_sigma,
                runs.len() as f64,
                self.base_effects.len() as f64,
                self.lag_var,
            ),
            df: self.run_df,
            tail_df: f64::INFINITY,
        }
    }

    /// The metric's matrix-wide change (and each boot's, with a second boot from
    /// `second_from`), where the level has run effects.
    fn matrix(&self, second_from: Option<usize>) -> Option<MatrixChange> {
        let model = &self.model;
        let cand_effect = &self.cand_effect;
        (!self.base_effects.is_empty()).then(|| MatrixChange {
            change: self.matrix_change(cand_effect),
            cells: self.idx.len(),
            design: sensitivity::MatrixDesign::new(
                model.run,
                self.base_effects.len(),
                self.j,
                &model.run_effect,
            ),
            second_boot: second_from.map(|from| self.matrix_change(&cand_effect[from..])),
            first_boot: second_from.map(|from| self.matrix_change(&cand_effect[..from])),
        })
    }

    /// The model's residuals, `resid[column][run]`.
    fn residuals(&self) -> Vec<Vec<f64>> {
        (0..self.idx.len())
            .map(|k| {
                (0..self.history_len)
                    .map(|r| {
                        self.table.get(r, k) - self.model.cell_center[k] - self.model.run_effect[r]
                    })
                    .collect()
            })
            .collect()
    }

    /// The cell tests on the candidate's runs `runs` (all, or one boot's alone).
    fn cell_tests(&self, runs: Range<usize>) -> Vec<CellTest> {
        let mut tests = Vec::new();
        let mut row_parts = Vec::new();
        // The matrix change on these runs: its noise is part of each cell's total change.
        let boots_matrix = (!self.base_effects.is_empty())
            .then(|| self.matrix_change(&self.cand_effect[runs.clone()]));
        for (k, &i) in self.idx.iter().enumerate() {
            if let Some((test, parts)) = self.cell_test(k, i, runs.clone(), boots_matrix.as_ref()) {
                tests.push(test);
                row_parts.push(parts);
            }
        }
        if !self.metric.is_layer() {
            own_tests(&mut tests, &row_parts, self.cells);
        }
        tests
    }

    /// The test of cell `i` (column `k`) on the candidate's runs `runs`, with its own noise
    /// variance and its row effect's ([`own_tests`]); `None` where it cannot be tested.
    fn cell_test(
        &self,
        k: usize,
        i: usize,
        runs: Range<usize>,
        boots_matrix: Option<&LogChange>,
    ) -> Option<(CellTest, (f64, f64))> {
        let model = &self.model;
        let levels = self.cell_levels(k)?;
        let boots = self.boot_sums(k, i, runs.clone());
        let jf = runs.len() as f64;
        let sigma = model.cell_sigma[k];
        // The history's between-run noise already contains the typical within-run spread;
        // only a candidate noisier than the baseline's runs adds its excess.
        let base_w = if self.base_within[k].1 > 0 {
            self.base_within[k].0 / self.base_within[k].1 as f64
        } else {
            0.0
        };
        let excess = (boots.within / jf - base_w * boots.reps_inv / jf).max(0.0) / jf;
        // The cell's own noise, and its row's effect on the boots against the history's.
        let var_cell = sigma * sigma * (boots.reps_inv / (jf * jf) + 1.0 / levels.n) + excess;
        let var_row = model.row_sigma.powi(2) * (1.0 / jf + 1.0 / levels.n);
        let var_spec = var_cell + var_row;
        let specific = LogChange {
            estimate: boots.spec_sum / jf - levels.cell,
            se: var_spec.sqrt(),
            df: model.cell_df[k],
            tail_df: model.tail_df,
        };
        let var_total = var_spec + boots_matrix.map_or(0.0, |m| m.se.powi(2)) + self.lead_var;
        let total = LogChange {
            estimate: boots.raw_sum / jf - levels.raw,
            se: var_total.sqrt(),
            df: boots_matrix.map_or(model.cell_df[k], |m| m.df.min(model.cell_df[k])),
            tail_df: model.tail_df,
        };
        let (specific, total) = if self.metric.is_layer() {
            let context = self.layer_change(k, runs, &levels, &boots)?;
            (context, context)
        } else {
            (specific, total)
        };
        let test = CellTest {
            metric: self.metric,
            cell: i,
            column: k,
            specific,
            own: specific,
            total,
            baseline: levels.raw.exp(),
            candidate: (boots.raw_sum / jf).exp(),
            first: None,
            second: None,
        };
        Some((test, (var_cell, var_row)))
    }

    /// The cell's own level (column `k`): its run-adjusted mean over the whole window (drift
    /// shared by every cell is in the run effects), and its plain level over the level runs;
    /// `None` where the history has no fitted value of it.
    fn cell_levels(&self, k: usize) -> Option<CellLevels> {
        let (table, model) = (&self.table, &self.model);
        let rows: Vec<usize> = (0..self.history_len)
            .filter(|&r| table.get(r, k).is_finite() && model.run_effect[r].is_finite())
            .collect();
        if rows.is_empty() || !model.cell_center[k].is_finite() {
            return None;
        }
        let cell_level = mean(
            &rows
                .iter()
                .map(|&r| table.get(r, k) - model.run_effect[r])
                .collect::<Vec<_>>(),
        );
        let mut raw_rows: Vec<usize> = self
            .level_rows
            .iter()
            .copied()
            .filter(|&r| table.get(r, k).is_finite())
            .collect();
        if raw_rows.is_empty() {
            raw_rows = rows.iter().rev().take(self.level_n).copied().collect();
        }
        let raw_level = mean(
            &raw_rows
                .iter()
                .map(|&r| table.get(r, k))
                .collect::<Vec<_>>(),
        );
        Some(CellLevels {
            cell: cell_level,
            raw: raw_level,
            raw_runs: raw_rows.len(),
            n: rows.len() as f64,
        })
    }

    /// Candidate: per run of `runs`, the mean over its repetitions (rounds) of the
    /// run-adjusted value, summed over the runs.
    fn boot_sums(&self, k: usize, i: usize, runs: Range<usize>) -> BootSums {
        let mut sums = BootSums::default();
        for (run, logs) in self.cand_logs[k]
            .iter()
            .enumerate()
            .skip(runs.start)
            .take(runs.len())
        {
            let m = mean(logs);
            sums.spec_sum += m - self.cand_effect[run];
            sums.raw_sum += m;
            sums.reps_inv += 1.0 / logs.len() as f64;
            if self.metric == Metric::AggregateTps
                && let Some(c) = find(&self.candidate[run], self.cells[i])
            {
                sums.within += within_run_var(&c.samples) / logs.len() as f64;
            }
        }
        sums
    }

    /// The prefill layer is decided on each context's total change against that context's
    /// own run-to-run scatter in the history (its boots' scatter pooled in): a slower prefill
    /// kernel slows every context alike, which the run effect would take out, and one context
    /// alone has no "rest of its run". `None` with no scatter to speak of yet (fewer than 3
    /// history runs): reported as not compared.
    fn layer_change(
        &self,
        k: usize,
        runs: Range<usize>,
        levels: &CellLevels,
        boots: &BootSums,
    ) -> Option<LogChange> {
        let jf = runs.len() as f64;
        let all: Vec<f64> = (0..self.history_len)
            .map(|r| self.table.get(r, k))
            .filter(|x| x.is_finite())
            .collect();
        if all.len() < 3 {
            return None;
        }
        let boot_means: Vec<f64> = self.cand_logs[k][runs].iter().map(|l| mean(l)).collect();
        let (sd, df) = with_boot_scatter(var(&all).sqrt(), all.len() as f64 - 1.0, &boot_means);
        Some(LogChange {
            estimate: boots.raw_sum / jf - levels.raw,
            se: sd * (1.0 / jf + 1.0 / levels.raw_runs as f64).sqrt(),
            df,
            tail_df: f64::INFINITY,
        })
    }
}

/// A cell's levels in the history ([`MetricFit::cell_levels`]).
struct CellLevels {
    /// Run-adjusted mean over the window.
    cell: f64,
    /// Plain mean over the level runs (or the newest runs that have it).
    raw: f64,
    /// The runs `raw` averages.
    raw_runs: usize,
    /// The runs `cell` averages.
    n: f64,
}

/// A cell's candidate runs summed ([`MetricFit::boot_sums`]).
#[derive(Default)]
struct BootSums {
    /// Run-adjusted means.
    spec_sum: f64,
    /// Plain means.
    raw_sum: f64,
    /// Reciprocal repetition counts.
    reps_inv: f64,
    /// Throughput's within-run variance per repetition.
    within: f64,
}

/// Candidate run effects (same robust centre as the baseline's): each of the `j` runs' mean
/// change from the cells' centres, trimmed.
fn candidate_effects(cand_logs: &[Vec<Vec<f64>>], model: &noise::NoiseModel, j: usize) -> Vec<f64> {
    (0..j)
        .map(|run| {
            let mut v: Vec<f64> = cand_logs
                .iter()
                .zip(&model.cell_center)
                .filter(|(_, center)| center.is_finite())
                .map(|(logs, center)| mean(&logs[run]) - center)
                .collect();
            trimmed_mean(&mut v)
        })
        .collect()
}

/// The matrix-wide test's boot-to-boot noise `(σ, df)`. The candidate's own boots join the
/// boot noise (`with_boot_scatter`): a secondary metric's always (a busy host moves latency
/// alone, which throughput's plan did not see), throughput's on a history of fewer than
/// LATENCY_MIN_RUNS runs, where the prior speaks for most of it; from there on throughput's
/// is the history's, on which its plan and `stats-eval` are measured (one more df of 19 would
/// move them little).
fn matrix_noise(
    metric: Metric,
    model: &noise::NoiseModel,
    history_len: usize,
    cand_effect: &[f64],
) -> (f64, f64) {
    let (run_sigma, run_df) = model.run.sigma_df();
    if metric == Metric::AggregateTps && history_len >= LATENCY_MIN_RUNS {
        (run_sigma, run_df)
    } else {
        with_boot_scatter(run_sigma, run_df, cand_effect)
    }
}

/// The boot-to-boot noise `(σ, df)` of the run effect with the candidate's boots `effects`
/// in it: their scatter about their own mean is `j − 1` more draws of it, pooled with the
/// history's (valid whether or not the candidate changed: a change moves every boot alike).
/// Two boots that read a latency +0% and +20% are one draw of a 14% boot SD: the interval of
/// their mean widens with it instead of staying the history's ±1%.
fn with_boot_scatter(sigma: f64, df: f64, effects: &[f64]) -> (f64, f64) {
    let effects: Vec<f64> = effects.iter().copied().filter(|e| e.is_finite()).collect();
    if effects.len() < 2 || !sigma.is_finite() || !df.is_finite() || df <= 0.0 {
        return (sigma, df);
    }
    let extra = (effects.len() - 1) as f64;
    let pooled = (df * sigma * sigma + extra * var(&effects)) / (df + extra);
    (pooled.sqrt(), df + extra)
}

/// Each cell's own test: its change against the rest of its run, less the best linear
/// prediction of its row's effect on the candidate's boots from the mean change `o` of the
/// row's other cells, `w·o` with `w = V_row / (V_row + V_o)` (`V_row`: the row effect's
/// variance in the contrast, `σ_row²·(1/j + 1/n)`; `V_o`: the others' own noise in their
/// mean). The test's variance is what is left, `V_cell + (1 − w)²·V_row + w²·V_o`: the row
/// effect cancels where it is large against the cells' noise, and costs nothing where the
/// history shows none (`w = 0`). A change of the whole row is its row test's to find.
/// `parts[i]`: the cell's own noise variance and its row effect's, in the order of `tests`.
fn own_tests(tests: &mut [CellTest], parts: &[(f64, f64)], cells: &[Coord]) {
    let own: Vec<LogChange> = tests
        .iter()
        .zip(parts)
        .map(|(t, &(var_cell, var_row))| {
            let others: Vec<usize> = (0..tests.len())
                .filter(|&o| tests[o].cell != t.cell && cells[tests[o].cell].1 == cells[t.cell].1)
                .collect();
            if others.is_empty() || var_row <= 0.0 {
                return t.specific;
            }
            let m = others.len() as f64;
            let o = others
                .iter()
                .map(|&o| tests[o].specific.estimate)
                .sum::<f64>()
                / m;
            let var_o = others.iter().map(|&o| parts[o].0).sum::<f64>() / (m * m);
            let w = var_row / (var_row + var_o);
            LogChange {
                estimate: t.specific.estimate - w * o,
                se: (var_cell + (1.0 - w).powi(2) * var_row + w * w * var_o).sqrt(),
                ..t.specific
            }
        })
        .collect();
    for (t, own) in tests.iter_mut().zip(own) {
        t.own = own;
    }
}

/// The futility screen of one boot: whether its change leans worse at one-sided
/// p < [`FUTILITY_P`] (then the plan goes on: [`Check::beyond`]).
fn screen(change: &LogChange, dir: Direction, look: &str) -> Check {
    let q = change.quantile(1.0 - FUTILITY_P);
    let stat = change.statistic();
    let leans = signed(stat, dir) <= -q;
    Check {
        look: format!("{look}, futility screen"),
        statistic: stat,
        reference: change.reference(),
        boundary: signed(-q, dir),
        alpha: FUTILITY_P,
        screen: true,
        rejected: false,
        outcome: if leans {
            CheckOutcome::LeansWorse
        } else {
            CheckOutcome::DoesNotLeanWorse
        },
    }
}

/// A change found on both boots stands only if each boot alone shows it at the same `alpha`
/// and margin; else the first boot's test that does not is the line, and no change.
fn each_boot_shows(
    judged: (CellVerdict, Check),
    boots: [(Option<&LogChange>, LoneBoot); 2],
    dir: Direction,
    alpha: f64,
    margin: f64,
) -> (CellVerdict, Check) {
    let Some(found) = Found::of(judged.0) else {
        return judged;
    };
    for (change, boot) in boots {
        let Some(c) = change else { continue };
        let (v, mut check) = judge(c, dir, alpha, margin, boot.as_str());
        if v != judged.0 {
            check.rejected = false;
            check.outcome = CheckOutcome::BootDoesNotShow {
                found,
                boot,
                own: Box::new(check.outcome),
            };
            return (CellVerdict::Unchanged, check);
        }
    }
    judged
}

/// A gating latency's change found on both boots stands only if each boot alone's change is
/// beyond its design effect `margin` (log) and leans the same way past the futility screen:
/// the design effect is what a busy host does not reach on a boot, and one boot that reads it
/// cannot carry the mean of two. Else the first boot that does not is the line, and no change.
fn each_boot_exceeds(
    judged: (CellVerdict, Check),
    boots: [(Option<&LogChange>, LoneBoot); 2],
    dir: Direction,
    margin: f64,
) -> (CellVerdict, Check) {
    let Some(found) = Found::of(judged.0) else {
        return judged;
    };
    for (change, boot) in boots {
        let Some(c) = change else { continue };
        let beyond = match found {
            Found::Regression => signed(c.estimate, dir) <= -margin,
            Found::Improvement => signed(c.estimate, dir) >= margin,
        };
        let (v, mut check) = boot_leans(judged.clone(), Some(c), dir, boot);
        if v != judged.0 {
            return (v, check);
        }
        if !beyond {
            check = screen(c, dir, boot.as_str());
            check.rejected = false;
            check.outcome = CheckOutcome::BootWithinDesignEffect {
                found,
                boot,
                reads: relative(c.estimate),
                design_effect: relative(signed(-margin, dir)),
            };
            return (CellVerdict::Unchanged, check);
        }
    }
    judged
}

/// A regression (an improvement) at the both-boots look stands only if the boot `boot` alone
/// (the first or the second) leans worse (better) too in its own `change`, past the futility
/// screen: one wild boot cannot carry it. When it does not, the screen is the test's line, so
/// a reader can redo what decided it.
fn boot_leans(
    judged: (CellVerdict, Check),
    change: Option<&LogChange>,
    dir: Direction,
    boot: LoneBoot,
) -> (CellVerdict, Check) {
    use Direction::{HigherIsBetter, LowerIsBetter};
    let Some(found) = Found::of(judged.0) else {
        return judged;
    };
    // `screen` looks for a change worse in the direction it is given: an improvement's lean
    // is the other way.
    let toward = match (found, dir) {
        (Found::Regression, _) => dir,
        (Found::Improvement, HigherIsBetter) => LowerIsBetter,
        (Found::Improvement, LowerIsBetter) => HigherIsBetter,
    };
    let Some(c) = change else {
        return judged;
    };
    let mut check = screen(c, toward, boot.as_str());
    if check.beyond() {
        return judged;
    }
    check.outcome = CheckOutcome::BootDoesNotLean { found, boot };
    (CellVerdict::Unchanged, check)
}

/// At the plan's first boot ([`Look::local_provisional`]) a regression is provisional: its
/// verdict `inconclusive` until the second boot, and its test's line says so.
fn make_provisional(verdict: &mut CellVerdict, check: &mut Check) -> bool {
    if *verdict != CellVerdict::Regression {
        return false;
    }
    *verdict = CellVerdict::Inconclusive;
    if check.rejected {
        check.outcome = CheckOutcome::ProvisionalRegression;
    }
    true
}

/// Whether a cell's total change is measurably on the side of `verdict` (its interval excludes
/// no change): a cell is never called slower or faster than a baseline it is not measurably
/// slower or faster than, whatever its row, its column or the matrix did.
fn total_agrees(t: &CellTest, verdict: CellVerdict) -> bool {
    let dir = t.metric.direction();
    let (lo, hi) = t.total.interval(CONFIDENCE);
    let (a, b) = (signed(lo, dir), signed(hi, dir));
    match verdict {
        CellVerdict::Regression => a.max(b) < 0.0,
        CellVerdict::Improvement => a.min(b) > 0.0,
        _ => false,
    }
}

/// One metric's verdict in one cell, with its reason and the change it was decided on: its own
/// test (the cell against the rest of its run) when that found a change; else its row's or
/// column's, when the cell points the same way against its run; else the matrix's; else
/// unchanged. Each only where the cell's total agrees ([`total_agrees`]).
fn cell_decision(
    t: &CellTest,
    own: CellVerdict,
    line: Option<(&LineChange, CellVerdict)>,
    matrix: Option<(CellVerdict, f64)>,
) -> (CellVerdict, Option<CellReason>, DecidedChange) {
    let dir = t.metric.direction();
    let own_good = signed(t.specific.estimate, dir);
    let vs_run = decided_change(&t.own, DecisionBasis::VsRun, None);
    if total_agrees(t, own) {
        // Its figure (`decided_on`) says it all.
        return (own, None, vs_run);
    }
    if let Some((l, v)) = line
        && points(v, own_good)
        && total_agrees(t, v)
    {
        let why = CellReason::WithLine {
            axis: l.axis,
            at: l.at,
            metric: t.metric,
            line: decided_change(&l.change, DecisionBasis::VsRun, None),
            cell: vs_run.change,
        };
        let with_line = decided_change(&t.total, DecisionBasis::WithLine, None);
        return (v, Some(why), with_line);
    }
    if let Some((v, m)) = matrix
        && total_agrees(t, v)
    {
        let (why, with) = with_matrix(t.metric, &t.total, v, m);
        return (v, Some(why), with);
    }
    (CellVerdict::Unchanged, None, vs_run)
}

/// The change a cell's verdict was decided on, as reports show it (its 90% interval).
pub(super) fn decided_change(
    c: &LogChange,
    basis: DecisionBasis,
    matrix_change: Option<f64>,
) -> DecidedChange {
    let (lo, hi) = c.interval(CONFIDENCE);
    DecidedChange {
        basis,
        change: relative(c.estimate),
        ci_low: relative(lo),
        ci_high: relative(hi),
        matrix_change,
    }
}

/// A cell that follows the matrix-wide change `m` (relative, verdict `v`) its `total` points
/// to: its reason and the change shown (its total), which reports say once, by the matrix
/// test's line.
pub(super) fn with_matrix(
    metric: Metric,
    total: &LogChange,
    v: CellVerdict,
    m: f64,
) -> (CellReason, DecidedChange) {
    let with = decided_change(total, DecisionBasis::WithMatrix, Some(m));
    let why = CellReason::WithMatrix {
        metric,
        matrix: m,
        verdict: v,
        total: with.change,
    };
    (why, with)
}

/// A row's or column's improvement (regression) against the rest of its run stands only where
/// its cells' total change points the same way: a row is never called an improvement for being
/// better than the rest of its run when it is not faster than its baseline (a slowdown of the
/// other rows makes it so). Otherwise its line says so and the verdict is `unchanged`.
fn line_against_baseline(
    judged: (CellVerdict, Check),
    tests: &[&CellTest],
    metric: Metric,
    line: &LineChange,
) -> (CellVerdict, Check) {
    let (verdict, mut check) = judged;
    let Some(found) = Found::of(verdict) else {
        return (verdict, check);
    };
    let dir = metric.direction();
    let totals: Vec<f64> = tests
        .iter()
        .filter(|t| t.metric == metric && line.members.contains(&t.cell))
        .map(|t| t.total.estimate)
        .collect();
    if totals.is_empty() {
        return (verdict, check);
    }
    let total = mean(&totals);
    if points(verdict, signed(total, dir)) {
        return (verdict, check);
    }
    check.rejected = false;
    check.outcome = CheckOutcome::OnlyAgainstItsRun {
        found,
        total: relative(total),
    };
    (CellVerdict::Unchanged, check)
}

/// At the plan's first boot a secondary metric's change is not yet a change: a busy host
/// moves latency on one boot without touching throughput. A regression of a gating one is made
/// provisional by the caller (a second boot decides it); a regression of a reported-only one
/// is `inconclusive` (a metric that does not gate never calls for a boot: the second boot, where
/// the plan takes one, decides whether it is listed), and an improvement is `unchanged`
/// (gating) or `inconclusive` (reported-only), each with a line saying it moved on one boot.
/// None is listed as a change: a reader who wants latency decided on every gate makes it gate.
fn one_boot_secondary(verdict: &mut CellVerdict, check: &mut Check, gates: bool) {
    let found = *verdict;
    match found {
        CellVerdict::Regression if gates => {}
        CellVerdict::Regression | CellVerdict::Improvement => {
            check.rejected = false;
            check.outcome = CheckOutcome::OnOneBoot(Box::new(check.outcome.clone()));
            *verdict = if gates {
                CellVerdict::Unchanged
            } else {
                CellVerdict::Inconclusive
            };
        }
        _ => {}
    }
}

/// The observations behind a latency percentile of a cell when they are too few to compare
/// it ([`percentile_min_count`]), with the quantile.
fn thin_percentile(cell: &CellResult, metric: Metric) -> Option<(u64, f64)> {
    latency_percentile(cell, metric)
        .filter(|&(_, n, q)| n < percentile_min_count(q))
        .map(|(_, n, q)| (n, q))
}

/// What of the rule's gating metrics does not gate in this comparison, for people: a latency
/// percentile on a history shorter than `LATENCY_MIN_RUNS`, or in the cells whose candidate
/// runs have too few observations to bound it (those cells have no line of it).
fn not_gated(gate: Gating, comparable: &[Coord], candidate: &[RunResults]) -> Vec<NotGated> {
    let mut out = Vec::new();
    for &metric in gate
        .rule
        .metrics
        .iter()
        .filter(|m| m.is_latency_percentile())
    {
        if !gate.gates(metric) {
            out.push(
                gate.restarted_short(metric)
                    .unwrap_or(NotGated::ShortHistory {
                        metric,
                        runs: gate.runs_of(metric),
                        needs: LATENCY_MIN_RUNS,
                    }),
            );
            continue;
        }
        let thin: Vec<(u64, f64)> = comparable
            .iter()
            .filter_map(|&coord| {
                candidate
                    .iter()
                    .filter_map(|r| find(r, coord))
                    .filter_map(|c| thin_percentile(c, metric))
                    .min_by_key(|&(n, _)| n)
            })
            .collect();
        let Some(&(_, quantile)) = thin.first() else {
            continue;
        };
        out.push(NotGated::ThinCells {
            metric,
            cells: thin.len(),
            of: comparable.len(),
            fewest: thin.iter().map(|t| t.0).min().unwrap_or_default(),
            most: thin.iter().map(|t| t.0).max().unwrap_or_default(),
            quantile,
            needs: percentile_min_count(quantile),
        });
    }
    out
}

/// Compares candidate runs (1+ repetitions) with the accepted baseline runs of one profile
/// (oldest → newest) in one look ([`Look::single`]). The newest `history_runs` runs are the
/// model's history, the newest third of them the level. An empty baseline gives a
/// `no_baseline` report.
pub fn compare(
    baseline: &[RunResults],
    candidate: &[RunResults],
    rule: &DecisionRule,
) -> Result<ComparisonReport, StatsError> {
    compare_at(baseline, candidate, rule, &Look::single(rule))
}

/// [`compare`] at one look of the gate's plan.
pub fn compare_at(
    baseline: &[RunResults],
    candidate: &[RunResults],
    rule: &DecisionRule,
    look: &Look,
) -> Result<ComparisonReport, StatsError> {
    compare_on(&History::new(baseline), candidate, rule, look)
}

/// [`compare_at`] on a [`History`] that earlier looks of the gate may have fitted models on.
pub fn compare_on(
    models: &History,
    candidate: &[RunResults],
    rule: &DecisionRule,
    look: &Look,
) -> Result<ComparisonReport, StatsError> {
    let baseline = models.runs();
    let first = checked_inputs(baseline, candidate, rule, look)?;
    // Cell coordinates: the candidate's order, then cells only the baseline has.
    let coords = build::coords(candidate.iter().chain(baseline.iter().rev()));
    let history = &baseline[baseline.len() - baseline.len().min(rule.history_runs)..];
    let level_n = history.len().min(level_window(rule.history_runs));
    let level = &history[history.len() - level_n..];

    let mut report = report_frame(first, candidate, history, level, &models.metric_since, rule);
    if baseline.is_empty() {
        return Ok(no_baseline_report(report, &coords));
    }

    report.coverage = Some(coverage(&coords, level, candidate));
    let (decided, comparable) = cell_eligibility(&coords, history, level, candidate, rule);

    let layers = Layers::of(candidate, history);
    let gate = Gating {
        rule,
        history,
        metric_since: &models.metric_since,
        prefill_runs: layers.prefill_runs,
        burst_runs: layers.burst_runs,
    };
    let sample = Sample {
        rule,
        models,
        history,
        level_n,
        candidate,
        second_from: look.second_boot_from,
    };
    let mut fits = fit_metrics(&sample, &comparable, &layers, gate);
    // The layers have no matrix-wide test: each context's (or the burst's) own test is on its
    // total change already.
    let matrices: BTreeMap<Metric, MatrixChange> = fits
        .iter_mut()
        .filter(|f| !f.metric.is_layer())
        .filter_map(|f| Some((f.metric, f.matrix.take()?)))
        .collect();
    let tests: Vec<&CellTest> = fits.iter().flat_map(|f| &f.tests).collect();

    let plan = Plan {
        rule,
        look,
        gate,
        alpha: Alphas::of(look, gate, &fits, &tests, &matrices, &comparable),
    };
    plan.record_shares(&mut report);
    report.not_gated = not_gated(gate, &comparable, candidate);
    report.cell_metrics_gated = build::cell_metrics_gated(rule, |m| gate.gates(m));
    report.host_late = host_late_cells(rule, &report.cell_metrics_gated, &comparable, candidate);
    report.history_host_late =
        history_host_late(rule, &report.cell_metrics_gated, &comparable, history);
    layers_not_gated(&mut report.not_gated, gate, &layers, candidate);

    let own = plan.own_verdicts(&tests);
    let lines = lines_of_unmoved_cells(&fits, &comparable, &tests, &own);
    let line_verdicts = plan.line_verdicts(&lines, &tests);
    report.lines = plan.line_tests(&lines, &line_verdicts);
    let matrix_verdicts = plan.matrix_verdicts(&matrices);
    report.matrix_test = throughput_matrix_test(&matrices, &matrix_verdicts);

    let broader = BroaderVerdicts {
        lines: &lines,
        line_verdicts: &line_verdicts,
        matrices: &matrices,
        matrix_verdicts: &matrix_verdicts,
    };
    let mut entries = plan.cell_entries(&tests, own, &broader);
    report.sensitivity = Some(plan.sensitivity(history.len(), &matrices, &tests, &comparable));
    push_matrix_cells(&mut report, &coords, decided, &mut entries, gate);
    push_layer_cells(&mut report, candidate, &layers, &mut entries, gate);
    build::finish(&mut report);
    Ok(report)
}

/// Each cell's decision where it cannot be compared ([`eligibility`]; `None` where it can),
/// in the order of `coords`, and the comparable cells.
fn cell_eligibility(
    coords: &[Coord],
    history: &[RunResults],
    level: &[RunResults],
    candidate: &[RunResults],
    rule: &DecisionRule,
) -> (Vec<Option<LimitDecision>>, Vec<Coord>) {
    let capacity_alpha = rule.capacity_alpha();
    let decided: Vec<Option<LimitDecision>> = coords
        .iter()
        .map(|&c| {
            eligibility(
                c,
                history,
                level,
                candidate,
                capacity_alpha,
                Against::Baseline,
            )
        })
        .collect();
    let comparable: Vec<Coord> = coords
        .iter()
        .zip(&decided)
        .filter(|(_, d)| d.is_none())
        .map(|(&c, _)| c)
        .collect();
    (decided, comparable)
}

/// Throughput's matrix-wide test as the report lists it, where it has one.
fn throughput_matrix_test(
    matrices: &BTreeMap<Metric, MatrixChange>,
    matrix_verdicts: &BTreeMap<Metric, (CellVerdict, Check)>,
) -> Option<MatrixTest> {
    let m = matrices.get(&Metric::AggregateTps)?;
    let (v, check) = matrix_verdicts[&Metric::AggregateTps].clone();
    Some(build::matrix_test(
        &m.change,
        v,
        m.cells,
        MATRIX_MARGIN,
        check,
    ))
}

/// The rule and the look must be usable, the candidate must have a run, and every run (of
/// either side) must be of the candidate's first run's profile; returns that first run.
fn checked_inputs<'c>(
    baseline: &[RunResults],
    candidate: &'c [RunResults],
    rule: &DecisionRule,
    look: &Look,
) -> Result<&'c RunResults, StatsError> {
    rule.validate()?;
    if look.local_alpha.is_nan() || look.local_alpha <= 0.0 {
        let why = format!("look `{}` has local alpha {}", look.name, look.local_alpha);
        return Err(StatsError::InvalidRule(why));
    }
    let first = candidate.first().ok_or(StatsError::NoCandidate)?;
    for run in candidate.iter().chain(baseline) {
        if run.profile.key != first.profile.key {
            return Err(StatsError::ProfileMismatch {
                baseline: run.profile.key.clone(),
                candidate: first.profile.key.clone(),
                run_id: run.run_id.clone(),
            });
        }
    }
    Ok(first)
}

/// The report's frame: the candidate's profile and runs, and the history and level runs.
fn report_frame(
    first: &RunResults,
    candidate: &[RunResults],
    history: &[RunResults],
    level: &[RunResults],
    metric_since: &[MetricSince],
    rule: &DecisionRule,
) -> ComparisonReport {
    build::frame(
        first.profile.clone(),
        first.suite.clone(),
        candidate.iter().map(|r| r.run_id.clone()).collect(),
        BaselineSummary {
            level_runs: level.iter().map(|r| r.run_id.clone()).collect(),
            noise_runs: history.len(),
            metric_since: metric_since.to_vec(),
            runs: history.iter().map(|r| r.run_id.clone()).collect(),
        },
        rule,
    )
}

/// The report of an empty baseline: every cell `not_comparable`, for want of a baseline.
fn no_baseline_report(mut report: ComparisonReport, coords: &[Coord]) -> ComparisonReport {
    let none = CellReason::NoBaseline;
    let decided = || {
        Some(LimitDecision::settled(
            CellVerdict::NotComparable,
            none.clone(),
        ))
    };
    report.cells = coords
        .iter()
        .map(|&c| build::cell(c, decided(), Vec::new(), |_| true, none.clone()))
        .collect();
    build::finish(&mut report);
    report
}

/// The prefill and burst layers of a comparison: their cells, and how many of the history's
/// runs have each (runs recorded before a layer existed still count for the decode cells).
struct Layers {
    prefill_cells: Vec<Coord>,
    prefill_runs: usize,
    /// One entry, (0, 0), where either side sent a burst.
    burst_cells: Vec<Coord>,
    burst_runs: usize,
}

impl Layers {
    fn of(candidate: &[RunResults], history: &[RunResults]) -> Layers {
        let prefill_cells = prefill_coords(candidate.iter().chain(history.iter().rev()));
        let prefill_runs = history
            .iter()
            .filter(|r| {
                prefill_cells
                    .iter()
                    .any(|c| prefill_value(r, c.1).is_some())
            })
            .count();
        let burst_cells: Vec<Coord> = if candidate.iter().chain(history).any(|r| r.burst.is_some())
        {
            vec![(0, 0)]
        } else {
            Vec::new()
        };
        // Runs whose burst completed (a metric restarted alone counts fewer: [`Gating`]).
        let burst_runs = history
            .iter()
            .filter(|r| r.burst.as_ref().is_some_and(|b| b.all_completed()))
            .count();
        Layers {
            prefill_cells,
            prefill_runs,
            burst_cells,
            burst_runs,
        }
    }
}

/// Which metrics gate in this comparison: the rule's, on the history runs that have each
/// metric (a layer counts only the runs that have it, a metric restarted alone only the runs
/// since its accepted change).
#[derive(Clone, Copy)]
struct Gating<'a> {
    rule: &'a DecisionRule,
    history: &'a [RunResults],
    metric_since: &'a [MetricSince],
    prefill_runs: usize,
    burst_runs: usize,
}

impl Gating<'_> {
    /// How many history runs `m` is judged on.
    fn runs_of(&self, m: Metric) -> usize {
        let runs = if m == Metric::PrefillTps {
            self.prefill_runs
        } else if m.is_burst() {
            self.burst_runs
        } else {
            self.history.len()
        };
        let since = (self.metric_since.iter().find(|s| s.metric == m)).map(|s| {
            let since = |r: &&RunResults| r.started_at >= s.since_started_at;
            self.history.iter().filter(since).count()
        });
        since.map_or(runs, |n| n.min(runs))
    }

    fn gates(&self, m: Metric) -> bool {
        self.rule.gates(m, self.runs_of(m))
    }

    /// Why `m`, which the rule lists and its history runs would gate, does not gate: restarted
    /// alone on too few runs since ([`NotGated::RestartedShort`]).
    fn restarted_short(&self, m: Metric) -> Option<NotGated> {
        (self.metric_since.iter().any(|s| s.metric == m) && !self.gates(m)).then(|| {
            NotGated::RestartedShort {
                metric: m,
                runs: self.runs_of(m),
                needs: LATENCY_MIN_RUNS,
            }
        })
    }
}

/// The runs one look tests on: the history (and the models fitted on it), its level runs and
/// the candidate's, the second boot's from `second_from`.
struct Sample<'a> {
    rule: &'a DecisionRule,
    models: &'a History<'a>,
    history: &'a [RunResults],
    level_n: usize,
    candidate: &'a [RunResults],
    second_from: Option<usize>,
}

/// Every metric's tests: each of [`ALL_METRICS`] on the comparable cells (lines for the gating
/// throughput only), then the prefill layer's contexts and the burst's metrics.
fn fit_metrics(
    s: &Sample,
    comparable: &[Coord],
    layers: &Layers,
    gate: Gating,
) -> Vec<MetricTests> {
    let test =
        |metric: Metric, cells: &[Coord], gating: bool| test_metric(metric, cells, s, gating);
    let mut fits: Vec<MetricTests> = ALL_METRICS
        .into_iter()
        .map(|metric| {
            test(
                metric,
                comparable,
                metric == Metric::AggregateTps && gate.gates(metric),
            )
        })
        .collect();
    fits.push(test(Metric::PrefillTps, &layers.prefill_cells, false));
    for metric in [Metric::BurstTps, Metric::BurstTtftP90] {
        fits.push(test(metric, &layers.burst_cells, false));
    }
    fits
}

/// Whether a metric is of the secondary family (anything but the gating throughput).
fn is_secondary(m: Metric) -> bool {
    m != Metric::AggregateTps
}

/// Each family's alpha at this look.
///
/// The secondary metrics (latency, per-user tok/s, ...) are one family of their own at
/// SECONDARY_SHARE of this look's speed alpha: half to their matrix-wide tests, half to
/// their (metric, cell) tests. When one of them gates, throughput's families keep the rest
/// (the gate's false alarms add up to `alpha`); when none does, throughput keeps its whole
/// alpha and the secondary lines are listed at that share.
struct Alphas {
    /// Whether a secondary metric gates (and so takes its share of the alpha).
    secondary_gates: bool,
    /// The share of its alpha throughput keeps.
    keep: f64,
    throughput_matrix: Option<f64>,
    secondary: SecondaryAlphas,
    /// The lines' share of throughput's local alpha.
    line_share: f64,
    /// Each throughput cell test's alpha.
    cell: f64,
    /// Each row's and column's test's alpha.
    line: f64,
}

impl Alphas {
    fn of(
        look: &Look,
        gate: Gating,
        fits: &[MetricTests],
        tests: &[&CellTest],
        matrices: &BTreeMap<Metric, MatrixChange>,
        comparable: &[Coord],
    ) -> Alphas {
        let secondary_gates = fits.iter().any(|f| {
            f.metric != Metric::AggregateTps && gate.gates(f.metric) && !f.tests.is_empty()
        });
        let keep = if secondary_gates {
            1.0 - SECONDARY_SHARE
        } else {
            1.0
        };
        let local_alpha = look.local_alpha * keep;
        // Throughput's local family at this look: the lines share LINE_SHARE of its alpha, the
        // cells the rest (Bonferroni: each test its own fixed share). The plan's lines are those
        // of every comparable cell, whichever cells their contrasts come to leave out.
        let n_lines: usize = fits
            .iter()
            .map(|f| f.lines(comparable, |_| true).len())
            .sum();
        let n_cells = tests
            .iter()
            .filter(|t| t.metric == Metric::AggregateTps)
            .count()
            .max(1);
        let line_share = if n_lines > 0 { LINE_SHARE } else { 0.0 };
        Alphas {
            secondary_gates,
            keep,
            throughput_matrix: look.matrix_alpha.map(|a| a * keep),
            secondary: SecondaryAlphas::of(look, gate, tests, matrices),
            line_share,
            cell: local_alpha * (1.0 - line_share) / n_cells as f64,
            line: local_alpha * line_share / n_lines.max(1) as f64,
        }
    }
}

/// The secondary family's alphas: each layer test's, each (metric, cell) test's, and each
/// matrix-wide test's.
struct SecondaryAlphas {
    layer_test: f64,
    cell: f64,
    /// A reported-only metric's matrix-wide test.
    matrix: f64,
    /// A gating metric's matrix-wide test.
    gating_matrix: f64,
}

impl SecondaryAlphas {
    fn of(
        look: &Look,
        gate: Gating,
        tests: &[&CellTest],
        matrices: &BTreeMap<Metric, MatrixChange>,
    ) -> SecondaryAlphas {
        let secondary_alpha =
            (look.local_alpha + look.matrix_alpha.unwrap_or(look.local_alpha)) * SECONDARY_SHARE;
        // The layers, where measured, take half of the secondary family's alpha (the prefill
        // contexts' and the burst's tests together, Bonferroni), the latency and other metrics
        // the other half.
        let n_layer = tests.iter().filter(|t| t.metric.is_layer()).count();
        let (layer_alpha, secondary_alpha) = if n_layer > 0 {
            (secondary_alpha / 2.0, secondary_alpha / 2.0)
        } else {
            (0.0, secondary_alpha)
        };
        let n_secondary_cells = tests
            .iter()
            .filter(|t| is_secondary(t.metric) && !t.metric.is_layer())
            .count();
        let n_secondary_matrices = matrices.keys().filter(|m| is_secondary(**m)).count();
        // The gating ones alone can fail the gate, so they share the matrix-wide half among
        // themselves (the union bound counts only them); a reported-only one is listed at its
        // share of all of them, as before.
        let n_gating_matrices = matrices
            .keys()
            .filter(|m| is_secondary(**m) && gate.gates(**m))
            .count();
        SecondaryAlphas {
            layer_test: layer_alpha / n_layer.max(1) as f64,
            cell: secondary_alpha / 2.0 / n_secondary_cells.max(1) as f64,
            matrix: secondary_alpha / 2.0 / n_secondary_matrices.max(1) as f64,
            gating_matrix: secondary_alpha / 2.0 / n_gating_matrices.max(1) as f64,
        }
    }
}

/// What one comparison judges its tests by: the rule, the look, which metrics gate, and
/// each family's alpha.
struct Plan<'a> {
    rule: &'a DecisionRule,
    look: &'a Look,
    gate: Gating<'a>,
    alpha: Alphas,
}

/// The rows', columns' and matrix-wide tests a cell's verdict may follow.
struct BroaderVerdicts<'a> {
    lines: &'a [(Metric, LineChange)],
    line_verdicts: &'a [(CellVerdict, Check)],
    matrices: &'a BTreeMap<Metric, MatrixChange>,
    matrix_verdicts: &'a BTreeMap<Metric, (CellVerdict, Check)>,
}

impl BroaderVerdicts<'_> {
    /// The line of a (metric, cell) that moved (a regression before an improvement).
    fn moved_line(&self, metric: Metric, cell: usize) -> Option<(&LineChange, CellVerdict)> {
        [CellVerdict::Regression, CellVerdict::Improvement]
            .into_iter()
            .find_map(|want| {
                self.lines
                    .iter()
                    .zip(self.line_verdicts)
                    .find(|((m, l), v)| *m == metric && v.0 == want && l.members.contains(&cell))
                    .map(|((_, l), _)| (l, want))
            })
    }

    /// A metric's matrix-wide verdict where it found a change, with the change (relative).
    fn matrix(&self, metric: Metric) -> Option<(CellVerdict, f64)> {
        self.matrix_verdicts
            .get(&metric)
            .filter(|(v, _)| *v != CellVerdict::Unchanged)
            .zip(self.matrices.get(&metric))
            .map(|((v, _), m)| (*v, relative(m.change.estimate)))
    }
}

/// One test's comparison and the reason of its verdict, where its figure does not say it all.
type Entry = (MetricComparison, Option<CellReason>);

/// Each metric comparison of the comparable cells and of the layers, by index into their
/// cells, and the cells whose regression is provisional at this look.
#[derive(Default)]
struct CellEntries {
    per_cell: BTreeMap<usize, Vec<Entry>>,
    /// The prefill layer's entries, by index into its cells.
    per_prefill: BTreeMap<usize, Vec<Entry>>,
    /// The burst layer's entries (its one cell).
    per_burst: BTreeMap<usize, Vec<Entry>>,
    provisional_local: Vec<usize>,
    provisional_prefill: Vec<usize>,
    provisional_burst: Vec<usize>,
}

impl CellEntries {
    /// Files one test's comparison (and reason) under its cell, in the matrix or its layer.
    fn add(&mut self, t: &CellTest, provisional: bool, entry: Entry) {
        let (entries, provisional_cells) = if t.metric == Metric::PrefillTps {
            (&mut self.per_prefill, &mut self.provisional_prefill)
        } else if t.metric.is_burst() {
            (&mut self.per_burst, &mut self.provisional_burst)
        } else {
            (&mut self.per_cell, &mut self.provisional_local)
        };
        if provisional {
            provisional_cells.push(t.cell);
        }
        entries.entry(t.cell).or_default().push(entry);
    }
}

impl Plan<'_> {
    /// The alpha of one (metric, cell) test.
    fn test_alpha(&self, m: Metric) -> f64 {
        if m.is_layer() {
            self.alpha.secondary.layer_test
        } else if is_secondary(m) {
            self.alpha.secondary.cell
        } else {
            self.alpha.cell
        }
    }

    /// The rule's shares in the report, as this comparison spends them.
    fn record_shares(&self, report: &mut ComparisonReport) {
        if let Some(s) = report.rule.shares.as_mut() {
            if self.alpha.secondary_gates {
                s.matrix *= self.alpha.keep;
                s.local *= self.alpha.keep;
                s.secondary =
                    Some(self.rule.alpha * (1.0 - super::rule::CAPACITY_SHARE) * SECONDARY_SHARE);
            }
            s.lines = s.local * self.alpha.line_share;
        }
    }

    /// Each cell's own test (against the rest of its run), in the order of `tests`: what it
    /// found, and its verdict after the second boot's screen.
    fn own_verdicts(&self, tests: &[&CellTest]) -> Vec<(CellVerdict, CellVerdict, Check)> {
        tests
            .iter()
            .map(|t| {
                let dir = t.metric.direction();
                let (alpha, margin) =
                    (self.test_alpha(t.metric), self.rule.log_margin_of(t.metric));
                let look = &self.look.name;
                let judged = match t.each_boot() {
                    Some((first, second)) => {
                        judge_each_boot(first, second, &t.own, dir, alpha, margin, look)
                    }
                    None => judge(&t.own, dir, alpha, margin, look),
                };
                let found = judged.0;
                let (v, c) = boot_leans(judged, t.second.as_ref(), dir, LoneBoot::Second);
                (found, v, c)
            })
            .collect()
    }

    /// Each line's verdict: its test, the second boot's screen, and its cells' total change.
    fn line_verdicts(
        &self,
        lines: &[(Metric, LineChange)],
        tests: &[&CellTest],
    ) -> Vec<(CellVerdict, Check)> {
        let margin = self.rule.log_margin_of(Metric::AggregateTps);
        lines
            .iter()
            .map(|(metric, l)| {
                let dir = metric.direction();
                let judged = judge(&l.change, dir, self.alpha.line, margin, &self.look.name);
                let judged = boot_leans(judged, l.second.as_ref(), dir, LoneBoot::Second);
                line_against_baseline(judged, tests, *metric, l)
            })
            .collect()
    }

    /// The report's lines: throughput's rows and columns with their verdicts.
    fn line_tests(
        &self,
        lines: &[(Metric, LineChange)],
        line_verdicts: &[(CellVerdict, Check)],
    ) -> Vec<LineTest> {
        lines
            .iter()
            .zip(line_verdicts)
            .filter(|((m, _), _)| *m == Metric::AggregateTps)
            .map(|((_, l), (verdict, check))| {
                let (mut verdict, mut check) = (*verdict, check.clone());
                if self.look.local_provisional {
                    make_provisional(&mut verdict, &mut check);
                }
                LineTest {
                    axis: l.axis,
                    at: l.at,
                    test: build::matrix_test(
                        &l.change,
                        verdict,
                        l.members.len(),
                        self.rule.min_effect,
                        check,
                    ),
                }
            })
            .collect()
    }

    /// The matrix-wide test of each metric: final at this look's matrix alpha, or the
    /// futility screen (never a regression by itself).
    fn matrix_verdicts(
        &self,
        matrices: &BTreeMap<Metric, MatrixChange>,
    ) -> BTreeMap<Metric, (CellVerdict, Check)> {
        matrices
            .iter()
            .map(|(&metric, m)| (metric, self.matrix_verdict(metric, m)))
            .collect()
    }

    /// One metric's matrix-wide verdict ([`Plan::matrix_verdicts`]).
    fn matrix_verdict(&self, metric: Metric, m: &MatrixChange) -> (CellVerdict, Check) {
        let dir = metric.direction();
        let look = &self.look.name;
        let matrix_margin = log_margin(MATRIX_MARGIN);
        let gating = self.gate.gates(metric);
        // A secondary metric's matrix-wide test is judged at every look (at the first boot
        // its regression is provisional, below): no futility screen of its own decides
        // the plan's second boot.
        let alpha = if is_secondary(metric) && gating {
            Some(self.alpha.secondary.gating_matrix)
        } else if is_secondary(metric) {
            Some(self.alpha.secondary.matrix)
        } else {
            self.alpha.throughput_matrix
        };
        let boots = [
            (m.first_boot.as_ref(), LoneBoot::First),
            (m.second_boot.as_ref(), LoneBoot::Second),
        ];
        match alpha {
            Some(a) if is_secondary(metric) && gating && self.rule.has_design_effect(metric) => {
                self.gating_latency_matrix_verdict(metric, m, a)
            }
            Some(a) if is_secondary(metric) => {
                // Each boot alone must show a secondary metric's change at the same alpha
                // (an intersection–union test: its level is that alpha), so one busy boot,
                // first or second, cannot carry it whatever the other boot read by chance.
                let judged = judge(&m.change, dir, a, matrix_margin, look);
                each_boot_shows(judged, boots, dir, a, matrix_margin)
            }
            Some(a) => {
                // Each boot alone must lean worse past the futility screen: the first boot
                // need not have (a cell can earn the second boot), and one slow boot with the
                // other at no change must not carry the mean of two.
                let judged = judge(&m.change, dir, a, matrix_margin, look);
                let judged = boot_leans(judged, m.first_boot.as_ref(), dir, LoneBoot::First);
                boot_leans(judged, m.second_boot.as_ref(), dir, LoneBoot::Second)
            }
            None => (CellVerdict::Unchanged, screen(&m.change, dir, look)),
        }
    }

    /// The matrix-wide verdict of a gating latency with a design effect: its rise on both
    /// boots at alpha `a` beyond the design effect, which each boot alone must show too (its
    /// point change beyond it, leaning worse past the futility screen). A uniform rise of
    /// every cell is a run effect, which the cell tests take out; against the history's
    /// run-to-run spread and the design effect, a busy host's rise (+16% at C=1) does not
    /// reach a +50% one.
    fn gating_latency_matrix_verdict(
        &self,
        metric: Metric,
        m: &MatrixChange,
        a: f64,
    ) -> (CellVerdict, Check) {
        let dir = metric.direction();
        let margin = self.rule.log_margin_of(metric);
        // At the plan's first boot (throughput's matrix test only screens there) it is
        // screened as throughput is, at FUTILITY_P: its alarm is only provisional (a second
        // boot decides, at this alpha), so the first boot spends none and a noisy tail's alarm
        // is not lost before the second.
        let a = if self.look.matrix_alpha.is_none() {
            FUTILITY_P
        } else {
            a
        };
        let judged = judge(&m.change, dir, a, margin, &self.look.name);
        let boots = [
            (m.first_boot.as_ref(), LoneBoot::First),
            (m.second_boot.as_ref(), LoneBoot::Second),
        ];
        each_boot_exceeds(judged, boots, dir, margin)
    }

    /// Every test's comparison, filed under its cell ([`CellEntries`]).
    fn cell_entries(
        &self,
        tests: &[&CellTest],
        own: Vec<(CellVerdict, CellVerdict, Check)>,
        broader: &BroaderVerdicts,
    ) -> CellEntries {
        let mut entries = CellEntries::default();
        for (t, (_, own, check)) in tests.iter().zip(own) {
            let (mut verdict, mut check, why, decided_on) =
                self.cell_verdict(t, own, check, broader);
            let provisional = self.look.local_provisional
                && self.gate.gates(t.metric)
                && make_provisional(&mut verdict, &mut check);
            let comparison = self.metric_comparison(t, verdict, check, decided_on);
            entries.add(t, provisional, (comparison, why));
        }
        entries
    }

    /// One test's verdict, its test's line, its reason and the change it was decided on: its
    /// own test's verdict `own`, or its line's or the matrix's ([`cell_decision`]), as a
    /// reported-only or first-boot secondary metric may claim it.
    fn cell_verdict(
        &self,
        t: &CellTest,
        own: CellVerdict,
        mut check: Check,
        broader: &BroaderVerdicts,
    ) -> (CellVerdict, Check, Option<CellReason>, DecidedChange) {
        let dir = t.metric.direction();
        let (mut verdict, why, decided_on) = cell_decision(
            t,
            own,
            broader.moved_line(t.metric, t.cell),
            broader.matrix(t.metric),
        );
        note_overruled(
            &mut check,
            own,
            verdict,
            &t.total,
            Against::Baseline,
            &decided_on,
        );
        let gating = self.gate.gates(t.metric);
        if !gating {
            reported_only(&mut check, own, dir);
        } else if is_secondary(t.metric)
            && verdict == CellVerdict::Regression
            && decided_on.basis == DecisionBasis::WithMatrix
            && let Some((_, matrix_check)) = broader.matrix_verdicts.get(&t.metric)
        {
            // A gating secondary metric has no matrix-wide test of its own in the report
            // (throughput's is `matrix_test`): the cell carries the test that decided it, so
            // the tests that decided the gate list it with its boundary.
            let own = Box::new(check.outcome);
            check = matrix_check.clone();
            check.look = format!("{}, matrix-wide", check.look);
            check.outcome = CheckOutcome::MatrixWide {
                matrix: Box::new(check.outcome),
                own,
            };
        }
        if self.look.local_provisional && is_secondary(t.metric) {
            one_boot_secondary(&mut verdict, &mut check, gating);
        }
        (verdict, check, why, decided_on)
    }

    /// One test's comparison as the report lists it.
    fn metric_comparison(
        &self,
        t: &CellTest,
        verdict: CellVerdict,
        check: Check,
        decided_on: DecidedChange,
    ) -> MetricComparison {
        let dir = t.metric.direction();
        let (lo, hi) = t.total.interval(CONFIDENCE);
        // The p of the test that decided the cell: each boot's, or both boots' mean.
        let p = t.each_boot().map_or_else(
            || t.own.p_worse(dir),
            |(a, b)| each_boot_p(a, b, &t.own, dir),
        );
        MetricComparison {
            metric: t.metric,
            direction: dir,
            baseline: t.baseline,
            candidate: t.candidate,
            change: relative(t.total.estimate),
            ci_low: relative(lo),
            ci_high: relative(hi),
            margin: self.rule.min_effect_of(t.metric),
            p_value: p,
            p_adjusted: (p * self.look.local_alpha / self.test_alpha(t.metric)).min(1.0),
            verdict,
            check: Some(check),
            decided_on: Some(decided_on),
        }
    }

    /// Throughput's plan at the alpha it keeps.
    fn sensitivity(
        &self,
        history_runs: usize,
        matrices: &BTreeMap<Metric, MatrixChange>,
        tests: &[&CellTest],
        comparable: &[Coord],
    ) -> Sensitivity {
        let throughput_rule = DecisionRule {
            alpha: self.rule.alpha * self.alpha.keep,
            ..self.rule.clone()
        };
        sensitivity::assess(
            &throughput_rule,
            self.look.design_boots,
            history_runs,
            matrices.get(&Metric::AggregateTps).map(|m| &m.design),
            tests
                .iter()
                .filter(|t| t.metric == Metric::AggregateTps)
                .map(|t| (comparable[t.cell], t.own))
                .collect(),
            self.alpha.cell,
        )
    }
}

/// What the layers do not gate on, for people: a layer on a history with too few runs of
/// it, or a burst TTFT p90 of too few completed requests.
fn layers_not_gated(
    notes: &mut Vec<NotGated>,
    gate: Gating,
    layers: &Layers,
    candidate: &[RunResults],
) {
    let rule = gate.rule;
    // A layer the rule lists that neither side measured vouches for nothing: said, so a
    // green check does not read as covering it (the suite sends no burst, a matrix of
    // context 0 has no prefill to sample).
    if rule.metrics.contains(&Metric::PrefillTps) && layers.prefill_cells.is_empty() {
        notes.push(NotGated::PrefillNotMeasured);
    }
    if rule.metrics.contains(&Metric::PrefillTps)
        && !gate.gates(Metric::PrefillTps)
        && !layers.prefill_cells.is_empty()
    {
        notes.push(gate.restarted_short(Metric::PrefillTps).unwrap_or(
            NotGated::PrefillShortHistory {
                runs: layers.prefill_runs,
                needs: LATENCY_MIN_RUNS,
            },
        ));
    }
    let burst_listed = [Metric::BurstTps, Metric::BurstTtftP90]
        .into_iter()
        .filter(|m| rule.metrics.contains(m))
        .collect::<Vec<_>>();
    if !burst_listed.is_empty() && layers.burst_cells.is_empty() {
        notes.push(NotGated::BurstNotMeasured);
    }
    if burst_listed.is_empty() || layers.burst_cells.is_empty() {
        return;
    }
    if layers.burst_runs < LATENCY_MIN_RUNS {
        notes.push(NotGated::BurstShortHistory {
            runs: layers.burst_runs,
            needs: LATENCY_MIN_RUNS,
        });
        return;
    }
    notes.extend(burst_listed.iter().filter_map(|&m| gate.restarted_short(m)));
    if burst_listed.contains(&Metric::BurstTtftP90)
        && let Some(n) = candidate
            .iter()
            .filter_map(|r| r.burst.as_ref())
            .filter_map(|b| b.ttft_s.map(|t| t.count))
            .find(|n| *n < percentile_min_count(0.9))
    {
        notes.push(NotGated::BurstThin {
            completed: n,
            needs: percentile_min_count(0.9),
        });
    }
}

/// The row and column contrasts, of the cells in which their own test found no change (a
/// change the second boot did not show is that cell's one wild boot, not its line's).
fn lines_of_unmoved_cells(
    fits: &[MetricTests],
    comparable: &[Coord],
    tests: &[&CellTest],
    own: &[(CellVerdict, CellVerdict, Check)],
) -> Vec<(Metric, LineChange)> {
    let alone: Vec<(Metric, usize)> = tests
        .iter()
        .zip(own)
        .filter(|(t, (found, _, _))| total_agrees(t, *found))
        .map(|(t, _)| (t.metric, t.cell))
        .collect();
    fits.iter()
        .flat_map(|f| {
            f.lines(comparable, |t| !alone.contains(&(t.metric, t.cell)))
                .into_iter()
                .map(|l| (f.metric, l))
        })
        .collect()
}

/// The report's matrix cells, in the order of `coords`: a decided cell with its decision, a
/// comparable one with its entries.
fn push_matrix_cells(
    report: &mut ComparisonReport,
    coords: &[Coord],
    decided: Vec<Option<LimitDecision>>,
    entries: &mut CellEntries,
    gate: Gating,
) {
    let gating = |m: Metric| gate.gates(m);
    let mut comparable_idx = 0usize;
    for (&coord, decision) in coords.iter().zip(decided) {
        let none = CellReason::NothingCompared {
            layer: Layer::Decode,
            against: Against::Baseline,
        };
        let cell = match decision {
            Some(d) => build::cell(coord, Some(d), Vec::new(), gating, none),
            None => {
                let i = comparable_idx;
                comparable_idx += 1;
                let cell_entries = entries.per_cell.remove(&i).unwrap_or_default();
                let mut cell = build::cell(coord, None, cell_entries, gating, none);
                cell.provisional = entries.provisional_local.contains(&i);
                cell
            }
        };
        report.cells.push(cell);
    }
}

/// The report's prefill and burst layers, and whether each gates.
fn push_layer_cells(
    report: &mut ComparisonReport,
    candidate: &[RunResults],
    layers: &Layers,
    entries: &mut CellEntries,
    gate: Gating,
) {
    let gating = |m: Metric| gate.gates(m);
    // The prefill layer: each context's entry; a candidate figure the engine's counters
    // disagree with is not compared, and fails the gate closed where the layer gates.
    for (i, &coord) in layers.prefill_cells.iter().enumerate() {
        let refused = candidate
            .iter()
            .find_map(|r| prefill_disagrees(r, coord.1))
            .map(|why| (NotCompared::PrefillCountersDisagree, why));
        report.prefill.push(layer_cell(
            coord,
            refused,
            entries.per_prefill.remove(&i).unwrap_or_default(),
            entries.provisional_prefill.contains(&i),
            gating,
            CellReason::NothingCompared {
                layer: Layer::Prefill,
                against: Against::Baseline,
            },
        ));
    }
    report.prefill_gated = gating(Metric::PrefillTps);
    // The burst layer: its one entry; a candidate burst whose requests did not all complete
    // is not compared, and fails the gate closed where the layer gates.
    for (i, &coord) in layers.burst_cells.iter().enumerate() {
        let refused = candidate
            .iter()
            .find_map(burst_incomplete)
            .map(|why| (NotCompared::BurstIncomplete, why));
        report.burst.push(layer_cell(
            coord,
            refused,
            entries.per_burst.remove(&i).unwrap_or_default(),
            entries.provisional_burst.contains(&i),
            |m: Metric| m.is_burst() && gating(m),
            CellReason::NothingCompared {
                layer: Layer::Burst,
                against: Against::Baseline,
            },
        ));
    }
    report.burst_metrics_gated = [Metric::BurstTps, Metric::BurstTtftP90]
        .into_iter()
        .filter(|&m| gating(m))
        .collect();
    report.burst_gated = !report.burst_metrics_gated.is_empty();
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::answer::first_line;
    use infergate_schema::asserts::{assert_first_line, assert_gate, assert_not_gate};
    use infergate_schema::verdict::{ConfirmationReason, LimitFinding};

    /// The verdict over the boots given, as the judge replays them (and whether the second
    /// boot entered it).
    fn two_boot_verdict(
        rule: &DecisionRule,
        baseline: &[RunResults],
        first: &RunResults,
        second: Option<(&RunResults, &str)>,
    ) -> (ComparisonReport, bool) {
        let history = std::sync::Arc::new(History::new(baseline));
        let plan = crate::stats::Plan::default();
        let second = second.map(|(s, label)| (std::slice::from_ref(s), label));
        crate::stats::replay(history, rule, plan, std::slice::from_ref(first), second)
            .map(|r| (r.report, r.used_second))
            .unwrap()
    }
    use crate::synthetic::synthetic_run;
    use infergate_schema::results::Percentiles;
    use infergate_schema::verdict::{CellComparison, GateVerdict};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// Percentiles of `count` observations, their mean at the median.
    pub(super) fn pct(p50: f64, p90: f64, p99: f64, count: u64) -> Percentiles {
        Percentiles {
            mean: p50,
            p50,
            p90,
            p99,
            count,
        }
    }

    /// [`synthetic_run`] with a TTFT that moves inversely to throughput (for the latency
    /// metrics' tests).
    fn run(
        id: &str,
        rng: &mut StdRng,
        run_cv: f64,
        cell_cv: f64,
        factor: &dyn Fn(usize) -> f64,
    ) -> RunResults {
        let mut r = synthetic_run(id, rng, run_cv, cell_cv, factor);
        for (i, cell) in r.cells.iter_mut().enumerate() {
            let f = factor(i);
            cell.ttft_s = Some(pct(0.2 / f, 0.3 / f, 0.4 / f, 100));
        }
        r
    }

    /// A run with throughput as [`synthetic_run`] (times `tps(cell)`) and an ITL of 10 ms with
    /// a 1% boot factor and 2% cell terms (times `itl(cell)`); its TTFTs are 4 per cell, too
    /// few for a p90.
    fn latency_run(
        id: &str,
        rng: &mut StdRng,
        tps: &dyn Fn(usize) -> f64,
        itl: &dyn Fn(usize) -> f64,
    ) -> RunResults {
        use rand_distr::{Distribution, Normal};
        let mut r = synthetic_run(id, rng, 0.01, 0.02, tps);
        let n: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        let boot = (0.01 * n.sample(rng)).exp();
        for (i, cell) in r.cells.iter_mut().enumerate() {
            let v = 0.01 * boot * (0.02 * n.sample(rng)).exp() * itl(i);
            let t = 0.05 * boot * (0.02 * n.sample(rng)).exp() * itl(i);
            cell.itl_s = Some(pct(v, 1.5 * v, 2.5 * v, 5000));
            cell.ttft_s = Some(pct(t, 1.5 * t, 2.5 * t, 4));
        }
        r
    }

    /// A history of 20 [`latency_run`]s, unchanged in throughput and ITL.
    fn latency_history(rng: &mut StdRng) -> Vec<RunResults> {
        (0..20)
            .map(|i| latency_run(&format!("b{i}"), rng, &|_| 1.0, &|_| 1.0))
            .collect()
    }

    /// The rule with the tail latencies gating too (`metrics = ["aggregate_tps", "ttft_p90",
    /// "itl_p90"]`), each at a design effect of 5% (below the +10–20% these tests plant).
    fn latency_rule() -> DecisionRule {
        DecisionRule {
            metrics: vec![Metric::AggregateTps, Metric::TtftP90, Metric::ItlP90],
            min_effects: [(Metric::TtftP90, 0.05), (Metric::ItlP90, 0.05)].into(),
            ..DecisionRule::default()
        }
    }

    /// Every cell's ITL higher on both boots (a uniform change, which the cell tests take out
    /// with the run effect): a regression of the gating ITL p99 where each boot reads it beyond
    /// its design effect (+50%), named by the cells; not where one boot reads it within it, nor
    /// where both read +20% (a busy host).
    #[test]
    fn a_uniform_latency_rise_beyond_its_design_effect_on_both_boots_is_a_regression() {
        let rule = DecisionRule::default();
        assert!(rule.gates(Metric::ItlP99, 20));
        let mut rng = StdRng::seed_from_u64(57);
        let base = latency_history(&mut rng);
        let mut verdict = |first: f64, second: f64| {
            let a = latency_run("c1", &mut rng, &|_| 1.0, &|_| first);
            let b = latency_run("c2", &mut rng, &|_| 1.0, &|_| second);
            let (report, used) = two_boot_verdict(&rule, &base, &a, Some((&b, "second")));
            // A first boot beyond the design effect is a provisional alarm: a second boot.
            assert_eq!(used, first > 1.5, "{}", first_line(&report));
            report
        };
        let doubled = verdict(2.0, 2.0);
        assert_gate(&doubled, GateVerdict::Regression);
        assert_first_line(&doubled, |l| l.starts_with("✗ ITL p99 +"));
        let itl = |r: &ComparisonReport| {
            r.cells
                .iter()
                .filter_map(|c| c.metric(Metric::ItlP99))
                .map(|m| m.verdict)
                .collect::<Vec<_>>()
        };
        assert!(itl(&doubled).iter().all(|v| *v == CellVerdict::Regression));
        // The report records what gated the cells besides throughput, for the first line.
        assert_eq!(doubled.cell_metrics_gated, vec![Metric::ItlP99]);
        let (short, _) = two_boot_verdict(&rule, &base[..LATENCY_MIN_RUNS - 1], &base[19], None);
        assert!(short.cell_metrics_gated.is_empty(), "{:?}", short.not_gated);
        // Each cell carries the matrix-wide test that decided it, with its own test's outcome.
        let checks: Vec<&Check> = doubled
            .cells
            .iter()
            .filter_map(|c| c.metric(Metric::ItlP99))
            .filter_map(|m| m.check.as_ref())
            .collect();
        assert!(!checks.is_empty());
        assert!(
            checks.iter().all(|c| c.look.ends_with(", matrix-wide")
                && matches!(
                    &c.outcome,
                    CheckOutcome::MatrixWide { matrix, .. }
                        if matches!(**matrix, CheckOutcome::Regression)
                )),
            "{checks:?}"
        );
        for (first, second) in [(2.0, 1.2), (1.2, 1.2), (1.0, 1.2)] {
            let r = verdict(first, second);
            assert_ne!(
                r.gate,
                GateVerdict::Regression,
                "{first} {second}: {}",
                first_line(&r)
            );
            assert!(
                itl(&r).iter().all(|v| *v != CellVerdict::Regression),
                "{first} {second}: {}",
                first_line(&r)
            );
        }
    }

    /// An accepted rise of one metric (`baseline accept --metric itl_p99`) restarts that
    /// metric's baseline alone: ITL p99, doubled from `b8` on, is compared with the twelve runs
    /// since (a candidate at the new level passes, twice it fails), while aggregate tok/s keeps
    /// all 20 runs' noise; the verdict records what was restarted, for a replay. Restarted
    /// later, on fewer runs since than a tail gates from, it is reported, not gated, saying why.
    #[test]
    fn a_metric_accepted_alone_is_compared_with_its_new_level_while_the_rest_keep_every_run() {
        let rule = DecisionRule::default();
        let mut rng = StdRng::seed_from_u64(61);
        let mut base: Vec<RunResults> = (0..20)
            .map(|i| {
                let itl = if i >= 8 { 2.0 } else { 1.0 };
                latency_run(&format!("b{i}"), &mut rng, &|_| 1.0, &|_| itl)
            })
            .collect();
        for (i, r) in base.iter_mut().enumerate() {
            r.started_at += chrono::Duration::hours(i as i64);
        }
        let since_run = |i: usize| {
            vec![MetricSince {
                metric: Metric::ItlP99,
                since_run_id: format!("b{i}"),
                since_started_at: base[i].started_at,
            }]
        };
        let mut verdict = |since: &[MetricSince], itl: f64| {
            let history = Arc::new(History::with_metric_since(base.clone(), since.to_vec()));
            let a = latency_run("c1", &mut rng, &|_| 1.0, &|_| itl);
            let b = latency_run("c2", &mut rng, &|_| 1.0, &|_| itl);
            let plan = crate::stats::Plan::default();
            let (a, b) = (std::slice::from_ref(&a), std::slice::from_ref(&b));
            crate::stats::replay(history, &rule, plan, a, Some((b, "second")))
                .unwrap()
                .report
        };
        let since = since_run(8);
        let at_new_level = verdict(&since, 2.0);
        assert_gate(&at_new_level, GateVerdict::Pass);
        assert_eq!(at_new_level.cell_metrics_gated, vec![Metric::ItlP99]);
        assert_eq!(at_new_level.baseline.noise_runs, 20);
        assert_eq!(at_new_level.baseline.metric_since, since);
        let doubled_again = verdict(&since, 4.0);
        assert_gate(&doubled_again, GateVerdict::Regression);
        assert_first_line(&doubled_again, |l| l.starts_with("✗ ITL p99 +"));
        // A whole-group accept at b8 would leave throughput twelve runs: less sensitive.
        let (group, _) = two_boot_verdict(&rule, &base[8..], &base[19], Some((&base[18], "b")));
        assert_eq!(group.baseline.noise_runs, 12);
        let mde = |r: &ComparisonReport| r.sensitivity.as_ref().unwrap().median_cell_mde().unwrap();
        assert!(
            mde(&group) > mde(&at_new_level),
            "{} {}",
            mde(&group),
            mde(&at_new_level)
        );
        // Six runs since: ITL p99 is reported, not gated, and the report says why.
        let young = verdict(&since_run(14), 2.0);
        assert!(young.cell_metrics_gated.is_empty());
        assert_eq!(
            young.not_gated[0].to_string(),
            "ITL p99 is reported, not gated: 6 runs since its accepted change, it gates from 10"
        );
        // The rule lists the layers, which these synthetic runs never measured.
        assert_eq!(
            young.not_gated[1..],
            [NotGated::PrefillNotMeasured, NotGated::BurstNotMeasured]
        );
    }

    /// A boot on which the gate's probe ran late by `share` of each cell's ITL p99.
    fn host_late_by(mut run: RunResults, share: f64) -> RunResults {
        for c in &mut run.cells {
            let p99 = c.itl_s.map_or(0.0, |p| p.p99);
            c.host_lateness_s = Some(pct(0.1 * share * p99, 0.2 * share * p99, share * p99, 1500));
        }
        run
    }

    /// A tail the host's lateness could explain is not vouched for: with the probe late by
    /// 30% of the ITL p99 on both boots (or on one: a cell is compared on both or neither), a
    /// doubled p99 is no regression, each cell is listed as host-late, and the gate is
    /// `insufficient`, saying why first; a probe late by 5% changes nothing.
    #[test]
    fn a_tail_the_host_ran_late_on_is_not_vouched_for() {
        let rule = DecisionRule::default();
        let mut rng = StdRng::seed_from_u64(58);
        // The history's busy runs (every fourth) leave their tails out: 15 remain.
        let base: Vec<RunResults> = (0..20)
            .map(|i| {
                let r = latency_run(&format!("b{i}"), &mut rng, &|_| 1.0, &|_| 1.0);
                host_late_by(r, if i % 4 == 0 { 0.4 } else { 0.02 })
            })
            .collect();
        let mut verdict = |first_late: f64, second_late: f64| {
            let a = latency_run("c1", &mut rng, &|_| 1.0, &|_| 2.0);
            let b = latency_run("c2", &mut rng, &|_| 1.0, &|_| 2.0);
            let (a, b) = (host_late_by(a, first_late), host_late_by(b, second_late));
            two_boot_verdict(&rule, &base, &a, Some((&b, "second"))).0
        };
        for (first, second) in [(0.3, 0.3), (0.3, 0.05), (0.05, 0.3)] {
            let busy = verdict(first, second);
            let line = first_line(&busy);
            assert_eq!(
                busy.gate,
                GateVerdict::Insufficient,
                "{first} {second}: {line}"
            );
            assert_eq!(busy.host_late.len(), busy.cells.len(), "{line}");
            assert!(
                busy.host_late.iter().all(|h| h.metric == Metric::ItlP99
                    && (h.lateness_p99_s / h.value_s - 0.3).abs() < 1e-9)
            );
            assert!(
                busy.cells
                    .iter()
                    .all(|c| c.metrics.iter().all(|m| m.metric != Metric::ItlP99)),
                "{line}"
            );
            let says = "? insufficient: ITL p99 not vouched for in 20 cells: the host ran the gate's probe ";
            assert!(line.starts_with(says), "{line}");
        }
        let quiet = verdict(0.05, 0.05);
        let line = first_line(&quiet);
        assert_eq!(quiet.gate, GateVerdict::Regression, "{line}");
        assert!(quiet.host_late.is_empty(), "{:?}", quiet.host_late);
        assert!(line.starts_with("✗ ITL p99 +"), "{line}");
    }

    /// A history whose tails scatter as a store recorded on a busy host did (each cell's ITL p99
    /// times a log term of SD 0.35, run by run) cannot vouch for a +50% rise: a clean candidate
    /// is `insufficient` and says which cells' bound reaches it, where the quiet history passes
    /// it; a tripled tail is never a pass.
    #[test]
    fn a_history_whose_tails_scatter_cannot_vouch_for_the_design_effect() {
        use rand_distr::{Distribution, Normal};
        let rule = DecisionRule::default();
        let mut rng = StdRng::seed_from_u64(59);
        let quiet = latency_history(&mut rng);
        let n: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        let scattered: Vec<RunResults> = (0..20)
            .map(|i| {
                let mut r = latency_run(&format!("b{i}"), &mut rng, &|_| 1.0, &|_| 1.0);
                for c in &mut r.cells {
                    let itl = c.itl_s.as_mut().expect("latency_run sets ITL");
                    itl.p99 *= (0.35 * n.sample(&mut rng)).exp();
                }
                r
            })
            .collect();
        let mut verdict = |base: &[RunResults], tail: f64| {
            let mut boot = |id| {
                let mut r = latency_run(id, &mut rng, &|_| 1.0, &|_| 1.0);
                for c in &mut r.cells {
                    c.itl_s.as_mut().expect("latency_run sets ITL").p99 *= tail;
                }
                r
            };
            let (a, b) = (boot("c1"), boot("c2"));
            two_boot_verdict(&rule, base, &a, Some((&b, "second"))).0
        };
        let clean = verdict(&quiet, 1.0);
        assert_gate(&clean, GateVerdict::Pass);
        assert!(clean.uncovered_metrics().is_empty());
        let clean = verdict(&scattered, 1.0);
        assert_gate(&clean, GateVerdict::Insufficient);
        assert_first_line(&clean, |l| {
            l.starts_with("? insufficient: ITL p99 could be +50.0% or worse in ")
        });
        for tail in [3.0, 3.0, 3.0] {
            let r = verdict(&scattered, tail);
            assert_ne!(r.gate, GateVerdict::Pass, "{}", first_line(&r));
        }
    }

    /// A history run on which the host ran the probe late leaves its tails out where each cell
    /// keeps LATENCY_MIN_RUNS runs without: 5 of 20 runs with each cell's ITL p99 times
    /// e^(0.5 ± 0.5) and the probe late by 40% of it would hide a rise (kept, the clean
    /// candidate is `insufficient`: 5 cells' bounds past +50%, checked with the screen turned
    /// off); screened, the clean candidate passes and vouches for the tail,
    /// and a tripled tail is found. With 12 of 20 runs late every run is kept, and a tripled
    /// tail is still no pass.
    #[test]
    fn a_history_run_the_host_ran_late_on_leaves_its_tails_out() {
        use rand_distr::{Distribution, Normal};
        let rule = DecisionRule::default();
        let mut rng = StdRng::seed_from_u64(60);
        let n: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        let mut history = |busy: &dyn Fn(usize) -> bool| -> Vec<RunResults> {
            (0..20)
                .map(|i| {
                    let mut r = latency_run(&format!("b{i}"), &mut rng, &|_| 1.0, &|_| 1.0);
                    if busy(i) {
                        for c in &mut r.cells {
                            let itl = c.itl_s.as_mut().expect("latency_run sets ITL");
                            itl.p99 *= (0.5 + 0.5 * n.sample(&mut rng)).exp();
                        }
                    }
                    host_late_by(r, if busy(i) { 0.4 } else { 0.02 })
                })
                .collect()
        };
        let some_busy = history(&|i| i % 4 == 1);
        let mostly_busy = history(&|i| i % 5 < 3);
        let mut verdict = |base: &[RunResults], tail: f64| {
            let mut boot = |id| {
                let mut r = latency_run(id, &mut rng, &|_| 1.0, &|_| 1.0);
                for c in &mut r.cells {
                    c.itl_s.as_mut().expect("latency_run sets ITL").p99 *= tail;
                }
                host_late_by(r, 0.02)
            };
            let (a, b) = (boot("c1"), boot("c2"));
            two_boot_verdict(&rule, base, &a, Some((&b, "second"))).0
        };
        let clean = verdict(&some_busy, 1.0);
        assert_gate(&clean, GateVerdict::Pass);
        assert!(clean.uncovered_metrics().is_empty());
        // Every run left out is accounted for.
        let out = &clean.history_host_late;
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!((out[0].metric, out[0].cells), (Metric::ItlP99, 20));
        assert_eq!(out[0].runs, ["b1", "b5", "b9", "b13", "b17"]);
        let tripled = verdict(&some_busy, 3.0);
        assert_first_line(&tripled, |l| l.starts_with("✗ ITL p99 +"));
        let tripled = verdict(&mostly_busy, 3.0);
        assert_ne!(tripled.gate, GateVerdict::Pass, "{}", first_line(&tripled));
        assert!(tripled.history_host_late.is_empty());
    }

    /// Latency changes listed in `report`'s cells `cells`: (cell index, metric).
    fn latency_changes(
        report: &ComparisonReport,
        cells: std::ops::Range<usize>,
    ) -> Vec<(usize, Metric)> {
        cells
            .flat_map(|i| {
                report.cells[i]
                    .metrics
                    .iter()
                    .filter(|m| {
                        m.metric.is_latency_percentile()
                            && matches!(
                                m.verdict,
                                CellVerdict::Regression | CellVerdict::Improvement
                            )
                    })
                    .map(move |m| (i, m.metric))
            })
            .collect()
    }

    /// Issue 56's first example: only the 32k row (cells 5..10) slowed, its ITL 10% higher;
    /// the second boot ran on a busy host, every ITL 20% higher. Before, ITL p50 and p90 were
    /// listed +7–12% [±3.4%] in all 15 cells the change cannot reach (the boots' disagreement
    /// was not in the interval); now only the 32k row's, where both boots read it higher.
    #[test]
    fn a_busy_second_boot_lists_no_latency_change_where_the_change_cannot_reach() {
        let rule = latency_rule();
        let mut rng = StdRng::seed_from_u64(56);
        let base = latency_history(&mut rng);
        let row = |i: usize| (5..10).contains(&i);
        let tps = |i: usize| if row(i) { 0.9 } else { 1.0 };
        let first = latency_run("c1", &mut rng, &tps, &|i| if row(i) { 1.1 } else { 1.0 });
        let second = latency_run("c2", &mut rng, &tps, &|i| if row(i) { 1.32 } else { 1.2 });
        let (report, used) = two_boot_verdict(&rule, &base, &first, Some((&second, "busy")));
        assert!(used);
        let outside: Vec<(usize, Metric)> = latency_changes(&report, 0..5)
            .into_iter()
            .chain(latency_changes(&report, 10..20))
            .collect();
        assert!(outside.is_empty(), "{outside:?}");
        assert!(!latency_changes(&report, 5..10).is_empty());
        // The matrix-wide ITL test says why: the first boot alone does not show it.
        let itl = report.cells[0].metric(Metric::ItlP90).unwrap();
        assert_eq!(itl.verdict, CellVerdict::Unchanged);
        // TTFT p90 (4 first tokens a cell) is said not to gate, and why.
        assert!(
            report
                .not_gated
                .iter()
                .map(ToString::to_string)
                .any(|n| n.starts_with("TTFT p90 not gated in 20 cells of 20")
                    && n.ends_with("a p90 needs 29")),
            "{:?}",
            report.not_gated
        );
    }

    /// Issue 56's second example: with only the 32k row 10% slower, the 8k row is better than
    /// the rest of its run but not faster than its baseline. Before, its row test read
    /// `→ improvement` among the tests that decided; now its line says what it is.
    #[test]
    fn a_row_better_than_the_rest_of_its_run_is_no_improvement_unless_faster_than_its_baseline() {
        let keep = |mut r: RunResults| {
            r.cells.retain(|c| c.context_tokens <= 32768);
            r
        };
        let mut rng = StdRng::seed_from_u64(57);
        let base: Vec<RunResults> = (0..20)
            .map(|i| keep(latency_run(&format!("b{i}"), &mut rng, &|_| 1.0, &|_| 1.0)))
            .collect();
        let slow = |i: usize| if (5..10).contains(&i) { 0.9 } else { 1.0 };
        let first = keep(latency_run("c1", &mut rng, &slow, &|_| 1.0));
        let second = keep(latency_run("c2", &mut rng, &slow, &|_| 1.0));
        let (report, _) = two_boot_verdict(
            &DecisionRule::default(),
            &base,
            &first,
            Some((&second, "second")),
        );
        assert_eq!(report.gate, GateVerdict::Regression);
        let row = |at: u64| {
            report
                .lines
                .iter()
                .find(|l| l.axis == LineAxis::Context && l.at == at)
                .unwrap()
        };
        assert_eq!(row(32768).test.verdict, CellVerdict::Regression);
        let fast = row(8192);
        assert_eq!(fast.test.verdict, CellVerdict::Unchanged);
        let outcome = &fast.test.check.as_ref().unwrap().outcome;
        assert!(
            matches!(
                outcome,
                CheckOutcome::OnlyAgainstItsRun { found: Found::Improvement, total } if *total <= 0.0
            ),
            "{outcome:?}"
        );
        assert!(
            !report
                .check_lines()
                .iter()
                .any(|l| l.ends_with("→ improvement")),
            "{:#?}",
            report.check_lines()
        );
        assert!(
            report.cells[..5]
                .iter()
                .all(|c| c.verdict != CellVerdict::Improvement)
        );
    }

    /// Issue 56's third example: a one-run baseline and an A/A whose boots differ by 13%.
    /// Before, both boots' matrix-wide change read −6.1% [−16.4, +5.4] from the prior alone
    /// (1.5% per boot on 1 df) whatever the boots said; now the boots' own scatter widens it,
    /// and the details say the intervals come from a prior.
    #[test]
    fn a_one_run_baseline_prints_intervals_as_wide_as_the_boots_disagree_and_says_prior() {
        let rule = latency_rule();
        let mut rng = StdRng::seed_from_u64(58);
        let base = vec![latency_run("b0", &mut rng, &|_| 1.0, &|_| 1.0)];
        let first = latency_run("c1", &mut rng, &|_| 0.87, &|_| 1.0 / 0.87);
        let second = latency_run("c2", &mut rng, &|_| 1.0, &|_| 1.0);
        let verdict = |second: Option<&RunResults>| {
            two_boot_verdict(&rule, &base, &first, second.map(|s| (s, "second"))).0
        };
        let both = verdict(Some(&second));
        let m = both.matrix_test.as_ref().unwrap();
        // The boots' log effects differ by ~0.14: an SD of ~0.10 between boots.
        assert!(m.ci_low < -0.25 && m.ci_high > 0.2, "{m:?}");
        assert_ne!(both.gate, GateVerdict::Regression);
        // What the reports' "Intervals from a prior" note reads (report::layout): one
        // baseline run, the candidate's two boots pooled with it.
        assert_eq!(both.baseline.noise_runs, 1);
        assert_eq!(both.candidate_runs.len(), 2);
        let one = verdict(None);
        assert_eq!(one.candidate_runs.len(), 1);
        // A latency percentile of a one-run store is reported, not gated, and says so.
        assert!(one.not_gated.iter().any(|n| n.to_string().starts_with(
            "ITL p90 is reported, not gated: the history has 1 run, a latency percentile gates from 10"
        )));
    }

    #[test]
    fn the_boots_scatter_joins_the_boot_noise_and_widens_it_only_when_they_disagree() {
        // Two boots 20% apart against a 1% history on 19 df: one more df of a 14% SD.
        let (sigma, df) = with_boot_scatter(0.01, 19.0, &[0.0, 0.2]);
        assert!((df - 20.0).abs() < 1e-12);
        let expected = ((19.0 * 1e-4 + 0.02) / 20.0_f64).sqrt();
        assert!((sigma - expected).abs() < 1e-12, "{sigma}");
        // Boots that agree narrow it a little; one boot is left as it is.
        assert!(with_boot_scatter(0.01, 19.0, &[0.001, 0.002]).0 < 0.01);
        assert_eq!(with_boot_scatter(0.01, 19.0, &[0.3]), (0.01, 19.0));
    }

    #[test]
    fn the_secondary_family_takes_its_share_of_alpha_only_where_one_of_them_gates() {
        let mut rng = StdRng::seed_from_u64(59);
        let base = latency_history(&mut rng);
        let cand = latency_run("c", &mut rng, &|_| 1.0, &|_| 1.0);
        let rule = latency_rule();
        let gated = compare(&base, std::slice::from_ref(&cand), &rule).unwrap();
        let s = gated.rule.shares.unwrap();
        let secondary = s.secondary.expect("ITL p90 gates on 20 runs");
        assert!((s.matrix + s.local + s.capacity + secondary - rule.alpha).abs() < 1e-12);
        assert!((secondary - 0.002).abs() < 1e-12 && (s.matrix - 0.003).abs() < 1e-12);
        // With throughput alone gating it keeps its whole share, as before.
        let tps_only = DecisionRule {
            metrics: vec![Metric::AggregateTps],
            ..DecisionRule::default()
        };
        let alone = compare(&base, std::slice::from_ref(&cand), &tps_only).unwrap();
        let s = alone.rule.shares.unwrap();
        assert!(s.secondary.is_none() && (s.matrix - 0.004).abs() < 1e-12);
        // A 9-run history: the latency percentiles are reported, throughput keeps its alpha.
        let young = compare(&base[11..], std::slice::from_ref(&cand), &rule).unwrap();
        assert!(young.rule.shares.unwrap().secondary.is_none());
        assert_eq!(young.not_gated.len(), 2, "{:?}", young.not_gated);
    }

    /// At the plan's first boot a latency change is not yet one: a busy first boot makes a
    /// gating ITL p90 provisional (a second boot decides) and lists nothing.
    #[test]
    fn a_busy_first_boot_makes_latency_provisional_and_lists_nothing() {
        let rule = latency_rule();
        let mut rng = StdRng::seed_from_u64(60);
        let base = latency_history(&mut rng);
        let busy = latency_run("c1", &mut rng, &|_| 1.0, &|_| 1.2);
        let first = compare_at(
            &base,
            std::slice::from_ref(&busy),
            &rule,
            &crate::stats::confirm::first_look(&rule, true),
        )
        .unwrap();
        assert!(first.cells.iter().any(|c| c.provisional));
        assert!(crate::stats::confirm::wants_confirmation(&first));
        // No secondary change is listed (the reports list only decided secondary lines).
        assert!(first.cells.iter().all(|c| c.metrics.iter().all(|m| {
            m.metric == Metric::AggregateTps
                || !matches!(
                    m.verdict,
                    CellVerdict::Regression | CellVerdict::Improvement
                )
        })));
        // The ITL p50 (reported only) moved on one boot: inconclusive, not a change.
        let p50 = first.cells[0].metric(Metric::ItlP50).unwrap();
        assert_eq!(p50.verdict, CellVerdict::Inconclusive);
    }

    fn history(rng: &mut StdRng, n: usize) -> Vec<RunResults> {
        (0..n)
            .map(|i| run(&format!("b{i}"), rng, 0.01, 0.02, &|_| 1.0))
            .collect()
    }

    /// The looks of one gate share a history: its models are fitted at the first look and
    /// reused at the next, with the verdict a fresh fit gives.
    #[test]
    fn the_looks_of_a_gate_fit_the_history_once() {
        let mut rng = StdRng::seed_from_u64(23);
        let base = history(&mut rng, 20);
        let first = run("c1", &mut rng, 0.0, 0.0, &|_| 0.95);
        let second = run("c2", &mut rng, 0.0, 0.0, &|_| 0.95);
        let rule = DecisionRule::default();
        let fitted = History::new(&base[..]);
        compare_on(
            &fitted,
            std::slice::from_ref(&first),
            &rule,
            &Look::single(&rule),
        )
        .unwrap();
        let models = fitted.fitted();
        assert!(models > 0);
        let both = [first, second];
        let look = Look::both_boots(&rule, 1);
        let shared = compare_on(&fitted, &both, &rule, &look).unwrap();
        assert_eq!(fitted.fitted(), models, "the second look fitted again");
        assert_eq!(shared, compare_at(&base, &both, &rule, &look).unwrap());
    }

    /// A 20-run history whose context rows run hot or cold on each boot by a factor of SD
    /// `row_cv` (rows of 5 cells), and a candidate whose 32k row (cells 5..10) is 10% slow.
    fn row_factor_case(row_cv: f64, seed: u64) -> ComparisonReport {
        use rand_distr::{Distribution, Normal};
        let mut rng = StdRng::seed_from_u64(seed);
        let n = Normal::new(0.0, 1.0).unwrap();
        let base: Vec<RunResults> = (0..20)
            .map(|i| {
                let f: Vec<f64> = (0..4)
                    .map(|_| (row_cv * n.sample(&mut rng)).exp())
                    .collect();
                run(&format!("b{i}"), &mut rng, 0.01, 0.02, &|c| f[c / 5])
            })
            .collect();
        let cand = run("c", &mut rng, 0.01, 0.02, &|c| {
            if (5..10).contains(&c) { 0.90 } else { 1.0 }
        });
        compare(&base, &[cand], &DecisionRule::default()).unwrap()
    }

    #[test]
    fn a_cells_own_test_cancels_its_rows_move_where_the_history_has_a_row_factor() {
        // Mean change the 32k row's cells' own tests stand on.
        let own = |r: &ComparisonReport| {
            r.cells[5..10]
                .iter()
                .map(|c| c.primary().unwrap().shown_change().change)
                .sum::<f64>()
                / 5.0
        };
        // Rows that move 5% from boot to boot: a 10% row is as likely a row factor's doing as
        // the candidate's, and the cells' own tests take nearly all of it out (w near 0.95).
        let rough = row_factor_case(0.05, 31);
        assert!(own(&rough) > -0.03, "{}", own(&rough));
        assert!(rough.cells[5..10].iter().all(|c| {
            !c.primary()
                .and_then(|m| m.check.as_ref())
                .is_some_and(|k| k.rejected)
        }));
        // Without a row factor in the history the own tests keep the row's whole change.
        let plain = row_factor_case(0.0, 31);
        assert!(own(&plain) < -0.06, "{}", own(&plain));
    }

    #[test]
    fn identical_baseline_and_candidate_are_unchanged() {
        let mut rng = StdRng::seed_from_u64(1);
        let one = run("same", &mut rng, 0.0, 0.0, &|_| 1.0);
        let base = vec![one.clone(), one.clone(), one.clone()];
        let report = compare(&base, &[one], &DecisionRule::default()).unwrap();
        // Three runs cannot show what the boot noise is: honest, not green.
        let h = &first_line(&report);
        assert_eq!(report.gate, GateVerdict::Insufficient, "{h}");
        assert!(
            h.starts_with("? insufficient: no regression proven in 20 cells")
                && h.contains("more baseline runs needed"),
            "{h}"
        );
        assert!(
            report
                .cells
                .iter()
                .all(|c| c.verdict == CellVerdict::Unchanged)
        );
        let m = report.cells[0].primary().unwrap();
        assert!(m.change.abs() < 1e-12 && m.ci_low < 0.0 && m.ci_high > 0.0);
    }

    #[test]
    fn ten_percent_slower_everywhere_is_a_regression() {
        let mut rng = StdRng::seed_from_u64(2);
        let base = history(&mut rng, 20);
        let cand = run("cand", &mut rng, 0.01, 0.02, &|_| 0.9);
        let report = compare(&base, &[cand], &DecisionRule::default()).unwrap();
        assert_eq!(report.gate, GateVerdict::Regression);
        let m = report.matrix_test.as_ref().unwrap();
        assert_eq!(m.verdict, CellVerdict::Regression);
        assert!((m.change + 0.10).abs() < 0.03, "{}", m.change);
        assert!(m.ci_low < m.change && m.change < m.ci_high);
        let regressed = report.regressions().count();
        assert!(
            regressed >= 10,
            "{regressed} cells: {}",
            first_line(&report)
        );
        // The rest are undecided, never "unchanged": the interval reaches the margin.
        assert!(report.cells.iter().all(|c| matches!(
            c.verdict,
            CellVerdict::Regression | CellVerdict::Inconclusive
        )));
        assert_first_line(&report, |l| l.contains("in all 20 cells"));
        // A cell the matrix decided: its own test (against the rest of its run) found nothing,
        // and its check says so beside the verdict it did not make, never a bare
        // "no regression" under a regression.
        let followed = report
            .regressions()
            .filter_map(|c| c.primary())
            .find(|m| {
                m.decided_on
                    .is_some_and(|d| d.basis == DecisionBasis::WithMatrix)
            })
            .expect("a cell that moved with the matrix");
        let own = followed.check.as_ref().expect("its own test");
        assert!(!own.rejected, "{own:?}");
        assert!(
            matches!(
                &own.outcome,
                CheckOutcome::DecidedByBroader {
                    against: Against::Baseline,
                    verdict: Found::Regression,
                    decided: DecidedChange {
                        basis: DecisionBasis::WithMatrix,
                        matrix_change: Some(m),
                        ..
                    },
                    ..
                } if *m < 0.0
            ),
            "{:?}",
            own.outcome
        );
    }

    /// Cell 7 (C=4 / 32k) of a candidate moved by `factor` against a 20-run history; the
    /// candidate's noise is quieter so that the single cell's test is not a coin toss.
    fn one_cell_moved(factor: f64) -> ComparisonReport {
        let mut rng = StdRng::seed_from_u64(3);
        let base = history(&mut rng, 20);
        let cand = run("cand", &mut rng, 0.01, 0.005, &|i| {
            if i == 7 { factor } else { 1.0 }
        });
        compare(&base, &[cand], &DecisionRule::default()).unwrap()
    }

    #[test]
    fn one_cell_ten_percent_slower_is_found_by_the_cell_test() {
        let report = one_cell_moved(0.88);
        assert_eq!(
            report.cells[7].verdict,
            CellVerdict::Regression,
            "{:?}",
            report.cells[7]
        );
        assert_eq!(report.gate, GateVerdict::Regression);
        assert_eq!(report.regressions().count(), 1, "{}", first_line(&report));
        assert_ne!(
            report.matrix_test.as_ref().unwrap().verdict,
            CellVerdict::Regression
        );
        assert_first_line(&report, |l| l.contains("at C=4 / 32k"));
        // Decided on (and shown with) the cell against its run.
        let m = report.cells[7].primary().unwrap();
        assert_eq!(m.verdict, CellVerdict::Regression);
        let d = m.decided_on.unwrap();
        assert_eq!(d.basis, DecisionBasis::VsRun);
        assert!(d.ci_high < 0.0 && (d.change + 0.12).abs() < 0.04, "{d:?}");
    }

    #[test]
    fn an_improvement_is_listed_with_the_boundary_it_crossed() {
        let report = one_cell_moved(1.12);
        assert_eq!(report.cells[7].verdict, CellVerdict::Improvement);
        assert_gate(&report, GateVerdict::Pass);
        // Checkable by hand as a regression is: the statistic past the improvement side's
        // boundary, at the cell's alpha.
        let lines = report.check_lines();
        let line = lines
            .iter()
            .find(|l| l.starts_with("cell C=4 / 32k aggregate tok/s: t = +"))
            .unwrap_or_else(|| panic!("{lines:#?}"));
        assert!(
            line.contains(" ≥ +") && line.ends_with("→ improvement"),
            "{line}"
        );
        // No other cell, row or column is listed: nothing else moved.
        assert_eq!(lines.len(), 2, "{lines:#?}");
    }

    /// A 20-run history whose cell terms have a 2% SD with Student-t tails (3 df).
    fn heavy_tailed_history(rng: &mut StdRng) -> Vec<RunResults> {
        use rand_distr::Distribution;
        let t3 = rand_distr::StudentT::new(3.0).unwrap_or_else(|_| unreachable!());
        (0..20)
            .map(|k| {
                let f: Vec<f64> = (0..20)
                    .map(|_| (0.02 / 3f64.sqrt() * t3.sample(&mut *rng)).exp())
                    .collect();
                run(&format!("b{k}"), rng, 0.01, 0.0, &|i| f[i])
            })
            .collect()
    }

    #[test]
    fn one_wild_cell_is_a_regression_only_where_the_history_has_no_heavy_tails() {
        let (mut plain_found, mut rough_found) = (0, 0);
        for seed in 0..10 {
            let mut rng = StdRng::seed_from_u64(seed);
            let gaussian = history(&mut rng, 20);
            // Cell terms of the same SD (2%) with Student-t tails (3 df).
            let heavy = heavy_tailed_history(&mut rng);
            let cand = run("cand", &mut rng, 0.01, 0.005, &|i| {
                if i == 7 { 0.885 } else { 1.0 }
            });
            let rule = DecisionRule::default();
            let plain = compare(&gaussian, std::slice::from_ref(&cand), &rule).unwrap();
            plain_found += usize::from(plain.cells[7].verdict == CellVerdict::Regression);
            let rough = compare(&heavy, std::slice::from_ref(&cand), &rule).unwrap();
            rough_found += usize::from(rough.gate == GateVerdict::Regression);
        }
        // On a Gaussian runner a −11.5% cell (5.8 SD) is proof; on a heavy-tailed one it is a
        // 1-in-a-few-hundred draw of one cell, not proof on one run (a history that happens
        // to look mild still calls it).
        assert!(plain_found >= 9, "gaussian: {plain_found}/10");
        assert!(rough_found <= 4, "heavy tails: {rough_found}/10");
    }

    /// Where one boot's −11.5% in one cell of a heavy-tailed runner is no proof (above), the
    /// same cell slow on each of two boots is: each boot alone must show it past a bound whose
    /// joint tail is the cell's alpha ([`judge_each_boot`]), and one wild boot cannot.
    #[test]
    fn a_heavy_tailed_cell_slow_on_each_boot_is_a_regression_and_one_wild_boot_is_not() {
        let rule = DecisionRule::default();
        let look = Look::both_boots(&rule, 1);
        let (mut both_found, mut one_found) = (0, 0);
        for seed in 0..10 {
            let mut rng = StdRng::seed_from_u64(seed);
            let heavy = heavy_tailed_history(&mut rng);
            let slow = |rng: &mut StdRng, name: &str, factor: f64| {
                run(name, rng, 0.01, 0.005, &|i| {
                    if i == 7 { factor } else { 1.0 }
                })
            };
            let both = [slow(&mut rng, "c1", 0.885), slow(&mut rng, "c2", 0.885)];
            let report = compare_at(&heavy, &both, &rule, &look).unwrap();
            if report.cells[7].verdict == CellVerdict::Regression {
                both_found += 1;
                let m = report.cells[7].primary().expect("aggregate tok/s");
                let check = m.check.as_ref();
                assert!(
                    check.is_some_and(|c| c.reference.contains(" each boot, ")),
                    "{check:?}"
                );
                // The p beside it is the test's: at most its alpha.
                assert!(check.is_some_and(|c| m.p_value <= c.alpha), "{m:?}");
            }
            // One boot 30% slow in that cell, the other not slow at all: no regression.
            let one = [slow(&mut rng, "c1", 0.70), slow(&mut rng, "c2", 1.0)];
            let report = compare_at(&heavy, &one, &rule, &look).unwrap();
            one_found += usize::from(report.cells[7].verdict == CellVerdict::Regression);
        }
        assert!(both_found >= 8, "slow on each boot: {both_found}/10");
        assert_eq!(one_found, 0, "one wild boot");
    }

    #[test]
    fn an_outlier_run_neither_hides_nor_invents_regressions() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut base = history(&mut rng, 20);
        // One run of the history is 8% slow everywhere: one more draw of the boot factor (it
        // widens the boot noise this seed's successive differences see, never the cells').
        base[5] = run("outlier", &mut rng, 0.0, 0.02, &|_| 0.92);
        let clean = DecisionRule::default();
        let aa = run("aa", &mut rng, 0.0, 0.005, &|_| 1.0);
        let report = compare(&base, &[aa], &clean).unwrap();
        assert_not_gate(&report, GateVerdict::Regression);
        assert!(report.matrix_test.as_ref().unwrap().change.abs() < 0.02);
        // −12%: a size one boot proves against this history's boot noise, outlier included.
        let slow = run("slow", &mut rng, 0.0, 0.005, &|_| 0.88);
        let report = compare(&base, &[slow], &clean).unwrap();
        assert_gate(&report, GateVerdict::Regression);
    }

    /// A row that moved together is found by its row test even where no cell proves it alone,
    /// and its cells say so.
    #[test]
    fn a_row_that_moved_together_is_a_regression_of_its_row() {
        let mut rng = StdRng::seed_from_u64(12);
        let base = history(&mut rng, 20);
        // Cells 5..10 are the 32k row (5 concurrencies per context).
        let cand = run("cand", &mut rng, 0.01, 0.02, &|i| {
            if (5..10).contains(&i) { 0.93 } else { 1.0 }
        });
        let report = compare(&base, &[cand], &DecisionRule::default()).unwrap();
        let row = report
            .lines
            .iter()
            .find(|l| l.axis == LineAxis::Context && l.at == 32768)
            .expect("the 32k row's test");
        assert_eq!(row.test.verdict, CellVerdict::Regression, "{row:?}");
        assert!((row.test.change + 0.07).abs() < 0.03, "{row:?}");
        assert_gate(&report, GateVerdict::Regression);
        let with_row: Vec<&CellComparison> = report.cells[5..10]
            .iter()
            .filter(|c| {
                matches!(c.reason, Some(CellReason::WithLine {
                    axis: LineAxis::Context,
                    at: 32768,
                    metric: Metric::AggregateTps,
                    line,
                    ..
                }) if line.change < 0.0)
            })
            .collect();
        assert!(!with_row.is_empty(), "{:?}", &report.cells[5..10]);
        // A cell its row decided shows its own total change, not the row's figure.
        for c in with_row {
            let m = c.primary().expect("aggregate tok/s");
            let d = m.decided_on.expect("decided on");
            assert_eq!(d.basis, DecisionBasis::WithLine);
            let own = m.check.as_ref().expect("its own test");
            assert!(
                matches!(
                    own.outcome,
                    CheckOutcome::DecidedByBroader {
                        against: Against::Baseline,
                        verdict: Found::Regression,
                        decided: DecidedChange {
                            basis: DecisionBasis::WithLine,
                            ..
                        },
                        ..
                    }
                ),
                "{:?}",
                own.outcome
            );
            assert_eq!(
                (d.change, d.ci_low, d.ci_high),
                (m.change, m.ci_low, m.ci_high)
            );
        }
        // 4 rows and 5 columns, none of the others moved.
        assert_eq!(report.lines.len(), 9);
        assert_eq!(
            report
                .lines
                .iter()
                .filter(|l| l.test.verdict == CellVerdict::Regression)
                .count(),
            1
        );
    }

    #[test]
    fn capacity_and_not_comparable_cells() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut base = history(&mut rng, 20);
        let mut cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        // Cell 0: newly capacity-limited.
        cand.cells[0].status = CellStatus::CapacityLimited;
        cand.cells[0].reason = Some("5/8 running".into());
        // Cell 1: capacity-limited on both sides.
        cand.cells[1].status = CellStatus::CapacityLimited;
        for b in &mut base {
            b.cells[1].status = CellStatus::CapacityLimited;
        }
        // Cell 2: error in the candidate.
        cand.cells[2] = CellResult::unmeasured(
            cand.cells[2].concurrency,
            cand.cells[2].context_tokens,
            CellStatus::Error,
            "stream reset",
        );
        // Cell 3: missing from the baseline.
        for b in &mut base {
            b.cells.remove(3);
        }
        // Cell 4 (candidate side): fits now, capacity-limited in the baseline.
        for b in &mut base {
            b.cells[3].status = CellStatus::CapacityLimited; // index 3 is now old cell 4
        }
        // Both boots (the first and the confirmation boot) are capacity-limited in cell 0.
        let mut second = cand.clone();
        second.run_id = "cand-confirm".into();
        let boots = [cand, second];
        let report = compare(&base, &boots, &DecisionRule::default()).unwrap();
        let v: Vec<CellVerdict> = report.cells.iter().take(5).map(|c| c.verdict).collect();
        assert_eq!(
            v,
            [
                CellVerdict::CapacityRegression,
                CellVerdict::NotComparable,
                CellVerdict::ErrorRegression,
                CellVerdict::NotComparable,
                CellVerdict::Improvement
            ]
        );
        let reason = |i: usize| report.cells[i].reason.clone();
        assert!(
            matches!(reason(0), Some(CellReason::Limit(r)) if r.detail == "5/8 running"),
            "{:?}",
            reason(0)
        );
        assert!(
            matches!(reason(1), Some(CellReason::Limit(r)) if r.finding == infergate_schema::verdict::LimitFinding::BothSides),
            "{:?}",
            reason(1)
        );
        assert!(
            matches!(reason(2), Some(CellReason::ErrorNow { why, .. }) if why == "stream reset"),
            "{:?}",
            reason(2)
        );
        assert!(
            matches!(
                reason(3),
                Some(CellReason::MissingInBase(Against::Baseline))
            ),
            "{:?}",
            reason(3)
        );
        assert!(
            matches!(
                reason(4),
                Some(CellReason::OutOfLimit {
                    limit: Limit::Capacity,
                    ..
                })
            ),
            "{:?}",
            reason(4)
        );
        // The errored cell was measured in the baseline: every such cell must be measured now,
        // so the gate cannot decide (exit 3).
        let cov = report.coverage.expect("coverage");
        assert_eq!((cov.expected, cov.measured), (19, 18), "{cov:?}");
        assert_eq!(report.gate, GateVerdict::Unmeasured);
        assert_first_line(&report, |l| {
            l.contains("18 of 19") && l.ends_with("; 1 error regression (C=4 / 8k)")
        });
    }

    #[test]
    fn an_error_where_the_baseline_also_failed_is_not_an_error_regression() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut base = history(&mut rng, 5);
        let mut cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        let coord = (cand.cells[0].concurrency, cand.cells[0].context_tokens);
        for r in base.iter_mut().chain(std::iter::once(&mut cand)) {
            r.cells[0] = CellResult::unmeasured(coord.0, coord.1, CellStatus::Error, "oom");
        }
        let report = compare(&base, &[cand], &DecisionRule::default()).unwrap();
        assert_eq!(report.cells[0].verdict, CellVerdict::NotComparable);
        assert!(report.coverage.unwrap().sufficient());
        assert_ne!(report.gate, GateVerdict::Unmeasured);
    }

    #[test]
    fn profile_mismatch_names_both_keys() {
        let mut rng = StdRng::seed_from_u64(6);
        let base = history(&mut rng, 2);
        let mut cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        cand.profile.key = "other-profile".into();
        let err = compare(&base, &[cand], &DecisionRule::default()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, StatsError::ProfileMismatch { .. }));
        assert!(
            msg.contains("other-profile") && msg.contains(&base[0].profile.key),
            "{msg}"
        );
        assert!(matches!(
            compare(&base, &[], &DecisionRule::default()),
            Err(StatsError::NoCandidate)
        ));
    }

    #[test]
    fn empty_baseline_gives_no_baseline() {
        let mut rng = StdRng::seed_from_u64(7);
        let cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        let report = compare(&[], &[cand], &DecisionRule::default()).unwrap();
        assert_eq!(report.gate, GateVerdict::NoBaseline);
        assert_eq!(report.cells.len(), 20);
        assert!(
            report
                .cells
                .iter()
                .all(|c| c.verdict == CellVerdict::NotComparable
                    && matches!(c.reason, Some(CellReason::NoBaseline)))
        );
    }

    #[test]
    fn latency_metrics_have_their_direction_and_do_not_gate_by_default() {
        let mut rng = StdRng::seed_from_u64(8);
        let mut base = history(&mut rng, 10);
        let mut cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        // TTFT 30% higher (worse) everywhere in the candidate; a little noise in the history.
        for (k, b) in base.iter_mut().enumerate() {
            for c in &mut b.cells {
                let t = c.ttft_s.as_mut().unwrap();
                t.p50 *= 1.0 + 0.01 * ((k % 3) as f64 - 1.0);
            }
        }
        for c in &mut cand.cells {
            c.ttft_s.as_mut().unwrap().p50 *= 1.3;
        }
        let report = compare(&base, std::slice::from_ref(&cand), &DecisionRule::default()).unwrap();
        let ttft = report.cells[0].metric(Metric::TtftP50).unwrap();
        assert_eq!(ttft.direction, Direction::LowerIsBetter);
        assert!((ttft.change - 0.3).abs() < 0.01);
        assert_eq!(ttft.verdict, CellVerdict::Regression);
        assert_not_gate(&report, GateVerdict::Regression);
        // Gating on TTFT too makes it fail.
        let rule = DecisionRule {
            metrics: vec![Metric::AggregateTps, Metric::TtftP50],
            ..DecisionRule::default()
        };
        let gated = compare(&base, &[cand], &rule).unwrap();
        assert_eq!(gated.gate, GateVerdict::Regression);
        assert_eq!(gated.cells[0].verdict, CellVerdict::Regression);

        // One cell's TTFT 30% higher: its own test crosses its boundary. Reported only, its
        // line says which way it moved and that it does not gate, and it is not among the
        // tests that decided the gate; gating on TTFT, it is a regression and listed.
        let mut one = run("one", &mut rng, 0.01, 0.02, &|_| 1.0);
        one.cells[0].ttft_s.as_mut().unwrap().p50 *= 1.3;
        let report = compare(&base, std::slice::from_ref(&one), &DecisionRule::default()).unwrap();
        let check = report.cells[0].metric(Metric::TtftP50);
        let check = check.and_then(|m| m.check.as_ref()).unwrap();
        assert!(check.statistic >= check.boundary, "{check:?}");
        assert!(!check.rejected, "{check:?}");
        assert!(
            matches!(check.outcome, CheckOutcome::ReportedOnly { higher: true }),
            "{check:?}"
        );
        assert!(report.check_lines().iter().all(|l| !l.contains("TTFT p50")));
        let gated = compare(&base, &[one], &rule).unwrap();
        let lines = gated.check_lines();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("TTFT p50") && l.ends_with("→ regression")),
            "{lines:?}"
        );
    }

    /// A 2 s window at C=4 sees about 8 first tokens: their "p90" is their largest, and its
    /// scatter is not in a history of a few runs. A percentile is compared only from the
    /// observations that bound it (a median from 5, a p90 from 29), in the history as now.
    #[test]
    fn a_percentile_of_too_few_observations_is_not_compared() {
        assert_eq!(
            (
                super::percentile_min_count(0.5),
                super::percentile_min_count(0.9)
            ),
            (5, 29)
        );
        let mut rng = StdRng::seed_from_u64(8);
        let mut base = history(&mut rng, 10);
        let mut cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        let metrics = |r: &ComparisonReport| -> Vec<Metric> {
            r.cells[0].metrics.iter().map(|m| m.metric).collect()
        };
        for count in [8, 28] {
            for c in base
                .iter_mut()
                .flat_map(|b| &mut b.cells)
                .chain(&mut cand.cells)
            {
                c.ttft_s.as_mut().unwrap().count = count;
            }
            let report =
                compare(&base, std::slice::from_ref(&cand), &DecisionRule::default()).unwrap();
            let m = metrics(&report);
            assert!(
                m.contains(&Metric::TtftP50) && !m.contains(&Metric::TtftP90),
                "{m:?}"
            );
        }
        // Enough first tokens now, but not in the history: nothing to compare the p90 with.
        for c in &mut cand.cells {
            c.ttft_s.as_mut().unwrap().count = 29;
        }
        let report = compare(&base, std::slice::from_ref(&cand), &DecisionRule::default()).unwrap();
        assert!(!metrics(&report).contains(&Metric::TtftP90));
        for c in base.iter_mut().flat_map(|b| &mut b.cells) {
            c.ttft_s.as_mut().unwrap().count = 29;
        }
        let report = compare(&base, std::slice::from_ref(&cand), &DecisionRule::default()).unwrap();
        assert!(metrics(&report).contains(&Metric::TtftP90));
    }

    /// Real case: every cell of an engine run got much slower (−60%), one a little less
    /// (217.2 → 96.0 tok/s, −55.8%). Relative to its run that cell is +10%, but it is slower:
    /// never an "improvement", and the headline counts it with the regressions.
    #[test]
    fn a_slower_cell_in_a_slower_matrix_is_never_an_improvement() {
        let mut rng = StdRng::seed_from_u64(10);
        let base = history(&mut rng, 20);
        let cand = run("cand", &mut rng, 0.0, 0.005, &|i| {
            if i == 7 { 96.0 / 217.2 } else { 0.4 }
        });
        let report = compare(&base, &[cand], &DecisionRule::default()).unwrap();
        let cell = &report.cells[7];
        let m = cell.primary().unwrap();
        assert!((m.change + 0.558).abs() < 0.03, "{}", m.change);
        assert_eq!(cell.verdict, CellVerdict::Regression, "{cell:?}");
        let d = m.decided_on.unwrap();
        assert_eq!(d.basis, DecisionBasis::WithMatrix);
        assert!(d.change < 0.0 && d.ci_high < 0.0, "{d:?}");
        assert!((d.matrix_change.unwrap() + 0.6).abs() < 0.03, "{d:?}");
        // Its own test (faster than the rest of its run) says why it did not decide the cell.
        let own = m.check.as_ref().unwrap();
        assert!(
            matches!(
                own.outcome,
                CheckOutcome::OverruledByTotal {
                    found: Found::Improvement,
                    against: Against::Baseline,
                    total,
                    verdict: CellVerdict::Regression,
                } if (total + 0.558).abs() < 0.03
            ),
            "{:?}",
            own.outcome
        );
        assert!(
            matches!(cell.reason, Some(CellReason::WithMatrix { matrix, .. }) if matrix < 0.0),
            "{:?}",
            cell.reason
        );
        assert!(
            report
                .cells
                .iter()
                .all(|c| c.verdict != CellVerdict::Improvement)
        );
        assert_first_line(&report, |l| !l.contains("improve"));
        assert_eq!(report.gate, GateVerdict::Regression);
    }

    /// Real case: a TTFT that got better (42.7 → 41.8 ms, −2.1%) while the rest of its run's
    /// TTFT got better still is never shown as a regression, and what is shown beside its
    /// verdict is the change that verdict was decided on.
    #[test]
    fn a_faster_ttft_is_never_a_regression_because_its_run_got_faster_still() {
        let mut rng = StdRng::seed_from_u64(11);
        let mut base = history(&mut rng, 20);
        for (k, b) in base.iter_mut().enumerate() {
            for c in &mut b.cells {
                let t = c.ttft_s.as_mut().unwrap();
                t.p50 *= 1.0 + 0.005 * ((k % 3) as f64 - 1.0);
            }
        }
        let mut cand = run("cand", &mut rng, 0.0, 0.005, &|_| 1.0);
        for (i, c) in cand.cells.iter_mut().enumerate() {
            c.ttft_s.as_mut().unwrap().p50 *= if i == 3 { 41.8 / 42.7 } else { 0.8 };
        }
        let rule = DecisionRule {
            metrics: vec![Metric::AggregateTps, Metric::TtftP50],
            ..DecisionRule::default()
        };
        let report = compare(&base, &[cand], &rule).unwrap();
        let ttft = report.cells[3].metric(Metric::TtftP50).unwrap();
        assert!((ttft.change + 0.021).abs() < 0.01, "{}", ttft.change);
        assert_ne!(ttft.verdict, CellVerdict::Regression, "{ttft:?}");
        assert_ne!(report.cells[3].verdict, CellVerdict::Regression);
        // Its own test crossed the boundary against its run; its check says why that did
        // not decide the cell, and the checks that decided the gate leave it out.
        let check = ttft.check.as_ref().unwrap();
        assert!(check.rejected, "{check:?}");
        assert!(
            matches!(
                check.outcome,
                CheckOutcome::OverruledByTotal {
                    found: Found::Regression,
                    against: Against::Baseline,
                    total,
                    ..
                } if (total + 0.021).abs() < 0.01
            ),
            "{:?}",
            check.outcome
        );
        assert!(
            report.check_lines().iter().all(|l| !l.contains("ttft_p50")),
            "{:?}",
            report.check_lines()
        );
        let shown = ttft.shown_change();
        assert_eq!(shown.basis, DecisionBasis::WithMatrix, "{shown:?}");
        assert!(shown.change < 0.0, "{shown:?}");
        // Every verdict of a latency metric is shown in its own sign: a regression is higher.
        for c in &report.cells {
            for m in &c.metrics {
                let d = m.shown_change();
                match (m.verdict, m.direction) {
                    (CellVerdict::Regression, Direction::LowerIsBetter)
                    | (CellVerdict::Improvement, Direction::HigherIsBetter) => {
                        assert!(d.change > 0.0 && m.change > 0.0, "{m:?}")
                    }
                    (CellVerdict::Improvement, Direction::LowerIsBetter)
                    | (CellVerdict::Regression, Direction::HigherIsBetter) => {
                        assert!(d.change < 0.0 && m.change < 0.0, "{m:?}")
                    }
                    _ => {}
                }
            }
        }
        assert_not_gate(&report, GateVerdict::Regression);
    }

    #[test]
    fn rounds_count_as_repetitions_and_narrow_the_interval() {
        use infergate_schema::results::MeasurementRound;
        let mut rng = StdRng::seed_from_u64(9);
        let base = history(&mut rng, 20);
        let cand = run("cand", &mut rng, 0.01, 0.02, &|_| 1.0);
        let rule = DecisionRule::default();
        let before = compare(&base, std::slice::from_ref(&cand), &rule).unwrap();
        let mut remeasured = cand.clone();
        let cell = &mut remeasured.cells[4];
        let tps = cell.aggregate_tps;
        cell.rounds = (0..4)
            .map(|k| MeasurementRound {
                round: k,
                aggregate_tps: tps * (1.0 + 0.01 * (f64::from(k) - 1.5)),
                samples: Vec::new(),
                measured_s: 30.0,
                verdict_after: None,
            })
            .collect();
        let after = compare(&base, &[remeasured], &rule).unwrap();
        let width = |r: &ComparisonReport| {
            let m = r.cells[4].primary().unwrap();
            m.ci_high - m.ci_low
        };
        assert!(
            width(&after) < 0.8 * width(&before),
            "{} vs {}",
            width(&after),
            width(&before)
        );
    }

    /// A cell's capacity or saturation reason: what the rule found, on which counts.
    fn limit_reason(c: &CellComparison) -> &infergate_schema::verdict::LimitReason {
        match &c.reason {
            Some(CellReason::Limit(r)) => r,
            other => panic!("not a limit's reason: {other:?}"),
        }
    }

    /// A history of 20 runs in which cell 0 is in `state` in the runs `hit(run)` says.
    fn history_with(
        rng: &mut StdRng,
        state: CellStatus,
        hit: &dyn Fn(usize) -> bool,
    ) -> Vec<RunResults> {
        let mut base = history(rng, 20);
        for (i, b) in base.iter_mut().enumerate() {
            if hit(i) {
                b.cells[0].status = state;
            }
        }
        base
    }

    /// Candidate boots with cell 0 in `state` on the boots `hit(boot)` says.
    fn boots_with(
        rng: &mut StdRng,
        n: usize,
        state: CellStatus,
        hit: &dyn Fn(usize) -> bool,
    ) -> Vec<RunResults> {
        (0..n)
            .map(|k| {
                let mut r = run(&format!("cand{k}"), rng, 0.01, 0.02, &|_| 1.0);
                if hit(k) {
                    r.cells[0].status = state;
                    r.cells[0].reason = Some("3/4 running".into());
                }
                r
            })
            .collect()
    }

    #[test]
    fn capacity_is_judged_against_how_often_the_history_was_limited() {
        use CellStatus::CapacityLimited as Cap;
        let mut rng = StdRng::seed_from_u64(21);
        let rule = DecisionRule::default();
        let fit = history_with(&mut rng, Cap, &|_| false);
        // Fit in every history run, limited on the first boot: a provisional alarm, the gate
        // undecided (never a final regression on one boot).
        let first = boots_with(&mut rng, 1, Cap, &|_| true);
        let r = compare(&fit, &first, &rule).unwrap();
        let c = &r.cells[0];
        assert_eq!(c.verdict, CellVerdict::Inconclusive, "{c:?}");
        assert!(c.provisional);
        let why = limit_reason(c);
        assert!(
            matches!(why.finding, LimitFinding::Provisional { .. }) && why.detail == "3/4 running",
            "{why:?}"
        );
        assert_gate(&r, GateVerdict::Insufficient);
        assert_first_line(&r, |l| l.contains("1 provisional alarm"));
        // The same on a 10-run store, too short to judge even with two boots: no evidence
        // either way, so never a pass (a PR that costs KV capacity must not go green on a
        // young store), and no second boot.
        let r = compare(&fit[10..], &first, &rule).unwrap();
        let c = &r.cells[0];
        assert!(c.history_too_short && !c.provisional, "{c:?}");
        let why = limit_reason(c);
        assert_eq!(why.finding, LimitFinding::TooShort { needed: Some(16) });
        assert_gate(&r, GateVerdict::Insufficient);
        assert_first_line(&r, |l| {
            l.starts_with(
                "? insufficient: too few baseline runs to judge 1 cell now at its limit (C=1 / 8k)",
            )
        });
        // Limited on both boots: a capacity regression.
        let both = boots_with(&mut rng, 2, Cap, &|_| true);
        let r = compare(&fit, &both, &rule).unwrap();
        assert_eq!(
            r.cells[0].verdict,
            CellVerdict::CapacityRegression,
            "{:?}",
            r.cells[0]
        );
        assert!(!r.cells[0].provisional);
        assert_eq!(r.gate, GateVerdict::Regression);
        // Limited on one of the two boots: not evidence.
        let one = boots_with(&mut rng, 2, Cap, &|k| k == 0);
        let r = compare(&fit, &one, &rule).unwrap();
        assert_eq!(r.cells[0].verdict, CellVerdict::Inconclusive);
        assert!(!r.cells[0].provisional);
        // A cell that flips in a minority of the history (2 of 20 runs) is no regression even
        // on both boots: capacity_flaky, with the history's rate.
        let flaky = history_with(&mut rng, Cap, &|i| i == 4 || i == 13);
        let r = compare(&flaky, &both, &rule).unwrap();
        let c = &r.cells[0];
        assert_eq!(c.verdict, CellVerdict::Inconclusive, "{c:?}");
        assert!(!c.provisional && !c.history_too_short, "{c:?}");
        let why = limit_reason(c);
        assert_eq!(why.finding, LimitFinding::Flaky);
        assert_eq!((why.counts.hits, why.counts.runs), (2, 20));
        let r = compare(&flaky, &first, &rule).unwrap();
        assert!(
            !r.cells[0].provisional,
            "one limited boot of a flaky cell calls for no second boot"
        );
        // Never fit: stays capacity-limited, not comparable.
        let never = history_with(&mut rng, Cap, &|_| true);
        let r = compare(&never, &both, &rule).unwrap();
        assert_eq!(r.cells[0].verdict, CellVerdict::NotComparable);
        let why = limit_reason(&r.cells[0]);
        assert_eq!((why.counts.hits, why.counts.runs), (20, 20));
    }

    /// `compare --confirmation` and `run` decide with `two_boot_verdict`: the first boot's
    /// provisional alarm calls for the second boot, and only a second limited boot makes it a
    /// regression.
    #[test]
    fn a_provisional_capacity_alarm_is_decided_by_the_second_boot() {
        use crate::stats::confirm;
        use CellStatus::CapacityLimited as Cap;
        let mut rng = StdRng::seed_from_u64(22);
        let rule = DecisionRule::default();
        let fit = history_with(&mut rng, Cap, &|_| false);
        let first = boots_with(&mut rng, 1, Cap, &|_| true);
        let first_report =
            compare_at(&fit, &first, &rule, &confirm::first_look(&rule, true)).unwrap();
        assert!(
            confirm::wants_confirmation(&first_report),
            "{}",
            first_line(&first_report)
        );
        let why = confirm::reason(&first_report);
        assert!(
            matches!(
                why,
                ConfirmationReason::Alarms(1)
                    | ConfirmationReason::LeansWithAlarms { alarms: 1, .. }
            ),
            "{why:?}"
        );
        let limited = boots_with(&mut rng, 1, Cap, &|_| true);
        let second = |boot: &RunResults| {
            two_boot_verdict(&rule, &fit, &first[0], Some((boot, "second.json")))
        };
        let (both, used) = second(&limited[0]);
        assert!(used);
        assert_eq!(
            both.cells[0].verdict,
            CellVerdict::CapacityRegression,
            "{:?}",
            both.cells[0]
        );
        assert_eq!(both.gate, GateVerdict::Regression);
        let fits = boots_with(&mut rng, 1, Cap, &|_| false);
        let (both, used) = second(&fits[0]);
        assert!(used);
        assert_not_gate(&both, GateVerdict::Regression);
        assert_eq!(both.cells[0].verdict, CellVerdict::Inconclusive);
    }

    #[test]
    fn saturation_is_compared_like_capacity() {
        use CellStatus::Saturated as Sat;
        let mut rng = StdRng::seed_from_u64(23);
        let rule = DecisionRule::default();
        let clean = history_with(&mut rng, Sat, &|_| false);
        let first = boots_with(&mut rng, 1, Sat, &|_| true);
        let r = compare(&clean, &first, &rule).unwrap();
        assert_eq!(r.cells[0].verdict, CellVerdict::Saturated);
        assert!(r.cells[0].provisional);
        assert_eq!(r.gate, GateVerdict::Insufficient);
        let both = boots_with(&mut rng, 2, Sat, &|_| true);
        let r = compare(&clean, &both, &rule).unwrap();
        assert_eq!(
            r.cells[0].verdict,
            CellVerdict::SaturationRegression,
            "{:?}",
            r.cells[0]
        );
        assert_eq!(r.gate, GateVerdict::Regression);
        assert_first_line(&r, |l| {
            l.starts_with("✗ saturation regression at C=1 / 8k; 1 of 20 cells regressed")
        });
        // Saturated in its history: not evidence, reported as saturated.
        let saturating = history_with(&mut rng, Sat, &|i| i % 3 == 0);
        let r = compare(&saturating, &both, &rule).unwrap();
        assert_eq!(r.cells[0].verdict, CellVerdict::Saturated);
        assert!(!r.cells[0].provisional);
        assert_ne!(r.gate, GateVerdict::Regression);
        assert_first_line(&r, |l| l.contains("1 saturated"));
        // A saturated history run is left out of the noise fit, never compared for speed.
        let ok_now = boots_with(&mut rng, 1, Sat, &|_| false);
        let r = compare(&saturating, &ok_now, &rule).unwrap();
        assert!(r.cells[0].primary().is_some());
    }
}

#[cfg(test)]
mod prefill_tests {
    use super::*;
    use crate::synthetic::synthetic_run;
    use PrefillAgreement::WithinTolerance as Agrees;
    use infergate_schema::asserts::{assert_first_line, assert_gate, assert_not_gate};
    use infergate_schema::results::PrefillAgreement;
    use infergate_schema::verdict::GateVerdict;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use rand_distr::{Distribution, Normal};

    /// A synthetic run with a prefill layer at 8k and 32k: 150k and 120k tok/s times
    /// `factor`, with a 2% run-to-run scatter per context.
    fn run(id: &str, rng: &mut StdRng, factor: f64, agreement: PrefillAgreement) -> RunResults {
        let mut r = synthetic_run(id, rng, 0.01, 0.02, &|_| 1.0);
        let n: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        r.prefill = [(8_192u64, 150_000.0), (32_768, 120_000.0)]
            .into_iter()
            .map(|(ctx, tps)| {
                let v = tps * factor * (0.02 * n.sample(rng)).exp();
                crate::synthetic::prefill_record(ctx, v, agreement)
            })
            .collect();
        r
    }

    fn history(runs: usize, rng: &mut StdRng) -> Vec<RunResults> {
        (0..runs)
            .map(|i| run(&format!("b{i}"), rng, 1.0, Agrees))
            .collect()
    }

    #[test]
    fn a_slower_prefill_fails_the_gate_on_the_prefill_layer_and_a_clean_one_passes_it() {
        let mut rng = StdRng::seed_from_u64(57);
        let base = history(12, &mut rng);
        let rule = DecisionRule::default();
        let slow = [run("c", &mut rng, 1.0 / 1.3, Agrees)];
        let report = compare(&base, &slow, &rule).unwrap();
        assert!(report.prefill_gated);
        assert_gate(&report, GateVerdict::Regression);
        assert_first_line(&report, |l| l.contains("prefill tok/s"));
        assert!(report.prefill.iter().all(|c| c.verdict.is_regression()));
        let clean = [run("d", &mut rng, 1.0, Agrees)];
        let report = compare(&base, &clean, &rule).unwrap();
        assert!(report.prefill.iter().all(|c| !c.verdict.is_regression()));
        // No prefill regression named (a pass lists the layer among what it covered).
        assert_first_line(&report, |l| !l.contains("prefill tok/s"));
    }

    /// A prefill history that scatters 15% from run to run cannot vouch that a context did not
    /// slow by twice the layer's margin (−20%, `LAYER_VOUCH`): a clean candidate is
    /// `insufficient`, naming the contexts first, where the 2% history vouches for it.
    #[test]
    fn a_prefill_history_that_scatters_cannot_vouch_for_its_margin() {
        let mut rng = StdRng::seed_from_u64(60);
        let rule = DecisionRule::default();
        let quiet = history(12, &mut rng);
        let n: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        let scattered: Vec<RunResults> = (0..12)
            .map(|i| {
                let mut r = run(&format!("s{i}"), &mut rng, 1.0, Agrees);
                for p in &mut r.prefill {
                    let f = (0.15 * n.sample(&mut rng)).exp();
                    p.prefill_tps = p.prefill_tps.map(|v| v * f);
                }
                r
            })
            .collect();
        let clean = [run("c", &mut rng, 1.0, Agrees)];
        let report = compare(&quiet, &clean, &rule).unwrap();
        let line = infergate_schema::answer::first_line(&report);
        assert!(report.uncovered_metrics().is_empty(), "{line}");
        let report = compare(&scattered, &clean, &rule).unwrap();
        assert_gate(&report, GateVerdict::Insufficient);
        assert_first_line(&report, |l| {
            l.starts_with("? insufficient: prefill tok/s could be −20.0% or worse (")
        });
    }

    #[test]
    fn an_inflated_prefill_figure_is_not_compared_and_fails_closed() {
        let mut rng = StdRng::seed_from_u64(58);
        let base = history(12, &mut rng);
        let lies = [run("c", &mut rng, 2.0, PrefillAgreement::Disagrees)];
        let report = compare(&base, &lies, &DecisionRule::default()).unwrap();
        assert!(report.prefill.iter().all(|c| {
            c.verdict == CellVerdict::NotComparable
                && c.not_compared == Some(NotCompared::PrefillCountersDisagree)
        }));
        assert_not_gate(&report, GateVerdict::Pass);
    }

    #[test]
    fn history_runs_without_the_layer_do_not_count_for_it() {
        let mut rng = StdRng::seed_from_u64(59);
        let mut base = history(6, &mut rng);
        for i in 0..10 {
            let mut r = run(&format!("old{i}"), &mut rng, 1.0, Agrees);
            r.prefill.clear();
            base.insert(0, r);
        }
        let slow = [run("c", &mut rng, 0.5, Agrees)];
        let report = compare(&base, &slow, &DecisionRule::default()).unwrap();
        assert!(!report.prefill_gated);
        assert!(
            report.not_gated.iter().any(|l| l
                .to_string()
                .contains("prefill tok/s is reported, not gated: 6 of")),
            "{:?}",
            report.not_gated
        );
        assert_not_gate(&report, GateVerdict::Regression);
        // Still compared and shown.
        assert!(report.prefill.iter().all(|c| !c.metrics.is_empty()));
    }
}

#[cfg(test)]
mod burst_tests {
    use super::tests::pct;
    use super::*;
    use crate::synthetic::synthetic_run;
    use infergate_schema::asserts::{assert_first_line, assert_gate, assert_not_gate};
    use infergate_schema::results::{BurstRecord, BurstSettings};
    use infergate_schema::verdict::GateVerdict;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use rand_distr::{Distribution, Normal};

    /// A synthetic run with a burst of `requests` requests: 54k total tok/s and a 57 ms TTFT
    /// p90 times `ttft_factor`, each with a 2% run-to-run scatter; `completed` of them done.
    fn run(
        id: &str,
        rng: &mut StdRng,
        ttft_factor: f64,
        requests: u32,
        completed: u32,
    ) -> RunResults {
        let mut r = synthetic_run(id, rng, 0.01, 0.02, &|_| 1.0);
        let n: Normal<f64> = Normal::new(0.0, 1.0).unwrap();
        let p90 = 0.057 * ttft_factor * (0.02 * n.sample(rng)).exp();
        let tps = 54_000.0 * (0.02 * n.sample(rng)).exp();
        r.burst = Some(BurstRecord {
            settings: BurstSettings {
                requests,
                request_rate: Some(40.0),
                seed: 0,
                prompt_tokens: 2048,
                max_tokens: 16,
                slo: Default::default(),
            },
            sent: requests,
            completed,
            incomplete: requests - completed,
            errors: 0,
            duration_s: 1.2,
            prompt_tokens: 2048 * u64::from(completed),
            output_tokens: 16 * u64::from(completed),
            request_throughput: f64::from(completed) / 1.2,
            output_tps: tps / 129.0,
            total_tps: tps,
            ttft_s: Some(pct(p90 * 0.7, p90, p90 * 1.1, u64::from(completed))),
            tpot_s: None,
            itl_s: None,
            e2el_s: None,
            good: None,
            goodput: None,
            first_problem: None,
        });
        r
    }

    /// A history of 12 runs, each with a burst of 32 requests all completed at the usual TTFT.
    fn burst_history(rng: &mut StdRng) -> Vec<RunResults> {
        (0..12)
            .map(|i| run(&format!("b{i}"), rng, 1.0, 32, 32))
            .collect()
    }

    fn rule() -> DecisionRule {
        DecisionRule {
            metrics: vec![Metric::AggregateTps, Metric::BurstTps, Metric::BurstTtftP90],
            ..DecisionRule::default()
        }
    }

    #[test]
    fn a_burst_ttft_regression_fails_the_gate_naming_ttft_in_the_burst_layer() {
        let mut rng = StdRng::seed_from_u64(61);
        let base = burst_history(&mut rng);
        let slow = [run("c", &mut rng, 1.3, 32, 32)];
        let report = compare(&base, &slow, &rule()).unwrap();
        assert!(report.burst_gated);
        assert_gate(&report, GateVerdict::Regression);
        assert_first_line(&report, |l| {
            l.starts_with("✗ TTFT p90 +") && l.contains("in the burst layer")
        });
        let clean = [run("d", &mut rng, 1.0, 32, 32)];
        let report = compare(&base, &clean, &rule()).unwrap();
        assert!(report.burst.iter().all(|c| !c.verdict.is_regression()));
        // No burst regression named (a pass lists the burst among what it covered).
        assert_first_line(&report, |l| !l.contains("in the burst layer"));
        assert_eq!(report.burst[0].metrics.len(), 2);
    }

    /// A whole engine 10% slower, its burst's TTFT p90 +30% too: the first line leads with
    /// the matrix-wide decode regression and names the burst's beside it, not hiding it.
    #[test]
    fn a_decode_regression_first_line_names_the_burst_regression_beside_it() {
        let mut rng = StdRng::seed_from_u64(63);
        let base = burst_history(&mut rng);
        let mut slow = run("c", &mut rng, 1.3, 32, 32);
        for cell in &mut slow.cells {
            cell.aggregate_tps *= 0.9;
            cell.samples.iter_mut().for_each(|s| *s *= 0.9);
        }
        let report = compare(&base, &[slow], &rule()).unwrap();
        assert_gate(&report, GateVerdict::Regression);
        assert_first_line(&report, |l| {
            l.starts_with("✗ aggregate tok/s −") && l.contains("; burst layer: TTFT p90 +")
        });
    }

    /// Fewer than 29 completed requests: the TTFT p90 is not compared (and the report says
    /// so); a burst with a request that did not complete is not compared and fails closed.
    #[test]
    fn a_short_or_incomplete_burst_is_not_gated_or_fails_closed() {
        let mut rng = StdRng::seed_from_u64(62);
        let base = burst_history(&mut rng);
        let short = [run("c", &mut rng, 1.3, 16, 16)];
        let report = compare(&base, &short, &rule()).unwrap();
        assert!(
            report.burst[0]
                .metrics
                .iter()
                .all(|m| m.metric != Metric::BurstTtftP90)
        );
        assert!(
            report.not_gated.iter().any(|n| n
                .to_string()
                .contains("burst TTFT p90 not gated: 16 completed requests")),
            "{:?}",
            report.not_gated
        );
        let cut = [run("d", &mut rng, 1.0, 32, 31)];
        let report = compare(&base, &cut, &rule()).unwrap();
        assert_eq!(report.burst[0].verdict, CellVerdict::NotComparable);
        assert_eq!(
            report.burst[0].not_compared,
            Some(NotCompared::BurstIncomplete)
        );
        assert_gate(&report, GateVerdict::Insufficient);
    }

    /// History runs recorded before the layer existed count for the decode cells, not for
    /// the burst: with fewer than 10 runs that have it, it is reported, not gated.
    #[test]
    fn history_runs_without_the_burst_do_not_count_for_it() {
        let mut rng = StdRng::seed_from_u64(63);
        let mut base = burst_history(&mut rng);
        for r in base.iter_mut().take(4) {
            r.burst = None;
        }
        let slow = [run("c", &mut rng, 1.5, 32, 32)];
        let report = compare(&base, &slow, &rule()).unwrap();
        assert!(!report.burst_gated);
        assert_not_gate(&report, GateVerdict::Regression);
        assert!(
            report
                .not_gated
                .iter()
                .any(|n| n.to_string().contains("8 of the history's runs have it")),
            "{:?}",
            report.not_gated
        );
    }

    /// What overrules a change found over both boots is said as what it is: the lone boot
    /// that does not lean its way, does not show it, or reads it within the design effect. A
    /// regression at the first boot is provisional, and a secondary metric's change there is
    /// not confirmed.
    #[test]
    fn a_lone_boot_that_does_not_carry_a_change_says_which_and_why() {
        let hi = Direction::HigherIsBetter;
        let c = |estimate, se| LogChange {
            estimate,
            se,
            df: 1e6,
            tail_df: f64::INFINITY,
        };
        let m = log_margin(0.03);
        let found = |estimate| judge(&c(estimate, 0.02), hi, 1e-3, m, "both boots");
        assert_eq!(found(-0.10).0, CellVerdict::Regression);
        // A second boot at no change does not lean worse: no regression, its screen the line.
        let (v, check) = boot_leans(found(-0.10), Some(&c(0.0, 0.02)), hi, LoneBoot::Second);
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(check.screen && check.look == "second boot alone, futility screen");
        assert!(
            matches!(
                check.outcome,
                CheckOutcome::BootDoesNotLean {
                    found: Found::Regression,
                    boot: LoneBoot::Second
                }
            ),
            "{check:?}"
        );
        // One that leans worse too: the regression stands, its own test the line.
        let (v, check) = boot_leans(found(-0.10), Some(&c(-0.08, 0.02)), hi, LoneBoot::Second);
        assert_eq!(v, CellVerdict::Regression);
        assert!(matches!(check.outcome, CheckOutcome::Regression));
        // An improvement's second boot must lean better.
        let (v, check) = boot_leans(found(0.10), Some(&c(0.0, 0.02)), hi, LoneBoot::Second);
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(
            matches!(
                check.outcome,
                CheckOutcome::BootDoesNotLean {
                    found: Found::Improvement,
                    boot: LoneBoot::Second
                }
            ),
            "{check:?}"
        );
        // Each boot alone at the same alpha and margin: the first reads −2% (within it).
        let (first, second) = (c(-0.02, 0.002), c(-0.10, 0.02));
        let boots = [
            (Some(&first), LoneBoot::First),
            (Some(&second), LoneBoot::Second),
        ];
        let (v, check) = each_boot_shows(found(-0.10), boots, hi, 1e-3, m);
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(
            !check.rejected && check.look == "first boot alone",
            "{check:?}"
        );
        assert!(
            matches!(
                &check.outcome,
                CheckOutcome::BootDoesNotShow {
                    found: Found::Regression,
                    boot: LoneBoot::First,
                    own,
                } if matches!(**own, CheckOutcome::WithinMargin)
            ),
            "{check:?}"
        );
        let boots = [
            (Some(&second), LoneBoot::First),
            (Some(&second), LoneBoot::Second),
        ];
        let (v, check) = each_boot_shows(found(-0.10), boots, hi, 1e-3, m);
        assert_eq!(v, CellVerdict::Regression);
        assert!(matches!(check.outcome, CheckOutcome::Regression));
        // Beyond a 5% design effect on each boot: the second leans worse but reads −3%.
        let effect = log_margin(0.05);
        let near = c(-0.03, 0.005);
        let boots = [
            (Some(&second), LoneBoot::First),
            (Some(&near), LoneBoot::Second),
        ];
        let (v, check) = each_boot_exceeds(found(-0.10), boots, hi, effect);
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(check.screen && !check.rejected, "{check:?}");
        assert!(
            matches!(
                check.outcome,
                CheckOutcome::BootWithinDesignEffect {
                    found: Found::Regression,
                    boot: LoneBoot::Second,
                    reads,
                    design_effect,
                } if reads == relative(-0.03) && design_effect == relative(-effect)
            ),
            "{check:?}"
        );
        // A first boot that does not lean worse is said before the second is looked at.
        let boots = [
            (Some(&c(0.0, 0.02)), LoneBoot::First),
            (Some(&near), LoneBoot::Second),
        ];
        let (v, check) = each_boot_exceeds(found(-0.10), boots, hi, effect);
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(
            matches!(
                check.outcome,
                CheckOutcome::BootDoesNotLean {
                    found: Found::Regression,
                    boot: LoneBoot::First
                }
            ),
            "{check:?}"
        );
        // The first boot's regression is provisional.
        let (mut v, mut check) = found(-0.10);
        assert!(make_provisional(&mut v, &mut check));
        assert_eq!(v, CellVerdict::Inconclusive);
        assert!(matches!(check.outcome, CheckOutcome::ProvisionalRegression));
        // A gating secondary metric's improvement on one boot: unchanged, not confirmed.
        let (mut v, mut check) = found(0.10);
        one_boot_secondary(&mut v, &mut check, true);
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(
            matches!(&check.outcome, CheckOutcome::OnOneBoot(own)
                if matches!(**own, CheckOutcome::Improvement)),
            "{check:?}"
        );
        // A reported-only one's regression: inconclusive, its reported-only outcome kept.
        let (mut v, mut check) = found(-0.10);
        reported_only(&mut check, v, hi);
        one_boot_secondary(&mut v, &mut check, false);
        assert_eq!(v, CellVerdict::Inconclusive);
        assert!(
            matches!(&check.outcome, CheckOutcome::OnOneBoot(own)
                if matches!(**own, CheckOutcome::ReportedOnly { higher: false })),
            "{check:?}"
        );
        // A gating one's regression is left to the caller (made provisional).
        let (mut v, mut check) = found(-0.10);
        one_boot_secondary(&mut v, &mut check, true);
        assert_eq!(v, CellVerdict::Regression);
        assert!(matches!(check.outcome, CheckOutcome::Regression));
    }
}
