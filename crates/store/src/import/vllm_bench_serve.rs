//! Reader of `vllm bench serve --save-result` JSON (and `--append-result`: one JSON document per
//! line): each document is one benchmark at one `--max-concurrency`, so it becomes one cell.
//!
//! Mapping decisions (see `docs/interop.md`):
//! - Cell: concurrency = `max_concurrency` (required: a request-rate-only benchmark has no fixed
//!   concurrency and is refused with the fix); context = `total_input_tokens / completed`,
//!   rounded (vLLM does not record `--input-len`; a seeded dataset gives the same mean each run).
//! - `aggregate_tps` = `output_throughput` (output tokens over the whole benchmark, ramp-up and
//!   tail included: comparable between two runs of the same command, not with a sustained-decode
//!   window); `measured_s` = `duration`; `output_tokens` = `total_output_tokens`.
//! - `ttft_s` / `itl_s` / `tpot_s` from `mean_*_ms`, `median_*_ms`, `p90_*_ms`, `p99_*_ms` when all four are
//!   present and not all zero. vLLM's default `--metric-percentiles` is `99` only, so without
//!   `--metric-percentiles 90,99` these groups stay out (and say so).
//! - `samples` stay empty: vLLM has no sub-windows; the noise model then uses the between-run
//!   history alone (as for llm-decode-bench imports).
//! - Engine: the `engine` key when the run passed `--metadata engine=NAME`, else `unknown`
//!   (`--backend` names the API dialect, not the server). Hardware is not recorded: `cpu-unknown`.
//! - The burst layer (`RunResults.burst`): a file of one document is one burst by nature (a
//!   finite set of requests at `--request-rate`), so its `request_throughput`,
//!   `total_token_throughput`, `output_throughput`, `completed` / `failed`, `duration`, the
//!   TTFT / TPOT / ITL / E2EL groups and `request_goodput` are kept there too (the settings:
//!   `num_prompts`, `request_rate` (`inf` = all at once), `total_input_tokens / completed` as
//!   the prompt size, `total_output_tokens / completed` as the output asked). Several documents
//!   (one per `--max-concurrency`) are several bursts: none is the run's, so none is kept.
//! - Everything not mapped is listed in an `import_unmapped` event.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::{ImportError, engine_or_unknown, imported_run, non_negative, percentile_group};
use infergate_schema::results::{
    BurstRecord, BurstSettings, CellResult, CellStatus, Percentiles, SpecDecodeStats,
};

/// The fields of one `--save-result` document the import reads; percentile keys
/// (`p99_ttft_ms`, ...) and `--metadata` keys are read from `rest`.
#[derive(Debug, Deserialize)]
pub(crate) struct VllmResult {
    pub(crate) date: String,
    pub(crate) backend: Option<String>,
    pub(crate) label: Option<String>,
    pub(crate) model_id: String,
    pub(crate) num_prompts: Option<u64>,
    pub(crate) request_rate: Option<Value>,
    pub(crate) burstiness: Option<f64>,
    pub(crate) max_concurrency: Option<u32>,
    pub(crate) ramp_up_strategy: Option<String>,
    pub(crate) duration: f64,
    pub(crate) completed: u64,
    pub(crate) failed: Option<u64>,
    pub(crate) total_input_tokens: u64,
    pub(crate) total_output_tokens: u64,
    pub(crate) output_throughput: f64,
    pub(crate) spec_decode_acceptance_rate: Option<f64>,
    pub(crate) spec_decode_acceptance_length: Option<f64>,
    pub(crate) spec_decode_num_drafts: Option<u64>,
    pub(crate) spec_decode_draft_tokens: Option<u64>,
    pub(crate) spec_decode_accepted_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) spec_decode_per_position_acceptance_rates: Vec<f64>,
    /// Every other key: `mean_ttft_ms`, `p99_itl_ms`, `--metadata` pairs, raw lists.
    #[serde(flatten)]
    pub(crate) rest: BTreeMap<String, Value>,
}

