//! `infergate merge`: the final job of a fan-out workflow joins the shards' verdicts (one per
//! GPU profile) into one verdict, one summary and one exit code.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use infergate_report::merge::Shard;
use infergate_schema::exit::{GateExit, usage};

/// Output formats of `infergate merge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MergeFormat {
    /// GitHub-flavoured Markdown: an overview plus one section per profile.
    Md,
    /// The merged verdict as JSON (self-contained: every shard's comparison is included).
    Json,
    /// Plain text for a terminal.
    Text,
}

/// Arguments of `infergate merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// A shard: a results directory holding `verdict.json` (and `results.json`; a run that
    /// compared nothing has only `results.json`), or a verdict JSON file. Repeat once per shard.
    #[arg(long = "shard", value_name = "DIR_OR_VERDICT_FILE", required = true)]
    pub shards: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: MergeFormat,
    /// Write the output to this file (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Append `verdict=`, `conclusion=`, `regressions=`, `profiles=` and `not-gated=` lines to
    /// this file (e.g. `$GITHUB_OUTPUT`), so a workflow step can branch on the merged verdict.
    #[arg(long, value_name = "FILE")]
    pub github_output: Option<PathBuf>,
    /// The number of shards the workflow launched (e.g. its matrix size): any other number
    /// of shards given fails the merge (exit 3), so a shard that never arrived is not read
    /// as one that passed.
    #[arg(long, value_name = "N")]
    pub expect_shards: Option<usize>,
    #[command(flatten)]
    /// What fails the merged gate (`regression` unless given).
    pub fail_on: super::FailOnArg,
}

/// Runs `infergate merge`: the exit code of the gate policy under `--fail-on` (1: a verdict it
/// fails on), 3 when a profile could not be measured well enough to decide or an expected
/// shard is missing; an unreadable shard is exit 2.
pub async fn execute(args: MergeArgs) -> anyhow::Result<GateExit> {
    let mut shards = Vec::with_capacity(args.shards.len());
    for path in &args.shards {
        shards.push(Shard::load(path).map_err(|e| usage(e.to_string()))?);
    }
    // merge reads no config: the flag, else the default.
    let policy = infergate_schema::policy::GatePolicy::chosen(args.fail_on.fail_on, None);
    let merged = infergate_report::merge::merge(shards, policy, args.expect_shards);
    let rendered = match args.format {
        MergeFormat::Md => infergate_report::report::merged::markdown(&merged),
        MergeFormat::Text => infergate_report::report::merged::text(&merged),
        MergeFormat::Json => super::pretty_json(&merged, "the merged verdict")?,
    };
    // The shards' text is the runners' word: a file gets the console's guard.
    super::emit(&rendered, args.out.as_deref())?;
    if let Some(path) = &args.github_output {
        append(
            path,
            &infergate_report::report::merged::github_outputs(&merged),
        )?;
    }
    Ok(merged.exit())
}

fn append(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {} for appending", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("appending to {}", path.display()))
}
