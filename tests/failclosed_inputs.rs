//! The doors through which an unmeasured or broken run used to pass, each through the real
//! binary (issue 28): a store path that is not a store root, a pull-request gate with no
//! baseline, `in_progress` results and stale verdict pairs at every reader, control bytes from
//! the store at every subcommand, impossible values, duplicate run ids, concurrent adds.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;
mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::path::{Path, PathBuf};
use std::process::Command;

use infergate::baseline::{BaselineStore, STORE_MARKER};
use infergate::results::{GateFailureKind, RunResults, RunStatus};
use results_gen::{Gen, infergate};

/// A store of `n` generated runs; returns its root and the group directory.
fn store_of(root: &Path, n: u64) -> (PathBuf, PathBuf) {
    let store = BaselineStore::open(root).unwrap();
    let mut key = String::new();
    for i in 0..n {
        let run = results_gen::run(&Gen::default(), i);
        key = run.profile.key.clone();
        store.add(&run).unwrap();
    }
    (root.to_path_buf(), root.join(key))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Door 1: a profile directory one level down, a suite directory and an unrelated directory
/// are no store: every reader exits 2 naming the directory and, where it can tell, the root.
#[test]
fn a_store_path_that_is_not_a_store_root_is_exit_2_naming_the_likely_root() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, profile_dir) = store_of(&tmp.path().join("store"), 6);
    assert!(root.join(STORE_MARKER).is_file(), "add writes the marker");
    let cand = results_gen::write(
        tmp.path(),
        "cand.json",
        &results_gen::run(&Gen::default(), 40),
    );
    let unrelated = tmp.path().join("docs");
    std::fs::create_dir_all(&unrelated).unwrap();
    std::fs::write(unrelated.join("README.md"), "not a store").unwrap();
    let root_c = root.canonicalize().unwrap();
    for (dir, hint) in [
        (profile_dir.clone(), Some(root_c.clone())),
        (profile_dir.join("pr"), Some(root_c.clone())),
        (unrelated.clone(), None),
    ] {
        let runs = [
            vec!["compare", "--baseline", s(&dir), "--candidate", s(&cand)],
            vec!["changes", "--baseline-dir", s(&dir)],
            vec!["baseline", "--dir", s(&dir), "list"],
        ];
        for args in runs {
            let (code, out, err) = infergate(&args);
            assert_eq!(code, 2, "{args:?}\nstdout: {out}\nstderr: {err}");
            let err = support::flat(&err);
            assert!(
                err.contains("not an infergate baseline store root") && err.contains(s(&dir)),
                "{args:?}: {err}"
            );
            if let Some(h) = &hint {
                assert!(
                    err.contains(&format!("of the store {}", h.display())),
                    "{args:?}: no root named: {err}"
                );
            }
            assert_lacks(&out, "NO BASELINE");
        }
    }
    // `run` refuses it before booting anything.
    let config = tmp.path().join("gate.toml");
    std::fs::write(&config, support::SMALL_SIM_CONFIG).unwrap();
    let (code, err) = support::gate(&config, &tmp.path().join("out"), &profile_dir, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        support::flat(&err).contains("not an infergate baseline store root"),
        "{err}"
    );
    assert!(!tmp.path().join("out/results.json").exists());
    // The root itself is a store.
    let (code, _, err) = infergate(&["compare", "--baseline", s(&root), "--candidate", s(&cand)]);
    assert_ne!(code, 2, "{err}");
}

/// Door 1: a store written before the marker (runs, no marker) is still a store, and gets its
/// marker with the next add; the bundled store carries one.
#[test]
fn a_store_without_its_marker_is_recognised_and_migrated_by_the_next_add() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _) = store_of(&tmp.path().join("store"), 5);
    std::fs::remove_file(root.join(STORE_MARKER)).unwrap();
    let cand = results_gen::write(
        tmp.path(),
        "cand.json",
        &results_gen::run(&Gen::default(), 40),
    );
    let (code, out, err) = infergate(&["compare", "--baseline", s(&root), "--candidate", s(&cand)]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, _, err) = infergate(&["baseline", "--dir", s(&root), "add", s(&cand)]);
    assert_eq!(code, 0, "{err}");
    assert!(root.join(STORE_MARKER).is_file());
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("baselines");
    assert!(bundled.join(STORE_MARKER).is_file());
    assert!(BaselineStore::is_store_root(&bundled).unwrap());
    // `baseline add` does not turn an unrelated, non-empty directory into a store.
    let docs = tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("notes.txt"), "x").unwrap();
    let (code, _, err) = infergate(&["baseline", "--dir", s(&docs), "add", s(&cand)]);
    assert_eq!(code, 2, "{err}");
    assert!(!docs.join(STORE_MARKER).exists());
}

