//! Bounded retries around GitHub API calls, one deadline for all of them, and the typed error
//! they end in.
//!
//! octocrab's own retry layer is switched off (it retries blindly and knows nothing of secondary
//! rate limits); this module decides instead: server errors (5xx), transport errors and rate
//! limits (429, or 403 with `retry-after` / `x-ratelimit-remaining: 0` / "secondary rate limit")
//! are retried, a bounded number of times; everything else fails at once.
//!
//! Time is bounded twice. Every request runs under a total time-out (connect, headers and the
//! whole body: a server dribbling one byte at a time cannot hold it, as a read time-out that
//! resets on every byte would), and all requests of one reporter share one [`Deadline`] (60 s
//! by default): the waits GitHub asks for (`retry-after`, `x-ratelimit-reset`) are honoured in
//! full when they fit before it, and given up at once, with the reason, when they do not.
//! Error text is scrubbed of the token and summarised to one line before it can reach a log.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::context::Token;

/// Default budget for all GitHub reporting of one command.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(60);
/// Default total time-out of one request.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// The time left for reporting: a budget that every API call (and every wait between tries)
/// spends from. Clones share the budget. The clock starts at the first call, so a reporter made
/// before a long measurement still has its whole budget when it publishes.
#[derive(Debug, Clone)]
pub struct Deadline {
    budget: Duration,
    started: Arc<Mutex<Option<Instant>>>,
}

impl Deadline {
    /// A budget of `budget` for every call made through this deadline (and its clones).
    pub fn new(budget: Duration) -> Deadline {
        Deadline {
            budget,
            started: Arc::new(Mutex::new(None)),
        }
    }

    /// The whole budget.
    pub(crate) fn budget(&self) -> Duration {
        self.budget
    }

    /// Starts the clock (idempotent) and returns the time left.
    fn start(&self) -> Duration {
        let mut started = self.started.lock().unwrap_or_else(|e| e.into_inner());
        started.get_or_insert_with(Instant::now);
        drop(started);
        self.remaining()
    }

    /// Time left (the whole budget before the first call).
    pub(crate) fn remaining(&self) -> Duration {
        let started = *self.started.lock().unwrap_or_else(|e| e.into_inner());
        started.map_or(self.budget, |t0| self.budget.saturating_sub(t0.elapsed()))
    }
}

/// How hard to try. The delays are configurable so tests run in milliseconds.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Total tries per call, the first included (at least 1).
    pub attempts: u32,
    /// Delay before the second try of a server or transport error; doubled for each further one.
    pub base_delay: Duration,
    /// Upper bound on a backoff delay. Waits GitHub asks for (`retry-after`,
    /// `x-ratelimit-reset`) are not capped by it, only by the deadline.
    pub max_delay: Duration,
    /// Total time-out of one request, body included (further bounded by the deadline).
    pub request_timeout: Duration,
    /// The budget all calls share.
    pub deadline: Deadline,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            deadline: Deadline::new(DEFAULT_DEADLINE),
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
            request_timeout: Duration::from_secs(10),
            deadline: Deadline::new(Duration::from_secs(30)),
        }
    }

    /// The same tries and delays with a fresh deadline of `budget`.
    pub fn with_deadline(mut self, budget: Duration) -> Self {
        self.deadline = Deadline::new(budget);
        self
    }

    /// The default policy, adjusted by the environment: `INFERGATE_GITHUB_DEADLINE_S` (the
    /// reporting budget, seconds), `INFERGATE_GITHUB_REQUEST_TIMEOUT_S` and
    /// `INFERGATE_GITHUB_RETRY_BASE_MS` (backoff base, for tests). Unparsable values are named
    /// in the returned warnings and ignored.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> (RetryPolicy, Vec<String>) {
        let mut policy = RetryPolicy::default();
        let mut warnings = Vec::new();
        let mut number = |name: &str| -> Option<f64> {
            let raw = lookup(name)?;
            match raw.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v > 0.0 => Some(v),
                _ => {
                    warnings.push(format!(
                        "{name}=`{raw}` is not a positive number; using the default"
                    ));
                    None
                }
            }
        };
        if let Some(s) = number("INFERGATE_GITHUB_DEADLINE_S") {
            policy.deadline = Deadline::new(Duration::from_secs_f64(s.min(86_400.0)));
        }
        if let Some(s) = number("INFERGATE_GITHUB_REQUEST_TIMEOUT_S") {
            policy.request_timeout = Duration::from_secs_f64(s.min(3_600.0));
        }
        if let Some(ms) = number("INFERGATE_GITHUB_RETRY_BASE_MS") {
            policy.base_delay = Duration::from_secs_f64(ms / 1000.0);
            policy.max_delay = policy.max_delay.min(policy.base_delay.saturating_mul(8));
        }
        (policy, warnings)
    }

    fn backoff(&self, retry_index: u32) -> Duration {
        self.base_delay
            .saturating_mul(2u32.saturating_pow(retry_index))
            .min(self.max_delay)
    }
}

