//! End-to-end tests of `infergate compare` through the real binary, on deterministic generated
//! results (realistic multiplicative noise) and on the real llm-decode-bench seed file.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::path::{Path, PathBuf};

use infergate::verdict::{CellVerdict, ComparisonReport, GateVerdict};
use results_gen::{Gen, infergate, run, seed, write, write_many};

fn paths(p: &[PathBuf]) -> Vec<&str> {
    p.iter().map(|p| p.to_str().expect("utf-8 path")).collect()
}

/// Runs `compare --format json`, returns (exit code, report or None, stderr).
fn compare(
    baseline: &[&str],
    candidate: &[&str],
    extra: &[&str],
) -> (i32, Option<ComparisonReport>, String) {
    let mut args = vec!["compare", "--format", "json", "--baseline"];
    args.extend_from_slice(baseline);
    args.push("--candidate");
    args.extend_from_slice(candidate);
    args.extend_from_slice(extra);
    let (code, out, err) = infergate(&args);
    (code, serde_json::from_str(&out).ok(), err)
}

/// Runs `compare --format json` of the boot `first` with `--confirmation second` against
/// `base`: (exit code, report, stderr); a missing report fails the test.
fn compare_two_boots(
    base: &[PathBuf],
    first: &Path,
    second: &Path,
) -> (i32, ComparisonReport, String) {
    let utf8 = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let (first, second) = (utf8(first), utf8(second));
    let (code, report, err) = compare(&paths(base), &[&first], &["--confirmation", &second]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    (code, report, err)
}

fn verdicts(r: &ComparisonReport) -> Vec<((u32, u64), CellVerdict)> {
    r.cells
        .iter()
        .map(|c| ((c.concurrency, c.context_tokens), c.verdict))
        .collect()
}

#[test]
fn identical_baseline_and_candidate_are_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_many(dir.path(), "base", &Gen::default(), 0..5);
    let (code, report, err) = compare(&paths(&base), &paths(&base), &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(report.cells.len(), 6);
    for (at, v) in verdicts(&report) {
        assert_eq!(v, CellVerdict::Unchanged, "cell {at:?}: {report:#?}");
    }
    assert_eq!(report.gate, GateVerdict::Pass);
    for c in &report.cells {
        assert!(c.primary().expect("primary metric").change.abs() < 1e-9);
    }
}

#[test]
fn a_fresh_run_of_the_same_build_does_not_fail_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_many(dir.path(), "base", &Gen::default(), 0..10);
    let cand = write_many(dir.path(), "cand", &Gen::default(), 100..103);
    let (code, report, err) = compare(&paths(&base), &paths(&cand), &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}\n{report:#?}");
    assert!(report.regressions().next().is_none());
}

#[test]
fn ten_percent_slower_everywhere_is_a_regression() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_many(dir.path(), "base", &Gen::default(), 0..10);
    let slow = Gen {
        factor: 0.9,
        ..Gen::default()
    };
    let cand = write_many(dir.path(), "cand", &slow, 100..103);
    // As a gate would: one boot cannot decide it, and compare says what is missing.
    let (code, report, err) = compare(&paths(&base), &paths(&cand), &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        report.gate,
        GateVerdict::Insufficient,
        "{}",
        report.headline
    );
    assert!(
        report
            .headline
            .contains("the second boot this plan asks for was not given"),
        "{}",
        report.headline
    );
    assert_contains(&err, "--confirmation");
    // One look decides it when asked to.
    let (code, report, err) = compare(&paths(&base), &paths(&cand), &["--single-look"]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 1, "{err}");
    assert_eq!(report.gate, GateVerdict::Regression);
    for (at, v) in verdicts(&report) {
        assert_eq!(v, CellVerdict::Regression, "cell {at:?}");
    }
    let worst = report
        .cells
        .iter()
        .filter_map(|c| c.primary())
        .map(|m| m.change)
        .fold(0.0, f64::min);
    assert!((-0.14..-0.06).contains(&worst), "worst change {worst}");
    // The text table shows the marks and the typographic minus.
    let (code, text, _) = infergate(&[
        "compare",
        "--baseline",
        base[0].to_str().unwrap(),
        base[1].to_str().unwrap(),
        base[2].to_str().unwrap(),
        "--candidate",
        cand[0].to_str().unwrap(),
        "--single-look",
    ]);
    assert_eq!(code, 1);
    assert!(
        text.contains('✗') && text.contains("ctx \\ C") && text.contains('−'),
        "{text}"
    );
}

