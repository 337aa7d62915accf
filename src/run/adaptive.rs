//! Adaptive re-measurement: after the matrix and the first look, the cells whose own test
//! leans worse without crossing its boundary (one-sided p below the futility bound) are
//! measured again on the still-running engine (a fresh set of streams, warm-up and window each
//! round), the evidence of all rounds is pooled, and the look is made again — until no cell
//! leans or the budget (`max_rounds`, `max_extra_seconds`) is spent.
//!
//! The rounds share the local families' alpha through a Lan–DeMets alpha-spending plan
//! ([`AlphaSpending`]) over `1 + max_rounds` looks: look `k` (look 0 = the first boot's) tests
//! the rows, columns and cells at the spending function's increment, so by the union bound
//! their false alarms over all looks stay within their share. The matrix-wide test is not
//! re-made (re-measuring cells on one boot cannot redraw the boot factor). A cell's verdict is
//! frozen at the look that decided it. Once the first boot already calls for a second boot (a
//! provisional alarm, a matrix that leans worse), the rounds stop: the second boot decides,
//! and rounds on this boot would only spend engine time first. See `docs/adaptive-and-ab.md`.

use std::path::PathBuf;
use std::time::Instant;

use crate::config::AdaptiveConfig;
use crate::results::{CellResult, Event, EventKind, RunResults, context_label};
use crate::stats::{AlphaSpending, DecisionRule, Look};
use crate::verdict::{CellVerdict, ComparisonReport, GateVerdict};

use super::decide::{Decision, GateError};

/// What `boot_and_measure` needs to re-measure inconclusive cells before it stops the engine.
#[derive(Debug, Clone)]
pub(crate) struct AdaptiveRequest {
    /// Budget of the extra rounds.
    pub config: AdaptiveConfig,
    /// The gate's decision rule.
    pub rule: DecisionRule,
    /// The first boot's look as the gate plans it; its local alpha is spread over the rounds.
    pub first: Look,
    /// Baseline store directory.
    pub store_dir: PathBuf,
}

/// What the adaptive phase did, and the comparison it ended with.
#[derive(Debug)]
pub(crate) struct AdaptiveOutcome {
    /// The final comparison (cells frozen at the look that decided them), or why there is none.
    pub decision: Result<Decision, GateError>,
    /// Extra rounds made (0 when every cell was decided at the first look).
    pub rounds: u32,
    /// Wall-clock seconds the extra measurements took (engine-seconds spent beyond the matrix).
    pub extra_s: f64,
    /// The cells measured again, in order of first re-measurement.
    pub remeasured: Vec<(u32, u64)>,
    /// Why re-measuring stopped (for people).
    pub stop_reason: String,
}

/// The spending plan of an adaptive run: the first look's local alpha over `1 + max_rounds`
/// looks.
pub(crate) fn spending_plan(config: &AdaptiveConfig, first: &Look) -> AlphaSpending {
    AlphaSpending::new(first.local_alpha, config.max_rounds + 1)
}

/// Look `look` of the rounds: the rows, columns and cells at the spending increment; the
/// matrix-wide test as the first look makes it at look 0 (later looks keep look 0's).
pub(crate) fn look_at(plan: &AlphaSpending, first: &Look, look: u32) -> Look {
    Look {
        name: if look == 0 {
            first.name.clone()
        } else {
            format!("{}, round {look}", first.name)
        },
        local_alpha: plan.alpha_at(look),
        matrix_alpha: if look == 0 { first.matrix_alpha } else { None },
        design_boots: first.design_boots,
        second_boot_from: None,
        local_provisional: first.local_provisional,
    }
}

/// Whether a cell's own test leans worse without having decided: worth another round.
fn leans(cell: &crate::verdict::CellComparison) -> bool {
    cell.verdict == CellVerdict::Unchanged
        && cell
            .primary()
            .is_some_and(|m| m.p_value < crate::stats::rule::FUTILITY_P)
}

/// Progress and totals of the loop.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct LoopStats {
    pub rounds: u32,
    pub extra_s: f64,
    pub remeasured: Vec<(u32, u64)>,
    pub stop_reason: String,
}

