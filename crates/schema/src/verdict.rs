//! The verdict schema: what statistics produces and reporting renders. Plain data, no logic
//! beyond small helpers, so the GitHub reporter, `merge` and the terminal tables can be tested
//! without measuring or computing anything.

use serde::{Deserialize, Serialize};

use crate::results::ProfileKey;

/// A verdict field the model sets as a typed value and `verdict.json` records as its words
/// (its `Display`, in [`crate::answer`]): it serializes as them, reads back from a recorded
/// verdict as `Recorded(words)`, and two values are equal when their words are.
macro_rules! recorded_words {
    ($t:ident) => {
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.to_string() == other.to_string()
            }
        }

        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d).map($t::Recorded)
            }
        }

        /// Words as a recorded verdict holds them.
        impl From<&str> for $t {
            fn from(words: &str) -> Self {
                $t::Recorded(words.to_string())
            }
        }
    };
}

/// Version of the comparison file format.
pub const VERDICT_SCHEMA_VERSION: u32 = 1;

/// How far past its margin a `pass` vouches for a gated layer's figure (the prefill layer's
/// tok/s of a context, the burst's): one figure per run, so at the margin itself a clean gate
/// of `stats-eval`'s Gaussian runner, whose layer figures scatter 2–3% a run, could not vouch in
/// one gate in six (A/A pass 95% → 80% over 20 gates); at twice it the A/A pass rates of
/// `stats-eval --trials 1000` move by at most 0.3 points, and a context whose history scatters
/// 15% a run cannot pass (`docs/statistics.md`).
pub const LAYER_VOUCH: f64 = 2.0;

/// The whole answer of one comparison: per cell, per metric, and for the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonReport {
    /// Version of this file's layout ([`VERDICT_SCHEMA_VERSION`] when written).
    pub schema_version: u32,
    /// The candidate's profile (baselines of another profile are never compared).
    pub profile: ProfileKey,
    #[serde(default)]
    /// Suite the candidate ran, when it came from a gate config.
    pub suite: Option<String>,
    /// Candidate run id(s).
    pub candidate_runs: Vec<String>,
    /// What the candidate was compared against: a store's baseline runs (omitted), or the A
    /// boots of a paired A/B run (`paired_ab`; `baseline` then names the A runs).
    #[serde(default, skip_serializing_if = "Against::is_baseline")]
    pub against: Against,
    /// What the baseline consisted of.
    pub baseline: BaselineSummary,
    /// The gate's answer.
    pub gate: GateVerdict,
    /// The answer in one line, exactly the reports' first line ([`crate::answer::first_line`]):
    /// "✗ aggregate tok/s −9.2% [−9.9, −8.4] in all 6 cells, confirmed on a second boot". Set
    /// by whoever writes the report ([`ComparisonReport::set_headline`]); empty in a report
    /// straight from the statistics model.
    pub headline: String,
    /// The matrix-wide test (all comparable cells together, primary metric).
    #[serde(default)]
    pub matrix_test: Option<MatrixTest>,
    /// Every cell of the matrix, in the candidate's order.
    pub cells: Vec<CellComparison>,
    /// The row (context) and column (concurrency) tests: a line of cells that moved together
    /// against the rest of its run (primary metric); empty when not made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<LineTest>,
    /// The prefill layer, one entry per context (`concurrency` 0): prefill tok/s of the cold
    /// samples against the history's, by the same model as the secondary metrics; empty where
    /// neither side measured the layer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill: Vec<CellComparison>,
    /// Whether the prefill layer gates here (listed in the rule's metrics, and a history with
    /// enough runs that have it): a prefill figure not compared then fails the gate closed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prefill_gated: bool,
    /// The burst layer, one entry (`concurrency` 0, `context_tokens` 0) whose metrics are the
    /// burst's total tok/s and TTFT p90 against the history's, by the layer model of the
    /// prefill layer; empty where neither side sent a burst.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub burst: Vec<CellComparison>,
    /// Whether the burst layer gates here (one of its metrics in the rule's metrics, and a
    /// history with enough runs that have the layer): a burst not compared then fails closed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub burst_gated: bool,
    /// The burst layer's metrics that gate here (of `burst_tps`, `burst_ttft_p90`): what a
    /// `pass` vouches for in the layer. Empty in files of older versions, where `burst_gated`
    /// and `judged_by.metrics` say it ([`Self::layer_gates`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub burst_metrics_gated: Vec<Metric>,
    /// The metrics besides aggregate tok/s that gate the decode cells here (listed in the
    /// rule's metrics, and a history long enough for them: `ITL p99`): a cell's entry of one is
    /// a test that can fail the gate, and a cell with too few observations of a percentile has
    /// none. Empty in files of older versions and A/B runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cell_metrics_gated: Vec<Metric>,
    /// What of the rule's gating metrics did not gate here, and why (`TTFT p90 not gated in 6
    /// of 20 cells: 2–8 observations each, a p90 needs 29`): a latency percentile gates only
    /// where its cells have the observations it needs and the history is long enough, a layer
    /// only where it was measured. The first line ends with it (`; not gated: …`).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "not_gated_file"
    )]
    pub not_gated: Vec<NotGated>,
    /// The decode cells whose gating tail latency (a p90 or p99 of [`Self::cell_metrics_gated`])
    /// this comparison could not vouch for because the host ran late: on a candidate boot of
    /// the cell the gate's probe thread (results' `host_lateness_s`) was late by the metric's
    /// design effect / 2.5 of the percentile or more (a fifth for a p99 at +50%), a delay the
    /// engine's own gaps take too. A cell is compared on a
    /// metric only where every boot has it, so such a cell has no entry of the metric, and the
    /// gate is `insufficient`. Empty in files of older versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_late: Vec<HostLateCell>,
    /// The gating tail latencies whose history left runs out in some cells: those on which the
    /// gate's probe ran late by the same share of the tail as a candidate boot's
    /// [`Self::host_late`], where the cell kept enough runs without (a busy history run's tail
    /// is no measurement of the engine's either). Empty in files of older versions, which
    /// left none out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history_host_late: Vec<HistoryHostLate>,
    /// The decision rule's parameters, so a verdict can be reproduced and explained.
    pub rule: RuleSummary,
    /// Set when `run` booted the engine a second time to confirm a matrix-wide change: the
    /// report's own fields are then those of both boots together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
    /// How much of what the baseline measured the candidate measured too; below the floor
    /// the gate is `unmeasured` (exit 3). `None` when there was no baseline to measure against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
    /// What the baseline (or an A/B run's pairs) could detect: a thin history is said plainly
    /// (`None` when there was no baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Sensitivity>,
    /// The `fail_on` the exit code and the check conclusion were decided under (`--fail-on`,
    /// else the config's), set by the command that wrote the file; absent in files of older
    /// versions. Not part of the comparison: the policy ([`crate::policy`]) reads the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_on: Option<crate::exit::FailOn>,
    /// How the verdict was judged: the plan of looks and the parts of the rule `rule` does
    /// not show, so that `compare --as-verdict` replays it on the run's files (with
    /// `baseline.runs`, the exact history). Absent in files of older versions and where no
    /// plan was followed (A/B, merged shards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_by: Option<JudgedBy>,
}

/// What a candidate was compared against: reports name the sides by it (`B vs A`, `A's level
/// from 4 boots`), so an A/B run never reads as a comparison with a stored baseline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Against {
    /// Baseline runs from the store.
    #[default]
    Baseline,
    /// The A boots of a paired A/B run; the candidate is its B boots.
    PairedAb,
}

impl Against {
    fn is_baseline(&self) -> bool {
        *self == Against::Baseline
    }
}

/// What the baseline can detect now, and how far a thin history is from the rule's design
/// power: a gate that passes because it could not have seen a −10% regression says so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sensitivity {
    /// The uniform slowdown the rule is designed to find (`[thresholds] design_effect`).
    pub design_effect: f64,
    /// The probability it should be found with (`[thresholds] design_power`).
    pub design_power: f64,
    /// Baseline runs the noise was learnt from (pairs of boots in an A/B comparison).
    pub history_runs: usize,
    /// What `history_runs` and `runs_needed` count: baseline runs, or an A/B run's pairs.
    #[serde(default, skip_serializing_if = "SensitivityUnit::is_baseline_runs")]
    pub unit: SensitivityUnit,
    /// Minimum detectable effect of the matrix-wide test now (relative, negative: the smallest
    /// uniform slowdown found at the design power); `None` without a matrix-wide test.
    pub matrix_mde: Option<f64>,
    /// The MDE that decides sufficiency: the matrix-wide one (−1, i.e. −100%, without one, so a
    /// gate with no matrix-wide test is never sufficient).
    pub mde: f64,
    /// More runs (of `unit`) needed before `mde` reaches `design_effect` (0: it does now;
    /// `None`: not at this noise, however long the history, or not known from one run).
    pub runs_needed: Option<usize>,
    /// Whether the baseline reaches the design power now (`runs_needed == Some(0)`).
    pub sufficient: bool,
    /// Each compared cell's MDE on its own (its per-cell test, at its share of alpha).
    pub cells: Vec<CellSensitivity>,
    /// How far the level lags a runner that slowed over the history (relative, positive; 0:
    /// no systematic lag): counted in the matrix-wide test's noise and in `mde`, so a reader
    /// knows why both are wider than the runs' scatter alone.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub level_lag: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// One cell's minimum detectable effect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSensitivity {
    /// Concurrency of the cell.
    pub concurrency: u32,
    /// Context length of the cell.
    pub context_tokens: u64,
    /// Smallest slowdown of this cell alone found at the design power (relative, negative).
    pub mde: f64,
}

