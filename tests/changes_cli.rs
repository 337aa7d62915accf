//! End-to-end tests of `infergate changes` and `baseline accept` through the real binary, on a
//! generated nightly history (tests/results_gen) with a −3% step: the change point is found at
//! the right run with its commit range; after accepting it the next nightly at the new level
//! passes and a further −5% is caught; the HTML trend report is one self-contained page and
//! renders in headless Chromium without console errors (required under CI, where `.ci/run` installs it).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;

use infergate_schema::asserts::{assert_contains, assert_starts_with};
use infergate_schema::verdict::NotGated;
use std::path::Path;

use results_gen::{Gen, infergate, run, write};

const STEP_AT: u64 = 30;
const NIGHTS: u64 = 36;

/// Night `i` of the history: level 1 before the step, 0.97 from it on, `sha` label `c<i>`.
fn night(i: u64, factor: f64) -> infergate::results::RunResults {
    let g = Gen {
        suite: Some("nightly".into()),
        factor,
        ..Gen::default()
    };
    let mut r = run(&g, i);
    r.labels.insert("sha".into(), format!("c{i:03}"));
    // From the step on, one cell 3% slower again: it moved apart from the rest of the matrix
    // (the others moved together, which the matrix series alone tells).
    if factor < 1.0
        && let Some(c) = r.cells.last_mut()
    {
        c.aggregate_tps *= 0.97;
        c.samples.iter_mut().for_each(|s| *s *= 0.97);
    }
    r
}

fn store_with_step(dir: &Path) -> Vec<infergate::results::RunResults> {
    let runs: Vec<_> = (0..NIGHTS)
        .map(|i| night(i, if i < STEP_AT { 1.0 } else { 0.97 }))
        .collect();
    store_of(dir, runs)
}

