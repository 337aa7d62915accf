//! End-to-end tests of the other tools' formats through the real binary: `infergate import`
//! of `vllm bench serve` and guidellm files (and straight into `compare` / `baseline add`), and
//! `infergate export` to BMF, github-action-benchmark JSON, JUnit XML (validated against the
//! JUnit XSD with xmllint when it is installed) and CSV.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infergate::export::bmf::Bmf;
use infergate::export::gab::GabEntry;
use infergate::results::RunResults;
use infergate::stats::compare::{ALL_METRICS, metric_value};
use infergate::verdict::ComparisonReport;

const BIN: &str = env!("CARGO_BIN_EXE_infergate");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn infergate(args: &[&str]) -> Out {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("run infergate");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn read_run(p: &Path) -> RunResults {
    serde_json::from_str(&std::fs::read_to_string(p).expect("read")).expect("results parse")
}

#[test]
fn seed_blocks_import_join_and_compare_directly() {
    let dir = tempfile::tempdir().unwrap();
    // One file per --max-concurrency joins into one run: the ShareGPT and the throughput
    // configurations of the seed report, both at C=512, at their mean prompt lengths.
    let joined = dir.path().join("joined.json");
    let share = fixture("vllm-bench-serve-sharegpt-vllm-baseline.json");
    let thr = fixture("vllm-bench-serve-throughput-vllm-baseline.json");
    let out = infergate(&["import", s(&share), s(&thr), "--out", s(&joined)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The console wraps at 100 columns: read it unwrapped.
    let flat = out.stdout.replace("\n    ", " ").replace("\n  ", " ");
    assert!(flat.contains("2 cells (0 not ok)"), "{}", out.stdout);
    assert!(flat.contains("not mapped: ttft: needs"), "{}", out.stdout);
    let run = read_run(&joined);
    let coords: Vec<_> = run.cells.iter().map(|c| c.coord()).collect();
    assert_eq!(coords, [(512, 342), (512, 1034)]);
    assert_eq!(run.cells[0].aggregate_tps, 4347.55);
    assert_eq!(run.cells[1].aggregate_tps, 4178.94);

    // Every block of the seed report imports, its throughput as printed.
    for (name, tps, c) in [
        ("vllm-bench-serve-sharegpt-sglang.json", 2254.86, 512),
        (
            "vllm-bench-serve-sharegpt-vllm-spec-mtp.json",
            10462.21,
            512,
        ),
        (
            "vllm-bench-serve-throughput-vllm-optimized.json",
            5559.27,
            512,
        ),
        ("vllm-bench-serve-append-optimized.jsonl", 175.72, 100),
    ] {
        let one = dir.path().join("one.json");
        let out = infergate(&["import", s(&fixture(name)), "--out", s(&one)]);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        let cell = &read_run(&one).cells[0];
        assert_eq!((cell.aggregate_tps, cell.concurrency), (tps, c), "{name}");
    }

    // --append-result files go straight into compare, as llm-decode-bench files do: one
    // baseline run gives no noise estimate, so the +17%/+25% of the optimised build stay
    // inconclusive rather than pass or fail.
    let verdict = dir.path().join("verdict.json");
    let out = infergate(&[
        "compare",
        "--baseline",
        s(&fixture("vllm-bench-serve-append-baseline.jsonl")),
        "--candidate",
        s(&fixture("vllm-bench-serve-append-optimized.jsonl")),
        "--format",
        "json",
        "--out",
        s(&verdict),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: ComparisonReport =
        serde_json::from_str(&std::fs::read_to_string(&verdict).unwrap()).unwrap();
    // One run on each side: not sensitive enough to say pass, and asked for more runs (one run
    // shows no boot-to-boot noise), not told the design effect is out of reach.
    assert_eq!(report.gate.as_str(), "insufficient");
    assert!(
        report
            .headline
            .contains("more baseline runs needed: one shows no boot-to-boot noise yet"),
        "{}",
        report.headline
    );
    assert_eq!(report.cells.len(), 2);
    let change = report.cells[0].primary().unwrap().change;
    assert_eq!(report.cells[0].concurrency, 100);
    assert!((change - (175.72 / 140.12 - 1.0)).abs() < 1e-9, "{change}");

    // baseline add takes the foreign file as it is.
    let store = dir.path().join("store");
    let g = fixture("guidellm-0.8-sim.json");
    let out = infergate(&["baseline", "add", "--dir", s(&store), s(&g)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = infergate(&["baseline", "show", "--dir", s(&store)]);
    assert!(
        out.stdout.contains("infergate-sim"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}

#[test]
fn bad_input_names_file_and_field_and_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let vllm =
        std::fs::read_to_string(fixture("vllm-bench-serve-sharegpt-vllm-baseline.json")).unwrap();
    let guide = std::fs::read_to_string(fixture("guidellm-0.8-sim.json")).unwrap();
    let out_path = dir.path().join("out.json");
    let cases: Vec<(PathBuf, Vec<&str>)> = vec![
        (
            write("cut.json", &guide[..guide.len() / 3]),
            vec!["not valid JSON at benchmarks", "truncated"],
        ),
        (
            write(
                "typed.json",
                &vllm.replace("\"completed\": 1000", "\"completed\": \"all\""),
            ),
            vec![
                "typed.json: completed: invalid type: string \"all\", expected a whole number of 0 or more",
            ],
        ),
        (
            write(
                "nomodel.json",
                &guide.replace("\"model\": \"sim-test\"", "\"model\": 7"),
            ),
            vec!["nomodel.json: benchmarks[0].config.backend.model: invalid type: integer"],
        ),
        (
            // Another tool's JSON: a Bencher BMF document.
            write(
                "bmf.json",
                "{\"C=1 / 0\": {\"aggregate_tps\": {\"value\": 1.0}}}",
            ),
            vec!["bmf.json: unrecognised results format", "guidellm"],
        ),
    ];
    for (path, wanted) in &cases {
        for cmd in [
            vec!["import", s(path), "--out", s(&out_path)],
            vec!["compare", "--baseline", s(path), "--candidate", s(path)],
            vec!["export", "--format", "csv", "--results", s(path)],
        ] {
            let out = infergate(&cmd);
            assert_eq!(out.code, 2, "{cmd:?}: {}", out.stderr);
            assert_lacks(&out.stderr, "panicked");
            assert!(
                out.stderr.contains(s(path)),
                "{cmd:?} names the file: {}",
                out.stderr
            );
            for w in wanted {
                assert!(
                    support::flat(&out.stderr).contains(w),
                    "{cmd:?} wants {w:?}: {}",
                    out.stderr
                );
            }
        }
    }
    assert!(!out_path.exists(), "no partial output written");
}

#[test]
fn bmf_round_trips_the_results_numbers() {
    let dir = tempfile::tempdir().unwrap();
    for source in [
        fixture("guidellm-0.8-sim.json"),
        fixture("llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json"),
    ] {
        let results = dir.path().join("r.json");
        let out = infergate(&["import", s(&source), "--out", s(&results)]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let bmf_path = dir.path().join("bmf.json");
        let out = infergate(&[
            "export",
            "--format",
            "bmf",
            "--results",
            s(&results),
            "--out",
            s(&bmf_path),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let bmf: Bmf = serde_json::from_str(&std::fs::read_to_string(&bmf_path).unwrap()).unwrap();
        let run = read_run(&results);
        let mut compared = 0;
        for cell in &run.cells {
            let name = infergate::export::cell_name(cell.concurrency, cell.context_tokens);
            for m in ALL_METRICS {
                if let (Some(v), true) = (metric_value(cell, m), cell.measured_s > 0.0) {
                    assert_eq!(bmf[&name][m.as_str()].value, v, "{name} {}", m.as_str());
                    compared += 1;
                }
            }
        }
        assert!(compared >= 9, "{compared} figures compared");
        let measures: usize = bmf.values().map(|m| m.len()).sum();
        assert_eq!(
            measures, compared,
            "nothing exported that the results do not hold"
        );
    }
}

#[test]
fn gab_files_split_by_direction() {
    let g = fixture("guidellm-0.8-sim.json");
    let bigger = infergate(&["export", "--format", "gab", "--results", s(&g)]);
    assert_eq!(bigger.code, 0, "{}", bigger.stderr);
    let bigger: Vec<GabEntry> = serde_json::from_str(&bigger.stdout).unwrap();
    let smaller = infergate(&[
        "export",
        "--format",
        "gab",
        "--gab-tool",
        "customSmallerIsBetter",
        "--results",
        s(&g),
    ]);
    let smaller: Vec<GabEntry> = serde_json::from_str(&smaller.stdout).unwrap();
    assert_eq!(bigger.len(), 3, "aggregate_tps of 3 cells");
    assert_eq!(smaller.len(), 18, "ttft and itl p50/p90/p99 of 3 cells");
    assert!(bigger.iter().all(|e| e.unit == "tok/s"));
    assert!(smaller.iter().all(|e| e.unit == "s"));
    assert_eq!(bigger[0].name, "C=1 / 64 aggregate_tps");
}

/// A verdict file over the vLLM `--append-result` candidate, written by hand so the snapshot
/// does not move with the statistics: C=100 regressed, C=200 inconclusive.
fn hand_verdict(candidate: &Path, dir: &Path) -> PathBuf {
    use infergate::verdict::*;
    let runs = infergate::import::load_results(candidate).unwrap();
    let run = &runs[0];
    let m = |v: CellVerdict, change: f64| MetricComparison {
        metric: Metric::AggregateTps,
        direction: Direction::HigherIsBetter,
        baseline: 140.0,
        candidate: 140.0 * (1.0 + change),
        change,
        ci_low: change - 0.02,
        ci_high: change + 0.02,
        margin: 0.03,
        p_value: 0.0004,
        p_adjusted: 0.0008,
        verdict: v,
        check: None,
        decided_on: None,
    };
    let report = ComparisonReport {
        gate: GateVerdict::Regression,
        headline: "1 regression, worst −9.0% at C=100 / 32010".into(),
        cells: vec![
            CellComparison {
                provisional: false,
                history_too_short: false,
                not_compared: None,
                concurrency: 100,
                context_tokens: 32010,
                verdict: CellVerdict::Regression,
                reason: Some("aggregate_tps vs the rest of its run −9.0% <&\"engine\">".into()),
                metrics: vec![m(CellVerdict::Regression, -0.09)],
            },
            CellComparison {
                provisional: false,
                history_too_short: false,
                not_compared: None,
                concurrency: 200,
                context_tokens: 1010,
                verdict: CellVerdict::Inconclusive,
                reason: None,
                metrics: vec![m(CellVerdict::Inconclusive, 0.01)],
            },
        ],
        ..ComparisonReport::new(
            run.profile.clone(),
            None,
            vec![run.run_id.clone()],
            BaselineSummary {
                runs: Vec::new(),
                level_runs: vec!["b1".into()],
                noise_runs: 8,
                metric_since: Vec::new(),
            },
            RuleSummary {
                alpha: 0.01,
                min_effect: 0.03,
                matrix_margin: 0.01,
                correction: "bonferroni".into(),
                confidence: 0.9,
                cell_effect: None,
                shares: None,
            },
        )
    };
    let p = dir.join("hand-verdict.json");
    std::fs::write(&p, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    p
}

/// Validates `xml` against the JUnit XSD when xmllint is installed; says why it skipped.
/// `infergate export --format FORMAT --results RESULTS [--verdict VERDICT]` to stdout.
fn export(format: &str, results: &Path, verdict: Option<&Path>) -> Out {
    let mut args = vec!["export", "--format", format, "--results", s(results)];
    if let Some(v) = verdict {
        args.extend(["--verdict", s(v)]);
    }
    infergate(&args)
}

/// The JUnit export of `results` with `verdict`, written under `dir` and validated against
/// Jenkins' schema.
fn junit_of(results: &Path, verdict: &Path, dir: &Path) -> String {
    let junit = dir.join("junit.xml");
    let out = infergate(&[
        "export",
        "--format",
        "junit",
        "--results",
        s(results),
        "--verdict",
        s(verdict),
        "--out",
        s(&junit),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    validate_junit(&junit);
    std::fs::read_to_string(&junit).unwrap()
}

fn validate_junit(xml: &Path) {
    let xsd = fixture("junit-10.xsd");
    match Command::new("xmllint")
        .args(["--noout", "--schema", s(&xsd), s(xml)])
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{} does not validate against junit-10.xsd: {}",
            xml.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!(
            "SKIP xmllint validation of {}: xmllint not runnable ({e}); apt-get install -y libxml2-utils",
            xml.display()
        ),
    }
}

/// Issue 59, door 9: an `in_progress` results file (its gate was stopped) exported as JUnit
/// is written with the run as an error case `run` / `finished`, and `export` exits 3 (it
/// exited 0 with a suite of passing cases); a figure format writes nothing, exit 3.
#[test]
fn export_of_an_unfinished_run_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = infergate::import::load_results(&fixture(
        "llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json",
    ))
    .unwrap()
    .remove(0);
    run.status = infergate::results::RunStatus::InProgress;
    let results = dir.path().join("results.json");
    std::fs::write(&results, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    let junit = dir.path().join("junit.xml");
    let out = infergate(&[
        "export",
        "--format",
        "junit",
        "--results",
        s(&results),
        "--out",
        s(&junit),
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_contains(&out.stderr, "is `in_progress`");
    validate_junit(&junit);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_contains(&xml, "<testcase classname=\"run\" name=\"finished\"");
    let bmf = dir.path().join("bmf.json");
    let out = infergate(&[
        "export",
        "--format",
        "bmf",
        "--results",
        s(&results),
        "--out",
        s(&bmf),
    ]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_contains(&out.stderr, "nothing exported");
    assert!(!bmf.exists());
}

#[test]
fn junit_and_csv_snapshots_from_a_vllm_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let cand = fixture("vllm-bench-serve-append-optimized.jsonl");
    let verdict = hand_verdict(&cand, dir.path());
    let xml = junit_of(&cand, &verdict, dir.path());
    assert_eq!(xml.matches("<failure ").count(), 1, "one regressed cell");
    assert_contains(&xml, "&lt;&amp;&quot;engine&quot;&gt;");
    insta::assert_snapshot!("junit_vllm_candidate", xml);

    let out = export("csv", &cand, Some(&verdict));
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("csv_vllm_candidate", out.stdout);

    let out = export("csv", &fixture("guidellm-0.8-sim.json"), None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    insta::assert_snapshot!("csv_guidellm_sim", out.stdout);

    // A verdict of other runs is refused, naming both.
    let other = fixture("vllm-bench-serve-append-baseline.jsonl");
    let out = export("junit", &other, Some(&verdict));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_contains(&out.stderr, "not for results run");
}

#[test]
fn junit_from_a_real_comparison_has_one_failure_per_regressed_cell() {
    // A baseline store of 8 runs around the imported vLLM baseline (about 1% noise), and a
    // candidate whose C=100 cell lost 20%: compare decides, export only renders.
    let dir = tempfile::tempdir().unwrap();
    let base = infergate::import::load_results(&fixture("vllm-bench-serve-append-baseline.jsonl"))
        .unwrap()
        .remove(0);
    let store = dir.path().join("store");
    support::baseline_around(&store, &base, 8, |_, _| 1.0);
    let text = std::fs::read_to_string(fixture("vllm-bench-serve-append-baseline.jsonl")).unwrap();
    let slower = text.replacen(
        "\"output_throughput\": 140.12",
        "\"output_throughput\": 112.1",
        1,
    );
    assert_ne!(slower, text);
    let cand = dir.path().join("cand.jsonl");
    std::fs::write(&cand, slower).unwrap();
    let verdict = dir.path().join("verdict.json");
    let out = infergate(&[
        "compare",
        "--baseline",
        s(&store),
        "--candidate",
        s(&cand),
        "--format",
        "json",
        "--out",
        s(&verdict),
        "--single-look",
    ]);
    assert_eq!(out.code, 1, "a 20% drop is a regression: {}", out.stderr);
    let report: ComparisonReport =
        serde_json::from_str(&std::fs::read_to_string(&verdict).unwrap()).unwrap();
    let regressed: Vec<_> = report.regressions().map(|c| c.concurrency).collect();
    assert_eq!(regressed, [100]);
    let xml = junit_of(&cand, &verdict, dir.path());
    let matrix_failed = report
        .matrix_test
        .as_ref()
        .is_some_and(|m| m.verdict == infergate::verdict::CellVerdict::Regression);
    assert_eq!(
        xml.matches("<failure ").count(),
        regressed.len() + usize::from(matrix_failed),
        "{xml}"
    );
    assert!(xml.contains("classname=\"C=100 / 32010\" name=\"aggregate_tps\""));
    assert!(xml.contains(&format!(
        "failures=\"{}\"",
        regressed.len() + usize::from(matrix_failed)
    )));
}

/// The guidellm to run: `$INFERGATE_GUIDELLM`, else `guidellm` on PATH.
fn guidellm() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("INFERGATE_GUIDELLM") {
        return Ok(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("guidellm"))
        .find(|p| p.is_file())
        .ok_or_else(|| "guidellm not on PATH and INFERGATE_GUIDELLM not set".into())
}

#[test]
fn real_guidellm_against_the_sim_imports() {
    let exe = match guidellm() {
        Ok(p) => p,
        Err(why) => {
            eprintln!(
                "SKIP real_guidellm_against_the_sim_imports: {why} (pip install guidellm==0.8.1)"
            );
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let mut sim = Command::new(BIN)
        .args([
            "sim",
            "--profile",
            "test",
            "--time-scale",
            "4",
            "--seed",
            "3",
        ])
        .args(["--port", "0", "--port-file", s(&port_file)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn infergate sim");
    let deadline = Instant::now() + Duration::from_secs(20);
    let port = loop {
        if let Ok(t) = std::fs::read_to_string(&port_file)
            && let Ok(p) = t.trim().parse::<u16>()
        {
            break p;
        }
        assert!(Instant::now() < deadline, "sim wrote no port file");
        std::thread::sleep(Duration::from_millis(20));
    };
    let report = dir.path().join("guidellm.json");
    let tokenizer = fixture("sim-word-tokenizer");
    // Offline: a local tokenizer directory, no hub access.
    let run = Command::new(&exe)
        .args([
            "run",
            "--backend",
            &format!("kind=openai_http,target=http://127.0.0.1:{port}"),
            "--profile",
            "kind=concurrent,streams=1",
            "--override",
            "profile.streams",
            "1,2",
            "--constraint",
            "kind=max_requests,count=4",
            "--tokenizer",
            &format!("kind=huggingface_auto,model={}", s(&tokenizer)),
            "--data",
            "kind=synthetic_text,prompt_tokens=32,output_tokens=16",
            "--label",
            "engine=infergate-sim",
            "--output",
            &format!("kind=json,path={}", s(&report)),
            "--disable-progress",
        ])
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    let _ = sim.kill();
    let _ = sim.wait();
    let run = run.expect("run guidellm");
    assert!(
        run.status.success(),
        "guidellm failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results = dir.path().join("r.json");
    let out = infergate(&["import", s(&report), "--out", s(&results)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run = read_run(&results);
    let coords: Vec<_> = run.cells.iter().map(|c| c.coord()).collect();
    assert_eq!(coords, [(1, 32), (2, 32)]);
    assert!(
        run.cells
            .iter()
            .all(|c| c.aggregate_tps > 0.0 && c.ttft_s.is_some())
    );
    assert_eq!(run.profile.engine, "infergate-sim");
}
