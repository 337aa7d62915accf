//! Named speed profiles of the simulated engine, and profile files with the same fields.
//!
//! A profile is everything that makes one simulated engine differ from another: served model,
//! context limit, KV budget, the step-time coefficients of the speed model, prefill speed,
//! tokenizer density, jitter, speculative decoding and default faults.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::SimError;
use super::faults::Fault;

/// Whether streamed chunks carry cumulative usage when the client asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum UsageMode {
    /// Like vLLM/SGLang: `continuous_usage_stats` puts cumulative usage on every chunk.
    #[default]
    Continuous,
    /// Like llama.cpp: usage only on the final chunk, whatever the client asked.
    FinalOnly,
}

/// Speculative decoding: each engine step drafts `acceptance.len()` tokens per sequence; draft
/// position `i` is accepted with probability `acceptance[i]` and drafting stops at the first
/// rejection, so a step emits 1 + (accepted drafts) tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SpecDecodeProfile {
    /// Per-position acceptance probabilities (0..=1), one entry per draft position.
    pub(crate) acceptance: Vec<f64>,
}

/// What a measured engine did in one cell of a matrix (`concurrency` streams of `context`
/// prompt tokens), so the simulated engine can reproduce it: the batch's step time is set so
/// the aggregate rate is `tokens_per_s`, drafts are accepted at `acceptance`, and steps are
/// grouped into streamed chunks of `tokens_per_chunk` tokens on average. Cells between the
/// listed ones are interpolated (see [`super::SpeedModel::step_shape`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CellCalibration {
    /// Streams running in the batch.
    pub(crate) concurrency: u32,
    /// Prompt tokens per stream.
    pub(crate) context: u64,
    /// Aggregate output tokens per second of engine time.
    pub(crate) tokens_per_s: f64,
    /// Accepted / drafted tokens (vLLM's acceptance rate), 0..=1; ignored without
    /// `spec_decode`, whose per-position acceptance it replaces in this cell.
    pub(crate) acceptance: Option<f64>,
    /// Mean output tokens per streamed chunk (a chunk carries one or more whole engine
    /// steps, as vLLM's output processor does under load); default one chunk per step.
    pub(crate) tokens_per_chunk: Option<f64>,
}

/// The simulated engine's configuration (see `docs/simulated-engine.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimProfile {
    /// Profile name, reported in `/version` as `0.0.0-infergate-sim+<name>`.
    pub name: String,
    /// Served model name (`/v1/models`); requests for another model get 404.
    pub(crate) model: String,
    /// Longest prompt + max_tokens the engine accepts.
    pub max_model_len: u64,
    /// KV cache size in tokens; admission reserves `(prompt + max_tokens) * kv_cost_per_token`.
    pub(crate) kv_budget_tokens: u64,
    /// KV tokens reserved per prompt/output token (>1 models block rounding and overheads).
    pub(crate) kv_cost_per_token: f64,
    /// Fixed cost of one engine step, milliseconds.
    pub(crate) base_ms: f64,
    /// Extra step cost per running sequence, milliseconds.
    pub(crate) per_seq_ms: f64,
    /// Extra step cost per resident KV token, microseconds: the step pays
    /// `per_kv_token_us * resident_kv_tokens / 1000` milliseconds.
    pub(crate) per_kv_token_us: f64,
    /// Prefill speed in prompt tokens per second of engine time; 0 = instantaneous.
    pub prefill_tps: f64,
    /// Characters per token of the deterministic tokenizer.
    pub(crate) chars_per_token: f64,
    /// Automatic prefix caching: a request prefills only the tokens after its longest cached
    /// prefix (16-token blocks, cache as large as the KV budget). Default on, as in vLLM.
    #[serde(default = "default_true")]
    pub(crate) prefix_caching: bool,
    /// Coefficient of variation of the per-step log-normal jitter (0 = none).
    #[serde(default)]
    pub(crate) jitter_cv: f64,
    /// Speculative decoding, when on.
    pub(crate) spec_decode: Option<SpecDecodeProfile>,
    /// Usage reporting style.
    #[serde(default)]
    pub(crate) usage_mode: UsageMode,
    /// Per-cell calibration from a measured run; when present it sets the step time, draft
    /// acceptance and chunking instead of the step coefficients above.
    #[serde(default)]
    pub(crate) cells: Vec<CellCalibration>,
    /// Faults always active with this profile.
    #[serde(default)]
    pub(crate) faults: Vec<Fault>,
}

