//! `infergate ab` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate ab`.
#[derive(Debug, clap::Args)]
pub struct AbArgs {}

/// Runs `infergate ab`.
pub async fn execute(_args: AbArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate ab` is not implemented yet")
}