/// Issue 59, door 4: a file named `infergate-store.json` no longer makes any directory a
/// store. An empty marker, `hello`, another `store`, `layout: 99`, a symbolic link and a
/// directory are each refused by every reader (exit 2, the file, the field and the fix; before,
/// `compare` said "no baseline" and exited 0) and by `baseline add` (which leaves it as it is).
/// A store that holds no runs says so.
#[test]
fn a_forged_store_marker_is_refused_by_every_reader_and_an_empty_store_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let cand = results_gen::write(
        tmp.path(),
        "cand.json",
        &results_gen::run(&Gen::default(), 40),
    );
    let config = tmp.path().join("gate.toml");
    std::fs::write(&config, support::SMALL_SIM_CONFIG).unwrap();
    let elsewhere = tmp.path().join("elsewhere.json");
    std::fs::write(
        &elsewhere,
        r#"{"store": "infergate baseline store", "layout": 1}"#,
    )
    .unwrap();
    /// A marker form: its name, how to plant it, what the error says.
    type Form<'a> = (&'a str, &'a dyn Fn(&Path), &'a str);
    let forms: [Form; 6] = [
        ("empty", &|m| std::fs::write(m, "").unwrap(), "is empty"),
        (
            "hello",
            &|m| std::fs::write(m, "hello").unwrap(),
            "is not JSON",
        ),
        (
            "store",
            &|m| std::fs::write(m, r#"{"store": "x", "layout": 1}"#).unwrap(),
            "field `store` is \"x\"",
        ),
        (
            "layout",
            &|m| {
                std::fs::write(m, r#"{"store": "infergate baseline store", "layout": 99}"#).unwrap()
            },
            "field `layout` is 99; this build of infergate knows layout 1 only",
        ),
        (
            "symlink",
            &|m| std::os::unix::fs::symlink(&elsewhere, m).unwrap(),
            "is a symbolic link",
        ),
        (
            "directory",
            &|m| {
                std::fs::create_dir_all(m.join(".hidden")).unwrap();
            },
            "a directory, not a regular file",
        ),
    ];
    for (name, make, problem) in forms {
        let root = tmp.path().join(format!("store-{name}"));
        std::fs::create_dir_all(&root).unwrap();
        let marker = root.join(STORE_MARKER);
        make(&marker);
        let runs = [
            vec![
                "compare",
                "--baseline-dir",
                s(&root),
                "--candidate",
                s(&cand),
            ],
            vec!["changes", "--baseline-dir", s(&root)],
            vec!["baseline", "--dir", s(&root), "list"],
            vec!["baseline", "--dir", s(&root), "add", s(&cand)],
        ];
        for args in runs {
            let (code, out, err) = infergate(&args);
            // Error lines are wrapped at 100 columns: compare the words.
            let err = err.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(code, 2, "{name}: {args:?}\nstdout: {out}\nstderr: {err}");
            assert!(
                err.contains(&format!("baseline store marker {}", marker.display()))
                    && err.contains(problem)
                    && err.contains("restore it"),
                "{name}: {args:?}: {err}"
            );
            assert!(
                !out.contains("no baseline") && !err.contains("no baseline"),
                "{out}{err}"
            );
        }
        let (code, err) = support::gate(&config, &tmp.path().join("out"), &root, &[]);
        let err = support::flat(&err);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(problem), "{name}: {err}");
        assert!(!err.contains("NO BASELINE"), "{name}: {err}");
        // `baseline add` neither replaced nor wrote through the marker.
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1, "{name}");
    }
    assert_eq!(
        std::fs::read_to_string(&elsewhere).unwrap(),
        r#"{"store": "infergate baseline store", "layout": 1}"#
    );
    // A store holding no runs (a valid marker and a .gitkeep) says so.
    let empty = tmp.path().join("store-empty-ok");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join(".gitkeep"), "").unwrap();
    std::fs::write(
        empty.join(STORE_MARKER),
        r#"{"store": "infergate baseline store", "layout": 1}"#,
    )
    .unwrap();
    let (code, out, err) = infergate(&["baseline", "--dir", s(&empty), "list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("the store {} holds no runs", empty.display())),
        "{out}"
    );
    let (code, _, err) = infergate(&["changes", "--baseline-dir", s(&empty)]);
    let err = support::flat(&err);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "holds no runs");
}

