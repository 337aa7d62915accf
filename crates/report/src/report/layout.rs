//! One layout for every surface (console, check run, PR comment, job summary, annotations):
//! a first line that is the answer in words ([`infergate_schema::answer::first_line`], also
//! `verdict.json`'s headline), one compact matrix
//! with one symbol and one number per cell, a legend of only the symbols that appear, and the
//! basis, rule and arithmetic under "Details". Every surface renders this one [`GateLayout`],
//! so they cannot disagree, and every number goes through one formatter per unit.
//!
//! The words of the gate and of the cells come from [`infergate_schema::answer`] only.

use std::collections::BTreeSet;

use crate::report::console::{align_right, fitted_table, push_wrapped, wrap};
use infergate_io::untrusted_text::markdown as escape;
use infergate_schema::answer::{
    NextStep, StepContext, bounds, cell_label, cell_symbol, cell_word, cells_word, direction_word,
    first_line, interval, label, metric_label, metric_name, next_steps, plural, probe_late, sized,
    value_range, vouched_latencies, with_unit,
};
use infergate_schema::results::{RunResults, TelemetrySummary, context_label, itl_is_latency};
use infergate_schema::verdict::{
    Against, CellComparison, CellVerdict, ComparisonReport, DecisionBasis, GateVerdict, Metric,
    MetricComparison, NotGated, signed_number, signed_percent,
};

/// Beside a figure the gate shows but does not gate on.
const REPORTED_ONLY: &str = " (reported only)";

/// The figure beside a cell that was decided on its change against the rest of its own run,
/// where that change is not the total the grid shows.
const VS_RUN: &str = "†";
/// The figure beside a cell decided on another metric than aggregate tok/s.
const OTHER_METRIC: &str = "*";
/// The figure beside a cell whose test found a change over both boots that the second boot
/// alone did not show: its figure is the two boots' mean, its verdict the second boot's.
const ONE_BOOT: &str = "‡";
/// The figures beside a cell's number, each with its meaning for the legend.
const MARKS: [(&str, &str); 3] = [
    (
        VS_RUN,
        "decided on its change against the rest of its own run (the matrix's common move taken out), not on this total (see Details)",
    ),
    (OTHER_METRIC, "decided on another metric (see Details)"),
    (
        ONE_BOOT,
        "moved on one boot only: the second boot alone did not (see Details)",
    ),
];

/// The run's GPU telemetry in words, when it was sampled: devices, energy, J/token, mean power,
/// hottest reading and every clock limit seen (the power cap included), so a reader can tell a
/// cool idle GPU from a hot, capped one. Plain text: the console wraps it, Markdown escapes it.
pub(crate) fn telemetry_text(t: &TelemetrySummary) -> Option<String> {
    if t.status != "available" {
        return None;
    }
    // A figure the GPU did not report (no energy counter, no power reading) is left out, not
    // shown as a dash; no J/token where the GPU made none of the tokens (it ran no kernel) or
    // none were counted.
    let mut parts = vec![t.devices.join(", ")];
    parts.extend(t.energy_j.map(|e| format!("energy {e:.0} J")));
    parts.extend(t.joules_per_token.map(|j| match t.idle_windows {
        // The energy above counts every window; J/token only those the GPU worked in.
        Some(n) => format!(
            "{} ({} left out)",
            with_unit(Metric::JoulesPerToken, j),
            plural(n, "idle-GPU window")
        ),
        None => with_unit(Metric::JoulesPerToken, j),
    }));
    parts.extend(t.power_w_avg.map(|p| format!("avg power {p:.0} W")));
    parts.extend(t.temperature_c_max.map(|c| format!("max {c:.0} °C")));
    if !t.throttle_reasons.is_empty() {
        parts.push(format!(
            "clocks limited by {}",
            t.throttle_reasons.join(", ")
        ));
    }
    Some(parts.join(" · "))
}

/// The cells whose window saw the GPU slow its clocks for heat or a hardware signal
/// ([`infergate_schema::results::CellTelemetry::clock_slowdowns`]), as `C=4 / 8k (hw_thermal_slowdown)`.
pub(crate) fn slowed_cells(results: &RunResults) -> Vec<String> {
    results
        .cells
        .iter()
        .filter_map(|c| {
            let seen = c.telemetry.as_ref()?.clock_slowdowns();
            (!seen.is_empty()).then(|| {
                format!(
                    "{} ({})",
                    cell_label(c.concurrency, c.context_tokens),
                    seen.join(", ")
                )
            })
        })
        .collect()
}

/// The warning for cells measured while the GPU slowed its clocks for heat or a hardware
/// signal ([`slowed_cells`]; `boot` names the boot when it is not the first): their figures
/// may be the runner's, not the engine's, so a reviewer should know before trusting a change
/// in them.
pub(crate) fn clock_slowdown_text(results: &RunResults, boot: &str) -> Option<String> {
    let cells = slowed_cells(results);
    (!cells.is_empty()).then(|| {
        format!(
            "the GPU slowed its clocks for heat or a hardware signal in {}{boot}: {}; their figures measure the runner's cooling or power delivery as well as the engine",
            cells_word(cells.len()),
            cells.join(", ")
        )
    })
}

/// [`clock_slowdown_text`] of each boot of a gate: the first, then the confirmation boot.
pub fn clock_cautions(first: &RunResults, confirmation: Option<&RunResults>) -> Vec<String> {
    clock_slowdown_text(first, "")
        .into_iter()
        .chain(confirmation.and_then(|c| clock_slowdown_text(c, " of the confirmation boot")))
        .collect()
}

/// Whether a metric's values can be right: an inter-token latency percentile (p50 and up) is
/// only shown when both are latencies ([`itl_is_latency`]: not tokens that
/// came together).
fn plausible(cell: &CellComparison, m: &MetricComparison) -> bool {
    if !(m.baseline.is_finite() && m.candidate.is_finite() && m.baseline > 0.0 && m.candidate > 0.0)
    {
        return false;
    }
    if !matches!(m.metric, Metric::ItlP50 | Metric::ItlP90 | Metric::ItlP99) {
        return true;
    }
    let per_user = cell.metrics.iter().find(|x| x.metric == Metric::PerUserTps);
    itl_is_latency(m.baseline, per_user.map(|p| p.baseline))
        && itl_is_latency(m.candidate, per_user.map(|p| p.candidate))
}

