//! `infergate changes --alert` end to end: the real binary analyses a generated nightly store
//! (tests/results_gen) with a −3% step and reconciles its alerts with a local mock of GitHub
//! (wiremock on 127.0.0.1, GraphQL `viewer` included). Night 1 opens one issue; night 2, the
//! same change one run later, edits that issue (PATCH, no second POST) and never touches another
//! user's issue carrying the same marker; after `baseline accept` the issue is closed. The
//! token never appears in the output.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;

use infergate_schema::asserts::assert_contains;
use std::path::Path;
use std::process::Command;

use results_gen::{Gen, infergate, run, write};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const TOKEN: &str = "ghs_ALERTTEST_token_never_printed_77";
const REPO: &str = "acme/engine";
const BOT: &str = "github-actions[bot]";
const STEP_AT: u64 = 30;
const NIGHTS: u64 = 36;

fn night(i: u64) -> infergate::results::RunResults {
    let g = Gen {
        suite: Some("nightly".into()),
        factor: if i < STEP_AT { 1.0 } else { 0.97 },
        ..Gen::default()
    };
    let mut r = run(&g, i);
    r.labels.insert("sha".into(), format!("c{i:03}"));
    // One cell 3% slower again at the step: it moved apart from the rest of the matrix.
    if i >= STEP_AT
        && let Some(c) = r.cells.last_mut()
    {
        c.aggregate_tps *= 0.97;
        c.samples.iter_mut().for_each(|s| *s *= 0.97);
    }
    r
}

fn add(store: &Path, files: &Path, nights: std::ops::Range<u64>) {
    let mut args = vec![
        "baseline".to_string(),
        "add".into(),
        "--dir".into(),
        store.display().to_string(),
    ];
    for i in nights {
        args.push(
            write(files, &format!("n{i}.json"), &night(i))
                .display()
                .to_string(),
        );
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = infergate(&args);
    assert_eq!(code, 0, "{err}");
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap_or(Value::Null)
}

/// A mock GitHub whose issue list is `issues`; new issues get number 5.
async fn github(issues: Value) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/graphql"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"data": {"viewer": {"login": BOT}}})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/repos/{REPO}/issues")))
        .respond_with(ResponseTemplate::new(200).set_body_json(issues))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/repos/{REPO}/issues")))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"number": 5})))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(wiremock::matchers::path_regex(format!(
            "^/repos/{REPO}/issues/[0-9]+$"
        )))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"number": 5})))
        .mount(&server)
        .await;
    server
}

struct Night {
    code: Option<i32>,
    stderr: String,
    requests: Vec<Request>,
}

impl Night {
    fn to(&self, verb: &str, route: &str) -> Vec<&Request> {
        self.requests
            .iter()
            .filter(|r| r.method.as_str() == verb && r.url.path() == route)
            .collect()
    }
}

async fn alert(store: &Path, server: &MockServer) -> Night {
    let uri = server.uri();
    let store = store.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["changes", "--baseline-dir"])
            .arg(&store)
            .arg("--alert")
            .env("GITHUB_API_URL", &uri)
            .env("GITHUB_GRAPHQL_URL", format!("{uri}/graphql"))
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_SERVER_URL", "https://github.example")
            .env("GITHUB_TOKEN", TOKEN)
            .env("INFERGATE_GITHUB_RETRY_BASE_MS", "1")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITHUB_SHA")
            .env_remove("GITHUB_EVENT_PATH")
            .env_remove("INFERGATE_GITHUB_TOKEN")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stdout.contains(TOKEN) && !stderr.contains(TOKEN),
        "the token must never be printed"
    );
    let requests = server.received_requests().await.unwrap_or_default();
    for r in &requests {
        assert!(!r.url.as_str().contains(TOKEN));
    }
    Night {
        code: out.status.code(),
        stderr,
        requests,
    }
}

fn marker_in(text: &str) -> &str {
    let start = text.find("<!-- infergate-change:").expect("a marker");
    let end = start + text[start..].find("-->").expect("a closed marker") + 3;
    &text[start..end]
}

