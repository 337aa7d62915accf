//! `infergate import` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {}

/// Runs `infergate import`.
pub async fn execute(_args: ImportArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate import` is not implemented yet")
}
