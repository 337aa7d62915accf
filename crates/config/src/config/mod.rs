//! The gate config (`infergate.toml`): which engine to boot, which suites (matrices) to
//! measure, the decision rule's thresholds, where baselines live and how to report.
//!
//! Everything is validated before anything boots: a syntax error, an unknown key, a wrong type
//! or a bad value is a [`ConfigError`] naming `file:line:col` and the fix, and `run` exits 2.
//! The format is documented in `docs/config.md`.
//!
//! This file holds the public model; `raw` the file's serde shapes, `locate` the span
//! locator that names `file:line:col`, `build` the checks from raw to model, [`values`] the
//! self-parsing value types (durations, context lengths, the engine command).

mod bisect;
mod build;
mod locate;
pub use locate::plain_type_names;
mod raw;
pub(crate) mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use infergate_model::stats::DecisionRule;
use infergate_schema::results::{CellTiming, HardwareFingerprint, MatrixSpec};

pub use bisect::BisectConfig;
pub use infergate_schema::exit::FailOn;
pub use values::{CommandSpec, Seconds, parse_concurrency, parse_contexts, parse_duration_s};
pub(crate) use values::{ContextLen, MAX_CONCURRENCY};

/// The default config, compiled into the binary: boots `infergate sim` so the whole gate runs
/// on a machine with no GPU. `run` uses it when no `--config` is given and there is no
/// `infergate.toml` in the working directory.
pub(crate) const EMBEDDED_DEFAULT: &str = include_str!("../../../../infergate.toml");

/// The name shown for the embedded default in messages.
pub const EMBEDDED_NAME: &str = "<embedded default infergate.toml>";

/// Placeholders the engine command, env values and working dir may contain.
/// `{build}` (the output of `[bisect] build`) is filled by `infergate bisect` only.
pub(crate) const PLACEHOLDERS: [&str; 5] = ["port", "host", "model", "infergate", "build"];

/// Why a config cannot be used. Every variant is the user's to fix (exit 2).
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
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
    pub(crate) suites: Vec<SuiteConfig>,
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
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            enabled: false,
            max_rounds: 2,
            max_extra_s: None,
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
}

impl Default for ConfirmConfig {
    fn default() -> Self {
        ConfirmConfig { enabled: true }
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
        (0..pairs)
            .flat_map(|i| {
                let b_first = self == AbOrder::Abba && i % 2 == 1;
                [(i, b_first), (i, !b_first)]
            })
            .collect()
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
    /// Grace period between SIGTERM and SIGKILL at teardown; `None` = the engine module's
    /// default (short enough for the Actions runner's cancel window).
    pub stop_grace_s: Option<f64>,
    /// Names (or `PREFIX_*` patterns) of the gate's environment variables passed on to the
    /// engine besides the built-in allow-list (PATH, HOME, locale, CUDA_*, NCCL_*, HF_*, ...).
    pub env_allow: Vec<String>,
    /// Command-line flags whose values are secrets (masked in every output), besides the
    /// built-in ones (`--api-key`, `--hf-token`, `*-key`, `*token*`, `*secret*`, `*password*`).
    pub secret_args: Vec<String>,
    /// Environment variable holding the engine's API key (sent as a bearer token, never shown).
    pub api_key_env: Option<String>,
    /// Host the engine listens on (`{host}`), default 127.0.0.1.
    pub host: String,
    /// Fixed port; `None` picks a free one for `{port}`.
    pub port: Option<u16>,
    /// Engine family for the profile key (`vllm`, `sglang`, ...); `None` detects it.
    pub name: Option<String>,
    /// When a silent engine is called hung (`[engine.watchdog]`).
    pub watchdog: WatchdogConfig,
    /// What the engine is kept from (`[engine] isolation`, docs/security.md).
    pub isolation: EngineIsolation,
}

/// `[engine] isolation`: whether the engine runs as another user and in a view of the
/// filesystem without the gate's output directory and baseline store (docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineIsolation {
    /// `"auto"`: under root, the engine runs as uid and gid 65534 (nobody, nogroup) in its own
    /// mount namespace; otherwise in a user and mount namespace where the host allows one.
    #[default]
    Auto,
    /// `"UID:GID"`: as `Auto`, with this uid and gid under root.
    As {
        /// The engine's uid under a root gate.
        uid: u32,
        /// The engine's gid (and only group) under a root gate.
        gid: u32,
    },
    /// `"off"`: the engine runs as the gate's user in the gate's mount namespace.
    Off,
}

