//! Renderers of a results file (and optionally its verdict) in formats other tools read:
//! Bencher Metric Format, github-action-benchmark's custom JSON, JUnit XML and CSV. They render
//! plain data ([`RunResults`], [`ComparisonReport`]) and never measure or decide: a failure in
//! the JUnit file is a regression the verdict already holds. See `docs/interop.md`.

pub mod bmf;
pub mod csv;
pub mod gab;
pub mod junit;

use infergate_model::stats::compare::{ALL_METRICS, metric_value};
use infergate_schema::answer::runs_named;
use infergate_schema::results::{CellResult, RunResults, context_label};
use infergate_schema::verdict::{ComparisonReport, Metric};

/// Why an export could not be written.
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum ExportError {
    /// The verdict belongs to other runs than the results file.
    #[error(
        "the verdict is for {verdict_runs} of profile {verdict_profile}, not for results run {run} of profile {profile}; pass the verdict.json written with these results"
    )]
    Mismatch {
        /// `run ID` or `runs ID, ID`.
        verdict_runs: String,
        verdict_profile: String,
        run: String,
        profile: String,
    },
    /// Writing CSV failed (cannot happen in memory; kept typed).
    #[error("writing CSV: {0}")]
    Csv(#[from] ::csv::Error),
    /// Writing XML or JSON into memory failed.
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
    /// Serialising JSON failed.
    #[error("serialising JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// One exported figure: a measured cell's metric with its value (in the results' own units).
#[derive(Debug, Clone, Copy)]
pub struct Figure<'a> {
    /// The cell the figure belongs to.
    pub cell: &'a CellResult,
    /// Which metric it is.
    pub(crate) metric: Metric,
    /// Its value, in the results' own units.
    pub(crate) value: f64,
}

/// Every figure of a run: cells that measured a window (`ok`, `capacity_limited`,
/// `saturated`; not a capacity-limited cell decided without one, whose zeros are no data)
/// times the metrics they have, in cell order, primary metric first.
pub fn figures(run: &RunResults) -> Vec<Figure<'_>> {
    run.cells
        .iter()
        .filter(|c| c.has_window())
        .flat_map(|cell| {
            ALL_METRICS.iter().filter_map(move |&metric| {
                metric_value(cell, metric).map(|value| Figure {
                    cell,
                    metric,
                    value,
                })
            })
        })
        .collect()
}

/// The cell's name in every export: `C=8 / 32k`, as in the reports' tables.
pub fn cell_name(concurrency: u32, context_tokens: u64) -> String {
    format!("C={concurrency} / {}", context_label(context_tokens))
}

/// The unit of a metric's value as exported (the results schema's units).
pub(crate) fn unit(metric: Metric) -> &'static str {
    match metric {
        Metric::AggregateTps | Metric::PerUserTps | Metric::PrefillTps | Metric::BurstTps => {
            "tok/s"
        }
        Metric::TtftP50
        | Metric::TtftP90
        | Metric::TtftP99
        | Metric::ItlP50
        | Metric::ItlP90
        | Metric::ItlP99
        | Metric::TpotP50
        | Metric::TpotP90
        | Metric::BurstTtftP90 => "s",
        Metric::StepsPerS => "steps/s",
        Metric::JoulesPerToken => "J/token",
    }
}