/// Why one of the rule's gating metrics did not gate here ([`ComparisonReport::not_gated`]):
/// decided by the model, said in [`crate::answer`]'s words. `verdict.json` records both
/// ([`not_gated_file`]), so a report of the file says what a green check did not cover as the
/// gate's own did.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum NotGated {
    /// A latency percentile on a history shorter than it gates from.
    ShortHistory {
        /// The percentile.
        metric: Metric,
        /// The history's runs.
        runs: usize,
        /// The runs it gates from.
        needs: usize,
    },
    /// A latency percentile in the cells whose candidate runs have too few observations to
    /// bound it (those cells have no entry of it).
    ThinCells {
        /// The percentile.
        metric: Metric,
        /// The cells short of observations.
        cells: usize,
        /// The comparable cells.
        of: usize,
        /// The fewest and most observations of a short cell.
        fewest: u64,
        /// See `fewest`.
        most: u64,
        /// The quantile (0.9 for a p90).
        quantile: f64,
        /// The observations it needs.
        needs: u64,
    },
    /// The prefill layer, on a history with too few runs that have it.
    PrefillShortHistory {
        /// The history's runs with the layer.
        runs: usize,
        /// The runs it gates from.
        needs: usize,
    },
    /// The burst layer, on a history with too few runs that have it.
    BurstShortHistory {
        /// The history's runs with the layer.
        runs: usize,
        /// The runs it gates from.
        needs: usize,
    },
    /// A metric restarted alone at an accepted change (`baseline accept --metric`), with too
    /// few runs since.
    RestartedShort {
        /// The metric.
        metric: Metric,
        /// The history's runs since its accepted change.
        runs: usize,
        /// The runs it gates from.
        needs: usize,
    },
    /// The prefill layer, listed, but measured neither in this run nor in its history (no
    /// prefill samples, or no context to sample).
    PrefillNotMeasured,
    /// The burst layer, listed, but sent neither in this run nor in its history.
    BurstNotMeasured,
    /// The burst's TTFT p90, from too few completed requests.
    BurstThin {
        /// The completed requests.
        completed: u64,
        /// The requests a p90 needs.
        needs: u64,
    },
    /// Words read from a verdict written before its entries were typed (2026-12-07).
    #[serde(skip)]
    Recorded(String),
}

impl PartialEq for NotGated {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// `verdict.json`'s `not_gated`: each entry its fields, tagged by `why`, with its `words`; an
/// entry of a file written before 2026-12-07 is the words alone, and one of a `why` this build
/// does not know is its words: both read back as [`NotGated::Recorded`].
mod not_gated_file {
    use super::NotGated;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Typed {
            #[serde(flatten)]
            why: NotGated,
            #[serde(default)]
            words: String,
        },
        /// An entry of a later version's (a `why` this build does not know): its words.
        Other {
            words: String,
        },
        Words(String),
    }

    pub(super) fn serialize<S: Serializer>(v: &[NotGated], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|n| match n {
            NotGated::Recorded(words) => Entry::Words(words.clone()),
            typed => Entry::Typed {
                why: typed.clone(),
                words: typed.to_string(),
            },
        }))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<NotGated>, D::Error> {
        let entries = Vec::<Entry>::deserialize(d)?;
        Ok(entries
            .into_iter()
            .map(|e| match e {
                Entry::Typed { why, .. } => why,
                Entry::Other { words } | Entry::Words(words) => NotGated::Recorded(words),
            })
            .collect())
    }
}

/// A decode cell whose gating tail latency the host's own lateness could explain
/// ([`ComparisonReport::host_late`]): the latest of the candidate's boots.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostLateCell {
    /// Concurrency of the cell.
    pub concurrency: u32,
    /// Context of the cell, in tokens.
    pub context_tokens: u64,
    /// The gating metric not vouched for.
    pub metric: Metric,
    /// The probe's p99 lateness on that boot, seconds.
    pub lateness_p99_s: f64,
    /// The metric's value on that boot, seconds.
    pub value_s: f64,
}

/// A gating tail latency whose value some history runs' cells left out
/// ([`ComparisonReport::history_host_late`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryHostLate {
    /// The gating metric.
    pub metric: Metric,
    /// The history runs left out of it in at least one cell, oldest first.
    pub runs: Vec<String>,
    /// The cells where any run was left out.
    pub cells: usize,
}

impl ComparisonReport {
    /// Whether the gate was too insensitive to find the rule's design effect (see
    /// [`Sensitivity`]).
    pub fn thin_baseline(&self) -> bool {
        self.sensitivity.as_ref().is_some_and(|s| !s.sufficient)
    }
}

/// What a gate needs more of to become sensitive enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SensitivityUnit {
    /// Accepted baseline runs in the store.
    #[default]
    BaselineRuns,
    /// Pairs of boots of a paired A/B run.
    Pairs,
}

impl SensitivityUnit {
    fn is_baseline_runs(&self) -> bool {
        *self == SensitivityUnit::BaselineRuns
    }

    /// `5 baseline runs`, `1 pair of boots`.
    pub fn count(&self, n: usize) -> String {
        self.phrase(n, "")
    }

    /// `5 more baseline runs`, `1 more pair of boots`.
    pub(crate) fn more(&self, n: usize) -> String {
        self.phrase(n, " more")
    }

    fn phrase(&self, n: usize, more: &str) -> String {
        let s = if n == 1 { "" } else { "s" };
        match self {
            SensitivityUnit::BaselineRuns => format!("{n}{more} baseline run{s}"),
            SensitivityUnit::Pairs => format!("{n}{more} pair{s} of boots"),
        }
    }
}

impl Sensitivity {
    /// What an insufficient gate still needs, in words: `3 more baseline runs needed`, `1 more
    /// pair of boots needed`, `not reachable at this noise`, or not while the level lags a
    /// slowing runner ([`Sensitivity::level_lag`]). One baseline run shows no boot-to-boot
    /// noise, so it gets no count (only the prior would speak for it) and is not called
    /// unreachable either.
    pub(crate) fn needs(&self) -> String {
        match self.runs_needed {
            Some(n) => format!("{} needed", self.unit.more(n)),
            None if self.noise_unseen() => {
                "more baseline runs needed: one shows no boot-to-boot noise yet".into()
            }
            // More runs of a runner that keeps slowing leave the level as far behind.
            None if self.level_lag > 0.0 => format!(
                "not reachable while the level lags the history's slowing by {:.1}%",
                100.0 * self.level_lag
            ),
            None => "not reachable at this noise".into(),
        }
    }

    /// A store of one run: its runs' scatter is not seen yet, so how many more it needs is not
    /// known either.
    pub fn noise_unseen(&self) -> bool {
        self.unit.is_baseline_runs() && self.history_runs < 2
    }

    /// The median cell MDE (relative, negative), when any cell was compared.
    pub fn median_cell_mde(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.cells.iter().map(|c| c.mde).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }
}

/// The candidate's coverage of the baseline: a gate that passed on the few cells an engine
/// could still serve would pass a build that broke the rest, so every cell the baseline
/// measured must be measured again before the measured cells may speak for the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Cells measured (`ok` or `capacity_limited`) in the baseline's level runs that the
    /// candidate's matrix asked for (cells it lacks or skipped on purpose are not counted).
    pub expected: usize,
    /// Of those, the cells the candidate measured too.
    pub measured: usize,
}

impl Coverage {
    /// Whether the candidate was measured well enough to decide: every expected cell.
    pub fn sufficient(&self) -> bool {
        self.measured >= self.expected
    }

    /// For people: "18 of 19 cells measured in the baseline were measured now (all are needed)".
    pub(crate) fn describe(&self, against: Against) -> String {
        let (base, now) = match against {
            Against::Baseline => ("measured in the baseline", "now"),
            Against::PairedAb => ("A measured", "by B"),
        };
        format!(
            "{} of {} cells {base} were measured {now} (all are needed)",
            self.measured, self.expected,
        )
    }
}

/// Why the first boot called for a second one, or did not ([`Confirmation::reason`]): typed
/// where the model decided it, written as its words ([`crate::answer`], its `Display`); a
/// recorded verdict's reads back as [`ConfirmationReason::Recorded`]. Equal when they read the
/// same.
#[derive(Debug, Clone)]
pub enum ConfirmationReason {
    /// After one boot `cells` cells could still be `−cell_effect` or worse.
    Uncovered {
        /// Cells one boot cannot vouch for.
        cells: usize,
        /// The rule's cell effect (positive).
        cell_effect: f64,
    },
    /// After one boot a gated latency or layer figure could still be beyond what a pass
    /// vouches (`vouched_to`, [`CellComparison::vouched_to`]) in `cells` cells (contexts).
    Unvouched {
        /// The first such metric.
        metric: Metric,
        /// Its cells (a layer's contexts) one boot cannot vouch for.
        cells: usize,
        /// The bound a pass vouches it within, signed the worse way (ITL p99's +0.50).
        vouched_to: f64,
    },
    /// The matrix-wide change leans worse and the first boot has provisional alarms.
    LeansWithAlarms {
        /// The first boot's matrix-wide change.
        matrix: FirstBootMatrix,
        /// Provisional alarms.
        alarms: usize,
    },
    /// The first boot has provisional alarms.
    Alarms(usize),
    /// The first boot's matrix-wide change, and what it called for.
    Matrix {
        /// The first boot's matrix-wide change.
        matrix: FirstBootMatrix,
        /// What it called for.
        then: MatrixThen,
    },
    /// No matrix-wide test: the first boot's verdict.
    NoMatrixTest(GateVerdict),
    /// A reason read from a recorded verdict: shown as it is.
    Recorded(String),
}

