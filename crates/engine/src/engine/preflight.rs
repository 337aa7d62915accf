//! Before the first boot: can the engine's user run what its command names?
//!
//! A root gate runs the engine as uid 65534 (`[engine] isolation = "auto"`, see
//! [`super::isolate`]), which reaches root's files only where every directory on the way lets
//! others in: a venv, a model or a checkout under `/root` (mode 0700) is out of its reach, and
//! the engine would fail at boot with an error that names neither isolation nor the uid. So
//! before booting, the gate checks, **as the engine's user**, what the command names:
//!
//! - its program (found on the engine's `PATH` as `execvp` finds it) and, for a script, the
//!   interpreter of its `#!` line (through `env` too) and read access to the script;
//! - in a shell line, the program after a leading `exec` (and `NAME=value` words) when it is
//!   a path, `$NAME` and `${NAME}` expanded from the engine's environment;
//! - every argument, `--flag=value` value and `[engine] env` or `env_allow` value that names
//!   an existing path (a model file, `HF_HOME`): a file must be readable, a directory
//!   enterable;
//! - its working directory (`[engine] workdir`).
//!
//! `access(2)` run as root ignores permissions, so the checks run in a forked child that first
//! takes the engine's uid, gid and groups, as the supervisor does before `exec`. A program that
//! does not exist is reported whoever the gate is. Paths under the gate's output directory and
//! store are not checked: the engine is meant not to reach them. What no argument names (a
//! file the engine opens on its own) still fails at boot, where the error names the uid too.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::EngineLaunch;
use infergate_config::config::{CommandSpec, EngineConfig};

/// Why the engine cannot run, found before booting it: the user's to fix (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreflightError {
    /// The program (or the interpreter of its `#!` line) does not exist.
    #[error("[engine] command: {what} `{name}` {where_}: {fix}")]
    NotFound {
        /// `the engine's program`, `the interpreter of …`.
        what: String,
        /// As the command names it.
        name: String,
        /// `does not exist`, `is not on the engine's PATH (…)`.
        where_: String,
        /// What to do.
        fix: String,
    },
    /// The engine's user cannot execute, read or enter something the command names.
    #[error("{0}")]
    Unreachable(String),
}

/// How a path is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Executed (program, interpreter).
    Exec,
    /// Read (a script, a file an argument names).
    Read,
    /// Entered (a directory an argument names, the working directory).
    Enter,
}

impl Use {
    fn mode(self) -> libc::c_int {
        match self {
            Use::Exec | Use::Enter => libc::X_OK,
            Use::Read => libc::R_OK,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Use::Exec => "execute",
            Use::Read => "read",
            Use::Enter => "enter",
        }
    }
}

/// One thing the engine needs: what it is (for people), its path, how it is used.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Need {
    what: String,
    path: PathBuf,
    how: Use,
}

/// Checks `launch` (resolved from `cfg`) before its first boot; `hidden` are the gate's
/// output directory and store, not checked. Linux only (elsewhere nothing is checked).
pub fn preflight(
    cfg: &EngineConfig,
    launch: &EngineLaunch,
    hidden: &[&Path],
) -> Result<(), PreflightError> {
    let needs = needs(cfg, launch, hidden)?;
    let user = launch.isolation.user().filter(|_| super::is_root());
    let Some(results) = check(&needs, user) else {
        // The engine's user could not be taken (a container without CAP_SETUID): the
        // supervisor then runs the engine as the gate's user, which reaches what root does.
        return Ok(());
    };
    let Some((need, errno)) = needs
        .iter()
        .zip(&results)
        .find_map(|(n, r)| (*r != 0).then_some((n, *r)))
    else {
        return Ok(());
    };
    // Which directory on the way stops it (the first, from `/`), if one does: on the path as
    // named, else on the one its links lead to (a venv's python links into `/root/.pyenv`).
    let real = need.path.canonicalize().ok();
    let blocker = blocking_dir(&need.path, user)
        .or_else(|| real.as_deref().and_then(|r| blocking_dir(r, user)));
    Err(PreflightError::Unreachable(unreachable_message(
        launch, need, errno, blocker, user,
    )))
}

