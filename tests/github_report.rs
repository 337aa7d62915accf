//! GitHub reporting against a local mock of the GitHub REST API (wiremock on 127.0.0.1): the
//! exact requests, batching, the sticky comment, retries, permissions, the Actions files, size
//! limits and escaping. No real network.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::{assert_contains, assert_lacks, assert_starts_with};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{Duration as ChronoDuration, TimeZone, Utc};
use infergate::report::github::render::{self, GITHUB_TEXT_LIMIT, Links, Outcome};
use infergate::report::github::{
    GithubContext, GithubReporter, PublishInput, RetryPolicy, check_name,
};
use infergate::report::mermaid;
use infergate::results::{
    CellResult, CellStatus, EngineIdentity, HardwareFingerprint, MatrixSpec, ProfileKey,
    ResultsSource, RunResults, RunStatus, ToolInfo,
};
use infergate::verdict::{
    BaselineSummary, CellComparison, CellVerdict, ComparisonReport, Confirmation, Direction,
    GateVerdict, MatrixTest, Metric, MetricComparison, RuleSummary,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const TOKEN: &str = "ghs_TESTTOKEN_do_not_leak_123";
const REPO: &str = "acme/engine";
const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

// ---------------------------------------------------------------- test data

fn spec(model: &str, conc: &[u32], ctx: &[u64]) -> MatrixSpec {
    MatrixSpec {
        model: model.into(),
        concurrency: conc.to_vec(),
        contexts: ctx.to_vec(),
        timing: infergate::results::CellTiming {
            duration_s: 10.0,
            warmup_s: 2.0,
            max_tokens: 256,
            unique_context_percent: 25.0,
            sub_windows: 5,
            ..infergate::results::CellTiming::DEFAULT
        },
        repetitions: 1,
    }
}

fn run(run_id: &str, model: &str, conc: &[u32], ctx: &[u64], scale: f64, age_h: i64) -> RunResults {
    let matrix = spec(model, conc, ctx);
    let hw = HardwareFingerprint {
        kind: "gpu".into(),
        gpu_model: Some("NVIDIA H200".into()),
        gpu_count: 1,
        driver_version: Some("570.1".into()),
        cpu_model: None,
    };
    let profile = ProfileKey::derive(hw, "vllm", model, &matrix);
    let mut cells = Vec::new();
    for &l in ctx {
        for &c in conc {
            let mut cell = CellResult::unmeasured(c, l, CellStatus::Ok, "");
            cell.reason = None;
            cell.aggregate_tps = scale * 100.0 * c as f64 / (1.0 + l as f64 / 65536.0);
            cell.samples = vec![cell.aggregate_tps; 5];
            cell.output_tokens = (cell.aggregate_tps * 10.0) as u64;
            cell.measured_s = 10.0;
            cells.push(cell);
        }
    }
    let started =
        Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap() - ChronoDuration::hours(age_h);
    let mut labels = BTreeMap::new();
    labels.insert(
        "git_sha".to_string(),
        format!("{:07x}", 0xabc0000 + age_h as u64),
    );
    RunResults {
        schema_version: 1,
        tool: ToolInfo {
            name: "infergate".into(),
            version: "0.1.0".into(),
        },
        run_id: run_id.into(),
        suite: Some("pr".into()),
        started_at: started,
        finished_at: None,
        status: RunStatus::Complete,
        status_reason: None,
        profile,
        engine: EngineIdentity {
            name: "vllm".into(),
            version: Some("0.11.0".into()),
            ..Default::default()
        },
        matrix,
        cells,
        telemetry: None,
        events: Vec::new(),
        source: ResultsSource::Infergate,
        labels,
        prefill: Vec::new(),
        burst: None,
        gate_failure: None,
    }
}

fn metric(change: f64, verdict: CellVerdict) -> MetricComparison {
    MetricComparison {
        metric: Metric::AggregateTps,
        direction: Direction::HigherIsBetter,
        baseline: 1234.5,
        candidate: 1234.5 * (1.0 + change),
        change,
        ci_low: change - 0.017,
        ci_high: change + 0.018,
        margin: 0.02,
        p_value: 0.001,
        p_adjusted: 0.004,
        verdict,
        check: None,
        decided_on: None,
    }
}

/// A verdict over every cell of `results`: the first `regressions` cells regress (−7.4%), the
/// next `inconclusive` are inconclusive, the rest unchanged.
fn verdict(
    results: &RunResults,
    regressions: usize,
    inconclusive: usize,
    reason_len: usize,
) -> ComparisonReport {
    let cells: Vec<CellComparison> = results
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (v, change) = if i < regressions {
                (CellVerdict::Regression, -0.074)
            } else if i < regressions + inconclusive {
                (CellVerdict::Inconclusive, -0.01)
            } else {
                (CellVerdict::Unchanged, 0.002)
            };
            CellComparison {
                provisional: false,
                history_too_short: false,
                not_compared: None,
                concurrency: c.concurrency,
                context_tokens: c.context_tokens,
                verdict: v,
                reason: (reason_len > 0).then(|| "r".repeat(reason_len).as_str().into()),
                metrics: vec![metric(change, v)],
            }
        })
        .collect();
    let headline = if regressions > 0 {
        format!("{regressions} regressions, worst −7.4% at C=8 / 32k")
    } else {
        "no regressions".to_string()
    };
    ComparisonReport {
        gate: if regressions > 0 {
            GateVerdict::Regression
        } else if inconclusive > 0 {
            GateVerdict::Insufficient
        } else {
            GateVerdict::Pass
        },
        headline,
        cells,
        ..ComparisonReport::new(
            results.profile.clone(),
            results.suite.clone(),
            vec![results.run_id.clone()],
            BaselineSummary {
                runs: Vec::new(),
                level_runs: vec!["b1".into(), "b2".into()],
                noise_runs: 10,
                metric_since: Vec::new(),
            },
            RuleSummary {
                alpha: 0.01,
                min_effect: 0.02,
                matrix_margin: 0.01,
                correction: "bonferroni".into(),
                confidence: 0.95,
                cell_effect: None,
                shares: None,
            },
        )
    }
}

struct Files {
    _dir: tempfile::TempDir,
    summary: PathBuf,
    output: PathBuf,
    config: PathBuf,
    results: PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("step_summary.md");
    let output = dir.path().join("github_output");
    let config = dir.path().join("configs").join("gate.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(
        &config,
        "[engine]\ncommand = \"x\"\n\n[suites.pr.matrix]\nconcurrency = [1]\n",
    )
    .unwrap();
    let results = dir.path().join("results.json");
    Files {
        summary,
        output,
        config,
        results,
        _dir: dir,
    }
}