/// A cell that fit in every one of 20 history runs and is capacity-limited now: one boot is a
/// provisional alarm (exit 0, gate `inconclusive`); with the confirmation boot's results
/// (`--confirmation`, as `run` would have booted again) limited too, a capacity regression.
#[test]
fn a_cell_newly_capacity_limited_on_both_boots_is_a_capacity_regression() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_many(dir.path(), "base", &Gen::default(), 0..20);
    let limited = |seed: u64, limit: bool| {
        let mut cand = run(&Gen::default(), seed);
        let cell = cand
            .cells
            .iter_mut()
            .find(|c| (c.concurrency, c.context_tokens) == (16, 8192))
            .unwrap();
        if limit {
            cell.status = infergate::results::CellStatus::CapacityLimited;
            cell.reason = Some("running_reqs=11/16".into());
            cell.aggregate_tps *= 0.7;
        }
        write(dir.path(), &format!("cand-{seed}.json"), &cand)
    };
    let (first, second, fits) = (limited(200, true), limited(201, true), limited(202, false));
    let at = |r: &ComparisonReport| {
        r.cells
            .iter()
            .find(|c| (c.concurrency, c.context_tokens) == (16, 8192))
            .cloned()
            .unwrap()
    };
    // One boot: provisional.
    let (code, report, err) = compare(&paths(&base), &[first.to_str().unwrap()], &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}");
    let c = at(&report);
    assert!(c.provisional, "{c:?}");
    assert_eq!(c.verdict, CellVerdict::Inconclusive);
    assert_eq!(report.gate, GateVerdict::Insufficient);
    // Both boots limited: a capacity regression, the second boot used.
    let (code, report, err) = compare_two_boots(&base, &first, &second);
    assert_eq!(code, 1, "{err}");
    let v: Vec<_> = verdicts(&report)
        .into_iter()
        .filter(|(_, v)| *v == CellVerdict::CapacityRegression)
        .collect();
    assert_eq!(v, vec![((16, 8192), CellVerdict::CapacityRegression)]);
    assert!(report.confirmation.as_ref().is_some_and(|c| c.used));
    assert_eq!(report.gate, GateVerdict::Regression);
    // The second boot fits: not evidence.
    let (code, report, err) = compare_two_boots(&base, &first, &fits);
    assert_ne!(at(&report).verdict, CellVerdict::CapacityRegression);
    assert_ne!(code, 1, "{err}");
}