/// One matrix cell: its number (a change in %, or a short word) and its symbol.
#[derive(Debug, Clone, PartialEq)]
pub struct GridCell {
    /// `−9.6`, `−12.0†`, `cap`, `err`, or empty.
    pub number: String,
    /// The verdict's symbol.
    pub symbol: &'static str,
    /// The verdict (for the legend).
    pub verdict: CellVerdict,
    /// `3,000 → 2,712`: the cell's aggregate tok/s, baseline (or A) → now (or B), beside its
    /// change; `None` where a side has no value.
    pub values: Option<String>,
}

impl GridCell {
    /// `−9.6 ✗`, `–`.
    pub fn text(&self) -> String {
        if self.number.is_empty() {
            self.symbol.to_string()
        } else {
            format!("{} {}", self.number, self.symbol)
        }
    }
}

/// A cell as the grid shows it. In an `insufficient` gate a cell no test decided shows `?`
/// (not decided), not `✓`: the gate could not see the design effect, so no cell passed it (a
/// `−4.2 ✓` under "insufficient" read as a contradiction). `verdict.json` keeps the cell's
/// own `unchanged`.
fn grid_cell(c: &CellComparison, gate: GateVerdict) -> GridCell {
    let shown = as_shown(c.verdict, gate);
    let (symbol, _) = cell_symbol(shown);
    let number = match (shown, c.deciding()) {
        (CellVerdict::NotComparable, _) => String::new(),
        (CellVerdict::CapacityRegression, _) => "cap".into(),
        (CellVerdict::ErrorRegression, _) => "err".into(),
        (CellVerdict::Saturated | CellVerdict::SaturationRegression, _) => "sat".into(),
        (_, None) => String::new(),
        (v, Some(m)) => {
            // Every figure is the cell's change vs the baseline, as the grid's caption says;
            // a cell decided on its change against the rest of its run says so where that
            // change reads otherwise (a row slower in a two-row matrix: −5.1 against its run,
            // −10.0 in total).
            let decided = matches!(v, CellVerdict::Regression | CellVerdict::Improvement);
            let mut n = signed_number(100.0 * m.shown_change_total().change, 1);
            let d = m.shown_change();
            if decided && d.basis == DecisionBasis::VsRun && signed_number(100.0 * d.change, 1) != n
            {
                n.push_str(VS_RUN);
            }
            if m.metric != Metric::AggregateTps {
                n.push_str(OTHER_METRIC);
            }
            if !decided && m.check.as_ref().is_some_and(|c| c.screen) {
                n.push_str(ONE_BOOT);
            }
            n
        }
    };
    // Beside the change, what it is a change of: the deciding metric's values (aggregate
    // tok/s as the caption says, else that metric with its unit), or the cell's tok/s for a
    // cell shown by a word (`cap`, `err`).
    let values = if number.is_empty() {
        None
    } else {
        // `deciding` falls back to the primary (aggregate tok/s) itself.
        c.deciding()
            .filter(|m| m.baseline.is_finite() && m.candidate.is_finite())
            .map(|m| match m.metric {
                Metric::AggregateTps => tps_values(m),
                _ => values(m),
            })
    };
    GridCell {
        number,
        symbol,
        verdict: shown,
        values,
    }
}

/// A verdict as a surface shows it in `gate`: `unchanged` is `?` (not decided) in an
/// `insufficient` gate, which could not see its design effect and so passed nothing.
fn as_shown(verdict: CellVerdict, gate: GateVerdict) -> CellVerdict {
    if gate == GateVerdict::Insufficient && verdict == CellVerdict::Unchanged {
        CellVerdict::Inconclusive
    } else {
        verdict
    }
}

/// Aggregate tok/s in a grid cell: `2,712` from 1,000 up, `151.6` below (the caption gives
/// the unit).
fn tps(x: f64) -> String {
    if x.abs() >= 1000.0 {
        crate::report::console::tok_s(x)
    } else {
        format!("{x:.1}")
    }
}

/// `3,000 → 2,712`: a throughput's baseline → now, figures as [`tps`] writes them.
fn tps_values(m: &MetricComparison) -> String {
    format!("{} → {}", tps(m.baseline), tps(m.candidate))
}

/// `41.2 ms → 58.0 ms`: a metric's baseline → now, with its unit.
fn values(m: &MetricComparison) -> String {
    format!(
        "{} → {}",
        with_unit(m.metric, m.baseline),
        with_unit(m.metric, m.candidate)
    )
}

/// The matrix: context rows × concurrency columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Column heads (concurrency), ascending.
    pub concurrency: Vec<u32>,
    /// One row per context, ascending: its label and one cell per column (`None`: not in the
    /// matrix).
    pub rows: Vec<(String, Vec<Option<GridCell>>)>,
}

/// A significant change of a latency or secondary metric, with units.
#[derive(Debug, Clone, PartialEq)]
pub struct SecondaryChange {
    /// `C=8 / 32k`.
    pub cell: String,
    /// `TTFT p90`.
    pub metric: &'static str,
    /// `41.2 ms → 58.0 ms`.
    pub values: String,
    /// `+40.8% [+30.1, +52.0] higher`.
    pub change: String,
}

/// One row of a layer's table: a context of the prefill layer, a metric of the burst layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRow {
    /// `8k` (prefill), `TTFT p90` (burst).
    pub name: String,
    /// The verdict's symbol and the change vs baseline with its interval: `✗ −75.0% [−77.1,
    /// −72.8]`, or why it was not compared.
    pub change: String,
    /// `52,000 → 13,000 tok/s`, `41.2 ms → 55.0 ms`.
    pub values: String,
    /// The figure does not gate (`change` ends `(reported only)`): the legend then has `–`,
    /// and a table of such rows does not call itself gated.
    pub reported_only: bool,
}

