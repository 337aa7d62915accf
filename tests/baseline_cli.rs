//! End-to-end tests of `infergate baseline` through the real binary: add/show/prune/list, a
//! corrupt run file, an interrupted write, and hostile names that try to leave the store.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::path::{Path, PathBuf};

use results_gen::{Gen, infergate, run, seed, write, write_many};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn add(store: &Path, files: &[PathBuf]) -> (i32, String, String) {
    let mut args = vec!["baseline", "add", "--dir", s(store)];
    args.extend(files.iter().map(|p| s(p)));
    infergate(&args)
}

/// Every `*.json` run file under the store, recursively.
fn run_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(run_files(&p));
            } else if p
                .parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n == "runs")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn add_show_prune_list() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("baselines");
    let files = write_many(dir.path(), "r", &Gen::default(), 0..4);
    let (code, out, err) = add(&store, &files);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches("added ").count(), 4, "{out}");
    // Adding again is refused (a run counts once), and so is the same run under another id.
    let (code, _, err) = add(&store, &files[..1]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is already in the baseline store") && err.contains("same run id"),
        "{err}"
    );
    let mut renamed: infergate::results::RunResults =
        serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
    renamed.run_id = "copied-under-another-id".into();
    let copy = write(dir.path(), "copy.json", &renamed);
    let (code, _, err) = add(&store, &[copy]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "same content digest");
    assert_eq!(run_files(&store).len(), 4);

    let key = run(&Gen::default(), 0).profile.key;
    let (code, out, err) = infergate(&["baseline", "list", "--dir", s(&store)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&key) && out.contains("suite=pr") && out.contains("runs=4"),
        "{out}"
    );

    let (code, out, err) = infergate(&[
        "baseline",
        "show",
        "--dir",
        s(&store),
        "--profile",
        &key,
        "--suite",
        "pr",
    ]);
    assert_eq!(code, 0, "{err}");
    // The console wraps at 100 columns: read it unwrapped.
    let flat = out.replace("\n  ", " ");
    assert!(
        out.contains("C=16 / 8k")
            && flat.contains("level: the mean of the newest 7 runs")
            && flat.contains("CV: between runs over the newest 20"),
        "{out}"
    );
    let (code, out, err) = infergate(&["baseline", "show", "--dir", s(&store), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc[0]["runs"].as_array().unwrap().len(), 4);
    assert_eq!(doc[0]["cells"].as_array().unwrap().len(), 6);
    let cv = doc[0]["cells"][0]["cv"].as_f64().unwrap();
    assert!(cv > 0.0 && cv < 0.05, "between-run CV {cv}");
    let (code, out, _) = infergate(&["baseline", "show", "--dir", s(&store), "--format", "md"]);
    assert_eq!(code, 0);
    assert_contains(&out, "| cell |");

    let (code, out, err) = infergate(&["baseline", "prune", "--dir", s(&store), "--keep", "2"]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, "pruned 2 runs, kept 2");
    let left = run_files(&store);
    assert_eq!(left.len(), 2);
    assert!(
        left.iter()
            .all(|p| s(p).contains("gen002") || s(p).contains("gen003")),
        "newest kept: {left:?}"
    );
}

