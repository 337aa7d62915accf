//! A cancelled Actions step: the runner signals the step's shell (`scripts/action/run.sh`), not
//! infergate. The script forwards the signal to the gate and waits for it, so the gate stops
//! the engine, writes its (cancelled) results and the step ends with the gate's exit code.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigHandler, Signal, kill, signal};
use nix::unistd::Pid;

/// Processes whose environment holds `CANCEL_MARKER=marker`.
fn marked(marker: &str) -> usize {
    let needle = format!("CANCEL_MARKER={marker}");
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read(e.path().join("environ"))
                        .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()))
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn sigint_to_the_step_shell_reaches_the_gate_which_writes_cancelled_results() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("cancel-{}", std::process::id());
    std::fs::write(
        dir.path().join("gate.toml"),
        format!(
            r#"model = "sim-test"

[engine]
command = ["{{infergate}}", "sim", "--profile", "test", "--port", "{{port}}", "--time-scale", "4"]
name = "infergate-sim"
readiness_timeout = "30s"
stop_grace = "2s"
env = {{ CANCEL_MARKER = "{marker}" }}

[profile]
hardware = "sim"

[suites.pr]
concurrency = [1, 2]
contexts = ["0"]
duration = "30s"
warmup = "0.25s"
ready_stable = "0.4s"
"#
        ),
    )
    .unwrap();
    let outputs = dir.path().join("outputs.txt");
    std::fs::write(&outputs, "").unwrap();
    std::fs::create_dir_all(dir.path().join("baselines")).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/action/run.sh");
    let mut step = Command::new("bash");
    // The runner starts the step's shell with SIGINT at its default. A test run from a
    // background job inherits it ignored, and a shell cannot trap a signal ignored on entry.
    // SAFETY: between fork and exec only `signal`, which is async-signal-safe, is called.
    unsafe {
        step.pre_exec(|| {
            signal(Signal::SIGINT, SigHandler::SigDfl)
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    let mut step = step
        .arg(&script)
        .current_dir(dir.path())
        .env("INFERGATE_BIN", env!("CARGO_BIN_EXE_infergate"))
        .env("INPUT_CONFIG", "gate.toml")
        .env("INPUT_MODE", "gate")
        .env("INPUT_RESULTS_DIR", "out")
        .env("INPUT_BASELINE_DIR", "baselines")
        .env("GITHUB_OUTPUT", &outputs)
        .env_remove("GITHUB_ACTIONS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The runner keeps reading the step's output to the end: so does this test.
    let mut lines = BufReader::new(step.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let ready = line.contains("ready C=1");
        seen.push(line);
        if ready {
            break;
        }
    }
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    assert!(
        marked(&marker) > 0,
        "engine not running:\n{}",
        seen.join("\n")
    );
    kill(Pid::from_raw(step.id() as i32), Signal::SIGINT).unwrap();
    let status = step.wait().unwrap();
    let rest = drain.join().unwrap();
    assert_eq!(
        status.code(),
        Some(3),
        "{}\n{}",
        seen.join("\n"),
        rest.join("\n")
    );
    assert!(
        rest.iter().any(|l| l.contains("SIGINT received")),
        "{}",
        rest.join("\n")
    );
    let results = std::fs::read_to_string(dir.path().join("out/results.json"))
        .expect("results written after the cancel");
    let v: serde_json::Value = serde_json::from_str(&results).unwrap();
    assert_eq!(v["status"], "cancelled", "{v}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while marked(&marker) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(marked(&marker), 0, "engine processes left after the cancel");
}
