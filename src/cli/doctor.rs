//! `infergate doctor` (placeholder until its issue lands).

use crate::exit::GateExit;

/// Arguments of `infergate doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}

/// Runs `infergate doctor`.
pub async fn execute(_args: DoctorArgs) -> anyhow::Result<GateExit> {
    anyhow::bail!("`infergate doctor` is not implemented yet")
}
