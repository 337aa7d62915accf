//! `[bisect]`: how `infergate bisect` builds the engine at a commit and lists the commits
//! between a good and a bad revision (`docs/bisect.md`).
//!
//! ```toml
//! [bisect]
//! build = "./scripts/build-at.sh {rev}"   # its stdout's last line is the build's output
//! revs = "git rev-list --reverse {good}..{bad}"   # the default
//! ```
//!
//! The engine command may then use `{build}` (the build's output: a path, a wheel, a value).

use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::locate::Locator;
use super::raw::RawEngine;
use super::{CommandSpec, ConfigError, Seconds};

/// The default commit list: the commits after good up to and including bad, oldest first.
pub(crate) const DEFAULT_REVS: &str = "git rev-list --reverse {good}..{bad}";

/// How to build the engine at a commit and which commits lie between good and bad.
#[derive(Debug, Clone, PartialEq)]
pub struct BisectConfig {
    /// Builds the engine at `{rev}`; the last line of its stdout is `{build}` of the engine
    /// command.
    pub build: CommandSpec,
    /// Prints the commits between `{good}` (excluded) and `{bad}` (included), oldest first, one
    /// per line.
    pub revs: CommandSpec,
    /// Where `build` and `revs` run (default: the config file's directory).
    pub workdir: PathBuf,
    /// Longest a build may take before it is stopped (its whole process group).
    pub build_timeout_s: f64,
    /// Most boots of one intermediate commit when its answer stays uncertain (≥ 1).
    pub max_boots_per_step: u32,
    /// Two-sided confidence of each answer (moved cells, each step).
    pub confidence: f64,
    /// Boot-to-boot CV assumed for one boot; `None` = the rule's `prior_cv`.
    pub noise_cv: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBisect {
    build: Spanned<CommandSpec>,
    revs: Option<Spanned<CommandSpec>>,
    workdir: Option<String>,
    build_timeout: Option<Spanned<Seconds>>,
    max_boots_per_step: Option<Spanned<u32>>,
    confidence: Option<Spanned<f64>>,
    noise_cv: Option<Spanned<f64>>,
}

/// Whether `text` uses the placeholder `{name}` (as the engine command's checker reads them).
fn uses(text: &str, name: &str) -> bool {
    text.contains(&format!("{{{name}}}"))
}

/// `{build}` in the engine command needs a `[bisect]` table to fill it.
pub(super) fn check_build_placeholder(
    engine: &Spanned<RawEngine>,
    has_bisect: bool,
    loc: &Locator,
) -> Result<(), ConfigError> {
    if has_bisect {
        return Ok(());
    }
    let e = engine.get_ref();
    let commands = e
        .command
        .iter()
        .chain(e.a.iter().map(|s| &s.get_ref().command))
        .chain(e.b.iter().map(|s| &s.get_ref().command));
    for c in commands {
        if c.get_ref().parts().iter().any(|p| uses(p, "build")) {
            return Err(loc.at(
                c.span(),
                "the engine command uses `{build}` but the file has no [bisect] table",
                Some("add [bisect] with a `build` command (its output fills {build}), or remove {build}"),
            ));
        }
    }
    Ok(())
}

pub(super) fn build_bisect(
    raw: Option<Spanned<RawBisect>>,
    base_dir: &std::path::Path,
    loc: &Locator,
) -> Result<Option<BisectConfig>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let raw = raw.into_inner();
    if !raw.build.get_ref().parts().iter().any(|p| uses(p, "rev")) {
        return Err(loc.at(
            raw.build.span(),
            "[bisect] build does not use `{rev}`",
            Some("write the command that builds the engine at commit {rev}, e.g. build = \"./build-at.sh {rev}\""),
        ));
    }
    let revs = match raw.revs {
        Some(r) => {
            let parts = r.get_ref().parts();
            if !(parts.iter().any(|p| uses(p, "good")) && parts.iter().any(|p| uses(p, "bad"))) {
                return Err(loc.at(
                    r.span(),
                    "[bisect] revs does not use both `{good}` and `{bad}`",
                    Some("write a command printing the commits after {good} up to {bad}, oldest first, e.g. revs = \"git rev-list --reverse {good}..{bad}\""),
                ));
            }
            r.into_inner()
        }
        None => CommandSpec::Shell(DEFAULT_REVS.into()),
    };
    let build_timeout_s = loc
        .check(
            raw.build_timeout,
            Seconds(3600.0),
            |t| t.0 > 0.0,
            |_| "[bisect] build_timeout must be greater than zero".into(),
            "write e.g. build_timeout = \"30m\"",
        )?
        .0;
    let max_boots_per_step = loc.check(
        raw.max_boots_per_step,
        infergate_model::stats::bisect::search::DEFAULT_MAX_BOOTS_PER_STEP,
        |n| (1..=10).contains(n),
        |n| format!("[bisect] max_boots_per_step = {n} is out of range"),
        "write 1 to 10 (default 6: the budget is 4 + 6 boots per halving)",
    )?;
    let confidence = loc.check(
        raw.confidence,
        0.999,
        |c| *c > 0.5 && *c < 1.0,
        |c| format!("[bisect] confidence = {c} is out of range"),
        "write a value in (0.5, 1), e.g. confidence = 0.999",
    )?;
    let noise_cv = raw
        .noise_cv
        .map(|c| {
            loc.check(
                Some(c),
                0.0,
                |c| *c > 0.0 && *c < 1.0,
                |c| format!("[bisect] noise_cv = {c} is out of range"),
                "write the boot-to-boot CV of one boot in (0, 1), e.g. noise_cv = 0.03",
            )
        })
        .transpose()?;
    Ok(Some(BisectConfig {
        build: raw.build.into_inner(),
        revs,
        workdir: raw
            .workdir
            .map_or_else(|| base_dir.to_path_buf(), |w| base_dir.join(w)),
        build_timeout_s,
        max_boots_per_step,
        confidence,
        noise_cv,
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::GateConfig;
    use infergate_schema::asserts::assert_contains;
    use std::path::Path;

    const BASE: &str = r#"
[engine]
command = ["sim", "--slowdown", "{build}", "--port", "{port}"]
[suites.pr]
concurrency = [1]
contexts = ["0"]
"#;

    fn parse(extra: &str) -> Result<GateConfig, String> {
        GateConfig::parse(&format!("{BASE}{extra}"), "t.toml", Path::new("/c"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn bisect_table_parses_with_defaults() {
        let c = parse("[bisect]\nbuild = \"sh map.sh {rev}\"\n").expect("valid");
        let b = c.bisect.expect("bisect");
        assert_eq!(
            b.revs,
            super::super::CommandSpec::Shell(super::DEFAULT_REVS.into())
        );
        assert_eq!(b.workdir, Path::new("/c"));
        assert_eq!(
            b.max_boots_per_step,
            infergate_model::stats::bisect::search::DEFAULT_MAX_BOOTS_PER_STEP
        );
        assert_eq!(b.noise_cv, None);
    }

    #[test]
    fn bad_bisect_tables_name_the_key_and_fix() {
        let e = parse("").expect_err("{build} without [bisect]");
        assert!(e.contains("t.toml:3:") && e.contains("[bisect]"), "{e}");
        let e = parse("[bisect]\nbuild = \"make\"\n").expect_err("no {rev}");
        assert!(
            e.contains("does not use `{rev}`") && e.contains("fix:"),
            "{e}"
        );
        let e = parse("[bisect]\nbuild = \"b {rev}\"\nrevs = \"git log\"\n").expect_err("revs");
        assert_contains(&e, "{good}");
        let e = parse("[bisect]\nbuild = \"b {rev}\"\nmax_boots_per_step = 0\n").expect_err("0");
        assert_contains(&e, "max_boots_per_step");
        let e = parse("[bisect]\nbuild = \"b {rev}\"\nbiuld = 1\n").expect_err("typo");
        assert_contains(&e, "unknown field");
    }
}