fn ctx(f: &Files, pr: Option<u64>) -> GithubContext {
    GithubContext {
        server_url: "https://github.com".into(),
        repository: Some(REPO.into()),
        head_sha: Some(SHA.into()),
        pr_number: pr,
        // As a `pull_request` payload binds it: no look-up needed.
        pr_verified: true,
        event_name: Some("pull_request".into()),
        run_url: Some(format!("https://github.com/{REPO}/actions/runs/99")),
        workspace: Some(f._dir.path().to_path_buf()),
        step_summary: Some(f.summary.clone()),
        output_file: Some(f.output.clone()),
        ..Default::default()
    }
}

fn reporter(server: &MockServer, ctx: GithubContext, token: Option<&str>) -> GithubReporter {
    GithubReporter::with_api_base(&server.uri(), token, ctx, RetryPolicy::fast())
}

fn input<'a>(
    results: &'a RunResults,
    verdict: Option<&'a ComparisonReport>,
    config: &'a Path,
) -> PublishInput<'a> {
    PublishInput {
        results,
        confirmation: None,
        verdict,
        cautions: &[],
        history: &[],
        config_path: Some(config),
        matrix_line: Some(4),
        artifact_url: Some(format!(
            "https://github.com/{REPO}/actions/runs/99/artifacts/5"
        )),
        failure: None,
    }
}

async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

fn of<'a>(reqs: &'a [Request], m: &str, p: &str) -> Vec<&'a Request> {
    reqs.iter()
        .filter(|r| r.method.as_str() == m && r.url.path() == p)
        .collect()
}

/// The token is only ever in the Authorization header, never in a body or URL.
fn assert_no_token_leak(reqs: &[Request]) {
    for r in reqs {
        assert!(
            !String::from_utf8_lossy(&r.body).contains(TOKEN),
            "token in body of {}",
            r.url
        );
        assert!(!r.url.as_str().contains(TOKEN));
        let auth = r
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(auth.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    }
}

/// The login the mock's tokens act as (GraphQL `viewer`), as GITHUB_TOKEN's is.
const BOT: &str = "github-actions[bot]";

async fn mount_viewer(server: &MockServer) {
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": {"viewer": {"login": BOT}}})),
        )
        .mount(server)
        .await;
}

async fn mount_checks(server: &MockServer) {
    mount_viewer(server).await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 42})))
        .mount(server)
        .await;
    Mock::given(method("PATCH"))
        .and(path(format!("/repos/{REPO}/check-runs/42")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 42})))
        .mount(server)
        .await;
}

/// Creating a check run succeeds (id 42) at priority 2: what a test's own priority-1 failure
/// falls through to.
async fn mount_check_create_fallback(server: &MockServer) {
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 42})))
        .with_priority(2)
        .mount(server)
        .await;
}

async fn mount_empty_comments(server: &MockServer) {
    mount_pr_comments(server, 7, json!([])).await;
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn check_is_created_in_progress_then_completed_with_conclusion_and_output() {
    let server = MockServer::start().await;
    mount_checks(&server).await;
    mount_empty_comments(&server).await;
    let f = files();
    let results = run("r-now", "Qwen/Qwen3-8B", &[1, 8], &[8192, 32768], 1.0, 0);
    let v = verdict(&results, 2, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));

    let started = rep.start_check(&name).await;
    assert!(started.errors.is_empty(), "{started:?}");
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    assert!(out.notices.is_empty(), "{out:?}");

    let reqs = requests(&server).await;
    assert_no_token_leak(&reqs);
    let creates = of(&reqs, "POST", &format!("/repos/{REPO}/check-runs"));
    assert_eq!(creates.len(), 1);
    let create: Value = creates[0].body_json().unwrap();
    assert_eq!(create["status"], "in_progress");
    assert_eq!(create["head_sha"], SHA);
    assert_eq!(create["name"], name.as_str());
    assert!(name.starts_with("infergate / gpu-nvidia-h200x1__vllm__qwen-qwen3-8b__m"));
    assert!(name.ends_with(" / pr"));
    assert!(create.get("conclusion").is_none());

    let patches = of(&reqs, "PATCH", &format!("/repos/{REPO}/check-runs/42"));
    assert_eq!(patches.len(), 1);
    let done: Value = patches[0].body_json().unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["conclusion"], "failure");
    assert!(done["completed_at"].as_str().unwrap().ends_with('Z'));
    let output = &done["output"];
    // The title is the report's first line: the answer with its size, interval and cells.
    let title = output["title"].as_str().unwrap();
    assert_starts_with(title, "✗ aggregate tok/s −7.4% [−9.1, −5.6] at C=");
    assert_contains(title, "; 2 of 4 cells regressed");
    let summary = output["summary"].as_str().unwrap();
    assert!(
        summary.contains("−7.4 ✗") && summary.contains("✗ = regression"),
        "{summary}"
    );
    let text = output["text"].as_str().unwrap();
    assert!(text.contains("[workflow run](https://github.com/acme/engine/actions/runs/99)"));
    assert!(text.contains("[results artifact]("));
    let ann = output["annotations"].as_array().unwrap();
    assert_eq!(ann.len(), 2);
    assert_eq!(ann[0]["path"], "configs/gate.toml");
    assert_eq!(ann[0]["start_line"], 4);
    assert_eq!(ann[0]["end_line"], 4);
    assert_eq!(ann[0]["annotation_level"], "failure");
    assert_eq!(
        ann[0]["title"],
        "C=1 / 8k: aggregate tok/s −7.4% [−9.1, −5.6] regression"
    );
    let msg = ann[0]["message"].as_str().unwrap();
    assert_contains(msg, "1234.5 tok/s → 1143.1 tok/s");
    assert_contains(msg, "95% interval [−9.1, −5.6]");

    // The PR got one comment with the marker.
    let comments = of(&reqs, "POST", &format!("/repos/{REPO}/issues/7/comments"));
    assert_eq!(comments.len(), 1);
    let body: Value = comments[0].body_json().unwrap();
    assert!(
        body["body"]
            .as_str()
            .unwrap()
            .starts_with(&format!("<!-- infergate:{name} -->"))
    );
}

