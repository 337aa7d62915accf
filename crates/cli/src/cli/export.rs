//! `infergate export`: renders a results file (any format `import` reads) and optionally its
//! verdict as Bencher Metric Format, github-action-benchmark custom JSON, JUnit XML or CSV, for
//! the dashboards and test reporters teams already watch. Rendering only: the exit code is 0
//! whatever the verdict says (the gate's own step fails the job), except for a run whose gate
//! was stopped (`in_progress`): exit 3, JUnit written with the run as an error case, the other
//! formats not written.

use std::path::PathBuf;

use infergate_schema::exit::{GateExit, usage};
use infergate_schema::verdict::ComparisonReport;
use infergate_store::export::gab::GabTool;

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Bencher Metric Format JSON (`bencher run --adapter json --file F`).
    Bmf,
    /// github-action-benchmark `customBiggerIsBetter` / `customSmallerIsBetter` JSON.
    Gab,
    /// JUnit XML: a test case per cell and metric, a failure per regressed cell.
    Junit,
    /// CSV of the cell table.
    Csv,
}

/// Arguments of `infergate export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// The results file (infergate, llm-decode-bench, vllm bench serve or guidellm JSON).
    #[arg(long, value_name = "FILE")]
    pub results: PathBuf,
    /// The verdict file written with these results (JUnit failures, CSV verdict columns).
    #[arg(long, value_name = "FILE")]
    pub verdict: Option<PathBuf>,
    /// For `--format gab`: which custom tool the file is for (throughputs or latencies).
    #[arg(long, value_enum, default_value_t = GabTool::BiggerIsBetter)]
    pub gab_tool: GabTool,
    /// Write to this file (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs `infergate export`.
pub async fn execute(args: ExportArgs) -> anyhow::Result<GateExit> {
    let runs =
        infergate_store::import::load_results(&args.results).map_err(|e| usage(e.to_string()))?;
    let [run] = runs.as_slice() else {
        return Err(usage(format!(
            "{}: holds {} runs; export renders one run",
            args.results.display(),
            runs.len()
        )));
    };
    // Fail closed on a run whose gate was stopped: its figures are the cells done before, no
    // measurement of the matrix. JUnit still gets its report, with the run as an error case
    // (`run` / `finished`), so the test reporter shows why; the figure formats get nothing.
    let unfinished = (run.status == infergate_schema::results::RunStatus::InProgress).then(|| {
        format!(
            "{}: run `{}` is `in_progress`: the gate that wrote it was stopped before it finished, so it is no finished measurement",
            args.results.display(),
            infergate_io::untrusted_text::console(&run.run_id)
        )
    });
    if let Some(why) = &unfinished
        && args.format != ExportFormat::Junit
    {
        anyhow::bail!("{why}; nothing exported (JUnit reports it as an error case)");
    }
    let verdict: Option<ComparisonReport> = (args.verdict.as_ref())
        .map(|p| {
            let text = infergate_store::import::read_file(p, "verdict.json")?;
            infergate_store::import::deserialize_at(&text, &p.display().to_string())
        })
        .transpose()
        .map_err(|e| usage(e.to_string()))?;
    if verdict.is_some() && matches!(args.format, ExportFormat::Bmf | ExportFormat::Gab) {
        errln!("infergate export: --verdict is not used by --format bmf/gab (figures only)");
    }
    use infergate_store::export::{bmf, csv, gab, junit};
    let body = match args.format {
        ExportFormat::Bmf => bmf::render(run),
        ExportFormat::Gab => gab::render(run, args.gab_tool),
        ExportFormat::Junit => junit::render(run, verdict.as_ref()),
        ExportFormat::Csv => csv::render(run, verdict.as_ref()),
    }
    .map_err(|e| usage(format!("{}: {e}", args.results.display())))?;
    // As inert as the console: the engine's and the file's strings are data.
    super::emit(&body, args.out.as_deref())?;
    if let Some(why) = unfinished {
        anyhow::bail!("{why}; the JUnit report says so in its error case `run` / `finished`");
    }
    Ok(GateExit::Pass)
}
