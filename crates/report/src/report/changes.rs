//! `infergate changes` as text and Markdown: the change points of each baseline group, newest
//! first, with their size, interval and commit range.

use serde::{Deserialize, Serialize};

use crate::report::console::{fitted_table, push_wrapped};
use crate::report::layout::markdown_row;
use infergate_io::untrusted_text::markdown as escape;
use infergate_model::stats::changepoint::{ChangePoint, HistoryChanges, Scope};
use infergate_schema::answer::{NO_VALUE, cell_label, interval, metric_name, plural};
use infergate_schema::results::context_label;
use infergate_schema::verdict::{Metric, signed_number, signed_percent};

/// The change points of one baseline group (profile key + suite), as `changes` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupChanges {
    pub profile_key: String,
    pub suite: String,
    /// Runs a person accepted a change at (`baseline accept --since`), oldest first.
    pub accepted: Vec<String>,
    /// Of those, the accepts that restarted some metrics alone (`--metric`): run id → metrics.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub accepted_metrics: std::collections::BTreeMap<String, Vec<Metric>>,
    /// The candidate run appended to the history (`--candidate`), if any: highlighted in plots.
    #[serde(default)]
    pub candidate: Option<String>,
    #[serde(flatten)]
    pub history: HistoryChanges,
}

/// Where a series of `metric` runs, as the gate's reports name it: `matrix` or `C=4 / 8k` (a
/// decode metric), `prefill layer` or `prefill 8k` (one context), `burst layer`.
pub(crate) fn scope_label(scope: &Scope, metric: Metric) -> String {
    match scope {
        _ if metric.is_burst() => "burst layer".into(),
        Scope::Matrix if metric == Metric::PrefillTps => "prefill layer".into(),
        Scope::Cell { context_tokens, .. } if metric == Metric::PrefillTps => {
            format!("prefill {}", context_label(*context_tokens))
        }
        Scope::Matrix => "matrix".into(),
        Scope::Cell {
            concurrency,
            context_tokens,
        } => cell_label(*concurrency, *context_tokens),
    }
}

/// `−3.1% [−3.6, −2.5]`, as the gate's reports write a change; a creep adds its rate: `… so
/// far, creep −0.21%/run [−0.30, −0.12] over 15 runs`.
pub(crate) fn change_label(c: &ChangePoint) -> String {
    let mut out = format!(
        "{} {}",
        signed_percent(c.change),
        interval(c.ci_low, c.ci_high)
    );
    if let Some(s) = &c.slope {
        out.push_str(&format!(" so far, creep {}", slope_words(s)));
    }
    out
}

/// A creep's rate with its interval: `−0.20%/run [−0.26, −0.14] over 15 runs`.
pub(crate) fn slope_words(s: &infergate_model::stats::changepoint::Slope) -> String {
    format!(
        "{}%/run [{}, {}] over {} runs",
        signed_number(100.0 * s.per_run, 2),
        signed_number(100.0 * s.ci_low, 2),
        signed_number(100.0 * s.ci_high, 2),
        s.runs
    )
}

/// The commits to bisect: the location interval's range (`first_commit..last_commit`) when
/// the runs carry commits, else the pair around the estimate.
pub(crate) fn commits_label(c: &ChangePoint) -> String {
    use super::short_commit as short;
    if let Some(l) = &c.location_interval {
        match (&l.first_commit, &l.last_commit) {
            (Some(a), Some(b)) => return format!("{}..{}", short(a), short(b)),
            (None, Some(b)) => return format!("..{}", short(b)),
            _ => {}
        }
    }
    match (&c.commits.before, &c.commits.after) {
        (Some(a), Some(b)) => format!("{}..{}", short(a), short(b)),
        (_, Some(b)) => short(b).to_string(),
        _ => NO_VALUE.into(),
    }
}

