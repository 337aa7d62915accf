//! `infergate stats_eval` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate stats_eval`.
#[derive(Debug, clap::Args)]
pub struct StatsEvalArgs {}

/// Runs `infergate stats_eval`.
pub async fn execute(_args: StatsEvalArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate stats_eval` is not implemented yet")
}
