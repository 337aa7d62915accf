//! Reader of guidellm benchmark reports (`guidellm run --output kind=json`, schema of 0.8):
//! `benchmarks[]`, each with `metrics.*.{successful,errored,incomplete,total}` distributions.
//! A benchmark at a fixed concurrency (`concurrent` with N streams, or `synchronous` = 1)
//! becomes one cell; rate-driven benchmarks (`constant`, `poisson`, `throughput`, `async`) have
//! no fixed concurrency and are left out with a note.
//!
//! Comparable with a sustained-decode cell (same meaning, not the same window):
//! - `aggregate_tps` = `output_tokens_per_second.successful.mean` (output tokens of the
//!   successful requests over the benchmark's duration, warm-up/cool-down as configured);
//! - `ttft_s` from `time_to_first_token_ms.successful` (includes queueing, like ours);
//! - `itl_s` from `inter_token_latency_ms.successful`.
//!
//! Not comparable, left out: `requests_per_second`, `request_latency` (depend on output
//! length), `request_concurrency` (client-side, not the engine's running requests),
//! `time_per_output_token_ms` (per-token, not the 1/ITL per-stream distribution), and the
//! `incomplete`/`errored` distributions (only their counts are kept: `errors`, the reason).
//! `samples` stay empty (no sub-windows): the noise model uses the between-run history.
//!
//! The burst layer (`RunResults.burst`): a report with exactly one rate-driven benchmark
//! (`poisson`, `constant`, `throughput`, `async`: a finite request set at a rate) keeps it
//! there, beside the cells: `request_totals` (successful = completed, `incomplete` = ended
//! early, `errored`), `requests_per_second`, `output_tokens_per_second`, `tokens_per_second`
//! (total), TTFT, ITL, `time_per_output_token_ms` (guidellm's TPOT) and `request_latency` (E2EL)
//! of the successful requests. Several rate-driven benchmarks are several bursts: none is kept.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::{ImportError, imported_run, percentile_group};
use infergate_schema::results::{
    BurstRecord, BurstSettings, CellResult, CellStatus, Percentiles, RunResults,
};

/// The parts of a guidellm report the import reads.
#[derive(Debug, Deserialize)]
pub(crate) struct GuidellmReport {
    pub(crate) metadata: Option<ReportMetadata>,
    pub(crate) config: Option<ReportConfig>,
    pub(crate) benchmarks: Vec<Benchmark>,
}

/// `metadata`: versions.
#[derive(Debug, Deserialize)]
pub(crate) struct ReportMetadata {
    pub(crate) guidellm_version: Option<String>,
}

/// `config`: the run's labels and requested data.
#[derive(Debug, Deserialize)]
pub(crate) struct ReportConfig {
    pub(crate) metadata: Option<ConfigMetadata>,
    pub(crate) spec: Option<ConfigSpec>,
}

/// `config.metadata`: `--label key=value` pairs.
#[derive(Debug, Deserialize)]
pub(crate) struct ConfigMetadata {
    #[serde(default)]
    pub(crate) labels: BTreeMap<String, String>,
}

/// `config.spec`: only the data sources are read.
#[derive(Debug, Deserialize)]
pub(crate) struct ConfigSpec {
    #[serde(default)]
    pub(crate) data: Vec<DataSource>,
}

/// One `--data` source.
#[derive(Debug, Deserialize)]
pub(crate) struct DataSource {
    pub(crate) kind: String,
    pub(crate) prompt_tokens: Option<u64>,
}

/// One `benchmarks[]` entry.
#[derive(Debug, Deserialize)]
pub(crate) struct Benchmark {
    pub(crate) config: BenchmarkConfig,
    pub(crate) start_time: f64,
    pub(crate) end_time: f64,
    pub(crate) duration: f64,
    pub(crate) metrics: Metrics,
}

/// `benchmarks[].config`.
#[derive(Debug, Deserialize)]
pub(crate) struct BenchmarkConfig {
    pub(crate) strategy: Strategy,
    pub(crate) backend: Option<Backend>,
}