/// Whether a parsed JSON document looks like a `--save-result` document.
pub(crate) fn looks_like(doc: &Value) -> bool {
    doc.get("output_throughput").is_some()
        && doc.get("total_output_tokens").is_some()
        && doc.get("model_id").is_some()
}

/// Converts the documents of one file (one, or several from `--append-result`) into one run
/// with a cell per document. `prefix(i)` names document `i` in field errors.
pub(crate) fn convert(
    docs: &[VllmResult],
    text: &str,
    file: &str,
    prefix: &dyn Fn(usize) -> String,
) -> Result<infergate_schema::results::RunResults, ImportError> {
    let errors = FieldErrors { file, prefix };
    let first = &docs[0];
    let DocumentCells {
        cells,
        mut unmapped,
        times,
    } = cells_of(docs, &errors)?;
    unmapped.push(
        "not recorded by vllm bench serve: hardware, engine version, max_tokens (--output-len), \
         sub-window samples"
            .into(),
    );
    let engine = engine_or_unknown(
        first.rest.get("engine").and_then(Value::as_str),
        "run with --metadata engine=NAME",
        &mut unmapped,
    );
    let labels = labels_of(first);
    let started = times.iter().min().copied().unwrap_or_else(Utc::now);
    let finished = times.iter().max().copied().unwrap_or(started);
    let burst = match docs {
        [one] => Some(burst_of(one).map_err(|(f, m)| errors.at(0, &f, m))?),
        _ => {
            unmapped.push(
                "burst layer: several documents are several bursts, none is the run's; left out"
                    .into(),
            );
            None
        }
    };
    let mut run = imported_run(super::ImportedRun {
        tool: "vllm bench serve".into(),
        tag: "vllm",
        file,
        text,
        engine,
        model: first.model_id.clone(),
        url: String::new(),
        started,
        finished,
        cells,
        unmapped,
        labels,
    });
    run.burst = burst;
    Ok(run)
}

/// Field errors of one file: `prefix(i)` names document `i` (`line 3: ` in `--append-result`).
struct FieldErrors<'a> {
    file: &'a str,
    prefix: &'a dyn Fn(usize) -> String,
}

impl FieldErrors<'_> {
    /// The error for `field` of document `i`.
    fn at(&self, i: usize, field: &str, message: String) -> ImportError {
        ImportError::Field {
            file: self.file.to_string(),
            field: format!("{}{field}", (self.prefix)(i)),
            message,
        }
    }
}

/// What [`cells_of`] reads from the documents.
struct DocumentCells {
    /// A cell per document.
    cells: Vec<CellResult>,
    /// The notes on what they could not map, each once, in the order first met.
    unmapped: Vec<String>,
    /// Each document's date.
    times: Vec<DateTime<Utc>>,
}

/// A cell per document, with the notes and dates; refuses a second model, a bad date and a
/// repeated cell.
fn cells_of(docs: &[VllmResult], errors: &FieldErrors<'_>) -> Result<DocumentCells, ImportError> {
    let first = &docs[0];
    let mut cells: Vec<CellResult> = Vec::with_capacity(docs.len());
    let mut unmapped: Vec<String> = Vec::new();
    let mut times = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        if d.model_id != first.model_id {
            return Err(errors.at(
                i,
                "model_id",
                format!(
                    "`{}` differs from the first document's `{}`: one file holds one model",
                    d.model_id, first.model_id
                ),
            ));
        }
        times.push(parse_date(&d.date).ok_or_else(|| {
            errors.at(
                i,
                "date",
                format!(
                    "`{}` is not vLLM's %Y%m%d-%H%M%S (e.g. 20260310-101500)",
                    d.date
                ),
            )
        })?);
        let (cell, notes) = convert_one(d).map_err(|(f, m)| errors.at(i, &f, m))?;
        if let Some(j) = cells.iter().position(|c| c.coord() == cell.coord()) {
            return Err(errors.at(
                i,
                "max_concurrency",
                format!(
                    "cell C={} / {} tokens is already document {}'s: one document per concurrency",
                    cell.concurrency,
                    cell.context_tokens,
                    j + 1
                ),
            ));
        }
        for n in notes {
            if !unmapped.contains(&n) {
                unmapped.push(n);
            }
        }
        cells.push(cell);
    }
    Ok(DocumentCells {
        cells,
        unmapped,
        times,
    })
}