/// `infergate run` in GitHub Actions for `event`, with `[report] github = "never"` (no network).
fn gate_in_actions(config: &Path, out: &Path, store: &Path, event: &str) -> (Option<i32>, String) {
    let output = support::gate_command(config, out, store)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", event)
        .env("GITHUB_API_URL", "http://127.0.0.1:9")
        .output()
        .expect("run infergate");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr),
    )
}

/// Doors 1 and 9: no baseline for the profile on a pull request fails the check (exit 3),
/// naming the key and what differs from the profile the store holds; `allow_no_baseline`
/// (bootstrapping) and a push event pass as `no_baseline`.
#[test]
fn no_baseline_on_a_pull_request_fails_unless_the_config_allows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let small = support::SMALL_SIM_CONFIG.replace("concurrency = [1, 2, 4]", "concurrency = [1]");
    let held = tmp.path().join("held.toml");
    std::fs::write(&held, format!("{small}\n[report]\ngithub = \"never\"\n")).unwrap();
    let store = tmp.path().join("store");
    // The store holds the profile of hardware "sim" ...
    let (code, err) = support::gate(
        &held,
        &tmp.path().join("seed"),
        &store,
        &["--update-baseline"],
    );
    assert_eq!(code, Some(0), "{err}");
    // ... and the runner's hardware changed.
    let moved = tmp.path().join("moved.toml");
    let moved_text = small.replace("hardware = \"sim\"", "hardware = \"sim-new-runner\"");
    std::fs::write(
        &moved,
        format!("{moved_text}\n[report]\ngithub = \"never\"\n"),
    )
    .unwrap();
    let (code, text) = gate_in_actions(&moved, &tmp.path().join("pr"), &store, "pull_request");
    assert_eq!(code, Some(3), "{text}");
    assert_contains(&text, "no baseline for profile `cpu-sim-new-runner__");
    assert_contains(&text, "hardware `pinned -x0 cpu sim` (store)");
    assert_contains(&text, "allow_no_baseline");
    assert_lacks(&text, "the gate passes");
    // Measured in full but decided nothing: its results say so, and a merge of the shard fails
    // closed instead of counting a profile with no baseline yet.
    let pr = tmp.path().join("pr");
    let results = std::fs::read_to_string(pr.join("results.json")).unwrap();
    assert_contains(&results, "\"compare_error\"");
    let run: RunResults = serde_json::from_str(&results).unwrap();
    let failure = run
        .gate_failure
        .as_ref()
        .expect("a typed gate_failure record");
    assert_eq!(failure.kind, GateFailureKind::NoBaseline);
    assert_eq!(run.compare_error(), Some(failure.reason.as_str()));
    let (code, out, err) = infergate(&["merge", "--shard", s(&pr)]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert_contains(&out, "measured, but no verdict: no baseline for profile");
    let (code, text) = gate_in_actions(&moved, &tmp.path().join("mq"), &store, "merge_group");
    assert_eq!(code, Some(3), "{text}");
    // Bootstrapping, said in the config; and a push is no pull request.
    let allowed = tmp.path().join("allowed.toml");
    std::fs::write(
        &allowed,
        format!("{moved_text}\n[report]\ngithub = \"never\"\n").replace(
            "[profile]",
            "[baseline]\nallow_no_baseline = true\n\n[profile]",
        ),
    )
    .unwrap();
    let (code, text) = gate_in_actions(&allowed, &tmp.path().join("boot"), &store, "pull_request");
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = gate_in_actions(&moved, &tmp.path().join("push"), &store, "push");
    assert_eq!(code, Some(0), "{text}");
    // The report job of the two-workflow pattern recomputes the verdict: the same rule.
    let report = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["report", "--results"])
            .arg(tmp.path().join("push/results.json"))
            .arg("--trusted-config")
            .arg(&moved)
            .arg("--baseline-dir")
            .arg(&store)
            .args(extra)
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_EVENT_NAME")
            .env_remove("GITHUB_EVENT_PATH")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, text) = report(&["--pr", "7"]);
    assert_eq!(code, Some(3), "{text}");
    assert_contains(&text, "no baseline for profile `cpu-sim-new-runner__");
    let (code, text) = report(&[]);
    assert_eq!(code, Some(0), "{text}");
}