/// Everything a surface shows, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct GateLayout {
    /// The answer: symbol, size and interval, cells, and how sure.
    pub first_line: String,
    /// What the table's numbers are.
    pub grid_caption: String,
    /// The matrix (`None` when no cell was compared).
    pub grid: Option<Grid>,
    /// Only the symbols that appear: (symbol, meaning).
    pub legend: Vec<(&'static str, &'static str)>,
    /// Significant, plausible latency and secondary changes.
    pub secondary: Vec<SecondaryChange>,
    /// The decode cells' gated metrics besides aggregate tok/s (`ITL p99`), one row each over
    /// the cells: what a green check vouches for there, not only what moved; then the rule's
    /// tails that did not gate for want of history runs, reported only.
    pub latency: Vec<LayerRow>,
    /// The prefill layer, one row per context (empty where not measured).
    pub prefill: Vec<LayerRow>,
    /// The burst layer, one row per compared metric (empty where no burst was sent).
    pub burst: Vec<LayerRow>,
    /// The basis, the rule and the arithmetic, one paragraph each.
    pub details: Vec<String>,
    /// What a developer can do next ([`infergate_schema::answer::next_steps`]), where it applies.
    pub next_steps: Vec<NextStep>,
}

/// Builds the layout of a comparison, with the next steps that need no context of the run.
pub fn layout(report: &ComparisonReport) -> GateLayout {
    layout_with(report, &StepContext::default())
}

/// Builds the layout of a comparison; `steps` says how the gate ran (its config, its
/// `fail_on`), for the next steps.
pub(crate) fn layout_with(report: &ComparisonReport, steps: &StepContext) -> GateLayout {
    let grid = grid(report);
    let mut legend: Vec<(&'static str, &'static str)> = Vec::new();
    let mut extra: Vec<(&'static str, &'static str)> = Vec::new();
    if let Some(g) = &grid {
        let mut seen = BTreeSet::new();
        for cell in g.rows.iter().flat_map(|(_, cells)| cells.iter().flatten()) {
            if seen.insert(cell.symbol) {
                legend.push(cell_symbol(cell.verdict));
            }
            for (mark, meaning) in MARKS {
                if cell.number.contains(mark) && !extra.iter().any(|(s, _)| *s == mark) {
                    extra.push((mark, meaning));
                }
            }
        }
    }
    let latency = [latency_rows(report), reported_latency_rows(report)].concat();
    let (prefill, burst) = (prefill_rows(report), burst_rows(report));
    let shown = (report.prefill.iter().chain(&report.burst)).map(|c| c.verdict);
    // A figure reported only is marked as not compared by the gate.
    let reported = (latency.iter().chain(&prefill).chain(&burst))
        .any(|r| r.reported_only)
        .then_some(CellVerdict::NotComparable);
    for verdict in shown.chain(reported) {
        let symbol = cell_symbol(verdict);
        if !legend.contains(&symbol) {
            legend.push(symbol);
        }
    }
    // A cell decided on another metric shows that metric's change and values (`*`): the
    // caption names it so the grid does not read as tok/s in milliseconds.
    let other = extra.iter().any(|(mark, _)| *mark == OTHER_METRIC);
    legend.extend(extra);
    let what = if other {
        "aggregate tok/s (* another metric)"
    } else {
        "aggregate tok/s"
    };
    GateLayout {
        first_line: first_line(report),
        grid_caption: match report.against {
            Against::Baseline => format!("{what}, change vs baseline in %, and baseline → now"),
            Against::PairedAb => format!("{what}, change of B vs A in %, and A → B"),
        },
        grid,
        legend,
        secondary: secondary(report),
        latency,
        prefill,
        burst,
        details: details(report),
        next_steps: next_steps(report, steps),
    }
}

fn grid(report: &ComparisonReport) -> Option<Grid> {
    if report.cells.is_empty() {
        return None;
    }
    let contexts: BTreeSet<u64> = report.cells.iter().map(|c| c.context_tokens).collect();
    let concurrency: Vec<u32> = report
        .cells
        .iter()
        .map(|c| c.concurrency)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rows = contexts
        .into_iter()
        .map(|ctx| {
            let cells = concurrency
                .iter()
                .map(|&conc| {
                    report
                        .cells
                        .iter()
                        .find(|c| c.concurrency == conc && c.context_tokens == ctx)
                        .map(|c| grid_cell(c, report.gate))
                })
                .collect();
            (context_label(ctx), cells)
        })
        .collect();
    Some(Grid { concurrency, rows })
}

