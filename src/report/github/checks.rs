//! Check runs: `POST /repos/{owner}/{repo}/check-runs` (created `in_progress` at run start, or
//! created already completed), `PATCH .../check-runs/{id}` to complete it, and further PATCHes
//! for annotations beyond the first 50 (GitHub takes at most 50 per request and appends them).

use std::path::{Component, Path};

use octocrab::Octocrab;
use serde::{Deserialize, Serialize};

use super::context::Token;
use super::render::{cell_message, cell_title};
use super::retry::{ApiError, RetryPolicy, with_retry};
use crate::verdict::ComparisonReport;

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
#[derive(Debug, Clone, Serialize)]
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
    let parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
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
pub(crate) async fn create(
    client: &Octocrab,
    owner: &str,
    repo: &str,
    body: &CheckRunRequest,
    retry: &RetryPolicy,
    token: Option<&Token>,
) -> Result<u64, ApiError> {
    let route = format!("/repos/{owner}/{repo}/check-runs");
    let created: CheckRunCreated = with_retry(retry, "create check run", token, || {
        client.post(&route, Some(body))
    })
    .await?;
    Ok(created.id)
}

/// Updates a check run.
pub(crate) async fn update(
    client: &Octocrab,
    owner: &str,
    repo: &str,
    id: u64,
    body: &CheckRunRequest,
    retry: &RetryPolicy,
    token: Option<&Token>,
) -> Result<(), ApiError> {
    let route = format!("/repos/{owner}/{repo}/check-runs/{id}");
    let _: serde_json::Value = with_retry(retry, "update check run", token, || {
        client.patch(&route, Some(body))
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