/// `benchmarks[].config.strategy`.
#[derive(Debug, Deserialize)]
pub(crate) struct Strategy {
    pub(crate) type_: String,
    pub(crate) streams: Option<u32>,
    /// Requests per second of a `poisson` or `constant` benchmark.
    pub(crate) rate: Option<f64>,
}

/// `benchmarks[].config.backend`.
#[derive(Debug, Deserialize)]
pub(crate) struct Backend {
    pub(crate) model: Option<String>,
    pub(crate) target: Option<String>,
}

/// `benchmarks[].metrics`: the figures read.
#[derive(Debug, Deserialize)]
pub(crate) struct Metrics {
    pub(crate) request_totals: Totals,
    pub(crate) output_tokens_per_second: ByStatus,
    pub(crate) time_to_first_token_ms: ByStatus,
    pub(crate) inter_token_latency_ms: ByStatus,
    pub(crate) prompt_token_count: ByStatus,
    pub(crate) output_token_count: ByStatus,
    /// The burst layer's figures (read only for a rate-driven benchmark).
    pub(crate) requests_per_second: Option<ByStatus>,
    pub(crate) tokens_per_second: Option<ByStatus>,
    pub(crate) time_per_output_token_ms: Option<ByStatus>,
    /// Seconds, not milliseconds.
    pub(crate) request_latency: Option<ByStatus>,
}

/// Request counts by status.
#[derive(Debug, Deserialize)]
pub(crate) struct Totals {
    pub(crate) successful: u64,
    pub(crate) errored: u64,
    pub(crate) incomplete: u64,
}

/// A metric split by request status; only `successful` is mapped.
#[derive(Debug, Deserialize)]
pub(crate) struct ByStatus {
    pub(crate) successful: Distribution,
}

/// One distribution.
#[derive(Debug, Deserialize)]
pub(crate) struct Distribution {
    pub(crate) mean: f64,
    pub(crate) median: f64,
    pub(crate) count: u64,
    pub(crate) total_sum: f64,
    pub(crate) percentiles: Quantiles,
}

/// The percentiles read from a distribution.
#[derive(Debug, Deserialize)]
pub(crate) struct Quantiles {
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
}

/// Whether a parsed JSON document looks like a guidellm report.
pub(crate) fn looks_like(doc: &Value) -> bool {
    let versioned = doc
        .get("metadata")
        .and_then(|m| m.get("guidellm_version"))
        .is_some();
    let generative = doc
        .get("benchmarks")
        .and_then(Value::as_array)
        .and_then(|b| b.first())
        .and_then(|b| b.get("type_"))
        .and_then(Value::as_str)
        == Some("generative_benchmark");
    versioned || generative
}

/// Converts a report into one run, a cell per fixed-concurrency benchmark.
pub(crate) fn convert(
    report: &GuidellmReport,
    text: &str,
    file: &str,
) -> Result<RunResults, ImportError> {
    let version = report
        .metadata
        .as_ref()
        .and_then(|m| m.guidellm_version.clone())
        .unwrap_or_else(|| "unknown".into());
    let labels_in = report
        .config
        .as_ref()
        .and_then(|c| c.metadata.as_ref())
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    let mut found = CellsFound {
        file,
        requested_prompt: requested_prompt(report),
        unmapped: Vec::new(),
        cells: Vec::new(),
        model: None,
        url: String::new(),
        times: Vec::new(),
    };
    let burst = found.burst_layer(report);
    for (i, b) in report.benchmarks.iter().enumerate() {
        found.add_benchmark(i, b)?;
    }
    let model = found.checked_model()?;
    found.note_left_out();
    let CellsFound {
        mut unmapped,
        cells,
        url,
        times,
        ..
    } = found;
    let engine = super::engine_or_unknown(
        labels_in.get("engine").map(String::as_str),
        "run guidellm with --label engine=NAME",
        &mut unmapped,
    );
    let mut labels: BTreeMap<String, String> = labels_in
        .into_iter()
        .map(|(k, v)| (format!("guidellm.{k}"), v))
        .collect();
    labels.insert("guidellm.version".into(), version.clone());
    let epoch = |s: f64| {
        DateTime::<Utc>::from_timestamp_micros((s * 1e6).round() as i64).unwrap_or_default()
    };
    let started = epoch(times.iter().map(|t| t.0).fold(f64::INFINITY, f64::min));
    let finished = epoch(times.iter().map(|t| t.1).fold(f64::NEG_INFINITY, f64::max));
    let mut run = imported_run(super::ImportedRun {
        tool: format!("guidellm {version}"),
        tag: "guidellm",
        file,
        text,
        engine,
        model,
        url,
        started,
        finished,
        cells,
        unmapped,
        labels,
    });
    run.burst = burst;
    Ok(run)
}

