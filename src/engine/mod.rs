//! The supervised engine process: boots the engine under test in its own process group with its
//! output in a log file, waits until it serves, notices when it dies, and stops the whole group
//! on every exit path.
//!
//! Why a process group: engines fork (vLLM's API server + engine core + workers, `sh -c`
//! wrappers, `docker run`); signalling only the direct child leaves GPU-holding workers behind,
//! and the next job on a self-hosted runner finds the GPU full. [`EngineProcess::stop`] sends
//! SIGTERM to the group, waits `stop_grace`, then SIGKILLs it and waits until the group is gone;
//! the [`Drop`] of [`EngineProcess`] SIGKILLs the group synchronously as the last resort (error
//! returns, panics and cancelled tasks all drop it).

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::{CommandSpec, EngineConfig};

/// Why the engine could not be started, became ready, or was stopped cleanly.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The program could not be executed at all (not installed, not executable, bad workdir).
    #[error(
        "cannot start the engine command `{program}`: {source}; check [engine] command in the config (is `{program}` installed and on PATH?)"
    )]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
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
    /// The gate was cancelled (SIGINT/SIGTERM) while waiting for the engine.
    #[error("cancelled while waiting for the engine to become ready")]
    Cancelled,
}

/// Everything needed to start one engine: the command with placeholders resolved.
#[derive(Debug, Clone)]
pub struct EngineLaunch {
    /// Program and arguments as executed.
    pub argv: Vec<String>,
    /// Extra environment (values already rendered).
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub workdir: Option<PathBuf>,
    /// The command line for people and results files (environment values not shown).
    pub display: String,
    /// Where stdout/stderr are appended.
    pub log_path: PathBuf,
    /// Base URL the engine will serve on.
    pub base_url: String,
    /// Readiness time-out.
    pub readiness_timeout: Duration,
    /// SIGTERM → SIGKILL grace at teardown.
    pub stop_grace: Duration,
    /// Bearer token for readiness probes (never shown).
    pub api_key: Option<String>,
}

/// Values substituted into the command.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub port: u16,
    pub host: String,
    pub model: Option<String>,
    /// Path of the running infergate binary (`{infergate}`), so configs can boot `infergate sim`.
    pub infergate: String,
}

impl Placeholders {
    fn render(&self, s: &str) -> String {
        let mut out = s
            .replace("{port}", &self.port.to_string())
            .replace("{host}", &self.host)
            .replace("{infergate}", &self.infergate);
        if let Some(m) = &self.model {
            out = out.replace("{model}", m);
        }
        out
    }
}

/// Picks a free TCP port on `host` (bind port 0, read it, release it).
pub fn free_port(host: &str) -> Result<u16, EngineError> {
    let bind_host = if host == "0.0.0.0" || host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let listener = TcpListener::bind((bind_host, 0)).map_err(|source| EngineError::Port {
        host: host.to_string(),
        source,
    })?;
    let port = listener
        .local_addr()
        .map_err(|source| EngineError::Port {
            host: host.to_string(),
            source,
        })?
        .port();
    Ok(port)
}

/// Quotes one word for `sh` (appended `--engine-arg` values of a shell-line command).
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

impl EngineLaunch {
    /// Resolves the config's command for one boot: picks the port, renders placeholders,
    /// appends `extra_args` (`--engine-arg`), reads the API key from its environment variable.
    pub fn from_config(
        cfg: &EngineConfig,
        model: Option<&str>,
        extra_args: &[String],
        log_path: PathBuf,
    ) -> Result<EngineLaunch, EngineError> {
        let port = match cfg.port {
            Some(p) => p,
            None => free_port(&cfg.host)?,
        };
        let infergate = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "infergate".into());
        let ph = Placeholders {
            port,
            host: cfg.host.clone(),
            model: model.map(str::to_string),
            infergate,
        };
        let argv: Vec<String> = match &cfg.command {
            CommandSpec::Argv(v) => v
                .iter()
                .map(|a| ph.render(a))
                .chain(extra_args.iter().cloned())
                .collect(),
            CommandSpec::Shell(line) => {
                let mut l = ph.render(line);
                for a in extra_args {
                    l.push(' ');
                    l.push_str(&shell_quote(a));
                }
                vec!["sh".into(), "-c".into(), l]
            }
        };
        let display = match &cfg.command {
            CommandSpec::Argv(_) => argv
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" "),
            CommandSpec::Shell(_) => argv.last().cloned().unwrap_or_default(),
        };
        let host_in_url = if cfg.host == "0.0.0.0" {
            "127.0.0.1"
        } else {
            cfg.host.as_str()
        };
        Ok(EngineLaunch {
            argv,
            env: cfg
                .env
                .iter()
                .map(|(k, v)| (k.clone(), ph.render(v)))
                .collect(),
            workdir: cfg.workdir.clone(),
            display,
            log_path,
            base_url: format!("http://{host_in_url}:{port}"),
            readiness_timeout: Duration::from_secs_f64(cfg.readiness_timeout_s),
            stop_grace: Duration::from_secs_f64(cfg.stop_grace_s),
            api_key: cfg
                .api_key_env
                .as_ref()
                .and_then(|k| std::env::var(k).ok())
                .filter(|k| !k.is_empty()),
        })
    }
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
    fn from_status(st: std::io::Result<ExitStatus>) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match st {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => EngineExit {
                    description: format!("status {c}"),
                    code: Some(c),
                },
                (None, Some(sig)) => EngineExit {
                    description: match Signal::try_from(sig) {
                        Ok(name) => format!("signal {sig} ({})", name.as_str()),
                        Err(_) => format!("signal {sig}"),
                    },
                    code: None,
                },
                (None, None) => EngineExit {
                    description: "an unknown status".into(),
                    code: None,
                },
            },
            Err(e) => EngineExit {
                description: format!("an unknown status (wait failed: {e})"),
                code: None,
            },
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
    /// Whether every process of the group is gone.
    pub group_gone: bool,
    /// Seconds teardown took.
    pub stop_s: f64,
}

