//! The per-cell history of a baseline ([`BaselineHistory`], built by the store) as a terminal
//! table and as GitHub Markdown: what `infergate baseline show` prints.

use comfy_table::{CellAlignment, Table};

use super::markdown::escape;
use crate::baseline::history::BaselineHistory;
use crate::results::context_label;

fn column_label(h: &BaselineHistory, i: usize) -> String {
    // `2026-07-16T19:47:02+00:00` → `07-16 19:47`.
    h.started_at
        .get(i)
        .and_then(|s| s.get(5..16))
        .map(|s| s.replacen('T', " ", 1))
        .unwrap_or_else(|| h.runs[i].clone())
}

fn rows(h: &BaselineHistory) -> Vec<Vec<String>> {
    h.cells
        .iter()
        .map(|c| {
            let mut row = vec![format!(
                "C={} / {}",
                c.concurrency,
                context_label(c.context_tokens)
            )];
            row.extend(
                c.values
                    .iter()
                    .map(|v| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into())),
            );
            row.push(
                c.level
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "–".into()),
            );
            row.push(
                c.cv.map(|v| format!("{:.1}%", v * 100.0))
                    .unwrap_or_else(|| "–".into()),
            );
            row
        })
        .collect()
}

fn header(h: &BaselineHistory) -> Vec<String> {
    let mut hdr = vec!["cell".to_string()];
    hdr.extend((0..h.runs.len()).map(|i| column_label(h, i)));
    hdr.push(format!("level (newest {})", h.level_runs));
    hdr.push(format!("CV (newest {})", h.noise_runs));
    hdr
}

/// The history as a terminal table (aggregate tok/s; `–` = cell not ok in that run).
pub(crate) fn text(h: &BaselineHistory) -> String {
    let mut out = format!(
        "Baseline {} / suite {}: {} run(s) shown, aggregate tok/s (– = not ok in that run)\n",
        h.profile_key,
        h.suite,
        h.runs.len()
    );
    let mut table = Table::new();
    table
        .load_style(super::verdict_table::TABLE_STYLE)
        .force_no_tty()
        .set_header(header(h));
    for row in rows(h) {
        table.add_row(row);
    }
    for i in 1..=h.runs.len() + 2 {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    out.push_str(&table.to_string());
    out.push('\n');
    out.push_str(&format!("Runs: {}\n", h.runs.join(", ")));
    out
}

/// The history as a GitHub Markdown table.
pub(crate) fn markdown(h: &BaselineHistory) -> String {
    let mut out = format!(
        "**Baseline {} / suite {}**: {} run(s), aggregate tok/s\n\n",
        escape(&h.profile_key),
        escape(&h.suite),
        h.runs.len()
    );
    let hdr = header(h);
    out.push('|');
    for c in &hdr {
        out.push_str(&format!(" {} |", escape(c)));
    }
    out.push_str("\n|---|");
    for _ in 1..hdr.len() {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in rows(h) {
        out.push('|');
        for c in row {
            out.push_str(&format!(" {} |", escape(&c)));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::history::CellHistory;

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
        }
    }

    #[test]
    fn history_tables_show_every_run_the_level_and_the_cv() {
        let h = sample();
        let t = text(&h);
        assert!(t.contains("C=1 / 8k"), "{t}");
        assert!(t.contains("07-16 19:47"), "{t}");
        assert!(t.contains("Runs: r1, r2, r3"), "{t}");
        let md = markdown(&h);
        assert!(
            md.contains("| C=1 / 8k | 110.0 | 90.0 | 100.0 | 95.0 | 8.2% |"),
            "{md}"
        );
        assert!(md.contains("| C=12 / 128k | – | – | – | – | – |"), "{md}");
    }
}
