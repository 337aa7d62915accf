//! Measurement of the sustained-decode matrix against any OpenAI-compatible engine.
//!
//! The public surface is small: [`run_matrix`] measures every cell of a [`MatrixSpec`];
//! [`BenchSession`] keeps the probed engine identity, calibrated prompts and HTTP client so a
//! caller (adaptive re-measurement) can measure one cell again. Measurement never prints:
//! progress goes out as [`infergate_schema::results::Event`]s through an [`EventSink`].

pub(crate) mod burst;
pub(crate) mod cell;
pub(crate) mod chunk;
pub mod client;
pub(crate) mod counter;
pub mod identify;
pub mod lateness;
pub mod liveness;
pub(crate) mod metrics;
pub(crate) mod prefill;
pub(crate) mod prompt;
pub(crate) mod slots;
pub(crate) mod stats;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use cell::{CellSpec, SustainedDecodeCell};
use client::EngineClient;
use infergate_schema::results::{
    BurstRecord, BurstSettings, CellResult, CellStatus, CellTiming, EngineIdentity, Event,
    EventKind, HardwareFingerprint, MatrixSpec, PrefillRecord, PrefillSettings, ProfileKey,
    RunResults, RunStatus, ToolInfo, context_label,
};
use metrics::MetricsDialect;
use prompt::ContextPrompt;

/// Where the engine under test listens and how to talk to it.
#[derive(Clone)]
pub struct BenchTarget {
    /// Base URL, e.g. `http://127.0.0.1:8000` (a trailing `/v1` is tolerated).
    pub base_url: String,
    /// Model to request; `None` takes the first id of `/v1/models`.
    pub model: Option<String>,
    /// Bearer token sent to the engine; never logged or written to results.
    pub api_key: Option<String>,
}

impl std::fmt::Debug for BenchTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BenchTarget")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Measurement settings beyond the matrix itself. `run` and `bench` both build one from a
/// [`MatrixSpec`] (whose [`infergate_schema::results::CellTiming`] holds every per-cell setting), so they
/// measure alike.
#[derive(Clone)]
pub struct BenchOptions {
    /// The cells and per-cell timing.
    pub matrix: MatrixSpec,
    /// Hardware identity, part of the profile key.
    pub(crate) hardware: HardwareFingerprint,
    /// Overrides the engine family detected from `/version` and `/metrics`.
    pub engine_name: Option<String>,
    /// GPU telemetry sampled around each cell's steady-state window.
    pub sampler: Option<Arc<dyn infergate_telemetry::telemetry::WindowSampler>>,
    /// Suite name written into the results.
    pub suite: Option<String>,
    /// Cells known not to fit: `(concurrency, context_tokens)` → status `skipped`.
    pub skip_cells: Vec<(u32, u64)>,
    /// Once a concurrency is capacity-limited at a context, record the larger ones there
    /// `capacity_limited` without measuring them (each would cost a full admission stall).
    pub skip_doomed: bool,
    /// The prefill layer's samples, taken before each context's decode cells.
    pub prefill: PrefillSettings,
    /// The burst / end-to-end layer, sent after the decode cells when set.
    pub burst: Option<BurstSettings>,
}

impl BenchOptions {
    /// No engine-name override, no telemetry, no skip list, doomed cells skipped, the default
    /// prefill samples (as the gate config's default).
    pub fn new(matrix: MatrixSpec, hardware: HardwareFingerprint) -> Self {
        BenchOptions {
            matrix,
            hardware,
            engine_name: None,
            sampler: None,
            suite: None,
            skip_cells: Vec::new(),
            skip_doomed: true,
            prefill: PrefillSettings::DEFAULT,
            burst: None,
        }
    }
}

/// Where measurement sends its progress events (the console renders them).
pub type EventSink = tokio::sync::mpsc::UnboundedSender<infergate_schema::results::Event>;

/// Told of each cell as soon as it is final for the pass (after every repetition, the folded
/// cell so far), before the next cell starts: the run layer persists it, so a killed gate keeps
/// every finished cell. Measurement itself never writes.
pub(crate) type CellDone<'a> = &'a (dyn Fn(&CellResult) + Sync);

/// Records every event of a session (for `RunResults.events`) and forwards it to the sink.
#[derive(Clone, Default)]
pub(crate) struct EventLog {
    sink: Option<EventSink>,
    log: Arc<std::sync::Mutex<Vec<Event>>>,
}

impl EventLog {
    /// Records and forwards one event.
    pub(crate) fn emit(&self, e: Event) {
        if let Some(tx) = &self.sink {
            let _ = tx.send(e.clone());
        }
        if let Ok(mut log) = self.log.lock() {
            log.push(e);
        }
    }

