//! Prometheus text scraping and the engine metrics dialects (vLLM, SGLang, llama.cpp,
//! TensorRT-LLM).
//!
//! The measurement core needs four things from an engine's Prometheus page: how many requests
//! run, how many wait, a generated-tokens counter (to validate the client's count) and, where
//! the engine decodes speculatively, draft/accept counters. Each engine names them differently
//! (and TensorRT-LLM serves them at `/prometheus/metrics`, its `/metrics` being JSON iteration
//! stats); [`MetricsDialect`] maps the names, detected from the text itself.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::client::EngineClient;

pub(crate) use infergate_schema::results::CounterMoves;

/// One sample line of the Prometheus text format.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    /// Metric name including any `_total`/`_bucket` suffix (e.g. `vllm:num_requests_running`).
    pub(crate) name: String,
    /// Label pairs in file order.
    pub(crate) labels: Vec<(String, String)>,
    /// The value (`NaN`, `+Inf`, `-Inf` are parsed as such).
    pub(crate) value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed `/metrics` page.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct MetricsPage {
    pub(crate) samples: Vec<Sample>,
}

/// Parses the Prometheus text exposition format, skipping comments and lines it cannot read
/// (a scrape must never fail because of one odd line from an engine).
pub(crate) fn parse_prometheus(text: &str) -> MetricsPage {
    parse_where(text, |_| true)
}

/// [`parse_prometheus`] keeping only the samples whose name `keep` accepts, decided before
/// anything of the line is copied.
fn parse_where(text: &str, keep: impl Fn(&str) -> bool) -> MetricsPage {
    let mut samples = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(s) = parse_line(line, &keep) {
            samples.push(s);
        }
    }
    MetricsPage { samples }
}

/// Whether a periodic scrape keeps a sample: every gauge and counter, no histogram bucket. No
/// dialect reads a bucket, and the buckets are most of a real engine's page (vLLM's latency
/// histograms: tens of buckets per histogram and model), so a scrape every few hundred
/// milliseconds skips them before copying anything.
fn scraped(name: &str) -> bool {
    !name.ends_with("_bucket")
}

fn parse_line(line: &str, keep: impl Fn(&str) -> bool) -> Option<Sample> {
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let name = &line[..name_end];
    if name.is_empty() || !keep(name) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    // value [timestamp]
    let value_text = rest.split_whitespace().next()?;
    let value = parse_value(value_text)?;
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `k="v",k2="v2"}` and returns the labels and the text after `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => {
                    let (_, e) = chars.next()?;
                    value.push(match e {
                        'n' => '\n',
                        other => other,
                    });
                }
                '"' => break i,
                other => value.push(other),
            }
        };
        labels.push((key, value));
        s = &s[end + 1..];
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

impl MetricsPage {
    /// Sum of all finite samples named `name` (over label sets: engines, data-parallel ranks).
    pub(crate) fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples.iter().filter(|s| s.name == name) {
            found = true;
            if s.value.is_finite() {
                total += s.value;
            }
        }
        found.then_some(total)
    }

    /// Sum over label sets, per value of label `key` (e.g. spec-decode `position`).
    pub(crate) fn sum_by_label(&self, name: &str, key: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == name) {
            if let (Some(v), true) = (s.label(key), s.value.is_finite()) {
                *out.entry(v.to_string()).or_insert(0.0) += s.value;
            }
        }
        out
    }

    /// Whether any sample name starts with `prefix`.
    pub(crate) fn has_prefix(&self, prefix: &str) -> bool {
        self.samples.iter().any(|s| s.name.starts_with(prefix))
    }
}

/// Which engine's metric names `/metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricsDialect {
    Vllm,
    Sglang,
    Llamacpp,
    /// `trtllm-serve` started with `return_perf_metrics` (the Prometheus page exists only then).
    Trtllm,
}

/// The scheduler/throughput state read from one scrape, in engine-neutral terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EngineState {
    /// Requests being decoded (or prefilled) now.
    pub(crate) running: Option<f64>,
    /// Requests queued, not admitted.
    pub(crate) waiting: Option<f64>,
    /// Cumulative generated tokens (counter).
    pub(crate) generated_tokens: Option<f64>,
    /// KV cache use, 0..1.
    pub(crate) kv_usage: Option<f64>,
    /// Speculative decoding counters (cumulative), when reported.
    pub(crate) spec: Option<SpecCounters>,
    /// Mean accepted length reported directly by the engine (SGLang gauge).
    pub(crate) spec_accept_length_gauge: Option<f64>,
    /// Cumulative requests preempted (vLLM) or retracted (SGLang), when the engine counts them
    /// (see [`MetricsDialect::preemption_counter`]).
    pub(crate) preemptions: Option<f64>,
    /// Cumulative prompt tokens (see [`MetricsDialect::prompt_counter`]).
    pub(crate) prompt_tokens: Option<f64>,
    /// Cumulative prefill seconds (see [`MetricsDialect::prefill_time_counter`]).
    pub(crate) prefill_seconds: Option<f64>,
}

