//! `infergate bisect`: the first bad commit between a good and a bad revision.
//!
//! Lists the commits (`[bisect] revs`), builds and boots good, bad, bad, good (`[bisect] build`
//! with `{rev}`, the engine command with `{build}`; `ab`'s order, so the replicates measure
//! the runner's boot-to-boot noise), checks the matrix moved between them, then boots the
//! commit that halves the culprit posterior until one commit holds `confidence` of it or the
//! budget (4 + `max_boots_per_step` × ⌈log2 n⌉ boots) is spent; a commit asked again (still
//! undecided) is booted after a reference boot, alternately good and bad. Every one of these
//! decisions is [`infergate_model::stats::bisect::search::Search::decide`]'s; this loop builds
//! and boots what it asks for. About `4 + log2(n)` boots for `n` commits when each boot decides.
//!
//! Revisions and build outputs are data from commands: `{rev}`, `{good}`, `{bad}` and
//! `{build}` are shell-quoted in shell-line commands, and text with control characters is
//! refused. Each boot is the gate's own [`boot_and_measure`]; builds run under the engine's
//! supervisor (own process group, child subreaper, cgroup where delegated), and their whole
//! tree, `setsid` children included, is killed on time-out, cancellation, when they end and
//! when the gate dies. Nothing here prints: progress goes out as events, and the record is
//! written durably as `bisect.json` ([`infergate_io::fsio::write_durable`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use infergate_config::config::{
    BisectConfig, CommandSpec, ConfigError, EngineConfig, GateConfig, SuiteConfig,
};
use infergate_model::stats::bisect::{
    BisectBoot, BisectRecord, BisectSettings, BisectStep, BootRole, Culprit, NoisePrior,
    StepAnswer, StepEvidence, matrix_value, moved_cells,
    search::{Next, Search, SearchSettings},
};
use infergate_schema::answer::metric_name;
use infergate_schema::results::{CellStatus, Event, EventKind, RunResults};
use infergate_schema::verdict::Metric;

use super::gate::{Progress, Setup, boot_cells, setup};
use super::measure::{MeasureRequest, RunFailure, boot_and_measure};

/// Confidence of the check that good and bad differ at all (the culprit's is `[bisect]
/// confidence`, on the posterior).
const GAP_CONFIDENCE: f64 = 0.95;

/// The record's file name in the output directory.
pub(crate) const RECORD_FILE: &str = "bisect.json";

/// What the command line asks of a bisection.
#[derive(Debug, Clone)]
pub struct BisectRequest {
    pub config: GateConfig,
    pub suite: Option<String>,
    pub good: String,
    pub bad: String,
    /// Output directory: build and engine logs, each boot's results, `bisect.json`.
    pub out: PathBuf,
    pub engine_args: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// The boot noise's prior from the baseline history (`--from-change`); `None`: the
    /// bisection's own boots alone measure it.
    pub noise_prior: Option<NoisePrior>,
    /// The metric whose matrix value each boot gives the posterior (`--metric`).
    pub metric: Metric,
}

/// Why a bisection cannot start: the user's to fix (exit 2); nothing was built or booted.
#[derive(Debug, thiserror::Error)]
pub enum BisectSetupError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error(
        "{config}: `infergate bisect` needs a [bisect] table with a `build` command using {{rev}} (see docs/bisect.md)"
    )]
    NoBisectTable { config: String },
    #[error(
        "--good {good:?} and --bad {bad:?} are the same commit{}: there is nothing between them to bisect; give a --good commit before the regression and a --bad commit after it",
        commit.as_ref().map(|c| format!(" ({c})")).unwrap_or_default()
    )]
    SameRevision {
        good: String,
        bad: String,
        /// The commit both resolve to, when git resolved them.
        commit: Option<String>,
    },
    #[error("{flag} {rev:?}: {why}")]
    Rev {
        flag: &'static str,
        rev: String,
        why: &'static str,
    },
}

/// Why a revision (from the command line or the `revs` command) is refused, if it is.
pub(crate) fn rev_problem(rev: &str) -> Option<&'static str> {
    if rev.is_empty() {
        Some("a revision is empty")
    } else if rev.chars().any(char::is_control) {
        Some("a revision contains control characters")
    } else if rev.starts_with('-') {
        Some("a revision starts with `-` (it would be read as an option)")
    } else {
        None
    }
}

