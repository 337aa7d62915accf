//! The answer in words: the gate's and the cells' words, and the one line every report leads
//! with. That line is the console's first line, the check run's title, the comment's and the
//! summary's first line, and `verdict.json`'s `headline` (which JUnit, `compare`'s stderr and
//! the merged reports quote): one writer, so no surface can give another answer. Also the
//! check lines under Details, each test redoable by hand in the same words.
//!
//! It sits just above [`crate::verdict`] so that every writer of a report stores the same
//! headline ([`ComparisonReport::set_headline`]; the statistics model leaves it empty) and
//! every report can lead with it.

use crate::results::context_label;
use crate::verdict::{
    Against, CellComparison, CellReason, CellVerdict, Check, CheckOutcome, ComparisonReport,
    ConfirmationReason, FirstBootMatrix, Found, GateVerdict, HistoryHostLate, HostLateCell, Layer,
    Limit, LimitFinding, LimitReason, LineAxis, LoneBoot, MatrixThen, Metric, MetricComparison,
    NotGated, RoundsStop, SensitivityUnit, signed_number, signed_percent,
};

/// How a prefill entry whose engine counters disagree with the client's figure begins its
/// reason: not compared, and the gate fails closed on it where the layer gates (it decides on
/// the entry's [`NotCompared`](crate::verdict::NotCompared), never on these words).
const PREFILL_DISAGREES: &str =
    "not compared: the engine's prefill counters disagree with the client's figure at ";

/// How the burst entry's reason begins when some of the candidate's burst requests did not
/// complete: not compared, and the gate fails closed on it where the layer gates (on the
/// entry's [`NotCompared`](crate::verdict::NotCompared)).
const BURST_INCOMPLETE: &str = "not compared: not every burst request completed: ";

/// What a table shows where it has no value (the console's legend says so): one mark in every
/// table, never confused with the `–` of a cell that was not compared.
pub const NO_VALUE: &str = "—";

/// The gate's answer as a symbol and a word: the one place every surface takes it from.
pub fn gate_word(gate: GateVerdict) -> (&'static str, &'static str) {
    match gate {
        GateVerdict::Pass => ("✓", "pass"),
        GateVerdict::Regression => ("✗", "regression"),
        GateVerdict::Insufficient => ("?", "insufficient"),
        GateVerdict::NoBaseline => ("–", "no baseline"),
        GateVerdict::Unmeasured => ("‼", "unmeasured"),
    }
}

/// What `fail_on` made of a verdict, where the verdict's word alone would mislead: an
/// `insufficient` that fails the gate, a `regression` reported only. `None` otherwise.
pub fn policy_note(gate: GateVerdict, ending: &crate::policy::GateEnding) -> Option<String> {
    use crate::exit::GateExit;
    match (gate, ending.exit) {
        (GateVerdict::Insufficient, GateExit::Regression) => Some(
            "fails the gate (exit 1): fail-on is `insufficient`, and the gate was not sensitive enough to say pass"
                .to_string(),
        ),
        (GateVerdict::Regression | GateVerdict::Insufficient, GateExit::Pass) => Some(format!(
            "does not fail the gate (exit 0): fail-on is `{}`",
            ending.fail_on.as_str()
        )),
        _ => None,
    }
}

/// A cell verdict's symbol and what the legend says it means.
pub fn cell_symbol(verdict: CellVerdict) -> (&'static str, &'static str) {
    match verdict {
        CellVerdict::Regression => ("✗", "regression"),
        CellVerdict::Unchanged => ("✓", "no regression"),
        CellVerdict::Improvement => ("▲", "significantly faster"),
        CellVerdict::Inconclusive => ("?", "not decided"),
        CellVerdict::NotComparable => ("–", "not compared"),
        CellVerdict::CapacityRegression => (
            "⚠",
            "capacity regression (capacity-limited on every boot, never in its history)",
        ),
        CellVerdict::ErrorRegression => ("‼", "error regression (measured before, errors now)"),
        CellVerdict::Saturated => (
            "≈",
            "saturated (the engine preempted requests; speed not compared)",
        ),
        CellVerdict::SaturationRegression => (
            "⊘",
            "saturation regression (saturated on every boot, never in its history)",
        ),
    }
}

/// A cell verdict's legend word without its explanation: `capacity regression`.
pub fn cell_word(verdict: CellVerdict) -> &'static str {
    let long = cell_symbol(verdict).1;
    long.split(" (").next().unwrap_or(long)
}

/// A metric's name as people say it.
pub fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::AggregateTps => "aggregate tok/s",
        Metric::PerUserTps => "per-user tok/s",
        Metric::TtftP50 => "TTFT p50",
        Metric::TtftP90 => "TTFT p90",
        Metric::ItlP50 => "ITL p50",
        Metric::ItlP90 => "ITL p90",
        Metric::StepsPerS => "engine steps/s",
        Metric::JoulesPerToken => "energy per token",
        Metric::TtftP99 => "TTFT p99",
        Metric::ItlP99 => "ITL p99",
        Metric::TpotP50 => "TPOT p50",
        Metric::TpotP90 => "TPOT p90",
        Metric::PrefillTps => "prefill tok/s",
        Metric::BurstTps => "total tok/s",
        Metric::BurstTtftP90 => "TTFT p90",
    }
}

/// A metric's name where the layer must be said: `burst TTFT p90`, not the decode cells'
/// `TTFT p90`.
pub fn metric_label(metric: Metric) -> String {
    let layer = if metric.is_burst() { "burst " } else { "" };
    format!("{layer}{}", metric_name(metric))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `[−10.9, −8.4]`: an interval of a relative change, in percent.
pub fn interval(low: f64, high: f64) -> String {
    format!(
        "[{}, {}]",
        signed_number(100.0 * low, 1),
        signed_number(100.0 * high, 1)
    )
}

/// A metric's value with its unit, the one way every surface writes one: latencies in ms,
/// rates in tok/s (or steps/s), energy in J/token. Values are as stored (seconds for latencies).
pub fn with_unit(metric: Metric, value: f64) -> String {
    match figure(metric, value) {
        (number, "") => number,
        (number, unit) => format!("{number} {unit}"),
    }
}

/// [`with_unit`]'s number and unit apart (`("6.25", "ms")`; `("n/a", "")` for no value), so a
/// range can write its unit once: `6.25–9.76 ms`.
pub(crate) fn figure(metric: Metric, value: f64) -> (String, &'static str) {
    if !value.is_finite() {
        return ("n/a".into(), "");
    }
    match metric {
        Metric::TtftP50
        | Metric::TtftP90
        | Metric::TtftP99
        | Metric::ItlP50
        | Metric::ItlP90
        | Metric::ItlP99
        | Metric::TpotP50
        | Metric::TpotP90
        | Metric::BurstTtftP90 => {
            // Three significant figures: a 10% longer 1.5 ms ITL reads 1.50 → 1.65 ms, not
            // 1.5 → 1.6 ms beside "+10.0%".
            let ms = value * 1000.0;
            let number = if ms.abs() >= 100.0 {
                format!("{ms:.0}")
            } else if ms.abs() >= 10.0 {
                format!("{ms:.1}")
            } else {
                format!("{ms:.2}")
            };
            (number, "ms")
        }
        Metric::AggregateTps | Metric::PerUserTps | Metric::PrefillTps | Metric::BurstTps => {
            (format!("{value:.1}"), "tok/s")
        }
        Metric::StepsPerS => (format!("{value:.1}"), "steps/s"),
        Metric::JoulesPerToken => (format!("{value:.3}"), "J/token"),
    }
}

/// The lowest and highest of `values`.
pub fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// `6.25–9.76 ms`: the lowest and highest of `values` with the metric's unit once (one
/// figure where they are equal).
pub fn value_range(metric: Metric, values: impl Iterator<Item = f64>) -> String {
    let (lo, hi) = bounds(values);
    let ((lo, unit), (hi, _)) = (figure(metric, lo), figure(metric, hi));
    let range = if lo == hi { lo } else { format!("{lo}–{hi}") };
    if unit.is_empty() {
        range
    } else {
        format!("{range} {unit}")
    }
}

/// "higher" or "lower", the direction of the number people read, never "improvement" or
/// "regression": a latency that went down reads "lower", whatever the gate decided.
pub fn direction_word(change: f64) -> &'static str {
    if change >= 0.0 { "higher" } else { "lower" }
}

/// `C=8 / 32k`.
pub fn cell_label(concurrency: u32, context_tokens: u64) -> String {
    format!("C={concurrency} / {}", context_label(context_tokens))
}

/// A row or column of the matrix as reports name it: `row 32k`, `column C=4`.
pub(crate) fn line_label(axis: LineAxis, at: u64) -> String {
    match axis {
        LineAxis::Context => format!("row {}", context_label(at)),
        LineAxis::Concurrency => format!("column C={at}"),
    }
}

/// A cell's [`cell_label`].
pub fn label(c: &CellComparison) -> String {
    match c.layer() {
        Layer::Burst => "burst layer".to_string(),
        Layer::Prefill => context_label(c.context_tokens),
        Layer::Decode => cell_label(c.concurrency, c.context_tokens),
    }
}

/// How a cell's reason names the two sides of a comparison.
struct Sides {
    /// The base before a noun: `no successful baseline measurement`, `missing in baseline`.
    pub base: &'static str,
    /// The base as a noun: `capacity-limited in the baseline`.
    pub the_base: &'static str,
    /// The base's runs a cell's capacity is counted over: `history runs`.
    pub history_runs: &'static str,
    /// The base's runs of the level: `newest baseline runs`.
    pub level_runs: &'static str,
    /// The candidate: `missing in candidate run …`.
    pub candidate: &'static str,
    /// The candidate's boots: `capacity-limited on 2 of 2 boots`.
    pub boots: &'static str,
}

impl Against {
    /// The words for its sides: a paired A/B's base is its A boots, its candidate the B boots.
    fn sides(self) -> Sides {
        match self {
            Against::Baseline => Sides {
                base: "baseline",
                the_base: "the baseline",
                history_runs: "history runs",
                level_runs: "newest baseline runs",
                candidate: "candidate",
                boots: "boots",
            },
            Against::PairedAb => Sides {
                base: "A",
                the_base: "A",
                history_runs: "A boots",
                level_runs: "A boots",
                candidate: "B",
                boots: "B boots",
            },
        }
    }
}

/// Cells that were compared (a primary figure and a speed verdict).
fn counted(c: &CellComparison) -> bool {
    c.verdict != CellVerdict::NotComparable && c.primary().is_some()
}

/// `1 run`, `6 runs`: a count with its noun (a regular plural), never `run(s)`.
pub fn plural<N: std::fmt::Display + PartialEq + From<u8>>(n: N, word: &str) -> String {
    let s = if n == N::from(1) { "" } else { "s" };
    format!("{n} {word}{s}")
}

/// Run ids with their noun, each between `quote`s: `run a1`, `runs a1, a2`.
pub fn runs_named(ids: &[String], quote: &str) -> String {
    let noun = if ids.len() == 1 { "run" } else { "runs" };
    let sep = format!("{quote}, {quote}");
    format!("{noun} {quote}{}{quote}", ids.join(&sep))
}

/// `1 cell`, `6 cells`.
pub fn cells_word(n: usize) -> String {
    plural(n, "cell")
}

/// Up to three cells' labels: `C=2 / 8k, C=4 / 8k, …`.
fn named(cells: &[&CellComparison]) -> String {
    let more = if cells.len() > 3 { ", …" } else { "" };
    let first: Vec<String> = cells.iter().take(3).map(|c| label(c)).collect();
    format!("{}{more}", first.join(", "))
}

/// The sensitivity clause: "this run could detect −4.6% or worse".
fn could_detect(report: &ComparisonReport) -> Option<String> {
    let s = report.sensitivity.as_ref()?;
    let mde = s.matrix_mde.unwrap_or(s.mde);
    if !mde.is_finite() {
        return None;
    }
    if s.sufficient {
        Some(format!(
            "this run could detect {} or worse",
            signed_percent(mde)
        ))
    } else {
        let what = match s.unit {
            SensitivityUnit::BaselineRuns => "this baseline",
            SensitivityUnit::Pairs => "these pairs",
        };
        Some(format!(
            "but {what} could detect only {} or worse, not the rule's {} ({})",
            signed_percent(mde),
            signed_percent(-s.design_effect),
            s.needs()
        ))
    }
}

/// `aggregate tok/s −9.6% [−10.9, −8.4]`.
pub fn sized(metric: Metric, change: f64, low: f64, high: f64) -> String {
    format!(
        "{} {} {}",
        metric_name(metric),
        signed_percent(change),
        interval(low, high)
    )
}

/// The cell's total change on the metric it was decided on, and how good that is (the
/// metric's direction taken into account): `−7.0% at C=1 / 0`, `TTFT p50 +15.0% at C=2 / 0`.
fn change_at(c: &CellComparison) -> Option<(f64, String)> {
    let m = c.deciding()?;
    let other = if m.metric == Metric::AggregateTps {
        String::new()
    } else {
        format!("{} ", metric_name(m.metric))
    };
    let change = signed_percent(m.shown_change_total().change);
    Some((m.goodness(), format!("{other}{change} at {}", label(c))))
}

