//! The supervised engine process, seen from the gate: boots the engine under test through its
//! supervisor ([`supervisor`], `infergate __supervise`), writes its output (redacted) to the
//! engine log, waits until it serves, notices when it dies, and stops its whole process tree
//! on every exit path.
//!
//! Why a supervisor: engines fork (vLLM's API server + engine core + workers, `sh -c`
//! wrappers), and the engine under test is untrusted code that may `setsid` or double-fork out
//! of its process group. The supervisor is a child subreaper (and, where delegated, puts the
//! tree in its own cgroup), so every descendant stays findable and is killed at teardown; it
//! dies with the gate, taking the tree with it, even when the gate is SIGKILLed.
//! [`EngineProcess::stop`] asks it to SIGTERM the tree, wait `stop_grace` and SIGKILL the rest;
//! the [`Drop`] of [`EngineProcess`] closes its control pipe and SIGKILLs the engine's group as
//! the last resort (error returns, panics and cancelled tasks all drop it).
//!
//! The pipeline holds it through the seam ([`seam`]: [`EngineBoot`], [`RunningEngine`]), whose
//! other implementation runs the simulated engine in the gate's own process for tests.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub mod isolate;
pub(crate) mod launch;
pub(crate) mod preflight;
pub(crate) mod reach;
pub mod seam;
pub mod supervisor;

pub use launch::{EngineLaunch, Placeholders, free_port, shell_quote};
pub use preflight::{PreflightError, preflight};
pub use reach::dirs_to_cover;
pub use reach::{conceal_gate, hide_from_engines};
pub use seam::{EngineBoot, ProcessEngine, RunningEngine};
pub use supervisor::Report;
pub use supervisor::{Containment, adopt_orphans, kill_leftover_descendants};

/// Why the engine could not be started, became ready, or was stopped cleanly.
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum EngineError {
    /// The program could not be executed at all (not installed, not executable, bad workdir);
    /// `hint` says what to check ([`spawn_hint`]).
    #[error("cannot start the engine command `{program}`: {source}; {hint}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
        hint: String,
    },
    /// The log file could not be created.
    #[error("cannot open the engine log file {path}: {source}")]
    Log {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// No free port could be found for `{port}`.
    #[error("cannot pick a free port on {host}: {source}")]
    Port {
        host: String,
        #[source]
        source: std::io::Error,
    },
    /// The engine process ended before it answered `/health` and `/v1/models`.
    #[error(
        "engine exited with {status} before becoming ready{hint}\n--- last lines of the engine log ({log}) ---\n{tail}"
    )]
    ExitedBeforeReady {
        status: String,
        hint: String,
        log: String,
        tail: String,
    },
    /// The engine did not become ready in time.
    #[error(
        "engine not ready after {timeout_s:.1}s (readiness_timeout): {last}; raise [engine] readiness_timeout if it just loads slowly\n--- last lines of the engine log ({log}) ---\n{tail}"
    )]
    ReadinessTimeout {
        timeout_s: f64,
        last: String,
        log: String,
        tail: String,
    },
    /// The supervisor could not be started or did not answer as expected.
    #[error("the engine supervisor failed: {0}")]
    Supervisor(String),
    /// An in-process engine ([`seam`]) could not be started from the command.
    #[error("cannot start the engine in process: {0}")]
    InProcess(String),
    /// The gate was cancelled (SIGINT/SIGTERM) while waiting for the engine.
    #[error("cancelled while waiting for the engine to become ready")]
    Cancelled,
}

/// How the engine process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineExit {
    /// `status 1`, `signal 9 (SIGKILL)`.
    pub description: String,
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
}