#[test]
fn the_seed_loads_as_baseline_and_candidate() {
    let s = seed();
    let s = s.to_str().unwrap();
    let (code, report, err) = compare(&[s], &[s], &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(report.cells.len(), 20);
    // One run on each side and no sub-window samples (the seed has none): the noise is the
    // rule's prior, so an identical cell is `unchanged` only when that prior is tight enough,
    // otherwise honestly `inconclusive`; never a regression, and the change is exactly zero.
    let limited = [(12, 65536), (8, 131072), (12, 131072)];
    for c in &report.cells {
        let at = (c.concurrency, c.context_tokens);
        if limited.contains(&at) {
            assert_eq!(
                c.verdict,
                CellVerdict::NotComparable,
                "capacity-limited on both sides: {at:?}"
            );
        } else {
            assert!(
                matches!(
                    c.verdict,
                    CellVerdict::Unchanged | CellVerdict::Inconclusive
                ),
                "cell {at:?}: {:?}",
                c.verdict
            );
            assert_eq!(c.primary().expect("primary").change, 0.0);
        }
    }
    assert!(matches!(
        report.gate,
        GateVerdict::Pass | GateVerdict::Insufficient
    ));
    assert!(
        report
            .profile
            .key
            .starts_with("gpu-nvidia-geforce-rtx-5090x1__vllm__")
    );
}

#[test]
fn a_named_baseline_of_another_profile_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let cand = write_many(dir.path(), "cand", &Gen::default(), 0..1);
    let s = seed();
    // Fail closed: the baseline the user named cannot be compared, so nothing passes (it
    // was a `no_baseline` exit 0 before).
    let (code, report, err) = compare(&[s.to_str().unwrap()], &paths(&cand), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(report.is_none(), "no verdict is written: {err}");
    for needle in [
        "different profile",
        "profile.key",
        "gpu-nvidia-geforce-rtx-5090x1__vllm__",
        "--allow-profile-mismatch",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    // Allowed: the comparison runs (cells of the candidate's matrix missing in the seed are
    // not comparable; the report is produced and the exit code is a gate answer, not 2).
    let (code, report, err) = compare(
        &[s.to_str().unwrap()],
        &paths(&cand),
        &["--allow-profile-mismatch"],
    );
    assert!(code == 0 || code == 1, "{err}");
    assert!(report.is_some(), "{err}");
}

fn assert_bad_input(file: &Path, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let good = write_many(dir.path(), "good", &Gen::default(), 0..2);
    for (b, c) in [
        (file.to_str().unwrap(), good[0].to_str().unwrap()),
        (good[0].to_str().unwrap(), file.to_str().unwrap()),
    ] {
        let (code, _, err) = compare(&[b], &[c], &[]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&file.display().to_string()),
            "names the file: {err}"
        );
        for n in needles {
            assert!(err.contains(n), "expected `{n}` in: {err}");
        }
    }
}

#[test]
fn truncated_and_wrong_typed_files_exit_2_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let seed_text = std::fs::read_to_string(seed()).unwrap();
    let truncated = dir.path().join("seed-truncated.json");
    std::fs::write(&truncated, &seed_text[..seed_text.len() * 2 / 3]).unwrap();
    assert_bad_input(&truncated, &["not valid JSON at ", "truncated"]);

    let wrong_seed = dir.path().join("seed-wrong.json");
    std::fs::write(
        &wrong_seed,
        seed_text.replacen(
            "\"aggregate_tps\": 45.43333333333333",
            "\"aggregate_tps\": \"45.4\"",
            1,
        ),
    )
    .unwrap();
    assert_bad_input(
        &wrong_seed,
        &["results[0].aggregate_tps", "invalid type: string"],
    );

    let ours = run(&Gen::default(), 0);
    let mut doc = serde_json::to_value(&ours).unwrap();
    doc["cells"][3]["aggregate_tps"] = "fast".into();
    let wrong_ours = dir.path().join("results-wrong.json");
    std::fs::write(&wrong_ours, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    assert_bad_input(
        &wrong_ours,
        &["cells[3].aggregate_tps", "expected a number"],
    );
}

#[test]
fn compare_against_a_store_selects_profile_and_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("baselines");
    let base = write_many(dir.path(), "base", &Gen::default(), 0..5);
    let mut add = vec!["baseline", "add", "--dir", store.to_str().unwrap()];
    add.extend(paths(&base));
    let (code, _, err) = infergate(&add);
    assert_eq!(code, 0, "{err}");
    let cand = write_many(dir.path(), "cand", &Gen::default(), 0..5);
    let json_out = dir.path().join("verdict.json");
    let (code, report, err) = compare(
        &[store.to_str().unwrap()],
        &paths(&cand),
        &["--out", json_out.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(report.is_none(), "--out writes the file, not stdout");
    let written: ComparisonReport =
        serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    assert_eq!(written.baseline.level_runs.len(), 5);
    let md = dir.path().join("verdict.md");
    let (code, _, err) = infergate(&[
        "compare",
        "--format",
        "md",
        "--out",
        md.to_str().unwrap(),
        "--baseline",
        store.to_str().unwrap(),
        "--candidate",
        cand[0].to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&md).unwrap();
    assert_contains(&text, "| context | C=1 |");
    // The store named by --baseline-dir, with no --baseline (it panicked on the empty list).
    let (code, out, err) = infergate(&[
        "compare",
        "--baseline-dir",
        store.to_str().unwrap(),
        "--candidate",
        cand[0].to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_contains(&out, "no regression");
    // Another suite has no baseline: exit 0, no_baseline, and the message lists what exists.
    let (code, report, err) = compare(
        &[store.to_str().unwrap()],
        &paths(&cand[..1]),
        &["--suite", "nightly"],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(report.unwrap().gate, GateVerdict::NoBaseline);
    assert!(
        err.contains("no baseline runs for profile") && err.contains("(pr)"),
        "{err}"
    );
}

/// `compare --confirmation` replays `run`'s two-boot rule on files: the second boot enters the
/// verdict only where `run` would have booted again, and the JSON says whether it did. The
/// expected verdicts are the library's own two looks (`stats::confirm::first_look` and
/// `stats::confirm::second_stage`).
#[test]
fn a_second_boot_is_used_only_where_run_would_have_booted_again() {
    use infergate::stats::confirm::{first_look, second_stage, wants_confirmation};
    use infergate::stats::{DecisionRule, compare_at as lib_compare};
    let dir = tempfile::tempdir().unwrap();
    let base_gen = Gen::default();
    let base_runs: Vec<_> = (0..10).map(|i| run(&base_gen, i)).collect();
    let base = write_many(dir.path(), "base", &base_gen, 0..10);
    let rule = DecisionRule::default();
    let first_verdict = |r: &infergate::results::RunResults| {
        lib_compare(
            &base_runs,
            std::slice::from_ref(r),
            &rule,
            &first_look(&rule, true),
        )
        .unwrap()
    };
    // A clean first boot: `run` would not boot again, so the second is not used.
    let clean = (100..120)
        .map(|i| run(&Gen::default(), i))
        .find(|r| !wants_confirmation(&first_verdict(r)))
        .expect("a clean boot that does not call for confirmation");
    let clean_second = run(&Gen::default(), 200);
    let a = write(dir.path(), "clean", &clean);
    let b = write(dir.path(), "clean-second", &clean_second);
    let (code, report, err) = compare_two_boots(&base, &a, &b);
    let expected = first_verdict(&clean);
    assert_eq!(code, 0, "{err}");
    assert_eq!(verdicts(&report), verdicts(&expected));
    assert_eq!(report.gate, expected.gate);
    assert_eq!(report.candidate_runs, vec![clean.run_id.clone()]);
    let c = report.confirmation.as_ref().expect("a confirmation object");
    assert!(!c.used, "{c:?}");
    assert!(c.second_results.ends_with("clean-second"), "{c:?}");
    assert_contains(&report.headline, "first boot only");

    // A first boot that leans slow without proving it: `run` boots again and tests both.
    let (leaning, second) = [0.992, 0.99, 0.988, 0.986, 0.984, 0.982, 0.98, 0.978, 0.975]
        .iter()
        .flat_map(|&f| {
            let g = Gen {
                factor: f,
                ..Gen::default()
            };
            (300..306).map(move |i| (run(&g, i), run(&g, i + 50)))
        })
        .find(|(r, _)| wants_confirmation(&first_verdict(r)))
        .expect("a slightly slow boot that calls for confirmation");
    let a = write(dir.path(), "leaning", &leaning);
    let b = write(dir.path(), "leaning-second", &second);
    let (code, report, err) = compare_two_boots(&base, &a, &b);
    let expected = second_stage(
        &rule,
        &infergate::stats::History::new(&base_runs[..]),
        &first_verdict(&leaning),
        std::slice::from_ref(&leaning),
        std::slice::from_ref(&second),
        "leaning-second",
    )
    .unwrap();
    assert_eq!(verdicts(&report), verdicts(&expected));
    assert_eq!(report.gate, expected.gate);
    assert_eq!(
        code,
        if expected.gate == GateVerdict::Regression {
            1
        } else {
            0
        },
        "{err}"
    );
    assert_eq!(report.candidate_runs.len(), 2);
    let c = report.confirmation.as_ref().expect("a confirmation object");
    assert!(c.used, "{c:?}");
    let p_first = first_verdict(&leaning).matrix_test.unwrap().p_value;
    let p_shown = c
        .first_boot
        .as_ref()
        .expect("the first boot's matrix test")
        .p_value;
    assert!((p_first - p_shown).abs() < 1e-9, "{p_first} vs {p_shown}");
    assert_contains(&report.headline, ", after a second boot");

    // A second boot of another length is a usage error.
    let (code, _, err) = compare(
        &paths(&base),
        &paths(std::slice::from_ref(&a)),
        &[
            "--confirmation",
            b.to_str().unwrap(),
            base[0].to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert_contains(&err, "--confirmation");
}

/// The runs a thin store is told it needs are the runs that make it sufficient, not more: the
/// bundled store cut to its first 2, 3 and 4 runs, against its newest run.
#[test]
fn a_thin_stores_runs_needed_are_the_runs_that_make_it_sufficient() {
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("baselines");
    let profile = std::fs::read_dir(&store)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
        .expect("the bundled store has a profile");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(profile.join("pr/runs"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    runs.sort();
    let candidate = runs.pop().expect("runs");
    let candidate = candidate.to_str().unwrap();
    let at = |n: usize| {
        let (code, report, err) = compare(&paths(&runs[..n]), &[candidate], &["--single-look"]);
        assert_eq!(code, 0, "{err}");
        report
            .and_then(|r| r.sensitivity)
            .unwrap_or_else(|| panic!("no sensitivity; stderr: {err}"))
    };
    for n in 2..=4 {
        let needed = at(n).runs_needed.expect("reachable");
        assert!(
            needed > 0 && n + needed <= runs.len(),
            "{n} runs: {needed} more"
        );
        assert!(at(n + needed).sufficient, "{n} runs: {needed} more");
        assert!(!at(n + needed - 1).sufficient, "{n} runs: {needed} more");
    }
}

/// A 2-run history cannot find a uniform −5%: the verdict says so and how many runs it needs;
/// a full history of the same runner does not.
#[test]
fn a_thin_history_says_what_it_can_detect_and_how_many_runs_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_many(dir.path(), "base", &Gen::default(), 0..20);
    let cand = write_many(dir.path(), "cand", &Gen::default(), 100..101);

    let (code, report, err) = compare(&paths(&base[18..]), &paths(&cand), &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}");
    let s = report.sensitivity.as_ref().expect("sensitivity recorded");
    assert_eq!(s.history_runs, 2);
    assert!(!s.sufficient && report.thin_baseline(), "{s:?}");
    let needed = s.runs_needed.expect("reachable with a longer history");
    assert!((1..=18).contains(&needed), "{s:?}");
    assert!(s.mde < -0.05, "{s:?}");
    assert_eq!(s.cells.len(), report.cells.len());
    assert!(
        report
            .headline
            .contains(&format!("{needed} more baseline run")),
        "{}",
        report.headline
    );

    // The text report says it too.
    let (_, text, _) = infergate(&[
        "compare",
        "--baseline",
        base[18].to_str().unwrap(),
        base[19].to_str().unwrap(),
        "--candidate",
        cand[0].to_str().unwrap(),
    ]);
    // The console wraps at 100 columns: read it unwrapped.
    let flat = text.replace("\n    ", " ").replace("\n  ", " ");
    assert!(
        flat.contains("but this baseline could detect only"),
        "{text}"
    );
    assert!(
        flat.contains("Sensitivity at 80% power with 2 baseline runs"),
        "{text}"
    );

    // Twenty runs of the same runner reach the design effect.
    let (code, report, err) = compare(&paths(&base), &paths(&cand), &[]);
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {err}"));
    assert_eq!(code, 0, "{err}");
    let s = report.sensitivity.as_ref().expect("sensitivity recorded");
    assert!(s.sufficient, "{s:?}");
    assert_eq!(s.runs_needed, Some(0));
    assert_lacks(&report.headline, "too thin");
}

#[test]
fn a_crafted_profile_key_in_a_file_cannot_issue_workflow_commands() {
    let dir = tempfile::tempdir().unwrap();
    let cand = write_many(dir.path(), "cand", &Gen::default(), 0..1);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cand[0]).unwrap()).unwrap();
    doc["profile"]["key"] = "k\n::error title=pwned::forged\n##[error]forged".into();
    std::fs::write(&cand[0], doc.to_string()).unwrap();
    let s = seed();
    let (_, _, err) = compare(&[s.to_str().unwrap()], &paths(&cand), &[]);
    assert_contains(&err, "different profile");
    for line in err.lines() {
        let t = line.trim_start();
        assert!(
            !t.starts_with("::") && !line.contains("##["),
            "a workflow command from the file: {line:?}\n{err}"
        );
    }
}

/// One cell 20% slower on the first boot only (a heavy-tailed runner's wild draw): the first
/// boot's alarm is provisional, the second boot clears it, and its screen is the cell's line;
/// the other cells, seen against the wild one, are not called faster. Slow on both boots: a
/// regression, decided by that cell's own test over both boots.
#[test]
fn one_wild_cell_on_the_first_boot_is_cleared_by_the_second() {
    let dir = tempfile::tempdir().unwrap();
    let base = write_many(dir.path(), "base", &Gen::default(), 0..10);
    let boot = |seed: u64, factor: f64| {
        let mut cand = run(&Gen::default(), seed);
        let cell = &mut cand.cells[5];
        cell.aggregate_tps *= factor;
        for s in &mut cell.samples {
            *s *= factor;
        }
        write(dir.path(), &format!("boot-{seed}.json"), &cand)
    };
    let (wild, clean, slow) = (boot(300, 0.8), boot(301, 1.0), boot(302, 0.8));
    let at = {
        let c = &run(&Gen::default(), 300).cells[5];
        (c.concurrency, c.context_tokens)
    };
    let (code, report, err) = compare_two_boots(&base, &wild, &clean);
    assert_eq!(code, 0, "{err}");
    assert!(report.confirmation.as_ref().is_some_and(|c| c.used));
    for (cell, v) in verdicts(&report) {
        assert_eq!(
            v,
            CellVerdict::Unchanged,
            "cell {cell:?}: {}",
            report.headline
        );
    }
    let lines = report.check_lines();
    let cleared = format!(
        "cell C={} / {} aggregate tok/s",
        at.0,
        infergate::results::context_label(at.1)
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&cleared) && l.contains("second boot alone, futility screen")),
        "{lines:#?}"
    );
    let (code, report, err) = compare_two_boots(&base, &wild, &slow);
    assert_eq!(code, 1, "{err}");
    assert_eq!(report.gate, GateVerdict::Regression);
    // The one slow cell is the regression, and nothing else moved: its row and column are not
    // slower for holding it, and the other cells are not faster for being beside it.
    for (cell, v) in verdicts(&report) {
        let want = if cell == at {
            CellVerdict::Regression
        } else {
            CellVerdict::Unchanged
        };
        assert_eq!(
            v,
            want,
            "cell {cell:?}: {}\n{:#?}\n{:#?}",
            report.headline,
            report.check_lines(),
            report
                .cells
                .iter()
                .map(|c| (c.concurrency, c.context_tokens, c.verdict, c.reason.clone()))
                .collect::<Vec<_>>()
        );
    }
    let lines = report.check_lines();
    assert!(
        lines.iter().any(|l| l.starts_with(&cleared)
            && l.contains("both boots)")
            && l.ends_with("→ regression")),
        "{lines:#?}"
    );
}
