//! `infergate bench` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

/// Runs `infergate bench`.
pub async fn execute(_args: BenchArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate bench` is not implemented yet")
}
