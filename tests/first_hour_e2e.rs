//! The first hour on a real runner (issue 58): a root gate whose engine lies where uid 65534
//! cannot reach it is refused before any boot (exit 2) with one message naming isolation, the
//! uid and the fix; the gate's own binary (`{infergate}`, the embedded default's engine) runs
//! isolated from a directory of mode 0700, as from a checkout under `/root`; a wrong engine
//! path is exit 2; `run --update-baseline` on a run a cell keeps partial fails (exit 3), naming
//! the cell and the suite's `skip` list.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::{assert_contains, assert_lacks};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use infergate::results::RunStatus;
use support::{SMALL_SIM_CONFIG, gate, read_results};

/// Whether this test process runs as root (the engine then runs as uid 65534).
fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A directory of mode 0700 owned by this user (as a checkout under `/root` is).
fn private_dir(base: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn an_engine_in_a_private_directory_is_refused_before_boot_naming_isolation() {
    if !root() {
        println!("skipped: only a root gate runs the engine as another user (uid 65534)");
        return;
    }
    let dir = private_dir(&std::env::temp_dir());
    let engine = dir.path().join("engine.sh");
    std::fs::write(
        &engine,
        format!(
            "#!/bin/sh\nexec {} sim --profile test --port \"$1\"\n",
            env!("CARGO_BIN_EXE_infergate")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path().join("gate.toml");
    let text = SMALL_SIM_CONFIG.replacen(
        r#"command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "2", "--seed", "5"]"#,
        &format!("command = [{:?}, \"{{port}}\"]", engine.display().to_string()),
        1,
    );
    assert_ne!(text, SMALL_SIM_CONFIG);
    std::fs::write(&config, text).unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let out = dir.path().join("out");
    let (code, err) = gate(&config, &out, &store, &[]);
    let err = support::flat(&err);
    assert_eq!(code, Some(2), "{err}");
    let d = dir.path().display().to_string();
    for part in [
        "[engine] isolation = \"auto\"",
        "the engine runs as uid 65534 gid 65534",
        &format!("cannot execute {}, its program (", engine.display()),
        &format!("`chmod o+rx {d}`"),
        "isolation = \"UID:GID\"",
        "isolation = \"off\"",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert_eq!(err.matches("error:").count(), 1, "one message: {err}");
    assert!(!err.contains("starting engine"), "nothing booted: {err}");
    assert!(!out.join("engine.log").exists(), "nothing booted");
}

/// The gate's own binary in a directory of mode 0700 (a hard link: the same file, no copy):
/// `{infergate}` is executed through a descriptor, so the engine still runs as uid 65534 and
/// the gate passes, in both command forms.
#[test]
fn the_gates_own_binary_runs_isolated_from_a_private_directory() {
    if !root() {
        println!("skipped: only a root gate runs the engine as another user (uid 65534)");
        return;
    }
    // Beside the binary (the same filesystem) for the hard link.
    let dir = private_dir(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let bin = dir.path().join("infergate");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_infergate"), &bin).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_infergate"), &bin).unwrap();
    }
    let shell =
        r#"command = "exec {infergate} sim --profile test --port {port} --time-scale 2 --seed 5""#;
    for (form, text) in [
        ("argv", SMALL_SIM_CONFIG.to_string()),
        (
            "shell",
            SMALL_SIM_CONFIG.replacen(
                r#"command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "2", "--seed", "5"]"#,
                shell,
                1,
            ),
        ),
    ] {
        let work = tempfile::tempdir().unwrap();
        let config = work.path().join("gate.toml");
        std::fs::write(&config, text.replace("[1, 2, 4]", "[1]")).unwrap();
        let store = work.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let out = work.path().join("out");
        let output = std::process::Command::new(&bin)
            .args(["run", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(&out)
            .arg("--baseline-dir")
            .arg(&store)
            .env_remove("GITHUB_ACTIONS")
            .output()
            .unwrap();
        let err = support::flat(&String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(0), "{form}: {err}");
        let results = read_results(&out.join("results.json"));
        let how = results.engine.containment.clone().unwrap_or_default();
        assert!(how.contains("; uid 65534 gid 65534;"), "{form}: {how}");
        let command = results.engine.command.clone().unwrap_or_default();
        assert!(
            command.contains(&bin.display().to_string()) && !command.contains("/proc/self/fd"),
            "{form}: the binary's path is shown: {command}"
        );
    }
}

#[test]
fn a_wrong_engine_path_is_exit_2_before_any_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gate.toml");
    std::fs::write(
        &config,
        SMALL_SIM_CONFIG.replacen("\"{infergate}\"", "\"/nonexistent/bin/vllm-xyz\"", 1),
    )
    .unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let out = dir.path().join("out");
    let (code, err) = gate(&config, &out, &store, &[]);
    let err = support::flat(&err);
    assert_eq!(code, Some(2), "{err}");
    assert_contains(
        &err,
        "[engine] command: its program `/nonexistent/bin/vllm-xyz` does not exist",
    );
    assert!(!out.join("results.json").exists(), "nothing measured");
}

/// A program named through `env_allow` (a venv's python in the runner's environment) is shown
/// in the message about it, not masked as `[REDACTED]`: it is a path, not a secret.
#[test]
fn a_program_passed_through_env_allow_is_named_not_masked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let python = dir.path().join("venv-python");
    std::fs::write(&python, "not executable").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = dir.path().join("gate.toml");
    let text = SMALL_SIM_CONFIG.replacen(
        r#"command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "2", "--seed", "5"]"#,
        "command = \"exec \\\"$IG58_PYTHON\\\" -m server --port {port}\"\nenv_allow = [\"IG58_PYTHON\"]",
        1,
    );
    assert_ne!(text, SMALL_SIM_CONFIG);
    std::fs::write(&config, text).unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let output = support::gate_command(&config, &dir.path().join("out"), &store)
        .env("IG58_PYTHON", &python)
        .output()
        .unwrap();
    let err = support::flat(&String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "cannot execute {}, the program its shell line runs",
            python.display()
        )),
        "{err}"
    );
    // `o+rx` for uid 65534 under a root gate, `a+rx` for the gate's own user.
    let fix = if root() { "o+rx" } else { "a+rx" };
    assert!(
        err.contains(&format!("`chmod {fix} {}`", python.display())),
        "{err}"
    );
    assert_lacks(&err, "[REDACTED]");
}

