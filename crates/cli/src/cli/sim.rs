//! `infergate sim`: serve the simulated engine until SIGINT/SIGTERM.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use infergate_schema::exit::{GateExit, usage};
use infergate_sim::sim::{Fault, SimOptions, SimProfile, UsageMode};

/// Arguments of `infergate sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Built-in profile name (test, zero, ldb-rtx5090, ldb-rtx5090-nospec) or a TOML file.
    #[arg(long, default_value = "test")]
    pub profile: String,
    /// Multiply every engine time by X: a factor (1.10) or a percentage (10%), both a 10%
    /// slower engine; 0.95 or -5% a 5% faster one.
    #[arg(
        long,
        default_value = "1",
        value_name = "X",
        value_parser = slowdown,
        allow_hyphen_values = true
    )]
    pub slowdown: f64,
    /// Run the speed model S times faster than real time.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Seed of jitter, draft acceptance, EOS points and fault draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Per-step jitter CV (overrides the profile; 0 = off).
    #[arg(long)]
    pub jitter: Option<f64>,
    /// CV of one log-normal speed factor drawn per process start (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub boot_noise: f64,
    /// Seed of the boot factor (default: OS entropy, a new factor every start).
    #[arg(long)]
    pub boot_seed: Option<u64>,
    /// `continuous` (vLLM) or `final-only` (llama.cpp: usage only on the final chunk).
    #[arg(long, value_enum)]
    pub usage_mode: Option<UsageMode>,
    /// Inject a fault (repeatable): crash-after=SECS, never-ready, http-500=FRACTION,
    /// stall-after=TOKENS, malformed-sse=FRACTION, fail-above-concurrency=N, hang-after=SECS,
    /// lie-usage=FACTOR, counter-lies=FACTOR, truncate-at=TOKENS, preempt[=TOKENS],
    /// llama-cpp-python[=interrupt|queue], stall-every=STEPS:SECS, prefill-slowdown=FACTOR,
    /// long-context-slowdown=TOKENS:FACTOR, chunked-prefill=TOKENS, itl-tail=EVERY:FACTOR,
    /// prompt-counter-lies=FACTOR, admit-delay=SECS.
    #[arg(long = "fault")]
    pub faults: Vec<String>,
    /// Served model name (default: the profile's).
    #[arg(long)]
    pub model: Option<String>,
    /// The longest prompt + `max_tokens` a request may have (overrides the profile's
    /// `max_model_len`, served in `/v1/models` as vLLM does; longer requests get HTTP 400).
    #[arg(long)]
    pub max_model_len: Option<u64>,
    /// Cold prefill speed, prompt tokens per second of engine time (overrides the profile's).
    /// A slower prefill makes each cold sample last long enough that a loaded host's own
    /// delays (milliseconds) stay small beside it, as on a GPU, where an 8k prefill takes
    /// hundreds of milliseconds.
    #[arg(long, value_name = "TOK_PER_S")]
    pub prefill_tps: Option<f64>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port (0 picks a free one).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Write the bound port number to this file (atomically) once listening.
    #[arg(long)]
    pub port_file: Option<PathBuf>,
}

/// clap value parser of `--slowdown`: a factor (`1.10`) or a percentage (`10%` = 1.10,
/// `-5%` = 0.95). A bare number under 1 makes the engine faster, which the message says.
fn slowdown(value: &str) -> Result<f64, String> {
    let v = value.trim();
    let factor = match v.strip_suffix('%') {
        Some(pct) => pct
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite())
            .map(|p| 1.0 + p / 100.0),
        None => v.parse::<f64>().ok().filter(|f| f.is_finite()),
    };
    match factor {
        Some(f) if f > 0.0 => Ok(f),
        Some(_) => Err(format!(
            "`{value}` would make every engine time zero or negative; give a factor > 0 (1.10 = 10% slower) or a percentage above -100% (10%)"
        )),
        None => Err(format!(
            "`{value}` is neither a factor (1.10 = 10% slower, 0.95 = 5% faster) nor a percentage (10% = 1.10)"
        )),
    }
}

