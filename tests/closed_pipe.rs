//! A reader that goes away (`infergate run 2>&1 | head`) must not kill the gate: before, the
//! first `println!` after the pipe closed panicked, the binary exited 101 in the middle of the
//! run and the exit code the workflow branches on was lost. Here stdout and stderr are a pipe
//! whose read end is closed before the binary writes a byte.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod results_gen;
mod support;

use std::path::Path;
use std::process::{Command, ExitStatus};

use results_gen::{Gen, write_many};
use support::{SMALL_SIM_CONFIG, engine_pgid, group_gone, read_results};

/// Runs the binary with stdout and stderr on a pipe nobody reads (read end closed).
fn with_closed_pipe(args: &[&std::ffi::OsStr]) -> ExitStatus {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(args)
        .env_remove("GITHUB_ACTIONS")
        .stdin(std::process::Stdio::null())
        .stdout(writer.try_clone().expect("dup pipe"))
        .stderr(writer)
        .status()
        .expect("run infergate")
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn compare_keeps_its_regression_exit_code_on_a_closed_pipe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = write_many(dir.path(), "base", &Gen::default(), 0..5);
    let slow = Gen {
        factor: 0.8,
        ..Gen::default()
    };
    let cand = write_many(dir.path(), "cand", &slow, 100..102);
    let mut args = vec![os("compare"), os("--baseline")];
    args.extend(base.iter().map(|p| p.as_os_str()));
    args.push(os("--candidate"));
    args.extend(cand.iter().map(|p| p.as_os_str()));
    args.push(os("--single-look"));
    let status = with_closed_pipe(&args);
    assert_eq!(status.code(), Some(1), "20% slower everywhere: {status}");
}

#[test]
fn run_finishes_writes_its_results_and_stops_the_engine_on_a_closed_pipe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, SMALL_SIM_CONFIG).expect("write config");
    let out = dir.path().join("out");
    let store = dir.path().join("baselines");
    // An existing, empty store: "no baseline yet" (a missing store is a usage error).
    std::fs::create_dir_all(&store).expect("an empty store");
    let status = with_closed_pipe(&[
        os("run"),
        os("--config"),
        config.as_os_str(),
        os("--out"),
        out.as_os_str(),
        os("--baseline-dir"),
        store.as_os_str(),
    ]);
    // No baseline yet: the gate passes (0), it does not panic (101).
    assert_eq!(status.code(), Some(0), "{status}");
    let results = read_results(&out.join("results.json"));
    assert_eq!(results.cells.len(), 3);
    assert!(Path::new(&out.join("summary.md")).is_file());
    let pgid = engine_pgid(&results);
    assert!(
        group_gone(pgid),
        "engine process group {pgid} outlived the gate"
    );
}