/// A cell the engine cannot serve (C=2 on an engine that fails above one stream) keeps every
/// run partial: `--update-baseline` says so and exits 3 instead of passing without a baseline.
#[test]
fn update_baseline_on_a_partial_run_fails_naming_the_cell_and_the_skip_list() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gate.toml");
    let text = SMALL_SIM_CONFIG
        .replacen(
            "\"--seed\", \"5\"]",
            "\"--seed\", \"5\", \"--fault\", \"fail-above-concurrency=1\"]",
            1,
        )
        .replace("[1, 2, 4]", "[1, 2]");
    std::fs::write(&config, &text).unwrap();
    let store = dir.path().join("store");
    let out = dir.path().join("out");
    let (code, err) = gate(&config, &out, &store, &["--update-baseline"]);
    let err = support::flat(&err);
    assert_eq!(code, Some(3), "{err}");
    for part in [
        "--update-baseline: this run cannot become a baseline: the run is partial",
        "Cells that keep it partial: C=2 × 0 (",
        "the suite's `skip` list (docs/config.md)",
        "`skip = [{ concurrency = 2, context = \"0\" }]` under [suites.pr]",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(
        !err.contains("the gate passes"),
        "no contradicting notice: {err}"
    );
    assert_eq!(
        read_results(&out.join("results.json")).status,
        RunStatus::Partial
    );
    // With the cell skipped, the same engine gives a baseline.
    std::fs::write(
        &config,
        text.replacen(
            "sub_windows = 4",
            "sub_windows = 4\nskip = [{ concurrency = 2, context = \"0\" }]",
            1,
        ),
    )
    .unwrap();
    let (code, err) = gate(
        &config,
        &dir.path().join("out2"),
        &store,
        &["--update-baseline"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_contains(&err, "baseline: run added as");
}
