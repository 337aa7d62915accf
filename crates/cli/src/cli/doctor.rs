//! `infergate doctor`: what the runner looks like (GPUs, driver, PCIe links, NVML and why
//! not, CPU) and whether the engine answers — at `--url`, or booted from `--config`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::doctor::{self, BootCheck};
use infergate_engine::engine::{EngineLaunch, EngineProcess};
use infergate_schema::exit::{GateExit, usage};

/// Output format of `infergate doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum DoctorFormat {
    /// Human-readable report.
    #[default]
    Text,
    /// Machine-readable JSON.
    Json,
}

/// Arguments of `infergate doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Output format: text (default) or json, as every subcommand says it.
    #[arg(long, value_enum, default_value_t = DoctorFormat::Text)]
    pub format: DoctorFormat,
    /// Check an engine that is already running at this URL.
    #[arg(long, conflicts_with = "config")]
    pub url: Option<String>,
    /// Boot the engine of this gate config, check it, and stop it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Runs `infergate doctor`. Exit 0 when the report could be made (an unavailable NVML or an
/// unreachable engine is reported, not an error); 2 for a bad config.
pub async fn execute(args: DoctorArgs) -> anyhow::Result<GateExit> {
    if let Some(u) = &args.url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(usage(format!(
            "--url `{u}` must start with http:// or https:// (e.g. http://127.0.0.1:8000)"
        )));
    }
    let report = match &args.config {
        Some(path) => {
            let (boot, engine) = boot_and_check(path).await?;
            doctor::DoctorReport {
                engine,
                engine_boot: Some(boot),
                ..doctor::gather(None).await
            }
        }
        None => doctor::gather(args.url.as_deref()).await,
    };
    let text = match args.format {
        DoctorFormat::Json => super::pretty_json(&report, "the report")?,
        DoctorFormat::Text => doctor::render_text(&report),
    };
    out!("{text}");
    Ok(GateExit::Pass)
}

/// Boots the engine of the config at `path`, checks it while it runs and stops it.
async fn boot_and_check(path: &Path) -> anyhow::Result<(BootCheck, Option<doctor::EngineCheck>)> {
    let config = super::run::load_config(Some(path))?;
    let dir = tempfile::tempdir().context("creating a temporary directory for the engine log")?;
    let launch = EngineLaunch::from_config(
        &config.engine,
        config.model.as_deref(),
        &[],
        dir.path().join("engine.log"),
    )
    .context("preparing the engine command")?;
    let mut boot = BootCheck {
        command: launch.display.clone(),
        ready: false,
        boot_s: None,
        error: None,
        teardown_clean: None,
    };
    let url = launch.base_url.clone();
    // What `run` refuses before booting (a missing program, a path the engine's user
    // cannot reach) is reported with the same message, and nothing is booted.
    let spawned = match infergate_engine::engine::preflight(&config.engine, &launch, &[]) {
        Ok(()) => EngineProcess::spawn(launch)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(format!("{}: {e}", config.path)),
    };
    let engine = match spawned {
        Ok(engine) => engine,
        Err(error) => {
            boot.error = Some(error);
            return Ok((boot, None));
        }
    };
    let ready = engine
        .wait_ready(&CancellationToken::new(), config.report.log_tail_lines)
        .await;
    // Probe while it runs, then stop it.
    let check = match ready {
        Ok(r) => {
            (boot.ready, boot.boot_s) = (true, Some(r.boot_s));
            Some(doctor::check_engine(&url).await)
        }
        Err(e) => {
            boot.error = Some(e.to_string());
            None
        }
    };
    boot.teardown_clean = Some(engine.stop().await.group_gone);
    Ok((boot, check))
}
