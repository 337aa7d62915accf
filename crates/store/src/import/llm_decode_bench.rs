//! Reader of llm-decode-bench JSON (the seed tool, 0.4.x): maps its sustained-decode `results[]`
//! onto [`CellResult`]s so existing measurement history can serve as baselines or candidates.
//!
//! Mapping decisions:
//! - `samples` stay **empty**: the seed measures one window per cell and has no sub-window
//!   throughput samples. Its `request_samples` are per-request speeds, a different quantity
//!   (per-user tok/s), so they are not passed off as sub-window samples; statistics use the
//!   between-run history instead. `matrix.sub_windows` is 0 to say so.
//! - `capacity_limited` or `warmup_timed_out` → `capacity_limited` with `timeout_reason`.
//! - Percentile groups (`ttft_*`, `inter_token_latency_*`, `output_tps_per_user_*`) become
//!   [`Percentiles`] only when all four figures are present and not all zero (the seed writes
//!   zeros for what it did not measure); otherwise the metric is skipped.
//! - `server_spec_accept_length` > 0 gives [`SpecDecodeStats`] (steps/s = aggregate / length);
//!   the seed has no draft counters, so those counts are 0. An acceptance rate without a length
//!   cannot give steps/s and is left out.
//! - Timestamps without a zone (`metadata.timestamp`) are read as UTC; `event_log` lines
//!   (`HH:MM:SS text`) get the date of `metadata.timestamp`, stepping back a day across
//!   midnight, since the timestamp is written when the run ends.
//! - Hardware comes from `startup_diagnostics.nvidia_smi_query.stdout` (`index, name, driver,
//!   ...` per GPU); without it the profile is `cpu-unknown`.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::ImportError;
use infergate_schema::results::{
    CellResult, CellStatus, CellTelemetry, Event, EventKind, HardwareFingerprint, MatrixSpec,
    ProfileKey, RunResults, SpecDecodeStats, TelemetrySummary,
};

/// The parts of an llm-decode-bench file the import reads; everything else is ignored.
#[derive(Debug, Deserialize)]
pub(crate) struct SeedFile {
    pub(crate) metadata: SeedMetadata,
    pub(crate) startup_diagnostics: Option<SeedDiagnostics>,
    pub(crate) hardware_run_summary: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    pub(crate) event_log: Vec<String>,
    pub(crate) results: Vec<SeedCell>,
}

/// `metadata`: the run's settings.
#[derive(Debug, Deserialize)]
pub(crate) struct SeedMetadata {
    pub(crate) version: String,
    pub(crate) engine: String,
    pub(crate) model: String,
    pub(crate) timestamp: String,
    pub(crate) server: Option<String>,
    #[serde(default)]
    pub(crate) concurrency_levels: Vec<u32>,
    #[serde(default)]
    pub(crate) context_lengths: Vec<u64>,
    pub(crate) duration_per_test: Option<f64>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) unique_context_percent: Option<f64>,
    pub(crate) decode_warmup_seconds: Option<f64>,
    pub(crate) metrics_available: Option<bool>,
}

/// `startup_diagnostics`: only the GPU query is read.
#[derive(Debug, Deserialize)]
pub(crate) struct SeedDiagnostics {
    pub(crate) nvidia_smi_query: Option<SeedCommand>,
}

/// A command the seed ran and its output.
#[derive(Debug, Deserialize)]
pub(crate) struct SeedCommand {
    pub(crate) returncode: Option<i64>,
    #[serde(default)]
    pub(crate) stdout: String,
}

