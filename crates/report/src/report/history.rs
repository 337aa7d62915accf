//! The per-cell history of a baseline ([`BaselineHistory`], built by the store) as a terminal
//! table and as GitHub Markdown: what `infergate baseline show` prints.

use comfy_table::Table;

use super::console::{align_right, fits, push_wrapped, wrap};
use super::layout::{markdown_head, markdown_row};
use infergate_io::untrusted_text::markdown as escape;
use infergate_schema::answer::{NO_VALUE, cell_label, plural};
use infergate_store::baseline::history::BaselineHistory;

fn column_label(h: &BaselineHistory, i: usize) -> String {
    // `2026-07-16T19:47:02+00:00` → `07-16 19:47`.
    h.started_at
        .get(i)
        .and_then(|s| s.get(5..16))
        .map(|s| s.replacen('T', " ", 1))
        .unwrap_or_else(|| h.runs[i].clone())
}

/// Each cell's row, with the runs from `from` on as columns.
fn rows(h: &BaselineHistory, from: usize) -> Vec<Vec<String>> {
    h.cells
        .iter()
        .map(|c| {
            let mut row = vec![cell_label(c.concurrency, c.context_tokens)];
            let tps = |v: &Option<f64>| v.map_or_else(|| NO_VALUE.into(), |v| format!("{v:.1}"));
            row.extend(c.values.iter().skip(from).chain([&c.level]).map(tps));
            row.push(c.cv.map_or_else(|| NO_VALUE.into(), |v| format!("{:.1}%", v * 100.0)));
            row
        })
        .collect()
}

/// The columns' names; `windows` = the level's and CV's runs in their own names (the terminal
/// says them once above the table instead, to leave room for runs).
fn header(h: &BaselineHistory, from: usize, windows: bool) -> Vec<String> {
    let mut hdr = vec!["cell".to_string()];
    hdr.extend((from..h.runs.len()).map(|i| column_label(h, i)));
    if windows {
        hdr.push(format!("level (newest {})", h.level_runs));
        hdr.push(format!("CV (newest {})", h.noise_runs));
    } else {
        hdr.extend(["level".to_string(), "CV".to_string()]);
    }
    hdr
}

/// The history as a terminal table (aggregate tok/s; `—` = cell not ok in that run): as many
/// of the newest runs as fit the console's 100 columns beside the cell, level and CV columns
/// (the Markdown and JSON show every run).
pub fn text(h: &BaselineHistory) -> String {
    let n = h.runs.len();
    let table = |from: usize| {
        let mut table = Table::new();
        table
            .load_style(super::verdict_table::TABLE_STYLE)
            .force_no_tty()
            .set_header(header(h, from, false))
            .add_rows(rows(h, from));
        align_right(&mut table, 1..=n - from + 2);
        table.to_string()
    };
    // The oldest run first out; the newest always stays.
    let (from, rendered) = (0..n.max(1))
        .map(|from| (from, table(from)))
        .find(|(_, t)| fits(t))
        .unwrap_or_else(|| (n.saturating_sub(1), table(n.saturating_sub(1))));
    let shown = n - from;
    let what = if shown == n {
        format!("{} shown", plural(n, "run"))
    } else {
        format!("the newest {shown} of {n} runs shown (`--format md` shows all)")
    };
    let mut out = wrap(
        &format!(
            "Baseline {} / suite {}: {what}, aggregate tok/s ({NO_VALUE} = not ok in that run); \
             level: the mean of the newest {} runs, CV: between runs over the newest {}",
            h.profile_key, h.suite, h.level_runs, h.noise_runs
        ),
        2,
    );
    out.push_str(&format!("\n{rendered}\n"));
    push_wrapped(&mut out, &format!("Runs: {}", h.runs[from..].join(", ")), 2);
    if let Some(line) = accepted_line(h) {
        push_wrapped(&mut out, &line, 2);
    }
    out
}

/// The accepted changes in force, oldest first (`baseline accept`): what the comparison takes
/// its level and noise from (a whole-group accept), and which metrics restarted alone.
fn accepted_line(h: &BaselineHistory) -> Option<String> {
    let parts: Vec<String> = (h.accepted.iter())
        .map(|a| {
            let what = if a.whole_group() {
                "every metric".to_string()
            } else {
                let names: Vec<&str> = a.metrics.iter().map(|m| m.as_str()).collect();
                names.join(", ")
            };
            format!("{what} from run {}", a.since_run_id)
        })
        .collect();
    let group = h.accepted.iter().any(|a| a.whole_group());
    (!parts.is_empty()).then(|| {
        format!(
            "Accepted changes: {}{}",
            parts.join("; "),
            if group {
                " (the level and CV above: the runs since the newest whole-group one)"
            } else {
                ""
            }
        )
    })
}

