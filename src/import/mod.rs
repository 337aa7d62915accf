//! Readers of results files: infergate's own schema and other tools' output (llm-decode-bench
//! JSON), told apart by their content so `compare` and `baseline add` accept either without a
//! flag. Every error names the file and, where there is one, the field (`cells[3].aggregate_tps`)
//! so a broken file can be fixed without reading this code.

pub mod llm_decode_bench;

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::results::{MIN_SCHEMA_VERSION, RunResults, SCHEMA_VERSION};

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
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
        "{file}: unrecognised results format: expected infergate results (`schema_version` and `tool.name` = \"infergate\") or llm-decode-bench JSON (`metadata.version` and `results[]` with `aggregate_tps`)"
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
pub enum ResultsFormat {
    /// infergate's own results schema (one run, or an array of runs).
    Infergate,
    /// llm-decode-bench JSON (`metadata` + `results[]`).
    LlmDecodeBench,
}

/// Tells the format of a parsed JSON document from its content, `None` when unknown.
pub fn detect(doc: &Value) -> Option<ResultsFormat> {
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
    let is_seed = first
        .get("metadata")
        .and_then(|m| m.get("version"))
        .is_some()
        && first.get("results").is_some_and(|r| {
            r.as_array().is_some_and(|cells| {
                cells.is_empty() || cells.iter().any(|c| c.get("aggregate_tps").is_some())
            })
        });
    if is_seed && !doc.is_array() {
        return Some(ResultsFormat::LlmDecodeBench);
    }
    None
}

/// Reads one results file of any recognised format into runs (one run per file, except an
/// infergate file holding a JSON array of runs).
pub fn load_results(path: &Path) -> Result<Vec<RunResults>, ImportError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
        file: file.clone(),
        source,
    })?;
    parse_results(&text, &file)
}

/// Parses the text of a results file; `file` names it in errors and in import provenance.
pub fn parse_results(text: &str, file: &str) -> Result<Vec<RunResults>, ImportError> {
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(_) => return Err(syntax_error(text, file)),
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
        None => Err(ImportError::UnknownFormat {
            file: file.to_string(),
        }),
    }
}

/// Deserialises `text` as `T`, reporting the field path and line/column of a failure.
pub(crate) fn deserialize_at<T: DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<T, ImportError> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let field = err.path().to_string();
        let message = err.into_inner().to_string();
        ImportError::Field {
            file: file.to_string(),
            field: if field == "." {
                "(top level)".into()
            } else {
                field
            },
            message,
        }
    })
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
                at: if path == "." || path.is_empty() {
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
        let bad = |field: &str, message: String| ImportError::Field {
            file: file.into(),
            field: format!("{prefix}cells[{i}].{field}"),
            message,
        };
        if !(cell.aggregate_tps.is_finite() && cell.aggregate_tps >= 0.0) {
            return Err(bad(
                "aggregate_tps",
                format!("must be a number >= 0, found {}", cell.aggregate_tps),
            ));
        }
        if let Some(j) = cell
            .samples
            .iter()
            .position(|s| !(s.is_finite() && *s >= 0.0))
        {
            return Err(bad(
                &format!("samples[{j}]"),
                format!("must be a number >= 0, found {}", cell.samples[j]),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str =
        include_str!("../../tests/fixtures/llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json");

    #[test]
    fn detects_the_seed_and_rejects_unknown_json() {
        let doc: Value = serde_json::from_str(SEED).unwrap();
        assert_eq!(detect(&doc), Some(ResultsFormat::LlmDecodeBench));
        let err = parse_results("{\"a\": 1}", "x.json").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("x.json: unrecognised results format")
        );
    }

    #[test]
    fn truncated_seed_names_the_file_and_says_truncated() {
        let cut = &SEED[..SEED.len() / 2];
        let err = parse_results(cut, "seed.json").unwrap_err().to_string();
        assert!(err.starts_with("seed.json: not valid JSON at "), "{err}");
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn wrong_typed_seed_field_is_named() {
        let broken = SEED.replacen(
            "\"aggregate_tps\": 45.43333333333333",
            "\"aggregate_tps\": \"fast\"",
            1,
        );
        assert_ne!(broken, SEED, "fixture text changed");
        let err = parse_results(&broken, "seed.json").unwrap_err().to_string();
        assert!(
            err.starts_with("seed.json: results[0].aggregate_tps: invalid type: string"),
            "{err}"
        );
    }

    #[test]
    fn our_schema_round_trips_and_checks_ranges() {
        let run = parse_results(SEED, "seed.json").unwrap().remove(0);
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
        let err = parse_results(&wrong, "ours.json").unwrap_err().to_string();
        assert!(
            err.starts_with(
                "ours.json: cells[0].aggregate_tps: invalid type: string \"x\", expected f64"
            ),
            "{err}"
        );
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