/// SIGKILLs the process group when dropped while armed: the last-resort cleanup that also runs
/// on panics and cancelled futures.
#[derive(Debug)]
struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
        }
    }
}

/// Whether any process of group `pgid` still exists (a zombie not yet reaped counts).
pub fn group_alive(pgid: i32) -> bool {
    !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// A running engine: its process group, log and exit watch.
#[derive(Debug)]
pub struct EngineProcess {
    pgid: i32,
    launch: EngineLaunch,
    started: Instant,
    exit_rx: watch::Receiver<Option<EngineExit>>,
    guard: GroupGuard,
}

impl EngineProcess {
    /// Starts the engine in a new process group with stdout/stderr appended to the log file.
    pub fn spawn(launch: EngineLaunch) -> Result<EngineProcess, EngineError> {
        if let Some(dir) = launch
            .log_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir).map_err(|source| EngineError::Log {
                path: launch.log_path.display().to_string(),
                source,
            })?;
        }
        let open_log = || {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&launch.log_path)
                .map_err(|source| EngineError::Log {
                    path: launch.log_path.display().to_string(),
                    source,
                })
        };
        let out = open_log()?;
        let err = open_log()?;
        let program = launch.argv.first().cloned().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(&launch.argv[1..])
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &launch.workdir {
            cmd.current_dir(dir);
        }
        // If the gate itself is SIGKILLed (no chance to run any cleanup), the kernel kills the
        // engine's leader process too. It fires when the *thread* that spawned the child
        // exits; `run` and `doctor` spawn from the runtime's main thread, which lives as long as
        // the process.
        // SAFETY: the closure runs in the forked child before exec and only calls prctl(2),
        // which is async-signal-safe; it allocates nothing and touches no locks.
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|source| EngineError::Spawn { program, source })?;
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        let guard = GroupGuard {
            pgid: pid,
            armed: pid > 0,
        };
        let (tx, exit_rx) = watch::channel(None);
        tokio::spawn(async move {
            let st = child.wait().await;
            let _ = tx.send(Some(EngineExit::from_status(st)));
        });
        Ok(EngineProcess {
            pgid: pid,
            launch,
            started: Instant::now(),
            exit_rx,
            guard,
        })
    }

    /// The process group id (= the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Base URL the engine serves on.
    pub fn base_url(&self) -> &str {
        &self.launch.base_url
    }

    /// The launch settings.
    pub fn launch(&self) -> &EngineLaunch {
        &self.launch
    }

    /// The engine log file.
    pub fn log_path(&self) -> &Path {
        &self.launch.log_path
    }

    /// How the engine ended, once it has.
    pub fn exited(&self) -> Option<EngineExit> {
        self.exit_rx.borrow().clone()
    }

    /// A receiver that changes once when the engine process exits (for a watcher task).
    pub fn exit_watch(&self) -> watch::Receiver<Option<EngineExit>> {
        self.exit_rx.clone()
    }

    /// The last `n` lines of the engine log.
    pub fn log_tail(&self, n: usize) -> String {
        log_tail(&self.launch.log_path, n)
    }

    /// Waits for `/health` (200, or 404 for engines without it) and then `/v1/models` (200),
    /// polling every 250 ms, until the readiness time-out; fails early when the process exits.
    pub async fn wait_ready(
        &self,
        cancel: &CancellationToken,
        log_tail_lines: usize,
    ) -> Result<ReadyInfo, EngineError> {
        let http =
            probe_client(Duration::from_secs(3)).map_err(|e| EngineError::ReadinessTimeout {
                timeout_s: 0.0,
                last: format!("cannot build the HTTP client: {e}"),
                log: self.launch.log_path.display().to_string(),
                tail: String::new(),
            })?;
        let deadline = self.started + self.launch.readiness_timeout;
        let mut exit_rx = self.exit_rx.clone();
        let mut last = String::from("no answer yet");
        let mut health_ok = false;
        loop {
            if let Some(exit) = exit_rx.borrow().clone() {
                return Err(self.exited_error(&exit, log_tail_lines));
            }
            let probe = async {
                if !health_ok {
                    match self.get(&http, "/health").await {
                        Ok((200..=299, _)) | Ok((404, _)) => {
                            health_ok = true;
                        }
                        Ok((code, _)) => {
                            last = format!("/health answered HTTP {code}");
                            return None;
                        }
                        Err(e) => {
                            last = format!("/health: {e}");
                            return None;
                        }
                    }
                }
                match self.get(&http, "/v1/models").await {
                    Ok((200..=299, body)) => {
                        Some(crate::bench::parse_model_ids(&body).unwrap_or_default())
                    }
                    Ok((code, _)) => {
                        last = format!("/health ok, /v1/models answered HTTP {code}");
                        None
                    }
                    Err(e) => {
                        last = format!("/health ok, /v1/models: {e}");
                        None
                    }
                }
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            tokio::select! {
                _ = cancel.cancelled() => return Err(EngineError::Cancelled),
                _ = exit_rx.changed() => continue,
                r = tokio::time::timeout(remaining, probe) => {
                    if let Ok(Some(models)) = r {
                        return Ok(ReadyInfo { boot_s: self.started.elapsed().as_secs_f64(), models });
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(EngineError::ReadinessTimeout {
                    timeout_s: self.launch.readiness_timeout.as_secs_f64(),
                    last,
                    log: self.launch.log_path.display().to_string(),
                    tail: self.log_tail(log_tail_lines),
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

    fn exited_error(&self, exit: &EngineExit, log_tail_lines: usize) -> EngineError {
        let hint = match exit.code {
            Some(127) => format!(
                " (status 127: the shell could not find the command `{}`)",
                self.launch.display
            ),
            Some(126) => " (status 126: the command is not executable)".to_string(),
            _ => String::new(),
        };
        EngineError::ExitedBeforeReady {
            status: exit.description.clone(),
            hint,
            log: self.launch.log_path.display().to_string(),
            tail: self.log_tail(log_tail_lines),
        }
    }

    async fn get(&self, http: &reqwest::Client, path: &str) -> Result<(u16, String), String> {
        let mut rb = http.get(format!("{}{}", self.launch.base_url, path));
        if let Some(k) = &self.launch.api_key {
            rb = rb.bearer_auth(k);
        }
        let resp = rb.send().await.map_err(|e| describe_transport(&e))?;
        let code = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        Ok((code, body))
    }

    /// Stops the whole process group: SIGTERM, up to `stop_grace` for it to exit, then SIGKILL,
    /// and waits (up to 10 s more) until no process of the group is left.
    pub async fn stop(mut self) -> StopReport {
        let t0 = Instant::now();
        let pgid = self.pgid;
        let mut killed = false;
        if pgid > 0 && group_alive(pgid) {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGTERM);
            if !self.wait_gone(self.launch.stop_grace).await {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                killed = true;
                self.wait_gone(Duration::from_secs(10)).await;
            }
        }
        let group_gone = pgid <= 0 || !group_alive(pgid);
        if group_gone {
            self.guard.armed = false;
        }
        StopReport {
            exit: self.exited(),
            killed,
            group_gone,
            stop_s: t0.elapsed().as_secs_f64(),
        }
    }

    /// Waits until the leader has been reaped and the group is empty, or `limit` passes.
    async fn wait_gone(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.exit_rx.borrow().is_some() && !group_alive(self.pgid) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
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
        let mut s = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(inner) = src {
            s = format!("{s}: {inner}");
            src = inner.source();
        }
        s
    }
}

/// The last `n` lines of a log file (reads at most its last 64 KiB).
pub fn log_tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    let tail = lines[from..].join("\n");
    if tail.trim().is_empty() {
        "(the engine wrote nothing)".into()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cfg(cmd: CommandSpec) -> EngineConfig {
        EngineConfig {
            command: cmd,
            env: BTreeMap::from([("X".to_string(), "p={port}".to_string())]),
            workdir: None,
            readiness_timeout_s: 2.0,
            log_file: None,
            stop_grace_s: 1.0,
            api_key_env: None,
            host: "127.0.0.1".into(),
            port: Some(4321),
            name: None,
        }
    }

    #[test]
    fn placeholders_and_extra_args_are_rendered() {
        let c = cfg(CommandSpec::Argv(vec![
            "{infergate}".into(),
            "serve".into(),
            "{model}".into(),
            "--port={port}".into(),
        ]));
        let l = EngineLaunch::from_config(&c, Some("m/x"), &["--flag".into()], "l.log".into())
            .expect("launch");
        assert!(l.argv[0].contains("infergate") || !l.argv[0].contains('{'));
        assert_eq!(&l.argv[1..], &["serve", "m/x", "--port=4321", "--flag"]);
        assert_eq!(l.env, vec![("X".to_string(), "p=4321".to_string())]);
        assert_eq!(l.base_url, "http://127.0.0.1:4321");
        let s = cfg(CommandSpec::Shell("exec e --port {port}".into()));
        let l =
            EngineLaunch::from_config(&s, None, &["a b".into()], "l.log".into()).expect("launch");
        assert_eq!(l.argv, vec!["sh", "-c", "exec e --port 4321 'a b'"]);
    }

    #[test]
    fn free_port_is_bindable() {
        let p = free_port("127.0.0.1").expect("port");
        assert!(p > 0);
        assert!(TcpListener::bind(("127.0.0.1", p)).is_ok());
    }

    #[test]
    fn log_tail_returns_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("e.log");
        std::fs::write(
            &p,
            (1..=30).map(|i| format!("line {i}\n")).collect::<String>(),
        )
        .expect("write");
        let t = log_tail(&p, 3);
        assert_eq!(t, "line 28\nline 29\nline 30");
    }

    #[tokio::test]
    async fn stop_kills_the_whole_group_including_grandchildren() {
        let dir = tempfile::tempdir().expect("tempdir");
        // The shell ignores TERM and starts a grandchild that also ignores it: only the
        // group-wide SIGKILL after the grace period stops both.
        let c = cfg(CommandSpec::Shell(
            "trap '' TERM; sh -c \"trap '' TERM; sleep 30\" & sleep 30".into(),
        ));
        let l = EngineLaunch::from_config(&c, None, &[], dir.path().join("e.log")).expect("launch");
        let e = EngineProcess::spawn(l).expect("spawn");
        let pgid = e.pgid();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(group_alive(pgid));
        let r = e.stop().await;
        assert!(r.killed, "{r:?}");
        assert!(r.group_gone, "{r:?}");
        assert!(!group_alive(pgid));
    }

    #[tokio::test]
    async fn early_exit_is_reported_with_the_log_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = cfg(CommandSpec::Shell(
            "echo booting; echo 'CUDA out of memory' >&2; exit 1".into(),
        ));
        let l = EngineLaunch::from_config(&c, None, &[], dir.path().join("e.log")).expect("launch");
        let e = EngineProcess::spawn(l).expect("spawn");
        let err = e
            .wait_ready(&CancellationToken::new(), 20)
            .await
            .expect_err("must fail");
        let msg = err.to_string();
        assert!(
            msg.contains("engine exited with status 1 before becoming ready"),
            "{msg}"
        );
        assert!(msg.contains("CUDA out of memory"), "{msg}");
        e.stop().await;
    }

    #[tokio::test]
    async fn missing_program_is_a_spawn_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = cfg(CommandSpec::Argv(vec!["/nonexistent/vllm-serve".into()]));
        let l = EngineLaunch::from_config(&c, None, &[], dir.path().join("e.log")).expect("launch");
        let err = EngineProcess::spawn(l).expect_err("must fail").to_string();
        assert!(err.contains("`/nonexistent/vllm-serve`"), "{err}");
    }

    #[tokio::test]
    async fn readiness_times_out_within_the_configured_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = cfg(CommandSpec::Shell("sleep 30".into()));
        c.port = None;
        c.readiness_timeout_s = 1.0;
        let l = EngineLaunch::from_config(&c, None, &[], dir.path().join("e.log")).expect("launch");
        let e = EngineProcess::spawn(l).expect("spawn");
        let t0 = Instant::now();
        let err = e
            .wait_ready(&CancellationToken::new(), 5)
            .await
            .expect_err("must time out");
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
        assert!(err.to_string().contains("not ready after 1.0s"), "{err}");
        let r = e.stop().await;
        assert!(r.group_gone);
    }
}