/// One `results[]` entry (a sustained-decode cell).
#[derive(Debug, Deserialize)]
pub(crate) struct SeedCell {
    pub(crate) concurrency: u32,
    pub(crate) context_tokens: u64,
    pub(crate) aggregate_tps: f64,
    pub(crate) measurement_seconds: Option<f64>,
    pub(crate) client_output_tokens: Option<u64>,
    pub(crate) total_tokens: Option<u64>,
    pub(crate) ttft_avg: Option<f64>,
    pub(crate) ttft_p50: Option<f64>,
    pub(crate) ttft_p90: Option<f64>,
    pub(crate) ttft_p99: Option<f64>,
    pub(crate) inter_token_latency_avg: Option<f64>,
    pub(crate) inter_token_latency_p50: Option<f64>,
    pub(crate) inter_token_latency_p90: Option<f64>,
    pub(crate) inter_token_latency_p99: Option<f64>,
    pub(crate) output_tps_per_user_avg: Option<f64>,
    pub(crate) output_tps_per_user_p50: Option<f64>,
    pub(crate) output_tps_per_user_p90: Option<f64>,
    pub(crate) output_tps_per_user_p99: Option<f64>,
    pub(crate) input_seq_len_avg: Option<f64>,
    pub(crate) request_count: Option<u64>,
    pub(crate) num_errors: Option<u32>,
    pub(crate) server_gen_throughput: Option<f64>,
    pub(crate) server_spec_accept_rate: Option<f64>,
    pub(crate) server_spec_accept_length: Option<f64>,
    pub(crate) effective_concurrency: Option<f64>,
    pub(crate) avg_queue_reqs: Option<f64>,
    pub(crate) warmup_timed_out: Option<bool>,
    pub(crate) warmup_duration: Option<f64>,
    pub(crate) ready_reason: Option<String>,
    pub(crate) timeout_reason: Option<String>,
    pub(crate) capacity_limited: Option<bool>,
    pub(crate) error: Option<String>,
    pub(crate) skipped: Option<bool>,
    pub(crate) hardware_summary: Option<BTreeMap<String, Value>>,
}

/// Converts a parsed seed file into one [`RunResults`]; `text` (the file's bytes) makes the run
/// id stable, so importing one file twice gives one baseline entry, not two.
pub(crate) fn convert(seed: &SeedFile, text: &str, file: &str) -> Result<RunResults, ImportError> {
    let field_err = |field: String, message: String| ImportError::Field {
        file: file.to_string(),
        field,
        message,
    };
    let meta = &seed.metadata;
    let finished = parse_timestamp(&meta.timestamp).ok_or_else(|| {
        field_err(
            "metadata.timestamp".into(),
            format!(
                "`{}` is not an ISO-8601 date-time (e.g. 2026-07-16T20:37:47.855187)",
                meta.timestamp
            ),
        )
    })?;

    let mut cells = Vec::with_capacity(seed.results.len());
    for (i, cell) in seed.results.iter().enumerate() {
        cells.push(convert_cell(cell).map_err(|(f, m)| field_err(format!("results[{i}].{f}"), m))?);
    }

    let (levels, lengths) = (&meta.concurrency_levels, &meta.context_lengths);
    let matrix = MatrixSpec {
        model: meta.model.clone(),
        concurrency: super::sorted_unique(if levels.is_empty() {
            cells.iter().map(|c| c.concurrency).collect()
        } else {
            levels.clone()
        }),
        contexts: super::sorted_unique(if lengths.is_empty() {
            cells.iter().map(|c| c.context_tokens).collect()
        } else {
            lengths.clone()
        }),
        timing: infergate_schema::results::CellTiming {
            duration_s: meta.duration_per_test.unwrap_or(0.0),
            warmup_s: meta.decode_warmup_seconds.unwrap_or(0.0),
            max_tokens: meta.max_tokens.unwrap_or(0),
            unique_context_percent: meta.unique_context_percent.unwrap_or(100.0),
            sub_windows: 0,
            ..infergate_schema::results::CellTiming::DEFAULT
        },
        repetitions: 1,
    };
    let events = events_from(&seed.event_log, finished);
    let mut run = super::imported_run(super::ImportedRun {
        tool: format!("llm-decode-bench {}", meta.version),
        tag: "lldb",
        file,
        text,
        engine: meta.engine.clone(),
        model: meta.model.clone(),
        url: meta.server.clone().unwrap_or_default(),
        started: events.first().map(|e| e.at).unwrap_or(finished),
        finished,
        cells,
        unmapped: Vec::new(),
        labels: BTreeMap::new(),
    });
    // What the seed records and the load generators do not: the matrix it ran, the GPUs, the
    // engine version and metrics, its telemetry and its log.
    run.profile = ProfileKey::derive(hardware_from(seed), &meta.engine, &meta.model, &matrix);
    run.matrix = matrix;
    run.engine.version = engine_version(&seed.event_log);
    run.engine.metrics_flavor = (meta.metrics_available)
        .unwrap_or(false)
        .then(|| meta.engine.clone());
    run.telemetry = summary_from(seed.hardware_run_summary.as_ref(), &seed.event_log);
    run.events = events;
    Ok(run)
}

