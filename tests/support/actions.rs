//! `infergate run` as a GitHub Actions step of a pull request against a local mock of the
//! GitHub REST API (wiremock on 127.0.0.1) that accepts every check-run and comment request,
//! so a test can read what the check run, the step summary and the step outputs said.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

pub const TOKEN: &str = "ghs_FAILCLOSED_token_never_printed_7";
pub const REPO: &str = "acme/engine";
pub const HEAD_SHA: &str = "c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff";

/// What one gate step left behind.
pub struct GateInActions {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub requests: Vec<Request>,
    /// `$GITHUB_OUTPUT`.
    pub outputs: String,
    /// `$GITHUB_STEP_SUMMARY`.
    pub summary: String,
}

impl GateInActions {
    /// The JSON bodies of the check-run requests, in order.
    pub fn check_bodies(&self) -> Vec<Value> {
        self.requests
            .iter()
            .filter(|r| r.url.path().contains("/check-runs"))
            .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
            .collect()
    }

    /// The step output `name`.
    pub fn output(&self, name: &str) -> Option<String> {
        let prefix = format!("{name}=");
        self.outputs
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()).map(str::to_string))
    }
}

/// Runs `infergate run --config CONFIG --suite SUITE --out OUT EXTRA...` from `cwd` inside a
/// mock pull-request job.
pub async fn run_in_actions(
    cwd: &Path,
    config: &str,
    suite: &str,
    out: &Path,
    extra: &[&str],
) -> GateInActions {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 4343})))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path(format!("/repos/{REPO}/check-runs/4343")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 4343})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(format!("^/repos/{REPO}/issues/7/comments.*")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/issues/7/comments")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1})))
        .mount(&server)
        .await;

    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("event.json");
    std::fs::write(
        &event,
        json!({"number": 7, "pull_request": {"number": 7, "head": {"sha": HEAD_SHA}}}).to_string(),
    )
    .unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "").unwrap();
    let outputs = dir.path().join("outputs.txt");
    std::fs::write(&outputs, "").unwrap();

    let uri = server.uri();
    let (summary_env, outputs_env) = (summary.clone(), outputs.clone());
    let (cwd, config, suite, out) = (
        cwd.to_path_buf(),
        config.to_string(),
        suite.to_string(),
        out.to_path_buf(),
    );
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .current_dir(&cwd)
            .args(["run", "--config", &config, "--suite", &suite, "--out"])
            .arg(&out)
            .args(&extra)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_API_URL", &uri)
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_SHA", "merge-sha-must-not-be-used")
            .env("GITHUB_EVENT_PATH", &event)
            .env("GITHUB_EVENT_NAME", "pull_request")
            .env("GITHUB_RUN_ID", "99")
            .env("GITHUB_SERVER_URL", "https://github.example")
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_STEP_SUMMARY", &summary_env)
            .env("GITHUB_OUTPUT", &outputs_env)
            .env("INFERGATE_GITHUB_RETRY_BASE_MS", "1")
            .output()
            .expect("run infergate")
    })
    .await
    .unwrap();
    GateInActions {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        requests: server.received_requests().await.unwrap_or_default(),
        outputs: std::fs::read_to_string(&outputs).unwrap_or_default(),
        summary: std::fs::read_to_string(&summary).unwrap_or_default(),
    }
}
