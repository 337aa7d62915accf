//! github-action-benchmark's custom tool JSON: an array of `{ name, unit, value, range?,
//! extra? }`, one file per direction, as its `tool:` input is `customBiggerIsBetter` or
//! `customSmallerIsBetter`. An entry is one cell and metric (`C=8 / 32k aggregate_tps`).

use serde::{Deserialize, Serialize};

use super::{ExportError, cell_name, figures, unit};
use infergate_schema::results::RunResults;
use infergate_schema::verdict::Direction;

/// Which of the action's custom tools the file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GabTool {
    /// Throughputs: `aggregate_tps`, `per_user_tps`, `steps_per_s`.
    #[value(name = "customBiggerIsBetter")]
    BiggerIsBetter,
    /// Latencies and energy: `ttft_*`, `itl_*`, `joules_per_token`.
    #[value(name = "customSmallerIsBetter")]
    SmallerIsBetter,
}

impl GabTool {
    fn direction(self) -> Direction {
        match self {
            GabTool::BiggerIsBetter => Direction::HigherIsBetter,
            GabTool::SmallerIsBetter => Direction::LowerIsBetter,
        }
    }
}

/// One entry of the custom JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GabEntry {
    /// Chart name (metric and cell).
    pub name: String,
    /// Unit shown on the chart (`tok/s`, `ms`, ...).
    pub unit: String,
    /// The figure.
    pub(crate) value: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Standard deviation of the sub-window samples (`± …`), aggregate tok/s with two or more.
    pub(crate) range: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Tooltip lines: run id, profile and cell status.
    pub(crate) extra: Option<String>,
}

/// The entries of a run for one tool, in cell order.
pub(crate) fn entries(run: &RunResults, tool: GabTool) -> Vec<GabEntry> {
    figures(run)
        .into_iter()
        .filter(|f| f.metric.direction() == tool.direction())
        .map(|f| {
            let n = f.cell.samples.len();
            let range = (f.metric == infergate_schema::verdict::Metric::AggregateTps && n >= 2)
                .then(|| {
                    let mean = f.cell.samples.iter().sum::<f64>() / n as f64;
                    let var = f
                        .cell
                        .samples
                        .iter()
                        .map(|s| (s - mean).powi(2))
                        .sum::<f64>()
                        / (n as f64 - 1.0);
                    format!("± {:.3}", var.sqrt())
                });
            GabEntry {
                name: format!(
                    "{} {}",
                    cell_name(f.cell.concurrency, f.cell.context_tokens),
                    f.metric.as_str()
                ),
                unit: unit(f.metric).into(),
                value: f.value,
                range,
                extra: Some(format!(
                    "run {}\nprofile {}\nstatus {}",
                    run.run_id,
                    run.profile.key,
                    serde_json::to_value(f.cell.status)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default()
                )),
            }
        })
        .collect()
}

/// The custom JSON text of a run for one tool.
pub fn render(run: &RunResults, tool: GabTool) -> Result<String, ExportError> {
    Ok(serde_json::to_string_pretty(&entries(run, tool))? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture;

    #[test]
    fn directions_split_and_values_match() {
        let run = fixture::run();
        let bigger: Vec<GabEntry> =
            serde_json::from_str(&render(&run, GabTool::BiggerIsBetter).unwrap()).unwrap();
        let smaller = entries(&run, GabTool::SmallerIsBetter);
        assert!(bigger.iter().all(|e| e.unit == "tok/s"));
        assert!(smaller.iter().all(|e| e.unit == "s"));
        assert_eq!(bigger[0].name, "C=1 / 8k aggregate_tps");
        assert_eq!(bigger[0].value, run.cells[0].aggregate_tps);
        assert_eq!(bigger[0].range.as_deref(), Some("± 1.401"));
        let second =
            crate::export::cell_name(run.cells[1].concurrency, run.cells[1].context_tokens);
        assert!(
            bigger
                .iter()
                .any(|e| e.name == format!("{second} per_user_tps") && e.value == 21.0)
        );
        assert!(smaller.iter().any(|e| e.name == "C=1 / 8k ttft_p50"));
    }
}