/// The first boot's matrix-wide change as a confirmation's reason quotes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstBootMatrix {
    /// The relative change.
    pub change: f64,
    /// Its statistic.
    pub statistic: f64,
    /// The futility bound.
    pub boundary: f64,
}

/// What the first boot's matrix-wide change called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixThen {
    /// It leans worse: a second boot.
    SecondBoot,
    /// It leans worse, but the first boot's verdict is already final.
    Final,
    /// It does not lean worse: the matrix test stops at one boot.
    Stops,
}

recorded_words!(ConfirmationReason);

/// Why a gate's adaptive re-measurement rounds stopped (its words: [`crate::answer`]). Not
/// recorded in `verdict.json`: the run's events and console say it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RoundsStop {
    /// No cell leans worse without deciding.
    NoCellLeans,
    /// The plan's `max_rounds` are spent.
    MaxRounds(u32),
    /// The gate already found a regression.
    GateRegressed,
    /// The first boot already calls for a second, which decides.
    SecondBootDecides,
    /// The driver's `max_extra_seconds` are spent.
    MaxExtraSeconds(f64),
    /// The driver was cancelled.
    Cancelled,
    /// A replay's recorded run has no further rounds.
    NotRecorded,
}

/// The first stage of a confirmation boot, kept so readers of the verdict (the job summary,
/// the PR comment from uploaded results) can say why the engine was booted twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// Why the first boot called for a second one, for people ([`ConfirmationReason`]).
    pub reason: ConfirmationReason,
    /// The first boot's own matrix-wide test.
    #[serde(default)]
    pub first_boot: Option<MatrixTest>,
    /// The first boot's provisional alarms (cells whose alarm one boot could not prove): with
    /// `first_boot` leaning worse, the other cause of a second boot; `reason` and the headline
    /// both name whichever hold.
    #[serde(default)]
    pub provisional_alarms: usize,
    /// The results file of the second boot, next to the first's `results.json`.
    pub second_results: String,
    /// Whether the second boot entered the verdict. `false` only when a second boot's results
    /// were given (`compare --confirmation`) but the first boot did not call for one, so `run`
    /// would not have booted again: the verdict is the first boot's alone, and `reason` says why.
    #[serde(default = "used_by_default")]
    pub used: bool,
    /// Whether the plan called for a second boot whose results were not given (a replay of
    /// a run's files without `results-confirm.json`): the verdict is the first boot's, and it
    /// is `insufficient`, never a pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

fn used_by_default() -> bool {
    true
}

impl ComparisonReport {
    /// Cells whose verdict blocks the gate (`regression`, `capacity_regression`,
    /// `error_regression`, `saturation_regression`).
    pub fn regressions(&self) -> impl Iterator<Item = &CellComparison> {
        self.cells
            .iter()
            .chain(&self.prefill)
            .chain(&self.burst)
            .filter(|c| c.verdict.is_regression())
    }

    /// The metrics a regression is in when aggregate tok/s is not one of them (a tail, a
    /// layer): what `baseline accept --metric` restarts alone and the summary's charts draw.
    /// Empty where throughput regressed, or a cell's capacity or errors did (the group's
    /// level), or no cell names a metric.
    pub fn regressed_metrics(&self) -> Vec<Metric> {
        let mut metrics: Vec<Metric> = Vec::new();
        for cell in self.regressions() {
            let mut own = (cell.metrics.iter())
                .filter(|m| m.verdict.is_regression())
                .map(|m| m.metric)
                .peekable();
            if own.peek().is_none() {
                return Vec::new();
            }
            metrics.extend(own);
        }
        metrics.sort();
        metrics.dedup();
        if metrics.contains(&Metric::AggregateTps) {
            return Vec::new();
        }
        metrics
    }

    /// The cells a `pass` cannot vouch for, each with its one-sided 95% bound on the change:
    /// compared for speed, and that bound below `-cell_effect` (the cell could have slowed by
    /// more than the stated size without a test finding it). Empty when the rule recorded no
    /// `cell_effect` (files of earlier versions).
    pub fn uncovered_cells(&self) -> Vec<(&CellComparison, f64)> {
        let Some(effect) = self.rule.cell_effect else {
            return Vec::new();
        };
        self.cells
            .iter()
            .filter(|c| !c.verdict.is_regression())
            .filter_map(|c| {
                let low = c.primary()?.ci_low;
                (low.is_finite() && low < -effect).then_some((c, low))
            })
            .collect()
    }

    /// The gated metrics besides aggregate tok/s (the decode cells' [`Self::gated_cell_metrics`],
    /// then the layers' [`Self::layer_gates`]) a `pass` cannot vouch for, each with its cells
    /// whose one-sided 95% bound on the change reaches the bound a pass vouches it within
    /// ([`CellComparison::vouched_to`]: ITL p99's +50%, a prefill context's −20%): the cell
    /// could have moved that much without a test finding it, as a history recorded on a busy
    /// host lets a tripled tail read `unchanged`. A regressed entry is not listed.
    pub fn uncovered_metrics(&self) -> Vec<(Metric, Vec<(&CellComparison, &MetricComparison)>)> {
        let layers = [Metric::PrefillTps, Metric::BurstTps, Metric::BurstTtftP90]
            .into_iter()
            .filter(|&m| self.layer_gates(m))
            .map(|metric| {
                let cells = if metric.is_burst() {
                    &self.burst
                } else {
                    &self.prefill
                };
                let entries = cells.iter().filter_map(|c| Some((c, c.metric(metric)?)));
                (metric, entries.collect::<Vec<_>>())
            });
        self.gated_cell_metrics()
            .into_iter()
            .chain(layers)
            .map(|(metric, cells)| {
                let open = cells
                    .into_iter()
                    .filter(|(c, m)| c.unvouched(m))
                    .collect::<Vec<_>>();
                (metric, open)
            })
            .filter(|(_, cells)| !cells.is_empty())
            .collect()
    }

    /// Whether a layer's metric gates here: the prefill layer's tok/s where the layer gates,
    /// a burst metric where it is one of [`Self::burst_metrics_gated`] (in files of older
    /// versions: where the layer gates and the rule lists it).
    pub fn layer_gates(&self, metric: Metric) -> bool {
        match metric {
            Metric::PrefillTps => self.prefill_gated,
            m if m.is_burst() && !self.burst_metrics_gated.is_empty() => {
                self.burst_metrics_gated.contains(&m)
            }
            m if m.is_burst() => {
                self.burst_gated
                    && self
                        .judged_by
                        .as_ref()
                        .is_none_or(|j| j.metrics.contains(&m))
            }
            _ => false,
        }
    }

    /// A report of `candidate_runs` against `baseline` with nothing compared yet (gate
    /// `no_baseline`, no cells, no headline): what the model fills in, and fixtures start from.
    pub fn new(
        profile: ProfileKey,
        suite: Option<String>,
        candidate_runs: Vec<String>,
        baseline: BaselineSummary,
        rule: RuleSummary,
    ) -> Self {
        ComparisonReport {
            schema_version: VERDICT_SCHEMA_VERSION,
            profile,
            suite,
            candidate_runs,
            against: Against::Baseline,
            baseline,
            gate: GateVerdict::NoBaseline,
            headline: String::new(),
            matrix_test: None,
            cells: Vec::new(),
            lines: Vec::new(),
            prefill: Vec::new(),
            prefill_gated: false,
            burst: Vec::new(),
            burst_gated: false,
            burst_metrics_gated: Vec::new(),
            cell_metrics_gated: Vec::new(),
            not_gated: Vec::new(),
            host_late: Vec::new(),
            history_host_late: Vec::new(),
            rule,
            confirmation: None,
            coverage: None,
            sensitivity: None,
            fail_on: None,
            judged_by: None,
        }
    }

    /// The cells of [`Self::host_late`] where `metric` was not vouched for.
    pub fn host_late_of(&self, metric: Metric) -> Vec<&HostLateCell> {
        self.host_late
            .iter()
            .filter(|h| h.metric == metric)
            .collect()
    }

