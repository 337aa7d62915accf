//! The engine's own user and its own view of the filesystem (`[engine] isolation`), set up by
//! the supervisor in the forked engine process before it executes the engine:
//!
//! - **a mount namespace** in which the gate's output directory and baseline store are covered
//!   by an empty, read-only tmpfs: the engine sees an empty directory at their paths and
//!   cannot write there, whatever path it knows or guesses. Root gets one directly
//!   (`unshare(CLONE_NEWNS)`); any other user inside a user namespace of its own that maps
//!   only its own uid and gid (`unshare(CLONE_NEWUSER | CLONE_NEWNS)`), so the engine keeps
//!   its identity and has no capability after `exec`. Mount propagation is made private
//!   first, so nothing reaches the gate's namespace;
//! - **another user** when the gate is root: the engine runs as uid/gid 65534 (nobody,
//!   nogroup) or the configured pair, with no supplementary groups and `no_new_privs`, so
//!   `/proc/<gate>/` (other than the world-readable `cmdline` and `stat`) is closed to it and
//!   root's files are reached only where their mode lets everyone.
//!
//! Each step that fails in the child (a host that refuses user namespaces, a container
//! without `CAP_SYS_ADMIN`) is written to a status pipe before the spawn fails; the supervisor
//! then starts the engine again without that step and says so ([`Outcome::describe`], which
//! ends up in `engine.containment`).

use std::path::PathBuf;

use infergate_config::config::EngineIsolation;

/// What the supervisor is asked to set up for one engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationPlan {
    /// `[engine] isolation`.
    pub isolation: EngineIsolation,
    /// Directories to cover (absolute, existing; the gate's outputs and store).
    pub cover: Vec<PathBuf>,
    /// Keep the supervisor's user even under root (a `bisect` build, which writes the
    /// checkout): the mount namespace alone.
    pub keep_user: bool,
}

/// A confinement step done in the forked child before `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `unshare` of the mount (and user) namespace.
    Unshare = 1,
    /// Writing `setgroups`, `uid_map`, `gid_map` of the new user namespace.
    IdMap = 2,
    /// Making every mount private (no propagation to the gate's namespace).
    Private = 3,
    /// Mounting the empty tmpfs over a directory.
    Cover = 4,
    /// `setgroups`, `setgid`, `setuid`, `no_new_privs`.
    User = 5,
}

impl Step {
    fn from_code(c: u32) -> Option<Step> {
        Some(match c {
            1 => Step::Unshare,
            2 => Step::IdMap,
            3 => Step::Private,
            4 => Step::Cover,
            5 => Step::User,
            _ => return None,
        })
    }

    /// Whether the step belongs to the mount namespace (else to the user).
    pub(crate) fn is_mounts(self) -> bool {
        self != Step::User
    }

    fn what(self) -> &'static str {
        match self {
            Step::Unshare => "unshare",
            Step::IdMap => "uid_map/gid_map",
            Step::Private => "making mounts private",
            Step::Cover => "mounting tmpfs",
            Step::User => "setuid/setgid",
        }
    }

    /// `<step>: <errno text>`.
    pub(crate) fn why(self, errno: i32) -> String {
        format!(
            "{}: {}",
            self.what(),
            std::io::Error::from_raw_os_error(errno)
        )
    }
}

/// Parses the 8-byte record the child writes on a failed step.
pub(crate) fn parse_record(b: &[u8]) -> Option<(Step, i32)> {
    let step = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
    let errno = i32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
    Some((Step::from_code(step)?, errno))
}

/// The mount namespace route taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MountRoute {
    /// A mount namespace of root's.
    Root,
    /// A user namespace mapping only the gate's uid and gid, with a mount namespace.
    UserNs,
}

/// What held for one engine, described for `engine.containment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// `[engine] isolation = "off"`.
    pub(crate) off: bool,
    /// Whether the supervisor runs as root.
    pub(crate) root: bool,
    /// The uid/gid the engine runs as (`Ok(None)`: the gate's, not asked), or why the drop
    /// failed.
    pub(crate) user: Result<Option<(u32, u32)>, String>,
    /// The mount route that held (`Ok(None)`: nothing to cover), or why it failed.
    pub(crate) mounts: Result<Option<MountRoute>, String>,
    /// How many directories are covered.
    pub(crate) covered: usize,
}