/// A failed GitHub API call, with the token already scrubbed from every string.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum ApiError {
    /// GitHub answered with an error status.
    #[error("{what}: HTTP {status}: {message}")]
    Status {
        /// What was being done ("create check run").
        what: String,
        /// The HTTP status.
        status: u16,
        /// GitHub's `message`, summarised to one line.
        message: String,
        /// How long GitHub asked to wait (`retry-after`, or until `x-ratelimit-reset` when
        /// `x-ratelimit-remaining` is 0), when it did.
        retry_after: Option<Duration>,
    },
    /// No answer: connection, TLS, time-out, or an unreadable response body.
    #[error("{what}: {message}")]
    Transport { what: String, message: String },
    /// The reporting deadline left no time for this call, or for the wait GitHub asked for.
    #[error("{what}: {message}")]
    Deadline { what: String, message: String },
}

impl ApiError {
    /// The HTTP status, when GitHub answered.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            ApiError::Transport { .. } | ApiError::Deadline { .. } => None,
        }
    }

    /// A 403 that means the token lacks a permission (read-only fork token, missing
    /// `permissions:` entry) rather than a rate limit.
    pub(crate) fn is_permission_denied(&self) -> bool {
        match self {
            ApiError::Status {
                status: 403,
                message,
                retry_after: None,
                ..
            } => {
                let m = message.to_ascii_lowercase();
                m.contains("resource not accessible") || m.contains("must have admin rights")
            }
            _ => false,
        }
    }

    /// Whether trying again may help.
    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            ApiError::Transport { .. } => true,
            ApiError::Deadline { .. } => false,
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
pub(crate) fn scrub(text: &str, token: Option<&Token>) -> String {
    match token {
        Some(t) if !t.expose().is_empty() => text.replace(t.expose(), "***"),
        _ => text.to_string(),
    }
}

/// Longest summary of an error body, in characters.
const SUMMARY_CHARS: usize = 200;

/// One line for people out of an error body: an HTML page (a proxy's 502) becomes its
/// `<title>` (else its text without tags), whitespace collapses, and the result is cut at 200
/// characters.
pub(crate) fn summarise(body: &str) -> String {
    let lower = body.to_ascii_lowercase();
    let looks_html =
        lower.contains("<html") || lower.contains("<!doctype") || lower.contains("<body");
    let text = if looks_html {
        let title = lower.find("<title").and_then(|start| {
            let open_end = start + lower[start..].find('>')? + 1;
            let close = open_end + lower[open_end..].find("</title")?;
            Some(body[open_end..close].to_string())
        });
        match title.filter(|t| !t.trim().is_empty()) {
            Some(t) => format!("{} (HTML error page)", t.trim()),
            None => format!("{} (HTML error page)", strip_tags(body)),
        }
    } else {
        body.to_string()
    };
    let line = crate::report::layout::one_line(&text);
    if line.chars().count() > SUMMARY_CHARS {
        let cut: String = line.chars().take(SUMMARY_CHARS).collect();
        format!("{cut}…")
    } else {
        line
    }
}

fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len().min(4096));
    let mut in_tag = false;
    for ch in html.chars() {
        match ch {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(ch),
            _ => {}
        }
    }
    out
}

/// How long GitHub asks to wait: `retry-after` (seconds), else, when `x-ratelimit-remaining`
/// is 0, until `x-ratelimit-reset` (epoch seconds) plus one second of clock skew.
fn requested_wait(headers: &http::HeaderMap, now_epoch_s: u64) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_string())
    };
    if let Some(s) = get("retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_secs(s));
    }
    if get("x-ratelimit-remaining").as_deref() == Some("0")
        && let Some(reset) = get("x-ratelimit-reset").and_then(|v| v.parse::<u64>().ok())
    {
        return Some(Duration::from_secs(reset.saturating_sub(now_epoch_s) + 1));
    }
    None
}

/// Turns an octocrab error into an [`ApiError`] naming `what` was attempted.
pub(crate) fn classify(what: &str, err: &octocrab::Error, token: Option<&Token>) -> ApiError {
    match err {
        octocrab::Error::GitHub { source, .. } => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let retry_after = source.headers.as_ref().and_then(|h| requested_wait(h, now));
            let mut message = source.message.clone();
            if source.status_code.as_u16() == 422
                && let Some(errors) = source.errors.as_ref().filter(|e| !e.is_empty())
            {
                message = format!(
                    "{message}: {}",
                    serde_json::to_string(errors).unwrap_or_default()
                );
            }
            ApiError::Status {
                what: what.to_string(),
                status: source.status_code.as_u16(),
                message: summarise(&scrub(&message, token)),
                retry_after,
            }
        }
        other => ApiError::Transport {
            what: what.to_string(),
            message: summarise(&scrub(&first_line(&other.to_string()), token)),
        },
    }
}