    /// Everything recorded so far.
    pub(crate) fn snapshot(&self) -> Vec<Event> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Why nothing could be measured.
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum BenchError {
    /// The server did not answer at all.
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The server answered something that is not what an OpenAI-compatible engine says.
    #[error("unexpected answer from {url}: {reason}")]
    BadResponse { url: String, reason: String },
    /// Prompt sizes could not be calibrated against the server's tokenizer.
    #[error("prompt calibration failed: {reason}")]
    Calibration { reason: String },
    /// The engine serves no model (empty `/v1/models`) and none was given.
    #[error("no model: {reason}")]
    NoModel { reason: String },
    /// The run was cancelled before anything was measured.
    #[error("cancelled before the first cell")]
    Cancelled,
    /// Cells of the matrix ask for more tokens (context + `max_tokens`) than the engine's
    /// `max_model_len`: it would refuse or silently clamp them, so nothing is measured.
    #[error(
        "the engine's max_model_len is {limit} tokens ({origin}), shorter than {cells}: lower those contexts or max_tokens ({max_tokens}) in the suite, or start the engine with a longer context (vLLM `--max-model-len`, SGLang `--context-length`)"
    )]
    DoesNotFit {
        limit: u64,
        origin: String,
        max_tokens: u32,
        cells: String,
    },
}

/// A prepared connection to one engine: identity, calibrated prompts, HTTP client.
pub struct BenchSession {
    client: EngineClient,
    opts: BenchOptions,
    events: EventLog,
    model: String,
    engine: EngineIdentity,
    engine_family: String,
    dialect: Option<MetricsDialect>,
    prompts: BTreeMap<u64, ContextPrompt>,
    /// The burst layer's calibrated prompt size, when the suite turns the layer on.
    burst_prompt: Option<ContextPrompt>,
    started_at: chrono::DateTime<chrono::Utc>,
    run_id: String,
    calibration_errors: BTreeMap<u64, String>,
    /// Calibration counted tokens with a tokenize endpoint (no prompt was run), so the
    /// smallest context's decode prompt is still cold at its first request.
    counted_without_prefill: bool,
}