/// The rows of the decode cells' gated metrics besides aggregate tok/s, one per metric that
/// gated in a cell: the worst verdict's symbol (`?` for an undecided one, as the grid), the
/// cells' changes (one cell: its change and interval; the regressed named), the change that
/// fails, and the cells' values, baseline → now.
fn latency_rows(report: &ComparisonReport) -> Vec<LayerRow> {
    report
        .gated_cell_metrics()
        .into_iter()
        .filter_map(|(metric, cells)| {
            let late = report.host_late_of(metric);
            let unvouched = (!late.is_empty()).then(|| {
                format!(
                    "not vouched for in {} ({})",
                    cells_word(late.len()),
                    probe_late(metric, &late)
                )
            });
            if cells.is_empty() {
                // Gated in no cell because the host ran late in each: the row says so.
                return unvouched.map(|text| LayerRow {
                    name: metric_name(metric).to_string(),
                    change: format!("{} {text}", cell_symbol(CellVerdict::Inconclusive).0),
                    values: format!(
                        "now {}",
                        value_range(metric, late.iter().map(|h| h.value_s))
                    ),
                    reported_only: false,
                });
            }
            let regressed: Vec<&CellComparison> = cells
                .iter()
                .filter(|(_, m)| m.verdict == CellVerdict::Regression)
                .map(|(c, _)| *c)
                .collect();
            // Cells whose bound reaches the change that fails: not vouched for either.
            let open: Vec<&MetricComparison> = cells
                .iter()
                .filter(|(c, m)| c.unvouched(m))
                .map(|(_, m)| *m)
                .collect();
            let worst = if !regressed.is_empty() {
                CellVerdict::Regression
            } else if !open.is_empty()
                || cells
                    .iter()
                    .any(|(_, m)| m.verdict == CellVerdict::Inconclusive)
            {
                CellVerdict::Inconclusive
            } else {
                CellVerdict::Unchanged
            };
            let metrics: Vec<&MetricComparison> = cells.iter().map(|(_, m)| *m).collect();
            let mut change = cells_change(&metrics);
            // The regressed cells by name where a few are (the list above has each).
            match regressed.len() {
                0 => {}
                k if k == cells.len() && k > 1 => change.push_str(", all regressed"),
                k if k <= 3 => {
                    let names: Vec<String> = regressed.iter().map(|c| label(c)).collect();
                    change.push_str(&format!(", {k} regressed ({})", names.join(", ")));
                }
                k => change.push_str(&format!(", {k} regressed")),
            }
            // The margin a change must pass to fail: the same for every cell of a metric.
            let fails = cells[0].1.fails_beyond();
            let wide = open
                .iter()
                .map(|m| m.worse_bound())
                .max_by(|a, b| (a * fails).total_cmp(&(b * fails)))
                .map(|far| {
                    format!(
                        "; not vouched for in {} (95% bound to {})",
                        cells_word(open.len()),
                        signed_percent(far)
                    )
                });
            Some(LayerRow {
                name: metric_name(metric).to_string(),
                change: format!(
                    "{} {change} (fails beyond {}){}{}",
                    cell_symbol(as_shown(worst, report.gate)).0,
                    signed_percent(fails),
                    wide.unwrap_or_default(),
                    unvouched.map_or_else(String::new, |text| format!("; {text}"))
                ),
                values: cells_values(metric, &metrics),
                reported_only: false,
            })
        })
        .collect()
}

/// The cells' change of one metric: one cell's with its interval, else their range (`+1.0% to
/// +40.0% in 6 cells`).
fn cells_change(cells: &[&MetricComparison]) -> String {
    match cells {
        [m] => {
            let d = m.shown_change_total();
            format!(
                "{} {}",
                signed_percent(d.change),
                interval(d.ci_low, d.ci_high)
            )
        }
        _ => {
            let (lowest, highest) = bounds(cells.iter().map(|m| m.shown_change_total().change));
            format!(
                "{} to {} in {}",
                signed_percent(lowest),
                signed_percent(highest),
                cells_word(cells.len())
            )
        }
    }
}

/// The cells' values of `metric`, baseline → now (`6.21–10.4 ms → 6.34–9.97 ms`).
fn cells_values(metric: Metric, cells: &[&MetricComparison]) -> String {
    format!(
        "{} → {}",
        value_range(metric, cells.iter().map(|m| m.baseline)),
        value_range(metric, cells.iter().map(|m| m.candidate))
    )
}

/// The rule's tail latencies that did not gate for want of history runs (a young store, a tail
/// restarted alone by `baseline accept --metric`): their change over the cells, reported only,
/// so the reader of a green check sees the figure it does not vouch for.
fn reported_latency_rows(report: &ComparisonReport) -> Vec<LayerRow> {
    let short = report.not_gated.iter().filter_map(|n| match n {
        NotGated::ShortHistory { metric, .. } | NotGated::RestartedShort { metric, .. } => {
            Some(*metric)
        }
        _ => None,
    });
    short
        .filter_map(|metric| {
            let cells: Vec<&MetricComparison> = (report.cells.iter())
                .filter_map(|c| c.metric(metric))
                .filter(|m| m.baseline.is_finite() && m.candidate.is_finite())
                .collect();
            (!cells.is_empty()).then(|| LayerRow {
                name: metric_name(metric).to_string(),
                change: format!(
                    "{} {}{REPORTED_ONLY}",
                    cell_symbol(CellVerdict::NotComparable).0,
                    cells_change(&cells)
                ),
                values: cells_values(metric, &cells),
                reported_only: true,
            })
        })
        .collect()
}

/// Whether every row of the decode latency gated (its table's title says "gated").
fn latency_all_gated(l: &GateLayout) -> bool {
    !l.latency.iter().any(|r| r.reported_only)
}

/// The prefill layer's rows: each context's verdict, change and values (prefill tok/s of the
/// cold samples), whether or not it moved: the layer's table is small and complete.
fn prefill_rows(report: &ComparisonReport) -> Vec<LayerRow> {
    let mut rows: Vec<&CellComparison> = report.prefill.iter().collect();
    rows.sort_by_key(|c| c.context_tokens);
    rows.into_iter()
        .map(|c| {
            let name = context_label(c.context_tokens);
            match c.metric(Metric::PrefillTps) {
                Some(m) => layer_row(name, c.verdict, (c, m), report.layer_gates(m.metric)),
                None => not_compared_row(name, c),
            }
        })
        .collect()
}

/// The burst layer's rows: each metric's verdict, change and values (total tok/s, TTFT p90),
/// or the one reason it was not compared.
fn burst_rows(report: &ComparisonReport) -> Vec<LayerRow> {
    let Some(c) = report.burst.first() else {
        return Vec::new();
    };
    if c.metrics.is_empty() {
        return vec![not_compared_row("burst".into(), c)];
    }
    c.metrics
        .iter()
        .map(|m| {
            let name = metric_name(m.metric).to_string();
            layer_row(name, m.verdict, (c, m), report.layer_gates(m.metric))
        })
        .collect()
}