/// Re-measures the leaning cells of `first` (the comparison at look 0, made with
/// [`look_at`]`(plan, first_look, 0)`) until none leans or out of budget, and returns the
/// final comparison.
///
/// `measure(c, ctx)` measures one cell again (`None` = cancelled: stop). Each extra
/// measurement is folded into the cell as a round (`CellResult.rounds`, with the verdict after
/// that look); only the re-measured cells get rounds.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn remeasure_inconclusive<M>(
    results: &mut RunResults,
    history: &crate::stats::History<'_>,
    first: ComparisonReport,
    rule: &DecisionRule,
    first_look: &Look,
    config: &AdaptiveConfig,
    est_cell_s: f64,
    mut measure: M,
    emit: &dyn Fn(Event),
) -> Result<(ComparisonReport, LoopStats), GateError>
where
    M: AsyncFnMut(u32, u64) -> Option<CellResult>,
{
    let plan = spending_plan(config, first_look);
    let mut stats = LoopStats::default();
    let mut report = first;
    // Cells decided at some look keep that look's comparison.
    let mut cost_s = est_cell_s.max(0.1);
    stats.stop_reason = "no cell leans worse".into();
    for look in 1..=config.max_rounds {
        if report.gate == GateVerdict::Regression {
            stats.stop_reason =
                "the gate already found a regression: more rounds cannot change the exit code"
                    .into();
            break;
        }
        if first_look.local_provisional && crate::stats::confirm::wants_confirmation(&report) {
            stats.stop_reason = "a second boot decides: this boot already calls for one".into();
            break;
        }
        let pending: Vec<(u32, u64)> = report
            .cells
            .iter()
            // A cell decided up front (capacity-limited, saturated: no metrics) is not
            // resolved by re-measuring it on the same boot; a second boot decides it.
            .filter(|c| leans(c))
            .map(|c| (c.concurrency, c.context_tokens))
            .collect();
        if pending.is_empty() {
            stats.stop_reason = "no cell leans worse".into();
            break;
        }
        let mut measured_now = Vec::new();
        let mut out_of_budget = false;
        let mut cancelled = false;
        for &(c, ctx) in &pending {
            if let Some(max) = config.max_extra_s
                && stats.extra_s + cost_s > max
            {
                out_of_budget = true;
                break;
            }
            emit(Event::cell(
                EventKind::AdaptiveRound,
                c,
                ctx,
                format!(
                    "re-measuring C={c} ctx={} (round {look} of at most {}): leans worse",
                    context_label(ctx),
                    config.max_rounds
                ),
            ));
            let t0 = Instant::now();
            let Some(again) = measure(c, ctx).await else {
                cancelled = true;
                break;
            };
            let took = t0.elapsed().as_secs_f64();
            stats.extra_s += took;
            cost_s = cost_s.max(took);
            if let Some(cell) = results.cells.iter_mut().find(|x| x.coord() == (c, ctx)) {
                let verdict0 = report
                    .cells
                    .iter()
                    .find(|x| (x.concurrency, x.context_tokens) == (c, ctx))
                    .map(|x| x.verdict.as_str().to_string());
                let next = cell.rounds.last().map_or(1, |r| r.round + 1);
                cell.fold_round(&again, next);
                // Round 0 (or the last repetition) carries the verdict of the first look.
                let n = cell.rounds.len();
                if n >= 2 && cell.rounds[n - 2].verdict_after.is_none() {
                    cell.rounds[n - 2].verdict_after = verdict0;
                }
            }
            if !stats.remeasured.contains(&(c, ctx)) {
                stats.remeasured.push((c, ctx));
            }
            measured_now.push((c, ctx));
        }
        if !measured_now.is_empty() {
            stats.rounds = look;
            let this = look_at(&plan, first_look, look);
            let again =
                crate::stats::compare_on(history, std::slice::from_ref(results), rule, &this)?;
            report = merge_look(report, &again, &measured_now);
            for &(c, ctx) in &measured_now {
                let v = report
                    .cells
                    .iter()
                    .find(|x| (x.concurrency, x.context_tokens) == (c, ctx))
                    .map(|x| x.verdict);
                if let Some(cell) = results.cells.iter_mut().find(|x| x.coord() == (c, ctx))
                    && let Some(last) = cell.rounds.last_mut()
                {
                    last.verdict_after = v.map(|v| v.as_str().to_string());
                }
                emit(Event::cell(
                    EventKind::AdaptiveVerdict,
                    c,
                    ctx,
                    format!(
                        "after round {look}: C={c} ctx={} {} (local alpha at this look {:.2e})",
                        context_label(ctx),
                        v.map_or("?", |v| v.as_str()),
                        this.local_alpha
                    ),
                ));
            }
        }
        if cancelled {
            stats.stop_reason = "cancelled".into();
            break;
        }
        if out_of_budget {
            stats.stop_reason = format!(
                "max_extra_seconds ({:.0} s) spent",
                config.max_extra_s.unwrap_or_default()
            );
            break;
        }
        if look == config.max_rounds {
            stats.stop_reason = if report.cells.iter().any(leans) {
                format!("max_rounds ({}) spent", config.max_rounds)
            } else {
                "no cell leans worse".into()
            };
        }
    }
    // The rule stays look 0's as compared (its alpha shares, the lines' part included).
    crate::stats::finish(&mut report);
    Ok((report, stats))
}

