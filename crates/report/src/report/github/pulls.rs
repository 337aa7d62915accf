//! Which pull request a report belongs to, when the event payload does not bind one to the
//! commit: a `workflow_run` of a fork PR (GitHub leaves `workflow_run.pull_requests` empty for
//! those) is looked up with `GET /repos/{owner}/{repo}/pulls?head={owner}:{branch}`, and a PR
//! number given by hand is read with `GET /repos/{owner}/{repo}/pulls/{number}`. Either is
//! kept only when the PR's head SHA is the reported commit: a PR that moved on since the run
//! gets no comment about a commit it no longer contains.

use serde::{Deserialize, Serialize};

use super::Api;
use super::context::PrLookup;
use super::render::short_sha;
use super::retry::ApiError;

/// The fields of a pull request we read.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PullRequest {
    pub number: u64,
    pub head: PullHead,
    pub state: Option<String>,
}

/// `head` of a pull request.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PullHead {
    pub sha: String,
}

#[derive(Serialize)]
struct ListParams<'a> {
    head: &'a str,
    state: &'a str,
    per_page: u8,
}

/// What the look-up found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    /// The PR whose head is the commit.
    Pr(u64),
    /// No PR to comment on, and why (for people).
    NoPr(String),
}

/// The open PR from `lookup`'s head whose head SHA is `head_sha`.
pub(crate) async fn find_by_head(
    api: &Api,
    lookup: &PrLookup,
    head_sha: &str,
) -> Result<Resolved, ApiError> {
    let route = api.route("/pulls");
    let head = format!("{}:{}", lookup.head_owner, lookup.head_branch);
    let params = ListParams {
        head: &head,
        state: "open",
        per_page: 100,
    };
    let get = || api.client.get(&route, Some(&params));
    let pulls: Vec<PullRequest> = api.call("find the pull request", get).await?;
    if let Some(pr) = pulls.iter().find(|p| p.head.sha == head_sha) {
        return Ok(Resolved::Pr(pr.number));
    }
    Ok(Resolved::NoPr(match pulls.first() {
        Some(pr) => format!(
            "no PR comment: the open PR from {head} (#{}) is at {} now, not at the reported commit {} (it moved on; its own run will report)",
            pr.number,
            short_sha(&pr.head.sha),
            short_sha(head_sha)
        ),
        None => format!("no PR comment: no open pull request from {head}"),
    }))
}

/// PR `number`, kept only when its head SHA is `head_sha`.
pub(crate) async fn check_number(
    api: &Api,
    number: u64,
    head_sha: &str,
) -> Result<Resolved, ApiError> {
    let route = api.route(&format!("/pulls/{number}"));
    let get = || api.client.get(&route, None::<&()>);
    let pr: PullRequest = api.call("read the pull request", get).await?;
    if pr.head.sha == head_sha {
        Ok(Resolved::Pr(pr.number))
    } else {
        Ok(Resolved::NoPr(format!(
            "no PR comment: PR #{number}'s head is {}, not the reported commit {}{}",
            short_sha(&pr.head.sha),
            short_sha(head_sha),
            if pr.state.as_deref() == Some("open") {
                " (it moved on; its own run will report)"
            } else {
                ""
            }
        )))
    }
}