/// The requested prompt length names the cell when there is one synthetic source: measured
/// means drift with the number of requests a time-limited run completes.
fn requested_prompt(report: &GuidellmReport) -> Option<u64> {
    match report.config.as_ref().and_then(|c| c.spec.as_ref()) {
        Some(spec) if spec.data.len() == 1 && spec.data[0].kind == "synthetic_text" => {
            spec.data[0].prompt_tokens
        }
        _ => None,
    }
}

/// What [`convert`] gathers benchmark by benchmark: each benchmark checks the model against
/// the earlier ones and its cell against theirs, and the notes keep the order they arose in.
struct CellsFound<'a> {
    file: &'a str,
    requested_prompt: Option<u64>,
    unmapped: Vec<String>,
    cells: Vec<CellResult>,
    model: Option<String>,
    url: String,
    /// Each cell's benchmark's (start, end), Unix seconds.
    times: Vec<(f64, f64)>,
}

impl CellsFound<'_> {
    /// An error naming `field` of this report.
    fn err(&self, field: String, message: String) -> ImportError {
        ImportError::Field {
            file: self.file.to_string(),
            field,
            message,
        }
    }

    /// The burst layer: the report's one rate-driven benchmark, none (with a note) when several.
    fn burst_layer(&mut self, report: &GuidellmReport) -> Option<BurstRecord> {
        let rate_driven: Vec<&Benchmark> = report
            .benchmarks
            .iter()
            .filter(|b| {
                !matches!(
                    b.config.strategy.type_.as_str(),
                    "synchronous" | "concurrent"
                )
            })
            .collect();
        match rate_driven.as_slice() {
            [one] => Some(burst_of(one)),
            [] => None,
            _ => {
                self.unmapped.push(
                    "burst layer: several rate-driven benchmarks are several bursts, none is the run's; left out"
                        .into(),
                );
                None
            }
        }
    }

    /// Adds benchmark `i` as a cell, or a note when it is rate-driven.
    fn add_benchmark(&mut self, i: usize, b: &Benchmark) -> Result<(), ImportError> {
        let at = |f: &str| format!("benchmarks[{i}].{f}");
        let Some(concurrency) = self.concurrency_of(i, b)? else {
            return Ok(());
        };
        self.take_backend(i, b)?;
        let m = &b.metrics;
        let tps = m.output_tokens_per_second.successful.mean;
        for (field, v) in [
            ("metrics.output_tokens_per_second.successful.mean", tps),
            ("duration", b.duration),
        ] {
            super::non_negative(field, v).map_err(|(f, m)| self.err(at(&f), m))?;
        }
        if !(b.start_time.is_finite() && b.end_time.is_finite()) {
            return Err(self.err(at("start_time"), "must be a Unix time in seconds".into()));
        }
        let prompt = &m.prompt_token_count.successful;
        let context = self
            .requested_prompt
            .unwrap_or_else(|| prompt.median.max(0.0).round() as u64);
        let cell = cell_of(b, concurrency, context);
        if let Some(j) = self.cells.iter().position(|c| c.coord() == cell.coord()) {
            return Err(self.err(
                at("config.strategy"),
                format!(
                    "cell C={concurrency} / {context} tokens repeats benchmarks[{j}]: one \
                     benchmark per concurrency"
                ),
            ));
        }
        self.times.push((b.start_time, b.end_time));
        self.cells.push(cell);
        Ok(())
    }

    /// Benchmark `i`'s fixed concurrency; `None` (with a note) for a rate-driven one.
    fn concurrency_of(&mut self, i: usize, b: &Benchmark) -> Result<Option<u32>, ImportError> {
        match (b.config.strategy.type_.as_str(), b.config.strategy.streams) {
            ("synchronous", _) => Ok(Some(1)),
            ("concurrent", Some(n)) if n > 0 => Ok(Some(n)),
            ("concurrent", _) => Err(self.err(
                format!("benchmarks[{i}].config.strategy.streams"),
                "missing or 0 for a concurrent benchmark".into(),
            )),
            (other, _) => {
                self.unmapped.push(format!(
                    "benchmarks[{i}]: strategy `{other}` is rate-driven (no fixed concurrency); \
                     left out (use --profile kind=concurrent for gate cells)"
                ));
                Ok(None)
            }
        }
    }

    /// Takes the model and URL from benchmark `i`'s backend: one model per report, the first
    /// URL found.
    fn take_backend(&mut self, i: usize, b: &Benchmark) -> Result<(), ImportError> {
        if let Some(backend) = &b.config.backend {
            if let Some(m) = backend.model.as_deref().filter(|m| !m.is_empty()) {
                match &self.model {
                    None => self.model = Some(m.to_string()),
                    Some(first) if first != m => {
                        return Err(self.err(
                            format!("benchmarks[{i}].config.backend.model"),
                            format!("`{m}` differs from `{first}`: one report holds one model"),
                        ));
                    }
                    Some(_) => {}
                }
            }
            if self.url.is_empty() {
                self.url = backend.target.clone().unwrap_or_default();
            }
        }
        Ok(())
    }

    /// The model, once the report is known to hold a cell.
    fn checked_model(&mut self) -> Result<String, ImportError> {
        if self.cells.is_empty() {
            return Err(self.err(
                "benchmarks".into(),
                "no benchmark at a fixed concurrency (strategy `concurrent` or `synchronous`)"
                    .into(),
            ));
        }
        self.model.take().ok_or_else(|| {
            self.err(
                "benchmarks[0].config.backend.model".into(),
                "missing or empty: the report does not say which model was measured".into(),
            )
        })
    }

    /// The notes on how cells are named and what every guidellm report leaves out.
    fn note_left_out(&mut self) {
        if self.requested_prompt.is_none() {
            self.unmapped.push(
                "context: no single synthetic_text source; cells named by the measured median \
                 prompt length"
                    .into(),
            );
        }
        self.unmapped.push(
            "left out (not comparable with a sustained-decode cell): requests_per_second, \
             request_latency, request_concurrency (client-side), time_per_output_token_ms, the \
             errored/incomplete distributions; not recorded: hardware, engine version, sub-window \
             samples"
                .into(),
        );
    }
}

