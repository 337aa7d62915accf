//! Readers of results files: infergate's own schema and other tools' output (llm-decode-bench
//! JSON, `vllm bench serve --save-result` JSON, guidellm benchmark reports), told apart by their
//! content so `compare` and `baseline add` accept any of them without a flag. Every error names
//! the file and, where there is one, the field (`cells[3].aggregate_tps`) so a broken file can be
//! fixed without reading this code. What an importer could not map is listed in the run's
//! `import_unmapped` event (see `docs/interop.md`).

pub(crate) mod guidellm;
pub(crate) mod llm_decode_bench;
pub(crate) mod vllm_bench_serve;

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;

use infergate_config::config::plain_type_names;
use infergate_schema::results::{
    CellResult, CellStatus, CellTiming, EngineIdentity, Event, EventKind, HardwareFingerprint,
    MIN_SCHEMA_VERSION, MatrixSpec, Percentiles, ProfileKey, ResultsSource, RunResults, RunStatus,
    SCHEMA_VERSION, TokenSource, ToolInfo,
};

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// A directory was given where a file is read.
    #[error("{file} is a directory: {hint}")]
    Directory { file: String, hint: String },
    /// The file is not valid JSON (truncated, hand-edited).
    #[error("{file}: not valid JSON{at}: {message}")]
    Syntax {
        file: String,
        /// ` at <field path>` when the parser got that far, else empty.
        at: String,
        message: String,
    },
    /// A field is missing, has the wrong type, or an impossible value.
    #[error("{file}: {field}: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
    /// The JSON is neither infergate results nor a known foreign format.
    #[error(
        "{file}: unrecognised results format: expected infergate results (`schema_version` and `tool.name` = \"infergate\"), llm-decode-bench JSON (`metadata.version` and `results[]` with `aggregate_tps`), vllm bench serve --save-result JSON (`model_id`, `output_throughput`, `total_output_tokens`) or a guidellm report (`metadata.guidellm_version`, `benchmarks[]`)"
    )]
    UnknownFormat { file: String },
    /// Written by a newer infergate whose schema this build does not understand.
    #[error(
        "{file}: schema_version {found} is newer than this build understands ({supported}); upgrade infergate"
    )]
    NewerSchema {
        file: String,
        found: u64,
        supported: u32,
    },
    /// A schema version below the oldest this build reads (e.g. 0, never written).
    #[error(
        "{file}: schema_version {found} is not supported (this build reads {min} to {max}); the file was not written by infergate or is corrupt"
    )]
    OlderSchema {
        file: String,
        found: u64,
        min: u32,
        max: u32,
    },
}

/// The formats [`load_results`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResultsFormat {
    /// infergate's own results schema (one run, or an array of runs).
    Infergate,
    /// llm-decode-bench JSON (`metadata` + `results[]`).
    LlmDecodeBench,
    /// `vllm bench serve --save-result` JSON, one document (or one per line with
    /// `--append-result`), one cell each.
    VllmBenchServe,
    /// A guidellm benchmark report (`benchmarks[]`), one cell per concurrency.
    Guidellm,
}

/// Tells the format of a parsed JSON document from its content, `None` when unknown.
pub(crate) fn detect(doc: &Value) -> Option<ResultsFormat> {
    let first = match doc {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let is_ours = first.get("schema_version").is_some()
        && first
            .get("tool")
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
            == Some("infergate");
    if is_ours {
        return Some(ResultsFormat::Infergate);
    }
    if doc.is_array() {
        return None;
    }
    let is_seed = doc.get("metadata").and_then(|m| m.get("version")).is_some()
        && doc
            .get("results")
            .and_then(Value::as_array)
            .is_some_and(|cells| {
                cells.is_empty() || cells.iter().any(|c| c.get("aggregate_tps").is_some())
            });
    if is_seed {
        Some(ResultsFormat::LlmDecodeBench)
    } else if vllm_bench_serve::looks_like(doc) {
        Some(ResultsFormat::VllmBenchServe)
    } else if guidellm::looks_like(doc) {
        Some(ResultsFormat::Guidellm)
    } else {
        None
    }
}

/// Two or more JSON documents one after another (vLLM's `--append-result`), each with the
/// line it starts on; `None` when the text is not that.
fn json_lines(text: &str) -> Option<Vec<(usize, Value)>> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut docs = Vec::new();
    let mut start = 0usize;
    while let Some(next) = stream.next() {
        let doc = next.ok()?;
        let begin = start + text[start..].len() - text[start..].trim_start().len();
        let line = text[..begin].matches('\n').count() + 1;
        docs.push((line, doc));
        start = stream.byte_offset();
    }
    (docs.len() >= 2).then_some(docs)
}

