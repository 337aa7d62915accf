//! The results schema: the plain data that measurement writes and that statistics, storage and
//! reporting read. It is a public interface (see `docs/results-schema.md`): other tools parse these
//! files, so fields are only ever added, and `schema_version` is bumped on any breaking change.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Version of the results file format. Readers reject files with a newer major version.
pub const SCHEMA_VERSION: u32 = 1;

/// The oldest results format this build reads; readers refuse anything below it (0 was never
/// written by infergate, so such a file is hand-made or corrupt).
pub const MIN_SCHEMA_VERSION: u32 = 1;

/// One complete (or partial) execution of a sustained-decode matrix against one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResults {
    /// Format version of this file, [`SCHEMA_VERSION`] when written by this build.
    pub schema_version: u32,
    /// Which tool wrote the file (name and version), so odd numbers can be traced to a build.
    pub tool: ToolInfo,
    /// Unique id of this run (UTC timestamp plus random suffix); baseline files are named by it.
    pub run_id: String,
    /// Suite name from the gate config (`pr`, `nightly`, ...); `None` for ad hoc `bench` runs.
    #[serde(default)]
    pub suite: Option<String>,
    /// When the matrix started and finished (UTC).
    pub started_at: DateTime<Utc>,
    #[serde(default)]
    /// When the matrix finished; `None` while a run is in progress or when it was cut short.
    pub finished_at: Option<DateTime<Utc>>,
    /// Whether the run covered the whole matrix; partial runs are never accepted as baselines.
    pub status: RunStatus,
    /// Why the run is partial or failed, for people reading the file.
    #[serde(default)]
    pub status_reason: Option<String>,
    /// Hardware + engine + model + matrix identity; baselines are keyed by `profile.key`.
    pub profile: ProfileKey,
    /// What the engine said about itself (`/version`, `/v1/models`, metrics flavour).
    pub engine: EngineIdentity,
    /// The measurement settings this run used.
    pub matrix: MatrixSpec,
    /// One entry per (concurrency, context) cell, in execution order.
    pub cells: Vec<CellResult>,
    /// Run-level GPU telemetry summary (or why it is unavailable).
    #[serde(default)]
    pub telemetry: Option<TelemetrySummary>,
    /// Time-stamped log of what happened, like the seed's `event_log`.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Where the data came from: this tool, or an import of another tool's file.
    #[serde(default)]
    pub source: ResultsSource,
    /// Free-form labels (git SHA, PR number, runner name) that reporting may show.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The prefill layer: cold-prefill samples per context, taken alone (no decode stream
    /// running) before the context's decode cells. Empty in runs recorded before the layer
    /// existed, in imports, and where the suite turned it off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill: Vec<PrefillRecord>,
    /// The burst / end-to-end layer: a finite set of requests with cold, distinct prompts sent
    /// on a fixed arrival schedule after the decode cells, on the same boot (or a `vllm bench
    /// serve` / guidellm run, imported). `None` in runs recorded before the layer existed and
    /// where the suite does not turn it on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<BurstRecord>,
    /// Why the gate that measured this run in full could not decide it, as a typed record: a
    /// reader (`merge`, `report`) decides on its `kind` instead of reading a sentence back out
    /// of `events`. Absent when the gate decided the run, in `bench` runs and imports, and in
    /// files written before the field existed: for those [`RunResults::compare_error`] falls
    /// back to the `compare_error` event, which the gate still writes as the log of what
    /// happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_failure: Option<GateFailureRecord>,
}

/// Why a gate that measured a run in full ended without deciding it (exit 3): what failed, and
/// the gate's own sentence for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateFailureRecord {
    /// Which step failed: what a reader decides on.
    pub kind: GateFailureKind,
    /// The gate's message, as its console, summary and check said it (the text of the
    /// `compare_error` event).
    pub reason: String,
}

/// The step a gate failed at after measuring, one per variant of the gate's `GateFailure`, so
/// readers can tell a missing baseline from a store that could not be read without parsing
/// English.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateFailureKind {
    /// The (first) boot could not be measured.
    Measurement,
    /// The first look's comparison with the baseline store failed.
    Comparison,
    /// The confirmation boot could not be measured.
    ConfirmationBoot,
    /// Comparing both boots with the baseline failed.
    Confirmation,
    /// The A/B run's paired comparison failed.
    Paired,
    /// A pull-request gate found no baseline for its profile.
    NoBaseline,
    /// `run --update-baseline` measured a run that cannot become a baseline.
    NotABaseline,
    /// A kind written by a newer infergate: fields are only ever added, so an older reader
    /// still reads the file and treats it as a failure it has no special handling for.
    #[serde(other)]
    Unknown,
}

/// Name and version of the writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Writer's name (`infergate`, or the imported tool's).
    pub name: String,
    /// Writer's version.
    pub version: String,
}

impl RunResults {
    /// The engine's process group, from the `engine_spawned` event's `process_group`, when the
    /// engine started: teardown checks and tests look it up to prove nothing is left.
    pub fn engine_process_group(&self) -> Option<i32> {
        self.events
            .iter()
            .find(|e| e.kind == EventKind::EngineSpawned)
            .and_then(|e| e.process_group)
    }

    /// Why the gate that measured this run could not decide it, when it could not: a verdict
    /// beside these results is then not the gate's answer. The [`RunResults::gate_failure`]
    /// record's reason; in files written before that field existed, the last `compare_error`
    /// event's message, so older results merge and report as they did.
    pub fn compare_error(&self) -> Option<&str> {
        if let Some(f) = &self.gate_failure {
            return Some(f.reason.as_str());
        }
        self.events
            .iter()
            .rfind(|e| e.kind == EventKind::CompareError)
            .map(|e| e.message.as_str())
    }
}

/// NVML clock-limit reasons that come from outside the engine's work: heat and the board's
/// hardware slowdown and power-brake signals. The power cap (`sw_power_cap`) is not among them:
/// a GPU under full load meets its power limit by design (an H200 running bf16 matrix
/// products reported it in every window at 640 W of 700 W).
pub(crate) const CLOCK_SLOWDOWNS: [&str; 4] = [
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
];

impl RunResults {
    /// Marks a `complete` run `partial` when a cell ended in `error`: `complete` means every
    /// cell reached a terminal state that was a measurement (`ok`, `capacity_limited`) or was
    /// skipped on purpose (skip list), so only such runs can become baselines.
    pub fn settle_status(&mut self) {
        if self.status != RunStatus::Complete {
            return;
        }
        let errored: Vec<&CellResult> = self
            .cells
            .iter()
            .filter(|c| c.status == CellStatus::Error)
            .collect();
        if let Some(first) = errored.first() {
            let reason = first.reason.as_deref().unwrap_or("no reason given");
            self.status_reason = Some(format!(
                "{} of {} cells errored (first: C={} / {}: {})",
                errored.len(),
                self.cells.len(),
                first.concurrency,
                context_label(first.context_tokens),
                reason.lines().next().unwrap_or(reason)
            ));
            self.status = RunStatus::Partial;
        }
    }

    /// The commit the run measured: its `git_sha`, `sha` or `commit` label, when it has one.
    pub fn commit(&self) -> Option<&str> {
        ["git_sha", "sha", "commit"]
            .iter()
            .find_map(|k| self.labels.get(*k))
            .map(String::as_str)
    }
}

impl ToolInfo {
    /// This build of infergate.
    pub fn current() -> Self {
        ToolInfo {
            name: "infergate".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// Whether a run is complete. Only `complete` runs may become baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every cell reached a measured terminal state (`ok`, `capacity_limited`) or was skipped
    /// on purpose; a cell in `error` makes the run `partial` ([`RunResults::settle_status`]).
    Complete,
    /// The run stopped early (engine died or hung) or a cell errored; the cells present are
    /// valid.
    Partial,
    /// The run was cancelled (SIGINT/SIGTERM); the cells present are valid.
    Cancelled,
    /// The gate is still measuring: written after every finished cell so that a killed gate
    /// leaves the cells it finished. The cells present are valid, the rest were not measured;
    /// a file left in this state is never complete (no baseline, no verdict, a gate error).
    InProgress,
}

impl RunStatus {
    /// The word the results schema uses (`complete`, `partial`, `cancelled`, `in_progress`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Complete => "complete",
            RunStatus::Partial => "partial",
            RunStatus::Cancelled => "cancelled",
            RunStatus::InProgress => "in_progress",
        }
    }
}

/// Provenance of a results file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ResultsSource {
    /// Measured by infergate itself.
    #[default]
    Infergate,
    /// Converted from another tool's output (e.g. llm-decode-bench JSON).
    Import {
        /// Tool name and version of the original file.
        tool: String,
        /// Path of the original file, as given at import time.
        path: String,
    },
}