/// The commit `rev` names in the git repository at `workdir`, if git is there and knows it
/// (`rev` passed [`rev_problem`]: it cannot be read as an option).
fn resolve_commit(workdir: &Path, rev: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}^{{commit}}"))
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let sha = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !sha.is_empty()).then_some(sha)
}

/// Why a boot can give no figure of `metric` as the gate takes it.
fn unmeasured_why(metric: Metric) -> &'static str {
    match metric {
        Metric::PrefillTps => "the engine's counters disagreed with its prefill, or no cold sample",
        m if m.is_burst() => "a burst request did not complete, or too few completed",
        m if m.is_latency_percentile() => {
            "the gate's probe read the host late by a share of the tail, or too few observations"
        }
        _ => "no cell measured clean",
    }
}

/// A validated bisection, ready to build and boot.
#[derive(Debug, Clone)]
pub struct BisectPlan {
    pub config: GateConfig,
    pub bisect: BisectConfig,
    pub suite: SuiteConfig,
    pub good: String,
    pub bad: String,
    pub out: PathBuf,
    pub engine_args: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub noise_prior: Option<NoisePrior>,
    pub metric: Metric,
    /// How each boot's engine is started ([`infergate_engine::engine::ProcessEngine`]).
    pub boot: std::sync::Arc<dyn infergate_engine::engine::EngineBoot>,
}

/// A finished (or stopped) bisection.
#[derive(Debug)]
pub struct BisectRun {
    pub record: BisectRecord,
    /// Where the record was written; `None` when writing it failed (see `write_error`).
    pub record_path: Option<PathBuf>,
    pub write_error: Option<String>,
    /// Engine processes that survived teardown.
    pub warnings: Vec<String>,
    /// `[bisect] revs` printed a line that is no revision (control characters, a leading
    /// `-`): the user's to fix, exit 2 as for `--good`/`--bad`.
    pub bad_revision: bool,
}

impl BisectRun {
    /// Exit code: 0 culprit found (and recorded), 2 when `revs` printed a bad revision,
    /// 3 otherwise (the bisection could not conclude).
    pub fn exit(&self) -> infergate_schema::exit::GateExit {
        if self.bad_revision {
            infergate_schema::exit::GateExit::Usage
        } else if self.record.culprit.is_some() && self.write_error.is_none() {
            infergate_schema::exit::GateExit::Pass
        } else {
            infergate_schema::exit::GateExit::Failure
        }
    }
}

/// Substitutes `{name}` placeholders: literally in an argument vector, shell-quoted in a shell
/// line (the values are data).
pub(crate) fn render_command(spec: &CommandSpec, values: &[(&str, &str)]) -> Vec<String> {
    let fill = |s: &str, quote: bool| {
        let mut out = s.to_string();
        for (name, value) in values {
            let v = if quote {
                infergate_engine::engine::shell_quote(value)
            } else {
                value.to_string()
            };
            out = out.replace(&format!("{{{name}}}"), &v);
        }
        out
    };
    match spec {
        CommandSpec::Argv(v) => v.iter().map(|a| fill(a, false)).collect(),
        CommandSpec::Shell(line) => vec!["sh".into(), "-c".into(), fill(line, true)],
    }
}

/// The engine config of one build: `{build}` filled in the command and environment.
fn engine_for_build(engine: &EngineConfig, build: &str) -> EngineConfig {
    let mut e = engine.clone();
    e.command = match &engine.command {
        CommandSpec::Argv(v) => {
            CommandSpec::Argv(v.iter().map(|a| a.replace("{build}", build)).collect())
        }
        CommandSpec::Shell(l) => {
            CommandSpec::Shell(l.replace("{build}", &infergate_engine::engine::shell_quote(build)))
        }
    };
    for v in e.env.values_mut() {
        *v = v.replace("{build}", build);
    }
    e
}

/// Tells a command's supervisor to kill the command's whole tree at once when dropped
/// (time-out, cancellation, panic): SIGTERM to the supervisor, which SIGKILLs the tree.
struct SupervisorGuard(i32);

