//! Change-point alerts as GitHub issues: each new change point of a nightly history is reported
//! once, as one issue, updated on later nights and closed when a person accepts it
//! (`baseline accept --since RUN`) or the history no longer shows it (reverted).
//!
//! An issue is ours when its body holds the hidden marker
//! `<!-- infergate-change:{profile}/{suite}/{scope}/{metric}/{run_id} -->` **and** the token's
//! own identity (GraphQL `viewer { login }`, as for the sticky comment) wrote it: anyone can
//! paste a marker, and such an issue is never edited or closed. Issues are looked up in every
//! state, so one a person closed by hand is not opened again the next night.
//!
//! One alert per change: a matrix-wide change point carries the cell change points within
//! [`CELL_WINDOW`] runs of it (named in its body), and a cell gets an issue of its own only when
//! no matrix change covers it. Every string from the store passes
//! [`infergate_io::untrusted_text::markdown`] before it reaches an issue body.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::comment::{Author, is_login};
use super::retry::{ApiError, all_pages};
use super::{Api, GithubReporter, PublishOutcome};
use crate::report::changes::{GroupChanges, change_label, scope_label, slope_words};
use infergate_io::untrusted_text::markdown as md;
use infergate_model::stats::changepoint::{ChangeKind, ChangePoint, Scope, same_change};
use infergate_schema::answer::metric_name;
use infergate_schema::verdict::{Metric, signed_percent};

/// What every alert marker starts with.
pub(crate) const MARKER_PREFIX: &str = "<!-- infergate-change:";

/// A creep's alert also records the newest run of its stretch, so that the next night's
/// analysis can tell the same, grown creep from a new change (see [`same_change`]).
const UNTIL_PREFIX: &str = "<!-- infergate-until:";

/// The `until` run recorded in an alert body, if any (marker-safe characters only).
fn parse_until(body: &str) -> Option<String> {
    let inner = marker_text(body, UNTIL_PREFIX)?;
    (!inner.is_empty() && marker_part(inner) == inner).then(|| inner.to_string())
}

/// The text of the first `prefix … -->` marker in `body`, trimmed.
fn marker_text<'a>(body: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = &body[body.find(prefix)? + prefix.len()..];
    Some(rest[..rest.find("-->")?].trim())
}

/// Runs between a matrix change point and a cell change point that count as the same change.
pub(crate) const CELL_WINDOW: usize = 2;

/// What names one alert: its group, series and the first run after the change. Each part is
/// reduced to `[A-Za-z0-9._-]`, so a marker can neither close its HTML comment nor hold markup.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AlertKey {
    pub profile: String,
    pub suite: String,
    /// `matrix` or `c{concurrency}-ctx{context_tokens}`.
    pub scope: String,
    pub metric: String,
    pub run_id: String,
}

fn marker_part(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".into() } else { out }
}

/// The marker's name for a scope.
pub(crate) fn scope_key(scope: &Scope) -> String {
    match scope {
        Scope::Matrix => "matrix".into(),
        Scope::Cell {
            concurrency,
            context_tokens,
        } => format!("c{concurrency}-ctx{context_tokens}"),
    }
}

impl AlertKey {
    /// The key of change point `c` of `group`.
    pub(crate) fn of(group: &GroupChanges, c: &ChangePoint) -> AlertKey {
        AlertKey {
            profile: marker_part(&group.profile_key),
            suite: marker_part(&group.suite),
            scope: scope_key(&c.scope),
            metric: marker_part(c.metric.as_str()),
            run_id: marker_part(&c.run_id),
        }
    }

    /// The hidden marker written into the issue body.
    pub(crate) fn marker(&self) -> String {
        format!("{MARKER_PREFIX}{} -->", self.label())
    }

    /// The key in the first marker of `body`, if any.
    pub(crate) fn parse(body: &str) -> Option<AlertKey> {
        let inner = marker_text(body, MARKER_PREFIX)?;
        let parts: Vec<String> = inner.split('/').map(String::from).collect();
        let [profile, suite, scope, metric, run_id] = <[String; 5]>::try_from(parts).ok()?;
        let key = AlertKey {
            profile,
            suite,
            scope,
            metric,
            run_id,
        };
        // Only a key we could have written.
        (key.marker() == format!("{MARKER_PREFIX}{inner} -->")).then_some(key)
    }

    fn group(&self) -> (String, String) {
        (self.profile.clone(), self.suite.clone())
    }

    fn series(&self) -> (&str, &str, &str, &str) {
        (&self.profile, &self.suite, &self.scope, &self.metric)
    }

    /// `profile/suite/scope/metric/run` for people.
    pub(crate) fn label(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}",
            self.profile, self.suite, self.scope, self.metric, self.run_id
        )
    }
}

/// One change to report: a change point and, for a matrix change, the cells that moved with it.
#[derive(Debug, Clone)]
pub(crate) struct Alert<'a> {
    pub key: AlertKey,
    pub group: &'a GroupChanges,
    pub change: &'a ChangePoint,
    /// Cell change points within [`CELL_WINDOW`] runs of a matrix change, same metric: the
    /// cells that moved apart from the rest of the matrix there, either way (a cell searched
    /// against the rest that stayed while the others slowed reads faster: not a change of its
    /// own).
    pub cells: Vec<&'a ChangePoint>,
}