/// The identity baselines are keyed by: comparing runs with different keys is refused.
///
/// The engine *version* is deliberately not part of the key (every dev build has a new one and
/// a PR gate exists to compare versions); the engine *name*, the model, the hardware and the
/// matrix are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileKey {
    /// Stable, path-safe identifier derived from the fields below, e.g.
    /// `gpu-nvidia-h200x1__vllm__qwen-qwen3-8b__m1a2b3c4d`.
    pub key: String,
    /// The hardware part of the key.
    pub hardware: HardwareFingerprint,
    /// Engine family (`vllm`, `sglang`, `llamacpp`, `infergate-sim`, or what the config says).
    pub engine: String,
    /// Served model name.
    pub model: String,
    /// Hash of the matrix shape (concurrency, contexts, max tokens, context split), hex.
    pub matrix_hash: String,
}

impl ProfileKey {
    /// Builds the key from its parts. The `key` string is path-safe (lower-case ASCII letters,
    /// digits, `-`, `.` and `__` separators), so the baseline store can use it as a directory.
    pub fn derive(
        hardware: HardwareFingerprint,
        engine: &str,
        model: &str,
        matrix: &MatrixSpec,
    ) -> Self {
        let matrix_hash = matrix.shape_hash();
        let hw = match (&hardware.gpu_model, hardware.kind.as_str()) {
            (Some(gpu), "gpu") => format!("gpu-{}x{}", gpu, hardware.gpu_count.max(1)),
            _ => format!("cpu-{}", hardware.cpu_model.as_deref().unwrap_or("unknown")),
        };
        let key = format!(
            "{}__{}__{}__m{}",
            path_safe(&hw),
            path_safe(engine),
            path_safe(model),
            &matrix_hash[..matrix_hash.len().min(10)]
        );
        ProfileKey {
            key,
            hardware,
            engine: engine.to_string(),
            model: model.to_string(),
            matrix_hash,
        }
    }
}

/// Turns any engine- or user-supplied name into a safe single path component: lower-case ASCII
/// alphanumerics, `-` and `.`, no leading dot, at most 80 characters (`Qwen/Qwen3-8B` →
/// `qwen-qwen3-8b`). Never empty, never `.` or `..`.
pub fn path_safe(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut last_dash = false;
    for ch in name.chars() {
        let c = ch.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '.' {
            out.push(c);
            last_dash = false;
        } else if !last_dash {
            out.push('-');
            last_dash = true;
        }
    }
    let trimmed: String = out.trim_matches(['-', '.']).chars().take(80).collect();
    match trimmed.trim_end_matches(['-', '.']) {
        "" => "unnamed".to_string(),
        name => name.to_string(),
    }
}

/// What hardware a run was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardwareFingerprint {
    /// `gpu` when NVML reported devices, otherwise `cpu`.
    pub kind: String,
    /// e.g. `NVIDIA H200` (all GPUs of a runner are assumed alike; a mixed set is listed joined).
    #[serde(default)]
    pub gpu_model: Option<String>,
    #[serde(default)]
    /// Number of GPUs visible to the run (0 on a CPU runner).
    pub gpu_count: u32,
    #[serde(default)]
    /// NVIDIA driver version, when NVML reported one.
    pub driver_version: Option<String>,
    /// CPU model name from `/proc/cpuinfo` (names the `cpu` profile).
    #[serde(default)]
    pub cpu_model: Option<String>,
}

/// What the engine reports about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EngineIdentity {
    /// Engine family as detected or configured (`vllm`, `sglang`, `llamacpp`, `infergate-sim`).
    pub name: String,
    /// `/version` answer, when the engine has one.
    #[serde(default)]
    pub version: Option<String>,
    /// Model ids from `/v1/models`.
    #[serde(default)]
    pub models: Vec<String>,
    /// Base URL measured (loopback or runner-local).
    #[serde(default)]
    pub url: String,
    /// Which metrics dialect `/metrics` spoke (`vllm`, `sglang`, `llamacpp`) or `none`.
    #[serde(default)]
    pub metrics_flavor: Option<String>,
    /// The engine command line (from the gate config), secrets removed.
    #[serde(default)]
    pub command: Option<String>,
    /// How the engine's process tree was held and killed at teardown: `cgroup` (its own
    /// cgroup v2, `cgroup.kill`) or `subreaper` (the supervisor as child subreaper); absent
    /// in results of other tools and of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<String>,
}

/// The measurement settings of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixSpec {
    /// Model name sent in requests.
    pub model: String,
    /// Concurrency levels (streams kept running), ascending.
    pub concurrency: Vec<u32>,
    /// Context lengths in tokens (prompt size per stream), ascending.
    pub contexts: Vec<u64>,
    /// How each cell is measured (its fields sit directly in the `matrix` object).
    #[serde(flatten)]
    pub timing: CellTiming,
    /// How many times the whole matrix is repeated within one run.
    #[serde(default = "one")]
    pub repetitions: u32,
}

/// How one cell is measured: the request shape and the timing of readiness, warm-up and the
/// window. `run`'s config suites, `bench`'s flags and the results file all hold this one type
/// with this one default, so `bench` with default flags measures the matrix `run` measures
/// (`max_tokens` and `unique_context_percent` are part of the matrix hash).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CellTiming {
    /// Steady-state window per cell, seconds.
    pub duration_s: f64,
    /// Warm-up before the window (after readiness), seconds.
    pub warmup_s: f64,
    /// `max_tokens` per request (streams are restarted when they finish).
    pub max_tokens: u32,
    /// Share of each prompt that is unique to the stream (the rest is a shared prefix), percent.
    pub unique_context_percent: f64,
    /// Number of sub-windows the steady-state window is split into (throughput samples per cell).
    pub sub_windows: u32,
    /// Without engine gauges (running / waiting), readiness must hold this long, seconds; with
    /// them, three consecutive agreeing polls (every `ready_stable_s / 5`, 50–250 ms) confirm
    /// it. Either way the warm-up counts from the moment all streams were admitted, so the
    /// confirmation overlaps it.
    #[serde(default = "default_ready_stable_s")]
    pub ready_stable_s: f64,
    /// Admission stalled this long (running < C, waiting > 0) → `capacity_limited`, seconds.
    #[serde(default = "default_capacity_stall_s")]
    pub capacity_stall_s: f64,
    /// Per-cell readiness time-out before the cell is an `error`, seconds (scaled up for
    /// contexts above 32k when the cell runs).
    #[serde(default = "default_ready_timeout_s")]
    pub ready_timeout_s: f64,
    /// No byte on a stream for this long → stream error (stall detection), seconds.
    #[serde(default = "default_request_timeout_s")]
    pub request_timeout_s: f64,
    /// Physical ceiling on one stream's decode rate, tok/s: a cell whose streams report more
    /// is `error` (the engine's usage cannot be true).
    #[serde(default = "default_max_stream_tps")]
    pub max_stream_tps: f64,
    /// Relative disagreement allowed between the engine's usage and the client's chunk count
    /// or the engine's own counter before the cell is `error` (0.05 = 5%).
    #[serde(default = "default_usage_tolerance")]
    pub usage_tolerance: f64,
}

impl CellTiming {
    /// The defaults: a 10 s window after 3 s of warm-up, 512 tokens per request, 25% of each
    /// prompt unique to its stream, 5 sub-windows; readiness stable for 2.5 s, a 3 s admission
    /// stall means capacity-limited, 120 s readiness time-out, 60 s stream stall; streams
    /// faster than 5000 tok/s or usage 5% off the engine's counters make a cell `error`.
    pub const DEFAULT: CellTiming = CellTiming {
        duration_s: 10.0,
        warmup_s: 3.0,
        max_tokens: 512,
        unique_context_percent: 25.0,
        sub_windows: 5,
        ready_stable_s: 2.5,
        capacity_stall_s: 3.0,
        ready_timeout_s: 120.0,
        request_timeout_s: 60.0,
        max_stream_tps: 5000.0,
        usage_tolerance: 0.05,
    };
}

impl Default for CellTiming {
    fn default() -> Self {
        CellTiming::DEFAULT
    }
}

// Results files written before these fields were recorded used the defaults.
fn default_ready_stable_s() -> f64 {
    CellTiming::DEFAULT.ready_stable_s
}
fn default_capacity_stall_s() -> f64 {
    CellTiming::DEFAULT.capacity_stall_s
}
fn default_ready_timeout_s() -> f64 {
    CellTiming::DEFAULT.ready_timeout_s
}
fn default_request_timeout_s() -> f64 {
    CellTiming::DEFAULT.request_timeout_s
}
fn default_max_stream_tps() -> f64 {
    CellTiming::DEFAULT.max_stream_tps
}
fn default_usage_tolerance() -> f64 {
    CellTiming::DEFAULT.usage_tolerance
}

