//! The builders: raw shapes ([`super::raw`]) → the validated public model. Every check that
//! can fail points at the offending key through the [`Locator`].

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::locate::Locator;
use super::raw::*;
use super::*;
use infergate_model::stats::DecisionRule;
use infergate_schema::results::{BurstSettings, BurstSlo, CellTiming, PrefillSettings};

impl GateConfig {
    /// Parses and validates config text; `path` is only used in messages.
    pub fn parse(text: &str, path: &str, base_dir: &Path) -> Result<GateConfig, ConfigError> {
        let loc = Locator { path, text };
        if let Err(e) = text.parse::<toml::Table>() {
            return Err(loc.at(
                e.span().unwrap_or(0..0),
                format!("TOML syntax error: {}", e.message().trim()),
                Some("fix the TOML syntax at this position (strings in quotes, lists in [ ], one key = value per line)"),
            ));
        }
        let raw: RawConfig = toml::from_str(text).map_err(|e| loc.toml_error(&e))?;

        let model = raw
            .model
            .map(|m| {
                loc.check(
                    Some(m),
                    String::new(),
                    |m| !m.trim().is_empty(),
                    |_| "`model` is empty".into(),
                    "write the served model name, or remove the key to use the engine's first model",
                )
            })
            .transpose()?;

        super::bisect::check_build_placeholder(&raw.engine, raw.bisect.is_some(), &loc)?;
        let bisect = super::bisect::build_bisect(raw.bisect, base_dir, &loc)?;
        let (engine, ab_engines) = build_engine(raw.engine, model.is_some(), &loc, base_dir)?;
        let adaptive = build_adaptive(raw.adaptive, &loc)?;
        let confirm = build_confirm(raw.confirm, &loc)?;
        let ab = build_ab(raw.ab, ab_engines, &loc)?;

        let hardware = raw.profile.hardware.map(|h| {
            loc.check(
                Some(h),
                String::new(),
                |h| infergate_schema::results::path_safe(h) == h.to_lowercase(),
                |h| format!("[profile] hardware = \"{h}\" is not a simple name"),
                "use letters, digits, `-` and `.` only, e.g. \"sim\" or \"ci-runner-a\"",
            )
        });
        let profile = ProfileConfig {
            hardware: hardware.transpose()?,
        };

        let suites_span = raw.suites.span();
        let mut suites = (raw.suites.into_inner().into_iter())
            .map(|(name, suite)| build_suite(name, suite, &loc))
            .collect::<Result<Vec<_>, _>>()?;
        if suites.is_empty() {
            return Err(loc.at(
                suites_span,
                "no suite defined",
                Some("add a suite, e.g. [suites.pr] with concurrency = [1, 2, 4] and contexts = [\"0\", \"8k\"]"),
            ));
        }
        // File order (the TOML map is sorted by name).
        suites.sort_by_key(|s| s.line);

        let (thresholds_span, thresholds) =
            (raw.thresholds).map_or((0..0, BTreeMap::new()), |t| (t.span(), t.into_inner()));
        let (rule, fail_on) = build_rule(thresholds, thresholds_span, &raw.baseline, &loc)?;

        let baseline = BaselineConfig {
            dir: base_dir.join(raw.baseline.dir.as_deref().unwrap_or("baselines")),
            allow_no_baseline: raw.baseline.allow_no_baseline.unwrap_or(false),
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
}

/// The error for the earlier keys `level_runs` and `noise_runs`, in whichever table they stand.
fn gone_history_keys(loc: &Locator, span: Range<usize>) -> ConfigError {
    loc.at(
        span,
        "level_runs and noise_runs are gone: one history window, [baseline] history_runs, replaces them (its newest third defines the level)",
        Some("write history_runs = N in [baseline] (the newest N runs; default 20) instead"),
    )
}

/// The decision rule from `[thresholds]` (any [`DecisionRule`] field, plus `fail_on`) and
/// `[baseline] history_runs`. Each key is deserialized alone first so an error points
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
                    Some("write fail_on = \"regression\", \"insufficient\" or \"never\""),
                )
            })?;
            continue;
        }
        if let Some(e) = moved_threshold(&key, span.clone(), loc) {
            return Err(e);
        }
        let mut one = toml::Table::new();
        one.insert(key.clone(), value.clone());
        if let Err(e) = DecisionRule::deserialize(toml::Value::Table(one)) {
            let msg = e.message().trim().to_string();
            let fix = if key == "min_effects" {
                "write [thresholds.min_effects] with one metric per line and its design effect, e.g. itl_p99 = 0.5 (+50%); metrics: ttft_p50, ttft_p90, ttft_p99, itl_p50, itl_p90, itl_p99, tpot_p50, tpot_p90, per_user_tps, prefill_tps (docs/config.md)"
            } else if msg.contains("unknown field") {
                "remove the key or correct its spelling (allowed keys are listed above, plus fail_on; see docs/config.md)"
            } else {
                "see docs/config.md for the type and range of each threshold"
            };
            return Err(loc.at(span, format!("[thresholds] {key}: {msg}"), Some(fix)));
        }
        spans.push((key.clone(), span));
        table.insert(key, value);
    }
    if let Some(old) = baseline
        .level_runs
        .as_ref()
        .or(baseline.noise_runs.as_ref())
    {
        return Err(gone_history_keys(loc, old.span()));
    }
    if let Some(v) = &baseline.history_runs {
        let n = loc.check(
            Some(v.clone()),
            0,
            |n| *n > 0,
            |_| "[baseline] history_runs = 0: at least one run is needed".into(),
            "use a positive number (default: history_runs = 20)",
        )?;
        table.insert("history_runs".to_string(), toml::Value::Integer(n as i64));
    }
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
            .find(|(k, _)| {
                msg.contains(&format!("{k} ="))
                    || msg.contains(&format!("{k} "))
                    || msg.contains(&format!("{k}."))
            })
            .map_or(thresholds_span, |(_, s)| s.clone());
        return Err(loc.at(
            span,
            format!("[thresholds] {msg}"),
            Some("see docs/config.md for the valid ranges"),
        ));
    }
    Ok((rule, fail_on))
}