fn position(group: &GroupChanges, run_id: &str) -> Option<usize> {
    group.history.runs.iter().position(|r| r.run_id == run_id)
}

/// The alerts of `groups`: every matrix change point (with its cells), and every cell change
/// point no matrix change point covers. Accepted ones are kept (their issue is closed).
pub(crate) fn plan(groups: &[GroupChanges]) -> Vec<Alert<'_>> {
    let mut alerts = Vec::new();
    for g in groups {
        let cps = &g.history.change_points;
        let matrix: Vec<(usize, &ChangePoint)> = cps
            .iter()
            .enumerate()
            .filter(|(_, c)| c.scope == Scope::Matrix)
            .collect();
        let mut cells_of: BTreeMap<usize, Vec<&ChangePoint>> = BTreeMap::new();
        let mut lone = Vec::new();
        for c in cps.iter().filter(|c| c.scope != Scope::Matrix) {
            let at = position(g, &c.run_id);
            let covering = matrix
                .iter()
                .filter(|(_, m)| m.metric == c.metric)
                .filter_map(|(i, m)| {
                    let (at, m_at) = (at?, position(g, &m.run_id)?);
                    let d = at.abs_diff(m_at);
                    // A matrix creep covers the cells that moved anywhere along it.
                    let until = m.until_run_id.as_deref().and_then(|u| position(g, u));
                    let along =
                        until.is_some_and(|u| (m_at.saturating_sub(CELL_WINDOW)..=u).contains(&at));
                    (d <= CELL_WINDOW || along).then_some((d, *i))
                })
                .min();
            match covering {
                Some((_, i)) => cells_of.entry(i).or_default().push(c),
                None => lone.push(c),
            }
        }
        let matrix = matrix
            .into_iter()
            .map(|(i, m)| (m, cells_of.remove(&i).unwrap_or_default()));
        let lone = lone.into_iter().map(|c| (c, Vec::new()));
        alerts.extend(matrix.chain(lone).map(|(change, cells)| Alert {
            key: AlertKey::of(g, change),
            group: g,
            change,
            cells,
        }));
    }
    alerts
}

/// The issue title: numbers, labels of our own and the marker-safe group names only.
pub(crate) fn title(a: &Alert<'_>) -> String {
    let creep = if a.change.kind == ChangeKind::Creep {
        " creep"
    } else {
        ""
    };
    format!(
        "infergate: {} {}{creep} at {} ({} / {}), from run {}",
        metric_name(a.change.metric),
        signed_percent(a.change.change),
        scope_label(&a.change.scope, a.change.metric),
        a.key.profile,
        a.key.suite,
        a.key.run_id
    )
}

fn commit_of(group: &GroupChanges, run_id: &str) -> Option<String> {
    group.history.runs[position(group, run_id)?].commit.clone()
}

fn is_sha(s: &str) -> bool {
    (7..=40).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// Where the alert stands, for its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlertState {
    Open,
    Accepted,
}

/// The issue body: marker, the change with its interval, the runs and commits around it, the
/// cells, and how to accept it. `compare_base` (`{server}/{owner}/{repo}`) links the commit
/// range when both ends are commit SHAs.
pub(crate) fn body(a: &Alert<'_>, state: AlertState, compare_base: Option<&str>) -> String {
    let mut out = format!("{}\n", a.key.marker());
    if let Some(u) = &a.change.until_run_id {
        out.push_str(&format!("{UNTIL_PREFIX}{} -->\n", marker_part(u)));
    }
    out.push_str(&format!(
        "\n**infergate found a change point** in the nightly history of profile {} / suite {}.\n\n",
        md(&a.group.profile_key),
        md(&a.group.suite)
    ));
    push_facts(&mut out, a, compare_base);
    push_cells(&mut out, a);
    match state {
        AlertState::Open => push_next_steps(&mut out, a),
        AlertState::Accepted => out.push_str(
            "\n**Closed by infergate:** the change was accepted (`baseline accept`); comparisons now use the runs since it.\n",
        ),
    }
    out
}

/// `before..after`, linked to GitHub's compare view when both are commit SHAs.
fn commit_range(before: Option<&str>, after: Option<&str>, compare_base: Option<&str>) -> String {
    match (before, after) {
        (Some(b), Some(a)) => match compare_base {
            Some(base) if is_sha(b) && is_sha(a) => {
                format!("[{}..{}]({base}/compare/{b}...{a})", &b[..7], &a[..7])
            }
            _ => format!("{}..{}", md(b), md(a)),
        },
        _ => "unknown (the runs carry no `sha` label)".into(),
    }
}

/// Whether `v` can be pasted into a shell command as it is.
fn command_safe(v: &str) -> bool {
    v.chars()
        .all(|ch| ch.is_ascii_alphanumeric() || "._-:+".contains(ch))
}