impl MatrixSpec {
    /// Hex SHA-256 of what makes two runs comparable cell by cell: concurrency levels,
    /// contexts, max tokens and the context split. Durations and repetitions are excluded: a
    /// longer window measures the same thing with less noise.
    pub(crate) fn shape_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let canonical = format!(
            "c={:?};l={:?};max_tokens={};unique_pct={:.3}",
            self.concurrency,
            self.contexts,
            self.timing.max_tokens,
            self.timing.unique_context_percent
        );
        hex::encode(Sha256::digest(canonical.as_bytes()))
    }
}

fn one() -> u32 {
    1
}

/// Outcome class of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Measured at the requested concurrency.
    Ok,
    /// The engine could not admit all streams (KV budget): a result, not a failure.
    CapacityLimited,
    /// Every stream was admitted, but the engine preempted (vLLM) or retracted (SGLang)
    /// requests during the window: measured, but in another regime than a cell that holds
    /// its streams (recomputed prefills, stalls), so its speed is not compared with one.
    Saturated,
    /// The cell could not be measured; `reason` says why.
    Error,
    /// Not run (known not to fit, cancelled, or excluded); `reason` says why.
    Skipped,
}

impl CellStatus {
    /// Whether the cell was measured (`ok`, `capacity_limited`, `saturated`: the engine
    /// served what it could) rather than not (`error`, `skipped`).
    pub fn measured(self) -> bool {
        matches!(
            self,
            CellStatus::Ok | CellStatus::CapacityLimited | CellStatus::Saturated
        )
    }
}

/// p50/p90/p99 and mean of a latency or rate distribution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Number of observations behind the figures.
    pub count: u64,
}

/// Where a cell's aggregate token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// Cumulative `usage.completion_tokens` on every chunk (vLLM/SGLang `continuous_usage_stats`).
    ContinuousUsage,
    /// Counted stream chunks/tokens, reconciled with each request's final usage.
    ChunksReconciled,
    /// Engine Prometheus counter (only for imported or fallback data).
    Metrics,
    /// Copied from an imported file.
    Imported,
}

/// When an engine's generation counter moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CounterMoves {
    /// With every decoded token (vLLM `vllm:generation_tokens_total`): a window's difference
    /// is the tokens made in it.
    PerToken,
    /// Only when a request ends, by all its tokens (SGLang `sglang:generation_tokens_total`,
    /// llama.cpp `llamacpp:tokens_predicted_total`, TensorRT-LLM
    /// `trtllm_generation_tokens_total`): a window's difference is off by the
    /// requests in flight at its edges unless they are added (llama.cpp `/slots`).
    PerRequest,
}

impl CounterMoves {
    /// Short wording for reports: how to read the engine-counter figure.
    pub fn caveat(self, in_flight_added: bool) -> &'static str {
        match (self, in_flight_added) {
            (CounterMoves::PerToken, _) => "per-token counter",
            (CounterMoves::PerRequest, true) => "per-request counter + in-flight tokens",
            (CounterMoves::PerRequest, false) => {
                "per-request counter: moves when a request ends, off by the requests in flight"
            }
        }
    }
}

/// The engine's generation counter read at both edges of a cell's window (what `server_tps`
/// is computed from), so a cross-check can see what it compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineCounterWindow {
    /// Metric name read (e.g. `llamacpp:tokens_predicted_total`).
    pub metric: String,
    /// How the counter moves (per token, or per finished request).
    pub moves: CounterMoves,
    /// When the opening reading was taken, seconds relative to the window's opening (client
    /// clock; negative: before it).
    pub start_offset_s: f64,
    /// When the closing reading was taken, seconds relative to the window's close.
    pub end_offset_s: f64,
    /// Counter value at the opening reading (plus `in_flight_start` where known).
    pub start_tokens: f64,
    /// Counter value at the closing reading (plus `in_flight_end` where known).
    pub end_tokens: f64,
    /// Tokens of requests still running at the opening reading (llama.cpp `/slots`
    /// `n_decoded`), already included in `start_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_start: Option<f64>,
    /// The same at the closing reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_end: Option<f64>,
}

impl EngineCounterWindow {
    /// Whether in-flight tokens were added at both edges.
    pub fn in_flight_added(&self) -> bool {
        self.in_flight_start.is_some() && self.in_flight_end.is_some()
    }
}

/// One measured (concurrency x context) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Concurrent streams of the cell.
    pub concurrency: u32,
    /// Prompt (context) length of the cell, in tokens.
    pub context_tokens: u64,
    /// Whether the cell was measured, and if not why (`ok`, `capacity_limited`, `error`, `skipped`).
    pub status: CellStatus,
    /// Why the cell is `capacity_limited`, `error` or `skipped` (or readiness detail when `ok`).
    #[serde(default)]
    pub reason: Option<String>,
    /// Output tokens per second across all streams over the steady-state window (the headline).
    pub aggregate_tps: f64,
    /// Aggregate tok/s of each sub-window: the within-run samples statistics use.
    pub samples: Vec<f64>,
    /// Per-stream decode speed over the window (tokens after a request's first, divided by
    /// the time between their arrivals), distribution over the streams, tok/s.
    #[serde(default)]
    pub per_user_tps: Option<Percentiles>,
    /// Time to first token, seconds: request sent → first token arrived (includes queueing
    /// and prefill), per request that ended as asked or was still running at the close.
    #[serde(default)]
    pub ttft_s: Option<Percentiles>,
    /// Inter-token latency as vLLM's `bench serve` defines it: the gaps between successive
    /// arrivals of a request's tokens after its first, pooled over requests, seconds. Chunks
    /// that one read delivered together are one arrival (their gaps of ~0 are no latency).
    #[serde(default)]
    pub itl_s: Option<Percentiles>,
    /// Time per output token, per request, as vLLM's `bench serve` (`tpot`) and guidellm
    /// (`inter_token_latency_ms`) define it: `(last token − first token) / (output tokens −
    /// 1)`, over the requests whose last token arrived in the window, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<Percentiles>,
    /// Mean number of running requests reported by the engine during the window.
    #[serde(default)]
    pub effective_concurrency: Option<f64>,
    /// Mean number of waiting (queued) requests during the window.
    #[serde(default)]
    pub waiting_avg: Option<f64>,
    /// Output tokens counted in the steady-state window.
    pub output_tokens: u64,
    /// Length of the steady-state window actually measured, seconds.
    pub measured_s: f64,
    /// Prompt tokens per request as reported by the engine (calibration check).
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Requests that failed during the cell.
    pub errors: u32,
    /// Where the token counts came from.
    #[serde(default)]
    pub token_source: Option<TokenSource>,
    /// The engine's own generation rate over the same window (`generation_tokens_total`), tok/s.
    /// How far it can be trusted depends on how the counter moves: see `engine_counter`.
    #[serde(default)]
    pub server_tps: Option<f64>,
    /// The engine counter behind `server_tps`: its readings at both window edges, when they were
    /// taken, and whether it moves per token or only when a request ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_counter: Option<EngineCounterWindow>,
    /// Seconds from cell start until readiness (all streams running and stable).
    #[serde(default)]
    pub ready_after_s: Option<f64>,
    /// Speculative-decoding figures, when the engine reports them.
    #[serde(default)]
    pub spec_decode: Option<SpecDecodeStats>,
    /// GPU telemetry over the window, when available.
    #[serde(default)]
    pub telemetry: Option<CellTelemetry>,
    /// Re-measurement rounds (adaptive mode): round 0 is the first measurement.
    #[serde(default)]
    pub rounds: Vec<MeasurementRound>,
    /// The engine's reported usage checked against what the client saw and the engine's own
    /// counters (see [`CrossCheck`]); empty in results of other tools and older versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cross_checks: Vec<CrossCheck>,
    /// Requests that finished with fewer than `max_tokens` tokens although `ignore_eos` was
    /// set (the engine clamped or cut them: a different workload), out of those that finished;
    /// absent when no request finished or in results of other tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated_requests: Option<TruncatedRequests>,
    /// Requests the engine preempted (vLLM `vllm:num_preemptions_total`) or retracted (SGLang
    /// `sglang:num_retracted_requests_total`) during the window, from its counter at both
    /// edges; absent when the engine has no such counter. Any makes an `ok` cell `saturated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<u64>,
    /// How every request the cell sent ended: as asked, cut by the gate at the close, or early
    /// (by cause); absent in results of other tools and older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestTally>,
    /// Set when no independent figure could check the client's token count ("client count
    /// not cross-checked: the engine sent no usage … and has no generation counter …"): the
    /// throughput is the client's word alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverified: Option<String>,
    /// How late the host ran the gate's probe thread (0.2 ms of work, then a 1 ms sleep, in a
    /// loop) while the window was open: each cycle's overrun, seconds. A busy runner's
    /// scheduling delays reach an engine that decodes on its CPUs the same way, so the model
    /// does not vouch for a millisecond latency tail that they alone could move by its design
    /// effect. Absent in results of other tools and older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_lateness_s: Option<Percentiles>,
}

