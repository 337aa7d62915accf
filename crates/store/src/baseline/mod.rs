//! The baseline store: accepted runs on disk, one file per run, grouped by profile key and suite.
//!
//! Layout: `<dir>/<profile key>/<suite or "adhoc">/runs/<run_id>-<hash8>.json`, plus
//! `<dir>/<profile key>/profile.json` describing the key's parts for people, and the marker
//! `<dir>/infergate-store.json` ([`STORE_MARKER`]) that makes the root recognisable.
//!
//! Why a marker: a store path that points one level too deep (a profile directory) or at an
//! unrelated directory used to read as "no baseline yet", and the gate passed. Every reader
//! opens the store with [`BaselineStore::open_existing`], which refuses a directory that is not
//! a store root, naming the likely root. A store written before the marker existed (no marker,
//! but `<key>/<suite>/runs/` directories) is still recognised, and gets its marker with its next
//! [`add`](BaselineStore::add). The marker itself is validated (a regular file, the `store`
//! and `layout` infergate writes): a forged or broken one is [`BaselineError::BadMarker`], for
//! readers and writers alike, never a store with no baseline.
//!
//! Why this shape: parallel nightly jobs each add a file with a unique name, so there is no
//! shared index to merge or lock; every write is a temp file in the same directory, fsynced and
//! renamed, so a killed `baseline add` leaves either the old or the new state, never half a file.
//! Readers skip temp files. The gate fails closed on the rest: [`BaselineStore::load`] refuses
//! a group with any file it cannot use (unreadable, corrupt, a schema version outside the
//! supported range, another profile, an unacceptable run), naming every such file, because a
//! comparison against the part of a history that happens to parse is not the comparison the
//! user asked for; [`BaselineStore::scan`] lists them instead, for `baseline list` and `show`.
//! A run counts once: [`add`](BaselineStore::add) refuses a run whose id or content digest is
//! already in the group, and loading counts duplicates once. Every path part goes through
//! [`path_safe`](infergate_schema::results::path_safe) and the final path is checked to lie under the root.

pub(crate) mod accepted;
pub use accepted::{AcceptedChange, CurrentBaseline};
pub mod history;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use infergate_schema::results::{CellStatus, ProfileKey, RunResults, RunStatus, path_safe};

/// Suite directory name for runs without a suite (ad hoc `bench` runs).
pub const ADHOC_SUITE: &str = "adhoc";

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum BaselineError {
    /// A filesystem operation failed.
    #[error("baseline store: {action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The run is not fit to be a baseline (partial, cancelled, nothing measured).
    #[error("run `{run_id}` is not accepted as a baseline: {reason}")]
    Rejected { run_id: String, reason: String },
    /// A computed path would leave the store directory.
    #[error("baseline store: path `{0}` would leave the store directory; refusing")]
    Escape(PathBuf),
    /// A file could not be serialised (should not happen for valid runs).
    #[error("baseline store: cannot serialise run `{run_id}`: {message}")]
    Serialize { run_id: String, message: String },
    /// Run files of the group cannot be used; nothing is compared against a store that is
    /// only partly readable.
    #[error(
        "baseline store {dir}: {} cannot be used: {}; fix or remove {them} (e.g. restore {them} with git), then run again",
        infergate_schema::answer::plural(files.len(), "run file"),
        describe_files(files),
        them = if files.len() == 1 { "it" } else { "them" }
    )]
    Unreadable {
        dir: PathBuf,
        files: Vec<(PathBuf, String)>,
    },
    /// The directory exists but is not a store root (no marker, no `<key>/<suite>/runs/`).
    #[error(
        "baseline store {}: not an infergate baseline store root (no {STORE_MARKER} and no <profile key>/<suite>/runs/ directory){}",
        dir.display(),
        hint.as_ref().map(|h| format!("; {h}")).unwrap_or_else(|| "; point the store path (--baseline-dir, --baseline, [baseline] dir, --dir) at the directory that holds the profile directories, or create the store with `infergate baseline add` or `infergate run --update-baseline`".into())
    )]
    NotAStore { dir: PathBuf, hint: Option<String> },
    /// The store's marker ([`STORE_MARKER`]) is not the one infergate writes: the directory
    /// is not read as a store (and never as an empty one).
    #[error(
        "baseline store marker {}: {problem}; a store marker is the regular file infergate writes, {{\"store\": \"{MARKER_STORE}\", \"layout\": {LAYOUT}}}: restore it (e.g. `git checkout -- {}`), or remove it if {} is not a baseline store",
        path.display(),
        path.display(),
        path.parent().map(|p| p.display().to_string()).unwrap_or_default()
    )]
    BadMarker { path: PathBuf, problem: String },
    /// The store's lock stayed held past the deadline ([`lock_deadline`]).
    #[error(
        "baseline store {}: its lock (flock on {}) is held by {}; gave up after {waited_s} s ({LOCK_DEADLINE_ENV}, default {DEFAULT_LOCK_DEADLINE_S} s). Wait for that process to finish (another `baseline add`, `baseline accept` or `run --update-baseline` on this store) or stop it, then run again",
        path.parent().map(|p| p.display().to_string()).unwrap_or_default(),
        path.display(),
        holder.as_deref().unwrap_or("another process")
    )]
    Locked {
        path: PathBuf,
        waited_s: u64,
        /// `pid N (command line)` when `/proc/locks` tells.
        holder: Option<String>,
    },
    /// The run (same id, or the same content under another id) is in the store already.
    #[error(
        "run `{run_id}` is already in the baseline store as {} (same {what}); a run counts once, so it is not added again",
        existing.display()
    )]
    Duplicate {
        run_id: String,
        existing: PathBuf,
        /// `run id` or `content digest`.
        what: &'static str,
    },
}

