//! What the engine under test can learn of the gate that boots it. Where the host allows no
//! other user nor namespace ([`super::isolate`]), the engine runs as the gate's user, so
//! `/proc/<gate>/` is open to it: its command line (world-readable on every route) names the
//! output directory, the baseline store and the config, and its `cwd`, `fd/` and `environ`
//! links lead to them. Before the first engine boots, [`conceal_gate`]
//!
//! - overwrites the values of the flags that name those paths in the gate's own argument area
//!   (what `/proc/<gate>/cmdline` shows), as `setproctitle` does: `--out ********`;
//! - makes the gate not dumpable (`PR_SET_DUMPABLE` 0): `/proc/<gate>/cwd`, `fd/`, `environ`,
//!   `maps` and `mem` are then readable only with `CAP_SYS_PTRACE`, not by a process of the
//!   same user. The supervisor does the same for itself.
//!
//! [`hide_from_engines`] registers the output directory and the store once they exist; each
//! engine's supervisor covers them in the engine's own mount namespace where it can.
//!
//! What it cannot hide, and docs/security.md says so: a root engine (`isolation = "off"` under
//! root) reads everything; an engine of the gate's user reaches the real directories through
//! `/proc/<pid>/cwd` of the user's other processes (the step's shell), in a mount namespace
//! too; without one, a default path (`infergate-results` in the workspace) is a guess away. The engine's own working directory is a fresh private one
//! ([`super::EngineProcess::spawn`]) unless the config sets `[engine] workdir`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The flags whose values are paths the engine must not learn.
pub(crate) const CONCEALED_FLAGS: &[&str] = &["--out", "--baseline-dir", "--config"];

/// Conceals this process from the engines it boots (see the module docs). Linux only; a no-op
/// elsewhere and where `/proc/self/stat` cannot be read.
pub fn conceal_gate() {
    #[cfg(target_os = "linux")]
    {
        scrub_own_arguments(CONCEALED_FLAGS);
        not_dumpable();
    }
    #[cfg(not(target_os = "linux"))]
    let _ = CONCEALED_FLAGS;
}

/// The gate's output directories and baseline stores, to be covered in every engine's view of
/// the filesystem ([`super::isolate`]).
static HIDDEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Registers directories that engines booted from now on must not see (the output directory
/// and the baseline store), as absolute paths. Call it once they exist.
pub fn hide_from_engines(dirs: &[&Path]) {
    let mut hidden = HIDDEN.lock().unwrap_or_else(PoisonError::into_inner);
    for d in dirs {
        let abs = d
            .canonicalize()
            .or_else(|_| std::path::absolute(d))
            .unwrap_or_else(|_| d.to_path_buf());
        if !hidden.contains(&abs) {
            hidden.push(abs);
        }
    }
}

/// The registered directories to cover for one engine, and a note for each that stays
/// visible because covering it would hide something the engine needs: `needed` is what (its
/// working directory, its program, the gate's working directory), as (label, path). A
/// directory that does not exist (yet) is skipped: there is nothing in it to reach.
pub fn dirs_to_cover(needed: &[(&str, &Path)]) -> (Vec<PathBuf>, Vec<String>) {
    let hidden = HIDDEN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    cover_plan(&hidden, needed)
}

fn cover_plan(hidden: &[PathBuf], needed: &[(&str, &Path)]) -> (Vec<PathBuf>, Vec<String>) {
    let mut cover = Vec::new();
    let mut notes = Vec::new();
    for d in hidden {
        let Ok(dir) = d.canonicalize() else { continue };
        if !dir.is_dir() || cover.contains(&dir) {
            continue;
        }
        let holds = needed.iter().find(|(_, p)| {
            let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
            p.starts_with(&dir)
        });
        match holds {
            Some((what, _)) => notes.push(format!(
                "{} not covered (it holds {what})",
                infergate_io::untrusted_text::console(&dir.display().to_string())
            )),
            None => cover.push(dir),
        }
    }
    (cover, notes)
}

/// Whether `uid`/`gid` (no other groups) may write into a directory of this owner and mode.
pub(crate) fn writable_by(owner: u32, group: u32, mode: u32, uid: u32, gid: u32) -> bool {
    if uid == 0 {
        true
    } else if uid == owner {
        mode & 0o200 != 0
    } else if gid == group {
        mode & 0o020 != 0
    } else {
        mode & 0o002 != 0
    }
}

/// `PR_SET_DUMPABLE` 0 for this process (see the module docs).
#[cfg(target_os = "linux")]
pub(crate) fn not_dumpable() {
    let _ = nix::sys::prctl::set_dumpable(false);
}

/// The fields of `/proc/<pid>/stat` after the command name, which ends at the last `)` (it may
/// itself hold spaces and parentheses): field 3 (the state) first.
#[cfg(target_os = "linux")]
pub(crate) fn stat_fields(pid: impl std::fmt::Display) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 1..].to_string())
}