/// `runs` added to a store at `dir/store` (each written to `dir/files` first).
fn store_of(
    dir: &Path,
    runs: Vec<infergate::results::RunResults>,
) -> Vec<infergate::results::RunResults> {
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let mut args = vec![
        "baseline".to_string(),
        "add".into(),
        "--dir".into(),
        dir.join("store").display().to_string(),
    ];
    for (i, r) in runs.iter().enumerate() {
        args.push(
            write(&files, &format!("n{i}.json"), r)
                .display()
                .to_string(),
        );
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = infergate(&args);
    assert_eq!(code, 0, "{err}");
    runs
}

#[test]
fn step_found_accepted_then_new_level_passes_and_further_drop_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = store_with_step(tmp.path());
    let store = tmp.path().join("store");
    let store_s = store.to_str().unwrap();
    // The console leads with the answer and fits 100 columns.
    let (_, text, _) = infergate(&["changes", "--baseline-dir", store_s]);
    std::fs::write("/tmp/changes-step.txt", &text).unwrap();
    assert_starts_with(&text, "2 change points in 36 runs of ");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("a cell's change is against the other cells of its runs"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let (code, out, err) = infergate(&["changes", "--baseline-dir", store_s, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let group = &v["groups"][0];
    assert_eq!(group["suite"], "nightly");
    // Every run keeps the labels it was recorded with.
    let stored: Vec<&str> = group["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["commit"].as_str().unwrap())
        .collect();
    let recorded: Vec<String> = runs.iter().map(|r| r.labels["sha"].clone()).collect();
    assert_eq!(stored, recorded);
    let cps = group["change_points"].as_array().unwrap();
    let matrix: Vec<_> = cps.iter().filter(|c| c["scope"] == "matrix").collect();
    assert_eq!(matrix.len(), 1, "{cps:#?}");
    let m = matrix[0];
    let step_run = &runs[STEP_AT as usize].run_id;
    assert_eq!(m["run_id"], step_run.as_str());
    assert_eq!(m["metric"], "aggregate_tps");
    assert_eq!(m["commits"]["range"], "c029..c030");
    let change = m["change"].as_f64().unwrap();
    assert!((change + 0.03).abs() < 0.01, "{m}");
    assert!(m["ci_low"].as_f64().unwrap() <= change && change <= m["ci_high"].as_f64().unwrap());
    assert_eq!(m["accepted"], false);
    // Where, with its uncertainty: the 90% location interval holds the step's run, and its
    // commits are the range to bisect.
    let loc = &m["location_interval"];
    assert_eq!(loc["confidence"], 0.9, "{m}");
    let pos = |id: &serde_json::Value| runs.iter().position(|r| r.run_id == id.as_str().unwrap());
    let (first, last) = (
        pos(&loc["first_run_id"]).unwrap(),
        pos(&loc["last_run_id"]).unwrap(),
    );
    assert!(
        first <= STEP_AT as usize && STEP_AT as usize <= last,
        "{loc}"
    );
    assert_eq!(
        loc["first_commit"],
        format!("c{:03}", first - 1).as_str(),
        "{loc}"
    );
    assert_eq!(loc["last_commit"], format!("c{last:03}").as_str(), "{loc}");
    // `bisect --from-change` starts from those commits (here it stops at the missing config,
    // exit 2, after naming them); a run with no change point is a usage error.
    let (code, _, err) = infergate(&[
        "bisect",
        "--from-change",
        step_run,
        "--baseline-dir",
        store_s,
        "--config",
        tmp.path().join("absent.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    let range = format!(
        "{}..{}",
        loc["first_commit"].as_str().unwrap(),
        loc["last_commit"].as_str().unwrap()
    );
    assert_contains(&err, &range);
    let (code, _, err) = infergate(&[
        "bisect",
        "--from-change",
        &runs[3].run_id,
        "--baseline-dir",
        store_s,
    ]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "no change point starts at run");
    assert!(
        cps.iter().all(|c| c["change"].as_f64().unwrap() < 0.0),
        "{cps:#?}"
    );

    let (code, out, err) =
        infergate(&["baseline", "accept", "--dir", store_s, "--since", step_run]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, "accepted");
    let (code, _, err) = infergate(&[
        "baseline",
        "accept",
        "--dir",
        store_s,
        "--since",
        "no-such-run",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "not in the store");
    let (_, out, _) = infergate(&["changes", "--baseline-dir", store_s, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["groups"][0]["change_points"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["scope"] == "matrix")
            .all(|c| c["accepted"] == true)
    );

    let files = tmp.path().join("files");
    let compare = |name: &str, factor: f64| {
        let cand = write(&files, name, &night(NIGHTS, factor));
        infergate(&[
            "compare",
            "--format",
            "json",
            "--baseline",
            store_s,
            "--candidate",
            cand.to_str().unwrap(),
            // A nightly is judged on its one run.
            "--single-look",
        ])
    };
    let (code, out, err) = compare("next.json", 0.97);
    assert_eq!(
        code, 0,
        "the next nightly at the new level passes: {err}\n{out}"
    );
    let report: infergate::verdict::ComparisonReport = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report.baseline.noise_runs,
        (NIGHTS - STEP_AT) as usize,
        "level and noise from the runs since the accepted change only"
    );
    let (code, _, err) = compare("drop.json", 0.97 * 0.95);
    assert_eq!(code, 1, "a further -5% is caught: {err}");
}

/// A night where the tail rose with the throughput's step has a change point of each at that
/// run: `bisect --from-change` asks which metric to bisect, and with `--metric itl_p99` takes
/// the tail's (here it stops at the missing config, after naming it).
#[test]
fn a_run_where_two_metrics_changed_asks_which_to_bisect() {
    let tmp = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..NIGHTS)
        .map(|i| {
            let mut r = night(i, if i < STEP_AT { 1.0 } else { 0.97 });
            for c in &mut r.cells {
                if let Some(p) = c.itl_s.as_mut() {
                    // Enough gaps to bound a p99; half again from the step on.
                    p.count = 5000;
                    if i >= STEP_AT {
                        p.p99 *= 1.5;
                    }
                }
            }
            r
        })
        .collect();
    let runs = store_of(tmp.path(), runs);
    let store = tmp.path().join("store");
    let store_s = store.to_str().unwrap();
    let step_run = runs[STEP_AT as usize].run_id.as_str();
    let (code, out, err) = infergate(&["changes", "--baseline-dir", store_s]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, "ITL p99 +5");
    let absent = tmp.path().join("absent.toml");
    let bisect = |more: &[&str]| {
        let mut args = vec![
            "bisect",
            "--from-change",
            step_run,
            "--baseline-dir",
            store_s,
        ];
        args.extend(["--config", absent.to_str().unwrap()]);
        args.extend(more);
        infergate(&args)
    };
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (code, _, err) = bisect(&[]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&flat(&err), "aggregate_tps, itl_p99 of ");
    assert_contains(
        &flat(&err),
        "give --metric aggregate_tps or --metric itl_p99",
    );
    let (code, _, err) = bisect(&["--metric", "itl_p99"]);
    assert_eq!(code, 2, "{err}");
    assert_contains(&flat(&err), "ITL p99 change point at run");
}

/// Night `i` with ITL p99 `tail` times its generated value (counts enough to bound a p99).
fn night_with_tail(i: u64, tail: f64) -> infergate::results::RunResults {
    let mut r = night(i, 1.0);
    for p in r.cells.iter_mut().filter_map(|c| c.itl_s.as_mut()) {
        p.count = 5000;
        p.p99 *= tail;
    }
    r
}

/// An intended tail rise accepted alone (`baseline accept --metric itl_p99`): the nightly
/// marks its change point accepted, the next nightly at the new tail passes with throughput
/// still judged on every run (a whole-group accept leaves it six: half as sensitive), the tail
/// reported, not gated, until it has the runs it gates from, and `compare --as-verdict`
/// replays that verdict after the store's accept is gone.
#[test]
fn a_tail_accepted_alone_keeps_every_run_for_throughput() {
    let tmp = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..NIGHTS)
        .map(|i| night_with_tail(i, if i < STEP_AT { 1.0 } else { 1.8 }))
        .collect();
    let runs = store_of(tmp.path(), runs);
    let store = tmp.path().join("store");
    let store_s = store.to_str().unwrap();
    let step_run = runs[STEP_AT as usize].run_id.as_str();
    let changes = || {
        let (code, out, err) =
            infergate(&["changes", "--baseline-dir", store_s, "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let tail: Vec<bool> = (v["groups"][0]["change_points"].as_array().unwrap().iter())
            .filter(|c| c["metric"] == "itl_p99" && c["run_id"] == step_run)
            .map(|c| c["accepted"] == true)
            .collect();
        (tail, v["groups"][0]["accepted_metrics"].clone())
    };
    assert_eq!(
        changes().0.first(),
        Some(&false),
        "the tail's step is found"
    );
    let (code, out, err) = infergate(&[
        "baseline", "accept", "--dir", store_s, "--since", step_run, "--metric", "itl_p99",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, "): itl_p99 compared with the runs started since ");
    let (after, accepted_metrics) = changes();
    assert!(
        !after.is_empty() && after.iter().all(|a| *a),
        "accepted: {after:?}"
    );
    assert_eq!(
        accepted_metrics,
        serde_json::json!({ step_run: ["itl_p99"] })
    );

    let files = tmp.path().join("files");
    let cand = write(&files, "next.json", &night_with_tail(NIGHTS, 1.8));
    let verdict = tmp.path().join("verdict.json");
    let compare = |more: &[&str]| {
        let mut args = vec!["compare", "--format", "json", "--baseline-dir", store_s];
        args.extend(["--candidate", cand.to_str().unwrap()]);
        args.extend(more);
        let (code, out, err) = infergate(&args);
        let report: Option<infergate::verdict::ComparisonReport> = serde_json::from_str(&out).ok();
        (code, report, err)
    };
    let (code, report, err) = compare(&["--single-look"]);
    assert_eq!(code, 0, "the next nightly at the new tail passes: {err}");
    let report = report.unwrap();
    assert_eq!(
        report.baseline.noise_runs, 20,
        "throughput keeps every run of the rule's 20-run window"
    );
    assert_eq!(report.baseline.metric_since.len(), 1);
    // Six runs since: the tail is reported, not gated, until it has the runs a tail needs
    // (and the layers the default rule lists, which these runs never measured, say so).
    let said: Vec<String> = report.not_gated.iter().map(ToString::to_string).collect();
    assert_eq!(
        said[0],
        "ITL p99 is reported, not gated: 6 runs since its accepted change, it gates from 10"
    );
    assert_eq!(
        report.not_gated[1..],
        [NotGated::PrefillNotMeasured, NotGated::BurstNotMeasured]
    );
    assert_contains(
        &report.headline,
        "; not gated: ITL p99 (6 runs since its accepted change, it gates from 10)",
    );
    assert_eq!(report.baseline.metric_since[0].since_run_id, step_run);
    std::fs::write(&verdict, serde_json::to_string(&report).unwrap()).unwrap();

    // The replay restarts what the verdict restarted, whatever the store says now.
    std::fs::remove_file(store.join(&runs[0].profile.key).join("accepted.json")).unwrap();
    let (_, now, err) = compare(&["--single-look"]);
    assert!(now.unwrap().baseline.metric_since.is_empty(), "{err}");
    let (code, replayed, err) = compare(&["--as-verdict", verdict.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let replayed = replayed.unwrap();
    assert_eq!(replayed.baseline, report.baseline);
    assert_eq!(replayed.cells, report.cells, "the same ITL p99 comparisons");

    // A whole-group accept at the same run: six runs for everything.
    let (code, _, err) = infergate(&["baseline", "accept", "--dir", store_s, "--since", step_run]);
    assert_eq!(code, 0, "{err}");
    let (_, group, err) = compare(&["--single-look"]);
    let group = group.unwrap();
    assert_eq!(
        group.baseline.noise_runs,
        (NIGHTS - STEP_AT) as usize,
        "{err}"
    );
    assert!(group.baseline.metric_since.is_empty());
    let mde = |r: &infergate::verdict::ComparisonReport| {
        r.sensitivity.as_ref().unwrap().median_cell_mde().unwrap()
    };
    // Measured: −2.2% with the tail accepted alone, −4.7% after the whole-group accept.
    assert!(
        mde(&group) > 1.5 * mde(&report),
        "{} {}",
        mde(&group),
        mde(&report)
    );
}

#[test]
fn stable_history_has_no_change_point_and_text_md_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let files = tmp.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let store = tmp.path().join("store");
    let mut args = vec![
        "baseline".to_string(),
        "add".into(),
        "--dir".into(),
        store.display().to_string(),
    ];
    for i in 0..40 {
        args.push(
            write(&files, &format!("s{i}.json"), &night(i, 1.0))
                .display()
                .to_string(),
        );
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(infergate(&args).0, 0);
    let s = store.to_str().unwrap();
    let (code, out, err) = infergate(&["changes", "--baseline-dir", s, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["change_points"], serde_json::json!([]));
    let (_, text, _) = infergate(&["changes", "--baseline-dir", s]);
    assert_starts_with(&text, "no change point in ");
    let (_, md, _) = infergate(&["changes", "--baseline-dir", s, "--format", "md"]);
    assert_starts_with(&md, "**no change point in ");
    let (code, _, err) = infergate(&["changes", "--baseline-dir", s, "--profile", "nope"]);
    assert_eq!(code, 2, "{err}");
}

/// The headless browser, when installed.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn html_report_is_self_contained_and_renders_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    store_with_step(tmp.path());
    let store = tmp.path().join("store");
    let page = tmp.path().join("trend.html");
    let (code, _, err) = infergate(&[
        "changes",
        "--baseline-dir",
        store.to_str().unwrap(),
        "--format",
        "html",
        "--out",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        html.matches("<svg class=\"plot\"").count(),
        7,
        "matrix + 6 cells"
    );
    assert_eq!(
        html.matches("<circle class=\"pt").count(),
        7 * NIGHTS as usize
    );
    assert!(html.contains("<table class=\"heat\""));
    assert!(
        !html.contains("src=\"") && !html.contains("href"),
        "no network"
    );
    let Some(browser) = chromium() else {
        // Under CI (`.ci/run` installs Chromium) a missing browser fails: a skipped check
        // there would pass the report untested.
        assert!(
            std::env::var_os("CI").is_none(),
            "no headless browser (chromium, chromium-browser or google-chrome) under CI: apt-get install -y chromium"
        );
        eprintln!(
            "skipping the browser check: no chromium installed (apt-get install -y chromium)"
        );
        return;
    };
    let out = std::process::Command::new(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    // The script ran (it fills the status line from the embedded data) and raised nothing.
    assert!(dom.contains("1 group(s), "), "{dom:.2000}");
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("ERROR")))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:#?}");
    assert_eq!(
        dom.matches("<circle class=\"pt").count(),
        7 * NIGHTS as usize
    );
    // `INFERGATE_TREND_SCREENSHOT=docs/trend-report.png` refreshes the screenshot in the docs.
    if let Ok(dest) = std::env::var("INFERGATE_TREND_SCREENSHOT") {
        let shot = std::process::Command::new(browser)
            .args([
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--hide-scrollbars",
            ])
            .arg("--window-size=980,2150")
            .arg(format!("--screenshot={dest}"))
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("run chromium");
        assert!(
            shot.status.success(),
            "{}",
            String::from_utf8_lossy(&shot.stderr)
        );
    }
}