#[tokio::test]
async fn seventy_five_regressions_are_sent_in_batches_of_fifty_and_twenty_five() {
    let server = MockServer::start().await;
    mount_checks(&server).await;
    let f = files();
    let conc: Vec<u32> = (1..=15).collect();
    let results = run(
        "r-now",
        "m",
        &conc,
        &[1024, 2048, 4096, 8192, 16384],
        1.0,
        0,
    );
    let v = verdict(&results, 75, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    // No PR number: no comment, and no error about it.
    let mut rep = reporter(&server, ctx(&f, None), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty() && out.notices.is_empty(), "{out:?}");

    let reqs = requests(&server).await;
    assert_no_token_leak(&reqs);
    assert!(reqs.iter().all(|r| !r.url.path().contains("/comments")));
    let creates = of(&reqs, "POST", &format!("/repos/{REPO}/check-runs"));
    assert_eq!(creates.len(), 1, "created completed in one request");
    let first: Value = creates[0].body_json().unwrap();
    assert_eq!(first["status"], "completed");
    assert_eq!(first["conclusion"], "failure");
    assert_eq!(first["head_sha"], SHA);
    assert_eq!(first["output"]["annotations"].as_array().unwrap().len(), 50);
    let patches = of(&reqs, "PATCH", &format!("/repos/{REPO}/check-runs/42"));
    assert_eq!(patches.len(), 1);
    let second: Value = patches[0].body_json().unwrap();
    let anns = second["output"]["annotations"].as_array().unwrap();
    assert_eq!(anns.len(), 25);
    assert!(second["output"]["title"].is_string() && second["output"]["summary"].is_string());
    // All 75 distinct cells annotated exactly once.
    let mut titles: Vec<String> = first["output"]["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .chain(anns)
        .map(|a| a["title"].as_str().unwrap().to_string())
        .collect();
    titles.sort();
    titles.dedup();
    assert_eq!(titles.len(), 75);
}

fn comment_page(server: &MockServer, page: u32, items: Value, next: bool) -> Mock {
    let mut resp = ResponseTemplate::new(200).set_body_json(items);
    if next {
        resp = resp.insert_header(
            "link",
            format!(
                "<{}/repos/{REPO}/issues/7/comments?per_page=100&page={}>; rel=\"next\"",
                server.uri(),
                page + 1
            )
            .as_str(),
        );
    }
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/issues/7/comments")))
        .and(query_param("page", page.to_string()))
        .respond_with(resp)
}

fn others(n: u64) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"id": i + 1, "body": format!("LGTM {i}"), "user": {"login": "reviewer"}}))
            .collect(),
    )
}

#[tokio::test]
async fn sticky_comment_is_created_once_then_updated_in_place_across_pages() {
    let server = MockServer::start().await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192, 32768], 1.0, 0);
    let failing = verdict(&results, 2, 0, 0);
    let name = check_name(&results.profile.key, "pr");

    // Run 1: page 1 full of other comments, page 2 empty → created.
    comment_page(&server, 1, others(100), true)
        .mount(&server)
        .await;
    comment_page(&server, 2, json!([]), false)
        .mount(&server)
        .await;
    mount_checks(&server).await;
    mount_empty_comments(&server).await;
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&failing), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let reqs = requests(&server).await;
    assert_no_token_leak(&reqs);
    let gets = of(&reqs, "GET", &format!("/repos/{REPO}/issues/7/comments"));
    assert_eq!(gets.len(), 2, "followed the Link header to page 2");
    assert!(gets[0].url.query().unwrap().contains("per_page=100"));
    let posted = of(&reqs, "POST", &format!("/repos/{REPO}/issues/7/comments"));
    assert_eq!(posted.len(), 1);
    let first_body = posted[0].body_json::<Value>().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();

    // Run 2 (next push, still failing): the comment is on page 2 now → updated, not duplicated.
    server.reset().await;
    comment_page(&server, 1, others(100), true)
        .mount(&server)
        .await;
    comment_page(
        &server,
        2,
        json!([{"id": 999, "body": first_body, "user": {"login": BOT}}]),
        false,
    )
    .mount(&server)
    .await;
    mount_checks(&server).await;
    Mock::given(method("PATCH"))
        .and(path(format!("/repos/{REPO}/issues/comments/999")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 999})))
        .mount(&server)
        .await;
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&failing), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let reqs = requests(&server).await;
    assert!(of(&reqs, "POST", &format!("/repos/{REPO}/issues/7/comments")).is_empty());
    let edits = of(
        &reqs,
        "PATCH",
        &format!("/repos/{REPO}/issues/comments/999"),
    );
    assert_eq!(edits.len(), 1);
    let second_body = edits[0].body_json::<Value>().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert_contains(&second_body, "2 of 4 cells regressed");

    // Run 3 (fixed): the same comment now says so.
    server.reset().await;
    comment_page(
        &server,
        1,
        json!([{"id": 999, "body": second_body, "user": {"login": BOT}}]),
        false,
    )
    .mount(&server)
    .await;
    mount_checks(&server).await;
    Mock::given(method("PATCH"))
        .and(path(format!("/repos/{REPO}/issues/comments/999")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 999})))
        .mount(&server)
        .await;
    let passing = verdict(&results, 0, 0, 0);
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&passing), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let reqs = requests(&server).await;
    let edits = of(
        &reqs,
        "PATCH",
        &format!("/repos/{REPO}/issues/comments/999"),
    );
    assert_eq!(edits.len(), 1);
    let fixed = edits[0].body_json::<Value>().unwrap()["body"]
        .as_str()
        .unwrap()
        .to_string();
    assert_contains(&fixed, "✅");
    assert_contains(&fixed, "✅ Fixed in `0123456`");
    assert_contains(&fixed, "the previous run had 2 regressions");
    let check: Value = of(&reqs, "POST", &format!("/repos/{REPO}/check-runs"))[0]
        .body_json()
        .unwrap();
    assert_eq!(check["conclusion"], "success");
}

#[tokio::test]
async fn server_error_then_success_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"message": "Server Error"})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_check_create_fallback(&server).await;
    // A secondary rate limit on the comment list, then success.
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/issues/7/comments")))
        .respond_with(ResponseTemplate::new(403).insert_header("retry-after", "0").set_body_json(
            json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}),
        ))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_empty_comments(&server).await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let reqs = requests(&server).await;
    assert_eq!(
        of(&reqs, "POST", &format!("/repos/{REPO}/check-runs")).len(),
        2
    );
    assert_eq!(
        of(&reqs, "GET", &format!("/repos/{REPO}/issues/7/comments")).len(),
        2
    );
    assert_eq!(
        of(&reqs, "POST", &format!("/repos/{REPO}/issues/7/comments")).len(),
        1
    );
}