/// `; 2 cells faster, best +12.0% at C=8 / 32k`: an A/B run asking "does flag X help?" needs
/// the improvement as much as a gate needs the regression.
fn faster(report: &ComparisonReport) -> String {
    let better: Vec<&CellComparison> = report
        .cells
        .iter()
        .filter(|c| c.verdict == CellVerdict::Improvement)
        .collect();
    let best = better
        .iter()
        .filter_map(|c| change_at(c))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match (better.len(), best) {
        (0, _) => String::new(),
        (1, Some((_, at))) => format!("; 1 cell faster: {at}"),
        (n, Some((_, at))) => format!("; {} faster, best {at}", cells_word(n)),
        (n, None) => format!("; {} faster", cells_word(n)),
    }
}

/// `; 1 saturated; 1 not compared`: the cells a pass or an insufficient gate did not count,
/// so the line accounts for every cell of the grid.
fn not_counted(report: &ComparisonReport) -> String {
    let mut words: Vec<(&str, usize)> = Vec::new();
    for c in report
        .cells
        .iter()
        .filter(|c| !counted(c) && !c.history_too_short)
    {
        let word = cell_word(c.verdict);
        match words.iter_mut().find(|(w, _)| *w == word) {
            Some((_, n)) => *n += 1,
            None => words.push((word, 1)),
        }
    }
    words
        .iter()
        .map(|(w, n)| format!("; {n} {w}"))
        .collect::<String>()
}

/// How a second boot entered the verdict: `, confirmed on a second boot` or `, after a second
/// boot` (nothing when it was not used).
fn confirmed(report: &ComparisonReport) -> &'static str {
    match (report.confirmation.as_ref().map(|c| c.used), report.gate) {
        (Some(true), GateVerdict::Regression) => ", confirmed on a second boot",
        (Some(true), _) => ", after a second boot",
        _ => "",
    }
}

/// `; first boot only (…)`: a replay was given a second boot that `run` would not have booted,
/// so the verdict is the first boot's alone.
fn unused_second_boot(report: &ComparisonReport) -> String {
    report
        .confirmation
        .as_ref()
        .filter(|c| !c.used && !c.missing)
        .map_or_else(String::new, |c| {
            format!(
                "; first boot only (the second boot's results were not used: {})",
                c.reason
            )
        })
}

impl ComparisonReport {
    /// Sets `headline` to [`first_line`]: what every writer of a report does last, before it
    /// writes `verdict.json` or quotes the headline (the model leaves it empty).
    pub fn set_headline(&mut self) {
        self.headline = first_line(self);
    }
}

/// The answer in one line, with its size and interval: what every report leads with and what
/// `verdict.json` stores as `headline`. An A/B run's names its sides (`no regression of B vs
/// A`, `B vs A: aggregate tok/s −9.2%`): its level is A's boots, never a stored baseline.
pub fn first_line(report: &ComparisonReport) -> String {
    let (symbol, word) = gate_word(report.gate);
    let (of, symbol) = match report.against {
        Against::Baseline => ("", symbol.to_string()),
        Against::PairedAb if report.gate == GateVerdict::Regression => {
            ("", format!("{symbol} B vs A:"))
        }
        Against::PairedAb => (" of B vs A", symbol.to_string()),
    };
    let lead = Lead {
        symbol,
        word,
        of,
        n: report.cells.iter().filter(|c| counted(c)).count(),
        confirm: confirmed(report),
    };
    let line = match report.gate {
        GateVerdict::NoBaseline => no_baseline_line(report, &lead),
        GateVerdict::Unmeasured => unmeasured_line(report, &lead),
        GateVerdict::Regression => regression_line(report, &lead),
        GateVerdict::Pass | GateVerdict::Insufficient => no_regression_line(report, &lead),
    };
    format!("{line}{}", unused_second_boot(report))
}

/// What every form of the first line starts from: the gate's symbol (with `B vs A:` in a
/// regressed A/B run) and word, ` of B vs A` where an A/B run's line needs it, the counted
/// cells, and the confirmation clause.
struct Lead {
    symbol: String,
    word: &'static str,
    of: &'static str,
    n: usize,
    confirm: &'static str,
}

/// The first line of a gate with nothing to compare with.
fn no_baseline_line(report: &ComparisonReport, lead: &Lead) -> String {
    let symbol = &lead.symbol;
    // Why there is nothing to compare with, when every cell says the same specific
    // thing (e.g. the baseline files are of another profile): a plain "no baseline"
    // adds nothing to this line.
    let why = report
        .cells
        .first()
        .and_then(|c| c.reason.as_ref())
        .filter(|r| **r != CellReason::NoBaseline)
        .filter(|r| report.cells.iter().all(|c| c.reason.as_ref() == Some(*r)));
    format!(
        "{symbol} no baseline yet for this profile and suite: {} measured, nothing compared{}",
        cells_word(report.cells.len()),
        why.map(|r| format!(" ({r})")).unwrap_or_default()
    )
}

/// The first line of a gate that could not measure enough to decide.
fn unmeasured_line(report: &ComparisonReport, lead: &Lead) -> String {
    let (symbol, word) = (&lead.symbol, lead.word);
    let errors: Vec<&CellComparison> = report
        .cells
        .iter()
        .filter(|c| c.verdict == CellVerdict::ErrorRegression)
        .collect();
    // Where, not why: the engine's error text is under Details, said once.
    let errors = match errors.len() {
        0 => String::new(),
        n => format!("; {} ({})", plural(n, "error regression"), named(&errors)),
    };
    format!("{symbol} {word}: {}{errors}", report.unmeasured_reason())
}