impl BaselineError {
    /// [`BaselineError::Io`]: `action` on `path` failed with `source`.
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        BaselineError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

fn describe_files(files: &[(PathBuf, String)]) -> String {
    files
        .iter()
        .map(|(p, why)| {
            // A reason that names its file already (a parse error) is not told it twice.
            let path = p.display().to_string();
            let why = why.strip_prefix(&format!("{path}: ")).unwrap_or(why);
            format!("{path} ({why})")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Digest of a run's content without its id: two files with the same digest are the same
/// measurement, whatever they are called.
pub(crate) fn content_digest(run: &RunResults) -> String {
    use sha2::{Digest, Sha256};
    let mut anonymous = run.clone();
    anonymous.run_id.clear();
    let body = serde_json::to_vec(&anonymous).unwrap_or_default();
    hex::encode(Sha256::digest(&body))
}

/// Runs of one profile and suite, and the files that could not be used.
#[derive(Debug, Clone, Default)]
pub struct LoadedBaseline {
    /// Accepted runs, oldest → newest by `started_at`, each counted once.
    pub runs: Vec<RunResults>,
    /// Run files that cannot be used, with the reason (corrupt, wrong profile, ...); always
    /// empty from [`BaselineStore::load`], which refuses such a group.
    pub skipped: Vec<(PathBuf, String)>,
    /// Files holding a run already loaded from another file (same id or content digest),
    /// with the file that counted.
    pub duplicates: Vec<(PathBuf, PathBuf)>,
}

/// What `prune` removed and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Files deleted (oldest runs beyond `keep`).
    pub removed: Vec<PathBuf>,
    /// Number of runs kept across the pruned groups.
    pub kept: usize,
}

/// Outcome of [`BaselineStore::add`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// The new run file.
    pub path: PathBuf,
}

/// File name of a profile directory's description (`<dir>/<profile key>/profile.json`): for
/// people, not a run; readers that walk a store skip it.
pub const PROFILE_FILE: &str = "profile.json";

/// Human-readable description of a profile directory ([`PROFILE_FILE`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProfileDescription {
    key: String,
    profile: ProfileKey,
    matrix_concurrency: Vec<u32>,
    matrix_contexts: Vec<u64>,
    max_tokens: u32,
}

/// File name of the marker at a store's root: what makes a directory recognisable as a store.
pub const STORE_MARKER: &str = "infergate-store.json";

/// The marker's `store` field: what the directory is.
const MARKER_STORE: &str = "infergate baseline store";

/// The store layout this build reads and writes (1: `<key>/<suite>/runs/<run id>-<hash8>.json`).
const LAYOUT: u64 = 1;

/// The marker's content: what the directory is, for people and for [`BaselineStore::open_existing`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoreMarker {
    /// Always [`MARKER_STORE`].
    store: String,
    /// Layout version ([`LAYOUT`]).
    layout: u64,
}

/// Reads and validates the marker of the store at `dir`: `Ok(false)` when there is none, an
/// error naming the file, the field and the fix when it is not what infergate writes (a
/// symbolic link, a directory or another non-regular file, empty, not JSON, another `store`,
/// a `layout` this build does not know).
fn check_marker(dir: &Path) -> Result<bool, BaselineError> {
    let path = dir.join(STORE_MARKER);
    let bad = |problem: String| BaselineError::BadMarker {
        path: path.clone(),
        problem,
    };
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(bad(format!("cannot be read: {e}"))),
    };
    if meta.file_type().is_symlink() {
        return Err(bad("is a symbolic link, not a file".into()));
    }
    let body = infergate_io::fsio::read_bounded(&path, 64 << 10)
        .map_err(|e| bad(format!("cannot be read: {e}")))?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(bad("is empty".into()));
    }
    let value: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| bad(format!("is not JSON ({e})")))?;
    let store = value.get("store").and_then(serde_json::Value::as_str);
    if store != Some(MARKER_STORE) {
        return Err(bad(match value.get("store") {
            None => "has no field `store`".into(),
            Some(v) => format!("field `store` is {v}, not \"{MARKER_STORE}\""),
        }));
    }
    match value.get("layout") {
        Some(v) if v.as_u64() == Some(LAYOUT) => Ok(true),
        None => Err(bad("has no field `layout`".into())),
        Some(v) => Err(bad(format!(
            "field `layout` is {v}; this build of infergate knows layout {LAYOUT} only (a newer infergate may have written it: upgrade)"
        ))),
    }
}

/// The store over one directory (default `baselines/`).
#[derive(Debug, Clone)]
pub struct BaselineStore {
    root: PathBuf,
}

impl BaselineStore {
    /// Opens a store; the directory is created by the first [`add`](Self::add), not here, so
    /// read-only commands never litter the working tree.
    pub fn open(dir: &Path) -> Result<Self, BaselineError> {
        if dir.exists() && !dir.is_dir() {
            let source = std::io::Error::other("not a directory");
            return Err(BaselineError::io("open", dir, source));
        }
        Ok(BaselineStore {
            root: dir.to_path_buf(),
        })
    }

