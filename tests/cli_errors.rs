//! User mistakes end with exit 2 and one plain message naming the flag; a failure's cause is
//! said once; output files honour the umask.

#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::process::{Command, Output};

fn infergate(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .current_dir(dir)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_out_that_is_a_file_is_exit_2_naming_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let o = infergate(&["run", "--out", "notes.txt"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("--out") && t.contains("directory"), "{t}");
    assert_eq!(t.matches("error").count(), 1, "one message: {t}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn numbers_are_asked_for_in_plain_english() {
    let dir = tempfile::tempdir().unwrap();
    let o = infergate(&["ab-eval", "--trials", "many"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("--trials") && t.contains("not a whole number"),
        "{t}"
    );
    // The adaptive design's rounds are bounded as `[adaptive] max_rounds` is (1 to 20): a huge
    // count once overflowed the look count.
    let o = infergate(&["ab-eval", "--max-rounds", "4294967295"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("--max-rounds") && t.contains("1..=20"), "{t}");
    std::fs::write(
        dir.path().join("gate.toml"),
        "[engine]\ncommand = [\"x\"]\n[suites.pr]\nconcurrency = [1]\ncontexts = [0]\nmax_tokens = \"x\"\n",
    )
    .unwrap();
    let o = infergate(&["run", "--config", "gate.toml"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert_contains(&t, "expected a whole number");
    assert_lacks(&t, "u32");
}

/// `sim --slowdown` takes the form people type, `10%`, as a 10% slower engine; a mistake is
/// exit 2 with a hint that means what it says (not "e.g. 0.05", a 20x faster engine).
#[test]
fn a_slowdown_is_a_factor_or_a_percentage() {
    let dir = tempfile::tempdir().unwrap();
    let o = infergate(&["sim", "--slowdown", "ten", "--port", "0"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("--slowdown") && t.contains("1.10 = 10% slower") && t.contains("10%"),
        "{t}"
    );
    assert_lacks(&t, "0.05");
    let o = infergate(&["ab-eval", "--change", "x"], dir.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("not a number") && !t.contains("0.05"), "{t}");
}

#[test]
fn a_missing_store_is_exit_2_under_its_one_flag_name_and_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--baseline-dir", "--dir"] {
        let o = infergate(&["baseline", flag, "absent", "list"], dir.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{flag}: {t}");
        assert_contains(&t, "--baseline-dir absent");
    }
}

#[test]
fn an_engine_that_cannot_start_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    std::fs::write(
        dir.path().join("gate.toml"),
        "model = \"m\"\n[engine]\ncommand = [\"/nonexistent/engine-binary\"]\n[suites.pr]\nconcurrency = [1, 2]\ncontexts = [0, 1024]\nduration = \"1s\"\n",
    )
    .unwrap();
    let o = infergate(
        &[
            "run",
            "--config",
            "gate.toml",
            "--baseline-dir",
            "store",
            "--out",
            "out",
        ],
        dir.path(),
    );
    let t = text(&o);
    // A program that does not exist is the config's to fix: exit 2, before any boot.
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert_eq!(
        t.matches("its program `/nonexistent/engine-binary` does not exist")
            .count(),
        1,
        "{t}"
    );
}

#[cfg(unix)]
#[test]
fn output_files_honour_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reports/pass/results.json");
    let out = dir.path().join("copy.json");
    let o = infergate(
        &[
            "import",
            fixture.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let probe = dir.path().join("probe");
    std::fs::File::create(&probe).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&out), mode(&probe));
}

#[test]
fn a_run_directory_given_for_its_results_file_names_the_file_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("infergate-results");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("results.json"), "{}").unwrap();
    for args in [
        &[
            "compare",
            "--baseline-dir",
            "b",
            "--candidate",
            "infergate-results",
        ][..],
        &[
            "export",
            "--format",
            "csv",
            "--results",
            "infergate-results",
        ][..],
        &["report", "--results", "infergate-results"][..],
    ] {
        let o = infergate(args, dir.path());
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(
            support::flat(&t).contains("infergate-results is a directory: pass the file in it, infergate-results/results.json"),
            "{args:?}: {t}"
        );
    }
}