/// The first line of a regression: the matrix-wide change where it regressed, else the worst
/// cell's (or layer's) change, with how many regressed.
fn regression_line(report: &ComparisonReport, lead: &Lead) -> String {
    let (symbol, word, n, confirm) = (&lead.symbol, lead.word, lead.n, lead.confirm);
    let matrix = report.matrix_test.as_ref();
    let regressed: Vec<&CellComparison> = report.regressions().collect();
    let k = regressed.len();
    // The worst speed regression by its total change vs the baseline.
    let worst = regressed
        .iter()
        .filter(|c| c.verdict == CellVerdict::Regression)
        .filter_map(|c| c.deciding().map(|m| (m.goodness(), m, *c)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let line = if let Some(m) = matrix.filter(|m| m.verdict == CellVerdict::Regression) {
        let where_ = matrix_where(report, m.cells, &regressed, worst.map(|(_, _, c)| c), n);
        // The second boot confirms the gate: said after the lead, so it does not read
        // as if only the last layer named was confirmed.
        format!(
            "{symbol} {} {where_}{confirm}{}",
            sized(Metric::AggregateTps, m.change, m.ci_low, m.ci_high),
            layers_also(report, &regressed)
        )
    } else {
        // The worst speed regression, else the first of another kind; the prefill
        // layer's contexts are counted apart from the decode cells.
        let in_prefill = in_layer(&regressed, Layer::Prefill);
        let in_burst = in_layer(&regressed, Layer::Burst);
        let in_cells = k - in_prefill - in_burst;
        let mut parts = Vec::new();
        if in_cells > 0 || in_prefill + in_burst == 0 {
            let line = whole_line(report, &regressed)
                .map_or_else(String::new, |line| format!(" ({line})"));
            parts.push(format!(
                "{in_cells} of {} regressed{line}",
                cells_word(report.cells.len())
            ));
        }
        if in_prefill > 0 {
            parts.push(prefill_regressions(report, in_prefill));
        }
        let burst_leads = worst.is_some_and(|(_, m, _)| m.metric.is_burst());
        if in_burst > 0 && !burst_leads {
            parts.push(burst_regressions(&regressed));
        }
        let of_n = parts.join("; ");
        // `TTFT p90 +31.0% [...]`: the worst regression's size and interval.
        let size = |m: &MetricComparison| {
            let d = m.shown_change_total();
            sized(m.metric, d.change, d.ci_low, d.ci_high)
        };
        match (worst, regressed.first()) {
            (Some((_, m, _)), _) if m.metric.is_burst() => {
                // "✗ TTFT p90 +31.0% [...] in the burst layer": the layer named.
                let rest = if of_n.is_empty() {
                    String::new()
                } else {
                    format!("; {of_n}")
                };
                format!("{symbol} {} in the burst layer{confirm}{rest}", size(m))
            }
            (Some((_, m, c)), _) => {
                format!("{symbol} {} at {}{confirm}; {of_n}", size(m), label(c))
            }
            (None, Some(c)) => format!(
                "{symbol} {} at {}{confirm}; {of_n}",
                cell_word(c.verdict),
                label(c)
            ),
            (None, None) => format!("{symbol} {word}{confirm}"),
        }
    };
    format!("{line}{}", faster(report))
}

/// Where a matrix-wide regression over `cells` lies, after its size: `in all 6 cells`, or
/// `over 6 cells, 3 of them regressed (the 8k row; worst −9.2% at C=2 / 8k)`.
fn matrix_where(
    report: &ComparisonReport,
    cells: usize,
    regressed: &[&CellComparison],
    worst: Option<&CellComparison>,
    n: usize,
) -> String {
    let k = in_layer(regressed, Layer::Decode);
    if k == n && n == 1 {
        "in its 1 cell".to_string()
    } else if k == n && n == 2 {
        "in both cells".to_string()
    } else if k == n && n > 0 {
        format!("in all {}", cells_word(n))
    } else if k > 0 {
        let notes: Vec<String> = whole_line(report, regressed)
            .into_iter()
            .chain(
                worst
                    .and_then(change_at)
                    .map(|(_, at)| format!("worst {at}")),
            )
            .collect();
        let notes = if notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", notes.join("; "))
        };
        format!("over {}, {k} of them regressed{notes}", cells_word(cells))
    } else {
        format!("over {} (matrix-wide)", cells_word(cells))
    }
}

/// `the 8k row` or `the C=4 column` where the regressed decode cells are exactly the cells of
/// one context row (or concurrency column) of several: what a kernel developer reads first (an
/// attention path only long prompts take slows one row, a batch-size path one column).
fn whole_line(report: &ComparisonReport, regressed: &[&CellComparison]) -> Option<String> {
    let decode = |c: &&CellComparison| c.layer() == Layer::Decode;
    let slow: Vec<&CellComparison> = regressed.iter().copied().filter(decode).collect();
    let all: Vec<&CellComparison> = report.cells.iter().filter(decode).collect();
    let first = slow.first()?;
    let is_whole = |same: &dyn Fn(&CellComparison) -> bool| {
        slow.len() > 1
            && slow.len() < all.len()
            && slow.iter().all(|c| same(c))
            && all.iter().filter(|c| same(c)).count() == slow.len()
    };
    if is_whole(&|c| c.context_tokens == first.context_tokens) {
        Some(format!("the {} row", context_label(first.context_tokens)))
    } else if is_whole(&|c| c.concurrency == first.concurrency) {
        Some(format!("the C={} column", first.concurrency))
    } else {
        None
    }
}

/// The first line of a `pass` or an `insufficient` gate: what it waits on first, then what it
/// covered, how sensitive it was, and at what size each cell is covered.
fn no_regression_line(report: &ComparisonReport, lead: &Lead) -> String {
    let (symbol, word, of, n, confirm) = (&lead.symbol, lead.word, lead.of, lead.n, lead.confirm);
    let matrix = report.matrix_test.as_ref();
    // Cells whose alarm one boot cannot prove: what an `insufficient` gate waits on, so
    // the line says it first (else it would read "insufficient … could detect −2.3%").
    let with = |flag: fn(&CellComparison) -> bool| -> Vec<&CellComparison> {
        report.cells.iter().filter(|c| flag(c)).collect()
    };
    // A replay of a run's files without the second boot the plan asked for.
    let missing = report
        .confirmation
        .as_ref()
        .filter(|c| c.missing)
        .map_or_else(String::new, |c| {
            format!(
                "the second boot this plan asks for was not given ({}); ",
                c.reason
            )
        });
    let provisional = with(|c| c.provisional);
    let mut waits = match provisional.len() {
        0 => String::new(),
        n => format!(
            "a second boot decides {} ({}); ",
            plural(n, "provisional alarm"),
            named(&provisional)
        ),
    };
    waits.insert_str(0, &missing);
    // Cells at their limit now that the history is too short to judge: the gate waits
    // for runs (or pairs), and says so before anything that reads like a pass.
    let short = with(|c| c.history_too_short);
    if !short.is_empty() {
        let runs = match report.against {
            Against::Baseline => "baseline runs",
            Against::PairedAb => "pairs",
        };
        waits.push_str(&format!(
            "too few {runs} to judge {} now at {} limit ({}); ",
            cells_word(short.len()),
            if short.len() == 1 { "its" } else { "their" },
            named(&short)
        ));
    }
    waits.push_str(&host_late_clause(report));
    // Cells whose bound leaves room for a slowdown beyond the rule's `cell_effect`:
    // what a `pass` could not vouch for, named with how far down each could be.
    let uncovered = report.uncovered_cells();
    let cell_effect = report.rule.cell_effect.map(|e| signed_percent(-e));
    if let (false, Some(effect)) = (uncovered.is_empty(), &cell_effect) {
        // What narrows the bound: the history where it is the limit, else the boots; an A/B
        // run's pairs are both.
        let two_boots = report.confirmation.as_ref().is_some_and(|c| c.used);
        let sensitive = report.sensitivity.as_ref().is_some_and(|s| s.sufficient);
        let narrows = match (report.against, sensitive, two_boots) {
            (Against::PairedAb, ..) => "more pairs of boots narrow",
            (Against::Baseline, false, _) => "more baseline runs narrow",
            (Against::Baseline, true, true) => "longer windows or more baseline runs narrow",
            (Against::Baseline, true, false) => "a second boot narrows",
        };
        waits.push_str(&format!(
            "{} could be {effect} or worse ({}; {narrows} it); ",
            cells_word(uncovered.len()),
            uncovered
                .iter()
                .map(|(c, low)| format!("{} down to {}", label(c), signed_percent(*low)))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    waits.push_str(&uncovered_metrics_clause(report));
    let mut line = if report.gate == GateVerdict::Pass {
        format!("{symbol} no regression{of} in {}", cells_word(n))
    } else {
        format!(
            "{symbol} {word}: {waits}no regression{of} proven in {}",
            cells_word(n)
        )
    };
    let covered: Vec<String> = matrix
        .map(|m| sized(Metric::AggregateTps, m.change, m.ci_low, m.ci_high))
        .into_iter()
        .chain(metrics_checked(report, n))
        .collect();
    if !covered.is_empty() {
        line.push_str(&format!(" ({})", covered.join("; ")));
    }
    line.push_str(&layers_checked(report));
    line.push_str(confirm);
    if let Some(s) = could_detect(report) {
        line.push_str(if s.starts_with("but") { ", " } else { "; " });
        line.push_str(&s);
    }
    if let (GateVerdict::Pass, Some(effect)) = (report.gate, cell_effect) {
        // And each gated latency short of the change that fails it, where it gated.
        let latencies: String = vouched_latencies(report)
            .iter()
            .map(|l| format!(", {l}"))
            .collect();
        line.push_str(&format!(
            "; each cell above {effect}{latencies} (95% bound)"
        ));
    }
    format!(
        "{line}{}{}{}",
        not_gated_clause(report),
        not_counted(report),
        faster(report)
    )
}

/// The gating tail latencies the host's own lateness left unvouched
/// ([`ComparisonReport::host_late`]), said before anything that reads like a pass: `ITL p99
/// not vouched for in 6 cells: the host ran the gate's probe 3.50–3.80 ms late at p99 (ITL p99
/// 8.50–13.9 ms); a quieter runner decides it; ` (empty where none): a fifth of the tail or
/// more for a p99 at +50% (`DecisionRule::host_late_share`).
fn host_late_clause(report: &ComparisonReport) -> String {
    let mut out = String::new();
    for &metric in &report.cell_metrics_gated {
        let cells = report.host_late_of(metric);
        if cells.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "{name} not vouched for in {}: {} ({name} {}); a quieter runner decides it; ",
            cells_word(cells.len()),
            probe_late(metric, &cells),
            value_range(metric, cells.iter().map(|h| h.value_s)),
            name = metric_name(metric),
        ));
    }
    out
}

/// Each gated metric besides aggregate tok/s that a `pass` vouches short of the change that
/// fails it, where it gated in a cell ([`ComparisonReport::uncovered_metrics`]): `ITL p99
/// under +50.0%`, the first line's and the rule's one wording.
pub fn vouched_latencies(report: &ComparisonReport) -> Vec<String> {
    report
        .gated_cell_metrics()
        .into_iter()
        .filter_map(|(metric, cells)| {
            let (_, m) = cells.first()?;
            let under = if m.fails_beyond() > 0.0 {
                "under"
            } else {
                "above"
            };
            Some(format!(
                "{} {under} {}",
                metric_name(metric),
                signed_percent(m.fails_beyond())
            ))
        })
        .collect()
}

/// The gated metrics whose bound in some cells reaches what a pass vouches
/// ([`ComparisonReport::uncovered_metrics`]), said before anything that reads like a pass:
/// `ITL p99 could be +50.0% or worse in 2 cells (C=8 / 0 up to +97.4%, C=4 / 0 up to +83.1%;
/// baseline runs on a quieter runner or longer windows narrow it); `, `prefill tok/s could be
/// −20.0% or worse (32k down to −24.3%; …); ` (empty where none).
fn uncovered_metrics_clause(report: &ComparisonReport) -> String {
    let mut out = String::new();
    for (metric, cells) in report.uncovered_metrics() {
        let fails = cells[0].0.vouched_to(cells[0].1);
        let to = if fails > 0.0 { "up to" } else { "down to" };
        // The farthest three first: a matrix of 20 cells would not fit a first line.
        let mut farthest = cells.clone();
        farthest
            .sort_by(|a, b| (b.1.worse_bound() * fails).total_cmp(&(a.1.worse_bound() * fails)));
        let each: Vec<String> = farthest
            .iter()
            .take(3)
            .map(|(c, m)| format!("{} {to} {}", label(c), signed_percent(m.worse_bound())))
            .collect();
        // A layer's figure is one per context (prefill) or one (the burst): no cells counted.
        let runs = match report.against {
            Against::Baseline => "baseline runs",
            Against::PairedAb => "pairs of boots",
        };
        let (place, narrows) = match cells[0].0.layer() {
            Layer::Decode => (
                format!(" in {}", cells_word(cells.len())),
                format!("{runs} on a quieter runner or longer windows"),
            ),
            Layer::Prefill | Layer::Burst => (
                String::new(),
                format!("{runs} on a quieter runner or more of them"),
            ),
        };
        out.push_str(&format!(
            "{} could be {} or worse{place} ({}{}; {narrows} narrow it); ",
            metric_name(metric),
            signed_percent(fails),
            each.join(", "),
            if cells.len() > 3 { ", …" } else { "" },
        ));
    }
    out
}

/// How late the host ran the gate's probe in `cells`: `the host ran the gate's probe
/// 3.50–3.80 ms late at p99`, the first line's and the latency row's one wording.
pub fn probe_late(metric: Metric, cells: &[&HostLateCell]) -> String {
    format!(
        "the host ran the gate's probe {} late at p99",
        value_range(metric, cells.iter().map(|h| h.lateness_p99_s))
    )
}

/// The metrics besides aggregate tok/s that a `pass` (or an `insufficient` gate's "no
/// regression proven") also covers in the `n` cells it names, each with the cells it gated in:
/// `ITL p99 in all 6`, `TTFT p90 in 4 of 6` (none where it gated in no cell: the Details say
/// why).
fn metrics_checked(report: &ComparisonReport, n: usize) -> Vec<String> {
    report
        .gated_cell_metrics()
        .into_iter()
        .filter(|(_, cells)| !cells.is_empty())
        .map(|(metric, cells)| {
            let k = cells.len();
            match (k == n, n) {
                (true, 1) => format!("{} too", metric_name(metric)),
                (true, 2) => format!("{} in both", metric_name(metric)),
                (true, _) => format!("{} in all {n}", metric_name(metric)),
                (false, _) => format!("{} in {k} of {n}", metric_name(metric)),
            }
        })
        .collect()
}

/// Beside a matrix-wide decode regression, the layers that regressed too, so the first line
/// does not hide them: `; prefill layer: 1 of 1 context regressed; burst layer: TTFT p90
/// +12.0%`; empty where none did.
fn layers_also(report: &ComparisonReport, regressed: &[&CellComparison]) -> String {
    let mut out = String::new();
    let in_prefill = in_layer(regressed, Layer::Prefill);
    if in_prefill > 0 {
        out.push_str(&format!("; {}", prefill_regressions(report, in_prefill)));
    }
    if in_layer(regressed, Layer::Burst) > 0 {
        out.push_str(&format!("; {}", burst_regressions(regressed)));
    }
    out
}

/// How many of `regressed` are entries of `layer`.
fn in_layer(regressed: &[&CellComparison], layer: Layer) -> usize {
    regressed.iter().filter(|c| c.layer() == layer).count()
}

/// `prefill layer: 1 of 2 contexts regressed`.
fn prefill_regressions(report: &ComparisonReport, regressed: usize) -> String {
    format!(
        "prefill layer: {regressed} of {} regressed",
        plural(report.prefill.len(), "context")
    )
}

/// The burst layer's regressed metrics with their changes: `burst layer: TTFT p90 +488.0%,
/// total tok/s −56.3%`.
fn burst_regressions(regressed: &[&CellComparison]) -> String {
    let burst: Vec<String> = regressed
        .iter()
        .filter(|c| c.layer() == Layer::Burst)
        .flat_map(|c| &c.metrics)
        .filter(|m| m.verdict.is_regression())
        .map(|m| {
            format!(
                "{} {}",
                metric_name(m.metric),
                signed_percent(m.shown_change_total().change)
            )
        })
        .collect();
    format!("burst layer: {}", burst.join(", "))
}

/// The layers a `pass` (or an `insufficient` gate's "no regression proven") also covers,
/// said in the first line so a green check names what it vouches for: ", 1 prefill context
/// and the burst" (empty when no layer gated or was compared).
fn layers_checked(report: &ComparisonReport) -> String {
    // Only the layer cells compared: one whose figure was refused vouches for nothing.
    let compared = |cells: &[CellComparison]| {
        cells
            .iter()
            .filter(|c| c.verdict != CellVerdict::NotComparable)
            .count()
    };
    let mut layers = Vec::new();
    let contexts = compared(&report.prefill);
    if report.prefill_gated && contexts > 0 {
        layers.push(plural(contexts, "prefill context"));
    }
    if report.burst_gated && compared(&report.burst) > 0 {
        layers.push("the burst".to_string());
    }
    if layers.is_empty() {
        String::new()
    } else {
        format!(", {}", and_list(&layers))
    }
}

/// Why a gating metric did not gate, as the first line groups it.
#[derive(PartialEq)]
enum Ungated {
    /// Runs of the history (with the layer), of those it gates from.
    Runs(usize, usize),
    /// Runs since its accepted change, of those it gates from.
    Since(usize, usize),
    /// Too few observations in every cell.
    Thin,
    /// Measured on neither side.
    NotMeasured,
    /// Completed requests, of those a p90 needs.
    Requests(u64, u64),
    /// A recorded verdict's words, which the Details quote.
    Recorded,
}

/// What the rule gates that this gate did not (a young store, a metric restarted alone, too
/// few observations), on the first line of a pass or an insufficient gate so that a green
/// check never reads as vouching for it: `; not gated: ITL p99, prefill tok/s and the burst
/// layer (7 runs, they gate from 10)`. A latency gated in some cells is not repeated: the line
/// already says `ITL p99 in 4 of 6`. Empty where everything the rule lists gated.
fn not_gated_clause(report: &ComparisonReport) -> String {
    let gated = report.gated_cell_metrics();
    let gates_somewhere = |m: Metric| gated.iter().any(|(g, cells)| *g == m && !cells.is_empty());
    let mut groups: Vec<(Ungated, Vec<String>)> = Vec::new();
    for n in &report.not_gated {
        let (why, what) = match n {
            NotGated::ShortHistory {
                metric,
                runs,
                needs,
            } => (Ungated::Runs(*runs, *needs), metric_label(*metric)),
            NotGated::PrefillShortHistory { runs, needs } => {
                (Ungated::Runs(*runs, *needs), "prefill tok/s".to_string())
            }
            NotGated::BurstShortHistory { runs, needs } => {
                (Ungated::Runs(*runs, *needs), "the burst layer".to_string())
            }
            NotGated::RestartedShort {
                metric,
                runs,
                needs,
            } => (Ungated::Since(*runs, *needs), metric_label(*metric)),
            NotGated::ThinCells { metric, .. } if !gates_somewhere(*metric) => {
                (Ungated::Thin, metric_label(*metric))
            }
            NotGated::ThinCells { .. } => continue,
            NotGated::BurstThin { completed, needs } => (
                Ungated::Requests(*completed, *needs),
                metric_label(Metric::BurstTtftP90),
            ),
            NotGated::PrefillNotMeasured => (Ungated::NotMeasured, "prefill tok/s".to_string()),
            NotGated::BurstNotMeasured => (Ungated::NotMeasured, "the burst layer".to_string()),
            NotGated::Recorded(_) => (Ungated::Recorded, String::new()),
        };
        match groups.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(what),
            None => groups.push((why, vec![what])),
        }
    }
    let said: Vec<String> = groups
        .iter()
        .map(|(why, names)| {
            let one = names.len() == 1;
            let (it, gates) = if one {
                ("its", "it gates")
            } else {
                ("their", "they gate")
            };
            let why = match why {
                Ungated::Runs(runs, needs) => {
                    format!("{}, {gates} from {needs}", plural(*runs, "run"))
                }
                Ungated::Since(runs, needs) => format!(
                    "{} since {it} accepted change, {gates} from {needs}",
                    plural(*runs, "run")
                ),
                Ungated::Thin => "too few observations in every cell".to_string(),
                Ungated::NotMeasured => "not measured".to_string(),
                Ungated::Requests(done, needs) => {
                    format!("{done} completed requests, a p90 needs {needs}")
                }
                Ungated::Recorded => return "as the Details say".to_string(),
            };
            format!("{} ({why})", and_list(names))
        })
        .collect();
    if said.is_empty() {
        String::new()
    } else {
        format!("; not gated: {}", said.join(", "))
    }
}

impl ComparisonReport {
    /// The tests that decided the gate, one line each, so a reviewer can redo them by hand:
    /// the matrix-wide test, then every row, column and cell test that found a regression
    /// (a cell's only where its verdict is that regression, or a provisional one) or whose
    /// regression the second boot's own screen overruled.
    pub fn check_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = self.matrix_test.as_ref().and_then(|m| m.check.as_ref()) {
            out.push(c.line("matrix"));
        }
        // Regressions, improvements (checkable the same way, though they never fail a gate)
        // and the second boot's screens that overruled either.
        for l in &self.lines {
            let improved = l.test.verdict == CellVerdict::Improvement;
            if let Some(c) = l
                .test
                .check
                .as_ref()
                .filter(|c| c.rejected || c.screen || improved)
            {
                out.push(c.line(&line_label(l.axis, l.at)));
            }
        }
        for cell in &self.cells {
            for m in &cell.metrics {
                let decided = m.verdict == CellVerdict::Regression || cell.provisional;
                // Its own test found the improvement (not its row or the matrix; a metric that
                // does not gate says `lower`/`higher` instead).
                let improved = m.verdict == CellVerdict::Improvement;
                let own_improvement = |c: &Check| c.outcome == CheckOutcome::Improvement;
                if let Some(c) = m
                    .check
                    .as_ref()
                    .filter(|c| c.rejected && decided || c.screen || improved && own_improvement(c))
                {
                    let what = format!("cell {} {}", label(cell), metric_name(m.metric));
                    out.push(c.line(&what));
                }
            }
        }
        out
    }
}

