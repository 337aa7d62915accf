//! Mermaid `xychart-beta` charts of a few headline cells across the baseline history plus this
//! run, for the job summary: one chart per cell (xychart has no legend, so each chart's title
//! names its series), bars per run with distinct labels and this run last, and the baseline
//! band the verdict compared against as two lines. A picture of the trend only: the verdict
//! table stays the authoritative data.

use std::collections::BTreeSet;

use infergate_model::stats::compare::metric_value;
use infergate_schema::answer::{cell_label, metric_name};
use infergate_schema::results::{CellStatus, RunResults};
use infergate_schema::verdict::{ComparisonReport, Direction, Metric};

/// At most this many cells (one chart each).
pub const MAX_LINES: usize = 4;
/// At most this many runs along the x-axis (the newest).
pub(crate) const MAX_RUNS: usize = 20;

/// The metric the charts draw: the one decode metric a regression is in where that is not
/// aggregate tok/s (a tail's regression is drawn as the tail), else aggregate tok/s.
fn charted_metric(verdict: Option<&ComparisonReport>) -> Metric {
    match verdict.map(ComparisonReport::regressed_metrics).as_deref() {
        Some([m]) if !m.is_layer() => *m,
        _ => Metric::AggregateTps,
    }
}

/// The cells worth a line: regressed cells (worst on `metric` first), then the
/// highest-concurrency cell of each context (the throughput headline), at most [`MAX_LINES`].
pub(crate) fn headline_cells(
    current: &RunResults,
    verdict: Option<&ComparisonReport>,
    metric: Metric,
) -> Vec<(u32, u64)> {
    let mut picked: Vec<(u32, u64)> = Vec::new();
    if let Some(v) = verdict {
        let mut regressed: Vec<_> = v
            .regressions()
            .map(|c| {
                let change = c.metric(metric).map_or(0.0, |m| match m.direction {
                    Direction::HigherIsBetter => m.change,
                    Direction::LowerIsBetter => -m.change,
                });
                (change, (c.concurrency, c.context_tokens))
            })
            .collect();
        regressed.sort_by(|a, b| a.0.total_cmp(&b.0));
        picked.extend(regressed.into_iter().map(|(_, coord)| coord));
    }
    let mut contexts: Vec<u64> = current.cells.iter().map(|c| c.context_tokens).collect();
    contexts.sort_unstable();
    contexts.dedup();
    for ctx in contexts {
        let best = current
            .cells
            .iter()
            .filter(|c| c.context_tokens == ctx && measured(c.status, c.aggregate_tps))
            .max_by_key(|c| c.concurrency);
        if let Some(c) = best {
            picked.push(c.coord());
        }
    }
    let mut seen = BTreeSet::new();
    picked.retain(|p| seen.insert(*p));
    picked.truncate(MAX_LINES);
    picked
}

fn measured(status: CellStatus, tps: f64) -> bool {
    status.measured() && tps.is_finite() && tps > 0.0
}