/// A layer's row of metric `m`: the verdict's symbol, the change vs baseline with its
/// interval (`(reported only)` where the layer does not gate) and the values, tok/s as the
/// grid writes them.
fn layer_row(
    name: String,
    verdict: CellVerdict,
    (c, m): (&CellComparison, &MetricComparison),
    gated: bool,
) -> LayerRow {
    let d = m.shown_change_total();
    let values = if !(m.baseline.is_finite() && m.candidate.is_finite()) {
        String::new()
    } else if matches!(m.metric, Metric::PrefillTps | Metric::BurstTps) {
        format!("{} tok/s", tps_values(m))
    } else {
        values(m)
    };
    // A gated figure whose interval reaches what a pass vouches (twice the layer's margin) is
    // not vouched for.
    let open = gated && c.unvouched(m);
    // A figure that does not gate is marked as not compared by the gate, whatever its test
    // found: `✓` beside it would read as vouched for (as the prefill's and a tail's rows are).
    let (verdict, note) = match (gated, open) {
        (false, _) => (CellVerdict::NotComparable, REPORTED_ONLY.to_string()),
        (true, true) => (
            CellVerdict::Inconclusive,
            format!(
                " (not vouched for: could be {} or worse)",
                signed_percent(c.vouched_to(m))
            ),
        ),
        (true, false) => (verdict, String::new()),
    };
    LayerRow {
        name,
        change: format!(
            "{} {} {}{note}",
            cell_symbol(verdict).0,
            signed_percent(d.change),
            interval(d.ci_low, d.ci_high),
        ),
        values,
        reported_only: !gated,
    }
}

/// A layer's row that was not compared, with why.
fn not_compared_row(name: String, c: &CellComparison) -> LayerRow {
    LayerRow {
        name,
        change: format!(
            "{} {}",
            cell_symbol(c.verdict).0,
            c.reason
                .as_ref()
                .map_or_else(|| "not compared".into(), ToString::to_string)
        ),
        values: String::new(),
        reported_only: false,
    }
}

/// Where the level and the noise came from: `baseline level from 7 runs, noise from 20`, or
/// an A/B run's `A's level from 4 boots, noise from 4 pairs`.
fn level_and_noise(report: &ComparisonReport) -> String {
    let (level, noise) = (report.baseline.level_runs.len(), report.baseline.noise_runs);
    match report.against {
        Against::Baseline => format!(
            "baseline level from {}, noise from {noise}",
            plural(level, "run")
        ),
        Against::PairedAb => format!(
            "A's level from {}, noise from {}",
            plural(level, "boot"),
            plural(noise, "pair")
        ),
    }
}

fn secondary(report: &ComparisonReport) -> Vec<SecondaryChange> {
    let mut out = Vec::new();
    for c in &report.cells {
        for m in &c.metrics {
            if m.metric == Metric::AggregateTps
                || !matches!(
                    m.verdict,
                    CellVerdict::Regression | CellVerdict::Improvement
                )
                || !plausible(c, m)
                // "significant changes only": a metric that followed its cell's verdict but
                // whose own interval holds no change is not listed as one.
                || (m.ci_low <= 0.0 && m.ci_high >= 0.0)
            {
                continue;
            }
            out.push(SecondaryChange {
                cell: label(c),
                metric: metric_name(m.metric),
                values: values(m),
                change: format!(
                    "{} {} {}",
                    signed_percent(m.change),
                    interval(m.ci_low, m.ci_high),
                    direction_word(m.change)
                ),
            });
        }
    }
    out
}

/// Where the intervals' boot-to-boot noise comes from a prior, the words that say so: with
/// one baseline run no run-to-run scatter is measured yet (a prior CV of 3% stands in for
/// it), and with a second boot the boots' own scatter joins it.
fn prior_note(report: &ComparisonReport) -> Option<String> {
    if report.against != Against::Baseline || report.baseline.noise_runs > 1 {
        return None;
    }
    Some(if report.candidate_runs.len() > 1 {
        "Intervals from a prior: one baseline run shows no run-to-run scatter, so the noise is a prior (3% per cell, 1.5% per boot) pooled with the scatter of this candidate's boots; record more baseline runs.".into()
    } else {
        "Intervals from a prior: one baseline run and one boot show no run-to-run scatter, so the noise is a prior (3% per cell, 1.5% per boot), not a measurement; record more baseline runs.".into()
    })
}

/// `p = 0.0021`, `p < 0.0001`.
fn p_text(p: f64) -> String {
    if p < 1e-4 {
        "p < 0.0001".into()
    } else {
        format!("p = {p:.4}")
    }
}

/// The lines under "Details", in reading order: the matrix-wide test, the tests that decided,
/// the second boot, the sensitivity, the cells the table cannot say alone, the rule, the
/// profile.
fn details(report: &ComparisonReport) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = &report.matrix_test {
        out.push(matrix_line(m));
        if let Some(note) = prior_note(report) {
            out.push(note);
        }
    }
    // The tests that decided, each redoable by hand: statistic, reference, boundary, alpha.
    out.extend(report.check_lines());
    // A gating metric that did not gate here says so, with why.
    if !report.not_gated.is_empty() {
        let said: Vec<String> = report.not_gated.iter().map(ToString::to_string).collect();
        out.push(format!("Not gated: {}.", said.join("; ")));
    }
    out.extend(report.history_host_late.iter().map(|h| format!("{h}.")));
    // A metric restarted alone (`baseline accept --metric`) has fewer runs than the rest.
    out.extend(report.baseline.metric_since.iter().map(|m| {
        format!(
            "Baseline of {}: the runs since its accepted change at run {} only; the other metrics keep every run.",
            metric_label(m.metric),
            m.since_run_id
        )
    }));
    if let Some(c) = &report.confirmation {
        out.push(confirmation_line(c));
    }
    if let Some(s) = &report.sensitivity {
        out.push(sensitivity_line(s));
    }
    out.extend(report.cells.iter().filter_map(cell_detail));
    out.push(rule_line(report));
    out.push(format!(
        "Profile {} · engine {} · model {}{}.",
        report.profile.key,
        report.profile.engine,
        report.profile.model,
        report
            .suite
            .as_deref()
            .map(|s| format!(" · suite {s}"))
            .unwrap_or_default()
    ));
    out
}

/// The matrix-wide test: mean change, interval, cells and what it shows.
fn matrix_line(m: &infergate_schema::verdict::MatrixTest) -> String {
    format!(
        "Matrix-wide: mean aggregate tok/s change {} {} over {}: {}.",
        signed_percent(m.change),
        interval(m.ci_low, m.ci_high),
        cells_word(m.cells),
        match m.verdict {
            CellVerdict::Regression => "a matrix-wide regression",
            CellVerdict::Improvement => "matrix-wide faster",
            _ => "no matrix-wide regression shown",
        }
    )
}