    /// The rule's gating metrics that did not gate here, at least in some cells, from
    /// [`Self::not_gated`], each once: a layer's entry stands for its metrics the rule lists.
    /// `None` for an entry read back as words alone (a file of an older version), whose metric
    /// is not known.
    pub fn not_gated_metrics(&self) -> Vec<Option<Metric>> {
        let listed = |m: Metric| {
            self.judged_by
                .as_ref()
                .is_none_or(|j| j.metrics.contains(&m))
        };
        let mut out: Vec<Option<Metric>> = Vec::new();
        for n in &self.not_gated {
            let these = match n {
                NotGated::ShortHistory { metric, .. }
                | NotGated::ThinCells { metric, .. }
                | NotGated::RestartedShort { metric, .. } => vec![Some(*metric)],
                NotGated::PrefillShortHistory { .. } | NotGated::PrefillNotMeasured => {
                    vec![Some(Metric::PrefillTps)]
                }
                NotGated::BurstShortHistory { .. } | NotGated::BurstNotMeasured => {
                    [Metric::BurstTps, Metric::BurstTtftP90]
                        .into_iter()
                        .filter(|m| listed(*m))
                        .map(Some)
                        .collect()
                }
                NotGated::BurstThin { .. } => vec![Some(Metric::BurstTtftP90)],
                NotGated::Recorded(_) => vec![None],
            };
            for m in these {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        out
    }

    /// Each metric of [`Self::cell_metrics_gated`] with the decode cells it gated in (those
    /// with a finite entry of it): what a green check vouches for beyond aggregate tok/s.
    pub fn gated_cell_metrics(&self) -> Vec<(Metric, Vec<(&CellComparison, &MetricComparison)>)> {
        self.cell_metrics_gated
            .iter()
            .map(|&metric| {
                let cells = self
                    .cells
                    .iter()
                    .filter_map(|c| {
                        let m = c.metric(metric)?;
                        (m.baseline.is_finite() && m.candidate.is_finite()).then_some((c, m))
                    })
                    .collect();
                (metric, cells)
            })
            .collect()
    }

    /// Why an `unmeasured` gate cannot decide, naming the side that was not measured: the
    /// headline's and the reports' first line's one wording.
    pub(crate) fn unmeasured_reason(&self) -> String {
        format!(
            "cannot decide, {} was not measured well enough: {}",
            match self.against {
                Against::Baseline => "the candidate",
                Against::PairedAb => "B",
            },
            self.coverage.map_or_else(
                || "coverage unknown".to_string(),
                |c| c.describe(self.against)
            )
        )
    }
}

/// The baseline side of a comparison.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineSummary {
    /// Runs the level was taken from (newest K).
    pub level_runs: Vec<String>,
    /// Every history run the comparison used (the window, oldest → newest): with the rule
    /// and `plan`, what `compare --as-verdict` needs to give the same verdict once the store
    /// has moved on. Empty in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<String>,
    /// Number of runs the noise estimate used (longer history).
    pub noise_runs: usize,
    /// Metrics whose level a person accepted as new from a later run than the rest of the
    /// history (`baseline accept --metric`): each is compared only with the runs since, while
    /// the others keep every run. Recorded so `compare --as-verdict` takes the same runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metric_since: Vec<MetricSince>,
}

/// One metric's baseline restarted at an accepted change ([`BaselineSummary::metric_since`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricSince {
    /// The metric.
    pub metric: Metric,
    /// The first run at the new level.
    pub since_run_id: String,
    /// Its start time: history runs started before it carry no figure of the metric.
    pub since_started_at: chrono::DateTime<chrono::Utc>,
}

/// The gate's overall answer; maps to the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    /// No regression found, and the gate was sensitive enough to find one of `design_effect`.
    Pass,
    /// At least one cell (or the matrix-wide test) regressed.
    Regression,
    /// No regression found, but the gate was not sensitive enough to call it a pass: its
    /// minimum detectable effect is above `design_effect` (more baseline runs, longer windows
    /// or another boot would make it so; `sensitivity` says which). Older files' `inconclusive`
    /// reads as this.
    #[serde(alias = "inconclusive")]
    Insufficient,
    /// No usable baseline for this profile and suite.
    NoBaseline,
    /// The candidate could not be measured well enough to decide (its coverage of the
    /// baseline's cells): a measurement failure, exit 3.
    Unmeasured,
}

impl GateVerdict {
    /// The lower-case word used in outputs (`pass`, `regression`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Pass => "pass",
            GateVerdict::Regression => "regression",
            GateVerdict::Insufficient => "insufficient",
            GateVerdict::NoBaseline => "no_baseline",
            GateVerdict::Unmeasured => "unmeasured",
        }
    }
}

/// Verdict of one cell (or one metric of a cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellVerdict {
    /// Worse beyond the margin, significantly.
    Regression,
    /// Better beyond the margin, significantly.
    Improvement,
    /// Within the margin, with confidence.
    Unchanged,
    /// Neither shown: the interval straddles the margin (measure more).
    Inconclusive,
    /// Could not be compared (missing on one side, not measured, another matrix).
    NotComparable,
    /// Capacity-limited on every candidate boot where its history shows it practically never
    /// was (`stats::capacity`).
    CapacityRegression,
    /// Measured in the baseline, `error` now (the engine fails where it used to serve).
    ErrorRegression,
    /// Saturated now (the engine preempted or retracted requests during the window) where
    /// that is not evidence of a change: saturated in its history too, or on one boot only.
    /// Its speed is not compared; it never fails the gate.
    Saturated,
    /// Saturated on every candidate boot, where its history shows it practically never was
    /// (`docs/statistics.md`, capacity and saturation): fails the gate.
    SaturationRegression,
}

impl CellVerdict {
    /// Whether this verdict fails the gate.
    pub fn is_regression(self) -> bool {
        matches!(
            self,
            CellVerdict::Regression
                | CellVerdict::CapacityRegression
                | CellVerdict::ErrorRegression
                | CellVerdict::SaturationRegression
        )
    }

    /// The snake_case word used in files and outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            CellVerdict::Regression => "regression",
            CellVerdict::Improvement => "improvement",
            CellVerdict::Unchanged => "unchanged",
            CellVerdict::Inconclusive => "inconclusive",
            CellVerdict::NotComparable => "not_comparable",
            CellVerdict::CapacityRegression => "capacity_regression",
            CellVerdict::ErrorRegression => "error_regression",
            CellVerdict::Saturated => "saturated",
            CellVerdict::SaturationRegression => "saturation_regression",
        }
    }
}

/// A compared metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Aggregate output tok/s (primary).
    AggregateTps,
    /// Mean per-stream output tok/s.
    PerUserTps,
    /// Median time to first token.
    TtftP50,
    /// 90th-percentile time to first token.
    TtftP90,
    /// Median inter-token latency.
    ItlP50,
    /// 90th-percentile inter-token latency.
    ItlP90,
    /// Acceptance-normalised engine steps/s under speculative decoding.
    StepsPerS,
    /// Energy per output token (GPU telemetry).
    JoulesPerToken,
    /// 99th-percentile time to first token (compared from 299 first tokens on).
    TtftP99,
    /// 99th-percentile inter-token latency (compared from 299 gaps on).
    ItlP99,
    /// Median time per output token per request (`tpot` of `vllm bench serve`).
    TpotP50,
    /// 90th-percentile time per output token per request.
    TpotP90,
    /// Prefill tok/s of the cold samples at one context (the prefill layer; its "cells" are
    /// the contexts, `concurrency` 0).
    PrefillTps,
    /// The burst layer's total (prompt + output) tok/s over its wall time.
    BurstTps,
    /// The burst layer's TTFT p90 over its completed requests (compared from 29 on).
    BurstTtftP90,
}

impl Metric {
    /// Whether a larger value is better (throughput) or worse (latency, energy).
    pub fn direction(self) -> Direction {
        match self {
            Metric::AggregateTps
            | Metric::PerUserTps
            | Metric::StepsPerS
            | Metric::PrefillTps
            | Metric::BurstTps => Direction::HigherIsBetter,
            _ => Direction::LowerIsBetter,
        }
    }

    /// Whether the metric is a latency percentile (TTFT or ITL), whose value is compared only
    /// from the observations that bound it and which gates only on a long enough history.
    pub fn is_latency_percentile(self) -> bool {
        matches!(
            self,
            Metric::TtftP50
                | Metric::TtftP90
                | Metric::TtftP99
                | Metric::ItlP50
                | Metric::ItlP90
                | Metric::ItlP99
                | Metric::TpotP50
                | Metric::TpotP90
        )
    }

    /// The snake_case name used in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::AggregateTps => "aggregate_tps",
            Metric::PerUserTps => "per_user_tps",
            Metric::TtftP50 => "ttft_p50",
            Metric::TtftP90 => "ttft_p90",
            Metric::ItlP50 => "itl_p50",
            Metric::ItlP90 => "itl_p90",
            Metric::StepsPerS => "steps_per_s",
            Metric::JoulesPerToken => "joules_per_token",
            Metric::TtftP99 => "ttft_p99",
            Metric::ItlP99 => "itl_p99",
            Metric::TpotP50 => "tpot_p50",
            Metric::TpotP90 => "tpot_p90",
            Metric::PrefillTps => "prefill_tps",
            Metric::BurstTps => "burst_tps",
            Metric::BurstTtftP90 => "burst_ttft_p90",
        }
    }

    /// Whether the metric is a layer's (one figure per run, not per decode cell): the prefill
    /// layer's per context, the burst layer's.
    pub fn is_layer(self) -> bool {
        matches!(
            self,
            Metric::PrefillTps | Metric::BurstTps | Metric::BurstTtftP90
        )
    }

    /// Whether the metric is the burst layer's.
    pub fn is_burst(self) -> bool {
        matches!(self, Metric::BurstTps | Metric::BurstTtftP90)
    }
}

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Throughput-like: a drop is a regression.
    HigherIsBetter,
    /// Latency- or energy-like: a rise is a regression.
    LowerIsBetter,
}

