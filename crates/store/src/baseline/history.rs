//! Per-cell history of a baseline (what `infergate baseline show` prints): one row per cell,
//! one column per run (newest last), the level the gate compares against (mean of the newest K
//! runs) and the between-run CV over the longer history (what the noise estimate sees).
//! Rendered by `infergate_report::report::history`.

use std::collections::BTreeSet;

use serde::Serialize;
use statrs::statistics::Statistics;

use infergate_schema::results::{CellStatus, RunResults};

use super::AcceptedChange;

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
    /// The group's accepted changes, oldest first (`baseline accept`): the level and CV are
    /// taken from the runs since the newest whole-group one, as the comparison takes them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<AcceptedChange>,
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

/// Builds the history from runs (oldest → newest), showing at most `show` newest runs, the
/// level and CV from the runs since the newest whole-group accept of `accepted` (oldest first).
pub fn history(
    profile_key: &str,
    suite: &str,
    runs: &[RunResults],
    accepted: &[AcceptedChange],
    level_runs: usize,
    noise_runs: usize,
    show: usize,
) -> BaselineHistory {
    let since = (accepted.iter().rev())
        .find(|a| a.whole_group())
        .map(|a| a.since_started_at);
    let current = |r: &&RunResults| since.is_none_or(|s| r.started_at >= s);
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
            let all: Vec<f64> = runs.iter().filter(current).filter_map(value_in).collect();
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
        accepted: accepted.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_uses_newest_k_and_cv_the_longer_history() {
        let seed = crate::export::fixture::seed_run();
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
        let h = history("k", "adhoc", &runs, &[], 2, 20, 3);
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

        // After a whole-group accept at r2, the level and CV are the runs since, as the
        // comparison takes them; every run is still shown, and a metric's accept moves neither.
        let at = |i: usize, metrics: Vec<infergate_schema::verdict::Metric>| AcceptedChange {
            suite: "adhoc".into(),
            since_run_id: format!("r{i}"),
            since_started_at: runs[i].started_at,
            accepted_at: runs[3].started_at,
            note: None,
            metrics,
        };
        let cell = |h: &BaselineHistory| {
            let c = h
                .cells
                .iter()
                .find(|c| (c.concurrency, c.context_tokens) == (1, 8192));
            c.unwrap().clone()
        };
        let all = history("k", "adhoc", &runs, &[], 3, 20, 4);
        assert_eq!(cell(&all).level, Some(100.0));
        let itl = vec![infergate_schema::verdict::Metric::ItlP99];
        let metric = history("k", "adhoc", &runs, &[at(2, itl)], 3, 20, 4);
        assert_eq!(cell(&metric).level, Some(100.0));
        let since = history("k", "adhoc", &runs, &[at(2, Vec::new())], 3, 20, 4);
        assert_eq!(since.runs.len(), 4);
        assert_eq!(cell(&since).level, Some(95.0));
        assert_eq!(since.accepted.len(), 1);
    }
}