/// One seed cell → one [`CellResult`]; an error is (field, message).
fn convert_cell(c: &SeedCell) -> Result<CellResult, (String, String)> {
    super::non_negative("aggregate_tps", c.aggregate_tps)?;
    let capacity = c.capacity_limited.unwrap_or(false) || c.warmup_timed_out.unwrap_or(false);
    let nonempty = |s: &Option<String>| {
        s.as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(String::from)
    };
    let (status, reason) = if let Some(err) = nonempty(&c.error) {
        (CellStatus::Error, Some(err))
    } else if c.skipped.unwrap_or(false) {
        (
            CellStatus::Skipped,
            nonempty(&c.timeout_reason).or(Some("skipped by llm-decode-bench".into())),
        )
    } else if capacity {
        let why = nonempty(&c.timeout_reason).unwrap_or_else(|| "capacity-limited".into());
        let why = if c.warmup_timed_out.unwrap_or(false) {
            format!("warmup timed out: {why}")
        } else {
            why
        };
        (CellStatus::CapacityLimited, Some(why))
    } else {
        (CellStatus::Ok, nonempty(&c.ready_reason))
    };
    let count = c.request_count.unwrap_or(0);
    let group = |avg, p50, p90, p99| super::percentile_group(avg, p50, p90, p99, count);
    let measured_s = c.measurement_seconds.unwrap_or(0.0);
    let output_tokens = c
        .client_output_tokens
        .or(c.total_tokens)
        .unwrap_or_else(|| (c.aggregate_tps * measured_s).round() as u64);
    let spec_decode = match c.server_spec_accept_length {
        Some(len) if len.is_finite() && len > 0.0 => Some(SpecDecodeStats {
            drafts: 0,
            draft_tokens: 0,
            accepted_tokens: 0,
            acceptance_rate: c.server_spec_accept_rate.unwrap_or(0.0),
            accept_len: len,
            steps_per_s: c.aggregate_tps / len,
            per_position_acceptance: Vec::new(),
        }),
        _ => None,
    };
    Ok(CellResult {
        aggregate_tps: c.aggregate_tps,
        per_user_tps: group(
            c.output_tps_per_user_avg,
            c.output_tps_per_user_p50,
            c.output_tps_per_user_p90,
            c.output_tps_per_user_p99,
        ),
        ttft_s: group(c.ttft_avg, c.ttft_p50, c.ttft_p90, c.ttft_p99),
        itl_s: group(
            c.inter_token_latency_avg,
            c.inter_token_latency_p50,
            c.inter_token_latency_p90,
            c.inter_token_latency_p99,
        ),
        effective_concurrency: c.effective_concurrency,
        waiting_avg: c.avg_queue_reqs,
        output_tokens,
        measured_s,
        prompt_tokens: c
            .input_seq_len_avg
            .filter(|v| v.is_finite() && *v > 0.0)
            .map(|v| v.round() as u64),
        errors: c.num_errors.unwrap_or(0),
        server_tps: c
            .server_gen_throughput
            .filter(|v| v.is_finite() && *v > 0.0),
        ready_after_s: c.warmup_duration.filter(|v| v.is_finite() && *v >= 0.0),
        spec_decode,
        telemetry: c.hardware_summary.as_ref().and_then(cell_telemetry),
        ..super::imported_cell(c.concurrency, c.context_tokens, status, reason)
    })
}

/// `2026-07-16T20:37:47.855187` (naive → UTC) or an RFC 3339 date-time.
fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
    .map(|n| Utc.from_utc_datetime(&n))
}

/// GPU model, count and driver from the `nvidia-smi --query-gpu=index,name,driver_version,...`
/// output; `cpu`/unknown when absent or failed.
fn hardware_from(seed: &SeedFile) -> HardwareFingerprint {
    let unknown = super::unknown_hardware();
    let Some(query) = seed
        .startup_diagnostics
        .as_ref()
        .and_then(|d| d.nvidia_smi_query.as_ref())
    else {
        return unknown;
    };
    if query.returncode.unwrap_or(0) != 0 {
        return unknown;
    }
    let mut models: Vec<String> = Vec::new();
    let mut driver = None;
    let mut count = 0u32;
    for line in query.stdout.lines().filter(|l| !l.trim().is_empty()) {
        let parts: Vec<&str> = line.split(',').map(str::trim).collect();
        let Some(name) = parts.get(1).filter(|n| !n.is_empty()) else {
            continue;
        };
        count += 1;
        if !models.iter().any(|m| m == name) {
            models.push(name.to_string());
        }
        if driver.is_none() {
            driver = parts
                .get(2)
                .filter(|d| !d.is_empty())
                .map(|d| d.to_string());
        }
    }
    if count == 0 {
        return unknown;
    }
    HardwareFingerprint {
        kind: "gpu".into(),
        gpu_model: Some(models.join(" + ")),
        gpu_count: count,
        driver_version: driver,
        cpu_model: None,
    }
}