/// A results directory: `results.json` of `run`, then (when given) `verdict.json` of
/// `compare --format json` against `baseline`.
fn results_dir(dir: &Path, run: &RunResults, baseline: &[PathBuf]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let results = results_gen::write(dir, "results.json", run);
    if !baseline.is_empty() {
        let mut args = vec!["compare", "--candidate", s(&results), "--format", "json"];
        args.push("--baseline");
        args.extend(baseline.iter().map(|p| s(p)));
        let verdict = dir.join("verdict.json");
        args.extend(["--out", s(&verdict)]);
        let (code, _, err) = infergate(&args);
        assert!(code == 0 || code == 1, "{err}");
    }
    dir.to_path_buf()
}

fn in_progress(mut run: RunResults) -> RunResults {
    run.status = RunStatus::InProgress;
    run.status_reason = Some("the gate is still measuring: 2 of 6 cells finished".into());
    run.cells.truncate(2);
    run.finished_at = None;
    run
}

/// Doors 2 and 3: every reader of results files refuses an `in_progress` file and a verdict
/// that is not the results' own (of another run, or older): `merge`, `report`,
/// `compare --baseline`, `changes --candidate`.
#[test]
fn every_reader_refuses_in_progress_results_and_stale_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let g = Gen::default();
    let base = results_gen::write_many(tmp.path(), "base", &g, 0..6);
    let first = results_gen::run(&g, 20);
    let second = results_gen::run(&g, 21);

    // merge: a reused output directory whose second run was SIGKILLed: the first run's
    // verdict beside the second run's `in_progress` results.
    let killed = results_dir(&tmp.path().join("killed"), &first, &base);
    results_gen::write(&killed, "results.json", &in_progress(second.clone()));
    let (code, out, err) = infergate(&["merge", "--shard", s(&killed)]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert_contains(&out, "in_progress");
    assert_lacks(&out, "merged verdict: pass");
    // ... the second run finished (no verdict of its own, the first run's left beside it).
    let other = results_dir(&tmp.path().join("other"), &first, &base);
    results_gen::write(&other, "results.json", &second);
    let (code, _, err) = infergate(&["merge", "--shard", s(&other)]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "a verdict of another run");
    // ... a verdict older than its results.
    let old = results_dir(&tmp.path().join("old"), &first, &base);
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(old.join("verdict.json"))
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    let (code, _, err) = infergate(&["merge", "--shard", s(&old)]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "older than");
    // A good pair still merges.
    let good = results_dir(&tmp.path().join("good"), &first, &base);
    let (code, out, err) = infergate(&["merge", "--shard", s(&good)]);
    assert_eq!(code, 0, "{out}\n{err}");

    // report: `in_progress` results without a verdict fail the step (as the check does).
    let (code, out, err) = infergate(&["report", "--results", s(&killed.join("results.json"))]);
    assert_eq!(code, 3, "{out}\n{err}");
    // ... and a verdict of another run beside results is refused, nothing posted.
    let (code, _, err) = infergate(&[
        "report",
        "--results",
        s(&other.join("results.json")),
        "--verdict",
        s(&other.join("verdict.json")),
    ]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "a verdict of another run");

    // compare: an `in_progress` run is no baseline level.
    let killed_file = results_gen::write(tmp.path(), "killed.json", &in_progress(second.clone()));
    let cand = results_gen::write(tmp.path(), "cand.json", &first);
    let mut args = vec!["compare", "--candidate", s(&cand), "--baseline"];
    args.extend(base.iter().map(|p| s(p)));
    args.push(s(&killed_file));
    let (code, out, err) = infergate(&args);
    assert_eq!(code, 3, "{out}\n{err}");
    assert_contains(&err, "is `in_progress`");

    // changes: an `in_progress` candidate is not placed on the history.
    let (store, _) = store_of(&tmp.path().join("store"), 8);
    let (code, out, err) = infergate(&[
        "changes",
        "--baseline-dir",
        s(&store),
        "--candidate",
        s(&killed_file),
    ]);
    assert_eq!(code, 3, "{out}\n{err}");
    assert_contains(&err, "is `in_progress`");
}