const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl BenchSession {
    /// Probes the server (`/health`, `/v1/models`, `/version`, `/metrics`) and calibrates
    /// prompts for every context of the matrix.
    pub async fn connect(
        target: &BenchTarget,
        opts: &BenchOptions,
        events: Option<EventSink>,
    ) -> Result<BenchSession, BenchError> {
        let started_at = chrono::Utc::now();
        let max_c = opts.matrix.concurrency.iter().copied().max().unwrap_or(1) as usize;
        let client = EngineClient::new(&target.base_url, target.api_key.clone(), max_c)?;
        let events = EventLog {
            sink: events,
            log: Arc::default(),
        };
        let probe = Probe {
            client: &client,
            events: &events,
            base: client.base().to_string(),
        };
        probe.health().await?;
        let (models, models_text) = probe.models(target).await?;
        let model = probe.model(target, &models)?;
        probe.check_context_limit(&models_text, &model, &opts.matrix)?;
        let version = probe.version().await;
        let (identified, engine) = probe.identify(opts, version, &models).await?;

        let counter = TokenCounter::new(client.clone(), model.clone(), identified.family);
        let calibration = probe.calibrate(&counter, opts).await?;
        let run_id = format!(
            "{}-{:08x}",
            started_at.format("%Y%m%dT%H%M%SZ"),
            rand::random::<u32>()
        );
        Ok(BenchSession {
            client,
            opts: opts.clone(),
            events,
            model,
            engine_family: engine.name.clone(),
            engine,
            dialect: identified.metrics,
            prompts: calibration.prompts,
            burst_prompt: calibration.burst_prompt,
            started_at,
            run_id,
            calibration_errors: calibration.errors,
            counted_without_prefill: counter.source().starts_with('/'),
        })
    }

    /// Measures one (concurrency, context) cell. Never fails: problems become an `error` cell.
    pub async fn measure_cell(
        &self,
        concurrency: u32,
        context_tokens: u64,
        cancel: &CancellationToken,
    ) -> CellResult {
        if cancel.is_cancelled() {
            return CellResult::unmeasured(
                concurrency,
                context_tokens,
                CellStatus::Skipped,
                "cancelled",
            );
        }
        let Some(prompt) = self.prompts.get(&context_tokens).cloned() else {
            let reason = self.calibration_errors.get(&context_tokens).cloned();
            return CellResult::unmeasured(
                concurrency,
                context_tokens,
                CellStatus::Error,
                reason.unwrap_or_else(|| {
                    format!("context {context_tokens} was not calibrated (not in the matrix)")
                }),
            );
        };
        if concurrency == 0 {
            return CellResult::unmeasured(0, context_tokens, CellStatus::Error, "concurrency 0");
        }
        let t = &self.opts.matrix.timing;
        let spec = CellSpec {
            concurrency,
            context_tokens,
            prompt,
            model: self.model.clone(),
            timing: CellTiming {
                duration_s: t.duration_s.max(0.01),
                warmup_s: t.warmup_s.max(0.0),
                max_tokens: t.max_tokens.max(1),
                unique_context_percent: t.unique_context_percent,
                sub_windows: t.sub_windows.max(1),
                ready_stable_s: t.ready_stable_s.max(0.0),
                capacity_stall_s: t.capacity_stall_s.max(0.1),
                ready_timeout_s: ready_timeout_s(t, context_tokens),
                request_timeout_s: t.request_timeout_s.max(0.1),
                max_stream_tps: t.max_stream_tps,
                usage_tolerance: t.usage_tolerance.max(0.0),
            },
            // Twice per sub-window, at most once a second: the gauges are averaged over the
            // window, and every scrape costs the engine a rendering of its metrics page (vLLM's
            // API server, which also streams the tokens measured) and the client a wake-up.
            metrics_poll_s: (t.duration_s / (2 * t.sub_windows.max(1)) as f64).clamp(0.1, 1.0),
        };
        let cell = SustainedDecodeCell {
            spec,
            client: &self.client,
            dialect: self.dialect,
            sampler: self.opts.sampler.clone(),
            events: self.events.clone(),
        };
        let result = cell.run(cancel).await;
        self.drain(cancel).await;
        result
    }

    /// After a cell, waits (at most 10 s) until the engine has let go of the cell's requests,
    /// so the next cell starts from an idle engine. Polled every 25 ms, so it ends as soon as
    /// the engine is idle (an engine that aborts on disconnect is idle within a step or two).
    /// The next cell's streams are not started earlier, overlapping the drain: its prefill
    /// would then share the engine with requests still running, and the engine's gauges
    /// would count both while readiness reads them.
    async fn drain(&self, cancel: &CancellationToken) {
        if self.dialect.is_none() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        }
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) && !cancel.is_cancelled() {
            match cell::scrape(&self.client, self.dialect).await {
                Some((_, st))
                    if st.running.unwrap_or(0.0) < 0.5 && st.waiting.unwrap_or(0.0) < 0.5 =>
                {
                    return;
                }
                None => return,
                _ => tokio::time::sleep(Duration::from_millis(25)).await,
            }
        }
        // A cancelled run stops waiting at once; the engine was not given its 10 s.
        if cancel.is_cancelled() {
            return;
        }
        self.events.emit(Event::now(
            EventKind::Notice,
            "engine still busy 10 s after the cell ended (requests not aborted on disconnect?)",
        ));
    }

    /// The results header (profile, engine, matrix, started_at) with no cells yet.
    pub fn results_skeleton(&self) -> RunResults {
        let mut matrix = self.opts.matrix.clone();
        matrix.model = self.model.clone();
        RunResults {
            schema_version: infergate_schema::results::SCHEMA_VERSION,
            tool: ToolInfo::current(),
            run_id: self.run_id.clone(),
            suite: self.opts.suite.clone(),
            started_at: self.started_at,
            finished_at: None,
            status: RunStatus::Complete,
            status_reason: None,
            profile: ProfileKey::derive(
                self.opts.hardware.clone(),
                &self.engine_family,
                &self.model,
                &matrix,
            ),
            engine: self.engine.clone(),
            matrix,
            cells: Vec::new(),
            telemetry: None,
            events: self.events.snapshot(),
            source: infergate_schema::results::ResultsSource::Infergate,
            labels: BTreeMap::new(),
            prefill: Vec::new(),
            burst: None,
            gate_failure: None,
        }
    }

    /// Whether the engine still answers, for a watchdog running beside the measurement.
    pub fn liveness(&self) -> liveness::Liveness {
        liveness::Liveness::new(self.client.clone())
    }

    async fn reachable(&self) -> Result<(), String> {
        self.client
            .get_text("/v1/models", Duration::from_secs(5))
            .await
            .map(drop)
            .map_err(|e| format!("engine unreachable: {}", e.failure()))
    }
}

/// The start-up probes of one engine; what they find is noted in the session's event log.
struct Probe<'a> {
    client: &'a EngineClient,
    events: &'a EventLog,
    /// The engine's base URL, as errors and its identity name it.
    base: String,
}

/// The prompts calibrated against the engine's tokenizer.
#[derive(Default)]
struct Calibration {
    prompts: BTreeMap<u64, ContextPrompt>,
    /// Why a context's prompt could not be calibrated (its cells become `error`).
    errors: BTreeMap<u64, String>,
    burst_prompt: Option<ContextPrompt>,
}

