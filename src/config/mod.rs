//! The gate config (`infergate.toml`): which engine to boot, which suites (matrices) to
//! measure, the decision rule's thresholds, where baselines live and how to report.
//!
//! Everything is validated before anything boots: a syntax error, an unknown key, a wrong type
//! or a bad value is a [`ConfigError`] naming `file:line:col` and the fix, and `run` exits 2.
//! The format is documented in `docs/config.md`.

mod bisect;
mod values;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::results::{HardwareFingerprint, MatrixSpec};
use crate::stats::DecisionRule;

pub use crate::policy::FailOn;
pub use bisect::{BisectConfig, DEFAULT_REVS};
pub use values::{CommandSpec, ContextLen, Seconds};

/// The default config, compiled into the binary: boots `infergate sim` so the whole gate runs
/// on a machine with no GPU. `run` uses it when no `--config` is given and there is no
/// `infergate.toml` in the working directory.
pub const EMBEDDED_DEFAULT: &str = include_str!("../../infergate.toml");

/// The name shown for the embedded default in messages.
pub const EMBEDDED_NAME: &str = "<embedded default infergate.toml>";

/// Placeholders the engine command, env values and working dir may contain.
/// `{build}` (the output of `[bisect] build`) is filled by `infergate bisect` only.
pub const PLACEHOLDERS: [&str; 5] = ["port", "host", "model", "infergate", "build"];

/// Why a config cannot be used. Every variant is the user's to fix (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source} (pass an existing file with --config)")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Syntax, type or value error at a position in the file.
    #[error("{path}:{line}:{col}: {message}{}", fix.as_ref().map(|f| format!("\n  fix: {f}")).unwrap_or_default())]
    Invalid {
        path: String,
        line: usize,
        col: usize,
        message: String,
        fix: Option<String>,
    },
    /// `--suite` names a suite the file does not define.
    #[error(
        "{path}: there is no suite `{name}`; the suites in this file are: {available} (pick one with --suite)"
    )]
    UnknownSuite {
        path: String,
        name: String,
        available: String,
    },
}

/// The parsed, validated gate config.
#[derive(Debug, Clone)]
pub struct GateConfig {
    /// The file as named to the user (or [`EMBEDDED_NAME`]).
    pub path: String,
    /// Directory relative paths in the file are resolved against (the file's directory).
    pub base_dir: PathBuf,
    /// How to boot the engine under test.
    pub engine: EngineConfig,
    /// Model to request (and `{model}` in the command); `None` takes the engine's first model.
    pub model: Option<String>,
    /// Overrides of the profile key.
    pub profile: ProfileConfig,
    /// The suites, in file order.
    pub suites: Vec<SuiteConfig>,
    /// The decision rule and what fails the gate.
    pub thresholds: ThresholdsConfig,
    /// Where baselines are stored.
    pub baseline: BaselineConfig,
    /// Reporting options.
    pub report: ReportConfig,
    /// Adaptive re-measurement of inconclusive cells in `run` (`[adaptive]`).
    pub adaptive: AdaptiveConfig,
    /// The confirmation boot of `run` (`[confirm]`).
    pub confirm: ConfirmConfig,
    /// The two builds of a paired A/B run (`[engine.a]`, `[engine.b]`, `[ab]`); `None` when the
    /// file defines no A/B engines.
    pub ab: Option<AbConfig>,
    /// How `infergate bisect` builds the engine at a commit (`[bisect]`).
    pub bisect: Option<BisectConfig>,
}

/// Adaptive re-measurement (`[adaptive]`): after the matrix and the comparison, the cells whose
/// verdict is `inconclusive` are measured again on the still-running engine, up to a budget,
/// with the comparison's alpha spent across the looks (`docs/adaptive-and-ab.md`).
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveConfig {
    /// Off unless the file has an `[adaptive]` table (then on unless `enabled = false`).
    pub enabled: bool,
    /// Most extra rounds (re-measurements of the still-inconclusive cells).
    pub max_rounds: u32,
    /// Most engine-seconds the extra rounds may take; `None` = limited by `max_rounds` only.
    pub max_extra_s: Option<f64>,
    /// Shape of the alpha-spending function over the `1 + max_rounds` looks.
    pub spending: crate::stats::SpendingShape,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            enabled: false,
            max_rounds: 2,
            max_extra_s: None,
            spending: crate::stats::SpendingShape::Pocock,
        }
    }
}

/// The confirmation boot (`[confirm]`): when the first boot's matrix-wide change looks like a
/// regression without proving one, `run` boots the engine a second time, measures the matrix
/// again and tests both boots together, with the matrix test's alpha split between the two
/// stages (`docs/statistics.md`). On by default: one boot cannot tell a uniform −5% from its
/// own boot factor often enough.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmConfig {
    /// On unless `enabled = false`.
    pub enabled: bool,
    /// When to confirm and how alpha is split.
    pub plan: crate::stats::ConfirmPlan,
}

impl Default for ConfirmConfig {
    fn default() -> Self {
        ConfirmConfig {
            enabled: true,
            plan: crate::stats::ConfirmPlan::default(),
        }
    }
}

/// The boot order of a paired A/B run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AbOrder {
    /// A B B A A B B A ...: each pair's order alternates, so a linear drift cancels (default).
    #[default]
    Abba,
    /// A B A B ...: every pair boots A first.
    Ab,
}

impl AbOrder {
    /// The engines to boot, in order, for `pairs` pairs: `(pair index, is_b)`.
    pub fn schedule(self, pairs: u32) -> Vec<(u32, bool)> {
        let mut out = Vec::with_capacity(2 * pairs as usize);
        for i in 0..pairs {
            let b_first = self == AbOrder::Abba && i % 2 == 1;
            out.push((i, b_first));
            out.push((i, !b_first));
        }
        out
    }