#[tokio::test]
async fn one_issue_per_change_updated_then_closed_when_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let store = tmp.path().join("store");
    add(&store, &files, 0..NIGHTS);

    // Night 1: the step is new, nobody reported it: one issue.
    let server = github(json!([])).await;
    let n1 = alert(&store, &server).await;
    assert_eq!(n1.code, Some(0), "{}", n1.stderr);
    let posts = n1.to("POST", &format!("/repos/{REPO}/issues"));
    assert_eq!(posts.len(), 1, "one issue per change: {}", n1.stderr);
    assert!(n1.requests.iter().all(|r| r.method.as_str() != "PATCH"));
    let created = body(posts[0]);
    let text = created["body"].as_str().unwrap();
    let marker = marker_in(text).to_string();
    assert_contains(&marker, "/nightly/matrix/aggregate_tps/");
    assert!(text.contains("c029..c030"), "the commit range: {text}");
    assert_contains(text, "Cells that moved apart from the rest of the matrix");
    assert_contains(text, "interval");
    assert!(
        created["title"]
            .as_str()
            .unwrap()
            .contains("aggregate tok/s"),
        "{created}"
    );
    assert_contains(&n1.stderr, "opened issue #5");
    let auth = posts[0].headers.get("authorization").unwrap();
    assert_eq!(auth.to_str().unwrap(), format!("Bearer {TOKEN}"));

    // Night 2: one more run at the new level. Our issue is found by its marker and edited; a
    // copy of the marker in someone else's issue is left alone.
    add(&store, &files, NIGHTS..NIGHTS + 1);
    let ours = json!({"number": 5, "state": "open", "title": created["title"], "body": text,
                      "user": {"login": BOT}});
    let theirs = json!({"number": 9, "state": "open", "title": "copy", "body": text,
                        "user": {"login": "mallory"}});
    let server = github(json!([theirs, ours])).await;
    let n2 = alert(&store, &server).await;
    assert_eq!(n2.code, Some(0), "{}", n2.stderr);
    assert!(n2.to("POST", &format!("/repos/{REPO}/issues")).is_empty());
    let patches = n2.to("PATCH", &format!("/repos/{REPO}/issues/5"));
    assert_eq!(patches.len(), 1, "{}", n2.stderr);
    assert!(
        n2.requests
            .iter()
            .all(|r| !r.url.path().ends_with("/issues/9")),
        "another user's issue must never be touched"
    );
    let updated = body(patches[0]);
    assert!(updated.get("state").is_none(), "still open: {updated}");
    let text2 = updated["body"].as_str().unwrap().to_string();
    let list = n2.to("GET", &format!("/repos/{REPO}/issues"));
    assert!(
        list[0].url.query().unwrap_or("").contains("state=all"),
        "closed issues count as reported"
    );

    // Accept the change: the issue is closed.
    let run_id = marker_in(&text2)
        .trim_end_matches(" -->")
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    let store_s = store.to_str().unwrap();
    let (code, _, err) = infergate(&["baseline", "accept", "--dir", store_s, "--since", &run_id]);
    assert_eq!(code, 0, "{err}");
    let ours = json!({"number": 5, "state": "open", "title": updated["title"], "body": text2,
                      "user": {"login": BOT}});
    let server = github(json!([ours])).await;
    let n3 = alert(&store, &server).await;
    assert_eq!(n3.code, Some(0), "{}", n3.stderr);
    assert!(n3.to("POST", &format!("/repos/{REPO}/issues")).is_empty());
    let patches = n3.to("PATCH", &format!("/repos/{REPO}/issues/5"));
    assert_eq!(patches.len(), 1, "{}", n3.stderr);
    let closed = body(patches[0]);
    assert_eq!(closed["state"], "closed", "{closed}");
    assert!(closed["body"].as_str().unwrap().contains("accepted"));
    assert_contains(&n3.stderr, "closed issue #5");
}

#[tokio::test]
async fn without_a_token_no_alert_is_filed_and_the_command_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let store = tmp.path().join("store");
    add(&store, &files, 0..NIGHTS);
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["changes", "--baseline-dir"])
        .arg(&store)
        .arg("--alert")
        .env_remove("GITHUB_TOKEN")
        .env_remove("INFERGATE_GITHUB_TOKEN")
        .env("GITHUB_REPOSITORY", REPO)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no alerts filed") && stderr.contains("token"),
        "{stderr}"
    );
}
