//! `infergate report --trusted-config` (the action's `report` mode) against a mock GitHub: the
//! verdict is recomputed from `results.json` against the base branch's config and baselines,
//! whatever the PR's checkout and the artifact's `verdict.json` say.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::assert_contains;
use std::path::{Path, PathBuf};

use infergate::baseline::BaselineStore;
use infergate::results::RunResults;
use serde_json::{Value, json};
use wiremock::MockServer;

const TOKEN: &str = "ghs_TRUSTED_TEST_TOKEN_42";
const REPO: &str = "acme/engine";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// A checkout (base or PR): `infergate.toml` (the small simulated-engine config plus `extra`)
/// and its `baselines/`.
fn checkout(root: &Path, extra: &str) -> PathBuf {
    std::fs::create_dir_all(root).unwrap();
    let config = root.join("infergate.toml");
    std::fs::write(&config, format!("{}\n{extra}", support::SMALL_SIM_CONFIG)).unwrap();
    config
}

struct Setup {
    _dir: tempfile::TempDir,
    trusted_config: PathBuf,
    pr_config: PathBuf,
    artifact: PathBuf,
    output: PathBuf,
    summary: PathBuf,
    event: PathBuf,
}

/// The base branch's checkout (default thresholds, five baseline runs at 100 tok/s per
/// stream), the PR's checkout (min_effect raised to 50% and its own baselines/ holding the
/// slow run itself), and the artifact of a PR run 30% slower than the base with its second boot
/// (`results-confirm.json`: a matrix-wide change is decided over two boots), with a forged
/// `verdict.json` saying `pass`.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let trusted_config = checkout(&dir.path().join("trusted"), "");
    let calib = support::measured(&trusted_config, "20261101T000000Z-calib", 100.0);
    support::baseline_around(&dir.path().join("trusted/baselines"), &calib, 5, |_, _| 1.0);

    let pr_config = checkout(&dir.path().join("pr"), "[thresholds]\nmin_effect = 0.5\n");
    let slow = support::measured(&trusted_config, "20261102T100000Z-pr", 70.0);
    let pr_store = BaselineStore::open(&dir.path().join("pr/baselines")).unwrap();
    for i in 0..5 {
        let mut r = slow.clone();
        r.run_id = format!("20261101T00000{i}Z-forged{i}");
        // Distinct runs (a copy under another id counts once in a store).
        r.started_at += chrono::Duration::seconds(i64::from(i));
        pr_store.add(&r).unwrap();
    }

    let artifact = dir.path().join("artifact");
    std::fs::create_dir_all(&artifact).unwrap();
    std::fs::write(
        artifact.join("results.json"),
        serde_json::to_string_pretty(&slow).unwrap(),
    )
    .unwrap();
    let mut second = support::measured(&trusted_config, "20261102T100500Z-pr2", 70.0);
    second.labels.insert("confirms".into(), slow.run_id.clone());
    std::fs::write(
        artifact.join("results-confirm.json"),
        serde_json::to_string_pretty(&second).unwrap(),
    )
    .unwrap();
    let forged = json!({
        "schema_version": 1, "profile": slow.profile, "suite": "pr",
        "candidate_runs": [slow.run_id], "baseline": {"level_runs": [], "noise_runs": 0},
        "gate": "pass", "headline": "no regressions", "cells": [],
        "rule": {"alpha": 0.01, "min_effect": 0.5, "noise_k": 3.0, "correction": "holm", "confidence": 0.95}
    });
    std::fs::write(artifact.join("verdict.json"), forged.to_string()).unwrap();

    let event = dir.path().join("event.json");
    std::fs::write(
        &event,
        json!({"workflow_run": {"head_sha": SHA, "event": "pull_request",
               "pull_requests": [{"number": 7, "head": {"sha": SHA}}]}})
        .to_string(),
    )
    .unwrap();
    Setup {
        output: dir.path().join("github_output"),
        summary: dir.path().join("step_summary"),
        trusted_config,
        pr_config,
        artifact,
        event,
        _dir: dir,
    }
}

/// GitHub accepting the check run and the comment on PR 7.
async fn mock_github() -> MockServer {
    support::actions::accepting_github().await
}