/// The report after a look: the re-measured cells take the new look's comparison (frozen once
/// decided, since they are not re-measured again); every other cell keeps the comparison of
/// the look that decided it; the matrix-wide test stays the one of look 0.
fn merge_look(
    mut report: ComparisonReport,
    look: &ComparisonReport,
    measured: &[(u32, u64)],
) -> ComparisonReport {
    for cell in &mut report.cells {
        let coord = (cell.concurrency, cell.context_tokens);
        if measured.contains(&coord)
            && let Some(new) = look
                .cells
                .iter()
                .find(|x| (x.concurrency, x.context_tokens) == coord)
        {
            *cell = new.clone();
        }
    }
    // The matrix-wide test is made once, at look 0 (see [`look_rule`]).
    report.candidate_runs = look.candidate_runs.clone();
    report.gate = crate::stats::gate_of(&report);
    report
}

/// Runs the adaptive phase on a live session: the comparison at look 0, then
/// [`remeasure_inconclusive`]. Used by `boot_and_measure` before the engine is stopped.
pub(crate) async fn run_adaptive(
    session: &crate::bench::BenchSession,
    results: &mut RunResults,
    req: &AdaptiveRequest,
    est_cell_s: f64,
    cancel: &tokio_util::sync::CancellationToken,
    emit: &dyn Fn(Event),
) -> AdaptiveOutcome {
    let plan = spending_plan(&req.config, &req.first);
    let first = match super::decide::decide(
        results,
        &req.store_dir,
        &req.rule,
        &look_at(&plan, &req.first, 0),
    ) {
        Ok(d) => d,
        Err(e) => {
            return AdaptiveOutcome {
                decision: Err(e),
                rounds: 0,
                extra_s: 0.0,
                remeasured: Vec::new(),
                stop_reason: "the comparison failed".into(),
            };
        }
    };
    let Some(report) = first.verdict.clone() else {
        return AdaptiveOutcome {
            decision: Ok(first),
            rounds: 0,
            extra_s: 0.0,
            remeasured: Vec::new(),
            stop_reason: "no baseline".into(),
        };
    };
    let history = first.history.clone();
    let looped = remeasure_inconclusive(
        results,
        &history,
        report,
        &req.rule,
        &req.first,
        &req.config,
        est_cell_s,
        async |c, ctx| {
            if cancel.is_cancelled() {
                return None;
            }
            let cell = session.measure_cell(c, ctx, cancel).await;
            (!cancel.is_cancelled()).then_some(cell)
        },
        emit,
    )
    .await;
    match looped {
        Ok((report, stats)) => {
            emit(Event::now(
                EventKind::AdaptiveDone,
                format!(
                    "adaptive re-measurement: {}, {} re-measured, {:.1} s extra; stopped: {}",
                    crate::answer::plural(stats.rounds, "extra round"),
                    crate::answer::cells_word(stats.remeasured.len()),
                    stats.extra_s,
                    stats.stop_reason
                ),
            ));
            results
                .labels
                .insert("adaptive_rounds".into(), stats.rounds.to_string());
            results
                .labels
                .insert("adaptive_extra_s".into(), format!("{:.2}", stats.extra_s));
            AdaptiveOutcome {
                decision: Ok(Decision {
                    verdict: Some(report),
                    history,
                    notices: first.notices,
                }),
                rounds: stats.rounds,
                extra_s: stats.extra_s,
                remeasured: stats.remeasured,
                stop_reason: stats.stop_reason,
            }
        }
        Err(e) => AdaptiveOutcome {
            decision: Err(e),
            rounds: 0,
            extra_s: 0.0,
            remeasured: Vec::new(),
            stop_reason: "the comparison failed".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{noisy_history, synthetic_run};
    use rand::SeedableRng;

    /// Re-measurement on, at most two rounds.
    fn two_rounds() -> AdaptiveConfig {
        AdaptiveConfig {
            enabled: true,
            max_rounds: 2,
            ..AdaptiveConfig::default()
        }
    }

    #[tokio::test]
    async fn no_round_is_made_once_the_first_boot_calls_for_a_second() {
        // One cell 20% slower (a provisional alarm: a second boot will be made) and one 5%
        // slower, which leans worse without deciding: a round would re-measure it.
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let history = noisy_history(&mut rng, 20);
        let factor = |i: usize| match i {
            0 => 0.80,
            7 => 0.95,
            _ => 1.0,
        };
        let mut slow = synthetic_run("cand", &mut rng, 0.0, 0.0, &factor);
        let rule = DecisionRule::default();
        let cfg = two_rounds();
        let first_look = crate::stats::confirm::first_look(&rule, true);
        let plan = spending_plan(&cfg, &first_look);
        let fitted = crate::stats::History::new(&history[..]);
        let first = crate::stats::compare_on(
            &fitted,
            std::slice::from_ref(&slow),
            &rule,
            &look_at(&plan, &first_look, 0),
        )
        .expect("compare");
        assert!(crate::stats::confirm::wants_confirmation(&first));
        assert!(first.cells.iter().any(leans), "{}", first.headline);
        let measured = std::cell::Cell::new(0);
        let (report, stats) = remeasure_inconclusive(
            &mut slow,
            &fitted,
            first,
            &rule,
            &first_look,
            &cfg,
            1.0,
            async |_, _| {
                measured.set(measured.get() + 1);
                None
            },
            &|_| {},
        )
        .await
        .expect("rounds");
        assert_eq!(measured.get(), 0);
        assert_eq!(stats.rounds, 0);
        // The report keeps the rule as compared: the rows' and columns' part of the local alpha.
        assert!(
            report.rule.shares.is_some_and(|s| s.lines > 0.0),
            "{:?}",
            report.rule
        );
        assert_eq!(
            stats.stop_reason,
            "a second boot decides: this boot already calls for one"
        );
    }

    #[test]
    fn rounds_spend_the_first_looks_local_alpha_and_the_matrix_test_looks_once() {
        let rule = DecisionRule::default();
        let cfg = two_rounds();
        let first = crate::stats::confirm::first_look(&rule, true);
        let plan = spending_plan(&cfg, &first);
        let looks: Vec<Look> = (0..3).map(|k| look_at(&plan, &first, k)).collect();
        let local: f64 = looks.iter().map(|l| l.local_alpha).sum();
        assert!((local - rule.local_alpha()).abs() < 1e-9, "{local}");
        assert!(looks.iter().all(|l| l.matrix_alpha.is_none()));
        // Pocock: the first look gets the largest share.
        assert!(looks[0].local_alpha > looks[1].local_alpha);
        assert_eq!(looks[2].name, "first boot, round 2");
        // One boot decides all: the matrix test at look 0 only.
        let single = Look::single(&rule);
        let plan = spending_plan(&cfg, &single);
        assert_eq!(
            look_at(&plan, &single, 0).matrix_alpha,
            Some(rule.matrix_alpha())
        );
        assert_eq!(look_at(&plan, &single, 1).matrix_alpha, None);
    }
}
