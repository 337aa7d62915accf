//! Adaptive re-measurement on the live engine: the judge (`stats::judge`) asks for the cells
//! whose own test leans worse without deciding; they are measured again on the still-running
//! engine (a fresh set of streams, warm-up and window each round) until the judge has what it
//! needs or the engine-seconds budget (`max_extra_seconds`) is spent. The judge spends the
//! alpha over the rounds and decides; this module only measures and keeps the time
//! (`docs/adaptive-and-ab.md`).

use std::time::Instant;

use infergate_config::config::AdaptiveConfig;
use infergate_model::stats::{Evidence, Judge, Next, StatsError};
use infergate_schema::results::{CellResult, Event, EventKind, RunResults, context_label};
use infergate_schema::verdict::RoundsStop;

/// What the rounds cost, beside what the judge records ([`infergate_model::stats::judge::Rounds`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundsSpent {
    /// Wall-clock seconds the extra measurements took (engine-seconds beyond the matrix).
    pub extra_s: f64,
}

/// Measures what the judge asks for (`next`) round by round with `measure(c, ctx)` (`None` =
/// cancelled: stop) until it asks for something else, keeping to `budget`'s engine-seconds
/// (the judge keeps `max_rounds`). `est_cell_s` is the first guess of a cell's cost. Returns
/// the judge's next step once the rounds are over.
pub async fn measure_rounds<M>(
    judge: &mut Judge<'_>,
    mut next: Next,
    budget: &AdaptiveConfig,
    est_cell_s: f64,
    mut measure: M,
    emit: &dyn Fn(Event),
) -> Result<(Next, RoundsSpent), StatsError>
where
    M: AsyncFnMut(u32, u64) -> Option<CellResult>,
{
    let mut spent = RoundsSpent::default();
    let mut cost_s = est_cell_s.max(0.1);
    while let Next::Remeasure { round, cells } = next {
        let mut measured = Vec::new();
        let mut ended = None;
        for (c, ctx) in cells {
            if let Some(max) = budget.max_extra_s
                && spent.extra_s + cost_s > max
            {
                ended = Some(RoundsStop::MaxExtraSeconds(max));
                break;
            }
            emit(Event::cell(
                EventKind::AdaptiveRound,
                c,
                ctx,
                format!(
                    "re-measuring C={c} ctx={} (round {round} of at most {}): leans worse",
                    context_label(ctx),
                    budget.max_rounds
                ),
            ));
            let t0 = Instant::now();
            let Some(again) = measure(c, ctx).await else {
                ended = Some(RoundsStop::Cancelled);
                break;
            };
            let took = t0.elapsed().as_secs_f64();
            spent.extra_s += took;
            cost_s = cost_s.max(took);
            measured.push(again);
        }
        let coords: Vec<(u32, u64)> = measured.iter().map(CellResult::coord).collect();
        next = if measured.is_empty() {
            // Nothing measured: the budget or a cancel ended the round (a round of no cells
            // would mean no cell leans).
            let why = ended.take().unwrap_or(RoundsStop::NoCellLeans);
            judge.look(Evidence::RoundsEnded(why))?
        } else {
            judge.look(Evidence::Remeasured(measured))?
        };
        emit_verdicts(judge, round, &coords, emit);
        if let (Some(why), Next::Remeasure { .. }) = (ended, &next) {
            next = judge.look(Evidence::RoundsEnded(why))?;
        }
    }
    let rounds = judge.rounds();
    emit(Event::now(
        EventKind::AdaptiveDone,
        format!(
            "adaptive re-measurement: {}, {} re-measured, {:.1} s extra; stopped: {}",
            infergate_schema::answer::plural(rounds.rounds, "extra round"),
            infergate_schema::answer::cells_word(rounds.remeasured.len()),
            spent.extra_s,
            rounds
                .stop_reason
                .map_or_else(String::new, |s| s.to_string())
        ),
    ));
    Ok((next, spent))
}