    /// `abba` or `ab`.
    pub fn as_str(self) -> &'static str {
        match self {
            AbOrder::Abba => "abba",
            AbOrder::Ab => "ab",
        }
    }
}

/// A paired A/B run: base build A, candidate build B, booted alternately on one runner.
#[derive(Debug, Clone)]
pub struct AbConfig {
    /// `[engine.a]`: the base build.
    pub a: EngineConfig,
    /// `[engine.b]`: the candidate build.
    pub b: EngineConfig,
    /// Pairs of boots (A + B each); `--rounds` overrides.
    pub rounds: u32,
    /// Boot order.
    pub order: AbOrder,
}

/// How to start and stop the engine under test.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The command, with `{port}`, `{host}`, `{model}`, `{infergate}` placeholders.
    pub command: CommandSpec,
    /// Extra environment variables (values may use placeholders).
    pub env: BTreeMap<String, String>,
    /// Working directory of the engine (resolved against the config's directory).
    pub workdir: Option<PathBuf>,
    /// How long the engine may take to answer `/health` and `/v1/models`.
    pub readiness_timeout_s: f64,
    /// Where the engine's stdout/stderr go; `None` = `engine.log` in the output directory.
    pub log_file: Option<PathBuf>,
    /// Grace period between SIGTERM and SIGKILL at teardown.
    pub stop_grace_s: f64,
    /// Environment variable holding the engine's API key (sent as a bearer token, never shown).
    pub api_key_env: Option<String>,
    /// Host the engine listens on (`{host}`), default 127.0.0.1.
    pub host: String,
    /// Fixed port; `None` picks a free one for `{port}`.
    pub port: Option<u16>,
    /// Engine family for the profile key (`vllm`, `sglang`, ...); `None` detects it.
    pub name: Option<String>,
}

/// Profile-key overrides.
#[derive(Debug, Clone, Default)]
pub struct ProfileConfig {
    /// Pins the hardware part of the profile key instead of the detected GPU/CPU, for
    /// simulated or CI runs whose numbers do not depend on the machine (the bundled baseline of
    /// the embedded default uses `sim`).
    pub hardware: Option<String>,
}

impl ProfileConfig {
    /// The fingerprint to key results by: the detected one, or the pinned name.
    pub fn hardware(&self, detected: HardwareFingerprint) -> HardwareFingerprint {
        match &self.hardware {
            Some(name) => HardwareFingerprint {
                kind: "pinned".into(),
                gpu_model: None,
                gpu_count: 0,
                driver_version: None,
                cpu_model: Some(name.clone()),
            },
            None => detected,
        }
    }
}

/// One named matrix and its per-cell timing.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteConfig {
    pub name: String,
    /// 1-based line of the suite's `concurrency` key (annotations point here).
    pub line: usize,
    pub concurrency: Vec<u32>,
    pub contexts: Vec<u64>,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub max_tokens: u32,
    pub unique_context_percent: f64,
    pub sub_windows: u32,
    pub repetitions: u32,
    /// Cells not to run (known not to fit).
    pub skip: Vec<(u32, u64)>,
    /// Per-cell readiness time-out.
    pub ready_timeout_s: f64,
    /// Admission stalled this long → `capacity_limited`.
    pub capacity_stall_s: f64,
    /// Readiness must hold this long before warm-up.
    pub ready_stable_s: f64,
    /// No byte on a stream for this long → stream error.
    pub request_timeout_s: f64,
    /// Skip a larger concurrency at a context where a smaller one was already capacity-limited.
    pub skip_doomed: bool,
}

impl SuiteConfig {
    /// The measurement settings for `model`.
    pub fn matrix_spec(&self, model: &str) -> MatrixSpec {
        MatrixSpec {
            model: model.to_string(),
            concurrency: self.concurrency.clone(),
            contexts: self.contexts.clone(),
            duration_s: self.duration_s,
            warmup_s: self.warmup_s,
            max_tokens: self.max_tokens,
            unique_context_percent: self.unique_context_percent,
            sub_windows: self.sub_windows,
            repetitions: self.repetitions,
        }
    }

    /// Number of cells of one repetition.
    pub fn cells(&self) -> usize {
        self.concurrency.len() * self.contexts.len()
    }
}

/// The decision rule and the gate policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdsConfig {
    pub rule: DecisionRule,
    pub fail_on: FailOn,
}

/// Baseline store location.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineConfig {
    /// Store directory (resolved against the config's directory).
    pub dir: PathBuf,
}

/// When to report to GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GithubMode {
    /// Only inside GitHub Actions (`GITHUB_ACTIONS=true`) or with `--github`.
    #[default]
    Auto,
    /// Always (fails softly without a token).
    Always,
    /// Never, even in Actions.
    Never,
}

/// Reporting options.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportConfig {
    pub github: GithubMode,
    /// Lines of the engine log shown when the engine fails.
    pub log_tail_lines: usize,
}

