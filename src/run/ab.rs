//! Paired A/B runs: two engine builds (A = base, B = candidate) booted alternately on one
//! runner (A B B A A B B A …), each boot measuring the suite's matrix, and a paired comparison
//! of the boots.
//!
//! Why paired: the largest noise term on a GPU runner is run to run (another boot, other clocks,
//! another day). Against a stored baseline the candidate's own boot factor and every drift since
//! the baseline was recorded count against it; booting both builds side by side on the same
//! runner in an ABBA order cancels linear drift within each pair of pairs, and the spread of the
//! paired differences *measures* the boot-to-boot noise of this runner today instead of assuming
//! it. Per cell the statistic is the mean over pairs of `ln(B) − ln(A)` with a Student t interval
//! over the pairs (df = pairs − 1); the cells form one Holm family, plus a matrix-wide paired
//! test on the per-pair mean difference. See `docs/adaptive-and-ab.md`.
//!
//! Only one engine runs at a time: each boot is stopped (whole process group) before the next
//! starts, and a group that survives teardown stops the A/B run (exit 3).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::bench::EventSink;
use crate::config::{AbConfig, SuiteConfig};
use crate::results::{
    CellResult, CellStatus, Event, EventKind, HardwareFingerprint, RunResults, RunStatus,
};
use crate::stats::DecisionRule;
use crate::stats::compare::{ALL_METRICS, metric_value};
use crate::stats::interval::{LogChange, relative, significant_verdict};
use crate::stats::multiplicity::adjust_by_family;
use crate::telemetry::NvmlSampler;
use crate::verdict::{
    BaselineSummary, CellComparison, CellVerdict, ComparisonReport, Direction, GateVerdict,
    MatrixTest, Metric, MetricComparison, VERDICT_SCHEMA_VERSION,
};

use super::measure::{MeasureRequest, RunFailure, boot_and_measure};

/// Why a paired comparison cannot be made at all.
#[derive(Debug, thiserror::Error)]
pub enum AbError {
    /// A and B boot counts differ or are below two pairs.
    #[error(
        "a paired comparison needs at least 2 complete pairs of boots (got {a} A and {b} B runs)"
    )]
    TooFewPairs { a: usize, b: usize },
    /// The rule is invalid.
    #[error("{0}")]
    Stats(#[from] crate::stats::StatsError),
}

/// Which build a boot ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbSide {
    /// The base build (`[engine.a]`).
    A,
    /// The candidate build (`[engine.b]`).
    B,
}

impl AbSide {
    /// `a` or `b`.
    pub fn as_str(self) -> &'static str {
        match self {
            AbSide::A => "a",
            AbSide::B => "b",
        }
    }
}

/// One boot of the schedule and how it ended.
#[derive(Debug, Clone)]
pub struct AbBoot {
    /// Position in the boot order (0-based).
    pub index: u32,
    /// Pair index (0-based): boot `i` of A is paired with boot `i` of B.
    pub pair: u32,
    pub side: AbSide,
    /// The engine's process group (from the `engine_spawned` event), when it started.
    pub pgid: Option<i32>,
    /// Whether the whole process group was gone after teardown.
    pub group_gone: bool,
    /// Seconds from spawn to ready.
    pub boot_s: Option<f64>,
    /// Why the boot failed, when it did.
    pub failure: Option<String>,
}

/// Everything an A/B run measured.
#[derive(Debug)]
pub struct AbRun {
    /// The A boots' results, in pair order.
    pub a: Vec<RunResults>,
    /// The B boots' results, in pair order.
    pub b: Vec<RunResults>,
    /// The boots in the order they ran.
    pub boots: Vec<AbBoot>,
    /// Set when the run must exit 3 (a boot failed, teardown left processes, cancelled).
    pub failure: Option<RunFailure>,
    /// Engine-seconds spent (wall clock of all boots, measurement and teardown).
    pub elapsed_s: f64,
}

/// What an A/B run needs besides the config.
pub struct AbRequest<'a> {
    pub ab: &'a AbConfig,
    pub model: Option<&'a str>,
    pub suite: &'a SuiteConfig,
    pub hardware: HardwareFingerprint,
    pub telemetry: Result<Arc<NvmlSampler>, String>,
    pub engine_args: &'a [String],
    /// Directory for the per-boot engine logs (`engine-<NN>-<a|b>.log`).
    pub log_dir: PathBuf,
    pub log_tail_lines: usize,
    pub labels: BTreeMap<String, String>,
    /// Pairs of boots.
    pub pairs: u32,
}

