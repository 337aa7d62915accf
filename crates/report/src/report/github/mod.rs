//! GitHub reporting: a check run with annotations, one sticky PR comment per profile and suite,
//! the job summary, step outputs and workflow commands (see `docs/github-reporting.md`).
//!
//! The reporter is best-effort by design: whatever GitHub answers, [`GithubReporter::publish`]
//! returns notices and errors for people and never changes the verdict or the exit code. The
//! parts that need no token (job summary, outputs, workflow commands) are written first, so a
//! fork PR with a read-only token still shows the verdict.

pub mod alerts;
pub mod checks;
pub mod comment;
pub mod context;
pub mod pulls;
pub mod render;
pub mod retry;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use octocrab::Octocrab;

pub use context::{GithubContext, PrLookup, Token};
pub use retry::{ApiError, Deadline, RetryPolicy};

use crate::report::{actions, mermaid};
use checks::{ANNOTATIONS_PER_REQUEST, CheckOutput, CheckRunRequest};
use infergate_schema::policy::GatePolicy;
use infergate_schema::results::RunResults;
use infergate_schema::verdict::ComparisonReport;
use render::{Conclusion, Links};

/// What every infergate check name starts with.
pub const CHECK_NAME_PREFIX: &str = "infergate / ";

/// Stable check name, so branch protection can require it: `infergate / <profile> / <suite>`.
pub fn check_name(profile_key: &str, suite: &str) -> String {
    format!("{CHECK_NAME_PREFIX}{profile_key} / {suite}")
}

/// What to publish at the end of a run.
#[derive(Debug, Clone)]
pub struct PublishInput<'a> {
    /// The candidate's results.
    pub results: &'a RunResults,
    /// The confirmation boot's results, when the gate booted twice (charted beside the first).
    pub confirmation: Option<&'a RunResults>,
    /// `None` = no baseline yet, or the gate errored before comparing.
    pub verdict: Option<&'a ComparisonReport>,
    /// What a reader should know before trusting the figures ([`render::Outcome::cautions`]).
    pub cautions: &'a [String],
    /// Baseline runs, for the Mermaid chart; may be empty.
    pub history: &'a [RunResults],
    /// File the suite's matrix is defined in (annotations point at it).
    pub config_path: Option<&'a Path>,
    /// 1-based line of the suite's matrix in that file.
    pub matrix_line: Option<u32>,
    /// Link to the uploaded results artifact.
    pub artifact_url: Option<String>,
    /// The gate errored with this reason: the check completes as `failure` with it.
    pub failure: Option<String>,
}

/// What reporting did not manage; for people only, never for the exit code.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PublishOutcome {
    /// Expected limitations (local-only mode, read-only token) said once.
    pub notices: Vec<String>,
    /// Reporting failures (after retries), token scrubbed.
    pub errors: Vec<String>,
}

impl PublishOutcome {
    fn merge(&mut self, other: PublishOutcome) {
        self.notices.extend(other.notices);
        self.errors.extend(other.errors);
    }

    /// Prints notices and errors on stderr: as workflow commands inside Actions (so they show
    /// on the job page), as plain lines elsewhere.
    pub fn print(&self, in_actions: bool) {
        let unaffected = "(the verdict and exit code are unaffected)";
        let command = |kind, title, text: &str| {
            let line = actions::command(kind, &[("title", title)], text);
            infergate_io::stdio::write_workflow_command(&line, true);
        };
        for n in &self.notices {
            if in_actions {
                command("notice", "infergate", n);
            } else {
                errln!("{}", crate::report::console::kind_line("notice", n));
            }
        }
        for e in &self.errors {
            if in_actions {
                command(
                    "warning",
                    "infergate reporting failed",
                    &format!("{e} {unaffected}"),
                );
            } else {
                let e = infergate_io::untrusted_text::console(e);
                errln!("warning: reporting failed: {e} {unaffected}");
            }
        }
    }
}

