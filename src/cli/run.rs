//! `infergate run` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

/// Runs `infergate run`.
pub async fn execute(_args: RunArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate run` is not implemented yet")
}
