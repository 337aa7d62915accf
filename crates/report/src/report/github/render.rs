//! The texts GitHub shows: check-run title/summary/text, the sticky comment body, the job
//! summary, and the one-line cell titles/messages used by annotations and workflow commands.
//!
//! Pure functions of the plain data (results, verdict, links) so they can be snapshot-tested.
//! Engine- and config-supplied strings go through [`escape`]; every surface shows the one
//! layout of [`crate::report::layout`]: the first line, the matrix, the legend, Details.

use crate::report::console;
use crate::report::layout::{self, escape_code, one_line};
use infergate_config::config::EMBEDDED_NAME;
use infergate_io::untrusted_text::markdown as escape;
use infergate_schema::answer::{ConfigArg, StepContext, plural};
use infergate_schema::policy::{GateEnding, GatePolicy};
use infergate_schema::results::{CellStatus, RunResults, RunStatus, context_label};
use infergate_schema::verdict::{Against, ComparisonReport};

/// GitHub's limit on a check-run summary, a check-run text and an issue comment, in characters.
/// We count bytes, which is never fewer, so the cap always holds.
pub const GITHUB_TEXT_LIMIT: usize = 65_535;
/// GitHub's limit on one step's job summary (1 MiB); we stay a little under it.
pub(crate) const STEP_SUMMARY_LIMIT: usize = 1_000_000;

pub use infergate_schema::policy::Conclusion;

fn icon(c: Conclusion) -> &'static str {
    match c {
        Conclusion::Success => "✅",
        Conclusion::Failure => "❌",
        Conclusion::Neutral => "⚪",
        Conclusion::Cancelled => "⏹️",
    }
}

/// What a finished gate amounts to, before any text is made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<'a> {
    /// The candidate's results.
    pub results: &'a RunResults,
    /// The comparison; `None` = no baseline, or the gate failed before comparing.
    pub verdict: Option<&'a ComparisonReport>,
    /// The gate errored with this reason.
    pub failure: Option<&'a str>,
    /// What a reader should know before trusting the figures, for either boot: processes that
    /// survived teardown, cells measured while the GPU slowed its clocks.
    pub cautions: &'a [String],
    /// What fails the gate (config `fail_on`).
    pub policy: GatePolicy,
}

impl Outcome<'_> {
    /// How the gate ended, from the one policy that also gives the exit code.
    pub fn ending(&self) -> GateEnding {
        // A results file the gate never finished (`in_progress`: the gate was killed) is a
        // gate error, whatever verdict comes with it.
        self.policy.ending(
            self.failure.is_some() || self.results.status == RunStatus::InProgress,
            self.results.status == RunStatus::Cancelled,
            self.verdict.map(|v| v.gate),
        )
    }

    /// The check-run conclusion.
    pub(crate) fn conclusion(&self) -> Conclusion {
        self.ending().conclusion
    }

    /// The word for the `verdict` step output.
    pub(crate) fn verdict_word(&self) -> &'static str {
        self.ending().verdict_word
    }

    /// Number of cells that block the gate.
    pub(crate) fn regressions(&self) -> usize {
        self.verdict.map(|v| v.regressions().count()).unwrap_or(0)
    }

    /// One plain-text line, whole: the comment's and the job summary's heading.
    fn line(&self) -> String {
        if let Some(reason) = self.failure {
            format!("Gate error: {}", one_line(reason))
        } else if self.results.status == RunStatus::Cancelled {
            "Run cancelled".to_string()
        } else if self.results.status == RunStatus::InProgress {
            "Gate error: the run did not finish (the gate was stopped mid-matrix)".to_string()
        } else if let Some(v) = self.verdict {
            one_line(&infergate_schema::answer::first_line(v))
        } else {
            "No baseline yet: nothing to compare with".to_string()
        }
    }

    /// The check-run title: [`Self::line`] cut at 250 characters.
    pub fn title(&self) -> String {
        cut_chars(&self.line(), 250)
    }
}