/// Boots A and B alternately (the config's order), measuring the suite on each boot; stops at
/// the first failure. Never runs two engines at once.
pub async fn run_ab(req: AbRequest<'_>, events: EventSink, cancel: CancellationToken) -> AbRun {
    let started = std::time::Instant::now();
    let schedule = req.ab.order.schedule(req.pairs);
    let mut run = AbRun {
        a: Vec::new(),
        b: Vec::new(),
        boots: Vec::new(),
        failure: None,
        elapsed_s: 0.0,
    };
    for (index, &(pair, is_b)) in schedule.iter().enumerate() {
        let side = if is_b { AbSide::B } else { AbSide::A };
        if cancel.is_cancelled() {
            run.failure = Some(RunFailure::Cancelled);
            break;
        }
        let _ = events.send(Event::now(
            EventKind::AbBoot,
            format!(
                "boot {} of {}: engine {} (pair {})",
                index + 1,
                schedule.len(),
                side.as_str().to_uppercase(),
                pair + 1
            ),
        ));
        let mut labels = req.labels.clone();
        labels.insert("ab_side".into(), side.as_str().into());
        labels.insert("ab_pair".into(), pair.to_string());
        labels.insert("ab_boot".into(), index.to_string());
        let engine = if is_b { &req.ab.b } else { &req.ab.a };
        let log_path = match &engine.log_file {
            Some(p) => p.with_file_name(format!(
                "{}-{index:02}-{}.log",
                p.file_stem().and_then(|s| s.to_str()).unwrap_or("engine"),
                side.as_str()
            )),
            None => req
                .log_dir
                .join(format!("engine-{index:02}-{}.log", side.as_str())),
        };
        let _ = std::fs::remove_file(&log_path);
        let measured = boot_and_measure(
            MeasureRequest {
                engine,
                model: req.model,
                suite: req.suite,
                hardware: req.hardware.clone(),
                telemetry: req.telemetry.clone(),
                engine_args: req.engine_args,
                log_path,
                log_tail_lines: req.log_tail_lines,
                labels,
                adaptive: None,
            },
            events.clone(),
            cancel.clone(),
        )
        .await;
        let group_gone = measured.stop.as_ref().is_none_or(|s| s.group_gone);
        let pgid = measured.results.engine_process_group();
        let mut results = measured.results;
        let stopped = match pgid {
            Some(g) if group_gone => format!("engine process group {g} stopped; no process left"),
            Some(g) => format!("engine process group {g} survived teardown"),
            None => "engine never started".to_string(),
        };
        let stop_event = Event::now(EventKind::EngineStopped, stopped);
        let _ = events.send(stop_event.clone());
        results.events.push(stop_event);
        run.boots.push(AbBoot {
            index: index as u32,
            pair,
            side,
            pgid,
            group_gone,
            boot_s: measured.boot_s,
            failure: measured.failure.as_ref().map(RunFailure::message),
        });
        if is_b {
            run.b.push(results);
        } else {
            run.a.push(results);
        }
        if let Some(f) = measured.failure {
            run.failure = Some(match f {
                RunFailure::Cancelled => RunFailure::Cancelled,
                other => RunFailure::Measurement(format!(
                    "boot {} (engine {}) failed: {}",
                    index + 1,
                    side.as_str().to_uppercase(),
                    other.message()
                )),
            });
            break;
        }
        if !group_gone {
            run.failure = Some(RunFailure::Measurement(format!(
                "engine {} (boot {}) left processes behind after SIGKILL: not booting the other engine next to it",
                side.as_str().to_uppercase(),
                index + 1
            )));
            break;
        }
    }
    run.elapsed_s = started.elapsed().as_secs_f64();
    run
}