fn default_true() -> bool {
    true
}

fn cell(
    concurrency: u32,
    context: u64,
    tokens_per_s: f64,
    acceptance: f64,
    tokens_per_chunk: f64,
) -> CellCalibration {
    CellCalibration {
        concurrency,
        context,
        tokens_per_s,
        acceptance: Some(acceptance),
        tokens_per_chunk: Some(tokens_per_chunk),
    }
}

const NAMES: &[&str] = &["test", "zero", "ldb-rtx5090", "ldb-rtx5090-nospec"];

impl SimProfile {
    /// The built-in profile names, for help texts and error messages.
    pub fn names() -> &'static [&'static str] {
        NAMES
    }

    /// A built-in profile by name.
    pub fn named(name: &str) -> Option<SimProfile> {
        let p = match name {
            // Small and fast: a few hundred tok/s at C=4; C=8 x 32k exceeds the KV budget.
            "test" => SimProfile {
                name: "test".into(),
                model: "sim-test".into(),
                max_model_len: 65_536,
                kv_budget_tokens: 200_000,
                kv_cost_per_token: 1.0,
                base_ms: 5.0,
                per_seq_ms: 1.0,
                per_kv_token_us: 0.01,
                prefill_tps: 200_000.0,
                chars_per_token: 4.0,
                prefix_caching: true,
                jitter_cv: 0.005,
                spec_decode: None,
                usage_mode: UsageMode::Continuous,
                cells: Vec::new(),
                faults: Vec::new(),
            },
            // Zero step time: the engine emits as fast as clients ingest (client benchmark).
            "zero" => SimProfile {
                name: "zero".into(),
                model: "sim-zero".into(),
                max_model_len: 1_048_576,
                kv_budget_tokens: 1_000_000_000,
                base_ms: 0.0,
                per_seq_ms: 0.0,
                per_kv_token_us: 0.0,
                prefill_tps: 0.0,
                jitter_cv: 0.0,
                ..SimProfile::named("test")?
            },
            // Calibrated to llm-decode-bench 0.4.30, vLLM on one RTX 5090 (tests/fixtures).
            "ldb-rtx5090" => SimProfile {
                name: "ldb-rtx5090".into(),
                model: "deepseek-v4-flash-dspark".into(),
                max_model_len: 1_048_576,
                kv_budget_tokens: 1_515_055,
                kv_cost_per_token: 2.25,
                base_ms: 33.6,
                per_seq_ms: 11.0,
                per_kv_token_us: 0.02,
                prefill_tps: 2_200.0,
                chars_per_token: 6.25,
                prefix_caching: true,
                jitter_cv: 0.03,
                spec_decode: Some(SpecDecodeProfile {
                    acceptance: vec![0.7, 0.45],
                }),
                usage_mode: UsageMode::Continuous,
                // the seed's cells that were not capacity-limited: aggregate tok/s,
                // `server_spec_accept_rate`, chunk ITL / token ITL
                cells: vec![
                    cell(1, 8192, 45.4, 0.314, 2.65),
                    cell(2, 8192, 70.2, 0.564, 2.73),
                    cell(4, 8192, 101.3, 0.701, 2.67),
                    cell(8, 8192, 134.3, 0.639, 2.55),
                    cell(12, 8192, 144.2, 0.517, 2.35),
                    cell(1, 32768, 43.8, 0.750, 2.60),
                    cell(2, 32768, 67.5, 0.667, 2.66),
                    cell(4, 32768, 89.1, 0.537, 2.48),
                    cell(8, 32768, 117.3, 0.491, 2.32),
                    cell(12, 32768, 145.5, 0.503, 2.38),
                    cell(1, 65536, 52.6, 0.472, 3.08),
                    cell(2, 65536, 69.1, 0.628, 2.85),
                    cell(4, 65536, 83.1, 0.521, 2.38),
                    cell(8, 65536, 47.3, 0.264, 1.98),
                    cell(1, 131072, 38.3, 0.453, 2.34),
                    cell(2, 131072, 62.6, 0.625, 2.55),
                    cell(4, 131072, 80.0, 0.519, 2.17),
                ],
                faults: Vec::new(),
            },
            // The same engine without speculative decoding: 1 token per step and per chunk at
            // the seed's rates (the cells' step times follow from 1 token per step; the
            // fallback coefficients are divided by the 2.015 tokens/step of p = [0.7, 0.45]).
            "ldb-rtx5090-nospec" => {
                let spec = SimProfile::named("ldb-rtx5090")?;
                SimProfile {
                    name: "ldb-rtx5090-nospec".into(),
                    base_ms: 33.6 / 2.015,
                    per_seq_ms: 11.0 / 2.015,
                    per_kv_token_us: 0.02 / 2.015,
                    spec_decode: None,
                    cells: spec
                        .cells
                        .iter()
                        .map(|c| CellCalibration {
                            acceptance: None,
                            tokens_per_chunk: None,
                            ..c.clone()
                        })
                        .collect(),
                    ..spec
                }
            }
            _ => return None,
        };
        Some(p)
    }

    /// Reads a TOML profile file with the same fields as the built-in profiles; unknown keys
    /// are an error that names the key.
    pub fn load(path: &Path) -> Result<SimProfile, SimError> {
        let err = |message| SimError::ProfileFile {
            path: path.display().to_string(),
            message,
        };
        let text = infergate_io::fsio::read_input(path)
            .map_err(|e| err(format!("cannot read it: {e}")))?;
        let profile: SimProfile = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        profile.validate().map_err(err)?;
        Ok(profile)
    }

    /// Checks the numbers make a runnable engine; the message names the field.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let non_neg = [
            ("base_ms", self.base_ms),
            ("per_seq_ms", self.per_seq_ms),
            ("per_kv_token_us", self.per_kv_token_us),
            ("prefill_tps", self.prefill_tps),
            ("jitter_cv", self.jitter_cv),
        ];
        for (field, v) in non_neg {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "field `{field}` must be a finite number >= 0, got {v}"
                ));
            }
        }
        if !(self.chars_per_token.is_finite() && self.chars_per_token > 0.0) {
            return Err("field `chars_per_token` must be > 0".into());
        }
        if !(self.kv_cost_per_token.is_finite() && self.kv_cost_per_token > 0.0) {
            return Err("field `kv_cost_per_token` must be > 0".into());
        }
        if self.max_model_len == 0 || self.kv_budget_tokens == 0 {
            return Err("fields `max_model_len` and `kv_budget_tokens` must be > 0".into());
        }
        if self.model.trim().is_empty() {
            return Err("field `model` must not be empty".into());
        }
        if let Some(spec) = &self.spec_decode
            && (spec.acceptance.is_empty()
                || spec.acceptance.iter().any(|p| !(0.0..=1.0).contains(p)))
        {
            return Err("field `spec_decode.acceptance` must list probabilities in 0..=1".into());
        }
        for c in &self.cells {
            let at = format!(
                "field `cells` (concurrency {}, context {})",
                c.concurrency, c.context
            );
            if c.concurrency == 0 || c.context == 0 {
                return Err(format!("{at}: `concurrency` and `context` must be > 0"));
            }
            if !(c.tokens_per_s.is_finite() && c.tokens_per_s > 0.0) {
                return Err(format!("{at}: `tokens_per_s` must be > 0"));
            }
            if let Some(a) = c.acceptance
                && !(0.0..=1.0).contains(&a)
            {
                return Err(format!("{at}: `acceptance` must be in 0..=1, got {a}"));
            }
            if let Some(t) = c.tokens_per_chunk {
                let draft_positions = self.spec_decode.as_ref().map_or(0, |s| s.acceptance.len());
                let per_step = 1.0 + draft_positions as f64 * c.acceptance.unwrap_or(0.0);
                if !(t.is_finite() && t >= per_step) {
                    return Err(format!(
                        "{at}: `tokens_per_chunk` must be at least the {per_step:.3} tokens one step emits (1 + draft positions x acceptance): a chunk carries whole steps, got {t}"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::speed_model::SpeedModel;

    #[test]
    fn every_named_profile_exists_and_is_valid() {
        for name in SimProfile::names() {
            let p = SimProfile::named(name).unwrap();
            assert_eq!(&p.name, name);
            p.validate().unwrap();
        }
        assert!(SimProfile::named("nope").is_none());
    }

    /// `scripts/bench/gpu-rate.toml` (the client-cost script's GPU-rate engine) loads, and its
    /// step times give the per-stream rates its header states: 50 tok/s at C=1, 38 at C=64.
    #[test]
    fn the_client_cost_gpu_rate_profile_loads_with_its_stated_rates() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("scripts/bench/gpu-rate.toml");
        let model = SpeedModel::new(&SimProfile::load(&path).unwrap(), 1.0, 1.0, 1.0);
        let per_stream = |c: usize| 1.0 / model.step_time(c, 0);
        assert!((per_stream(1) - 50.0).abs() < 0.5, "{}", per_stream(1));
        assert!((per_stream(64) - 38.0).abs() < 0.5, "{}", per_stream(64));
    }

    #[test]
    fn profile_file_round_trips_and_rejects_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = SimProfile::named("test").unwrap();
        p.faults = vec!["http-500=0.5".parse().unwrap()];
        p.chars_per_token = 1.0;
        let path = dir.path().join("p.toml");
        std::fs::write(&path, toml::to_string(&p).unwrap()).unwrap();
        assert_eq!(SimProfile::load(&path).unwrap(), p);

        let bad = dir.path().join("bad.toml");
        let text = toml::to_string(&p).unwrap().replace("base_ms", "bsae_ms");
        std::fs::write(&bad, text).unwrap();
        let e = SimProfile::load(&bad).unwrap_err().to_string();
        assert!(e.contains("bsae_ms"), "{e}");
        assert!(e.contains("bad.toml"), "{e}");
    }

    #[test]
    fn cell_calibration_is_validated_naming_the_cell() {
        let mut p = SimProfile::named("ldb-rtx5090").unwrap();
        p.cells[0].tokens_per_chunk = Some(1.2);
        let e = p.validate().unwrap_err();
        assert!(e.contains("concurrency 1, context 8192"), "{e}");
        assert!(e.contains("tokens_per_chunk"), "{e}");
        let mut p = SimProfile::named("ldb-rtx5090").unwrap();
        p.cells[3].acceptance = Some(1.5);
        assert!(p.validate().unwrap_err().contains("`acceptance`"));
        p.cells[3].acceptance = None;
        p.cells[3].tokens_per_s = 0.0;
        assert!(p.validate().unwrap_err().contains("`tokens_per_s`"));
        // a profile file with cells round-trips
        let dir = tempfile::tempdir().unwrap();
        let p = SimProfile::named("ldb-rtx5090").unwrap();
        let path = dir.path().join("ldb.toml");
        std::fs::write(&path, toml::to_string(&p).unwrap()).unwrap();
        assert_eq!(SimProfile::load(&path).unwrap(), p);
    }

    #[test]
    fn bad_fault_in_profile_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let p = SimProfile::named("test").unwrap();
        let text = toml::to_string(&p)
            .unwrap()
            .replace("faults = []", "faults = [\"http-500=7\"]");
        let path = dir.path().join("f.toml");
        std::fs::write(&path, text).unwrap();
        let e = SimProfile::load(&path).unwrap_err().to_string();
        assert!(e.contains("http-500=7"), "{e}");
    }
}
