//! `infergate merge` end to end: shard results directories (one per GPU profile, each holding a
//! verdict.json written by hand as ComparisonReport JSON, or only the results.json of a run
//! that compared nothing) joined into one verdict.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;

use infergate_schema::asserts::{assert_contains, assert_lacks, assert_starts_with};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infergate::results::RunStatus;
use serde_json::{Value, json};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_infergate")
}

/// One comparison report as `infergate run` writes it: `regressed` cells regressed (aggregate
/// tok/s −7%), one unchanged cell.
fn report(gpu: &str, key: &str, gate: &str, regressed: usize) -> Value {
    let cell = |verdict: &str, change: f64| {
        json!({
            "concurrency": 8,
            "context_tokens": 32768,
            "verdict": verdict,
            "reason": null,
            "metrics": [{
                "metric": "aggregate_tps",
                "direction": "higher_is_better",
                "baseline": 400.0,
                "candidate": 400.0 * (1.0 + change),
                "change": change,
                "ci_low": change - 0.02,
                "ci_high": change + 0.02,
                "margin": 0.03,
                "p_value": 0.001,
                "p_adjusted": 0.004,
                "verdict": verdict
            }]
        })
    };
    let mut cells: Vec<Value> = (0..regressed).map(|_| cell("regression", -0.07)).collect();
    cells.push(cell("unchanged", 0.004));
    json!({
        "schema_version": 1,
        "profile": {
            "key": key,
            "hardware": {
                "kind": "gpu",
                "gpu_model": gpu,
                "gpu_count": 1,
                "driver_version": "580.65",
                "cpu_model": null
            },
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "matrix_hash": "0123456789abcdef"
        },
        "suite": "pr",
        "candidate_runs": [format!("run-{key}")],
        "baseline": {"level_runs": ["b1", "b2", "b3"], "noise_runs": 12},
        "gate": gate,
        "headline": if regressed > 0 {
            format!("{regressed} regressions, worst -7.0% at C=8 / 32k")
        } else {
            "no regressions".to_string()
        },
        "matrix_test": null,
        "cells": cells,
        "rule": {
            "alpha": 0.05,
            "min_effect": 0.03,
            "noise_k": 2.0,
            "correction": "holm",
            "confidence": 0.95
        }
    })
}

/// Writes a shard results directory (`<root>/<name>/results.json` of the verdict's run, then
/// `verdict.json`, in the order `run` writes them).
fn shard(root: &Path, name: &str, report: &Value) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut run = results_gen::run(&results_gen::Gen::default(), 0);
    run.run_id = report["candidate_runs"][0].as_str().unwrap().to_string();
    results_gen::write(&dir, "results.json", &run);
    std::fs::write(
        dir.join("verdict.json"),
        serde_json::to_string_pretty(report).unwrap(),
    )
    .unwrap();
    dir
}

fn merge(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("merge")
        .args(args)
        .output()
        .expect("run infergate merge")
}

const H100: &str = "gpu-nvidia-h100x1__vllm__qwen-qwen3-8b__m0123456789";
const H200: &str = "gpu-nvidia-h200x1__vllm__qwen-qwen3-8b__m0123456789";
const RTX: &str = "gpu-nvidia-geforce-rtx-5090x1__vllm__qwen-qwen3-8b__m0123456789";

fn three_shards(root: &Path, h200_gate: &str, h200_regressed: usize) -> Vec<String> {
    [
        shard(root, "h100", &report("NVIDIA H100", H100, "pass", 0)),
        shard(
            root,
            "h200",
            &report("NVIDIA H200", H200, h200_gate, h200_regressed),
        ),
        shard(
            root,
            "rtx5090",
            &report("NVIDIA GeForce RTX 5090", RTX, "pass", 0),
        ),
    ]
    .iter()
    .flat_map(|d| ["--shard".to_string(), d.display().to_string()])
    .collect()
}

#[test]
fn one_regressed_shard_fails_the_merged_verdict_with_a_section_per_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = three_shards(tmp.path(), "regression", 2);
    let shard_args: Vec<&str> = shards.iter().map(String::as_str).collect();

    // Markdown: one overview + one section per profile, exit 1.
    let md_path = tmp.path().join("merged.md");
    let outputs = tmp.path().join("github_output");
    std::fs::write(&outputs, "earlier=kept\n").unwrap();
    let mut args = shard_args.clone();
    args.extend([
        "--format",
        "md",
        "--out",
        md_path.to_str().unwrap(),
        "--github-output",
        outputs.to_str().unwrap(),
    ]);
    let out = merge(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert_starts_with(&md, "<!-- infergate:merged -->");
    assert_eq!(md.matches("\n### ").count(), 3, "{md}");
    for key in [H100, H200, RTX] {
        let escaped = key.replace('_', "\\_");
        assert!(
            md.contains(&format!("### {escaped} ")),
            "no section for {key}:\n{md}"
        );
    }
    assert_contains(&md, "1 of 3 profiles regressed");
    assert_eq!(
        std::fs::read_to_string(&outputs).unwrap(),
        "earlier=kept\nverdict=regression\nconclusion=failure\nregressions=2\nprofiles=3\nnot-gated=\n"
    );

    // JSON: one verdict, each shard's comparison kept whole.
    let mut args = shard_args.clone();
    args.extend(["--format", "json"]);
    let out = merge(&args);
    assert_eq!(out.status.code(), Some(1));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["gate"], "regression");
    assert_eq!(merged["regressions"], 2);
    let profiles = merged["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 3);
    assert_eq!(profiles[1]["report"]["profile"]["key"], H200);
    assert_eq!(profiles[1]["regressions"], 2);
    assert!(
        profiles[0]["results"]
            .as_str()
            .unwrap()
            .ends_with("results.json")
    );

    // Text (default format) names the regressed profile.
    let out = merge(&shard_args);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_starts_with(&text, "merged verdict: regression");
    assert_contains(&text, H200);
}