impl Probe<'_> {
    fn note(&self, kind: EventKind, msg: String) {
        self.events.emit(Event::now(kind, msg));
    }

    /// `/health`: the only probe whose transport failure means "unreachable".
    async fn health(&self) -> Result<(), BenchError> {
        match self.client.get_text("/health", PROBE_TIMEOUT).await {
            Ok((status, _)) if (200..300).contains(&status) => {}
            Ok((status, _)) => self.note(
                EventKind::Startup,
                format!("GET /health answered HTTP {status}; continuing"),
            ),
            Err(e) => {
                return Err(BenchError::Unreachable {
                    url: self.base.clone(),
                    reason: e.failure().to_string(),
                });
            }
        }
        Ok(())
    }

    /// `/v1/models`: the model ids it lists and its text (which may hold the context limit);
    /// an error answer is tolerated when the target names its model.
    async fn models(&self, target: &BenchTarget) -> Result<(Vec<String>, String), BenchError> {
        let client = self.client;
        match client.get_text("/v1/models", PROBE_TIMEOUT).await {
            Ok((200, text)) => {
                let ids = parse_model_ids(&text).map_err(|reason| BenchError::BadResponse {
                    url: client.url("/v1/models"),
                    reason,
                })?;
                Ok((ids, text))
            }
            Ok((_, _)) if target.model.is_some() => Ok((Vec::new(), String::new())),
            Ok((status, text)) => Err(BenchError::BadResponse {
                url: client.url("/v1/models"),
                reason: format!(
                    "HTTP {status}: {} (pass --model to skip model discovery)",
                    client::excerpt(&text, 160)
                ),
            }),
            Err(e) => Err(BenchError::Unreachable {
                url: client.url("/v1/models"),
                reason: e.failure().to_string(),
            }),
        }
    }

    /// The model to request: the target's, else the first the engine lists.
    fn model(&self, target: &BenchTarget, models: &[String]) -> Result<String, BenchError> {
        target
            .model
            .clone()
            .or_else(|| models.first().cloned())
            .ok_or_else(|| BenchError::NoModel {
                reason: format!("{}/v1/models lists no model; pass --model", self.base),
            })
    }

    /// The engine's context limit, where it serves one: refuse the cells that do not fit
    /// before calibrating or measuring anything (vLLM would clamp their max_tokens).
    fn check_context_limit(
        &self,
        models_text: &str,
        model: &str,
        matrix: &MatrixSpec,
    ) -> Result<(), BenchError> {
        if let Some(limit) = parse_max_model_len(models_text, model) {
            check_fits(matrix, limit, &format!("GET /v1/models, model `{model}`"))?;
            self.note(
                EventKind::Startup,
                format!("max_model_len {limit} tokens (GET /v1/models): every cell fits"),
            );
        }
        Ok(())
    }

    /// `/version` (vLLM, SGLang) — optional.
    async fn version(&self) -> Option<String> {
        match self.client.get_text("/version", PROBE_TIMEOUT).await {
            Ok((200, text)) => serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("version").and_then(|v| v.as_str()).map(String::from)),
            _ => None,
        }
    }

    /// Which engine this is. Metrics are optional; the dialect is detected from the names
    /// (`/metrics`, or TensorRT-LLM's `/prometheus/metrics`); an engine without them is still
    /// recognised by its own endpoints, so its family does not depend on a metrics flag.
    async fn identify(
        &self,
        opts: &BenchOptions,
        version: Option<String>,
        models: &[String],
    ) -> Result<(identify::Identified, EngineIdentity), BenchError> {
        let identified = identify::identify(self.client, PROBE_TIMEOUT).await?;
        if let Some(warning) = &identified.warning {
            self.note(EventKind::Startup, warning.clone());
        }
        let engine_family = opts
            .engine_name
            .clone()
            .or_else(|| identified.family.map(str::to_string))
            .unwrap_or_else(|| "openai-compatible".into());
        let engine = EngineIdentity {
            name: engine_family.clone(),
            version: version.clone(),
            models: models.to_vec(),
            url: self.base.clone(),
            metrics_flavor: Some(identified.flavor.to_string()),
            command: None,
            containment: None,
        };
        self.note(
            EventKind::Startup,
            format!(
                "engine {engine_family} {} models={models:?} metrics={}",
                version.as_deref().unwrap_or("(no /version)"),
                identified.label
            ),
        );
        Ok((identified, engine))
    }

    /// Calibrates a prompt for every context of the matrix, and the burst layer's.
    async fn calibrate(
        &self,
        counter: &TokenCounter,
        opts: &BenchOptions,
    ) -> Result<Calibration, BenchError> {
        let count = |text: String| counter.count(text);
        let mut calibration = Calibration::default();
        let contexts = &opts.matrix.contexts;
        let mut measured_density = None;
        if contexts.iter().any(|c| *c > 0) {
            let density = prompt::measure_density(&count).await?;
            measured_density = Some(density);
            self.calibrate_contexts(counter, density, opts, &mut calibration)
                .await;
        }
        if contexts.contains(&0)
            && !calibration.prompts.contains_key(&0)
            && !calibration.errors.contains_key(&0)
        {
            let p = prompt::calibrate_context(
                &count,
                prompt::Density {
                    chars_per_token: 4.0,
                    overhead_tokens: 0.0,
                },
                0,
                0.0,
                0.02,
            )
            .await?;
            calibration.prompts.insert(0, p);
        }
        calibration.burst_prompt = self.burst_prompt(counter, opts, measured_density).await?;
        Ok(calibration)
    }

    /// One prompt per context of the matrix at the measured density; a context the engine
    /// cannot take (e.g. above its max length) makes its cells `error`, not the whole run.
    async fn calibrate_contexts(
        &self,
        counter: &TokenCounter,
        density: prompt::Density,
        opts: &BenchOptions,
        calibration: &mut Calibration,
    ) {
        let count = |text: String| counter.count(text);
        self.note(
            EventKind::Startup,
            format!(
                "calibrated: {:.2} chars/token, {:.0} overhead tokens (source={})",
                density.chars_per_token,
                density.overhead_tokens,
                counter.source()
            ),
        );
        for &ctx in &opts.matrix.contexts {
            let p = match prompt::calibrate_context(
                &count,
                density,
                ctx,
                opts.matrix.timing.unique_context_percent,
                0.02,
            )
            .await
            {
                Ok(p) => p,
                Err(e) => {
                    let reason = e.to_string();
                    self.note(
                        EventKind::Startup,
                        format!("context {}: {reason}", context_label(ctx)),
                    );
                    calibration.errors.insert(ctx, reason);
                    continue;
                }
            };
            if ctx > 0 {
                self.note(
                    EventKind::Startup,
                    format!(
                        "context {}: {} chars (~{} tokens, {:+.2}%, {} probes)",
                        context_label(ctx),
                        p.prefix_chars + p.tail_chars,
                        p.measured_tokens,
                        (p.measured_tokens as f64 / ctx as f64 - 1.0) * 100.0,
                        p.probes
                    ),
                );
            }
            calibration.prompts.insert(ctx, p);
        }
    }

    /// The burst layer's prompt size (each request sends a unique prompt of it); one that
    /// cannot be calibrated is noted and leaves the layer without a prompt.
    async fn burst_prompt(
        &self,
        counter: &TokenCounter,
        opts: &BenchOptions,
        measured_density: Option<prompt::Density>,
    ) -> Result<Option<ContextPrompt>, BenchError> {
        let count = |text: String| counter.count(text);
        Ok(match &opts.burst {
            Some(b) if b.prompt_tokens > 0 => {
                let density = match measured_density {
                    Some(d) => d,
                    None => prompt::measure_density(&count).await?,
                };
                match prompt::calibrate_context(&count, density, b.prompt_tokens, 100.0, 0.02).await
                {
                    Ok(p) => Some(p),
                    Err(e) => {
                        self.note(
                            EventKind::Startup,
                            format!("burst layer: its prompt could not be calibrated: {e}"),
                        );
                        None
                    }
                }
            }
            _ => None,
        })
    }
}

