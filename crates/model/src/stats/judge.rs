//! The one judge: the gate's whole plan of looks as a state machine without I/O.
//!
//! `run` drives it with a live engine, `report --trusted-config` and `compare` with a run's
//! recorded boots ([`replay`]), `stats-eval` with synthetic runs. Each driver hands it
//! [`Evidence`] and does what the [`Next`] step asks (measure cells again on the live engine,
//! boot once more), so every surface decides by the same sequence of looks and `stats-eval`
//! measures the product, not a copy of it.
//!
//! The plan (`docs/statistics.md`, `docs/adaptive-and-ab.md`), declared up front:
//!
//! 1. **first boot** at the first look ([`first_look`]): with the confirmation plan the
//!    local families' alarms are provisional and the matrix-wide test only screened;
//! 2. **adaptive rounds** (when `max_rounds > 0`): cells whose own test leans worse without
//!    deciding are measured again on the same boot; the local alpha of the first look is spent
//!    over `1 + max_rounds` looks (Lan–DeMets), a cell's verdict is frozen at the look that
//!    decided it, the matrix-wide test stays look 0's (re-measuring on one boot cannot redraw
//!    the boot factor). Rounds stop once the gate found a regression, once the first boot calls
//!    for a second (the second boot decides), when no cell leans, or when the budget is spent;
//! 3. **second boot** when [`wants_confirmation`]: both boots tested together
//!    ([`second_stage`]).

use std::sync::Arc;

use infergate_schema::results::{CellResult, CellStatus, RunResults};
use infergate_schema::verdict::{
    CellComparison, CellVerdict, ComparisonReport, Confirmation, ConfirmationReason, GateVerdict,
    JudgedBy, RoundsStop, RuleSummary,
};

use super::compare::{History, Look, compare_on};
use super::confirm::{first_look, provisional_cells, reason, second_stage, wants_confirmation};
use super::sequential::AlphaSpending;
use super::{DecisionRule, StatsError, finish};

/// The plan of looks a gate decides by: what the config's `[confirm]` and `[adaptive]` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Whether a second boot decides what one boot cannot (`[confirm]`, on by default).
    pub confirm: bool,
    /// Most adaptive re-measurement rounds on the first boot (`[adaptive] max_rounds`; 0 =
    /// none, the default).
    pub max_rounds: u32,
}

impl Plan {
    /// The plan and rule a verdict recorded (`judged_by` and `rule`), to replay it; `None` for
    /// a verdict that recorded none (older files, A/B, merged shards).
    pub fn recorded(rule: &RuleSummary, by: Option<&JudgedBy>) -> Option<(Plan, DecisionRule)> {
        let by = by?;
        let plan = Plan {
            confirm: by.confirm,
            max_rounds: by.max_rounds,
        };
        let defaults = DecisionRule::default();
        let rule = DecisionRule {
            alpha: rule.alpha,
            min_effect: rule.min_effect,
            history_runs: by.history_runs,
            metrics: by.metrics.clone(),
            min_effects: by.min_effects.clone(),
            design_effect: by.design_effect,
            design_power: by.design_power,
            cell_effect: rule.cell_effect.unwrap_or(defaults.cell_effect),
            burst_min_effect: by.burst_min_effect.unwrap_or(defaults.burst_min_effect),
        };
        Some((plan, rule))
    }
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            confirm: true,
            max_rounds: 0,
        }
    }
}

/// What a driver hands the judge.
#[derive(Debug)]
pub enum Evidence {
    /// The first boot's runs (one run per boot from `run`; repetitions of one boot from
    /// `compare`).
    FirstBoot(Vec<RunResults>),
    /// One round's re-measured cells, in the order measured (fewer than asked when the
    /// driver's budget ran out part-way; the driver then says [`Evidence::RoundsEnded`]).
    Remeasured(Vec<CellResult>),
    /// The driver measures no more rounds (its time budget is spent, it was cancelled, or a
    /// replay has no recording of the next round): the rounds end with this reason.
    RoundsEnded(RoundsStop),
    /// The second boot's runs, and the name of their results file (for the reports).
    SecondBoot {
        /// The runs of the second boot.
        runs: Vec<RunResults>,
        /// Where they are, e.g. `results-confirm.json`.
        name: String,
    },
}