/// The table of the change: series, size, kind, the runs and commits around it and how sure
/// the history is of where.
fn push_facts(out: &mut String, a: &Alert<'_>, compare_base: Option<&str>) {
    let (c, g) = (a.change, a.group);
    let before = commit_of(g, &c.previous_run_id).or_else(|| c.commits.before.clone());
    let after = commit_of(g, &c.run_id).or_else(|| c.commits.after.clone());
    let run_cell = |run: &str, commit: &Option<String>| match commit {
        Some(sha) => format!("{} (commit {})", md(run), md(sha)),
        None => md(run),
    };
    out.push_str(&format!(
        "| | |\n|---|---|\n| series | {} of {} |\n",
        metric_name(c.metric),
        scope_label(&c.scope, c.metric)
    ));
    out.push_str(&format!(
        "| change | {} ({:.0}% interval; permutation p = {:.3}) |\n",
        change_label(c),
        g.history.settings.confidence * 100.0,
        c.p_value
    ));
    if let Some(sl) = &c.slope {
        out.push_str(&format!(
            "| kind | creep: {}, change so far as above |\n",
            slope_words(sl)
        ));
    }
    if let Some(u) = &c.until_run_id {
        out.push_str(&format!("| still moving at | {} |\n", md(u)));
    }
    out.push_str(&format!(
        "| last run before | {} |\n| first run after | {} |\n",
        run_cell(&c.previous_run_id, &before),
        run_cell(&c.run_id, &after)
    ));
    let range = commit_range(before.as_deref(), after.as_deref(), compare_base);
    out.push_str(&format!("| commits around the estimate | {range} |\n"));
    // How sure the history is of where: the runs the change may be at, and the commits to
    // bisect (not the one pair around the estimate, which the data may not place).
    if let Some(l) = &c.location_interval {
        let span = if l.first_run_id == l.last_run_id {
            md(&l.first_run_id)
        } else {
            let (first, last) = (md(&l.first_run_id), md(&l.last_run_id));
            format!("{first} … {last} ({} runs)", l.runs)
        };
        let commits = commit_range(
            l.first_commit.as_deref(),
            l.last_commit.as_deref(),
            compare_base,
        );
        let level = l.confidence * 100.0;
        out.push_str(&format!(
            "| first run after, {level:.0}% interval | {span} |\n| commits to bisect ({level:.0}%) | {commits} |\n",
        ));
    }
    if let Some(latest) = g.history.runs.last() {
        out.push_str(&format!(
            "| latest run analysed | {} |\n",
            md(&latest.run_id)
        ));
    }
}

/// The cells (a prefill layer's: contexts) that moved apart from the rest of the matrix (a
/// cell alert names its own), or that none did where the metric has cells' series at all (the
/// burst, one prefill context: its matrix series is its only one); "apart from the rest" only
/// where their series were searched so ([`HistorySeries::against_rest`]).
fn push_cells(out: &mut String, a: &Alert<'_>) {
    let c = a.change;
    let cells: Vec<&ChangePoint> = if c.scope == Scope::Matrix {
        a.cells.clone()
    } else {
        vec![c]
    };
    let (heading, what, whole) = if c.metric == Metric::PrefillTps {
        ("Contexts", "context", "layer")
    } else {
        ("Cells", "cell", "matrix")
    };
    let series = &a.group.history.series;
    if cells.is_empty() {
        let has_cells = (series.iter()).any(|s| s.metric == c.metric && s.scope != Scope::Matrix);
        if has_cells {
            out.push_str(&format!(
                "\nNo {what} moved apart from the rest of the {whole}: the {what}s moved together.\n"
            ));
        }
        return;
    }
    let apart = cells.iter().all(|x| {
        (series.iter()).any(|s| s.against_rest && s.scope == x.scope && s.metric == x.metric)
    });
    let (title, column) = if apart {
        (
            format!("{heading} that moved apart from the rest of the {whole}"),
            format!("change against the other {what}s [interval]"),
        )
    } else {
        (
            format!("{heading} that moved"),
            "change [interval]".to_string(),
        )
    };
    out.push_str(&format!(
        "\n**{title}**\n\n| {what} | {column} | first run after |\n|---|---:|---|\n"
    ));
    for cell in cells {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            scope_label(&cell.scope, cell.metric),
            change_label(cell),
            md(&cell.run_id)
        ));
    }
}

