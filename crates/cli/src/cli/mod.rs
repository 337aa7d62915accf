//! Subcommand arguments and the glue each one runs. `anyhow` lives here, at the edge; the
//! modules below it return typed errors.

use clap::{Parser, Subcommand};

use infergate_schema::exit::GateExit;

pub mod ab;
pub mod ab_eval;
pub mod baseline;
pub mod bench;
pub mod bisect;
pub mod changes;
pub mod close_stale_checks;
pub mod compare;
#[cfg(test)]
mod docs_coverage;
pub mod doctor;
pub mod export;
pub mod import;
pub mod merge;
pub mod report;
pub mod run;
pub mod sim;
pub mod sim_engine;
pub mod stats_eval;
pub mod supervise;

/// A metric as `verdict.json` names it (`itl_p99`); the error lists every name.
pub(crate) fn parse_metric(s: &str) -> Result<infergate_schema::verdict::Metric, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|e| e.to_string())
}

/// clap value parser of an output-directory flag (`--out` of `run`, `ab`, `bisect`): a path
/// that exists and is not a directory is refused at parse time (exit 2, naming the flag); a
/// missing one is created by the command.
pub(crate) fn output_dir(value: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(value);
    if path.exists() && !path.is_dir() {
        return Err(format!(
            "{value} is a file; this flag names a directory (created when missing) for the output files"
        ));
    }
    Ok(path)
}

/// `--fail-on`, the same flag on `run`, `ab`, `compare`, `report` and `merge`: the action
/// passes its `fail-on` input here, so the step's exit code and the check run come from one
/// setting ([`infergate_schema::policy::GatePolicy::chosen`]).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct FailOnArg {
    /// What fails the gate: `regression`, `insufficient` (also a gate not sensitive enough to
    /// say pass) or `never` (report only). Default: the config's `[thresholds] fail_on`, else
    /// `regression`.
    #[arg(long = "fail-on", value_name = "WORD", value_parser = infergate_schema::exit::FailOn::parse)]
    pub fail_on: Option<infergate_schema::exit::FailOn>,
}

/// The plain-English form of clap's number-parsing errors ("invalid digit found in string"
/// says nothing to someone who typed `--rounds four`).
pub fn plain_parse_error(rendered: &str) -> String {
    [
        (
            "invalid digit found in string",
            "not a whole number (e.g. 4)",
        ),
        // No example: what a number means is the flag's (its help says), and a fraction shown
        // here (`0.05`) read as "5%" where the flag takes a factor.
        ("invalid float literal", "not a number"),
        ("number too large to fit in target type", "too large"),
        ("number too small to fit in target type", "too small"),
        (
            "cannot parse integer from empty string",
            "empty: give a whole number",
        ),
    ]
    .iter()
    .fold(rendered.to_string(), |text, (from, to)| {
        text.replace(from, to)
    })
}

/// Prints a `kind: text` line (`notice`, `warning`) on stderr
/// ([`infergate_report::report::console::kind_line`]), or inside GitHub Actions the workflow command that
/// makes it an annotation on the job page.
pub(crate) fn say(kind: &str, text: &str) {
    if in_actions() {
        // An annotation on the job page, where a reviewer sees it without opening the log.
        infergate_io::stdio::write_workflow_command(
            &infergate_report::report::actions::command(kind, &[("title", "infergate")], text),
            true,
        );
    } else {
        errln!(
            "{}",
            infergate_report::report::console::kind_line(kind, text)
        );
    }
}

/// Writes `text` to `out` atomically, or prints it.
pub(crate) fn emit(text: &str, out: Option<&std::path::Path>) -> anyhow::Result<()> {
    use anyhow::Context as _;
    match out {
        // The same last guard as the console's: a file holds no byte stdout would not print.
        Some(path) => infergate_io::fsio::write_durable(
            path,
            infergate_io::untrusted_text::file_sink(text).as_bytes(),
        )
        .with_context(|| format!("writing {}", path.display())),
        None => {
            out!("{text}");
            Ok(())
        }
    }
}

