//! The engine's supervisor: `infergate __supervise`, the process between the gate and the engine.
//!
//! Why a separate process: the engine is untrusted code, and a process group does not hold it.
//! A child that calls `setsid` (or double-forks) leaves the group and survives `killpg`, and
//! when the gate is SIGKILLed its death signal reaches only its direct child. The supervisor
//!
//! - is a **child subreaper** (`PR_SET_CHILD_SUBREAPER`): every orphaned descendant, `setsid`
//!   or double-forked, is re-parented to it, so the whole tree is always its descendants and
//!   it can find (via `/proc/*/stat`) and kill every one of them;
//! - puts the tree in its **own cgroup v2** when the current cgroup is delegated to us
//!   (writable, with `cgroup.kill`), and kills it with `cgroup.kill` as well; otherwise the
//!   subreaper walk alone ([`Containment`] says which, and the results record it);
//! - **dies with the gate**: its death signal (`PR_SET_PDEATHSIG`, SIGHUP) and the end of its
//!   control pipe (stdin) both mean "the gate is gone", and it then SIGKILLs the whole tree;
//! - runs the engine in its own process group with stdin from `/dev/null` and stdout+stderr on
//!   the supervisor's stderr, a pipe the gate reads, redacts and writes to the engine log: the
//!   engine never learns where the gate's output files are;
//! - gives the engine its own user and view of the filesystem where the host allows
//!   ([`super::isolate`]; `--isolation`, `--hide`), and says in `started` what held.
//!
//! The protocol is line-based. Gate → supervisor (stdin): `stop <grace_ms>` (SIGTERM the tree,
//! wait, SIGKILL what is left), `kill` or end of input (SIGKILL at once). Supervisor → gate
//! (stdout): `started <pid> <containment> <isolation…>`, `spawn-error <errno> <message>`,
//! `exited code <n>` or `exited signal <n>` (the engine's leader ended; its leftovers are then
//! stopped with the grace given on the command line), and `stopped <killed 0|1> <left>` last.

use std::fmt;

/// How the engine's process tree is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Containment {
    /// Its own cgroup v2, killed with `cgroup.kill` (plus the subreaper walk).
    Cgroup,
    /// The supervisor as child subreaper: every descendant found through `/proc` and killed.
    Subreaper,
    /// No process: the engine is a task of the gate's own process ([`super::seam`]'s
    /// in-process engines, for tests of the pipeline).
    InProcess,
}

impl Containment {
    /// The word in the protocol and in results (`engine.containment`).
    pub fn as_str(self) -> &'static str {
        match self {
            Containment::Cgroup => "cgroup",
            Containment::Subreaper => "subreaper",
            Containment::InProcess => "in-process",
        }
    }

    /// Parses [`Containment::as_str`].
    pub(crate) fn parse(s: &str) -> Option<Containment> {
        match s {
            "cgroup" => Some(Containment::Cgroup),
            "subreaper" => Some(Containment::Subreaper),
            _ => None,
        }
    }
}

impl fmt::Display for Containment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of the supervisor's report to the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The engine started as `pid`, its tree held as `containment`, isolated as described
    /// ([`super::isolate::Outcome::describe`]).
    Started {
        pid: i32,
        containment: Containment,
        isolation: String,
    },
    /// The engine could not be started (`errno` and its text).
    SpawnError { errno: i32, message: String },
    /// The engine exited with this code.
    ExitedCode(i32),
    /// The engine was killed by this signal.
    ExitedSignal(i32),
    /// Teardown finished: whether it had to SIGKILL, and how many processes were left.
    Stopped { killed: bool, left: usize },
}

impl Report {
    /// The protocol line (without the newline).
    pub(crate) fn line(&self) -> String {
        match self {
            Report::Started {
                pid,
                containment,
                isolation,
            } => format!(
                "started {pid} {containment} {}",
                isolation.replace(['\n', '\r'], " ")
            ),
            Report::SpawnError { errno, message } => {
                format!("spawn-error {errno} {}", message.replace(['\n', '\r'], " "))
            }
            Report::ExitedCode(c) => format!("exited code {c}"),
            Report::ExitedSignal(s) => format!("exited signal {s}"),
            Report::Stopped { killed, left } => format!("stopped {} {left}", u8::from(*killed)),
        }
    }