impl EngineIsolation {
    /// The uid and gid of `Auto` (nobody, nogroup).
    pub(crate) const NOBODY: (u32, u32) = (65534, 65534);

    /// Parses the config value; `None` for anything but `auto`, `off` or `UID:GID` with both
    /// numbers above 0.
    pub fn parse(s: &str) -> Option<EngineIsolation> {
        match s {
            "auto" => Some(EngineIsolation::Auto),
            "off" => Some(EngineIsolation::Off),
            _ => {
                let (u, g) = s.split_once(':')?;
                let uid: u32 = u.parse().ok()?;
                let gid: u32 = g.parse().ok()?;
                (uid > 0 && gid > 0).then_some(EngineIsolation::As { uid, gid })
            }
        }
    }

    /// The config value (`auto`, `off`, `UID:GID`), as [`EngineIsolation::parse`] reads it.
    pub fn value(self) -> String {
        match self {
            EngineIsolation::Auto => "auto".into(),
            EngineIsolation::Off => "off".into(),
            EngineIsolation::As { uid, gid } => format!("{uid}:{gid}"),
        }
    }

    /// The uid and gid the engine runs as under a root gate; `None` when off.
    pub fn user(self) -> Option<(u32, u32)> {
        match self {
            EngineIsolation::Auto => Some(Self::NOBODY),
            EngineIsolation::As { uid, gid } => Some((uid, gid)),
            EngineIsolation::Off => None,
        }
    }
}

/// `[engine.watchdog]`: when the gate probes a silent engine and when it calls it hung (the
/// matrix then stops, remaining cells `error: engine unresponsive`, exit 3). The defaults call
/// a hang about 16 s after it starts; an engine whose `/health` stalls for longer while it
/// works (a slow CPU engine under a long prefill) needs a longer `quiet` or `probe_timeout`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchdogConfig {
    /// Silence (no byte from the engine) before the first `/health` probe, seconds.
    pub quiet_s: f64,
    /// Time-out of one probe, seconds.
    pub probe_timeout_s: f64,
    /// Unanswered probes in a row that make the engine unresponsive.
    pub probes: u32,
    /// Pause between probes while the engine stays silent, seconds (while it sends, the
    /// watchdog sleeps until the silence could reach `quiet_s`).
    pub period_s: f64,
}

impl Default for WatchdogConfig {
    /// 5 s of silence, then three unanswered 3 s probes a second apart.
    fn default() -> Self {
        WatchdogConfig {
            quiet_s: 5.0,
            probe_timeout_s: 3.0,
            probes: 3,
            period_s: 1.0,
        }
    }
}

/// Profile-key overrides.
#[derive(Debug, Clone, Default)]
pub struct ProfileConfig {
    /// Pins the hardware part of the profile key instead of the detected GPU/CPU, for
    /// simulated or CI runs whose numbers do not depend on the machine (the bundled baseline of
    /// the embedded default uses `sim`).
    pub(crate) hardware: Option<String>,
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
    /// Suite name (`[suite.NAME]`), also part of the check name.
    pub name: String,
    /// 1-based line of the suite's `concurrency` key (annotations point here).
    pub line: usize,
    /// Concurrency levels of the matrix.
    pub concurrency: Vec<u32>,
    /// Context lengths of the matrix, in tokens.
    pub contexts: Vec<u64>,
    /// How each cell is measured (unset keys take [`CellTiming::DEFAULT`], as `bench` does).
    pub timing: CellTiming,
    /// How many times the whole matrix is measured.
    pub repetitions: u32,
    /// Cells not to run (known not to fit).
    pub skip: Vec<(u32, u64)>,
    /// Skip a larger concurrency at a context where a smaller one was already capacity-limited.
    pub skip_doomed: bool,
    /// The prefill layer's cold samples (`prefill_samples`, `prefill_max_context`).
    pub prefill: infergate_schema::results::PrefillSettings,
    /// The burst / end-to-end layer (`[suites.NAME.burst]`), when the suite turns it on.
    pub burst: Option<infergate_schema::results::BurstSettings>,
}