    /// Opens a store that must exist already (every reader: `run`, `compare`, `changes`,
    /// `baseline show/list/prune/accept`): the directory must be a store root
    /// ([`is_store_root`](Self::is_store_root)) or empty (a store with no run yet: nothing in
    /// it can be mistaken for one), else [`BaselineError::NotAStore`] naming the likely root.
    pub fn open_existing(dir: &Path) -> Result<Self, BaselineError> {
        let store = Self::open(dir)?;
        if !dir.exists() {
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory");
            return Err(BaselineError::io("open", dir, source));
        }
        if !Self::is_store_root(dir)? && !is_empty_dir(dir) {
            return Err(BaselineError::NotAStore {
                dir: dir.to_path_buf(),
                hint: likely_root(dir),
            });
        }
        Ok(store)
    }

    /// Whether `dir` is a store root: it holds a valid [`STORE_MARKER`], or (a store written
    /// before the marker) at least one `<key>/<suite>/runs/` directory. A marker that is not
    /// the one infergate writes is an error ([`BaselineError::BadMarker`]), never "no store".
    pub fn is_store_root(dir: &Path) -> Result<bool, BaselineError> {
        if check_marker(dir)? {
            return Ok(true);
        }
        Ok(subdirs(dir).unwrap_or_default().iter().any(|key| {
            subdirs(&dir.join(key))
                .unwrap_or_default()
                .iter()
                .any(|suite| dir.join(key).join(suite).join("runs").is_dir())
        }))
    }

    /// Whether the store holds no run group at all (a new store, or one of dot-files only).
    pub fn holds_no_runs(&self) -> Result<bool, BaselineError> {
        Ok(self.profiles()?.is_empty())
    }

    /// Before a write: the root must be a store, not exist yet, or be empty (a new store);
    /// the marker is written when missing (also migrating a store that predates it).
    fn prepare_root(&self) -> Result<(), BaselineError> {
        let is_store = Self::is_store_root(&self.root)?;
        if !is_empty_dir(&self.root) && !is_store {
            return Err(BaselineError::NotAStore {
                dir: self.root.clone(),
                hint: likely_root(&self.root),
            });
        }
        create_dir(&self.root)?;
        let marker = self.root.join(STORE_MARKER);
        if !check_marker(&self.root)? {
            let body = serde_json::to_vec_pretty(&StoreMarker {
                store: MARKER_STORE.into(),
                layout: LAYOUT,
            })
            .map_err(|e| BaselineError::Serialize {
                run_id: String::new(),
                message: e.to_string(),
            })?;
            write_atomic(&marker, &body)?;
        }
        Ok(())
    }

