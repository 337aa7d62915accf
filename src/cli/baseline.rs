//! `infergate baseline` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate baseline`.
#[derive(Debug, clap::Args)]
pub struct BaselineArgs {}

/// Runs `infergate baseline`.
pub async fn execute(_args: BaselineArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate baseline` is not implemented yet")
}