/// Posts to GitHub and writes the Actions files. Holds the octocrab client (none in local-only
/// mode), the context and the retry policy, and remembers check ids between start and publish.
pub struct GithubReporter {
    client: Option<Octocrab>,
    /// A client based at the GraphQL endpoint's parent, and the endpoint's last segment.
    graphql: Option<(Octocrab, String)>,
    /// The token's own login, once asked (`Err`: why it is unknown).
    own_login: Option<Result<String, String>>,
    /// The PR to comment on, once resolved (`None` inside: no PR, already said why).
    resolved_pr: Option<Option<u64>>,
    ctx: GithubContext,
    retry: RetryPolicy,
    check_ids: HashMap<String, u64>,
    /// Started (`in_progress`) and not yet completed.
    open_checks: BTreeSet<String>,
    checks_denied: bool,
    comments_denied: bool,
    pending: PublishOutcome,
    results_path: Option<PathBuf>,
    summary_path: Option<PathBuf>,
    policy: GatePolicy,
    /// The gate config's name, for the report's next steps ([`Self::set_config`]).
    config: Option<String>,
}

impl std::fmt::Debug for GithubReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GithubReporter")
            .field("api", &self.client.is_some())
            .field("ctx", &self.ctx)
            .finish_non_exhaustive()
    }
}

impl GithubReporter {
    /// Reads `GITHUB_*` and the token (`INFERGATE_GITHUB_TOKEN`, else `GITHUB_TOKEN`). Never
    /// fails: without a token, repository or commit it works local-only, with one notice.
    /// The reporting deadline and request time-out come from `INFERGATE_GITHUB_DEADLINE_S`
    /// and `INFERGATE_GITHUB_REQUEST_TIMEOUT_S` (defaults 60 s and 20 s).
    pub fn from_env() -> GithubReporter {
        let mut ctx = GithubContext::from_env();
        let (retry, warnings) = RetryPolicy::from_lookup(|k| std::env::var(k).ok());
        ctx.warnings.extend(warnings);
        GithubReporter::from_context(ctx, retry)
    }

    /// A reporter for an explicit API base (a mock server, a GHES host) and token; the rest of
    /// `ctx` (repository, SHA, PR, files) as given.
    pub fn with_api_base(
        api_base: &str,
        token: Option<&str>,
        mut ctx: GithubContext,
        retry: RetryPolicy,
    ) -> GithubReporter {
        ctx.api_url = api_base.trim_end_matches('/').to_string();
        ctx.graphql_url = context::graphql_url_for(&ctx.api_url);
        ctx.token = token.and_then(Token::new);
        GithubReporter::from_context(ctx, retry)
    }

    /// A reporter for a prepared context.
    pub fn from_context(ctx: GithubContext, retry: RetryPolicy) -> GithubReporter {
        let client = match ctx.missing_for_api() {
            Some(notice) => Err(notice),
            None => build_client(&ctx, &ctx.api_url).map_err(|e| format!(
                "GitHub reporting is local-only: {e}; the job summary, step outputs and exit code still carry the verdict"
            )),
        };
        let mut pending = PublishOutcome {
            notices: ctx.warnings.clone(),
            errors: Vec::new(),
        };
        pending.notices.extend(client.as_ref().err().cloned());
        let client = client.ok();
        let graphql = client.as_ref().and_then(|_| graphql_client(&ctx));
        GithubReporter {
            client,
            graphql,
            own_login: None,
            resolved_pr: None,
            ctx,
            retry,
            check_ids: HashMap::new(),
            open_checks: BTreeSet::new(),
            checks_denied: false,
            comments_denied: false,
            pending,
            results_path: None,
            summary_path: None,
            policy: GatePolicy::default(),
            config: None,
        }
    }

    /// The context read at construction.
    pub fn context(&self) -> &GithubContext {
        &self.ctx
    }

    /// Whether the API is out of reach (no token, repository or commit).
    pub fn is_local_only(&self) -> bool {
        self.client.is_none()
    }

    /// The results file, for the `results-path` output; the Markdown summary is written next to
    /// it (`<stem>.summary.md`) for the `summary-path` output.
    pub fn set_results_path(&mut self, path: impl Into<PathBuf>) {
        self.results_path = Some(path.into());
    }

    /// A Markdown summary the caller has already written (`run` writes `summary.md` with the
    /// same content): reported as `summary-path` instead of writing a second copy.
    pub fn set_summary_path(&mut self, path: impl Into<PathBuf>) {
        self.summary_path = Some(path.into());
    }

    /// What fails the gate (config `fail_on`): decides the check's conclusion and the
    /// `verdict` output, as it decides the exit code.
    pub fn set_policy(&mut self, policy: GatePolicy) {
        self.policy = policy;
    }

