//! `infergate close-stale-checks`: the action's `if: always()` cleanup step. A gate killed
//! mid-run (the runner's SIGKILL after a cancel, an OOM kill) leaves its check `in_progress`,
//! which blocks a required check; this completes every such check of this job (and of earlier
//! attempts of this workflow run) as `cancelled`. Checks of other jobs are never touched.
//!
//! Exit 0 whatever GitHub says (reporting never fails the job); 2 on bad arguments.

use infergate_report::report::github::{
    CHECK_NAME_PREFIX, GithubContext, GithubReporter, RetryPolicy,
};
use infergate_schema::exit::GateExit;

/// Arguments of `infergate close-stale-checks`.
#[derive(Debug, clap::Args)]
pub struct CloseStaleChecksArgs {
    /// Commit whose checks to close (default: the PR head from the event payload, else
    /// GITHUB_SHA), as the gate attached them.
    #[arg(long)]
    pub head_sha: Option<String>,
}

/// Runs `infergate close-stale-checks`.
pub async fn execute(args: CloseStaleChecksArgs) -> anyhow::Result<GateExit> {
    let mut ctx = GithubContext::from_env();
    if let Some(sha) = args.head_sha {
        ctx.head_sha = Some(sha);
    }
    let (retry, warnings) = RetryPolicy::from_lookup(|k| std::env::var(k).ok());
    ctx.warnings.extend(warnings);
    let mut reporter = GithubReporter::from_context(ctx, retry);
    let reason = "cancelled: the gate was stopped before it could report (the job was cancelled or the gate killed); its partial results, if any, are in the job's artifact";
    let (closed, outcome) = reporter.close_stale_checks(CHECK_NAME_PREFIX, reason).await;
    outcome.print(super::in_actions());
    if closed.is_empty() {
        errln!("close-stale-checks: no check of this job was left in progress");
    }
    for name in &closed {
        errln!(
            "close-stale-checks: completed `{}` as cancelled",
            infergate_io::untrusted_text::console(name)
        );
    }
    Ok(GateExit::Pass)
}