/// Links shown under reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Links {
    /// The workflow run's page.
    pub run_url: Option<String>,
    /// Where the run's artifact (results, verdict, logs) can be downloaded.
    pub artifact_url: Option<String>,
    /// Commit the report is about (PR head).
    pub head_sha: Option<String>,
    /// The HTML trend report of the baseline history (`infergate changes --format html`).
    pub trend_report: Option<TrendReport>,
    /// The gate config as named to the user (for the "reproduce locally" command); `None`
    /// where the reporter was not told.
    pub config: Option<String>,
}

/// Where the trend report can be read: a URL, or the name of the artifact holding `trend.html`
/// (an artifact's URL is known only after it is uploaded, often by another job).
#[derive(Debug, Clone, PartialEq)]
pub enum TrendReport {
    /// Where the report is published.
    Url(String),
    /// The name of the artifact that holds `trend.html`.
    Artifact(String),
}

impl Links {
    fn markdown(&self) -> String {
        let mut parts = Vec::new();
        if let Some(sha) = &self.head_sha {
            parts.push(format!("commit `{}`", escape_code(short_sha(sha))));
        }
        if let Some(u) = &self.run_url {
            parts.push(format!("[workflow run]({})", link_target(u)));
        }
        if let Some(u) = &self.artifact_url {
            parts.push(format!("[results artifact]({})", link_target(u)));
        }
        match &self.trend_report {
            Some(TrendReport::Url(u)) => parts.push(format!("[trend report]({})", link_target(u))),
            Some(TrendReport::Artifact(name)) => parts.push(format!(
                "trend report: `trend.html` in the `{}` artifact",
                escape_code(name)
            )),
            None => {}
        }
        parts.join(" · ")
    }

    /// Where the full report can be read, for truncation notes.
    pub(crate) fn full_report(&self) -> Option<&str> {
        self.artifact_url.as_deref().or(self.run_url.as_deref())
    }
}

/// First 7 characters of a SHA.
pub(crate) fn short_sha(sha: &str) -> &str {
    sha.char_indices().nth(7).map_or(sha, |(i, _)| &sha[..i])
}