/// What the judge asks for next.
#[derive(Debug)]
pub enum Next {
    /// The gate's verdict over every look made.
    Decided(Box<ComparisonReport>),
    /// Measure these cells again on the same boot (round `round`, 1-based).
    Remeasure {
        /// The round these measurements make.
        round: u32,
        /// The cells, `(concurrency, context tokens)`, in matrix order.
        cells: Vec<(u32, u64)>,
    },
    /// Boot the engine again and measure the whole matrix: only a second boot can decide.
    BootAgain {
        /// Why the first boot calls for it.
        reason: ConfirmationReason,
    },
}

/// What the adaptive rounds did (for the reports and `results.json`'s events).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rounds {
    /// Rounds made.
    pub rounds: u32,
    /// Cells measured again, in order of first re-measurement.
    pub remeasured: Vec<(u32, u64)>,
    /// Why the rounds stopped (`None` while they go on, or when the plan has none).
    pub stop_reason: Option<RoundsStop>,
    /// The local alpha of the last round's look (for the events).
    pub last_alpha: f64,
}

#[derive(Debug)]
enum Stage {
    First,
    Rounds,
    Second { first_report: Box<ComparisonReport> },
    Done,
}

/// The gate's judge over one history: see the module docs.
#[derive(Debug)]
pub struct Judge<'h> {
    history: Arc<History<'h>>,
    rule: DecisionRule,
    plan: Plan,
    first_look: Look,
    spending: AlphaSpending,
    stage: Stage,
    first: Vec<RunResults>,
    report: Option<ComparisonReport>,
    rounds: Rounds,
}