// ---------------------------------------------------------------------------------------------
// Raw (file) shapes. `deny_unknown_fields` everywhere: a typo is an error, never ignored.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    engine: Spanned<RawEngine>,
    model: Option<Spanned<String>>,
    #[serde(default)]
    profile: RawProfile,
    suites: Spanned<BTreeMap<String, Spanned<RawSuite>>>,
    /// `fail_on` plus any field of [`DecisionRule`] (checked key by key for precise errors).
    #[serde(default)]
    thresholds: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    #[serde(default)]
    baseline: RawBaseline,
    #[serde(default)]
    report: RawReport,
    adaptive: Option<Spanned<RawAdaptive>>,
    confirm: Option<Spanned<RawConfirm>>,
    ab: Option<Spanned<RawAb>>,
    bisect: Option<Spanned<bisect::RawBisect>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfirm {
    enabled: Option<bool>,
    p_below: Option<Spanned<f64>>,
    first_share: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdaptive {
    enabled: Option<bool>,
    max_rounds: Option<Spanned<u32>>,
    max_extra_seconds: Option<Seconds>,
    spending: Option<crate::stats::SpendingShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAb {
    rounds: Option<Spanned<u32>>,
    order: Option<AbOrder>,
}

/// `[engine.a]` / `[engine.b]`: what differs between the two builds; everything else comes
/// from `[engine]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEngineSide {
    command: Spanned<CommandSpec>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    workdir: Option<String>,
    log_file: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    /// Required unless `[engine.a]` and `[engine.b]` are given.
    command: Option<Spanned<CommandSpec>>,
    a: Option<Spanned<RawEngineSide>>,
    b: Option<Spanned<RawEngineSide>>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    workdir: Option<String>,
    readiness_timeout: Option<Spanned<Seconds>>,
    log_file: Option<String>,
    stop_grace: Option<Seconds>,
    api_key_env: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    name: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    hardware: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    concurrency: Spanned<Vec<Spanned<i64>>>,
    contexts: Spanned<Vec<ContextLen>>,
    duration: Option<Spanned<Seconds>>,
    warmup: Option<Seconds>,
    max_tokens: Option<Spanned<u32>>,
    unique_context_percent: Option<Spanned<f64>>,
    sub_windows: Option<Spanned<u32>>,
    repetitions: Option<Spanned<u32>>,
    #[serde(default)]
    skip: Vec<RawSkip>,
    ready_timeout: Option<Seconds>,
    capacity_stall: Option<Seconds>,
    ready_stable: Option<Seconds>,
    request_timeout: Option<Seconds>,
    skip_doomed: Option<bool>,
    /// Free text for people; not used.
    #[allow(dead_code)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSkip {
    concurrency: u32,
    context: ContextLen,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawBaseline {
    dir: Option<String>,
    level_runs: Option<Spanned<usize>>,
    noise_runs: Option<Spanned<usize>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawReport {
    github: Option<GithubMode>,
    log_tail_lines: Option<usize>,
}

/// Turns byte offsets into `file:line:col` errors.
struct Locator<'a> {
    path: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit_once('\n')
            .map_or(before, |(_, tail)| tail)
            .chars()
            .count()
            + 1;
        (line, col)
    }

    fn at(&self, span: Range<usize>, message: impl Into<String>, fix: Option<&str>) -> ConfigError {
        let (line, col) = self.line_col(span.start);
        ConfigError::Invalid {
            path: self.path.to_string(),
            line,
            col,
            message: message.into(),
            fix: fix.map(str::to_string),
        }
    }

    fn toml_error(&self, err: &toml::de::Error) -> ConfigError {
        let mut message = err.message().trim().to_string();
        // Value errors of this module's own types say "<problem>: write <fix>".
        if let Some((problem, fix)) = message.clone().split_once(": write ") {
            message = problem.to_string();
            let (line, col) = err.span().map_or((1, 1), |s| self.line_col(s.start));
            return ConfigError::Invalid {
                path: self.path.to_string(),
                line,
                col,
                message,
                fix: Some(format!("write {fix}")),
            };
        }
        let fix = if message.contains("unknown field") {
            Some(
                "remove the key or correct its spelling (the keys allowed here are listed above; see docs/config.md)",
            )
        } else if message.contains("unknown variant") {
            Some("use one of the values listed above")
        } else if message.contains("missing field") {
            Some("add the key (see docs/config.md for the full format)")
        } else if message.contains("invalid type") {
            Some("write the value with the type named above (strings in quotes, lists in [ ])")
        } else {
            None
        };
        let (line, col) = err.span().map_or((1, 1), |s| self.line_col(s.start));
        ConfigError::Invalid {
            path: self.path.to_string(),
            line,
            col,
            message,
            fix: fix.map(str::to_string),
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl GateConfig {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<GateConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        GateConfig::parse(&text, &shown, &base)
    }

    /// The embedded default, with relative paths resolved against the working directory.
    pub fn embedded_default() -> Result<GateConfig, ConfigError> {
        GateConfig::parse(EMBEDDED_DEFAULT, EMBEDDED_NAME, Path::new("."))
    }

    /// Parses and validates config text; `path` is only used in messages.
    pub fn parse(text: &str, path: &str, base_dir: &Path) -> Result<GateConfig, ConfigError> {
        let loc = Locator { path, text };
        if let Err(e) = text.parse::<toml::Table>() {
            let (line, col) = e.span().map_or((1, 1), |s| loc.line_col(s.start));
            return Err(ConfigError::Invalid {
                path: path.to_string(),
                line,
                col,
                message: format!("TOML syntax error: {}", e.message().trim()),
                fix: Some("fix the TOML syntax at this position (strings in quotes, lists in [ ], one key = value per line)".into()),
            });
        }
        let raw: RawConfig = toml::from_str(text).map_err(|e| loc.toml_error(&e))?;

        let model = match raw.model {
            Some(m) if m.get_ref().trim().is_empty() => {
                return Err(loc.at(
                    m.span(),
                    "`model` is empty",
                    Some("write the served model name, or remove the key to use the engine's first model"),
                ));
            }
            Some(m) => Some(m.into_inner()),
            None => None,
        };

        bisect::check_build_placeholder(&raw.engine, raw.bisect.is_some(), &loc)?;
        let bisect = bisect::build_bisect(raw.bisect, base_dir, &loc)?;
        let (engine, ab_engines) = build_engine(raw.engine, model.is_some(), &loc, base_dir)?;
        let adaptive = build_adaptive(raw.adaptive, &loc)?;
        let confirm = build_confirm(raw.confirm, &loc)?;
        let ab = build_ab(raw.ab, ab_engines, &loc)?;

        let profile = ProfileConfig {
            hardware: match raw.profile.hardware {
                Some(h) if crate::results::path_safe(h.get_ref()) != h.get_ref().to_lowercase() => {
                    return Err(loc.at(
                        h.span(),
                        format!("[profile] hardware = \"{}\" is not a simple name", h.get_ref()),
                        Some("use letters, digits, `-` and `.` only, e.g. \"sim\" or \"ci-runner-a\""),
                    ));
                }
                Some(h) => Some(h.into_inner()),
                None => None,
            },
        };

        let suites_span = raw.suites.span();
        let mut suites = Vec::new();
        for (name, suite) in raw.suites.into_inner() {
            suites.push(build_suite(name, suite, &loc)?);
        }
        if suites.is_empty() {
            return Err(loc.at(
                suites_span,
                "no suite defined",
                Some("add a suite, e.g. [suites.pr] with concurrency = [1, 2, 4] and contexts = [\"0\", \"8k\"]"),
            ));
        }
        // File order (the TOML map is sorted by name).
        suites.sort_by_key(|s| s.line);

        let (thresholds, thresholds_span) = match raw.thresholds {
            Some(t) => {
                let span = t.span();
                (t.into_inner(), span)
            }
            None => (BTreeMap::new(), 0..0),
        };
        let (rule, fail_on) = build_rule(thresholds, thresholds_span, &raw.baseline, &loc)?;

        let baseline = BaselineConfig {
            dir: base_dir.join(raw.baseline.dir.as_deref().unwrap_or("baselines")),
        };
        let report = ReportConfig {
            github: raw.report.github.unwrap_or_default(),
            log_tail_lines: raw.report.log_tail_lines.unwrap_or(20),
        };
        Ok(GateConfig {
            path: path.to_string(),
            base_dir: base_dir.to_path_buf(),
            engine,
            model,
            profile,
            suites,
            thresholds: ThresholdsConfig { rule, fail_on },
            baseline,
            report,
            adaptive,
            confirm,
            ab,
            bisect,
        })
    }

    /// The suite named `name`, or the default one (`pr` when defined, else the first in the
    /// file).
    pub fn suite(&self, name: Option<&str>) -> Result<&SuiteConfig, ConfigError> {
        match name {
            Some(n) => {
                self.suites
                    .iter()
                    .find(|s| s.name == n)
                    .ok_or_else(|| ConfigError::UnknownSuite {
                        path: self.path.clone(),
                        name: n.to_string(),
                        available: self.suite_names().join(", "),
                    })
            }
            None => Ok(self
                .suites
                .iter()
                .find(|s| s.name == "pr")
                .unwrap_or(&self.suites[0])),
        }
    }

    /// Suite names in file order.
    pub fn suite_names(&self) -> Vec<&str> {
        self.suites.iter().map(|s| s.name.as_str()).collect()
    }
}

/// The decision rule from `[thresholds]` (any [`DecisionRule`] field, plus `fail_on`) and
/// `[baseline] level_runs / noise_runs`. Each key is deserialized alone first so an error points
/// at its own line.
fn build_rule(
    thresholds: BTreeMap<String, Spanned<toml::Value>>,
    thresholds_span: Range<usize>,
    baseline: &RawBaseline,
    loc: &Locator,
) -> Result<(DecisionRule, FailOn), ConfigError> {
    let mut fail_on = FailOn::default();
    let mut spans: Vec<(String, Range<usize>)> = Vec::new();
    let mut table = toml::Table::new();
    for (key, value) in thresholds {
        let span = value.span();
        let value = value.into_inner();
        if key == "fail_on" {
            fail_on = FailOn::deserialize(value).map_err(|e| {
                loc.at(
                    span,
                    format!("[thresholds] fail_on: {}", e.message().trim()),
                    Some("write fail_on = \"regression\", \"inconclusive\" or \"never\""),
                )
            })?;
            continue;
        }
        if key == "inconclusive_fails" {
            return Err(loc.at(
                span,
                "[thresholds] inconclusive_fails is set by fail_on",
                Some("write fail_on = \"inconclusive\" instead"),
            ));
        }
        if matches!(key.as_str(), "level_runs" | "noise_runs") {
            return Err(loc.at(
                span,
                format!("{key} belongs in [baseline], not [thresholds]"),
                Some("move the key to the [baseline] table"),
            ));
        }
        let mut one = toml::Table::new();
        one.insert(key.clone(), value.clone());
        if let Err(e) = DecisionRule::deserialize(toml::Value::Table(one)) {
            let msg = e.message().trim().to_string();
            let fix = if msg.contains("unknown field") {
                "remove the key or correct its spelling (allowed keys are listed above, plus fail_on; see docs/config.md)"
            } else {
                "see docs/config.md for the type and range of each threshold"
            };
            return Err(loc.at(span, format!("[thresholds] {key}: {msg}"), Some(fix)));
        }
        spans.push((key.clone(), span));
        table.insert(key, value);
    }
    for (field, value) in [
        ("level_runs", &baseline.level_runs),
        ("noise_runs", &baseline.noise_runs),
    ] {
        if let Some(v) = value {
            if *v.get_ref() == 0 {
                return Err(loc.at(
                    v.span(),
                    format!("[baseline] {field} = 0: at least one run is needed"),
                    Some("use a positive number (defaults: level_runs = 5, noise_runs = 20)"),
                ));
            }
            table.insert(field.to_string(), toml::Value::Integer(*v.get_ref() as i64));
        }
    }
    table.insert(
        "inconclusive_fails".into(),
        toml::Value::Boolean(fail_on == FailOn::Inconclusive),
    );
    let rule = DecisionRule::deserialize(toml::Value::Table(table)).map_err(|e| {
        loc.at(
            thresholds_span.clone(),
            format!("[thresholds] {}", e.message().trim()),
            None,
        )
    })?;
    if let Err(e) = rule.validate() {
        let msg = e.to_string();
        // Point at the key the message is about, when it is one of the file's keys.
        let span = spans
            .iter()
            .find(|(k, _)| msg.contains(&format!("{k} =")) || msg.contains(&format!("{k} ")))
            .map_or(thresholds_span, |(_, s)| s.clone());
        return Err(loc.at(
            span,
            format!("[thresholds] {msg}"),
            Some("see docs/config.md for the valid ranges"),
        ));
    }
    Ok((rule, fail_on))
}

fn check_placeholders(
    loc: &Locator,
    span: Range<usize>,
    text: &str,
    has_model: bool,
) -> Result<(), ConfigError> {
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let preceded_by_dollar = open > 0 && rest.as_bytes()[open - 1] == b'$';
        if let Some(close) = after.find('}') {
            let name = &after[..close];
            let is_ident =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if is_ident && !preceded_by_dollar {
                if !PLACEHOLDERS.contains(&name) {
                    return Err(loc.at(
                        span,
                        format!("unknown placeholder `{{{name}}}` in the engine command"),
                        Some("use {port}, {host}, {model}, {infergate} (the path of this infergate binary) or {build} (with [bisect])"),
                    ));
                }
                if name == "model" && !has_model {
                    return Err(loc.at(
                        span,
                        "the engine command uses `{model}` but no `model` is set",
                        Some("add `model = \"...\"` at the top of the file"),
                    ));
                }
            }
            rest = &after[close + 1..];
        } else {
            break;
        }
    }
    Ok(())
}

/// The engines of the file: `[engine]` (what `run` boots) and, when both `[engine.a]` and
/// `[engine.b]` are given, the two builds of an A/B run (each `[engine]` with its own command,
/// env additions, workdir and log file). Without an `[engine] command`, `run` boots A.
fn build_engine(
    raw: Spanned<RawEngine>,
    has_model: bool,
    loc: &Locator,
    base_dir: &Path,
) -> Result<(EngineConfig, Option<(EngineConfig, EngineConfig)>), ConfigError> {
    let engine_span = raw.span();
    let mut raw = raw.into_inner();
    let side_a = raw.a.take();
    let side_b = raw.b.take();
    let command = raw.command.take();
    if let Some(c) = &command {
        for part in c.get_ref().parts() {
            check_placeholders(loc, c.span(), part, has_model)?;
        }
    }
    let mut env = BTreeMap::new();
    for (k, v) in std::mem::take(&mut raw.env) {
        check_placeholders(loc, v.span(), v.get_ref(), has_model)?;
        env.insert(k, v.into_inner());
    }
    let readiness_timeout_s = match raw.readiness_timeout {
        Some(t) if t.get_ref().0 <= 0.0 => {
            return Err(loc.at(
                t.span(),
                "readiness_timeout must be greater than zero",
                Some("give the engine time to load, e.g. readiness_timeout = \"10m\""),
            ));
        }
        Some(t) => t.into_inner().0,
        None => 900.0,
    };
    if let Some(n) = &raw.name
        && n.get_ref().trim().is_empty()
    {
        return Err(loc.at(
            n.span(),
            "[engine] name is empty",
            Some("write the engine family (vllm, sglang, llamacpp, ...) or remove the key to detect it"),
        ));
    }
    let base = |command: CommandSpec| EngineConfig {
        command,
        env: env.clone(),
        workdir: raw.workdir.as_ref().map(|w| base_dir.join(w)),
        readiness_timeout_s,
        log_file: raw.log_file.as_ref().map(PathBuf::from),
        stop_grace_s: raw.stop_grace.map_or(15.0, |s| s.0),
        api_key_env: raw.api_key_env.clone(),
        host: raw.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
        port: raw.port.filter(|p| *p != 0),
        name: raw.name.as_ref().map(|n| n.get_ref().clone()),
    };
    let side = |s: Spanned<RawEngineSide>| -> Result<EngineConfig, ConfigError> {
        let s = s.into_inner();
        let cmd_span = s.command.span();
        for part in s.command.get_ref().parts() {
            check_placeholders(loc, cmd_span.clone(), part, has_model)?;
        }
        let mut cfg = base(s.command.into_inner());
        for (k, v) in s.env {
            check_placeholders(loc, v.span(), v.get_ref(), has_model)?;
            cfg.env.insert(k, v.into_inner());
        }
        if let Some(w) = s.workdir {
            cfg.workdir = Some(base_dir.join(w));
        }
        if let Some(l) = s.log_file {
            cfg.log_file = Some(PathBuf::from(l));
        }
        Ok(cfg)
    };
    let ab = match (side_a, side_b) {
        (Some(a), Some(b)) => Some((side(a)?, side(b)?)),
        (None, None) => None,
        (Some(s), None) | (None, Some(s)) => {
            return Err(loc.at(
                s.span(),
                "an A/B config needs both [engine.a] (the base build) and [engine.b] (the candidate)",
                Some("add the missing table with its `command`, or remove this one"),
            ));
        }
    };
    let engine = match (command, &ab) {
        (Some(c), _) => base(c.into_inner()),
        (None, Some((a, _))) => a.clone(),
        (None, None) => {
            return Err(loc.at(
                engine_span,
                "[engine] has no `command`",
                Some("add the command that starts the engine, e.g. command = [\"vllm\", \"serve\", \"{model}\", \"--port\", \"{port}\"] (or [engine.a] and [engine.b] for `infergate ab`)"),
            ));
        }
    };
    Ok((engine, ab))
}

/// `[adaptive]`: on when the table is present unless `enabled = false`.
fn build_adaptive(
    raw: Option<Spanned<RawAdaptive>>,
    loc: &Locator,
) -> Result<AdaptiveConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(AdaptiveConfig::default());
    };
    let raw = raw.into_inner();
    let mut cfg = AdaptiveConfig {
        enabled: raw.enabled.unwrap_or(true),
        ..AdaptiveConfig::default()
    };
    if let Some(r) = raw.max_rounds {
        if !(1..=20).contains(r.get_ref()) {
            return Err(loc.at(
                r.span(),
                format!("[adaptive] max_rounds = {} is out of range", r.get_ref()),
                Some("write 1 to 20 extra rounds (default 2), or enabled = false to turn re-measurement off"),
            ));
        }
        cfg.max_rounds = r.into_inner();
    }
    cfg.max_extra_s = raw.max_extra_seconds.map(|s| s.0);
    if let Some(shape) = raw.spending {
        cfg.spending = shape;
    }
    Ok(cfg)
}