impl EngineExit {
    /// From the supervisor's `exited` report.
    fn from_report(r: &Report) -> Option<EngineExit> {
        match *r {
            Report::ExitedCode(c) => Some(EngineExit {
                description: format!("status {c}"),
                code: Some(c),
            }),
            Report::ExitedSignal(sig) => Some(EngineExit {
                description: match Signal::try_from(sig) {
                    Ok(name) => format!("signal {sig} ({})", name.as_str()),
                    Err(_) => format!("signal {sig}"),
                },
                code: None,
            }),
            _ => None,
        }
    }

    fn unknown(why: &str) -> EngineExit {
        EngineExit {
            description: format!("an unknown status ({why})"),
            code: None,
        }
    }
}

/// What the engine answered once ready.
#[derive(Debug, Clone, Default)]
pub struct ReadyInfo {
    /// Seconds from spawn to ready.
    pub boot_s: f64,
    /// Model ids from `/v1/models`.
    pub models: Vec<String>,
}

/// How teardown went.
#[derive(Debug, Clone, PartialEq)]
pub struct StopReport {
    /// How the leader process ended (`None` if it could not be observed).
    pub exit: Option<EngineExit>,
    /// Whether SIGKILL was needed after the grace period.
    pub killed: bool,
    /// Whether every process of the engine's tree is gone (setsid'd and double-forked ones
    /// included).
    pub group_gone: bool,
    /// Seconds teardown took.
    pub stop_s: f64,
    /// How the tree was held.
    pub containment: Containment,
    /// The engine's user and view of the filesystem ([`EngineProcess::isolation`]).
    pub isolation: String,
}

impl StopReport {
    /// The warning a report carries when processes of `boot` outlived teardown, else `None`:
    /// one wording for every boot a command makes.
    pub fn survivors_warning(&self, boot: &str) -> Option<String> {
        (!self.group_gone).then(|| {
            format!("engine processes of {boot} survived teardown (SIGKILL sent to the group)")
        })
    }

    /// `engine.containment` in the results: `<tree>; <user>; <filesystem>`.
    pub fn containment_record(&self) -> String {
        containment_record(self.containment, &self.isolation)
    }
}

/// `<tree>; <isolation>`, or the tree alone where there is no isolation text.
fn containment_record(tree: Containment, isolation: &str) -> String {
    if isolation.is_empty() {
        tree.as_str().to_string()
    } else {
        format!("{tree}; {isolation}")
    }
}

/// The last-resort cleanup when dropped while armed (also on panics and cancelled futures):
/// SIGKILLs the engine's group and tells the supervisor to kill the rest of the tree at once
/// (SIGTERM to it; its control pipe closes with the [`EngineProcess`] as well).
#[derive(Debug)]
struct TreeGuard {
    pgid: i32,
    supervisor: i32,
    armed: bool,
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if self.armed {
            if self.pgid > 0 {
                let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
            }
            if self.supervisor > 0 {
                let _ = kill(Pid::from_raw(self.supervisor), Signal::SIGTERM);
            }
        }
    }
}

/// Whether this process runs as root (effective uid 0).
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether any process of group `pgid` still exists (a zombie not yet reaped counts).
pub fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// A running engine: its supervisor, process group, log and exit watch.
#[derive(Debug)]
pub struct EngineProcess {
    pgid: i32,
    containment: Containment,
    isolation: String,
    launch: EngineLaunch,
    started: Instant,
    exit_rx: watch::Receiver<Option<EngineExit>>,
    stopped_rx: watch::Receiver<Option<(bool, usize)>>,
    log_done: watch::Receiver<bool>,
    status_task: tokio::task::JoinHandle<()>,
    control: Option<tokio::process::ChildStdin>,
    supervisor: tokio::process::Child,
    guard: TreeGuard,
    /// The engine's private working directory when the config names none (removed on drop).
    _private_dir: Option<tempfile::TempDir>,
}

/// Longest stretch of engine output without a newline that is buffered before it is written.
const MAX_LOG_LINE: usize = 64 * 1024;