/// The benchmark's settings as `vllm.*` labels, so runs of different commands can be told apart.
fn labels_of(first: &VllmResult) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for (key, value) in [
        ("backend", first.backend.clone()),
        ("label", first.label.clone()),
        ("num_prompts", first.num_prompts.map(|n| n.to_string())),
        (
            "request_rate",
            first.request_rate.as_ref().map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }),
        ),
        ("burstiness", first.burstiness.map(|b| b.to_string())),
        ("ramp_up_strategy", first.ramp_up_strategy.clone()),
    ] {
        if let Some(v) = value {
            labels.insert(format!("vllm.{key}"), v);
        }
    }
    labels
}

/// One document's burst layer: what `vllm bench serve` reports of a finite request set.
fn burst_of(d: &VllmResult) -> Result<BurstRecord, (String, String)> {
    let failed = failed(d);
    let sent = d.num_prompts.unwrap_or(d.completed + failed);
    let request_rate = match &d.request_rate {
        Some(Value::Number(n)) => n.as_f64().filter(|r| r.is_finite() && *r > 0.0),
        _ => None,
    };
    let per_second = |n: u64| {
        if d.duration > 0.0 {
            n as f64 / d.duration
        } else {
            0.0
        }
    };
    let total_tps = number(d, "total_token_throughput")?
        .unwrap_or_else(|| per_second(d.total_input_tokens + d.total_output_tokens));
    let request_throughput =
        number(d, "request_throughput")?.unwrap_or_else(|| per_second(d.completed));
    let goodput = number(d, "request_goodput")?;
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(BurstRecord {
        settings: BurstSettings {
            requests: clamp(sent),
            request_rate,
            seed: d.rest.get("seed").and_then(Value::as_u64).unwrap_or(0),
            prompt_tokens: per_request(d, d.total_input_tokens),
            max_tokens: clamp(per_request(d, d.total_output_tokens)),
            slo: Default::default(),
        },
        sent: clamp(sent),
        completed: clamp(d.completed),
        // vLLM counts a request that did not end as asked as failed: none is told apart.
        incomplete: 0,
        errors: clamp(failed),
        duration_s: d.duration,
        prompt_tokens: d.total_input_tokens,
        output_tokens: d.total_output_tokens,
        request_throughput,
        output_tps: d.output_throughput,
        total_tps,
        ttft_s: latency_group(d, "ttft")?,
        tpot_s: latency_group(d, "tpot")?,
        itl_s: latency_group(d, "itl")?,
        e2el_s: latency_group(d, "e2el")?,
        good: goodput.map(|g| (g * d.duration).round() as u32),
        goodput,
        first_problem: (failed > 0).then(|| format!("{failed} requests failed")),
    })
}

/// Failed requests: `failed`, else the requests of `num_prompts` that did not complete.
fn failed(d: &VllmResult) -> u64 {
    d.failed
        .or_else(|| d.num_prompts.map(|n| n.saturating_sub(d.completed)))
        .unwrap_or(0)
}

/// `total` per completed request, rounded; 0 when none completed.
fn per_request(d: &VllmResult, total: u64) -> u64 {
    if d.completed > 0 {
        (total as f64 / d.completed as f64).round() as u64
    } else {
        0
    }
}