/// How to accept an open alert's change, or bisect it.
fn push_next_steps(out: &mut String, a: &Alert<'_>) {
    let (c, g) = (a.change, a.group);
    // Accepting and bisecting take the change's own metric: a tail's or a layer's change
    // leaves tok/s where it was, and its accept leaves tok/s's baseline every run. Aggregate
    // tok/s is the group's level: its accept restarts every metric.
    let metric = match c.metric {
        Metric::AggregateTps => String::new(),
        m => format!(" --metric {}", m.as_str()),
    };
    out.push_str(if metric.is_empty() {
        "\nIf the change is intended (a new driver, an accepted trade-off), accept it so the baseline follows it. Every metric of this group is then compared with the runs since it alone (fewer runs: less sensitive for a while), and this issue is closed:\n\n"
    } else {
        "\nIf the change is intended (a new driver, an accepted trade-off), accept it so the baseline follows it. This metric alone is then compared with the runs since it (the others keep every run), and this issue is closed:\n\n"
    });
    if [&g.profile_key, &g.suite, &c.run_id]
        .iter()
        .all(|s| command_safe(s))
    {
        out.push_str(&format!(
            "```\ninfergate baseline accept --since {} --profile {} --suite {}{metric}\n```\n",
            c.run_id, g.profile_key, g.suite
        ));
    } else {
        out.push_str(&format!("`infergate baseline accept --since RUN --profile KEY --suite SUITE{metric}` with the run, profile and suite above.\n"));
    }
    let suspects = c.location_interval.as_ref();
    match suspects.map(|l| (l.first_commit.as_deref(), l.last_commit.as_deref())) {
        Some((Some(good), Some(bad))) if command_safe(good) && command_safe(bad) => {
            out.push_str(&format!(
                "\nOtherwise, bisect the interval's commits to find the culprit:\n\n```\ninfergate bisect --good {good} --bad {bad}{metric}\n```\n"
            ));
        }
        _ => out.push_str(&format!("\nOtherwise, `infergate bisect --good <commit before the interval> --bad <commit at its end>{metric}` finds the culprit.\n")),
    }
}

/// An issue as the list endpoint returns it (pull requests come too, with `pull_request`).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ExistingIssue {
    pub number: u64,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub title: String,
    pub body: Option<String>,
    pub user: Option<Author>,
    pub pull_request: Option<serde_json::Value>,
}

impl ExistingIssue {
    fn is_open(&self) -> bool {
        self.state.eq_ignore_ascii_case("open")
    }
}

/// Why an alert's issue is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// `baseline accept --since` its run.
    Accepted,
    /// The history no longer shows the change (reverted, or its runs were pruned).
    NoLongerDetected,
}

/// What to do with one alert or one of our issues.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Open an issue for alert `alert` (an index into the plan).
    Create { alert: usize },
    /// Rewrite issue `number` for alert `alert` (the same change, perhaps relocated).
    Update { number: u64, alert: usize },
    /// Close issue `number`; `alert` when the change is still in the history (accepted).
    Close {
        number: u64,
        alert: Option<usize>,
        reason: CloseReason,
    },
}

/// Decides, from the plan and the issues this identity wrote (with their keys), what to create,
/// update and close. Issues of groups not in `analysed` are left alone; a closed issue with the
/// key of a current alert means "already reported" and is left alone too.
pub(crate) fn reconcile(
    alerts: &[Alert<'_>],
    ours: &[(ExistingIssue, AlertKey)],
    analysed: &BTreeSet<(String, String)>,
) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut used: BTreeSet<u64> = BTreeSet::new();
    let mut unreported = Vec::new();
    for (i, a) in alerts.iter().enumerate() {
        let same: Vec<&ExistingIssue> = ours
            .iter()
            .filter(|(_, k)| *k == a.key)
            .map(|(issue, _)| issue)
            .collect();
        match same.iter().find(|x| x.is_open()).or(same.first()) {
            Some(x) => {
                used.insert(x.number);
                if x.is_open() {
                    actions.push(if a.change.accepted {
                        Action::Close {
                            number: x.number,
                            alert: Some(i),
                            reason: CloseReason::Accepted,
                        }
                    } else {
                        Action::Update {
                            number: x.number,
                            alert: i,
                        }
                    });
                }
            }
            None if a.change.accepted => {}
            None => unreported.push(i),
        }
    }
    for (issue, key) in ours {
        if !issue.is_open() || used.contains(&issue.number) || !analysed.contains(&key.group()) {
            continue;
        }
        used.insert(issue.number);
        // The same change a night later may sit a run or two off, or a creep may have grown
        // (`same_change`, the rule `changes-eval` measures alerts by): follow it.
        let relocated = unreported
            .iter()
            .enumerate()
            .filter_map(|(slot, &i)| {
                let a = &alerts[i];
                if a.key.series() != key.series() {
                    return None;
                }
                let g = a.group;
                let (at, was) = (position(g, &a.change.run_id)?, position(g, &key.run_id)?);
                let until = a
                    .change
                    .until_run_id
                    .as_deref()
                    .and_then(|u| position(g, u));
                let was_until = issue
                    .body
                    .as_deref()
                    .and_then(parse_until)
                    .and_then(|u| position(g, &u));
                same_change(at, until, was, was_until, g.history.settings.min_segment)
                    .then_some((at.abs_diff(was), slot))
            })
            .min();
        match relocated {
            Some((_, slot)) => {
                let alert = unreported.remove(slot);
                actions.push(Action::Update {
                    number: issue.number,
                    alert,
                });
            }
            None => actions.push(Action::Close {
                number: issue.number,
                alert: None,
                reason: CloseReason::NoLongerDetected,
            }),
        }
    }
    actions.extend(unreported.into_iter().map(|alert| Action::Create { alert }));
    actions
}

/// What publishing the alerts did to one issue.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertDone {
    pub number: u64,
    pub key: AlertKey,
    pub what: Done,
}

/// What was done to an alert's issue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Done {
    Created,
    Updated,
    /// The body was already current: nothing sent.
    Unchanged,
    Closed(CloseReason),
}

