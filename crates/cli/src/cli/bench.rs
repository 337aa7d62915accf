//! `infergate bench`: measure the sustained-decode matrix against an already-running
//! OpenAI-compatible server, write the results file, print the seed-style matrix.

use std::path::PathBuf;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use infergate_measure::bench::{self, BenchError, BenchOptions, BenchTarget};
use infergate_report::report::console::{error_line, render_matrix, render_progress};
use infergate_schema::exit::{GateExit, usage};
use infergate_schema::results::{CellTiming, MatrixSpec};

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
    #[arg(long, default_value_t = secs(DEFAULT.duration_s))]
    pub duration: String,
    /// Warm-up after readiness, before the window.
    #[arg(long, default_value_t = secs(DEFAULT.warmup_s))]
    pub warmup: String,
    /// max_tokens per request (streams restart when a request finishes).
    #[arg(long, default_value_t = DEFAULT.max_tokens)]
    pub max_tokens: u32,
    /// Share of each prompt unique to its stream (the rest is a shared prefix), percent.
    #[arg(long, default_value_t = DEFAULT.unique_context_percent)]
    pub unique_context_percent: f64,
    /// Throughput samples per cell (the window is split into this many sub-windows).
    #[arg(long, default_value_t = DEFAULT.sub_windows)]
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
    /// Without engine metrics, readiness must hold this long (with them, 3 agreeing polls);
    /// the warm-up counts from when all streams were admitted.
    #[arg(long, default_value_t = secs(DEFAULT.ready_stable_s))]
    pub ready_stable: String,
    /// Admission stalled this long → capacity_limited.
    #[arg(long, default_value_t = secs(DEFAULT.capacity_stall_s))]
    pub capacity_stall: String,
    /// Readiness time-out per cell (scaled up for contexts above 32k).
    #[arg(long, default_value_t = secs(DEFAULT.ready_timeout_s))]
    pub ready_timeout: String,
    /// No byte on a producing stream for this long → stream error.
    #[arg(long, default_value_t = secs(DEFAULT.request_timeout_s))]
    pub request_timeout: String,
    /// Measure every cell, even above a concurrency already capacity-limited at that context
    /// (by default such cells are recorded capacity_limited unmeasured, as `run` does).
    #[arg(long)]
    pub measure_doomed: bool,
    /// Suite name written into the results.
    #[arg(long)]
    pub suite: Option<String>,
    /// The results file to write (atomically): a file, as one run makes one file (`run`,
    /// `ab` and `bisect` take an output directory).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// The per-cell defaults `run`'s config suites use too, so both measure the same matrix.
const DEFAULT: CellTiming = CellTiming::DEFAULT;

/// A default duration as a flag value (`10s`, `2.5s`).
fn secs(s: f64) -> String {
    format!("{s}s")
}

fn dur(flag: &str, v: &str) -> anyhow::Result<f64> {
    infergate_config::config::parse_duration_s(v).map_err(|e| usage(format!("{flag}: {e}")))
}