/// `infergate report` as the action's report mode runs it in a workflow_run job.
async fn report(s: &Setup, server: &MockServer, args: &[&str]) -> (Option<i32>, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("report")
        .arg("--results")
        .arg(s.artifact.join("results.json"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_API_URL", server.uri())
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_EVENT_PATH", &s.event)
        .env("GITHUB_EVENT_NAME", "workflow_run")
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_STEP_SUMMARY", &s.summary)
        .env("GITHUB_OUTPUT", &s.output)
        .env("INFERGATE_GITHUB_RETRY_BASE_MS", "1")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

async fn posted_check(server: &MockServer) -> Value {
    let reqs = server.received_requests().await.unwrap();
    let checks: Vec<Value> = reqs
        .iter()
        .filter(|r| r.method.as_str() == "POST" && r.url.path().ends_with("/check-runs"))
        .map(|r| r.body_json().unwrap())
        .collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    checks[0].clone()
}

#[tokio::test]
async fn the_base_config_and_baselines_judge_whatever_the_pr_and_the_artifact_say() {
    let s = setup();
    // What the PR's own checkout would conclude: its lowered bar and its own baselines pass.
    let server = mock_github().await;
    let pr = s.pr_config.to_str().unwrap();
    let (code, out) = report(&s, &server, &["--trusted-config", pr]).await;
    assert_eq!(code, Some(0), "the PR's checkout passes itself\n{out}");
    // A pass: the quiet simulator's five-run baseline can find a uniform −5%.
    assert_eq!(
        posted_check(&server).await["conclusion"],
        "success",
        "{out}"
    );
    assert_contains(&out, "this run could detect");

    // The base's config and baselines: −30% is a regression, and the forged verdict.json next
    // to the results changes nothing.
    let server = mock_github().await;
    let verdict_out = s.artifact.with_file_name("trusted-verdict.json");
    let forged = s.artifact.join("verdict.json");
    let (code, out) = report(
        &s,
        &server,
        &[
            "--trusted-config",
            s.trusted_config.to_str().unwrap(),
            "--verdict",
            forged.to_str().unwrap(),
            "--verdict-out",
            verdict_out.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert_contains(&out, "--verdict ignored");
    let check = posted_check(&server).await;
    assert_eq!(check["conclusion"], "failure", "{check}");
    assert_eq!(check["head_sha"], SHA);
    let recomputed: Value =
        serde_json::from_str(&std::fs::read_to_string(&verdict_out).unwrap()).unwrap();
    assert_eq!(recomputed["gate"], "regression");
    assert_eq!(recomputed["rule"]["min_effect"], 0.03, "the base's rule");
    let outputs = std::fs::read_to_string(&s.output).unwrap();
    assert_contains(&outputs, "verdict=regression\n");
    assert!(!out.contains(TOKEN));
}

#[tokio::test]
async fn results_of_another_matrix_or_profile_are_refused() {
    let s = setup();
    let results_path = s.artifact.join("results.json");
    let honest: RunResults =
        serde_json::from_str(&std::fs::read_to_string(&results_path).unwrap()).unwrap();
    let trusted = s.trusted_config.to_str().unwrap().to_string();
    type Forge = Box<dyn Fn(&mut RunResults)>;
    let cases: Vec<(&str, Forge)> = vec![
        (
            "matrix",
            Box::new(|r: &mut RunResults| {
                // The PR shrank the matrix to the one cell it does not slow down.
                r.matrix.concurrency = vec![1];
                r.cells.truncate(1);
            }),
        ),
        (
            "suite",
            Box::new(|r: &mut RunResults| r.suite = Some("nightly".into())),
        ),
        (
            "profile key",
            Box::new(|r: &mut RunResults| r.profile.key = "cpu-other__x__y__m0".into()),
        ),
    ];
    for (what, forge) in cases {
        let mut r = honest.clone();
        forge(&mut r);
        std::fs::write(&results_path, serde_json::to_string(&r).unwrap()).unwrap();
        let server = mock_github().await;
        let (code, out) = report(&s, &server, &["--trusted-config", &trusted]).await;
        assert_eq!(code, Some(3), "{what}: refused, fail closed\n{out}");
        assert!(
            out.contains("do not match the trusted config"),
            "{what}: {out}"
        );
        let check = posted_check(&server).await;
        assert_eq!(check["conclusion"], "failure", "{what}: {check}");
    }
}

#[tokio::test]
async fn a_verdict_file_without_a_trusted_config_never_passes() {
    let s = setup();
    // The workflow forgot `--trusted-config`: the artifact's forged `pass` is all it has.
    let server = mock_github().await;
    let forged = s.artifact.join("verdict.json");
    let verdict_out = s.artifact.with_file_name("reported-verdict.json");
    let (code, out) = report(
        &s,
        &server,
        &[
            "--verdict",
            forged.to_str().unwrap(),
            "--verdict-out",
            verdict_out.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(code, Some(2), "refused, a usage error\n{out}");
    assert!(
        out.contains("--trusted-config"),
        "names the flag to add\n{out}"
    );
    assert_contains(&out, "`pass`");
    let reqs = server.received_requests().await.unwrap();
    assert!(
        !reqs
            .iter()
            .any(|r| r.method.as_str() == "POST" || r.method.as_str() == "PATCH"),
        "nothing posted: {:?}",
        reqs.iter()
            .map(|r| r.url.path().to_string())
            .collect::<Vec<_>>()
    );
    assert!(
        !verdict_out.exists(),
        "the untrusted verdict is not passed on"
    );
    assert!(!out.contains(TOKEN));

    // A verdict file that fails stands: it can only fail the PR that produced it.
    let mut failing: Value =
        serde_json::from_str(&std::fs::read_to_string(&forged).unwrap()).unwrap();
    failing["gate"] = "regression".into();
    failing["headline"] = "1 regression".into();
    std::fs::write(&forged, failing.to_string()).unwrap();
    let server = mock_github().await;
    let (code, out) = report(&s, &server, &["--verdict", forged.to_str().unwrap()]).await;
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(posted_check(&server).await["conclusion"], "failure");
}

#[tokio::test]
async fn a_crafted_run_id_in_the_artifact_cannot_issue_workflow_commands() {
    let s = setup();
    let results_path = s.artifact.join("results.json");
    let mut r: RunResults =
        serde_json::from_str(&std::fs::read_to_string(&results_path).unwrap()).unwrap();
    r.run_id = "r1\n::error title=pwned::forged\n##[error]forged".into();
    std::fs::write(&results_path, serde_json::to_string(&r).unwrap()).unwrap();
    let server = mock_github().await;
    // No verdict: the run id is printed as it is reported.
    let (code, out) = report(&s, &server, &[]).await;
    assert_eq!(code, Some(0), "{out}");
    assert_contains(&out, "no verdict given");
    for line in out.lines() {
        assert!(
            !line.trim_start().starts_with("::error title=pwned") && !line.contains("##[error]"),
            "a workflow command from the artifact: {line:?}\n{out}"
        );
    }
}
