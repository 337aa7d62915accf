//! The sticky PR comment: one per check name, found by its hidden marker among the PR's
//! comments (all pages, 100 per page) and edited in place, so a PR with 30 pushes still has one
//! infergate comment per profile and suite.

use octocrab::{Octocrab, Page};
use serde::{Deserialize, Serialize};

use super::context::Token;
use super::retry::{ApiError, RetryPolicy, with_retry};

/// The fields of an issue comment we read.
#[derive(Debug, Clone, Deserialize)]
pub struct ExistingComment {
    pub id: u64,
    #[serde(default)]
    pub body: Option<String>,
}

#[derive(Serialize)]
struct CommentBody<'a> {
    body: &'a str,
}

#[derive(Serialize)]
struct ListParams {
    per_page: u8,
    page: u32,
}

/// Upper bound on pages read (100 comments each), so a pathological PR cannot loop forever.
const MAX_PAGES: u32 = 50;

/// Finds the comment carrying `marker`, following the `Link: rel="next"` pages.
pub async fn find(
    client: &Octocrab,
    owner: &str,
    repo: &str,
    pr: u64,
    marker: &str,
    retry: &RetryPolicy,
    token: Option<&Token>,
) -> Result<Option<ExistingComment>, ApiError> {
    let route = format!("/repos/{owner}/{repo}/issues/{pr}/comments");
    let params = ListParams {
        per_page: 100,
        page: 1,
    };
    let mut page: Page<ExistingComment> = with_retry(retry, "list PR comments", token, || {
        client.get(&route, Some(&params))
    })
    .await?;
    for _ in 0..MAX_PAGES {
        if let Some(found) = page
            .items
            .iter()
            .find(|c| c.body.as_deref().is_some_and(|b| b.contains(marker)))
        {
            return Ok(Some(found.clone()));
        }
        let next = page.next.clone();
        if next.is_none() {
            return Ok(None);
        }
        match with_retry(retry, "list PR comments", token, || client.get_page(&next)).await? {
            Some(p) => page = p,
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// Creates a comment on the PR.
pub async fn create(
    client: &Octocrab,
    owner: &str,
    repo: &str,
    pr: u64,
    body: &str,
    retry: &RetryPolicy,
    token: Option<&Token>,
) -> Result<(), ApiError> {
    let route = format!("/repos/{owner}/{repo}/issues/{pr}/comments");
    let payload = CommentBody { body };
    let _: serde_json::Value = with_retry(retry, "create PR comment", token, || {
        client.post(&route, Some(&payload))
    })
    .await?;
    Ok(())
}

/// Replaces the body of an existing comment.
pub async fn update(
    client: &Octocrab,
    owner: &str,
    repo: &str,
    id: u64,
    body: &str,
    retry: &RetryPolicy,
    token: Option<&Token>,
) -> Result<(), ApiError> {
    let route = format!("/repos/{owner}/{repo}/issues/comments/{id}");
    let payload = CommentBody { body };
    let _: serde_json::Value = with_retry(retry, "update PR comment", token, || {
        client.patch(&route, Some(&payload))
    })
    .await?;
    Ok(())
}