#[test]
fn seed_file_and_refused_runs() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("b");
    let (code, out, err) = add(&store, &[seed()]);
    assert_eq!(code, 0, "{err}");
    assert_contains(
        &out,
        "gpu-nvidia-geforce-rtx-5090x1__vllm__deepseek-v4-flash-dspark",
    );
    let mut partial = run(&Gen::default(), 1);
    partial.status = infergate::results::RunStatus::Partial;
    let p = write(dir.path(), "partial.json", &partial);
    let (code, _, err) = add(&store, &[p]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("partial.json") && err.contains("only complete runs"),
        "{err}"
    );
    // The seed stored as a baseline serves a comparison with itself as candidate.
    let (code, _, err) = infergate(&[
        "compare",
        "--baseline",
        s(&store),
        "--candidate",
        s(&seed()),
    ]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_corrupt_run_file_is_listed_and_fails_a_comparison_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("b");
    let files = write_many(dir.path(), "r", &Gen::default(), 0..3);
    assert_eq!(add(&store, &files).0, 0);
    let first = run_files(&store).remove(0);
    let runs_dir = first.parent().unwrap().to_path_buf();
    std::fs::write(
        runs_dir.join("zz-corrupt.json"),
        "{\"schema_version\": 1, \"tool\": {\"name\": \"infergate\"",
    )
    .unwrap();
    std::fs::write(&first, "not json at all").unwrap();
    let (code, out, err) = infergate(&["baseline", "list", "--dir", s(&store)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("runs=2") && out.contains("unreadable=2"),
        "{out}"
    );
    let (code, out, err) = infergate(&["baseline", "show", "--dir", s(&store), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("zz-corrupt.json") && err.contains("truncated"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc[0]["runs"].as_array().unwrap().len(), 2);
    let cand = write_many(dir.path(), "c", &Gen::default(), 1..3);
    let (code, _, err) = infergate(&[
        "compare",
        "--baseline",
        s(&store),
        "--candidate",
        s(&cand[0]),
        s(&cand[1]),
    ]);
    // Fail closed: comparing against a store that is only partly readable is an error (3)
    // naming every file that cannot be used, not a comparison against what happens to parse.
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("zz-corrupt.json")
            && err.contains(first.file_name().unwrap().to_str().unwrap())
            && err.contains("2 run files cannot be used"),
        "{err}"
    );
}

#[test]
fn an_interrupted_add_leaves_the_store_valid() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("b");
    let files = write_many(dir.path(), "r", &Gen::default(), 0..2);
    assert_eq!(add(&store, &files[..1]).0, 0);
    let runs_dir = run_files(&store)[0].parent().unwrap().to_path_buf();
    // What a write killed before its rename leaves behind: a half-written temp file.
    let text = std::fs::read_to_string(&files[1]).unwrap();
    std::fs::write(runs_dir.join(".tmpXyZ123.partial"), &text[..text.len() / 2]).unwrap();
    // And real kills at a few points in a real `baseline add` of the seed file.
    for delay_ms in [0u64, 2, 5, 10, 20] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["baseline", "add", "--dir", s(&store), s(&seed())])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
    }
    // Every run file that exists is whole; the temp file is ignored; the store still works.
    let (code, out, err) = infergate(&["baseline", "list", "--dir", s(&store)]);
    assert_eq!(code, 0, "{err}");
    assert_lacks(&out, "unreadable");
    assert_contains(&out, "suite=pr  runs=1");
    for f in run_files(&store) {
        let name = f.file_name().unwrap().to_str().unwrap();
        if !name.starts_with(".tmp") {
            assert!(
                infergate::import::load_results(&f).is_ok(),
                "{f:?} is whole"
            );
        }
    }
    assert_eq!(
        add(&store, &files[1..]).0,
        0,
        "the store accepts new runs after a crash"
    );
}

#[test]
fn hostile_names_cannot_escape_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("inner").join("b");
    let g = Gen {
        model: "../../../../escaped/<model>|`x`".into(),
        suite: Some("../../../suite".into()),
        ..Gen::default()
    };
    let mut r = run(&g, 0);
    r.run_id = "../../../../escaped-run".into();
    r.profile.key = "../../../../escaped-key".into();
    let f = write(dir.path(), "hostile.json", &r);
    let (code, out, err) = add(&store, &[f]);
    assert_eq!(code, 0, "{err}");
    let files = run_files(&store);
    assert_eq!(files.len(), 1, "{out}");
    let root = store.canonicalize().unwrap();
    assert!(
        files[0].canonicalize().unwrap().starts_with(&root),
        "{files:?}"
    );
    let outside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside.len(),
        2,
        "only `inner` and hostile.json in the temp dir: {outside:?}"
    );
    assert!(
        !dir.path().join("escaped").exists() && !dir.path().join("inner").join("escaped").exists()
    );
    let (code, out, _) = infergate(&["baseline", "show", "--dir", s(&store), "--format", "json"]);
    assert_eq!(code, 0);
    assert_contains(&out, "escaped-key");
}