/// One document → one cell and the notes on what it could not map; an error is (field, message).
fn convert_one(d: &VllmResult) -> Result<(CellResult, Vec<String>), (String, String)> {
    let mut notes = Vec::new();
    let concurrency = checked_concurrency(d)?;
    let context = per_request(d, d.total_input_tokens);
    let errors = failed(d);
    let (status, reason) = status_of(d, errors);
    let ttft = latency_group(d, "ttft")?;
    let itl = latency_group(d, "itl")?;
    let tpot = latency_group(d, "tpot")?;
    for (name, g) in [("ttft", &ttft), ("itl", &itl), ("tpot", &tpot)] {
        if g.is_none() {
            notes.push(format!(
                "{name}: needs mean/median/p90/p99_{name}_ms, not all zero (run with \
                 --metric-percentiles 90,99); left out"
            ));
        }
    }
    if d.rest.contains_key("max_concurrent_requests") {
        notes.push(
            "max_concurrent_requests / max_output_tokens_per_s: peaks, not the mean running \
             requests; left out"
                .into(),
        );
    }
    Ok((
        CellResult {
            aggregate_tps: d.output_throughput,
            ttft_s: ttft,
            itl_s: itl,
            output_tokens: d.total_output_tokens,
            measured_s: d.duration,
            prompt_tokens: (context > 0).then_some(context),
            errors: u32::try_from(errors).unwrap_or(u32::MAX),
            spec_decode: spec_decode_of(d),
            tpot_s: tpot,
            ..super::imported_cell(concurrency, context, status, reason)
        },
        notes,
    ))
}

/// The cell's concurrency (`max_concurrency`), once the figures the cell is made of are known
/// to be numbers >= 0.
fn checked_concurrency(d: &VllmResult) -> Result<u32, (String, String)> {
    let concurrency = match d.max_concurrency {
        Some(c) if c > 0 => c,
        _ => {
            return Err((
                "max_concurrency".into(),
                "missing or null: a request-rate-only benchmark has no fixed concurrency; run \
                 vllm bench serve with --max-concurrency N (one file or line per N)"
                    .into(),
            ));
        }
    };
    non_negative("duration", d.duration)?;
    non_negative("output_throughput", d.output_throughput)?;
    Ok(concurrency)
}

/// The cell's status: an error when no request completed, its reason the failed requests.
fn status_of(d: &VllmResult, errors: u64) -> (CellStatus, Option<String>) {
    if d.completed == 0 {
        (CellStatus::Error, Some("no request completed".to_string()))
    } else if errors > 0 {
        (
            CellStatus::Ok,
            Some(format!(
                "{errors} of {} requests failed",
                d.completed + errors
            )),
        )
    } else {
        (CellStatus::Ok, None)
    }
}

/// The number under `key` of the other keys, `None` when absent or null.
fn number(d: &VllmResult, key: &str) -> Result<Option<f64>, (String, String)> {
    match d.rest.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| {
            (
                key.to_string(),
                format!("invalid type: {v}, expected a number"),
            )
        }),
    }
}

/// The `metric` group (`ttft`, `itl`, `tpot`, `e2el`) in seconds from its `*_ms` keys; `None`
/// when any is missing or all are zero, an error when one is not a number.
fn latency_group(d: &VllmResult, metric: &str) -> Result<Option<Percentiles>, (String, String)> {
    let ms = |stat: &str| number(d, &format!("{stat}_{metric}_ms")).map(|v| v.map(|x| x / 1000.0));
    Ok(percentile_group(
        ms("mean")?,
        ms("median")?,
        ms("p90")?,
        ms("p99")?,
        d.completed,
    ))
}

/// Speculative decoding's figures, when the run drafted (an acceptance length > 0).
fn spec_decode_of(d: &VllmResult) -> Option<SpecDecodeStats> {
    match d.spec_decode_acceptance_length {
        Some(len) if len.is_finite() && len > 0.0 => Some(SpecDecodeStats {
            drafts: d.spec_decode_num_drafts.unwrap_or(0),
            draft_tokens: d.spec_decode_draft_tokens.unwrap_or(0),
            accepted_tokens: d.spec_decode_accepted_tokens.unwrap_or(0),
            // vLLM writes percent; the schema holds a fraction.
            acceptance_rate: d.spec_decode_acceptance_rate.unwrap_or(0.0) / 100.0,
            accept_len: len,
            steps_per_s: d.output_throughput / len,
            per_position_acceptance: d.spec_decode_per_position_acceptance_rates.clone(),
        }),
        _ => None,
    }
}