/// Verdict of one cell with the metric comparisons behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellComparison {
    /// Concurrent streams of the cell.
    pub concurrency: u32,
    /// Prompt (context) length of the cell, in tokens.
    pub context_tokens: u64,
    /// The cell's verdict (its primary metric's, or why it was not comparable).
    pub verdict: CellVerdict,
    /// Why: typed where the model decided it, written as its words (e.g. "capacity-limited
    /// now (5/8 running); …", "missing in baseline"; [`CellReason`]).
    #[serde(default)]
    pub reason: Option<CellReason>,
    /// Primary metric first.
    pub metrics: Vec<MetricComparison>,
    /// A provisional alarm: this boot alone shows a change (capacity-limited or saturated where
    /// the history practically never was) that one boot cannot prove; `run` boots the engine
    /// again to confirm it (`stats::confirm`), and until then the gate is at best
    /// `inconclusive`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub provisional: bool,
    /// Capacity-limited (or saturated) now and never in a history too short to judge it (the
    /// reason says how many runs or pairs would do): no evidence either way, so the gate is
    /// `insufficient`, never `pass`, until the store has them. A flaky cell, in the state in
    /// some history runs, is not this: it is not evidence of a change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history_too_short: bool,
    /// Why a layer's entry was not compared where that fails the gate closed (never `pass`
    /// where its layer gates); `reason` says it in words. Absent otherwise, and in verdicts
    /// written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_compared: Option<NotCompared>,
}

/// Why a cell has its verdict ([`CellComparison::reason`]): typed where the model decided it,
/// written as its words in one place ([`crate::answer`], its `Display`), which is what
/// `verdict.json` records. A recorded verdict reads back as [`CellReason::Recorded`], as a
/// [`CheckOutcome`] does; two reasons are equal when they read the same.
#[derive(Debug, Clone)]
pub enum CellReason {
    /// No baseline to compare with (the headline says so already).
    NoBaseline,
    /// The cell is missing from every level run (or A boot).
    MissingInBase(Against),
    /// The cell is missing from this candidate run.
    MissingInRun {
        /// Which sides.
        against: Against,
        /// The candidate run.
        run: String,
    },
    /// The candidate's cell errors where level runs measured it: it fails closed.
    ErrorNow {
        /// The candidate cell's own reason (the engine's words).
        why: String,
        /// Level runs that measured the cell.
        measured: usize,
        /// Level runs that have the cell.
        runs: usize,
        /// Which sides.
        against: Against,
    },
    /// The candidate's cell errors, and no level run measured it.
    Error {
        /// The candidate cell's own reason.
        why: String,
        /// Which sides.
        against: Against,
    },
    /// The candidate skipped the cell.
    Skipped {
        /// The candidate cell's own reason.
        why: String,
        /// Which sides.
        against: Against,
    },
    /// In `limit`'s state now, with no successful measurement to judge it against.
    LimitWithoutBase {
        /// The state.
        limit: Limit,
        /// Which sides.
        against: Against,
    },
    /// Out of `limit`'s state now, where every level run that measured it was in it.
    OutOfLimit {
        /// The state the level was in.
        limit: Limit,
        /// Which sides.
        against: Against,
    },
    /// No level run measured the cell successfully.
    NoBaseMeasurement(Against),
    /// Capacity-limited or saturated now, judged against its history.
    Limit(LimitReason),
    /// No metric that decides the cell was compared: none of the decode cell's gating
    /// metrics (on both sides; in two pairs for an A/B), no figure of a layer's entry.
    NothingCompared {
        /// The cell's layer.
        layer: Layer,
        /// Which sides.
        against: Against,
    },
    /// A paired A/B cell measured on both sides in fewer than two pairs.
    TooFewPairs {
        /// Pairs that measured it on both sides.
        pairs: usize,
        /// The first unmeasured cell's own reason, if it gave one.
        why: Option<String>,
    },
    /// A prefill figure whose engine counters disagree with the client's: not compared.
    PrefillDisagrees {
        /// The prefill context, in tokens.
        context: u64,
        /// The candidate run.
        run: String,
        /// The cross-check's detail.
        detail: Option<String>,
    },
    /// A burst with requests that did not complete: not compared.
    BurstIncomplete {
        /// The candidate run.
        run: String,
        /// Requests completed.
        completed: u32,
        /// Requests sent.
        sent: u32,
        /// Requests that ended early.
        incomplete: u32,
        /// Requests that failed.
        errors: u32,
        /// The first problem, in the engine's or client's words.
        first_problem: Option<String>,
    },
    /// Decided with its row or column: the line's change against the rest of its run.
    WithLine {
        /// Row or column.
        axis: LineAxis,
        /// The line's context (a row) or concurrency (a column).
        at: u64,
        /// The metric.
        metric: Metric,
        /// The line's change against the rest of its run, with its interval.
        line: DecidedChange,
        /// This cell's own change against the rest of its run.
        cell: f64,
    },
    /// Decided with the matrix-wide change, which its total change follows.
    WithMatrix {
        /// The metric.
        metric: Metric,
        /// The matrix-wide change.
        matrix: f64,
        /// The matrix-wide verdict.
        verdict: CellVerdict,
        /// The cell's total change.
        total: f64,
    },
    /// A paired A/B cell's change of B against A, over its pairs of boots.
    PairedChange {
        /// The metric.
        metric: Metric,
        /// B's change against A, with its interval.
        change: DecidedChange,
        /// Pairs of boots.
        pairs: usize,
    },
    /// A reason read from a recorded verdict, or a caller's words (`compare`'s why there is no
    /// baseline): shown as they are.
    Recorded(String),
}

/// A state a cell is judged in against its history (`stats::capacity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `capacity_limited`: the engine could not admit every stream.
    Capacity,
    /// `saturated`: the engine admitted every stream but preempted or retracted requests.
    Saturation,
}

/// How often a cell was in a [`Limit`]'s state: in its history, and on the candidate's boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitCounts {
    /// History runs that measured the cell.
    pub runs: usize,
    /// Of those, the runs in the state.
    pub hits: usize,
    /// Candidate boots (runs) that measured the cell.
    pub boots: usize,
    /// Of those, the boots in the state (at least one: otherwise there is nothing to judge).
    pub boot_hits: usize,
}

/// Why a capacity-limited or saturated cell has its verdict: the counts it was judged on and
/// what the rule found.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitReason {
    /// The state.
    pub limit: Limit,
    /// The counts.
    pub counts: LimitCounts,
    /// The candidate's first reason for the state (empty if none).
    pub detail: String,
    /// Which sides.
    pub against: Against,
    /// `capacity_alpha`.
    pub alpha: f64,
    /// What the rule found.
    pub finding: LimitFinding,
}

/// What the capacity rule found (`stats::capacity::decide`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LimitFinding {
    /// In the state in every history run.
    BothSides,
    /// Not on every boot: not evidence.
    NotEveryBoot,
    /// A regression: the false-alarm bound is at most alpha.
    Regression {
        /// The false-alarm bound.
        bound: f64,
    },
    /// A provisional alarm: one more boot in the state would make it a regression.
    Provisional {
        /// The false-alarm bound with this boot.
        bound: f64,
    },
    /// In the state in some history runs: flaky, not evidence.
    Flaky,
    /// Never in the state in a history too short to tell.
    TooShort {
        /// Runs (or pairs) that would do; `None` beyond the search.
        needed: Option<usize>,
    },
}

recorded_words!(CellReason);

/// Why a layer's entry was not compared, where the gate fails closed on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotCompared {
    /// The engine's prefill counters disagree with the client's prefill figure.
    PrefillCountersDisagree,
    /// Not every request of the candidate's burst completed.
    BurstIncomplete,
}

/// Which layer of the suite an entry of a comparison belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// A cell of the concurrency x context matrix (sustained decode).
    Decode,
    /// A context of the prefill layer (no concurrency).
    Prefill,
    /// The burst / end-to-end layer's one entry (neither concurrency nor context).
    Burst,
}

impl CellComparison {
    /// The layer this entry belongs to, from its coordinates: the prefill layer's entries have
    /// no concurrency, the burst's neither concurrency nor context. Said here once, for every
    /// report that lists the layers' entries together.
    pub(crate) fn layer(&self) -> Layer {
        match (self.concurrency, self.context_tokens) {
            (0, 0) => Layer::Burst,
            (0, _) => Layer::Prefill,
            _ => Layer::Decode,
        }
    }

    /// The bound a `pass` vouches the cell's entry `m` (a gated metric besides aggregate
    /// tok/s) within, signed the worse way: a decode cell's latency within the change that
    /// fails it (its design effect: ITL p99's +50%), a layer's figure within [`LAYER_VOUCH`]
    /// times its margin (the prefill layer's −20%).
    pub fn vouched_to(&self, m: &MetricComparison) -> f64 {
        match self.layer() {
            Layer::Decode => m.fails_beyond(),
            Layer::Prefill | Layer::Burst => LAYER_VOUCH * m.fails_beyond(),
        }
    }

    /// Whether a `pass` could not vouch for the cell's (gated) entry `m`: it did not regress,
    /// and its worse bound reaches [`Self::vouched_to`] (the one test the gate, the first line
    /// and the rows take).
    pub fn unvouched(&self, m: &MetricComparison) -> bool {
        !m.verdict.is_regression() && !m.within(self.vouched_to(m))
    }

    /// The comparison of `metric`, when the cell was compared on it.
    pub fn metric(&self, metric: Metric) -> Option<&MetricComparison> {
        self.metrics.iter().find(|m| m.metric == metric)
    }

    /// The primary (aggregate tok/s) comparison, when the cell was comparable.
    pub fn primary(&self) -> Option<&MetricComparison> {
        self.metric(Metric::AggregateTps)
    }

    /// The metric comparison the cell's verdict came from: the first with the cell's verdict
    /// (the primary when none has it, e.g. a cell decided up front).
    pub fn deciding(&self) -> Option<&MetricComparison> {
        self.metrics
            .iter()
            .find(|m| m.verdict == self.verdict)
            .or_else(|| self.primary())
    }
}