/// Validates the arguments into measurement options (exit 2 on any mistake).
fn options_from_args(args: &BenchArgs) -> anyhow::Result<(BenchTarget, BenchOptions)> {
    let concurrency = infergate_config::config::parse_concurrency(&args.concurrency)
        .map_err(|e| usage(format!("--concurrency: {e}")))?;
    let contexts = infergate_config::config::parse_contexts(&args.contexts)
        .map_err(|e| usage(format!("--contexts: {e}")))?;
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
        return Err(usage("--max-tokens: must be at least 1; use e.g. 512"));
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
        timing: CellTiming {
            duration_s,
            warmup_s: dur("--warmup", &args.warmup)?,
            max_tokens: args.max_tokens,
            unique_context_percent: args.unique_context_percent,
            sub_windows: args.sub_windows,
            ready_stable_s: dur("--ready-stable", &args.ready_stable)?,
            capacity_stall_s: dur("--capacity-stall", &args.capacity_stall)?,
            ready_timeout_s: dur("--ready-timeout", &args.ready_timeout)?,
            request_timeout_s: dur("--request-timeout", &args.request_timeout)?,
            max_stream_tps: DEFAULT.max_stream_tps,
            usage_tolerance: DEFAULT.usage_tolerance,
        },
        repetitions: args.repetitions,
    };
    let mut opts = BenchOptions::new(matrix, infergate_telemetry::telemetry::detect_hardware());
    opts.engine_name = args.engine.clone();
    opts.suite = args.suite.clone();
    opts.skip_doomed = !args.measure_doomed;
    let target = BenchTarget {
        base_url: args.url.clone(),
        model: args.model.clone(),
        api_key,
    };
    Ok((target, opts))
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
    let progress = tokio::spawn(render_progress(rx, total));
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
        // The flags ask for cells the engine cannot take: the user's to fix.
        Err(e @ BenchError::DoesNotFit { .. }) => {
            return Err(usage(format!("nothing measured: {e}")));
        }
        Err(e) => return Err(anyhow::Error::new(e).context("nothing measured")),
    };
    // Atomically: a temp file in the same directory, then a rename.
    let out = &args.out;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the directory of --out {}", out.display()))?;
    }
    let json = serde_json::to_vec_pretty(&results).context("serialising the results")?;
    infergate_io::fsio::write_durable(out, &json)
        .with_context(|| format!("writing {}", out.display()))?;
    outln!("{}", render_matrix(&results));
    outln!("results: {}", args.out.display());
    let measured = results.cells.iter().filter(|c| c.has_window()).count();
    if measured == 0 {
        errln!(
            "error: no cell could be measured ({} cells errored or were skipped); see the reasons above",
            results.cells.len()
        );
        return Ok(GateExit::Failure);
    }
    if results.status != infergate_schema::results::RunStatus::Complete {
        // The reason quotes the engine's error text.
        errln!(
            "{}",
            error_line(&format!(
                "the run is incomplete: {}",
                results.status_reason.as_deref().unwrap_or("(no reason)")
            ))
        );
        return Ok(GateExit::Failure);
    }
    Ok(GateExit::Pass)
}

/// SIGINT, or SIGTERM where its handler could be installed.
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use infergate_schema::results::{HardwareFingerprint, ProfileKey};

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    /// `bench` with default flags and a config suite that sets only the matrix measure the
    /// same thing: equal timing, equal matrix hash, so a `bench` result is compared with the
    /// `run` baselines of that matrix (and the other way round).
    #[test]
    fn bench_with_default_flags_matches_a_run_suite_of_the_same_matrix() {
        let argv = "bench --url http://127.0.0.1:8000 --out results.json --concurrency 1,2,4 \
                    --contexts 0,8k";
        let cli = Cli::try_parse_from(argv.split_whitespace()).unwrap();
        let (_, opts) = options_from_args(&cli.bench).unwrap();
        let config = infergate_config::config::GateConfig::parse(
            "model = \"m\"\n\
             [engine]\n\
             command = [\"{infergate}\", \"sim\", \"--port\", \"{port}\"]\n\
             [suites.pr]\n\
             concurrency = [1, 2, 4]\n\
             contexts = [\"0\", \"8k\"]\n",
            "infergate.toml",
            std::path::Path::new("."),
        )
        .unwrap();
        let suite = config.suite(Some("pr")).unwrap();
        assert_eq!(opts.matrix.timing, suite.timing);
        assert_eq!(opts.matrix.timing, CellTiming::default());
        assert_eq!(opts.skip_doomed, suite.skip_doomed);
        assert_eq!(opts.prefill, suite.prefill, "the same prefill samples");
        let run_matrix = suite.matrix_spec("m");
        let mut bench_matrix = opts.matrix.clone();
        bench_matrix.model = "m".into();
        assert_eq!(bench_matrix, run_matrix);
        let hw = HardwareFingerprint {
            kind: "cpu".into(),
            gpu_model: None,
            gpu_count: 0,
            driver_version: None,
            cpu_model: Some("sim".into()),
        };
        let bench_key = ProfileKey::derive(hw.clone(), "infergate-sim", "m", &bench_matrix);
        let run_key = ProfileKey::derive(hw, "infergate-sim", "m", &run_matrix);
        assert_eq!(bench_key.matrix_hash, run_key.matrix_hash);
        assert_eq!(bench_key.key, run_key.key);
    }

    #[test]
    fn help_shows_the_shared_defaults() {
        let cli = Cli::try_parse_from(["bench", "--url", "http://x:1", "--out", "o.json"]).unwrap();
        assert_eq!(cli.bench.duration, "10s");
        assert_eq!(cli.bench.ready_stable, "2.5s");
        assert_eq!(cli.bench.max_tokens, CellTiming::DEFAULT.max_tokens);
    }
}