/// Whether the second boot counted in the verdict, and why.
fn confirmation_line(c: &infergate_schema::verdict::Confirmation) -> String {
    if c.used {
        let first = c
            .first_boot
            .as_ref()
            .map(|m| {
                format!(
                    " First boot alone, matrix-wide: {} {}, {}.",
                    signed_percent(m.change),
                    interval(m.ci_low, m.ci_high),
                    p_text(m.p_value)
                )
            })
            .unwrap_or_default();
        format!(
            "Second boot: {}; the verdict tests both boots together ({}).{first}",
            c.reason, c.second_results
        )
    } else {
        format!(
            "Second boot not used: {}; the verdict is the first boot's alone.",
            c.reason
        )
    }
}

/// The smallest slowdowns the gate finds at its design power, over the matrix and in one cell.
fn sensitivity_line(s: &infergate_schema::verdict::Sensitivity) -> String {
    let mut line = format!(
        "Sensitivity at {:.0}% power with {}:",
        100.0 * s.design_power,
        s.unit.count(s.history_runs)
    );
    if let Some(m) = s.matrix_mde {
        line.push_str(&format!(
            " a uniform {} over the matrix;",
            signed_percent(m)
        ));
    }
    if let Some(median) = s.median_cell_mde() {
        // A cell whose test cannot find even a total loss has no MDE to print: `−100.0%`
        // would read as a figure.
        if signed_percent(median) == signed_percent(-1.0) {
            line.push_str(" no slowdown in one cell alone (median cell);");
        } else {
            line.push_str(&format!(
                " {} in one cell alone (median cell);",
                signed_percent(median)
            ));
        }
    }
    line.pop();
    if s.level_lag > 0.0 {
        // Why the matrix test and its MDE are wider than the runs' scatter says.
        line.push_str(&format!(
            "; the level lags the history's slowing by {:.1}%, counted in the matrix-wide \
             test's noise",
            100.0 * s.level_lag
        ));
    }
    line.push('.');
    line
}

/// A cell's line, `None` when the table and the matrix-wide line say it all.
fn cell_detail(c: &CellComparison) -> Option<String> {
    // A decided cell whose figure in the table is its total change needs no line: the
    // table and the matrix-wide test say it all.
    let decided = matches!(
        c.verdict,
        CellVerdict::Regression | CellVerdict::Improvement
    );
    let figure = c.deciding().filter(|m| {
        decided
            && (m.metric != Metric::AggregateTps || m.shown_change().basis == DecisionBasis::VsRun)
    });
    // A cell that moved with the matrix is said by the matrix-wide test's line.
    let with_matrix = decided
        && c.deciding()
            .is_some_and(|m| m.shown_change().basis == DecisionBasis::WithMatrix);
    if c.verdict == CellVerdict::Unchanged
        || with_matrix
        || (figure.is_none() && c.reason.is_none())
    {
        return None;
    }
    let (symbol, word) = cell_symbol(c.verdict);
    let mut line = format!("{symbol} {}: {word}", label(c));
    if let Some(m) = figure {
        let d = m.shown_change();
        line.push_str(&format!(
            "; decided on {} {} {} {} (total {})",
            metric_name(m.metric),
            signed_percent(d.change),
            interval(d.ci_low, d.ci_high),
            d.label(),
            signed_percent(m.change)
        ));
    }
    if let Some(r) = &c.reason {
        line.push_str(&format!(" — {r}"));
    }
    Some(line)
}

/// The rule: α and how it is split, the effect a regression needs, the intervals, the level
/// and noise.
fn rule_line(report: &ComparisonReport) -> String {
    let r = &report.rule;
    let split = alpha_split(report);
    // What a pass vouches for in one cell (verdicts of earlier versions did not check it).
    let mut latencies: String = vouched_latencies(report)
        .iter()
        .map(|l| format!(", its {l}"))
        .collect();
    if report.prefill_gated || report.burst_gated {
        latencies.push_str(", each gated layer's within twice its margin");
    }
    let cells = r.cell_effect.map_or(String::new(), |e| {
        format!(
            "; a pass also needs every cell's interval above {}{latencies}",
            signed_percent(-e)
        )
    });
    format!(
        "Rule: α = {} per gate: {split}; a regression also needs a change beyond {:.1}% ({:.0}% \
         for the matrix){cells}; {:.0}% intervals; {}.",
        r.alpha,
        100.0 * r.min_effect,
        100.0 * r.matrix_margin,
        100.0 * r.confidence,
        level_and_noise(report)
    )
}

/// How α is split between the tests, every share named so that they add up to α.
fn alpha_split(report: &ComparisonReport) -> String {
    let r = &report.rule;
    match r.shares {
        Some(s) => {
            let mut capacity = if s.capacity > 0.0 {
                format!(", {:.2e} to capacity-limited cells", s.capacity)
            } else {
                String::new()
            };
            // What no test was given (an A/B comparison decides capacity by its counts), so
            // that the shares add up to α as printed.
            if let Some(secondary) = s.secondary {
                capacity.push_str(&format!(
                    ", {secondary:.2e} to the latency and other secondary metrics (half to their matrix-wide tests, half to their cells)"
                ));
            }
            let unspent = r.alpha - s.matrix - s.local - s.capacity - s.secondary.unwrap_or(0.0);
            if unspent > 1e-9 * r.alpha {
                capacity.push_str(&format!(", {unspent:.2e} unspent"));
            }
            // Without line tests (a paired A/B run, a matrix of one row or column) the cells
            // have the local share to themselves.
            let local = if s.lines > 0.0 {
                format!(
                    "rows, columns and cells ({:.2e} to the rows and columns, {:.2e} to the cells; {} within each family)",
                    s.lines,
                    s.local - s.lines,
                    r.correction_name()
                )
            } else if report.lines.is_empty() {
                format!("the cells ({})", r.correction_name())
            } else {
                // A verdict written before the lines' part was recorded.
                format!(
                    "rows, columns and cells ({} within each family)",
                    r.correction_name()
                )
            };
            format!(
                "{:.2e} to the matrix-wide test, {:.2e} to {local}{capacity}",
                s.matrix, s.local,
            )
        }
        None => format!(
            "half to the matrix-wide test and half to rows, columns and cells ({} within each \
             family)",
            r.correction_name()
        ),
    }
}

