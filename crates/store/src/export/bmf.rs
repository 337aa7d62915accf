//! Bencher Metric Format (BMF) JSON: `{ benchmark: { measure: { value, lower_value?,
//! upper_value? } } }`, the input of `bencher run --adapter json`. A benchmark is a cell
//! (`C=8 / 32k`), a measure a metric (`aggregate_tps`, `ttft_p50`, ...) in the results' units;
//! `aggregate_tps` carries the lowest and highest sub-window throughput as its bounds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ExportError, cell_name, figures, sample_bounds};
use infergate_schema::results::RunResults;
use infergate_schema::verdict::Metric;

/// One BMF metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BmfMetric {
    /// The figure.
    pub value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Lower bound: the smallest sub-window sample, when there are two or more.
    pub(crate) lower_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Upper bound: the largest sub-window sample, when there are two or more.
    pub(crate) upper_value: Option<f64>,
}

/// A BMF document: benchmark name → measure name → metric.
pub type Bmf = BTreeMap<String, BTreeMap<String, BmfMetric>>;

/// The BMF document of a run.
pub(crate) fn document(run: &RunResults) -> Bmf {
    let mut doc = Bmf::new();
    for f in figures(run) {
        let bounds = (f.metric == Metric::AggregateTps)
            .then(|| sample_bounds(f.cell))
            .flatten();
        doc.entry(cell_name(f.cell.concurrency, f.cell.context_tokens))
            .or_default()
            .insert(
                f.metric.as_str().to_string(),
                BmfMetric {
                    value: f.value,
                    lower_value: bounds.map(|b| b.0),
                    upper_value: bounds.map(|b| b.1),
                },
            );
    }
    doc
}

/// The BMF JSON text of a run.
pub fn render(run: &RunResults) -> Result<String, ExportError> {
    Ok(serde_json::to_string_pretty(&document(run))? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture;
    use infergate_model::stats::compare::{ALL_METRICS, metric_value};

    #[test]
    fn every_figure_round_trips_with_sample_bounds() {
        let run = fixture::run();
        let back: Bmf = serde_json::from_str(&render(&run).unwrap()).unwrap();
        let mut n = 0;
        for cell in run.cells.iter().filter(|c| c.measured_s > 0.0) {
            let bench = &back[&cell_name(cell.concurrency, cell.context_tokens)];
            for m in ALL_METRICS {
                match metric_value(cell, m) {
                    Some(v) => {
                        assert_eq!(bench[m.as_str()].value, v);
                        n += 1;
                    }
                    None => assert!(!bench.contains_key(m.as_str())),
                }
            }
        }
        assert!(n >= 10, "{n} figures");
        let first = &back["C=1 / 8k"]["aggregate_tps"];
        assert_eq!(
            (first.lower_value, first.upper_value),
            (Some(44.0), Some(46.8))
        );
        assert!(
            !back.contains_key("C=8 / 8k"),
            "an error cell has no figures"
        );
    }
}
