//! `infergate bisect`: parse the arguments, run the bisection ([`infergate_gate::run::bisect`]) and print
//! its report.
//!
//! Exit codes: 0 the first bad commit was found, 2 usage/config error (nothing was built),
//! 3 the bisection could not conclude (a build or boot failed, nothing moved between good and
//! bad, a step stayed uncertain, cancelled); `bisect.json` is written on every path.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use infergate_gate::run::bisect::{BisectPlan, BisectRequest};
use infergate_schema::answer::metric_name;
use infergate_schema::exit::{GateExit, usage};
use infergate_schema::verdict::Metric;

/// Arguments of `infergate bisect`.
#[derive(Debug, clap::Args)]
pub struct BisectArgs {
    /// A revision known to be good (measured first).
    #[arg(
        long,
        required_unless_present = "from_change",
        conflicts_with = "from_change"
    )]
    pub good: Option<String>,
    /// A revision known to be bad (measured second); the commits between come from `[bisect] revs`.
    #[arg(
        long,
        required_unless_present = "from_change",
        conflicts_with = "from_change"
    )]
    pub bad: Option<String>,
    /// Bisect the commits of a change point's location interval (`infergate changes`): the
    /// first run after the change, as the change point's `run_id` names it. Its matrix-wide
    /// change point is taken when there is one, else the only cell that has one there.
    #[arg(long, value_name = "RUN_ID")]
    pub from_change: Option<String>,
    /// The baseline store `--from-change` reads the history from.
    #[arg(long, default_value = "baselines", value_name = "DIR")]
    pub baseline_dir: PathBuf,
    /// Gate config with a `[bisect]` table (default: ./infergate.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Suite to measure (default: `pr` if the config has one, else its first suite).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output directory: bisect.json, each boot's results, build and engine logs.
    #[arg(long, default_value = "infergate-bisect", value_name = "DIR", value_parser = super::output_dir)]
    pub out: PathBuf,
    /// Extra argument appended to the engine command (repeatable).
    #[arg(long = "engine-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub engine_args: Vec<String>,
    /// Label recorded in each boot's results, KEY=VALUE (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// The metric to bisect, as `verdict.json` names it (`itl_p99`, `prefill_tps`, …): each
    /// boot's matrix value is its (default: aggregate tok/s; with `--from-change`, the metric
    /// whose change point starts at that run).
    #[arg(long, value_name = "METRIC", value_parser = super::parse_metric)]
    pub metric: Option<Metric>,
}

/// Runs `infergate bisect`.
pub async fn execute(args: BisectArgs) -> anyhow::Result<GateExit> {
    infergate_engine::engine::conceal_gate();
    let (good, bad, noise_prior, metric) = match (&args.from_change, args.good, args.bad) {
        (Some(id), _, _) => {
            let (good, bad, prior, metric) = from_change(&args.baseline_dir, id, args.metric)?;
            errln!(
                "infergate bisect: {} change point at run {id}: its location interval's commits {good}..{bad}",
                metric_name(metric)
            );
            if let Some(p) = prior {
                errln!(
                    "infergate bisect: the history's run-to-run noise {:.2}% (worth {:.0} boots' degrees of freedom) is the boot noise's prior",
                    p.sd * 100.0,
                    p.df
                );
            }
            (good, bad, prior, metric)
        }
        (None, Some(g), Some(b)) => (g, b, None, args.metric.unwrap_or(Metric::AggregateTps)),
        _ => return Err(usage("give --good and --bad, or --from-change RUN_ID")),
    };
    let config = super::run::load_config(args.config.as_deref())?;
    let plan = BisectPlan::new(BisectRequest {
        config,
        suite: args.suite,
        good,
        bad,
        out: args.out,
        engine_args: args.engine_args,
        labels: super::run::parse_labels(&args.labels)?,
        noise_prior,
        metric,
    })
    .map_err(|e| usage(e.to_string()))?;
    let cancel = CancellationToken::new();
    super::run::install_signal_handlers(cancel.clone())?;
    errln!(
        "infergate bisect: {}..{} · config {} · suite `{}` · output in {}",
        plan.good,
        plan.bad,
        plan.config.path,
        plan.suite.name,
        plan.out.display()
    );
    let run = plan.run(&super::run::progress, cancel).await;
    for w in &run.warnings {
        super::say("warning", w);
    }
    outln!("{}", infergate_report::report::bisect::text(&run.record));
    match (&run.record_path, &run.write_error) {
        (Some(p), _) => errln!("record: {}", p.display()),
        (None, Some(e)) => errln!(
            "{}",
            infergate_report::report::console::error_line(&e.to_string())
        ),
        (None, None) => {}
    }
    Ok(run.exit())
}