/// Every line of `text` split as the Actions runner splits it.
fn lines_of(text: &str) -> Vec<&str> {
    text.split(['\n', '\r']).collect()
}

/// A store under `dir` of 12 runs whose model and run ids carry `evil` (`label` adds the
/// labels), the last four 20% slower so `changes` has a change point to print.
fn hostile_store(
    dir: &Path,
    evil: &str,
    label: impl Fn(&mut RunResults, u64),
) -> (PathBuf, Vec<RunResults>) {
    let g = Gen {
        model: format!("model{evil}"),
        ..Gen::default()
    };
    let store = dir.join("store");
    let st = BaselineStore::open(&store).unwrap();
    let mut runs = Vec::new();
    for i in 0..12 {
        let mut r = results_gen::run(&g, i);
        r.run_id = format!("run{i}{evil}");
        label(&mut r, i);
        if i >= 8 {
            for c in &mut r.cells {
                c.aggregate_tps *= 0.8;
                c.samples.iter_mut().for_each(|v| *v *= 0.8);
            }
        }
        st.add(&r).unwrap();
        runs.push(r);
    }
    (store, runs)
}

/// Door 4: a store full of control bytes and workflow commands in run ids, labels and the
/// model, fed to every subcommand that reads it: no line of stdout or stderr starts a workflow
/// command, and no control byte is printed.
#[test]
fn a_store_full_of_control_bytes_prints_no_workflow_command_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let evil = "\u{0}\u{7}\u{1b}[2J\r::warning::pwned\n::error title=x::owned\u{85}::notice::nel";
    let (store, runs) = hostile_store(tmp.path(), evil, |r, i| {
        r.labels.insert("sha".into(), format!("{evil}{i}"));
        r.labels.insert(format!("k{evil}"), evil.into());
    });
    let cand_run = runs[11].clone();
    let cand = results_gen::write(tmp.path(), "cand.json", &cand_run);
    let dir = results_dir(
        &tmp.path().join("shard"),
        &cand_run,
        std::slice::from_ref(&store),
    );
    let key = cand_run.profile.key.clone();
    let v = s(&dir.join("verdict.json")).to_string();
    let r = s(&dir.join("results.json")).to_string();
    let st_s = s(&store).to_string();
    let c = s(&cand).to_string();
    let mut commands: Vec<Vec<&str>> = Vec::new();
    for f in ["text", "md", "json", "html"] {
        commands.push(vec!["changes", "--baseline-dir", &st_s, "--format", f]);
    }
    commands.push(vec!["changes", "--baseline-dir", &st_s, "--candidate", &c]);
    commands.push(vec!["baseline", "--dir", &st_s, "list"]);
    for f in ["text", "md", "json"] {
        commands.push(vec![
            "baseline",
            "--dir",
            &st_s,
            "show",
            "--profile",
            &key,
            "--suite",
            "pr",
            "--format",
            f,
        ]);
    }
    for f in ["text", "md", "json"] {
        commands.push(vec![
            "compare",
            "--baseline",
            &st_s,
            "--candidate",
            &c,
            "--format",
            f,
        ]);
    }
    commands.push(vec!["report", "--results", &r, "--verdict", &v]);
    commands.push(vec!["report", "--results", &r]);
    for f in ["text", "md", "json"] {
        commands.push(vec!["merge", "--shard", s(&dir), "--format", f]);
    }
    for f in ["bmf", "gab", "junit", "csv"] {
        commands.push(vec![
            "export",
            "--results",
            &r,
            "--verdict",
            &v,
            "--format",
            f,
        ]);
    }
    // A file that is not a run: its error quotes the store's text too.
    std::fs::write(
        tmp.path().join("bad.json"),
        format!("{{\"x\": \"{}\"", evil.escape_default()),
    )
    .unwrap();
    let bad = s(&tmp.path().join("bad.json")).to_string();
    commands.push(vec!["compare", "--baseline", &bad, "--candidate", &c]);
    let mut ran = 0;
    for args in &commands {
        let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(args)
            .env_remove("GITHUB_ACTIONS")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), None, "{args:?} crashed: {stderr}");
        for (which, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            for line in lines_of(text) {
                assert!(
                    !line.trim_start().starts_with("::"),
                    "{args:?} {which} prints a workflow command: {line:?}"
                );
                assert!(
                    !line.chars().any(|ch| ch.is_control() && ch != '\t'),
                    "{args:?} {which} prints a control byte: {line:?}"
                );
            }
        }
        ran += 1;
    }
    assert_eq!(ran, commands.len());
}