#[tokio::test]
async fn persistent_server_errors_are_bounded_and_reported_without_the_token() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(
            ResponseTemplate::new(502)
                .set_body_json(json!({"message": format!("bad gateway {TOKEN}")})),
        )
        .mount(&server)
        .await;
    let f = files();
    let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let mut rep = reporter(&server, ctx(&f, None), Some(TOKEN));
    let out = rep
        .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
        .await;
    assert_eq!(out.errors.len(), 1, "{out:?}");
    assert!(out.errors[0].contains("HTTP 502"), "{out:?}");
    assert!(!format!("{out:?}").contains(TOKEN));
    assert_eq!(requests(&server).await.len(), 3, "three tries, no more");
}

#[tokio::test]
async fn resource_not_accessible_names_the_missing_permission() {
    let server = MockServer::start().await;
    let denied = ResponseTemplate::new(403).set_body_json(json!({
        "message": "Resource not accessible by integration",
        "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run"
    }));
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(denied.clone())
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/issues/7/comments")))
        .respond_with(denied)
        .mount(&server)
        .await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));
    let start = rep.start_check(&name).await;
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(start.errors.is_empty() && out.errors.is_empty(), "{out:?}");
    let notices: Vec<String> = start.notices.into_iter().chain(out.notices).collect();
    assert_eq!(notices.len(), 2, "one notice per permission: {notices:?}");
    assert!(notices[0].contains("checks: write"), "{notices:?}");
    assert!(notices[1].contains("pull-requests: write"), "{notices:?}");
    let reqs = requests(&server).await;
    // Not retried, and not attempted again after the first refusal.
    assert_eq!(
        of(&reqs, "POST", &format!("/repos/{REPO}/check-runs")).len(),
        1
    );
    // The local parts still carry the verdict.
    let outputs = std::fs::read_to_string(&f.output).unwrap();
    assert!(outputs.contains("verdict=regression\n"));
}

#[tokio::test]
async fn without_a_token_everything_is_local_with_one_notice() {
    let server = MockServer::start().await;
    let f = files();
    std::fs::write(&f.summary, "# Earlier step\n\nkept\n").unwrap();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 1, 0);
    let mut rep = reporter(&server, ctx(&f, Some(7)), None);
    rep.set_results_path(&f.results);
    assert!(rep.is_local_only());
    let name = check_name(&results.profile.key, "pr");
    let start = rep.start_check(&name).await;
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    let notices: Vec<String> = start.notices.into_iter().chain(out.notices).collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("local-only") && notices[0].contains("token"));
    assert!(out.errors.is_empty());
    assert!(requests(&server).await.is_empty());

    // Job summary appended to, earlier content kept.
    let summary = std::fs::read_to_string(&f.summary).unwrap();
    assert!(summary.starts_with("# Earlier step\n\nkept\n"));
    assert_contains(&summary, "✗ aggregate tok/s −7.4%");

    // Outputs: well-formed lines, the seven keys, nothing else.
    let outputs = std::fs::read_to_string(&f.output).unwrap();
    let mut keys = Vec::new();
    for line in outputs.lines() {
        let (k, _) = line.split_once('=').expect("key=value");
        assert!(!k.is_empty() && !k.contains(' '));
        keys.push(k.to_string());
    }
    assert_eq!(
        keys,
        [
            "verdict",
            "regressions",
            "conclusion",
            "baseline-runs-needed",
            "not-gated",
            "results-path",
            "summary-path"
        ]
    );
    assert!(outputs.contains("verdict=regression\nregressions=1\n"));
    // Every metric the rule lists gated here.
    assert!(outputs.contains("\nnot-gated=\n"), "{outputs}");
    let summary_path = outputs
        .lines()
        .find_map(|l| l.strip_prefix("summary-path="))
        .unwrap();
    assert!(summary_path.ends_with("results.summary.md"));
    assert!(
        std::fs::read_to_string(summary_path)
            .unwrap()
            .contains("✗ = regression")
    );
}