/// Lowest and highest sub-window throughput of a cell, when it has two or more samples.
pub(crate) fn sample_bounds(cell: &CellResult) -> Option<(f64, f64)> {
    let s: Vec<f64> = cell
        .samples
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    (s.len() >= 2).then(|| {
        (
            s.iter().copied().fold(f64::INFINITY, f64::min),
            s.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    })
}

/// Refuses a verdict that was not computed for this results file's run and profile.
pub(crate) fn check_pair(run: &RunResults, report: &ComparisonReport) -> Result<(), ExportError> {
    if report.profile.key == run.profile.key && report.candidate_runs.contains(&run.run_id) {
        return Ok(());
    }
    Err(ExportError::Mismatch {
        verdict_runs: runs_named(&report.candidate_runs, ""),
        verdict_profile: report.profile.key.clone(),
        run: run.run_id.clone(),
        profile: run.profile.key.clone(),
    })
}

#[cfg(any(test, feature = "testkit"))]
#[allow(missing_docs)]
pub mod fixture {
    //! A small measured run and a verdict on it, shared by the renderers' tests.
    use infergate_schema::results::{CellResult, CellStatus, Percentiles, RunResults};
    use infergate_schema::verdict::ComparisonReport;

    /// Run-level telemetry as an H200 reported it under load (device check, 2026-12-04).
    pub fn h200_telemetry() -> infergate_schema::results::TelemetrySummary {
        infergate_schema::results::TelemetrySummary {
            status: "available".into(),
            reason: None,
            devices: vec!["0: NVIDIA H200".into()],
            energy_j: Some(5613.9),
            joules_per_token: Some(1.5903),
            power_w_avg: Some(441.7),
            temperature_c_max: Some(63.0),
            throttle_reasons: vec!["sw_power_cap".into()],
            idle_windows: None,
        }
    }

    /// One cell's window as the H200 reported it under load, with these clock limits.
    pub fn h200_window(reasons: &[&str]) -> infergate_schema::results::CellTelemetry {
        infergate_schema::results::CellTelemetry {
            samples: 8,
            gpu_util_avg: Some(78.0),
            mem_util_avg: Some(19.5),
            power_w_avg: Some(645.1),
            power_w_max: Some(653.2),
            energy_j: Some(1291.3),
            joules_per_token: Some(1.509),
            temperature_c_max: Some(63.0),
            sm_clock_mhz_avg: Some(1663.0),
            mem_clock_mhz_avg: Some(3201.0),
            vram_used_mib_max: Some(5106.8),
            pcie_rx_kib_s_avg: None,
            pcie_tx_kib_s_avg: None,
            throttle_reasons: reasons.iter().map(|r| r.to_string()).collect(),
        }
    }

    /// The seed llm-decode-bench file (vLLM on one RTX 5090): the text most of the crate's
    /// tests start from.
    pub(crate) const SEED: &str = include_str!(
        "../../../../tests/fixtures/llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json"
    );

    /// [`SEED`] imported, as it is.
    pub(crate) fn seed_run() -> RunResults {
        crate::import::parse_results(SEED, "seed.json")
            .unwrap()
            .remove(0)
    }

    /// The seed llm-decode-bench run, given sub-window samples on its first cell, a hostile
    /// model name, and an error cell.
    pub fn run() -> RunResults {
        let mut run = seed_run();
        run.cells.truncate(4);
        run.cells[0].samples = vec![44.0, 45.5, 46.8];
        run.cells[1].per_user_tps = Some(Percentiles {
            mean: 20.0,
            p50: 21.0,
            p90: 25.0,
            p99: 26.0,
            count: 10,
        });
        run.cells[3] = CellResult::unmeasured(
            8,
            8192,
            CellStatus::Error,
            "=HYPERLINK(\"x\") engine said <b>&\u{1}",
        );
        run
    }

    /// A verdict on [`run`]: cell 1 regressed on aggregate_tps, cell 2 a capacity regression.
    pub fn verdict(run: &RunResults) -> ComparisonReport {
        use infergate_schema::verdict::*;
        let metric = |m: Metric, base: f64, cand: f64, v: CellVerdict| MetricComparison {
            metric: m,
            direction: m.direction(),
            baseline: base,
            candidate: cand,
            change: cand / base - 1.0,
            ci_low: cand / base - 1.02,
            ci_high: cand / base - 0.98,
            margin: 0.03,
            p_value: 0.001,
            p_adjusted: 0.004,
            verdict: v,
            check: None,
            decided_on: None,
        };
        // A cell at `coord` with `verdict`, no reason and no metric.
        let cell = |(concurrency, context_tokens), verdict| CellComparison {
            provisional: false,
            history_too_short: false,
            not_compared: None,
            concurrency,
            context_tokens,
            verdict,
            reason: None,
            metrics: Vec::new(),
        };
        let cells = vec![
            CellComparison {
                metrics: vec![metric(
                    Metric::AggregateTps,
                    45.0,
                    45.4,
                    CellVerdict::Unchanged,
                )],
                ..cell(run.cells[0].coord(), CellVerdict::Unchanged)
            },
            CellComparison {
                reason: Some("aggregate_tps vs the rest of its run −9.0% [−11.0%, −7.0%]".into()),
                metrics: vec![
                    metric(Metric::AggregateTps, 50.0, 45.5, CellVerdict::Regression),
                    metric(Metric::TtftP50, 0.2, 0.25, CellVerdict::Regression),
                ],
                ..cell(run.cells[1].coord(), CellVerdict::Regression)
            },
            CellComparison {
                reason: Some("capacity-limited now: 9/12 running <model=\"q\">".into()),
                ..cell(run.cells[2].coord(), CellVerdict::CapacityRegression)
            },
            CellComparison {
                reason: Some("error in candidate".into()),
                ..cell((8, 8192), CellVerdict::NotComparable)
            },
        ];
        ComparisonReport {
            gate: GateVerdict::Regression,
            headline: "✗ aggregate tok/s −9.0% [−11.0, −7.0] at C=2 / 8k; 2 of 4 cells regressed"
                .into(),
            cells,
            ..ComparisonReport::new(
                run.profile.clone(),
                Some("pr".into()),
                vec![run.run_id.clone()],
                BaselineSummary {
                    runs: Vec::new(),
                    level_runs: vec!["b1".into(), "b2".into()],
                    noise_runs: 2,
                    metric_since: Vec::new(),
                },
                RuleSummary {
                    alpha: 0.01,
                    min_effect: 0.03,
                    matrix_margin: 0.01,
                    correction: "bonferroni".into(),
                    confidence: 0.95,
                    cell_effect: None,
                    shares: None,
                },
            )
        }
    }
}