    /// The gate config as named to the user: the report's "reproduce locally" command names it.
    pub fn set_config(&mut self, config: impl Into<String>) {
        self.config = Some(config.into());
    }

    fn take_pending(&mut self) -> PublishOutcome {
        std::mem::take(&mut self.pending)
    }

    fn token(&self) -> Option<&Token> {
        self.ctx.token.as_ref()
    }

    /// The repository's API, owned (the calls that follow borrow `self` mutably); its retry
    /// policy is a clone, which shares the deadline.
    fn api(&self) -> Option<Api> {
        let (owner, repo) = self.ctx.owner_repo()?;
        Some(Api {
            client: self.client.clone()?,
            owner: owner.to_string(),
            repo: repo.to_string(),
            retry: self.retry.clone(),
            token: self.ctx.token.clone(),
        })
    }

    /// Creates the check run `in_progress` at run start, so the PR shows the gate is running.
    pub async fn start_check(&mut self, name: &str) -> PublishOutcome {
        let mut out = self.take_pending();
        let (Some(api), Some(sha)) = (self.api(), self.ctx.head_sha.clone()) else {
            return out;
        };
        if self.checks_denied {
            return out;
        }
        let body = CheckRunRequest {
            name: Some(name.to_string()),
            head_sha: Some(sha),
            status: Some("in_progress".into()),
            details_url: self.ctx.run_url.clone(),
            started_at: Some(now_rfc3339()),
            external_id: self.ctx.check_owner.as_ref().map(|o| o.external_id()),
            ..Default::default()
        };
        match checks::create(&api, &body).await {
            Ok(id) => {
                self.check_ids.insert(name.to_string(), id);
                self.open_checks.insert(name.to_string());
            }
            Err(e) => self.check_failed(e, &mut out),
        }
        out
    }

    /// Completes every check started with [`GithubReporter::start_check`] but never published
    /// (the run aborted, or the profile turned out different from the predicted one) with
    /// `conclusion` and `reason` as its title, so no check is left in progress.
    pub async fn complete_open_checks(
        &mut self,
        conclusion: Conclusion,
        reason: &str,
    ) -> PublishOutcome {
        let mut out = self.take_pending();
        let Some(api) = self.api() else {
            return out;
        };
        let open: Vec<String> = self.open_checks.iter().cloned().collect();
        for name in open {
            let Some(id) = self.check_ids.get(&name).copied() else {
                continue;
            };
            let body = completed_for(conclusion, reason);
            match checks::send(&api, Some(id), &body).await {
                Ok(_) => {
                    self.open_checks.remove(&name);
                }
                Err(e) => self.check_failed(e, &mut out),
            }
        }
        out
    }

    /// Completes as `cancelled` every check a killed gate of this job (or of an earlier
    /// attempt of this workflow run) left `in_progress` on the head commit: checks named
    /// `prefix…` whose `external_id` names this job ([`checks::CheckOwner`]). Other jobs'
    /// checks, running or not, are never touched. Returns the names completed.
    pub async fn close_stale_checks(
        &mut self,
        prefix: &str,
        reason: &str,
    ) -> (Vec<String>, PublishOutcome) {
        let mut out = self.take_pending();
        let mut closed = Vec::new();
        let (Some(api), Some(sha)) = (self.api(), self.ctx.head_sha.clone()) else {
            return (closed, out);
        };
        let Some(me) = self.ctx.check_owner.clone() else {
            out.notices.push(
                "no stale checks closed: GITHUB_RUN_ID or RUNNER_NAME is not set, so this job's checks cannot be told from others'".into(),
            );
            return (closed, out);
        };
        let listed = match checks::list_in_progress(&api, &sha).await {
            Ok(l) => l,
            Err(e) => {
                self.check_failed(e, &mut out);
                return (closed, out);
            }
        };
        for run in listed {
            let ours = run.status == "in_progress"
                && run.name.starts_with(prefix)
                && run.external_id.as_deref().is_some_and(|x| me.owns_stale(x));
            if !ours {
                continue;
            }
            let body = completed_for(Conclusion::Cancelled, reason);
            match checks::send(&api, Some(run.id), &body).await {
                Ok(_) => closed.push(run.name),
                Err(e) => self.check_failed(e, &mut out),
            }
        }
        (closed, out)
    }