    /// Parses [`Report::line`]; `None` for anything else.
    pub fn parse(line: &str) -> Option<Report> {
        let mut w = line.trim_end().splitn(3, ' ');
        match (w.next()?, w.next(), w.next()) {
            ("started", Some(pid), Some(rest)) => {
                let (c, isolation) = rest.split_once(' ').unwrap_or((rest, ""));
                Some(Report::Started {
                    pid: pid.parse().ok()?,
                    containment: Containment::parse(c)?,
                    isolation: isolation.to_string(),
                })
            }
            ("spawn-error", Some(e), msg) => Some(Report::SpawnError {
                errno: e.parse().ok()?,
                message: msg.unwrap_or("").to_string(),
            }),
            ("exited", Some("code"), Some(n)) => Some(Report::ExitedCode(n.parse().ok()?)),
            ("exited", Some("signal"), Some(n)) => Some(Report::ExitedSignal(n.parse().ok()?)),
            ("stopped", Some(k), Some(l)) => Some(Report::Stopped {
                killed: k == "1",
                left: l.parse().ok()?,
            }),
            _ => None,
        }
    }
}

/// Runs the supervisor (the `__supervise` subcommand) and returns its exit code. Linux only.
#[cfg(not(target_os = "linux"))]
pub fn supervise(
    _parent: i32,
    _grace_ms: u64,
    _use_cgroup: bool,
    _stdout_file: Option<&std::path::Path>,
    _private_dir: Option<&std::path::Path>,
    _plan: &super::isolate::IsolationPlan,
    _argv: &[String],
) -> i32 {
    errln!(
        "infergate supervisor: engine containment needs Linux (PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG)"
    );
    2
}

#[cfg(target_os = "linux")]
pub use linux::supervise;

/// The gate as the engine tree's keeper of last resort: makes this process a child subreaper
/// (`PR_SET_CHILD_SUBREAPER`), so a descendant orphaned when its supervisor dies — killed by
/// the engine it holds (possible when they share a user: a non-root gate, or
/// `isolation = "off"`) or by the OOM killer — is re-parented to the gate instead of to
/// `init`, where [`kill_leftover_descendants`] finds it. Called by the binary for every
/// command but the supervisor itself (which is a subreaper of its own). Linux only.
pub fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
}

