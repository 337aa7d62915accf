//! Check runs: `POST /repos/{owner}/{repo}/check-runs` (created `in_progress` at run start, or
//! created already completed), `PATCH .../check-runs/{id}` to complete it, and further PATCHes
//! for annotations beyond the first 50 (GitHub takes at most 50 per request and appends them).

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

use super::Api;
use super::retry::ApiError;
use crate::report::layout::{cell_message, cell_title};
use infergate_schema::verdict::ComparisonReport;

/// GitHub's cap on annotations per create/update request.
pub(crate) const ANNOTATIONS_PER_REQUEST: usize = 50;

/// One check-run annotation (GitHub's fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Annotation {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// `notice`, `warning` or `failure`.
    pub annotation_level: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// `output` of a check run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CheckOutput {
    pub title: String,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Annotation>,
}

/// Body of a create or update request.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CheckRunRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head_sha: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<CheckOutput>,
    /// Which job started the check ([`CheckOwner::external_id`]), so the job's cleanup step
    /// can find what a killed gate left in progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
}

/// The job that starts a check: workflow run, attempt and runner (a runner runs one job at a
/// time). GitHub ignores `details_url` for checks made with `GITHUB_TOKEN`, so the owner goes
/// into `external_id` (`infergate/{run_id}/{attempt}/{runner}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOwner {
    pub run_id: String,
    pub attempt: u32,
    pub runner: String,
}

impl CheckOwner {
    /// From `GITHUB_RUN_ID`, `GITHUB_RUN_ATTEMPT` (default 1) and `RUNNER_NAME`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Option<CheckOwner> {
        let run_id = get("GITHUB_RUN_ID").filter(|r| !r.is_empty())?;
        let runner = get("RUNNER_NAME").filter(|r| !r.is_empty())?;
        let attempt = get("GITHUB_RUN_ATTEMPT")
            .and_then(|a| a.parse().ok())
            .unwrap_or(1);
        Some(CheckOwner {
            run_id,
            attempt,
            runner,
        })
    }

    /// The check's `external_id`.
    pub(crate) fn external_id(&self) -> String {
        format!("infergate/{}/{}/{}", self.run_id, self.attempt, self.runner)
    }

    /// Whether a check with `external_id` is stale for this job: started by this job (its gate
    /// was killed), or by an earlier attempt of this workflow run (which has ended).
    pub(crate) fn owns_stale(&self, external_id: &str) -> bool {
        let parts: Vec<&str> = external_id.splitn(4, '/').collect();
        let ["infergate", run, attempt, runner] = parts[..] else {
            return false;
        };
        let Ok(attempt) = attempt.parse::<u32>() else {
            return false;
        };
        run == self.run_id
            && (attempt < self.attempt || (attempt == self.attempt && runner == self.runner))
    }
}

/// A check run as `GET .../commits/{ref}/check-runs` lists it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ListedCheckRun {
    pub id: u64,
    pub name: String,
    pub status: String,
    pub external_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CheckRunList {
    check_runs: Vec<ListedCheckRun>,
}

#[derive(Serialize)]
struct ListParams<'a> {
    status: &'a str,
    per_page: u32,
    page: u32,
}

#[derive(Debug, Deserialize)]
struct CheckRunCreated {
    id: u64,
}

/// Annotation path: repository-relative (`GITHUB_WORKSPACE` stripped), `/`-separated, no `.`.
pub(crate) fn repo_relative(path: &Path, workspace: Option<&Path>) -> String {
    let rel = match workspace {
        Some(ws) if path.is_absolute() => path.strip_prefix(ws).unwrap_or(path),
        _ => path,
    };
    let parts: Vec<_> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy()),
            _ => None,
        })
        .collect();
    parts.join("/")
}

/// One `failure` annotation per regressed or capacity-regressed cell, all pointing at the line
/// that defines the suite's matrix.
pub(crate) fn annotations(report: &ComparisonReport, path: &str, line: u32) -> Vec<Annotation> {
    let line = line.max(1);
    report
        .regressions()
        .map(|cell| Annotation {
            path: path.to_string(),
            start_line: line,
            end_line: line,
            annotation_level: "failure".to_string(),
            message: cell_message(cell, report.rule.confidence),
            title: Some(cell_title(cell)),
        })
        .collect()
}

/// Creates a check run; returns its id.
pub(crate) async fn create(api: &Api, body: &CheckRunRequest) -> Result<u64, ApiError> {
    let route = api.route("/check-runs");
    let post = || api.client.post(&route, Some(body));
    let created: CheckRunCreated = api.call("create check run", post).await?;
    Ok(created.id)
}

/// Updates check `id` with `body`, or creates the check when there is no id; the check id.
pub(crate) async fn send(
    api: &Api,
    id: Option<u64>,
    body: &CheckRunRequest,
) -> Result<u64, ApiError> {
    let Some(id) = id else {
        return create(api, body).await;
    };
    let route = api.route(&format!("/check-runs/{id}"));
    let patch = || api.client.patch(&route, Some(body));
    let _: serde_json::Value = api.call("update check run", patch).await?;
    Ok(id)
}

/// The `in_progress` check runs on commit `sha` (every page).
pub(crate) async fn list_in_progress(
    api: &Api,
    sha: &str,
) -> Result<Vec<ListedCheckRun>, ApiError> {
    let route = api.route(&format!("/commits/{sha}/check-runs"));
    let mut all = Vec::new();
    for page in 1..=10 {
        let params = ListParams {
            status: "in_progress",
            per_page: 100,
            page,
        };
        let get = || api.client.get(&route, Some(&params));
        let list: CheckRunList = api.call("list check runs", get).await?;
        let n = list.check_runs.len();
        all.extend(list.check_runs);
        if n < 100 {
            break;
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_owns_its_own_checks_and_those_of_earlier_attempts_only() {
        let me = CheckOwner {
            run_id: "99".into(),
            attempt: 2,
            runner: "gpu-1".into(),
        };
        assert_eq!(me.external_id(), "infergate/99/2/gpu-1");
        assert!(me.owns_stale("infergate/99/2/gpu-1"));
        assert!(me.owns_stale("infergate/99/1/gpu-7"));
        // A parallel job of this attempt, a later attempt, another run, someone else's id.
        assert!(!me.owns_stale("infergate/99/2/gpu-2"));
        assert!(!me.owns_stale("infergate/99/3/gpu-1"));
        assert!(!me.owns_stale("infergate/100/1/gpu-1"));
        assert!(!me.owns_stale("other/99/2/gpu-1"));
        assert!(!me.owns_stale("infergate/99/x/gpu-1"));
        let env = |k: &str| match k {
            "GITHUB_RUN_ID" => Some("99".to_string()),
            "RUNNER_NAME" => Some("gpu-1".to_string()),
            _ => None,
        };
        assert_eq!(CheckOwner::from_lookup(env).map(|o| o.attempt), Some(1));
    }

    #[test]
    fn paths_are_repo_relative() {
        assert_eq!(
            repo_relative(
                Path::new("/ws/repo/cfg/infergate.toml"),
                Some(Path::new("/ws/repo"))
            ),
            "cfg/infergate.toml"
        );
        assert_eq!(
            repo_relative(Path::new("./infergate.toml"), None),
            "infergate.toml"
        );
    }
}
