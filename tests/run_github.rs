//! `infergate run` inside GitHub Actions, end to end: the real binary boots the simulated engine
//! (the embedded default config and its bundled baseline) and reports to a local mock of the
//! GitHub REST API (wiremock on 127.0.0.1). The check run is created `in_progress` on the PR's
//! head SHA before measuring, completed with the verdict afterwards, and none is left open.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::actions::{GateInActions, HEAD_SHA, TOKEN};
use wiremock::Request;

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

/// Runs `infergate run --config CONFIG --suite pr` from `cwd` as a GitHub Actions step of a
/// pull request (event payload with head SHA, token, step summary after an earlier step's,
/// outputs file) against a mock GitHub that accepts everything.
async fn run_in_actions(cwd: &Path, config: &str, extra: &[&str]) -> GateInActions {
    let dir = tempfile::tempdir().unwrap();
    let run = support::actions::run_in_actions_after(
        cwd,
        config,
        "pr",
        &dir.path().join("results"),
        extra,
        "earlier step\n",
    )
    .await;
    assert!(
        !run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN),
        "the token must never be printed"
    );
    run
}

fn check_requests(reqs: &[Request]) -> Vec<&Request> {
    reqs.iter()
        .filter(|r| r.url.path().contains("/check-runs"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_in_actions_creates_the_check_in_progress_then_completes_it() {
    let run = run_in_actions(repo_root(), "infergate.toml", &[]).await;
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    assert_eq!(
        run.code,
        Some(0),
        "the default gate passes\n{stdout}\n{stderr}"
    );
    let checks = check_requests(&run.requests);
    assert!(!checks.is_empty(), "no check-run request: {stderr}");
    let first = body(checks[0]);
    assert_eq!(checks[0].method.as_str(), "POST");
    assert_eq!(
        first["status"], "in_progress",
        "created in progress: {first}"
    );
    assert_eq!(first["head_sha"], HEAD_SHA, "the PR head, not GITHUB_SHA");
    let name = first["name"].as_str().unwrap_or_default().to_string();
    assert!(
        name.starts_with("infergate / cpu-sim__infergate-sim__sim-test__")
            && name.ends_with("/ pr"),
        "stable check name: {name}"
    );
    let last = body(checks[checks.len() - 1]);
    assert_eq!(checks[checks.len() - 1].method.as_str(), "PATCH");
    assert_eq!(last["status"], "completed", "{last}");
    // The conclusion follows the verdict: pass → success; insufficient (this machine is
    // shared: a noisy cell, or a tail the host ran late on) → neutral, never failure for an
    // unchanged engine. (The arm said "inconclusive", a word the gate no longer writes, so a
    // loaded CI host's `insufficient` failed the test.)
    let verdict = run
        .outputs
        .lines()
        .find_map(|l| l.strip_prefix("verdict="))
        .unwrap_or_default()
        .to_string();
    let expected = match verdict.as_str() {
        "pass" => "success",
        "insufficient" => "neutral",
        other => panic!("an unchanged engine must pass (or be inconclusive), got {other:?}"),
    };
    assert_eq!(last["conclusion"], expected, "{last}");
    assert!(
        last["output"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("| context |")),
        "the verdict matrix is the summary: {last}"
    );
    // Every check created is completed: exactly one created, and it was completed.
    let created = checks
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .count();
    assert_eq!(created, 1, "one check per profile and suite");

    let (outputs, summary) = (&run.outputs, &run.summary);
    assert!(outputs.lines().any(|l| l == "regressions=0"), "{outputs}");
    assert!(
        summary.starts_with("earlier step\n"),
        "the job summary is appended to"
    );
    assert!(summary.contains("xychart-beta"), "history chart: {summary}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engine_that_cannot_start_completes_the_check_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gate.toml"),
        r#"model = "m"

[engine]
command = ["sh", "-c", "exec /nonexistent/vllm-build-under-test --port \"$0\"", "{port}"]
name = "vllm"
readiness_timeout = "5s"

[suites.pr]
concurrency = [1]
contexts = ["0"]
duration = "1s"
"#,
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("baselines")).unwrap();
    let run = run_in_actions(dir.path(), "gate.toml", &[]).await;
    assert_eq!(
        run.code,
        Some(3),
        "engine failure\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let checks = check_requests(&run.requests);
    assert!(checks.len() >= 2, "created then completed: {}", run.stderr);
    assert_eq!(body(checks[0])["status"], "in_progress");
    let last = body(checks[checks.len() - 1]);
    assert_eq!(
        last["status"], "completed",
        "never left in progress: {last}"
    );
    assert_eq!(last["conclusion"], "failure", "{last}");
    let text = last["output"].to_string();
    assert!(
        text.contains("nonexistent/vllm-build-under-test"),
        "the reason names the command: {text}"
    );
    assert!(
        run.outputs.lines().any(|l| l.starts_with("verdict=")),
        "{}",
        run.outputs
    );
}

/// `fail_on = "never"` is report-only: a regression is reported (the `verdict` output says
/// `regression`, the check names it) but neither fails the job nor blocks a required check:
/// exit 0 and a `neutral` check, from the one policy that decides both.
#[tokio::test(flavor = "multi_thread")]
async fn report_only_mode_reports_a_regression_as_a_neutral_check_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gate.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[baseline]\ndir = \"baselines\"\n\n[thresholds]\nfail_on = \"never\"\n",
            support::SMALL_SIM_CONFIG
        ),
    )
    .unwrap();
    // A baseline around a calibration run of this machine, so machine speed cancels.
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).unwrap();
    let calib_out = dir.path().join("calibration");
    let (code, stderr) = support::gate(&config, &calib_out, &store, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let calib = support::read_results(&calib_out.join("results.json"));
    support::baseline_around(&store, &calib, 6, |_, _| 1.0);

    // The candidate is three times slower: a regression under any load.
    let run = run_in_actions(
        dir.path(),
        "gate.toml",
        &["--engine-arg=--slowdown", "--engine-arg=3"],
    )
    .await;
    let (stdout, stderr) = (&run.stdout, &run.stderr);
    let verdict = run
        .outputs
        .lines()
        .find_map(|l| l.strip_prefix("verdict="))
        .unwrap_or_default();
    assert_eq!(verdict, "regression", "{stdout}\n{stderr}");
    assert_eq!(run.code, Some(0), "report only: exit 0\n{stderr}");
    let checks = check_requests(&run.requests);
    let last = body(checks[checks.len() - 1]);
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["conclusion"], "neutral", "never failure: {last}");
    assert!(
        last["output"]["title"]
            .as_str()
            .is_some_and(|t| t.starts_with("✗ aggregate tok/s −")),
        "the check still names the regression: {last}"
    );
    assert!(
        checks.iter().all(|r| body(r)["conclusion"] != "failure"),
        "no check completed as failure"
    );
}
