//! Per-cell history of a baseline (what `infergate baseline show` prints): one row per cell,
//! one column per run (newest last), the level the gate compares against (mean of the newest K
//! runs) and the between-run CV over the longer history (what the noise estimate sees).

use std::collections::BTreeSet;

use comfy_table::{CellAlignment, Table};
use serde::Serialize;
use statrs::statistics::Statistics;

use crate::report::markdown::escape;
use crate::results::{CellStatus, RunResults, context_label};

/// The history of one baseline group (profile key + suite).
#[derive(Debug, Clone, Serialize)]
pub struct BaselineHistory {
    pub profile_key: String,
    pub suite: String,
    /// Run ids shown, oldest → newest.
    pub runs: Vec<String>,
    /// `started_at` of the shown runs (RFC 3339), same order.
    pub started_at: Vec<String>,
    /// Runs the level is taken from (newest K) and the noise from (newest N).
    pub level_runs: usize,
    pub noise_runs: usize,
    pub cells: Vec<CellHistory>,
}

/// One cell across runs.
#[derive(Debug, Clone, Serialize)]
pub struct CellHistory {
    pub concurrency: u32,
    pub context_tokens: u64,
    /// Aggregate tok/s per shown run; `None` when the cell was not `ok` in that run.
    pub values: Vec<Option<f64>>,
    /// Mean aggregate tok/s of the newest `level_runs` ok runs.
    pub level: Option<f64>,
    /// Between-run coefficient of variation over the newest `noise_runs` ok runs (needs 2+).
    pub cv: Option<f64>,
}

/// Builds the history from runs (oldest → newest), showing at most `show` newest runs.
pub fn history(
    profile_key: &str,
    suite: &str,
    runs: &[RunResults],
    level_runs: usize,
    noise_runs: usize,
    show: usize,
) -> BaselineHistory {
    let coords: BTreeSet<(u64, u32)> = runs
        .iter()
        .flat_map(|r| r.cells.iter().map(|c| (c.context_tokens, c.concurrency)))
        .collect();
    let shown = &runs[runs.len().saturating_sub(show.max(1))..];
    let cells = coords
        .into_iter()
        .map(|(ctx, conc)| {
            let value_in = |r: &RunResults| {
                r.cells
                    .iter()
                    .find(|c| c.concurrency == conc && c.context_tokens == ctx)
                    .filter(|c| c.status == CellStatus::Ok)
                    .map(|c| c.aggregate_tps)
            };
            let all: Vec<f64> = runs.iter().filter_map(value_in).collect();
            let level_vals = &all[all.len().saturating_sub(level_runs)..];
            let noise_vals = &all[all.len().saturating_sub(noise_runs)..];
            let level = (!level_vals.is_empty()).then(|| level_vals.iter().mean());
            let cv = if noise_vals.len() >= 2 {
                let m = noise_vals.iter().mean();
                (m > 0.0).then(|| noise_vals.iter().std_dev() / m)
            } else {
                None
            };
            CellHistory {
                concurrency: conc,
                context_tokens: ctx,
                values: shown.iter().map(value_in).collect(),
                level,
                cv,
            }
        })
        .collect();
    BaselineHistory {
        profile_key: profile_key.to_string(),
        suite: suite.to_string(),
        runs: shown.iter().map(|r| r.run_id.clone()).collect(),
        started_at: shown.iter().map(|r| r.started_at.to_rfc3339()).collect(),
        level_runs,
        noise_runs,
        cells,
    }
}

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
pub fn text(h: &BaselineHistory) -> String {
    let mut out = format!(
        "Baseline {} / suite {}: {} run(s) shown, aggregate tok/s (– = not ok in that run)\n",
        h.profile_key,
        h.suite,
        h.runs.len()
    );
    let mut table = Table::new();
    table
        .load_style(crate::report::verdict_table::TABLE_STYLE)
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
pub fn markdown(h: &BaselineHistory) -> String {
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

    #[test]
    fn level_uses_newest_k_and_cv_the_longer_history() {
        let seed = crate::import::parse_results(
            include_str!(
                "../../tests/fixtures/llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json"
            ),
            "seed.json",
        )
        .unwrap()
        .remove(0);
        let runs: Vec<RunResults> = [100.0, 110.0, 90.0, 100.0]
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut r = seed.clone();
                r.run_id = format!("r{i}");
                r.started_at += chrono::Duration::days(i as i64);
                r.cells[0].aggregate_tps = *v;
                r
            })
            .collect();
        let h = history("k", "adhoc", &runs, 2, 20, 3);
        assert_eq!(h.runs, ["r1", "r2", "r3"]);
        let c = h
            .cells
            .iter()
            .find(|c| (c.concurrency, c.context_tokens) == (1, 8192))
            .unwrap();
        assert_eq!(c.values, vec![Some(110.0), Some(90.0), Some(100.0)]);
        assert_eq!(c.level, Some(95.0));
        let cv = c.cv.unwrap();
        assert!((cv - (200.0f64 / 3.0).sqrt() / 100.0).abs() < 1e-9, "{cv}");
        let limited = h
            .cells
            .iter()
            .find(|c| (c.concurrency, c.context_tokens) == (12, 131072))
            .unwrap();
        assert_eq!(limited.level, None, "capacity-limited cells have no level");
        let t = text(&h);
        assert!(t.contains("C=1 / 8k"), "{t}");
        assert!(markdown(&h).contains("| C=1 / 8k | 110.0 | 90.0 | 100.0 | 95.0 |"));
    }
}