/// SIGKILLs every process still below this one and reaps those that are its children; returns
/// how many it killed. The binary calls it as it exits, after every task (and every child
/// that belonged to one) is gone: what is left is an engine's tree whose supervisor died
/// (adopted by [`adopt_orphans`]), which would otherwise outlive the gate. Linux only.
pub fn kill_leftover_descendants() -> usize {
    #[cfg(target_os = "linux")]
    {
        linux::kill_descendants_of_self()
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::{HashMap, HashSet};
    use std::fs::{File, OpenOptions};
    use std::io::{BufRead, Write};
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use nix::sys::signal::{
        SaFlags, SigAction, SigHandler, SigSet, Signal, kill, killpg, sigaction,
    };
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::{Pid, getppid};

    use super::super::isolate::{self, Attempt, IsolationPlan, MountRoute, Outcome, Step};
    use super::super::reach::stat_fields;
    use super::{Containment, Report};
    use infergate_config::config::EngineIsolation;

    /// The last of SIGHUP/SIGTERM/SIGINT received (0 = none).
    static SIGNALLED: AtomicI32 = AtomicI32::new(0);

    extern "C" fn on_signal(sig: libc::c_int) {
        SIGNALLED.store(sig, Ordering::SeqCst);
    }

    fn report(r: &Report) {
        // The gate may be gone (EPIPE; SIGPIPE is ignored by Rust's runtime): then nobody
        // listens and the tree is killed anyway.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", r.line());
        let _ = out.flush();
    }

    fn note(msg: &str) {
        let _ = writeln!(std::io::stderr(), "[infergate supervisor] {msg}");
    }

    enum Control {
        Stop(Duration),
        Kill,
    }

    /// The engine's own cgroup below ours, when cgroup v2 is delegated to this user.
    struct Cgroup {
        dir: PathBuf,
        procs: File,
    }

    impl Cgroup {
        fn create() -> Option<Cgroup> {
            let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
            let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
            let root = Path::new("/sys/fs/cgroup");
            // Unified hierarchy only (a v1 or hybrid mount has no cgroup.controllers here).
            if !root.join("cgroup.controllers").exists() {
                return None;
            }
            let here = root.join(rel.trim().trim_start_matches('/'));
            // cgroup.kill: Linux 5.14+.
            if !here.join("cgroup.kill").exists() {
                return None;
            }
            let dir = here.join(format!("infergate-engine-{}", std::process::id()));
            std::fs::create_dir(&dir).ok()?;
            match OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
            {
                Ok(procs) => Some(Cgroup { dir, procs }),
                Err(_) => {
                    let _ = std::fs::remove_dir(&dir);
                    None
                }
            }
        }

        fn pids(&self) -> Vec<i32> {
            std::fs::read_to_string(self.dir.join("cgroup.procs"))
                .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
                .unwrap_or_default()
        }

        fn populated(&self) -> bool {
            std::fs::read_to_string(self.dir.join("cgroup.events"))
                .map(|t| t.lines().any(|l| l.trim() == "populated 1"))
                .unwrap_or(false)
        }

        fn kill(&self) {
            let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
        }

        /// Removes the cgroup and any the engine made below it (leaves first).
        fn remove(&self) {
            fn rm(dir: &Path) {
                if let Ok(entries) = std::fs::read_dir(dir) {
                    for e in entries.flatten() {
                        if e.file_type().is_ok_and(|t| t.is_dir()) {
                            rm(&e.path());
                        }
                    }
                }
                let _ = std::fs::remove_dir(dir);
            }
            rm(&self.dir);
        }
    }

    /// Parent pid of every process, from `/proc/<pid>/stat` (the field after the `)` that
    /// ends the command name, which may itself contain spaces and parentheses).
    fn parent_map() -> HashMap<i32, i32> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
                // "S ppid ..."
                let ppid = stat_fields(pid)?.split_whitespace().nth(1)?.parse().ok()?;
                Some((pid, ppid))
            })
            .collect()
    }

    /// [`super::kill_leftover_descendants`]: SIGKILLs every live descendant of this process
    /// and reaps its own children, until none is left (a few rounds: a process forking as it
    /// is killed adds one); zombies are not counted as alive.
    pub(crate) fn kill_descendants_of_self() -> usize {
        let me = std::process::id() as i32;
        let mut killed = HashSet::new();
        for _ in 0..50 {
            let alive: Vec<i32> = descendants(me)
                .into_iter()
                .filter(|pid| !is_zombie(*pid))
                .collect();
            for &pid in &alive {
                // SAFETY: kill(2) of a descendant of this process, found just now.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed.insert(pid);
            }
            // Our own children (adopted orphans among them) are ours to reap; only those, by
            // pid, so no status another waiter expects is taken.
            for (pid, ppid) in parent_map() {
                if ppid == me {
                    let mut status = 0;
                    // SAFETY: waitpid(2) on a child of this process, without blocking.
                    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                }
            }
            if alive.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        killed.len()
    }

    /// Whether `pid` has exited and waits to be reaped (state `Z`).
    fn is_zombie(pid: i32) -> bool {
        stat_fields(pid).is_some_and(|f| f.split_whitespace().next() == Some("Z"))
    }

    /// Every descendant of `root` (not `root` itself).
    pub(crate) fn descendants(root: i32) -> Vec<i32> {
        let map = parent_map();
        let mut set: HashSet<i32> = HashSet::from([root]);
        loop {
            let before = set.len();
            for (&pid, ppid) in &map {
                if set.contains(ppid) {
                    set.insert(pid);
                }
            }
            if set.len() == before {
                break;
            }
        }
        set.remove(&root);
        let mut v: Vec<i32> = set.into_iter().collect();
        v.sort_unstable();
        v
    }

    struct Supervisor {
        me: i32,
        /// The gate's pid: while it is our parent, the gate lives.
        parent: i32,
        engine: i32,
        cgroup: Option<Cgroup>,
        leader_reported: bool,
        /// The engine's private working directory, which the gate made and removes; a gate
        /// that was killed cannot, so the supervisor does once the tree is gone.
        private_dir: Option<PathBuf>,
    }

    impl Supervisor {
        /// Whether the gate is gone (we were re-parented) or we were told to stop at once
        /// (SIGTERM, SIGINT): then nobody waits for a graceful stop, and the tree is killed
        /// now, not after the grace.
        fn gate_gone(&self) -> bool {
            getppid().as_raw() != self.parent
                || matches!(
                    SIGNALLED.load(Ordering::SeqCst),
                    libc::SIGTERM | libc::SIGINT
                )
        }

        /// Reaps every exited child (adopted orphans included); reports the leader's end once.
        fn reap(&mut self) {
            loop {
                let (pid, end) = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(pid, code)) => (pid, Report::ExitedCode(code)),
                    Ok(WaitStatus::Signaled(pid, sig, _)) => {
                        (pid, Report::ExitedSignal(sig as i32))
                    }
                    Ok(WaitStatus::StillAlive) | Err(_) => return,
                    Ok(_) => continue,
                };
                if pid.as_raw() == self.engine && !self.leader_reported {
                    self.leader_reported = true;
                    report(&end);
                }
            }
        }

        fn left(&mut self) -> Vec<i32> {
            self.reap();
            descendants(self.me)
        }

        fn any_left(&mut self) -> bool {
            !self.left().is_empty() || self.cgroup.as_ref().is_some_and(Cgroup::populated)
        }

        fn signal_all(&mut self, sig: Signal) {
            let _ = killpg(Pid::from_raw(self.engine), sig);
            if let Some(cg) = &self.cgroup {
                if sig == Signal::SIGKILL {
                    cg.kill();
                }
                for pid in cg.pids() {
                    let _ = kill(Pid::from_raw(pid), sig);
                }
            }
            for pid in self.left() {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }

        /// SIGTERM to the whole tree, up to `grace` for it to go, then SIGKILL until nothing is
        /// left (10 s at most). Returns whether SIGKILL was needed and how many are left.
        fn teardown(&mut self, grace: Duration) -> (bool, usize) {
            let mut killed = false;
            if self.any_left() && !grace.is_zero() {
                self.signal_all(Signal::SIGTERM);
                let deadline = Instant::now() + grace;
                while self.any_left() && Instant::now() < deadline && !self.gate_gone() {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            if self.any_left() {
                killed = true;
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    self.signal_all(Signal::SIGKILL);
                    std::thread::sleep(Duration::from_millis(5));
                    if !self.any_left() || Instant::now() >= deadline {
                        break;
                    }
                }
            }
            let left = self.left().len();
            if let Some(cg) = &self.cgroup {
                cg.remove();
            }
            // Only when nothing of the tree is left to write into it, and only for a gate
            // that is gone (a live gate removes its own directory).
            if left == 0
                && getppid().as_raw() != self.parent
                && let Some(dir) = &self.private_dir
            {
                let _ = std::fs::remove_dir_all(dir);
            }
            (killed, left)
        }

        fn finish(&mut self, grace: Duration) -> i32 {
            let (killed, left) = self.teardown(grace);
            self.reap();
            report(&Report::Stopped { killed, left });
            if left == 0 { 0 } else { 1 }
        }
    }

    fn install_handlers() {
        let action = SigAction::new(
            SigHandler::Handler(on_signal),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        for sig in [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGINT] {
            // SAFETY: the handler only stores into an atomic (async-signal-safe). Handled (not
            // ignored) signals are reset to their defaults in the engine by execve.
            unsafe {
                let _ = sigaction(sig, &action);
            }
        }
    }

    /// A failed spawn: the error, and the isolation step that failed in the child, if one did.
    type SpawnFailure = (std::io::Error, Option<(Step, i32)>);

    fn spawn_engine(
        argv: &[String],
        cgroup: Option<&Cgroup>,
        stdout_file: Option<&Path>,
        attempt: &Attempt,
    ) -> Result<u32, SpawnFailure> {
        let program = argv.first().map_or("", String::as_str);
        let mut cmd = Command::new(program);
        let stdout = match stdout_file {
            Some(p) => Stdio::from(File::create(p).map_err(|e| (e, None))?),
            None => Stdio::from(
                std::io::stderr()
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|e| (e, None))?,
            ),
        };
        cmd.args(&argv[1.min(argv.len())..])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .process_group(0);
        if let Some(cg) = cgroup {
            let fd = cg.procs.as_raw_fd();
            // SAFETY: runs in the forked child before exec; write(2) on an already open fd
            // is async-signal-safe, nothing is allocated. Writing "0" moves the writer itself.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        // After the cgroup move (which needs the supervisor's user), before exec.
        let status = isolate::install(&mut cmd, attempt).map_err(|e| (e, None))?;
        // The std Child is not waited through std: the supervisor reaps with waitpid(-1).
        let spawned = cmd.spawn().map(|c| c.id());
        drop(cmd);
        spawned.map_err(|e| (e, isolate::failed_step(&status)))
    }

    /// What held (`Ok(None)`: nothing was asked), or why the step that was dropped failed.
    fn held<T>(held: Option<T>, failed: Option<String>) -> Result<Option<T>, String> {
        match (held, failed) {
            (None, Some(why)) => Err(why),
            (held, _) => Ok(held),
        }
    }

    /// See the module docs. `parent` is the gate's pid: a SIGHUP while it is still our
    /// parent is a thread of the gate ending (the death signal fires per thread), not its death.
    pub fn supervise(
        parent: i32,
        grace_ms: u64,
        use_cgroup: bool,
        stdout_file: Option<&Path>,
        private_dir: Option<&Path>,
        plan: &IsolationPlan,
        argv: &[String],
    ) -> i32 {
        // The directories to cover and the build's stdout file are the gate's outputs: not to
        // be read from /proc/<supervisor>/cmdline by the engine.
        crate::engine::reach::scrub_own_arguments(&["--hide", "--stdout-file"]);
        let me = std::process::id() as i32;
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            report(&Report::SpawnError {
                errno: e as i32,
                message: format!("cannot become a child subreaper: {e}"),
            });
            return 2;
        }
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGHUP);
        // Its cwd is the gate's (or the engine's workdir): not to be followed through
        // /proc/<supervisor>/cwd by the engine (see `engine::reach`).
        crate::engine::reach::not_dumpable();
        install_handlers();
        if getppid().as_raw() != parent {
            // The gate died before the death signal was armed: no engine, nobody to clean up.
            if let Some(dir) = private_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            return 1;
        }
        if argv.is_empty() {
            report(&Report::SpawnError {
                errno: libc::EINVAL,
                message: "no engine command".into(),
            });
            return 2;
        }
        let mut cgroup = if use_cgroup { Cgroup::create() } else { None };
        let root = crate::engine::is_root();
        let off = plan.isolation == EngineIsolation::Off;
        let route = if root {
            MountRoute::Root
        } else {
            MountRoute::UserNs
        };
        let mut attempt = Attempt {
            user: if off || !root || plan.keep_user {
                None
            } else {
                plan.isolation.user()
            },
            mounts: (!off && !plan.cover.is_empty()).then(|| (route, plan.cover.clone())),
        };
        let (mut user_err, mut mount_err) = (None, None);
        let mut cgroup_err = None;
        // Each failed try drops what failed (an isolation step, or the cgroup) and tries again.
        let pid = loop {
            match spawn_engine(argv, cgroup.as_ref(), stdout_file, &attempt) {
                Ok(pid) => break Ok(pid),
                Err((_, Some((step, errno)))) if step.is_mounts() && attempt.mounts.is_some() => {
                    mount_err = Some(step.why(errno));
                    attempt.mounts = None;
                }
                Err((_, Some((step, errno)))) if !step.is_mounts() && attempt.user.is_some() => {
                    user_err = Some(step.why(errno));
                    attempt.user = None;
                }
                Err((first, _)) if cgroup.is_some() => {
                    // Delegation may allow mkdir but not the move: fall back to the subreaper.
                    if let Some(cg) = cgroup.take() {
                        cg.remove();
                    }
                    cgroup_err = Some(first);
                }
                Err((e, _)) => {
                    if let Some(first) = &cgroup_err {
                        note(&format!(
                            "the first try, in its own cgroup, failed too: {first}"
                        ));
                    }
                    break Err(e);
                }
            }
        };
        let pid = match pid {
            Ok(p) => p as i32,
            Err(e) => {
                report(&Report::SpawnError {
                    errno: e.raw_os_error().unwrap_or(0),
                    message: e.to_string(),
                });
                return 127;
            }
        };
        let containment = if cgroup.is_some() {
            Containment::Cgroup
        } else {
            Containment::Subreaper
        };
        let outcome = Outcome {
            off,
            root,
            user: held(attempt.user, user_err),
            mounts: held(attempt.mounts.as_ref().map(|(route, _)| *route), mount_err),
            covered: attempt.mounts.as_ref().map_or(0, |(_, d)| d.len()),
        };
        report(&Report::Started {
            pid,
            containment,
            isolation: outcome.describe(),
        });

        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                let Ok(line) = line else { break };
                let mut w = line.split_whitespace();
                let cmd = match (w.next(), w.next().and_then(|g| g.parse::<u64>().ok())) {
                    (Some("stop"), Some(ms)) => Control::Stop(Duration::from_millis(ms)),
                    (Some("kill"), _) => Control::Kill,
                    _ => continue,
                };
                if tx.send(cmd).is_err() {
                    return;
                }
            }
            let _ = tx.send(Control::Kill);
        });

        let mut sup = Supervisor {
            me,
            parent,
            engine: pid,
            cgroup,
            leader_reported: false,
            private_dir: private_dir.map(Path::to_path_buf),
        };
        loop {
            sup.reap();
            // The gate's death first: an engine that ends because the gate is gone (its output
            // pipe broke) must not earn its children the grace of a graceful stop.
            if sup.gate_gone() {
                return sup.finish(Duration::ZERO);
            }
            if sup.leader_reported {
                // The engine is gone as far as the gate is concerned: stop its leftovers.
                return sup.finish(Duration::from_millis(grace_ms));
            }
            match SIGNALLED.swap(0, Ordering::SeqCst) {
                0 => {}
                s if s == libc::SIGHUP && getppid().as_raw() == parent => {}
                _ => return sup.finish(Duration::ZERO),
            }
            if getppid().as_raw() != parent {
                return sup.finish(Duration::ZERO);
            }
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(Control::Stop(grace)) => return sup.finish(grace),
                Ok(Control::Kill) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return sup.finish(Duration::ZERO);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines_round_trip() {
        for r in [
            Report::Started {
                pid: 42,
                containment: Containment::Cgroup,
                isolation: "uid 65534 gid 65534; mount namespace covers 2 directories".into(),
            },
            Report::Started {
                pid: 7,
                containment: Containment::Subreaper,
                isolation: String::new(),
            },
            Report::SpawnError {
                errno: 2,
                message: "No such file or directory (os error 2)".into(),
            },
            Report::ExitedCode(1),
            Report::ExitedSignal(9),
            Report::Stopped {
                killed: true,
                left: 0,
            },
        ] {
            assert_eq!(Report::parse(&r.line()), Some(r.clone()), "{}", r.line());
        }
        assert_eq!(Report::parse("started x cgroup"), None);
        assert_eq!(Report::parse("hello"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn descendants_include_grandchildren_and_not_self() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .expect("spawn sh");
        let me = std::process::id() as i32;
        let sh = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let found = loop {
            let d = linux::descendants(me);
            if d.contains(&sh) && d.len() >= 2 {
                break d;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no grandchild seen: {d:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(!found.contains(&me));
        for pid in linux::descendants(sh) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