/// Reads one results file of any recognised format into runs (one run per file, except an
/// infergate file holding a JSON array of runs).
pub fn load_results(path: &Path) -> Result<Vec<RunResults>, ImportError> {
    let text = read_file(path, "results.json")?;
    parse_results(&text, &path.display().to_string())
}

/// Reads a file given on the command line, bounded ([`infergate_io::fsio::read_input`]: a regular
/// file of at most 256 MiB). A directory (the `--out` of `infergate run`, given for the file in
/// it) is refused with the file to pass instead, `usual_name` in it.
pub fn read_file(path: &Path, usual_name: &str) -> Result<String, ImportError> {
    let file = path.display().to_string();
    if path.is_dir() {
        let inside = path.join(usual_name);
        let hint = if inside.is_file() {
            format!("pass the file in it, {}", inside.display())
        } else {
            format!("pass a file (`infergate run` writes {usual_name} in its --out directory)")
        };
        return Err(ImportError::Directory { file, hint });
    }
    infergate_io::fsio::read_input(path).map_err(|source| ImportError::Io { file, source })
}

/// Parses the text of a results file; `file` names it in errors and in import provenance.
pub(crate) fn parse_results(text: &str, file: &str) -> Result<Vec<RunResults>, ImportError> {
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => {
            if let Some(docs) = json_lines(text)
                && docs.iter().all(|(_, d)| vllm_bench_serve::looks_like(d))
            {
                return vllm_lines(&docs, text, file);
            }
            return Err(syntax_error(text, file));
        }
    };
    match detect(&doc) {
        Some(ResultsFormat::Infergate) => {
            let runs: Vec<RunResults> = if doc.is_array() {
                deserialize_at(text, file)?
            } else {
                vec![deserialize_at(text, file)?]
            };
            for (i, run) in runs.iter().enumerate() {
                let prefix = if doc.is_array() {
                    format!("[{i}].")
                } else {
                    String::new()
                };
                check_run(run, file, &prefix)?;
            }
            Ok(runs)
        }
        Some(ResultsFormat::LlmDecodeBench) => {
            let seed: llm_decode_bench::SeedFile = deserialize_at(text, file)?;
            Ok(vec![llm_decode_bench::convert(&seed, text, file)?])
        }
        Some(ResultsFormat::VllmBenchServe) => {
            let one: vllm_bench_serve::VllmResult = deserialize_at(text, file)?;
            Ok(vec![vllm_bench_serve::convert(
                &[one],
                text,
                file,
                &|_| String::new(),
            )?])
        }
        Some(ResultsFormat::Guidellm) => {
            let report: guidellm::GuidellmReport = deserialize_at(text, file)?;
            Ok(vec![guidellm::convert(&report, text, file)?])
        }
        None => Err(ImportError::UnknownFormat {
            file: file.to_string(),
        }),
    }
}

/// vLLM `--append-result` lines: each document deserialised with its line named in errors.
fn vllm_lines(
    docs: &[(usize, Value)],
    text: &str,
    file: &str,
) -> Result<Vec<RunResults>, ImportError> {
    let parsed = docs
        .iter()
        .map(|(line, doc)| {
            serde_path_to_error::deserialize(doc.clone())
                .map_err(|err| path_error(err, file, &format!("line {line}: ")))
        })
        .collect::<Result<Vec<vllm_bench_serve::VllmResult>, _>>()?;
    Ok(vec![vllm_bench_serve::convert(
        &parsed,
        text,
        file,
        &|i| format!("line {}: ", docs[i].0),
    )?])
}