impl Check {
    /// `matrix: t = −4.21 ≤ −2.98 (t(13.9), one-sided α = 5.00e-3, both boots) → regression`.
    pub fn line(&self, what: &str) -> String {
        let op = match (self.boundary < 0.0, self.beyond()) {
            (true, true) => "≤",
            (true, false) => ">",
            (false, true) => "≥",
            (false, false) => "<",
        };
        let level = if self.screen {
            format!("one-sided level {:.2e}, no α spent", self.alpha)
        } else {
            format!("one-sided α = {:.2e}", self.alpha)
        };
        format!(
            "{what}: t = {} {op} {} ({}, {level}, {}) → {}",
            signed_number(self.statistic, 2),
            signed_number(self.boundary, 2),
            self.reference,
            self.look,
            self.outcome
        )
    }
}

impl LoneBoot {
    /// `first boot alone`, `second boot alone`: its look's name and its words in an outcome.
    pub fn as_str(self) -> &'static str {
        match self {
            LoneBoot::First => "first boot alone",
            LoneBoot::Second => "second boot alone",
        }
    }
}

impl Found {
    /// `regression`, `improvement`: as its cell verdict reads.
    pub fn as_str(self) -> &'static str {
        CellVerdict::from(self).as_str()
    }
}

/// The one writer of a test's outcome in words: its check line's end and `verdict.json`'s
/// `outcome`.
impl std::fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use CheckOutcome as O;
        // The way a found change leans, and what its cells would have to be.
        let lean = |found: &Found| match found {
            Found::Regression => ("worse", "slower"),
            Found::Improvement => ("better", "faster"),
        };
        // What a cell's own test compared it with.
        let run = |against: &Against| match against {
            Against::Baseline => "the rest of its run",
            Against::PairedAb => "the other cells of its pairs",
        };
        match self {
            O::Regression => f.write_str("regression"),
            O::Improvement => f.write_str("improvement"),
            O::WithinMargin => f.write_str("within the margin"),
            O::NoRegression => f.write_str("no regression"),
            O::RegressionOnEachBoot => f.write_str("regression on each boot"),
            O::ImprovementOnEachBoot => f.write_str("improvement on each boot"),
            O::NoRegressionOnEachBoot => f.write_str("no regression on each boot"),
            O::LeansWorse => f.write_str("leans worse: boot again"),
            O::DoesNotLeanWorse => f.write_str("does not lean worse: the matrix test stops"),
            O::ProvisionalRegression => {
                f.write_str("provisional regression: a second boot decides")
            }
            O::BootDoesNotLean { found, boot } => write!(
                f,
                "no {}: the {} does not lean {}",
                found.as_str(),
                boot.as_str(),
                lean(found).0
            ),
            O::BootDoesNotShow { found, boot, own } => write!(
                f,
                "no {}: the {} does not show it ({own})",
                found.as_str(),
                boot.as_str()
            ),
            O::BootWithinDesignEffect {
                found,
                boot,
                reads,
                design_effect,
            } => write!(
                f,
                "no {}: the {} reads {}, within the design effect ({})",
                found.as_str(),
                boot.as_str(),
                signed_percent(*reads),
                signed_percent(*design_effect)
            ),
            O::OnlyAgainstItsRun { found, total } => {
                let (side, way) = lean(found);
                write!(
                    f,
                    "{side} than the rest of its run, not {way} than its baseline (its cells {} \
                     in total): no change",
                    signed_percent(*total)
                )
            }
            O::OverruledByTotal {
                found,
                against,
                total,
                verdict,
            } => write!(
                f,
                "{} against {}, but its total change is {}: {}",
                found.as_str(),
                run(against),
                signed_percent(*total),
                verdict.as_str()
            ),
            O::DecidedByBroader {
                own,
                against,
                verdict,
                decided,
            } => write!(
                f,
                "{own} against {}; {} {}",
                run(against),
                verdict.as_str(),
                decided.label()
            ),
            O::ReportedOnly { higher } => write!(
                f,
                "{}, reported only (this metric does not gate)",
                if *higher { "higher" } else { "lower" }
            ),
            O::OnOneBoot(own) => write!(f, "{own} on one boot: not confirmed"),
            O::MatrixWide { matrix, own } => write!(f, "{matrix} ({own})"),
            O::Recorded(words) => f.write_str(words),
        }
    }
}

/// A fraction as an unsigned percent: `10.0%`, `0.1%`.
fn percent(x: f64) -> String {
    signed_percent(x).trim_start_matches('+').to_string()
}

impl Limit {
    /// `capacity-limited`, `saturated`: the state in a cell's reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Capacity => "capacity-limited",
            Limit::Saturation => "saturated",
        }
    }
}

impl std::fmt::Display for NotGated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotGated::ShortHistory {
                metric,
                runs,
                needs,
            } => write!(
                f,
                "{} is reported, not gated: the history has {}, a latency percentile gates from {needs}",
                metric_name(*metric),
                plural(*runs, "run")
            ),
            NotGated::ThinCells {
                metric,
                cells,
                of,
                fewest,
                most,
                quantile,
                needs,
            } => {
                let counts = if fewest == most {
                    fewest.to_string()
                } else {
                    format!("{fewest}–{most}")
                };
                write!(
                    f,
                    "{} not gated in {} of {of}: {counts} observations each, a p{:.0} needs {needs}",
                    metric_name(*metric),
                    plural(*cells, "cell"),
                    quantile * 100.0
                )
            }
            NotGated::PrefillShortHistory { runs, needs } => write!(
                f,
                "prefill tok/s is reported, not gated: {runs} of the history's runs have the prefill layer, it gates from {needs}"
            ),
            NotGated::RestartedShort {
                metric,
                runs,
                needs,
            } => write!(
                f,
                "{} is reported, not gated: {} since its accepted change, it gates from {needs}",
                metric_label(*metric),
                plural(*runs, "run")
            ),
            NotGated::BurstShortHistory { runs, needs } => write!(
                f,
                "the burst layer is reported, not gated: {runs} of the history's runs have it, it gates from {needs}"
            ),
            NotGated::BurstThin { completed, needs } => write!(
                f,
                "burst TTFT p90 not gated: {completed} completed requests, a p90 needs {needs}"
            ),
            NotGated::PrefillNotMeasured => f.write_str(
                "prefill tok/s is not gated: neither this run nor its history measured the prefill layer",
            ),
            NotGated::BurstNotMeasured => f.write_str(
                "the burst layer is not gated: neither this run nor its history sent a burst",
            ),
            NotGated::Recorded(words) => f.write_str(words),
        }
    }
}

/// The one writer of a cell's reason in words: its line under Details and `verdict.json`'s
/// `reason`.
impl std::fmt::Display for CellReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use CellReason as R;
        match self {
            R::NoBaseline => f.write_str("no baseline"),
            R::MissingInBase(a) => write!(f, "missing in {}", a.sides().base),
            R::MissingInRun { against, run } => {
                write!(f, "missing in {} run {run}", against.sides().candidate)
            }
            R::ErrorNow {
                why,
                measured,
                runs,
                against,
            } => write!(
                f,
                "error now: {why}; measured in {measured} of the {runs} {}",
                against.sides().level_runs
            ),
            R::Error { why, against } => {
                write!(f, "error in {}: {why}", against.sides().candidate)
            }
            R::Skipped { why, against } => {
                write!(f, "skipped in {}: {why}", against.sides().candidate)
            }
            R::LimitWithoutBase { limit, against } => write!(
                f,
                "{} now; no successful {} measurement",
                limit.as_str(),
                against.sides().base
            ),
            R::OutOfLimit { limit, against } => {
                let now = match limit {
                    Limit::Capacity => "fits now",
                    Limit::Saturation => "holds its streams now",
                };
                write!(
                    f,
                    "{now}; {} in {}",
                    limit.as_str(),
                    against.sides().the_base
                )
            }
            R::NoBaseMeasurement(a) => write!(
                f,
                "no successful {} measurement (error or skipped)",
                a.sides().base
            ),
            R::Limit(r) => r.fmt(f),
            R::NothingCompared { layer, against } => f.write_str(match (layer, against) {
                (Layer::Decode, Against::Baseline) => "no gating metric measured on both sides",
                (Layer::Decode, Against::PairedAb) => "no gating metric measured in two pairs",
                (Layer::Prefill, _) => "no prefill figure on both sides",
                (Layer::Burst, _) => "no burst figure on both sides",
            }),
            R::TooFewPairs { pairs, why } => write!(
                f,
                "measured on both sides in {}, 2 needed ({})",
                plural(*pairs, "pair"),
                why.as_deref().unwrap_or("not measured")
            ),
            R::PrefillDisagrees {
                context,
                run,
                detail,
            } => {
                write!(
                    f,
                    "{PREFILL_DISAGREES}{} in run {run}",
                    context_label(*context)
                )?;
                detail.iter().try_for_each(|d| write!(f, " ({d})"))
            }
            R::BurstIncomplete {
                run,
                completed,
                sent,
                incomplete,
                errors,
                first_problem,
            } => {
                write!(
                    f,
                    "{BURST_INCOMPLETE}{completed} of {sent} requests completed in run {run} \
                     ({incomplete} ended early, {errors} failed"
                )?;
                first_problem.iter().try_for_each(|p| write!(f, "; {p}"))?;
                f.write_str(")")
            }
            R::WithLine {
                axis,
                at,
                metric,
                line,
                cell,
            } => write!(
                f,
                "with its {}: {} {} [{}, {}] against the other cells of its run (this cell {})",
                line_label(*axis, *at),
                metric_name(*metric),
                signed_percent(line.change),
                signed_percent(line.ci_low),
                signed_percent(line.ci_high),
                signed_percent(*cell),
            ),
            R::WithMatrix {
                metric,
                matrix,
                verdict,
                total,
            } => write!(
                f,
                "with the matrix: {} ({}); {} {} in total",
                signed_percent(*matrix),
                verdict.as_str(),
                metric_name(*metric),
                signed_percent(*total),
            ),
            R::PairedChange {
                metric,
                change,
                pairs,
            } => write!(
                f,
                "B vs A {} {} [{}, {}] over {pairs} pairs of boots",
                metric_name(*metric),
                signed_percent(change.change),
                signed_percent(change.ci_low),
                signed_percent(change.ci_high),
            ),
            R::Recorded(words) => f.write_str(words),
        }
    }
}

/// A capacity-limited or saturated cell's reason: what the candidate shows, the history it
/// was judged against, and what the rule found (`stats::capacity`).
impl std::fmt::Display for LimitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let LimitReason {
            limit,
            counts: n,
            detail,
            against,
            alpha,
            finding,
        } = self;
        let (words, sides) = (limit.as_str(), against.sides());
        let history = format!(
            "{words} in {} of {} {} ({})",
            n.hits,
            n.runs,
            sides.history_runs,
            percent(n.hits as f64 / n.runs.max(1) as f64)
        );
        let detail = match detail.as_str() {
            "" => String::new(),
            d => format!(" ({d})"),
        };
        let now = match n.boots {
            1 => format!("{words} now{detail}"),
            _ => format!(
                "{words} on {} of {} {}{detail}",
                n.boot_hits, n.boots, sides.boots
            ),
        };
        let alpha = percent(*alpha);
        let (regression, flaky) = match limit {
            Limit::Capacity => (CellVerdict::CapacityRegression, "capacity"),
            Limit::Saturation => (CellVerdict::SaturationRegression, "saturation"),
        };
        match finding {
            LimitFinding::BothSides => write!(f, "{words} on both sides: {now}; {history}"),
            LimitFinding::NotEveryBoot => write!(
                f,
                "{now}, not on every boot: not evidence of a change; {history}"
            ),
            LimitFinding::Regression { bound } => write!(
                f,
                "{now}; {history}: false-alarm bound {} ≤ capacity_alpha {alpha}",
                percent(*bound)
            ),
            LimitFinding::Provisional { bound } => write!(
                f,
                "provisional {}: {now}; {history}; one boot cannot prove it (false-alarm bound \
                 {} > capacity_alpha {alpha}): a confirmation boot decides",
                regression.as_str(),
                percent(*bound)
            ),
            LimitFinding::Flaky => write!(
                f,
                "{flaky}_flaky: {now}; {history}: not evidence of a change"
            ),
            LimitFinding::TooShort { needed } => {
                let n = needed.map_or_else(|| "more".to_string(), |n| n.to_string());
                let (few, needed) = match against {
                    Against::Baseline => ("runs", format!("two boots need {n} history runs")),
                    Against::PairedAb => ("pairs", format!("{n} pairs are needed")),
                };
                write!(
                    f,
                    "{now}; {history}: too few {few} to tell a change from a cell at its limit \
                     ({needed} at capacity_alpha {alpha})"
                )
            }
        }
    }
}