/// Keeps a URL from breaking out of a Markdown link.
fn link_target(url: &str) -> String {
    url.chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| match c {
            '(' => "%28".to_string(),
            ')' => "%29".to_string(),
            '<' => "%3C".to_string(),
            '>' => "%3E".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// Aggregate tok/s per cell when there is no verdict to show: context rows x concurrency
/// columns, like the verdict matrix.
pub(crate) fn results_markdown(results: &RunResults) -> String {
    let (conc, ctxs) = console::axes(results);
    let mut out = layout::markdown_matrix_head(&conc);
    for &ctx in &ctxs {
        let mut row = vec![context_label(ctx)];
        for &c in &conc {
            row.push(match console::find(results, c, ctx) {
                None => infergate_schema::answer::NO_VALUE.to_string(),
                Some(x) => match x.status {
                    CellStatus::Ok => format!("{:.1}", x.aggregate_tps),
                    CellStatus::CapacityLimited if !x.has_window() => "— (cap)".to_string(),
                    CellStatus::CapacityLimited => format!("{:.1} (cap)", x.aggregate_tps),
                    CellStatus::Saturated => format!("{:.1} (saturated)", x.aggregate_tps),
                    CellStatus::Error => "error".to_string(),
                    CellStatus::Skipped => "skipped".to_string(),
                },
            });
        }
        out.push_str(&layout::markdown_row(&row));
    }
    out.push_str(
        "\nAggregate output tok/s; `(cap)` = capacity-limited (`— (cap)`: not measured, a smaller concurrency at this context already was); `(saturated)` = the engine preempted or retracted requests.\n",
    );
    out
}

/// Profile, engine, model and run facts, escaped.
fn facts_markdown(results: &RunResults, verdict: Option<&ComparisonReport>) -> String {
    let p = &results.profile;
    let hw = match &p.hardware.gpu_model {
        Some(gpu) => format!("{} × {}", escape(gpu), p.hardware.gpu_count.max(1)),
        None => escape(p.hardware.cpu_model.as_deref().unwrap_or(&p.hardware.kind)),
    };
    let mut out = String::new();
    // With a verdict, its Details already name the profile and the model.
    if verdict.is_none() {
        out.push_str(&format!("- Profile: `{}`\n", escape_code(&p.key)));
    }
    out.push_str(&format!(
        "- Engine: {}{}\n",
        escape(&results.engine.name),
        results
            .engine
            .version
            .as_deref()
            .map(|v| format!(" {}", escape(v)))
            .unwrap_or_default()
    ));
    if verdict.is_none() {
        out.push_str(&format!("- Model: {}\n", escape(&p.model)));
    }
    out.push_str(&format!("- Hardware: {hw}\n"));
    if let Some(t) = results.telemetry.as_ref().and_then(layout::telemetry_text) {
        out.push_str(&format!("- GPU telemetry: {}\n", escape(&t)));
    }
    out.push_str(&format!(
        "- Run: `{}` ({}{})\n",
        escape_code(&results.run_id),
        results.status.as_str(),
        results
            .status_reason
            .as_deref()
            .map(|r| format!(": {}", escape(r)))
            .unwrap_or_default()
    ));
    if let Some(v) = verdict {
        // Rule, baseline and matrix-wide test are in the verdict matrix itself. The model is
        // fitted on the whole window; the level is its newest runs.
        let (window, level) = (v.baseline.noise_runs, v.baseline.level_runs.len());
        let (candidate, base) = match v.against {
            Against::Baseline => ("candidate", plural(window, "baseline run")),
            Against::PairedAb => ("B boots", plural(window, "A boot")),
        };
        out.push_str(&format!(
            "- Compared: {candidate} {} vs {base}{}\n",
            v.candidate_runs
                .iter()
                .map(|r| format!("`{}`", escape_code(r)))
                .collect::<Vec<_>>()
                .join(", "),
            if level < window {
                format!(" (level: the newest {level})")
            } else {
                String::new()
            }
        ));
    }
    out
}

/// The main table: the verdict matrix, or the raw results when there is no verdict; `chart`
/// goes between the legend and Details.
fn matrix_markdown(outcome: &Outcome<'_>, links: &Links, chart: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(reason) = outcome.failure {
        out.push_str(&format!("**The gate failed:** {}\n\n", escape(reason)));
    }
    // Below the matrix, before the charts: a reader weighing a change should know what may
    // have moved the figures besides the engine (either boot).
    let caution: String = outcome
        .cautions
        .iter()
        .map(|w| format!("> ⚠️ **Caution:** {}\n\n", escape(w)))
        .collect();
    match outcome.verdict {
        Some(v) => {
            let config = links.config.as_deref();
            let steps = StepContext {
                config: config.map_or(ConfigArg::Unknown, |c| ConfigArg::named(c, EMBEDDED_NAME)),
                insufficient_blocks: Some(outcome.policy.fail_on.insufficient),
                results_file: None,
            };
            out.push_str(&layout::markdown_body(
                &layout::layout_with(v, &steps),
                &format!("{caution}{}", chart.unwrap_or("")),
                &facts_markdown(outcome.results, Some(v)),
            ));
        }
        None => {
            if outcome.failure.is_none() {
                out.push_str(
                    "**No baseline yet** for this profile and suite: the store holds no runs of them, so this run was measured but not compared (the gate passes). Record one with `infergate run --update-baseline` on the main branch or `infergate baseline add`.\n\n",
                );
            }
            out.push_str(&results_markdown(outcome.results));
            if !caution.is_empty() {
                out.push('\n');
                out.push_str(&caution);
            }
            if let Some(chart) = chart {
                out.push('\n');
                out.push_str(chart);
            }
        }
    }
    out
}

/// `output.summary` of the check run: the verdict matrix (capped).
pub fn check_summary(outcome: &Outcome<'_>, links: &Links) -> String {
    truncate_markdown(
        &matrix_markdown(outcome, links, None),
        GITHUB_TEXT_LIMIT,
        links.full_report(),
    )
}

/// `output.text` of the check run: details and links (capped).
pub fn check_text(outcome: &Outcome<'_>, links: &Links) -> String {
    let mut out = String::new();
    let l = links.markdown();
    if !l.is_empty() {
        out.push_str(&l);
        out.push_str("\n\n");
    }
    out.push_str(&facts_markdown(outcome.results, outcome.verdict));
    truncate_markdown(&out, GITHUB_TEXT_LIMIT, links.full_report())
}

/// The hidden marker that identifies the sticky comment of one check name.
pub fn comment_marker(check_name: &str) -> String {
    let safe: String = check_name
        .replace("--", "- -")
        .chars()
        .filter(|c| !matches!(c, '<' | '>' | '\n' | '\r'))
        .collect();
    format!("<!-- infergate:{safe} -->")
}

/// Hidden state carried in the comment, so the next push can say what it fixed.
pub(crate) fn comment_state(regressions: usize) -> String {
    format!("<!-- infergate-state: regressions={regressions} -->")
}

/// Regressions recorded in an earlier comment body (0 when none or unreadable).
pub(crate) fn previous_regressions(body: &str) -> usize {
    body.split("<!-- infergate-state: regressions=")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// The sticky PR comment. `previously` = regressions the last comment reported; when this run
/// passes after those, the comment says it was fixed.
pub fn comment_body(
    check_name: &str,
    outcome: &Outcome<'_>,
    links: &Links,
    previously: usize,
) -> String {
    let mut out = format!(
        "{}\n{}\n### {}\n\n",
        comment_marker(check_name),
        comment_state(outcome.regressions()),
        escape(&heading(outcome))
    );
    if previously > 0 && outcome.regressions() == 0 && outcome.conclusion() == Conclusion::Success {
        let sha = links
            .head_sha
            .as_deref()
            .map(|s| format!(" in `{}`", escape_code(short_sha(s))))
            .unwrap_or_default();
        out.push_str(&format!(
            "✅ Fixed{sha}: the previous run had {}.\n\n",
            plural(previously, "regression")
        ));
    }
    out.push_str(&name_and_links(check_name, links));
    out.push_str(&matrix_markdown(outcome, links, None));
    truncate_markdown(&out, GITHUB_TEXT_LIMIT, links.full_report())
}

/// The heading of the comment and the job summary: the layout's first line, whole (it opens
/// with the verdict's symbol; the check-run title is the same line cut at 250 characters, and
/// an `insufficient` line that names the host's lateness is longer), or the gate's error / the
/// missing baseline with the check's icon.
fn heading(outcome: &Outcome<'_>) -> String {
    match (outcome.failure, outcome.verdict, outcome.results.status) {
        (None, Some(_), RunStatus::Complete | RunStatus::Partial) => outcome.line(),
        _ => format!("{} {}", icon(outcome.conclusion()), outcome.title()),
    }
}

/// `` `infergate / p / pr` · commit `abc1234` · [workflow run](…) ``: what the report is about.
fn name_and_links(check_name: &str, links: &Links) -> String {
    let mut out = format!("`{}`", escape_code(check_name));
    let l = links.markdown();
    if !l.is_empty() {
        out.push_str(" · ");
        out.push_str(&l);
    }
    out.push_str("\n\n");
    out
}

/// The job summary section: the first line as heading, the matrix, the chart, Details.
pub fn job_summary(
    check_name: &str,
    outcome: &Outcome<'_>,
    links: &Links,
    chart: Option<&str>,
) -> String {
    let mut out = format!("## {}\n\n", escape(&heading(outcome)));
    out.push_str(&name_and_links(check_name, links));
    out.push_str(&format!("{}\n", matrix_markdown(outcome, links, chart)));
    truncate_markdown(&out, STEP_SUMMARY_LIMIT, links.full_report())
}

/// Caps Markdown at `limit` bytes (never more characters than that): cuts at a line boundary,
/// before a table that would be split when the table starts in the second half of the kept
/// text, closes open `<details>` and code fences, and appends a note with a link to the full
/// report.
pub(crate) fn truncate_markdown(text: &str, limit: usize, full_report: Option<&str>) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let where_ = match full_report {
        Some(u) => format!("[full report]({})", link_target(u)),
        None => "the full report in the job summary and the results artifact".to_string(),
    };
    let note_for = |shown: usize| {
        format!(
            "\n\n> ⚠️ Truncated: {shown} of {} characters shown (GitHub's limit is {limit}). See {where_}.\n",
            text.len()
        )
    };
    // Room for the note and for closing tags.
    let reserve = note_for(text.len()).len() + 64;
    let budget = limit.saturating_sub(reserve);
    let mut cut = budget.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    // Back to the end of a whole line.
    if let Some(nl) = text[..cut].rfind('\n') {
        cut = nl + 1;
    }
    // Keep a table whole when that does not throw away too much.
    if text[cut..].starts_with('|') {
        let rows = text[..cut].lines().rev().take_while(|l| l.starts_with('|'));
        let start = cut - rows.map(|l| l.len() + 1).sum::<usize>();
        if start >= budget / 2 {
            cut = start;
        }
    }
    let mut out = text[..cut].to_string();
    let fences = out
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    if fences % 2 == 1 {
        out.push_str("```\n");
    }
    let open = out.matches("<details").count();
    let closed = out.matches("</details>").count();
    for _ in closed..open {
        out.push_str("\n</details>\n");
    }
    out.push_str(&note_for(cut));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::{assert_contains, assert_lacks};

    /// The comment's and the job summary's heading is the whole first line, however long: an
    /// `insufficient` line that names the host's lateness passed 250 characters and was cut
    /// there, so the summary no longer held the verdict's headline. The check-run title is cut.
    #[test]
    fn the_heading_is_the_whole_first_line_and_the_title_is_cut() {
        use infergate_schema::verdict::{HostLateCell, Metric, fixtures};
        let results = infergate_model::synthetic::template();
        let mut v = fixtures::insufficient();
        v.cell_metrics_gated = vec![Metric::ItlP99];
        v.host_late = v
            .cells
            .iter()
            .map(|c| HostLateCell {
                concurrency: c.concurrency,
                context_tokens: c.context_tokens,
                metric: Metric::ItlP99,
                lateness_p99_s: 0.0028,
                value_s: 0.0098,
            })
            .collect();
        let line = one_line(&infergate_schema::answer::first_line(&v));
        assert!(line.chars().count() > 250, "{line}");
        let outcome = Outcome {
            results: &results,
            verdict: Some(&v),
            failure: None,
            cautions: &[],
            policy: GatePolicy::default(),
        };
        assert_eq!(heading(&outcome), line);
        let summary = job_summary("infergate / p / pr", &outcome, &Links::default(), None);
        assert_contains(&summary, &escape(&line));
        assert_eq!(outcome.title(), cut_chars(&line, 250));
    }

    #[test]
    fn truncation_respects_limit_lines_and_tables() {
        let mut text = String::from("# Title\n\nintro line\n\n");
        text.push_str("| a | b |\n|---|---|\n");
        for i in 0..2000 {
            text.push_str(&format!("| row {i} | ünïcödé {i} |\n"));
        }
        text.push_str("\n<details><summary>x</summary>\n\nmore\n</details>\n");
        let out = truncate_markdown(&text, 5000, Some("https://example/run"));
        assert!(out.len() <= 5000, "{}", out.len());
        assert!(out.contains("Truncated"));
        assert!(out.contains("[full report](https://example/run)"));
        // Every kept table line is a whole row.
        for line in out.lines().filter(|l| l.starts_with('|')) {
            assert!(line.ends_with('|'), "{line}");
        }
        // Short text is untouched.
        assert_eq!(truncate_markdown("short", 100, None), "short");
    }

    #[test]
    fn truncation_drops_a_late_table_whole_and_closes_details() {
        let mut text = String::from("<details><summary>d</summary>\n\n");
        text.push_str(&"filler line of text\n".repeat(150));
        text.push_str("| a |\n|---|\n");
        for i in 0..500 {
            text.push_str(&format!("| {i} |\n"));
        }
        let out = truncate_markdown(&text, 4000, None);
        assert!(out.len() <= 4000);
        assert!(!out.contains("| a |"), "late table should be dropped whole");
        assert_eq!(out.matches("</details>").count(), 1);
    }

    /// A capacity-limited cell decided without a window gets no figure in the summary's
    /// matrix (`— (cap)`, not `0.0 (cap)`), and the legend says what that means.
    #[test]
    fn a_capacity_cell_decided_without_a_window_shows_no_figure() {
        let mut run = infergate_store::export::fixture::run();
        let (c, ctx) = (run.cells[3].concurrency, run.cells[3].context_tokens);
        run.cells[3] = infergate_schema::results::CellResult::unmeasured(
            c,
            ctx,
            CellStatus::CapacityLimited,
            "C=4 already capacity-limited at 8k: not measured",
        );
        let md = results_markdown(&run);
        assert_contains(&md, "| — (cap) |");
        assert_lacks(&md, "0.0 (cap)");
        assert_contains(&md, "`— (cap)`: not measured");
        // Nor is its zero exported as a figure.
        assert!(
            infergate_store::export::figures(&run)
                .iter()
                .all(|f| (f.cell.concurrency, f.cell.context_tokens) != (c, ctx))
        );
    }

    /// The summary's facts say what the GPU did (as an H200 reported it under load) and escape a
    /// device name; a cell measured while heat slowed the clocks, on either boot, gets a caution
    /// below the matrix.
    #[test]
    fn facts_show_gpu_telemetry_and_a_caution_names_cells_slowed_by_heat() {
        let mut run = infergate_store::export::fixture::run();
        run.telemetry = Some(infergate_schema::results::TelemetrySummary {
            devices: vec!["0: NVIDIA <b>H200</b>".into()],
            ..infergate_store::export::fixture::h200_telemetry()
        });
        let md = facts_markdown(&run, None);
        let line = md
            .lines()
            .find(|l| l.starts_with("- GPU telemetry: "))
            .unwrap();
        assert_contains(line, "1.590 J/token · avg power 442 W · max 63 °C");
        assert_contains(line, "clocks limited by sw\\_power\\_cap");
        assert_lacks(line, "<b>");
        let matrix = |run: &RunResults, cautions: &[String]| {
            matrix_markdown(
                &Outcome {
                    results: run,
                    verdict: None,
                    failure: None,
                    cautions,
                    policy: GatePolicy::default(),
                },
                &Links::default(),
                None,
            )
        };
        // The power cap alone is a busy GPU's normal state.
        assert_eq!(layout::clock_slowdown_text(&run, ""), None);
        assert!(!matrix(&run, &[]).contains("Caution"));
        run.cells[3].telemetry = Some(infergate_store::export::fixture::h200_window(&[
            "sw_power_cap",
            "hw_thermal_slowdown",
        ]));
        // The second boot's slowed cells are named as its own.
        let cautions = layout::clock_cautions(&infergate_store::export::fixture::run(), Some(&run));
        let md = matrix(&run, &cautions);
        let caution = md
            .lines()
            .find(|l| l.starts_with("> ⚠️ **Caution:** "))
            .unwrap();
        let cell = &run.cells[3];
        let named = format!(
            "in 1 cell of the confirmation boot: C={} / {} (hw\\_thermal\\_slowdown)",
            cell.concurrency,
            context_label(cell.context_tokens)
        );
        assert_contains(caution, &named);
    }

    #[test]
    fn marker_cannot_close_the_html_comment() {
        let m = comment_marker("infergate / p / evil-->x");
        assert_eq!(m.matches("-->").count(), 1);
        assert!(m.ends_with(" -->"));
        assert_eq!(previous_regressions(&comment_state(3)), 3);
        assert_eq!(previous_regressions("no state"), 0);
    }
}
