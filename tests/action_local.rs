//! The composite action's step scripts (scripts/action/*.sh), run locally with the environment
//! the Actions runner would set (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, RUNNER_*, the `INPUT_*`
//! variables action.yml maps its inputs to), against the simulated engine of the default
//! `infergate.toml`. INFERGATE_BIN points at the binary cargo built for the tests, so nothing is
//! rebuilt or downloaded.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;
mod support;

use infergate_schema::asserts::{assert_contains, assert_ends_with, assert_starts_with};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_infergate")
}

/// A step's process group, killed on drop so no engine outlives a failing test.
struct StepProcess(Child);

impl Drop for StepProcess {
    fn drop(&mut self) {
        // The whole group (bash, infergate, the engine it booted), whether or not bash exited.
        let pgid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

struct StepRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// The runner-like workspace of one test: temp files for the runner's command files.
struct Runner {
    tmp: tempfile::TempDir,
    output: PathBuf,
    summary: PathBuf,
}

impl Runner {
    fn new() -> Runner {
        let tmp = tempfile::tempdir().unwrap();
        let output = tmp.path().join("github_output");
        let summary = tmp.path().join("step_summary");
        std::fs::write(&output, "").unwrap();
        std::fs::write(&summary, "# earlier step\n").unwrap();
        Runner {
            tmp,
            output,
            summary,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Runs `scripts/action/<script>` in the repo root with the runner's environment plus
    /// `inputs`, bounded by `limit`.
    fn step(&self, script: &str, inputs: &[(&str, &str)], limit: Duration) -> StepRun {
        let mut cmd = Command::new("bash");
        cmd.arg(repo().join("scripts/action").join(script))
            .current_dir(repo())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path())
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_OUTPUT", &self.output)
            .env("GITHUB_STEP_SUMMARY", &self.summary)
            .env("GITHUB_ACTION_PATH", repo())
            .env("GITHUB_WORKSPACE", repo())
            .env("GITHUB_EVENT_NAME", "pull_request")
            .env("GITHUB_REPOSITORY", "example/engine")
            .env("GITHUB_SHA", "0".repeat(40))
            // Nothing may reach the network: a closed loopback port, and no token at all.
            .env("GITHUB_API_URL", "http://127.0.0.1:9")
            .env("GITHUB_SERVER_URL", "http://127.0.0.1:9")
            .env("RUNNER_OS", "Linux")
            .env("RUNNER_ARCH", "X64")
            .env("RUNNER_TEMP", self.tmp.path())
            .process_group(0);
        // Files, not pipes: a chatty step can never block on a full pipe.
        let stdout_path = self.path(&format!("{script}.stdout"));
        let stderr_path = self.path(&format!("{script}.stderr"));
        cmd.stdout(Stdio::from(std::fs::File::create(&stdout_path).unwrap()))
            .stderr(Stdio::from(std::fs::File::create(&stderr_path).unwrap()));
        for (k, v) in inputs {
            cmd.env(k, v);
        }
        let mut child = StepProcess(cmd.spawn().expect("spawn bash"));
        let start = Instant::now();
        let status = loop {
            match child.0.try_wait().expect("wait for the step") {
                Some(status) => break status,
                None if start.elapsed() > limit => {
                    panic!("{script} did not finish within {limit:?}")
                }
                None => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        StepRun {
            code: status.code(),
            stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
            stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
        }
    }

    /// The action's mode `merge` (run.sh → merge.sh) over the shards under `shards`.
    fn merge_step(&self, shards: &Path, fail_on: &str) -> StepRun {
        self.step(
            "run.sh",
            &[
                ("INFERGATE_BIN", bin()),
                ("INPUT_MODE", "merge"),
                ("INPUT_FAIL_ON", fail_on),
                ("INPUT_RESULTS_DIR", shards.to_str().unwrap()),
            ],
            SHORT,
        )
    }

    /// `$GITHUB_OUTPUT` parsed as `key=value` lines (every line must be well-formed).
    fn outputs(&self) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(&self.output).unwrap();
        text.lines()
            .map(|line| {
                let (k, v) = line
                    .split_once('=')
                    .unwrap_or_else(|| panic!("malformed GITHUB_OUTPUT line {line:?}"));
                (k.to_string(), v.to_string())
            })
            .collect()
    }
}

const SHORT: Duration = Duration::from_secs(30);

#[test]
fn gate_mode_runs_the_simulated_engine_and_sets_the_outputs() {
    let runner = Runner::new();
    let results = runner.path("results");
    let results_s = results.to_str().unwrap();

    // Step 1 and 2 of action.yml: resolve + install, with a pre-provided binary.
    let r = runner.step("resolve.sh", &[("INFERGATE_BIN", bin())], SHORT);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let resolved = runner.outputs();
    assert_eq!(resolved["method"], "given");
    let r = runner.step(
        "install.sh",
        &[
            ("INFERGATE_BIN", bin()),
            ("INSTALL_METHOD", &resolved["method"]),
            ("INSTALL_BIN_DIR", &resolved["bin-dir"]),
        ],
        SHORT,
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let installed = runner.outputs()["bin"].clone();
    assert_eq!(installed, bin());

    // Step 3: the gate itself, on the default config (simulated engine, `pr` suite).
    let r = runner.step(
        "run.sh",
        &[
            ("INFERGATE_BIN", installed.as_str()),
            ("INPUT_CONFIG", "infergate.toml"),
            ("INPUT_SUITE", "pr"),
            ("INPUT_MODE", "gate"),
            ("INPUT_FAIL_ON", "regression"),
            ("INPUT_UPDATE_BASELINE", "false"),
            ("INPUT_ENGINE_ARGS", ""),
            ("INPUT_RESULTS_DIR", results_s),
        ],
        Duration::from_secs(240),
    );
    let outputs = runner.outputs();
    let verdict = outputs
        .get("verdict")
        .unwrap_or_else(|| panic!("no verdict output\n{}{}", r.stdout, r.stderr));
    assert!(
        ["pass", "regression", "insufficient", "no_baseline"].contains(&verdict.as_str()),
        "verdict {verdict:?} (exit {:?})\nstdout:\n{}\nstderr:\n{}",
        r.code,
        r.stdout,
        r.stderr
    );
    // fail-on: regression fails the step exactly when the verdict is a regression.
    let want = if verdict == "regression" { 1 } else { 0 };
    assert_eq!(r.code, Some(want), "{}{}", r.stdout, r.stderr);
    let regressions: usize = outputs["regressions"].parse().unwrap();
    assert_eq!(verdict == "regression", regressions > 0);

    let results_path = PathBuf::from(&outputs["results-path"]);
    assert_eq!(results_path, results.join("results.json"));
    let parsed: Value = serde_json::from_slice(&std::fs::read(&results_path).unwrap())
        .expect("results.json is JSON");
    assert_eq!(parsed["schema_version"], 1);
    assert_eq!(parsed["suite"], "pr");
    // The job summary is appended to, never overwritten.
    let summary = std::fs::read_to_string(&runner.summary).unwrap();
    assert_starts_with(&summary, "# earlier step\n");

    // The pr-report.yml path: mode `report` on the (downloaded) results directory, as a
    // workflow_run job without a token would run it.
    let reporter = Runner::new();
    let r = reporter.step(
        "run.sh",
        &[
            ("INFERGATE_BIN", bin()),
            ("INPUT_MODE", "report"),
            ("INPUT_FAIL_ON", "never"),
            ("INPUT_RESULTS_DIR", results_s),
            ("INPUT_EXPORT", "junit,csv bmf gab"),
            ("GITHUB_EVENT_NAME", "workflow_run"),
        ],
        SHORT,
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let reported = reporter.outputs();
    assert_eq!(&reported["verdict"], verdict);
    assert_eq!(reported["results-path"], outputs["results-path"]);
    // input `export`: one file per format next to results.json, its path an output.
    for (output, file) in [
        ("export-junit-path", "export.junit.xml"),
        ("export-csv-path", "export.csv"),
        ("export-bmf-path", "export.bmf.json"),
        ("export-gab-bigger-path", "export.gab-bigger.json"),
        ("export-gab-smaller-path", "export.gab-smaller.json"),
    ] {
        assert_eq!(
            PathBuf::from(&reported[output]),
            results.join(file),
            "{output}"
        );
        assert!(results.join(file).is_file(), "{file} written");
    }
    let junit = std::fs::read_to_string(results.join("export.junit.xml")).unwrap();
    let failures = junit.matches("<failure ").count();
    assert_eq!(verdict == "regression", failures > 0, "{junit}");
    let summary = std::fs::read_to_string(&reporter.summary).unwrap();
    assert!(summary.len() > "# earlier step\n".len(), "{summary}");
}

#[test]
fn report_mode_rejects_an_artifact_that_is_not_results_json() {
    // The artifact of a fork PR's gate run is untrusted: it is only ever parsed, and anything
    // that is not a results file stops the report with exit 2 (nothing posted, nothing run).
    let runner = Runner::new();
    let artifact = runner.path("untrusted-results");
    std::fs::create_dir_all(&artifact).unwrap();
    let marker = runner.path("pwned");
    std::fs::write(
        artifact.join("results.json"),
        format!(
            "$(touch {}) {{\"schema_version\": \"`touch {}`\"}}",
            marker.display(),
            marker.display()
        ),
    )
    .unwrap();
    let r = runner.step(
        "run.sh",
        &[
            ("INFERGATE_BIN", bin()),
            ("INPUT_MODE", "report"),
            ("INPUT_RESULTS_DIR", artifact.to_str().unwrap()),
            ("GITHUB_EVENT_NAME", "workflow_run"),
        ],
        SHORT,
    );
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert_contains(&r.stderr, "results.json");
    assert_eq!(runner.outputs()["verdict"], "error");
    assert!(!marker.exists(), "artifact content was executed");
}

#[test]
fn bad_inputs_are_exit_2_before_anything_runs() {
    let cases: [(&[(&str, &str)], &str); 5] = [
        (&[("INPUT_MODE", "bench")], "input 'mode'"),
        (&[("INPUT_EXPORT", "junit xml")], "input 'export'"),
        (&[("INPUT_FAIL_ON", "sometimes")], "input 'fail-on'"),
        // Baselines are only ever updated from the default branch.
        (
            &[("INPUT_UPDATE_BASELINE", "true"), ("INPUT_MODE", "nightly")],
            "refused on 'pull_request'",
        ),
        (&[("INPUT_CONFIG", "no-such.toml")], "no-such.toml"),
    ];
    for (inputs, message) in cases {
        let runner = Runner::new();
        let results = runner.path("results");
        let mut env = vec![
            ("INFERGATE_BIN", bin()),
            ("INPUT_RESULTS_DIR", results.to_str().unwrap()),
        ];
        env.extend_from_slice(inputs);
        let r = runner.step("run.sh", &env, SHORT);
        assert_eq!(r.code, Some(2), "{inputs:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(message), "{inputs:?}: {}", r.stderr);
        assert!(runner.outputs().is_empty(), "{inputs:?}");
        assert!(!results.exists(), "{inputs:?}: nothing may run");
    }
}

#[test]
fn resolve_picks_release_assets_for_release_refs_and_source_otherwise() {
    let version = env!("CARGO_PKG_VERSION");
    let cases = [
        ("v1.2.3", "", "release", "v1.2.3".to_string()),
        ("v1", "", "release", format!("v{version}")),
        ("main", "", "source", String::new()),
        ("v1.2.3", "source", "source", String::new()),
        ("main", "v0.4.0", "release", "v0.4.0".to_string()),
        // Pinned by commit SHA: the release the action's own Cargo.toml declares.
        (
            "0123456789abcdef0123456789abcdef01234567",
            "",
            "release",
            format!("v{version}"),
        ),
    ];
    for (action_ref, version_input, method, tag) in cases {
        let runner = Runner::new();
        let r = runner.step(
            "resolve.sh",
            &[("ACTION_REF", action_ref), ("INPUT_VERSION", version_input)],
            SHORT,
        );
        assert_eq!(r.code, Some(0), "{action_ref}: {}", r.stderr);
        let out = runner.outputs();
        assert_eq!(out["method"], method, "{action_ref} {version_input}");
        assert_eq!(out["tag"], tag, "{action_ref} {version_input}");
        assert!(out["bin-dir"].ends_with("infergate-action/bin-x86_64"));
        if method == "source" {
            // Keyed by the sources: Cargo.lock + src hash, per OS and arch.
            assert!(
                out["cache-key"].starts_with("infergate-bin-Linux-x86_64-"),
                "{}",
                out["cache-key"]
            );
        } else {
            assert_eq!(out["cache-key"], "");
        }
    }
    let runner = Runner::new();
    let r = runner.step(
        "resolve.sh",
        &[("INPUT_VERSION", "latest; rm -rf /")],
        SHORT,
    );
    assert_eq!(r.code, Some(2));
    assert_contains(&r.stderr, "input 'version'");
}

fn shard_report(key: &str, gate: &str, regressed: usize) -> Value {
    let cells: Vec<Value> = (0..regressed.max(1))
        .map(|i| {
            let verdict = if i < regressed {
                "regression"
            } else {
                "unchanged"
            };
            json!({
                "concurrency": 4, "context_tokens": 8192, "verdict": verdict, "metrics": [{
                    "metric": "aggregate_tps", "direction": "higher_is_better",
                    "baseline": 100.0, "candidate": 92.0, "change": -0.08, "ci_low": -0.1,
                    "ci_high": -0.06, "margin": 0.03, "p_value": 0.001, "p_adjusted": 0.002,
                    "verdict": verdict
                }]
            })
        })
        .collect();
    json!({
        "schema_version": 1,
        "profile": {
            "key": key,
            "hardware": {"kind": "gpu", "gpu_model": key, "gpu_count": 1},
            "engine": "vllm", "model": "m", "matrix_hash": "ab"
        },
        "suite": "pr",
        "candidate_runs": ["r"],
        "baseline": {"level_runs": ["b"], "noise_runs": 5},
        "gate": gate,
        "headline": format!("{key}: {gate}"),
        "cells": cells,
        "rule": {"alpha": 0.05, "min_effect": 0.03, "noise_k": 2.0,
                 "correction": "holm", "confidence": 0.95}
    })
}

fn write_shards(root: &Path, shards: &[(&str, &str, usize)]) {
    for (name, gate, regressed) in shards {
        // download-artifact with a pattern puts each artifact in its own directory.
        let dir = root.join(format!("infergate-shard-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("verdict.json"),
            shard_report(&format!("gpu-{name}"), gate, *regressed).to_string(),
        )
        .unwrap();
    }
}

#[test]
fn merge_mode_joins_the_shards_into_one_verdict() {
    for (fail_on, h200_gate, want_code, want_verdict) in [
        ("regression", "regression", 1, "regression"),
        ("never", "regression", 0, "regression"),
        ("regression", "pass", 0, "pass"),
    ] {
        let runner = Runner::new();
        let shards = runner.path("shards");
        let regressed = usize::from(h200_gate == "regression") * 3;
        write_shards(
            &shards,
            &[
                ("h100", "pass", 0),
                ("h200", h200_gate, regressed),
                ("rtx5090", "pass", 0),
            ],
        );
        let r = runner.merge_step(&shards, fail_on);
        assert_eq!(r.code, Some(want_code), "{}{}", r.stdout, r.stderr);
        let out = runner.outputs();
        assert_eq!(out["verdict"], want_verdict);
        assert_eq!(out["regressions"], regressed.to_string());
        assert_eq!(out["profiles"], "3");
        // No token: one notice, no error, no network.
        assert_contains(&r.stdout, "no github-token");
        let summary = std::fs::read_to_string(&runner.summary).unwrap();
        assert!(summary.starts_with("# earlier step\n"));
        assert_eq!(summary.matches("\n### gpu-").count(), 3, "{summary}");
        let merged: Value =
            serde_json::from_slice(&std::fs::read(&out["results-path"]).unwrap()).unwrap();
        assert_eq!(merged["gate"], want_verdict);
    }

    // Input `expect-shards`: three passing shards where the workflow launched four.
    let runner = Runner::new();
    let shards = runner.path("shards");
    write_shards(
        &shards,
        &[("h100", "pass", 0), ("h200", "pass", 0), ("l40", "pass", 0)],
    );
    let r = runner.step(
        "run.sh",
        &[
            ("INFERGATE_BIN", bin()),
            ("INPUT_MODE", "merge"),
            ("INPUT_RESULTS_DIR", shards.to_str().unwrap()),
            ("INPUT_EXPECT_SHARDS", "4"),
        ],
        SHORT,
    );
    assert_eq!(r.code, Some(3), "{}{}", r.stdout, r.stderr);
    let out = runner.outputs();
    assert_eq!(
        (out["verdict"].as_str(), out["conclusion"].as_str()),
        ("error", "failure")
    );
    assert_contains(&r.stdout, "3 of 4 shards expected arrived");
}

/// A static file server on 127.0.0.1 (python3's http.server), killed on drop.
struct FileServer {
    child: Child,
    url: String,
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Option<FileServer> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if start.elapsed() > Duration::from_secs(20) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(FileServer { child, url })
}

#[test]
fn a_sha_pinned_action_installs_its_release_verified_without_building() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is not installed (it serves the mock release download)");
        return;
    }
    let runner = Runner::new();
    let version = env!("CARGO_PKG_VERSION");
    let tag = format!("v{version}");
    let sha = "0123456789abcdef0123456789abcdef01234567";
    // The runner's checkout of `uses: example/infergate@<sha>` (GitHub names the directory
    // after the ref), with the action's own Cargo.toml.
    let action = runner.path(&format!("_actions/example/infergate/{sha}"));
    std::fs::create_dir_all(action.join("scripts")).unwrap();
    std::fs::copy(repo().join("Cargo.toml"), action.join("Cargo.toml")).unwrap();
    // The release as GitHub serves it: SERVER/OWNER/REPO/releases/download/TAG/ASSET, the real
    // binary in a tarball, and its .sha256.
    let site = runner.path("site");
    let dl = site.join(format!("example/infergate/releases/download/{tag}"));
    std::fs::create_dir_all(&dl).unwrap();
    let asset = format!("infergate-{tag}-x86_64-unknown-linux-gnu.tar.gz");
    let stage = runner.path("stage");
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::copy(bin(), stage.join("infergate")).unwrap();
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(dl.join(&asset))
        .arg("-C")
        .arg(&stage)
        .arg("infergate")
        .status()
        .unwrap();
    assert!(tar.success());
    let sum = Command::new("sha256sum")
        .arg(&asset)
        .current_dir(&dl)
        .output()
        .unwrap();
    std::fs::write(dl.join(format!("{asset}.sha256")), &sum.stdout).unwrap();
    let Some(server) = serve(&site) else {
        panic!("the mock release server did not start");
    };
    // A `cargo` that records being called: a release install must never build.
    let fake_bin = runner.path("fake-bin");
    std::fs::create_dir_all(&fake_bin).unwrap();
    let called = runner.path("cargo-was-called");
    std::fs::write(
        fake_bin.join("cargo"),
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", called.display()),
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(fake_bin.join("cargo"))
        .status()
        .unwrap();
    let path = format!(
        "{}:{}",
        fake_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let action_s = action.to_str().unwrap();

    // github.action_ref and github.action_repository are empty (not promised in composite
    // actions): both come from the checkout directory.
    let r = runner.step(
        "resolve.sh",
        &[("GITHUB_ACTION_PATH", action_s), ("ACTION_REF", "")],
        SHORT,
    );
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let resolved = runner.outputs();
    assert_eq!(resolved["method"], "release");
    assert_eq!(resolved["tag"], tag);
    let install = |checksum_ok: bool| {
        if !checksum_ok {
            std::fs::write(
                dl.join(format!("{asset}.sha256")),
                format!("{}  {asset}\n", "0".repeat(64)),
            )
            .unwrap();
        }
        runner.step(
            "install.sh",
            &[
                ("GITHUB_ACTION_PATH", action_s),
                ("GITHUB_SERVER_URL", server.url.as_str()),
                ("ACTION_REPOSITORY", ""),
                ("INSTALL_METHOD", "release"),
                ("INSTALL_TAG", tag.as_str()),
                ("INSTALL_BIN_DIR", resolved["bin-dir"].as_str()),
                ("PATH", path.as_str()),
            ],
            SHORT,
        )
    };
    let r = install(true);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        !called.exists(),
        "cargo was called: {}{}",
        r.stdout,
        r.stderr
    );
    let installed = runner.outputs()["bin"].clone();
    assert_ends_with(&installed, "infergate-action/bin-x86_64/infergate");
    assert!(
        r.stdout.contains(version),
        "--version printed: {}",
        r.stdout
    );

    // A checksum that does not match is fatal: no fallback to anything else.
    std::fs::remove_file(&installed).unwrap();
    let r = install(false);
    assert_eq!(r.code, Some(3), "{}{}", r.stdout, r.stderr);
    assert_contains(&r.stderr, "checksum mismatch");
    assert!(!called.exists());
    drop(server);
}

#[test]
fn merge_mode_fails_closed_on_a_shard_that_was_not_measured_and_still_summarises() {
    let runner = Runner::new();
    let shards = runner.path("shards");
    write_shards(&shards, &[("h100", "pass", 0), ("h200", "pass", 0)]);
    // A cancelled shard uploads results.json but no verdict.json.
    let dir = shards.join("infergate-shard-rtx5090");
    std::fs::create_dir_all(&dir).unwrap();
    let mut run = results_gen::run(&results_gen::Gen::default(), 3);
    run.status = infergate::results::RunStatus::Cancelled;
    run.status_reason = Some("cancelled by SIGINT/SIGTERM".into());
    results_gen::write(&dir, "results.json", &run);
    let r = runner.merge_step(&shards, "never");
    assert_eq!(r.code, Some(3), "{}{}", r.stdout, r.stderr);
    let out = runner.outputs();
    assert_eq!(out["verdict"], "error");
    assert_eq!(out["profiles"], "3");
    let summary = std::fs::read_to_string(&runner.summary).unwrap();
    assert_eq!(summary.matches("\n### ").count(), 3, "{summary}");
    assert_contains(&summary, "cancelled by SIGINT/SIGTERM");
}

#[test]
fn alert_mode_writes_the_trend_report_and_fails_when_no_alert_can_be_filed() {
    // A nightly store with tonight's results in the downloaded artifact. The runner here holds
    // no token: the trend report is still written (and named in the outputs), and the step
    // fails, because alerts that could not be filed must not look like a quiet night.
    let runner = Runner::new();
    let files = runner.path("files");
    std::fs::create_dir_all(&files).unwrap();
    let g = results_gen::Gen {
        suite: Some("nightly".into()),
        ..results_gen::Gen::default()
    };
    let store = runner.path("baselines");
    let mut args = vec![
        "baseline".to_string(),
        "add".into(),
        "--dir".into(),
        store.display().to_string(),
    ];
    for p in results_gen::write_many(&files, "n", &g, 0..12) {
        args.push(p.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = results_gen::infergate(&args);
    assert_eq!(code, 0, "{err}");
    let artifact = runner.path("infergate-nightly");
    std::fs::create_dir_all(&artifact).unwrap();
    results_gen::write(&artifact, "results.json", &results_gen::run(&g, 12));
    let r = runner.step(
        "run.sh",
        &[
            ("INFERGATE_BIN", bin()),
            ("INPUT_MODE", "alert"),
            ("INPUT_SUITE", "nightly"),
            ("INPUT_BASELINE_DIR", store.to_str().unwrap()),
            ("INPUT_RESULTS_DIR", artifact.to_str().unwrap()),
            ("GITHUB_EVENT_NAME", "schedule"),
        ],
        SHORT,
    );
    assert_eq!(r.code, Some(3), "{}{}", r.stdout, r.stderr);
    assert_contains(&r.stdout, "--candidate");
    assert!(
        r.stderr
            .contains("::error title=infergate alerts::no alerts filed"),
        "{}",
        r.stderr
    );
    let trend = artifact.join("trend.html");
    let html = std::fs::read_to_string(&trend).expect("trend.html written");
    assert!(html.contains("<html"), "{html:.200}");
    assert_eq!(
        runner.outputs()["trend-report-path"],
        trend.display().to_string()
    );
}

// ---------------------------------------------------------------------------------------------
// One exit policy: every surface ends a verdict the same way under every `fail-on`.

/// What the table expects of a verdict under a `fail-on` word, written out by hand (not read
/// from `src/policy.rs`): exit code, `verdict` output, check conclusion.
fn policy_row(verdict: &str, fail_on: &str) -> (i32, &'static str, &'static str) {
    match (verdict, fail_on) {
        ("pass", _) => (0, "pass", "success"),
        ("regression", "never") => (0, "regression", "neutral"),
        ("regression", _) => (1, "regression", "failure"),
        ("insufficient", "insufficient") => (1, "insufficient", "failure"),
        ("insufficient", _) => (0, "insufficient", "neutral"),
        ("no_baseline", _) => (0, "no_baseline", "neutral"),
        ("unmeasured", _) => (3, "error", "failure"),
        other => panic!("no row for {other:?}"),
    }
}

/// One verdict made for real: the small simulated-engine config (the trusted config of mode
/// `report`), a baseline store, and the artifact of a run judged against it (`results.json`
/// and its second boot `results-confirm.json`). Nothing boots: the runs are recorded.
struct Judged {
    _dir: tempfile::TempDir,
    config: PathBuf,
    store: PathBuf,
    artifact: PathBuf,
}

fn judged(verdict: &str) -> Judged {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("infergate.toml");
    std::fs::write(&config, support::SMALL_SIM_CONFIG).unwrap();
    let store = dir.path().join("baselines");
    let calib = support::measured(&config, "20261101T000000Z-calib", 100.0);
    // A quiet five-run history finds a uniform −5% (pass, regression); one run shows no
    // boot-to-boot noise yet (insufficient); an empty store has no baseline for the profile.
    match verdict {
        "insufficient" => support::baseline_around(&store, &calib, 1, |_, _| 1.0),
        "no_baseline" => std::fs::create_dir_all(&store).unwrap(),
        _ => support::baseline_around(&store, &calib, 5, |_, _| 1.0),
    }
    let tps = if verdict == "regression" { 70.0 } else { 100.0 };
    let mut first = support::measured(&config, "20261102T100000Z-pr", tps);
    if verdict == "unmeasured" {
        // Two of the three cells errored: below the coverage the gate needs to decide.
        for cell in first.cells.iter_mut().skip(1) {
            *cell = infergate::results::CellResult::unmeasured(
                cell.concurrency,
                cell.context_tokens,
                infergate::results::CellStatus::Error,
                "the engine closed every stream",
            );
        }
    }
    let mut second = support::measured(&config, "20261102T100500Z-pr2", tps);
    second.cells.clone_from(&first.cells);
    second
        .labels
        .insert("confirms".into(), first.run_id.clone());
    let artifact = dir.path().join("artifact");
    std::fs::create_dir_all(&artifact).unwrap();
    for (name, run) in [("results.json", &first), ("results-confirm.json", &second)] {
        std::fs::write(
            artifact.join(name),
            serde_json::to_string_pretty(run).unwrap(),
        )
        .unwrap();
    }
    Judged {
        _dir: dir,
        config,
        store,
        artifact,
    }
}

/// `key=value` lines of a `--github-output` file.
fn output_lines(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_surface_ends_every_verdict_by_the_one_policy() {
    let mut table = vec![
        "| surface | verdict | fail-on | exit | verdict output | conclusion |".to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    let mut wrong = Vec::new();
    // `None`: the surface has no such output (compare writes no step outputs), shown as `—`
    // and not compared.
    let mut check = |surface: &str,
                     verdict: &str,
                     fail_on: &str,
                     got: (Option<i32>, Option<String>, Option<String>),
                     log: &str| {
        let (exit, word, conclusion) = policy_row(verdict, fail_on);
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
        table.push(format!(
            "| {surface} | {verdict} | {fail_on} | {} | {} | {} |",
            got.0.map_or("-".into(), |c| c.to_string()),
            shown(&got.1),
            shown(&got.2)
        ));
        let agrees = |v: &Option<String>, want: &str| v.as_deref().is_none_or(|v| v == want);
        if got.0 != Some(exit) || !agrees(&got.1, word) || !agrees(&got.2, conclusion) {
            wrong.push(format!(
                "{surface} {verdict} --fail-on {fail_on}: got {got:?}, want ({exit}, {word}, {conclusion})\n{log}"
            ));
        }
    };
    for verdict in [
        "pass",
        "regression",
        "insufficient",
        "no_baseline",
        "unmeasured",
    ] {
        let j = judged(verdict);
        for fail_on in ["regression", "insufficient", "never"] {
            let work = tempfile::tempdir().unwrap();
            // compare: exit code, and the verdict and fail_on it records.
            let shard = work.path().join("shards/infergate-shard-cpu");
            std::fs::create_dir_all(&shard).unwrap();
            std::fs::copy(j.artifact.join("results.json"), shard.join("results.json")).unwrap();
            let out = Command::new(bin())
                .args(["compare", "--format", "json", "--fail-on", fail_on])
                .arg("--baseline-dir")
                .arg(&j.store)
                .arg("--candidate")
                .arg(j.artifact.join("results.json"))
                .arg("--confirmation")
                .arg(j.artifact.join("results-confirm.json"))
                .arg("--out")
                .arg(shard.join("verdict.json"))
                .env_remove("GITHUB_ACTIONS")
                .output()
                .unwrap();
            let written: Value = std::fs::read(shard.join("verdict.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null);
            assert_eq!(
                written["fail_on"],
                fail_on,
                "compare records the fail-on it decided under: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let gate = written["gate"].as_str().unwrap_or("-").to_string();
            assert_eq!(gate, verdict, "the case makes its verdict: {written}");
            // compare writes no step outputs: its exit code is what the table checks.
            check(
                "compare",
                verdict,
                fail_on,
                (out.status.code(), None, None),
                &String::from_utf8_lossy(&out.stderr),
            );

            // merge of the shard compare wrote.
            let outputs = work.path().join("merge-outputs");
            let out = Command::new(bin())
                .args(["merge", "--format", "text", "--fail-on", fail_on])
                .arg("--shard")
                .arg(&shard)
                .arg("--github-output")
                .arg(&outputs)
                .output()
                .unwrap();
            let o = output_lines(&outputs);
            check(
                "merge",
                verdict,
                fail_on,
                (
                    out.status.code(),
                    Some(o.get("verdict").cloned().unwrap_or_default()),
                    Some(o.get("conclusion").cloned().unwrap_or_default()),
                ),
                &String::from_utf8_lossy(&out.stdout),
            );

            // merge.sh: the action's mode merge over the same shard.
            let runner = Runner::new();
            let shards = work.path().join("shards");
            let r = runner.merge_step(&shards, fail_on);
            let o = runner.outputs();
            check(
                "merge.sh",
                verdict,
                fail_on,
                (
                    r.code,
                    Some(o.get("verdict").cloned().unwrap_or_default()),
                    Some(o.get("conclusion").cloned().unwrap_or_default()),
                ),
                &format!("{}{}", r.stdout, r.stderr),
            );

            // run.sh mode report: `infergate report --trusted-config` recomputes the verdict
            // from the artifact (not on a pull request: there, no baseline fails closed).
            let runner = Runner::new();
            let r = runner.step(
                "run.sh",
                &[
                    ("INFERGATE_BIN", bin()),
                    ("INPUT_MODE", "report"),
                    ("INPUT_FAIL_ON", fail_on),
                    ("INPUT_CONFIG", j.config.to_str().unwrap()),
                    ("INPUT_BASELINE_DIR", j.store.to_str().unwrap()),
                    ("INPUT_RESULTS_DIR", j.artifact.to_str().unwrap()),
                    ("GITHUB_EVENT_NAME", "push"),
                ],
                SHORT,
            );
            let o = runner.outputs();
            check(
                "report (run.sh)",
                verdict,
                fail_on,
                (
                    r.code,
                    Some(o.get("verdict").cloned().unwrap_or_default()),
                    Some(o.get("conclusion").cloned().unwrap_or_default()),
                ),
                &format!("{}{}", r.stdout, r.stderr),
            );
        }
    }
    println!("{}", table.join("\n"));
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// Mode `gate` (`infergate run`, booting the simulated engine for real) against a store around
/// a calibration run of this machine, with an engine 1.5× slower: a regression confirmed on a
/// second boot. The input `fail-on` decides the step and the check; with the input empty, the
/// config's `fail_on` does; `verdict.json` records the one used.
#[test]
fn gate_mode_ends_a_regression_by_the_input_else_by_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let calib_config = dir.path().join("calib.toml");
    std::fs::write(&calib_config, support::SMALL_SIM_CONFIG).unwrap();
    let (code, err) = support::gate(
        &calib_config,
        &dir.path().join("calib"),
        &dir.path().join("no-store"),
        &["--update-baseline"],
    );
    assert_eq!(code, Some(0), "{err}");
    let calib = support::read_results(&dir.path().join("calib/results.json"));
    let store = dir.path().join("baselines");
    support::baseline_around(&store, &calib, 5, |_, _| 1.0);
    let slow = support::SMALL_SIM_CONFIG.replacen(
        "\"--seed\", \"5\"]",
        "\"--seed\", \"5\", \"--slowdown\", \"1.5\"]",
        1,
    );
    for (input, config_fail_on, want) in [
        ("never", "", (0, "regression", "neutral", "never")),
        (
            "",
            "[thresholds]\nfail_on = \"insufficient\"\n",
            (1, "regression", "failure", "insufficient"),
        ),
    ] {
        let config = dir.path().join(format!("slow-{input}.toml"));
        std::fs::write(&config, format!("{slow}\n{config_fail_on}")).unwrap();
        let runner = Runner::new();
        let results = runner.path("results");
        let r = runner.step(
            "run.sh",
            &[
                ("INFERGATE_BIN", bin()),
                ("INPUT_MODE", "gate"),
                ("INPUT_CONFIG", config.to_str().unwrap()),
                ("INPUT_BASELINE_DIR", store.to_str().unwrap()),
                ("INPUT_FAIL_ON", input),
                ("INPUT_RESULTS_DIR", results.to_str().unwrap()),
                ("GITHUB_EVENT_NAME", "push"),
            ],
            Duration::from_secs(240),
        );
        let o = runner.outputs();
        let log = format!("{}{}", r.stdout, r.stderr);
        assert_eq!(r.code, Some(want.0), "fail-on input {input:?}\n{log}");
        assert_eq!(o["verdict"], want.1, "{log}");
        assert_eq!(o["conclusion"], want.2, "{log}");
        let verdict: Value =
            serde_json::from_slice(&std::fs::read(results.join("verdict.json")).unwrap()).unwrap();
        assert_eq!(verdict["fail_on"], want.3, "{verdict}");
        assert!(
            verdict["confirmation"].is_object(),
            "decided over two boots"
        );
        println!(
            "| run (run.sh gate) | regression | {} | {} | {} | {} |",
            if input.is_empty() {
                "(config) insufficient"
            } else {
                input
            },
            want.0,
            want.1,
            want.2
        );
    }

    // A verdict that cannot be written (here a directory in its place; a full disk in the
    // field): the gate fails (exit 3), and its shard is never read as one without a baseline.
    let out = dir.path().join("unwritable");
    std::fs::create_dir_all(out.join("verdict.json/held")).unwrap();
    let (code, err) = support::gate(&dir.path().join("slow-never.toml"), &out, &store, &[]);
    assert_eq!(code, Some(3), "{err}");
    assert_contains(&err, "verdict.json");
    let left = support::read_results(&out.join("results.json"));
    assert_eq!(left.status, infergate::results::RunStatus::InProgress);
    let merged = Command::new(bin())
        .args(["merge", "--format", "text", "--shard"])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(3), "{text}");
    assert_starts_with(&text, "merged verdict: error");
}