/// One event per re-measured cell with its verdict after the round.
fn emit_verdicts(judge: &Judge<'_>, round: u32, coords: &[(u32, u64)], emit: &dyn Fn(Event)) {
    let Some(run) = judge.first_boot().first() else {
        return;
    };
    for &(c, ctx) in coords {
        let verdict = run
            .cells
            .iter()
            .find(|x| x.coord() == (c, ctx))
            .and_then(|x| x.rounds.last())
            .and_then(|r| r.verdict_after.clone());
        emit(Event::cell(
            EventKind::AdaptiveVerdict,
            c,
            ctx,
            format!(
                "after round {round}: C={c} ctx={} {} (local alpha at this look {:.2e})",
                context_label(ctx),
                verdict.as_deref().unwrap_or("?"),
                judge.rounds().last_alpha
            ),
        ));
    }
}

/// Records the rounds in the run: its cells as the judge folded them and two labels.
pub(crate) fn record_rounds(judge: &Judge<'_>, spent: &RoundsSpent, results: &mut RunResults) {
    if let Some(run) = judge.first_boot().first() {
        results.cells = run.cells.clone();
    }
    results
        .labels
        .insert("adaptive_rounds".into(), judge.rounds().rounds.to_string());
    results
        .labels
        .insert("adaptive_extra_s".into(), format!("{:.2}", spent.extra_s));
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::stats::{DecisionRule, History, Plan};
    use infergate_model::synthetic::{noisy_history, synthetic_run};
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
        let slow = synthetic_run("cand", &mut rng, 0.0, 0.0, &factor);
        let rule = DecisionRule::default();
        let cfg = two_rounds();
        let fitted = std::sync::Arc::new(History::new(&history[..]));
        let plan = Plan {
            confirm: true,
            max_rounds: cfg.max_rounds,
        };
        let mut judge = Judge::new(fitted, &rule, plan);
        let next = judge
            .look(Evidence::FirstBoot(vec![slow]))
            .expect("first look");
        let measured = std::cell::Cell::new(0);
        let (next, spent) = measure_rounds(
            &mut judge,
            next,
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
        assert_eq!(spent.extra_s, 0.0);
        assert_eq!(judge.rounds().rounds, 0);
        assert!(matches!(next, Next::BootAgain { .. }), "{next:?}");
        assert_eq!(
            judge.rounds().stop_reason,
            Some(RoundsStop::SecondBootDecides)
        );
    }

    #[tokio::test]
    async fn a_leaning_cell_is_measured_again_until_the_budget_is_spent() {
        // One cell 4% slower without a second boot in the plan: it leans worse without
        // deciding, so each round re-measures it while the judge asks.
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let history = noisy_history(&mut rng, 20);
        let slow_cell = |i: usize| if i == 7 { 0.96 } else { 1.0 };
        let slow = synthetic_run("cand", &mut rng, 0.0, 0.0, &slow_cell);
        let again = synthetic_run("again", &mut rng, 0.0, 0.0, &slow_cell);
        let rule = DecisionRule::default();
        let cfg = two_rounds();
        let fitted = std::sync::Arc::new(History::new(&history[..]));
        let plan = Plan {
            confirm: false,
            max_rounds: cfg.max_rounds,
        };
        let mut judge = Judge::new(fitted, &rule, plan);
        let next = judge
            .look(Evidence::FirstBoot(vec![slow]))
            .expect("first look");
        let Next::Remeasure { round: 1, cells } = &next else {
            panic!("a round: {next:?}");
        };
        assert!(cells.contains(&(again.cells[7].coord())), "{cells:?}");
        let events = std::sync::Mutex::new(Vec::new());
        let (next, _) = measure_rounds(
            &mut judge,
            next,
            &cfg,
            1.0,
            async |c, ctx| again.cells.iter().find(|x| x.coord() == (c, ctx)).cloned(),
            &|e| events.lock().expect("events").push(e),
        )
        .await
        .expect("rounds");
        assert!(matches!(next, Next::Decided(_)), "{next:?}");
        let rounds = judge.rounds();
        assert!(rounds.rounds >= 1 && rounds.rounds <= 2, "{rounds:?}");
        let cell = &judge.first_boot()[0].cells[7];
        assert_eq!(cell.rounds.len() as u32, rounds.rounds + 1);
        assert!(cell.rounds.iter().all(|r| r.verdict_after.is_some()));
        let events = events.lock().expect("events");
        assert!(
            events
                .iter()
                .any(|e| e.kind == EventKind::AdaptiveDone && e.message.contains("stopped: ")),
            "{events:?}"
        );
    }
}