/// The Details' account of the history runs a gating tail left out: `ITL p99 left out of
/// history runs b1, b5 in 20 cells: the host ran the gate's probe late on them, so their tails
/// are no measurement of the engine's` (the first five runs named).
impl std::fmt::Display for HistoryHostLate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named: Vec<String> = self.runs.iter().take(5).cloned().collect();
        let more = if self.runs.len() > 5 {
            format!(" and {} more", self.runs.len() - 5)
        } else {
            String::new()
        };
        write!(
            f,
            "{} left out of history {}{more} in {}: the host ran the gate's probe late on them, \
             so their tails are no measurement of the engine's",
            metric_name(self.metric),
            runs_named(&named, ""),
            cells_word(self.cells)
        )
    }
}

/// The one writer of why the first boot called for a second (or did not): the confirmation's
/// `reason` in `verdict.json`, the reports' Details and `run`'s confirmation event.
impl std::fmt::Display for ConfirmationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use ConfirmationReason as C;
        let matrix = |m: &FirstBootMatrix| {
            format!(
                "the first boot's matrix-wide change is {} (t = {}, futility bound {})",
                signed_percent(m.change),
                signed_number(m.statistic, 2),
                signed_number(m.boundary, 2),
            )
        };
        let alarms = |n: &usize| plural(*n, "provisional alarm");
        match self {
            C::Uncovered { cells, cell_effect } => write!(
                f,
                "after one boot {} could still be {} or worse: a second boot narrows {}",
                plural(*cells, "cell"),
                signed_percent(-cell_effect),
                if *cells == 1 {
                    "its bound"
                } else {
                    "their bounds"
                }
            ),
            C::Unvouched {
                metric,
                cells,
                vouched_to,
            } => {
                // A prefill figure is one per context, the burst's one: no cells counted there.
                let place = match metric {
                    Metric::PrefillTps => format!(" in {}", plural(*cells, "context")),
                    m if m.is_burst() => String::new(),
                    _ => format!(" in {}", cells_word(*cells)),
                };
                let layer = if metric.is_burst() {
                    "the burst's "
                } else {
                    ""
                };
                write!(
                    f,
                    "after one boot {layer}{} could still be {} or worse{place}: a second boot \
                     tells a busy first boot from a change",
                    metric_name(*metric),
                    signed_percent(*vouched_to),
                )
            }
            C::LeansWithAlarms {
                matrix: m,
                alarms: n,
            } => write!(
                f,
                "{}, which leans worse, and the first boot has {}: only a second boot can tell a \
                 slowdown from a slow boot",
                matrix(m),
                alarms(n)
            ),
            C::Alarms(n) => write!(
                f,
                "the first boot has {}: one boot cannot prove {}",
                alarms(n),
                if *n == 1 { "it" } else { "them" }
            ),
            C::Matrix { matrix: m, then } => write!(
                f,
                "{}: {}",
                matrix(m),
                match then {
                    MatrixThen::SecondBoot => {
                        "it leans worse, and only a second boot can tell a slowdown from a slow \
                         boot"
                    }
                    MatrixThen::Final => "the first boot's verdict is already final",
                    MatrixThen::Stops => {
                        "it does not lean worse, so the matrix test stops at one boot"
                    }
                }
            ),
            C::NoMatrixTest(gate) => write!(
                f,
                "the first boot's verdict is `{}` without a matrix-wide test",
                gate.as_str()
            ),
            C::Recorded(words) => f.write_str(words),
        }
    }
}

/// Why the adaptive rounds stopped, in `run`'s event and console line.
impl std::fmt::Display for RoundsStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RoundsStop::NoCellLeans => f.write_str("no cell leans worse"),
            RoundsStop::MaxRounds(n) => write!(f, "max_rounds ({n}) spent"),
            RoundsStop::GateRegressed => f.write_str(
                "the gate already found a regression: more rounds cannot change the exit code",
            ),
            RoundsStop::SecondBootDecides => {
                f.write_str("a second boot decides: this boot already calls for one")
            }
            RoundsStop::MaxExtraSeconds(max) => write!(f, "max_extra_seconds ({max:.0} s) spent"),
            RoundsStop::Cancelled => f.write_str("cancelled"),
            RoundsStop::NotRecorded => f.write_str("the recorded run has no further rounds"),
        }
    }
}

/// Which gate config a "reproduce" command names.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ConfigArg {
    /// Not known here: no command that would need it is given.
    #[default]
    Unknown,
    /// The embedded default (no `--config`).
    Embedded,
    /// This file, as named to the user.
    File(String),
}

impl ConfigArg {
    /// The config a gate named `name` (its `GateConfig::path`), `embedded_name` being what the
    /// embedded default is called.
    pub fn named(name: &str, embedded_name: &str) -> ConfigArg {
        if name == embedded_name {
            ConfigArg::Embedded
        } else {
            ConfigArg::File(name.to_string())
        }
    }

    /// ` --config F` (quoted for a shell), empty for the embedded default; `None` unknown.
    fn flag(&self) -> Option<String> {
        match self {
            ConfigArg::Unknown => None,
            ConfigArg::Embedded => Some(String::new()),
            ConfigArg::File(f) => Some(format!(" --config {}", shell_word(f))),
        }
    }
}

/// What the gate knows of how it ran, for the next steps a reader can take.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepContext {
    /// The gate config (unknown: no "reproduce" command is given).
    pub config: ConfigArg,
    /// Whether an `insufficient` verdict fails the check (the config's `fail_on`); `None`
    /// where it is not known.
    pub insufficient_blocks: Option<bool>,
    /// Where this run's results file is (`out/results.json`); `None`: `results.json` of its
    /// output directory or artifact.
    pub results_file: Option<String>,
}

/// One thing a developer can do next: what and why, and the command that does it.
#[derive(Debug, Clone, PartialEq)]
pub struct NextStep {
    /// `Reproduce locally`, `Accept this level (an intended change)`.
    pub what: String,
    /// The exact command, when there is one.
    pub command: Option<String>,
}

/// `'…'` for a shell: the text as one word, whatever it holds.
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=+@,".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The next steps of a comparison, where they apply: for a regression, the command that
/// reproduces the gate locally and the one that accepts the new level after an intended
/// change; for `insufficient`, what it means for the pull request (it blocks only where
/// `fail_on` says so) and what would decide it; for a pass, none.
pub fn next_steps(report: &ComparisonReport, ctx: &StepContext) -> Vec<NextStep> {
    let mut out = Vec::new();
    let suite = report.suite.as_deref().unwrap_or("pr");
    let against_baseline = report.against == Against::Baseline;
    let reproduce = |out: &mut Vec<NextStep>| {
        let Some(config) = ctx.config.flag().filter(|_| against_baseline) else {
            return;
        };
        out.push(NextStep {
            what:
                "Reproduce locally (the same config, suite and engine, against your baseline store)"
                    .into(),
            command: Some(format!(
                "infergate run{config} --suite {}",
                shell_word(suite)
            )),
        });
    };
    match report.gate {
        GateVerdict::Regression => {
            reproduce(&mut out);
            out.extend(accept_step(report, ctx, suite));
        }
        GateVerdict::Insufficient => {
            out.extend(insufficient_steps(report, ctx, suite));
            reproduce(&mut out);
        }
        GateVerdict::Pass | GateVerdict::NoBaseline | GateVerdict::Unmeasured => {}
    }
    out
}

