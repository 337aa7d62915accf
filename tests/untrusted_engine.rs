//! The engine under test as an attacker, end to end (the real binary, small shell engines and
//! the simulated engine, a local mock of the GitHub REST API):
//!
//! - an engine that prints its environment and echoes a token from its command line: no byte
//!   the gate writes, prints or posts holds any secret, and the engine never saw the gate's;
//! - workflow commands, mentions and links in a model id and in engine output: no workflow
//!   command is emitted, nothing posted mentions or links;
//! - a model id with a command substitution in a shell-line command does not run it;
//! - `setsid`, double-forked and TERM-ignoring children, with the gate finishing normally and
//!   with the gate SIGKILLed mid-cell: no process of the engine is left (found by a marker
//!   variable in the engine's environment, which survives `setsid` and re-parenting).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_ends_with, assert_lacks};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::actions::{PrStep, accepting_github};
use support::{eventually, gate_command, marked, read_until, spawn_gate};
use wiremock::Request;
const GITHUB_TOKEN: &str = "ghs_GATE_token_must_stay_secret_1";
const INFERGATE_TOKEN: &str = "ghp_INFERGATE_token_secret_2";
const RUNTIME_TOKEN: &str = "eyJ0eXAiOiJKV1Q.runtime.secret3";
const ID_TOKEN: &str = "id-request-token-secret-4";
const CMDLINE_SECRET: &str = "sk-cmdline-SECRET-4711";

/// Everything one gate run in Actions wrote, printed and posted.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    requests: Vec<Request>,
    /// (path, bytes) of every file the gate wrote: the output directory, the job summary and
    /// the step outputs.
    files: Vec<(PathBuf, Vec<u8>)>,
}

impl Run {
    /// Every byte the gate produced, except request headers (the `Authorization` header holds
    /// the gate's token by design).
    fn all_text(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("stdout".to_string(), self.stdout.clone()),
            ("stderr".to_string(), self.stderr.clone()),
        ];
        for r in &self.requests {
            out.push((
                format!("{} {}", r.method, r.url),
                format!("{}\n{}", r.url, String::from_utf8_lossy(&r.body)),
            ));
        }
        for (p, bytes) in &self.files {
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(bytes).into_owned(),
            ));
        }
        out
    }

    /// The Markdown the gate posted or wrote for people: the comment body, the check run's
    /// summary and text, and the job summary. (A check run's name and title are plain text.)
    fn markdown(&self) -> Vec<String> {
        fn strings(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
                Value::Object(m) => {
                    for (k, x) in m {
                        match (k.as_str(), x) {
                            ("body" | "summary" | "text", Value::String(s)) => out.push(s.clone()),
                            _ => strings(x, out),
                        }
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        for r in &self.requests {
            if let Ok(v) = serde_json::from_slice::<Value>(&r.body) {
                strings(&v, &mut out);
            }
        }
        for (p, bytes) in &self.files {
            if p.extension().is_some_and(|e| e == "md") {
                out.push(String::from_utf8_lossy(bytes).into_owned());
            }
        }
        out
    }
}

fn files_under(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((p, bytes));
        }
    }
}

/// Runs `infergate run --config gate.toml --suite pr` in `dir` as a step of a pull-request job
/// with the gate's tokens in its environment, against a mock GitHub that accepts everything.
async fn run_in_actions(dir: &Path, extra_env: &[(&str, &str)]) -> Run {
    let server = accepting_github().await;
    let gh = dir.join("gh");
    let step = PrStep::write(&gh, "feedface");
    let step_env = step.env(&server.uri(), GITHUB_TOKEN);
    let out_dir = dir.join("results");

    let dir_owned = dir.to_path_buf();
    let extra: Vec<(String, String)> = extra_env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let out_env = out_dir.clone();
    // An existing, empty store ("no baseline yet").
    std::fs::create_dir_all(dir_owned.join("baselines")).unwrap();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_infergate"))
            .current_dir(&dir_owned)
            .args(["run", "--config", "gate.toml", "--suite", "pr", "--out"])
            .arg(&out_env)
            .arg("--baseline-dir")
            .arg(dir_owned.join("baselines"))
            .envs(step_env)
            .env("INFERGATE_GITHUB_TOKEN", INFERGATE_TOKEN)
            .env("ACTIONS_RUNTIME_TOKEN", RUNTIME_TOKEN)
            .env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", ID_TOKEN)
            .envs(extra)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let mut files = Vec::new();
    files_under(&out_dir, &mut files);
    files_under(&gh, &mut files);
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        requests: server.received_requests().await.unwrap_or_default(),
        files,
    }
}