    /// The store's lock, held by every write (`add`, `accept`, `prune`) while it reads what
    /// it changes and writes: waits at most [`lock_deadline`].
    fn write_lock(&self) -> Result<StoreLock, BaselineError> {
        self.prepare_root()?;
        StoreLock::take(&canonical(&self.root)?.join(STORE_MARKER), lock_deadline())
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `run` may become a baseline; the reason when not.
    pub fn acceptable(run: &RunResults) -> Result<(), String> {
        match run.status {
            RunStatus::Complete => {}
            RunStatus::Partial | RunStatus::Cancelled | RunStatus::InProgress => {
                return Err(format!(
                    "its status is `{}`{}; only complete runs become baselines",
                    run.status.as_str(),
                    run.status_reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ));
            }
        }
        if !run.cells.iter().any(|c| c.status == CellStatus::Ok) {
            return Err("no cell was measured successfully (no `ok` cell)".into());
        }
        implausible_value(run).map_or(Ok(()), Err)
    }

    /// Directory of one profile key + suite (path-safe parts).
    fn group_dir(&self, profile_key: &str, suite: Option<&str>) -> PathBuf {
        self.root
            .join(component(profile_key))
            .join(component(suite.unwrap_or(ADHOC_SUITE)))
            .join("runs")
    }

    /// Adds an accepted run as a new file and returns its path; refuses partial/cancelled runs,
    /// runs with no ok cell, and runs already in the group (same id or content digest).
    pub fn add(&self, run: &RunResults) -> Result<PathBuf, BaselineError> {
        self.add_run(run).map(|a| a.path)
    }

    /// [`add`](Self::add), with the outcome.
    pub fn add_run(&self, run: &RunResults) -> Result<Added, BaselineError> {
        Self::acceptable(run).map_err(|reason| BaselineError::Rejected {
            run_id: run.run_id.clone(),
            reason,
        })?;
        let body = serde_json::to_vec_pretty(run).map_err(|e| BaselineError::Serialize {
            run_id: run.run_id.clone(),
            message: e.to_string(),
        })?;
        self.prepare_root()?;
        let dir = self.group_dir(&run.profile.key, run.suite.as_deref());
        create_dir(&dir)?;
        let root = canonical(&self.root)?;
        let dir_c = canonical(&dir)?;
        if !dir_c.starts_with(&root) {
            return Err(BaselineError::Escape(dir));
        }
        // Two `baseline add`s at once (parallel nightly jobs on one checkout): the duplicate
        // check and the write happen under the store's lock, so the same run under two ids is
        // stored once.
        let _lock = self.write_lock()?;
        // A run counts once: refuse it when the group holds it already (and refuse to add to a
        // group that cannot be read, where that cannot be told).
        let digest = content_digest(run);
        for (path, existing) in self.load_files(&run.profile.key, run.suite.as_deref())? {
            let what = if existing.run_id == run.run_id {
                "run id"
            } else if content_digest(&existing) == digest {
                "content digest"
            } else {
                continue;
            };
            return Err(BaselineError::Duplicate {
                run_id: run.run_id.clone(),
                existing: path,
                what,
            });
        }
        use sha2::{Digest, Sha256};
        let hash = hex::encode(Sha256::digest(&body));
        let name = format!("{}-{}.json", component(&run.run_id), &hash[..8]);
        let path = dir_c.join(&name);
        // The profile description is for people; it is written once and never merged. It is
        // written before the run file, whose rename is the add's last step: an add that fails
        // (a full disk) leaves no run file, so running it again adds the run.
        let profile_dir = dir_c
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_else(|| root.clone());
        let desc_path = profile_dir.join(PROFILE_FILE);
        if !desc_path.exists() {
            let desc = ProfileDescription {
                key: run.profile.key.clone(),
                profile: run.profile.clone(),
                matrix_concurrency: run.matrix.concurrency.clone(),
                matrix_contexts: run.matrix.contexts.clone(),
                max_tokens: run.matrix.timing.max_tokens,
            };
            if let Ok(text) = serde_json::to_vec_pretty(&desc) {
                write_atomic(&desc_path, &text)?;
            }
        }
        write_atomic(&path, &body)?;
        Ok(Added { path })
    }

    /// Run files of one group (temp files and other names ignored), sorted by name.
    fn run_files(
        &self,
        profile_key: &str,
        suite: Option<&str>,
    ) -> Result<Vec<PathBuf>, BaselineError> {
        let mut files: Vec<PathBuf> = dir_entries(&self.group_dir(profile_key, suite))?
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.extension().is_some_and(|x| x == "json")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| !n.starts_with('.'))
            })
            .collect();
        files.sort();
        Ok(files)
    }

    /// Loads the runs of one profile key and suite, oldest → newest by `started_at`, each run
    /// once. Fails closed: any file of the group that cannot be used (corrupt, unreadable,
    /// schema outside the supported range, another profile, not an acceptable run) is an
    /// [`BaselineError::Unreadable`] naming every such file.
    pub fn load(
        &self,
        profile_key: &str,
        suite: Option<&str>,
    ) -> Result<LoadedBaseline, BaselineError> {
        let loaded = self.scan(profile_key, suite)?;
        if !loaded.skipped.is_empty() {
            return Err(BaselineError::Unreadable {
                dir: self.group_dir(profile_key, suite),
                files: loaded.skipped,
            });
        }
        Ok(loaded)
    }

    /// [`load`](Self::load) that lists the files it cannot use in `skipped` instead of
    /// failing: for commands that show a store (`baseline list`, `show`), not for comparing.
    pub fn scan(
        &self,
        profile_key: &str,
        suite: Option<&str>,
    ) -> Result<LoadedBaseline, BaselineError> {
        let mut loaded = LoadedBaseline::default();
        let mut seen: Vec<(String, String, PathBuf)> = Vec::new();
        for path in self.run_files(profile_key, suite)? {
            match crate::import::load_results(&path) {
                Err(e) => loaded.skipped.push((path, e.to_string())),
                Ok(runs) => {
                    for run in runs {
                        if component(&run.profile.key) != component(profile_key) {
                            loaded.skipped.push((
                                path.clone(),
                                format!(
                                    "profile `{}` does not match the directory `{}`",
                                    run.profile.key, profile_key
                                ),
                            ));
                        } else if let Err(reason) = Self::acceptable(&run) {
                            loaded.skipped.push((path.clone(), reason));
                        } else {
                            let digest = content_digest(&run);
                            if let Some((_, _, first)) = seen
                                .iter()
                                .find(|(id, d, _)| *id == run.run_id || *d == digest)
                            {
                                loaded.duplicates.push((path.clone(), first.clone()));
                            } else {
                                seen.push((run.run_id.clone(), digest, path.clone()));
                                loaded.runs.push(run);
                            }
                        }
                    }
                }
            }
        }
        loaded
            .runs
            .sort_by(|a, b| (a.started_at, &a.run_id).cmp(&(b.started_at, &b.run_id)));
        Ok(loaded)
    }

    /// Every run of one group with its file (what `add` checks duplicates against); a file
    /// that cannot be read is an error.
    fn load_files(
        &self,
        profile_key: &str,
        suite: Option<&str>,
    ) -> Result<Vec<(PathBuf, RunResults)>, BaselineError> {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        for path in self.run_files(profile_key, suite)? {
            match crate::import::load_results(&path) {
                Ok(runs) => out.extend(runs.into_iter().map(|r| (path.clone(), r))),
                Err(e) => bad.push((path, e.to_string())),
            }
        }
        if !bad.is_empty() {
            return Err(BaselineError::Unreadable {
                dir: self.group_dir(profile_key, suite),
                files: bad,
            });
        }
        Ok(out)
    }

    /// Profile keys in the store with their suites (directory names), sorted.
    pub fn profiles(&self) -> Result<Vec<(String, Vec<String>)>, BaselineError> {
        let mut out = Vec::new();
        for key in subdirs(&self.root)? {
            let suites = subdirs(&self.root.join(&key))?
                .into_iter()
                .filter(|s| self.root.join(&key).join(s).join("runs").is_dir())
                .collect::<Vec<_>>();
            if !suites.is_empty() {
                out.push((key, suites));
            }
        }
        Ok(out)
    }

    /// The (profile key, suite) groups of the store, sorted, kept to those matching the
    /// profile and suite a user named (compared as the path components they are stored under).
    pub fn groups(
        &self,
        profile: Option<&str>,
        suite: Option<&str>,
    ) -> Result<Vec<(String, String)>, BaselineError> {
        let (profile, suite) = (profile.map(component), suite.map(component));
        let mut out = Vec::new();
        for (key, suites) in self.profiles()? {
            if profile.as_ref().is_some_and(|p| *p != key) {
                continue;
            }
            for s in suites {
                if suite.as_ref().is_none_or(|want| *want == s) {
                    out.push((key.clone(), s));
                }
            }
        }
        Ok(out)
    }

    /// How `candidate` differs from each profile the store holds, one line per stored profile
    /// (`<key>: hardware cpu-a vs cpu-b, model x vs y`), read from the profile descriptions;
    /// for the message of a gate that found no baseline.
    pub fn profile_differences(&self, candidate: &ProfileKey) -> Vec<String> {
        let mut out = Vec::new();
        for (key, suites) in self.profiles().unwrap_or_default() {
            let desc: Option<ProfileDescription> =
                infergate_io::fsio::read_bounded(&self.root.join(&key).join(PROFILE_FILE), 1 << 20)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
            let diffs = match desc {
                None => vec!["(no profile.json to compare with)".to_string()],
                Some(d) => {
                    let p = &d.profile;
                    let hw = |h: &infergate_schema::results::HardwareFingerprint| {
                        format!(
                            "{} {}x{} cpu {}",
                            h.kind,
                            h.gpu_model.as_deref().unwrap_or("-"),
                            h.gpu_count,
                            h.cpu_model.as_deref().unwrap_or("-")
                        )
                    };
                    let mut v = Vec::new();
                    let mut diff = |what: &str, stored: String, here: String| {
                        if stored != here {
                            v.push(format!("{what} `{stored}` (store) vs `{here}` (this run)"));
                        }
                    };
                    diff("hardware", hw(&p.hardware), hw(&candidate.hardware));
                    diff("engine", p.engine.clone(), candidate.engine.clone());
                    diff("model", p.model.clone(), candidate.model.clone());
                    diff(
                        "matrix (concurrency, contexts, max_tokens)",
                        p.matrix_hash.chars().take(12).collect(),
                        candidate.matrix_hash.chars().take(12).collect(),
                    );
                    if v.is_empty() {
                        v.push("same profile".into());
                    }
                    v
                }
            };
            out.push(format!(
                "`{key}` (suites {}): {}",
                suites.join(", "),
                diffs.join(", ")
            ));
        }
        out
    }

    /// Deletes all but the newest `keep` runs (by `started_at`) in each selected group. Corrupt
    /// files are left for a person to look at.
    pub fn prune(
        &self,
        profile_key: Option<&str>,
        suite: Option<&str>,
        keep: usize,
    ) -> Result<PruneReport, BaselineError> {
        let _lock = self.write_lock()?;
        let mut report = PruneReport::default();
        for (key, s) in self.groups(profile_key, suite)? {
            let mut dated = Vec::new();
            for path in self.run_files(&key, Some(&s))? {
                if let Ok(mut runs) = crate::import::load_results(&path)
                    && let Some(run) = runs.pop()
                {
                    dated.push((run.started_at, run.run_id, path));
                }
            }
            dated.sort();
            let drop = dated.len().saturating_sub(keep);
            for (_, _, path) in dated.drain(..drop) {
                std::fs::remove_file(&path)
                    .map_err(|source| BaselineError::io("remove", &path, source))?;
                report.removed.push(path);
            }
            report.kept += dated.len();
        }
        Ok(report)
    }
}