/// A label Mermaid accepts inside double quotes.
fn quote(label: &str) -> String {
    let clean: String = label
        .chars()
        .map(|c| match c {
            '"' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    format!("\"{clean}\"")
}

/// Short x-axis label of a run: its git SHA label when present, else its start time.
fn run_label(run: &RunResults) -> String {
    if let Some(sha) = run.commit() {
        return sha.chars().take(7).collect();
    }
    run.started_at.format("%m-%d %H:%M").to_string()
}

/// Renders one `xychart-beta` block (without fences): quoted category labels, then each
/// series as its kind (`bar`, `line`) says; every series must have one value per label.
pub(crate) fn xychart(
    title: &str,
    x_labels: &[String],
    y_title: &str,
    series: &[(&str, Vec<f64>)],
) -> String {
    let mut out = String::from("xychart-beta\n");
    out.push_str(&format!("    title {}\n", quote(title)));
    let labels: Vec<String> = x_labels.iter().map(|l| quote(l)).collect();
    out.push_str(&format!("    x-axis [{}]\n", labels.join(", ")));
    out.push_str(&format!("    y-axis {}\n", quote(y_title)));
    for (kind, s) in series {
        let values: Vec<String> = s.iter().map(|v| format!("{v:.1}")).collect();
        out.push_str(&format!("    {kind} [{}]\n", values.join(", ")));
    }
    out
}

/// The job-summary block: a fenced Mermaid chart of the headline cells over the baseline runs
/// (same profile only, oldest first, newest [`MAX_RUNS`]) and this run's boots (the first, then
/// the confirmation boot when there was one: the verdict is over both), with a legend. `None`
/// when there is no history to draw a trend from.
pub fn throughput_chart(
    history: &[RunResults],
    first: &RunResults,
    confirmation: Option<&RunResults>,
    verdict: Option<&ComparisonReport>,
) -> Option<String> {
    let boots: Vec<&RunResults> = std::iter::once(first).chain(confirmation).collect();
    let metric = charted_metric(verdict);
    let cells = headline_cells(first, verdict, metric);
    if cells.is_empty() {
        return None;
    }
    let mut runs: Vec<&RunResults> = history
        .iter()
        .filter(|r| {
            r.profile.key == first.profile.key && boots.iter().all(|b| b.run_id != r.run_id)
        })
        .collect();
    runs.sort_by_key(|r| r.started_at);
    let unit = Unit::of(metric);
    let value = |run: &RunResults, (c, l): (u32, u64)| {
        run.cells
            .iter()
            .find(|x| x.coord() == (c, l) && measured(x.status, x.aggregate_tps))
            .and_then(|x| metric_value(x, metric))
            .map(|v| v * unit.scale)
    };
    let complete = |run: &RunResults| cells.iter().all(|coord| value(run, *coord).is_some());
    let total = runs.len();
    runs.retain(|r| complete(r));
    let omitted = total - runs.len();
    if runs.len() > MAX_RUNS {
        runs.drain(..runs.len() - MAX_RUNS);
    }
    if runs.is_empty() {
        return None;
    }
    // A boot may lack a regressed cell's value (capacity regression): drop such lines.
    let cells: Vec<(u32, u64)> = cells
        .into_iter()
        .filter(|coord| boots.iter().all(|b| value(b, *coord).is_some()))
        .collect();
    if cells.is_empty() {
        return None;
    }
    // A verdict over two boots whose second this report was not given (`report` without
    // `--trusted-config` reads one results file): the one bar is the first boot, not the run.
    let second_unseen = confirmation.is_none()
        && verdict
            .and_then(|v| v.confirmation.as_ref())
            .is_some_and(|c| c.used);
    // What the last bars are, in their labels, each chart's title and the legend below them.
    let (boot_labels, title_last, legend_last): (&[&str], &str, &str) =
        match (confirmation.is_some(), second_unseen) {
            (true, _) => (
                &["boot 1", "boot 2"],
                "last 2 = this run's boots",
                "the last two bars (`boot 1`, `boot 2`) are this run's two boots, which the \
                 verdict is over",
            ),
            (false, true) => (
                &["boot 1"],
                "last = this run's first boot",
                "the last bar (`boot 1`) is this run's first boot; the verdict is also over a \
                 second boot, whose figures this report was not given",
            ),
            (false, false) => (
                &["this run"],
                "last = this run",
                "the last bar (`this run`) is this run",
            ),
        };
    let labels = distinct_labels(&runs, boot_labels);
    let mut out = String::new();
    for coord in &cells {
        let values: Vec<f64> = runs
            .iter()
            .chain(&boots)
            .filter_map(|r| value(r, *coord))
            .collect();
        let band = verdict.and_then(|v| band(v, *coord, metric, unit.scale));
        let chart = cell_chart(*coord, &labels, &values, band, title_last, &unit);
        out.push_str(&format!("```mermaid\n{chart}```\n\n"));
    }
    out.push_str(&format!(
        "Each chart is one cell: the bars are {} per run, oldest first, \
         {legend_last}; the two lines are the baseline band (level ± margin) the verdict \
         compared against. The table above is the authoritative data.",
        unit.name
    ));
    if omitted > 0 {
        out.push_str(&format!(
            " {} without all of these cells {} not drawn.",
            infergate_schema::answer::plural(omitted, "baseline run"),
            if omitted == 1 { "is" } else { "are" }
        ));
    }
    out.push('\n');
    Some(out)
}

/// One label per run, all distinct: the commit when every run has its own, else `#1`, `#2`…;
/// then this run's boots' labels.
fn distinct_labels(runs: &[&RunResults], boots: &[&str]) -> Vec<String> {
    let shas: Vec<String> = runs.iter().map(|r| run_label(r)).collect();
    let unique = shas.iter().collect::<BTreeSet<_>>().len() == shas.len();
    let mut labels: Vec<String> = if unique {
        shas
    } else {
        (1..=runs.len()).map(|i| format!("#{i}")).collect()
    };
    labels.extend(boots.iter().map(|b| b.to_string()));
    labels
}

/// What the charts' bars are: the metric's name as the titles and the legend say it, its axis
/// unit and the factor from the results' figure to it (seconds to ms).
struct Unit {
    name: String,
    axis: &'static str,
    scale: f64,
}

impl Unit {
    fn of(metric: Metric) -> Unit {
        let name = metric_name(metric).to_string();
        match metric {
            Metric::AggregateTps => Unit {
                name,
                axis: "tok/s",
                scale: 1.0,
            },
            m if m.is_latency_percentile() => Unit {
                name: format!("{name} (ms)"),
                axis: "ms",
                scale: 1000.0,
            },
            m => Unit {
                name,
                axis: match m {
                    Metric::JoulesPerToken => "J/token",
                    Metric::StepsPerS => "steps/s",
                    _ => "tok/s",
                },
                scale: 1.0,
            },
        }
    }
}

/// The baseline band of a cell's `metric` (level × (1 ± margin), times `scale`) from the
/// verdict, when compared.
fn band(
    verdict: &ComparisonReport,
    (c, l): (u32, u64),
    metric: Metric,
    scale: f64,
) -> Option<(f64, f64)> {
    let m = verdict
        .cells
        .iter()
        .find(|x| (x.concurrency, x.context_tokens) == (c, l))?
        .metric(metric)?;
    let level = m.baseline * scale;
    (level.is_finite() && m.margin.is_finite())
        .then_some((level * (1.0 - m.margin), level * (1.0 + m.margin)))
}

/// One cell's chart: bars per run (this run's boots last, as `last` says), the baseline band
/// as two lines; the title names what each series is (xychart has no legend).
fn cell_chart(
    (c, l): (u32, u64),
    labels: &[String],
    values: &[f64],
    band: Option<(f64, f64)>,
    last: &str,
    unit: &Unit,
) -> String {
    let lines = if band.is_some() {
        ", lines = baseline band"
    } else {
        ""
    };
    let title = format!(
        "{} {}: bars = runs ({last}){lines}",
        cell_label(c, l),
        unit.name
    );
    let mut series = vec![("bar", values.to_vec())];
    if let Some((low, high)) = band {
        series.push(("line", vec![low; values.len()]));
        series.push(("line", vec![high; values.len()]));
    }
    xychart(&title, labels, unit.axis, &series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_lacks};

    #[test]
    fn xychart_quotes_labels_and_draws_lines() {
        let chart = xychart(
            "t",
            &["abc1234".into(), "say \"hi\"".into(), "this run".into()],
            "tok/s",
            &[
                ("line", vec![1.0, 2.26, 3.0]),
                ("line", vec![4.0, 5.0, 6.0]),
            ],
        );
        assert_eq!(
            chart,
            "xychart-beta\n    title \"t\"\n    x-axis [\"abc1234\", \"say 'hi'\", \"this run\"]\n    y-axis \"tok/s\"\n    line [1.0, 2.3, 3.0]\n    line [4.0, 5.0, 6.0]\n"
        );
    }

    /// A confirmed gate decided over both boots: both are drawn last, each named, and the title
    /// and legend say so; a single boot stays `this run`.
    #[test]
    fn a_confirmed_gate_draws_both_boots_last() {
        let boot = |id: &str, factor: f64| {
            let mut r = infergate_store::export::fixture::run();
            r.run_id = id.into();
            for c in &mut r.cells {
                c.aggregate_tps *= factor;
            }
            r
        };
        let history: Vec<RunResults> = (0..3).map(|i| boot(&format!("h{i}"), 1.0)).collect();
        let (first, second) = (boot("first", 0.9), boot("second", 0.8));
        let chart = throughput_chart(&history, &first, Some(&second), None).unwrap();
        let bars: Vec<&str> = chart.lines().filter(|l| l.contains("bar [")).collect();
        assert!(!bars.is_empty(), "{chart}");
        let (c0, tps) = (&first.cells[0], history[0].cells[0].aggregate_tps);
        let title = cell_label(c0.concurrency, c0.context_tokens);
        assert_contains(
            &chart,
            &format!("{title} aggregate tok/s: bars = runs (last 2 = this run's boots)"),
        );
        assert_contains(&chart, r##"x-axis ["#1", "#2", "#3", "boot 1", "boot 2"]"##);
        assert_contains(
            &chart,
            &format!(
                "bar [{t:.1}, {t:.1}, {t:.1}, {:.1}, {:.1}]",
                0.9 * tps,
                0.8 * tps,
                t = tps
            ),
        );
        assert_contains(&chart, "this run's two boots");
        let single = throughput_chart(&history, &first, None, None).unwrap();
        assert_contains(&single, r##"x-axis ["#1", "#2", "#3", "this run"]"##);
        assert_lacks(&single, "boot");
        // A verdict over two boots with only the first given (`report` without a trusted
        // config): its one bar is the first boot, and the legend says the second is missing.
        let mut over_two = infergate_store::export::fixture::verdict(&first);
        over_two.confirmation = Some(infergate_schema::verdict::Confirmation {
            reason: "the first boot's matrix-wide change leaned worse".into(),
            first_boot: None,
            provisional_alarms: 0,
            second_results: "results-confirm.json".into(),
            used: true,
            missing: false,
        });
        let one_of_two = throughput_chart(&history, &first, None, Some(&over_two)).unwrap();
        assert_contains(&one_of_two, r#""boot 1"]"#);
        assert_contains(&one_of_two, "(last = this run's first boot)");
        assert_contains(&one_of_two, "whose figures this report was not given");
        assert_lacks(&one_of_two, "this run\"");
    }

    /// A regression of the tail alone is drawn as the tail, in ms, against its own band: a
    /// chart of the unmoved tok/s would show nothing of it.
    #[test]
    fn a_tail_regression_is_drawn_as_the_tail() {
        use infergate_schema::results::Percentiles;
        use infergate_schema::verdict::{CellVerdict, MetricComparison};
        let boot = |id: &str, p99: f64| {
            let mut r = infergate_store::export::fixture::run();
            r.run_id = id.into();
            for c in &mut r.cells {
                c.itl_s = Some(Percentiles {
                    mean: 0.005,
                    p50: 0.005,
                    p90: 0.006,
                    p99,
                    count: 5000,
                });
            }
            r
        };
        let history: Vec<RunResults> = (0..3).map(|i| boot(&format!("h{i}"), 0.010)).collect();
        let first = boot("first", 0.030);
        let mut verdict = infergate_store::export::fixture::verdict(&first);
        let itl = MetricComparison {
            metric: Metric::ItlP99,
            direction: Direction::LowerIsBetter,
            baseline: 0.010,
            candidate: 0.030,
            change: 2.0,
            margin: 0.5,
            ..verdict.cells[1].metrics[0].clone()
        };
        verdict.cells[1].metrics = vec![itl];
        verdict.cells[2].verdict = CellVerdict::Unchanged;
        let chart = throughput_chart(&history, &first, None, Some(&verdict)).unwrap();
        let c1 = &verdict.cells[1];
        let title = cell_label(c1.concurrency, c1.context_tokens);
        assert_contains(&chart, &format!("{title} ITL p99 (ms): bars = runs"));
        assert_contains(&chart, "y-axis \"ms\"");
        assert_contains(&chart, "bar [10.0, 10.0, 10.0, 30.0]");
        assert_contains(
            &chart,
            "line [5.0, 5.0, 5.0, 5.0]\n    line [15.0, 15.0, 15.0, 15.0]",
        );
        assert_contains(&chart, "the bars are ITL p99 (ms) per run");
    }
}