/// `[confirm]`: on by default; the table tunes it or turns it off.
fn build_confirm(
    raw: Option<Spanned<RawConfirm>>,
    loc: &Locator,
) -> Result<ConfirmConfig, ConfigError> {
    let Some(raw) = raw else {
        return Ok(ConfirmConfig::default());
    };
    let raw = raw.into_inner();
    let mut cfg = ConfirmConfig {
        enabled: raw.enabled.unwrap_or(true),
        ..ConfirmConfig::default()
    };
    if let Some(p) = raw.p_below {
        if !(*p.get_ref() > 0.0 && *p.get_ref() <= 0.5) {
            return Err(loc.at(
                p.span(),
                format!("[confirm] p_below = {} is out of range", p.get_ref()),
                Some("write a p-value in (0, 0.5] (default 0.05: about 5% of clean PRs boot twice), or enabled = false"),
            ));
        }
        cfg.plan.p_below = p.into_inner();
    }
    if let Some(f) = raw.first_share {
        if !(*f.get_ref() > 0.0 && *f.get_ref() < 1.0) {
            return Err(loc.at(
                f.span(),
                format!("[confirm] first_share = {} is out of range", f.get_ref()),
                Some("write the share of the matrix test's alpha spent at the first boot, in (0, 1) (default 0.5)"),
            ));
        }
        cfg.plan.first_share = f.into_inner();
    }
    Ok(cfg)
}

