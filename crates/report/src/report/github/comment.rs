//! The sticky PR comment: one per check name, found by its hidden marker among the PR's
//! comments (all pages, 100 per page) that the token's own identity wrote, and edited in place,
//! so a PR with 30 pushes still has one infergate comment per profile and suite. A marker in
//! anyone else's comment is text like any other: never edited.
//!
//! The identity comes from GraphQL's `viewer { login }`, which answers for every kind of token:
//! a personal token (the user's login), the workflow's `GITHUB_TOKEN` (`github-actions[bot]`)
//! and a GitHub App installation token (`<app-slug>[bot]`). REST has no such call for all of
//! them: `GET /user` is refused to installation tokens ("Resource not accessible by
//! integration") and `GET /app` needs the App's JWT, not an installation token.

use octocrab::Octocrab;
use serde::{Deserialize, Serialize};

use super::Api;
use super::context::Token;
use super::retry::{ApiError, RetryPolicy, all_pages, with_retry};

/// The fields of an issue comment we read.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ExistingComment {
    pub id: u64,
    pub body: Option<String>,
    pub user: Option<Author>,
}

/// A comment's author.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Author {
    pub login: String,
}

impl ExistingComment {
    /// Whether `login` wrote it.
    pub(crate) fn written_by(&self, login: &str) -> bool {
        is_login(self.user.as_ref(), login)
    }
}

/// Whether `user` is `login` (GitHub logins compare case-insensitively).
pub(crate) fn is_login(user: Option<&Author>, login: &str) -> bool {
    user.is_some_and(|u| u.login.eq_ignore_ascii_case(login))
}

#[derive(Serialize)]
struct GraphqlQuery<'a> {
    query: &'a str,
}

#[derive(Deserialize)]
struct ViewerResponse {
    data: Option<ViewerData>,
    errors: Option<Vec<serde_json::Value>>,
}

#[derive(Deserialize)]
struct ViewerData {
    viewer: Viewer,
}

#[derive(Deserialize)]
struct Viewer {
    login: String,
}

/// The login the token acts as (`POST {graphql}` with `query { viewer { login } }`); `client`
/// is based at the GraphQL endpoint's parent, `route` is its last segment.
pub(crate) async fn own_login(
    client: &Octocrab,
    route: &str,
    retry: &RetryPolicy,
    token: Option<&Token>,
) -> Result<String, ApiError> {
    let body = GraphqlQuery {
        query: "query { viewer { login } }",
    };
    let answer: ViewerResponse = with_retry(retry, "read the token's identity", token, || {
        client.post(route, Some(&body))
    })
    .await?;
    match answer.data {
        Some(d) if !d.viewer.login.trim().is_empty() => Ok(d.viewer.login),
        _ => Err(ApiError::Status {
            what: "read the token's identity".into(),
            status: 200,
            message: super::retry::summarise(&format!(
                "GraphQL gave no viewer login: {}",
                serde_json::to_string(&answer.errors).unwrap_or_default()
            )),
            retry_after: None,
        }),
    }
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

/// Every comment carrying `marker`, whoever wrote it, following the `Link: rel="next"` pages
/// (the caller keeps only its own: [`ExistingComment::written_by`]).
pub(crate) async fn find_marked(
    api: &Api,
    pr: u64,
    marker: &str,
) -> Result<Vec<ExistingComment>, ApiError> {
    let route = api.route(&format!("/issues/{pr}/comments"));
    let params = ListParams {
        per_page: 100,
        page: 1,
    };
    let marked = |c: &ExistingComment| c.body.as_deref().is_some_and(|b| b.contains(marker));
    all_pages(api, &route, &params, "list PR comments", marked).await
}

/// Creates a comment on the PR.
pub(crate) async fn create(api: &Api, pr: u64, body: &str) -> Result<(), ApiError> {
    let route = api.route(&format!("/issues/{pr}/comments"));
    let payload = CommentBody { body };
    let post = || api.client.post(&route, Some(&payload));
    let _: serde_json::Value = api.call("create PR comment", post).await?;
    Ok(())
}

/// Replaces the body of an existing comment.
pub(crate) async fn update(api: &Api, id: u64, body: &str) -> Result<(), ApiError> {
    let route = api.route(&format!("/issues/comments/{id}"));
    let payload = CommentBody { body };
    let patch = || api.client.patch(&route, Some(&payload));
    let _: serde_json::Value = api.call("update PR comment", patch).await?;
    Ok(())
}