#[test]
fn a_two_hundred_cell_matrix_stays_under_the_limits() {
    let conc: Vec<u32> = (1..=20).collect();
    let ctxs: Vec<u64> = (1..=10).map(|i| i * 4096).collect();
    let results = run("r-now", "m", &conc, &ctxs, 1.0, 0);
    // Long per-cell reasons make the details overflow on purpose.
    let v = verdict(&results, 120, 80, 400);
    let outcome = Outcome {
        results: &results,
        verdict: Some(&v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    };
    let links = Links {
        run_url: Some("https://github.com/acme/engine/actions/runs/99".into()),
        artifact_url: None,
        head_sha: Some(SHA.into()),
        trend_report: None,
        config: None,
    };
    let name = check_name(&results.profile.key, "pr");
    let body = render::comment_body(&name, &outcome, &links, 0);
    let summary = render::check_summary(&outcome, &links);
    let text = render::check_text(&outcome, &links);
    for (what, s) in [("comment", &body), ("summary", &summary), ("text", &text)] {
        assert!(s.len() <= GITHUB_TEXT_LIMIT, "{what}: {} bytes", s.len());
        assert!(s.chars().count() <= GITHUB_TEXT_LIMIT);
    }
    assert!(body.contains("Truncated"), "details overflow → note");
    assert!(body.contains("[full report](https://github.com/acme/engine/actions/runs/99)"));
    assert!(
        body.starts_with(&render::comment_marker(&name)),
        "marker survives truncation"
    );
    assert_eq!(
        body.matches("<details>").count(),
        body.matches("</details>").count()
    );
    let chart_history: Vec<RunResults> = (1..=3)
        .map(|i| run(&format!("b{i}"), "m", &conc, &ctxs, 1.0, i))
        .collect();
    let chart = mermaid::throughput_chart(&chart_history, &results, None, Some(&v)).unwrap();
    // One chart per headline cell, each with its bars and its baseline band.
    assert_eq!(chart.matches("xychart-beta").count(), mermaid::MAX_LINES);
    assert_eq!(chart.matches("    bar [").count(), mermaid::MAX_LINES);
    assert_eq!(chart.matches("    line [").count(), 2 * mermaid::MAX_LINES);
    assert_contains(&chart, "\"this run\"]");
}

#[test]
fn hostile_model_name_renders_safely_in_the_comment() {
    let results = run(
        "r-20261101",
        "evil|model<script>`rm -rf`</script>",
        &[1, 8],
        &[8192, 32768],
        1.0,
        0,
    );
    let v = verdict(&results, 1, 1, 0);
    let outcome = Outcome {
        results: &results,
        verdict: Some(&v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    };
    let links = Links {
        run_url: Some("https://github.com/acme/engine/actions/runs/99".into()),
        artifact_url: Some("https://github.com/acme/engine/actions/runs/99/artifacts/5".into()),
        head_sha: Some(SHA.into()),
        trend_report: None,
        config: None,
    };
    let body = render::comment_body("infergate / p / pr", &outcome, &links, 0);
    assert!(!body.contains("<script>"));
    assert!(body.contains("evil\\|model&lt;script&gt;\\`rm -rf\\`&lt;/script&gt;"));
    insta::assert_snapshot!("comment_hostile_model", body);
}

#[test]
fn the_trend_report_is_linked_from_the_summary_check_and_comment() {
    let results = run("r-20261101", "m", &[1, 8], &[8192], 0.9, 0);
    let v = verdict(&results, 1, 0, 0);
    let outcome = Outcome {
        results: &results,
        verdict: Some(&v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    };
    let mut links = Links {
        run_url: Some("https://github.com/acme/engine/actions/runs/99".into()),
        artifact_url: None,
        head_sha: Some(SHA.into()),
        trend_report: Some(render::TrendReport::Url(
            "https://acme.example/trend (1).html".into(),
        )),
        config: None,
    };
    let summary = render::job_summary("infergate / p / pr", &outcome, &links, None);
    let comment = render::comment_body("infergate / p / pr", &outcome, &links, 0);
    let check = render::check_text(&outcome, &links);
    for text in [&summary, &comment, &check] {
        assert_contains(
            text,
            "[trend report](https://acme.example/trend%281%29.html)",
        );
    }
    links.trend_report = Some(render::TrendReport::Artifact("infergate-`trend`".into()));
    let summary = render::job_summary("infergate / p / pr", &outcome, &links, None);
    let comment = render::comment_body("infergate / p / pr", &outcome, &links, 0);
    for text in [&summary, &comment] {
        assert_contains(
            text,
            "trend report: `trend.html` in the `infergate-trend` artifact",
        );
    }
}

#[test]
fn job_summary_with_history_chart_renders_safely() {
    let model = "evil|model<b>`x`";
    let results = run("r-20261101", model, &[1, 8], &[8192, 32768], 0.9, 0);
    let history: Vec<RunResults> = (1..=3)
        .map(|i| {
            run(
                &format!("b{i}"),
                model,
                &[1, 8],
                &[8192, 32768],
                1.0 + i as f64 * 0.01,
                i * 24,
            )
        })
        .collect();
    let v = verdict(&results, 1, 0, 0);
    let outcome = Outcome {
        results: &results,
        verdict: Some(&v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    };
    let links = Links {
        run_url: Some("https://github.com/acme/engine/actions/runs/99".into()),
        artifact_url: None,
        head_sha: Some(SHA.into()),
        trend_report: None,
        config: None,
    };
    let chart = mermaid::throughput_chart(&history, &results, None, Some(&v));
    let summary = render::job_summary("infergate / p / pr", &outcome, &links, chart.as_deref());
    assert!(summary.contains("xychart-beta"));
    assert!(!summary.contains("<b>"));
    insta::assert_snapshot!("job_summary_hostile_model", summary);
}

#[tokio::test]
async fn ghes_base_path_gate_failure_and_no_check_left_in_progress() {
    let server = MockServer::start().await;
    let base = format!("{}/api/v3", server.uri());
    for id in [42, 43] {
        Mock::given(method("POST"))
            .and(path(format!("/api/v3/repos/{REPO}/check-runs")))
            .and(wiremock::matchers::body_partial_json(
                json!({"name": format!("check-{id}")}),
            ))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": id})))
            .mount(&server)
            .await;
        Mock::given(method("PATCH"))
            .and(path(format!("/api/v3/repos/{REPO}/check-runs/{id}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": id})))
            .mount(&server)
            .await;
    }
    let f = files();
    let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
    let mut rep =
        GithubReporter::with_api_base(&base, Some(TOKEN), ctx(&f, None), RetryPolicy::fast());
    assert!(rep.start_check("check-42").await.errors.is_empty());
    assert!(rep.start_check("check-43").await.errors.is_empty());
    // The gate errored before comparing: check 42 completes as failure with the reason.
    let mut inp = input(&results, None, &f.config);
    inp.failure = Some("engine exited with status 1 during C=1 / 8k".into());
    let out = rep.publish("check-42", &inp).await;
    assert!(out.errors.is_empty(), "{out:?}");
    // Check 43 was started but never published: completed, not left in progress.
    let out = rep
        .complete_open_checks(
            render::Conclusion::Cancelled,
            "run aborted before this suite",
        )
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let again = rep
        .complete_open_checks(
            render::Conclusion::Cancelled,
            "run aborted before this suite",
        )
        .await;
    assert!(again.errors.is_empty());

    let reqs = requests(&server).await;
    assert_no_token_leak(&reqs);
    let p42 = of(
        &reqs,
        "PATCH",
        &format!("/api/v3/repos/{REPO}/check-runs/42"),
    );
    assert_eq!(p42.len(), 1);
    let done: Value = p42[0].body_json().unwrap();
    assert_eq!(done["conclusion"], "failure");
    assert_eq!(
        done["output"]["title"],
        "Gate error: engine exited with status 1 during C=1 / 8k"
    );
    let p43 = of(
        &reqs,
        "PATCH",
        &format!("/api/v3/repos/{REPO}/check-runs/43"),
    );
    assert_eq!(p43.len(), 1, "completed once, not twice");
    let done: Value = p43[0].body_json().unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["conclusion"], "cancelled");
    let outputs = std::fs::read_to_string(&f.output).unwrap();
    assert_starts_with(&outputs, "verdict=error\nregressions=0\n");
}

// ---------------------------------------------------------------- the binary

fn write_json(path: &Path, v: &impl serde::Serialize) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

#[tokio::test]
async fn report_binary_keeps_the_exit_code_when_github_refuses() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Resource not accessible by integration"})),
        )
        .mount(&server)
        .await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192, 32768], 1.0, 0);
    let v = verdict(&results, 2, 0, 0);
    write_json(&f.results, &results);
    let verdict_path = f.results.with_file_name("verdict.json");
    write_json(&verdict_path, &v);
    let event = f.results.with_file_name("event.json");
    std::fs::write(
        &event,
        json!({"number": 7, "pull_request": {"number": 7, "head": {"sha": SHA}}}).to_string(),
    )
    .unwrap();
    std::fs::write(&f.summary, "previous\n").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["report", "--results"])
        .arg(&f.results)
        .arg("--verdict")
        .arg(&verdict_path)
        .arg("--config")
        .arg(&f.config)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_API_URL", server.uri())
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_SHA", "merge-sha-not-used")
        .env("GITHUB_EVENT_PATH", &event)
        .env("GITHUB_EVENT_NAME", "pull_request")
        .env("GITHUB_RUN_ID", "99")
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_STEP_SUMMARY", &f.summary)
        .env("GITHUB_OUTPUT", &f.output)
        .env("INFERGATE_GITHUB_RETRY_BASE_MS", "1")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "regression exit code kept\n{stdout}\n{stderr}"
    );
    assert_contains(&stderr, "checks: write");
    assert_contains(&stderr, "pull-requests: write");
    assert_contains(
        &stdout,
        "::error title=infergate C=1 / 8k%3A aggregate tok/s −7.4%25 [−9.1%2C −5.6] regression::",
    );
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN));
    let reqs = requests(&server).await;
    assert_no_token_leak(&reqs);
    let create: Value = of(&reqs, "POST", &format!("/repos/{REPO}/check-runs"))[0]
        .body_json()
        .unwrap();
    assert_eq!(create["head_sha"], SHA, "PR head, not GITHUB_SHA");
    let summary = std::fs::read_to_string(&f.summary).unwrap();
    assert!(summary.starts_with("previous\n") && summary.contains("2 of 4 cells regressed"));
    let outputs = std::fs::read_to_string(&f.output).unwrap();
    assert_contains(&outputs, "verdict=regression\nregressions=2\n");
    assert!(!outputs.contains(TOKEN) && !summary.contains(TOKEN));
}