/// Copies the engine's output to the log file, redacted, line by line; marks `done` at the end.
/// The writes go through `tokio::fs` (the blocking pool): a disk stalled by writeback must never
/// stall the measuring client, which shares the gate's runtime thread.
async fn copy_log(
    mut from: tokio::process::ChildStderr,
    to: std::fs::File,
    redactor: Arc<infergate_io::redact::Redactor>,
    done: watch::Sender<bool>,
) {
    let mut to = tokio::fs::File::from_std(to);
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 8192];
    loop {
        // 0 at the end of the output (or a read error): what is left is written as it is.
        let n = from.read(&mut chunk).await.unwrap_or(0);
        buf.extend_from_slice(&chunk[..n]);
        let cut = match buf.iter().rposition(|&b| b == b'\n') {
            _ if n == 0 => buf.len(),
            Some(i) => i + 1,
            None if buf.len() >= MAX_LOG_LINE => buf.len(),
            None => continue,
        };
        if cut > 0 {
            let rest = buf.split_off(cut);
            let text = redactor.redact(&String::from_utf8_lossy(&buf));
            let _ = to.write_all(text.as_bytes()).await;
            buf = rest;
        }
        if n == 0 {
            break;
        }
    }
    let _ = to.flush().await;
    let _ = done.send(true);
}

/// The supervisor's first report: the engine started (its process group, how it is contained,
/// its isolation), or why it did not (the supervisor reaped, the guard disarmed, where it
/// ended).
async fn first_report(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    supervisor: &mut tokio::process::Child,
    guard: &mut TreeGuard,
    launch: &EngineLaunch,
    program: &str,
) -> Result<(i32, Containment, String), EngineError> {
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    match first {
        Ok(Ok(Some(line))) => match Report::parse(&line) {
            Some(Report::Started {
                pid,
                containment,
                isolation,
            }) => Ok((pid, containment, isolation)),
            Some(Report::SpawnError { errno, message }) => {
                let source = if errno > 0 {
                    std::io::Error::from_raw_os_error(errno)
                } else {
                    std::io::Error::other(message)
                };
                let _ = supervisor.wait().await;
                guard.armed = false;
                let hint = spawn_hint(launch, program, errno);
                let program = shown_program(launch, program);
                Err(EngineError::Spawn {
                    program,
                    source,
                    hint,
                })
            }
            _ => Err(EngineError::Supervisor(format!(
                "unexpected first report `{}`",
                infergate_io::untrusted_text::console(&line)
            ))),
        },
        Ok(Ok(None)) | Ok(Err(_)) => {
            let status = supervisor.wait().await.ok();
            guard.armed = false;
            Err(EngineError::Supervisor(format!(
                "it ended before starting the engine ({}); is this platform Linux?",
                status.map_or("unknown status".into(), |s| s.to_string())
            )))
        }
        Err(_) => Err(EngineError::Supervisor("no answer within 60 s".into())),
    }
}