/// `value` as pretty JSON with a final newline; `what` names it if it cannot be serialised.
pub(crate) fn pretty_json(value: &impl serde::Serialize, what: &str) -> anyhow::Result<String> {
    use anyhow::Context as _;
    Ok(serde_json::to_string_pretty(value).with_context(|| format!("serialising {what}"))? + "\n")
}

/// Whether this process runs inside GitHub Actions (workflow commands go to stdout there).
pub(crate) fn in_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// Performance regression gate for LLM inference engines (boot, measure, compare, report)
#[derive(Debug, Parser)]
#[command(name = "infergate", version, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    /// The subcommand to run.
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gate: validate the config, boot the engine, measure, compare, report, tear down.
    Run(run::RunArgs),
    /// Measure the matrix against an already-running OpenAI-compatible server.
    Bench(bench::BenchArgs),
    /// Serve the simulated engine (OpenAI-compatible, vLLM-style metrics) on 127.0.0.1.
    Sim(sim::SimArgs),
    /// Compare candidate results with a baseline and print verdicts.
    Compare(compare::CompareArgs),
    /// Manage the baseline store (add, show, prune, list, accept).
    Baseline(baseline::BaselineArgs),
    /// Convert other tools' results (llm-decode-bench, vllm bench serve, guidellm) into infergate's schema.
    Import(import::ImportArgs),
    /// Render results (and a verdict) as Bencher BMF, github-action-benchmark JSON, JUnit XML or CSV.
    Export(export::ExportArgs),
    /// Monte Carlo evaluation of the decision rule: false-alarm rate and power.
    StatsEval(stats_eval::StatsEvalArgs),
    /// Post results and verdicts: GitHub check run, PR comment, job summary, step outputs.
    Report(report::ReportArgs),
    /// Complete as `cancelled` the checks a killed gate of this job left in progress (the
    /// action's `if: always()` cleanup step).
    CloseStaleChecks(close_stale_checks::CloseStaleChecksArgs),
    /// Describe the runner: GPUs, driver, PCIe, NVML, engine reachability.
    Doctor(doctor::DoctorArgs),
    /// Join shard results (one per runner profile) into one verdict and one summary.
    Merge(merge::MergeArgs),
    /// Paired A/B comparison of two engine builds booted alternately on one runner.
    Ab(ab::AbArgs),
    /// Monte Carlo of the adaptive and paired A/B designs: false alarms, power, cost.
    AbEval(ab_eval::AbEvalArgs),
    /// Change points over a baseline store's history (text, Markdown, JSON or HTML report).
    Changes(changes::ChangesArgs),
    /// Monte Carlo of the change-point search: false alerts per 100 nights, delay, location.
    ChangesEval(changes::ChangesEvalArgs),
    /// Find the first bad commit between a good and a bad revision (builds and boots commits).
    Bisect(bisect::BisectArgs),
    /// Internal: the engine's supervisor (subreaper, cgroup, dies with the gate), started by
    /// `run`, `ab` and `doctor` for every engine boot.
    #[command(name = "__supervise", hide = true)]
    Supervise(supervise::SuperviseArgs),
}

/// Runs one parsed command line.
pub async fn execute(cli: Cli) -> anyhow::Result<GateExit> {
    match cli.command {
        Command::Run(a) => run::execute(a).await,
        Command::Bench(a) => bench::execute(a).await,
        Command::Sim(a) => sim::execute(a).await,
        Command::Compare(a) => compare::execute(a).await,
        Command::Baseline(a) => baseline::execute(a).await,
        Command::Import(a) => import::execute(a).await,
        Command::Export(a) => export::execute(a).await,
        Command::StatsEval(a) => stats_eval::execute(a).await,
        Command::Report(a) => report::execute(a).await,
        Command::CloseStaleChecks(a) => close_stale_checks::execute(a).await,
        Command::Doctor(a) => doctor::execute(a).await,
        Command::Merge(a) => merge::execute(a).await,
        Command::Ab(a) => ab::execute(a).await,
        Command::AbEval(a) => ab_eval::execute(a).await,
        Command::Changes(a) => changes::execute(a).await,
        Command::ChangesEval(a) => changes::execute_eval(a).await,
        Command::Bisect(a) => bisect::execute(a).await,
        Command::Supervise(a) => supervise::execute(a).await,
    }
}