/// A single safe path component for `name`: kept as is when it already is one (profile keys
/// are built path-safe, with `__` separators [`path_safe`] would fold), else [`path_safe`].
pub fn component(name: &str) -> String {
    let safe = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if safe {
        name.to_string()
    } else {
        path_safe(name)
    }
}

/// Aggregate throughputs a measurement can give, tok/s: below, a cell that streamed nothing
/// worth a number (`5e-324`); above, a million times any machine built so far (`1e308`).
/// Such a value is no measurement, and the statistics and charts of a history holding one
/// would be overflow and noise, so a run holding one is refused as a baseline.
pub(crate) const PLAUSIBLE_TPS: std::ops::RangeInclusive<f64> = 1e-6..=1e9;

/// Why a run's numbers cannot be a measurement, if they cannot: an `ok` cell whose aggregate
/// throughput is outside [`PLAUSIBLE_TPS`] or whose window samples are not finite and within it
/// (0 allowed: a window without a token).
pub(crate) fn implausible_value(run: &RunResults) -> Option<String> {
    let (lo, hi) = (*PLAUSIBLE_TPS.start(), *PLAUSIBLE_TPS.end());
    for c in run.cells.iter().filter(|c| c.status == CellStatus::Ok) {
        let bad_sample = c
            .samples
            .iter()
            .find(|s| !(s.is_finite() && **s >= 0.0 && **s <= hi));
        if !PLAUSIBLE_TPS.contains(&c.aggregate_tps) || bad_sample.is_some() {
            let (what, v) = match bad_sample {
                Some(s) if PLAUSIBLE_TPS.contains(&c.aggregate_tps) => ("a window sample", *s),
                _ => ("aggregate_tps", c.aggregate_tps),
            };
            return Some(format!(
                "cell C={} context={}: {what} = {v:e} tok/s is not a throughput a measurement gives (expected {lo:e} to {hi:e}); the file is corrupt or forged",
                c.concurrency, c.context_tokens
            ));
        }
    }
    None
}

/// Whether `dir` holds nothing but hidden entries (`.gitkeep`), or does not exist.
fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |entries| {
        entries
            .filter_map(Result::ok)
            .all(|e| e.file_name().to_str().is_some_and(|n| n.starts_with('.')))
    })
}