/// Counts prompt tokens: the engine's tokenize endpoint when it has one, else
/// `usage.prompt_tokens` of a one-token completion.
struct TokenCounter {
    client: EngineClient,
    model: String,
    /// Tokenize paths to try, in order.
    paths: &'static [&'static str],
    /// `None` until the first count; then the path that answered, or `Some(None)`: none did.
    tokenize: std::sync::Mutex<Option<Option<&'static str>>>,
}

/// Where each engine family tokenizes: SGLang `/v1/tokenize` (`/tokenize` is its hidden alias,
/// http_server.py `openai_v1_tokenize`), vLLM and llama.cpp `/tokenize`; `trtllm-serve`
/// registers no tokenize route (openai_server.py `register_routes`), so it is probed.
fn tokenize_paths(family: Option<&str>) -> &'static [&'static str] {
    match family {
        Some("sglang") => &["/v1/tokenize", "/tokenize"],
        Some("trtllm") => &[],
        _ => &["/tokenize"],
    }
}

impl TokenCounter {
    fn new(client: EngineClient, model: String, family: Option<&str>) -> Self {
        TokenCounter {
            client,
            model,
            paths: tokenize_paths(family),
            tokenize: std::sync::Mutex::new(None),
        }
    }

    fn source(&self) -> &'static str {
        match self.tokenize.lock().map(|g| *g).unwrap_or(None) {
            Some(Some(path)) => path,
            Some(None) => "usage.prompt_tokens",
            None => "none",
        }
    }

    async fn count(&self, text: String) -> Result<u64, BenchError> {
        let known = self.tokenize.lock().map(|g| *g).unwrap_or(None);
        let candidates: Vec<&'static str> = match known {
            Some(Some(path)) => vec![path],
            Some(None) => Vec::new(),
            None => self.paths.to_vec(),
        };
        if !candidates.is_empty() {
            // `prompt` for vLLM/SGLang, `content` for llama.cpp; each ignores the other.
            let body = serde_json::json!({"model": self.model, "prompt": text, "content": text});
            for path in candidates {
                let answer = self
                    .client
                    .post_json(path, &body, Duration::from_secs(60))
                    .await;
                if let Ok((200, body)) = answer
                    && let Some(n) = tokenize_count(&body)
                {
                    if let Ok(mut g) = self.tokenize.lock() {
                        *g = Some(Some(path));
                    }
                    return Ok(n);
                }
            }
        }
        if let Ok(mut g) = self.tokenize.lock() {
            *g = Some(None);
        }
        let body = prefill::one_token_body(&self.model, &text);
        let url = self.client.url("/v1/completions");
        let (status, body) = self
            .client
            .post_json("/v1/completions", &body, Duration::from_secs(600))
            .await
            .map_err(|e| BenchError::Calibration {
                reason: format!("probe request to {url}: {}", e.failure()),
            })?;
        if status != 200 {
            return Err(BenchError::Calibration {
                reason: format!(
                    "probe request to {url}: HTTP {status}: {}",
                    client::excerpt(&body, 200)
                ),
            });
        }
        serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.pointer("/usage/prompt_tokens").and_then(|n| n.as_u64()))
            .ok_or_else(|| BenchError::Calibration {
                reason: format!(
                    "{url} answered without usage.prompt_tokens and /tokenize is unavailable"
                ),
            })
    }
}