#[tokio::test]
async fn report_binary_rejects_unreadable_input_with_exit_2() {
    let f = files();
    std::fs::write(&f.results, "{ not json").unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["report", "--results"])
        .arg(&f.results)
        .env_remove("GITHUB_ACTIONS")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains(&stderr, "results.json");
}

#[test]
fn a_confirmed_verdict_says_why_the_engine_was_booted_twice() {
    let results = run("r-20261129", "Qwen/Qwen3-8B", &[1, 8], &[8192], 0.97, 0);
    let mut v = verdict(&results, 0, 2, 0);
    let matrix = |change: f64, p: f64, verdict: CellVerdict| MatrixTest {
        change,
        ci_low: change - 0.009,
        ci_high: change + 0.009,
        margin: 0.01,
        p_value: p,
        verdict,
        cells: 2,
        check: None,
    };
    v.matrix_test = Some(matrix(-0.031, 0.0004, CellVerdict::Regression));
    v.gate = GateVerdict::Regression;
    v.candidate_runs.push("r-20261129-confirm".into());
    v.confirmation = Some(Confirmation {
        reason: "the first boot's matrix-wide change is -2.9% [-3.9%, -1.9%] with p = 0.012 < 0.05: not proven, but leaning towards a regression | <b>".into(),
        first_boot: Some(matrix(-0.029, 0.012, CellVerdict::Inconclusive)),
        provisional_alarms: 0,
        second_results: "results-confirm.json".into(),
        used: true,
        missing: false,
    });
    let outcome = Outcome {
        results: &results,
        verdict: Some(&v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    };
    let summary = render::job_summary("infergate / p / pr", &outcome, &Links::default(), None);
    let first = summary.lines().next().unwrap_or_default();
    assert!(first.contains("confirmed on a second boot"), "{summary}");
    assert_contains(&summary, "Second boot: the first boot");
    assert_contains(&summary, "First boot alone, matrix-wide: −2.9%");
    assert!(
        !summary.contains("<b>"),
        "engine text is escaped: {summary}"
    );
    let comment = render::comment_body("infergate / p / pr", &outcome, &Links::default(), 0);
    assert_contains(&comment, "Second boot: the first boot");
    insta::assert_snapshot!("job_summary_confirmed", summary);
    // Without a confirmation there is no such line.
    v.confirmation = None;
    let summary = render::job_summary(
        "infergate / p / pr",
        &outcome_of(&results, &v),
        &Links::default(),
        None,
    );
    assert_lacks(&summary, "Second boot");
}

fn outcome_of<'a>(results: &'a RunResults, v: &'a ComparisonReport) -> Outcome<'a> {
    Outcome {
        results,
        verdict: Some(v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    }
}

/// A saturated cell and a saturation regression are named in the check-run text, the job
/// summary and the PR comment (engine text escaped).
#[test]
fn saturated_cells_are_named_in_every_report() {
    let results = run("r-sat", "Qwen/Qwen3-8B", &[1, 8], &[8192], 1.0, 0);
    let mut v = verdict(&results, 0, 0, 0);
    v.cells[0].verdict = CellVerdict::SaturationRegression;
    v.cells[0].metrics.clear();
    v.cells[0].reason = Some(
        "saturated on 2 of 2 boots (12 preemptions <b>); saturated in 0 of 20 history runs (0.0%)"
            .into(),
    );
    v.cells[1].verdict = CellVerdict::Saturated;
    v.cells[1].metrics.clear();
    v.cells[1].reason = Some("saturated on both sides: saturated in 20 of 20 history runs".into());
    v.gate = GateVerdict::Regression;
    let outcome = Outcome {
        results: &results,
        verdict: Some(&v),
        failure: None,
        cautions: &[],
        policy: infergate::policy::GatePolicy::default(),
    };
    let text = render::check_summary(&outcome, &Links::default());
    assert_contains(&text, "C=1 / 8k: saturation regression");
    assert_contains(&text, "C=8 / 8k: saturated");
    assert_lacks(&text, "<b>");
    let summary = render::job_summary("infergate / p / pr", &outcome, &Links::default(), None);
    assert!(
        summary.contains("sat ⊘") && summary.contains("sat ≈"),
        "{summary}"
    );
    let comment = render::comment_body("infergate / p / pr", &outcome, &Links::default(), 0);
    assert_contains(&comment, "sat ⊘");
    assert!(
        comment.contains("⊘ = saturation regression"),
        "legend: {comment}"
    );
}

// ---------------------------------------------------------------- which PR, whose comment

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/github-events")
        .join(name)
}

/// The context a `workflow_run` job gets: the recorded payload of a fork PR's gate run.
fn fork_run_ctx(f: &Files) -> GithubContext {
    let event = fixture("workflow_run-fork-pr.json");
    let vars: BTreeMap<&str, String> = [
        ("GITHUB_EVENT_PATH", event.display().to_string()),
        ("GITHUB_EVENT_NAME", "workflow_run".into()),
        ("GITHUB_REPOSITORY", REPO.into()),
        (
            "GITHUB_SHA",
            "ffffffffffffffffffffffffffffffffffffffff".into(),
        ),
        ("GITHUB_STEP_SUMMARY", f.summary.display().to_string()),
        ("GITHUB_OUTPUT", f.output.display().to_string()),
    ]
    .into_iter()
    .collect();
    GithubContext::from_lookup(|k| vars.get(k).cloned())
}

async fn mount_pr_comments(server: &MockServer, pr: u64, existing: Value) {
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/issues/{pr}/comments")))
        .respond_with(ResponseTemplate::new(200).set_body_json(existing))
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/issues/{pr}/comments")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 5000})))
        .mount(server)
        .await;
}

#[tokio::test]
async fn a_fork_prs_workflow_run_comments_on_the_pr_found_by_its_head() {
    let server = MockServer::start().await;
    mount_checks(&server).await;
    // GitHub lists the fork's PR for `head=forker:fix-kv-cache`, at the run's head SHA.
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/pulls")))
        .and(query_param("head", "forker:fix-kv-cache"))
        .and(query_param("state", "open"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"number": 42, "state": "open", "head": {"sha": SHA, "ref": "fix-kv-cache"}}
        ])))
        .mount(&server)
        .await;
    mount_pr_comments(&server, 42, json!([])).await;
    let f = files();
    let c = fork_run_ctx(&f);
    assert_eq!(c.pr_number, None, "the fork PR's payload names no PR");
    assert_eq!(
        c.head_sha.as_deref(),
        Some(SHA),
        "workflow_run.head_sha, not GITHUB_SHA"
    );
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    let mut rep = reporter(&server, c, Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let reqs = requests(&server).await;
    assert_no_token_leak(&reqs);
    let posted = of(&reqs, "POST", &format!("/repos/{REPO}/issues/42/comments"));
    assert_eq!(posted.len(), 1, "the comment lands on PR #42");
    let check: Value = of(&reqs, "POST", &format!("/repos/{REPO}/check-runs"))[0]
        .body_json()
        .unwrap();
    assert_eq!(check["head_sha"], SHA);
}