/// The first directory on the way to `path`, from `/`, that `user` cannot enter.
fn blocking_dir(path: &Path, user: Option<(u32, u32)>) -> Option<PathBuf> {
    let mut ancestors: Vec<Need> = path
        .ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .map(|a| Need {
            what: String::new(),
            path: a.to_path_buf(),
            how: Use::Enter,
        })
        .collect();
    ancestors.reverse();
    let results = check(&ancestors, user)?;
    ancestors
        .into_iter()
        .zip(results)
        .find(|(_, e)| *e != 0)
        .map(|(a, _)| a.path)
}

/// The one message for something the engine's user cannot use: what, the uid, the path, the
/// directory that stops it, and the fixes.
fn unreachable_message(
    launch: &EngineLaunch,
    need: &Need,
    errno: i32,
    blocker: Option<PathBuf>,
    user: Option<(u32, u32)>,
) -> String {
    let path = need.path.display().to_string();
    let why = std::io::Error::from_raw_os_error(errno);
    // Where its links lead, when that is elsewhere.
    let why = match need.path.canonicalize() {
        Ok(real) if real != need.path => format!("{why}; it leads to {}", real.display()),
        _ => why.to_string(),
    };
    // Others' bits for another user; everyone's for the gate's own (the owner's may lack them).
    let who = if user.is_some() { "o" } else { "a" };
    let (stopper, chmod) = match &blocker {
        Some(dir) => {
            let d = dir.display().to_string();
            (
                format!(
                    "the directory {d}{} lets no other user in",
                    describe_mode(dir)
                ),
                format!("`chmod {who}+rx {d}`"),
            )
        }
        None => {
            let bits = if need.how == Use::Read { "+r" } else { "+rx" };
            let bits = format!("{who}{bits}");
            (
                format!("{path}{} is not open to it", describe_mode(&need.path)),
                format!("`chmod {bits} {path}`"),
            )
        }
    };
    match user {
        Some((uid, gid)) => format!(
            "[engine] isolation = \"{}\": the gate runs as root, so the engine runs as uid {uid} gid {gid}, and that user cannot {} {path}, {} ({why}): {stopper}. Fix one of: {chmod}; or run the engine as a user that can reach it with isolation = \"UID:GID\" under [engine]; or isolation = \"off\" under [engine] (the engine then runs as root, unisolated; docs/security.md)",
            launch.isolation.value(),
            need.how.verb(),
            need.what,
        ),
        None => format!(
            "[engine] command: the engine cannot {} {path}, {} ({why}): {stopper}; fix the mode ({chmod}) or the path",
            need.how.verb(),
            need.what,
        ),
    }
}

/// ` (mode 0700, owner uid 0)`, or nothing where it cannot be read.
fn describe_mode(p: &Path) -> String {
    std::fs::metadata(p).map_or(String::new(), |m| {
        format!(
            " (mode {:04o}, owner uid {})",
            m.permissions().mode() & 0o7777,
            m.uid()
        )
    })
}

/// Whether `p` lies in one of the gate's hidden directories, or in `/proc`, `/sys`, `/dev`.
fn skipped(p: &Path, hidden: &[PathBuf]) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    ["/proc", "/sys", "/dev"].iter().any(|s| p.starts_with(s))
        || hidden.iter().any(|h| p.starts_with(h))
}

