//! `infergate run` as a GitHub Actions step of a pull request against a local mock of the
//! GitHub REST API (wiremock on 127.0.0.1) that accepts every check-run and comment request,
//! so a test can read what the check run, the step summary and the step outputs said.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
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

/// A mock GitHub that accepts every check-run request (created as id [`CHECK_ID`], completed
/// whatever its id) and every comment request on pull request 7.
pub async fn accepting_github() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": CHECK_ID})))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path_regex(format!("^/repos/{REPO}/check-runs/[0-9]+$")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": CHECK_ID})))
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
    server
}

/// The id [`accepting_github`] gives a created check run.
pub const CHECK_ID: u64 = 4343;

/// The files of a pull-request step: the event payload (PR 7, head `head_sha`), and the step
/// summary and step outputs files, written empty.
pub struct PrStep {
    pub event: PathBuf,
    pub summary: PathBuf,
    pub outputs: PathBuf,
}

impl PrStep {
    /// Writes `event.json`, `summary.md` and `outputs.txt` in `dir`.
    pub fn write(dir: &Path, head_sha: &str) -> PrStep {
        std::fs::create_dir_all(dir).unwrap();
        let step = PrStep {
            event: dir.join("event.json"),
            summary: dir.join("summary.md"),
            outputs: dir.join("outputs.txt"),
        };
        std::fs::write(
            &step.event,
            json!({"number": 7, "pull_request": {"number": 7, "head": {"sha": head_sha}}})
                .to_string(),
        )
        .unwrap();
        std::fs::write(&step.summary, "").unwrap();
        std::fs::write(&step.outputs, "").unwrap();
        step
    }

    /// The step's environment against the mock GitHub at `uri`, with `token` as
    /// `GITHUB_TOKEN` (no `GITHUB_SHA`: callers that need one add it).
    pub fn env(&self, uri: &str, token: &str) -> Vec<(&'static str, OsString)> {
        vec![
            ("GITHUB_ACTIONS", "true".into()),
            ("GITHUB_API_URL", uri.into()),
            ("GITHUB_REPOSITORY", REPO.into()),
            ("GITHUB_EVENT_PATH", self.event.clone().into()),
            ("GITHUB_EVENT_NAME", "pull_request".into()),
            ("GITHUB_RUN_ID", "99".into()),
            ("GITHUB_SERVER_URL", "https://github.example".into()),
            ("GITHUB_TOKEN", token.into()),
            ("GITHUB_STEP_SUMMARY", self.summary.clone().into()),
            ("GITHUB_OUTPUT", self.outputs.clone().into()),
            ("INFERGATE_GITHUB_RETRY_BASE_MS", "1".into()),
        ]
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
    run_in_actions_after(cwd, config, suite, out, extra, "").await
}

/// [`run_in_actions`] with the step summary holding `summary_before` (an earlier step's).
pub async fn run_in_actions_after(
    cwd: &Path,
    config: &str,
    suite: &str,
    out: &Path,
    extra: &[&str],
    summary_before: &str,
) -> GateInActions {
    let server = accepting_github().await;
    let dir = tempfile::tempdir().unwrap();
    let step = PrStep::write(dir.path(), HEAD_SHA);
    std::fs::write(&step.summary, summary_before).unwrap();
    let env = step.env(&server.uri(), TOKEN);
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
            .envs(env)
            .env("GITHUB_SHA", "merge-sha-must-not-be-used")
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
        outputs: std::fs::read_to_string(&step.outputs).unwrap_or_default(),
        summary: std::fs::read_to_string(&step.summary).unwrap_or_default(),
    }
}