/// vLLM's `date`: local time as `%Y%m%d-%H%M%S`, read as UTC (the file has no zone).
fn parse_date(s: &str) -> Option<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, "%Y%m%d-%H%M%S")
        .ok()
        .map(|n| Utc.from_utc_datetime(&n))
        .or_else(|| {
            DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| t.with_timezone(&Utc))
        })
}

#[cfg(test)]
mod tests {
    use crate::import::tests::assert_parse_err;
    use crate::import::{parse_results, unmapped_notes};
    use infergate_schema::asserts::{assert_contains, assert_starts_with};
    use infergate_schema::results::{CellStatus, RunStatus};

    const SHAREGPT: &str =
        include_str!("../../../../tests/fixtures/vllm-bench-serve-sharegpt-vllm-baseline.json");
    const SPEC: &str =
        include_str!("../../../../tests/fixtures/vllm-bench-serve-sharegpt-vllm-spec-mtp.json");
    const APPEND: &str =
        include_str!("../../../../tests/fixtures/vllm-bench-serve-append-baseline.jsonl");

    #[test]
    fn seed_block_maps_to_one_cell() {
        let run = parse_results(SHAREGPT, "v.json").unwrap().remove(0);
        assert_eq!(run.cells.len(), 1);
        let c = &run.cells[0];
        assert_eq!((c.concurrency, c.context_tokens), (512, 342));
        assert_eq!(c.aggregate_tps, 4347.55);
        assert_eq!((c.output_tokens, c.measured_s), (281412, 70.72));
        assert!(c.samples.is_empty());
        // The seed printed P95/P99 only, and a zero median ITL: neither group maps.
        assert!(c.ttft_s.is_none() && c.itl_s.is_none());
        assert_eq!(run.profile.engine, "unknown");
        assert_eq!(run.profile.model, "Qwen/Qwen3.5-35B-A3B-FP8");
        assert_eq!(run.started_at.to_rfc3339(), "2026-03-10T10:15:00+00:00");
        let notes = unmapped_notes(&run);
        assert!(
            notes.iter().any(|n| n.starts_with("ttft: needs")),
            "{notes:?}"
        );
        assert!(notes.iter().any(|n| n.starts_with("engine: not recorded")));
        assert_eq!(run.labels["vllm.backend"], "vllm");
        // One document is one burst: its request-level figures are kept in the burst layer.
        let b = run.burst.as_ref().expect("burst layer");
        assert_eq!((b.sent, b.completed, b.errors), (1000, 1000, 0));
        assert_eq!((b.total_tps, b.request_throughput), (9632.01, 14.14));
        assert_eq!(b.output_tps, 4347.55);
        assert_eq!(b.settings.request_rate, Some(1000.0));
        assert_eq!(b.settings.prompt_tokens, 342);
        assert!(b.ttft_s.is_none(), "p95/p99 only: no p90");
    }

    /// The burst layer keeps the TTFT / E2EL groups vLLM reports with p90 and p99; a file of
    /// several documents (one per concurrency) has no one burst.
    #[test]
    fn the_burst_layer_keeps_the_latency_groups() {
        let mut doc: serde_json::Value = serde_json::from_str(SHAREGPT).unwrap();
        doc["p90_ttft_ms"] = 9000.0.into();
        doc["p90_e2el_ms"] = 58000.0.into();
        doc["request_rate"] = "inf".into();
        let run = parse_results(&doc.to_string(), "v.json").unwrap().remove(0);
        let b = run.burst.unwrap();
        assert_eq!(b.ttft_s.unwrap().p90, 9.0);
        assert_eq!(b.e2el_s.unwrap().p50, 27.48);
        assert_eq!(b.settings.request_rate, None);
        let several = parse_results(APPEND, "v.jsonl").unwrap().remove(0);
        assert!(several.cells.len() > 1 && several.burst.is_none());
    }

    #[test]
    fn failed_requests_are_counted_from_num_prompts() {
        let run = parse_results(SPEC, "s.json").unwrap().remove(0);
        let c = &run.cells[0];
        assert_eq!((c.errors, c.status), (484, CellStatus::Ok));
        assert_eq!(c.reason.as_deref(), Some("484 of 1000 requests failed"));
    }