/// Where `execvp` finds `name` on `path_var` (the first executable file), if anywhere.
pub(crate) fn on_path(name: &str, path_var: &str) -> Option<PathBuf> {
    path_var
        .split(':')
        .map(|d| if d.is_empty() { "." } else { d })
        .map(|d| Path::new(d).join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `$NAME`, `${NAME}`, `${NAME:-default}` and `${NAME:?message}` of `word` from `env`; `None`
/// when it holds another expansion (`$(…)`, a backquote) or a name `env` lacks.
fn expand(word: &str, env: &[(String, String)]) -> Option<String> {
    if word.contains("$(") || word.contains('`') {
        return None;
    }
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let mut out = String::new();
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}')?;
            let inner = &braced[..end];
            let name = inner.split([':', '-', '?', '+', '=']).next().unwrap_or("");
            match (lookup(name), inner.strip_prefix(name)) {
                (Some(v), _) if !v.is_empty() => out.push_str(&v),
                (_, Some(d)) if d.starts_with(":-") => out.push_str(&d[2..]),
                _ => return None,
            }
            rest = &braced[end + 1..];
        } else {
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if len == 0 {
                return None;
            }
            out.push_str(&lookup(&after[..len])?);
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    Some(out)
}

/// What the command of `launch` needs, or the program that does not exist.
fn needs(
    cfg: &EngineConfig,
    launch: &EngineLaunch,
    hidden: &[&Path],
) -> Result<Vec<Need>, PreflightError> {
    let mut found = NeedsFound::new(launch, hidden);
    match &cfg.command {
        CommandSpec::Argv(_) => found.argv()?,
        CommandSpec::Shell(_) => found.shell_line()?,
    }
    for (k, v) in &launch.env {
        let from_config =
            cfg.env.contains_key(k) || (cfg.env_allow.iter().any(|e| super::launch::allowed(k, e)));
        if from_config && !infergate_io::redact::is_secret_name(k) {
            found.named(v, k);
        }
    }
    if let Some(dir) = &launch.workdir
        && !skipped(dir, &found.hidden)
    {
        found.out.push(Need {
            what: "its working directory ([engine] workdir)".into(),
            path: dir.clone(),
            how: Use::Enter,
        });
    }
    Ok(found.out)
}

/// What [`needs`] gathers, with what every check of a word needs: the engine's working
/// directory and `PATH`, the paths not checked.
struct NeedsFound<'a> {
    launch: &'a EngineLaunch,
    /// The gate's output directory and store, absolute.
    hidden: Vec<PathBuf>,
    /// The engine's `PATH`.
    path_var: &'a str,
    /// The gate's own executable, as the command names it (`/proc/self/fd/N`): not checked.
    self_exec: Option<String>,
    out: Vec<Need>,
}

impl<'a> NeedsFound<'a> {
    fn new(launch: &'a EngineLaunch, hidden: &[&Path]) -> Self {
        let hidden: Vec<PathBuf> = hidden
            .iter()
            .map(|h| {
                h.canonicalize()
                    .or_else(|_| std::path::absolute(h))
                    .unwrap_or_else(|_| h.to_path_buf())
            })
            .collect();
        let path_var = launch
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or("/usr/bin:/bin", |(_, v)| v.as_str());
        let self_exec = launch.self_exec.as_ref().map(super::launch::SelfExec::path);
        NeedsFound {
            launch,
            hidden,
            path_var,
            self_exec,
            out: Vec::new(),
        }
    }

    /// A relative path is the engine's working directory's: the configured one (else a fresh,
    /// empty directory, where nothing is found).
    fn resolve(&self, w: &str) -> Option<PathBuf> {
        let p = Path::new(w);
        if p.is_absolute() {
            Some(p.to_path_buf())
        } else if w.contains('/') {
            self.launch.workdir.as_ref().map(|d| d.join(p))
        } else {
            None
        }
    }

    /// An argv command: its program, then every argument that names a path.
    fn argv(&mut self) -> Result<(), PreflightError> {
        let launch = self.launch;
        let name = launch.argv.first().map_or("", String::as_str);
        self.program(name, "its program")?;
        for a in launch.argv.iter().skip(1) {
            self.named(a, "its command");
        }
        Ok(())
    }