#[cfg(test)]
mod vocabulary_tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand (nested ones too), with its path: `baseline accept`.
    fn commands() -> Vec<(String, clap::Command)> {
        fn walk(prefix: &str, cmd: &clap::Command, out: &mut Vec<(String, clap::Command)>) {
            for sub in cmd.get_subcommands() {
                let name = format!("{prefix}{}", sub.get_name()).trim().to_string();
                out.push((name.clone(), sub.clone()));
                walk(&format!("{name} "), sub, out);
            }
        }
        let mut out = Vec::new();
        walk("", &Cli::command(), &mut out);
        out
    }

    fn value_name(arg: &clap::Arg) -> String {
        arg.get_value_names()
            .and_then(|v| v.first())
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// `infergate --help` says what the tool is. A bare `about` took the CLI crate's Cargo
    /// description, an internal note ("Argument structs and the glue …"), as the tool's.
    #[test]
    fn the_top_level_help_says_what_infergate_is() {
        let about = Cli::command().get_about().map(ToString::to_string);
        assert_eq!(
            about.as_deref(),
            Some(
                "Performance regression gate for LLM inference engines (boot, measure, compare, report)"
            )
        );
    }

    /// One CLI vocabulary: the same flag for the same thing in every subcommand. `--format`
    /// picks an output format from a list (never a `--json` switch); `--config` is a FILE;
    /// `--baseline-dir` a DIR; `--out` a DIR where a command writes several files (`run`, `ab`,
    /// `bisect`) and a FILE everywhere else, said in its help; no synonym of these is a flag.
    #[test]
    fn every_subcommand_uses_the_same_flag_for_the_same_thing() {
        let synonyms = [
            "json",
            "output",
            "output-dir",
            "out-dir",
            "results-dir",
            "store",
            "baseline-store",
            "store-dir",
            "cfg",
            "config-file",
            "fmt",
        ];
        let mut out_dirs = Vec::new();
        let mut seen = std::collections::BTreeMap::<&str, usize>::new();
        for (name, cmd) in commands() {
            for arg in cmd.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                assert!(
                    !synonyms.contains(&long),
                    "`infergate {name} --{long}`: say it with --format, --out, --baseline-dir or --config"
                );
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                match long {
                    "format" => {
                        *seen.entry("format").or_default() += 1;
                        assert!(
                            arg.get_action().takes_values()
                                && !arg.get_possible_values().is_empty(),
                            "`infergate {name} --format` picks from a list of formats"
                        );
                    }
                    "config" => {
                        *seen.entry("config").or_default() += 1;
                        assert_eq!(value_name(arg), "FILE", "`infergate {name} --config`");
                    }
                    "baseline-dir" => {
                        *seen.entry("baseline-dir").or_default() += 1;
                        assert_eq!(value_name(arg), "DIR", "`infergate {name} --baseline-dir`");
                    }
                    "out" => {
                        *seen.entry("out").or_default() += 1;
                        match value_name(arg).as_str() {
                            "DIR" => {
                                assert!(
                                    help.starts_with("Output directory"),
                                    "`infergate {name} --out DIR`: {help}"
                                );
                                out_dirs.push(name.clone());
                            }
                            "FILE" => assert!(
                                help.contains("file"),
                                "`infergate {name} --out FILE`: {help}"
                            ),
                            other => panic!("`infergate {name} --out {other}`: DIR or FILE"),
                        }
                    }
                    _ => {}
                }
            }
        }
        // docs/run.md ("`--out`: a directory or a file") names these three.
        assert_eq!(out_dirs, ["run", "ab", "bisect"]);
        for flag in ["format", "config", "baseline-dir", "out"] {
            assert!(
                seen.get(flag).copied().unwrap_or(0) >= 2,
                "--{flag}: {seen:?}"
            );
        }
    }
}
