//! `infergate import`: converts another tool's results file (llm-decode-bench JSON) into
//! infergate's schema, so it can be kept, diffed and read by tools that know only our schema.

use std::path::PathBuf;

use anyhow::Context;

use crate::exit::{GateExit, usage};

/// Arguments of `infergate import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The file to convert (llm-decode-bench JSON; infergate files are re-written as they are).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where to write the infergate results file (atomically).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Runs `infergate import`.
pub async fn execute(args: ImportArgs) -> anyhow::Result<GateExit> {
    let runs = crate::import::load_results(&args.file).map_err(|e| usage(e.to_string()))?;
    let run = match runs.as_slice() {
        [one] => one,
        _ => {
            return Err(usage(format!(
                "{}: holds {} runs; import converts one run per file",
                args.file.display(),
                runs.len()
            )));
        }
    };
    let body = serde_json::to_vec_pretty(run).context("serialising the imported run")?;
    crate::baseline::write_file_atomic(&args.out, &body)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let limited = run
        .cells
        .iter()
        .filter(|c| c.status != crate::results::CellStatus::Ok)
        .count();
    outln!(
        "wrote {}: run {}, {} cells ({} not ok), profile {}",
        args.out.display(),
        run.run_id,
        run.cells.len(),
        limited,
        run.profile.key
    );
    Ok(GateExit::Pass)
}