/// A fixed-concurrency benchmark as a cell: its successful requests' figures, the others only
/// counted.
fn cell_of(b: &Benchmark, concurrency: u32, context: u64) -> CellResult {
    let m = &b.metrics;
    let prompt = &m.prompt_token_count.successful;
    let totals = &m.request_totals;
    let (status, reason) = if totals.successful == 0 {
        (CellStatus::Error, Some("no request succeeded".to_string()))
    } else if totals.errored + totals.incomplete > 0 {
        (
            CellStatus::Ok,
            Some(format!(
                "{} errored, {} incomplete of {} requests",
                totals.errored,
                totals.incomplete,
                totals.successful + totals.errored + totals.incomplete
            )),
        )
    } else {
        (CellStatus::Ok, None)
    };
    CellResult {
        aggregate_tps: m.output_tokens_per_second.successful.mean,
        ttft_s: seconds(&m.time_to_first_token_ms.successful),
        itl_s: seconds(&m.inter_token_latency_ms.successful),
        output_tokens: m.output_token_count.successful.total_sum.max(0.0).round() as u64,
        measured_s: b.duration,
        prompt_tokens: (prompt.mean.is_finite() && prompt.mean > 0.0)
            .then(|| prompt.mean.round() as u64),
        errors: u32::try_from(totals.errored).unwrap_or(u32::MAX),
        ..super::imported_cell(concurrency, context, status, reason)
    }
}