/// Cumulative speculative-decoding counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SpecCounters {
    /// Verification steps; 0 where the engine does not count them (TensorRT-LLM).
    pub(crate) drafts: f64,
    pub(crate) draft_tokens: f64,
    pub(crate) accepted_tokens: f64,
    /// Accepted tokens per draft position (position 0 first).
    pub(crate) accepted_per_pos: Vec<f64>,
    /// The counters move only when a request ends (llama.cpp adds a slot's draft figures in
    /// `server_metrics::on_prediction`): a window's difference covers the requests that
    /// finished in it, so only ratios of the differences mean anything.
    pub(crate) per_request: bool,
}

impl MetricsDialect {
    /// Detects the dialect from the metric names on a page.
    pub(crate) fn detect(page: &MetricsPage) -> Option<MetricsDialect> {
        use MetricsDialect::*;
        [
            (Vllm, "vllm:"),
            (Sglang, "sglang:"),
            (Llamacpp, "llamacpp:"),
            (Trtllm, "trtllm_"),
        ]
        .into_iter()
        .find(|(_, prefix)| page.has_prefix(prefix))
        .map(|(d, _)| d)
    }

    /// Where the Prometheus page is served: TensorRT-LLM mounts it at `/prometheus/metrics`
    /// (`OpenAIServer.mount_metrics`), every other engine at `/metrics`.
    pub(crate) fn metrics_path(self) -> &'static str {
        match self {
            MetricsDialect::Trtllm => "/prometheus/metrics",
            _ => "/metrics",
        }
    }

    /// Short name written to `engine.metrics_flavor` and used as the engine family.
    pub(crate) fn name(self) -> &'static str {
        match self {
            MetricsDialect::Vllm => "vllm",
            MetricsDialect::Sglang => "sglang",
            MetricsDialect::Llamacpp => "llamacpp",
            MetricsDialect::Trtllm => "trtllm",
        }
    }

    /// The generation counter read as `EngineState::generated_tokens`.
    pub(crate) fn generation_counter(self) -> &'static str {
        match self {
            MetricsDialect::Vllm => "vllm:generation_tokens_total",
            MetricsDialect::Sglang => "sglang:generation_tokens_total",
            MetricsDialect::Llamacpp => "llamacpp:tokens_predicted_total",
            MetricsDialect::Trtllm => "trtllm_generation_tokens_total",
        }
    }

    /// When that counter moves, from the engines' sources: vLLM adds each engine step's new
    /// tokens (`counter_generation_tokens.inc(num_generation_tokens)` per iteration); SGLang
    /// adds a request's tokens when it finishes (`observe_one_finished_request`); llama.cpp
    /// adds a slot's `n_decoded` when its request ends (`server_metrics::on_prediction`);
    /// TensorRT-LLM adds a request's output tokens in `MetricsCollector.log_request_metrics_dict`
    /// only once the request has a finish reason (its iteration-level counters are the
    /// spec-decode ones, not this).
    pub(crate) fn counter_moves(self) -> CounterMoves {
        match self {
            MetricsDialect::Vllm => CounterMoves::PerToken,
            MetricsDialect::Sglang | MetricsDialect::Llamacpp | MetricsDialect::Trtllm => {
                CounterMoves::PerRequest
            }
        }
    }

    /// Whether the tokens of running requests can be read (llama.cpp `/slots` `n_decoded`), to
    /// turn a per-request counter into a per-token one at the window's edges.
    pub(crate) fn has_in_flight_tokens(self) -> bool {
        self == MetricsDialect::Llamacpp
    }

    /// The counter of requests the engine took back from the running batch because its KV
    /// cache ran out, from the engines' sources: vLLM's `vllm:num_preemptions` counter
    /// (`vllm/v1/metrics/loggers.py`; `_total` on the wire), SGLang's
    /// `sglang:num_retracted_requests_total` (`srt/metrics/collector.py`; its older
    /// `sglang:num_retracted_reqs` is a gauge reset after every log interval, not differenced).
    /// llama.cpp has none.
    pub(crate) fn preemption_counter(self) -> Option<&'static str> {
        match self {
            MetricsDialect::Vllm => Some("vllm:num_preemptions_total"),
            MetricsDialect::Sglang => Some("sglang:num_retracted_requests_total"),
            _ => None,
        }
    }

    /// The prompt-token counter, from the engines' sources: vLLM `vllm:prompt_tokens_total`
    /// (`vllm/v1/metrics/loggers.py`, every prompt token of a request that prefilled, cached
    /// ones included), SGLang `sglang:prompt_tokens_total` (`srt/metrics/collector.py`, added
    /// per finished request), llama.cpp `llamacpp:prompt_tokens_total` (tokens it processed,
    /// cached ones excluded; `llamacpp:prompt_tokens_cached_total` counts those) and
    /// TensorRT-LLM `trtllm_prompt_tokens_total` (`tensorrt_llm/metrics/collector.py`).
    pub(crate) fn prompt_counter(self) -> &'static str {
        match self {
            MetricsDialect::Vllm => "vllm:prompt_tokens_total",
            MetricsDialect::Sglang => "sglang:prompt_tokens_total",
            MetricsDialect::Llamacpp => "llamacpp:prompt_tokens_total",
            MetricsDialect::Trtllm => "trtllm_prompt_tokens_total",
        }
    }

    /// Whether [`Self::prompt_counter`] leaves out prompt tokens found in the cache.
    pub(crate) fn prompt_counter_excludes_cached(self) -> bool {
        self == MetricsDialect::Llamacpp
    }

    /// A counter of seconds spent prefilling: vLLM's prefill-phase histogram
    /// (`vllm:request_prefill_time_seconds`, scheduled → first token, queueing excluded),
    /// llama.cpp's `llamacpp:prompt_seconds_total` (prompt processing time). SGLang and
    /// TensorRT-LLM keep no prefill time: their server-side TTFT histograms
    /// (`sglang:time_to_first_token_seconds`, `trtllm_time_to_first_token_seconds`; arrival →
    /// first token) are the nearest, read the same way (the histogram's `_sum`).
    pub(crate) fn prefill_time_counter(self) -> Option<&'static str> {
        match self {
            MetricsDialect::Vllm => Some("vllm:request_prefill_time_seconds_sum"),
            MetricsDialect::Sglang => Some("sglang:time_to_first_token_seconds_sum"),
            MetricsDialect::Llamacpp => Some("llamacpp:prompt_seconds_total"),
            MetricsDialect::Trtllm => Some("trtllm_time_to_first_token_seconds_sum"),
        }
    }

    /// Reads the engine-neutral state from a page.
    pub(crate) fn read(self, page: &MetricsPage) -> EngineState {
        let mut state = self.read_gauges(page);
        state.generated_tokens = page.sum(self.generation_counter());
        state.preemptions = self.preemption_counter().and_then(|name| page.sum(name));
        state.prompt_tokens = page.sum(self.prompt_counter());
        state.prefill_seconds = self.prefill_time_counter().and_then(|name| page.sum(name));
        state
    }

    fn read_gauges(self, page: &MetricsPage) -> EngineState {
        match self {
            MetricsDialect::Vllm => EngineState {
                running: page.sum("vllm:num_requests_running"),
                waiting: page.sum("vllm:num_requests_waiting"),
                kv_usage: page
                    .sum("vllm:kv_cache_usage_perc")
                    .or_else(|| page.sum("vllm:gpu_cache_usage_perc")),
                spec: spec_counters(page, "vllm:", false),
                ..EngineState::default()
            },
            MetricsDialect::Sglang => EngineState {
                running: page.sum("sglang:num_running_reqs"),
                waiting: page.sum("sglang:num_queue_reqs"),
                kv_usage: page.sum("sglang:token_usage"),
                spec_accept_length_gauge: page
                    .sum("sglang:spec_accept_length")
                    .filter(|v| *v > 0.0),
                ..EngineState::default()
            },
            // Current llama-server (tools/server/server-task.cpp `to_metrics`) has no KV
            // gauge; `kv_cache_usage_ratio` is read where an older build still has it. The
            // spec-decode counters are always listed (0 without a draft model).
            MetricsDialect::Llamacpp => EngineState {
                running: page.sum("llamacpp:requests_processing"),
                waiting: page.sum("llamacpp:requests_deferred"),
                kv_usage: page.sum("llamacpp:kv_cache_usage_ratio"),
                spec: spec_counters(page, "llamacpp:", true),
                ..EngineState::default()
            },
            // tensorrt_llm/metrics/collector.py: the request gauges and KV utilisation come
            // from the iteration stats (`log_iteration_stats`, needs `enable_iter_perf_stats`
            // on the PyTorch backend); the spec-decode token counters move per iteration but
            // no step count is kept, so the acceptance length is its gauge.
            MetricsDialect::Trtllm => EngineState {
                running: page.sum("trtllm_num_requests_running"),
                waiting: page.sum("trtllm_num_requests_waiting"),
                kv_usage: page.sum("trtllm_kv_cache_utilization"),
                spec: page
                    .sum("trtllm_spec_decode_num_draft_tokens_total")
                    .map(|draft_tokens| SpecCounters {
                        drafts: 0.0,
                        draft_tokens,
                        accepted_tokens: page
                            .sum("trtllm_spec_decode_num_accepted_tokens_total")
                            .unwrap_or(0.0),
                        accepted_per_pos: Vec::new(),
                        per_request: false,
                    }),
                spec_accept_length_gauge: page
                    .sum("trtllm_spec_decode_acceptance_length")
                    .filter(|v| *v > 0.0),
                ..EngineState::default()
            },
        }
    }
}

