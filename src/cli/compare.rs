//! `infergate compare` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {}

/// Runs `infergate compare`.
pub async fn execute(_args: CompareArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate compare` is not implemented yet")
}
