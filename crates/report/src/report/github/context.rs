//! Where a report goes: the GitHub Actions environment and event payload turned into plain data.
//!
//! Read once, up front, so the rest of the reporter never touches the process environment (and
//! tests can build a context by hand). The head SHA comes from the event payload, not from
//! `GITHUB_SHA`: on `pull_request` events `GITHUB_SHA` is the temporary merge commit, and a check
//! run attached to it never shows on the PR.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

/// Default REST endpoint of github.com; GitHub Enterprise Server sets `GITHUB_API_URL`
/// (`https://HOST/api/v3`).
pub(crate) const DEFAULT_API_URL: &str = "https://api.github.com";
/// Default web host, for links to workflow runs.
pub(crate) const DEFAULT_SERVER_URL: &str = "https://github.com";

/// An API token that never prints itself (`Debug` and `Display` show `***`).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token; empty or whitespace-only strings are no token at all.
    pub fn new(raw: impl Into<String>) -> Option<Token> {
        let raw = raw.into();
        let trimmed = raw.trim();
        (!trimmed.is_empty()).then(|| Token(trimmed.to_string()))
    }

    /// The secret itself, for the HTTP client and for scrubbing error text.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Everything the reporter needs to know about the workflow run it is part of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GithubContext {
    /// REST API base (`GITHUB_API_URL`), without a trailing slash.
    pub api_url: String,
    /// Web base (`GITHUB_SERVER_URL`), for links.
    pub server_url: String,
    /// `owner/name` (`GITHUB_REPOSITORY`).
    pub repository: Option<String>,
    /// The commit the check run belongs to: the PR head from the event payload, else `GITHUB_SHA`.
    pub head_sha: Option<String>,
    /// Pull request number, when the event is about one (no number → no comment).
    pub pr_number: Option<u64>,
    /// Whether `pr_number` is bound to `head_sha` by GitHub itself (a `pull_request` payload, or
    /// a `workflow_run.pull_requests` entry whose head is the run's head). A number given by
    /// hand (`--pr`), or a head SHA given by hand, is checked against the API before a comment.
    pub pr_verified: bool,
    /// How to find the PR when the payload names none: a `workflow_run` of a fork PR, whose
    /// `pull_requests` list GitHub leaves empty (`GET /repos/{o}/{r}/pulls?head=owner:branch`).
    pub pr_lookup: Option<PrLookup>,
    /// GraphQL endpoint (`GITHUB_GRAPHQL_URL`), for the token's own login.
    pub graphql_url: String,
    /// Where the trend report is (`INFERGATE_TREND_REPORT_URL`, else
    /// `INFERGATE_TREND_REPORT_ARTIFACT`), linked from the job summary, check and comment.
    pub trend_report: Option<super::render::TrendReport>,
    /// `GITHUB_EVENT_NAME` (`pull_request`, `workflow_run`, `push`, ...).
    pub event_name: Option<String>,
    /// Link to this workflow run (`GITHUB_SERVER_URL/GITHUB_REPOSITORY/actions/runs/GITHUB_RUN_ID`).
    pub run_url: Option<String>,
    /// `GITHUB_WORKSPACE`, to make annotation paths repository-relative.
    pub workspace: Option<PathBuf>,
    /// `$GITHUB_STEP_SUMMARY`: the job summary file (appended to).
    pub step_summary: Option<PathBuf>,
    /// `$GITHUB_OUTPUT`: the step outputs file (appended to).
    pub output_file: Option<PathBuf>,
    /// `GITHUB_ACTIONS=true`: workflow commands on stdout are understood.
    pub in_actions: bool,
    /// `INFERGATE_GITHUB_TOKEN`, else `GITHUB_TOKEN`.
    pub token: Option<Token>,
    /// Problems met while reading the environment (unreadable event payload, ...).
    pub warnings: Vec<String>,
    /// The job that starts checks (run, attempt, runner), written into their `external_id`.
    pub check_owner: Option<super::checks::CheckOwner>,
}

