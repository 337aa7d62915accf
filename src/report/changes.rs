//! `infergate changes` as text and Markdown: the change points of each baseline group, newest
//! first, with their size, interval and commit range.

use comfy_table::{CellAlignment, Table};
use serde::{Deserialize, Serialize};

use crate::report::markdown::escape;
use crate::results::context_label;
use crate::stats::changepoint::{ChangePoint, HistoryChanges, Scope};

/// The change points of one baseline group (profile key + suite), as `changes` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GroupChanges {
    pub profile_key: String,
    pub suite: String,
    /// Runs a person accepted a change at (`baseline accept --since`), oldest first.
    pub accepted: Vec<String>,
    /// The candidate run appended to the history (`--candidate`), if any: highlighted in plots.
    #[serde(default)]
    pub candidate: Option<String>,
    #[serde(flatten)]
    pub history: HistoryChanges,
}

/// `matrix` or `C=4 / 8k`.
pub(crate) fn scope_label(scope: &Scope) -> String {
    match scope {
        Scope::Matrix => "matrix".into(),
        Scope::Cell {
            concurrency,
            context_tokens,
        } => format!("C={concurrency} / {}", context_label(*context_tokens)),
    }
}

/// `-3.1% [-3.6%, -2.5%]`; a creep adds its rate: `… so far, creep -0.21%/run [-0.3%, -0.1%]`.
pub(crate) fn change_label(c: &ChangePoint) -> String {
    let mut out = format!(
        "{:+.1}% [{:+.1}%, {:+.1}%]",
        c.change * 100.0,
        c.ci_low * 100.0,
        c.ci_high * 100.0
    );
    if let Some(s) = &c.slope {
        out.push_str(&format!(" so far, creep {}", slope_words(s)));
    }
    out
}

/// A creep's rate with its interval: `−0.20%/run [−0.26%, −0.14%] over 15 runs`.
pub(crate) fn slope_words(s: &crate::stats::changepoint::Slope) -> String {
    format!(
        "{:+.2}%/run [{:+.2}%, {:+.2}%] over {} runs",
        s.per_run * 100.0,
        s.ci_low * 100.0,
        s.ci_high * 100.0,
        s.runs
    )
}

/// The commits to bisect: the location interval's range (`first_commit..last_commit`) when
/// the runs carry commits, else the pair around the estimate.
pub(crate) fn commits_label(c: &ChangePoint) -> String {
    if let Some(l) = &c.location_interval {
        match (&l.first_commit, &l.last_commit) {
            (Some(a), Some(b)) => return format!("{a}..{b}"),
            (None, Some(b)) => return format!("..{b}"),
            _ => {}
        }
    }
    c.commits
        .range
        .clone()
        .or_else(|| c.commits.after.clone())
        .unwrap_or_else(|| "–".into())
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

fn heading(g: &GroupChanges) -> String {
    let s = &g.history.settings;
    format!(
        "{} / suite {}: {} run(s), {} change point(s) (each series tested at alpha {} per analysis, {:.0}% intervals)",
        g.profile_key,
        g.suite,
        g.history.runs.len(),
        g.history.change_points.len(),
        s.alpha,
        s.confidence * 100.0
    )
}

fn row(c: &ChangePoint) -> Vec<String> {
    vec![
        scope_label(&c.scope),
        c.metric.as_str().to_string(),
        c.run_id.clone(),
        location_label(c),
        change_label(c),
        format!("{:.3}", c.p_value),
        commits_label(c),
        if c.accepted { "yes" } else { "no" }.into(),
    ]
}

const HEADER: [&str; 8] = [
    "scope",
    "metric",
    "first run after",
    "first run after: interval",
    "change [interval]",
    "p",
    "commits to bisect",
    "accepted",
];

/// Terminal tables, one per group.
pub(crate) fn text(groups: &[GroupChanges]) -> String {
    let mut out = String::new();
    for g in groups {
        out.push_str(&super::console::wrap(
            &format!("Change points of {}", heading(g)),
            2,
        ));
        out.push('\n');
        if g.history.change_points.is_empty() {
            out.push_str("no change point\n\n");
            continue;
        }
        let mut table = Table::new();
        table
            .load_style(crate::report::verdict_table::TABLE_STYLE)
            .force_no_tty()
            .set_header(HEADER.to_vec());
        for c in &g.history.change_points {
            table.add_row(row(c));
        }
        if let Some(col) = table.column_mut(4) {
            col.set_cell_alignment(CellAlignment::Right);
        }
        out.push_str(&table.to_string());
        out.push_str("\n\n");
    }
    out
}

/// GitHub Markdown, one table per group; every string from the store is escaped.
pub(crate) fn markdown(groups: &[GroupChanges]) -> String {
    let mut out = String::new();
    for g in groups {
        out.push_str(&format!("**Change points of {}**\n\n", escape(&heading(g))));
        if g.history.change_points.is_empty() {
            out.push_str("No change point.\n\n");
            continue;
        }
        out.push_str(&format!("| {} |\n", HEADER.join(" | ")));
        out.push_str("|---|---|---|---|---:|---:|---|---|\n");
        for c in &g.history.change_points {
            let cells: Vec<String> = row(c).iter().map(|s| escape(s)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
    }
    out
}