/// The good and bad ends of the location interval of the change point first seen at run `id`
/// in the store at `dir` (of `metric`, else of whichever metric the gate gates by default has
/// one there): its matrix-wide one, else the only cell's, the boot noise's prior from that
/// group's history (`stats::bisect::history_prior`) and the metric. Usage errors (exit 2)
/// when there is none, several (of one metric, or of several metrics without `metric`), or its
/// runs carry no commits.
fn from_change(
    dir: &std::path::Path,
    id: &str,
    metric: Option<Metric>,
) -> anyhow::Result<(
    String,
    String,
    Option<infergate_model::stats::bisect::NoisePrior>,
    Metric,
)> {
    use infergate_model::stats::changepoint::{ChangeSettings, Scope, analyse, default_metrics};
    let store =
        infergate_store::baseline::BaselineStore::open(dir).map_err(|e| usage(e.to_string()))?;
    let store_err = |e| anyhow::Error::new(e).context(format!("reading {}", dir.display()));
    let metrics = metric.map_or_else(default_metrics, |m| vec![m]);
    let mut found = Vec::new();
    for (key, suites) in store.profiles().map_err(store_err)? {
        for suite in suites {
            let loaded = store.load(&key, Some(&suite)).map_err(store_err)?;
            if !loaded.runs.iter().any(|r| r.run_id == id) {
                continue;
            }
            let h = analyse(&loaded.runs, &metrics, &[], &ChangeSettings::default())
                .map_err(|e| usage(e.to_string()))?;
            let at: Vec<_> = h
                .change_points
                .into_iter()
                .filter(|c| c.run_id == id)
                .collect();
            let mut moved: Vec<&str> = at.iter().map(|c| c.metric.as_str()).collect();
            moved.sort_unstable();
            moved.dedup();
            if moved.len() > 1 {
                return Err(usage(format!(
                    "--from-change {id}: {} of {key} / {suite} change at that run; give --metric {}",
                    moved.join(", "),
                    moved.join(" or --metric ")
                )));
            }
            let only = at.first().filter(|_| at.len() == 1);
            if let Some(c) = at.iter().find(|c| c.scope == Scope::Matrix).or(only) {
                let prior = infergate_model::stats::bisect::history_prior(&loaded.runs, c.metric);
                found.push((format!("{key} / {suite}"), c.clone(), prior));
            } else if at.len() > 1 {
                return Err(usage(format!(
                    "--from-change {id}: {} cells of {key} / {suite} have a change point there and the matrix has none; bisect one with --good and --bad",
                    at.len()
                )));
            }
        }
    }
    let (group, c, prior) = match found.len() {
        1 => found.remove(0),
        0 => {
            return Err(usage(format!(
                "--from-change {id}: no change point starts at run {id} in {} (see `infergate changes`)",
                dir.display()
            )));
        }
        n => {
            return Err(usage(format!(
                "--from-change {id}: {n} groups of {} have a change point at that run",
                dir.display()
            )));
        }
    };
    match (c.location_interval).and_then(|l| l.first_commit.zip(l.last_commit)) {
        Some((good, bad)) => Ok((good, bad, prior, c.metric)),
        None => Err(usage(format!(
            "--from-change {id} ({group}): its location interval has no commits at both ends (the runs need a `sha` label, and one run before the interval)"
        ))),
    }
}