/// Where the change is at its confidence: `night-038 … night-041 (4 runs, 90%)`, or the one
/// run when the history places it there.
pub(crate) fn location_label(c: &ChangePoint) -> String {
    match &c.location_interval {
        Some(l) if l.first_run_id == l.last_run_id => {
            format!("{} ({:.0}%)", l.first_run_id, l.confidence * 100.0)
        }
        Some(l) => format!(
            "{} … {} ({} runs, {:.0}%)",
            l.first_run_id,
            l.last_run_id,
            l.runs,
            l.confidence * 100.0
        ),
        None => c.run_id.clone(),
    }
}

/// The answer first: `7 change points in 36 runs of <profile> / suite nightly, newest first
/// (…)`, or `no change point in 10 runs of …`.
fn heading(g: &GroupChanges) -> String {
    let s = &g.history.settings;
    let unit = "aggregate tok/s unless named; ";
    let (found, order, unit) = match g.history.change_points.len() {
        0 => ("no change point".to_string(), "", ""),
        1 => ("1 change point".to_string(), "", unit),
        n => (plural(n, "change point"), ", newest first", unit),
    };
    // A cell's change is its own, apart from the rest of the matrix, where it was read so.
    let apart = g.history.change_points.iter().any(|c| {
        g.history
            .series
            .iter()
            .any(|s| s.against_rest && s.scope == c.scope && s.metric == c.metric)
    });
    let apart = if apart {
        "a cell's change is against the other cells of its runs; "
    } else {
        ""
    };
    format!(
        "{found} in {} of {} / suite {}{order} ({unit}{apart}each series tested at α = {} per analysis; {:.0}% intervals)",
        plural(g.history.runs.len(), "run"),
        g.profile_key,
        g.suite,
        s.alpha,
        s.confidence * 100.0
    )
}

/// The first run after the change, and the runs the history cannot tell it from at its
/// confidence: `gen030`, or `gen030 (or any of gen028 … gen031, 4 runs)`.
fn first_run_after(c: &ChangePoint) -> String {
    match &c.location_interval {
        Some(l) if l.first_run_id != l.last_run_id => format!(
            "{} (or any of {} … {}, {} runs)",
            c.run_id, l.first_run_id, l.last_run_id, l.runs
        ),
        _ => c.run_id.clone(),
    }
}

fn row(c: &ChangePoint) -> Vec<String> {
    vec![
        scope_label(&c.scope, c.metric),
        // aggregate tok/s, as the heading says; another metric is named.
        match c.metric {
            Metric::AggregateTps => change_label(c),
            other => format!("{} {}", metric_name(other), change_label(c)),
        },
        first_run_after(c),
        commits_label(c),
        format!("{:.3}", c.p_value),
        if c.accepted { "yes" } else { "no" }.into(),
    ]
}

const HEADER: [&str; 6] = [
    "where",
    "change [interval]",
    "first run after",
    "commits to bisect",
    "p",
    "accepted",
];

/// Terminal tables at 100 columns, one per group, each led by its answer.
pub fn text(groups: &[GroupChanges]) -> String {
    let mut out = String::new();
    for g in groups {
        push_wrapped(&mut out, &heading(g), 2);
        if !g.history.change_points.is_empty() {
            let mut table = fitted_table(HEADER.to_vec());
            table.add_rows(g.history.change_points.iter().map(row));
            out.push_str(&format!("{table}\n"));
        }
        out.push('\n');
    }
    out
}

/// GitHub Markdown, one table per group; every string from the store is escaped.
pub fn markdown(groups: &[GroupChanges]) -> String {
    let mut out = String::new();
    for g in groups {
        out.push_str(&format!("**{}**\n\n", escape(&heading(g))));
        if g.history.change_points.is_empty() {
            continue;
        }
        out.push_str(&markdown_row(&HEADER));
        out.push_str("|---|---:|---|---|---:|---|\n");
        for c in &g.history.change_points {
            let cells: Vec<String> = row(c).iter().map(|s| escape(s)).collect();
            out.push_str(&markdown_row(&cells));
        }
        out.push('\n');
    }
    out
}