impl AlertDone {
    /// One line for the log.
    pub fn line(&self) -> String {
        let (number, key) = (self.number, self.key.label());
        match self.what {
            Done::Created => format!("alert: opened issue #{number} for {key}"),
            Done::Updated => format!("alert: updated issue #{number} for {key}"),
            Done::Unchanged => format!("alert: issue #{number} for {key} is current"),
            Done::Closed(reason) => {
                let why = match reason {
                    CloseReason::Accepted => "accepted",
                    CloseReason::NoLongerDetected => "no longer detected",
                };
                format!("alert: closed issue #{number} for {key} ({why})")
            }
        }
    }
}

#[derive(Serialize)]
struct ListParams<'a> {
    state: &'a str,
    creator: &'a str,
    per_page: u8,
    page: u32,
}

#[derive(Serialize)]
struct NewIssue<'a> {
    title: &'a str,
    body: &'a str,
}

#[derive(Deserialize)]
struct Created {
    number: u64,
}

#[derive(Serialize)]
struct IssueEdit<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    body: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_reason: Option<&'a str>,
}

/// Alert issues, filed through the repository's API.
impl Api {
    /// Every issue `login` opened, in every state, pull requests left out (`creator` filters on
    /// GitHub's side; the caller still checks the author).
    async fn list_own(&self, login: &str) -> Result<Vec<ExistingIssue>, ApiError> {
        let route = self.route("/issues");
        let params = ListParams {
            state: "all",
            creator: login,
            per_page: 100,
            page: 1,
        };
        let issue = |i: &ExistingIssue| i.pull_request.is_none();
        all_pages(self, &route, &params, "list issues", issue).await
    }

    /// Opens an issue; its number.
    async fn create_issue(&self, title: &str, body: &str) -> Result<u64, ApiError> {
        let route = self.route("/issues");
        let payload = NewIssue { title, body };
        let post = || self.client.post(&route, Some(&payload));
        let made: Created = self.call("create alert issue", post).await?;
        Ok(made.number)
    }

    /// Rewrites an issue (and closes it, with `close`).
    async fn edit_issue(
        &self,
        number: u64,
        title: Option<&str>,
        body: &str,
        close: bool,
    ) -> Result<(), ApiError> {
        let route = self.route(&format!("/issues/{number}"));
        let payload = IssueEdit {
            title,
            body,
            state: close.then_some("closed"),
            state_reason: close.then_some("completed"),
        };
        let what = if close {
            "close alert issue"
        } else {
            "update alert issue"
        };
        let patch = || self.client.patch(&route, Some(&payload));
        let _: serde_json::Value = self.call(what, patch).await?;
        Ok(())
    }

    /// Carries out one action of [`reconcile`]; `None` when it closes an issue of unknown key.
    async fn apply(
        &self,
        action: Action,
        alerts: &[Alert<'_>],
        ours: &[(ExistingIssue, AlertKey)],
        groups: &[GroupChanges],
        compare_base: &str,
    ) -> Option<Result<AlertDone, ApiError>> {
        let open = |i: usize| {
            let text = body(&alerts[i], AlertState::Open, Some(compare_base));
            (alerts[i].key.clone(), title(&alerts[i]), text)
        };
        Some(match action {
            Action::Create { alert } => {
                let (key, head, text) = open(alert);
                let made = self.create_issue(&head, &text).await;
                made.map(|number| AlertDone {
                    number,
                    key,
                    what: Done::Created,
                })
            }
            Action::Update { number, alert } => {
                let (key, head, text) = open(alert);
                let current = issue(ours, number).is_some_and(|(x, _)| {
                    x.body.as_deref() == Some(text.as_str()) && x.title == head
                });
                let sent = if current {
                    Ok(Done::Unchanged)
                } else {
                    let edited = self.edit_issue(number, Some(&head), &text, false).await;
                    edited.map(|()| Done::Updated)
                };
                sent.map(|what| AlertDone { number, key, what })
            }
            Action::Close {
                number,
                alert,
                reason,
            } => {
                let (key, text) = match alert {
                    Some(i) => (
                        alerts[i].key.clone(),
                        body(&alerts[i], AlertState::Accepted, Some(compare_base)),
                    ),
                    None => {
                        let (x, key) = issue(ours, number)?;
                        let latest = groups
                            .iter()
                            .find(|g| group_key(g) == key.group())
                            .and_then(|g| g.history.runs.last());
                        let previous = x.body.as_deref().unwrap_or_default();
                        let run = latest.map(|r| r.run_id.as_str());
                        (key.clone(), no_longer_detected(previous, run))
                    }
                };
                let sent = self.edit_issue(number, None, &text, true).await;
                let what = Done::Closed(reason);
                sent.map(|()| AlertDone { number, key, what })
            }
        })
    }
}

/// Issue `number` of ours, with its key.
fn issue(ours: &[(ExistingIssue, AlertKey)], number: u64) -> Option<&(ExistingIssue, AlertKey)> {
    ours.iter().find(|(i, _)| i.number == number)
}

/// A group's `(profile, suite)` as its alert markers name it.
fn group_key(g: &GroupChanges) -> (String, String) {
    (marker_part(&g.profile_key), marker_part(&g.suite))
}

/// The note appended to an issue whose change the history no longer shows.
fn no_longer_detected(previous: &str, latest: Option<&str>) -> String {
    format!(
        "{}\n\n**Closed by infergate:** the nightly history no longer shows this change (as of run {}): it was reverted, or the runs around it were pruned.\n",
        previous.trim_end(),
        latest.map(md).unwrap_or_else(|| "unknown".into())
    )
}

impl GithubReporter {
    /// Reports the change points of `groups` as issues (see the module docs): needs a token and
    /// the repository, not a commit. Returns what was done and, for people, what failed.
    pub async fn publish_change_alerts(
        &mut self,
        groups: &[GroupChanges],
    ) -> (Vec<AlertDone>, PublishOutcome) {
        let mut out = PublishOutcome {
            notices: self.ctx.warnings.clone(),
            errors: Vec::new(),
        };
        self.pending = PublishOutcome::default();
        let mut done = Vec::new();
        let (api, login) = match self.alert_access().await {
            Ok(Some(access)) => access,
            Ok(None) => return (done, out),
            Err(why) => {
                out.errors.push(format!("no alerts filed: {why}"));
                return (done, out);
            }
        };
        let ours: Vec<(ExistingIssue, AlertKey)> = match api.list_own(&login).await {
            Ok(listed) => listed
                .into_iter()
                .filter(|i| is_login(i.user.as_ref(), &login))
                .filter_map(|i| AlertKey::parse(i.body.as_deref()?).map(|key| (i, key)))
                .collect(),
            Err(e) => {
                out.errors.push(format!("no alerts filed: {e}"));
                return (done, out);
            }
        };
        let alerts = plan(groups);
        let analysed: BTreeSet<(String, String)> = groups.iter().map(group_key).collect();
        let server = self.ctx.server_url.trim_end_matches('/');
        let compare_base = format!("{server}/{}/{}", api.owner, api.repo);
        for action in reconcile(&alerts, &ours, &analysed) {
            match api
                .apply(action, &alerts, &ours, groups, &compare_base)
                .await
            {
                Some(Ok(d)) => done.push(d),
                Some(Err(e)) => out.errors.push(e.to_string()),
                None => {}
            }
        }
        (done, out)
    }