/// The head of a `workflow_run` whose payload lists no pull request: the PR is looked up by
/// `head={owner}:{branch}` and kept only when its head SHA is the run's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrLookup {
    /// Login of the head repository's owner (the fork's owner for a fork PR).
    pub head_owner: String,
    /// `workflow_run.head_branch`.
    pub head_branch: String,
}

/// The parts of a webhook event payload we use.
#[derive(Debug, Default, Deserialize)]
struct EventPayload {
    pull_request: Option<PullRequestPayload>,
    workflow_run: Option<WorkflowRunPayload>,
    number: Option<u64>,
}

/// A pull request as a `pull_request` event or a `workflow_run.pull_requests` entry names it.
#[derive(Debug, Deserialize)]
struct PullRequestPayload {
    number: Option<u64>,
    head: Option<HeadPayload>,
}

#[derive(Debug, Deserialize)]
struct HeadPayload {
    sha: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WorkflowRunPayload {
    head_sha: Option<String>,
    head_branch: Option<String>,
    head_repository: Option<RepositoryPayload>,
    #[serde(default)]
    pull_requests: Vec<PullRequestPayload>,
}

#[derive(Debug, Deserialize)]
struct RepositoryPayload {
    owner: Option<OwnerPayload>,
}

#[derive(Debug, Deserialize)]
struct OwnerPayload {
    login: Option<String>,
}

/// What the payload says about the commit and its PR.
#[derive(Debug, Default)]
struct PayloadTarget {
    head_sha: Option<String>,
    pr_number: Option<u64>,
    pr_lookup: Option<PrLookup>,
}

impl GithubContext {
    /// Reads the real process environment.
    pub fn from_env() -> GithubContext {
        GithubContext::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the context through `lookup` (an environment variable getter), so tests need not
    /// mutate the process environment. The event payload file is read from `GITHUB_EVENT_PATH`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> GithubContext {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        let mut warnings = Vec::new();
        let url = |k: &str, default: &str| {
            (get(k).as_deref().unwrap_or(default).trim_end_matches('/')).to_string()
        };
        let (api_url, server_url) = (
            url("GITHUB_API_URL", DEFAULT_API_URL),
            url("GITHUB_SERVER_URL", DEFAULT_SERVER_URL),
        );
        let repository = get("GITHUB_REPOSITORY").filter(|r| valid_repository(r));
        let run_url = (repository.as_ref().zip(get("GITHUB_RUN_ID")))
            .map(|(repo, run_id)| format!("{server_url}/{repo}/actions/runs/{run_id}"));
        let payload = match get("GITHUB_EVENT_PATH") {
            Some(path) => std::fs::read_to_string(&path)
                .map_err(|e| ("read", e.to_string()))
                .and_then(|text| serde_json::from_str(&text).map_err(|e| ("parse", e.to_string())))
                .unwrap_or_else(|(what, e)| {
                    warnings.push(format!(
                        "could not {what} the event payload {path} ({e}); using GITHUB_SHA and no PR number"
                    ));
                    EventPayload::default()
                }),
            None => EventPayload::default(),
        };
        let target = payload.target();
        let graphql_url = url("GITHUB_GRAPHQL_URL", &graphql_url_for(&api_url));
        let trend_report = match get("INFERGATE_TREND_REPORT_URL") {
            Some(u) if u.starts_with("https://") || u.starts_with("http://") => {
                Some(super::render::TrendReport::Url(u.trim().to_string()))
            }
            Some(u) => {
                warnings.push(format!(
                    "INFERGATE_TREND_REPORT_URL=`{u}` is not an http(s) URL; not linked"
                ));
                None
            }
            None => None,
        }
        .or_else(|| {
            get("INFERGATE_TREND_REPORT_ARTIFACT")
                .map(|a| super::render::TrendReport::Artifact(a.trim().to_string()))
        });
        let token = get("INFERGATE_GITHUB_TOKEN")
            .and_then(Token::new)
            .or_else(|| get("GITHUB_TOKEN").and_then(Token::new));
        GithubContext {
            api_url,
            server_url,
            repository,
            head_sha: target.head_sha.or_else(|| get("GITHUB_SHA")),
            pr_verified: target.pr_number.is_some(),
            pr_number: target.pr_number,
            pr_lookup: target.pr_lookup,
            graphql_url,
            trend_report,
            event_name: get("GITHUB_EVENT_NAME"),
            run_url,
            workspace: get("GITHUB_WORKSPACE").map(PathBuf::from),
            step_summary: get("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            output_file: get("GITHUB_OUTPUT").map(PathBuf::from),
            in_actions: get("GITHUB_ACTIONS").is_some_and(|v| v == "true"),
            token,
            warnings,
            check_owner: super::checks::CheckOwner::from_lookup(get),
        }
    }

    /// `(owner, repo)` split from `repository`.
    pub(crate) fn owner_repo(&self) -> Option<(&str, &str)> {
        self.repository.as_deref().and_then(|r| r.split_once('/'))
    }

    /// Why the GitHub API cannot be used (no token, no repository, no commit), or `None` when it
    /// can. The text is the one notice shown in local-only mode.
    pub(crate) fn missing_for_api(&self) -> Option<String> {
        let mut missing = Vec::new();
        if self.token.is_none() {
            missing.push("a token (GITHUB_TOKEN or INFERGATE_GITHUB_TOKEN)");
        }
        if self.repository.is_none() {
            missing.push("GITHUB_REPOSITORY");
        }
        if self.head_sha.is_none() {
            missing.push("a commit SHA (event payload or GITHUB_SHA)");
        }
        (!missing.is_empty()).then(|| format!(
            "GitHub reporting is local-only (no check run, no PR comment): missing {}; the job summary, step outputs and exit code still carry the verdict",
            missing.join(", ")
        ))
    }
}

impl GithubContext {
    /// Points the report at a commit and PR given by hand (`--head-sha`, `--pr`, the action's
    /// `head-sha` / `pr-number` inputs). Neither is trusted blindly: a PR number is commented on
    /// only when the API says its head is `head_sha`, and a different head SHA unbinds the PR
    /// the payload named.
    pub fn target(&mut self, head_sha: Option<&str>, pr: Option<u64>) {
        if let Some(sha) = head_sha.map(str::trim).filter(|s| !s.is_empty())
            && self.head_sha.as_deref() != Some(sha)
        {
            self.head_sha = Some(sha.to_string());
            self.pr_verified = false;
        }
        if let Some(n) = pr
            && self.pr_number != Some(n)
        {
            self.pr_number = Some(n);
            self.pr_verified = false;
        }
    }
}

impl EventPayload {
    /// PR head SHA and number: `pull_request` events first, then `workflow_run` (the
    /// two-workflow pattern, where a privileged workflow reports on an untrusted run). A
    /// `workflow_run` PR entry counts only when its head is the run's head; a run without one
    /// (a fork PR) carries what is needed to look the PR up.
    fn target(&self) -> PayloadTarget {
        if let Some(pr) = &self.pull_request {
            return PayloadTarget {
                head_sha: pr.head.as_ref().and_then(|h| h.sha.clone()),
                pr_number: pr.number.or(self.number),
                pr_lookup: None,
            };
        }
        if let Some(run) = &self.workflow_run {
            let number = run
                .pull_requests
                .iter()
                .filter(|p| {
                    let sha = p.head.as_ref().and_then(|h| h.sha.as_deref());
                    sha.is_none() || sha == run.head_sha.as_deref()
                })
                .find_map(|p| p.number);
            let owner = (run.head_repository.as_ref())
                .and_then(|r| r.owner.as_ref())
                .and_then(|o| o.login.clone());
            let lookup = (owner.zip(run.head_branch.clone()))
                .filter(|(o, b)| number.is_none() && !o.is_empty() && !b.is_empty())
                .map(|(head_owner, head_branch)| PrLookup {
                    head_owner,
                    head_branch,
                });
            return PayloadTarget {
                head_sha: run.head_sha.clone(),
                pr_number: number,
                pr_lookup: lookup,
            };
        }
        PayloadTarget::default()
    }
}

/// The GraphQL endpoint next to a REST base: `https://api.github.com/graphql`, or on GitHub
/// Enterprise Server `https://HOST/api/graphql` for `https://HOST/api/v3`.
pub(crate) fn graphql_url_for(api_url: &str) -> String {
    let base = api_url.trim_end_matches('/');
    match base.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{base}/graphql"),
    }
}

/// `owner/name` with exactly one slash and no path tricks.
fn valid_repository(r: &str) -> bool {
    let ok = |s: &str| {
        !matches!(s, "" | "." | "..")
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    r.split_once('/').is_some_and(|(o, n)| ok(o) && ok(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;
    use std::collections::HashMap;

    fn ctx(vars: &[(&str, &str)]) -> GithubContext {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        GithubContext::from_lookup(|k| map.get(k).cloned())
    }

    /// The context of an event whose payload is `json`, with `vars` beside it.
    fn with_event(json: &str, vars: &[(&str, &str)]) -> GithubContext {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(&event, json).unwrap();
        let mut vars = vars.to_vec();
        vars.push(("GITHUB_EVENT_PATH", event.to_str().unwrap()));
        ctx(&vars)
    }

    #[test]
    fn pr_head_sha_wins_over_merge_sha() {
        let payload = r#"{"number": 7, "pull_request": {"number": 7, "head": {"sha": "abc123"}}}"#;
        let c = with_event(
            payload,
            &[
                ("GITHUB_SHA", "merge999"),
                ("GITHUB_REPOSITORY", "o/r"),
                ("GITHUB_RUN_ID", "42"),
                ("GITHUB_API_URL", "https://ghes.example/api/v3/"),
                ("GITHUB_TOKEN", "tok"),
            ],
        );
        assert_eq!(c.head_sha.as_deref(), Some("abc123"));
        assert_eq!(c.pr_number, Some(7));
        assert_eq!(c.api_url, "https://ghes.example/api/v3");
        assert_eq!(
            c.run_url.as_deref(),
            Some("https://github.com/o/r/actions/runs/42")
        );
        assert!(c.missing_for_api().is_none());
        assert_eq!(format!("{:?}", c.token), "Some(Token(***))");
    }

    #[test]
    fn workflow_run_payload_gives_head_and_pr() {
        let c = with_event(
            r#"{"workflow_run": {"head_sha": "feed", "pull_requests": [{"number": 12}]}}"#,
            &[],
        );
        assert_eq!(c.head_sha.as_deref(), Some("feed"));
        assert_eq!(c.pr_number, Some(12));
        assert!(c.pr_verified);
    }

    #[test]
    fn a_fork_workflow_run_names_the_head_to_look_up() {
        let mut c = with_event(
            r#"{"workflow_run": {"head_sha": "feed", "head_branch": "fix-kv", "pull_requests": [],
                "head_repository": {"full_name": "forker/engine", "owner": {"login": "forker"}}}}"#,
            &[],
        );
        assert_eq!(c.pr_number, None);
        assert_eq!(
            c.pr_lookup,
            Some(PrLookup {
                head_owner: "forker".into(),
                head_branch: "fix-kv".into()
            })
        );
        c.target(Some("feed"), Some(5));
        assert_eq!(c.pr_number, Some(5));
        assert!(!c.pr_verified, "a number given by hand is checked");
    }

    #[test]
    fn graphql_sits_next_to_the_rest_api() {
        assert_eq!(
            graphql_url_for("https://api.github.com"),
            "https://api.github.com/graphql"
        );
        assert_eq!(
            graphql_url_for("https://ghe.example/api/v3/"),
            "https://ghe.example/api/graphql"
        );
    }

    #[test]
    fn missing_pieces_are_named_once_and_bad_payload_is_a_warning() {
        let c = ctx(&[
            ("GITHUB_EVENT_PATH", "/nonexistent/event.json"),
            ("GITHUB_REPOSITORY", "../etc"),
        ]);
        assert!(c.repository.is_none());
        assert_eq!(c.warnings.len(), 1);
        let notice = c.missing_for_api().unwrap();
        assert_contains(&notice, "token");
        assert_contains(&notice, "GITHUB_REPOSITORY");
    }
}