    #[test]
    fn a_cell_where_no_request_completed_makes_the_run_partial() {
        let none = SHAREGPT.replacen("\"completed\": 1000", "\"completed\": 0", 1);
        let run = parse_results(&none, "v.json").unwrap().remove(0);
        assert_eq!(run.cells[0].status, CellStatus::Error);
        assert_eq!(run.status, RunStatus::Partial);
        let why = run.status_reason.as_deref().unwrap();
        assert_contains(why, "no request completed");
        // Joined with a measured file (the errored one second): still partial, counted over
        // the joined matrix.
        let first = parse_results(APPEND, "a.jsonl").unwrap().remove(0);
        assert_eq!(first.status, RunStatus::Complete);
        let joined = crate::import::join_runs(
            vec![first, run],
            &["a.jsonl".to_string(), "v.json".to_string()],
        )
        .unwrap();
        assert_eq!(joined.status, RunStatus::Partial);
        let why = joined.status_reason.as_deref().unwrap();
        assert_starts_with(why, "1 of 3 cells errored");
    }

    #[test]
    fn full_percentiles_engine_metadata_and_spec_decode_map() {
        let mut doc: serde_json::Value = serde_json::from_str(SHAREGPT).unwrap();
        doc["p90_ttft_ms"] = 9000.0.into();
        doc["engine"] = "vllm".into();
        doc["spec_decode_acceptance_length"] = 2.5.into();
        doc["spec_decode_acceptance_rate"] = 50.0.into();
        let run = parse_results(&doc.to_string(), "v.json").unwrap().remove(0);
        let t = run.cells[0].ttft_s.unwrap();
        assert_eq!(
            (t.mean, t.p50, t.p90, t.p99),
            (4.07264, 5.78623, 9.0, 10.20444)
        );
        assert_eq!(run.profile.engine, "vllm");
        let sd = run.cells[0].spec_decode.as_ref().unwrap();
        assert_eq!((sd.acceptance_rate, sd.steps_per_s), (0.5, 4347.55 / 2.5));
    }

    #[test]
    fn append_result_lines_become_one_cell_each() {
        let run = parse_results(APPEND, "a.jsonl").unwrap().remove(0);
        let coords: Vec<_> = run.cells.iter().map(|c| c.coord()).collect();
        assert_eq!(coords, [(100, 32010), (200, 1010)]);
        assert_eq!(run.matrix.concurrency, [100, 200]);
        assert_eq!(run.matrix.contexts, [1010, 32010]);
    }

    #[test]
    fn bad_documents_name_file_and_field() {
        let null_c = SHAREGPT.replace("\"max_concurrency\": 512", "\"max_concurrency\": null");
        assert_parse_err(
            &null_c,
            "v.json",
            "v.json: max_concurrency: missing or null",
        );
        let wrong = SHAREGPT.replace(
            "\"output_throughput\": 4347.55",
            "\"output_throughput\": \"4347\"",
        );
        let prefix = "v.json: output_throughput: invalid type: string";
        assert_parse_err(&wrong, "v.json", prefix);
        let pct = SHAREGPT.replace("\"p99_ttft_ms\": 10204.44", "\"p99_ttft_ms\": \"slow\"");
        assert_parse_err(&pct, "v.json", "v.json: p99_ttft_ms: invalid type");
        let lines: Vec<&str> = APPEND.lines().collect();
        let second = lines[1].replace("\"date\": \"20260312-103000\"", "\"date\": \"soon\"");
        let bad_date = format!("{}\n{second}", lines[0]);
        assert_parse_err(&bad_date, "a.jsonl", "a.jsonl: line 2: date: `soon`");
        let dup = format!("{}\n{}", lines[0], lines[0]);
        let prefix = "a.jsonl: line 2: max_concurrency: cell C=100";
        assert_parse_err(&dup, "a.jsonl", prefix);
    }
}