/// Where the store root probably is when `dir` is not one: `dir` is a profile directory
/// (`profile.json`, or `<suite>/runs/`), a suite directory (`runs/`) or a `runs` directory.
fn likely_root(dir: &Path) -> Option<String> {
    let abs = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let up = |n: usize| {
        let mut p = abs.as_path();
        for _ in 0..n {
            p = p.parent()?;
        }
        Some(p.to_path_buf())
    };
    let has_suite_runs = subdirs(dir)
        .unwrap_or_default()
        .iter()
        .any(|s| dir.join(s).join("runs").is_dir());
    let (what, levels) = if dir.join(PROFILE_FILE).is_file() || has_suite_runs {
        ("a profile directory", 1)
    } else if dir.join("runs").is_dir() {
        ("a suite directory", 2)
    } else if abs.file_name().is_some_and(|n| n == "runs") {
        ("a directory of run files", 3)
    } else {
        return None;
    };
    let root = up(levels)?;
    Some(format!(
        "it looks like {what} of the store {}: pass that directory instead",
        root.display()
    ))
}

/// The entries of `dir` that could be read (none when it does not exist).
fn dir_entries(dir: &Path) -> Result<impl Iterator<Item = std::fs::DirEntry>, BaselineError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => Some(e),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(BaselineError::io("read", dir, source)),
    };
    Ok(entries.into_iter().flatten().filter_map(Result::ok))
}

/// Sorted names of the subdirectories of `dir` (none when it does not exist).
fn subdirs(dir: &Path) -> Result<Vec<String>, BaselineError> {
    let mut names: Vec<String> = dir_entries(dir)?
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    Ok(names)
}

/// The environment variable that sets how long a store write waits for the store's lock, in
/// seconds (default [`DEFAULT_LOCK_DEADLINE_S`]).
pub(crate) const LOCK_DEADLINE_ENV: &str = "INFERGATE_STORE_LOCK_TIMEOUT_S";

/// How long a store write waits for the store's lock by default: a `baseline add` takes well
/// under a second, so a minute is another process stuck, not one at work.
pub(crate) const DEFAULT_LOCK_DEADLINE_S: u64 = 60;

/// How long a store write waits for the lock: [`LOCK_DEADLINE_ENV`] when it is a number of
/// seconds, else [`DEFAULT_LOCK_DEADLINE_S`].
fn lock_deadline() -> std::time::Duration {
    let s = std::env::var(LOCK_DEADLINE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_LOCK_DEADLINE_S);
    std::time::Duration::from_secs(s)
}

/// An exclusive `flock` on the store's marker file ([`STORE_MARKER`]), held while the guard
/// lives; released by the kernel if the process dies. No file of its own, so nothing is left.
struct StoreLock {
    /// The locked file; closing it releases the lock.
    _file: std::fs::File,
}

impl StoreLock {
    /// Takes the lock, waiting at most `deadline`; past it, [`BaselineError::Locked`] names the
    /// lock file and who holds it when `/proc/locks` tells.
    fn take(marker: &Path, deadline: std::time::Duration) -> Result<StoreLock, BaselineError> {
        use std::os::fd::AsRawFd;
        let io = |source| BaselineError::io("lock", marker, source);
        let file = std::fs::File::open(marker).map_err(io)?;
        let started = std::time::Instant::now();
        loop {
            // SAFETY: flock(2) on a file descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(StoreLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock if started.elapsed() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                std::io::ErrorKind::WouldBlock => {
                    return Err(BaselineError::Locked {
                        path: marker.to_path_buf(),
                        waited_s: started.elapsed().as_secs(),
                        holder: file.metadata().ok().and_then(|m| lock_holder(&m)),
                    });
                }
                _ => return Err(io(e)),
            }
        }
    }
}

/// Who holds a `flock` on the file of `meta`, from `/proc/locks` (`N: FLOCK ADVISORY WRITE
/// <pid> <major>:<minor>:<inode> 0 EOF`, device numbers in hex): `pid N (command line)`.
///
/// `/proc/locks` names the device of the filesystem that holds the inode, which is not always the
/// one `stat` reports (overlayfs, btrfs subvolumes). So a holder whose device differs counts when
/// the inode number agrees and that process has this very file open (`/proc/<pid>/fd`); where that
/// leaves more than one process, none is named rather than a wrong one.
fn lock_holder(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino) = (meta.dev(), meta.ino());
    let has_open = |pid: &str| {
        std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
            fds.flatten().any(|fd| {
                std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino)
            })
        })
    };
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = flock_holder_pid(&locks, dev, ino, has_open)?;
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|c| {
            String::from_utf8_lossy(&c)
                .split('\0')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|c| !c.is_empty());
    Some(match command {
        Some(c) => format!("pid {pid} ({})", c.chars().take(120).collect::<String>()),
        None => format!("pid {pid}"),
    })
}

/// The pid of [`lock_holder`]'s holder in the text of `/proc/locks`; `has_open` tells whether a
/// process has the file open.
fn flock_holder_pid(
    locks: &str,
    dev: u64,
    ino: u64,
    has_open: impl Fn(&str) -> bool,
) -> Option<String> {
    let file_id = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let ino = ino.to_string();
    // Waiters are listed as `N: -> FLOCK ...`; a holder's line has no arrow.
    let holders: Vec<(&str, &str)> = locks
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.get(1) != Some(&"FLOCK") {
                return None;
            }
            Some((*words.get(4)?, *words.get(5)?))
        })
        .collect();
    if let Some((pid, _)) = holders.iter().find(|(_, id)| *id == file_id) {
        return Some(pid.to_string());
    }
    let mut pids: Vec<&str> = holders
        .iter()
        .filter(|(_, id)| id.rsplit(':').next() == Some(ino.as_str()))
        .map(|(pid, _)| *pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids.retain(|pid| has_open(pid));
    match pids[..] {
        [pid] => Some(pid.to_string()),
        _ => None,
    }
}

