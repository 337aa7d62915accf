//! `infergate import`: converts other tools' results files (llm-decode-bench JSON, `vllm bench
//! serve --save-result` JSON, guidellm reports) into infergate's schema, so they can be kept,
//! diffed and compared. Several files of one tool (vLLM writes one per `--max-concurrency`) are
//! joined into one run, one cell each. What could not be mapped is printed and kept in the run.

use std::path::PathBuf;

use anyhow::Context;

use infergate_io::untrusted_text::console as inert;
use infergate_report::report::console::wrap;
use infergate_schema::exit::{GateExit, usage};

/// Arguments of `infergate import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The file(s) to convert; several files of one tool are joined into one run (one cell per
    /// file for vLLM). infergate files are re-written as they are (one at a time).
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Where to write the infergate results file (atomically).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Runs `infergate import`.
pub async fn execute(args: ImportArgs) -> anyhow::Result<GateExit> {
    let mut runs = Vec::new();
    for file in &args.files {
        let loaded =
            infergate_store::import::load_results(file).map_err(|e| usage(e.to_string()))?;
        if loaded.len() != 1 {
            return Err(usage(format!(
                "{}: holds {} runs; import converts one run per file",
                file.display(),
                loaded.len()
            )));
        }
        runs.extend(loaded);
    }
    let run = if runs.len() == 1 {
        runs.remove(0)
    } else {
        let names: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
        infergate_store::import::join_runs(runs, &names).map_err(|e| usage(e.to_string()))?
    };
    let body = serde_json::to_vec_pretty(&run).context("serialising the imported run")?;
    infergate_io::fsio::write_durable(&args.out, &body)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let limited = run
        .cells
        .iter()
        .filter(|c| c.status != infergate_schema::results::CellStatus::Ok)
        .count();
    let wrote = format!(
        "wrote {}: run {}, {} cells ({} not ok), profile {}",
        args.out.display(),
        inert(&run.run_id),
        run.cells.len(),
        limited,
        inert(&run.profile.key)
    );
    outln!("{}", wrap(&wrote, 2));
    // The notes name the imported file's own keys and values.
    for note in infergate_store::import::unmapped_notes(&run) {
        let note = format!("  not mapped: {}", inert(note));
        outln!("{}", wrap(&note, 4));
    }
    Ok(GateExit::Pass)
}
