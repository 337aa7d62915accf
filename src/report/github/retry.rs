//! Bounded retries around GitHub API calls, and the typed error they end in.
//!
//! octocrab's own retry layer is switched off (it retries blindly and knows nothing of secondary
//! rate limits); this module decides instead: server errors (5xx), transport errors and rate
//! limits (429, or 403 with `retry-after` / "secondary rate limit") are retried with exponential
//! backoff, a bounded number of times; everything else fails at once. Error text is scrubbed of
//! the token before it can reach a log.

use std::future::Future;
use std::time::Duration;

use super::context::Token;

/// How hard to try. The base delay is configurable so tests run in milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Total tries per call, the first included (at least 1).
    pub attempts: u32,
    /// Delay before the second try; doubled for each further one.
    pub base_delay: Duration,
    /// Upper bound on any single delay, `retry-after` included.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// A policy with tiny delays, for tests against a local mock.
    pub fn fast() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
        }
    }

    fn delay(&self, retry_index: u32, retry_after: Option<Duration>) -> Duration {
        let backoff = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry_index));
        retry_after.unwrap_or(backoff).min(self.max_delay)
    }
}

/// A failed GitHub API call, with the token already scrubbed from every string.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// GitHub answered with an error status.
    #[error("{what}: HTTP {status}: {message}")]
    Status {
        /// What was being done ("create check run").
        what: String,
        status: u16,
        /// GitHub's `message`.
        message: String,
        /// `retry-after` (seconds), when sent.
        retry_after: Option<Duration>,
    },
    /// No answer: connection, TLS, time-out, or an unreadable response body.
    #[error("{what}: {message}")]
    Transport { what: String, message: String },
}

impl ApiError {
    /// The HTTP status, when GitHub answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            ApiError::Transport { .. } => None,
        }
    }

    /// A 403 that means the token lacks a permission (read-only fork token, missing
    /// `permissions:` entry) rather than a rate limit.
    pub fn is_permission_denied(&self) -> bool {
        match self {
            ApiError::Status {
                status: 403,
                message,
                ..
            } => {
                let m = message.to_ascii_lowercase();
                m.contains("resource not accessible") || m.contains("must have admin rights")
            }
            _ => false,
        }
    }

    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Transport { .. } => true,
            ApiError::Status {
                status,
                message,
                retry_after,
                ..
            } => {
                *status >= 500
                    || *status == 429
                    || (*status == 403
                        && (retry_after.is_some()
                            || message
                                .to_ascii_lowercase()
                                .contains("secondary rate limit")))
            }
        }
    }
}

/// Replaces every occurrence of the token with `***`.
pub fn scrub(text: &str, token: Option<&Token>) -> String {
    match token {
        Some(t) if !t.expose().is_empty() => text.replace(t.expose(), "***"),
        _ => text.to_string(),
    }
}

/// Turns an octocrab error into an [`ApiError`] naming `what` was attempted.
pub fn classify(what: &str, err: &octocrab::Error, token: Option<&Token>) -> ApiError {
    match err {
        octocrab::Error::GitHub { source, .. } => {
            let retry_after = source
                .headers
                .as_ref()
                .and_then(|h| h.get(http::header::RETRY_AFTER))
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            ApiError::Status {
                what: what.to_string(),
                status: source.status_code.as_u16(),
                message: scrub(&source.message, token),
                retry_after,
            }
        }
        other => ApiError::Transport {
            what: what.to_string(),
            message: scrub(&first_line(&other.to_string()), token),
        },
    }
}

/// octocrab's error display may append a backtrace; one line is enough for people.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_string()
}

/// Runs `op` until it succeeds, fails for good, or `policy.attempts` tries are spent.
/// Returns the last error, classified and scrubbed.
pub async fn with_retry<T, F, Fut>(
    policy: &RetryPolicy,
    what: &str,
    token: Option<&Token>,
    mut op: F,
) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, octocrab::Error>>,
{
    let attempts = policy.attempts.max(1);
    let mut tried = 0;
    loop {
        tried += 1;
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let err = classify(what, &e, token);
                if tried >= attempts || !err.is_retryable() {
                    return Err(err);
                }
                let retry_after = match &err {
                    ApiError::Status { retry_after, .. } => *retry_after,
                    ApiError::Transport { .. } => None,
                };
                tokio::time::sleep(policy.delay(tried - 1, retry_after)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str, retry_after: Option<u64>) -> ApiError {
        ApiError::Status {
            what: "x".into(),
            status: code,
            message: message.into(),
            retry_after: retry_after.map(Duration::from_secs),
        }
    }

    #[test]
    fn classifies_what_to_retry() {
        assert!(status(502, "Bad gateway", None).is_retryable());
        assert!(status(429, "slow down", None).is_retryable());
        assert!(status(403, "You have exceeded a secondary rate limit", None).is_retryable());
        assert!(status(403, "whatever", Some(1)).is_retryable());
        let denied = status(403, "Resource not accessible by integration", None);
        assert!(!denied.is_retryable());
        assert!(denied.is_permission_denied());
        assert!(!status(422, "Validation Failed", None).is_retryable());
        assert!(!status(404, "Not Found", None).is_retryable());
    }

    #[test]
    fn backoff_doubles_and_is_bounded() {
        let p = RetryPolicy {
            attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(300),
        };
        assert_eq!(p.delay(0, None), Duration::from_millis(100));
        assert_eq!(p.delay(1, None), Duration::from_millis(200));
        assert_eq!(p.delay(2, None), Duration::from_millis(300));
        assert_eq!(
            p.delay(0, Some(Duration::from_secs(60))),
            Duration::from_millis(300)
        );
    }

    #[test]
    fn scrub_removes_the_token() {
        let t = Token::new("ghs_secret123").unwrap();
        assert_eq!(
            scrub("bad credentials for ghs_secret123!", Some(&t)),
            "bad credentials for ***!"
        );
    }
}