/// Why a request ended without doing what was asked. Its tokens are not counted as work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EarlyEnd {
    /// `data: [DONE]` came before any `finish_reason`: the engine aborted the request
    /// (llama-cpp-python does when another request arrives).
    DoneWithoutFinish,
    /// The body ended with neither a `finish_reason` nor `[DONE]`.
    NoFinishReason,
    /// `finish_reason` `length` with fewer tokens than `max_tokens`: the engine clamped it.
    FewerTokens,
    /// A `finish_reason` other than `length` or `stop` (`abort`, `error`, …).
    OtherFinish,
    /// The last event arrived, but the HTTP body never ended (the connection was dropped or
    /// held open after it).
    BodyNotTerminated,
    /// The connection broke in the middle of the stream.
    Reset,
    /// The engine answered with a non-2xx status.
    HttpError,
    /// No first token, or no data, within the time-out.
    TimedOut,
    /// Malformed SSE, an over-long line, or an error object in the stream.
    Malformed,
    /// The request failed before any answer (connection refused or failed).
    Failed,
}

impl EarlyEnd {
    /// Every cause, in the order reasons list them.
    pub const ALL: [EarlyEnd; 10] = [
        EarlyEnd::DoneWithoutFinish,
        EarlyEnd::NoFinishReason,
        EarlyEnd::FewerTokens,
        EarlyEnd::OtherFinish,
        EarlyEnd::BodyNotTerminated,
        EarlyEnd::Reset,
        EarlyEnd::HttpError,
        EarlyEnd::TimedOut,
        EarlyEnd::Malformed,
        EarlyEnd::Failed,
    ];

    /// Words for reasons: "ended by [DONE] without a finish_reason".
    pub(crate) fn describe(self) -> &'static str {
        match self {
            EarlyEnd::DoneWithoutFinish => "[DONE] without a finish_reason",
            EarlyEnd::NoFinishReason => "body ended without a finish_reason",
            EarlyEnd::FewerTokens => "finish_reason length before max_tokens",
            EarlyEnd::OtherFinish => "finish_reason other than length/stop",
            EarlyEnd::BodyNotTerminated => "body not terminated",
            EarlyEnd::Reset => "connection broken mid-stream",
            EarlyEnd::HttpError => "HTTP error",
            EarlyEnd::TimedOut => "timed out",
            EarlyEnd::Malformed => "malformed stream",
            EarlyEnd::Failed => "request failed",
        }
    }

    /// Position in [`EarlyEnd::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the engine ended a streaming request it had accepted (rather than refusing,
    /// timing out or breaking): what an engine that aborts requests does.
    pub(crate) fn is_abort(self) -> bool {
        matches!(
            self,
            EarlyEnd::DoneWithoutFinish
                | EarlyEnd::NoFinishReason
                | EarlyEnd::OtherFinish
                | EarlyEnd::BodyNotTerminated
                | EarlyEnd::Reset
        )
    }
}

/// How every request one cell sent ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestTally {
    /// Requests sent.
    pub sent: u32,
    /// Ended as asked: `finish_reason` `length` at `max_tokens`, or `stop`.
    pub completed: u32,
    /// Of `completed`, those that ended at `stop` before `max_tokens` (an engine that does not
    /// honour `ignore_eos`).
    #[serde(default)]
    pub stopped: u32,
    /// Still streaming when the gate ended the cell (their tokens in the window count).
    pub cut_at_close: u32,
    /// Ended early, by cause (their tokens do not count).
    #[serde(default)]
    pub ended_early: std::collections::BTreeMap<EarlyEnd, u32>,
    /// The most streams the client saw producing tokens at once.
    #[serde(default)]
    pub max_streams_at_once: u32,
}

impl RequestTally {
    /// Requests that ended early, all causes.
    pub fn early(&self) -> u32 {
        self.ended_early.values().sum()
    }

    /// Requests that ended early by the engine's own doing (see [`EarlyEnd::is_abort`]).
    pub fn aborted(&self) -> u32 {
        self.ended_early
            .iter()
            .filter(|(c, _)| c.is_abort())
            .map(|(_, n)| n)
            .sum()
    }

    /// "2,068 [DONE] without a finish_reason, 3 timed out".
    pub fn causes(&self) -> String {
        let mut v: Vec<(EarlyEnd, u32)> = self
            .ended_early
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| (*c, *n))
            .collect();
        v.sort_by_key(|(c, n)| (std::cmp::Reverse(*n), *c));
        v.iter()
            .map(|(c, n)| format!("{} {}", thousands(u64::from(*n)), c.describe()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Inter-token gaps under this many seconds are tokens one burst delivered (separate reads of
/// the same burst, microseconds apart), not a decode step of any engine the gate measures.
pub(crate) const TOGETHER_S: f64 = 0.5e-3;

/// Whether an inter-token latency percentile (`itl_s`, seconds) is a latency anyone would
/// recognise, beside the stream's per-user rate (tok/s): not when it is both under
/// [`TOGETHER_S`] and under half the mean time between a stream's tokens (an ITL p50 of
/// 0.1 ms beside 750 tok/s per user, 1.3 ms a token, counts tokens that came together). A
/// server with regular stalls has a mean gap many times its ITL p50 (3 ms steps, a 50 ms
/// pause every 4): that p50 is its real step and is shown.
pub fn itl_is_latency(itl_s: f64, per_user_tps: Option<f64>) -> bool {
    let gap = match per_user_tps {
        Some(tps) if tps > 0.0 && tps.is_finite() => 1.0 / tps,
        _ => return itl_s.is_finite(),
    };
    itl_s.is_finite() && (itl_s >= TOGETHER_S || itl_s >= 0.5 * gap)
}

#[cfg(test)]
mod itl_tests {
    use super::*;

    #[test]
    fn tokens_that_came_together_are_no_latency_and_stalls_do_not_hide_one() {
        // 0.1 ms beside 750 tok/s per user (1.3 ms a token): a burst.
        assert!(!itl_is_latency(0.1e-3, Some(750.0)));
        // 3 ms steps with a 50 ms pause every 4: 15.5 ms a token on average.
        assert!(itl_is_latency(3e-3, Some(1.0 / 15.5e-3)));
        // A fast engine at its own pace, 0.4 ms a token.
        assert!(itl_is_latency(0.4e-3, Some(2_500.0)));
        assert!(itl_is_latency(3e-3, None));
        assert!(!itl_is_latency(f64::NAN, Some(10.0)));
    }
}

/// `2068` → `2,068`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// How many finished requests came back short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TruncatedRequests {
    /// Finished with fewer than `max_tokens` tokens.
    pub short: u32,
    /// Finished requests seen in the cell.
    pub finished: u32,
    /// The fewest tokens one of them had.
    pub fewest_tokens: u64,
}

/// How the prefill layer samples (a suite's `prefill_samples` and `prefill_max_context`):
/// `samples` cold prompts per context up to `max_context` tokens, besides the context's
/// warm-up prefill that its decode cells need anyway. At a GPU's 2,200 prompt tok/s one cold
/// 128k sample is about a minute, so long contexts are left out by default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrefillSettings {
    /// Cold samples per context (a unique random prefix each); 0 turns the layer off.
    pub samples: u32,
    /// Largest context sampled, tokens.
    pub max_context: u64,
}

impl PrefillSettings {
    /// Three cold samples at every context up to 32k.
    pub const DEFAULT: PrefillSettings = PrefillSettings {
        samples: 3,
        max_context: 32_768,
    };

    /// Whether the layer samples `context` (context 0, a one-word prompt, has no prefill).
    pub fn samples_context(&self, context: u64) -> bool {
        self.samples > 0 && context > 0 && context <= self.max_context
    }
}

impl Default for PrefillSettings {
    fn default() -> Self {
        PrefillSettings::DEFAULT
    }
}

/// How the burst layer sends its requests (a suite's `[suites.X.burst]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstSettings {
    /// Requests sent (each a cold, distinct prompt).
    pub requests: u32,
    /// Mean arrival rate, requests per second (Poisson arrivals, as `vllm bench serve
    /// --request-rate`); `None` sends them all at once (`inf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// Seed of the arrival schedule: the same seed gives the same schedule every run.
    pub seed: u64,
    /// Prompt size of each request, tokens.
    pub prompt_tokens: u64,
    /// Output tokens asked of each request (`ignore_eos`, so a complete request has them all).
    pub max_tokens: u32,
    /// The SLOs goodput counts a request against (`vllm bench serve --goodput`).
    #[serde(default, skip_serializing_if = "BurstSlo::is_empty")]
    pub slo: BurstSlo,
}

/// Service-level objectives of one request, seconds (`--goodput ttft:MS tpot:MS e2el:MS`): a
/// request is good when it completed and meets every objective set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BurstSlo {
    /// Longest time to first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<f64>,
    /// Longest time per output token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<f64>,
    /// Longest end-to-end latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_s: Option<f64>,
}