/// One metric of one cell: levels, relative change with its interval, and the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    /// The metric compared.
    pub metric: Metric,
    /// Which way is better for it.
    pub direction: Direction,
    /// Baseline level (mean of the newest K runs).
    pub baseline: f64,
    /// Candidate level.
    pub candidate: f64,
    /// Relative change, candidate / baseline − 1 (signed, so −0.074 is 7.4% lower).
    pub change: f64,
    /// Confidence interval of the relative change.
    pub ci_low: f64,
    /// Upper end of the interval.
    pub ci_high: f64,
    /// Practical-significance margin used (relative, positive).
    pub margin: f64,
    /// Raw p-value of the one-sided test of "no change" in the worse direction (of the change
    /// the cell's test is on; [`Check`] has its statistic and boundary).
    pub p_value: f64,
    /// The p-value after multiplicity correction (Bonferroni: scaled by the local families'
    /// alpha over this test's own share of it), to compare with the local alpha.
    pub p_adjusted: f64,
    /// This metric's verdict.
    pub verdict: CellVerdict,
    /// The cell's own test (the cell against the rest of its run) at the look that decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
    /// The change this verdict was decided on, when the comparison records it (older files do
    /// not): the per-cell test looks at the cell relative to its own run, so that figure, not
    /// `change`, is what a regression or improvement stands on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_on: Option<DecidedChange>,
}

impl MetricComparison {
    /// The change that fails, signed the worse way: `margin` up for a latency, down for a
    /// throughput.
    pub fn fails_beyond(&self) -> f64 {
        match self.direction {
            Direction::LowerIsBetter => self.margin,
            Direction::HigherIsBetter => -self.margin,
        }
    }

    /// The interval's end on the worse side: its upper end for a latency, its lower for a
    /// throughput (a one-sided 95% bound).
    pub fn worse_bound(&self) -> f64 {
        match self.direction {
            Direction::LowerIsBetter => self.ci_high,
            Direction::HigherIsBetter => self.ci_low,
        }
    }

    /// Whether the worse bound stays short of `limit` (a change signed the worse way), so the
    /// test vouches that the metric did not move that much; never where it is not a number
    /// (fail closed).
    pub fn within(&self, limit: f64) -> bool {
        let bound = self.worse_bound();
        match self.direction {
            Direction::LowerIsBetter => bound < limit,
            Direction::HigherIsBetter => bound > limit,
        }
    }

    /// The change to show beside the verdict: the decided-on one when recorded, else the total.
    pub fn shown_change(&self) -> DecidedChange {
        self.decided_on.unwrap_or(self.total_change())
    }

    /// The total change, except that a cell that moved with the matrix says so.
    pub fn shown_change_total(&self) -> DecidedChange {
        match self.decided_on {
            Some(d) if matches!(d.basis, DecisionBasis::WithMatrix | DecisionBasis::WithLine) => d,
            _ => self.total_change(),
        }
    }

    fn total_change(&self) -> DecidedChange {
        DecidedChange {
            basis: DecisionBasis::Total,
            change: self.change,
            ci_low: self.ci_low,
            ci_high: self.ci_high,
            matrix_change: None,
        }
    }

    /// The total change with its sign turned so that positive is better (for ordering: worst
    /// first).
    pub(crate) fn goodness(&self) -> f64 {
        let c = self.shown_change_total().change;
        match self.direction {
            Direction::HigherIsBetter => c,
            Direction::LowerIsBetter => -c,
        }
    }
}

/// Which quantity a metric's verdict was decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionBasis {
    /// The cell relative to the rest of its own run (the run's matrix factor taken out).
    VsRun,
    /// The cell's total change against the baseline.
    Total,
    /// The cell moved with the whole matrix: decided on its total change because the
    /// matrix-wide change was significant (or contradicted the cell's own test).
    WithMatrix,
    /// The cell moved with its row or column: decided by that line's test (the cell's reason
    /// gives the line's figure); the figure is the cell's total change.
    WithLine,
}

/// A relative change (metric's own sign: + is a higher value) with its interval, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecidedChange {
    /// Which change the verdict was decided on.
    pub basis: DecisionBasis,
    /// The relative change.
    pub change: f64,
    /// Lower end of its confidence interval.
    pub ci_low: f64,
    /// Upper end of its confidence interval.
    pub ci_high: f64,
    /// The matrix-wide change of the metric, when the cell moved with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix_change: Option<f64>,
}

impl DecidedChange {
    /// `vs its run`, `total`, `with the matrix` — the words that follow the figure.
    pub fn label(&self) -> String {
        match self.basis {
            DecisionBasis::VsRun => "vs the rest of its run".into(),
            DecisionBasis::Total => "total".into(),
            DecisionBasis::WithMatrix => match self.matrix_change {
                Some(m) => format!("with the matrix: {}", signed_percent(m)),
                None => "with the matrix".into(),
            },
            DecisionBasis::WithLine => "with its row or column".into(),
        }
    }
}

/// Result of the matrix-wide test on the primary metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixTest {
    /// Mean relative change across comparable cells.
    pub change: f64,
    /// Lower end of its confidence interval.
    pub ci_low: f64,
    /// Upper end of its confidence interval.
    pub ci_high: f64,
    /// Practical-significance margin used (relative, positive).
    pub margin: f64,
    /// One-sided p-value of "no change" in the worse direction.
    pub p_value: f64,
    /// The matrix-wide verdict.
    pub verdict: CellVerdict,
    /// Comparable cells the test pooled.
    pub cells: usize,
    /// The test's arithmetic at the look that decided it (statistic, boundary, alpha share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

/// One test of the gate, written so a reviewer can redo it with a calculator: the statistic
/// (the log change over its standard error, the metric's own sign), the distribution it has
/// when nothing changed, the boundary at this look and the one-sided alpha the test was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Which look of the gate's plan made the test (`first boot`, `round 1`, `both boots`).
    pub look: String,
    /// The standardized change: `ln(candidate / baseline) / se` (negative: lower values).
    pub statistic: f64,
    /// Its distribution under "no change", e.g. `t(19.0)`.
    pub reference: String,
    /// The boundary, in the worse direction: a regression needs the statistic beyond it.
    pub boundary: f64,
    /// The one-sided alpha this test was given at this look (its share of the gate's alpha);
    /// for a futility screen, the screen's level, which spends none of it.
    pub alpha: f64,
    /// Whether this is a futility screen (it can stop a test, never reject): the matrix
    /// test's at the first boot, or the second boot's own where it overruled a test that
    /// found a regression over both boots.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub screen: bool,
    /// Whether this test found a regression (statistic beyond the boundary, change beyond
    /// its margin) of a metric that gates; a reported-only metric's test never is, and its
    /// outcome says which way the metric moved.
    pub rejected: bool,
    /// What the look concluded: typed where the model decided it, and written as its words
    /// (`regression`, `no regression`, `leans worse: boot again`, …; [`crate::answer`]).
    pub outcome: CheckOutcome,
}

/// What one test's look concluded ([`Check::outcome`]). The statistics model sets it; its
/// words are written in one place ([`crate::answer`], its `Display`), which is what
/// `verdict.json` records. A recorded verdict reads back as [`CheckOutcome::Recorded`]: its
/// words, never parsed back into a variant. Two outcomes are equal when they read the same,
/// so a recorded one equals the typed one that wrote it.
#[derive(Debug, Clone)]
pub enum CheckOutcome {
    /// The test found a regression (beyond the boundary and the margin).
    Regression,
    /// The test found an improvement (beyond the boundary and the margin).
    Improvement,
    /// Beyond the boundary on the worse side, but the change is within the margin.
    WithinMargin,
    /// Not beyond the boundary on the worse side.
    NoRegression,
    /// A heavy-tailed cell's test on two boots, each alone: each found the regression.
    RegressionOnEachBoot,
    /// Each boot alone found the improvement.
    ImprovementOnEachBoot,
    /// Not each boot alone found a change.
    NoRegressionOnEachBoot,
    /// A futility screen leaned worse: the plan boots again.
    LeansWorse,
    /// A futility screen did not lean worse: the matrix test stops.
    DoesNotLeanWorse,
    /// A regression at the plan's first boot: the second boot decides it.
    ProvisionalRegression,
    /// The change `found` over both boots does not stand: `boot` alone does not lean its way
    /// (worse for a regression, better for an improvement) past the futility screen.
    BootDoesNotLean {
        /// What the test over both boots found.
        found: Found,
        /// The boot whose own screen decided.
        boot: LoneBoot,
    },
    /// The change `found` over both boots does not stand: `boot` alone does not show it at
    /// the same alpha and margin (`own`: that boot's own test's outcome).
    BootDoesNotShow {
        /// What the test over both boots found.
        found: Found,
        /// The boot whose own test decided.
        boot: LoneBoot,
        /// That boot's own test's outcome.
        own: Box<CheckOutcome>,
    },
    /// The change `found` over both boots does not stand: `boot` alone reads a change within
    /// the design effect.
    BootWithinDesignEffect {
        /// What the test over both boots found.
        found: Found,
        /// The boot that reads too little.
        boot: LoneBoot,
        /// That boot's relative change.
        reads: f64,
        /// The design effect as a relative change on the metric's worse side (whichever way
        /// `found` points).
        design_effect: f64,
    },
    /// A row's or column's change `found` against the rest of its run, which its cells' total
    /// change against the baseline does not point to: no change.
    OnlyAgainstItsRun {
        /// What the line's test found.
        found: Found,
        /// The line's cells' mean total change, relative.
        total: f64,
    },
    /// A cell's own test found `found`, but its total change says `verdict`.
    OverruledByTotal {
        /// What the cell's own test found.
        found: Found,
        /// What the own test compared the cell with: the rest of its run (a baseline), the
        /// other cells of its pairs (A/B).
        against: Against,
        /// The cell's total change, relative.
        total: f64,
        /// The cell's verdict (any but `found`'s).
        verdict: CellVerdict,
    },
    /// A cell's own test found no change, but its row, column or the matrix decided the
    /// cell's verdict `verdict` on the change `decided`.
    DecidedByBroader {
        /// The own test's outcome.
        own: Box<CheckOutcome>,
        /// What the own test compared the cell with.
        against: Against,
        /// The cell's verdict.
        verdict: Found,
        /// The change the verdict was decided on.
        decided: DecidedChange,
    },
    /// A reported-only metric's test found a change: which way it moved (it never gates).
    ReportedOnly {
        /// Whether the metric's value is higher (else lower).
        higher: bool,
    },
    /// A secondary metric's change at the plan's first boot (`own`: what its test found, as
    /// it reads): moved on one boot, not confirmed.
    OnOneBoot(Box<CheckOutcome>),
    /// A gating secondary metric's cell decided by its matrix-wide test: that test's outcome,
    /// with the cell's own test's.
    MatrixWide {
        /// The matrix-wide test's outcome.
        matrix: Box<CheckOutcome>,
        /// The cell's own test's outcome.
        own: Box<CheckOutcome>,
    },
    /// An outcome read from a recorded verdict: its words, shown as they are. The model never
    /// sets it.
    Recorded(String),
}