/// The engine version from the seed's `startup engine vLLM <version> models=[...]` line.
fn engine_version(log: &[String]) -> Option<String> {
    log.iter().find_map(|line| {
        let rest = line.split_once(" startup engine ")?.1;
        let mut words = rest.split_whitespace();
        let _family = words.next()?;
        words
            .next()
            .filter(|v| !v.starts_with("models="))
            .map(String::from)
    })
}

/// `HH:MM:SS text` lines → events dated from the run's end timestamp (see module docs).
fn events_from(log: &[String], finished: DateTime<Utc>) -> Vec<Event> {
    let parsed: Vec<(Option<NaiveTime>, &str)> = log
        .iter()
        .map(|line| match line.split_once(' ') {
            Some((t, rest)) => match NaiveTime::parse_from_str(t, "%H:%M:%S") {
                Ok(time) => (Some(time), rest),
                Err(_) => (None, line.as_str()),
            },
            None => (None, line.as_str()),
        })
        .collect();
    // Walk backwards from the end timestamp, stepping back a day whenever the clock jumps.
    let mut date: NaiveDate = finished.date_naive();
    let slack = Duration::minutes(5);
    let mut later: Option<NaiveTime> = None;
    let mut dated: Vec<DateTime<Utc>> = vec![finished; parsed.len()];
    for (i, (time, _)) in parsed.iter().enumerate().rev() {
        let Some(time) = *time else {
            dated[i] = later
                .map(|t| Utc.from_utc_datetime(&date.and_time(t)))
                .unwrap_or(finished);
            continue;
        };
        let candidate = Utc.from_utc_datetime(&date.and_time(time));
        let crossed = match later {
            None => candidate > finished + slack,
            Some(next) => time > next + slack,
        };
        if crossed && let Some(prev) = date.pred_opt() {
            date = prev;
        }
        dated[i] = Utc.from_utc_datetime(&date.and_time(time));
        later = Some(time);
    }
    parsed
        .iter()
        .zip(dated)
        .map(|((_, text), at)| {
            let (kind, concurrency, context_tokens) = classify(text);
            Event {
                at,
                kind,
                concurrency,
                context_tokens,
                process_group: None,
                message: text.to_string(),
            }
        })
        .collect()
}

/// Event kind and cell coordinate of one seed log text.
fn classify(text: &str) -> (EventKind, Option<u32>, Option<u64>) {
    const BY_PREFIX: [(&str, EventKind); 6] = [
        ("startup", EventKind::Startup),
        ("decode warmup", EventKind::Warmup),
        ("cell start", EventKind::CellStart),
        ("ready", EventKind::Ready),
        ("cell done", EventKind::CellDone),
        ("warmup timeout", EventKind::CapacityLimited),
    ];
    let kind = match BY_PREFIX.iter().find(|(p, _)| text.starts_with(p)) {
        Some((_, kind)) => kind.clone(),
        None if text.contains("error") => EventKind::CellError,
        None => EventKind::Notice,
    };
    let mut conc = None;
    let mut ctx = None;
    for word in text.split_whitespace() {
        if let Some(v) = word.strip_prefix("C=") {
            conc = v.parse().ok();
        } else if let Some(v) = word.strip_prefix("ctx=") {
            ctx = parse_context(v);
        }
    }
    // A coordinate is both numbers or neither.
    let (conc, ctx) = conc.zip(ctx).unzip();
    (kind, conc, ctx)
}

/// `128k` → 131072, `500` → 500.
fn parse_context(v: &str) -> Option<u64> {
    match v.strip_suffix(['k', 'K']) {
        Some(n) => n.parse::<u64>().ok().map(|n| n * 1024),
        None => v.parse().ok(),
    }
}

/// Looks a number up under any of a few names (the seed's telemetry keys vary by version).
fn number(map: &BTreeMap<String, Value>, names: &[&str]) -> Option<f64> {
    names
        .iter()
        .find_map(|n| map.get(*n).and_then(Value::as_f64))
        .filter(|v| v.is_finite())
}