/// `[ab]` plus the two engines.
fn build_ab(
    raw: Option<Spanned<RawAb>>,
    engines: Option<(EngineConfig, EngineConfig)>,
    loc: &Locator,
) -> Result<Option<AbConfig>, ConfigError> {
    let (rounds, order) = match raw {
        Some(r) => {
            let span = r.span();
            let r = r.into_inner();
            if engines.is_none() {
                return Err(loc.at(
                    span,
                    "[ab] is set but the file has no [engine.a] and [engine.b]",
                    Some("add [engine.a] and [engine.b] tables, each with the `command` of one build"),
                ));
            }
            let rounds = match r.rounds {
                Some(n) if !(2..=100).contains(n.get_ref()) => {
                    return Err(loc.at(
                        n.span(),
                        format!("[ab] rounds = {} is out of range", n.get_ref()),
                        Some("write 2 to 100 pairs of boots (default 4: A B B A A B B A); the paired test needs at least 2"),
                    ));
                }
                Some(n) => n.into_inner(),
                None => 4,
            };
            (rounds, r.order.unwrap_or_default())
        }
        None => (4, AbOrder::default()),
    };
    Ok(engines.map(|(a, b)| AbConfig {
        a,
        b,
        rounds,
        order,
    }))
}

fn build_suite(
    name: String,
    raw: Spanned<RawSuite>,
    loc: &Locator,
) -> Result<SuiteConfig, ConfigError> {
    let raw = raw.into_inner();
    let conc_span = raw.concurrency.span();
    let (line, _) = loc.line_col(conc_span.start);
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(loc.at(
            conc_span,
            format!("suite name `{name}` has characters other than letters, digits, `-` and `_`"),
            Some("rename the [suites.NAME] table, e.g. [suites.pr]"),
        ));
    }
    let mut concurrency = Vec::new();
    for c in raw.concurrency.get_ref() {
        let v = *c.get_ref();
        if !(1..=100_000).contains(&v) {
            return Err(loc.at(
                c.span(),
                format!("[suites.{name}] concurrency {v} is out of range"),
                Some("concurrency levels are numbers of parallel streams: 1 or more, e.g. [1, 2, 4, 8]"),
            ));
        }
        concurrency.push(v as u32);
    }
    if concurrency.is_empty() {
        return Err(loc.at(
            conc_span,
            format!("[suites.{name}] concurrency is empty"),
            Some("list at least one level, e.g. concurrency = [1, 2, 4]"),
        ));
    }
    concurrency.sort_unstable();
    concurrency.dedup();
    let mut contexts: Vec<u64> = raw.contexts.get_ref().iter().map(|c| c.0).collect();
    if contexts.is_empty() {
        return Err(loc.at(
            raw.contexts.span(),
            format!("[suites.{name}] contexts is empty"),
            Some("list at least one context length, e.g. contexts = [\"0\", \"8k\", \"32k\"]"),
        ));
    }
    contexts.sort_unstable();
    contexts.dedup();
    let duration_s = match raw.duration {
        Some(d) if d.get_ref().0 <= 0.0 => {
            return Err(loc.at(
                d.span(),
                format!("[suites.{name}] duration must be greater than zero"),
                Some("write the steady-state window per cell, e.g. duration = \"10s\""),
            ));
        }
        Some(d) => d.into_inner().0,
        None => 10.0,
    };
    let positive = |v: Option<Spanned<u32>>, key: &str, default: u32, fix: &str| match v {
        Some(v) if *v.get_ref() == 0 => Err(loc.at(
            v.span(),
            format!("[suites.{name}] {key} must be at least 1"),
            Some(fix),
        )),
        Some(v) => Ok(v.into_inner()),
        None => Ok(default),
    };
    let max_tokens = positive(raw.max_tokens, "max_tokens", 512, "e.g. max_tokens = 512")?;
    let sub_windows = positive(
        raw.sub_windows,
        "sub_windows",
        5,
        "e.g. sub_windows = 5 (samples per cell for statistics)",
    )?;
    let repetitions = positive(raw.repetitions, "repetitions", 1, "e.g. repetitions = 1")?;
    let unique_context_percent = match raw.unique_context_percent {
        Some(p) if !(0.0..=100.0).contains(p.get_ref()) => {
            return Err(loc.at(
                p.span(),
                format!(
                    "[suites.{name}] unique_context_percent = {} is outside 0..=100",
                    p.get_ref()
                ),
                Some("write the share of each prompt unique to its stream, e.g. 25"),
            ));
        }
        Some(p) => p.into_inner(),
        None => 25.0,
    };
    Ok(SuiteConfig {
        name,
        line,
        concurrency,
        contexts,
        duration_s,
        warmup_s: raw.warmup.map_or(3.0, |s| s.0),
        max_tokens,
        unique_context_percent,
        sub_windows,
        repetitions,
        skip: raw
            .skip
            .iter()
            .map(|s| (s.concurrency, s.context.0))
            .collect(),
        ready_timeout_s: raw.ready_timeout.map_or(120.0, |s| s.0).max(0.1),
        capacity_stall_s: raw.capacity_stall.map_or(3.0, |s| s.0).max(0.1),
        ready_stable_s: raw.ready_stable.map_or(2.5, |s| s.0),
        request_timeout_s: raw.request_timeout.map_or(60.0, |s| s.0).max(0.1),
        skip_doomed: raw.skip_doomed.unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
model = "m"

[engine]
command = ["{infergate}", "sim", "--port", "{port}", "--model", "{model}"]
readiness_timeout = "30s"

[profile]
hardware = "sim"

[suites.nightly]
concurrency = [4, 1, 2]
contexts = ["8k", 0, "32k"]
duration = "5s"

[suites.pr]
concurrency = [1]
contexts = ["0"]
duration = 2

[thresholds]
min_effect = 0.05
fail_on = "inconclusive"

[baseline]
level_runs = 3
"#;

    fn parse(text: &str) -> Result<GateConfig, ConfigError> {
        GateConfig::parse(text, "t.toml", Path::new("/cfg"))
    }

    fn err(text: &str) -> String {
        parse(text)
            .expect_err("config should be rejected")
            .to_string()
    }

    #[test]
    fn a_good_config_parses_with_file_order_and_defaults() {
        let c = parse(GOOD).expect("valid");
        assert_eq!(c.suite_names(), vec!["nightly", "pr"]);
        assert_eq!(c.suite(None).expect("default").name, "pr");
        let n = c.suite(Some("nightly")).expect("nightly");
        assert_eq!(n.concurrency, vec![1, 2, 4]);
        assert_eq!(n.contexts, vec![0, 8192, 32768]);
        assert_eq!(n.duration_s, 5.0);
        assert_eq!(n.line, 12);
        assert_eq!(c.engine.readiness_timeout_s, 30.0);
        assert_eq!(c.thresholds.rule.min_effect, 0.05);
        assert!(c.thresholds.rule.inconclusive_fails);
        assert_eq!(c.thresholds.rule.level_runs, 3);
        assert_eq!(c.baseline.dir, PathBuf::from("/cfg/baselines"));
        assert_eq!(c.profile.hardware.as_deref(), Some("sim"));
    }

    #[test]
    fn unknown_suite_lists_the_suites() {
        let c = parse(GOOD).expect("valid");
        let e = c.suite(Some("weekly")).expect_err("unknown").to_string();
        assert!(e.contains("nightly, pr"), "{e}");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let e = err("[engine]\ncommand = [\"x\"\n");
        assert!(e.starts_with("t.toml:"), "{e}");
    }

    #[test]
    fn unknown_key_names_line_and_fix() {
        let text = GOOD.replace("duration = \"5s\"", "durration = \"5s\"");
        let e = err(&text);
        assert!(e.starts_with("t.toml:14:"), "{e}");
        assert!(e.contains("durration") && e.contains("fix:"), "{e}");
    }

    #[test]
    fn negative_duration_is_rejected_at_its_line() {
        let e = err(&GOOD.replace("duration = \"5s\"", "duration = \"-5s\""));
        assert!(e.starts_with("t.toml:14:"), "{e}");
        assert!(e.contains("negative") && e.contains("fix: write"), "{e}");
        let e = err(&GOOD.replace("duration = 2", "duration = -2"));
        assert!(e.starts_with("t.toml:19:"), "{e}");
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(err(&GOOD.replace("concurrency = [1]", "concurrency = []")).contains("t.toml:17:"));
        assert!(
            err(&GOOD.replace("concurrency = [1]", "concurrency = [0]")).contains("out of range")
        );
        assert!(err(&GOOD.replace("\"{model}\"]", "\"{modle}\"]")).contains("unknown placeholder"));
        assert!(err(&GOOD.replace("model = \"m\"", "")).contains("no `model`"));
        assert!(err(&GOOD.replace("min_effect = 0.05", "alpha = 2.0")).contains("alpha"));
        assert!(
            err(&GOOD.replace("concurrency = [1]", "concurrency = \"1\"")).contains("invalid type")
        );
        assert!(
            err(&GOOD.replace("fail_on = \"inconclusive\"", "fail_on = \"sometimes\""))
                .contains("sometimes")
        );
    }

    #[test]
    fn command_may_be_a_shell_line() {
        let c = parse(&GOOD.replace(
            "command = [\"{infergate}\", \"sim\", \"--port\", \"{port}\", \"--model\", \"{model}\"]",
            "command = \"exec ${HOME}/x --port {port}\"",
        ))
        .expect("valid");
        assert!(matches!(c.engine.command, CommandSpec::Shell(_)));
    }

    #[test]
    fn every_example_config_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let entries = std::fs::read_dir(&dir).expect("examples/");
        let mut n = 0;
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "toml") {
                if let Err(err) = GateConfig::load(&p) {
                    panic!("{err}");
                }
                n += 1;
            }
        }
        assert!(n >= 2, "examples/*.toml expected");
    }

    const AB: &str = r#"