/// The start and end of this process's argument area (`/proc/self/stat` fields 48 and 49).
#[cfg(target_os = "linux")]
fn argument_area() -> Option<(usize, usize)> {
    let rest = stat_fields("self")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let start: usize = fields.get(48 - 3)?.parse().ok()?;
    let end: usize = fields.get(49 - 3)?.parse().ok()?;
    (start > 0 && end > start && end - start <= 4 << 20).then_some((start, end))
}

/// Overwrites with `*` the value after each of `flags` (`--flag VALUE` and `--flag=VALUE`) in
/// this process's argument area, so `/proc/<pid>/cmdline` no longer shows it. Arguments
/// already parsed are copies and keep their values.
#[cfg(target_os = "linux")]
pub(crate) fn scrub_own_arguments(flags: &[&str]) {
    let Some((start, end)) = argument_area() else {
        return;
    };
    // SAFETY: [arg_start, arg_end) is this process's own argument area, on its initial stack,
    // mapped read-write for the life of the process. Nothing holds a Rust reference into it:
    // the standard library copies arguments out when asked, and the command line was parsed
    // (into owned strings) before this runs; the gate has not started other threads that
    // read it.
    let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    let mut hide_next = false;
    let mut i = 0;
    while i < area.len() {
        let len = area[i..]
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(area.len() - i);
        let arg = &mut area[i..i + len];
        if hide_next {
            arg.fill(b'*');
            hide_next = false;
        } else if flags.iter().any(|f| arg == f.as_bytes()) {
            hide_next = true;
        } else if let Some(f) = flags
            .iter()
            .find(|f| arg.len() > f.len() && arg.starts_with(f.as_bytes()) && arg[f.len()] == b'=')
        {
            arg[f.len() + 1..].fill(b'*');
        }
        i += len + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_holding_what_the_engine_needs_is_not_covered() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("out");
        let store = t.path().join("store");
        let work = t.path().join("work");
        for d in [&out, &store, &work] {
            std::fs::create_dir(d).unwrap();
        }
        let missing = t.path().join("missing");
        let hidden = vec![out.clone(), store.clone(), missing, t.path().to_path_buf()];
        let (cover, notes) = cover_plan(&hidden, &[("the engine's working directory", &work)]);
        assert_eq!(
            cover,
            vec![out.canonicalize().unwrap(), store.canonicalize().unwrap()]
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].ends_with("not covered (it holds the engine's working directory)"));
    }

    #[test]
    fn write_permission_follows_owner_group_other() {
        assert!(!writable_by(0, 0, 0o755, 65534, 65534));
        assert!(!writable_by(0, 0, 0o700, 65534, 65534));
        assert!(writable_by(0, 0, 0o777, 65534, 65534));
        assert!(writable_by(65534, 0, 0o700, 65534, 65534));
        assert!(writable_by(0, 65534, 0o770, 65534, 65534));
        assert!(!writable_by(0, 65534, 0o750, 65534, 65534));
        assert!(writable_by(5, 5, 0o500, 0, 0));
    }
}