impl BurstSlo {
    /// No objective set (goodput is then not computed).
    pub fn is_empty(&self) -> bool {
        self.ttft_s.is_none() && self.tpot_s.is_none() && self.e2el_s.is_none()
    }
}

/// The burst layer's measurement: every request accounted for, the throughput over the
/// burst's wall time and the latency percentiles of the requests that completed (the
/// definitions of the decode cells and `vllm bench serve`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstRecord {
    /// What was asked (for an import, what the tool reports of it).
    pub settings: BurstSettings,
    /// Requests sent.
    pub sent: u32,
    /// Requests that ended as asked (`finish_reason` `length` or `stop`, then `[DONE]`).
    pub completed: u32,
    /// Requests whose stream ended early (no finish reason, another one, or the body cut):
    /// not completed, and not in the latency figures.
    pub incomplete: u32,
    /// Requests that failed (HTTP error, time-out, an error in the stream).
    pub errors: u32,
    /// First send to last end, seconds.
    pub duration_s: f64,
    /// Prompt tokens of the completed requests.
    pub prompt_tokens: u64,
    /// Output tokens of the completed requests.
    pub output_tokens: u64,
    /// Completed requests per second.
    pub request_throughput: f64,
    /// Output tokens per second (`sum(completion_tokens) / wall time`).
    pub output_tps: f64,
    /// Prompt and output tokens per second (`total_token_throughput`).
    pub total_tps: f64,
    /// Time to first token of each completed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<Percentiles>,
    /// Time per output token of each completed request: `(e2el - ttft) / (tokens - 1)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<Percentiles>,
    /// Gaps between token arrivals, all completed requests pooled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_s: Option<Percentiles>,
    /// End-to-end latency of each completed request (send to last token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_s: Option<Percentiles>,
    /// Completed requests that met every SLO, where SLOs are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good: Option<u32>,
    /// `good` per second of the burst (`request_goodput`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    /// The first failure or early end, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_problem: Option<String>,
}

impl BurstRecord {
    /// Whether every request sent completed.
    pub fn all_completed(&self) -> bool {
        self.sent > 0 && self.completed == self.sent
    }
}

/// The prefill layer at one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillRecord {
    /// Context length in tokens (the calibrated prompt size).
    pub context_tokens: u64,
    /// Every sample, the warm-up first.
    pub samples: Vec<PrefillSample>,
    /// Median `prefill_tps` of the cold samples; `None` without one.
    #[serde(default)]
    pub prefill_tps: Option<f64>,
    /// The engine's own prefill counters over the cold samples, where it exposes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_counters: Option<PrefillCounters>,
    /// The client's figures held against those counters.
    pub cross_check: PrefillCrossCheck,
    /// Why a sample (and the ones after it) could not be taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One prefill sample: a request for one token, alone on the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillSample {
    /// `warmup` (the decode cells' own prompt, its first prefill) or `unique` (a prompt with
    /// a random prefix of its own, which no prefix cache holds).
    pub kind: PrefillSampleKind,
    /// Prompt tokens (the engine's `usage.prompt_tokens`, else the calibrated count).
    pub prompt_tokens: u64,
    /// Time to first token, seconds: the latency of a one-token request (its first token is
    /// its last).
    pub ttft_s: f64,
    /// `prompt_tokens / ttft_s`, the reference tool's prefill tok/s.
    pub prefill_tps: f64,
    /// Whether nothing of the prompt can have been in the prefix cache. A warm-up is cold
    /// only at the smallest context and when calibration counted tokens without running the
    /// prompt (`/tokenize`): larger contexts share the smaller ones' prefix.
    pub cold: bool,
}

/// Which prompt a prefill sample sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillSampleKind {
    /// The context's decode prompt (stream 0), sent before its first decode cell.
    Warmup,
    /// A prompt of the same size with a unique random prefix.
    Unique,
}

/// Counter deltas over the cold samples the context's median is taken over (a cold warm-up
/// included), scraped before the first and after the last (counters, never gauges that reset
/// on a scrape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillCounters {
    /// Prompt-token counter read (`vllm:prompt_tokens_total`, `llamacpp:prompt_tokens_total`).
    pub prompt_metric: String,
    /// How much it moved.
    pub prompt_tokens: f64,
    /// Whether the engine leaves prompt tokens found in its cache out of that counter
    /// (llama.cpp does).
    pub excludes_cached: bool,
    /// Prefill-time counter read, where the engine has one (`vllm:request_prefill_time_seconds`
    /// histogram's `_sum`, `llamacpp:prompt_seconds_total`, SGLang's and TensorRT-LLM's
    /// server-side TTFT histogram's `_sum`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_metric: Option<String>,
    /// How much it moved, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// `prompt_tokens / seconds`: the engine's own prefill rate over the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_prefill_tps: Option<f64>,
}

/// Whether the engine's prefill counters agree with the client's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillCrossCheck {
    /// The overall verdict.
    pub verdict: PrefillAgreement,
    /// Each comparison (`prompt_tokens_vs_counter`, `prefill_time_vs_counter`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CrossCheck>,
    /// Why the verdict is `unavailable`, or what disagreed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The prefill cross-check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillAgreement {
    /// Every comparison held within its tolerance.
    WithinTolerance,
    /// At least one did not: the client's prefill figure or the engine's counters are wrong.
    Disagrees,
    /// Nothing to compare (no metrics page, no prompt counter, no cold sample).
    Unavailable,
}

/// One check of the engine's word (its reported `usage`) against an independent figure.
/// A check whose `ok` is false made the cell `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Which check ran: `chunks_vs_usage`, `usage_vs_counter_window` (a per-token counter, or
    /// a per-request one with in-flight tokens), `usage_vs_counter_requests` (a per-request
    /// counter reconciled over whole requests), `tokens_per_request`, `stream_tps`.
    pub name: String,
    /// The independent figure (or the bound) the engine's word is held against.
    pub expected: f64,
    /// What the engine's usage says.
    pub reported: f64,
    /// `(reported - expected) / expected` (0 when within a bound). Infinite when the engine
    /// reported tokens where the independent figure is 0 (a counter that did not move): JSON
    /// has no infinity, so it is written `null` and read back as infinite.
    #[serde(deserialize_with = "null_as_infinity")]
    pub disagreement: f64,
    /// The relative disagreement allowed.
    pub tolerance: f64,
    /// Tokens of slack allowed on top of `tolerance` (edge timing, chunks in flight).
    #[serde(default)]
    pub slack: f64,
    /// Whether the engine's word held (within `tolerance` and `slack`).
    pub ok: bool,
    /// How to read it: what was compared, over what.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Reads a number, or `null` (how serde_json writes a non-finite one) as `+inf`.
fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

impl CellResult {
    /// Whether a steady-state window was measured: a cell decided without one (`error`,
    /// `skipped`, or `capacity_limited` because a smaller concurrency at its context already
    /// was) has no figures to show, and its zeros are not measurements.
    pub fn has_window(&self) -> bool {
        self.status.measured() && self.measured_s > 0.0
    }

    /// An unmeasured cell (`error` or `skipped`, or `capacity_limited` without a window) with
    /// its reason.
    pub fn unmeasured(
        concurrency: u32,
        context_tokens: u64,
        status: CellStatus,
        reason: impl Into<String>,
    ) -> Self {
        CellResult {
            concurrency,
            context_tokens,
            status,
            reason: Some(reason.into()),
            aggregate_tps: 0.0,
            samples: Vec::new(),
            per_user_tps: None,
            ttft_s: None,
            itl_s: None,
            effective_concurrency: None,
            waiting_avg: None,
            output_tokens: 0,
            measured_s: 0.0,
            prompt_tokens: None,
            errors: 0,
            token_source: None,
            server_tps: None,
            engine_counter: None,
            ready_after_s: None,
            spec_decode: None,
            telemetry: None,
            rounds: Vec::new(),
            cross_checks: Vec::new(),
            truncated_requests: None,
            preemptions: None,
            tpot_s: None,
            requests: None,
            unverified: None,
            host_lateness_s: None,
        }
    }