model = "m"

[engine]
name = "sim"
stop_grace = "2s"
env = { SHARED = "1" }

[engine.a]
command = ["{infergate}", "sim", "--port", "{port}"]

[engine.b]
command = "exec {infergate} sim --port {port} --slowdown 1.05"
env = { ONLY_B = "{port}" }

[ab]
rounds = 3
order = "ab"

[adaptive]
max_rounds = 3
max_extra_seconds = "90s"
spending = "o_brien_fleming"

[suites.pr]
concurrency = [1]
contexts = ["0"]
"#;

    #[test]
    fn ab_engines_inherit_engine_settings_and_adaptive_parses() {
        let c = parse(AB).expect("valid A/B config");
        let ab = c.ab.as_ref().expect("ab");
        assert_eq!(ab.rounds, 3);
        assert_eq!(ab.order, AbOrder::Ab);
        assert_eq!(ab.a.stop_grace_s, 2.0);
        assert_eq!(ab.b.name.as_deref(), Some("sim"));
        assert!(matches!(ab.b.command, CommandSpec::Shell(_)));
        assert_eq!(ab.b.env.get("SHARED").map(String::as_str), Some("1"));
        assert!(ab.b.env.contains_key("ONLY_B") && !ab.a.env.contains_key("ONLY_B"));
        // `run` on an A/B-only file boots A.
        assert_eq!(c.engine.command, ab.a.command);
        assert!(c.adaptive.enabled);
        assert_eq!(c.adaptive.max_rounds, 3);
        assert_eq!(c.adaptive.max_extra_s, Some(90.0));
        assert_eq!(
            c.adaptive.spending,
            crate::stats::SpendingShape::OBrienFleming
        );
        // Without the tables: no A/B, adaptive off.
        let plain = parse(GOOD).expect("valid");
        assert!(plain.ab.is_none() && !plain.adaptive.enabled);
    }

    #[test]
    fn bad_ab_and_adaptive_settings_are_rejected_at_their_line() {
        let e = err(&AB.replace("[engine.b]\n", "[engine.x]\n"));
        assert!(e.contains("engine.x") || e.contains("unknown field"), "{e}");
        let one_sided = AB
            .replace("[engine.b]\n", "")
            .replace(
                "command = \"exec {infergate} sim --port {port} --slowdown 1.05\"\n",
                "",
            )
            .replace("env = { ONLY_B = \"{port}\" }\n", "");
        let e = err(&one_sided);
        assert!(e.contains("needs both [engine.a]"), "{e}");
        let e = err(&AB.replace("rounds = 3", "rounds = 1"));
        assert!(e.starts_with("t.toml:17:") && e.contains("rounds"), "{e}");
        let e = err(&AB.replace("max_rounds = 3", "max_rounds = 0"));
        assert!(e.contains("max_rounds"), "{e}");
        let e = err(&AB.replace("order = \"ab\"", "order = \"aab\""));
        assert!(e.contains("aab"), "{e}");
        let e = err(&GOOD.replace("[baseline]", "[ab]\nrounds = 2\n\n[baseline]"));
        assert!(e.contains("no [engine.a]"), "{e}");
        let e = err(&AB.replace(
            "[engine.a]\ncommand = [\"{infergate}\", \"sim\", \"--port\", \"{port}\"]",
            "[engine.a]\ncommand = [\"{infergate}\", \"sim\", \"--port\", \"{prot}\"]",
        ));
        assert!(e.contains("{prot}"), "{e}");
    }

    #[test]
    fn confirm_is_on_by_default_and_its_table_tunes_or_disables_it() {
        let plain = parse(GOOD).expect("parses");
        assert!(plain.confirm.enabled);
        assert_eq!(plain.confirm.plan, crate::stats::ConfirmPlan::default());
        let tuned = parse(&GOOD.replace(
            "[baseline]",
            "[confirm]\np_below = 0.1\nfirst_share = 0.3\n\n[baseline]",
        ))
        .expect("parses");
        assert!(tuned.confirm.enabled);
        assert_eq!(tuned.confirm.plan.p_below, 0.1);
        assert_eq!(tuned.confirm.plan.first_share, 0.3);
        let off = parse(&GOOD.replace("[baseline]", "[confirm]\nenabled = false\n\n[baseline]"))
            .expect("parses");
        assert!(!off.confirm.enabled);
        let e = err(&GOOD.replace("[baseline]", "[confirm]\np_below = 0.9\n\n[baseline]"));
        assert!(e.contains("p_below = 0.9") && e.contains("(0, 0.5]"), "{e}");
        let e = err(&GOOD.replace("[baseline]", "[confirm]\nfirst_share = 1\n\n[baseline]"));
        assert!(e.contains("first_share"), "{e}");
        let e = err(&GOOD.replace("[baseline]", "[confirm]\np_belwo = 0.1\n\n[baseline]"));
        assert!(e.contains("p_belwo"), "{e}");
    }

    #[test]
    fn the_embedded_default_is_valid() {
        let c = GateConfig::embedded_default().expect("embedded default must parse");
        assert_eq!(c.suite(None).expect("default suite").name, "pr");
        assert!(c.suite(Some("nightly")).is_ok());
    }
}