    /// A shell line: the shell, the program the line runs when it is a path, then every other
    /// word that names a path, `$NAME` expanded from the engine's environment.
    fn shell_line(&mut self) -> Result<(), PreflightError> {
        let launch = self.launch;
        self.program("sh", "its shell")?;
        let line = launch.argv.last().map_or("", String::as_str);
        let words: Vec<Option<String>> = super::launch::shell_words(line)
            .iter()
            .map(|w| expand(w, &launch.env))
            .collect();
        // The program: after `exec` and `NAME=value` words, when it is a path.
        let first = words.iter().position(|w| {
            w.as_deref()
                .is_none_or(|w| w != "exec" && !is_assignment(w))
        });
        if let Some(Some(p)) = first.and_then(|i| words.get(i))
            && p.contains('/')
        {
            self.program(p, "the program its shell line runs")?;
        }
        for (i, w) in words.iter().enumerate() {
            if let Some(w) = w
                && Some(i) != first
            {
                self.named(w, "its shell line");
            }
        }
        Ok(())
    }

    /// The program `name` (a path, or found on the engine's `PATH`) to execute, and what a
    /// script's `#!` line runs; an error when it does not exist.
    fn program(&mut self, name: &str, what: &str) -> Result<(), PreflightError> {
        if Some(name) == self.self_exec.as_deref() {
            return Ok(());
        }
        let found = if name.contains('/') {
            self.resolve(name).filter(|p| p.exists())
        } else {
            on_path(name, self.path_var)
        };
        let Some(path) = found else {
            return Err(self.program_not_found(name, what));
        };
        if skipped(&path, &self.hidden) {
            return Ok(());
        }
        self.out.push(Need {
            what: what.into(),
            path: path.clone(),
            how: Use::Exec,
        });
        if let Some((interp, arg)) = shebang(&path) {
            self.script(&path, interp, arg)?;
        }
        Ok(())
    }

    /// Why the program `name` was not found, and the fix: a path, or a name not on `PATH`.
    fn program_not_found(&self, name: &str, what: &str) -> PreflightError {
        let path_var = self.path_var;
        let (where_, fix) = if name.contains('/') {
            (
                if Path::new(name).is_absolute() || self.launch.workdir.is_some() {
                    "does not exist".to_string()
                } else {
                    "is relative, and the engine's working directory is a fresh empty one"
                        .to_string()
                },
                "correct the path (an absolute one, or set [engine] workdir)".to_string(),
            )
        } else {
            (
                format!("is not on the engine's PATH ({path_var})"),
                "install it, name it by its absolute path, or let the engine's PATH reach it"
                    .to_string(),
            )
        };
        PreflightError::NotFound {
            what: what.into(),
            name: name.into(),
            where_,
            fix,
        }
    }

