//! `infergate report` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {}

/// Runs `infergate report`.
pub async fn execute(_args: ReportArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate report` is not implemented yet")
}
