//! `infergate bisect`: parse the arguments, run the bisection ([`crate::run::bisect`]) and print
//! its report.
//!
//! Exit codes: 0 the first bad commit was found, 2 usage/config error (nothing was built),
//! 3 the bisection could not conclude (a build or boot failed, nothing moved between good and
//! bad, a step stayed uncertain, cancelled); `bisect.json` is written on every path.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crate::exit::{GateExit, UsageError};
use crate::run::bisect::{BisectPlan, BisectRequest};

/// Arguments of `infergate bisect`.
#[derive(Debug, clap::Args)]
pub struct BisectArgs {
    /// A revision known to be good (measured first).
    #[arg(long)]
    pub good: String,
    /// A revision known to be bad (measured second); the commits between come from `[bisect] revs`.
    #[arg(long)]
    pub bad: String,
    /// Gate config with a `[bisect]` table (default: ./infergate.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Suite to measure (default: `pr` if the config has one, else its first suite).
    #[arg(long)]
    pub suite: Option<String>,
    /// Output directory: bisect.json, each boot's results, build and engine logs.
    #[arg(long, default_value = "infergate-bisect", value_parser = super::output_dir)]
    pub out: PathBuf,
    /// Extra argument appended to the engine command (repeatable).
    #[arg(long = "engine-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub engine_args: Vec<String>,
    /// Label recorded in each boot's results, KEY=VALUE (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
}

/// Runs `infergate bisect`.
pub(crate) async fn execute(args: BisectArgs) -> anyhow::Result<GateExit> {
    crate::engine::conceal_gate();
    let config = super::run::load_config(args.config.as_deref())?;
    let plan = BisectPlan::new(BisectRequest {
        config,
        suite: args.suite,
        good: args.good,
        bad: args.bad,
        out: args.out,
        engine_args: args.engine_args,
        labels: super::run::parse_labels(&args.labels)?,
    })
    .map_err(|e| anyhow::Error::new(UsageError(e.to_string())))?;
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
        errln!("warning: {}", crate::untrusted_text::console(w));
    }
    outln!("{}", crate::report::bisect::text(&run.record));
    match (&run.record_path, &run.write_error) {
        (Some(p), _) => errln!("record: {}", p.display()),
        (None, Some(e)) => errln!("error: {e}"),
        (None, None) => {}
    }
    Ok(run.exit())
}