impl SuiteConfig {
    /// The measurement settings for `model`.
    pub fn matrix_spec(&self, model: &str) -> MatrixSpec {
        MatrixSpec {
            model: model.to_string(),
            concurrency: self.concurrency.clone(),
            contexts: self.contexts.clone(),
            timing: self.timing,
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
    /// The statistical decision rule (`[thresholds]`).
    pub rule: DecisionRule,
    /// Which verdicts fail the gate.
    pub fail_on: FailOn,
}

/// Baseline store location.
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineConfig {
    /// Store directory (resolved against the config's directory).
    pub dir: PathBuf,
    /// `[baseline] allow_no_baseline`: a pull request (or merge-queue) gate with no baseline
    /// for its profile passes as `no_baseline` (bootstrapping) instead of failing. Off by
    /// default: a runner whose hardware changed, or a matrix edited on the base branch, must
    /// not silently stop gating.
    pub allow_no_baseline: bool,
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
    /// When to report to GitHub.
    pub github: GithubMode,
    /// Lines of the engine log shown when the engine fails.
    pub log_tail_lines: usize,
}

impl GateConfig {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<GateConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = infergate_io::fsio::read_input(path).map_err(|source| ConfigError::Read {
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
    pub(crate) fn suite_names(&self) -> Vec<&str> {
        self.suites.iter().map(|s| s.name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_starts_with};

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
history_runs = 6
"#;

    fn parse(text: &str) -> Result<GateConfig, ConfigError> {
        GateConfig::parse(text, "t.toml", Path::new("/cfg"))
    }

    fn err(text: &str) -> String {
        parse(text)
            .expect_err("config should be rejected")
            .to_string()
    }

    /// The suite `name` of a valid config.
    #[track_caller]
    fn suite_of(c: Result<GateConfig, ConfigError>, name: &str) -> SuiteConfig {
        c.expect("valid").suite(Some(name)).expect(name).clone()
    }

    #[test]
    fn env_allow_table_of_names() {
        let with = |entry: &str| {
            parse(&GOOD.replace(
                "readiness_timeout = \"30s\"",
                &format!("readiness_timeout = \"30s\"\nenv_allow = [\"{entry}\"]"),
            ))
        };
        for entry in [
            "VLLM_USE_V1",
            "VLLM_*",
            "HF_*",
            "LLAMA_THREADS",
            "GIT_AUTHOR_NAME",
        ] {
            assert!(with(entry).is_ok(), "{entry} should be allowed");
        }
        for (entry, why) in [
            ("*", "whole environment"),
            ("A*", "shorter than 3 characters"),
            ("GH*", "shorter than 3 characters"),
            ("AUTH", "names a credential"),
            ("OAUTH_CLIENT_ID", "names a credential"),
            ("JWT", "names a credential"),
            ("MY_JWT", "names a credential"),
            ("COOKIE", "names a credential"),
            ("SESSION", "names a credential"),
            ("SESSION_*", "names a credential"),
            ("PASS", "names a credential"),
            ("DB_PASS", "names a credential"),
            ("PASSWORD", "names a credential"),
            ("PASSWD", "names a credential"),
            ("APIKEY", "names a credential"),
            ("OPENAI_API_KEY", "names a credential"),
            ("SSH_AUTH_SOCK", "names a credential"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "names a credential"),
            ("PRIVATE_KEY_PATH", "names a credential"),
            ("REQUEST_SIGNATURE", "names a credential"),
            ("HF_TOKEN", "names a credential"),
        ] {
            let e = with(entry).expect_err(entry).to_string();
            assert!(e.contains("env_allow") && e.contains(why), "{entry}: {e}");
        }
    }

    #[test]
    fn a_good_config_parses_with_file_order_and_defaults() {
        let c = parse(GOOD).expect("valid");
        assert_eq!(c.suite_names(), vec!["nightly", "pr"]);
        assert_eq!(c.suite(None).expect("default").name, "pr");
        let n = c.suite(Some("nightly")).expect("nightly");
        assert_eq!(n.concurrency, vec![1, 2, 4]);
        assert_eq!(n.contexts, vec![0, 8192, 32768]);
        assert_eq!(n.timing.duration_s, 5.0);
        assert_eq!(n.line, 12);
        assert_eq!(c.engine.readiness_timeout_s, 30.0);
        assert_eq!(c.thresholds.rule.min_effect, 0.05);
        assert_eq!(
            c.thresholds.fail_on,
            infergate_schema::exit::FailOn::INSUFFICIENT
        );
        assert_eq!(c.thresholds.rule.history_runs, 6);
        assert_eq!(
            infergate_model::stats::rule::level_window(c.thresholds.rule.history_runs),
            2
        );
        assert_eq!(c.baseline.dir, PathBuf::from("/cfg/baselines"));
        assert_eq!(c.profile.hardware.as_deref(), Some("sim"));
    }

    /// `[thresholds.min_effects]`: per-metric design effects, each error naming the file,
    /// the line, the field and the fix.
    #[test]
    fn min_effects_set_per_metric_and_their_errors_name_the_field() {
        let with = |table: &str| GOOD.replacen("[baseline]", &format!("{table}\n\n[baseline]"), 1);
        let c = parse(&with("[thresholds.min_effects]\nitl_p99 = 0.4")).expect("valid");
        let rule = &c.thresholds.rule;
        assert_eq!(
            rule.min_effect_of(infergate_schema::verdict::Metric::ItlP99),
            0.4
        );
        // Unnamed: the latency default; throughput keeps min_effect.
        assert_eq!(
            rule.min_effect_of(infergate_schema::verdict::Metric::ItlP90),
            0.25
        );
        assert_eq!(
            rule.min_effect_of(infergate_schema::verdict::Metric::AggregateTps),
            0.05
        );
        let e = err(&with("[thresholds.min_effects]\nitl_p98 = 0.4"));
        assert!(
            e.contains("t.toml:") && e.contains("min_effects") && e.contains("itl_p98"),
            "{e}"
        );
        assert_contains(&e, "itl_p99 = 0.5");
        let e = err(&with("[thresholds.min_effects]\nitl_p99 = 12"));
        assert_contains(&e, "min_effects.itl_p99 = 12 must be in (0, 10)");
        assert_contains(&e, "t.toml:");
        let e = err(&with("[thresholds.min_effects]\naggregate_tps = 0.1"));
        assert_contains(&e, "set by min_effect");
    }

    /// The prefill layer's knobs: defaults, and set per suite.
    #[test]
    fn prefill_samples_default_and_are_set_per_suite() {
        let c = parse(GOOD).expect("valid");
        assert_eq!(
            c.suite(Some("pr")).expect("pr").prefill,
            infergate_schema::results::PrefillSettings::DEFAULT
        );
        let text = GOOD.replacen(
            "[suites.nightly]",
            "[suites.nightly]\nprefill_samples = 0\nprefill_max_context = \"8k\"",
            1,
        );
        let n = suite_of(parse(&text), "nightly");
        assert_eq!((n.prefill.samples, n.prefill.max_context), (0, 8192));
    }

    /// The burst layer's table: off unless set; `inf`, a rate, SLOs; bad values named.
    #[test]
    fn the_burst_layer_is_set_per_suite_and_checked() {
        let c = parse(GOOD).expect("valid");
        assert!(c.suite(Some("pr")).expect("pr").burst.is_none());
        let with = |burst: &str| {
            parse(&GOOD.replacen(
                "[suites.pr]",
                &format!("[suites.nightly.burst]\n{burst}\n\n[suites.pr]"),
                1,
            ))
        };
        let set = "requests = 32\nrequest_rate = 100\nprompt_tokens = \"3k\"\ngoodput = { ttft = \"500ms\" }";
        let b = suite_of(with(set), "nightly").burst.expect("burst");
        assert_eq!(
            (b.requests, b.request_rate, b.prompt_tokens),
            (32, Some(100.0), 3072)
        );
        assert_eq!((b.max_tokens, b.seed, b.slo.ttft_s), (32, 0, Some(0.5)));
        let b = suite_of(with("requests = 8\nrequest_rate = \"inf\""), "nightly").burst;
        assert_eq!(b.expect("burst").request_rate, None);
        for (bad, names) in [
            ("requests = 0", "requests = 0 must be a positive count"),
            (
                "requests = 8\nrequest_rate = -1",
                "request_rate must be a positive number",
            ),
            (
                "requests = 8\nrequest_rate = \"fast\"",
                "request_rate must be a positive number",
            ),
            (
                "requests = 8\nmax_tokens = 0",
                "max_tokens = 0 must be a positive count",
            ),
        ] {
            let e = with(bad).expect_err(bad).to_string();
            assert!(e.contains(names), "{bad}: {e}");
        }
        // The embedded default turns it on in `pr`.
        let b = suite_of(GateConfig::embedded_default(), "pr")
            .burst
            .expect("burst");
        assert_eq!((b.requests, b.request_rate), (32, Some(100.0)));
    }

    #[test]
    fn the_watchdog_is_tuned_in_its_table_and_checked() {
        assert_eq!(
            parse(GOOD).expect("valid").engine.watchdog,
            WatchdogConfig::default()
        );
        let tuned = format!(
            "{GOOD}\n[engine.watchdog]\nquiet = \"30s\"\nprobe_timeout = \"10s\"\nprobes = 5\nperiod = \"500ms\"\n"
        );
        let w = parse(&tuned).expect("valid").engine.watchdog;
        assert_eq!(
            (w.quiet_s, w.probe_timeout_s, w.probes, w.period_s),
            (30.0, 10.0, 5, 0.5)
        );
        let lines = GOOD.lines().count();
        let table = |body: &str| format!("{GOOD}\n[engine.watchdog]\n{body}\n");
        let e = err(&table("probes = 0"));
        assert_starts_with(&e, &format!("t.toml:{}:", lines + 3));
        assert!(
            e.contains("[engine.watchdog] probes = 0") && e.contains("fix: write 1 to 100"),
            "{e}"
        );
        let e = err(&table("period = \"0s\""));
        assert!(
            e.contains("period = 0 s is out of range") && e.contains("fix:"),
            "{e}"
        );
        let e = err(&table("quiet = \"2s\"\nprobe_timeout = \"3s\""));
        assert_starts_with(&e, &format!("t.toml:{}:", lines + 4));
        assert_contains(&e, "longer than quiet");
        let e = err(&table("quite = \"2s\""));
        assert!(e.contains("quite"), "a typo is an error: {e}");
    }

    #[test]
    fn unknown_suite_lists_the_suites() {
        let c = parse(GOOD).expect("valid");
        let e = c.suite(Some("weekly")).expect_err("unknown").to_string();
        assert_contains(&e, "nightly, pr");
    }

    #[test]
    fn syntax_error_names_the_line() {
        let e = err("[engine]\ncommand = [\"x\"\n");
        assert_starts_with(&e, "t.toml:");
    }

    #[test]
    fn unknown_key_names_line_and_fix() {
        let text = GOOD.replace("duration = \"5s\"", "durration = \"5s\"");
        let e = err(&text);
        assert_starts_with(&e, "t.toml:14:");
        assert!(e.contains("durration") && e.contains("fix:"), "{e}");
    }

    #[test]
    fn negative_duration_is_rejected_at_its_line() {
        let e = err(&GOOD.replace("duration = \"5s\"", "duration = \"-5s\""));
        assert_starts_with(&e, "t.toml:14:");
        assert!(e.contains("negative") && e.contains("fix: write"), "{e}");
        let e = err(&GOOD.replace("duration = 2", "duration = -2"));
        assert_starts_with(&e, "t.toml:19:");
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
    fn engine_isolation_is_auto_off_or_a_user() {
        let cmd = "command = [\"{infergate}\", \"sim\", \"--port\", \"{port}\", \"--model\", \"{model}\"]";
        assert_eq!(
            parse(GOOD).expect("valid").engine.isolation,
            EngineIsolation::Auto
        );
        let with = |v: &str| GOOD.replace(cmd, &format!("{cmd}\nisolation = \"{v}\""));
        assert_eq!(
            parse(&with("off")).expect("valid").engine.isolation,
            EngineIsolation::Off
        );
        let c = parse(&with("1001:1002")).expect("valid");
        assert_eq!(c.engine.isolation.user(), Some((1001, 1002)));
        assert_eq!(c.engine.isolation.value(), "1001:1002");
        for bad in ["0:0", "nobody", "65534", "1:x"] {
            let e = err(&with(bad));
            assert!(
                e.starts_with("t.toml:") && e.contains("isolation") && e.contains("fix:"),
                "{e}"
            );
        }
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
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("examples");
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
        assert_eq!(ab.a.stop_grace_s, Some(2.0));
        assert_eq!(ab.b.name.as_deref(), Some("sim"));
        assert!(matches!(ab.b.command, CommandSpec::Shell(_)));
        assert_eq!(ab.b.env.get("SHARED").map(String::as_str), Some("1"));
        assert!(ab.b.env.contains_key("ONLY_B") && !ab.a.env.contains_key("ONLY_B"));
        // `run` on an A/B-only file boots A.
        assert_eq!(c.engine.command, ab.a.command);
        assert!(c.adaptive.enabled);
        assert_eq!(c.adaptive.max_rounds, 3);
        assert_eq!(c.adaptive.max_extra_s, Some(90.0));
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
        assert_contains(&e, "needs both [engine.a]");
        let e = err(&AB.replace("rounds = 3", "rounds = 1"));
        assert!(e.starts_with("t.toml:17:") && e.contains("rounds"), "{e}");
        let e = err(&AB.replace("max_rounds = 3", "max_rounds = 0"));
        assert_contains(&e, "max_rounds");
        // One spending function, declared up front: the old shape switch is refused at its line.
        let e = err(&AB.replace("max_rounds = 3", "max_rounds = 3\nspending = \"pocock\""));
        assert!(
            e.starts_with("t.toml:")
                && e.contains("spending is gone")
                && e.contains("remove the key"),
            "{e}"
        );
        let e = err(&AB.replace("max_rounds = 3", "max_rounds = 3\nspending = 1"));
        assert_contains(&e, "spending is gone");
        let e = err(&AB.replace("order = \"ab\"", "order = \"aab\""));
        assert_contains(&e, "aab");
        let e = err(&GOOD.replace("[baseline]", "[ab]\nrounds = 2\n\n[baseline]"));
        assert_contains(&e, "no [engine.a]");
        let e = err(&AB.replace(
            "[engine.a]\ncommand = [\"{infergate}\", \"sim\", \"--port\", \"{port}\"]",
            "[engine.a]\ncommand = [\"{infergate}\", \"sim\", \"--port\", \"{prot}\"]",
        ));
        assert_contains(&e, "{prot}");
    }

    #[test]
    fn the_earlier_history_and_coverage_keys_are_refused_with_their_replacement() {
        // Line 26 of GOOD is the `[baseline]` table's key.
        for old in ["level_runs = 3", "noise_runs = 20"] {
            let e = err(&GOOD.replace("history_runs = 6", old));
            assert!(
                e.starts_with("t.toml:26:")
                    && e.contains("are gone")
                    && e.contains("write history_runs = N"),
                "{e}"
            );
        }
        let e = err(&GOOD.replace("[baseline]", "history_runs = 6\n\n[baseline]"));
        assert_contains(&e, "belongs in [baseline]");
        // In the wrong table, an earlier key is not sent to [baseline], where it is gone too.
        let e = err(&GOOD.replace("[baseline]", "level_runs = 3\n\n[baseline]"));
        assert!(e.contains("are gone") && !e.contains("belongs"), "{e}");
        let e = err(&GOOD.replace("min_effect = 0.05", "min_measured_share = 0.9"));
        assert!(
            e.contains("min_measured_share is gone") && e.contains("`skip`"),
            "{e}"
        );
        let e = err(&GOOD.replace("history_runs = 6", "history_runs = 0"));
        assert_contains(&e, "at least one run");
    }

    #[test]
    fn confirm_is_on_by_default_and_its_table_disables_it() {
        let plain = parse(GOOD).expect("parses");
        assert!(plain.confirm.enabled);
        let off = parse(&GOOD.replace("[baseline]", "[confirm]\nenabled = false\n\n[baseline]"))
            .expect("parses");
        assert!(!off.confirm.enabled);
        let e = err(&GOOD.replace("[baseline]", "[confirm]\np_below = 0.1\n\n[baseline]"));
        assert!(e.contains("p_below") && e.contains("remove"), "{e}");
        // Whatever type the old value has, the error is the one that says the key is gone.
        let e = err(&GOOD.replace("[baseline]", "[confirm]\nfirst_share = \"x\"\n\n[baseline]"));
        assert!(e.contains("are gone") && e.contains("remove"), "{e}");
        let e = err(&GOOD.replace("[baseline]", "[confirm]\np_belwo = 0.1\n\n[baseline]"));
        assert_contains(&e, "p_belwo");
    }

    #[test]
    fn the_embedded_default_is_valid() {
        let c = GateConfig::embedded_default().expect("embedded default must parse");
        assert_eq!(c.suite(None).expect("default suite").name, "pr");
        assert!(c.suite(Some("nightly")).is_ok());
    }
}