impl Outcome {
    /// `<user>; <filesystem>` in words, e.g. `uid 65534 gid 65534; mount namespace covers 2
    /// directories` (see docs/security.md).
    pub(crate) fn describe(&self) -> String {
        if self.off {
            return "user: the gate's (isolation off); mount namespace: off (isolation off)".into();
        }
        let user = match &self.user {
            Ok(Some((u, g))) => format!("uid {u} gid {g}"),
            Ok(None) if self.root => "user: root (no uid asked)".into(),
            Ok(None) => "user: the gate's (not root)".into(),
            Err(why) => format!("user: the gate's (root; {why})"),
        };
        let n = self.covered;
        let dirs = if n == 1 { "directory" } else { "directories" };
        let files = match &self.mounts {
            Ok(Some(MountRoute::Root)) => format!("mount namespace covers {n} {dirs}"),
            Ok(Some(MountRoute::UserNs)) => {
                format!("user and mount namespace cover {n} {dirs}")
            }
            Ok(None) => "mount namespace: nothing to cover".into(),
            Err(why) => format!("mount namespace: unavailable ({why})"),
        };
        format!("{user}; {files}")
    }
}

#[cfg(target_os = "linux")]
pub(crate) use linux::{Attempt, cloexec_pipe, install};

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::{MountRoute, Step};

    /// One try at starting the engine: what to set up.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Attempt {
        /// Drop to this uid/gid (root only).
        pub(crate) user: Option<(u32, u32)>,
        /// Cover these directories in a new mount namespace, by this route.
        pub(crate) mounts: Option<(MountRoute, Vec<std::path::PathBuf>)>,
    }

    /// A pipe (read end, write end), both ends close-on-exec.
    pub(crate) fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills the two descriptors, which are then owned here alone.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
        }
    }

    /// Writes `data` to `path` (open, write, close: async-signal-safe).
    ///
    /// # Safety
    /// Called only in the forked child before exec.
    unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
        // SAFETY: plain syscalls on a NUL-terminated path and a live buffer.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return false;
            }
            let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
            libc::close(fd);
            ok
        }
    }

    /// Sets `cmd` up to do `attempt` in the child before exec. Returns the read end of the
    /// status pipe (non-blocking): after the spawn, it holds a failed step's record or
    /// nothing. Everything the child needs is prepared here; the child only makes syscalls.
    pub(crate) fn install(cmd: &mut Command, attempt: &Attempt) -> std::io::Result<OwnedFd> {
        let (read, write) = cloexec_pipe()?;
        // SAFETY: fcntl on a descriptor owned above.
        if unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let uid_map = format!("{uid} {uid} 1\n").into_bytes();
        let gid_map = format!("{gid} {gid} 1\n").into_bytes();
        let (route, dirs) = match &attempt.mounts {
            Some((route, dirs)) => (
                Some(*route),
                dirs.iter()
                    .filter_map(|d| CString::new(d.as_os_str().as_bytes()).ok())
                    .collect::<Vec<_>>(),
            ),
            None => (None, Vec::new()),
        };
        let user = attempt.user;
        // Kept open in the closure (and so in this process) for the child; closed when the
        // command is dropped, after the spawn.
        let status = write;
        // SAFETY: the closure runs in the forked child before exec. It only makes syscalls
        // (unshare, open/write/close, mount, setgroups/setgid/setuid, prctl) on data prepared
        // above; it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                let fd = status.as_raw_fd();
                let fail = |step: Step| -> std::io::Error {
                    let errno = *libc::__errno_location();
                    let mut rec = [0u8; 8];
                    rec[..4].copy_from_slice(&(step as u32).to_le_bytes());
                    rec[4..].copy_from_slice(&errno.to_le_bytes());
                    libc::write(fd, rec.as_ptr().cast(), rec.len());
                    std::io::Error::from_raw_os_error(errno)
                };
                if let Some(route) = route {
                    let flags = match route {
                        MountRoute::Root => libc::CLONE_NEWNS,
                        MountRoute::UserNs => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
                    };
                    // The supervisor is not dumpable, and neither is this copy of it until
                    // exec: its /proc/self files belong to root, and an unprivileged user
                    // could not write its own uid_map. Exec resets the flag anyway.
                    if route == MountRoute::UserNs
                        && libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) != 0
                    {
                        return Err(fail(Step::Unshare));
                    }
                    if libc::unshare(flags) != 0 {
                        return Err(fail(Step::Unshare));
                    }
                    if route == MountRoute::UserNs
                        && !(write_file(c"/proc/self/setgroups", b"deny")
                            && write_file(c"/proc/self/uid_map", &uid_map)
                            && write_file(c"/proc/self/gid_map", &gid_map))
                    {
                        return Err(fail(Step::IdMap));
                    }
                    if libc::mount(
                        std::ptr::null(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    {
                        return Err(fail(Step::Private));
                    }
                    for d in &dirs {
                        if libc::mount(
                            c"tmpfs".as_ptr(),
                            d.as_ptr(),
                            c"tmpfs".as_ptr(),
                            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                            c"size=4k,mode=0555".as_ptr().cast(),
                        ) != 0
                        {
                            return Err(fail(Step::Cover));
                        }
                    }
                }
                if let Some((u, g)) = user {
                    let groups = [g];
                    if libc::setgroups(1, groups.as_ptr()) != 0
                        || libc::setgid(g) != 0
                        || libc::setuid(u) != 0
                        || libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    {
                        return Err(fail(Step::User));
                    }
                }
                Ok(())
            });
        }
        Ok(read)
    }
}