/// Whether `text`, a file infergate wrote, is as inert as the console: no control byte but
/// `\n` and `\t`, no bidi control or invisible character (the zero-width space Markdown adds
/// to defuse a mention excepted), no line the Actions runner would read as a workflow command.
fn inert_file(text: &str) -> Result<(), String> {
    let hidden = |c: char| {
        matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{061C}'
                | '\u{200C}'
                | '\u{200D}'
                | '\u{2060}'..='\u{2064}'
                | '\u{FEFF}'
        )
    };
    if let Some(c) = text
        .chars()
        .find(|&c| (c.is_control() && c != '\n' && c != '\t') || hidden(c))
    {
        return Err(format!("holds {c:?}"));
    }
    match lines_of(text)
        .into_iter()
        .find(|l| l.trim_start().starts_with("::"))
    {
        Some(l) => Err(format!("holds a workflow command line {l:?}")),
        None => Ok(()),
    }
}

/// Issue 59, door 3: files are as inert as the console. A store whose run ids, commits and
/// model carry ESC, BEL, bidi overrides and marks, zero-width characters, a `\r::error::` line
/// and `GH-1` / `#123` / `@user` references: `changes --out` in every format and `export --out`
/// in every format write files with none of them live (before: the text file held ESC, BEL,
/// U+202E and the `::error` line; Markdown kept U+200E/U+200F/U+061C, zero-width characters and
/// `GH-1`; the HTML kept U+202E).
#[test]
fn every_output_file_is_as_inert_as_the_console() {
    let tmp = tempfile::tempdir().unwrap();
    let evil = "\u{1b}[2J\u{7}\u{202e}rtl\u{200e}\u{200f}\u{61c}\u{200b}\u{200d}\u{feff}\r::error title=x::owned GH-1 #123 @octocat";
    let (store, runs) = hostile_store(tmp.path(), evil, |r, i| {
        r.labels.insert("sha".into(), format!("{i}{evil}"));
        r.labels.insert("commit_message".into(), evil.into());
    });
    let results = results_gen::write(tmp.path(), "results.json", &runs[11]);
    let mut written = 0;
    for f in ["text", "md", "json", "html"] {
        let out = tmp.path().join(format!("changes.{f}"));
        let (code, _, err) = infergate(&[
            "changes",
            "--baseline-dir",
            s(&store),
            "--format",
            f,
            "--out",
            s(&out),
        ]);
        assert_ne!(code, 2, "{f}: {err}");
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(
            text.contains("rtl"),
            "{f}: the store's text is in the file:\n{text}"
        );
        inert_file(&text)
            .map_err(|e| format!("changes --format {f}: {e}"))
            .unwrap();
        if f == "md" {
            assert!(!text.contains("GH-1") && !text.contains("#123"), "{text}");
            assert_lacks(&text, "@octocat");
        }
        written += 1;
    }
    for f in ["bmf", "gab", "junit", "csv"] {
        let out = tmp.path().join(format!("export.{f}"));
        let (code, _, err) = infergate(&[
            "export",
            "--results",
            s(&results),
            "--format",
            f,
            "--out",
            s(&out),
        ]);
        assert_eq!(code, 0, "{f}: {err}");
        let text = std::fs::read_to_string(&out).unwrap();
        inert_file(&text)
            .map_err(|e| format!("export --format {f}: {e}"))
            .unwrap();
        written += 1;
    }
    assert_eq!(written, 8);
}