recorded_words!(CheckOutcome);

/// What a test found that a later look or a broader test can overrule: a change either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A regression.
    Regression,
    /// An improvement.
    Improvement,
}

impl Found {
    /// The change a verdict found, if it is one (a regression or an improvement).
    pub fn of(verdict: CellVerdict) -> Option<Found> {
        match verdict {
            CellVerdict::Regression => Some(Found::Regression),
            CellVerdict::Improvement => Some(Found::Improvement),
            _ => None,
        }
    }
}

impl From<Found> for CellVerdict {
    fn from(found: Found) -> CellVerdict {
        match found {
            Found::Regression => CellVerdict::Regression,
            Found::Improvement => CellVerdict::Improvement,
        }
    }
}

/// One boot of the plan's two, taken alone to test what both boots found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoneBoot {
    /// The first boot alone.
    First,
    /// The second boot alone.
    Second,
}

impl Check {
    /// Whether the statistic is at or past the boundary (in the boundary's direction): the
    /// test rejected, or the screen leaned.
    pub fn beyond(&self) -> bool {
        if self.boundary < 0.0 {
            self.statistic <= self.boundary
        } else {
            self.statistic >= self.boundary
        }
    }
}

/// Which line of the matrix a [`LineTest`] pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineAxis {
    /// A row: every concurrency at one context length.
    Context,
    /// A column: every context length at one concurrency.
    Concurrency,
}

/// A row or column test: the mean change of the line's cells relative to their runs, against
/// that of the other cells (so the run factor cancels and a uniform change does not count).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineTest {
    /// Row or column.
    pub axis: LineAxis,
    /// The context length (row) or concurrency (column) of the line.
    pub at: u64,
    /// The line's change, interval, p-value (unadjusted; the verdict carries the multiplicity
    /// correction) and verdict; `cells` is the line's comparable cells.
    #[serde(flatten)]
    pub test: MatrixTest,
}

/// The plan of looks a verdict followed and the rule's parameters `RuleSummary` does not
/// carry: with it and `baseline.runs`, the verdict can be given again from the run's files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedBy {
    /// Whether a second boot decides what one cannot (`[confirm]`).
    pub confirm: bool,
    /// Most adaptive re-measurement rounds (`[adaptive] max_rounds`; 0 = none).
    pub max_rounds: u32,
    /// The history window (`[baseline] history_runs`).
    pub history_runs: usize,
    /// The uniform slowdown a `pass` must have been able to find.
    pub design_effect: f64,
    /// The probability it should have been found with.
    pub design_power: f64,
    /// The metrics that can fail the gate.
    pub metrics: Vec<Metric>,
    /// The per-metric design effects the config set (`[thresholds.min_effects]`; the others
    /// had their defaults); absent from verdicts written before they existed.
    #[serde(default)]
    pub min_effects: std::collections::BTreeMap<Metric, f64>,
    /// The burst layer's margin (`[thresholds] burst_min_effect`); absent from verdicts
    /// written before it was recorded, which all used the default (10%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_min_effect: Option<f64>,
}

/// Parameters of the decision rule as applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleSummary {
    /// Family-wise error rate across all cells x metrics.
    pub alpha: f64,
    /// Minimum relative effect worth failing a PR for (the margin of cells, rows and columns).
    pub min_effect: f64,
    /// Smallest uniform change the matrix-wide test reports as a regression (its margin);
    /// absent from verdicts written before it was recorded, which all used 1%.
    #[serde(default = "RuleSummary::earlier_matrix_margin")]
    pub matrix_margin: f64,
    /// How alpha is shared among the tests: `bonferroni` (fixed shares, so that each test's
    /// boundary can be printed); files written before A/B used the same may say `holm`.
    pub correction: String,
    /// Confidence level of reported intervals.
    pub confidence: f64,
    /// What each family of tests was given of `alpha`; absent from verdicts written before
    /// the shares were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<AlphaShares>,
    /// The slowdown of any one cell a `pass` vouches for (`[thresholds] cell_effect`): every
    /// cell compared for speed has its one-sided 95% bound (`ci_low` of its 90% interval)
    /// above `-cell_effect`; absent from verdicts written before it was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell_effect: Option<f64>,
}

/// The split of a gate's `alpha` among its families of tests, so that a reader can add them
/// up: their sum is at most `alpha` (the union bound), and each check line names its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AlphaShares {
    /// The matrix-wide test (spent at its last look).
    pub matrix: f64,
    /// Rows, columns and cells together (the correction splits it within the family).
    pub local: f64,
    /// Capacity-limited and saturated cells (0 where the comparison has no such test).
    pub capacity: f64,
    /// The rows' and columns' part of `local` (the cells have the rest); 0 where the
    /// comparison has no line tests (a matrix of one row or column, an A/B run) and in
    /// verdicts written before it was recorded.
    #[serde(default)]
    pub lines: f64,
    /// The secondary metrics' family (latency percentiles, per-user tok/s, ...) where one of
    /// them gated, taken from the matrix's and the local families' shares; absent where none
    /// gated (their lines were then listed at that share without failing the gate) and in
    /// verdicts written before 2026-12-05.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secondary: Option<f64>,
}

impl RuleSummary {
    /// The matrix margin of every verdict written before `matrix_margin` was recorded.
    fn earlier_matrix_margin() -> f64 {
        0.01
    }

    /// The correction's name as written in prose (`Bonferroni`, `Holm`).
    pub fn correction_name(&self) -> String {
        let mut c = self.correction.chars();
        c.next().map_or_else(String::new, |f| {
            f.to_uppercase().chain(c).collect::<String>()
        })
    }
}

/// A signed number with a real minus sign: `−9.1`, `+0.4`.
pub fn signed_number(x: f64, decimals: usize) -> String {
    let s = format!("{x:+.decimals$}");
    // A rounded zero has no sign: `0.0`, never `−0.0` (a change that is not there has no
    // direction).
    if s[1..].bytes().all(|b| b == b'0' || b == b'.') {
        return s[1..].to_string();
    }
    s.replacen('-', "−", 1)
}

/// A relative change (a fraction) as a signed percentage with a real minus sign, the one way
/// every headline, table and check writes a change: `−7.4%`, `+3.0%`; `n/a` when not finite.
pub fn signed_percent(fraction: f64) -> String {
    let p = 100.0 * fraction;
    if p.is_finite() {
        signed_number(p, 1) + "%"
    } else {
        "n/a".to_string()
    }
}

/// Verdict pieces the report tests build their verdicts from.
#[cfg(any(test, feature = "testkit"))]
#[allow(missing_docs)]
pub mod fixtures {
    use super::{
        AlphaShares, BaselineSummary, CellComparison, CellSensitivity, CellVerdict, Check,
        CheckOutcome, ComparisonReport, Confirmation, ConfirmationReason, DecisionBasis,
        GateVerdict, MatrixTest, Metric, MetricComparison, RuleSummary, Sensitivity,
    };
    use crate::results::{HardwareFingerprint, MatrixSpec, ProfileKey};

    /// A cell's test over both boots (t = 0.21 against −3.6) that concluded `outcome`.
    pub fn check(outcome: CheckOutcome) -> Check {
        Check {
            look: "both boots".into(),
            statistic: 0.21,
            reference: "t(37.0)".into(),
            boundary: -3.6,
            alpha: 4.67e-4,
            screen: false,
            rejected: false,
            outcome,
        }
    }

    /// The comparison of `metric` in cell `cell` of `report`, to edit (the fixture must have it).
    pub fn metric_in(
        report: &mut ComparisonReport,
        cell: usize,
        metric: Metric,
    ) -> &mut MetricComparison {
        let m = report.cells[cell].metrics.iter_mut();
        m.into_iter()
            .find(|m| m.metric == metric)
            .expect("the fixture's cell has the metric")
    }

