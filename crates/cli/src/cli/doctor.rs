//! `infergate doctor`: what the runner looks like (GPUs, driver, PCIe links, NVML and why
//! not, CPU) and whether the engine answers — at `--url`, or booted from `--config`.

use std::path::PathBuf;

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
    let mut report;
    if let Some(path) = &args.config {
        let config = super::run::load_config(Some(path))?;
        let dir =
            tempfile::tempdir().context("creating a temporary directory for the engine log")?;
        let launch = EngineLaunch::from_config(
            &config.engine,
            config.model.as_deref(),
            &[],
            dir.path().join("engine.log"),
        )
        .context("preparing the engine command")?;
        let command = launch.display.clone();
        let url = launch.base_url.clone();
        // What `run` refuses before booting (a missing program, a path the engine's user
        // cannot reach) is reported with the same message, and nothing is booted.
        let spawned = match infergate_engine::engine::preflight(&config.engine, &launch, &[]) {
            Ok(()) => EngineProcess::spawn(launch)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("{}: {e}", config.path)),
        };
        let (boot, reachable_url) = match spawned {
            Err(error) => (
                BootCheck {
                    command,
                    ready: false,
                    boot_s: None,
                    error: Some(error),
                    teardown_clean: None,
                },
                None,
            ),
            Ok(engine) => {
                let ready = engine
                    .wait_ready(&CancellationToken::new(), config.report.log_tail_lines)
                    .await;
                let (ok, boot_s, error) = match ready {
                    Ok(r) => (true, Some(r.boot_s), None),
                    Err(e) => (false, None, Some(e.to_string())),
                };
                // Probe while it runs, then stop it.
                let check = if ok {
                    Some(doctor::check_engine(&url).await)
                } else {
                    None
                };
                let stop = engine.stop().await;
                (
                    BootCheck {
                        command,
                        ready: ok,
                        boot_s,
                        error,
                        teardown_clean: Some(stop.group_gone),
                    },
                    check,
                )
            }
        };
        report = doctor::gather(None).await;
        report.engine = reachable_url;
        report.engine_boot = Some(boot);
    } else {
        report = doctor::gather(args.url.as_deref()).await;
    }
    if args.format == DoctorFormat::Json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).context("serialising the report")?
        );
    } else {
        out!("{}", doctor::render_text(&report));
    }
    Ok(GateExit::Pass)
}
