//! The simulated engine: an OpenAI-compatible HTTP server with vLLM's endpoints and metric
//! names, driven by a continuous-batching speed model, so the measurement core can be built
//! and tested (calibration, capacity limits, regressions, faults) without a GPU.
//!
//! See `docs/simulated-engine.md` for the speed model, the profiles and the fault modes.

pub(crate) mod faults;
pub(crate) mod metrics;
pub(crate) mod openai;
pub(crate) mod prefix_cache;
pub(crate) mod profile;
pub(crate) mod scheduler;
pub(crate) mod server;
pub(crate) mod speed_model;
pub(crate) mod tokenizer;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) use faults::FaultSet;
pub use faults::{Fault, FaultParseError};
pub(crate) use metrics::EngineCounters;
pub use profile::{SimProfile, UsageMode};
pub(crate) use speed_model::{Jitter, SpeedModel};

/// Errors of the simulated engine's library API.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A profile file could not be read or parsed, or has an invalid field.
    #[error("profile file {path}: {message}")]
    ProfileFile {
        /// The file.
        path: String,
        /// What is wrong and which field.
        message: String,
    },
    /// An option is out of range; the message names it and the fix.
    #[error("invalid simulated-engine option: {0}")]
    InvalidOption(String),
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Everything that configures one simulated engine process (profile plus run-time knobs).
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    /// Speed, limits and default faults.
    pub profile: SimProfile,
    /// Multiplies every engine time (1.10 = a 10% regression).
    pub slowdown: f64,
    /// Divides every engine time (100 = simulate 100x faster).
    pub time_scale: f64,
    /// Seed of jitter, draft acceptance, EOS points and fault draws.
    pub seed: u64,
    /// Overrides the profile's per-step jitter CV.
    pub jitter_cv: Option<f64>,
    /// CV of the per-process log-normal speed factor (0 = off).
    pub boot_noise_cv: f64,
    /// Seed of the boot factor; `None` draws it from OS entropy (a new factor per process).
    pub boot_seed: Option<u64>,
    /// Usage reporting style (defaults to the profile's).
    pub usage_mode: UsageMode,
    /// Active faults (the profile's plus any added).
    pub faults: Vec<Fault>,
    /// Overrides the served model name.
    pub model: Option<String>,
}

impl SimOptions {
    /// Options that run `profile` as written: no slowdown, real time, seed 0, no boot noise.
    pub fn new(profile: SimProfile) -> Self {
        SimOptions {
            slowdown: 1.0,
            time_scale: 1.0,
            seed: 0,
            jitter_cv: None,
            boot_noise_cv: 0.0,
            boot_seed: None,
            usage_mode: profile.usage_mode,
            faults: profile.faults.clone(),
            model: None,
            profile,
        }
    }

    /// Checks the knobs; the message names the option and the accepted range.
    pub fn validate(&self) -> Result<(), SimError> {
        let positive = [("slowdown", self.slowdown), ("time-scale", self.time_scale)];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(SimError::InvalidOption(format!(
                    "--{name} must be a number > 0, got {v}"
                )));
            }
        }
        let non_neg = [
            ("jitter", self.jitter_cv.unwrap_or(0.0)),
            ("boot-noise", self.boot_noise_cv),
        ];
        for (name, v) in non_neg {
            if !(v.is_finite() && v >= 0.0) {
                return Err(SimError::InvalidOption(format!(
                    "--{name} must be a coefficient of variation >= 0, got {v}"
                )));
            }
        }
        if let Some(m) = &self.model
            && m.trim().is_empty()
        {
            return Err(SimError::InvalidOption("--model must not be empty".into()));
        }
        self.profile
            .validate()
            .map_err(|m| SimError::InvalidOption(format!("profile `{}`: {m}", self.profile.name)))
    }

    /// The served model name.
    pub(crate) fn model_name(&self) -> &str {
        self.model.as_deref().unwrap_or(&self.profile.model)
    }

    /// The per-process speed factor: one log-normal draw (mean 1, CV `boot_noise_cv`) from
    /// `boot_seed`, or from OS entropy when no seed is given; exactly 1 when the CV is 0.
    pub(crate) fn boot_factor(&self) -> f64 {
        let jitter = Jitter::new(self.boot_noise_cv);
        let mut rng: StdRng = match self.boot_seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => rand::make_rng(),
        };
        jitter.sample(&mut rng)
    }
}