/// A regression's step to accept its level where the change is intended (against a stored
/// baseline only: an A/B run has none to accept). Where only tails or layers regressed, the
/// accept names them (`--metric`): throughput's baseline keeps every run.
fn accept_step(report: &ComparisonReport, ctx: &StepContext, suite: &str) -> Option<NextStep> {
    let run = report
        .candidate_runs
        .first()
        .filter(|_| report.against == Against::Baseline)?;
    let metrics = report.regressed_metrics();
    let (whose, flags) = if metrics.is_empty() {
        ("comparisons then use".to_string(), String::new())
    } else {
        let names: Vec<&str> = metrics.iter().map(|m| m.as_str()).collect();
        (
            format!(
                "comparisons of {} then use",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            names.iter().map(|n| format!(" --metric {n}")).collect(),
        )
    };
    Some(NextStep {
        what: format!(
            "Accept this level, if the change is intended: add this run's results ({}) to the baseline store and accept it; {whose} only the runs from it on, and later runs on the main branch build its level",
            if ctx.results_file.is_some() {
                "the file below"
            } else {
                "results.json, in its output directory or artifact"
            }
        ),
        command: Some(format!(
            "infergate baseline add {} && infergate baseline accept --since {} --profile {} --suite {}{flags} --note 'why this level is intended'",
            shell_word(ctx.results_file.as_deref().unwrap_or("results.json")),
            shell_word(run),
            shell_word(&report.profile.key),
            shell_word(suite)
        )),
    })
}

/// An `insufficient` gate's steps: whether it blocks, then what would decide it (the cells'
/// intervals, the runner where the host ran late, the baseline where it is the limit).
fn insufficient_steps(report: &ComparisonReport, ctx: &StepContext, suite: &str) -> Vec<NextStep> {
    let mut out = Vec::new();
    let blocks = match ctx.insufficient_blocks {
        Some(true) => "insufficient fails this check: fail-on includes insufficient",
        Some(false) => {
            "insufficient does not block this pull request: the check is neutral (fail-on does not include insufficient)"
        }
        None => "insufficient does not block a pull request unless fail-on includes insufficient",
    };
    out.push(NextStep {
        what: blocks.into(),
        command: None,
    });
    // What more of the base's side is: baseline runs, or an A/B run's pairs of boots.
    let (more_runs, runs_recorded) = match report.against {
        Against::Baseline => ("more baseline runs", "baseline runs recorded"),
        Against::PairedAb => ("more pairs of boots (`--rounds`)", "pairs of boots"),
    };
    // Cells a pass cannot vouch for: their interval is what needs narrowing.
    let uncovered = report.uncovered_cells();
    if !uncovered.is_empty() {
        let cells: Vec<&CellComparison> = uncovered.iter().map(|(c, _)| *c).collect();
        let confirmed = report.confirmation.as_ref().is_some_and(|c| c.used);
        let second = if confirmed || report.against == Against::PairedAb {
            ""
        } else {
            "a second boot, "
        };
        out.push(NextStep {
            what: format!(
                "What would decide {}: a narrower interval, from {second}longer windows (the suite's `duration`) or {more_runs}",
                named(&cells)
            ),
            command: None,
        });
    }
    // A gated latency or layer figure a pass could not vouch for: what needs narrowing.
    for (metric, cells) in report.uncovered_metrics() {
        let cells: Vec<&CellComparison> = cells.iter().map(|(c, _)| *c).collect();
        // What else narrows a run's own figure: its window, its cold samples, its requests.
        let more = match cells[0].layer() {
            Layer::Decode => "longer windows (the suite's `duration`)",
            Layer::Prefill => "more cold samples (the suite's `prefill_samples`)",
            Layer::Burst => "more burst requests (the suite's `[burst] requests`)",
        };
        out.push(NextStep {
            what: format!(
                "What would decide {} in {}: a narrower interval, from {runs_recorded} on a runner no other job shares (their spread sets it) or {more}",
                metric_name(metric),
                named(&cells)
            ),
            command: None,
        });
    }
    // A tail the host's scheduling could explain: the runner, not the engine, decides.
    if !report.host_late.is_empty() {
        out.push(NextStep {
            what: "What would decide the latency not vouched for: a rerun on a runner no other job shares while it measures (`infergate doctor` shows how late this host runs the gate's probe)".into(),
            command: None,
        });
    }
    // The baseline itself, only where it is the limit.
    if let Some(s) = report.sensitivity.as_ref().filter(|s| !s.sufficient) {
        let what = match (s.unit, s.runs_needed) {
            (SensitivityUnit::BaselineRuns, Some(n)) => format!(
                "What would decide it: {} of this profile and suite on the main branch (e.g. nightly), so the baseline can detect the rule's {}",
                s.unit.more(n),
                signed_percent(-s.design_effect)
            ),
            (SensitivityUnit::BaselineRuns, None) => format!(
                "What would decide it: {}; record baseline runs of this profile and suite on the main branch",
                s.needs()
            ),
            (SensitivityUnit::Pairs, _) => format!(
                "What would decide it: {} (the config's [ab] table)",
                s.needs()
            ),
        };
        let command = match (s.unit, ctx.config.flag()) {
            (SensitivityUnit::BaselineRuns, Some(config)) => Some(format!(
                "infergate run{config} --suite {} --update-baseline",
                shell_word(suite)
            )),
            _ => None,
        };
        out.push(NextStep { what, command });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asserts::{assert_contains, assert_ends_with, assert_lacks, assert_starts_with};
    use crate::verdict::JudgedBy;
    use crate::verdict::fixtures::{self, insufficient, metric, pass, regression};

    fn commands(steps: &[NextStep]) -> Vec<&str> {
        steps.iter().filter_map(|s| s.command.as_deref()).collect()
    }

    /// A regression says how to reproduce it (the exact config and suite) and how to accept
    /// the level (`baseline accept`'s real flags); a pass has nothing to do.
    #[test]
    fn next_steps_of_a_regression_reproduce_and_accept() {
        let ctx = StepContext {
            config: ConfigArg::File("ci/gate config.toml".into()),
            insufficient_blocks: Some(false),
            results_file: None,
        };
        let r = regression();
        let steps = next_steps(&r, &ctx);
        let cmds = commands(&steps);
        assert_eq!(
            cmds[0],
            "infergate run --config 'ci/gate config.toml' --suite pr"
        );
        assert_starts_with(
            cmds[1],
            &format!(
                "infergate baseline add results.json && infergate baseline accept --since {} --profile {} --suite pr --note ",
                r.candidate_runs[0], r.profile.key
            ),
        );
        // The embedded default needs no --config; an unknown config gives no command to guess.
        let embedded = StepContext {
            config: ConfigArg::Embedded,
            ..ctx.clone()
        };
        assert_eq!(
            commands(&next_steps(&r, &embedded))[0],
            "infergate run --suite pr"
        );
        assert_eq!(commands(&next_steps(&r, &StepContext::default())).len(), 1);
        // The console knows the results file: the command names it.
        let console = StepContext {
            results_file: Some("out dir/results.json".into()),
            ..ctx.clone()
        };
        assert_starts_with(
            commands(&next_steps(&r, &console))[1],
            "infergate baseline add 'out dir/results.json' && ",
        );
        assert!(next_steps(&pass(), &ctx).is_empty());
        // A regression of the tail alone accepts the tail alone.
        let mut tail = regression();
        for c in &mut tail.cells {
            for m in &mut c.metrics {
                if m.verdict.is_regression() {
                    m.metric = Metric::ItlP99;
                }
            }
        }
        let steps = next_steps(&tail, &ctx);
        assert_contains(commands(&steps)[1], " --suite pr --metric itl_p99 --note ");
        assert_contains(
            &steps[1].what,
            "comparisons of `itl_p99` then use only the runs",
        );
    }

    /// `insufficient` says what it means for the pull request, by the config's `fail_on`, and
    /// what would decide it.
    #[test]
    fn next_steps_of_insufficient_say_whether_it_blocks_and_what_decides_it() {
        let r = insufficient();
        for (blocks, said) in [
            (Some(false), "insufficient does not block this pull request"),
            (Some(true), "insufficient fails this check"),
            (None, "insufficient does not block a pull request unless"),
        ] {
            let ctx = StepContext {
                config: ConfigArg::File("infergate.toml".into()),
                insufficient_blocks: blocks,
                results_file: None,
            };
            let steps = next_steps(&r, &ctx);
            assert_starts_with(&steps[0].what, said);
            assert_starts_with(&steps[1].what, "What would decide it: ");
            assert_eq!(
                steps[1].command.as_deref(),
                Some("infergate run --config infergate.toml --suite pr --update-baseline")
            );
        }
        // A tail the host ran late on: a quieter runner decides it, before the baseline.
        let mut r = insufficient();
        r.host_late = vec![crate::verdict::HostLateCell {
            concurrency: 1,
            context_tokens: 0,
            metric: Metric::ItlP99,
            lateness_p99_s: 0.0035,
            value_s: 0.0121,
        }];
        let steps = next_steps(&r, &StepContext::default());
        assert_starts_with(
            &steps[1].what,
            "What would decide the latency not vouched for: a rerun on a runner no other job shares",
        );
        // A gated latency whose bound reaches its design effect: the interval needs narrowing.
        let mut r = insufficient();
        r.cell_metrics_gated = vec![Metric::ItlP90];
        for i in 0..r.cells.len() {
            let m = fixtures::metric_in(&mut r, i, Metric::ItlP90);
            (m.margin, m.ci_high) = (0.25, if i == 1 { 0.4 } else { 0.1 });
        }
        let steps = next_steps(&r, &StepContext::default());
        assert_starts_with(
            &steps[1].what,
            "What would decide ITL p90 in C=2 / 0: a narrower interval, from baseline runs recorded on a runner no other job shares",
        );
    }

    #[test]
    fn a_pass_names_the_layers_it_also_covers() {
        let mut r = pass();
        let layer = r.cells[0].clone();
        r.prefill = vec![layer.clone()];
        r.burst = vec![layer];
        // Compared but not gated (a history without the layer): not claimed.
        assert_lacks(&first_line(&r), "prefill");
        r.prefill_gated = true;
        r.burst_gated = true;
        r.prefill[0].verdict = CellVerdict::NotComparable;
        assert_lacks(&first_line(&r), "prefill");
        r.prefill[0].verdict = CellVerdict::Unchanged;
        assert_starts_with(
            &first_line(&r),
            "✓ no regression in 6 cells (aggregate tok/s +0.2% [−0.6, +1.0]), 1 prefill context \
             and the burst; this run could detect",
        );
    }

    #[test]
    fn the_first_line_says_the_answer_with_size_interval_and_cells() {
        assert_eq!(
            first_line(&regression()),
            "✗ aggregate tok/s −9.6% [−10.9, −8.4] in all 6 cells, confirmed on a second boot"
        );
        assert_eq!(
            first_line(&pass()),
            "✓ no regression in 6 cells (aggregate tok/s +0.2% [−0.6, +1.0]); this run could detect −4.6% or worse"
        );
        // Two cells that both regressed are "both", not "all 2".
        let mut two = regression();
        two.cells.truncate(2);
        assert_contains(&first_line(&two), "in both cells, confirmed");
        let thin = first_line(&insufficient());
        assert_starts_with(&thin, "? insufficient: no regression proven in 6 cells");
        assert_ends_with(
            &thin,
            "this baseline could detect only −7.9% or worse, not the rule's −5.0% (5 more baseline runs needed)",
        );
    }

    #[test]
    fn a_cell_regression_names_the_worst_cell_and_the_count() {
        let mut r = pass();
        r.gate = GateVerdict::Regression;
        r.cells[5].verdict = CellVerdict::Regression;
        r.cells[5].metrics[0] = metric(
            Metric::AggregateTps,
            3000.0,
            -0.123,
            0.02,
            CellVerdict::Regression,
        );
        assert_eq!(
            first_line(&r),
            "✗ aggregate tok/s −12.3% [−14.3, −10.3] at C=4 / 8k; 1 of 6 cells regressed"
        );
        // The whole 8k row slower: the row is named.
        for i in [3, 4] {
            r.cells[i].verdict = CellVerdict::Regression;
            r.cells[i].metrics[0] = r.cells[5].metrics[0].clone();
        }
        assert_ends_with(&first_line(&r), "; 3 of 6 cells regressed (the 8k row)");
        // And under a matrix-wide regression, beside the worst cell; a column is named too.
        let mut m = regression();
        for c in &mut m.cells {
            if c.concurrency != 2 {
                c.verdict = CellVerdict::Unchanged;
            }
        }
        assert_contains(
            &first_line(&m),
            "2 of them regressed (the C=2 column; worst",
        );
    }

    /// What the old tally headline said and the one answer line must say too: the best
    /// improvement (an A/B run asking "does flag X help?"), the cells not counted, an unmeasured
    /// run's error regressions, a replayed second boot that was not used, and why there is no
    /// baseline.
    #[test]
    fn the_first_line_accounts_for_improvements_uncounted_cells_errors_and_second_boots() {
        let mut r = pass();
        for (i, change) in [(1, 0.08), (4, 0.121)] {
            r.cells[i].verdict = CellVerdict::Improvement;
            r.cells[i].metrics[0].change = change;
        }
        r.cells[5].verdict = CellVerdict::Saturated;
        r.cells[5].metrics.clear();
        assert_eq!(
            first_line(&r),
            "✓ no regression in 5 cells (aggregate tok/s +0.2% [−0.6, +1.0]); this run could detect \
             −4.6% or worse; 1 saturated; 2 cells faster, best +12.1% at C=2 / 8k"
        );
        let mut worse = regression();
        worse.cells[2].verdict = CellVerdict::Improvement;
        worse.cells[2].metrics[0].change = 0.05;
        worse.cells[2].metrics[0].decided_on = None;
        worse.confirmation.as_mut().expect("confirmation").used = false;
        worse.confirmation.as_mut().expect("confirmation").reason =
            ConfirmationReason::Recorded("no alarm to confirm".into());
        assert_eq!(
            first_line(&worse),
            "✗ aggregate tok/s −9.6% [−10.9, −8.4] over 6 cells, 5 of them regressed (worst −9.6% at \
             C=1 / 0); 1 cell faster: +5.0% at C=4 / 0; first boot only (the second boot's results \
             were not used: no alarm to confirm)"
        );
        let mut broken = pass();
        broken.gate = GateVerdict::Unmeasured;
        broken.cells[3].verdict = CellVerdict::ErrorRegression;
        broken.cells[3].reason = Some(CellReason::Recorded("error now: stream reset".into()));
        assert_ends_with(&first_line(&broken), "; 1 error regression (C=1 / 8k)");
        let mut none = pass();
        none.gate = GateVerdict::NoBaseline;
        for c in &mut none.cells {
            c.reason = Some(CellReason::Recorded("different profile".into()));
        }
        assert_eq!(
            first_line(&none),
            "– no baseline yet for this profile and suite: 6 cells measured, nothing compared \
             (different profile)"
        );
    }

    /// A provisional alarm is what an `insufficient` gate waits on: the first line says so before
    /// the sensitivity, which alone would read as a sufficient gate.
    #[test]
    fn a_provisional_alarm_leads_the_insufficient_line() {
        let mut r = pass();
        r.gate = GateVerdict::Insufficient;
        r.cells[4].provisional = true;
        r.cells[4].verdict = CellVerdict::Inconclusive;
        assert_eq!(
            first_line(&r),
            "? insufficient: a second boot decides 1 provisional alarm (C=2 / 8k); no regression \
             proven in 6 cells (aggregate tok/s +0.2% [−0.6, +1.0]); this run could detect −4.6% or \
             worse"
        );
        // A cell at its limit that the history is too short to judge: the gate waits for runs.
        let mut young = pass();
        young.gate = GateVerdict::Insufficient;
        young.cells[5].history_too_short = true;
        young.cells[5].verdict = CellVerdict::Inconclusive;
        assert_starts_with(
            &first_line(&young),
            "? insufficient: too few baseline runs to judge 1 cell now at its limit (C=4 / 8k); \
             no regression proven in",
        );
        for c in &mut r.cells {
            c.provisional = true;
        }
        assert_contains(
            &first_line(&r),
            "decides 6 provisional alarms (C=1 / 0, C=2 / 0, C=4 / 0, …); ",
        );
    }

    /// Every outcome the model sets, in the words `verdict.json` and the check lines have
    /// always had (the strings the model wrote before it typed them).
    fn outcomes() -> Vec<(CheckOutcome, &'static str)> {
        use crate::verdict::{DecidedChange, DecisionBasis};
        use CheckOutcome as O;
        let decided = |basis, matrix_change| DecidedChange {
            basis,
            change: -0.09,
            ci_low: -0.11,
            ci_high: -0.07,
            matrix_change,
        };
        let broader = O::DecidedByBroader {
            own: Box::new(O::NoRegression),
            against: Against::Baseline,
            verdict: Found::Regression,
            decided: decided(DecisionBasis::WithMatrix, Some(-0.09)),
        };
        vec![
            (O::Regression, "regression"),
            (O::Improvement, "improvement"),
            (O::WithinMargin, "within the margin"),
            (O::NoRegression, "no regression"),
            (O::RegressionOnEachBoot, "regression on each boot"),
            (O::ImprovementOnEachBoot, "improvement on each boot"),
            (O::NoRegressionOnEachBoot, "no regression on each boot"),
            (O::LeansWorse, "leans worse: boot again"),
            (
                O::DoesNotLeanWorse,
                "does not lean worse: the matrix test stops",
            ),
            (
                O::ProvisionalRegression,
                "provisional regression: a second boot decides",
            ),
            (
                O::BootDoesNotLean {
                    found: Found::Regression,
                    boot: LoneBoot::Second,
                },
                "no regression: the second boot alone does not lean worse",
            ),
            (
                O::BootDoesNotLean {
                    found: Found::Improvement,
                    boot: LoneBoot::First,
                },
                "no improvement: the first boot alone does not lean better",
            ),
            (
                O::BootDoesNotShow {
                    found: Found::Regression,
                    boot: LoneBoot::First,
                    own: Box::new(O::WithinMargin),
                },
                "no regression: the first boot alone does not show it (within the margin)",
            ),
            (
                O::BootWithinDesignEffect {
                    found: Found::Regression,
                    boot: LoneBoot::Second,
                    reads: 0.021,
                    design_effect: 0.05,
                },
                "no regression: the second boot alone reads +2.1%, within the design effect \
                 (+5.0%)",
            ),
            (
                O::OnlyAgainstItsRun {
                    found: Found::Improvement,
                    total: -0.012,
                },
                "better than the rest of its run, not faster than its baseline (its cells −1.2% \
                 in total): no change",
            ),
            (
                O::OnlyAgainstItsRun {
                    found: Found::Regression,
                    total: 0.004,
                },
                "worse than the rest of its run, not slower than its baseline (its cells +0.4% \
                 in total): no change",
            ),
            (
                O::OverruledByTotal {
                    found: Found::Improvement,
                    against: Against::Baseline,
                    total: -0.053,
                    verdict: CellVerdict::Regression,
                },
                "improvement against the rest of its run, but its total change is −5.3%: \
                 regression",
            ),
            (
                O::OverruledByTotal {
                    found: Found::Regression,
                    against: Against::PairedAb,
                    total: -0.021,
                    verdict: CellVerdict::Unchanged,
                },
                "regression against the other cells of its pairs, but its total change is \
                 −2.1%: unchanged",
            ),
            (
                broader.clone(),
                "no regression against the rest of its run; regression with the matrix: −9.0%",
            ),
            (
                O::DecidedByBroader {
                    own: Box::new(O::WithinMargin),
                    against: Against::PairedAb,
                    verdict: Found::Improvement,
                    decided: decided(DecisionBasis::WithLine, None),
                },
                "within the margin against the other cells of its pairs; improvement with its \
                 row or column",
            ),
            (
                O::ReportedOnly { higher: true },
                "higher, reported only (this metric does not gate)",
            ),
            (
                O::OnOneBoot(Box::new(O::ReportedOnly { higher: false })),
                "lower, reported only (this metric does not gate) on one boot: not confirmed",
            ),
            (
                O::OnOneBoot(Box::new(O::Improvement)),
                "improvement on one boot: not confirmed",
            ),
            (
                O::MatrixWide {
                    matrix: Box::new(O::Regression),
                    own: Box::new(broader),
                },
                "regression (no regression against the rest of its run; regression with the \
                 matrix: −9.0%)",
            ),
        ]
    }

    /// A typed outcome is written as its words, in its check's line and in `verdict.json`, and
    /// reads back as those words ([`CheckOutcome::Recorded`]), equal to the typed one and
    /// written again byte for byte.
    #[test]
    fn a_typed_outcome_is_written_as_its_words_and_reads_back_recorded() {
        for (outcome, words) in outcomes() {
            assert_eq!(outcome.to_string(), words);
            let check = fixtures::check(outcome.clone());
            assert!(check.line("matrix").ends_with(&format!(" → {words}")));
            let json = serde_json::to_string(&check).expect("writes");
            let quoted = serde_json::to_string(words).expect("a string");
            assert_ends_with(&json, &format!(r#""outcome":{quoted}}}"#));
            let back: Check = serde_json::from_str(&json).expect("reads back");
            assert!(
                matches!(&back.outcome, CheckOutcome::Recorded(w) if w == words),
                "{:?}",
                back.outcome
            );
            assert_eq!(back.outcome, outcome);
            assert_eq!(back, check);
            assert_eq!(serde_json::to_string(&back).expect("writes again"), json);
        }
    }

    /// A verdict whose tests the model typed is written as the one read back from its file:
    /// `verdict.json` is the same bytes either way.
    #[test]
    fn a_verdict_with_typed_outcomes_writes_the_same_bytes_as_read_back() {
        let mut r = regression();
        let mut typed = outcomes().into_iter().map(|(o, _)| o);
        for m in r.cells.iter_mut().flat_map(|c| c.metrics.iter_mut()) {
            let Some(outcome) = typed.next() else { break };
            m.check = Some(fixtures::check(outcome));
        }
        let checks = |r: &ComparisonReport| -> Vec<Check> {
            let metrics = r.cells.iter().flat_map(|c| c.metrics.iter());
            metrics.filter_map(|m| m.check.clone()).collect()
        };
        let json = serde_json::to_string_pretty(&r).expect("writes");
        // The same verdict with each outcome as a file holds it: the same bytes.
        let mut recorded = r.clone();
        for m in recorded.cells.iter_mut().flat_map(|c| c.metrics.iter_mut()) {
            if let Some(c) = m.check.as_mut() {
                c.outcome = CheckOutcome::Recorded(c.outcome.to_string());
            }
        }
        assert_eq!(
            serde_json::to_string_pretty(&recorded).expect("writes"),
            json
        );
        let back: ComparisonReport = serde_json::from_str(&json).expect("reads back");
        let (typed, read) = (checks(&r), checks(&back));
        assert_eq!(typed.len(), outcomes().len());
        assert_eq!(read, typed);
        assert!(
            read.iter()
                .all(|c| matches!(c.outcome, CheckOutcome::Recorded(_))),
            "{read:?}"
        );
        assert_eq!(back.check_lines(), r.check_lines());
    }

    /// Every cell reason the model sets, in the words `verdict.json` has always had (the
    /// strings the model wrote before it typed them).
    fn cell_reasons() -> Vec<(CellReason, &'static str)> {
        use crate::verdict::{DecidedChange, DecisionBasis, LimitCounts};
        use CellReason as R;
        let change = |change, ci_low, ci_high| DecidedChange {
            basis: DecisionBasis::VsRun,
            change,
            ci_low,
            ci_high,
            matrix_change: None,
        };
        let limit = |limit, (runs, hits, boots, boot_hits), detail: &str, against, finding| {
            R::Limit(LimitReason {
                limit,
                counts: LimitCounts {
                    runs,
                    hits,
                    boots,
                    boot_hits,
                },
                detail: detail.into(),
                against,
                alpha: 0.002,
                finding,
            })
        };
        let (base, ab) = (Against::Baseline, Against::PairedAb);
        let (cap, sat) = (Limit::Capacity, Limit::Saturation);
        let nothing = |layer, against| R::NothingCompared { layer, against };
        vec![
            (R::NoBaseline, "no baseline"),
            (R::MissingInBase(base), "missing in baseline"),
            (
                R::MissingInRun {
                    against: base,
                    run: "c1".into(),
                },
                "missing in candidate run c1",
            ),
            (
                R::ErrorNow {
                    why: "HTTP 500".into(),
                    measured: 4,
                    runs: 4,
                    against: ab,
                },
                "error now: HTTP 500; measured in 4 of the 4 A boots",
            ),
            (
                R::Error {
                    why: "oom".into(),
                    against: base,
                },
                "error in candidate: oom",
            ),
            (
                R::Skipped {
                    why: "skip list".into(),
                    against: ab,
                },
                "skipped in B: skip list",
            ),
            (
                R::LimitWithoutBase {
                    limit: sat,
                    against: base,
                },
                "saturated now; no successful baseline measurement",
            ),
            (
                R::OutOfLimit {
                    limit: cap,
                    against: base,
                },
                "fits now; capacity-limited in the baseline",
            ),
            (
                R::OutOfLimit {
                    limit: sat,
                    against: ab,
                },
                "holds its streams now; saturated in A",
            ),
            (
                R::NoBaseMeasurement(base),
                "no successful baseline measurement (error or skipped)",
            ),
            (
                nothing(Layer::Decode, base),
                "no gating metric measured on both sides",
            ),
            (
                nothing(Layer::Decode, ab),
                "no gating metric measured in two pairs",
            ),
            (
                nothing(Layer::Prefill, base),
                "no prefill figure on both sides",
            ),
            (nothing(Layer::Burst, base), "no burst figure on both sides"),
            (
                R::TooFewPairs {
                    pairs: 1,
                    why: None,
                },
                "measured on both sides in 1 pair, 2 needed (not measured)",
            ),
            (
                R::TooFewPairs {
                    pairs: 0,
                    why: Some("oom".into()),
                },
                "measured on both sides in 0 pairs, 2 needed (oom)",
            ),
            (
                R::PrefillDisagrees {
                    context: 8192,
                    run: "c1".into(),
                    detail: Some("2.0x the tokens".into()),
                },
                "not compared: the engine's prefill counters disagree with the client's figure \
                 at 8k in run c1 (2.0x the tokens)",
            ),
            (
                R::PrefillDisagrees {
                    context: 4096,
                    run: "c1".into(),
                    detail: None,
                },
                "not compared: the engine's prefill counters disagree with the client's figure \
                 at 4k in run c1",
            ),
            (
                R::BurstIncomplete {
                    run: "c1".into(),
                    completed: 30,
                    sent: 32,
                    incomplete: 1,
                    errors: 1,
                    first_problem: Some("HTTP 500".into()),
                },
                "not compared: not every burst request completed: 30 of 32 requests completed \
                 in run c1 (1 ended early, 1 failed; HTTP 500)",
            ),
            (
                R::BurstIncomplete {
                    run: "c1".into(),
                    completed: 31,
                    sent: 32,
                    incomplete: 1,
                    errors: 0,
                    first_problem: None,
                },
                "not compared: not every burst request completed: 31 of 32 requests completed \
                 in run c1 (1 ended early, 0 failed)",
            ),
            (
                R::WithLine {
                    axis: LineAxis::Context,
                    at: 32768,
                    metric: Metric::AggregateTps,
                    line: change(-0.071, -0.09, -0.052),
                    cell: -0.04,
                },
                "with its row 32k: aggregate tok/s −7.1% [−9.0%, −5.2%] against the other \
                 cells of its run (this cell −4.0%)",
            ),
            (
                R::WithLine {
                    axis: LineAxis::Concurrency,
                    at: 4,
                    metric: Metric::TtftP90,
                    line: change(0.12, 0.05, 0.19),
                    cell: 0.2,
                },
                "with its column C=4: TTFT p90 +12.0% [+5.0%, +19.0%] against the other cells \
                 of its run (this cell +20.0%)",
            ),
            (
                R::WithMatrix {
                    metric: Metric::AggregateTps,
                    matrix: -0.6,
                    verdict: CellVerdict::Regression,
                    total: -0.558,
                },
                "with the matrix: −60.0% (regression); aggregate tok/s −55.8% in total",
            ),
            (
                R::PairedChange {
                    metric: Metric::ItlP50,
                    change: change(-0.021, -0.035, -0.007),
                    pairs: 4,
                },
                "B vs A ITL p50 −2.1% [−3.5%, −0.7%] over 4 pairs of boots",
            ),
            (
                limit(
                    cap,
                    (20, 0, 1, 1),
                    "5/8 running",
                    base,
                    LimitFinding::Provisional { bound: 0.018 },
                ),
                "provisional capacity_regression: capacity-limited now (5/8 running); \
                 capacity-limited in 0 of 20 history runs (0.0%); one boot cannot prove it \
                 (false-alarm bound 1.8% > capacity_alpha 0.2%): a confirmation boot decides",
            ),
            (
                limit(sat, (20, 20, 2, 2), "", base, LimitFinding::BothSides),
                "saturated on both sides: saturated on 2 of 2 boots; saturated in 20 of 20 \
                 history runs (100.0%)",
            ),
            (
                limit(cap, (20, 0, 2, 1), "", base, LimitFinding::NotEveryBoot),
                "capacity-limited on 1 of 2 boots, not on every boot: not evidence of a change; \
                 capacity-limited in 0 of 20 history runs (0.0%)",
            ),
            (
                limit(
                    cap,
                    (20, 0, 2, 2),
                    "",
                    base,
                    LimitFinding::Regression { bound: 0.00123 },
                ),
                "capacity-limited on 2 of 2 boots; capacity-limited in 0 of 20 history runs \
                 (0.0%): false-alarm bound 0.1% ≤ capacity_alpha 0.2%",
            ),
            (
                limit(sat, (20, 2, 2, 2), "", base, LimitFinding::Flaky),
                "saturation_flaky: saturated on 2 of 2 boots; saturated in 2 of 20 history runs \
                 (10.0%): not evidence of a change",
            ),
            (
                limit(cap, (20, 2, 2, 2), "", base, LimitFinding::Flaky),
                "capacity_flaky: capacity-limited on 2 of 2 boots; capacity-limited in 2 of 20 \
                 history runs (10.0%): not evidence of a change",
            ),
            (
                limit(
                    cap,
                    (5, 0, 2, 2),
                    "",
                    base,
                    LimitFinding::TooShort { needed: Some(16) },
                ),
                "capacity-limited on 2 of 2 boots; capacity-limited in 0 of 5 history runs \
                 (0.0%): too few runs to tell a change from a cell at its limit (two boots need \
                 16 history runs at capacity_alpha 0.2%)",
            ),
            (
                limit(
                    cap,
                    (5, 0, 2, 2),
                    "",
                    base,
                    LimitFinding::TooShort { needed: None },
                ),
                "capacity-limited on 2 of 2 boots; capacity-limited in 0 of 5 history runs \
                 (0.0%): too few runs to tell a change from a cell at its limit (two boots need \
                 more history runs at capacity_alpha 0.2%)",
            ),
            (
                limit(
                    cap,
                    (3, 0, 3, 3),
                    "10/12 running",
                    ab,
                    LimitFinding::TooShort { needed: Some(5) },
                ),
                "capacity-limited on 3 of 3 B boots (10/12 running); capacity-limited in 0 of 3 \
                 A boots (0.0%): too few pairs to tell a change from a cell at its limit (5 \
                 pairs are needed at capacity_alpha 0.2%)",
            ),
        ]
    }

    /// The history runs a gating tail left out are named, the first five of them.
    #[test]
    fn the_history_runs_a_tail_left_out_are_named() {
        let mut h = HistoryHostLate {
            metric: Metric::ItlP99,
            runs: vec!["b1".into(), "b5".into()],
            cells: 20,
        };
        assert_eq!(
            h.to_string(),
            "ITL p99 left out of history runs b1, b5 in 20 cells: the host ran the gate's probe \
             late on them, so their tails are no measurement of the engine's"
        );
        h.runs = (1..=7).map(|i| format!("n{i}")).collect();
        h.cells = 1;
        assert!(
            h.to_string().starts_with(
                "ITL p99 left out of history runs n1, n2, n3, n4, n5 and 2 more in 1 cell:"
            ),
            "{h}"
        );
    }

    /// Every reason the model gives for a second boot, in the words `verdict.json` has always
    /// had.
    fn confirmation_reasons() -> Vec<(ConfirmationReason, &'static str)> {
        use ConfirmationReason as C;
        let matrix = FirstBootMatrix {
            change: -0.042,
            statistic: -2.31,
            boundary: -1.64,
        };
        let then = |then| C::Matrix { matrix, then };
        vec![
            (
                C::Uncovered {
                    cells: 1,
                    cell_effect: 0.10,
                },
                "after one boot 1 cell could still be −10.0% or worse: a second boot narrows \
                 its bound",
            ),
            (
                C::Uncovered {
                    cells: 3,
                    cell_effect: 0.10,
                },
                "after one boot 3 cells could still be −10.0% or worse: a second boot narrows \
                 their bounds",
            ),
            (
                C::Unvouched {
                    metric: Metric::ItlP99,
                    cells: 2,
                    vouched_to: 0.50,
                },
                "after one boot ITL p99 could still be +50.0% or worse in 2 cells: a second boot \
                 tells a busy first boot from a change",
            ),
            (
                C::Unvouched {
                    metric: Metric::PrefillTps,
                    cells: 1,
                    vouched_to: -0.20,
                },
                "after one boot prefill tok/s could still be −20.0% or worse in 1 context: a \
                 second boot tells a busy first boot from a change",
            ),
            (
                C::Unvouched {
                    metric: Metric::BurstTtftP90,
                    cells: 1,
                    vouched_to: 0.20,
                },
                "after one boot the burst's TTFT p90 could still be +20.0% or worse: a second \
                 boot tells a busy first boot from a change",
            ),
            (
                C::LeansWithAlarms { matrix, alarms: 5 },
                "the first boot's matrix-wide change is −4.2% (t = −2.31, futility bound \
                 −1.64), which leans worse, and the first boot has 5 provisional alarms: only a \
                 second boot can tell a slowdown from a slow boot",
            ),
            (
                C::Alarms(1),
                "the first boot has 1 provisional alarm: one boot cannot prove it",
            ),
            (
                C::Alarms(2),
                "the first boot has 2 provisional alarms: one boot cannot prove them",
            ),
            (
                then(MatrixThen::SecondBoot),
                "the first boot's matrix-wide change is −4.2% (t = −2.31, futility bound \
                 −1.64): it leans worse, and only a second boot can tell a slowdown from a slow \
                 boot",
            ),
            (
                then(MatrixThen::Final),
                "the first boot's matrix-wide change is −4.2% (t = −2.31, futility bound \
                 −1.64): the first boot's verdict is already final",
            ),
            (
                then(MatrixThen::Stops),
                "the first boot's matrix-wide change is −4.2% (t = −2.31, futility bound \
                 −1.64): it does not lean worse, so the matrix test stops at one boot",
            ),
            (
                C::NoMatrixTest(GateVerdict::Pass),
                "the first boot's verdict is `pass` without a matrix-wide test",
            ),
        ]
    }

    /// A typed cell or confirmation reason is written as its words in `verdict.json` and reads
    /// back as those words (`Recorded`), equal to the typed one.
    #[test]
    fn a_typed_reason_is_written_as_its_words_and_reads_back_recorded() {
        fn round_trip<R>(typed: Vec<(R, &'static str)>, recorded: fn(&R) -> Option<&str>)
        where
            R: std::fmt::Display + std::fmt::Debug + PartialEq + serde::Serialize,
            R: serde::de::DeserializeOwned,
        {
            for (reason, words) in typed {
                assert_eq!(reason.to_string(), words);
                let json = serde_json::to_string(&reason).expect("writes");
                assert_eq!(json, serde_json::to_string(words).expect("a string"));
                let back: R = serde_json::from_str(&json).expect("reads back");
                assert_eq!(recorded(&back), Some(words), "{back:?}");
                assert_eq!(back, reason);
            }
        }
        round_trip(cell_reasons(), |r| match r {
            CellReason::Recorded(w) => Some(w),
            _ => None,
        });
        round_trip(confirmation_reasons(), |r| match r {
            ConfirmationReason::Recorded(w) => Some(w),
            _ => None,
        });
    }

    #[test]
    fn not_gated_is_written_typed_with_its_words_and_an_older_files_words_read_back() {
        let mut r = pass();
        r.not_gated = not_gated().into_iter().map(|(n, _)| n).collect();
        let json = serde_json::to_value(&r).expect("writes");
        let written = json["not_gated"].as_array().expect("a list");
        for (entry, (_, words)) in written.iter().zip(not_gated()) {
            assert_eq!(entry["words"], words, "{entry}");
            assert!(entry["why"].is_string(), "{entry}");
        }
        let back: ComparisonReport = serde_json::from_value(json).expect("reads back");
        assert_eq!(back.not_gated, r.not_gated);
        assert!(
            back.not_gated.len() == 8
                && !back
                    .not_gated
                    .iter()
                    .any(|n| matches!(n, NotGated::Recorded(_))),
            "{:?}",
            back.not_gated
        );
        // A file written before the entries were typed holds their words alone.
        let mut old = serde_json::to_value(&r).expect("writes");
        old["not_gated"] = serde_json::json!([not_gated()[0].1]);
        let back: ComparisonReport = serde_json::from_value(old).expect("reads an older file");
        assert_eq!(
            back.not_gated,
            [NotGated::Recorded(not_gated()[0].1.into())]
        );
        // A later version's reason this build does not know: its words.
        let mut later = serde_json::to_value(&r).expect("writes");
        later["not_gated"] = serde_json::json!([{"why": "warp_drive", "words": "warp is off"}]);
        let back: ComparisonReport = serde_json::from_value(later).expect("reads a later file");
        assert_eq!(back.not_gated, [NotGated::Recorded("warp is off".into())]);
    }

    /// The step output `not-gated`'s metrics: each once, a layer's as its listed metrics, an
    /// older file's words as not known.
    #[test]
    fn not_gated_metrics_name_each_metric_once() {
        let mut r = pass();
        assert!(r.not_gated_metrics().is_empty());
        r.not_gated = not_gated().into_iter().map(|(n, _)| n).collect();
        use Metric as M;
        let all = [
            M::ItlP99,
            M::TtftP90,
            M::PrefillTps,
            M::BurstTtftP90,
            M::BurstTps,
        ];
        assert_eq!(r.not_gated_metrics(), all.map(Some));
        r.judged_by = Some(JudgedBy {
            confirm: true,
            max_rounds: 0,
            history_runs: 20,
            design_effect: 0.05,
            design_power: 0.8,
            metrics: vec![M::AggregateTps, M::BurstTtftP90],
            min_effects: Default::default(),
            burst_min_effect: None,
        });
        r.not_gated = vec![
            NotGated::BurstShortHistory { runs: 3, needs: 10 },
            NotGated::Recorded("words".into()),
        ];
        assert_eq!(r.not_gated_metrics(), [Some(M::BurstTtftP90), None]);
    }

    #[test]
    fn a_pass_says_on_its_first_line_what_the_rule_gates_that_it_did_not() {
        let mut r = pass();
        let plain = first_line(&r);
        assert_lacks(&plain, "not gated");
        r.not_gated = vec![
            NotGated::ShortHistory {
                metric: Metric::ItlP99,
                runs: 7,
                needs: 10,
            },
            NotGated::PrefillShortHistory { runs: 7, needs: 10 },
            NotGated::BurstShortHistory { runs: 7, needs: 10 },
        ];
        let line = first_line(&r);
        assert_contains(
            &line,
            "; not gated: ITL p99, prefill tok/s and the burst layer (7 runs, they gate from 10)",
        );
        r.not_gated = vec![
            NotGated::RestartedShort {
                metric: Metric::BurstTtftP90,
                runs: 1,
                needs: 10,
            },
            NotGated::BurstThin {
                completed: 20,
                needs: 29,
            },
        ];
        assert_contains(
            &first_line(&r),
            "; not gated: burst TTFT p90 (1 run since its accepted change, it gates from 10), \
             burst TTFT p90 (20 completed requests, a p90 needs 29)",
        );
        r.not_gated = vec![NotGated::PrefillNotMeasured, NotGated::BurstNotMeasured];
        assert_contains(
            &first_line(&r),
            "; not gated: prefill tok/s and the burst layer (not measured)",
        );
        // A tail gated in some cells is said there (`ITL p99 in 4 of 6`), not again.
        r.cell_metrics_gated = vec![Metric::ItlP99];
        for c in &mut r.cells[..4] {
            (c.metrics).push(metric(
                Metric::ItlP99,
                0.01,
                0.02,
                0.05,
                CellVerdict::Unchanged,
            ));
        }
        r.not_gated = vec![NotGated::ThinCells {
            metric: Metric::ItlP99,
            cells: 2,
            of: 6,
            fewest: 150,
            most: 200,
            quantile: 0.99,
            needs: 299,
        }];
        let line = first_line(&r);
        assert_contains(&line, "ITL p99 in 4 of 6");
        assert_lacks(&line, "not gated");
        // An older file's words: the Details quote them.
        r.not_gated = vec![NotGated::Recorded(
            "ITL p99 is reported, not gated: …".into(),
        )];
        assert_contains(&first_line(&r), "; not gated: as the Details say");
    }

    /// Every way a gating metric does not gate, with its words.
    fn not_gated() -> Vec<(NotGated, &'static str)> {
        vec![
            (
                NotGated::ShortHistory {
                    metric: Metric::ItlP99,
                    runs: 1,
                    needs: 10,
                },
                "ITL p99 is reported, not gated: the history has 1 run, a latency percentile gates from 10",
            ),
            (
                NotGated::ThinCells {
                    metric: Metric::TtftP90,
                    cells: 6,
                    of: 20,
                    fewest: 2,
                    most: 8,
                    quantile: 0.9,
                    needs: 29,
                },
                "TTFT p90 not gated in 6 cells of 20: 2–8 observations each, a p90 needs 29",
            ),
            (
                NotGated::PrefillShortHistory { runs: 6, needs: 10 },
                "prefill tok/s is reported, not gated: 6 of the history's runs have the prefill layer, it gates from 10",
            ),
            (
                NotGated::RestartedShort {
                    metric: Metric::BurstTtftP90,
                    runs: 3,
                    needs: 10,
                },
                "burst TTFT p90 is reported, not gated: 3 runs since its accepted change, it gates from 10",
            ),
            (
                NotGated::BurstShortHistory { runs: 8, needs: 10 },
                "the burst layer is reported, not gated: 8 of the history's runs have it, it gates from 10",
            ),
            (
                NotGated::BurstThin {
                    completed: 16,
                    needs: 29,
                },
                "burst TTFT p90 not gated: 16 completed requests, a p90 needs 29",
            ),
            (
                NotGated::PrefillNotMeasured,
                "prefill tok/s is not gated: neither this run nor its history measured the prefill layer",
            ),
            (
                NotGated::BurstNotMeasured,
                "the burst layer is not gated: neither this run nor its history sent a burst",
            ),
        ]
    }

    /// Why the adaptive rounds stopped, as `run`'s event and console line say it.
    #[test]
    fn rounds_stop_in_their_words() {
        for (stop, words) in [
            (RoundsStop::NoCellLeans, "no cell leans worse"),
            (RoundsStop::MaxRounds(2), "max_rounds (2) spent"),
            (
                RoundsStop::GateRegressed,
                "the gate already found a regression: more rounds cannot change the exit code",
            ),
            (
                RoundsStop::SecondBootDecides,
                "a second boot decides: this boot already calls for one",
            ),
            (
                RoundsStop::MaxExtraSeconds(120.0),
                "max_extra_seconds (120 s) spent",
            ),
            (RoundsStop::Cancelled, "cancelled"),
            (
                RoundsStop::NotRecorded,
                "the recorded run has no further rounds",
            ),
        ] {
            assert_eq!(stop.to_string(), words);
        }
    }

    /// A cell's own improvement is found by its outcome whether the model typed it or it was
    /// read from a file.
    #[test]
    fn a_recorded_outcome_equals_the_typed_one_by_its_words() {
        assert_eq!(
            CheckOutcome::Recorded("improvement".into()),
            CheckOutcome::Improvement
        );
        assert_ne!(
            CheckOutcome::Recorded("improvement on each boot".into()),
            CheckOutcome::Improvement
        );
    }
}