/// What the importer of a run could not map (the messages of its `import_unmapped` events);
/// empty for runs measured by infergate.
pub fn unmapped_notes(run: &RunResults) -> Vec<&str> {
    run.events
        .iter()
        .filter(|e| e.kind == EventKind::ImportUnmapped)
        .map(|e| e.message.as_str())
        .collect()
}

/// A percentile group, or `None` when incomplete, negative, not finite or all zero (tools write
/// zeros for what they did not measure).
pub(crate) fn percentile_group(
    mean: Option<f64>,
    p50: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
    count: u64,
) -> Option<Percentiles> {
    let (mean, p50, p90, p99) = (mean?, p50?, p90?, p99?);
    let all = [mean, p50, p90, p99];
    if all.iter().any(|v| !v.is_finite() || *v < 0.0) || all.iter().all(|v| *v == 0.0) {
        return None;
    }
    Some(Percentiles {
        mean,
        p50,
        p90,
        p99,
        count,
    })
}

/// A cell of an imported run as the tool reports it; the importer sets the figures it has,
/// the rest stays as on an unmeasured cell (what no tool records).
pub(crate) fn imported_cell(
    concurrency: u32,
    context_tokens: u64,
    status: CellStatus,
    reason: Option<String>,
) -> CellResult {
    CellResult {
        reason,
        token_source: Some(TokenSource::Imported),
        ..CellResult::unmeasured(concurrency, context_tokens, status, "")
    }
}

/// What every importer knows about a run; [`imported_run`] builds the rest the same way for
/// all (llm-decode-bench then sets what only it records: matrix, GPUs, telemetry, log).
pub(crate) struct ImportedRun<'a> {
    /// Tool and version for the provenance (`guidellm 0.8.1`).
    pub(crate) tool: String,
    /// Short tag in the run id (`vllm`, `guidellm`).
    pub(crate) tag: &'static str,
    pub(crate) file: &'a str,
    /// The file's text: its digest makes the run id stable across imports.
    pub(crate) text: &'a str,
    pub(crate) engine: String,
    pub(crate) model: String,
    pub(crate) url: String,
    pub(crate) started: DateTime<Utc>,
    pub(crate) finished: DateTime<Utc>,
    pub(crate) cells: Vec<CellResult>,
    /// What could not be mapped, one note each.
    pub(crate) unmapped: Vec<String>,
    pub(crate) labels: BTreeMap<String, String>,
}

/// The matrix of an imported run: its cells' coordinates; no max_tokens and no sub-windows (the
/// tools record neither), so the shape hash depends on the coordinates alone.
fn matrix_of(model: &str, cells: &[CellResult]) -> MatrixSpec {
    MatrixSpec {
        model: model.to_string(),
        concurrency: sorted_unique(cells.iter().map(|c| c.concurrency).collect()),
        contexts: sorted_unique(cells.iter().map(|c| c.context_tokens).collect()),
        timing: CellTiming {
            duration_s: cells.iter().map(|c| c.measured_s).fold(0.0, f64::max),
            warmup_s: 0.0,
            max_tokens: 0,
            unique_context_percent: 100.0,
            sub_windows: 0,
            ..CellTiming::DEFAULT
        },
        repetitions: 1,
    }
}

/// The engine a file names, or `unknown` with a note on how to record it (`how`).
pub(crate) fn engine_or_unknown(
    engine: Option<&str>,
    how: &str,
    unmapped: &mut Vec<String>,
) -> String {
    match engine.filter(|e| !e.trim().is_empty()) {
        Some(e) => e.to_string(),
        None => {
            unmapped.push(format!(
                "engine: not recorded ({how} to name it); `unknown`"
            ));
            "unknown".into()
        }
    }
}