/// octocrab's error display may append a backtrace; one line is enough for people.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_string()
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Upper bound on pages of a list read (100 items each), so a pathological list (a PR with
/// endless comments) cannot loop forever.
const MAX_PAGES: u32 = 50;

/// The items `keep` accepts of a paged list: `GET route` with `params`, then the
/// `Link: rel="next"` pages, at most [`MAX_PAGES`] in all.
pub(crate) async fn all_pages<T, P>(
    api: &super::Api,
    route: &str,
    params: &P,
    what: &str,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>, ApiError>
where
    T: serde::de::DeserializeOwned,
    P: serde::Serialize + ?Sized,
{
    let client = &api.client;
    let mut page: octocrab::Page<T> = api.call(what, || client.get(route, Some(params))).await?;
    let mut all = Vec::new();
    for _ in 0..MAX_PAGES {
        all.extend(page.items.drain(..).filter(|i| keep(i)));
        let next = page.next.clone();
        if next.is_none() {
            break;
        }
        match api.call(what, || client.get_page(&next)).await? {
            Some(p) => page = p,
            None => break,
        }
    }
    Ok(all)
}

/// Runs `op` until it succeeds, fails for good, `policy.attempts` tries are spent or the
/// deadline is reached. Each try is bounded by the request time-out (and the time left); the
/// waits GitHub asks for are honoured when they fit before the deadline. Returns the last
/// error, classified, scrubbed and summarised.
pub(crate) async fn with_retry<T, F, Fut>(
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
    let deadline_error = |message: String| ApiError::Deadline {
        what: what.to_string(),
        message,
    };
    let mut tried = 0;
    loop {
        let left = policy.deadline.start();
        if left.is_zero() {
            return Err(deadline_error(format!(
                "not attempted: the GitHub reporting deadline ({}) is spent",
                secs(policy.deadline.budget())
            )));
        }
        tried += 1;
        let limit = policy.request_timeout.min(left);
        let err = match tokio::time::timeout(limit, op()).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => classify(what, &e, token),
            Err(_) => ApiError::Transport {
                what: what.to_string(),
                message: format!(
                    "no complete response within {} (the request's total time-out{})",
                    secs(limit),
                    if limit < policy.request_timeout {
                        ", cut to the reporting deadline"
                    } else {
                        ""
                    }
                ),
            },
        };
        if tried >= attempts || !err.is_retryable() {
            return Err(err);
        }
        let asked = match &err {
            ApiError::Status { retry_after, .. } => *retry_after,
            _ => None,
        };
        let wait = asked.unwrap_or_else(|| policy.backoff(tried - 1));
        let left = policy.deadline.remaining();
        if wait >= left {
            let why = match asked {
                Some(a) => format!(
                    "GitHub asked to wait {} before trying again, beyond the reporting deadline ({} left of {})",
                    secs(a),
                    secs(left),
                    secs(policy.deadline.budget())
                ),
                None => format!(
                    "no time left to try again before the reporting deadline ({})",
                    secs(policy.deadline.budget())
                ),
            };
            return Err(deadline_error(format!("{err}; {why}")));
        }
        tokio::time::sleep(wait).await;
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
            ..RetryPolicy::default()
        };
        assert_eq!(p.backoff(0), Duration::from_millis(100));
        assert_eq!(p.backoff(1), Duration::from_millis(200));
        assert_eq!(p.backoff(2), Duration::from_millis(300));
    }

    #[test]
    fn rate_limit_waits_come_from_retry_after_or_the_reset() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", "45".parse().unwrap());
        assert_eq!(requested_wait(&h, 1000), Some(Duration::from_secs(45)));
        let mut h = http::HeaderMap::new();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", "1090".parse().unwrap());
        assert_eq!(requested_wait(&h, 1000), Some(Duration::from_secs(91)));
        h.insert("x-ratelimit-remaining", "12".parse().unwrap());
        assert_eq!(requested_wait(&h, 1000), None);
    }

    #[test]
    fn error_pages_become_one_line() {
        let page = "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body><h1>Bad Gateway</h1>\n<p>The proxy got an invalid response.</p></body></html>";
        assert_eq!(summarise(page), "502 Bad Gateway (HTML error page)");
        let untitled =
            "<html><body>\n<h1>Unicorn!</h1>\n\n<p>No server is available.</p></body></html>";
        assert_eq!(
            summarise(untitled),
            "Unicorn! No server is available. (HTML error page)"
        );
        let long = "x ".repeat(500);
        let s = summarise(&long);
        assert!(s.chars().count() <= 201 && !s.contains('\n'), "{s}");
    }

    #[test]
    fn the_deadline_clock_starts_at_the_first_call() {
        let d = Deadline::new(Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(d.remaining(), Duration::from_secs(5));
        let left = d.start();
        assert!(left <= Duration::from_secs(5));
        let shared = d.clone();
        assert!(shared.remaining() <= left);
    }

    #[test]
    fn policy_from_the_environment() {
        let (p, w) = RetryPolicy::from_lookup(|k| match k {
            "INFERGATE_GITHUB_DEADLINE_S" => Some("7".into()),
            "INFERGATE_GITHUB_REQUEST_TIMEOUT_S" => Some("soon".into()),
            _ => None,
        });
        assert_eq!(p.deadline.budget(), Duration::from_secs(7));
        assert_eq!(p.request_timeout, DEFAULT_REQUEST_TIMEOUT);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("INFERGATE_GITHUB_REQUEST_TIMEOUT_S"), "{w:?}");
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