#[tokio::test]
async fn a_pr_whose_head_moved_on_is_not_commented() {
    let server = MockServer::start().await;
    mount_checks(&server).await;
    let newer = "fedcba9876543210fedcba9876543210fedcba98";
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/pulls")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"number": 42, "state": "open", "head": {"sha": newer}}
        ])))
        .mount(&server)
        .await;
    mount_pr_comments(&server, 42, json!([])).await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    let mut rep = reporter(&server, fork_run_ctx(&f), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    assert!(
        out.notices
            .iter()
            .any(|n| n.contains("#42") && n.contains("moved on")),
        "{out:?}"
    );
    let reqs = requests(&server).await;
    assert!(of(&reqs, "POST", &format!("/repos/{REPO}/issues/42/comments")).is_empty());
    assert!(of(&reqs, "GET", &format!("/repos/{REPO}/issues/42/comments")).is_empty());
    // The check still lands on the commit that was measured.
    assert_eq!(
        of(&reqs, "POST", &format!("/repos/{REPO}/check-runs")).len(),
        1
    );
}

#[tokio::test]
async fn a_pr_number_given_by_hand_is_checked_against_its_head() {
    for (pr_head, commented) in [
        ("fedcba9876543210fedcba9876543210fedcba98", false),
        (SHA, true),
    ] {
        let server = MockServer::start().await;
        mount_checks(&server).await;
        Mock::given(method("GET"))
            .and(path(format!("/repos/{REPO}/pulls/9")))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"number": 9, "state": "open", "head": {"sha": pr_head}})),
            )
            .mount(&server)
            .await;
        mount_pr_comments(&server, 9, json!([])).await;
        let f = files();
        let mut c = fork_run_ctx(&f);
        c.target(Some(SHA), Some(9));
        let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
        let v = verdict(&results, 1, 0, 0);
        let mut rep = reporter(&server, c, Some(TOKEN));
        let out = rep
            .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
            .await;
        assert!(out.errors.is_empty(), "{out:?}");
        let reqs = requests(&server).await;
        let posted = of(&reqs, "POST", &format!("/repos/{REPO}/issues/9/comments"));
        assert_eq!(
            posted.len(),
            usize::from(commented),
            "PR head {pr_head}: {out:?}"
        );
    }
}

#[tokio::test]
async fn another_users_marker_comment_is_never_edited() {
    let server = MockServer::start().await;
    mount_checks(&server).await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let name = check_name(&results.profile.key, "pr");
    let marker = render::comment_marker(&name);
    // Someone pasted our marker into their own comment (to have it overwritten with a pass).
    mount_pr_comments(
        &server,
        7,
        json!([{"id": 31337, "body": format!("{marker}\nall good ✅"), "user": {"login": "mallory"}}]),
    )
    .await;
    let mut rep = reporter(&server, ctx(&f, Some(7)), Some(TOKEN));
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    let reqs = requests(&server).await;
    assert!(
        of(&reqs, "PATCH", "/repos/acme/engine/issues/comments/31337").is_empty(),
        "mallory's comment is not ours to edit"
    );
    assert_eq!(
        of(&reqs, "POST", &format!("/repos/{REPO}/issues/7/comments")).len(),
        1,
        "our own comment is posted instead"
    );
    assert_eq!(
        of(&reqs, "POST", "/graphql").len(),
        1,
        "identity asked once"
    );
}

// ---------------------------------------------------------------- a difficult API

#[tokio::test]
async fn annotations_refused_with_422_post_the_check_without_them() {
    let server = MockServer::start().await;
    mount_viewer(&server).await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .and(wiremock::matchers::body_string_contains("\"annotations\""))
        .respond_with(ResponseTemplate::new(422).set_body_json(json!({
            "message": "Invalid request.\n\nFor 'properties/start_line', 0 is not a positive integer.",
            "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run"
        })))
        .with_priority(1)
        .mount(&server)
        .await;
    mount_check_create_fallback(&server).await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 2, 0, 0);
    let mut rep = reporter(&server, ctx(&f, None), Some(TOKEN));
    let out = rep
        .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    assert!(
        out.notices
            .iter()
            .any(|n| n.contains("HTTP 422") && n.contains("without them")),
        "{out:?}"
    );
    let reqs = requests(&server).await;
    let creates = of(&reqs, "POST", &format!("/repos/{REPO}/check-runs"));
    assert_eq!(creates.len(), 2, "once with, once without the annotations");
    let bare: Value = creates[1].body_json().unwrap();
    assert_eq!(bare["conclusion"], "failure");
    assert!(bare["output"].get("annotations").is_none(), "{bare}");
}