impl Drop for SupervisorGuard {
    fn drop(&mut self) {
        if self.0 > 0 {
            let _ = nix::sys::signal::kill(Pid::from_raw(self.0), Signal::SIGTERM);
        }
    }
}

/// Runs `argv` in `workdir` under the engine's supervisor (`infergate __supervise`: its own
/// process group, a child subreaper and, where delegated, its own cgroup), so a `setsid` or
/// double-forked child of a build script is found and killed like an engine's: when the
/// command's leader ends, on time-out, on cancellation, and when the gate dies. Stderr goes to
/// `log` (stdout is appended after it). Returns stdout; an error says why (exit status,
/// time-out, cancellation). No process of the command is left when it returns.
async fn run_command(
    argv: &[String],
    workdir: &Path,
    log: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<String, String> {
    use infergate_engine::engine::Report;
    use std::io::Write;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let shown = argv.join(" ");
    let err_log = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let stdout_path = log.with_extension("stdout");
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this infergate binary (for the supervisor): {e}"))?;
    let mut cmd = supervised(argv, workdir, &exe, &stdout_path, err_log);
    let mut supervisor = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{shown}` in {}: {e}", workdir.display()))?;
    let mut guard = SupervisorGuard(supervisor.id().map_or(0, |p| p as i32));
    let (Some(mut control), Some(reports)) = (supervisor.stdin.take(), supervisor.stdout.take())
    else {
        return Err(format!("`{shown}`: the supervisor's pipes were not set up"));
    };
    let mut lines = BufReader::new(reports).lines();
    let follow = async {
        let mut status: Option<Result<(), String>> = None;
        while let Ok(Some(line)) = lines.next_line().await {
            match Report::parse(&line) {
                Some(Report::SpawnError { message, .. }) => {
                    let at = workdir.display();
                    return Err(format!("cannot start `{shown}` in {at}: {message}"));
                }
                Some(Report::ExitedCode(0)) => status = Some(Ok(())),
                Some(Report::ExitedCode(c)) => status = Some(Err(format!("exit status: {c}"))),
                Some(Report::ExitedSignal(s)) => {
                    status = Some(Err(format!("killed by signal {s}")))
                }
                Some(Report::Stopped { .. }) => break,
                _ => {}
            }
        }
        Ok(status)
    };
    let stopped_early = tokio::select! {
        r = follow => Ok(r),
        _ = tokio::time::sleep(timeout) => Err(format!(
            "`{shown}` did not finish within {:.0} s (stopped)",
            timeout.as_secs_f64()
        )),
        _ = cancel.cancelled() => Err(format!("`{shown}` cancelled")),
    };
    if stopped_early.is_err() {
        let _ = control.write_all(b"kill\n").await;
        let _ = control.flush().await;
    }
    drop(control);
    if tokio::time::timeout(Duration::from_secs(15), supervisor.wait())
        .await
        .is_err()
    {
        let _ = supervisor.start_kill();
        let _ = supervisor.wait().await;
    }
    // Reaped: its pid may be reused, so the guard must not signal it any more.
    guard.0 = 0;
    let stdout = std::fs::read(&stdout_path)
        .map(|b| String::from_utf8_lossy(&b).to_string())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&stdout_path);
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
        let _ = write!(f, "--- stdout ---\n{stdout}");
    }
    let status = stopped_early??;
    match status {
        Some(Ok(())) => Ok(stdout),
        failed => {
            let why = failed
                .and_then(Result::err)
                .unwrap_or_else(|| "its supervisor ended without an exit status".into());
            let tail = infergate_engine::engine::log_tail(log, 10);
            Err(format!(
                "`{shown}` failed ({why}); log {}:\n{tail}",
                log.display()
            ))
        }
    }
}

/// The supervisor's command for `argv` in `workdir`: its stdout to the file `stdout`, stderr
/// to `err`, isolated from the gate's outputs under root, and killed when the gate dies.
fn supervised(argv: &[String], workdir: &Path, exe: &Path, stdout: &Path, err: File) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args(["__supervise", "--parent"])
        .arg(std::process::id().to_string())
        // What a finished command left running is killed at once: a build is done when its
        // leader exits.
        .args(["--grace-ms", "0"])
        .arg("--stdout-file")
        .arg(stdout);
    // Under root, the command sees the gate's outputs as an empty, read-only directory, in a
    // mount namespace of its own, and keeps the gate's user (it writes the checkout). Not
    // for other users: a user namespace would break the setuid programs (`sudo`) of builds.
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["--isolation", "auto", "--keep-user"]);
        let gate_cwd = std::env::current_dir().unwrap_or_default();
        let needed = [
            ("the checkout", workdir),
            ("the gate's working directory", gate_cwd.as_path()),
            ("the infergate binary", exe),
        ];
        for d in infergate_engine::engine::dirs_to_cover(&needed).0 {
            cmd.arg("--hide").arg(d);
        }
    }
    cmd.arg("--")
        .args(argv)
        .current_dir(workdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err))
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2),
    // which is async-signal-safe; it allocates nothing and touches no locks.
    #[cfg(target_os = "linux")]
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGHUP).map_err(std::io::Error::from)
        });
    }
    cmd
}

impl BisectPlan {
    /// Validates the request (suite, `[bisect]`, the two revisions). Builds nothing.
    pub fn new(req: BisectRequest) -> Result<BisectPlan, BisectSetupError> {
        let suite = req.config.suite(req.suite.as_deref())?.clone();
        let Some(bisect) = req.config.bisect.clone() else {
            return Err(BisectSetupError::NoBisectTable {
                config: req.config.path.clone(),
            });
        };
        for (flag, rev) in [("--good", &req.good), ("--bad", &req.bad)] {
            if let Some(why) = rev_problem(rev) {
                return Err(BisectSetupError::Rev {
                    flag,
                    rev: rev.clone(),
                    why,
                });
            }
        }
        // Nothing lies between a commit and itself: said now, before any build or boot.
        let commit = |rev: &str| resolve_commit(&bisect.workdir, rev);
        let same = if req.good == req.bad {
            Some(commit(&req.good))
        } else {
            match (commit(&req.good), commit(&req.bad)) {
                (Some(g), Some(b)) if g == b => Some(Some(g)),
                _ => None,
            }
        };
        if let Some(commit) = same {
            return Err(BisectSetupError::SameRevision {
                good: req.good,
                bad: req.bad,
                commit,
            });
        }
        Ok(BisectPlan {
            config: req.config,
            bisect,
            suite,
            good: req.good,
            bad: req.bad,
            out: req.out,
            engine_args: req.engine_args,
            labels: req.labels,
            noise_prior: req.noise_prior,
            metric: req.metric,
            boot: std::sync::Arc::new(infergate_engine::engine::ProcessEngine),
        })
    }

    /// The test settings: `[bisect]` confidence and noise (default the rule's prior CV), the
    /// rule's `min_effect`.
    pub(crate) fn settings(&self) -> BisectSettings {
        let rule = &self.config.thresholds.rule;
        BisectSettings {
            noise_cv: self
                .bisect
                .noise_cv
                .unwrap_or(infergate_model::stats::noise::PRIOR_CV),
            min_effect: rule.min_effect,
            confidence: self.bisect.confidence,
        }
    }

    /// The lines `[bisect] revs` printed (the commits after good up to bad, oldest first);
    /// checked as revisions by the caller.
    async fn list_commits(&self, cancel: &CancellationToken) -> Result<Vec<String>, String> {
        let argv = render_command(
            &self.bisect.revs,
            &[("good", &self.good), ("bad", &self.bad)],
        );
        let log = self.out.join("revs.log");
        let stdout = run_command(
            &argv,
            &self.bisect.workdir,
            &log,
            Duration::from_secs(300),
            cancel,
        )
        .await?;
        let commits: Vec<String> = stdout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if commits.is_empty() {
            return Err(format!(
                "[bisect] revs printed no commit between {} and {} (is --good an ancestor of --bad?)",
                self.good, self.bad
            ));
        }
        Ok(commits)
    }

    /// Builds `rev`: the last non-empty line of the build's stdout.
    async fn build(
        &self,
        rev: &str,
        boot: u32,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let argv = render_command(&self.bisect.build, &[("rev", rev)]);
        let log = self.out.join(format!("build-{boot:02}.log"));
        let stdout = run_command(
            &argv,
            &self.bisect.workdir,
            &log,
            Duration::from_secs_f64(self.bisect.build_timeout_s),
            cancel,
        )
        .await?;
        let last = stdout
            .lines()
            .map(str::trim)
            .rfind(|l| !l.is_empty())
            .ok_or_else(|| format!("the build of {rev} printed nothing (its last stdout line is {{build}}); log {}", log.display()))?;
        if last.chars().any(char::is_control) {
            return Err(format!(
                "the build of {rev} printed control characters in its last line"
            ));
        }
        Ok(last.to_string())
    }

    /// Builds `rev` (or reuses its build), boots and measures the suite; writes the boot's
    /// results. Returns the boot record and its results (when the boot measured).
    async fn boot(
        &self,
        ctx: &mut Ctx,
        rev: &str,
        role: BootRole,
        progress: Progress<'_>,
        cancel: &CancellationToken,
    ) -> (BisectBoot, Option<RunResults>) {
        let number = ctx.boots.len() as u32 + 1;
        let mut boot = BisectBoot {
            boot: number,
            rev: rev.to_string(),
            role,
            build: None,
            results: None,
            cells_measured: 0,
            boot_s: None,
            failure: None,
        };
        let sink = progress(boot_cells(&self.suite));
        let _ = sink.events.send(Event::now(
            EventKind::Notice,
            format!("boot {number}: {} {rev}: building", role.as_str()),
        ));
        // A revision built before is not built again.
        let built = (ctx.boots.iter())
            .filter(|b| b.rev == rev)
            .find_map(|b| b.build.clone());
        let build = match built {
            Some(b) => Ok(b),
            None => self.build(rev, number, cancel).await,
        };
        let build = match build {
            Ok(b) => b,
            Err(e) => {
                boot.failure = Some(format!("build failed: {e}"));
                drop(sink.events);
                let _ = sink.done.await;
                return (boot, None);
            }
        };
        boot.build = Some(build.clone());
        let engine = engine_for_build(&self.config.engine, &build);
        let mut labels = self.labels.clone();
        labels.insert("sha".into(), rev.to_string());
        labels.insert("bisect_role".into(), role.as_str().into());
        labels.insert("bisect_boot".into(), number.to_string());
        let log_path = self.out.join(format!("engine-{number:02}.log"));
        let _ = std::fs::remove_file(&log_path);
        let measured = boot_and_measure(
            MeasureRequest {
                boot: self.boot.as_ref(),
                engine: &engine,
                model: self.config.model.as_deref(),
                suite: &self.suite,
                hardware: ctx.env.hardware.clone(),
                telemetry: ctx.env.telemetry.clone(),
                engine_args: &self.engine_args,
                log_path,
                log_tail_lines: self.config.report.log_tail_lines,
                labels,
                // Each boot's results are written whole after it (results-NN.json).
                progress_file: None,
            },
            sink.events,
            cancel.clone(),
        )
        .await;
        let _ = sink.done.await;
        ctx.warnings.extend(
            (measured.stop.as_ref())
                .and_then(|s| s.survivors_warning(&format!("boot {number} ({rev})"))),
        );
        boot.boot_s = measured.boot_s;
        boot.cells_measured = measured
            .results
            .cells
            .iter()
            .filter(|c| c.status == CellStatus::Ok)
            .count();
        let name = format!("results-{number:02}.json");
        let body = serde_json::to_string_pretty(&measured.results);
        match super::outputs::write_json(&self.out.join(&name), body) {
            Ok(()) => boot.results = Some(name),
            Err(e) => ctx.warnings.push(format!("cannot write {name}: {e}")),
        }
        boot.failure = measured.failure.as_ref().map(RunFailure::message);
        let results = boot.failure.is_none().then_some(measured.results);
        (boot, results)
    }

    /// Boots `rev`, records the boot, and returns its results: a boot that measured nothing
    /// ends the bisection with the boot's own failure.
    async fn measured_boot(
        &self,
        ctx: &mut Ctx,
        rev: &str,
        role: BootRole,
        progress: Progress<'_>,
        cancel: &CancellationToken,
    ) -> Result<RunResults, String> {
        let (boot, results) = self.boot(ctx, rev, role, progress, cancel).await;
        let failure = boot.failure.clone();
        ctx.boots.push(boot);
        results.ok_or_else(|| {
            format!(
                "the {} revision {rev} could not be measured: {}",
                role.as_str(),
                failure.unwrap_or_default()
            )
        })
    }

    pub async fn run(self, progress: Progress<'_>, cancel: CancellationToken) -> BisectRun {
        let mut record = BisectRecord {
            good: self.good.clone(),
            bad: self.bad.clone(),
            suite: self.suite.name.clone(),
            commits: Vec::new(),
            cells: Vec::new(),
            boots: Vec::new(),
            steps: Vec::new(),
            culprit: None,
            failure: None,
            suspects: Vec::new(),
            suspect_probabilities: Vec::new(),
            engine_s: 0.0,
            noise_prior: self.noise_prior,
            metric: self.metric,
        };
        if let Err(e) = std::fs::create_dir_all(&self.out) {
            record.failure = Some(format!("cannot create {}: {e}", self.out.display()));
            return self.finish(record, Vec::new());
        }
        // The engines see an empty, read-only directory there (docs/security.md).
        infergate_engine::engine::hide_from_engines(&[&self.out]);
        let env = match setup(&self.config).await {
            Ok(s) => s,
            Err(e) => {
                record.failure = Some(e.to_string());
                return self.finish(record, Vec::new());
            }
        };
        let mut ctx = Ctx {
            env,
            boots: Vec::new(),
            warnings: Vec::new(),
            bad_revision: false,
        };
        let started = std::time::Instant::now();
        let outcome = self.bisect(&mut ctx, &mut record, progress, &cancel).await;
        record.engine_s = started.elapsed().as_secs_f64();
        if let Err(e) = outcome {
            record.failure = Some(if cancel.is_cancelled() {
                format!("cancelled by SIGINT/SIGTERM ({e})")
            } else {
                e
            });
        }
        record.boots = ctx.boots;
        let mut run = self.finish(record, ctx.warnings);
        run.bad_revision = ctx.bad_revision;
        run
    }

    /// Lists, builds, boots and halves until the first bad commit is found or the bisection
    /// cannot go on (a failed build or boot, an answer that stays uncertain, cancellation).
    async fn bisect(
        &self,
        ctx: &mut Ctx,
        record: &mut BisectRecord,
        progress: Progress<'_>,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let settings = self.settings();
        let commits = self.list_commits(cancel).await?;
        if let Some((line, why)) = commits
            .iter()
            .find_map(|l| rev_problem(l).map(|why| (l, why)))
        {
            ctx.bad_revision = true;
            return Err(format!("[bisect] revs printed {line:?}: {why}"));
        }
        record.commits = commits.clone();
        record.suspects = commits.clone();
        let n = commits.len();
        let bad_index = n - 1;
        let mut search = Search::new(
            n,
            SearchSettings {
                confidence: settings.confidence,
                max_boots_per_step: self.bisect.max_boots_per_step,
                gap_confidence: GAP_CONFIDENCE,
                prior: self.noise_prior,
            },
        );
        // The first good boot: every boot's matrix value is relative to it.
        let mut reference: Option<RunResults> = None;
        // The first two boots of each end: the per-cell evidence (`cells`).
        let (mut goods, mut bads) = (Vec::new(), Vec::new());
        // Boots that gave no figure of the metric (booted again).
        let mut unmeasured = 0;
        loop {
            rank_suspects(&search.posterior(), &commits, record);
            let Some(plan) = self.next_boots(search.decide(), &commits, record)? else {
                return Ok(());
            };
            let mut step = None;
            for commit in plan {
                let (rev, role) = match commit {
                    None => (self.good.clone(), BootRole::Good),
                    Some(i) if i == bad_index => (self.bad.clone(), BootRole::Bad),
                    Some(i) => (commits[i].clone(), BootRole::Step),
                };
                let run = self
                    .measured_boot(ctx, &rev, role, progress, cancel)
                    .await?;
                // A boot without the metric's figure as the gate takes it (a tail the host ran
                // late on, a prefill the engine's counters disagreed with) is no measurement:
                // the search asks for it again, up to one step's budget of such boots.
                let Some(value) =
                    matrix_value(&run, reference.as_ref().unwrap_or(&run), self.metric)
                else {
                    unmeasured += 1;
                    let why = format!(
                        "{rev} gave no {} the gate would compare ({})",
                        metric_name(self.metric),
                        unmeasured_why(self.metric)
                    );
                    if unmeasured > self.bisect.max_boots_per_step {
                        return Err(format!("{unmeasured} boots unmeasured, the last: {why}"));
                    }
                    ctx.warnings.push(format!("{why}: booted again"));
                    continue;
                };
                reference.get_or_insert_with(|| run.clone());
                search.record(commit, value);
                match role {
                    BootRole::Good if goods.len() < 2 => goods.push(run),
                    BootRole::Bad if bads.len() < 2 => bads.push(run),
                    BootRole::Step => step = Some((commit.unwrap_or(0), value)),
                    _ => {}
                }
                if goods.len() == 2 && bads.len() == 2 && record.cells.is_empty() {
                    record.cells = moved_cells(&goods, &bads, &settings);
                }
            }
            let Some(step) = step else {
                continue;
            };
            let reference = reference.as_ref();
            record.steps.push(step_of(
                &search, step, &commits, &ctx.boots, reference, &settings,
            ));
        }
    }

    /// What the search decided: the boots to run next; `None` when it named the culprit
    /// (recorded); `Err` why it stopped without one.
    fn next_boots(
        &self,
        next: Next,
        commits: &[String],
        record: &mut BisectRecord,
    ) -> Result<Option<Vec<Option<usize>>>, String> {
        match next {
            Next::Boot(plan) => Ok(Some(plan)),
            Next::Culprit { index, .. } => {
                record.culprit = Some(Culprit {
                    rev: commits[index].clone(),
                    index: index + 1,
                    last_good: (index.checked_sub(1))
                        .map_or_else(|| self.good.clone(), |i| commits[i].clone()),
                });
                Ok(None)
            }
            Next::NothingMoved { gap, lo, hi, boots } => Err(format!(
                "no change between {} and {}: the matrix moved {} {} at {:.0}% confidence over {boots} boots of the two: nothing to bisect",
                self.good,
                self.bad,
                infergate_schema::verdict::signed_percent(gap.exp_m1()),
                infergate_schema::answer::interval(lo.exp_m1(), hi.exp_m1()),
                GAP_CONFIDENCE * 100.0,
            )),
            Next::BudgetSpent {
                budget,
                best,
                probability,
            } => Err(format!(
                "the boot budget ({budget} boots: the ends' + max_boots_per_step {} x ⌈log2 {}⌉) is spent; the most likely first bad commit is {} (probability {probability:.2}); suspects with their probabilities are in bisect.json",
                self.bisect.max_boots_per_step,
                commits.len(),
                commits[best]
            )),
        }
    }

    /// Writes `bisect.json` (atomically).
    fn finish(&self, record: BisectRecord, warnings: Vec<String>) -> BisectRun {
        let path = self.out.join(RECORD_FILE);
        let written = super::outputs::write_json(&path, serde_json::to_string_pretty(&record));
        let (record_path, write_error) = match written {
            Ok(()) => (Some(path), None),
            Err(e) => (None, Some(format!("writing {}: {e}", path.display()))),
        };
        BisectRun {
            record,
            record_path,
            write_error,
            warnings,
            bad_revision: false,
        }
    }
}

/// The commits the culprit may still be, most likely first with their probabilities, and in
/// order.
fn rank_suspects(post: &[f64], commits: &[String], record: &mut BisectRecord) {
    let mut ranked: Vec<(usize, f64)> = post.iter().copied().enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    record.suspect_probabilities = ranked
        .iter()
        .filter(|(_, p)| *p >= 0.001)
        .map(|(i, p)| (commits[*i].clone(), *p))
        .collect();
    record.suspects = (0..commits.len())
        .filter(|&i| post[i] >= 0.001)
        .map(|i| commits[i].clone())
        .collect();
}

/// The standard normal quantile of `p` (clamped away from 0 and 1).
fn probit(p: f64) -> f64 {
    statrs::distribution::Normal::new(0.0, 1.0)
        .map(|d| {
            use statrs::distribution::ContinuousCDF;
            d.inverse_cdf(p.clamp(1e-12, 1.0 - 1e-12))
        })
        .unwrap_or(0.0)
}

/// What step commit `r`, booted to `step_value`, told: good, bad or uncertain at the
/// search's confidence, where its value lies between the ends', and the suspects left.
fn step_of(
    search: &Search,
    (r, step_value): (usize, f64),
    commits: &[String],
    boots: &[BisectBoot],
    reference: Option<&RunResults>,
    settings: &BisectSettings,
) -> BisectStep {
    let (rev, confidence) = (&commits[r], settings.confidence);
    let post = search.posterior();
    let n = post.len();
    let p_bad: f64 = post[..=r].iter().sum();
    let mean_of = |end: Option<usize>| {
        let v: Vec<f64> = search
            .values()
            .iter()
            .filter(|b| b.commit == end)
            .map(|b| b.value)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (good_mean, bad_mean) = (mean_of(None), mean_of(Some(n - 1)));
    let numbers: Vec<u32> = boots
        .iter()
        .filter(|b| &b.rev == rev && b.role == BootRole::Step)
        .map(|b| b.boot)
        .collect();
    let support: Vec<usize> = (0..n).filter(|&i| post[i] >= 0.001).collect();
    BisectStep {
        rev: rev.clone(),
        index: r + 1,
        boots: numbers.clone(),
        evidence: StepEvidence {
            answer: if p_bad >= confidence {
                StepAnswer::Bad
            } else if p_bad <= 1.0 - confidence {
                StepAnswer::Good
            } else {
                StepAnswer::Uncertain
            },
            position: (bad_mean != good_mean)
                .then(|| (step_value - good_mean) / (bad_mean - good_mean)),
            z: probit(p_bad),
            z_needed: probit(confidence),
            cells: reference.map_or(0, |r| {
                r.cells
                    .iter()
                    .filter(|c| c.status == CellStatus::Ok)
                    .count()
            }),
            boots: numbers.len(),
        },
        suspects: (
            support.first().map_or(1, |i| i + 1),
            support.last().map_or(n, |i| i + 1),
        ),
    }
}

/// What the boots share: the machine's fingerprint and telemetry, the boots so far.
struct Ctx {
    env: Setup,
    boots: Vec<BisectBoot>,
    warnings: Vec<String>,
    /// `revs` printed a line that is no revision.
    bad_revision: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_data_quoted_in_shell_lines_and_literal_in_argv() {
        let shell = CommandSpec::Shell("./build.sh {rev} && echo done".into());
        let argv = render_command(&shell, &[("rev", "a b'; rm -rf /")]);
        assert_eq!(argv[..2], ["sh".to_string(), "-c".to_string()]);
        assert_eq!(argv[2], "./build.sh 'a b'\\''; rm -rf /' && echo done");
        let v = CommandSpec::Argv(vec![
            "git".into(),
            "rev-list".into(),
            "{good}..{bad}".into(),
        ]);
        assert_eq!(
            render_command(&v, &[("good", "v1"), ("bad", "main")])[2],
            "v1..main"
        );
    }

    #[test]
    fn control_characters_and_options_are_not_revisions() {
        assert!(rev_problem("abc123").is_none());
        assert!(rev_problem("v1.2^").is_none());
        assert!(rev_problem("a\nb").is_some());
        assert!(rev_problem("a\u{1b}[31m").is_some());
        assert!(rev_problem("--all").is_some());
        assert!(rev_problem("").is_some());
    }

    #[test]
    fn the_build_output_fills_the_engine_command_as_data() {
        let base = GateConfig::embedded_default().expect("default").engine;
        let mut e = base.clone();
        e.command = CommandSpec::Shell("sim --slowdown {build}".into());
        let got = engine_for_build(&e, "1.3; echo x");
        assert_eq!(
            got.command,
            CommandSpec::Shell("sim --slowdown '1.3; echo x'".into())
        );
        e.command = CommandSpec::Argv(vec!["sim".into(), "--slowdown".into(), "{build}".into()]);
        let got = engine_for_build(&e, "1.3");
        assert_eq!(
            got.command,
            CommandSpec::Argv(vec!["sim".into(), "--slowdown".into(), "1.3".into()])
        );
    }
}
