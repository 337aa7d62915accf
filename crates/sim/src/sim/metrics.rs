//! The engine's counters and gauges, and their Prometheus text rendering with vLLM's metric
//! names (`vllm:...{model_name="..."}`), so metric scrapers built for vLLM work unchanged.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live engine state shared between the scheduler (writer) and `/metrics` (reader).
#[derive(Debug, Default)]
pub(crate) struct EngineCounters {
    /// Sequences being decoded (gauge).
    pub(crate) running: AtomicU64,
    /// Requests queued for KV space (gauge).
    pub(crate) waiting: AtomicU64,
    /// KV tokens reserved by running sequences (gauge, compared with the budget).
    pub(crate) kv_reserved: AtomicU64,
    /// Prompt tokens of admitted requests (counter).
    pub(crate) prompt_tokens: AtomicU64,
    /// Output tokens emitted (counter): exactly the tokens sent to sequences.
    pub(crate) generation_tokens: AtomicU64,
    /// Prompt tokens looked up in the prefix cache (counter).
    pub(crate) prefix_cache_queries: AtomicU64,
    /// Prompt tokens found in the prefix cache (counter).
    pub(crate) prefix_cache_hits: AtomicU64,
    /// Finished requests (counter).
    pub(crate) requests_finished: AtomicU64,
    /// Engine time from admission to first token, summed over requests, nanoseconds
    /// (`vllm:request_prefill_time_seconds`' sum).
    pub(crate) prefill_time_ns: AtomicU64,
    /// Requests that got their first token (that histogram's count).
    pub(crate) prefill_requests: AtomicU64,
    /// Sequences preempted for lack of KV cache (counter; only the `preempt` fault preempts).
    pub(crate) preemptions: AtomicU64,
    /// Spec decode: draft rounds (one per sequence per step).
    pub(crate) spec_drafts: AtomicU64,
    /// Spec decode: draft tokens proposed.
    pub(crate) spec_draft_tokens: AtomicU64,
    /// Spec decode: draft tokens accepted.
    pub(crate) spec_accepted: AtomicU64,
    /// Spec decode: accepted tokens per draft position.
    pub(crate) spec_accepted_per_pos: Vec<AtomicU64>,
}

impl EngineCounters {
    /// Counters for an engine with `draft_positions` spec-decode positions (0 = off).
    pub(crate) fn new(draft_positions: usize) -> Self {
        EngineCounters {
            spec_accepted_per_pos: (0..draft_positions).map(|_| AtomicU64::new(0)).collect(),
            ..Default::default()
        }
    }
}

/// KV block size the simulated engine reports (vLLM's default for CUDA).
pub(crate) const SIM_BLOCK_SIZE: u64 = 16;

/// Escapes a Prometheus label value.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// How `/metrics` misreports (the `counter-lies` and `prompt-counter-lies` faults; 1 = honest).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CounterFactors {
    /// Factor of the generation counter.
    pub(crate) generation: f64,
    /// Factor of the prompt counter.
    pub(crate) prompt: f64,
}

#[cfg(test)]
impl CounterFactors {
    /// Every counter as counted.
    pub(crate) const HONEST: CounterFactors = CounterFactors {
        generation: 1.0,
        prompt: 1.0,
    };
}

/// Renders the counters in Prometheus text exposition format (version 0.0.4); the generation
/// and prompt counters are scaled by `factors`.
pub(crate) fn render(
    c: &EngineCounters,
    model: &str,
    kv_budget_tokens: u64,
    spec: bool,
    factors: CounterFactors,
) -> String {
    let mut out = Exposition {
        out: String::with_capacity(2048),
        model: label(model),
    };
    out.scheduler_gauges(c, kv_budget_tokens);
    out.token_counters(c, factors);
    out.request_counters(c);
    if spec {
        out.spec_decode_counters(c);
    }
    out.prefill_histogram(c);
    out.cache_config(kv_budget_tokens);
    out.out
}