    /// The (concurrency, context) coordinate.
    pub fn coord(&self) -> (u32, u64) {
        (self.concurrency, self.context_tokens)
    }

    /// Folds another measurement of the same cell (a repetition, an adaptive round, an A/B
    /// boot) into this one. This is what `rounds` means in the schema: every measurement is
    /// listed (round 0 = this cell's own first measurement), the sub-window `samples` of the
    /// measured rounds are pooled, and `aggregate_tps` becomes the mean over measured rounds.
    /// A round that measured nothing (error, skipped) is listed but not pooled.
    pub fn fold_round(&mut self, again: &CellResult, round: u32) {
        let round_of = |cell: &CellResult, round| MeasurementRound {
            round,
            aggregate_tps: cell.aggregate_tps,
            samples: cell.samples.clone(),
            measured_s: cell.measured_s,
            verdict_after: None,
        };
        if self.rounds.is_empty() {
            let first = round_of(self, 0);
            self.rounds.push(first);
        }
        self.rounds.push(round_of(again, round));
        if again.measured_s > 0.0 && again.status.measured() {
            self.samples.extend_from_slice(&again.samples);
            self.output_tokens += again.output_tokens;
            self.measured_s += again.measured_s;
            // The mean over measured rounds (this one among them).
            let measured: Vec<f64> = self
                .rounds
                .iter()
                .filter(|r| r.measured_s > 0.0)
                .map(|r| r.aggregate_tps)
                .collect();
            self.aggregate_tps = measured.iter().sum::<f64>() / measured.len() as f64;
        }
        self.errors += again.errors;
    }
}

/// One extra measurement of a cell (adaptive re-measurement or a repetition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasurementRound {
    /// 1-based round number (1 = the first measurement).
    pub round: u32,
    /// Aggregate output tok/s of this round.
    pub aggregate_tps: f64,
    /// Sub-window tok/s samples of this round.
    pub samples: Vec<f64>,
    /// Length of the round's measurement window, seconds.
    pub measured_s: f64,
    /// Verdict of the comparison after this round, when one was made.
    #[serde(default)]
    pub verdict_after: Option<String>,
}

/// Which build a boot ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbSide {
    /// The base build (`[engine.a]`).
    A,
    /// The candidate build (`[engine.b]`).
    B,
}

impl AbSide {
    /// `a` or `b`.
    pub fn as_str(self) -> &'static str {
        match self {
            AbSide::A => "a",
            AbSide::B => "b",
        }
    }
}

/// One boot of the schedule and how it ended.
#[derive(Debug, Clone)]
pub struct AbBoot {
    /// Position in the boot order (0-based).
    pub index: u32,
    /// Pair index (0-based): boot `i` of A is paired with boot `i` of B.
    pub pair: u32,
    /// Which engine (A or B) this boot ran.
    pub side: AbSide,
    /// The engine's process group (from the `engine_spawned` event), when it started.
    pub pgid: Option<i32>,
    /// Whether the whole process group was gone after teardown.
    pub group_gone: bool,
    /// Seconds from spawn to ready.
    pub boot_s: Option<f64>,
    /// Why the boot failed, when it did.
    pub failure: Option<String>,
}

/// Speculative-decoding counters over the window and the acceptance-normalised speed.
///
/// `engine_steps = drafts + max(0, output_tokens - (accepted + drafts))`,
/// `accept_len = output_tokens / engine_steps`, `steps_per_s = aggregate_tps / accept_len`:
/// a kernel change shows in `steps_per_s` even when acceptance (a property of the prompt) moves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeStats {
    /// Draft rounds (engine steps that proposed tokens).
    pub drafts: u64,
    /// Tokens proposed by the drafter.
    pub draft_tokens: u64,
    /// Proposed tokens the target model accepted.
    pub accepted_tokens: u64,
    /// accepted / draft tokens.
    pub acceptance_rate: f64,
    /// Output tokens per engine step (see the formula above).
    pub accept_len: f64,
    /// Acceptance-normalised engine steps per second.
    pub steps_per_s: f64,
    /// Acceptance rate per draft position (position 0 first).
    #[serde(default)]
    pub per_position_acceptance: Vec<f64>,
}

/// Telemetry over one cell's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellTelemetry {
    /// Telemetry readings taken in the window.
    pub samples: u32,
    /// Mean GPU utilisation, percent.
    pub gpu_util_avg: Option<f64>,
    /// Mean memory-controller utilisation, percent.
    pub mem_util_avg: Option<f64>,
    /// Mean board power across devices, watts.
    pub power_w_avg: Option<f64>,
    /// Highest board power seen, watts.
    pub power_w_max: Option<f64>,
    /// Energy used in the window, joules.
    pub energy_j: Option<f64>,
    /// Energy per output token in the window, joules.
    pub joules_per_token: Option<f64>,
    /// Highest GPU temperature seen, °C.
    pub temperature_c_max: Option<f64>,
    /// Mean SM clock, MHz.
    pub sm_clock_mhz_avg: Option<f64>,
    /// Mean memory clock, MHz.
    pub mem_clock_mhz_avg: Option<f64>,
    /// Highest VRAM in use across devices, MiB.
    pub vram_used_mib_max: Option<f64>,
    /// Mean PCIe receive rate across devices, KiB/s.
    pub pcie_rx_kib_s_avg: Option<f64>,
    /// Mean PCIe transmit rate across devices, KiB/s.
    pub pcie_tx_kib_s_avg: Option<f64>,
    /// Throttle reasons seen at least once (e.g. `sw_power_cap`, `hw_thermal_slowdown`).
    #[serde(default)]
    pub throttle_reasons: Vec<String>,
}

impl CellTelemetry {
    /// The GPU ran no kernel in the window (0% utilisation in every sample that read it): it
    /// made none of the window's tokens, so their J/token is not its energy's.
    pub fn gpu_idle(&self) -> bool {
        self.gpu_util_avg == Some(0.0)
    }

    /// The clock limits of [`CLOCK_SLOWDOWNS`] seen in the window: the GPU slowed for heat or a
    /// hardware signal, so the window measures the runner's cooling or power delivery as well
    /// as the engine.
    pub fn clock_slowdowns(&self) -> Vec<&str> {
        self.throttle_reasons
            .iter()
            .map(String::as_str)
            .filter(|r| CLOCK_SLOWDOWNS.contains(r))
            .collect()
    }
}

/// Run-level telemetry: a summary, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetrySummary {
    /// `available` or `unavailable`.
    pub status: String,
    /// Why telemetry is unavailable (no library, no GPU, no permission).
    #[serde(default)]
    pub reason: Option<String>,
    /// Devices sampled (index, name).
    #[serde(default)]
    pub devices: Vec<String>,
    #[serde(default)]
    /// Energy over all measured windows, joules.
    pub energy_j: Option<f64>,
    #[serde(default)]
    /// Energy per output token over all measured windows, joules.
    pub joules_per_token: Option<f64>,
    #[serde(default)]
    /// Mean board power over the measured windows, watts.
    pub power_w_avg: Option<f64>,
    #[serde(default)]
    /// Highest GPU temperature of the run, °C.
    pub temperature_c_max: Option<f64>,
    #[serde(default)]
    /// Throttle reasons seen in any window.
    pub throttle_reasons: Vec<String>,
    /// Windows in which the GPU ran no kernel ([`CellTelemetry::gpu_idle`]): their energy is in
    /// `energy_j`, not in `joules_per_token`. Absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_windows: Option<u32>,
}

/// One line of the run's event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When it happened (UTC).
    pub at: DateTime<Utc>,
    /// What happened, as a machine-readable kind (`cell_done`, `engine_exit`, ...).
    pub kind: EventKind,
    /// Cell coordinate when the event belongs to a cell.
    #[serde(default)]
    pub concurrency: Option<u32>,
    #[serde(default)]
    /// Context length of the cell, when the event belongs to one.
    pub context_tokens: Option<u64>,
    /// The engine's process group, on `engine_spawned` (teardown checks look it up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_group: Option<i32>,
    /// What happened, in words.
    pub message: String,
}

