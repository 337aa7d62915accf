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
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// Default web host, for links to workflow runs.
pub const DEFAULT_SERVER_URL: &str = "https://github.com";

/// An API token that never prints itself (`Debug` and `Display` show `***`).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token; empty or whitespace-only strings are no token at all.
    pub fn new(raw: impl Into<String>) -> Option<Token> {
        let raw = raw.into();
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            None
        } else {
            Some(Token(trimmed.to_string()))
        }
    }

    /// The secret itself, for the HTTP client and for scrubbing error text.
    pub fn expose(&self) -> &str {
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
}

/// The parts of a webhook event payload we use.
#[derive(Debug, Default, Deserialize)]
struct EventPayload {
    #[serde(default)]
    pull_request: Option<PullRequestPayload>,
    #[serde(default)]
    workflow_run: Option<WorkflowRunPayload>,
    #[serde(default)]
    number: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct PullRequestPayload {
    #[serde(default)]
    number: Option<u64>,
    #[serde(default)]
    head: Option<HeadPayload>,
}

#[derive(Debug, Deserialize)]
struct HeadPayload {
    #[serde(default)]
    sha: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WorkflowRunPayload {
    #[serde(default)]
    head_sha: Option<String>,
    #[serde(default)]
    pull_requests: Vec<PullRequestRef>,
}

#[derive(Debug, Deserialize)]
struct PullRequestRef {
    #[serde(default)]
    number: Option<u64>,
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
        let api_url = get("GITHUB_API_URL")
            .unwrap_or_else(|| DEFAULT_API_URL.to_string())
            .trim_end_matches('/')
            .to_string();
        let server_url = get("GITHUB_SERVER_URL")
            .unwrap_or_else(|| DEFAULT_SERVER_URL.to_string())
            .trim_end_matches('/')
            .to_string();
        let repository = get("GITHUB_REPOSITORY").filter(|r| valid_repository(r));
        let run_url = match (&repository, get("GITHUB_RUN_ID")) {
            (Some(repo), Some(run_id)) => {
                Some(format!("{server_url}/{repo}/actions/runs/{run_id}"))
            }
            _ => None,
        };
        let payload = match get("GITHUB_EVENT_PATH") {
            Some(path) => match std::fs::read_to_string(&path) {
                Ok(text) => match serde_json::from_str::<EventPayload>(&text) {
                    Ok(p) => p,
                    Err(e) => {
                        warnings.push(format!(
                            "could not parse the event payload {path} ({e}); using GITHUB_SHA and no PR number"
                        ));
                        EventPayload::default()
                    }
                },
                Err(e) => {
                    warnings.push(format!(
                        "could not read the event payload {path} ({e}); using GITHUB_SHA and no PR number"
                    ));
                    EventPayload::default()
                }
            },
            None => EventPayload::default(),
        };
        let (payload_sha, payload_pr) = payload.head_and_number();
        let token = get("INFERGATE_GITHUB_TOKEN")
            .and_then(Token::new)
            .or_else(|| get("GITHUB_TOKEN").and_then(Token::new));
        GithubContext {
            api_url,
            server_url,
            repository,
            head_sha: payload_sha.or_else(|| get("GITHUB_SHA")),
            pr_number: payload_pr,
            event_name: get("GITHUB_EVENT_NAME"),
            run_url,
            workspace: get("GITHUB_WORKSPACE").map(PathBuf::from),
            step_summary: get("GITHUB_STEP_SUMMARY").map(PathBuf::from),
            output_file: get("GITHUB_OUTPUT").map(PathBuf::from),
            in_actions: get("GITHUB_ACTIONS").is_some_and(|v| v == "true"),
            token,
            warnings,
        }
    }

    /// `(owner, repo)` split from `repository`.
    pub fn owner_repo(&self) -> Option<(&str, &str)> {
        self.repository.as_deref().and_then(|r| r.split_once('/'))
    }

    /// Why the GitHub API cannot be used (no token, no repository, no commit), or `None` when it
    /// can. The text is the one notice shown in local-only mode.
    pub fn missing_for_api(&self) -> Option<String> {
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
        if missing.is_empty() {
            None
        } else {
            Some(format!(
                "GitHub reporting is local-only (no check run, no PR comment): missing {}; the job summary, step outputs and exit code still carry the verdict",
                missing.join(", ")
            ))
        }
    }
}

impl EventPayload {
    /// PR head SHA and number: `pull_request` events first, then `workflow_run` (the
    /// two-workflow pattern, where a privileged workflow reports on an untrusted run).
    fn head_and_number(&self) -> (Option<String>, Option<u64>) {
        if let Some(pr) = &self.pull_request {
            let sha = pr.head.as_ref().and_then(|h| h.sha.clone());
            return (sha, pr.number.or(self.number));
        }
        if let Some(run) = &self.workflow_run {
            let number = run.pull_requests.iter().find_map(|p| p.number);
            return (run.head_sha.clone(), number);
        }
        (None, None)
    }
}

/// `owner/name` with exactly one slash and no path tricks.
fn valid_repository(r: &str) -> bool {
    match r.split_once('/') {
        Some((o, n)) => {
            let ok = |s: &str| {
                !s.is_empty()
                    && s != "."
                    && s != ".."
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            };
            ok(o) && ok(n)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn ctx(vars: &[(&str, &str)]) -> GithubContext {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        GithubContext::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn pr_head_sha_wins_over_merge_sha() {
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(
            &event,
            r#"{"number": 7, "pull_request": {"number": 7, "head": {"sha": "abc123"}}}"#,
        )
        .unwrap();
        let c = ctx(&[
            ("GITHUB_SHA", "merge999"),
            ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_RUN_ID", "42"),
            ("GITHUB_API_URL", "https://ghes.example/api/v3/"),
            ("GITHUB_TOKEN", "tok"),
        ]);
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
        let dir = tempfile::tempdir().unwrap();
        let event = dir.path().join("event.json");
        std::fs::write(
            &event,
            r#"{"workflow_run": {"head_sha": "feed", "pull_requests": [{"number": 12}]}}"#,
        )
        .unwrap();
        let c = ctx(&[("GITHUB_EVENT_PATH", event.to_str().unwrap())]);
        assert_eq!(c.head_sha.as_deref(), Some("feed"));
        assert_eq!(c.pr_number, Some(12));
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
        assert!(notice.contains("token"), "{notice}");
        assert!(notice.contains("GITHUB_REPOSITORY"), "{notice}");
    }
}