/// The engine's log file, appended to (its directory made first).
fn open_log(path: &Path) -> Result<std::fs::File, EngineError> {
    let failed = |source| EngineError::Log {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(failed)
}

/// The engine's working directory: the config's, or a fresh private one (mode 0700, removed
/// after the engine), never the gate's, where the outputs usually are. The private one is
/// returned so that it lives as long as the engine.
fn working_dir(
    cmd: &mut tokio::process::Command,
    launch: &EngineLaunch,
    program: &str,
) -> Result<Option<tempfile::TempDir>, EngineError> {
    if let Some(dir) = &launch.workdir {
        cmd.current_dir(dir);
        return Ok(None);
    }
    let mut builder = tempfile::Builder::new();
    builder.prefix("infergate-engine-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Directories are made with the umask's mode (0755) unless told.
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let dir = builder.tempdir().map_err(|source| EngineError::Spawn {
        program: format!("{program} (creating its private working directory)"),
        source,
        hint: "check that the temporary directory (TMPDIR) is writable".into(),
    })?;
    cmd.current_dir(dir.path())
        .arg("--private-dir")
        .arg(dir.path());
    Ok(Some(dir))
}

/// The supervisor's reports after the engine started, read until it ends: the engine's exit
/// (sent once its log is drained, so the tail shown with a failure has its last lines) and
/// the teardown's `Stopped`.
fn watch_reports(
    mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    mut log_done: watch::Receiver<bool>,
) -> SupervisorReports {
    let (exit_tx, exit_rx) = watch::channel(None);
    let (stopped_tx, stopped_rx) = watch::channel(None);
    let task = tokio::spawn(async move {
        let mut exit_sent = false;
        while let Ok(Some(line)) = lines.next_line().await {
            let report = Report::parse(&line);
            if let Some(Report::Stopped { killed, left }) = report {
                let _ = stopped_tx.send(Some((killed, left)));
            } else if let Some(exit) = report.as_ref().and_then(EngineExit::from_report) {
                log_drained(&mut log_done, Duration::from_secs(2)).await;
                let _ = exit_tx.send(Some(exit));
                exit_sent = true;
            }
        }
        if !exit_sent {
            log_drained(&mut log_done, Duration::from_secs(2)).await;
            let _ = exit_tx.send(Some(EngineExit::unknown("its supervisor ended")));
        }
    });
    SupervisorReports {
        exit_rx,
        stopped_rx,
        task,
    }
}

/// What [`watch_reports`] hands the engine's handle: the engine's exit, the teardown's
/// `(killed, left)`, and the task reading them.
struct SupervisorReports {
    exit_rx: watch::Receiver<Option<EngineExit>>,
    stopped_rx: watch::Receiver<Option<(bool, usize)>>,
    task: tokio::task::JoinHandle<()>,
}

/// Waits (up to `limit`) until the log copy has reached the end of the engine's output.
async fn log_drained(done: &mut watch::Receiver<bool>, limit: Duration) {
    let _ = tokio::time::timeout(limit, done.wait_for(|d| *d)).await;
}

impl EngineProcess {
    /// Starts the engine under its supervisor: its own process group and process tree, the
    /// allow-listed environment only, output copied (redacted) to the log file by the gate.
    pub async fn spawn(launch: EngineLaunch) -> Result<EngineProcess, EngineError> {
        let log = open_log(&launch.log_path)?;
        let program = launch.argv.first().cloned().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(&launch.supervisor);
        cmd.arg("__supervise")
            .arg("--parent")
            .arg(std::process::id().to_string())
            .arg("--grace-ms")
            .arg(launch.stop_grace.as_millis().to_string())
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group: a Ctrl-C at the terminal reaches the gate, which stops the
            // engine with its grace, not the supervisor.
            .process_group(0);
        let private_dir = working_dir(&mut cmd, &launch, &program)?;
        let (mut isolation_notes, writable) =
            isolation_args(&mut cmd, &launch, private_dir.as_ref());
        cmd.arg("--").args(&launch.argv);
        // The gate's own binary for `{infergate}` (launch::SelfExec): inherited by the
        // supervisor and from it by the engine; in the gate it stays close-on-exec.
        let self_fd = launch.self_exec.as_ref().map(launch::SelfExec::raw_fd);
        // SAFETY: the closure runs in the forked child before exec and only calls prctl(2) and
        // fcntl(2), which are async-signal-safe; it allocates nothing and touches no locks.
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = self_fd
                    && libc::fcntl(fd, libc::F_SETFD, 0) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                nix::sys::prctl::set_pdeathsig(Signal::SIGHUP).map_err(std::io::Error::from)
            });
        }
        let mut supervisor = cmd.spawn().map_err(|source| EngineError::Spawn {
            program: launch.supervisor.display().to_string(),
            source,
            hint: "the gate could not start its engine supervisor (this infergate binary)".into(),
        })?;
        let supervisor_pid = supervisor.id().map_or(0, |p| p as i32);
        let mut guard = TreeGuard {
            pgid: 0,
            supervisor: supervisor_pid,
            armed: true,
        };
        let (Some(stdout), Some(stderr), Some(control)) = (
            supervisor.stdout.take(),
            supervisor.stderr.take(),
            supervisor.stdin.take(),
        ) else {
            return Err(EngineError::Supervisor("its pipes were not set up".into()));
        };
        let (done_tx, log_done) = watch::channel(false);
        tokio::spawn(copy_log(
            stderr,
            log,
            infergate_io::redact::process(),
            done_tx,
        ));

        let mut lines = BufReader::new(stdout).lines();
        let (pgid, containment, mut isolation) =
            first_report(&mut lines, &mut supervisor, &mut guard, &launch, &program).await?;
        guard.pgid = pgid;
        if !isolation.contains("namespace cover") {
            // Without the cover, a directory's own mode is what keeps the engine out.
            isolation_notes.extend(writable);
        }
        if !isolation_notes.is_empty() {
            isolation_notes.insert(0, isolation);
            isolation = isolation_notes.join("; ");
        }

        let SupervisorReports {
            exit_rx,
            stopped_rx,
            task: status_task,
        } = watch_reports(lines, log_done.clone());
        Ok(EngineProcess {
            pgid,
            containment,
            isolation,
            launch,
            started: Instant::now(),
            exit_rx,
            stopped_rx,
            log_done,
            status_task,
            control: Some(control),
            supervisor,
            guard,
            _private_dir: private_dir,
        })
    }

    /// The engine's process group id (= its leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// How the engine's process tree is held (cgroup or subreaper).
    pub fn containment(&self) -> Containment {
        self.containment
    }

    /// How the engine ended, once it has.
    fn exited(&self) -> Option<EngineExit> {
        self.exit_rx.borrow().clone()
    }

    /// Waits until the engine serves ([`wait_serving`]); fails early when the process exits.
    pub async fn wait_ready(
        &self,
        cancel: &CancellationToken,
        log_tail_lines: usize,
    ) -> Result<ReadyInfo, EngineError> {
        wait_serving(
            &self.launch,
            self.started,
            self.exit_rx.clone(),
            cancel,
            log_tail_lines,
            |exit| self.exited_error(exit, log_tail_lines),
        )
        .await
    }

    fn exited_error(&self, exit: &EngineExit, log_tail_lines: usize) -> EngineError {
        let mut hint = match exit.code {
            Some(127) => format!(
                " (status 127: the shell could not find the command `{}`)",
                self.launch.display
            ),
            Some(126) => " (status 126: the command is not executable)".to_string(),
            _ => String::new(),
        };
        let tail = log_tail(&self.launch.log_path, log_tail_lines);
        if let Some(user) = self
            .isolation
            .strip_prefix("uid ")
            .and_then(|r| r.split(';').next())
            && (matches!(exit.code, Some(126 | 127))
                || ["Permission denied", "Errno 13", "EACCES"]
                    .iter()
                    .any(|w| tail.contains(w)))
        {
            hint.push_str(&format!(
                "; it ran as uid {user} (the gate is root, [engine] isolation = \"{}\"): its program, libraries and model must be readable by that user (`chmod o+rx` the directory that stops it, e.g. /root), or set isolation = \"UID:GID\" (a user that can read them) or isolation = \"off\" under [engine] (docs/security.md)",
                self.launch.isolation.value()
            ));
        }
        EngineError::ExitedBeforeReady {
            status: exit.description.clone(),
            hint,
            log: self.launch.log_path.display().to_string(),
            tail,
        }
    }

    /// Stops the whole tree: the supervisor SIGTERMs every process of it, waits up to
    /// `stop_grace`, SIGKILLs what is left and reports; waits (up to 15 s more) for that.
    pub async fn stop(mut self) -> StopReport {
        let t0 = Instant::now();
        if let Some(mut control) = self.control.take() {
            let line = format!("stop {}\n", self.launch.stop_grace.as_millis());
            let _ = control.write_all(line.as_bytes()).await;
            let _ = control.flush().await;
            // Kept open until the supervisor is done: its end means "kill at once".
            let limit = self.launch.stop_grace + Duration::from_secs(15);
            let waited = tokio::time::timeout(limit, self.supervisor.wait()).await;
            drop(control);
            if waited.is_err() {
                let _ = self.supervisor.start_kill();
                let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
                let _ = self.supervisor.wait().await;
            }
            // Reaped: its pid may be reused, so the guard must not signal it any more.
            self.guard.supervisor = 0;
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.status_task).await;
        log_drained(&mut self.log_done, Duration::from_secs(2)).await;
        let reported = *self.stopped_rx.borrow();
        let group_gone = reported.is_some_and(|(_, left)| left == 0) && !group_alive(self.pgid);
        if group_gone {
            self.guard.armed = false;
        }
        StopReport {
            exit: self.exited(),
            killed: reported.is_none_or(|(killed, _)| killed),
            group_gone,
            stop_s: t0.elapsed().as_secs_f64(),
            containment: self.containment,
            isolation: self.isolation.clone(),
        }
    }
}