    fn check_failed(&mut self, e: ApiError, out: &mut PublishOutcome) {
        let notice = "no check run: the token may not write checks (GitHub: \"Resource not accessible by integration\"); grant `permissions: checks: write` to the job, or for pull requests from forks (read-only token) post with `infergate report` from a `workflow_run` workflow. The job summary, step outputs and exit code still carry the verdict";
        failed(e, &mut self.checks_denied, notice, out);
    }

    fn comment_failed(&mut self, e: ApiError, out: &mut PublishOutcome) {
        let notice = "no PR comment: the token may not write pull request comments (GitHub: \"Resource not accessible by integration\"); grant `permissions: pull-requests: write` to the job. The job summary, step outputs and exit code still carry the verdict";
        failed(e, &mut self.comments_denied, notice, out);
    }

    /// Completes the check run (creating it when it was never started), annotates regressed
    /// cells in batches of at most 50, updates or creates the sticky PR comment, appends the job
    /// summary, writes step outputs and prints workflow commands.
    pub async fn publish(&mut self, name: &str, input: &PublishInput<'_>) -> PublishOutcome {
        let mut out = self.take_pending();
        let outcome = render::Outcome {
            results: input.results,
            verdict: input.verdict,
            failure: input.failure.as_deref(),
            cautions: input.cautions,
            policy: self.policy,
        };
        let links = Links {
            run_url: self.ctx.run_url.clone(),
            artifact_url: input.artifact_url.clone(),
            head_sha: self.ctx.head_sha.clone(),
            trend_report: self.ctx.trend_report.clone(),
            config: self.config.clone(),
        };
        out.merge(self.write_local(name, input, &outcome, &links));
        if self.client.is_some() {
            let mut remote = PublishOutcome::default();
            self.publish_check(name, input, &outcome, &links, &mut remote)
                .await;
            self.publish_comment(name, &outcome, &links, &mut remote)
                .await;
            out.merge(remote);
        }
        out
    }

    /// Job summary, summary file, outputs and workflow commands: no token needed.
    fn write_local(
        &self,
        name: &str,
        input: &PublishInput<'_>,
        outcome: &render::Outcome<'_>,
        links: &Links,
    ) -> PublishOutcome {
        let mut out = PublishOutcome::default();
        let chart = mermaid::throughput_chart(
            input.history,
            input.results,
            input.confirmation,
            input.verdict,
        );
        let summary = render::job_summary(name, outcome, links, chart.as_deref());
        if let Some(path) = &self.ctx.step_summary
            && let Err(e) = actions::append_step_summary(path, &summary)
        {
            out.errors.push(format!(
                "could not append to the job summary {}: {e}",
                path.display()
            ));
        }
        let summary_path = self.summary_path.clone().or_else(|| {
            let results = self.results_path.as_ref()?;
            let path = summary_file_for(results);
            match infergate_io::fsio::write_durable(&path, summary.as_bytes()) {
                Ok(()) => Some(path),
                Err(e) => {
                    out.errors.push(format!(
                        "could not write the Markdown summary {}: {e}",
                        path.display()
                    ));
                    None
                }
            }
        });
        if let Some(path) = &self.ctx.output_file
            && let Err(e) = actions::write_outputs(path, &self.step_outputs(outcome, summary_path))
        {
            out.errors.push(format!(
                "could not write step outputs to {}: {e}",
                path.display()
            ));
        }
        if self.ctx.in_actions {
            print_workflow_commands(name, input, outcome);
        }
        out
    }