/// Builds the simulator options from the flags; errors are usage errors (exit 2).
pub(crate) fn options_from_args(args: &SimArgs) -> anyhow::Result<SimOptions> {
    let path = Path::new(&args.profile);
    let profile = match SimProfile::named(&args.profile) {
        Some(p) => p,
        None if path.exists() => SimProfile::load(path).map_err(|e| usage(e.to_string()))?,
        None => {
            return Err(usage(format!(
                "--profile `{}` is neither a built-in profile ({}) nor an existing file",
                args.profile,
                SimProfile::names().join(", ")
            )));
        }
    };
    let mut opts = SimOptions::new(profile);
    opts.slowdown = args.slowdown;
    opts.time_scale = args.time_scale;
    opts.seed = args.seed;
    opts.jitter_cv = args.jitter;
    opts.boot_noise_cv = args.boot_noise;
    opts.boot_seed = args.boot_seed;
    if let Some(m) = args.usage_mode {
        opts.usage_mode = m;
    }
    for spec in &args.faults {
        let fault: Fault = spec
            .parse()
            .map_err(|e: infergate_sim::sim::FaultParseError| usage(format!("--fault: {e}")))?;
        opts.faults.push(fault);
    }
    opts.model = args.model.clone();
    if let Some(n) = args.max_model_len {
        opts.profile.max_model_len = n;
    }
    if let Some(tps) = args.prefill_tps {
        if !(tps.is_finite() && tps > 0.0) {
            return Err(usage(format!(
                "--prefill-tps {tps}: must be a positive number of prompt tokens per second"
            )));
        }
        opts.profile.prefill_tps = tps;
    }
    opts.validate().map_err(|e| usage(e.to_string()))?;
    Ok(opts)
}

/// Writes the port number to `path` via a temp file in the same directory + rename, so a
/// reader never sees a partial number.
fn write_port_file(path: &Path, port: u16) -> anyhow::Result<()> {
    infergate_io::fsio::write_durable(path, port.to_string().as_bytes())
        .with_context(|| format!("writing the port file {}", path.display()))
}

/// Runs `infergate sim`.
pub async fn execute(args: SimArgs) -> anyhow::Result<GateExit> {
    let opts = options_from_args(&args)?;
    let profile_name = opts.profile.name.clone();
    let time_scale = opts.time_scale;
    let bind = SocketAddr::new(args.host, args.port);
    let server = infergate_sim::sim::start(opts, bind)
        .await
        .context("starting the simulated engine")?;
    // The handlers are in place before the port file says the sim is up, so a signal sent
    // as soon as the file appears shuts it down cleanly.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    if let Some(path) = &args.port_file {
        write_port_file(path, server.addr().port())?;
    }
    outln!(
        "infergate sim listening on {} (profile {profile_name}, time-scale {time_scale})",
        server.url()
    );

    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    server.shutdown().await;
    Ok(GateExit::Pass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrap {
        #[command(flatten)]
        args: SimArgs,
    }

    /// `sim` with the flags of `argv`, split at spaces.
    fn parse(argv: &str) -> anyhow::Result<SimOptions> {
        let w = Wrap::try_parse_from(std::iter::once("sim").chain(argv.split_whitespace()))?;
        options_from_args(&w.args)
    }

    #[test]
    fn flags_reach_the_options() {
        let o = parse(
            "--profile ldb-rtx5090 --slowdown 1.1 --time-scale 50 --fault http-500=0.5 \
             --fault never-ready --usage-mode final-only",
        )
        .unwrap();
        assert_eq!(o.profile.name, "ldb-rtx5090");
        assert_eq!(o.slowdown, 1.1);
        assert_eq!(o.time_scale, 50.0);
        assert_eq!(o.faults.len(), 2);
        assert_eq!(o.usage_mode, UsageMode::FinalOnly);
    }

    /// `--slowdown 10%` is a 10% slower engine (1.10), as `1.10` is; nonsense names both forms.
    #[test]
    fn slowdown_takes_a_factor_or_a_percentage() {
        for (text, factor) in [("1.1", 1.1), ("10%", 1.1), ("-5%", 0.95), ("0.95", 0.95)] {
            let o = parse(&format!("--slowdown {text}")).unwrap();
            assert!(
                (o.slowdown - factor).abs() < 1e-12,
                "{text}: {}",
                o.slowdown
            );
        }
        for bad in ["ten", "10x", "-100%", "0", "nan"] {
            let e = slowdown(bad).unwrap_err();
            assert!(e.contains("1.10"), "{bad}: {e}");
            assert!(!e.contains("0.05"), "{bad}: {e}");
        }
        assert!(parse("--slowdown 10x").is_err());
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for argv in [
            "--fault http-500=3",
            "--time-scale=-1",
            "--profile no-such-profile",
        ] {
            let e = parse(argv).unwrap_err();
            assert_eq!(
                infergate_schema::exit::exit_for_error(&e),
                GateExit::Usage,
                "{argv:?}: {e:#}"
            );
        }
    }

    #[test]
    fn port_file_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("port");
        write_port_file(&p, 41234).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "41234");
    }
}