/// The annotation/workflow-command title of a cell: `C=8 / 32k: aggregate tok/s −9.6% [−10.9, −8.4]`.
pub(crate) fn cell_title(cell: &CellComparison) -> String {
    let name = label(cell);
    match (cell.verdict, cell.deciding()) {
        (
            CellVerdict::Regression | CellVerdict::Improvement | CellVerdict::Inconclusive,
            Some(m),
        ) => {
            let d = m.shown_change();
            format!(
                "{name}: {} {}",
                sized(m.metric, d.change, d.ci_low, d.ci_high),
                cell_symbol(cell.verdict).1
            )
        }
        (v, _) => format!("{name}: {}", cell_word(v)),
    }
}

/// `text` on one line: every run of whitespace, line breaks included, one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The annotation message of a cell: the deciding metric's levels with units, the change, its
/// interval and margin, and the cell's reason.
pub(crate) fn cell_message(cell: &CellComparison, confidence: f64) -> String {
    let mut parts = Vec::new();
    if let Some(m) = cell.deciding() {
        let d = m.shown_change();
        // Only a change against the rest of its run differs from the total; a cell that moved
        // with its row, column or matrix shows its total, and its reason says with what.
        let basis = match d.basis {
            DecisionBasis::VsRun => format!(", {}; total {}", d.label(), signed_percent(m.change)),
            _ => String::new(),
        };
        parts.push(format!(
            "{} {} ({}{basis}; {:.0}% interval {}; margin {:.1}%)",
            metric_name(m.metric),
            values(m),
            signed_percent(d.change),
            100.0 * confidence,
            interval(d.ci_low, d.ci_high),
            100.0 * m.margin
        ));
    }
    if let Some(r) = &cell.reason {
        parts.push(one_line(&r.to_string()));
    }
    if parts.is_empty() {
        parts.push(cell_symbol(cell.verdict).1.to_string());
    }
    parts.join("; ")
}

// ---- console ----------------------------------------------------------------------------

/// The layout for a terminal: no line wider than [`CONSOLE_WIDTH`].
pub(crate) fn console(l: &GateLayout) -> String {
    let mut out = wrap(&l.first_line, 2);
    out.push('\n');
    if let Some(g) = &l.grid {
        out.push_str(&format!("{}\n", l.grid_caption));
        let mut header = vec!["ctx \\ C".to_string()];
        header.extend(g.concurrency.iter().map(u32::to_string));
        let mut table = fitted_table(header);
        for (ctx, cells) in &g.rows {
            let mut row = vec![ctx.clone()];
            row.extend(cells.iter().map(|c| {
                c.as_ref()
                    .map(|c| match &c.values {
                        Some(v) => format!("{}\n{v}", c.text()),
                        None => c.text(),
                    })
                    .unwrap_or_default()
            }));
            table.add_row(row);
        }
        align_right(&mut table, 1..=g.concurrency.len());
        out.push_str(&format!("{table}\n"));
    }
    if !l.legend.is_empty() {
        push_wrapped(&mut out, &legend_text(&l.legend), 2);
    }
    if !l.secondary.is_empty() {
        out.push_str("Latency and other metrics (significant changes only):\n");
        for s in &l.secondary {
            push_wrapped(
                &mut out,
                &format!("  {}  {}  {}  {}", s.cell, s.metric, s.values, s.change),
                4,
            );
        }
    }
    for (title, rows) in [
        (
            if latency_all_gated(l) {
                "Decode latency (gated, change vs baseline over the cells):"
            } else {
                "Decode latency (change vs baseline over the cells):"
            },
            &l.latency,
        ),
        (
            "Prefill layer (prefill tok/s of cold samples, change vs baseline):",
            &l.prefill,
        ),
        ("Burst layer (change vs baseline):", &l.burst),
    ] {
        if !rows.is_empty() {
            out.push_str(&format!("{title}\n"));
        }
        for r in rows {
            push_wrapped(
                &mut out,
                &if r.values.is_empty() {
                    format!("  {}: {}", r.name, r.change)
                } else {
                    format!("  {}: {}, {}", r.name, r.change, r.values)
                },
                4,
            );
        }
    }
    out.push_str("Details:\n");
    for d in &l.details {
        push_wrapped(&mut out, &format!("  {d}"), 4);
    }
    if !l.next_steps.is_empty() {
        out.push_str("Next steps:\n");
        for step in &l.next_steps {
            let colon = if step.command.is_some() { ":" } else { "" };
            push_wrapped(&mut out, &format!("  {}{colon}", step.what), 4);
            if let Some(cmd) = &step.command {
                out.push_str(&format!("{}\n", shell_lines(cmd, 4)));
            }
        }
    }
    out
}

