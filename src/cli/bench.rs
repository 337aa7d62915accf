//! `infergate bench`: measure the sustained-decode matrix against an already-running
//! OpenAI-compatible server, write the results file, print the seed-style matrix.

use std::path::PathBuf;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::bench::{self, BenchError, BenchOptions, BenchTarget};
use crate::exit::{GateExit, usage};
use crate::results::{CellStatus, MatrixSpec, RunResults};

/// Arguments of `infergate bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Base URL of the engine (e.g. http://127.0.0.1:8000; a trailing /v1 is fine).
    #[arg(long)]
    pub url: String,
    /// Model to request (default: the first id of /v1/models).
    #[arg(long)]
    pub model: Option<String>,
    /// Concurrency levels (streams kept running), e.g. 1,2,4,8.
    #[arg(long, default_value = "1,2,4")]
    pub concurrency: String,
    /// Context lengths in tokens, e.g. 0,8k,32k (k = 1024).
    #[arg(long, default_value = "0,8k")]
    pub contexts: String,
    /// Steady-state window per cell, e.g. 10s, 500ms, 2m.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Warm-up after readiness, before the window.
    #[arg(long, default_value = "3s")]
    pub warmup: String,
    /// max_tokens per request (streams restart when a request finishes).
    #[arg(long, default_value_t = 1024)]
    pub max_tokens: u32,
    /// Share of each prompt unique to its stream (the rest is a shared prefix), percent.
    #[arg(long, default_value_t = 25.0)]
    pub unique_context_percent: f64,
    /// Throughput samples per cell (the window is split into this many sub-windows).
    #[arg(long, default_value_t = 5)]
    pub sub_windows: u32,
    /// Repeat the whole matrix this many times (rounds per cell).
    #[arg(long, default_value_t = 1)]
    pub repetitions: u32,
    /// Name of the environment variable holding the API key (the key is never printed).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Engine family for the profile key (default: detected from /metrics).
    #[arg(long)]
    pub engine: Option<String>,
    /// Readiness must hold this long before warm-up.
    #[arg(long, default_value = "2.5s")]
    pub ready_stable: String,
    /// Admission stalled this long → capacity_limited.
    #[arg(long, default_value = "3s")]
    pub capacity_stall: String,
    /// Readiness time-out per cell (scaled up for contexts above 32k).
    #[arg(long, default_value = "120s")]
    pub ready_timeout: String,
    /// No byte on a producing stream for this long → stream error.
    #[arg(long, default_value = "60s")]
    pub request_timeout: String,
    /// Suite name written into the results.
    #[arg(long)]
    pub suite: Option<String>,
    /// Where to write the results JSON (atomically).
    #[arg(long)]
    pub out: PathBuf,
}

fn dur(flag: &str, v: &str) -> anyhow::Result<f64> {
    bench::parse_duration_s(v).map_err(|e| usage(format!("{flag}: {e}")))
}