/// A running simulated engine. Dropping it stops the server (without waiting).
#[derive(Debug)]
pub struct SimServer {
    addr: SocketAddr,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl SimServer {
    /// The bound address (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, ends open streams and waits (at most 2 s) for the tasks to finish.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for task in std::mem::take(&mut self.tasks) {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.cancel.cancel();
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts the simulated engine on `bind` (port 0 picks a free port). Returns once listening.
/// With a `crash-after` fault the whole process exits when the time is up.
pub async fn start(opts: SimOptions, bind: SocketAddr) -> Result<SimServer, SimError> {
    opts.validate()?;
    let boot_factor = opts.boot_factor();
    let bind_error = |source| SimError::Bind { addr: bind, source };
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let cancel = CancellationToken::new();
    let fault_set = FaultSet::from_faults(&opts.faults);
    let mut model = SpeedModel::new(&opts.profile, opts.slowdown, opts.time_scale, boot_factor);
    model.prefill_factor = fault_set.prefill_factor;
    model.long_context_slowdown = fault_set.long_context_slowdown;
    let counters = Arc::new(EngineCounters::new(model.draft_acceptance.len()));
    let (engine, rx) = scheduler::channel();
    let engine_cfg = scheduler::EngineConfig {
        model: model.clone(),
        jitter: Jitter::new(opts.jitter_cv.unwrap_or(opts.profile.jitter_cv)),
        seed: opts.seed,
        prefix_cache: opts
            .profile
            .prefix_caching
            .then(|| prefix_cache::PrefixCache::new(opts.profile.kv_budget_tokens)),
        preempt_budget: fault_set
            .preempt
            .map(|n| n.unwrap_or(opts.profile.kv_budget_tokens / 2).max(1)),
        max_running: fault_set.llama_cpp_python.map(|_| 1),
        stall_every: fault_set.stall_every,
        chunked_prefill: fault_set.chunked_prefill,
        itl_tail: fault_set.itl_tail,
        admit_delay: fault_set.admit_delay.map(Duration::from_secs_f64),
    };
    let mut tasks = vec![scheduler::spawn_engine(
        engine_cfg,
        counters.clone(),
        rx,
        cancel.clone(),
    )];
    if let Some(secs) = fault_set.crash_after {
        let token = cancel.clone();
        tasks.push(tokio::spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = tokio::time::sleep(Duration::from_secs_f64(secs)) => {
                    errln!("infergate sim: fault crash-after={secs}: exiting with status 1");
                    std::process::exit(1);
                }
            }
        }));
    }
    let state = server::AppState::new(
        &opts,
        model,
        engine,
        counters.clone(),
        fault_set,
        cancel.clone(),
    );
    let app = server::router(Arc::new(state));
    let token = cancel.clone();
    // Each write goes out at once (TCP_NODELAY), as from vLLM's and SGLang's asyncio servers:
    // with Nagle's algorithm a stream's second small write waited for the client's delayed
    // ACK (~40 ms on a kept-alive connection), which read as a 36–43 ms TTFT where the engine
    // answered in 2 ms, and squeezed the tokens of that wait into one arrival.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tasks.push(tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
    }));
    Ok(SimServer {
        addr,
        cancel,
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        let mut o = SimOptions::new(SimProfile::named("test").unwrap());
        assert!(o.validate().is_ok());
        o.time_scale = 0.0;
        assert!(
            o.validate()
                .unwrap_err()
                .to_string()
                .contains("--time-scale")
        );
        let mut o = SimOptions::new(SimProfile::named("test").unwrap());
        o.jitter_cv = Some(-0.1);
        assert!(o.validate().unwrap_err().to_string().contains("--jitter"));
    }

    #[test]
    fn boot_factor_is_seeded_and_off_by_default() {
        let mut o = SimOptions::new(SimProfile::named("test").unwrap());
        assert_eq!(o.boot_factor(), 1.0);
        o.boot_noise_cv = 0.05;
        o.boot_seed = Some(11);
        let a = o.boot_factor();
        assert_eq!(a, o.boot_factor());
        assert_ne!(a, 1.0);
        o.boot_seed = Some(12);
        assert_ne!(a, o.boot_factor());
    }

    #[tokio::test]
    async fn in_process_server_counts_what_it_serves() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut o = SimOptions::new(SimProfile::named("test").unwrap());
        o.time_scale = 10.0;
        o.model = Some("custom".into());
        let server = start(o, "127.0.0.1:0".parse().unwrap()).await.unwrap();
        assert!(server.url().starts_with("http://127.0.0.1:"));
        let body: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", server.url()))
            .json(&serde_json::json!({
                "model": "custom", "max_tokens": 9, "ignore_eos": true,
                "messages": [{"role": "user", "content": "abcd"}]
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["usage"]["completion_tokens"], 9);
        // 3 (assistant prefix) + 4 (message) + 1 (content)
        assert_eq!(body["usage"]["prompt_tokens"], 8);
        let metrics = reqwest::get(format!("{}/metrics", server.url()))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            metrics.contains("vllm:generation_tokens_total{model_name=\"custom\"} 9.0"),
            "{metrics}"
        );
        server.shutdown().await;
    }
}