/// A command for the console, indented by `indent`: at most [`CONSOLE_WIDTH`] columns a line,
/// broken between words with a shell's ` \` continuation, so it still pastes as one command.
fn shell_lines(cmd: &str, indent: usize) -> String {
    let width = crate::report::console::CONSOLE_WIDTH - 2;
    let mut lines: Vec<String> = Vec::new();
    let mut line = " ".repeat(indent);
    // Words, a '…' quoted one kept whole (a break inside quotes would be part of the text).
    let mut words: Vec<String> = Vec::new();
    let mut quoted = false;
    for w in cmd.split(' ') {
        match words.last_mut() {
            Some(last) if quoted => {
                last.push(' ');
                last.push_str(w);
            }
            _ => words.push(w.to_string()),
        }
        if w.matches('\'').count() % 2 == 1 {
            quoted = !quoted;
        }
    }
    for word in &words {
        let started = !line.trim().is_empty();
        if started && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(format!("{line} \\"));
            line = " ".repeat(indent + 2);
        } else if started {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines.join("\n")
}

/// `✗ = regression · ✓ = no regression`: a key, never read as a second verdict under the table.
fn legend_text(legend: &[(&str, &str)]) -> String {
    legend
        .iter()
        .map(|(s, m)| format!("{s} = {m}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

// ---- Markdown ---------------------------------------------------------------------------

/// The layout as GitHub-flavoured Markdown: the first line (unless `with_first_line` is
/// false, for surfaces that show it as a title), the table, the legend, and Details collapsed.
/// Engine- and config-supplied text is escaped.
pub fn markdown(l: &GateLayout, with_first_line: bool) -> String {
    let mut out = String::new();
    if with_first_line {
        out.push_str(&format!("**{}**\n\n", escape(&l.first_line)));
    }
    out.push_str(&markdown_body(l, "", ""));
    out
}

/// Table, legend and Details, without the first line; `before_details` (Markdown, e.g. the
/// job summary's chart) goes between the legend and Details, `extra_details` at the end of
/// Details (both already escaped).
pub(crate) fn markdown_body(l: &GateLayout, before_details: &str, extra_details: &str) -> String {
    let mut out = String::new();
    markdown_grid(&mut out, l);
    markdown_layers(&mut out, l);
    if !l.legend.is_empty() {
        out.push_str(&format!("{}\n\n", escape(&legend_text(&l.legend))));
    }
    markdown_next_steps(&mut out, l);
    if !before_details.is_empty() {
        out.push_str(&format!("{before_details}\n"));
    }
    out.push_str("<details><summary>Details</summary>\n\n");
    markdown_secondary(&mut out, l);
    for d in &l.details {
        out.push_str(&format!("- {}\n", escape(d)));
    }
    out.push_str(extra_details);
    out.push_str("\n</details>\n");
    out
}

/// The grid as a Markdown table under its caption, each cell's values under its figure.
fn markdown_grid(out: &mut String, l: &GateLayout) {
    if let Some(g) = &l.grid {
        out.push_str(&format!("{}:\n\n", escape(&l.grid_caption)));
        out.push_str(&markdown_matrix_head(&g.concurrency));
        for (ctx, cells) in &g.rows {
            let mut row = vec![escape(ctx)];
            row.extend(cells.iter().map(|c| match c {
                Some(c) => match &c.values {
                    Some(v) => format!("{}<br>{}", escape(&c.text()), escape(v)),
                    None => escape(&c.text()),
                },
                None => String::new(),
            }));
            out.push_str(&markdown_row(&row));
        }
        out.push('\n');
    }
}

/// Text for a Markdown code span, as typed: backticks and line breaks cannot occur in one,
/// so they are taken out.
pub(crate) fn escape_code(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '`' | '\n' | '\r'))
        .collect()
}

/// A sentence of ours with `code` spans (a next step's: "the suite's `duration`") as
/// Markdown: each span kept a code span, the rest escaped as any text is; with an unpaired
/// backtick, all of it escaped.
fn escape_keeping_code(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return escape(text);
    }
    (parts.iter().enumerate())
        .map(|(i, p)| match i % 2 {
            1 => format!("`{}`", escape_code(p)),
            _ => escape(p),
        })
        .collect()
}

/// A Markdown table row, `| a | b |`: the cells as given (escape them first).
pub(crate) fn markdown_row<S: AsRef<str>>(cells: &[S]) -> String {
    let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
    format!("| {} |\n", cells.join(" | "))
}

/// A Markdown table's head: the names (as given), then the rule that right-aligns every
/// column but the first (the figures).
pub(crate) fn markdown_head<S: AsRef<str>>(names: &[S]) -> String {
    let figures = names.len().saturating_sub(1);
    format!("{}|---|{}\n", markdown_row(names), "---:|".repeat(figures))
}

/// The head of a context × concurrency matrix: `| context | C=1 | … |` and its rule.
pub(crate) fn markdown_matrix_head(concurrency: &[u32]) -> String {
    let mut names = vec!["context".to_string()];
    names.extend(concurrency.iter().map(|c| format!("C={c}")));
    markdown_head(&names)
}

/// The decode cells' gated latency, the prefill and the burst layers' tables, each only when
/// the run has it.
fn markdown_layers(out: &mut String, l: &GateLayout) {
    const WITH_INTERVAL: &str = "change vs baseline [interval, %]";
    for (title, name, change, rows) in [
        (
            if latency_all_gated(l) {
                "Decode latency (gated, over the cells)"
            } else {
                "Decode latency (over the cells)"
            },
            "metric",
            "change vs baseline in the cells",
            &l.latency,
        ),
        (
            "Prefill layer (prefill tok/s of cold samples)",
            "context",
            WITH_INTERVAL,
            &l.prefill,
        ),
        ("Burst layer", "metric", WITH_INTERVAL, &l.burst),
    ] {
        if rows.is_empty() {
            continue;
        }
        out.push_str(&format!("{title}:\n\n"));
        out.push_str(&markdown_head(&[name, change, "baseline → now"]));
        for r in rows {
            out.push_str(&markdown_row(
                &[r.name.as_str(), &r.change, &r.values].map(escape),
            ));
        }
        out.push('\n');
    }
}

/// The next steps as a list, each command a code span to copy.
fn markdown_next_steps(out: &mut String, l: &GateLayout) {
    if !l.next_steps.is_empty() {
        out.push_str("**Next steps**\n\n");
        for step in &l.next_steps {
            out.push_str(&format!("- {}", escape_keeping_code(&step.what)));
            if let Some(cmd) = &step.command {
                out.push_str(&format!(":<br>`{}`", escape_code(cmd)));
            }
            out.push('\n');
        }
        out.push('\n');
    }
}

/// The significant changes of latency and other secondary metrics, as a table in Details.
fn markdown_secondary(out: &mut String, l: &GateLayout) {
    if !l.secondary.is_empty() {
        out.push_str(
            "Latency and other metrics (significant changes only):\n\n\
             | cell | metric | baseline → now | change [interval, %] |\n|---|---|---:|---:|\n",
        );
        for s in &l.secondary {
            out.push_str(&markdown_row(
                &[s.cell.as_str(), s.metric, &s.values, &s.change].map(escape),
            ));
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests;