    /// The step outputs: the verdict, the counts and where the results and summary are.
    fn step_outputs(
        &self,
        outcome: &render::Outcome<'_>,
        summary_path: Option<PathBuf>,
    ) -> [(&'static str, String); 7] {
        let shown = |p: Option<&Path>| p.map(|p| p.display().to_string()).unwrap_or_default();
        let runs_needed = match outcome.verdict.and_then(|v| v.sensitivity.as_ref()) {
            None => String::new(),
            Some(s) => match s.runs_needed {
                Some(n) => n.to_string(),
                None if s.noise_unseen() => "unknown".to_string(),
                None => "unreachable".to_string(),
            },
        };
        [
            ("verdict", outcome.verdict_word().to_string()),
            ("regressions", outcome.regressions().to_string()),
            ("conclusion", outcome.conclusion().as_str().to_string()),
            ("baseline-runs-needed", runs_needed),
            // What a workflow that needs every listed metric gated can fail on.
            ("not-gated", actions::not_gated_output(outcome.verdict)),
            ("results-path", shown(self.results_path.as_deref())),
            ("summary-path", shown(summary_path.as_deref())),
        ]
    }

    async fn publish_check(
        &mut self,
        name: &str,
        input: &PublishInput<'_>,
        outcome: &render::Outcome<'_>,
        links: &Links,
        out: &mut PublishOutcome,
    ) {
        if self.checks_denied {
            return;
        }
        let (Some(api), Some(sha)) = (self.api(), self.ctx.head_sha.clone()) else {
            return;
        };
        let annotations = self.check_annotations(input, out);
        let base_output = CheckOutput {
            title: outcome.title(),
            summary: render::check_summary(outcome, links),
            text: Some(render::check_text(outcome, links)),
            annotations: Vec::new(),
        };
        let mut batches = annotations.chunks(ANNOTATIONS_PER_REQUEST);
        let first = CheckOutput {
            annotations: batches.next().map(|b| b.to_vec()).unwrap_or_default(),
            ..base_output.clone()
        };
        let existing = self.check_ids.get(name).copied();
        let request = CheckRunRequest {
            name: Some(name.to_string()),
            // A check never started is created here, on the commit, as started with the run.
            head_sha: existing.is_none().then_some(sha),
            status: Some("completed".into()),
            details_url: self.ctx.run_url.clone(),
            started_at: existing
                .is_none()
                .then(|| input.results.started_at.to_rfc3339()),
            conclusion: Some(outcome.conclusion().as_str().into()),
            completed_at: Some(now_rfc3339()),
            output: Some(first),
            external_id: self.ctx.check_owner.as_ref().map(|o| o.external_id()),
        };
        let (sent, annotations_refused) = send_check_or_bare(&api, existing, request, out).await;
        let id = match sent {
            Ok(id) => {
                self.check_ids.insert(name.to_string(), id);
                self.open_checks.remove(name);
                id
            }
            Err(e) => return self.check_failed(e, out),
        };
        if annotations_refused {
            return;
        }
        for batch in batches {
            let more = CheckRunRequest {
                output: Some(CheckOutput {
                    annotations: batch.to_vec(),
                    ..base_output.clone()
                }),
                ..Default::default()
            };
            if let Err(e) = checks::send(&api, Some(id), &more).await {
                out.errors
                    .push(format!("{e} (some annotations are missing)"));
                return;
            }
        }
    }

    /// The check's annotations on the config's lines of the regressed cells (none without the
    /// config's path, said when there are regressions to point at).
    fn check_annotations(
        &self,
        input: &PublishInput<'_>,
        out: &mut PublishOutcome,
    ) -> Vec<checks::Annotation> {
        match (input.verdict, input.config_path) {
            (Some(v), Some(path)) => checks::annotations(
                v,
                &checks::repo_relative(path, self.ctx.workspace.as_deref()),
                input.matrix_line.unwrap_or(1),
            ),
            (Some(v), None) if v.regressions().next().is_some() => {
                out.notices.push(
                    "no check annotations: the config file of the suite is unknown (pass --config)"
                        .to_string(),
                );
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The PR to comment on: the payload's when GitHub bound it to the commit, else one looked
    /// up (fork PR) or given by hand, kept only when its head is the reported commit.
    async fn resolve_pr(&mut self, out: &mut PublishOutcome) -> Option<u64> {
        if let Some(done) = self.resolved_pr {
            return done;
        }
        let resolved = self.lookup_pr(out).await;
        self.resolved_pr = Some(resolved);
        resolved
    }

    async fn lookup_pr(&mut self, out: &mut PublishOutcome) -> Option<u64> {
        let (Some(api), Some(sha)) = (self.api(), self.ctx.head_sha.clone()) else {
            return None;
        };
        let found = match (
            self.ctx.pr_number,
            self.ctx.pr_verified,
            &self.ctx.pr_lookup,
        ) {
            (Some(n), true, _) => return Some(n),
            (Some(n), false, _) => pulls::check_number(&api, n, &sha).await,
            (None, _, Some(lookup)) => pulls::find_by_head(&api, lookup, &sha).await,
            (None, _, None) => return None,
        };
        match found {
            Ok(pulls::Resolved::Pr(n)) => Some(n),
            Ok(pulls::Resolved::NoPr(why)) => {
                out.notices.push(why);
                None
            }
            Err(e) => {
                self.comment_failed(e, out);
                None
            }
        }
    }

    /// The token's own login, asked once (see [`comment::own_login`]).
    async fn own_login(&mut self) -> Result<String, String> {
        if let Some(known) = &self.own_login {
            return known.clone();
        }
        let login = match &self.graphql {
            Some((client, route)) => comment::own_login(client, route, &self.retry, self.token())
                .await
                .map_err(|e| e.to_string()),
            None => Err(format!(
                "the GraphQL endpoint `{}` is not a valid URL",
                retry::scrub(&self.ctx.graphql_url, self.token())
            )),
        };
        self.own_login = Some(login.clone());
        login
    }

    async fn publish_comment(
        &mut self,
        name: &str,
        outcome: &render::Outcome<'_>,
        links: &Links,
        out: &mut PublishOutcome,
    ) {
        if self.comments_denied {
            return;
        }
        let Some(api) = self.api() else {
            return;
        };
        let Some(pr) = self.resolve_pr(out).await else {
            return;
        };
        let marker = render::comment_marker(name);
        let marked = match comment::find_marked(&api, pr, &marker).await {
            Ok(c) => c,
            Err(e) => return self.comment_failed(e, out),
        };
        // Only a comment this token wrote is ours to edit; the marker alone proves nothing
        // (anyone can paste it).
        let existing = if marked.is_empty() {
            None
        } else {
            match self.own_login().await {
                Ok(login) => marked.into_iter().find(|c| c.written_by(&login)),
                Err(why) => {
                    out.errors.push(format!(
                        "could not tell which PR comments this token wrote ({why}); posting a new comment instead of editing one"
                    ));
                    None
                }
            }
        };
        let previously = existing
            .as_ref()
            .and_then(|c| c.body.as_deref())
            .map_or(0, render::previous_regressions);
        let body = render::comment_body(name, outcome, links, previously);
        let result = match existing {
            Some(c) => comment::update(&api, c.id, &body).await,
            // A clean pass on a PR that never had a comment needs none: no noise.
            None if outcome.conclusion() == Conclusion::Success => Ok(()),
            None => comment::create(&api, pr, &body).await,
        };
        if let Err(e) = result {
            self.comment_failed(e, out);
        }
    }
}

/// A repository's REST API as every request reaches it: the client, `owner/repo`, and the
/// retry policy and token each call runs with.
pub(crate) struct Api {
    client: Octocrab,
    owner: String,
    repo: String,
    retry: RetryPolicy,
    token: Option<Token>,
}

impl Api {
    /// `/repos/{owner}/{repo}{path}`.
    fn route(&self, path: &str) -> String {
        format!("/repos/{}/{}{path}", self.owner, self.repo)
    }

    /// `op` (a request on the client) with retries; `what` names it in errors.
    async fn call<T, Fut>(&self, what: &str, op: impl FnMut() -> Fut) -> Result<T, ApiError>
    where
        Fut: std::future::Future<Output = Result<T, octocrab::Error>>,
    {
        retry::with_retry(&self.retry, what, self.token.as_ref(), op).await
    }
}

/// Sends the check; when GitHub refuses it for its annotations (422), sends it again without
/// them. The check id, and whether the annotations were dropped.
async fn send_check_or_bare(
    api: &Api,
    existing: Option<u64>,
    mut request: CheckRunRequest,
    out: &mut PublishOutcome,
) -> (Result<u64, ApiError>, bool) {
    let sent = checks::send(api, existing, &request).await;
    let annotated = request
        .output
        .as_ref()
        .is_some_and(|o| !o.annotations.is_empty());
    match sent {
        // GitHub validates annotations (path, lines, levels) and refuses the whole request
        // for one bad one: the verdict matters more than the pointers into the config.
        Err(e) if e.status() == Some(422) && annotated => {
            out.notices.push(format!(
                "GitHub refused the check's annotations ({e}); the check is posted without them"
            ));
            if let Some(o) = request.output.as_mut() {
                o.annotations.clear();
            }
            (checks::send(api, existing, &request).await, true)
        }
        sent => (sent, false),
    }
}

/// The failure, what fail-on made of the verdict (an insufficient that fails, a regression
/// reported only) and the verdict's own lines, as workflow commands where the job page shows them.
fn print_workflow_commands(name: &str, input: &PublishInput<'_>, outcome: &render::Outcome<'_>) {
    let print = |line: &str| infergate_io::stdio::write_workflow_command(line, false);
    if let Some(reason) = outcome.failure {
        print(&actions::command(
            "error",
            &[("title", &format!("{name} failed"))],
            reason,
        ));
    }
    let ending = outcome.ending();
    if let Some(note) = input
        .verdict
        .and_then(|v| infergate_schema::answer::policy_note(v.gate, &ending))
    {
        let kind = if ending.exit == infergate_schema::exit::GateExit::Pass {
            "notice"
        } else {
            "error"
        };
        print(&actions::command(kind, &[("title", name)], &note));
    }
    for line in input
        .verdict
        .map(actions::workflow_commands)
        .unwrap_or_default()
    {
        print(&line);
    }
}

/// A request refused for want of permission is said once (`notice`) and marks the kind
/// `denied`, so it is not tried again; any other failure is an error.
fn failed(e: ApiError, denied: &mut bool, notice: &str, out: &mut PublishOutcome) {
    if !e.is_permission_denied() {
        return out.errors.push(e.to_string());
    }
    if !*denied {
        out.notices.push(notice.to_string());
    }
    *denied = true;
}

/// The request that completes a check with `conclusion`, titled and summarised by `reason`
/// alone (a gate stopped before it had a verdict: cancelled, or failed to report).
fn completed_for(conclusion: Conclusion, reason: &str) -> CheckRunRequest {
    CheckRunRequest {
        status: Some("completed".into()),
        conclusion: Some(conclusion.as_str().into()),
        completed_at: Some(now_rfc3339()),
        output: Some(CheckOutput {
            title: reason.chars().take(250).collect(),
            summary: infergate_io::untrusted_text::markdown(reason),
            text: None,
            annotations: Vec::new(),
        }),
        ..Default::default()
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `<dir>/<results stem>.summary.md`.
pub(crate) fn summary_file_for(results: &Path) -> PathBuf {
    let stem = results
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "results".into());
    results.with_file_name(format!("{stem}.summary.md"))
}

/// A client for the GraphQL endpoint: based at its parent, with its last segment as the route
/// (octocrab prefixes the base's path to every route, so the REST base `…/api/v3` cannot reach
/// GHES's `…/api/graphql`).
fn graphql_client(ctx: &GithubContext) -> Option<(Octocrab, String)> {
    let url = ctx.graphql_url.trim_end_matches('/');
    let (base, last) = url.rsplit_once('/')?;
    if base.is_empty() || last.is_empty() || !base.contains("://") {
        return None;
    }
    let client = build_client(ctx, base).ok()?;
    Some((client, format!("/{last}")))
}

/// The octocrab client: base URL from the context (GHES-ready), the token, a connect time-out,
/// and octocrab's own retry layer off (ours knows about secondary rate limits). The total
/// time-out of each request is ours too ([`retry::with_retry`]): a read time-out alone resets
/// on every byte.
fn build_client(ctx: &GithubContext, base: &str) -> Result<Octocrab, String> {
    let token = ctx.token.as_ref().ok_or("no token")?;
    let builder = Octocrab::builder()
        .base_uri(base)
        .map_err(|_| {
            format!(
                "the GitHub API URL `{}` is not a valid URL",
                retry::scrub(base, Some(token))
            )
        })?
        .personal_token(token.expose().to_string())
        .add_retry_config(octocrab::service::middleware::retry::RetryConfig::None)
        .set_connect_timeout(Some(Duration::from_secs(10)))
        .set_read_timeout(Some(Duration::from_secs(60)))
        .set_write_timeout(Some(Duration::from_secs(60)));
    builder.build().map_err(|e| {
        format!(
            "could not build the GitHub client: {}",
            retry::scrub(&e.to_string(), Some(token))
                .lines()
                .next()
                .unwrap_or("")
        )
    })
}
