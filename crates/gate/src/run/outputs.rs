//! The output directory of a gate (results, verdict, summary, each written atomically) and
//! whether a run may become a baseline run.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use infergate_schema::results::{CellResult, RunResults, RunStatus};
use infergate_schema::verdict::ComparisonReport;
use infergate_store::baseline::BaselineStore;

use super::decide::GateError;

/// Paths written into the output directory.
#[derive(Debug, Clone)]
pub struct OutputFiles {
    pub results: PathBuf,
    pub verdict: Option<PathBuf>,
    pub summary: PathBuf,
}

/// A JSON file (`body`, or why it could not be serialised) written durably: temp file, fsync,
/// rename.
pub(crate) fn write_json(path: &Path, body: serde_json::Result<String>) -> std::io::Result<()> {
    infergate_io::fsio::write_durable(path, body.map_err(std::io::Error::other)?.as_bytes())
}

/// The gate's error for writing (or removing) `path`.
fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> GateError + '_ {
    |source| GateError::Write {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `verdict.json` (when compared), `summary.md` and `results.json` into `out`, each
/// atomically (temp file + rename), so a reader never sees half a file.
///
/// `results.json` goes last: a finished status (`complete`, `partial`, `cancelled`) is the
/// claim that everything else of the run is on disk. Until then the directory holds the
/// measurement's `in_progress` file, so a verdict that could not be written (a full disk)
/// leaves a shard that `merge` fails closed on, never a complete run without a verdict, which
/// reads as one with no baseline yet.
pub(crate) fn write_outputs(
    out: &Path,
    results: &RunResults,
    verdict: Option<&ComparisonReport>,
    summary_md: &str,
) -> Result<OutputFiles, GateError> {
    std::fs::create_dir_all(out).map_err(write_error(out))?;
    let verdict_path = out.join("verdict.json");
    match verdict {
        Some(v) => write_json(&verdict_path, serde_json::to_string_pretty(v))
            .map_err(write_error(&verdict_path))?,
        // A stale verdict from an earlier run must not be mistaken for this one's.
        None if verdict_path.exists() => {
            std::fs::remove_file(&verdict_path).map_err(write_error(&verdict_path))?
        }
        None => {}
    }
    let summary = out.join("summary.md");
    infergate_io::fsio::write_durable(&summary, summary_md.as_bytes())
        .map_err(write_error(&summary))?;
    let results_path = out.join("results.json");
    write_json(&results_path, serde_json::to_string_pretty(results))
        .map_err(write_error(&results_path))?;
    Ok(OutputFiles {
        results: results_path,
        verdict: verdict.is_some().then_some(verdict_path),
        summary,
    })
}

/// The results file of a boot that is still measuring: rewritten durably (whole file, temp +
/// fsync + rename) after every finished cell with status `in_progress`, so a gate killed
/// mid-matrix (SIGKILL, power cut) leaves every cell it finished and never half a file. The
/// gate's final write replaces it with the complete, partial or cancelled results.
pub(crate) struct InProgressResults {
    path: PathBuf,
    /// Header (profile, engine, matrix) and the cells finished so far, in measurement order.
    run: Mutex<RunResults>,
}

impl InProgressResults {
    /// Starts the file from the session's header (its cells, if any, are dropped) and writes
    /// it at once, so a results file of an earlier run in the directory is not taken for this
    /// one's.
    pub fn start(path: PathBuf, mut header: RunResults) -> Result<InProgressResults, GateError> {
        header.cells.clear();
        header.status = RunStatus::InProgress;
        header.finished_at = None;
        let journal = InProgressResults {
            path,
            run: Mutex::new(header),
        };
        journal.write()?;
        Ok(journal)
    }

    /// Records one finished cell (replacing an earlier round of the same cell) and rewrites
    /// the file.
    pub(crate) fn cell_done(&self, cell: &CellResult) -> Result<(), GateError> {
        if let Ok(mut run) = self.run.lock() {
            match run.cells.iter_mut().find(|c| c.coord() == cell.coord()) {
                Some(c) => *c = cell.clone(),
                None => run.cells.push(cell.clone()),
            }
        }
        self.write()
    }

    fn write(&self) -> Result<(), GateError> {
        let mut run = (self.run.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let total = run.matrix.contexts.len() * run.matrix.concurrency.len();
        run.status_reason = Some(format!(
            "the gate is still measuring: {} of {total} cells finished (a file left in this state means the gate was stopped before it could finish)",
            run.cells.len()
        ));
        // The same masking as the final results: engine text may carry a secret.
        let run = infergate_io::redact::process().redact_serde(run);
        write_json(&self.path, serde_json::to_string_pretty(&run)).map_err(write_error(&self.path))
    }
}

/// Whether this run may become a baseline run.
pub(crate) fn baseline_worthy(results: &RunResults, failed: bool) -> Result<(), String> {
    if failed || results.status != RunStatus::Complete {
        return Err(format!(
            "the run is {}, not complete: only complete runs become baselines",
            results.status.as_str()
        ));
    }
    BaselineStore::acceptable(results)
}

/// Why `--update-baseline` fails on a run that cannot become a baseline (`why`, from
/// [`baseline_worthy`]): the cells that keep it partial, and the suite's `skip` list, the way
/// to leave out a cell the engine cannot serve. Without this, a matrix with such a cell says
/// "baseline: not updated" and exits 0 night after night, and no baseline ever exists.
pub(crate) fn not_a_baseline(results: &RunResults, why: &str, suite: &str) -> String {
    use infergate_schema::results::{CellStatus, context_label};
    let unmeasured: Vec<&infergate_schema::results::CellResult> = results
        .cells
        .iter()
        .filter(|c| c.status == CellStatus::Error)
        .collect();
    let mut text = format!("--update-baseline: this run cannot become a baseline: {why}");
    if !unmeasured.is_empty() {
        let (cells, skip): (Vec<String>, Vec<String>) = unmeasured
            .iter()
            .map(|c| {
                let reason = c.reason.as_deref().unwrap_or("no reason given");
                let (n, context) = (c.concurrency, context_label(c.context_tokens));
                (
                    format!(
                        "C={n} × {context} ({})",
                        reason.lines().next().unwrap_or(reason)
                    ),
                    format!("{{ concurrency = {n}, context = \"{context}\" }}"),
                )
            })
            .unzip();
        text.push_str(&format!(
            ". Cells that keep it partial: {}. A baseline needs every cell of the suite measured: if the engine cannot serve a cell, leave it out with the suite's `skip` list (docs/config.md), e.g. `skip = [{}]` under [suites.{suite}]",
            cells.join("; "),
            skip.join(", ")
        ));
    }
    text
}