#[test]
fn import_converts_the_seed_into_our_schema() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imported.json");
    let (code, stdout, err) = infergate(&["import", s(&seed()), "--out", s(&out)]);
    assert_eq!(code, 0, "{err}");
    // The console wraps at 100 columns: read it unwrapped.
    let flat = stdout.replace("\n  ", " ");
    assert!(flat.contains("20 cells (3 not ok)"), "{stdout}");
    let text = std::fs::read_to_string(&out).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["tool"]["name"], "infergate");
    assert_eq!(doc["source"]["kind"], "import");
    assert_eq!(doc["cells"][0]["token_source"], "imported");
    // The converted file reads back as our schema, with the seed's profile.
    let runs = infergate::import::load_results(&out).unwrap();
    let direct = infergate::import::load_results(&seed()).unwrap();
    assert_eq!(runs[0].profile, direct[0].profile);
    assert_eq!(runs[0].cells, direct[0].cells);
    // A missing input is a usage error naming the file.
    let (code, _, err) = infergate(&["import", s(&dir.path().join("nope.json")), "--out", s(&out)]);
    assert_eq!(code, 2);
    assert_contains(&err, "nope.json: cannot read");
}

#[test]
fn baseline_help_names_every_subcommand() {
    let (code, out, err) = infergate(&["baseline", "--help"]);
    assert_eq!(code, 0, "{err}");
    let about = out.lines().next().unwrap_or_default();
    let subcommands: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(subcommands.len() >= 4, "{out}");
    for name in subcommands {
        assert!(
            about.contains(name),
            "`baseline --help` summary {about:?} omits `{name}`"
        );
    }
}

#[test]
fn report_history_reads_a_baseline_store_without_complaining() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("baselines");
    let files = write_many(dir.path(), "r", &Gen::default(), 0..3);
    let (code, _, err) = add(&store, &files);
    assert_eq!(code, 0, "{err}");
    assert!(
        run_files(&store).len() == 3
            && store
                .read_dir()
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().is_dir())
                .count()
                == 1,
        "one profile directory with three runs"
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["report", "--results", s(&files[2]), "--history", s(&store)])
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate report");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("skipped") && !err.contains("profile.json"),
        "the store's own files are not history problems:\n{err}"
    );
}

/// Issue 59, door 5: `baseline add` on a store whose lock another process holds gives up at
/// the deadline (`INFERGATE_STORE_LOCK_TIMEOUT_S`, here 0 s) with exit 3, naming the lock file
/// and its holder, and adds nothing (it waited for ever, silently); once the lock is free the
/// same add goes through.
#[test]
fn a_held_store_lock_fails_at_the_deadline_naming_the_holder() {
    use std::os::fd::AsRawFd;
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let files = write_many(tmp.path(), "r", &Gen::default(), 0..2);
    let (code, _, err) = add(&store, &files[..1]);
    assert_eq!(code, 0, "{err}");
    let marker = store.join(infergate::baseline::STORE_MARKER);
    let holder = std::fs::File::open(&marker).unwrap();
    // SAFETY: flock(2) on a file descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(holder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["baseline", "add", "--dir", s(&store), s(&files[1])])
        .env("INFERGATE_STORE_LOCK_TIMEOUT_S", "0")
        .output()
        .unwrap();
    // Error lines are wrapped at 100 columns: compare the words.
    let err = String::from_utf8_lossy(&out.stderr)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(&format!("flock on {}", marker.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("held by pid {}", std::process::id())),
        "{err}"
    );
    assert_eq!(run_files(&store).len(), 1, "nothing added");
    drop(holder);
    let (code, _, err) = add(&store, &files[1..]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(run_files(&store).len(), 2);
}