#[test]
fn all_shards_pass_gives_exit_0_and_inconclusive_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = three_shards(tmp.path(), "pass", 0);
    let mut args: Vec<&str> = shards.iter().map(String::as_str).collect();
    args.extend(["--format", "json"]);
    let out = merge(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["gate"], "pass");
    assert_eq!(merged["headline"], "all 3 profiles passed");

    let tmp = tempfile::tempdir().unwrap();
    let shards = three_shards(tmp.path(), "inconclusive", 0);
    let mut args: Vec<&str> = shards.iter().map(String::as_str).collect();
    args.extend(["--format", "json"]);
    let out = merge(&args);
    assert_eq!(out.status.code(), Some(0));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Shards of older versions say `inconclusive`: read as `insufficient`.
    assert_eq!(merged["gate"], "insufficient");
}

#[test]
fn a_verdict_file_is_accepted_as_a_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = shard(
        tmp.path(),
        "h200",
        &report("NVIDIA H200", H200, "regression", 1),
    );
    let file = dir.join("verdict.json");
    let out = merge(&["--shard", file.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["regressions"], 1);
}

#[test]
fn an_unreadable_shard_is_exit_2_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let good = shard(tmp.path(), "h100", &report("NVIDIA H100", H100, "pass", 0));

    // Broken JSON field.
    let bad = tmp.path().join("h200");
    std::fs::create_dir_all(&bad).unwrap();
    let mut broken = report("NVIDIA H200", H200, "pass", 0);
    broken["gate"] = json!("maybe");
    std::fs::write(bad.join("verdict.json"), broken.to_string()).unwrap();
    let out = merge(&[
        "--shard",
        good.to_str().unwrap(),
        "--shard",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_contains(&err, &bad.join("verdict.json").display().to_string());
    assert_contains(&err, "gate");

    // A directory without a verdict.
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = merge(&["--shard", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_contains(&err, "empty");
    assert_contains(&err, "verdict.json");
}

/// Writes a shard results directory whose run compared nothing: `results.json` only.
fn results_only_shard(root: &Path, name: &str, status: RunStatus) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut run = results_gen::run(&results_gen::Gen::default(), 7);
    run.status = status;
    if status == RunStatus::Cancelled {
        run.status_reason = Some("cancelled by SIGINT/SIGTERM".into());
    }
    results_gen::write(&dir, "results.json", &run);
    dir
}

#[test]
fn a_shard_without_a_verdict_is_no_baseline_and_a_cancelled_one_fails_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let h100 = shard(tmp.path(), "h100", &report("NVIDIA H100", H100, "pass", 0));
    let fresh = results_only_shard(tmp.path(), "fresh", RunStatus::Complete);
    let out = merge(&[
        "--shard",
        h100.to_str().unwrap(),
        "--shard",
        fresh.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "no baseline passes, as in `run`: {err}"
    );
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(merged["gate"], "no_baseline");
    assert_eq!(merged["profiles"][1]["kind"], "not_compared");
    assert_eq!(merged["profiles"][1]["status"], "complete");

    let cancelled = results_only_shard(tmp.path(), "cancelled", RunStatus::Cancelled);
    let outputs = tmp.path().join("github-output");
    let args = [
        "--shard",
        h100.to_str().unwrap(),
        "--shard",
        fresh.to_str().unwrap(),
        "--shard",
        cancelled.to_str().unwrap(),
        "--github-output",
        outputs.to_str().unwrap(),
    ];
    let out = merge(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a profile not measured fails closed:\n{text}"
    );
    assert_starts_with(
        &text,
        "merged verdict: error — 1 of 3 profiles without a verdict",
    );
    assert_contains(&text, "cancelled by SIGINT/SIGTERM");
    let outputs = std::fs::read_to_string(&outputs).unwrap();
    assert_starts_with(&outputs, "verdict=error\n");
}

#[test]
fn a_verdict_beside_results_whose_gate_failed_after_measuring_is_no_verdict() {
    // A confirmation boot that failed leaves the first look's verdict.json beside the results;
    // the results' compare_error event says that verdict is not the gate's answer.
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("shard");
    std::fs::create_dir(&shard).unwrap();
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/pass");
    let mut results: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("results.json")).unwrap())
            .unwrap();
    results["events"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "at": "2026-12-05T12:00:00Z",
            "kind": "compare_error",
            "message": "the confirmation boot failed: the engine exited"
        }));
    std::fs::write(shard.join("results.json"), results.to_string()).unwrap();
    std::fs::copy(fixtures.join("verdict.json"), shard.join("verdict.json")).unwrap();
    let out = merge(&["--shard", shard.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert_contains(
        &text,
        "measured, but no verdict: the confirmation boot failed",
    );
    assert_lacks(&text, "pass ");
}