const SUITE: &str = r#"
[profile]
hardware = "sim"

[suites.pr]
concurrency = [1]
contexts = ["0"]
duration = "1s"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 64
sub_windows = 4
"#;

#[tokio::test(flavor = "multi_thread")]
async fn no_secret_reaches_any_byte_the_gate_writes_prints_or_posts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("env-printer-{}", std::process::id());
    // The engine prints its whole environment and echoes the key from its command line, on
    // stdout and stderr, then fails: its output goes into the log tail of every report.
    std::fs::write(
        dir.path().join("gate.toml"),
        format!(
            r#"model = "sim-test"

[engine]
command = ["sh", "-c", "env; echo \"my key: $2\"; echo \"bearer $2\" >&2; exit 1", "engine", "--api-key", "{CMDLINE_SECRET}"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "1s"
env_allow = ["INFERGATE_TEST_MARKER"]
{SUITE}"#
        ),
    )
    .unwrap();
    let run = run_in_actions(dir.path(), &[("INFERGATE_TEST_MARKER", &marker)]).await;
    assert_eq!(run.code, Some(3), "{}\n{}", run.stdout, run.stderr);

    // The engine really printed its environment and the key (so the scan is not vacuous) …
    let log = run
        .files
        .iter()
        .find(|(p, _)| p.ends_with("engine.log"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .expect("engine.log written");
    // (the allow-listed variable reached it; its value, the runner's, is masked in the log)
    assert_contains(&log, "INFERGATE_TEST_MARKER=[REDACTED]");
    assert_lacks(&log, &marker);
    assert_contains(&log, "my key: [REDACTED]");
    assert_contains(&log, "bearer [REDACTED]");
    // … but never had the gate's credentials, nor the output directory's path.
    for name in [
        "GITHUB_TOKEN=",
        "INFERGATE_GITHUB_TOKEN=",
        "ACTIONS_RUNTIME_TOKEN=",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN=",
        "GITHUB_STEP_SUMMARY=",
        "GITHUB_OUTPUT=",
    ] {
        assert!(!log.contains(name), "the engine got {name}: {log}");
    }
    assert!(
        !log.contains(&*dir.path().join("results").to_string_lossy()),
        "the engine learnt the output directory: {log}"
    );

    // The redacted tail was reported (check run), so redaction is what kept the key out.
    assert!(
        run.requests
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains("REDACTED")),
        "the log tail was not posted"
    );
    let results: Value = serde_json::from_slice(
        &run.files
            .iter()
            .find(|(p, _)| p.ends_with("results.json"))
            .expect("results.json")
            .1,
    )
    .unwrap();
    let command = results["engine"]["command"].as_str().unwrap_or_default();
    assert_contains(command, "--api-key '[REDACTED]'");

    for (sink, text) in run.all_text() {
        for secret in [
            GITHUB_TOKEN,
            INFERGATE_TOKEN,
            RUNTIME_TOKEN,
            ID_TOKEN,
            CMDLINE_SECRET,
        ] {
            assert!(!text.contains(secret), "{secret} in {sink}:\n{text}");
        }
    }
}

/// The command part (name and properties) of a line the runner would take as a workflow
/// command: `::name props::data` after leading whitespace.
fn command_part(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("::")?;
    Some(rest.split("::").next().unwrap_or(rest))
}

#[tokio::test(flavor = "multi_thread")]
async fn workflow_commands_mentions_and_links_from_the_engine_stay_inert() {
    let dir = tempfile::tempdir().unwrap();
    // In the model id (config text, and what the engine echoes) and in the engine's output.
    std::fs::write(
        dir.path().join("gate.toml"),
        format!(
            r#"model = "m\n::error::INJECTED-A @octocat https://evil.example www.evil.example"

[engine]
command = ["sh", "-c", "printf '::warning title=INJECTED-B::x\\n  ::add-mask::INJECTED-C\\r::error::INJECTED-D\\n##[error]INJECTED-E @octocat\\n'; echo \"model: $1\"; exit 1", "engine", "{{model}}"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "1s"
{SUITE}"#
        ),
    )
    .unwrap();
    let run = run_in_actions(dir.path(), &[]).await;
    assert_eq!(run.code, Some(3), "{}\n{}", run.stdout, run.stderr);

    let log = run
        .files
        .iter()
        .find(|(p, _)| p.ends_with("engine.log"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .expect("engine.log");
    assert!(log.contains("INJECTED-B"), "the engine ran: {log}");

    // Console: the runner splits lines on \n and \r.
    let mut commands = 0;
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        for line in text.split(['\n', '\r']) {
            assert!(!line.contains("##["), "{stream}: legacy command {line:?}");
            if let Some(cmd) = command_part(line) {
                commands += 1;
                assert!(
                    !cmd.contains("INJECTED"),
                    "{stream}: injected workflow command {line:?}"
                );
            }
        }
    }
    assert!(commands > 0, "the gate's own ::error was printed");
    assert!(
        run.stderr.contains("INJECTED-D") || run.stdout.contains("INJECTED-D"),
        "the engine text was shown (inert): {}",
        run.stderr
    );

    // Markdown: nothing mentions or links.
    let md = run.markdown();
    let all = md.join("\n");
    assert!(all.contains("octocat"), "the text was posted: {all}");
    for text in &md {
        // Code spans and blocks render literally, HTML comments not at all (no mentions, no
        // links there): check the rest.
        let mut uncommented = text.clone();
        while let Some(start) = uncommented.find("<!--") {
            let end = uncommented[start..]
                .find("-->")
                .map_or(uncommented.len(), |e| start + e + 3);
            uncommented.replace_range(start..end, " ");
        }
        let prose: String = uncommented
            .replace("\\`", "")
            .split('`')
            .step_by(2)
            .collect::<Vec<_>>()
            .join(" ");
        let lower = prose.to_ascii_lowercase();
        let text = &prose;
        assert!(!text.contains("@octocat"), "live mention: {text}");
        assert!(!lower.contains("https://evil"), "live link: {text}");
        assert!(!lower.contains("www.evil"), "live autolink: {text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_substitution_in_the_model_id_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gate.toml"),
        format!(
            r#"model = "m$(touch PWNED)`touch PWNED2`"

[engine]
command = "echo serving {{model}}; exit 1"
workdir = "."
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "1s"
{SUITE}"#
        ),
    )
    .unwrap();
    let run = run_in_actions(dir.path(), &[]).await;
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    let log = run
        .files
        .iter()
        .find(|(p, _)| p.ends_with("engine.log"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .expect("engine.log");
    assert!(
        log.contains("serving m$(touch PWNED)`touch PWNED2`"),
        "passed as one literal word: {log}"
    );
    assert!(!dir.path().join("PWNED").exists());
    assert!(!dir.path().join("PWNED2").exists());
}

/// A simulated engine that first starts a `setsid` child, a double-forked one and a
/// TERM-ignoring one (with a child of its own), all long-lived.
fn escaping_config(dir: &Path, marker: &str, duration: &str) -> PathBuf {
    let text = format!(
        r#"model = "sim-test"

[engine]
command = "setsid sleep 300 & (sh -c 'sleep 301 &' &); sh -c \"trap '' TERM; sleep 302\" & exec {{infergate}} sim --profile test --port {{port}} --time-scale 4"
name = "infergate-sim"
readiness_timeout = "30s"
stop_grace = "1s"
env = {{ CONTAIN_MARKER = "{marker}" }}

[profile]
hardware = "sim"

[suites.pr]
concurrency = [1]
contexts = ["0"]
duration = "{duration}"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 64
sub_windows = 4
"#
    );
    let p = dir.join("gate.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn escaping_children_are_gone_after_a_normal_run() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("normal-{}", std::process::id());
    let config = escaping_config(dir.path(), &marker, "1s");
    let out = dir.path().join("out");
    std::fs::create_dir_all(dir.path().join("baselines")).unwrap();
    let (code, stderr) = support::gate(&config, &out, &dir.path().join("baselines"), &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        eventually(Duration::from_secs(30), || marked(&marker).is_empty()),
        "left behind: {:?}",
        marked(&marker)
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let how = results["engine"]["containment"]
        .as_str()
        .unwrap_or_default();
    assert!(
        how.starts_with("subreaper; ") || how.starts_with("cgroup; "),
        "{results}"
    );
}

#[test]
fn a_sigkilled_gate_leaves_no_engine_process_nor_its_private_directory() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("sigkill-{}", std::process::id());
    let config = escaping_config(dir.path(), &marker, "30s");
    std::fs::create_dir_all(dir.path().join("baselines")).unwrap();
    // The gate's TMPDIR, where it makes the engine's private working directory; reachable by
    // the engine's user under a root gate (the test's own directory is 0700).
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    for d in [dir.path(), tmp.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let private_dirs = || -> Vec<String> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("infergate-engine-"))
            .collect()
    };
    let mut gate = gate_command(
        &config,
        &dir.path().join("out"),
        &dir.path().join("baselines"),
    )
    .env("TMPDIR", &tmp)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut seen = Vec::new();
    read_until(
        &mut BufReader::new(gate.stderr.take().unwrap()).lines(),
        "ready C=1",
        &mut seen,
    );
    // The sim and the four escapees (setsid, double-forked, TERM-ignoring sh and its sleep).
    let started = eventually(Duration::from_secs(30), || marked(&marker).len() >= 5);
    let before = marked(&marker);
    gate.kill().unwrap();
    let _ = gate.wait();
    assert!(started, "tree not seen: {before:?}\n{}", seen.join("\n"));
    assert!(
        eventually(Duration::from_secs(30), || marked(&marker).is_empty()),
        "left behind after SIGKILL of the gate: {:?}",
        marked(&marker)
    );
    // The supervisor removes it once the tree is gone: the killed gate could not.
    assert!(
        eventually(Duration::from_secs(30), || private_dirs().is_empty()),
        "left behind after SIGKILL of the gate: {:?}",
        private_dirs()
    );
}

/// A small local gate config around `command` (a shell line ending in the simulated engine).
fn engine_config(dir: &Path, command: &str, extra_engine: &str, stop_grace: &str) -> PathBuf {
    let text = format!(
        r#"model = "sim-test"

[engine]
command = {command:?}
name = "infergate-sim"
readiness_timeout = "30s"
stop_grace = "{stop_grace}"
{extra_engine}
{SUITE}"#
    );
    let p = dir.join("gate.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Door 6: `env_allow` cannot open the gate's environment wholesale nor name a credential
/// (a config error naming the file and the field); a credential-looking variable is never
/// inherited, even under a prefix the engine may have; the values `env_allow` lets through
/// are masked in the engine log.
#[test]
fn env_allow_refuses_wildcards_and_credentials_and_masks_what_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    let sim = "exec {infergate} sim --profile test --port {port} --time-scale 4";
    for (allow, word) in [
        ("[\"*\"]", "whole environment"),
        ("[\"GH_TOKEN\"]", "names a credential"),
        ("[\"DEPLOY_CRED\"]", "names a credential"),
        ("[\"AWS_SECRET_ACCESS_KEY\"]", "names a credential"),
        ("[\"SIGNING_KEY\"]", "names a credential"),
    ] {
        let config = engine_config(dir.path(), sim, &format!("env_allow = {allow}"), "1s");
        let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
            .args(["run", "--config"])
            .arg(&config)
            .env_remove("GITHUB_ACTIONS")
            .output()
            .unwrap();
        let err = support::flat(&String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{allow}: {err}");
        assert!(
            err.contains("gate.toml") && err.contains("env_allow") && err.contains(word),
            "{allow}: {err}"
        );
    }
    let config = engine_config(
        dir.path(),
        &format!("env | sort; {sim}"),
        "env_allow = [\"DEPLOY_*\"]",
        "1s",
    );
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--baseline-dir")
        .arg(dir.path().join("store"))
        .env_remove("GITHUB_ACTIONS")
        .env("HF_TOKEN", "hf_inherited_secret_1")
        .env("NCCL_PASSWORD", "nccl-inherited-pw-2")
        .env("DEPLOY_CRED", "deploy-credential-3")
        .env("DEPLOY_REGION", "eu-central-region-4")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let log = std::fs::read_to_string(dir.path().join("out/engine.log")).unwrap();
    for name in ["HF_TOKEN=", "NCCL_PASSWORD=", "DEPLOY_CRED="] {
        assert!(!log.contains(name), "{name} reached the engine:\n{log}");
    }
    assert_contains(&log, "DEPLOY_REGION=[REDACTED]");
    for (path, bytes) in {
        let mut v = Vec::new();
        files_under(&dir.path().join("out"), &mut v);
        v
    } {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("eu-central-region-4"), "{path:?}");
    }
}

/// Door 7: when the gate is SIGKILLed while it stops the engine (after a SIGINT, in the
/// engine's `stop_grace`), the supervisor kills the tree at once instead of sitting out the
/// grace.
#[test]
fn a_gate_killed_during_teardown_leaves_no_engine_process_waiting_for_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("grace-{}", std::process::id());
    let config = engine_config(
        dir.path(),
        "sh -c \"trap '' TERM; sleep 301\" & exec {infergate} sim --profile test --port {port} --time-scale 4",
        &format!("env = {{ CONTAIN_MARKER = \"{marker}\" }}"),
        "60s",
    );
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("duration = \"1s\"", "duration = \"30s\"");
    std::fs::write(&config, text).unwrap();
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    let mut gate = spawn_gate(&config, &dir.path().join("out"), &dir.path().join("store"));
    let mut lines = BufReader::new(gate.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    read_until(&mut lines, "ready C=1", &mut seen);
    assert!(
        eventually(Duration::from_secs(30), || marked(&marker).len() >= 3),
        "tree not seen: {:?}\n{}",
        marked(&marker),
        seen.join("\n")
    );
    // SIGINT: the gate cancels and asks the supervisor to stop the tree with a 60 s grace,
    // which the TERM-ignoring child makes it use.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(gate.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    read_until(&mut lines, "SIGINT received", &mut seen);
    std::thread::sleep(Duration::from_secs(1));
    gate.kill().unwrap();
    let _ = gate.wait();
    let killed = std::time::Instant::now();
    assert!(
        eventually(Duration::from_secs(15), || marked(&marker).is_empty()),
        "still there {:?} s after the gate's SIGKILL: {:?}",
        killed.elapsed().as_secs(),
        marked(&marker)
    );
}

/// What the door-5 probe engine saw and left, from one gate run.
struct Door5 {
    /// The `engine reach …` line of the engine log.
    reach: String,
    /// `engine.containment` of the results.
    containment: String,
}

/// Door 5: runs the gate (as `uid`, else as this process's user) in `dir` with `--out out
/// --baseline-dir store` on a shell engine that reads the gate's command line through
/// `/proc/<gate>/cmdline` (found via its supervisor's parent), tries the gate's `environ` and
/// `cwd`, lists the output directory by its absolute path (a path it guessed) and plants
/// files and dangling symlinks by every path it found or guessed, into the output directory
/// and the store. Asserts what holds on every host: the command line is scrubbed, the engine
/// works in a private directory, removed after it, and nothing it planted is there.
fn door5(dir: &Path, uid: Option<u32>) -> Door5 {
    let probe = r#"gate=$(awk '{print $4}' /proc/$PPID/stat); out=$(tr '\0' '\n' < /proc/$gate/cmdline | grep -A1 -x -e --out | tail -n 1); echo "engine saw --out [$out] cwd [$(pwd)] mode [$(stat -c %a .)]"; if cat /proc/$gate/environ >/dev/null 2>&1; then e=read; else e=denied; fi; if ls /proc/$gate/cwd/ >/dev/null 2>&1; then c=read; else c=denied; fi; echo "engine reach environ [$e] gate-cwd [$c] out-listing [$(ls -A "$OUT_GUESS" 2>&1 | tr '\n' ' ')] uid [$(id -u)]"; touch "$out/planted-by-cmdline" 2>/dev/null; ln -s /nonexistent "$out/results-confirm.json" 2>/dev/null; touch out/planted-by-cwd 2>/dev/null; ln -s /nonexistent out/engine-confirm.log 2>/dev/null; touch "$OUT_GUESS/planted-by-guess" 2>/dev/null; ln -s /nonexistent "$OUT_GUESS/verdict.json" 2>/dev/null; touch "$STORE_GUESS/planted-in-store" 2>/dev/null; exec {infergate} sim --profile test --port {port} --time-scale 4"#;
    let real = dir.canonicalize().unwrap();
    let env = format!(
        "env = {{ OUT_GUESS = {:?}, STORE_GUESS = {:?} }}",
        real.join("out").display().to_string(),
        real.join("store").display().to_string()
    );
    engine_config(dir, probe, &env, "1s");
    std::fs::create_dir_all(dir.join("store")).unwrap();
    let mut gate = gate_command(Path::new("gate.toml"), Path::new("out"), Path::new("store"));
    gate.current_dir(dir);
    // A gate started as `uid` runs a binary that user can reach: the build's own may lie in a
    // checkout of mode 0700 (a clone under /root). The same file, hard-linked (else copied)
    // into a directory open to everyone.
    let mut _bin_dir = None;
    if let Some(uid) = uid {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        for p in [dir.to_path_buf(), dir.join("gate.toml"), dir.join("store")] {
            std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
        }
        let bin_dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = bin_dir.path().join("infergate");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_infergate"), &bin).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_infergate"), &bin).unwrap();
        }
        gate = std::process::Command::new(&bin);
        gate.args([
            "run",
            "--config",
            "gate.toml",
            "--out",
            "out",
            "--baseline-dir",
            "store",
        ])
        .env_remove("GITHUB_ACTIONS")
        .current_dir(dir)
        .uid(uid)
        .gid(uid)
        .env("HOME", dir);
        _bin_dir = Some(bin_dir);
    }
    let out = gate.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let log = std::fs::read_to_string(dir.join("out/engine.log")).unwrap();
    let line = |start: &str| {
        log.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no `{start}` in {log}"))
            .to_string()
    };
    let (saw, reach) = (line("engine saw --out"), line("engine reach"));
    assert!(
        saw.contains("--out [***]"),
        "the engine read the path: {saw}"
    );
    assert!(saw.ends_with(" mode [700]"), "a private directory: {saw}");
    let cwd = saw
        .split("cwd [")
        .nth(1)
        .unwrap()
        .trim_end_matches(" mode [700]")
        .trim_end_matches(']');
    assert!(
        !Path::new(cwd).starts_with(&real),
        "the engine worked in the gate's directory: {saw}"
    );
    assert!(
        !Path::new(cwd).exists(),
        "its private directory is removed: {cwd}"
    );
    for planted in [
        "out/planted-by-cmdline",
        "out/planted-by-cwd",
        "out/results-confirm.json",
        "out/engine-confirm.log",
        "out/planted-by-guess",
        "out/verdict.json",
        "store/planted-in-store",
    ] {
        assert!(
            std::fs::symlink_metadata(dir.join(planted)).is_err(),
            "{planted} planted by the engine ({reach})"
        );
    }
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap())
            .unwrap();
    let containment = results["engine"]["containment"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    Door5 { reach, containment }
}

/// Whether this test process runs as root.
fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Door 5: the engine neither finds the output directory through `/proc/<gate>/cmdline` nor
/// writes into it through its working directory; it works in a private directory of its own.
/// Where the host allows (root here; a user namespace otherwise), it also cannot read the
/// gate's `/proc` entries nor see or write the output directory and the store at their paths.
#[test]
fn the_engine_cannot_find_or_write_the_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let d = door5(dir.path(), None);
    let held_uid = d.containment.contains("; uid 65534 gid 65534;");
    let held_mounts = d.containment.contains("namespace cover");
    if root() {
        assert!(held_uid, "{}", d.containment);
        assert!(
            d.containment
                .ends_with("; mount namespace covers 2 directories"),
            "{}",
            d.containment
        );
        assert_contains(&d.reach, "uid [65534]");
    }
    if !held_uid && !held_mounts {
        println!(
            "skipped the uid and mount namespace checks: this host allows neither ({})",
            d.containment
        );
        return;
    }
    assert_contains(&d.reach, "environ [denied] gate-cwd [denied]");
    if held_mounts {
        assert_contains(&d.reach, "out-listing []");
    }
}

/// Door 5 for a gate that is not root: the engine runs as the gate's user in a user and mount
/// namespace of its own, where the output directory and the store are empty and read-only.
/// Run by root as uid 65534 (the route a non-root gate takes; on a non-root host the test
/// above takes it).
#[test]
fn a_gate_that_is_not_root_covers_its_outputs_in_a_user_namespace() {
    if !root() {
        println!(
            "skipped: needs root to start the gate as another user (the test above covers this host's route)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = door5(dir.path(), Some(65534));
    assert_contains(&d.containment, "; user: the gate's (not root); ");
    if !d.containment.contains("namespace cover") {
        println!(
            "skipped the namespace checks: this host refuses user namespaces to uid 65534 ({})",
            d.containment
        );
        return;
    }
    assert!(
        d.containment
            .ends_with("; user and mount namespace cover 2 directories"),
        "{}",
        d.containment
    );
    assert_contains(&d.reach, "uid [65534]");
    assert!(
        d.reach
            .contains("environ [denied] gate-cwd [denied] out-listing []"),
        "{}",
        d.reach
    );
}

/// `[engine] isolation`: under a root gate, an engine whose command names a file only root may
/// read is refused before booting (exit 2) with one message naming isolation, the uid, the file
/// and the fixes; one that opens such a file on its own (no argument names it) fails readiness
/// with a hint naming its uid and the key; with `isolation = "off"` the same engine runs as the
/// gate's user and the results say so.
#[test]
fn isolation_off_runs_the_engine_as_the_gate_user() {
    if !root() {
        println!("skipped: the engine runs as another user only under a root gate");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("weights");
    std::fs::write(&weights, "w").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&weights, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let named = format!(
        "cat {} >/dev/null || exit 1; exec {{infergate}} sim --profile test --port {{port}} --time-scale 4",
        weights.display()
    );
    // The same file, by a path only the shell puts together.
    let hidden = format!(
        "w=weights; cat {}/$w >/dev/null || exit 1; exec {{infergate}} sim --profile test --port {{port}} --time-scale 4",
        dir.path().display()
    );
    let run = |command: &str, extra: &str| {
        engine_config(dir.path(), command, extra, "1s");
        gate_command(Path::new("gate.toml"), Path::new("out"), Path::new("store"))
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    let out = run(&named, "");
    let err = support::flat(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the engine runs as uid 65534 gid 65534")
            && err.contains(&format!(
                "cannot read {}, the file its shell line names",
                weights.display()
            ))
            && err.contains(&format!("`chmod o+r {}`", weights.display()))
            && err.contains("isolation = \"off\""),
        "{err}"
    );
    assert_lacks(&err, "starting engine");
    let out = run(&hidden, "");
    let err = support::flat(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("Permission denied")
            && err.contains("it ran as uid 65534")
            && err.contains("[engine] isolation = \"auto\"")
            && err.contains("isolation = \"off\" under [engine]"),
        "{err}"
    );
    let out = run(&named, "isolation = \"off\"");
    let err = support::flat(&String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{err}");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/results.json")).unwrap(),
    )
    .unwrap();
    let how = results["engine"]["containment"]
        .as_str()
        .unwrap_or_default();
    assert_ends_with(
        how,
        "; user: the gate's (isolation off); mount namespace: off (isolation off)",
    );
}

/// Issue 59, door 2: an engine that shares the supervisor's user (here `isolation = "off"`)
/// SIGKILLs its supervisor and leaves a `setsid` daemon behind. The gate is a child subreaper
/// of last resort: the orphaned tree is re-parented to it and killed as it exits, so nothing
/// marked is alive once the gate has exited (a daemon was alive more than 12 s after it).
#[test]
fn an_engine_that_kills_its_supervisor_dies_with_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("orphan-{}", std::process::id());
    let pid_file = dir.path().join("daemon.pid");
    let config = engine_config(
        dir.path(),
        &format!(
            "setsid sh -c 'echo $$ > {}; exec sleep 301' & kill -9 $PPID; exec {{infergate}} sim --profile test --port {{port}} --time-scale 4",
            pid_file.display()
        ),
        &format!("isolation = \"off\"\nenv = {{ CONTAIN_MARKER = \"{marker}\" }}"),
        "1s",
    );
    std::fs::create_dir_all(dir.path().join("store")).unwrap();
    let out = gate_command(&config, &dir.path().join("out"), &dir.path().join("store"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(pid_file.is_file(), "the daemon started: {err}");
    // Killed and reaped before the gate exited: no wait here.
    assert_eq!(marked(&marker), Vec::<i32>::new(), "{err}");
}