/// Waits for `/health` (200, or 404 for engines without it) and then `/v1/models` (200) at
/// `launch.base_url`, polling every 250 ms, until `launch.readiness_timeout` after `started`;
/// fails early with `exited(..)` when `exit_rx` says the engine ended. One readiness rule for
/// every [`seam::RunningEngine`].
pub async fn wait_serving(
    launch: &EngineLaunch,
    started: Instant,
    mut exit_rx: watch::Receiver<Option<EngineExit>>,
    cancel: &CancellationToken,
    log_tail_lines: usize,
    exited: impl Fn(&EngineExit) -> EngineError,
) -> Result<ReadyInfo, EngineError> {
    let http = probe_client(Duration::from_secs(3)).map_err(|e| EngineError::ReadinessTimeout {
        timeout_s: 0.0,
        last: format!("cannot build the HTTP client: {e}"),
        log: launch.log_path.display().to_string(),
        tail: String::new(),
    })?;
    let deadline = started + launch.readiness_timeout;
    let mut last = String::from("no answer yet");
    let mut health_ok = false;
    loop {
        if let Some(exit) = exit_rx.borrow().clone() {
            return Err(exited(&exit));
        }
        // `Err`: why the engine does not serve yet.
        let probe = async {
            if !health_ok {
                match probe_get(&http, launch, "/health").await {
                    Ok((200..=299 | 404, _)) => health_ok = true,
                    Ok((code, _)) => return Err(format!("/health answered HTTP {code}")),
                    Err(e) => return Err(format!("/health: {e}")),
                }
            }
            match probe_get(&http, launch, "/v1/models").await {
                Ok((200..=299, body)) => {
                    Ok(infergate_measure::bench::parse_model_ids(&body).unwrap_or_default())
                }
                Ok((code, _)) => Err(format!("/health ok, /v1/models answered HTTP {code}")),
                Err(e) => Err(format!("/health ok, /v1/models: {e}")),
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        tokio::select! {
            _ = cancel.cancelled() => return Err(EngineError::Cancelled),
            _ = exit_rx.changed() => continue,
            r = tokio::time::timeout(remaining, probe) => match r {
                Ok(Ok(models)) => {
                    return Ok(ReadyInfo { boot_s: started.elapsed().as_secs_f64(), models });
                }
                Ok(Err(why)) => last = why,
                Err(_) => {}
            }
        }
        if Instant::now() >= deadline {
            return Err(EngineError::ReadinessTimeout {
                timeout_s: launch.readiness_timeout.as_secs_f64(),
                last,
                log: launch.log_path.display().to_string(),
                tail: log_tail(&launch.log_path, log_tail_lines),
            });
        }
        let pause =
            Duration::from_millis(250).min(deadline.saturating_duration_since(Instant::now()));
        tokio::select! {
            _ = cancel.cancelled() => return Err(EngineError::Cancelled),
            _ = exit_rx.changed() => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// One readiness probe: `GET path` on the engine, with its API key; the body read bounded.
async fn probe_get(
    http: &reqwest::Client,
    launch: &EngineLaunch,
    path: &str,
) -> Result<(u16, String), String> {
    let mut rb = http.get(format!("{}{}", launch.base_url, path));
    if let Some(k) = &launch.api_key {
        rb = rb.bearer_auth(k);
    }
    let resp = rb.send().await.map_err(|e| describe_transport(&e))?;
    let code = resp.status().as_u16();
    // Bounded: an engine's health page or model list is small, whatever it sends.
    let what = format!("GET {path}");
    let body = infergate_measure::bench::client::read_limited(
        &what,
        resp,
        infergate_measure::bench::client::MAX_BODY_BYTES,
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok((code, body))
}

/// Adds the supervisor's isolation arguments for `launch` (`--isolation`, a `--hide` per
/// directory to cover) and, when the engine is to run as another user under root, hands it
/// its private working directory and a `HOME` it can write. Returns a note for each
/// registered directory that stays visible, and one for each covered directory that the
/// engine's user could write into were the cover to fail.
fn isolation_args(
    cmd: &mut tokio::process::Command,
    launch: &EngineLaunch,
    private_dir: Option<&tempfile::TempDir>,
) -> (Vec<String>, Vec<String>) {
    use infergate_config::config::EngineIsolation;
    cmd.arg("--isolation").arg(launch.isolation.value());
    if launch.isolation == EngineIsolation::Off {
        return (Vec::new(), Vec::new());
    }
    let gate_cwd = std::env::current_dir().unwrap_or_default();
    let engine_cwd = private_dir
        .map(|d| d.path().to_path_buf())
        .or_else(|| launch.workdir.clone())
        .unwrap_or_else(|| gate_cwd.clone());
    let program = launch
        .argv
        .first()
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute());
    let mut needed: Vec<(&str, &Path)> = vec![
        ("the engine's working directory", &engine_cwd),
        ("the gate's working directory", &gate_cwd),
        ("the infergate binary", &launch.supervisor),
    ];
    if let Some(p) = &program {
        needed.push(("the engine's program", p));
    }
    let (cover, notes) = reach::dirs_to_cover(&needed);
    for d in &cover {
        cmd.arg("--hide").arg(d);
    }
    let mut writable = Vec::new();
    #[cfg(target_os = "linux")]
    if let Some((uid, gid)) = launch.isolation.user()
        && is_root()
    {
        use std::os::unix::fs::MetadataExt;
        let open_to_user = |p: &Path| {
            std::fs::metadata(p)
                .is_ok_and(|m| reach::writable_by(m.uid(), m.gid(), m.mode(), uid, gid))
        };
        for d in cover.iter().filter(|d| open_to_user(d)) {
            writable.push(format!(
                "{} writable by uid {uid}",
                infergate_io::untrusted_text::console(&d.display().to_string())
            ));
        }
        if let Some(dir) = private_dir {
            let _ = std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid));
            // HOME always (the engine's caches go there), TMPDIR when set: the engine's own
            // directory where the inherited one is not writable by its user (root's is not).
            for var in ["HOME", "TMPDIR"] {
                let value = launch.env.iter().find(|(k, _)| k == var).map(|(_, v)| v);
                if (value.is_some() || var == "HOME")
                    && !value.is_some_and(|h| open_to_user(Path::new(h)))
                {
                    cmd.env(var, dir.path());
                }
            }
        }
    }
    (notes, writable)
}

/// What to check when the engine's program could not be executed (`errno`): under a root
/// gate that runs the engine as another user, a permission error is isolation's (the uid and
/// the fixes); a missing program is a path to correct or a program to install.
fn spawn_hint(launch: &EngineLaunch, program: &str, errno: i32) -> String {
    match (errno, launch.isolation.user().filter(|_| is_root())) {
        (libc::EACCES | libc::EPERM, Some((uid, gid))) => format!(
            "[engine] isolation = \"{}\" runs the engine as uid {uid} gid {gid} (the gate is root), and that user cannot execute `{program}`: every directory on its path must let others in (`chmod o+rx DIR`), or set isolation = \"UID:GID\" (a user that can reach it) or isolation = \"off\" under [engine] (docs/security.md)",
            launch.isolation.value()
        ),
        (libc::ENOENT, _) if program.contains('/') => {
            format!("check [engine] command in the config: does `{program}` exist?")
        }
        (libc::ENOENT, _) => format!(
            "check [engine] command in the config: is `{program}` installed and on the engine's PATH?"
        ),
        _ => "check [engine] command in the config".into(),
    }
}

/// The program as people know it: this infergate's path where the engine executes it through
/// its descriptor ([`launch::SelfExec`]).
fn shown_program(launch: &EngineLaunch, program: &str) -> String {
    match &launch.self_exec {
        Some(s) if s.path() == program => launch.supervisor.display().to_string(),
        _ => program.to_string(),
    }
}

/// An HTTP client for short probes of a local engine. reqwest is built without a default TLS
/// crypto provider; ring's is installed once per process (a no-op when already installed).
pub fn probe_client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(2)))
        .build()
}

