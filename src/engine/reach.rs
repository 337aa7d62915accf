//! What the engine under test can learn of the gate that boots it. The engine runs as the
//! gate's user, so `/proc/<gate>/` is open to it: its command line (world-readable) names the
//! output directory, the baseline store and the config, and its `cwd`, `fd/` and `environ`
//! links lead to them. Before the first engine boots, [`conceal_gate`]
//!
//! - overwrites the values of the flags that name those paths in the gate's own argument area
//!   (what `/proc/<gate>/cmdline` shows), as `setproctitle` does: `--out ********`;
//! - makes the gate not dumpable (`PR_SET_DUMPABLE` 0): `/proc/<gate>/cwd`, `fd/`, `environ`,
//!   `maps` and `mem` are then readable only with `CAP_SYS_PTRACE`, not by a process of the
//!   same user. The supervisor does the same for itself.
//!
//! What it cannot hide, and docs/security.md says so: a root engine (or one of a root gate)
//! reads everything; the shell that started the gate and other processes of the user keep
//! their own `/proc` entries; a default path (`infergate-results` in the workspace) is a guess
//! away. The engine's own working directory is a fresh private one
//! ([`super::EngineProcess::spawn`]) unless the config sets `[engine] workdir`.

/// The flags whose values are paths the engine must not learn.
pub const CONCEALED_FLAGS: &[&str] = &["--out", "--baseline-dir", "--config"];

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

/// `PR_SET_DUMPABLE` 0 for this process (see the module docs).
#[cfg(target_os = "linux")]
pub(crate) fn not_dumpable() {
    // SAFETY: prctl(2) with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// The start and end of this process's argument area (`/proc/self/stat` fields 48 and 49).
#[cfg(target_os = "linux")]
fn argument_area() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which ends at the last `)`: field 3 is the first.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let start: usize = fields.get(48 - 3)?.parse().ok()?;
    let end: usize = fields.get(49 - 3)?.parse().ok()?;
    (start > 0 && end > start && end - start <= 4 << 20).then_some((start, end))
}

/// Overwrites with `*` the value after each of `flags` (`--flag VALUE` and `--flag=VALUE`) in
/// this process's argument area, so `/proc/<pid>/cmdline` no longer shows it. Arguments
/// already parsed are copies and keep their values.
#[cfg(target_os = "linux")]
fn scrub_own_arguments(flags: &[&str]) {
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