/// A seed cell `hardware_summary` → [`CellTelemetry`]; `None` when it has no known figure.
fn cell_telemetry(map: &BTreeMap<String, Value>) -> Option<CellTelemetry> {
    let t = CellTelemetry {
        samples: number(map, &["samples", "sample_count"]).map_or(0, |v| v.max(0.0) as u32),
        gpu_util_avg: number(map, &["gpu_util_avg", "gpu_utilization_avg", "util_avg"]),
        mem_util_avg: number(map, &["mem_util_avg", "memory_utilization_avg"]),
        power_w_avg: number(map, &["power_w_avg", "power_avg_w", "avg_power_w"]),
        power_w_max: number(map, &["power_w_max", "power_max_w", "max_power_w"]),
        energy_j: number(map, &["energy_j", "energy_joules"]),
        joules_per_token: number(map, &["joules_per_token", "energy_per_token_j"]),
        temperature_c_max: number(map, &["temperature_c_max", "temp_c_max", "max_temp_c"]),
        sm_clock_mhz_avg: number(map, &["sm_clock_mhz_avg", "sm_clock_avg_mhz"]),
        mem_clock_mhz_avg: number(map, &["mem_clock_mhz_avg", "mem_clock_avg_mhz"]),
        vram_used_mib_max: number(map, &["vram_used_mib_max", "memory_used_mib_max"]),
        pcie_rx_kib_s_avg: number(map, &["pcie_rx_kib_s_avg"]),
        pcie_tx_kib_s_avg: number(map, &["pcie_tx_kib_s_avg"]),
        throttle_reasons: map
            .get("throttle_reasons")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let any = [
        t.gpu_util_avg,
        t.mem_util_avg,
        t.power_w_avg,
        t.power_w_max,
        t.energy_j,
        t.joules_per_token,
        t.temperature_c_max,
        t.sm_clock_mhz_avg,
        t.vram_used_mib_max,
    ]
    .iter()
    .any(Option::is_some);
    any.then_some(t)
}

/// The run-level telemetry summary, or why there is none.
fn summary_from(map: Option<&BTreeMap<String, Value>>, log: &[String]) -> Option<TelemetrySummary> {
    use infergate_telemetry::telemetry::unavailable;
    match map.filter(|m| !m.is_empty()) {
        Some(m) => {
            let mut s = unavailable("");
            s.status = "available".into();
            s.reason = None;
            s.energy_j = number(m, &["energy_j", "energy_joules"]);
            s.joules_per_token = number(m, &["joules_per_token", "energy_per_token_j"]);
            s.power_w_avg = number(m, &["power_w_avg", "power_avg_w", "avg_power_w"]);
            s.temperature_c_max = number(m, &["temperature_c_max", "temp_c_max", "max_temp_c"]);
            Some(s)
        }
        None if log.iter().any(|l| l.contains("hardware monitor disabled")) => Some(unavailable(
            "llm-decode-bench ran with its hardware monitor disabled",
        )),
        None => Some(unavailable(
            "not recorded in the imported llm-decode-bench file",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture::{SEED, seed_run};
    use crate::import::parse_results;
    use crate::import::tests::assert_parse_err;
    use infergate_schema::asserts::{assert_contains, assert_starts_with};
    use infergate_schema::results::{ResultsSource, RunStatus};

    #[test]
    fn seed_maps_profile_cells_and_events() {
        let run = seed_run();
        let hw = &run.profile.hardware;
        assert_eq!(hw.gpu_model.as_deref(), Some("NVIDIA GeForce RTX 5090"));
        assert_eq!(hw.driver_version.as_deref(), Some("595.79"));
        assert_eq!(hw.gpu_count, 1);
        assert_starts_with(
            &run.profile.key,
            "gpu-nvidia-geforce-rtx-5090x1__vllm__deepseek-v4-flash-dspark__m",
        );
        assert_eq!(run.matrix.concurrency, vec![1, 2, 4, 8, 12]);
        assert_eq!(run.matrix.contexts, vec![8192, 32768, 65536, 131072]);
        assert_eq!(run.matrix.timing.max_tokens, 2048);
        assert_eq!(run.cells.len(), 20);
        assert_eq!(
            run.engine.version.as_deref(),
            Some("0.21.1rc1.dev339+g1967a5627bc3")
        );
        let c = &run.cells[0];
        assert_eq!(
            (c.concurrency, c.context_tokens, c.status),
            (1, 8192, CellStatus::Ok)
        );
        assert!((c.aggregate_tps - 45.4333).abs() < 1e-3);
        assert!(c.samples.is_empty());
        assert!((c.ttft_s.unwrap().p50 - 0.187).abs() < 1e-9);
        assert!((c.itl_s.unwrap().p90 - 0.0228503).abs() < 1e-6);
        assert!(
            c.spec_decode.is_none(),
            "accept length 0 in the seed: no steps/s"
        );
        let limited: Vec<_> = run
            .cells
            .iter()
            .filter(|c| c.status == CellStatus::CapacityLimited)
            .map(|c| (c.concurrency, c.context_tokens, c.reason.clone().unwrap()))
            .collect();
        assert_eq!(limited.len(), 3);
        assert_eq!(
            limited[0],
            (12, 65536, "warmup timed out: running_reqs=9/12".into())
        );
        assert_eq!(run.events.len(), 80);
        assert_eq!(run.events[0].at.to_rfc3339(), "2026-07-16T19:47:02+00:00");
        assert_eq!(run.started_at, run.events[0].at);
        let timeout = run
            .events
            .iter()
            .find(|e| e.kind == EventKind::CapacityLimited)
            .unwrap();
        assert_eq!(
            (timeout.concurrency, timeout.context_tokens),
            (Some(12), Some(65536))
        );
        assert_eq!(run.telemetry.as_ref().unwrap().status, "unavailable");
        assert!(matches!(run.source, ResultsSource::Import { .. }));
    }

    #[test]
    fn a_seed_cell_with_an_error_makes_the_run_partial() {
        let run = seed_run();
        assert_eq!(
            run.status,
            RunStatus::Complete,
            "capacity-limited cells are measured"
        );
        let mut doc: Value = serde_json::from_str(SEED).unwrap();
        doc["results"][1]["error"] = "HTTP 500 from the engine".into();
        let run = parse_results(&doc.to_string(), "seed.json")
            .unwrap()
            .remove(0);
        assert_eq!(run.cells[1].status, CellStatus::Error);
        assert_eq!(run.status, RunStatus::Partial);
        let why = run.status_reason.as_deref().unwrap();
        assert_contains(why, "HTTP 500 from the engine");
    }

    #[test]
    fn events_across_midnight_step_back_a_day() {
        let end = parse_timestamp("2026-07-17T00:10:00").unwrap();
        let log = vec![
            "23:59:00 cell start C=1 ctx=8k".to_string(),
            "00:09:00 cell done C=1 ctx=8k 1 tok/s".into(),
        ];
        let ev = events_from(&log, end);
        assert_eq!(ev[0].at.to_rfc3339(), "2026-07-16T23:59:00+00:00");
        assert_eq!(ev[1].at.to_rfc3339(), "2026-07-17T00:09:00+00:00");
        assert_eq!(ev[0].context_tokens, Some(8192));
    }

    #[test]
    fn missing_required_field_and_bad_timestamp_are_named() {
        let no_model = SEED.replacen("\"model\": \"deepseek-v4-flash-dspark\",", "", 1);
        assert_parse_err(
            &no_model,
            "s.json",
            "s.json: metadata: missing field `model`",
        );
        let bad_ts = SEED.replacen("2026-07-16T20:37:47.855187", "yesterday", 1);
        assert_parse_err(&bad_ts, "s.json", "s.json: metadata.timestamp: `yesterday`");
    }

    #[test]
    fn spec_decode_and_telemetry_when_present() {
        let mut doc: Value = serde_json::from_str(SEED).unwrap();
        doc["results"][0]["server_spec_accept_length"] = 2.5.into();
        doc["results"][0]["hardware_summary"] =
            serde_json::json!({"power_w_avg": 410.5, "temperature_c_max": 71, "note": "x"});
        let run = parse_results(&doc.to_string(), "s.json").unwrap().remove(0);
        let sd = run.cells[0].spec_decode.as_ref().unwrap();
        assert!((sd.steps_per_s - 45.43333333333333 / 2.5).abs() < 1e-9);
        let t = run.cells[0].telemetry.as_ref().unwrap();
        assert_eq!(t.power_w_avg, Some(410.5));
        assert_eq!(t.temperature_c_max, Some(71.0));
    }
}