/// A `[thresholds]` key that is gone or belongs elsewhere, with where it went.
fn moved_threshold(key: &str, span: Range<usize>, loc: &Locator) -> Option<ConfigError> {
    Some(match key {
        "inconclusive_fails" => loc.at(
            span,
            "[thresholds] inconclusive_fails is set by fail_on",
            Some("write fail_on = \"insufficient\" instead"),
        ),
        "level_runs" | "noise_runs" => gone_history_keys(loc, span),
        "history_runs" => loc.at(
            span,
            "history_runs belongs in [baseline], not [thresholds]",
            Some("move the key to the [baseline] table"),
        ),
        "min_measured_share" => loc.at(
            span,
            "[thresholds] min_measured_share is gone: every cell the baseline measured must be measured now, or the gate is `unmeasured` (exit 3)",
            Some("remove the line; skip a cell the engine cannot serve with the suite's `skip`"),
        ),
        _ => return None,
    })
}

/// Every part of an engine command uses known placeholders only.
fn check_command(
    loc: &Locator,
    c: &Spanned<CommandSpec>,
    has_model: bool,
) -> Result<(), ConfigError> {
    (c.get_ref().parts().iter()).try_for_each(|p| check_placeholders(loc, c.span(), p, has_model))
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
        let Some(close) = after.find('}') else { break };
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
    }
    Ok(())
}

/// The engine is untrusted code: the gate's GitHub tokens and the runner's credentials never
/// reach it, whatever the config says.
fn check_engine_env_name(
    loc: &Locator,
    span: std::ops::Range<usize>,
    name: &str,
) -> Result<(), ConfigError> {
    let bare = name.trim_end_matches('*');
    if infergate_io::redact::never_for_engine(name)
        || (bare.len() < name.len()
            && infergate_io::redact::never_for_engine(&format!("{bare}TOKEN")))
    {
        return Err(loc.at(
            span,
            format!("`{name}` is a credential of the gate or the runner and is never passed to the engine"),
            Some("remove it from [engine] env / env_allow; the engine is code under test and must not hold the gate's tokens (see docs/security.md)"),
        ));
    }
    Ok(())
}

