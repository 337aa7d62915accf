//! The PR comment and the job summary of a pass, a regression (a 10% slower engine on the
//! default config) and an undecided verdict on a thin baseline, from real gate runs
//! (`tests/fixtures/reports/<case>/{results,verdict}.json`, recorded by
//! `scripts/record-report-fixtures.sh`), rendered the way a reader sees
//! them: GitHub-flavoured Markdown → HTML → a headless-chromium screenshot, checked for the
//! first line, the table width and raw Markdown (`scripts/render-reports.py`).
//!
//! Without python `markdown` or chromium the rendering half is skipped loudly (set
//! `INFERGATE_REQUIRE_RENDER=1` to make that a failure); the Markdown checks and snapshots
//! always run. `INFERGATE_UPDATE_SCREENSHOTS=1` copies the PNGs to `docs/screenshots/`.

#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::{assert_lacks, assert_starts_with};
use std::path::PathBuf;
use std::process::Command;

use infergate::policy::GatePolicy;
use infergate::report::github::render::{self, Links, Outcome};
use infergate::results::RunResults;
use infergate::verdict::ComparisonReport;

const CASES: [&str; 3] = ["pass", "regression", "insufficient"];
const CHECK: &str = "infergate / cpu-sim__infergate-sim__sim-test__mc37919a9d2 / pr";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load<T: serde::de::DeserializeOwned>(case: &str, file: &str) -> T {
    let path = root().join("tests/fixtures/reports").join(case).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn links() -> Links {
    Links {
        run_url: Some("https://github.com/o/r/actions/runs/1".into()),
        artifact_url: Some("https://github.com/o/r/actions/runs/1/artifacts/2".into()),
        head_sha: Some("3ad87b95e88f04a7aa00000000000000000000ff".into()),
        trend_report: None,
        config: Some("infergate.toml".into()),
    }
}

/// The comment and the summary of one case, with the Markdown checks every surface must pass.
fn render_case(case: &str) -> (String, String) {
    let results: RunResults = load(case, "results.json");
    let verdict: ComparisonReport = load(case, "verdict.json");
    let outcome = Outcome {
        results: &results,
        verdict: Some(&verdict),
        failure: None,
        cautions: &[],
        policy: GatePolicy::default(),
    };
    let comment = render::comment_body(CHECK, &outcome, &links(), 0);
    let summary = render::job_summary(CHECK, &outcome, &links(), None);
    for (what, md) in [("comment", &comment), ("summary", &summary)] {
        let first = md
            .lines()
            .find(|l| !l.starts_with("<!--") && !l.trim().is_empty())
            .unwrap_or_default();
        assert!(
            first.starts_with("### ") || first.starts_with("## "),
            "{case} {what}: the first line is not the heading: {first}"
        );
        let widest = md
            .lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);
        assert!(
            widest <= 100,
            "{case} {what}: a table row of {widest} characters"
        );
        // The first line (up to its first escaped character) is said once.
        let title = outcome.title();
        let said: String = title.chars().take_while(|c| !"[(*_".contains(*c)).collect();
        assert!(said.chars().count() > 10, "{title}");
        assert_eq!(
            md.matches(said.as_str()).count(),
            1,
            "{case} {what}: the first line is said once: {md}"
        );
    }
    (comment, summary)
}

#[test]
fn the_first_line_of_a_10_percent_slower_engine_states_the_change_and_the_cells() {
    let verdict: ComparisonReport = load("regression", "verdict.json");
    let (comment, _) = render_case("regression");
    let heading = comment
        .lines()
        .find(|l| l.starts_with("### "))
        .unwrap_or_default();
    assert_starts_with(heading, "### ✗ aggregate tok/s −");
    let cells = verdict.cells.len();
    assert!(
        heading.contains(&format!("{cells} cells")),
        "the heading names the cells: {heading}"
    );
    assert_lacks(&comment, "improvement");
}

#[test]
fn comments_and_summaries_snapshot() {
    for case in CASES {
        let (comment, summary) = render_case(case);
        insta::assert_snapshot!(format!("comment_{case}"), comment);
        insta::assert_snapshot!(format!("summary_{case}"), summary);
    }
}

#[test]
fn reports_render_as_a_reader_sees_them() {
    let out = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    for case in CASES {
        let (comment, summary) = render_case(case);
        for (kind, md) in [("comment", comment), ("summary", summary)] {
            let path = out.path().join(format!("{kind}-{case}.md"));
            std::fs::write(&path, md).expect("write");
            files.push(path);
        }
    }
    let shots = out.path().join("png");
    let status = Command::new("python3")
        .arg(root().join("scripts/render-reports.py"))
        .arg(&shots)
        .args(&files)
        .status();
    let code = status.ok().and_then(|s| s.code());
    if code == Some(77) || code.is_none() {
        let msg = "rendered_reports: SKIPPED the browser rendering (needs python3 with `markdown` and chromium; see scripts/render-reports.py)";
        assert!(
            std::env::var_os("INFERGATE_REQUIRE_RENDER").is_none(),
            "{msg}"
        );
        eprintln!("{msg}");
        return;
    }
    assert_eq!(
        code,
        Some(0),
        "the rendered reports failed their checks (output above)"
    );
    if std::env::var_os("INFERGATE_UPDATE_SCREENSHOTS").is_some() {
        let docs = root().join("docs/screenshots");
        std::fs::create_dir_all(&docs).expect("docs/screenshots");
        for entry in std::fs::read_dir(&shots).expect("pngs") {
            let path = entry.expect("entry").path();
            let name = path.file_name().expect("name");
            std::fs::copy(&path, docs.join(name)).expect("copy");
        }
    }
}