/// The kinds of event the log holds. Serialised as the snake_case strings results files have
/// always used; a kind this build does not know (a newer writer, another tool) is kept as
/// [`EventKind::Other`] so such files still load.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Probe and calibration notes before the first cell.
    Startup,
    /// Warm-up notes (imported seed logs).
    Warmup,
    /// A cell began.
    CellStart,
    /// A cell's streams are all running and stable: the window starts.
    Ready,
    /// The engine could not admit every stream of a cell.
    CapacityLimited,
    /// A cell was measured.
    CellDone,
    /// A cell could not be measured.
    CellError,
    /// The engine is being started (`run`).
    EngineStart,
    /// The engine process exists; [`Event::process_group`] names its group.
    EngineSpawned,
    /// The engine answered its readiness probe.
    EngineReady,
    /// The engine could not be started or never became ready.
    EngineError,
    /// The engine exited during the run.
    EngineExit,
    /// The engine was stopped after the run (A/B boots).
    EngineStopped,
    /// The engine stopped answering.
    Unreachable,
    /// The run was cancelled (SIGINT/SIGTERM).
    Cancelled,
    /// Anything worth telling a reader that is not one of the above.
    Notice,
    /// An adaptive re-measurement round.
    AdaptiveRound,
    /// The comparison after an adaptive round.
    AdaptiveVerdict,
    /// Adaptive re-measurement finished.
    AdaptiveDone,
    /// One boot of an A/B run.
    AbBoot,
    /// A confirmation boot was started.
    Confirmation,
    /// The confirmation boot's outcome.
    ConfirmationDone,
    /// A figure of another tool's file that the importer could not map.
    ImportUnmapped,
    /// The gate measured the run but could not decide it: its comparison failed (a store it
    /// cannot read, no baseline on a pull request) or the confirmation boot a first look asked
    /// for did (exit 3). `merge` reads it so that such a shard fails the merged verdict instead
    /// of passing as one with no baseline yet, or by a first look's provisional verdict.
    CompareError,
    /// A kind written by another build or tool, kept verbatim.
    Other(String),
}

impl EventKind {
    /// Every named kind (what [`EventKind::parse`] recognises).
    pub(crate) const KNOWN: [EventKind; 24] = [
        EventKind::Startup,
        EventKind::Warmup,
        EventKind::CellStart,
        EventKind::Ready,
        EventKind::CapacityLimited,
        EventKind::CellDone,
        EventKind::CellError,
        EventKind::EngineStart,
        EventKind::EngineSpawned,
        EventKind::EngineReady,
        EventKind::EngineError,
        EventKind::EngineExit,
        EventKind::EngineStopped,
        EventKind::Unreachable,
        EventKind::Cancelled,
        EventKind::Notice,
        EventKind::AdaptiveRound,
        EventKind::AdaptiveVerdict,
        EventKind::AdaptiveDone,
        EventKind::AbBoot,
        EventKind::Confirmation,
        EventKind::ConfirmationDone,
        EventKind::ImportUnmapped,
        EventKind::CompareError,
    ];

    /// The snake_case name written to results files.
    pub fn as_str(&self) -> &str {
        match self {
            EventKind::Startup => "startup",
            EventKind::Warmup => "warmup",
            EventKind::CellStart => "cell_start",
            EventKind::Ready => "ready",
            EventKind::CapacityLimited => "capacity_limited",
            EventKind::CellDone => "cell_done",
            EventKind::CellError => "cell_error",
            EventKind::EngineStart => "engine_start",
            EventKind::EngineSpawned => "engine_spawned",
            EventKind::EngineReady => "engine_ready",
            EventKind::EngineError => "engine_error",
            EventKind::EngineExit => "engine_exit",
            EventKind::EngineStopped => "engine_stopped",
            EventKind::Unreachable => "unreachable",
            EventKind::Cancelled => "cancelled",
            EventKind::Notice => "notice",
            EventKind::AdaptiveRound => "adaptive_round",
            EventKind::AdaptiveVerdict => "adaptive_verdict",
            EventKind::AdaptiveDone => "adaptive_done",
            EventKind::AbBoot => "ab_boot",
            EventKind::Confirmation => "confirmation",
            EventKind::ConfirmationDone => "confirmation_done",
            EventKind::ImportUnmapped => "import_unmapped",
            EventKind::CompareError => "compare_error",
            EventKind::Other(name) => name,
        }
    }

    /// The kind a results file names (unknown names become [`EventKind::Other`]).
    pub fn parse(name: &str) -> Self {
        Self::KNOWN
            .iter()
            .find(|k| k.as_str() == name)
            .cloned()
            .unwrap_or_else(|| EventKind::Other(name.to_string()))
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(EventKind::parse(&name))
    }
}

impl Event {
    /// A run-level event stamped now.
    pub fn now(kind: EventKind, message: impl Into<String>) -> Self {
        Event {
            at: Utc::now(),
            kind,
            concurrency: None,
            context_tokens: None,
            process_group: None,
            message: message.into(),
        }
    }

    /// The `engine_spawned` event stamped now, carrying the engine's process group.
    pub fn engine_spawned(process_group: i32) -> Self {
        Event {
            process_group: Some(process_group),
            ..Event::now(
                EventKind::EngineSpawned,
                format!("engine process group {process_group}"),
            )
        }
    }

    /// A cell-level event stamped now.
    pub fn cell(
        kind: EventKind,
        concurrency: u32,
        context_tokens: u64,
        message: impl Into<String>,
    ) -> Self {
        Event {
            concurrency: Some(concurrency),
            context_tokens: Some(context_tokens),
            ..Event::now(kind, message)
        }
    }
}

/// Human label of a context length: `0`, `8k`, `128k`, `1.5k`.
pub fn context_label(tokens: u64) -> String {
    if tokens == 0 {
        "0".into()
    } else if tokens.is_multiple_of(1024) {
        format!("{}k", tokens / 1024)
    } else if tokens >= 1000 && tokens.is_multiple_of(1000) {
        format!("{}k", tokens / 1000)
    } else {
        tokens.to_string()
    }
}