fn describe_transport(e: &reqwest::Error) -> String {
    if e.is_connect() {
        "connection refused (not listening yet)".into()
    } else if e.is_timeout() {
        "timed out".into()
    } else {
        std::iter::successors(std::error::Error::source(e), |inner| inner.source())
            .fold(e.to_string(), |s, inner| format!("{s}: {inner}"))
    }
}

/// The last `n` lines of a log file (reads at most its last 64 KiB).
pub fn log_tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(start)).is_err() || f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(n)..].join("\n");
    if tail.trim().is_empty() {
        "(the engine wrote nothing)".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_error_gets_the_hint_of_its_cause() {
        let (_, l) = launch::tests::launch_of(infergate_config::config::CommandSpec::Argv(vec![
            "x".into(),
        ]));
        // An argument vector naming a path: does it exist, not "is it on PATH".
        let h = spawn_hint(&l, "/opt/vllm/bin/vllm", libc::ENOENT);
        assert_eq!(
            h,
            "check [engine] command in the config: does `/opt/vllm/bin/vllm` exist?"
        );
        let h = spawn_hint(&l, "vllm", libc::ENOENT);
        assert!(
            h.ends_with("is `vllm` installed and on the engine's PATH?"),
            "{h}"
        );
        let h = spawn_hint(&l, "/root/v/bin/python", libc::EACCES);
        if is_root() {
            for part in [
                "[engine] isolation = \"auto\" runs the engine as uid 65534 gid 65534",
                "cannot execute `/root/v/bin/python`",
                "`chmod o+rx DIR`",
                "isolation = \"off\"",
            ] {
                assert!(h.contains(part), "{part}: {h}");
            }
        } else {
            assert_eq!(h, "check [engine] command in the config");
        }
    }

    #[test]
    fn a_teardown_warning_names_the_boot_only_when_processes_survived() {
        let mut stop = StopReport {
            exit: None,
            killed: true,
            group_gone: true,
            stop_s: 0.1,
            containment: Containment::Subreaper,
            isolation: String::new(),
        };
        assert_eq!(stop.survivors_warning("the first boot"), None);
        stop.group_gone = false;
        assert_eq!(
            stop.survivors_warning("the confirmation boot").as_deref(),
            Some(
                "engine processes of the confirmation boot survived teardown \
                 (SIGKILL sent to the group)"
            )
        );
    }
}
