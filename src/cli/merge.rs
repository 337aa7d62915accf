//! `infergate merge` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate merge`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {}

/// Runs `infergate merge`.
pub async fn execute(_args: MergeArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate merge` is not implemented yet")
}