/// Scrapes the dialect's Prometheus page once; `None` when the engine has no (known) metrics or did not answer.
/// The instant is when the engine most likely read its counters (see below).
pub(crate) async fn scrape(
    client: &EngineClient,
    dialect: Option<MetricsDialect>,
) -> Option<(Instant, EngineState)> {
    let dialect = dialect?;
    let sent = Instant::now();
    let (status, text) = client
        .get_text(dialect.metrics_path(), Duration::from_secs(3))
        .await
        .ok()?;
    // The counter was read somewhere between sending and receiving: take the midpoint, so a
    // slow answer does not shift the engine's window by its whole latency.
    let at = sent + Instant::now().duration_since(sent) / 2;
    if status != 200 {
        return None;
    }
    Some((at, dialect.read(&parse_where(&text, scraped))))
}

/// The spec-decode counters vLLM and llama.cpp both name `{prefix}spec_decode_num_…_total`.
fn spec_counters(page: &MetricsPage, prefix: &str, per_request: bool) -> Option<SpecCounters> {
    let sum = |what: &str| page.sum(&format!("{prefix}spec_decode_num_{what}_total"));
    sum("drafts").map(|drafts| SpecCounters {
        drafts,
        draft_tokens: sum("draft_tokens").unwrap_or(0.0),
        accepted_tokens: sum("accepted_tokens").unwrap_or(0.0),
        accepted_per_pos: by_position(page.sum_by_label(
            &format!("{prefix}spec_decode_num_accepted_tokens_per_pos_total"),
            "position",
        )),
        per_request,
    })
}