/// Folds the boots of one side into one results file: the first boot's header, each cell's
/// `rounds` = its measurement in each boot (round = pair index), samples pooled, aggregate the
/// mean over boots, every boot's events.
pub fn fold_side(runs: &[RunResults]) -> Option<RunResults> {
    let mut out = runs.first()?.clone();
    for (pair, run) in runs.iter().enumerate().skip(1) {
        for cell in &mut out.cells {
            let again = run
                .cells
                .iter()
                .find(|c| c.coord() == cell.coord())
                .cloned()
                .unwrap_or_else(|| {
                    CellResult::unmeasured(
                        cell.concurrency,
                        cell.context_tokens,
                        CellStatus::Error,
                        "missing in this boot",
                    )
                });
            cell.fold_round(&again, pair as u32);
        }
        out.events.extend(run.events.iter().cloned());
        if run.status != RunStatus::Complete {
            out.status = run.status;
            out.status_reason = run.status_reason.clone();
        }
        out.finished_at = run.finished_at;
    }
    out.events.sort_by_key(|e| e.at);
    out.labels.remove("ab_pair");
    out.labels.remove("ab_boot");
    out.labels.insert("ab_boots".into(), runs.len().to_string());
    Some(out)
}

type Coord = (u32, u64);

fn find(run: &RunResults, coord: Coord) -> Option<&CellResult> {
    run.cells.iter().find(|c| c.coord() == coord)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)).sqrt()
}

/// The paired change of a series of per-pair log differences: mean, SE over pairs, df = n − 1.
pub fn paired_change(diffs: &[f64]) -> LogChange {
    let n = diffs.len() as f64;
    LogChange {
        estimate: mean(diffs),
        se: sd(diffs) / n.sqrt(),
        df: (n - 1.0).max(0.5),
    }
}

/// Decides the cells that cannot be compared pair by pair (capacity, errors).
fn eligibility(coord: Coord, a: &[RunResults], b: &[RunResults]) -> Option<(CellVerdict, String)> {
    let statuses = |runs: &[RunResults]| -> Vec<CellStatus> {
        runs.iter()
            .map(|r| find(r, coord).map_or(CellStatus::Skipped, |c| c.status))
            .collect()
    };
    let (sa, sb) = (statuses(a), statuses(b));
    let count = |s: &[CellStatus], w: CellStatus| s.iter().filter(|x| **x == w).count();
    let (a_ok, a_cap) = (
        count(&sa, CellStatus::Ok),
        count(&sa, CellStatus::CapacityLimited),
    );
    let (b_ok, b_cap) = (
        count(&sb, CellStatus::Ok),
        count(&sb, CellStatus::CapacityLimited),
    );
    if b_cap > 0 && a_ok > 0 && a_ok >= a_cap {
        return Some((
            CellVerdict::CapacityRegression,
            format!(
                "capacity-limited in {b_cap} of {} B boots; fit in {a_ok} of {} A boots",
                sb.len(),
                sa.len()
            ),
        ));
    }
    if a_cap > 0 && b_ok > 0 && b_ok >= b_cap && a_ok < a_cap {
        return Some((
            CellVerdict::Improvement,
            format!(
                "fits in B ({b_ok} of {} boots); capacity-limited in {a_cap} of {} A boots",
                sb.len(),
                sa.len()
            ),
        ));
    }
    if a_cap > 0 && b_cap > 0 {
        return Some((
            CellVerdict::NotComparable,
            "capacity-limited on both sides".into(),
        ));
    }
    let pairs = sa
        .iter()
        .zip(&sb)
        .filter(|(x, y)| **x == CellStatus::Ok && **y == CellStatus::Ok)
        .count();
    if pairs < 2 {
        let why = b
            .iter()
            .chain(a)
            .filter_map(|r| find(r, coord))
            .find(|c| c.status != CellStatus::Ok)
            .and_then(|c| c.reason.clone())
            .unwrap_or_else(|| "not measured".into());
        return Some((
            CellVerdict::NotComparable,
            format!("measured on both sides in {pairs} pair(s), 2 needed ({why})"),
        ));
    }
    None
}

struct PairTest {
    metric: Metric,
    cell: usize,
    /// The cell's total change (what people see).
    change: LogChange,
    /// The cell's change beyond the pairs' common factor, `mean_i(d_ic − D_i)`: the boots'
    /// speed factors cancel in it, so it is the per-cell test (as in `stats::compare`).
    specific: Option<LogChange>,
    margin: f64,
    baseline: f64,
    candidate: f64,
    pairs: usize,
    p_worse: f64,
    p_better: f64,
}

