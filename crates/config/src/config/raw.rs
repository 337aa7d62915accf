//! The config file's raw serde shapes, exactly as TOML spells them. `deny_unknown_fields`
//! everywhere: a typo is an error, never ignored. [`super::build`] turns them into the public
//! model, checking every value against its span.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{AbOrder, CommandSpec, ContextLen, GithubMode, Seconds};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) engine: Spanned<RawEngine>,
    pub(super) model: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) profile: RawProfile,
    pub(super) suites: Spanned<BTreeMap<String, Spanned<RawSuite>>>,
    /// `fail_on` plus any field of [`DecisionRule`] (checked key by key for precise errors).
    #[serde(default)]
    pub(super) thresholds: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    #[serde(default)]
    pub(super) baseline: RawBaseline,
    #[serde(default)]
    pub(super) report: RawReport,
    pub(super) adaptive: Option<Spanned<RawAdaptive>>,
    pub(super) confirm: Option<Spanned<RawConfirm>>,
    pub(super) ab: Option<Spanned<RawAb>>,
    pub(super) bisect: Option<Spanned<super::bisect::RawBisect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfirm {
    pub(super) enabled: Option<bool>,
    /// Removed (the two-boot plan has no knobs but `enabled`); any value, so that the error
    /// says so at its line whatever was written.
    pub(super) p_below: Option<Spanned<toml::Value>>,
    pub(super) first_share: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdaptive {
    pub(super) enabled: Option<bool>,
    pub(super) max_rounds: Option<Spanned<u32>>,
    pub(super) max_extra_seconds: Option<Seconds>,
    /// Removed (one spending function); any value, so that the error says so at its line
    /// whatever was written.
    pub(super) spending: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAb {
    pub(super) rounds: Option<Spanned<u32>>,
    pub(super) order: Option<AbOrder>,
}

/// `[engine.a]` / `[engine.b]`: what differs between the two builds; everything else comes
/// from `[engine]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngineSide {
    pub(super) command: Spanned<CommandSpec>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, Spanned<String>>,
    pub(super) workdir: Option<String>,
    pub(super) log_file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEngine {
    /// Required unless `[engine.a]` and `[engine.b]` are given.
    pub(super) command: Option<Spanned<CommandSpec>>,
    pub(super) a: Option<Spanned<RawEngineSide>>,
    pub(super) b: Option<Spanned<RawEngineSide>>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, Spanned<String>>,
    pub(super) workdir: Option<String>,
    pub(super) readiness_timeout: Option<Spanned<Seconds>>,
    pub(super) log_file: Option<String>,
    pub(super) stop_grace: Option<Seconds>,
    pub(super) api_key_env: Option<String>,
    #[serde(default)]
    pub(super) env_allow: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) secret_args: Vec<String>,
    pub(super) host: Option<String>,
    pub(super) port: Option<u16>,
    pub(super) name: Option<Spanned<String>>,
    pub(super) watchdog: Option<RawWatchdog>,
    pub(super) isolation: Option<Spanned<String>>,
}

/// `[engine.watchdog]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWatchdog {
    pub(super) quiet: Option<Spanned<Seconds>>,
    pub(super) probe_timeout: Option<Spanned<Seconds>>,
    pub(super) probes: Option<Spanned<u32>>,
    pub(super) period: Option<Spanned<Seconds>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    pub(super) hardware: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSuite {
    pub(super) concurrency: Spanned<Vec<Spanned<i64>>>,
    pub(super) contexts: Spanned<Vec<ContextLen>>,
    pub(super) duration: Option<Spanned<Seconds>>,
    pub(super) warmup: Option<Seconds>,
    pub(super) max_tokens: Option<Spanned<u32>>,
    pub(super) unique_context_percent: Option<Spanned<f64>>,
    pub(super) sub_windows: Option<Spanned<u32>>,
    pub(super) repetitions: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) skip: Vec<RawSkip>,
    pub(super) ready_timeout: Option<Seconds>,
    pub(super) capacity_stall: Option<Seconds>,
    pub(super) ready_stable: Option<Seconds>,
    pub(super) request_timeout: Option<Seconds>,
    pub(super) max_stream_tps: Option<Spanned<f64>>,
    pub(super) usage_tolerance: Option<Spanned<f64>>,
    pub(super) skip_doomed: Option<bool>,
    pub(super) prefill_samples: Option<u32>,
    pub(super) prefill_max_context: Option<ContextLen>,
    pub(super) burst: Option<Spanned<RawBurst>>,
    /// Free text for people; not used.
    #[allow(dead_code)]
    pub(super) description: Option<String>,
}

/// `[suites.NAME.burst]`: the burst / end-to-end layer.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBurst {
    pub(super) requests: Spanned<i64>,
    /// Requests per second, or `"inf"` (all at once).
    pub(super) request_rate: Option<Spanned<toml::Value>>,
    pub(super) seed: Option<u64>,
    pub(super) prompt_tokens: Option<ContextLen>,
    pub(super) max_tokens: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) goodput: RawSlo,
}

/// `goodput = { ttft = "200ms", tpot = "20ms", e2el = "2s" }`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSlo {
    pub(super) ttft: Option<Seconds>,
    pub(super) tpot: Option<Seconds>,
    pub(super) e2el: Option<Seconds>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSkip {
    pub(super) concurrency: u32,
    pub(super) context: ContextLen,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBaseline {
    pub(super) dir: Option<String>,
    pub(super) history_runs: Option<Spanned<usize>>,
    /// Earlier keys, refused at their line with the one that replaced them.
    pub(super) level_runs: Option<Spanned<toml::Value>>,
    pub(super) noise_runs: Option<Spanned<toml::Value>>,
    pub(super) allow_no_baseline: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReport {
    pub(super) github: Option<GithubMode>,
    pub(super) log_tail_lines: Option<usize>,
}