impl<'h> Judge<'h> {
    /// A judge of `plan` with `rule` on `history` (loaded once, its models fitted once).
    pub fn new(history: Arc<History<'h>>, rule: &DecisionRule, plan: Plan) -> Judge<'h> {
        let first_look = first_look(rule, plan.confirm);
        let spending = AlphaSpending::new(first_look.local_alpha, plan.max_rounds + 1);
        Judge {
            history,
            rule: rule.clone(),
            plan,
            first_look,
            spending,
            stage: Stage::First,
            first: Vec::new(),
            report: None,
            rounds: Rounds::default(),
        }
    }

    /// The first boot's runs as judged: the re-measured cells' rounds folded in, each round
    /// with the verdict after its look (what `run` writes as `results.json`).
    pub fn first_boot(&self) -> &[RunResults] {
        &self.first
    }

    /// What the adaptive rounds did so far.
    pub fn rounds(&self) -> &Rounds {
        &self.rounds
    }

    /// Look `look` of the first boot: the rows, columns and cells at the spending increment
    /// (the whole first-look alpha without rounds); the matrix-wide test as the first look
    /// makes it at look 0, not again.
    fn look_at(&self, look: u32) -> Look {
        if self.plan.max_rounds == 0 {
            return self.first_look.clone();
        }
        Look {
            name: if look == 0 {
                self.first_look.name.clone()
            } else {
                format!("{}, round {look}", self.first_look.name)
            },
            local_alpha: self.spending.alpha_at(look),
            matrix_alpha: if look == 0 {
                self.first_look.matrix_alpha
            } else {
                None
            },
            second_boot_from: None,
            ..self.first_look.clone()
        }
    }

    /// Takes the next piece of evidence and says what comes next. Evidence out of turn (a
    /// second boot before the first, a round nobody asked for) is an error, never a verdict.
    pub fn look(&mut self, evidence: Evidence) -> Result<Next, StatsError> {
        match (std::mem::replace(&mut self.stage, Stage::Done), evidence) {
            (Stage::First, Evidence::FirstBoot(runs)) => {
                let report = compare_on(&self.history, &runs, &self.rule, &self.look_at(0))?;
                self.first = runs;
                self.report = Some(report);
                if self.plan.max_rounds == 0 {
                    return self.after_rounds();
                }
                self.stage = Stage::Rounds;
                self.next_round()
            }
            (Stage::Rounds, Evidence::Remeasured(cells)) if !cells.is_empty() => {
                self.fold(cells)?;
                self.stage = Stage::Rounds;
                self.next_round()
            }
            (Stage::Rounds, Evidence::RoundsEnded(why)) => {
                self.rounds.stop_reason = Some(why);
                self.after_rounds()
            }
            (Stage::Second { first_report }, Evidence::SecondBoot { runs, name }) => {
                let report = second_stage(
                    &self.rule,
                    &self.history,
                    &first_report,
                    &self.first,
                    &runs,
                    &name,
                )?;
                Ok(self.decided(report))
            }
            (stage, evidence) => {
                let what = match evidence {
                    Evidence::FirstBoot(_) => "a first boot",
                    Evidence::Remeasured(_) => "a round of re-measured cells",
                    Evidence::RoundsEnded(_) => "the end of the rounds",
                    Evidence::SecondBoot { .. } => "a second boot",
                };
                let waiting = match stage {
                    Stage::First => "the first boot",
                    Stage::Rounds => "a round or its end",
                    Stage::Second { .. } => "the second boot",
                    Stage::Done => "nothing (the verdict is given)",
                };
                Err(StatsError::OutOfTurn(format!(
                    "the judge was given {what} while waiting for {waiting}"
                )))
            }
        }
    }

    /// The next round to measure, or the end of the rounds.
    fn next_round(&mut self) -> Result<Next, StatsError> {
        let Some(report) = self.report.as_ref() else {
            return self.after_rounds();
        };
        let leaning: Vec<(u32, u64)> = report
            .cells
            .iter()
            // A cell decided up front (capacity-limited, saturated: no metrics) is not
            // resolved by re-measuring it on the same boot; a second boot decides it.
            .filter(|c| leans(c))
            .map(|c| (c.concurrency, c.context_tokens))
            .collect();
        let round = self.rounds.rounds + 1;
        let stop = if round > self.plan.max_rounds {
            Some(if leaning.is_empty() {
                RoundsStop::NoCellLeans
            } else {
                RoundsStop::MaxRounds(self.plan.max_rounds)
            })
        } else if report.gate == GateVerdict::Regression {
            Some(RoundsStop::GateRegressed)
        } else if self.first_look.local_provisional && wants_confirmation(report) {
            Some(RoundsStop::SecondBootDecides)
        } else if leaning.is_empty() {
            Some(RoundsStop::NoCellLeans)
        } else {
            None
        };
        match stop {
            Some(why) => {
                self.rounds.stop_reason = Some(why);
                self.after_rounds()
            }
            None => {
                self.stage = Stage::Rounds;
                Ok(Next::Remeasure {
                    round,
                    cells: leaning,
                })
            }
        }
    }

    /// Folds one round into the first boot's first run and makes that round's look: the
    /// re-measured cells take it (frozen once decided, since they are not measured again),
    /// every other cell keeps the look that decided it, the matrix-wide test stays look 0's.
    fn fold(&mut self, cells: Vec<CellResult>) -> Result<(), StatsError> {
        let round = self.rounds.rounds + 1;
        let mut report = self
            .report
            .take()
            .ok_or_else(|| StatsError::OutOfTurn("a round before the first look".into()))?;
        let run = self.first.first_mut().ok_or(StatsError::NoCandidate)?;
        let mut measured = Vec::new();
        for again in &cells {
            let coord = again.coord();
            if let Some(cell) = run.cells.iter_mut().find(|x| x.coord() == coord) {
                let before = report
                    .cells
                    .iter()
                    .find(|x| (x.concurrency, x.context_tokens) == coord)
                    .map(|x| x.verdict.as_str().to_string());
                let next = cell.rounds.last().map_or(1, |r| r.round + 1);
                cell.fold_round(again, next);
                // Round 0 (or the last repetition) carries the verdict of the first look.
                let n = cell.rounds.len();
                if n >= 2 && cell.rounds[n - 2].verdict_after.is_none() {
                    cell.rounds[n - 2].verdict_after = before;
                }
            }
            if !self.rounds.remeasured.contains(&coord) {
                self.rounds.remeasured.push(coord);
            }
            measured.push(coord);
        }
        let look = self.look_at(round);
        let again = compare_on(&self.history, &self.first, &self.rule, &look)?;
        for cell in &mut report.cells {
            let coord = (cell.concurrency, cell.context_tokens);
            if measured.contains(&coord)
                && let Some(new) = again
                    .cells
                    .iter()
                    .find(|x| (x.concurrency, x.context_tokens) == coord)
            {
                *cell = new.clone();
            }
        }
        report.candidate_runs = again.candidate_runs.clone();
        report.gate = super::build::gate_of(&report);
        if let Some(run) = self.first.first_mut() {
            for &coord in &measured {
                let verdict = report
                    .cells
                    .iter()
                    .find(|x| (x.concurrency, x.context_tokens) == coord)
                    .map(|x| x.verdict.as_str().to_string());
                if let Some(cell) = run.cells.iter_mut().find(|x| x.coord() == coord)
                    && let Some(last) = cell.rounds.last_mut()
                {
                    last.verdict_after = verdict;
                }
            }
        }
        self.rounds.rounds = round;
        self.rounds.last_alpha = look.local_alpha;
        self.report = Some(report);
        Ok(())
    }

    /// After the first boot's looks: the verdict, or a second boot when the plan calls for
    /// one.
    fn after_rounds(&mut self) -> Result<Next, StatsError> {
        let Some(mut report) = self.report.take() else {
            self.stage = Stage::Done;
            return Err(StatsError::OutOfTurn("no look was made".into()));
        };
        // The rule stays look 0's as compared (its alpha shares, the lines' part included).
        finish(&mut report);
        if self.plan.confirm && wants_confirmation(&report) {
            let why = reason(&report);
            self.stage = Stage::Second {
                first_report: Box::new(report),
            };
            return Ok(Next::BootAgain { reason: why });
        }
        self.stage = Stage::Done;
        Ok(self.decided(report))
    }

    /// The verdict, recording how it was judged.
    fn decided(&self, mut report: ComparisonReport) -> Next {
        report.judged_by = Some(self.judged_by());
        Next::Decided(Box::new(report))
    }

    /// The plan and the rule's parameters the verdict does not otherwise show.
    fn judged_by(&self) -> JudgedBy {
        JudgedBy {
            confirm: self.plan.confirm,
            max_rounds: self.plan.max_rounds,
            history_runs: self.rule.history_runs,
            design_effect: self.rule.design_effect,
            design_power: self.rule.design_power,
            metrics: self.rule.metrics.clone(),
            min_effects: self.rule.min_effects.clone(),
            burst_min_effect: Some(self.rule.burst_min_effect),
        }
    }

    /// The first boot's verdict when the second boot the plan asks for is missing (a replay
    /// without its results): `insufficient`, saying which look is missing. `None` unless the
    /// judge waits for a second boot.
    pub(crate) fn without_second_boot(self) -> Option<ComparisonReport> {
        let judged_by = self.judged_by();
        let Stage::Second { first_report } = self.stage else {
            return None;
        };
        let mut report = *first_report;
        report.confirmation = Some(Confirmation {
            reason: reason(&report),
            first_boot: report.matrix_test.clone(),
            provisional_alarms: provisional_cells(&report),
            second_results: String::new(),
            used: false,
            missing: true,
        });
        report.judged_by = Some(judged_by);
        finish(&mut report);
        Some(report)
    }
}

/// Whether a cell's own test leans worse without having decided: worth another round.
fn leans(cell: &CellComparison) -> bool {
    cell.verdict == CellVerdict::Unchanged
        && cell
            .primary()
            .is_some_and(|m| m.p_value < super::rule::FUTILITY_P)
}

/// A run's verdict replayed from its recorded boots.
#[derive(Debug)]
pub struct Replayed {
    /// The verdict. When the plan needed a second boot that was not given it is the first
    /// boot's, `insufficient`, and its `confirmation.missing` says so.
    pub report: ComparisonReport,
    /// Whether the second boot entered the verdict.
    pub used_second: bool,
    /// What the rounds did.
    pub rounds: Rounds,
}

/// The verdict `run` gave, from its files: the first boot's runs with their cells back at
/// their own measurement (repetitions kept), the recorded adaptive rounds fed to the judge
/// round by round (a round it asks for that was not recorded ends the rounds, as the run's
/// budget or a cancel did), and the second boot when the judge asks for it. A second boot
/// given but not asked for is named in a `confirmation` with `used: false`.
pub fn replay(
    history: Arc<History<'_>>,
    rule: &DecisionRule,
    plan: Plan,
    first: &[RunResults],
    second: Option<(&[RunResults], &str)>,
) -> Result<Replayed, StatsError> {
    let mut runs = first.to_vec();
    let mut recorded = take_recorded_rounds(runs.first_mut().ok_or(StatsError::NoCandidate)?);
    let mut judge = Judge::new(history, rule, plan);
    let mut next = judge.look(Evidence::FirstBoot(runs))?;
    loop {
        next = match next {
            Next::Remeasure { cells, .. } => {
                // The recorded rounds, up to the first cell that has none left.
                let measured: Vec<CellResult> = cells
                    .iter()
                    .map_while(|coord| {
                        let (_, q) = recorded.iter_mut().find(|(c, _)| c == coord)?;
                        q.pop_front()
                    })
                    .collect();
                let complete = measured.len() == cells.len();
                if measured.is_empty() {
                    judge.look(Evidence::RoundsEnded(RoundsStop::NotRecorded))?
                } else {
                    match judge.look(Evidence::Remeasured(measured))? {
                        Next::Remeasure { .. } if !complete => {
                            judge.look(Evidence::RoundsEnded(RoundsStop::NotRecorded))?
                        }
                        n => n,
                    }
                }
            }
            Next::BootAgain { .. } => match second {
                Some((runs, name)) => judge.look(Evidence::SecondBoot {
                    runs: runs.to_vec(),
                    name: name.to_string(),
                })?,
                None => {
                    let rounds = judge.rounds().clone();
                    let report = judge
                        .without_second_boot()
                        .ok_or_else(|| StatsError::OutOfTurn("no second boot awaited".into()))?;
                    return Ok(Replayed {
                        report,
                        used_second: false,
                        rounds,
                    });
                }
            },
            Next::Decided(report) => {
                let mut report = *report;
                let used_second = report.confirmation.as_ref().is_some_and(|c| c.used);
                if let (false, Some((_, name))) = (used_second, second) {
                    report.confirmation = Some(Confirmation {
                        reason: reason(&report),
                        first_boot: None,
                        provisional_alarms: provisional_cells(&report),
                        second_results: name.to_string(),
                        used: false,
                        missing: false,
                    });
                    finish(&mut report);
                }
                return Ok(Replayed {
                    report,
                    used_second,
                    rounds: judge.rounds().clone(),
                });
            }
        };
    }
}

type RecordedRounds = Vec<((u32, u64), std::collections::VecDeque<CellResult>)>;

/// Takes the adaptive rounds out of `run`'s cells: each cell goes back to its boot's own
/// measurement (its first `repetitions` rounds pooled, as the matrix measured it), and the
/// later rounds are returned as cells to feed the judge in order.
fn take_recorded_rounds(run: &mut RunResults) -> RecordedRounds {
    let own = run.matrix.repetitions.max(1) as usize;
    let mut out = Vec::new();
    for cell in &mut run.cells {
        if cell.rounds.len() <= own.max(1) {
            continue;
        }
        let mut rounds = std::mem::take(&mut cell.rounds);
        let later = rounds.split_off(own);
        let measured: Vec<_> = rounds.iter().filter(|r| r.measured_s > 0.0).collect();
        cell.samples = measured
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect();
        cell.measured_s = measured.iter().map(|r| r.measured_s).sum();
        if !measured.is_empty() {
            cell.aggregate_tps =
                measured.iter().map(|r| r.aggregate_tps).sum::<f64>() / measured.len() as f64;
        }
        for r in &mut rounds {
            r.verdict_after = None;
        }
        // One repetition: no rounds list (as the matrix wrote it); more: the repetitions.
        if own > 1 {
            cell.rounds = rounds;
        }
        let again = later
            .into_iter()
            .map(|r| {
                let status = if r.measured_s > 0.0 {
                    CellStatus::Ok
                } else {
                    CellStatus::Error
                };
                let mut again =
                    CellResult::unmeasured(cell.concurrency, cell.context_tokens, status, "");
                again.reason = None;
                again.samples = r.samples;
                again.aggregate_tps = r.aggregate_tps;
                again.measured_s = r.measured_s;
                again
            })
            .collect();
        out.push((cell.coord(), again));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{noisy_history, synthetic_run};
    use infergate_schema::asserts::{assert_first_line, assert_gate};
    use rand::SeedableRng;

    fn judge(history: &[RunResults], plan: Plan) -> Judge<'_> {
        Judge::new(
            Arc::new(History::new(history)),
            &DecisionRule::default(),
            plan,
        )
    }

    #[test]
    fn rounds_spend_the_first_looks_local_alpha_and_the_matrix_test_looks_once() {
        let rule = DecisionRule::default();
        let plan = Plan {
            confirm: true,
            max_rounds: 2,
        };
        let j = judge(&[], plan);
        let looks: Vec<Look> = (0..3).map(|k| j.look_at(k)).collect();
        let local: f64 = looks.iter().map(|l| l.local_alpha).sum();
        assert!((local - rule.local_alpha()).abs() < 1e-9, "{local}");
        assert!(looks.iter().all(|l| l.matrix_alpha.is_none()));
        // Front-loaded: the first look gets the largest share.
        assert!(looks[0].local_alpha > looks[1].local_alpha);
        assert_eq!(looks[2].name, "first boot, round 2");
        // Without the second boot, the matrix test at look 0 only, at its whole alpha.
        let single = judge(
            &[],
            Plan {
                confirm: false,
                max_rounds: 2,
            },
        );
        assert_eq!(single.look_at(0).matrix_alpha, Some(rule.matrix_alpha()));
        assert_eq!(single.look_at(1).matrix_alpha, None);
        // Without rounds, the first look is the plan's first look itself.
        let plain = judge(&[], Plan::default());
        assert_eq!(plain.look_at(0), first_look(&rule, true));
    }

    #[test]
    fn evidence_out_of_turn_is_an_error_never_a_verdict() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let history = noisy_history(&mut rng, 10);
        let run = synthetic_run("cand", &mut rng, 0.0, 0.0, &|_| 1.0);
        let mut j = judge(&history, Plan::default());
        let second = Evidence::SecondBoot {
            runs: vec![run.clone()],
            name: "second".into(),
        };
        assert!(matches!(j.look(second), Err(StatsError::OutOfTurn(_))));
        let mut j = judge(&history, Plan::default());
        let next = j
            .look(Evidence::FirstBoot(vec![run.clone()]))
            .expect("look");
        let Next::Decided(report) = next else {
            panic!("a clean boot is decided at once: {next:?}");
        };
        assert_eq!(
            report.judged_by.as_ref().map(|b| (b.confirm, b.max_rounds)),
            Some((true, 0))
        );
        assert_eq!(report.baseline.runs.len(), 10);
        assert!(matches!(
            j.look(Evidence::FirstBoot(vec![run])),
            Err(StatsError::OutOfTurn(_))
        ));
    }

