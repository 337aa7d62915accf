//! The output directory of a gate (results, verdict, summary, each written atomically) and
//! whether a run may become a baseline run.

use std::path::{Path, PathBuf};

use crate::baseline::BaselineStore;
use crate::results::{RunResults, RunStatus};
use crate::verdict::ComparisonReport;

use super::decide::GateError;

/// Paths written into the output directory.
#[derive(Debug, Clone)]
pub(crate) struct OutputFiles {
    pub results: PathBuf,
    pub verdict: Option<PathBuf>,
    pub summary: PathBuf,
}

fn write_atomic(path: &Path, body: &[u8]) -> Result<(), GateError> {
    crate::fsio::write_durable(path, body).map_err(|source| GateError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Writes `results.json`, `verdict.json` (when compared) and `summary.md` into `out`, each
/// atomically (temp file + rename), so a reader never sees half a file.
pub(crate) fn write_outputs(
    out: &Path,
    results: &RunResults,
    verdict: Option<&ComparisonReport>,
    summary_md: &str,
) -> Result<OutputFiles, GateError> {
    std::fs::create_dir_all(out).map_err(|source| GateError::Write {
        path: out.display().to_string(),
        source,
    })?;
    let ser = |v: serde_json::Result<String>, what: &str| {
        v.map_err(|e| GateError::Write {
            path: format!("{}/{what}", out.display()),
            source: std::io::Error::other(e),
        })
    };
    let results_path = out.join("results.json");
    write_atomic(
        &results_path,
        ser(serde_json::to_string_pretty(results), "results.json")?.as_bytes(),
    )?;
    let verdict_path = match verdict {
        Some(v) => {
            let p = out.join("verdict.json");
            write_atomic(
                &p,
                ser(serde_json::to_string_pretty(v), "verdict.json")?.as_bytes(),
            )?;
            Some(p)
        }
        None => {
            // A stale verdict from an earlier run must not be mistaken for this one's.
            let stale = out.join("verdict.json");
            if stale.exists() {
                let _ = std::fs::remove_file(&stale);
            }
            None
        }
    };
    let summary = out.join("summary.md");
    write_atomic(&summary, summary_md.as_bytes())?;
    Ok(OutputFiles {
        results: results_path,
        verdict: verdict_path,
        summary,
    })
}

/// Whether this run may become a baseline run.
pub(crate) fn baseline_worthy(results: &RunResults, failed: bool) -> Result<(), String> {
    if failed || results.status != RunStatus::Complete {
        return Err(format!(
            "the run is {:?}, not complete: only complete runs become baselines",
            results.status
        )
        .to_lowercase());
    }
    BaselineStore::acceptable(results)
}