fn create_dir(dir: &Path) -> Result<(), BaselineError> {
    std::fs::create_dir_all(dir).map_err(|source| BaselineError::io("create", dir, source))
}

fn canonical(p: &Path) -> Result<PathBuf, BaselineError> {
    p.canonicalize()
        .map_err(|source| BaselineError::io("resolve", p, source))
}

#[cfg(test)]
thread_local! {
    /// Tests: the file name whose write fails with ENOSPC (a full disk), simulated.
    static FAIL_WRITE_OF: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Writes `body` to `path` durably ([`infergate_io::fsio::write_durable`]), naming the path on error.
fn write_atomic(path: &Path, body: &[u8]) -> Result<(), BaselineError> {
    #[cfg(test)]
    {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let fail = FAIL_WRITE_OF.with(|f| f.borrow().as_deref().is_some_and(|w| name.contains(w)));
        if fail {
            let source = std::io::Error::from_raw_os_error(libc::ENOSPC);
            return Err(BaselineError::io("write", path, source));
        }
    }
    infergate_io::fsio::write_durable(path, body)
        .map_err(|source| BaselineError::io("write", path, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture::seed_run;
    use infergate_schema::asserts::assert_contains;

    fn variant(base: &RunResults, i: i64) -> RunResults {
        let mut r = base.clone();
        r.run_id = format!("run-{i:02}");
        r.started_at += chrono::Duration::hours(i);
        r.cells[0].aggregate_tps += i as f64 * 0.1;
        r
    }

    /// Asserts `err` refuses a run already in the store, found by its `what`.
    #[track_caller]
    fn assert_duplicate(err: BaselineError, what: &str) {
        let found = matches!(&err, BaselineError::Duplicate { what: w, .. } if *w == what);
        assert!(found, "{err}");
    }

    #[test]
    fn add_load_prune_round_trip_with_corrupt_and_temp_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("b");
        let store = BaselineStore::open(&root).unwrap();
        assert!(!root.exists(), "open must not create");
        let base = seed_run();
        // Add out of order: load sorts by started_at.
        for i in [3, 1, 2] {
            store.add_run(&variant(&base, i)).unwrap();
        }
        // A run counts once: the same run again, or its content under another id, is refused.
        assert_duplicate(store.add_run(&variant(&base, 1)).unwrap_err(), "run id");
        let mut renamed = variant(&base, 2);
        renamed.run_id = "run-renamed".into();
        assert_duplicate(store.add_run(&renamed).unwrap_err(), "content digest");
        let key = base.profile.key.clone();
        let dir = store.group_dir(&key, None);
        std::fs::write(
            dir.join("zz-corrupt.json"),
            "{\"schema_version\": 1, \"tool\"",
        )
        .unwrap();
        std::fs::write(dir.join(".tmpabc.partial"), "{\"half").unwrap();
        // Comparing fails closed on the corrupt file, naming it; listing shows it.
        let err = store.load(&key, None).unwrap_err();
        assert!(
            matches!(&err, BaselineError::Unreadable { files, .. } if files.len() == 1),
            "{err}"
        );
        let msg = err.to_string();
        assert_contains(&msg, "zz-corrupt.json");
        assert_contains(&msg, "truncated");
        let loaded = store.scan(&key, None).unwrap();
        let ids: Vec<_> = loaded.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["run-01", "run-02", "run-03"]);
        assert_eq!(loaded.skipped.len(), 1);
        // A copy of a stored file under another name counts once.
        let first = store.run_files(&key, None).unwrap()[0].clone();
        std::fs::copy(&first, dir.join("copy-of-first.json")).unwrap();
        std::fs::remove_file(dir.join("zz-corrupt.json")).unwrap();
        let loaded = store.load(&key, None).unwrap();
        assert_eq!(loaded.runs.len(), 3);
        assert_eq!(loaded.duplicates.len(), 1, "{:?}", loaded.duplicates);
        std::fs::remove_file(dir.join("copy-of-first.json")).unwrap();
        assert_eq!(
            store.profiles().unwrap(),
            vec![(key.clone(), vec!["adhoc".to_string()])]
        );
        assert!(root.join(&key).join("profile.json").is_file());
        let pruned = store.prune(None, None, 2).unwrap();
        assert_eq!(pruned.removed.len(), 1);
        assert_eq!(pruned.kept, 2);
        let loaded = store.load(&key, None).unwrap();
        let ids: Vec<_> = loaded.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["run-02", "run-03"]);
    }

    #[test]
    fn refuses_partial_runs_and_runs_without_ok_cells() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BaselineStore::open(tmp.path()).unwrap();
        let mut partial = seed_run();
        partial.status = RunStatus::Partial;
        partial.status_reason = Some("engine died".into());
        let err = store.add(&partial).unwrap_err().to_string();
        assert_contains(&err, "`partial` (engine died)");
        let mut none_ok = seed_run();
        for c in &mut none_ok.cells {
            c.status = CellStatus::Error;
        }
        let err = store.add(&none_ok).unwrap_err().to_string();
        assert_contains(&err, "no `ok` cell");
    }

    #[test]
    fn the_marker_is_validated_field_by_field() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!check_marker(tmp.path()).unwrap(), "no marker: none");
        let marker = tmp.path().join(STORE_MARKER);
        for (body, problem) in [
            ("", "is empty"),
            ("[1]", "has no field `store`"),
            (
                "{\"store\": \"infergate baseline store\"}",
                "has no field `layout`",
            ),
            (
                "{\"store\": \"infergate baseline store\", \"layout\": \"1\"}",
                "field `layout` is \"1\"",
            ),
        ] {
            std::fs::write(&marker, body).unwrap();
            let e = check_marker(tmp.path()).unwrap_err().to_string();
            assert!(e.contains(problem), "{body}: {e}");
        }
        std::fs::write(
            &marker,
            "{\"store\": \"infergate baseline store\", \"layout\": 1}",
        )
        .unwrap();
        assert!(check_marker(tmp.path()).unwrap());
    }

    #[test]
    fn a_failed_add_leaves_no_run_file_and_a_retry_adds_the_run() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BaselineStore::open(&tmp.path().join("b")).unwrap();
        let run = seed_run();
        for failing in ["profile.json", "run-"] {
            let mut run = run.clone();
            run.run_id = format!("{failing}x");
            FAIL_WRITE_OF.with(|f| *f.borrow_mut() = Some(failing.to_string()));
            let err = store.add_run(&run).unwrap_err().to_string();
            FAIL_WRITE_OF.with(|f| *f.borrow_mut() = None);
            assert_contains(&err, "No space left on device");
            assert!(
                store.run_files(&run.profile.key, None).unwrap().is_empty(),
                "{failing}: a failed add left a run file"
            );
            let added = store.add_run(&run).unwrap();
            assert!(added.path.is_file());
            std::fs::remove_file(&added.path).unwrap();
        }
        let leftovers: Vec<_> = std::fs::read_dir(store.group_dir(&run.profile.key, None))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_held_lock_is_given_up_at_the_deadline_naming_the_lock_file_and_its_holder() {
        use std::os::fd::AsRawFd;
        let tmp = tempfile::tempdir().unwrap();
        let marker = tmp.path().join(STORE_MARKER);
        std::fs::write(&marker, "{}").unwrap();
        // flock locks belong to the open file: a second open in this process conflicts.
        let holder = std::fs::File::open(&marker).unwrap();
        // SAFETY: flock(2) on a file descriptor this test owns.
        assert_eq!(
            unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        let err = StoreLock::take(&marker, std::time::Duration::ZERO)
            .err()
            .expect("the lock is held");
        let msg = err.to_string();
        assert!(matches!(err, BaselineError::Locked { .. }), "{msg}");
        assert_contains(&msg, &format!("flock on {}", marker.display()));
        assert_contains(&msg, LOCK_DEADLINE_ENV);
        // Some sandboxes do not list this lock in /proc/locks under this pid and inode (another
        // pid namespace, a kernel that does not report them); there "another process" is all
        // that can be said.
        let me = std::process::id().to_string();
        let ino = std::os::unix::fs::MetadataExt::ino(&holder.metadata().unwrap()).to_string();
        let listed = std::fs::read_to_string("/proc/locks").is_ok_and(|locks| {
            locks.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.get(1) == Some(&"FLOCK")
                    && words.get(4) == Some(&me.as_str())
                    && words.get(5).and_then(|id| id.rsplit(':').next()) == Some(ino.as_str())
            })
        });
        if listed {
            assert_contains(&msg, &format!("held by pid {me}"));
        }
        drop(holder);
        assert!(StoreLock::take(&marker, std::time::Duration::ZERO).is_ok());
    }

    #[test]
    fn a_holder_is_found_also_where_proc_locks_names_another_device() {
        let dev = libc::makedev(0xfe, 0x01);
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 00:2f:1234 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 99 fe:01:1234 0 EOF\n\
                     2: POSIX  ADVISORY  WRITE 77 fe:01:1234 0 EOF\n";
        let none = |_: &str| false;
        let only_4242 = |pid: &str| pid == "4242";
        // The device `stat` reports, as /proc/locks prints it: the holder, not the waiter.
        let exact = locks.replace("00:2f:1234", "fe:01:1234");
        assert_eq!(
            flock_holder_pid(&exact, dev, 1234, none).as_deref(),
            Some("4242")
        );
        // Another device (overlayfs, btrfs): the inode and an open file decide.
        assert_eq!(
            flock_holder_pid(locks, dev, 1234, only_4242).as_deref(),
            Some("4242")
        );
        assert_eq!(flock_holder_pid(locks, dev, 1234, none), None);
        assert_eq!(flock_holder_pid(locks, dev, 999, only_4242), None);
        // Two processes that could be it: none is named rather than a wrong one.
        let two = format!("{locks}3: FLOCK  ADVISORY  WRITE 5151 00:30:1234 0 EOF\n");
        assert_eq!(flock_holder_pid(&two, dev, 1234, |_| true), None);
        assert_eq!(
            flock_holder_pid(&two, dev, 1234, only_4242).as_deref(),
            Some("4242")
        );
    }

    #[test]
    fn hostile_names_stay_inside_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("store");
        let store = BaselineStore::open(&root).unwrap();
        let mut run = seed_run();
        run.profile.key = "../../escape".into();
        run.suite = Some("../..".into());
        run.run_id = "../../../etc/passwd".into();
        let added = store.add(&run).unwrap();
        assert!(added.starts_with(root.canonicalize().unwrap()), "{added:?}");
        assert!(!tmp.path().join("escape").exists());
    }
}