/// Validates the arguments into measurement options (exit 2 on any mistake).
pub fn options_from_args(args: &BenchArgs) -> anyhow::Result<(BenchTarget, BenchOptions)> {
    let concurrency = bench::parse_concurrency(&args.concurrency)
        .map_err(|e| usage(format!("--concurrency: {e}")))?;
    let contexts =
        bench::parse_contexts(&args.contexts).map_err(|e| usage(format!("--contexts: {e}")))?;
    let duration_s = dur("--duration", &args.duration)?;
    if duration_s <= 0.0 {
        return Err(usage("--duration: must be above 0; use e.g. 10s"));
    }
    if !(0.0..=100.0).contains(&args.unique_context_percent) {
        return Err(usage(
            "--unique-context-percent: must be between 0 and 100; use e.g. 25",
        ));
    }
    if args.sub_windows == 0 || args.sub_windows > 1000 {
        return Err(usage("--sub-windows: must be 1..1000; use e.g. 5"));
    }
    if args.max_tokens == 0 {
        return Err(usage("--max-tokens: must be at least 1; use e.g. 1024"));
    }
    if args.repetitions == 0 {
        return Err(usage("--repetitions: must be at least 1"));
    }
    if !(args.url.starts_with("http://") || args.url.starts_with("https://")) {
        return Err(usage(format!(
            "--url: '{}' is not an http(s) URL; use e.g. http://127.0.0.1:8000",
            args.url
        )));
    }
    let api_key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            usage(format!(
                "--api-key-env: environment variable {var} is not set (export it or drop the flag)"
            ))
        })?),
        None => None,
    };
    let matrix = MatrixSpec {
        model: args.model.clone().unwrap_or_default(),
        concurrency,
        contexts,
        duration_s,
        warmup_s: dur("--warmup", &args.warmup)?,
        max_tokens: args.max_tokens,
        unique_context_percent: args.unique_context_percent,
        sub_windows: args.sub_windows,
        repetitions: args.repetitions,
    };
    let mut opts = BenchOptions::new(matrix, crate::telemetry::detect_hardware());
    opts.engine_name = args.engine.clone();
    opts.ready_stable_s = dur("--ready-stable", &args.ready_stable)?;
    opts.capacity_stall_s = dur("--capacity-stall", &args.capacity_stall)?;
    opts.ready_timeout_s = dur("--ready-timeout", &args.ready_timeout)?;
    opts.request_timeout_s = dur("--request-timeout", &args.request_timeout)?;
    opts.suite = args.suite.clone();
    let target = BenchTarget {
        base_url: args.url.clone(),
        model: args.model.clone(),
        api_key,
    };
    Ok((target, opts))
}

/// Writes results JSON atomically (temp file in the same directory, then rename).
pub fn write_results(path: &std::path::Path, results: &RunResults) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the directory of --out {}", path.display()))?;
    let json = serde_json::to_vec_pretty(results).context("serialising the results")?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, &json)
        .with_context(|| format!("writing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Runs `infergate bench`.
pub async fn execute(args: BenchArgs) -> anyhow::Result<GateExit> {
    let (target, opts) = options_from_args(&args)?;
    let cancel = CancellationToken::new();
    let signal_cancel = cancel.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        signal_cancel.cancel();
    });
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let total = (opts.matrix.concurrency.len()
        * opts.matrix.contexts.len()
        * opts.matrix.repetitions.max(1) as usize) as u64;
    let progress = tokio::spawn(crate::report::console::render_progress(rx, total));
    let outcome = bench::run_matrix(&target, &opts, Some(tx), cancel.clone()).await;
    let _ = progress.await;
    let results = match outcome {
        Ok(r) => r,
        Err(e @ BenchError::Unreachable { .. }) => {
            return Err(anyhow::Error::new(e).context(format!(
                "nothing measured; is the engine running at {}?",
                target.base_url
            )));
        }
        Err(e) => return Err(anyhow::Error::new(e).context("nothing measured")),
    };
    write_results(&args.out, &results)?;
    outln!("{}", crate::report::console::render_matrix(&results));
    outln!("results: {}", args.out.display());
    let measured = results
        .cells
        .iter()
        .filter(|c| matches!(c.status, CellStatus::Ok | CellStatus::CapacityLimited))
        .count();
    if measured == 0 {
        errln!(
            "error: no cell could be measured ({} cells errored or were skipped); see the reasons above",
            results.cells.len()
        );
        return Ok(GateExit::Failure);
    }
    match results.status {
        crate::results::RunStatus::Complete => {}
        crate::results::RunStatus::Partial | crate::results::RunStatus::Cancelled => {
            errln!(
                "error: the run is incomplete: {}",
                results.status_reason.as_deref().unwrap_or("(no reason)")
            );
            return Ok(GateExit::Failure);
        }
    }
    Ok(GateExit::Pass)
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