/// Door 8: values no measurement gives (1e308 and 5e-324 tok/s) are refused the same way
/// wherever they come in (`baseline add`: exit 2; a store file: the group cannot be read,
/// exit 3 naming it), never drawn as `inf` nor failing only some reports.
#[test]
fn impossible_throughputs_are_refused_consistently() {
    for value in [1e308, 5e-324] {
        let tmp = tempfile::tempdir().unwrap();
        let (store, group) = store_of(&tmp.path().join("store"), 8);
        let mut bad = results_gen::run(&Gen::default(), 30);
        bad.cells[0].aggregate_tps = value;
        let file = results_gen::write(tmp.path(), "bad.json", &bad);
        let (code, _, err) = infergate(&["baseline", "--dir", s(&store), "add", s(&file)]);
        assert_eq!(code, 2, "{value:e}: {err}");
        assert_contains(&err, "is not a throughput a measurement gives");
        // Planted in the store by hand: every reader refuses the group, naming the file.
        std::fs::copy(&file, group.join("pr/runs/planted.json")).unwrap();
        for format in ["html", "text"] {
            let (code, out, err) =
                infergate(&["changes", "--baseline-dir", s(&store), "--format", format]);
            assert_eq!(code, 3, "{value:e} {format}: {err}");
            assert_contains(&err, "planted.json");
            assert_lacks(&out, "inf");
        }
        let cand = results_gen::write(
            tmp.path(),
            "cand.json",
            &results_gen::run(&Gen::default(), 31),
        );
        let (code, _, err) =
            infergate(&["compare", "--baseline", s(&store), "--candidate", s(&cand)]);
        assert_eq!(code, 3, "{err}");
        assert_contains(&err, "planted.json");
    }
}

/// Door 8: the same run id under two files with different content is named by `changes`;
/// `baseline add` refuses it; two `baseline add`s of one run under two ids at once store it
/// once.
#[test]
fn duplicate_run_ids_are_named_and_concurrent_adds_store_a_run_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, group) = store_of(&tmp.path().join("store"), 8);
    let runs_dir = group.join("pr/runs");
    let mut twin = results_gen::run(&Gen::default(), 3);
    twin.cells[0].aggregate_tps *= 1.5;
    let twin_file = results_gen::write(tmp.path(), "twin.json", &twin);
    let (code, _, err) = infergate(&["baseline", "--dir", s(&store), "add", s(&twin_file)]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "same run id");
    std::fs::copy(&twin_file, runs_dir.join("zz-twin.json")).unwrap();
    let (code, _, err) = infergate(&["changes", "--baseline-dir", s(&store)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("zz-twin.json") && err.contains("repeats the run id"),
        "the duplicate is not named: {err}"
    );
    std::fs::remove_file(runs_dir.join("zz-twin.json")).unwrap();

    // The race: the same content under two run ids, added at once, ten times over.
    for round in 0..10u64 {
        let run = results_gen::run(&Gen::default(), 100 + round);
        let mut a = run.clone();
        a.run_id = format!("race-{round}-a");
        let mut b = run;
        b.run_id = format!("race-{round}-b");
        let fa = results_gen::write(tmp.path(), &format!("a{round}.json"), &a);
        let fb = results_gen::write(tmp.path(), &format!("b{round}.json"), &b);
        let spawn = |f: &Path| {
            Command::new(env!("CARGO_BIN_EXE_infergate"))
                .args(["baseline", "--dir", s(&store), "add", s(f)])
                .output()
        };
        let (ra, rb) = std::thread::scope(|sc| {
            let ha = sc.spawn(|| spawn(&fa));
            let hb = sc.spawn(|| spawn(&fb));
            (ha.join().unwrap().unwrap(), hb.join().unwrap().unwrap())
        });
        let stored = std::fs::read_dir(&runs_dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("race-{round}-"))
            })
            .count();
        assert_eq!(
            stored,
            1,
            "round {round}: stored {stored} times\n{}\n{}",
            String::from_utf8_lossy(&ra.stderr),
            String::from_utf8_lossy(&rb.stderr)
        );
    }
}