/// A rate-driven benchmark as the burst layer: every request accounted for by its status.
fn burst_of(b: &Benchmark) -> BurstRecord {
    let m = &b.metrics;
    let t = &m.request_totals;
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    let sent = t.successful + t.errored + t.incomplete;
    let mean = |d: &Option<ByStatus>| {
        d.as_ref()
            .map(|d| d.successful.mean)
            .filter(|v| v.is_finite())
    };
    let prompt = &m.prompt_token_count.successful;
    let output = &m.output_token_count.successful;
    let total_sum = |d: &Distribution| d.total_sum.max(0.0).round() as u64;
    let (prompt_tokens, output_tokens) = (total_sum(prompt), total_sum(output));
    let per_second = |n: f64| {
        if b.duration > 0.0 {
            n / b.duration
        } else {
            0.0
        }
    };
    let per_request = |d: &Distribution| d.mean.max(0.0).round() as u64;
    BurstRecord {
        settings: BurstSettings {
            requests: clamp(sent),
            request_rate: b.config.strategy.rate.filter(|r| r.is_finite() && *r > 0.0),
            seed: 0,
            prompt_tokens: per_request(prompt),
            max_tokens: clamp(per_request(output)),
            slo: Default::default(),
        },
        sent: clamp(sent),
        completed: clamp(t.successful),
        incomplete: clamp(t.incomplete),
        errors: clamp(t.errored),
        duration_s: b.duration,
        prompt_tokens,
        output_tokens,
        request_throughput: mean(&m.requests_per_second)
            .unwrap_or_else(|| per_second(t.successful as f64)),
        output_tps: m.output_tokens_per_second.successful.mean,
        total_tps: mean(&m.tokens_per_second)
            .unwrap_or_else(|| per_second((prompt_tokens + output_tokens) as f64)),
        ttft_s: seconds(&m.time_to_first_token_ms.successful),
        tpot_s: m
            .time_per_output_token_ms
            .as_ref()
            .and_then(|d| seconds(&d.successful)),
        itl_s: seconds(&m.inter_token_latency_ms.successful),
        e2el_s: m
            .request_latency
            .as_ref()
            .and_then(|d| scaled(&d.successful, 1.0)),
        good: None,
        goodput: None,
        first_problem: (t.errored + t.incomplete > 0)
            .then(|| format!("{} errored, {} incomplete", t.errored, t.incomplete)),
    }
}

/// A millisecond distribution as seconds, `None` when empty or all zero.
fn seconds(d: &Distribution) -> Option<Percentiles> {
    scaled(d, 1000.0)
}

/// A distribution's figures divided by `divisor`, `None` when empty or all zero.
fn scaled(d: &Distribution, divisor: f64) -> Option<Percentiles> {
    let s = |v: f64| Some(v / divisor);
    percentile_group(
        s(d.mean),
        s(d.percentiles.p50),
        s(d.percentiles.p90),
        s(d.percentiles.p99),
        d.count,
    )
}

#[cfg(test)]
mod tests {
    use crate::import::tests::assert_parse_err;
    use crate::import::{parse_results, unmapped_notes};
    use infergate_schema::asserts::assert_contains;
    use infergate_schema::results::{CellStatus, ResultsSource, RunStatus};

    /// Recorded from guidellm 0.8.1 against `infergate sim` (see docs/interop.md).
    const SIM: &str = include_str!("../../../../tests/fixtures/guidellm-0.8-sim.json");

    /// The number at `v` in the report.
    #[track_caller]
    fn num(v: &serde_json::Value) -> f64 {
        v.as_f64().unwrap()
    }