    /// A script at `path`: read access to it, its interpreter `interp` and, through `env`,
    /// the program `env` runs (`arg`).
    fn script(
        &mut self,
        path: &Path,
        interp: PathBuf,
        arg: Option<String>,
    ) -> Result<(), PreflightError> {
        let path_var = self.path_var;
        self.out.push(Need {
            what: format!("the script {}", path.display()),
            path: path.to_path_buf(),
            how: Use::Read,
        });
        let what = format!("the interpreter of {}", path.display());
        if !interp.exists() {
            return Err(PreflightError::NotFound {
                what,
                name: interp.display().to_string(),
                where_: "does not exist".into(),
                fix: "correct its #! line".into(),
            });
        }
        self.out.push(Need {
            what: what.clone(),
            path: interp.clone(),
            how: Use::Exec,
        });
        // `#!/usr/bin/env python3`: the program env runs.
        if interp.file_name().is_some_and(|n| n == "env")
            && let Some(name) = arg.filter(|a| !a.starts_with('-'))
        {
            match on_path(&name, path_var) {
                Some(p) => self.out.push(Need {
                    what,
                    path: p,
                    how: Use::Exec,
                }),
                None => {
                    return Err(PreflightError::NotFound {
                        what,
                        name,
                        where_: format!("is not on the engine's PATH ({path_var})"),
                        fix: "install it, or let the engine's PATH reach it".into(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The path `word` (or the value of `--flag=value`) names, if it exists: a file to read, a
    /// directory to enter. `by`: what names the path (`its command`, `its shell line`,
    /// `HF_HOME`).
    fn named(&mut self, word: &str, by: &str) {
        let candidates = std::iter::once(word).chain(word.split_once('=').map(|(_, v)| v));
        for w in candidates {
            let Some(p) = self.resolve(w) else { continue };
            if Some(w) == self.self_exec.as_deref() || skipped(&p, &self.hidden) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&p) else {
                continue;
            };
            let kind = if meta.is_dir() { "directory" } else { "file" };
            self.out.push(Need {
                what: format!("the {kind} {by} names"),
                path: p,
                how: if meta.is_dir() { Use::Enter } else { Use::Read },
            });
        }
    }
}

/// `NAME=value` (a shell assignment word).
fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(n, _)| {
        !n.is_empty()
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !n.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// The interpreter of a script's `#!` line and its one argument, if `path` is a script.
fn shebang(path: &Path) -> Option<(PathBuf, Option<String>)> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim().splitn(2, [' ', '\t']);
    let interp = PathBuf::from(parts.next().filter(|s| !s.is_empty())?);
    let arg = parts
        .next()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty());
    Some((interp, arg))
}

/// `access(2)` of every need, as `user` when given (in a forked child that takes it), else as
/// this process: 0 or the errno, in order. `None` when the child could not take the user.
fn check(needs: &[Need], user: Option<(u32, u32)>) -> Option<Vec<i32>> {
    let paths: Vec<(CString, libc::c_int)> = needs
        .iter()
        .map(|n| {
            (
                CString::new(n.path.as_os_str().as_bytes()).unwrap_or_default(),
                n.how.mode(),
            )
        })
        .collect();
    let Some((uid, gid)) = user else {
        return Some(
            paths
                .iter()
                // SAFETY: access(2) on a NUL-terminated path.
                .map(|(p, m)| {
                    if unsafe { libc::access(p.as_ptr(), *m) } == 0 {
                        0
                    } else {
                        std::io::Error::last_os_error()
                            .raw_os_error()
                            .unwrap_or(libc::EACCES)
                    }
                })
                .collect(),
        );
    };
    as_user(&paths, uid, gid)
}

/// The forked child of [`check`].
#[cfg(target_os = "linux")]
fn as_user(paths: &[(CString, libc::c_int)], uid: u32, gid: u32) -> Option<Vec<i32>> {
    use std::io::Read;
    let (read, write) = super::isolate::cloexec_pipe().ok()?;
    let read = std::fs::File::from(read);
    let wfd = std::os::fd::AsRawFd::as_raw_fd(&write);
    let groups = [gid];
    // SAFETY: the child of a (possibly multi-threaded) process calls only async-signal-safe
    // functions (setgroups, setgid, setuid, access, write, _exit) on data prepared above,
    // allocates nothing and takes no lock; the parent only reads the pipe and reaps it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe {
            if libc::setgroups(1, groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                libc::_exit(2);
            }
            for (p, m) in paths {
                let r: i32 = if libc::access(p.as_ptr(), *m) == 0 {
                    0
                } else {
                    *libc::__errno_location()
                };
                let b = r.to_le_bytes();
                if libc::write(wfd, b.as_ptr().cast(), 4) != 4 {
                    libc::_exit(3);
                }
            }
            libc::_exit(0);
        }
    }
    drop(write);
    if pid < 0 {
        return None;
    }
    let mut buf = Vec::new();
    let read_ok = (&read).read_to_end(&mut buf).is_ok();
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let exited_0 = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    if !read_ok || !exited_0 || buf.len() != paths.len() * 4 {
        return None;
    }
    Some(
        buf.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(not(target_os = "linux"))]
fn as_user(_: &[(CString, libc::c_int)], _: u32, _: u32) -> Option<Vec<i32>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::launch::tests::launch_of;

    #[test]
    fn shell_words_expand_from_the_engine_environment_only() {
        let env = vec![
            ("PY".to_string(), "/v/bin/python".to_string()),
            ("EMPTY".to_string(), String::new()),
        ];
        assert_eq!(expand("$PY", &env).as_deref(), Some("/v/bin/python"));
        assert_eq!(
            expand("${PY:?set PY}", &env).as_deref(),
            Some("/v/bin/python")
        );
        assert_eq!(expand("${T:-2}", &env).as_deref(), Some("2"));
        assert_eq!(
            expand("--m=${PY}x", &env).as_deref(),
            Some("--m=/v/bin/pythonx")
        );
        assert_eq!(expand("$OTHER/x", &env), None);
        assert_eq!(expand("${EMPTY:?unset}", &env), None);
        assert_eq!(expand("$(pwd)", &env), None);
        assert_eq!(expand("plain", &env).as_deref(), Some("plain"));
        assert!(is_assignment("A_1=x") && !is_assignment("--a=x") && !is_assignment("1A=x"));
    }

    #[test]
    fn a_script_names_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path().join("s");
        std::fs::write(&s, "#!/usr/bin/env  python3 \nprint(1)\n").unwrap();
        assert_eq!(
            shebang(&s),
            Some((PathBuf::from("/usr/bin/env"), Some("python3".into())))
        );
        std::fs::write(&s, "\x7fELF").unwrap();
        assert_eq!(shebang(&s), None);
    }

    #[test]
    fn a_missing_program_is_not_found_whoever_the_gate_is() {
        let (cfg, l) = launch_of(CommandSpec::Argv(vec!["/nonexistent/bin/vllm".into()]));
        let e = preflight(&cfg, &l, &[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "[engine] command: its program `/nonexistent/bin/vllm` does not exist: correct the path (an absolute one, or set [engine] workdir)"
        );
        let (cfg, l) = launch_of(CommandSpec::Argv(vec!["no-such-engine-xyz".into()]));
        let e = preflight(&cfg, &l, &[]).unwrap_err().to_string();
        assert!(
            e.contains("`no-such-engine-xyz` is not on the engine's PATH"),
            "{e}"
        );
        // `sh` and paths that exist, or that only the shell knows, are fine.
        let (cfg, l) = launch_of(CommandSpec::Shell("exec sleep 1 $UNKNOWN/x /tmp".into()));
        assert_eq!(preflight(&cfg, &l, &[]), Ok(()));
    }

    /// Root only: a program in a directory of mode 0700 is out of uid 65534's reach, and the
    /// message names isolation, the uid, the directory and the fixes.
    #[test]
    fn the_engine_user_cannot_reach_a_private_directory() {
        if !crate::engine::is_root() {
            // Skipped: needs a root gate (the engine then runs as uid 65534); the e2e test
            // `first_hour_e2e` says so on a host that is not root.
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let engine = dir.path().join("engine.sh");
        std::fs::write(&engine, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (cfg, l) = launch_of(CommandSpec::Argv(vec![engine.display().to_string()]));
        let e = preflight(&cfg, &l, &[]).unwrap_err().to_string();
        let d = dir.path().display().to_string();
        for part in [
            "[engine] isolation = \"auto\"",
            "uid 65534 gid 65534",
            &format!("cannot execute {}, its program (", engine.display()),
            &format!("the directory {d} (mode 0700, owner uid 0) lets no other user in"),
            &format!("`chmod o+rx {d}`"),
            "isolation = \"UID:GID\"",
            "isolation = \"off\"",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
        // Opened to others, it runs; under the gate's hidden directories, it is not checked.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(preflight(&cfg, &l, &[]), Ok(()));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(preflight(&cfg, &l, &[dir.path()]), Ok(()));
        // A link in an open directory (a venv's bin/python) into the private one: the message
        // names where it leads and the directory that stops it there.
        let venv = tempfile::tempdir().unwrap();
        std::fs::set_permissions(venv.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let python = venv.path().join("python");
        std::os::unix::fs::symlink(&engine, &python).unwrap();
        let (cfg, l) = launch_of(CommandSpec::Argv(vec![python.display().to_string()]));
        let e = preflight(&cfg, &l, &[]).unwrap_err().to_string();
        let real = engine.canonicalize().unwrap();
        let real_dir = real.parent().unwrap().display().to_string();
        for part in [
            format!("cannot execute {}, its program", python.display()),
            format!("it leads to {}", real.display()),
            format!("`chmod o+rx {real_dir}`"),
        ] {
            assert!(e.contains(&part), "{part}: {e}");
        }
    }
}