/// Shortest prefix a `PREFIX*` entry of `env_allow` may have: a shorter one (`A*`, `GH*`)
/// takes in names nobody listed, among them credentials the name patterns do not know.
pub(crate) const MIN_ENV_ALLOW_PREFIX: usize = 3;

/// An `env_allow` entry may not open the gate's environment wholesale (`*`) or by a prefix
/// shorter than [`MIN_ENV_ALLOW_PREFIX`] (`A*`), nor name a credential
/// ([`infergate_io::redact::is_secret_name`]): the engine is the pull request's code.
fn check_env_allow_entry(
    loc: &Locator,
    span: std::ops::Range<usize>,
    entry: &str,
) -> Result<(), ConfigError> {
    let bare = entry.trim_end_matches('*');
    if bare.is_empty() {
        return Err(loc.at(
            span,
            format!("[engine] env_allow = \"{entry}\" would pass the gate's whole environment (tokens, SSH agent, cloud keys) to the engine"),
            Some("name the variables the engine needs (e.g. \"VLLM_USE_V1\") or a prefix (\"VLLM_*\"); the engine is the pull request's code (see docs/security.md)"),
        ));
    }
    if bare.len() < entry.len() && bare.chars().count() < MIN_ENV_ALLOW_PREFIX {
        return Err(loc.at(
            span,
            format!("[engine] env_allow: the prefix `{entry}` is shorter than {MIN_ENV_ALLOW_PREFIX} characters and would pass every variable that starts with `{bare}` (credentials with names nobody listed among them)"),
            Some("name the variables the engine needs, or a prefix of at least 3 characters that is the engine's own (\"VLLM_*\"); see docs/security.md"),
        ));
    }
    if infergate_io::redact::is_secret_name(bare) {
        return Err(loc.at(
            span,
            format!("[engine] env_allow: `{entry}` names a credential (a name with TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, PASS, API_KEY, APIKEY, CRED, AUTH, JWT, COOKIE, SESSION, PRIVATE, SIGNATURE, or ending in _KEY), which is never passed from the gate's environment to the engine"),
            Some("remove it from env_allow; the engine is the pull request's code and must not hold the runner's secrets (download gated models before the gate runs; see docs/security.md)"),
        ));
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
        check_command(loc, c, has_model)?;
    }
    for n in &raw.env_allow {
        check_engine_env_name(loc, n.span(), n.get_ref())?;
        check_env_allow_entry(loc, n.span(), n.get_ref())?;
    }
    let mut env = BTreeMap::new();
    add_engine_env(&mut env, std::mem::take(&mut raw.env), loc, has_model)?;
    // 15 minutes where not set: a large model loads for minutes.
    let readiness_timeout_s = loc
        .check(
            raw.readiness_timeout.take(),
            Seconds(900.0),
            |t| t.0 > 0.0,
            |_| "readiness_timeout must be greater than zero".into(),
            "give the engine time to load, e.g. readiness_timeout = \"10m\"",
        )?
        .0;
    if let Some(n) = &raw.name
        && n.get_ref().trim().is_empty()
    {
        return Err(loc.at(
            n.span(),
            "[engine] name is empty",
            Some("write the engine family (vllm, sglang, llamacpp, ...) or remove the key to detect it"),
        ));
    }
    let watchdog = build_watchdog(raw.watchdog.take(), loc)?;
    let isolation = isolation_of(raw.isolation.as_ref(), loc)?;
    let base = |command: CommandSpec| EngineConfig {
        command,
        env: env.clone(),
        workdir: raw.workdir.as_ref().map(|w| base_dir.join(w)),
        readiness_timeout_s,
        log_file: raw.log_file.as_ref().map(PathBuf::from),
        stop_grace_s: raw.stop_grace.map(|s| s.0),
        api_key_env: raw.api_key_env.clone(),
        env_allow: raw.env_allow.iter().map(|n| n.get_ref().clone()).collect(),
        secret_args: raw.secret_args.clone(),
        host: raw.host.clone().unwrap_or_else(|| "127.0.0.1".into()),
        port: raw.port.filter(|p| *p != 0),
        name: raw.name.as_ref().map(|n| n.get_ref().clone()),
        watchdog,
        isolation,
    };
    let side = |s: Spanned<RawEngineSide>| -> Result<EngineConfig, ConfigError> {
        let s = s.into_inner();
        check_command(loc, &s.command, has_model)?;
        let mut cfg = base(s.command.into_inner());
        add_engine_env(&mut cfg.env, s.env, loc, has_model)?;
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

/// An `env` table's variables, each name one the engine may be given and each value's
/// placeholders known, added to `env` (a side's over the shared ones).
fn add_engine_env(
    env: &mut BTreeMap<String, String>,
    raw: BTreeMap<String, Spanned<String>>,
    loc: &Locator,
    has_model: bool,
) -> Result<(), ConfigError> {
    for (k, v) in raw {
        check_engine_env_name(loc, v.span(), &k)?;
        check_placeholders(loc, v.span(), v.get_ref(), has_model)?;
        env.insert(k, v.into_inner());
    }
    Ok(())
}

/// `[engine] isolation`: `auto` where not set, else `auto`, `off` or `UID:GID`.
fn isolation_of(
    raw: Option<&Spanned<String>>,
    loc: &Locator,
) -> Result<EngineIsolation, ConfigError> {
    let Some(v) = raw else {
        return Ok(EngineIsolation::Auto);
    };
    EngineIsolation::parse(v.get_ref().trim()).ok_or_else(|| {
        loc.at(
            v.span(),
            format!(
                "[engine] isolation = \"{}\" is not \"auto\", \"off\" or \"UID:GID\" (numbers above 0)",
                v.get_ref()
            ),
            Some("remove the key (auto: another user under root, a mount namespace where the host allows one), or write \"off\" for an engine that must run as the gate's user (see docs/security.md)"),
        )
    })
}

/// `[engine.watchdog]`: every duration above zero, `probes` 1 to 100, and a probe's
/// time-out shorter than the silence that starts probing (else one slow answer is a hang).
fn build_watchdog(
    raw: Option<super::raw::RawWatchdog>,
    loc: &Locator,
) -> Result<WatchdogConfig, ConfigError> {
    let mut cfg = WatchdogConfig::default();
    let Some(raw) = raw else {
        return Ok(cfg);
    };
    let seconds = |v, key: &str, default, fix| {
        loc.check(
            v,
            Seconds(default),
            |t| t.0 > 0.0 && t.0 <= 3600.0,
            |t| format!("[engine.watchdog] {key} = {} s is out of range", t.0),
            fix,
        )
        .map(|t| t.0)
    };
    cfg.quiet_s = seconds(
        raw.quiet,
        "quiet",
        cfg.quiet_s,
        "write the silence before the first health probe, above 0 and at most \"1h\" (default \"5s\")",
    )?;
    let probe_span = raw.probe_timeout.as_ref().map(|t| t.span());
    cfg.probe_timeout_s = seconds(
        raw.probe_timeout,
        "probe_timeout",
        cfg.probe_timeout_s,
        "write the time-out of one /health probe, above 0 and at most \"1h\" (default \"3s\")",
    )?;
    cfg.period_s = seconds(
        raw.period,
        "period",
        cfg.period_s,
        "write the pause between checks, above 0 and at most \"1h\" (default \"1s\")",
    )?;
    cfg.probes = loc.check(
        raw.probes,
        cfg.probes,
        |n| (1..=100).contains(n),
        |n| format!("[engine.watchdog] probes = {n} is out of range"),
        "write 1 to 100 unanswered probes in a row (default 3)",
    )?;
    if let Some(span) = probe_span
        && cfg.probe_timeout_s > cfg.quiet_s
    {
        return Err(loc.at(
            span,
            format!(
                "[engine.watchdog] probe_timeout ({} s) is longer than quiet ({} s)",
                cfg.probe_timeout_s, cfg.quiet_s
            ),
            Some("make probe_timeout at most quiet, or raise quiet"),
        ));
    }
    Ok(cfg)
}

/// `[adaptive]`: on when the table is present unless `enabled = false`.
fn build_adaptive(
    raw: Option<Spanned<RawAdaptive>>,
    loc: &Locator,
) -> Result<AdaptiveConfig, ConfigError> {
    let Some(raw) = raw.map(Spanned::into_inner) else {
        return Ok(AdaptiveConfig::default());
    };
    let mut cfg = AdaptiveConfig {
        enabled: raw.enabled.unwrap_or(true),
        ..AdaptiveConfig::default()
    };
    cfg.max_rounds = loc.check(
        raw.max_rounds,
        cfg.max_rounds,
        |r| (1..=20).contains(r),
        |r| format!("[adaptive] max_rounds = {r} is out of range"),
        "write 1 to 20 extra rounds (default 2), or enabled = false to turn re-measurement off",
    )?;
    cfg.max_extra_s = raw.max_extra_seconds.map(|s| s.0);
    if let Some(key) = raw.spending {
        return Err(loc.at(
            key.span(),
            "[adaptive] spending is gone: the looks share alpha by one Pocock-type spending function, declared up front (docs/adaptive-and-ab.md)",
            Some("remove the key"),
        ));
    }
    Ok(cfg)
}

/// `[confirm]`: on by default; the table tunes it or turns it off.
fn build_confirm(
    raw: Option<Spanned<RawConfirm>>,
    loc: &Locator,
) -> Result<ConfirmConfig, ConfigError> {
    let Some(raw) = raw.map(Spanned::into_inner) else {
        return Ok(ConfirmConfig::default());
    };
    let cfg = ConfirmConfig {
        enabled: raw.enabled.unwrap_or(true),
    };
    if let Some(key) = raw.p_below.or(raw.first_share) {
        return Err(loc.at(
            key.span(),
            "[confirm] p_below and first_share are gone: the two-boot plan has no knobs but `enabled` (docs/statistics.md)",
            Some("remove the key"),
        ));
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
            let rounds = loc.check(
                r.rounds,
                4,
                |n| (2..=100).contains(n),
                |n| format!("[ab] rounds = {n} is out of range"),
                "write 2 to 100 pairs of boots (default 4: A B B A A B B A); the paired test needs at least 2",
            )?;
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

/// Builds `[suites.NAME]`: each key checked (the first wrong one is the error), defaults for
/// those not set.
fn build_suite(
    name: String,
    raw: Spanned<RawSuite>,
    loc: &Locator,
) -> Result<SuiteConfig, ConfigError> {
    let raw = raw.into_inner();
    let (line, _) = loc.line_col(raw.concurrency.span().start);
    let keys = SuiteKeys { name: &name, loc };
    keys.check_name(raw.concurrency.span())?;
    let concurrency = keys.concurrency(&raw.concurrency)?;
    let contexts = keys.contexts(&raw.contexts)?;
    let (timing, repetitions) = keys.timing(&raw)?;
    let burst = (raw.burst.as_ref())
        .map(|b| burst_settings(loc, &name, b))
        .transpose()?;
    Ok(SuiteConfig {
        name,
        line,
        concurrency,
        contexts,
        timing,
        repetitions,
        skip: raw
            .skip
            .iter()
            .map(|s| (s.concurrency, s.context.0))
            .collect(),
        skip_doomed: raw.skip_doomed.unwrap_or(true),
        prefill: PrefillSettings {
            samples: raw
                .prefill_samples
                .unwrap_or(PrefillSettings::DEFAULT.samples),
            max_context: raw
                .prefill_max_context
                .map_or(PrefillSettings::DEFAULT.max_context, |c| c.0),
        },
        burst,
    })
}

/// The checks of one `[suites.NAME]`'s keys: each error names the suite and points at its key.
struct SuiteKeys<'a> {
    name: &'a str,
    loc: &'a Locator<'a>,
}

impl SuiteKeys<'_> {
    /// The suite's name is a word: it names results, baselines and the `--suite` flag.
    fn check_name(&self, conc_span: Range<usize>) -> Result<(), ConfigError> {
        let (name, loc) = (self.name, self.loc);
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(loc.at(
                conc_span,
                format!(
                    "suite name `{name}` has characters other than letters, digits, `-` and `_`"
                ),
                Some("rename the [suites.NAME] table, e.g. [suites.pr]"),
            ));
        }
        Ok(())
    }

    /// The concurrency levels, in range, sorted, each once; at least one.
    fn concurrency(&self, raw: &Spanned<Vec<Spanned<i64>>>) -> Result<Vec<u32>, ConfigError> {
        let (name, loc) = (self.name, self.loc);
        let mut concurrency = Vec::new();
        for c in raw.get_ref() {
            let v = *c.get_ref();
            if !(1..=i64::from(MAX_CONCURRENCY)).contains(&v) {
                return Err(loc.at(
                    c.span(),
                    format!("[suites.{name}] concurrency {v} is out of range (1..={MAX_CONCURRENCY})"),
                    Some("concurrency levels are numbers of parallel streams: 1 or more, e.g. [1, 2, 4, 8]"),
                ));
            }
            concurrency.push(v as u32);
        }
        if concurrency.is_empty() {
            return Err(loc.at(
                raw.span(),
                format!("[suites.{name}] concurrency is empty"),
                Some("list at least one level, e.g. concurrency = [1, 2, 4]"),
            ));
        }
        concurrency.sort_unstable();
        concurrency.dedup();
        Ok(concurrency)
    }

    /// The context lengths, sorted, each once; at least one.
    fn contexts(&self, raw: &Spanned<Vec<ContextLen>>) -> Result<Vec<u64>, ConfigError> {
        let name = self.name;
        let mut contexts: Vec<u64> = raw.get_ref().iter().map(|c| c.0).collect();
        if contexts.is_empty() {
            return Err(self.loc.at(
                raw.span(),
                format!("[suites.{name}] contexts is empty"),
                Some("list at least one context length, e.g. contexts = [\"0\", \"8k\", \"32k\"]"),
            ));
        }
        contexts.sort_unstable();
        contexts.dedup();
        Ok(contexts)
    }

    /// How each cell is measured, and how many times the matrix is: the checked keys, the
    /// defaults for those not set.
    fn timing(&self, raw: &RawSuite) -> Result<(CellTiming, u32), ConfigError> {
        let defaults = CellTiming::DEFAULT;
        let name = self.name;
        let duration_s = self.loc.check(
            raw.duration.clone(),
            Seconds(defaults.duration_s),
            |d| d.0 > 0.0,
            |_| format!("[suites.{name}] duration must be greater than zero"),
            "write the steady-state window per cell, e.g. duration = \"10s\"",
        )?;
        let max_tokens = self.positive(
            &raw.max_tokens,
            "max_tokens",
            defaults.max_tokens,
            "e.g. max_tokens = 512",
        )?;
        let sub_windows = self.positive(
            &raw.sub_windows,
            "sub_windows",
            defaults.sub_windows,
            "e.g. sub_windows = 5 (samples per cell for statistics)",
        )?;
        let repetitions =
            self.positive(&raw.repetitions, "repetitions", 1, "e.g. repetitions = 1")?;
        let unique_context_percent = self.number(
            &raw.unique_context_percent,
            "unique_context_percent",
            defaults.unique_context_percent,
            |p| (0.0..=100.0).contains(&p),
            "is outside 0..=100",
            "write the share of each prompt unique to its stream, e.g. 25",
        )?;
        let max_stream_tps = self.number(
            &raw.max_stream_tps,
            "max_stream_tps",
            defaults.max_stream_tps,
            |v| v.is_finite() && v > 0.0,
            "must be a positive number",
            "write the fastest believable decode rate of one stream, e.g. 5000",
        )?;
        let usage_tolerance = self.number(
            &raw.usage_tolerance,
            "usage_tolerance",
            defaults.usage_tolerance,
            |v| (0.0..1.0).contains(&v),
            "is outside 0..1",
            "write the relative disagreement allowed, e.g. 0.05 for 5%",
        )?;
        let timing = CellTiming {
            duration_s: duration_s.0,
            warmup_s: raw.warmup.map_or(defaults.warmup_s, |s| s.0),
            max_tokens,
            unique_context_percent,
            sub_windows,
            ready_timeout_s: raw
                .ready_timeout
                .map_or(defaults.ready_timeout_s, |s| s.0)
                .max(0.1),
            capacity_stall_s: raw
                .capacity_stall
                .map_or(defaults.capacity_stall_s, |s| s.0)
                .max(0.1),
            ready_stable_s: raw.ready_stable.map_or(defaults.ready_stable_s, |s| s.0),
            request_timeout_s: raw
                .request_timeout
                .map_or(defaults.request_timeout_s, |s| s.0)
                .max(0.1),
            max_stream_tps,
            usage_tolerance,
        };
        Ok((timing, repetitions))
    }

    /// A count that must be at least 1 (`max_tokens`, `sub_windows`, `repetitions`).
    fn positive(
        &self,
        v: &Option<Spanned<u32>>,
        key: &str,
        default: u32,
        fix: &str,
    ) -> Result<u32, ConfigError> {
        let name = self.name;
        let message = |_: &u32| format!("[suites.{name}] {key} must be at least 1");
        self.loc.check(v.clone(), default, |v| *v > 0, message, fix)
    }

    /// A number that must be `within` its range (`unique_context_percent`, a share 0 to 100;
    /// `max_stream_tps`, positive; `usage_tolerance`, below 1); `problem` says how it is not.
    fn number(
        &self,
        v: &Option<Spanned<f64>>,
        key: &str,
        default: f64,
        within: fn(f64) -> bool,
        problem: &str,
        fix: &str,
    ) -> Result<f64, ConfigError> {
        let name = self.name;
        let message = |v: &f64| format!("[suites.{name}] {key} = {v} {problem}");
        self.loc
            .check(v.clone(), default, |v| within(*v), message, fix)
    }
}

/// A suite's `[suites.NAME.burst]`: requests ≥ 1, a positive rate or `"inf"`, the seed of the
/// arrival schedule (0 unless set: the same schedule every run).
fn burst_settings(
    loc: &Locator,
    name: &str,
    raw: &Spanned<RawBurst>,
) -> Result<BurstSettings, ConfigError> {
    let b = raw.get_ref();
    let count = |v: &Spanned<i64>, key: &str, fix: &str| {
        u32::try_from(*v.get_ref())
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                let message = format!(
                    "[suites.{name}.burst] {key} = {} must be a positive count",
                    v.get_ref()
                );
                loc.at(v.span(), message, Some(fix))
            })
    };
    let requests = count(&b.requests, "requests", "e.g. requests = 32")?;
    // `None`: all at once ("inf").
    let request_rate = match &b.request_rate {
        None => None,
        Some(v) => match v.get_ref() {
            toml::Value::String(s) if s.eq_ignore_ascii_case("inf") => None,
            toml::Value::Float(f) if *f == f64::INFINITY => None,
            toml::Value::Float(f) if f.is_finite() && *f > 0.0 => Some(*f),
            toml::Value::Integer(i) if *i > 0 => Some(*i as f64),
            _ => {
                return Err(loc.at(
                    v.span(),
                    format!("[suites.{name}.burst] request_rate must be a positive number of requests per second or \"inf\""),
                    Some("e.g. request_rate = 40 (Poisson arrivals) or request_rate = \"inf\" (all at once)"),
                ));
            }
        },
    };
    let max_tokens = match &b.max_tokens {
        None => 32,
        Some(m) => count(m, "max_tokens", "e.g. max_tokens = 32")?,
    };
    Ok(BurstSettings {
        requests,
        request_rate,
        seed: b.seed.unwrap_or(0),
        prompt_tokens: b.prompt_tokens.as_ref().map_or(1024, |c| c.0),
        max_tokens,
        slo: BurstSlo {
            ttft_s: b.goodput.ttft.map(|s| s.0),
            tpot_s: b.goodput.tpot.map(|s| s.0),
            e2el_s: b.goodput.e2el.map(|s| s.0),
        },
    })
}