/// The `cpu-unknown` hardware of a file that does not record it.
pub(crate) fn unknown_hardware() -> HardwareFingerprint {
    HardwareFingerprint {
        kind: "cpu".into(),
        gpu_model: None,
        gpu_count: 0,
        driver_version: None,
        cpu_model: None,
    }
}

/// `v` sorted, each value once.
pub(crate) fn sorted_unique<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable();
    v.dedup();
    v
}

/// `<end>-<tag>-<8 hex of the text's SHA-256>`: importing one file twice gives one run id (one
/// baseline entry), a changed file a new one.
fn stable_run_id(finished: DateTime<Utc>, tag: &str, text: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    format!(
        "{}-{tag}-{}",
        finished.format("%Y%m%dT%H%M%SZ"),
        &digest[..8]
    )
}

/// A run from an import: the matrix is the cells' coordinates (no max_tokens, no
/// sub-windows: the tools record neither), hardware unknown (`cpu-unknown` profile), one
/// `import_unmapped` event per note, stamped at the run's end. `complete` only when every cell was
/// measured ([`RunResults::settle_status`]): an imported run with an errored cell is `partial`
/// and can never become a baseline.
pub(crate) fn imported_run(r: ImportedRun<'_>) -> RunResults {
    let matrix = matrix_of(&r.model, &r.cells);
    let profile = ProfileKey::derive(unknown_hardware(), &r.engine, &r.model, &matrix);
    let run_id = stable_run_id(r.finished, r.tag, r.text);
    let events = r
        .unmapped
        .into_iter()
        .map(|message| Event {
            at: r.finished,
            kind: EventKind::ImportUnmapped,
            concurrency: None,
            context_tokens: None,
            process_group: None,
            message,
        })
        .collect();
    let mut run = RunResults {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo::current(),
        run_id,
        suite: None,
        started_at: r.started,
        finished_at: Some(r.finished),
        status: RunStatus::Complete,
        status_reason: None,
        profile,
        engine: EngineIdentity {
            name: r.engine,
            version: None,
            models: vec![r.model],
            url: r.url,
            metrics_flavor: None,
            command: None,
            containment: None,
        },
        matrix,
        cells: r.cells,
        telemetry: Some(infergate_telemetry::telemetry::unavailable(format!(
            "not recorded by {}",
            r.tool
        ))),
        events,
        source: ResultsSource::Import {
            tool: r.tool,
            path: r.file.to_string(),
        },
        labels: r.labels,
        prefill: Vec::new(),
        burst: None,
        gate_failure: None,
    };
    run.settle_status();
    run
}