    /// The repository's API and the token's own login to file alerts with (`None`: no API);
    /// `Err`: why none can be filed.
    async fn alert_access(&mut self) -> Result<Option<(Api, String)>, String> {
        let mut missing = Vec::new();
        if self.ctx.token.is_none() {
            missing.push("a token (GITHUB_TOKEN or INFERGATE_GITHUB_TOKEN)");
        }
        if self.ctx.owner_repo().is_none() {
            missing.push("GITHUB_REPOSITORY (owner/name)");
        }
        if !missing.is_empty() {
            return Err(format!("missing {}", missing.join(", ")));
        }
        if self.client.is_none() {
            self.client = Some(super::build_client(&self.ctx, &self.ctx.api_url)?);
            self.graphql = super::graphql_client(&self.ctx);
        }
        let Some(api) = self.api() else {
            return Ok(None);
        };
        // Without knowing our own issues, filing could duplicate them: file nothing.
        let login = self
            .own_login()
            .await
            .map_err(|why| format!("could not tell which issues this token wrote ({why})"))?;
        Ok(Some((api, login)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::stats::changepoint::{
        ChangeSettings, CommitRange, HistoryChanges, LocationInterval, RunRef,
    };
    use infergate_schema::asserts::{assert_contains, assert_lacks, assert_starts_with};

    fn cp(scope: Scope, run: usize, change: f64, accepted: bool) -> ChangePoint {
        ChangePoint {
            scope,
            metric: Metric::AggregateTps,
            run_id: format!("r{run:02}"),
            previous_run_id: format!("r{:02}", run - 1),
            kind: ChangeKind::Step,
            change,
            ci_low: change - 0.005,
            ci_high: change + 0.005,
            slope: None,
            until_run_id: None,
            p_value: 0.001,
            commits: CommitRange {
                before: Some(format!("c{:02}", run - 1)),
                after: Some(format!("c{run:02}")),
                range: Some(format!("c{:02}..c{run:02}", run - 1)),
            },
            accepted,
            location_interval: Some(LocationInterval {
                first_run_id: format!("r{:02}", run - 1),
                last_run_id: format!("r{:02}", run + 1),
                first_commit: Some(format!("c{:02}", run - 2)),
                last_commit: Some(format!("c{:02}", run + 1)),
                confidence: 0.9,
                runs: 3,
            }),
        }
    }

    fn cell(c: u32) -> Scope {
        Scope::Cell {
            concurrency: c,
            context_tokens: 8192,
        }
    }

    fn group(cps: Vec<ChangePoint>) -> GroupChanges {
        GroupChanges {
            profile_key: "h200-vllm".into(),
            suite: "nightly".into(),
            accepted: Vec::new(),
            accepted_metrics: Default::default(),
            candidate: None,
            history: HistoryChanges {
                settings: ChangeSettings::default(),
                runs: (0..40)
                    .map(|i| RunRef {
                        run_id: format!("r{i:02}"),
                        started_at: String::new(),
                        commit: Some(format!("c{i:02}")),
                    })
                    .collect(),
                series: Vec::new(),
                change_points: cps,
            },
        }
    }

    fn issue(number: u64, state: &str, key: &AlertKey) -> (ExistingIssue, AlertKey) {
        (
            ExistingIssue {
                number,
                state: state.into(),
                title: String::new(),
                body: Some(format!("{}\n\nold", key.marker())),
                user: Some(Author {
                    login: "github-actions[bot]".into(),
                }),
                pull_request: None,
            },
            key.clone(),
        )
    }

    fn update(number: u64, alert: usize) -> Action {
        Action::Update { number, alert }
    }

    /// Issue `number` closed: its change is no longer in the history.
    fn gone(number: u64) -> Action {
        let reason = CloseReason::NoLongerDetected;
        Action::Close {
            number,
            alert: None,
            reason,
        }
    }

    fn analysed() -> BTreeSet<(String, String)> {
        [("h200-vllm".to_string(), "nightly".to_string())].into()
    }

    #[test]
    fn markers_round_trip_and_cannot_be_forged_into_markup() {
        let g = group(vec![]);
        let mut c = cp(Scope::Matrix, 30, -0.03, false);
        c.run_id = "x --> <b>@boss</b>".into();
        let key = AlertKey::of(&g, &c);
        let m = key.marker();
        assert_eq!(m.matches("-->").count(), 1, "{m}");
        assert!(!m.contains('<') || m.starts_with("<!--"));
        assert!(!m.contains('@'));
        assert_eq!(AlertKey::parse(&format!("text\n{m}\nmore")), Some(key));
        assert_eq!(AlertKey::parse("<!-- infergate-change:a/b -->"), None);
    }

    #[test]
    fn one_alert_per_change_with_its_cells() {
        let g = group(vec![
            cp(Scope::Matrix, 30, -0.03, false),
            cp(cell(4), 30, -0.031, false),
            cp(cell(16), 31, -0.029, false),
            // Another change, far away, in one cell only.
            cp(cell(1), 12, 0.02, false),
        ]);
        let alerts = plan(std::slice::from_ref(&g));
        assert_eq!(alerts.len(), 2, "{alerts:#?}");
        assert_eq!(alerts[0].key.scope, "matrix");
        assert_eq!(alerts[0].cells.len(), 2);
        assert_eq!(alerts[1].key.scope, "c1-ctx8192");
        let text = body(
            &alerts[0],
            AlertState::Open,
            Some("https://github.example/a/b"),
        );
        assert_starts_with(&text, &alerts[0].key.marker());
        assert_contains(&text, "c29..c30");
        assert_contains(&text, "C=4 / 8k");
        assert_contains(&text, "C=16 / 8k");
        assert_contains(&text, "−3.0%");
        assert!(text.contains("--since r30 --profile h200-vllm --suite nightly"));
    }

    /// A tail's and a layer's change points are alerts of their own, named as the gate's
    /// reports name them and in the metric's own direction (a latency's rise is `+`); a prefill
    /// context's change goes under its layer's, not under the decode matrix's.
    #[test]
    fn a_tail_and_a_layer_are_alerted_as_the_gate_names_them() {
        let with = |metric, scope, change| ChangePoint {
            metric,
            ..cp(scope, 30, change, false)
        };
        let prefill_8k = Scope::Cell {
            concurrency: 0,
            context_tokens: 8192,
        };
        let g = group(vec![
            cp(Scope::Matrix, 30, -0.03, false),
            with(Metric::ItlP99, Scope::Matrix, 0.87),
            with(Metric::PrefillTps, Scope::Matrix, -0.2),
            with(Metric::PrefillTps, prefill_8k, -0.25),
            with(Metric::BurstTtftP90, Scope::Matrix, 0.45),
        ]);
        let alerts = plan(std::slice::from_ref(&g));
        let titles: Vec<String> = alerts.iter().map(title).collect();
        assert_eq!(alerts.len(), 4, "{titles:#?}");
        assert_contains(&titles[1], "ITL p99 +87.0% at matrix (h200-vllm / nightly)");
        assert_contains(&titles[2], "prefill tok/s −20.0% at prefill layer");
        assert_contains(&titles[3], "TTFT p90 +45.0% at burst layer");
        assert_eq!(alerts[2].cells.len(), 1);
        assert!(alerts[0].cells.is_empty());
        let text = body(&alerts[2], AlertState::Open, None);
        assert_contains(&text, "| series | prefill tok/s of prefill layer |");
        assert_contains(&text, "| prefill 8k | −25.0%");
        // Bisection measures the change's own metric.
        assert_contains(
            &text,
            "infergate bisect --good c28 --bad c31 --metric prefill_tps\n",
        );
        let text = body(&alerts[0], AlertState::Open, None);
        assert_contains(&text, "infergate bisect --good c28 --bad c31\n");
        assert_contains(&text, "Every metric of this group is then compared");
        // A tail's accept restarts its own baseline alone.
        let text = body(&alerts[1], AlertState::Open, None);
        assert_contains(&text, "This metric alone is then compared");
        assert_contains(&text, "--suite nightly --metric itl_p99\n```");
    }

    #[test]
    fn store_text_in_the_body_is_inert() {
        let mut g = group(vec![cp(Scope::Matrix, 30, -0.03, false)]);
        g.history.runs[29].commit = Some("@maintainer see https://evil.example #1".into());
        g.suite = "nightly".into();
        let alerts = plan(std::slice::from_ref(&g));
        let text = body(&alerts[0], AlertState::Open, None);
        assert_lacks(&text, "@maintainer");
        assert_lacks(&text, "https://evil");
        assert_lacks(&text, " #1");
    }

    #[test]
    fn new_is_created_open_is_updated_accepted_is_closed() {
        let g = group(vec![cp(Scope::Matrix, 30, -0.03, false)]);
        let alerts = plan(std::slice::from_ref(&g));
        assert_eq!(
            reconcile(&alerts, &[], &analysed()),
            vec![Action::Create { alert: 0 }]
        );
        let ours = vec![issue(5, "open", &alerts[0].key)];
        assert_eq!(reconcile(&alerts, &ours, &analysed()), vec![update(5, 0)]);
        let acc = group(vec![cp(Scope::Matrix, 30, -0.03, true)]);
        let alerts = plan(std::slice::from_ref(&acc));
        assert_eq!(
            reconcile(&alerts, &ours, &analysed()),
            vec![Action::Close {
                number: 5,
                alert: Some(0),
                reason: CloseReason::Accepted
            }]
        );
        // Accepted and never reported: nothing to do.
        assert_eq!(reconcile(&alerts, &[], &analysed()), vec![]);
    }

    #[test]
    fn a_closed_issue_is_not_reopened_and_a_vanished_change_is_closed() {
        let g = group(vec![cp(Scope::Matrix, 30, -0.03, false)]);
        let alerts = plan(std::slice::from_ref(&g));
        let closed = vec![issue(5, "closed", &alerts[0].key)];
        assert_eq!(reconcile(&alerts, &closed, &analysed()), vec![]);
        let empty = group(vec![]);
        let none = plan(std::slice::from_ref(&empty));
        let open = vec![issue(5, "open", &alerts[0].key)];
        assert_eq!(reconcile(&none, &open, &analysed()), vec![gone(5)]);
        // Another group's issue is not this analysis' business.
        assert_eq!(reconcile(&none, &open, &BTreeSet::new()), vec![]);
    }

    fn creep(run: usize, until: usize) -> ChangePoint {
        let mut c = cp(Scope::Matrix, run, -0.02, false);
        c.kind = ChangeKind::Creep;
        c.slope = Some(infergate_model::stats::changepoint::Slope {
            per_run: -0.002,
            ci_low: -0.003,
            ci_high: -0.001,
            runs: until + 1 - run,
        });
        c.until_run_id = Some(format!("r{until:02}"));
        c
    }

    #[test]
    fn a_growing_creep_keeps_its_issue_and_covers_its_cells() {
        // Night 1: the creep was seen as a step at r33; night 2: a creep from r27 to r39.
        let night1 = group(vec![cp(Scope::Matrix, 33, -0.015, false)]);
        let a1 = plan(std::slice::from_ref(&night1));
        let ours = vec![issue(5, "open", &a1[0].key)];
        let night2 = group(vec![creep(27, 39), cp(cell(4), 35, -0.03, false)]);
        let a2 = plan(std::slice::from_ref(&night2));
        assert_eq!(a2.len(), 1, "the cell moved along the creep: {a2:#?}");
        assert_eq!(a2[0].cells.len(), 1);
        assert_eq!(reconcile(&a2, &ours, &analysed()), vec![update(5, 0)]);
        let text = body(&a2[0], AlertState::Open, None);
        assert_contains(&text, "creep: −0.20%/run");
        assert_eq!(parse_until(&text).as_deref(), Some("r39"));
        assert!(title(&a2[0]).contains("creep"));
        // Night 3: the onset estimate moved later (r32), outside the old onset's tolerance
        // but the old issue's recorded stretch (r27..r39) holds it: still the same issue.
        let mut updated = issue(5, "open", &a2[0].key);
        updated.0.body = Some(text);
        let night3 = group(vec![creep(32, 39)]);
        let a3 = plan(std::slice::from_ref(&night3));
        assert_eq!(reconcile(&a3, &[updated], &analysed()), vec![update(5, 0)]);
    }

    #[test]
    fn a_change_that_moved_a_run_keeps_its_issue() {
        let night1 = group(vec![cp(Scope::Matrix, 30, -0.03, false)]);
        let a1 = plan(std::slice::from_ref(&night1));
        let ours = vec![issue(5, "open", &a1[0].key)];
        let night2 = group(vec![cp(Scope::Matrix, 31, -0.03, false)]);
        let a2 = plan(std::slice::from_ref(&night2));
        assert_eq!(reconcile(&a2, &ours, &analysed()), vec![update(5, 0)]);
        let far = group(vec![cp(Scope::Matrix, 38, -0.03, false)]);
        let a3 = plan(std::slice::from_ref(&far));
        assert_eq!(
            reconcile(&a3, &ours, &analysed()),
            vec![gone(5), Action::Create { alert: 0 }]
        );
    }
}