/// The history as a GitHub Markdown table.
pub fn markdown(h: &BaselineHistory) -> String {
    let mut out = format!(
        "**Baseline {} / suite {}**: {}, aggregate tok/s\n\n",
        escape(&h.profile_key),
        escape(&h.suite),
        plural(h.runs.len(), "run")
    );
    let escaped = |cells: Vec<String>| cells.iter().map(|c| escape(c)).collect::<Vec<_>>();
    out.push_str(&markdown_head(&escaped(header(h, 0, true))));
    for row in rows(h, 0) {
        out.push_str(&markdown_row(&escaped(row)));
    }
    if let Some(line) = accepted_line(h) {
        out.push_str(&format!("\n{}\n", escape(&line)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_lacks};
    use infergate_store::baseline::history::CellHistory;

    fn sample() -> BaselineHistory {
        BaselineHistory {
            profile_key: "k".into(),
            suite: "adhoc".into(),
            runs: vec!["r1".into(), "r2".into(), "r3".into()],
            started_at: vec![
                "2026-07-16T19:47:02+00:00".into(),
                "2026-07-17T19:47:02+00:00".into(),
                "2026-07-18T19:47:02+00:00".into(),
            ],
            level_runs: 2,
            noise_runs: 20,
            cells: vec![
                CellHistory {
                    concurrency: 1,
                    context_tokens: 8192,
                    values: vec![Some(110.0), Some(90.0), Some(100.0)],
                    level: Some(95.0),
                    cv: Some(0.0816),
                },
                CellHistory {
                    concurrency: 12,
                    context_tokens: 131072,
                    values: vec![None, None, None],
                    level: None,
                    cv: None,
                },
            ],
            accepted: Vec::new(),
        }
    }

    /// The accepted changes in force are said under the table, in both formats: a metric
    /// restarted alone by name, a whole-group one with what it does to the level.
    #[test]
    fn accepted_changes_are_listed_under_the_table() {
        let accepted = |json: &str| serde_json::from_str(json).unwrap();
        let mut h = sample();
        assert_lacks(&text(&h), "Accepted");
        h.accepted = vec![
            accepted(
                r#"{"suite": "adhoc", "since_run_id": "r2", "since_started_at": "2026-07-17T19:47:02Z", "accepted_at": "2026-07-20T00:00:00Z"}"#,
            ),
            accepted(
                r#"{"suite": "adhoc", "since_run_id": "r3", "since_started_at": "2026-07-18T19:47:02Z", "accepted_at": "2026-07-20T00:00:00Z", "metrics": ["itl_p99"]}"#,
            ),
        ];
        let flat = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = "Accepted changes: every metric from run r2; itl_p99 from run r3 (the level and CV above: the runs since the newest whole-group one)";
        assert_contains(&flat(text(&h)), line);
        assert_contains(&flat(markdown(&h)), &line.replace('_', "\\_"));
    }

    #[test]
    fn history_tables_show_every_run_the_level_and_the_cv() {
        let h = sample();
        let t = text(&h);
        assert_contains(&t, "C=1 / 8k");
        assert_contains(&t, "07-16 19:47");
        assert_contains(&t, "Runs: r1, r2, r3");
        let md = markdown(&h);
        assert_contains(&md, "| C=1 / 8k | 110.0 | 90.0 | 100.0 | 95.0 | 8.2% |");
        assert_contains(&md, "| C=12 / 128k | — | — | — | — | — |");
    }

    /// Ten runs do not fit 100 columns: the oldest columns go first, the header says how many
    /// are shown, and the Markdown keeps them all.
    #[test]
    fn a_long_history_keeps_the_newest_runs_that_fit_the_console() {
        let mut h = sample();
        h.runs = (1..=10).map(|i| format!("r{i}")).collect();
        h.started_at = (1..=10)
            .map(|i| format!("2026-07-{:02}T19:47:02+00:00", 10 + i))
            .collect();
        for c in &mut h.cells {
            c.values = (1..=10)
                .map(|i| c.level.map(|l| l + f64::from(i)))
                .collect();
        }
        let t = text(&h);
        assert!(crate::report::console::fits(&t), "{t}");
        assert_contains(&t, "the newest ");
        assert_contains(&t, "07-20 19:47");
        assert_lacks(&t, "07-11 19:47");
        assert!(t.contains("r10") && !t.contains("r1,"), "{t}");
        assert!(markdown(&h).contains("07-11 19:47"));
    }
}