fn tokenize_count(body: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v.get("count").and_then(|c| c.as_u64()).or_else(|| {
        v.get("tokens")
            .and_then(|t| t.as_array())
            .map(|a| a.len() as u64)
    })
}

/// Model ids of an OpenAI `/v1/models` answer, or why the body is not one. One reader for the
/// bench probe, the supervisor's readiness check and `doctor`.
pub fn parse_model_ids(text: &str) -> Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let data = v
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or("no `data` array (not an OpenAI model list)")?;
    Ok(data
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(String::from))
        .collect())
}

/// `max_model_len` of `model` in an OpenAI `/v1/models` answer (vLLM and SGLang serve it on
/// each model card; SGLang's `/get_model_info` has no context length), when present.
pub(crate) fn parse_max_model_len(text: &str, model: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let data = v.get("data")?.as_array()?;
    let card = data
        .iter()
        .find(|m| m.get("id").and_then(|i| i.as_str()) == Some(model))
        .or_else(|| data.first())?;
    card.get("max_model_len")?.as_u64().filter(|n| *n > 0)
}

/// Refuses a matrix with a cell whose context + `max_tokens` exceeds `limit`, naming the cells
/// and where the limit came from (`source`).
pub fn check_fits(matrix: &MatrixSpec, limit: u64, source: &str) -> Result<(), BenchError> {
    let max_tokens = matrix.timing.max_tokens.max(1);
    let over: Vec<String> = matrix
        .contexts
        .iter()
        .filter(|&&ctx| ctx + u64::from(max_tokens) > limit)
        .map(|&ctx| {
            let cs: Vec<String> = matrix.concurrency.iter().map(|c| c.to_string()).collect();
            format!(
                "the cells C={} / {} ({} context + {max_tokens} max_tokens = {} tokens)",
                cs.join(","),
                context_label(ctx),
                ctx,
                ctx + u64::from(max_tokens)
            )
        })
        .collect();
    if over.is_empty() {
        return Ok(());
    }
    Err(BenchError::DoesNotFit {
        limit,
        origin: source.to_string(),
        max_tokens,
        cells: over.join("; "),
    })
}

/// Probes the server, calibrates prompts and measures every cell of the matrix.
///
/// Returns `Err` only when nothing could be measured at all; otherwise every cell of the
/// matrix is present (cancelled or unreachable-mid-run cells carry their reason).
pub async fn run_matrix(
    target: &BenchTarget,
    opts: &BenchOptions,
    events: Option<EventSink>,
    cancel: CancellationToken,
) -> Result<RunResults, BenchError> {
    let connect = BenchSession::connect(target, opts, events.clone());
    let session = tokio::select! {
        _ = cancel.cancelled() => return Err(BenchError::Cancelled),
        s = connect => s?,
    };
    let mut results = session.results_skeleton();
    let measured = session.measure_matrix(&cancel, &|_| {}).await;
    results.cells = measured.cells;
    if cancel.is_cancelled() {
        results.status = RunStatus::Cancelled;
        results.status_reason = Some("cancelled (SIGINT/SIGTERM)".into());
        session
            .events
            .emit(Event::now(EventKind::Cancelled, "run cancelled"));
    } else if let Some(reason) = measured.unreachable {
        results.status = RunStatus::Partial;
        results.status_reason = Some(reason);
    }
    results.settle_status();
    results.finished_at = Some(chrono::Utc::now());
    results.events = session.events.snapshot();
    Ok(results)
}

/// The cells of one pass over the matrix, and whether the engine stopped answering.
#[derive(Debug)]
pub struct MeasuredMatrix {
    /// One per cell, in measurement order (repetitions folded into the first as rounds).
    pub cells: Vec<CellResult>,
    /// Set when a cell errored and the engine then did not answer `/v1/models`: the
    /// remaining cells are `error` with this reason, unmeasured.
    pub unreachable: Option<String>,
    /// The prefill layer, one record per sampled context (first repetition only).
    pub prefill: Vec<PrefillRecord>,
    /// The burst layer, sent once after every decode cell ([`BenchSession::measure_burst`]).
    pub burst: Option<BurstRecord>,
}