/// A counter's current value.
fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Adds `n` to a counter.
pub(crate) fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

/// Sets a gauge to `n`.
pub(crate) fn set(a: &AtomicU64, n: u64) {
    a.store(n, Ordering::Relaxed);
}

/// The exposition text being written, and the model's escaped label value.
struct Exposition {
    out: String,
    model: String,
}

impl Exposition {
    /// One metric with its HELP and TYPE lines and the `model_name` label.
    fn metric(&mut self, name: &str, kind: &str, help: &str, value: String) {
        let (out, m) = (&mut self.out, &self.model);
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name}{{model_name=\"{m}\"}} {value}");
    }

    /// A counter (vLLM writes counters as floats).
    fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.metric(name, "counter", help, format!("{value}.0"));
    }

    /// The scheduler's state: running and waiting requests, KV cache usage.
    fn scheduler_gauges(&mut self, c: &EngineCounters, kv_budget_tokens: u64) {
        self.metric(
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            load(&c.running).to_string(),
        );
        self.metric(
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            load(&c.waiting).to_string(),
        );
        let usage = (load(&c.kv_reserved) as f64 / kv_budget_tokens.max(1) as f64).min(1.0);
        self.metric(
            "vllm:kv_cache_usage_perc",
            "gauge",
            "KV-cache usage. 1 means 100 percent usage.",
            format!("{usage}"),
        );
    }

    /// Prompt and generation tokens (scaled by `factors`), prefix cache queries and hits.
    fn token_counters(&mut self, c: &EngineCounters, factors: CounterFactors) {
        self.counter(
            "vllm:prompt_tokens_total",
            "Number of prefill tokens processed.",
            (load(&c.prompt_tokens) as f64 * factors.prompt).round() as u64,
        );
        self.counter(
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            (load(&c.generation_tokens) as f64 * factors.generation).round() as u64,
        );
        self.counter(
            "vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            load(&c.prefix_cache_queries),
        );
        self.counter(
            "vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            load(&c.prefix_cache_hits),
        );
    }

    /// Preemptions and finished requests.
    fn request_counters(&mut self, c: &EngineCounters) {
        self.counter(
            "vllm:num_preemptions_total",
            "Cumulative number of preemption from the engine.",
            load(&c.preemptions),
        );
        self.counter(
            "vllm:request_success_total",
            "Count of successfully processed requests.",
            load(&c.requests_finished),
        );
    }

    /// Speculative decoding: drafts, draft tokens, accepted tokens (also per position).
    fn spec_decode_counters(&mut self, c: &EngineCounters) {
        self.counter(
            "vllm:spec_decode_num_drafts_total",
            "Number of spec decoding drafts.",
            load(&c.spec_drafts),
        );
        self.counter(
            "vllm:spec_decode_num_draft_tokens_total",
            "Number of draft tokens.",
            load(&c.spec_draft_tokens),
        );
        self.counter(
            "vllm:spec_decode_num_accepted_tokens_total",
            "Number of accepted tokens.",
            load(&c.spec_accepted),
        );
        let (out, m) = (&mut self.out, &self.model);
        let name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
        let _ = writeln!(out, "# HELP {name} Accepted tokens per draft position.");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (i, a) in c.spec_accepted_per_pos.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}{{model_name=\"{m}\",position=\"{i}\"}} {}.0",
                load(a)
            );
        }
    }

    /// vLLM's prefill-phase histogram (scheduled → first token); one `+Inf` bucket, since
    /// readers take its `_sum` and `_count`.
    fn prefill_histogram(&mut self, c: &EngineCounters) {
        let (out, m) = (&mut self.out, &self.model);
        let name = "vllm:request_prefill_time_seconds";
        let requests = load(&c.prefill_requests);
        let _ = writeln!(
            out,
            "# HELP {name} Histogram of time spent in PREFILL phase for request.\n# TYPE {name} histogram\n{name}_bucket{{le=\"+Inf\",model_name=\"{m}\"}} {requests}.0\n{name}_count{{model_name=\"{m}\"}} {requests}.0\n{name}_sum{{model_name=\"{m}\"}} {}",
            load(&c.prefill_time_ns) as f64 / 1e9
        );
    }

    /// vLLM's info gauge of the KV cache configuration (labels as vLLM writes them; value 1):
    /// tools read the KV budget from `num_gpu_blocks` x `block_size`.
    fn cache_config(&mut self, kv_budget_tokens: u64) {
        let _ = writeln!(
            self.out,
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size=\"{SIM_BLOCK_SIZE}\",cache_dtype=\"auto\",engine=\"0\",num_gpu_blocks=\"{}\"}} 1.0",
            kv_budget_tokens.div_ceil(SIM_BLOCK_SIZE)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefill counters a prefill layer reads, and the prompt counter's lie.
    #[test]
    fn renders_the_prefill_counters() {
        let c = EngineCounters::new(0);
        c.prompt_tokens.store(8192, Ordering::Relaxed);
        c.prefill_time_ns.store(45_000_000, Ordering::Relaxed);
        c.prefill_requests.store(1, Ordering::Relaxed);
        let text = render(&c, "m", 200, false, CounterFactors::HONEST);
        assert!(text.contains("vllm:prompt_tokens_total{model_name=\"m\"} 8192.0\n"));
        assert!(text.contains("vllm:request_prefill_time_seconds_sum{model_name=\"m\"} 0.045\n"));
        assert!(text.contains("vllm:request_prefill_time_seconds_count{model_name=\"m\"} 1.0\n"));
        let lies = CounterFactors {
            prompt: 1.5,
            ..CounterFactors::HONEST
        };
        assert!(
            render(&c, "m", 200, false, lies)
                .contains("vllm:prompt_tokens_total{model_name=\"m\"} 12288.0\n")
        );
    }

    #[test]
    fn renders_vllm_names_with_help_type_and_labels() {
        let c = EngineCounters::new(2);
        c.running.store(3, Ordering::Relaxed);
        c.waiting.store(1, Ordering::Relaxed);
        c.kv_reserved.store(50, Ordering::Relaxed);
        c.generation_tokens.store(1234, Ordering::Relaxed);
        c.spec_accepted_per_pos[1].store(7, Ordering::Relaxed);
        let text = render(&c, "m\"x", 200, true, CounterFactors::HONEST);
        assert!(text.contains("# TYPE vllm:num_requests_running gauge\n"));
        assert!(text.contains("vllm:num_requests_running{model_name=\"m\\\"x\"} 3\n"));
        assert!(text.contains("vllm:num_requests_waiting{model_name=\"m\\\"x\"} 1\n"));
        assert!(text.contains("vllm:kv_cache_usage_perc{model_name=\"m\\\"x\"} 0.25\n"));
        assert!(text.contains("# TYPE vllm:generation_tokens_total counter\n"));
        assert!(text.contains("vllm:generation_tokens_total{model_name=\"m\\\"x\"} 1234.0\n"));
        assert!(text.contains(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\\\"x\",position=\"1\"} 7.0\n"
        ));
        // every sample line has a HELP and TYPE line for its family
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let family = line.split('{').next().unwrap();
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| family.strip_suffix(s))
                .filter(|f| f.ends_with("_seconds"))
                .unwrap_or(family);
            assert!(text.contains(&format!("# HELP {family} ")), "{family}");
            assert!(text.contains(&format!("# TYPE {family} ")), "{family}");
        }
        assert!(!render(&c, "m", 200, false, CounterFactors::HONEST).contains("spec_decode"));
        assert!(text.contains(
            "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",engine=\"0\",num_gpu_blocks=\"13\"} 1.0\n"
        ));
    }
}