/// The paired comparison of B (candidate) with A (base): `a[i]` and `b[i]` are pair `i`.
///
/// Per cell and metric: `d_i = ln(B_i) − ln(A_i)` over the pairs where both measured it, the
/// change shown is `mean(d)`, its interval a Student t over pairs. The per-cell *test* is on
/// `d_ic − D_i` (the cell's change beyond the pair's common factor, so each boot's speed
/// factor cancels, as in `stats::compare`); when the matrix-wide test finds a change, cells
/// left undecided take their verdict from the total change. The margin is
/// `max(min_effect, noise_k × σ)` with σ the cell's own spread beyond the pair's common factor
/// (`sd_i(d_ic − D_i) / √2`). Gating metrics of all cells form one family (Holm or BH at the
/// rule's cell alpha), improvements adjusted separately; the matrix-wide test is the paired t
/// on `D_i`, the per-pair mean difference over the cells measured in every pair, at the rule's
/// matrix alpha with `matrix_min_effect` as margin.
pub fn paired_compare(
    a: &[RunResults],
    b: &[RunResults],
    rule: &DecisionRule,
) -> Result<ComparisonReport, AbError> {
    rule.validate()?;
    let n = a.len().min(b.len());
    if n < 2 || a.len() != b.len() {
        return Err(AbError::TooFewPairs {
            a: a.len(),
            b: b.len(),
        });
    }
    let mut coords: Vec<Coord> = Vec::new();
    for run in b.iter().chain(a) {
        for c in &run.cells {
            if !coords.contains(&c.coord()) {
                coords.push(c.coord());
            }
        }
    }
    let decided: Vec<Option<(CellVerdict, String)>> =
        coords.iter().map(|&c| eligibility(c, a, b)).collect();
    let comparable: Vec<usize> = (0..coords.len())
        .filter(|&i| decided[i].is_none())
        .collect();

    let mut tests: Vec<PairTest> = Vec::new();
    let mut matrix: BTreeMap<Metric, LogChange> = BTreeMap::new();
    let mut matrix_cells: BTreeMap<Metric, usize> = BTreeMap::new();
    for metric in ALL_METRICS {
        // d[k][i]: cell k (index into comparable), pair i.
        let d: Vec<Vec<Option<(f64, f64, f64)>>> = comparable
            .iter()
            .map(|&ci| {
                (0..n)
                    .map(|i| {
                        let ca = find(&a[i], coords[ci]).filter(|c| c.status == CellStatus::Ok)?;
                        let cb = find(&b[i], coords[ci]).filter(|c| c.status == CellStatus::Ok)?;
                        let (va, vb) = (metric_value(ca, metric)?, metric_value(cb, metric)?);
                        Some((vb.ln() - va.ln(), va.ln(), vb.ln()))
                    })
                    .collect()
            })
            .collect();
        // Per-pair common factor over the cells measured in every pair.
        let full: Vec<usize> = (0..d.len())
            .filter(|&k| d[k].iter().all(Option::is_some))
            .collect();
        let pair_mean: Vec<Option<f64>> = (0..n)
            .map(|i| {
                (!full.is_empty()).then(|| {
                    mean(
                        &full
                            .iter()
                            .filter_map(|&k| d[k][i].map(|x| x.0))
                            .collect::<Vec<_>>(),
                    )
                })
            })
            .collect();
        if full.len() == d.len() && !full.is_empty() && pair_mean.iter().all(Option::is_some) {
            let dm: Vec<f64> = pair_mean.iter().flatten().copied().collect();
            matrix.insert(metric, paired_change(&dm));
            matrix_cells.insert(metric, full.len());
        }
        // Pooled variance of `d_ic − D_i` over the cells measured in every pair: each cell
        // gives n − 1 degrees of freedom, minus the n pair means shared by all of them.
        let pooled_resid = (full.len() >= 2 && n >= 2).then(|| {
            let mut ss = 0.0;
            for &k in &full {
                let r: Vec<f64> = (0..n)
                    .filter_map(|i| Some(d[k][i]?.0 - pair_mean[i]?))
                    .collect();
                let m = mean(&r);
                ss += r.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            }
            let df = ((n - 1) * (full.len() - 1)) as f64;
            (ss / df.max(1.0), df.max(0.5))
        });
        for (k, &ci) in comparable.iter().enumerate() {
            let valid: Vec<(usize, (f64, f64, f64))> = d[k]
                .iter()
                .enumerate()
                .filter_map(|(i, x)| x.map(|x| (i, x)))
                .collect();
            if valid.len() < 2 {
                continue;
            }
            let diffs: Vec<f64> = valid.iter().map(|(_, x)| x.0).collect();
            let change = paired_change(&diffs);
            let spread = if full.len() >= 2 && full.contains(&k) {
                let resid: Vec<f64> = valid
                    .iter()
                    .filter_map(|(i, x)| pair_mean[*i].map(|m| x.0 - m))
                    .collect();
                sd(&resid) / std::f64::consts::SQRT_2
            } else {
                0.0
            };
            let specific = (full.len() >= 2 && full.contains(&k)).then(|| {
                let resid: Vec<f64> = valid
                    .iter()
                    .filter_map(|(i, x)| pair_mean[*i].map(|m| x.0 - m))
                    .collect();
                let own = paired_change(&resid);
                match pooled_resid {
                    // The residual noise is pooled across cells (one pair has few degrees of
                    // freedom per cell), as `stats::compare` pools its per-cell noise.
                    Some((var, df)) => LogChange {
                        estimate: own.estimate,
                        se: (var / resid.len() as f64).sqrt(),
                        df,
                    },
                    None => own,
                }
            });
            let own = specific.unwrap_or(change);
            let dir = metric.direction();
            tests.push(PairTest {
                metric,
                cell: ci,
                change,
                specific,
                margin: rule.min_effect.max(rule.noise_k * spread),
                baseline: mean(&valid.iter().map(|(_, x)| x.1).collect::<Vec<_>>()).exp(),
                candidate: mean(&valid.iter().map(|(_, x)| x.2).collect::<Vec<_>>()).exp(),
                pairs: valid.len(),
                p_worse: own.p_worse(dir),
                p_better: own.p_better(dir),
            });
        }
    }

    let gating = |m: Metric| rule.metrics.contains(&m);
    let in_gating_family: Vec<bool> = tests.iter().map(|t| gating(t.metric)).collect();
    let p_worse: Vec<f64> = tests.iter().map(|t| t.p_worse).collect();
    let p_better: Vec<f64> = tests.iter().map(|t| t.p_better).collect();
    let (p_adj_worse, p_adj_better) =
        adjust_by_family(&in_gating_family, &p_worse, &p_better, rule.correction);

    let mut report = ComparisonReport {
        schema_version: VERDICT_SCHEMA_VERSION,
        profile: b[0].profile.clone(),
        suite: b[0].suite.clone(),
        candidate_runs: b.iter().map(|r| r.run_id.clone()).collect(),
        baseline: BaselineSummary {
            level_runs: a.iter().map(|r| r.run_id.clone()).collect(),
            noise_runs: n,
        },
        gate: GateVerdict::Pass,
        headline: String::new(),
        matrix_test: None,
        cells: Vec::new(),
        confirmation: None,
        rule: rule.summary(),
    };
    if rule.matrix_test
        && let Some(m) = matrix.get(&Metric::AggregateTps)
    {
        let dir = Direction::HigherIsBetter;
        let v = significant_verdict(
            m.margin_verdict(dir, rule.confidence, rule.matrix_min_effect),
            m.p_worse(dir),
            m.p_better(dir),
            rule.matrix_alpha(),
        );
        let (lo, hi) = m.interval(rule.confidence);
        report.matrix_test = Some(MatrixTest {
            change: relative(m.estimate),
            ci_low: relative(lo),
            ci_high: relative(hi),
            margin: rule.matrix_min_effect,
            p_value: m.p_worse(dir),
            verdict: v,
            cells: matrix_cells
                .get(&Metric::AggregateTps)
                .copied()
                .unwrap_or(0),
        });
    }

    let matrix_verdict = report.matrix_test.as_ref().map(|m| m.verdict);
    let mut per_cell: BTreeMap<usize, Vec<(MetricComparison, String)>> = BTreeMap::new();
    for (t, (pw, pb)) in tests.iter().zip(p_adj_worse.iter().zip(&p_adj_better)) {
        let dir = t.metric.direction();
        let alpha = if gating(t.metric) {
            rule.cell_alpha()
        } else {
            rule.alpha
        };
        let own = t.specific.unwrap_or(t.change);
        let mut verdict = significant_verdict(
            own.margin_verdict(dir, rule.confidence, t.margin),
            *pw,
            *pb,
            alpha,
        );
        // The per-cell test sees only what differs from the other cells; when the matrix-wide
        // test found a change, a cell the own test left undecided shows its total change
        // (a uniform −10% is −10% in every cell, never "unchanged").
        if t.metric == Metric::AggregateTps
            && matrix_verdict
                .is_some_and(|m| matches!(m, CellVerdict::Regression | CellVerdict::Improvement))
            && !matches!(verdict, CellVerdict::Regression | CellVerdict::Improvement)
        {
            verdict = match t.change.margin_verdict(dir, rule.confidence, t.margin) {
                CellVerdict::Unchanged => CellVerdict::Inconclusive,
                v => v,
            };
        }
        let (lo, hi) = t.change.interval(rule.confidence);
        let why = format!(
            "B vs A {} {:+.1}% [{:+.1}%, {:+.1}%] over {} pairs of boots",
            t.metric.as_str(),
            100.0 * relative(t.change.estimate),
            100.0 * relative(lo),
            100.0 * relative(hi),
            t.pairs
        );
        per_cell.entry(t.cell).or_default().push((
            MetricComparison {
                metric: t.metric,
                direction: dir,
                baseline: t.baseline,
                candidate: t.candidate,
                change: relative(t.change.estimate),
                ci_low: relative(lo),
                ci_high: relative(hi),
                margin: t.margin,
                p_value: t.p_worse,
                p_adjusted: *pw,
                verdict,
            },
            why,
        ));
    }
    for (i, coord) in coords.iter().enumerate() {
        let (verdict, reason, metrics) = match &decided[i] {
            Some((v, why)) => (*v, Some(why.clone()), Vec::new()),
            None => {
                let entries = per_cell.remove(&i).unwrap_or_default();
                let chosen = [
                    CellVerdict::Regression,
                    CellVerdict::Inconclusive,
                    CellVerdict::Improvement,
                    CellVerdict::Unchanged,
                ]
                .into_iter()
                .find_map(|v| {
                    entries
                        .iter()
                        .find(|(m, _)| gating(m.metric) && m.verdict == v)
                });
                match chosen {
                    Some((m, why)) => (
                        m.verdict,
                        Some(why.clone()),
                        entries.iter().map(|(m, _)| m.clone()).collect(),
                    ),
                    None => (
                        CellVerdict::NotComparable,
                        Some("no gating metric measured in two pairs".to_string()),
                        entries.iter().map(|(m, _)| m.clone()).collect(),
                    ),
                }
            }
        };
        report.cells.push(CellComparison {
            concurrency: coord.0,
            context_tokens: coord.1,
            verdict,
            reason,
            metrics,
        });
    }
    report.gate = crate::stats::gate_of(&report);
    report.headline = format!("B vs A: {}", super::adaptive::headline(&report));
    Ok(report)
}