/// Joins runs imported from several files of one tool (one cell per file, as vLLM writes one
/// file per `--max-concurrency`) into one run, so they compare as one matrix. Refuses runs of
/// different tools, models or engines, and a cell present twice.
pub fn join_runs(runs: Vec<RunResults>, files: &[String]) -> Result<RunResults, ImportError> {
    let mut iter = runs.into_iter().zip(files);
    let (mut joined, first_file) = iter.next().ok_or_else(|| ImportError::Field {
        file: "(no file)".into(),
        field: "(top level)".into(),
        message: "nothing to join".into(),
    })?;
    let tool_of = |r: &RunResults| match &r.source {
        ResultsSource::Import { tool, .. } => Some(tool.clone()),
        ResultsSource::Infergate => None,
    };
    let Some(tool) = tool_of(&joined) else {
        return Err(ImportError::Field {
            file: first_file.clone(),
            field: "source".into(),
            message: "an infergate run cannot be joined with other files; import it alone".into(),
        });
    };
    let mut texts = vec![joined.run_id.clone()];
    for (run, file) in iter {
        let bad = |field: &str, message: String| ImportError::Field {
            file: file.clone(),
            field: field.into(),
            message,
        };
        if tool_of(&run).as_deref() != Some(tool.as_str()) {
            return Err(bad(
                "(top level)",
                format!("not a {tool} file like {first_file}: only one tool's files join"),
            ));
        }
        if run.profile.model != joined.profile.model || run.profile.engine != joined.profile.engine
        {
            return Err(bad(
                "model",
                format!(
                    "engine/model {}/{} differs from {first_file}'s {}/{}",
                    run.profile.engine,
                    run.profile.model,
                    joined.profile.engine,
                    joined.profile.model
                ),
            ));
        }
        for cell in run.cells {
            if joined.cells.iter().any(|c| c.coord() == cell.coord()) {
                return Err(bad(
                    "cells",
                    format!(
                        "cell C={} / {} tokens is already in an earlier file",
                        cell.concurrency, cell.context_tokens
                    ),
                ));
            }
            joined.cells.push(cell);
        }
        for e in run.events {
            if !joined
                .events
                .iter()
                .any(|j| j.kind == e.kind && j.message == e.message)
            {
                joined.events.push(e);
            }
        }
        joined.started_at = joined.started_at.min(run.started_at);
        joined.finished_at = joined.finished_at.max(run.finished_at);
        texts.push(run.run_id);
    }
    joined.cells.sort_by_key(|c| c.coord());
    joined.matrix = matrix_of(&joined.profile.model, &joined.cells);
    joined.profile = ProfileKey::derive(
        joined.profile.hardware.clone(),
        &joined.profile.engine,
        &joined.profile.model,
        &joined.matrix,
    );
    joined.run_id = stable_run_id(
        joined.finished_at.unwrap_or(joined.started_at),
        "joined",
        &texts.join("\n"),
    );
    if let ResultsSource::Import { path, .. } = &mut joined.source {
        *path = files.join(", ");
    }
    // Imported runs are `partial` only through their errored cells (`imported_run`): settled
    // again over the joined cells, so one file's error makes the whole run partial, with the
    // counts of the joined matrix.
    if joined.status == RunStatus::Partial {
        joined.status = RunStatus::Complete;
        joined.status_reason = None;
    }
    joined.settle_status();
    Ok(joined)
}

/// Deserialises `text` as `T`, reporting the field path and line/column of a failure.
pub fn deserialize_at<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, ImportError> {
    serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text))
        .map_err(|err| path_error(err, file, ""))
}

/// The field error of a failed deserialisation, `prefix` (`line 3: `) before the field path.
fn path_error(
    err: serde_path_to_error::Error<serde_json::Error>,
    file: &str,
    prefix: &str,
) -> ImportError {
    let path = err.path().to_string();
    let field = if path == "." { "(top level)" } else { &path };
    ImportError::Field {
        file: file.to_string(),
        field: format!("{prefix}{field}"),
        message: plain_type_names(&err.into_inner().to_string()),
    }
}

/// `Err((field, message))` unless `v` is a finite number >= 0.
pub(crate) fn non_negative(field: &str, v: f64) -> Result<(), (String, String)> {
    if v.is_finite() && v >= 0.0 {
        return Ok(());
    }
    Err((field.into(), format!("must be a number >= 0, found {v}")))
}

/// Builds the syntax error for text that is not JSON, with the field path reached.
fn syntax_error(text: &str, file: &str) -> ImportError {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, Value>(&mut de) {
        Ok(_) => ImportError::Syntax {
            file: file.into(),
            at: String::new(),
            message: "unparseable".into(),
        },
        Err(err) => {
            let path = err.path().to_string();
            let inner = err.into_inner();
            let hint = if inner.is_eof() {
                " (the file ends early: truncated?)"
            } else {
                ""
            };
            ImportError::Syntax {
                file: file.into(),
                // `?`: the parser had not reached a field (the file ends inside the first one).
                at: if path == "." || path == "?" || path.is_empty() {
                    String::new()
                } else {
                    format!(" at {path}")
                },
                message: format!("{inner}{hint}"),
            }
        }
    }
}