fn by_position(map: BTreeMap<String, f64>) -> Vec<f64> {
    let pairs: BTreeMap<usize, f64> = map
        .into_iter()
        .filter_map(|(k, v)| k.parse::<usize>().ok().map(|p| (p, v)))
        .collect();
    let mut out = vec![0.0; pairs.last_key_value().map_or(0, |(p, _)| p + 1)];
    for (p, v) in pairs {
        out[p] = v;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fixture;

    /// What `dialect` reads from the recorded page `name`, after checking it is detected.
    fn read_fixture(name: &str, dialect: MetricsDialect) -> EngineState {
        let page = parse_prometheus(&fixture(name));
        assert_eq!(MetricsDialect::detect(&page), Some(dialect), "{name}");
        dialect.read(&page)
    }

    #[test]
    fn parses_labels_escapes_and_special_values() {
        let page = parse_prometheus(
            "# HELP x y\n# TYPE x gauge\nx{a=\"1\",b=\"q\\\"uote\"} 3.5\ny NaN\nz +Inf 1700000000\nw{} -Inf\nbad line here\n",
        );
        assert_eq!(page.samples.len(), 4);
        assert_eq!(page.samples[0].label("b"), Some("q\"uote"));
        assert_eq!(page.samples[0].value, 3.5);
        assert!(page.samples[1].value.is_nan());
        assert_eq!(page.samples[2].value, f64::INFINITY);
        assert_eq!(page.sum("y"), Some(0.0), "NaN is ignored in sums");
        assert_eq!(page.sum("absent"), None);
    }

    /// A scrape skips histogram buckets; what every dialect reads from its recorded page is the
    /// same as from the whole page, and the buckets are gone.
    #[test]
    fn scrapes_read_the_same_without_buckets() {
        for name in [
            "metrics-vllm.txt",
            "metrics-sglang.txt",
            "metrics-llamacpp.txt",
            "llamacpp-metrics.txt",
            "metrics-trtllm.txt",
        ] {
            let text = fixture(name);
            let whole = parse_prometheus(&text);
            let d = MetricsDialect::detect(&whole).unwrap();
            let scraped = parse_where(&text, scraped);
            assert_eq!(d.read(&scraped), d.read(&whole), "{name}");
            assert!(scraped.samples.iter().all(|s| !s.name.ends_with("_bucket")));
        }
        let page = parse_where("a_bucket{le=\"1\"} 2\na 3\n", scraped);
        assert_eq!(page.samples.len(), 1);
    }

    #[test]
    fn vllm_fixture_sums_over_engines_and_reads_spec_positions() {
        let st = read_fixture("metrics-vllm.txt", MetricsDialect::Vllm);
        assert_eq!(st.running, Some(12.0), "two engines: 7 + 5");
        assert_eq!(st.waiting, Some(3.0));
        assert_eq!(st.generated_tokens, Some(1_234_567.0 + 765_433.0));
        let spec = st.spec.unwrap();
        assert_eq!(spec.drafts, 5000.0);
        assert_eq!(spec.draft_tokens, 15000.0);
        assert_eq!(spec.accepted_tokens, 9000.0);
        assert_eq!(spec.accepted_per_pos, vec![4000.0, 3000.0, 2000.0]);
        assert!((st.kv_usage.unwrap() - 0.83).abs() < 1e-9);
    }

    #[test]
    fn sglang_fixture() {
        let st = read_fixture("metrics-sglang.txt", MetricsDialect::Sglang);
        assert_eq!(st.running, Some(8.0));
        assert_eq!(st.waiting, Some(2.0));
        assert_eq!(st.generated_tokens, Some(7_557_572.0));
        assert_eq!(st.spec_accept_length_gauge, Some(2.4));
        assert!((st.kv_usage.unwrap() - 0.28).abs() < 1e-9);
    }

    /// The current llama-server page (server-task.cpp `to_metrics`): no KV gauge, and the
    /// spec-decode counters of a server with a draft model, per-position ones included.
    #[test]
    fn llamacpp_fixture() {
        let st = read_fixture("metrics-llamacpp.txt", MetricsDialect::Llamacpp);
        let d = MetricsDialect::Llamacpp;
        assert_eq!(d.metrics_path(), "/metrics");
        assert_eq!(st.running, Some(4.0));
        assert_eq!(st.waiting, Some(0.0));
        assert_eq!(st.generated_tokens, Some(18_432.0));
        assert_eq!(st.kv_usage, None, "current servers have no KV gauge");
        let spec = st.spec.unwrap();
        assert_eq!(
            (spec.drafts, spec.draft_tokens, spec.accepted_tokens),
            (7200.0, 21_600.0, 11_232.0)
        );
        assert_eq!(spec.accepted_per_pos, vec![5184.0, 3744.0, 2304.0]);
        assert!(
            spec.per_request,
            "added when a request ends (on_prediction)"
        );
        assert_eq!(d.counter_moves(), CounterMoves::PerRequest);
    }

    /// Recorded from a real `llama-server` (llama.cpp 11434, `--metrics -np 4`, 6 requests in
    /// flight): newer builds have no `kv_cache_usage_ratio`, and `tokens_predicted_total` only
    /// moves when a request finishes, so it is validation data at best. No draft model: the
    /// spec-decode counters are listed at 0.
    #[test]
    fn recorded_llama_server_page() {
        let st = read_fixture("llamacpp-metrics.txt", MetricsDialect::Llamacpp);
        assert_eq!(st.running, Some(4.0));
        assert_eq!(st.waiting, Some(2.0));
        assert_eq!(st.generated_tokens, Some(4624.0));
        assert_eq!(st.kv_usage, None);
        let spec = st.spec.unwrap();
        assert_eq!((spec.drafts, spec.draft_tokens), (0.0, 0.0));
        assert!(spec.accepted_per_pos.is_empty());
    }

    /// TensorRT-LLM's Prometheus page (collector.py names, `trtllm_` prefix), served at
    /// `/prometheus/metrics`; its generation counter moves per finished request.
    #[test]
    fn trtllm_fixture() {
        let st = read_fixture("metrics-trtllm.txt", MetricsDialect::Trtllm);
        let d = MetricsDialect::Trtllm;
        assert_eq!(d.name(), "trtllm");
        assert_eq!(d.metrics_path(), "/prometheus/metrics");
        assert_eq!(d.generation_counter(), "trtllm_generation_tokens_total");
        assert_eq!(d.counter_moves(), CounterMoves::PerRequest);
        assert!(!d.has_in_flight_tokens());
        assert_eq!(st.running, Some(16.0));
        assert_eq!(st.waiting, Some(4.0));
        assert_eq!(st.generated_tokens, Some(212_480.0));
        assert!((st.kv_usage.unwrap() - 0.4375).abs() < 1e-9);
        let spec = st.spec.unwrap();
        assert_eq!(
            spec.drafts, 0.0,
            "TensorRT-LLM counts no verification steps"
        );
        assert_eq!(
            (spec.draft_tokens, spec.accepted_tokens),
            (276_000.0, 120_750.0)
        );
        assert!(!spec.per_request);
        assert_eq!(st.spec_accept_length_gauge, Some(2.31));
    }

    /// The preemption counters by their names in the engines' sources (vLLM
    /// `vllm:num_preemptions` → `_total` on the wire; SGLang's counter, not its reset gauge).
    #[test]
    fn preemption_counters_are_read_per_dialect() {
        let vllm = parse_prometheus(
            "vllm:num_requests_running{engine=\"0\"} 4\nvllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 7.0\nvllm:num_preemptions_total{engine=\"1\",model_name=\"m\"} 2.0\n",
        );
        assert_eq!(MetricsDialect::Vllm.read(&vllm).preemptions, Some(9.0));
        let sglang = parse_prometheus(
            "sglang:num_running_reqs 8\nsglang:num_retracted_reqs 3\nsglang:num_retracted_requests_total 11\n",
        );
        assert_eq!(MetricsDialect::Sglang.read(&sglang).preemptions, Some(11.0));
        let old_sglang =
            parse_prometheus("sglang:num_running_reqs 8\nsglang:num_retracted_reqs 3\n");
        assert_eq!(MetricsDialect::Sglang.read(&old_sglang).preemptions, None);
        let page = parse_prometheus(&fixture("metrics-llamacpp.txt"));
        assert_eq!(MetricsDialect::Llamacpp.read(&page).preemptions, None);
    }

    /// The prompt and prefill-time counters of every dialect, read from the recorded pages
    /// (histogram `_sum`s survive a scrape; only buckets are skipped).
    #[test]
    fn prompt_and_prefill_time_counters_are_read_per_dialect() {
        for (name, prompt, seconds) in [
            ("metrics-vllm.txt", Some(9_830_400.0 + 4_200_000.0), None),
            (
                "metrics-sglang.txt",
                Some(8_128_902.0),
                Some(2_351_897.947_411_775_6),
            ),
            ("metrics-llamacpp.txt", Some(65_536.0), Some(12.844)),
            ("metrics-trtllm.txt", Some(1_700_350.0), Some(30.71)),
        ] {
            let text = fixture(name);
            let d = MetricsDialect::detect(&parse_prometheus(&text)).unwrap();
            let st = d.read(&parse_where(&text, scraped));
            assert_eq!(st.prompt_tokens, prompt, "{name}");
            match seconds {
                Some(s) => assert!((st.prefill_seconds.unwrap() - s).abs() < 1e-6, "{name}"),
                None => assert_eq!(st.prefill_seconds, None, "{name}: no prefill histogram"),
            }
        }
        assert!(MetricsDialect::Llamacpp.prompt_counter_excludes_cached());
        assert!(!MetricsDialect::Vllm.prompt_counter_excludes_cached());
        let vllm = parse_prometheus(
            "vllm:prompt_tokens_total{model_name=\"m\"} 100.0\nvllm:request_prefill_time_seconds_sum{model_name=\"m\"} 0.5\nvllm:request_prefill_time_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 2.0\n",
        );
        let st = MetricsDialect::Vllm.read(&vllm);
        assert_eq!(
            (st.prompt_tokens, st.prefill_seconds),
            (Some(100.0), Some(0.5))
        );
    }

    #[test]
    fn unknown_pages_have_no_dialect() {
        let page = parse_prometheus("process_cpu_seconds_total 12.5\n");
        assert_eq!(MetricsDialect::detect(&page), None);
    }
}