#[tokio::test]
async fn rate_limits_are_waited_out_and_given_up_when_beyond_the_deadline() {
    // x-ratelimit-remaining: 0 with a reset one second away: waited out, then posted.
    let server = MockServer::start().await;
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset", reset.to_string().as_str())
                .set_body_json(
                    json!({"message": "API rate limit exceeded for installation ID 1."}),
                ),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    mount_check_create_fallback(&server).await;
    let f = files();
    let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
    let v = verdict(&results, 0, 0, 0);
    let mut rep = reporter(&server, ctx(&f, None), Some(TOKEN));
    let out = rep
        .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
        .await;
    assert!(out.errors.is_empty(), "{out:?}");
    assert_eq!(requests(&server).await.len(), 2);

    // retry-after: an hour, with a 2 s deadline: given up at once, saying why.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3600")
                .set_body_json(json!({"message": "You have exceeded a secondary rate limit."})),
        )
        .mount(&server)
        .await;
    let f = files();
    let t0 = std::time::Instant::now();
    let mut rep = GithubReporter::with_api_base(
        &server.uri(),
        Some(TOKEN),
        ctx(&f, None),
        RetryPolicy::fast().with_deadline(std::time::Duration::from_secs(2)),
    );
    let out = rep
        .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
        .await;
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(30),
        "generous bound"
    );
    assert_eq!(out.errors.len(), 1, "{out:?}");
    assert!(
        out.errors[0].contains("asked to wait 3600.0 s") && out.errors[0].contains("deadline"),
        "{out:?}"
    );
    assert_eq!(requests(&server).await.len(), 1, "no pointless retry");
}

#[tokio::test]
async fn an_html_error_page_is_summarised_to_one_line() {
    let server = MockServer::start().await;
    let page = "<!DOCTYPE html>\n<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx</center>\n</body>\n</html>\n";
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/check-runs")))
        .respond_with(ResponseTemplate::new(502).set_body_raw(page, "text/html"))
        .mount(&server)
        .await;
    let f = files();
    let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let mut rep = reporter(&server, ctx(&f, None), Some(TOKEN));
    let out = rep
        .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
        .await;
    assert_eq!(out.errors.len(), 1, "{out:?}");
    let e = &out.errors[0];
    assert_contains(e, "HTTP 502: 502 Bad Gateway (HTML error page)");
    assert!(!e.contains('<') && !e.contains('\n'), "{e}");
}

/// A server on 127.0.0.1 that answers every request with headers at once and then a body of
/// 400 bytes, one byte every 200 ms (a read time-out that resets per byte never fires).
struct Dribbler {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Dribbler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn dribbler() -> Dribbler {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
                let _ = sock.read(&mut buf).await;
                let head = "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n";
                if sock.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for _ in 0..400 {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    if sock.write_all(b" ").await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Dribbler { url, task }
}

#[tokio::test]
async fn a_dribbled_response_is_cut_by_the_request_time_out_and_the_deadline() {
    let server = dribbler().await;
    let f = files();
    let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let mut policy = RetryPolicy::fast().with_deadline(std::time::Duration::from_secs(3));
    policy.request_timeout = std::time::Duration::from_secs(1);
    let t0 = std::time::Instant::now();
    let mut rep = GithubReporter::with_api_base(&server.url, Some(TOKEN), ctx(&f, Some(7)), policy);
    let name = check_name(&results.profile.key, "pr");
    let start = rep.start_check(&name).await;
    let out = rep
        .publish(&name, &input(&results, Some(&v), &f.config))
        .await;
    // 400 bytes at 5 per second would take 80 s per request; the whole reporting took at most
    // the deadline (3 s) plus scheduling slack.
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(40),
        "{:?}",
        t0.elapsed()
    );
    let errors: Vec<String> = start.errors.into_iter().chain(out.errors).collect();
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .any(|e| e.contains("no complete response within")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .all(|e| e.contains("no complete response") || e.contains("deadline")),
        "{errors:?}"
    );
    // The local parts still carry the verdict.
    let outputs = std::fs::read_to_string(&f.output).unwrap();
    assert_contains(&outputs, "verdict=regression\n");
}

#[tokio::test]
async fn a_slow_api_ends_within_the_deadline() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_json(json!({"id": 42}))
                .set_delay(std::time::Duration::from_secs(120)),
        )
        .mount(&server)
        .await;
    let f = files();
    let results = run("r-now", "m", &[1], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    let t0 = std::time::Instant::now();
    let mut rep = GithubReporter::with_api_base(
        &server.uri(),
        Some(TOKEN),
        ctx(&f, Some(7)),
        RetryPolicy::fast().with_deadline(std::time::Duration::from_secs(2)),
    );
    let out = rep
        .publish("infergate / p / pr", &input(&results, Some(&v), &f.config))
        .await;
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(40),
        "{:?}",
        t0.elapsed()
    );
    assert!(!out.errors.is_empty(), "{out:?}");
    assert!(out.errors.iter().any(|e| e.contains("deadline")), "{out:?}");
}

#[tokio::test]
async fn report_binary_keeps_the_exit_code_when_github_dribbles() {
    let server = dribbler().await;
    let f = files();
    let results = run("r-now", "m", &[1, 8], &[8192], 1.0, 0);
    let v = verdict(&results, 1, 0, 0);
    write_json(&f.results, &results);
    let verdict_path = f.results.with_file_name("verdict.json");
    write_json(&verdict_path, &v);
    let event = f.results.with_file_name("event.json");
    std::fs::write(
        &event,
        json!({"number": 7, "pull_request": {"number": 7, "head": {"sha": SHA}}}).to_string(),
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["report", "--results"])
        .arg(&f.results)
        .arg("--verdict")
        .arg(&verdict_path)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_API_URL", &server.url)
        .env("GITHUB_REPOSITORY", REPO)
        .env("GITHUB_EVENT_PATH", &event)
        .env("GITHUB_EVENT_NAME", "pull_request")
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_STEP_SUMMARY", &f.summary)
        .env("GITHUB_OUTPUT", &f.output)
        .env("INFERGATE_GITHUB_DEADLINE_S", "3")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "regression exit code kept\n{stderr}"
    );
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        t0.elapsed()
    );
    assert_contains(&stderr, "reporting failed");
    assert!(!stderr.contains(TOKEN));
}