/// A short duration as people read it: `38 ms` under a second (a simulated engine is ready
/// in tens of milliseconds, which `0.0s` would hide), else `12.3 s`.
pub fn duration_label(seconds: f64) -> String {
    if seconds < 0.9995 {
        format!("{:.0} ms", seconds * 1000.0)
    } else {
        format!("{seconds:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asserts::{assert_contains, assert_lacks, assert_starts_with};

    #[test]
    fn durations_under_a_second_are_in_milliseconds() {
        assert_eq!(duration_label(0.0384), "38 ms");
        assert_eq!(duration_label(0.9996), "1.0 s");
        assert_eq!(duration_label(12.34), "12.3 s");
    }

    fn spec() -> MatrixSpec {
        MatrixSpec {
            model: "m".into(),
            concurrency: vec![1, 2],
            contexts: vec![0, 8192],
            timing: CellTiming {
                warmup_s: 2.0,
                max_tokens: 256,
                ..CellTiming::DEFAULT
            },
            repetitions: 1,
        }
    }

    #[test]
    fn an_infinite_disagreement_round_trips() {
        // A static counter (expected 0) against reported tokens: serde_json writes `null`.
        let c = CrossCheck {
            name: "usage_vs_counter_requests".into(),
            expected: 0.0,
            reported: 192.0,
            disagreement: f64::INFINITY,
            tolerance: 0.05,
            slack: 0.0,
            ok: false,
            detail: None,
        };
        let text = serde_json::to_string(&c).unwrap();
        assert_contains(&text, "\"disagreement\":null");
        let back: CrossCheck = serde_json::from_str(&text).unwrap();
        assert_eq!(back.disagreement, f64::INFINITY);
        assert_eq!(back.reported, 192.0);
    }

    /// A prefill record survives the file; a record written before the engine counters or
    /// the error existed still loads.
    #[test]
    fn prefill_records_round_trip() {
        let record = PrefillRecord {
            context_tokens: 8192,
            samples: vec![PrefillSample {
                kind: PrefillSampleKind::Unique,
                prompt_tokens: 8190,
                ttft_s: 0.05,
                prefill_tps: 163_800.0,
                cold: true,
            }],
            prefill_tps: Some(163_800.0),
            engine_counters: None,
            cross_check: PrefillCrossCheck {
                verdict: PrefillAgreement::Unavailable,
                checks: Vec::new(),
                detail: Some("no metrics page".into()),
            },
            error: None,
        };
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["samples"][0]["kind"], "unique");
        assert_eq!(json["cross_check"]["verdict"], "unavailable");
        assert!(json.get("engine_counters").is_none());
        let back: PrefillRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, record);
        assert!(PrefillSettings::DEFAULT.samples_context(32_768));
        assert!(!PrefillSettings::DEFAULT.samples_context(65_536));
        assert!(!PrefillSettings::DEFAULT.samples_context(0));
        let off = PrefillSettings {
            samples: 0,
            ..PrefillSettings::DEFAULT
        };
        assert!(!off.samples_context(8192));
    }

    #[test]
    fn path_safe_names_cannot_escape() {
        assert_eq!(path_safe("Qwen/Qwen3-8B"), "qwen-qwen3-8b");
        assert_eq!(path_safe("../../etc/passwd"), "etc-passwd");
        assert_eq!(path_safe(".."), "unnamed");
        assert_eq!(path_safe(""), "unnamed");
        assert!(!path_safe("a/b\\c:d").contains(['/', '\\', ':']));
    }

    #[test]
    fn profile_key_separates_hardware_and_ignores_duration() {
        let gpu = |m: &str| HardwareFingerprint {
            kind: "gpu".into(),
            gpu_model: Some(m.into()),
            gpu_count: 1,
            driver_version: None,
            cpu_model: None,
        };
        let a = ProfileKey::derive(gpu("NVIDIA H200"), "vllm", "Qwen/Qwen3-8B", &spec());
        let b = ProfileKey::derive(
            gpu("NVIDIA GeForce RTX 5090"),
            "vllm",
            "Qwen/Qwen3-8B",
            &spec(),
        );
        assert_ne!(a.key, b.key);
        let mut longer = spec();
        longer.timing.duration_s = 60.0;
        let c = ProfileKey::derive(gpu("NVIDIA H200"), "vllm", "Qwen/Qwen3-8B", &longer);
        assert_eq!(a.key, c.key);
        assert_starts_with(&a.key, "gpu-nvidia-h200x1__vllm__qwen-qwen3-8b__m");
    }

    #[test]
    fn event_kinds_keep_their_snake_case_names_and_unknown_ones_survive() {
        for kind in EventKind::KNOWN {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert!(
                kind.as_str()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_')
            );
            assert_eq!(serde_json::from_str::<EventKind>(&json).unwrap(), kind);
        }
        assert_eq!(EventKind::CellDone.as_str(), "cell_done");
        let odd: EventKind = serde_json::from_str("\"gpu_reset\"").unwrap();
        assert_eq!(odd, EventKind::Other("gpu_reset".into()));
        assert_eq!(serde_json::to_string(&odd).unwrap(), "\"gpu_reset\"");
    }

    #[test]
    fn the_process_group_is_a_typed_field_of_engine_spawned() {
        let e = Event::engine_spawned(4242);
        let json = serde_json::to_string(&e).unwrap();
        assert_contains(&json, "\"kind\":\"engine_spawned\"");
        let back: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(back.process_group, Some(4242));
        let plain = serde_json::to_string(&Event::now(EventKind::Notice, "x")).unwrap();
        assert_lacks(&plain, "process_group");
    }

    /// A results file written before `gate_failure` existed (the gate's reason only in a
    /// `compare_error` event) still says why its gate failed; the typed record round-trips and
    /// is what `compare_error` reads when present; a kind from a newer writer reads as
    /// `unknown`, the file still loading.
    #[test]
    fn gate_failure_round_trips_and_older_files_fall_back_to_the_event() {
        let stored = include_str!(
            "../../../baselines/cpu-sim__infergate-sim__sim-test__mc37919a9d2/pr/runs/20261205t225518z-a7136ed8-3892282e.json"
        );
        let decided: RunResults = serde_json::from_str(stored).unwrap();
        assert_eq!(decided.gate_failure, None);
        assert_eq!(decided.compare_error(), None);

        let why = "comparison with the baseline failed: baseline store unreadable";
        let mut raw: serde_json::Value = serde_json::from_str(stored).unwrap();
        let event = serde_json::to_value(Event::now(EventKind::CompareError, why)).unwrap();
        raw["events"].as_array_mut().unwrap().push(event);
        let old: RunResults = serde_json::from_value(raw).unwrap();
        assert_eq!(old.gate_failure, None);
        assert_eq!(old.compare_error(), Some(why));
        assert!(
            serde_json::to_value(&old)
                .unwrap()
                .get("gate_failure")
                .is_none()
        );

        let mut run = old.clone();
        run.gate_failure = Some(GateFailureRecord {
            kind: GateFailureKind::Comparison,
            reason: why.into(),
        });
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(
            json["gate_failure"],
            serde_json::json!({"kind": "comparison", "reason": why})
        );
        let back: RunResults = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, run);
        assert_eq!(back.compare_error(), Some(why));

        for (kind, word) in [
            (GateFailureKind::Measurement, "measurement"),
            (GateFailureKind::Comparison, "comparison"),
            (GateFailureKind::ConfirmationBoot, "confirmation_boot"),
            (GateFailureKind::Confirmation, "confirmation"),
            (GateFailureKind::Paired, "paired"),
            (GateFailureKind::NoBaseline, "no_baseline"),
            (GateFailureKind::NotABaseline, "not_a_baseline"),
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), word);
            let back: GateFailureKind = serde_json::from_value(word.into()).unwrap();
            assert_eq!(back, kind);
        }
        let mut newer = json;
        newer["gate_failure"]["kind"] = "store_on_fire".into();
        let newer: RunResults = serde_json::from_value(newer).unwrap();
        let record = newer.gate_failure.as_ref().unwrap();
        assert_eq!(record.kind, GateFailureKind::Unknown);
        assert_eq!(newer.compare_error(), Some(why));
    }

    /// The stored baselines (written before [`CellTiming`] and the typed event kinds) still
    /// load, keep their matrix hash and profile key, and read the readiness settings they did
    /// not record as the defaults they were measured with.
    #[test]
    fn stored_baselines_load_and_hash_the_same() {
        let root =
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("baselines");
        let mut dirs = vec![root];
        let mut runs = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path
                    .file_name()
                    .is_some_and(|n| n == "profile.json" || n == "infergate-store.json")
                {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let run: RunResults = serde_json::from_str(&text).unwrap();
                let p = &run.profile;
                let again =
                    ProfileKey::derive(p.hardware.clone(), &p.engine, &p.model, &run.matrix);
                assert_eq!(again.matrix_hash, p.matrix_hash, "{}", path.display());
                assert_eq!(again.key, p.key, "{}", path.display());
                assert_eq!(
                    run.matrix.timing.ready_timeout_s,
                    CellTiming::DEFAULT.ready_timeout_s
                );
                let raw: serde_json::Value = serde_json::from_str(&text).unwrap();
                let written = serde_json::to_value(&run).unwrap();
                for key in [
                    "duration_s",
                    "warmup_s",
                    "max_tokens",
                    "unique_context_percent",
                    "sub_windows",
                ] {
                    assert_eq!(written["matrix"][key], raw["matrix"][key], "{key}");
                }
                assert_eq!(written["events"], raw["events"], "{}", path.display());
                // The run as recorded before a layer existed (no `key`): it loads without it,
                // and writes none.
                let without = |key: &str| {
                    let mut before = raw.clone();
                    before.as_object_mut().unwrap().remove(key);
                    let old: RunResults = serde_json::from_value(before).unwrap();
                    assert!(serde_json::to_value(&old).unwrap().get(key).is_none());
                    old
                };
                // Recorded with the prefill layer (8k): it round-trips.
                assert_eq!(run.prefill.len(), 1, "{}", path.display());
                assert_eq!(written["prefill"], raw["prefill"], "{}", path.display());
                assert!(without("prefill").prefill.is_empty());
                // Likewise the burst layer: every request of it completed.
                let burst = run
                    .burst
                    .as_ref()
                    .expect("bundled runs carry the burst layer");
                assert!(burst.all_completed(), "{}", path.display());
                assert_eq!(written["burst"], raw["burst"], "{}", path.display());
                assert!(without("burst").burst.is_none());
                runs += 1;
            }
        }
        assert!(runs > 0, "no stored baseline found");
    }

    #[test]
    fn context_labels_match_the_seed_style() {
        assert_eq!(context_label(0), "0");
        assert_eq!(context_label(8192), "8k");
        assert_eq!(context_label(131072), "128k");
        assert_eq!(context_label(500), "500");
    }

    #[test]
    fn folding_rounds_lists_every_measurement_and_pools_only_measured_ones() {
        let mut cell = CellResult::unmeasured(4, 8192, CellStatus::Ok, "x");
        cell.reason = None;
        cell.aggregate_tps = 100.0;
        cell.samples = vec![99.0, 101.0];
        cell.measured_s = 2.0;
        let mut again = cell.clone();
        again.aggregate_tps = 110.0;
        again.samples = vec![109.0, 111.0];
        cell.fold_round(&again, 1);
        let failed = CellResult::unmeasured(4, 8192, CellStatus::Error, "engine died");
        cell.fold_round(&failed, 2);
        assert_eq!(
            cell.rounds.iter().map(|r| r.round).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(cell.samples, [99.0, 101.0, 109.0, 111.0]);
        assert!((cell.aggregate_tps - 105.0).abs() < 1e-9);
        assert!((cell.measured_s - 4.0).abs() < 1e-9);
    }
}