/// The A/B section of `summary.md`: the two commands, the boot order and each boot's teardown.
pub fn summary_section(run: &AbRun, a_cmd: &str, b_cmd: &str, order: &str) -> String {
    use crate::report::markdown::escape;
    let mut s = String::from("### Paired A/B run\n\n");
    s.push_str(&format!(
        "- **A** (base): `{}`\n- **B** (candidate): `{}`\n- order: {} · {} boots · {:.0} s\n\n",
        escape(a_cmd).replace('`', "'"),
        escape(b_cmd).replace('`', "'"),
        escape(order),
        run.boots.len(),
        run.elapsed_s
    ));
    s.push_str("| boot | engine | pair | ready after | teardown |\n|---|---|---|---|---|\n");
    for b in &run.boots {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            b.index + 1,
            b.side.as_str().to_uppercase(),
            b.pair + 1,
            b.boot_s.map_or("-".into(), |x| format!("{x:.1} s")),
            if b.failure.is_some() {
                "failed".to_string()
            } else if b.group_gone {
                "group gone".to_string()
            } else {
                "**processes left**".to_string()
            }
        ));
    }
    s.push('\n');
    s
}

/// Where the per-side folded results go.
pub fn side_results_path(out: &Path, side: AbSide) -> PathBuf {
    match side {
        AbSide::B => out.join("results.json"),
        AbSide::A => out.join("results-a.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::eval::{cell_levels, template};
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use rand_distr::{Distribution, Normal};

    /// One boot of the synthetic 20-cell matrix: boot factor `boot_cv`, cell noise `cell_cv`,
    /// cell `i` scaled by `factor(i)`.
    fn boot(
        id: &str,
        rng: &mut StdRng,
        boot_cv: f64,
        cell_cv: f64,
        factor: &dyn Fn(usize) -> f64,
    ) -> RunResults {
        let n = Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!());
        let mut r = template();
        r.run_id = id.into();
        let f = (boot_cv * n.sample(rng)).exp();
        r.cells = cell_levels()
            .into_iter()
            .enumerate()
            .map(|(i, (c, ctx, level))| {
                let mut cell = CellResult::unmeasured(c, ctx, CellStatus::Ok, "");
                cell.reason = None;
                cell.aggregate_tps = level * f * (cell_cv * n.sample(rng)).exp() * factor(i);
                cell.samples = vec![cell.aggregate_tps; 5];
                cell.measured_s = 10.0;
                cell
            })
            .collect();
        r
    }

    fn pairs(
        seed: u64,
        n: usize,
        factor: &dyn Fn(usize) -> f64,
    ) -> (Vec<RunResults>, Vec<RunResults>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = (0..n)
            .map(|i| boot(&format!("a{i}"), &mut rng, 0.02, 0.01, &|_| 1.0))
            .collect();
        let b = (0..n)
            .map(|i| boot(&format!("b{i}"), &mut rng, 0.02, 0.01, factor))
            .collect();
        (a, b)
    }

    #[test]
    fn identical_builds_do_not_regress_and_ten_percent_slower_does() {
        let rule = DecisionRule::default();
        let (a, b) = pairs(1, 6, &|_| 1.0);
        let r = paired_compare(&a, &b, &rule).expect("compare");
        assert_ne!(r.gate, GateVerdict::Regression, "{}", r.headline);
        let (a, b) = pairs(2, 6, &|_| 0.90);
        let r = paired_compare(&a, &b, &rule).expect("compare");
        assert_eq!(r.gate, GateVerdict::Regression, "{}", r.headline);
        assert!(r.headline.starts_with("B vs A:"), "{}", r.headline);
        let (a, b) = pairs(3, 6, &|i| if i == 3 { 1.25 } else { 1.0 });
        let r = paired_compare(&a, &b, &rule).expect("compare");
        assert_eq!(
            r.cells[3].verdict,
            CellVerdict::Improvement,
            "{}",
            r.headline
        );
        assert!(r.headline.contains("improvement"), "{}", r.headline);
    }

    #[test]
    fn boot_factors_cancel_in_the_per_cell_test() {
        // One cell 8% slower, 2% boot-to-boot noise, 4 pairs: the pairs' common factor is
        // removed before the cell is tested, so the cell is found (its total change alone,
        // carrying two boots' noise, would often be inconclusive) and the others are not.
        let rule = DecisionRule::default();
        let mut found = 0;
        for seed in 0..40 {
            let (a, b) = pairs(500 + seed, 4, &|i| if i == 5 { 0.92 } else { 1.0 });
            let r = paired_compare(&a, &b, &rule).expect("compare");
            if r.cells[5].verdict == CellVerdict::Regression {
                found += 1;
            }
            let others = r
                .cells
                .iter()
                .enumerate()
                .filter(|(i, c)| *i != 5 && c.verdict == CellVerdict::Regression)
                .count();
            assert_eq!(others, 0, "seed {seed}: {}", r.headline);
        }
        assert!(found >= 32, "single-cell −8% found in {found} of 40");
    }

    #[test]
    fn too_few_pairs_is_an_error() {
        let (a, b) = pairs(4, 1, &|_| 1.0);
        assert!(paired_compare(&a, &b, &DecisionRule::default()).is_err());
    }

    #[test]
    fn a_false_alarm_is_rare_with_boot_noise() {
        let rule = DecisionRule::default();
        let mut alarms = 0;
        for seed in 0..200 {
            let (a, b) = pairs(100 + seed, 4, &|_| 1.0);
            if paired_compare(&a, &b, &rule).expect("compare").gate == GateVerdict::Regression {
                alarms += 1;
            }
        }
        assert!(alarms <= 6, "{alarms} false alarms in 200");
    }

    #[test]
    fn abba_schedule_alternates_and_never_repeats_a_boot() {
        let s = crate::config::AbOrder::Abba.schedule(4);
        let sides: String = s.iter().map(|(_, b)| if *b { 'B' } else { 'A' }).collect();
        assert_eq!(sides, "ABBAABBA");
        let s = crate::config::AbOrder::Ab.schedule(2);
        let sides: String = s.iter().map(|(_, b)| if *b { 'B' } else { 'A' }).collect();
        assert_eq!(sides, "ABAB");
    }
}