    #[test]
    fn recorded_sim_report_maps_one_cell_per_concurrency() {
        let run = parse_results(SIM, "g.json").unwrap().remove(0);
        let coords: Vec<_> = run.cells.iter().map(|c| c.coord()).collect();
        assert_eq!(coords, [(1, 64), (2, 64), (4, 64)]);
        assert_eq!(run.profile.engine, "infergate-sim");
        assert_eq!(run.profile.model, "sim-test");
        assert_eq!(run.engine.url, "http://127.0.0.1:18321");
        assert!(
            matches!(&run.source, ResultsSource::Import { tool, .. } if tool == "guidellm 0.8.1")
        );
        let doc: serde_json::Value = serde_json::from_str(SIM).unwrap();
        for (i, c) in run.cells.iter().enumerate() {
            let m = &doc["benchmarks"][i]["metrics"];
            let tps = num(&m["output_tokens_per_second"]["successful"]["mean"]);
            assert_eq!(c.aggregate_tps, tps);
            let ttft = c.ttft_s.unwrap();
            let t = &m["time_to_first_token_ms"]["successful"];
            assert_eq!(ttft.p90, num(&t["percentiles"]["p90"]) / 1000.0);
            assert_eq!(ttft.count, t["count"].as_u64().unwrap());
            assert!(c.itl_s.is_some());
            let ok = m["request_totals"]["successful"].as_u64().unwrap();
            assert_eq!(
                c.output_tokens,
                ok * 32,
                "32 output tokens per successful request"
            );
            assert!(c.samples.is_empty());
        }
        assert!(
            run.cells[0].aggregate_tps < run.cells[2].aggregate_tps,
            "four streams decode more than one"
        );
        let notes = unmapped_notes(&run);
        assert!(notes.iter().any(|n| n.starts_with("left out")), "{notes:?}");
    }

    #[test]
    fn a_benchmark_without_a_successful_request_makes_the_run_partial() {
        let run = parse_results(SIM, "g.json").unwrap().remove(0);
        assert_eq!(run.status, RunStatus::Complete);
        let mut doc: serde_json::Value = serde_json::from_str(SIM).unwrap();
        let totals = &mut doc["benchmarks"][2]["metrics"]["request_totals"];
        totals["errored"] = totals["successful"].clone();
        totals["successful"] = 0.into();
        let run = parse_results(&doc.to_string(), "g.json").unwrap().remove(0);
        assert_eq!(run.cells[2].status, CellStatus::Error);
        assert_eq!(run.status, RunStatus::Partial);
        let why = run.status_reason.as_deref().unwrap();
        assert_contains(why, "no request succeeded");
    }

    #[test]
    fn rate_driven_benchmarks_are_left_out_and_bad_fields_named() {
        let mut doc: serde_json::Value = serde_json::from_str(SIM).unwrap();
        doc["benchmarks"][1]["config"]["strategy"]["type_"] = "constant".into();
        let run = parse_results(&doc.to_string(), "g.json").unwrap().remove(0);
        assert_eq!(run.cells.len(), 2);
        assert!(
            unmapped_notes(&run)
                .iter()
                .any(|n| n.contains("`constant` is rate-driven"))
        );
        // The one rate-driven benchmark is the run's burst layer, every request accounted for.
        let b = run.burst.as_ref().expect("burst layer");
        let m = &doc["benchmarks"][1]["metrics"];
        let totals = &m["request_totals"];
        assert_eq!(
            u64::from(b.completed),
            totals["successful"].as_u64().unwrap()
        );
        assert_eq!(
            u64::from(b.sent),
            ["successful", "errored", "incomplete"]
                .iter()
                .map(|k| totals[k].as_u64().unwrap())
                .sum::<u64>()
        );
        let tps = num(&m["tokens_per_second"]["successful"]["mean"]);
        assert_eq!(b.total_tps, tps);
        let p90 = num(&m["request_latency"]["successful"]["percentiles"]["p90"]);
        assert_eq!(b.e2el_s.unwrap().p90, p90);
        assert!(b.ttft_s.is_some() && b.tpot_s.is_some());

        let mut wrong = doc.clone();
        wrong["benchmarks"][2]["metrics"]["output_tokens_per_second"]["successful"]["mean"] =
            "fast".into();
        let prefix = "g.json: benchmarks[2].metrics.output_tokens_per_second.successful.mean: invalid type: string";
        assert_parse_err(&wrong.to_string(), "g.json", prefix);
        let mut gone = doc.clone();
        gone["benchmarks"][0]["metrics"]
            .as_object_mut()
            .unwrap()
            .remove("inter_token_latency_ms");
        let prefix = "g.json: benchmarks[0].metrics: missing field `inter_token_latency_ms`";
        assert_parse_err(&gone.to_string(), "g.json", prefix);
    }
}