/// The failed step recorded on the status pipe `fd` (after the spawn), if any.
#[cfg(target_os = "linux")]
pub(crate) fn failed_step(fd: &std::os::fd::OwnedFd) -> Option<(Step, i32)> {
    use std::io::Read;
    let mut buf = [0u8; 8];
    let n = std::fs::File::from(fd.try_clone().ok()?)
        .read(&mut buf)
        .ok()?;
    parse_record(&buf[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_record_round_trips_and_garbage_is_none() {
        let mut b = Vec::new();
        b.extend_from_slice(&(Step::Cover as u32).to_le_bytes());
        b.extend_from_slice(&libc::EPERM.to_le_bytes());
        assert_eq!(parse_record(&b), Some((Step::Cover, libc::EPERM)));
        assert_eq!(parse_record(&b[..5]), None);
        assert_eq!(parse_record(&[9, 0, 0, 0, 1, 0, 0, 0]), None);
        assert!(Step::Unshare.is_mounts() && !Step::User.is_mounts());
        assert!(
            Step::Unshare
                .why(libc::EPERM)
                .starts_with("unshare: Operation not permitted")
        );
    }

    #[test]
    fn the_description_says_what_held_and_why_not() {
        let o = Outcome {
            off: false,
            root: true,
            user: Ok(Some((65534, 65534))),
            mounts: Ok(Some(MountRoute::Root)),
            covered: 2,
        };
        assert_eq!(
            o.describe(),
            "uid 65534 gid 65534; mount namespace covers 2 directories"
        );
        let o = Outcome {
            root: false,
            user: Ok(None),
            mounts: Ok(Some(MountRoute::UserNs)),
            covered: 1,
            ..o
        };
        assert_eq!(
            o.describe(),
            "user: the gate's (not root); user and mount namespace cover 1 directory"
        );
        let o = Outcome {
            mounts: Err(Step::Unshare.why(libc::EPERM)),
            ..o
        };
        assert!(
            o.describe().ends_with(
                "mount namespace: unavailable (unshare: Operation not permitted (os error 1))"
            ),
            "{}",
            o.describe()
        );
        let o = Outcome {
            root: true,
            user: Err(Step::User.why(libc::EPERM)),
            mounts: Ok(None),
            ..o
        };
        assert!(
            o.describe()
                .starts_with("user: the gate's (root; setuid/setgid:")
        );
        assert!(o.describe().ends_with("mount namespace: nothing to cover"));
        let off = Outcome { off: true, ..o };
        assert!(off.describe().contains("isolation off"));
    }
}