    /// A metric that moved by `change` ± `half` from `base` (3% margin), labelled `verdict`.
    pub fn metric(
        metric: Metric,
        base: f64,
        change: f64,
        half: f64,
        verdict: CellVerdict,
    ) -> MetricComparison {
        MetricComparison {
            metric,
            direction: metric.direction(),
            baseline: base,
            candidate: base * (1.0 + change),
            change,
            ci_low: change - half,
            ci_high: change + half,
            margin: 0.03,
            p_value: 0.0004,
            p_adjusted: 0.008,
            verdict,
            decided_on: None,
            check: None,
        }
    }

    /// The default job's 3 × 2 matrix (C = 1, 2, 4 × contexts 0, 8k), every cell `change` ± 1.2%
    /// with `verdict`; per-user tok/s and ITL as the simulated engine serves them.
    pub fn cells(change: f64, verdict: CellVerdict) -> Vec<CellComparison> {
        use CellVerdict::Unchanged;
        let mut out = Vec::new();
        for ctx in [0u64, 8192] {
            for conc in [1u32, 2, 4] {
                let (tps, per_user) = (750.0 * f64::from(conc), 750.0 / f64::from(conc));
                out.push(CellComparison {
                    concurrency: conc,
                    context_tokens: ctx,
                    verdict,
                    reason: None,
                    provisional: false,
                    history_too_short: false,
                    not_compared: None,
                    metrics: vec![
                        metric(Metric::AggregateTps, tps, change, 0.012, verdict),
                        metric(Metric::PerUserTps, per_user, change, 0.012, Unchanged),
                        metric(Metric::TtftP90, 0.045, 0.02, 0.03, Unchanged),
                        metric(Metric::ItlP90, 1.1 / per_user, -change, 0.01, Unchanged),
                    ],
                });
            }
        }
        out
    }

    pub fn report(
        gate: GateVerdict,
        cells: Vec<CellComparison>,
        matrix: MatrixTest,
    ) -> ComparisonReport {
        let hw = HardwareFingerprint {
            kind: "sim".into(),
            gpu_model: None,
            gpu_count: 0,
            driver_version: None,
            cpu_model: None,
        };
        let spec = MatrixSpec {
            model: "sim-test".into(),
            concurrency: vec![1, 2, 4],
            contexts: vec![0, 8192],
            timing: crate::results::CellTiming::DEFAULT,
            repetitions: 1,
        };
        ComparisonReport {
            gate,
            headline: "the old headline".into(),
            matrix_test: Some(matrix),
            cells,
            sensitivity: Some(Sensitivity {
                design_effect: 0.05,
                design_power: 0.8,
                history_runs: 5,
                unit: Default::default(),
                matrix_mde: Some(-0.046),
                mde: -0.046,
                runs_needed: Some(0),
                sufficient: true,
                cells: vec![CellSensitivity {
                    concurrency: 1,
                    context_tokens: 0,
                    mde: -0.08,
                }],
                level_lag: 0.0,
            }),
            ..ComparisonReport::new(
                ProfileKey::derive(hw, "infergate-sim", "sim-test", &spec),
                Some("pr".into()),
                vec!["cand".into()],
                BaselineSummary {
                    runs: Vec::new(),
                    level_runs: (1..=5).map(|i| format!("b{i}")).collect(),
                    noise_runs: 5,
                    metric_since: Vec::new(),
                },
                RuleSummary {
                    alpha: 0.01,
                    min_effect: 0.03,
                    matrix_margin: 0.01,
                    correction: "bonferroni".into(),
                    confidence: 0.95,
                    cell_effect: None,
                    shares: Some(AlphaShares {
                        matrix: 0.004,
                        local: 0.004,
                        capacity: 0.002,
                        lines: 0.0012,
                        secondary: None,
                    }),
                },
            )
        }
    }

    pub fn matrix(change: f64, half: f64, verdict: CellVerdict) -> MatrixTest {
        MatrixTest {
            change,
            ci_low: change - half,
            ci_high: change + half,
            margin: 0.03,
            p_value: match verdict {
                CellVerdict::Regression => 0.0002,
                CellVerdict::Inconclusive => 0.09,
                _ => 0.41,
            },
            verdict,
            cells: 6,
            check: None,
        }
    }

    pub fn pass() -> ComparisonReport {
        report(
            GateVerdict::Pass,
            cells(0.002, CellVerdict::Unchanged),
            matrix(0.002, 0.008, CellVerdict::Unchanged),
        )
    }

    pub fn regression() -> ComparisonReport {
        let mut cells = cells(-0.096, CellVerdict::Regression);
        for c in &mut cells {
            c.metrics[0].decided_on = Some(crate::verdict::DecidedChange {
                basis: DecisionBasis::WithMatrix,
                change: -0.096,
                ci_low: -0.108,
                ci_high: -0.084,
                matrix_change: Some(-0.096),
            });
        }
        let mut r = report(
            GateVerdict::Regression,
            cells,
            MatrixTest {
                ci_low: -0.109,
                ci_high: -0.084,
                ..matrix(-0.096, 0.0, CellVerdict::Regression)
            },
        );
        r.confirmation = Some(Confirmation {
            reason: ConfirmationReason::Recorded(
                "the first boot's matrix-wide change was −9.4% [−11.0, −7.8], p = 0.0300".into(),
            ),
            first_boot: Some(matrix(-0.094, 0.016, CellVerdict::Inconclusive)),
            provisional_alarms: 0,
            second_results: "results-confirm.json".into(),
            used: true,
            missing: false,
        });
        r
    }

    pub fn insufficient() -> ComparisonReport {
        let mut cells = cells(-0.021, CellVerdict::Inconclusive);
        cells[0].verdict = CellVerdict::Unchanged;
        cells[0].metrics[0].verdict = CellVerdict::Unchanged;
        let mut r = report(
            GateVerdict::Insufficient,
            cells,
            matrix(-0.021, 0.019, CellVerdict::Inconclusive),
        );
        if let Some(s) = r.sensitivity.as_mut() {
            s.history_runs = 2;
            s.matrix_mde = Some(-0.079);
            s.mde = -0.079;
            s.runs_needed = Some(5);
            s.sufficient = false;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::{
        CellComparison, CellVerdict, NotCompared, Sensitivity, SensitivityUnit, signed_number,
        signed_percent,
    };
    use crate::asserts::{assert_contains, assert_lacks};

    /// Why an entry was not compared is a typed field: written only where set, and a verdict
    /// written before the field existed still reads (as compared, or not for another reason).
    #[test]
    fn why_an_entry_was_not_compared_is_typed_and_old_verdicts_still_read() {
        let old = r#"{"concurrency": 0, "context_tokens": 0, "verdict": "not_comparable",
            "reason": "not compared: not every burst request completed: 31 of 32", "metrics": []}"#;
        let cell: CellComparison = serde_json::from_str(old).expect("an old entry reads");
        assert_eq!(cell.verdict, CellVerdict::NotComparable);
        assert_eq!(cell.not_compared, None);
        let plain = serde_json::to_string(&cell).expect("writes");
        assert_lacks(&plain, "not_compared");
        let refused = CellComparison {
            not_compared: Some(NotCompared::PrefillCountersDisagree),
            ..cell
        };
        let json = serde_json::to_string(&refused).expect("writes");
        assert_contains(&json, r#""not_compared":"prefill_counters_disagree""#);
        let back: CellComparison = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, refused);
    }

    /// What an insufficient gate needs, in words: runs, pairs, unreachable, and a one-run store
    /// (whose noise only the prior speaks for) told to record more, not that it never can.
    #[test]
    fn an_insufficient_gate_says_what_it_needs() {
        let s = |unit, history_runs, runs_needed| Sensitivity {
            design_effect: 0.05,
            design_power: 0.8,
            history_runs,
            unit,
            matrix_mde: None,
            mde: -0.1,
            runs_needed,
            sufficient: false,
            cells: Vec::new(),
            level_lag: 0.0,
        };
        use SensitivityUnit::{BaselineRuns, Pairs};
        assert_eq!(
            s(BaselineRuns, 2, Some(3)).needs(),
            "3 more baseline runs needed"
        );
        assert_eq!(s(Pairs, 2, Some(1)).needs(), "1 more pair of boots needed");
        assert_eq!(
            s(BaselineRuns, 5, None).needs(),
            "not reachable at this noise"
        );
        assert_eq!(s(Pairs, 1, None).needs(), "not reachable at this noise");
        assert_eq!(
            s(BaselineRuns, 1, None).needs(),
            "more baseline runs needed: one shows no boot-to-boot noise yet"
        );
        assert!(s(BaselineRuns, 1, None).noise_unseen() && !s(Pairs, 1, None).noise_unseen());
        let lagging = Sensitivity {
            level_lag: 0.016,
            ..s(BaselineRuns, 10, None)
        };
        assert_eq!(
            lagging.needs(),
            "not reachable while the level lags the history's slowing by 1.6%"
        );
    }

    /// The one formatting of a change every surface uses (`report::github` re-exports it as
    /// `percent`): a real minus sign, and no sign on a rounded zero.
    #[test]
    fn a_change_has_a_real_minus_and_a_rounded_zero_no_sign() {
        assert_eq!(signed_percent(-0.0003), "0.0%");
        assert_eq!(signed_percent(0.0004), "0.0%");
        assert_eq!(signed_percent(-0.074), "−7.4%");
        assert_eq!(signed_percent(0.03), "+3.0%");
        assert_eq!(signed_number(-0.004, 2), "0.00");
        assert_eq!(signed_number(-0.006, 2), "−0.01");
        assert_eq!(signed_percent(f64::NAN), "n/a");
    }
}