    #[test]
    fn a_replay_without_the_second_boot_it_needs_is_insufficient_and_says_so() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let history = noisy_history(&mut rng, 20);
        let slow = synthetic_run("cand", &mut rng, 0.0, 0.0, &|_| 0.90);
        let rule = DecisionRule::default();
        let history = Arc::new(History::new(history));
        let r = replay(
            history.clone(),
            &rule,
            Plan::default(),
            std::slice::from_ref(&slow),
            None,
        )
        .expect("replay");
        assert_gate(&r.report, GateVerdict::Insufficient);
        assert!(!r.used_second);
        assert!(r.report.confirmation.as_ref().is_some_and(|c| c.missing));
        assert_first_line(&r.report, |l| {
            l.contains("the second boot this plan asks for was not given")
        });
        // The second boot given: decided over both.
        let again = replay(
            history,
            &rule,
            Plan::default(),
            std::slice::from_ref(&slow),
            Some((std::slice::from_ref(&slow), "second")),
        )
        .expect("replay");
        assert_eq!(again.report.gate, GateVerdict::Regression);
        assert!(again.used_second);
    }

    /// Every parameter of the rule a verdict was judged by comes back from its files, the
    /// burst layer's margin included (a `compare` on them must decide as the run did).
    #[test]
    fn the_recorded_plan_gives_back_the_rule_it_was_judged_by() {
        let rule = DecisionRule {
            burst_min_effect: 0.2,
            cell_effect: 0.15,
            min_effects: [(infergate_schema::verdict::Metric::ItlP99, 0.4)].into(),
            ..DecisionRule::default()
        };
        let plan = Plan {
            confirm: true,
            max_rounds: 2,
        };
        let j = Judge::new(Arc::new(History::new(&[])), &rule, plan);
        let (again_plan, again) =
            Plan::recorded(&rule.summary(), Some(&j.judged_by())).expect("recorded");
        assert_eq!(again_plan, plan);
        assert_eq!(again.burst_min_effect, 0.2);
        assert_eq!(again.cell_effect, 0.15);
        assert_eq!(again.min_effects, rule.min_effects);
        assert_eq!(again.metrics, rule.metrics);
    }

    #[test]
    fn recorded_rounds_are_taken_back_to_the_boots_own_measurement() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let mut run = synthetic_run("cand", &mut rng, 0.0, 0.0, &|_| 1.0);
        let first = run.cells[0].clone();
        let mut again = first.clone();
        again.aggregate_tps *= 0.5;
        for s in &mut again.samples {
            *s *= 0.5;
        }
        run.cells[0].fold_round(&again, 1);
        let recorded = take_recorded_rounds(&mut run);
        assert_eq!(run.cells[0].aggregate_tps, first.aggregate_tps);
        assert_eq!(run.cells[0].samples, first.samples);
        assert!(run.cells[0].rounds.is_empty());
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0].1.len(), 1);
        assert_eq!(recorded[0].1[0].aggregate_tps, again.aggregate_tps);
    }
}