impl BenchSession {
    /// Measures every cell in the gate's order (contexts ascending, concurrency ascending
    /// within a context), `repetitions` times; the one matrix loop of `bench` and `run`.
    ///
    /// - cancelled → the remaining cells are `skipped` ("cancelled");
    /// - on the skip list → `skipped`;
    /// - a larger concurrency at a context where a smaller one was already capacity-limited
    ///   (with [`BenchOptions::skip_doomed`]) → `capacity_limited` without measuring: it cannot
    ///   fit either, and measuring it costs the full admission stall (the seed spent 6
    ///   minutes on each such cell);
    /// - after an errored cell the engine is probed; when it no longer answers, the remaining
    ///   cells are `error` with the reason instead of each waiting out its time-outs.
    ///
    /// `done` is told of every cell measured (or decided without measuring) as soon as it is
    /// final; a cell cut short by the cancel is not reported (it is the cell in flight).
    pub async fn measure_matrix(
        &self,
        cancel: &CancellationToken,
        done: CellDone<'_>,
    ) -> MeasuredMatrix {
        let m = &self.opts.matrix;
        let mut cells: Vec<CellResult> = Vec::new();
        let mut unreachable: Option<String> = None;
        let mut prefill = Vec::new();
        for rep in 0..m.repetitions.max(1) {
            for &ctx in &m.contexts {
                if rep == 0
                    && unreachable.is_none()
                    && !cancel.is_cancelled()
                    && let Some(record) = self.measure_prefill(ctx, cancel).await
                {
                    prefill.push(record);
                }
                let mut limited_at: Option<u32> = None;
                for &c in &m.concurrency {
                    let cell = if cancel.is_cancelled() {
                        CellResult::unmeasured(c, ctx, CellStatus::Skipped, "cancelled")
                    } else if let Some(reason) = &unreachable {
                        CellResult::unmeasured(c, ctx, CellStatus::Error, reason.clone())
                    } else if self.opts.skip_cells.contains(&(c, ctx)) {
                        CellResult::unmeasured(
                            c,
                            ctx,
                            CellStatus::Skipped,
                            "known not to fit (skip list)",
                        )
                    } else if let Some(smaller) = limited_at.filter(|_| self.opts.skip_doomed) {
                        let reason = format!(
                            "C={smaller} already capacity-limited at {}: not measured",
                            context_label(ctx)
                        );
                        self.events.emit(Event::cell(
                            EventKind::CellDone,
                            c,
                            ctx,
                            format!(
                                "cell skipped C={c} ctx={} capacity_limited ({reason})",
                                context_label(ctx)
                            ),
                        ));
                        CellResult::unmeasured(c, ctx, CellStatus::CapacityLimited, reason)
                    } else {
                        let cell = self.measure_cell(c, ctx, cancel).await;
                        if cell.status == CellStatus::Error
                            && !cancel.is_cancelled()
                            && let Err(reason) = self.reachable().await
                        {
                            self.events
                                .emit(Event::now(EventKind::EngineExit, reason.clone()));
                            unreachable = Some(reason);
                        }
                        cell
                    };
                    if cell.status == CellStatus::CapacityLimited && limited_at.is_none() {
                        limited_at = Some(c);
                    }
                    // A cell that ends because of the cancel is the one in flight: not final.
                    let finished = !cancel.is_cancelled();
                    if rep == 0 {
                        if finished {
                            done(&cell);
                        }
                        cells.push(cell);
                    } else if let Some(first) = cells.iter_mut().find(|x| x.coord() == (c, ctx)) {
                        first.fold_round(&cell, rep);
                        if finished {
                            done(first);
                        }
                    }
                }
            }
        }
        let burst = match &unreachable {
            None if !cancel.is_cancelled() => self.measure_burst(cancel).await,
            _ => None,
        };
        MeasuredMatrix {
            cells,
            unreachable,
            prefill,
            burst,
        }
    }

    /// The burst layer ([`burst::measure`]), when the suite turns it on and its prompt was
    /// calibrated; sent after the last decode cell has drained.
    async fn measure_burst(&self, cancel: &CancellationToken) -> Option<BurstRecord> {
        let settings = self.opts.burst.as_ref()?;
        let prompt = self.burst_prompt.as_ref()?;
        let t = &self.opts.matrix.timing;
        let plan = burst::BurstPlan {
            client: &self.client,
            model: &self.model,
            prompt,
            settings,
            timeout: Duration::from_secs_f64(ready_timeout_s(t, settings.prompt_tokens)),
        };
        let record = burst::measure(&plan, cancel).await?;
        self.events
            .emit(Event::now(EventKind::Notice, burst::describe(&record)));
        Some(record)
    }

