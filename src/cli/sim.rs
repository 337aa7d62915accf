//! `infergate sim` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

/// Runs `infergate sim`.
pub async fn execute(_args: SimArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate sim` is not implemented yet")
}
