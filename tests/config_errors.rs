//! A malformed gate config is rejected before anything boots: exit 2 with `file:line` and the
//! fix.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::assert_contains;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const GOOD: &str = r#"model = "sim-test"

[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}"]

[suites.pr]
concurrency = [1, 2]
contexts = ["0", "8k"]
duration = "2s"

[suites.nightly]
concurrency = [1, 2, 4]
contexts = ["0"]
"#;

fn write(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("bad.toml");
    std::fs::write(&p, text).expect("write config");
    p
}

fn run(config: &Path, extra: &[&str]) -> (Output, Duration) {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(config)
        .args(["--out"])
        .arg(config.with_file_name("out"))
        .args(extra)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run gate");
    (out, t0.elapsed())
}

fn assert_rejected(text: &str, line: usize, needle: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), text);
    let (out, took) = run(&path, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let location = format!("{}:{line}:", path.display());
    assert!(
        stderr.contains(&location),
        "expected `{location}` in:\n{stderr}"
    );
    assert!(stderr.contains(needle), "expected `{needle}` in:\n{stderr}");
    assert!(stderr.contains("fix:"), "expected a fix in:\n{stderr}");
    // Nothing booted: no engine log, no results.
    assert!(
        !dir.path().join("out").exists(),
        "nothing may be written for a bad config"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn syntax_error_names_file_and_line() {
    assert_rejected(
        &GOOD.replace("duration = \"2s\"", "duration = \"2s"),
        9,
        "TOML",
    );
}

#[test]
fn unknown_key_names_file_line_and_the_allowed_keys() {
    assert_rejected(
        &GOOD.replace("duration = \"2s\"", "durration = \"2s\""),
        9,
        "unknown field `durration`",
    );
}

#[test]
fn negative_duration_names_file_and_line() {
    assert_rejected(
        &GOOD.replace("duration = \"2s\"", "duration = \"-2s\""),
        9,
        "[suites.pr] duration `-2s` is negative",
    );
}

#[test]
fn wrong_type_and_empty_concurrency_are_rejected() {
    assert_rejected(
        &GOOD.replace("concurrency = [1, 2]", "concurrency = \"1,2\""),
        7,
        "[suites.pr] concurrency: invalid type",
    );
    assert_rejected(
        &GOOD.replace("concurrency = [1, 2]", "concurrency = []"),
        7,
        "concurrency is empty",
    );
}

#[test]
fn unknown_suite_lists_the_suites() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), GOOD);
    let (out, _) = run(&path, &["--suite", "weekly"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        support::flat(&stderr).contains("no suite `weekly`"),
        "{stderr}"
    );
    assert!(support::flat(&stderr).contains("pr, nightly"), "{stderr}");
}

#[test]
fn missing_config_file_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, _) = run(&dir.path().join("nope.toml"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_contains(&stderr, "nope.toml");
}