    /// The prefill layer at `ctx` ([`prefill::measure_context`]), when the settings sample it
    /// and its prompt was calibrated; taken alone (the previous cell has drained).
    async fn measure_prefill(&self, ctx: u64, cancel: &CancellationToken) -> Option<PrefillRecord> {
        let settings = self.opts.prefill;
        if !settings.samples_context(ctx) {
            return None;
        }
        let prompt = self.prompts.get(&ctx)?;
        let smallest = self.opts.matrix.contexts.iter().copied().find(|&c| c > 0);
        let t = &self.opts.matrix.timing;
        let plan = prefill::PrefillPlan {
            client: &self.client,
            dialect: self.dialect,
            model: &self.model,
            prompt,
            settings,
            warmup_cold: self.counted_without_prefill && smallest == Some(ctx),
            timeout: Duration::from_secs_f64(ready_timeout_s(t, ctx)),
            tolerance: t.usage_tolerance.max(0.0),
        };
        let record = tokio::select! {
            _ = cancel.cancelled() => return None,
            r = prefill::measure_context(&plan) => r,
        };
        self.events
            .emit(Event::now(EventKind::Notice, prefill::describe(&record)));
        Some(record)
    }
}

/// The readiness time-out for a prompt of `tokens`: the suite's, longer above 32k tokens
/// (a long prompt takes longer to prefill).
fn ready_timeout_s(t: &CellTiming, tokens: u64) -> f64 {
    t.ready_timeout_s.max(1.0) * (tokens as f64 / 32768.0).max(1.0)
}

/// The text of `tests/fixtures/{name}` at the workspace root (recorded engine answers), for
/// the crate's unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/{name}",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_lacks};

    #[test]
    fn model_lists_and_tokenize_answers() {
        assert_eq!(
            parse_model_ids(r#"{"object":"list","data":[{"id":"a"},{"id":"b"}]}"#).unwrap(),
            vec!["a", "b"]
        );
        assert!(parse_model_ids("<html>").is_err());
        assert_eq!(
            tokenize_count(r#"{"count":5,"tokens":[1,2,3,4,5]}"#),
            Some(5)
        );
        assert_eq!(tokenize_count(r#"{"tokens":[1,2,3]}"#), Some(3));
        assert_eq!(tokenize_count(r#"{"x":1}"#), None);
        // SGLang's /v1/tokenize answer (serving_tokenize.py: tokens, count, max_model_len).
        let sglang = fixture("sglang-tokenize.json");
        assert_eq!(tokenize_count(&sglang), Some(7));
        assert_eq!(
            tokenize_paths(Some("sglang")),
            ["/v1/tokenize", "/tokenize"]
        );
        assert!(
            tokenize_paths(Some("trtllm")).is_empty(),
            "no route: probes"
        );
        assert_eq!(tokenize_paths(None), ["/tokenize"]);
    }

    /// vLLM's and SGLang's model cards carry `max_model_len`; a cell that does not fit is
    /// named with the limit.
    #[test]
    fn max_model_len_is_read_and_cells_that_do_not_fit_are_named() {
        let vllm = r#"{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm","root":"m","parent":null,"max_model_len":40960,"permission":[]}]}"#;
        assert_eq!(parse_max_model_len(vllm, "m"), Some(40960));
        assert_eq!(parse_max_model_len(vllm, "other"), Some(40960));
        assert_eq!(parse_max_model_len(r#"{"data":[{"id":"m"}]}"#, "m"), None);
        assert_eq!(parse_max_model_len("not json", "m"), None);
        let mut matrix = MatrixSpec {
            model: "m".into(),
            concurrency: vec![1, 8],
            contexts: vec![0, 32768, 65536],
            repetitions: 1,
            timing: CellTiming::default(),
        };
        matrix.timing.max_tokens = 512;
        assert!(check_fits(&matrix, 70_000, "m").is_ok());
        let e = check_fits(&matrix, 40960, "m").unwrap_err().to_string();
        assert_contains(&e, "max_model_len is 40960");
        assert_contains(
            &e,
            "C=1,8 / 64k (65536 context + 512 max_tokens = 66048 tokens)",
        );
        assert_lacks(&e, "/ 32k");
        assert_contains(&e, "--max-model-len");
    }

    /// Callers spawn these futures on a multi-threaded runtime.
    #[allow(dead_code)]
    fn futures_are_send(s: &BenchSession, t: &BenchTarget, o: &BenchOptions) {
        fn is_send<T: Send>(_: &T) {}
        let c = CancellationToken::new();
        is_send(&s.measure_cell(1, 0, &c));
        is_send(&BenchSession::connect(t, o, None));
        is_send(&run_matrix(t, o, None, c.clone()));
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let t = BenchTarget {
            base_url: "http://x".into(),
            model: None,
            api_key: Some("sk-secret".into()),
        };
        assert!(!format!("{t:?}").contains("sk-secret"));
    }
}