/// Checks what the type system cannot: schema version and the ranges of the headline figures.
fn check_run(run: &RunResults, file: &str, prefix: &str) -> Result<(), ImportError> {
    if run.schema_version < MIN_SCHEMA_VERSION {
        return Err(ImportError::OlderSchema {
            file: file.into(),
            found: run.schema_version.into(),
            min: MIN_SCHEMA_VERSION,
            max: SCHEMA_VERSION,
        });
    }
    if run.schema_version > SCHEMA_VERSION {
        return Err(ImportError::NewerSchema {
            file: file.into(),
            found: run.schema_version.into(),
            supported: SCHEMA_VERSION,
        });
    }
    for (i, cell) in run.cells.iter().enumerate() {
        non_negative("aggregate_tps", cell.aggregate_tps)
            .and_then(|()| {
                (cell.samples.iter().enumerate())
                    .try_for_each(|(j, s)| non_negative(&format!("samples[{j}]"), *s))
            })
            .map_err(|(field, message)| ImportError::Field {
                file: file.into(),
                field: format!("{prefix}cells[{i}].{field}"),
                message,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture::{SEED, seed_run};
    use infergate_schema::asserts::{assert_contains, assert_starts_with};

    /// Asserts `parse_results` refuses `text`, read as `file`, with an error starting `prefix`;
    /// shared by the importers' tests.
    #[track_caller]
    pub(super) fn assert_parse_err(text: &str, file: &str, prefix: &str) {
        let err = parse_results(text, file).unwrap_err().to_string();
        assert_starts_with(&err, prefix);
    }

    #[test]
    fn detects_the_seed_and_rejects_unknown_json() {
        let doc: Value = serde_json::from_str(SEED).unwrap();
        assert_eq!(detect(&doc), Some(ResultsFormat::LlmDecodeBench));
        assert_parse_err(
            "{\"a\": 1}",
            "x.json",
            "x.json: unrecognised results format",
        );
    }

    #[test]
    fn truncated_seed_names_the_file_and_says_truncated() {
        let cut = &SEED[..SEED.len() / 2];
        let err = parse_results(cut, "seed.json").unwrap_err().to_string();
        assert_starts_with(&err, "seed.json: not valid JSON at ");
        assert_contains(&err, "truncated");
    }

    #[test]
    fn wrong_typed_seed_field_is_named() {
        let broken = SEED.replacen(
            "\"aggregate_tps\": 45.43333333333333",
            "\"aggregate_tps\": \"fast\"",
            1,
        );
        assert_ne!(broken, SEED, "fixture text changed");
        let prefix = "seed.json: results[0].aggregate_tps: invalid type: string";
        assert_parse_err(&broken, "seed.json", prefix);
    }

    #[test]
    fn our_schema_round_trips_and_checks_ranges() {
        let run = seed_run();
        let text = serde_json::to_string_pretty(&run).unwrap();
        let back = parse_results(&text, "ours.json").unwrap();
        assert_eq!(back, vec![run.clone()]);
        let mut neg = run.clone();
        neg.cells[3].aggregate_tps = -1.0;
        let err = parse_results(&serde_json::to_string(&neg).unwrap(), "ours.json")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "ours.json: cells[3].aggregate_tps: must be a number >= 0, found -1"
        );
        let wrong = text.replacen(
            "\"aggregate_tps\": ",
            "\"aggregate_tps\": \"x\", \"z\": ",
            1,
        );
        let prefix =
            "ours.json: cells[0].aggregate_tps: invalid type: string \"x\", expected a number";
        assert_parse_err(&wrong, "ours.json", prefix);
        let mut newer: Value = serde_json::from_str(&text).unwrap();
        newer["schema_version"] = 99.into();
        let err = parse_results(&newer.to_string(), "n.json").unwrap_err();
        assert!(matches!(err, ImportError::NewerSchema { found: 99, .. }));
        let mut zero: Value = serde_json::from_str(&text).unwrap();
        zero["schema_version"] = 0.into();
        let err = parse_results(&zero.to_string(), "z.json").unwrap_err();
        assert!(matches!(err, ImportError::OlderSchema { found: 0, .. }));
        assert!(
            err.to_string()
                .contains("z.json: schema_version 0 is not supported")
        );
    }
}
