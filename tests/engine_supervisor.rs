//! The engine supervisor through the library API, with the real binary as `__supervise`: the
//! whole tree is stopped (TERM-ignoring grandchildren, `setsid` and double-forked children),
//! an early exit is reported with the log tail, a missing program is a spawn error naming it,
//! and readiness times out in the configured time.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate_schema::asserts::assert_contains;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use infergate::config::{CommandSpec, EngineConfig};
use infergate::engine::{Containment, EngineLaunch, EngineProcess, group_alive};
use tokio_util::sync::CancellationToken;

fn cfg(cmd: CommandSpec, marker: &str) -> EngineConfig {
    EngineConfig {
        command: cmd,
        env: BTreeMap::from([("INFERGATE_TEST_MARKER".to_string(), marker.to_string())]),
        workdir: None,
        readiness_timeout_s: 2.0,
        log_file: None,
        stop_grace_s: Some(1.0),
        api_key_env: None,
        env_allow: Vec::new(),
        secret_args: Vec::new(),
        host: "127.0.0.1".into(),
        port: None,
        name: None,
        watchdog: Default::default(),
        isolation: Default::default(),
    }
}

fn launch(c: &EngineConfig, log: &Path) -> EngineLaunch {
    let mut l = EngineLaunch::from_config(c, None, &[], log.to_path_buf()).expect("launch");
    l.supervisor = PathBuf::from(env!("CARGO_BIN_EXE_infergate"));
    l
}

/// Processes whose environment holds `marker` (it survives `setsid` and re-parenting).
fn marked(marker: &str) -> Vec<i32> {
    support::processes_with_env(&format!("INFERGATE_TEST_MARKER={marker}"))
}

/// Polls until `f` holds or `limit` passes (generous: the machine may be loaded).
async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_kills_the_whole_tree_including_setsid_double_forked_and_term_ignoring_children() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("stop-tree-{}", std::process::id());
    let c = cfg(
        CommandSpec::Shell(
            "trap '' TERM; setsid sleep 300 & (sh -c 'sleep 301 &' &); sh -c \"trap '' TERM; sleep 302\" & sleep 303".into(),
        ),
        &marker,
    );
    let e = EngineProcess::spawn(launch(&c, &dir.path().join("e.log")))
        .await
        .expect("spawn");
    assert!(matches!(
        e.containment(),
        Containment::Subreaper | Containment::Cgroup
    ));
    // sh, setsid sleep, double-forked sleep, the TERM-ignoring sh and its sleep, sleep 303.
    assert!(
        eventually(Duration::from_secs(20), || marked(&marker).len() >= 6).await,
        "the tree never started: {:?}",
        marked(&marker)
    );
    let pgid = e.pgid();
    let r = e.stop().await;
    assert!(r.killed, "{r:?}");
    assert!(r.group_gone, "{r:?}");
    assert!(!group_alive(pgid));
    assert!(
        eventually(Duration::from_secs(20), || marked(&marker).is_empty()).await,
        "left behind: {:?}",
        marked(&marker)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_engine_kills_the_tree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("drop-tree-{}", std::process::id());
    let c = cfg(
        CommandSpec::Shell("setsid sleep 300 & sleep 301".into()),
        &marker,
    );
    let e = EngineProcess::spawn(launch(&c, &dir.path().join("e.log")))
        .await
        .expect("spawn");
    assert!(eventually(Duration::from_secs(20), || marked(&marker).len() >= 3).await);
    drop(e);
    assert!(
        eventually(Duration::from_secs(20), || marked(&marker).is_empty()).await,
        "left behind: {:?}",
        marked(&marker)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn early_exit_is_reported_with_the_log_tail_and_its_leftovers_are_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("early-exit-{}", std::process::id());
    let c = cfg(
        CommandSpec::Shell(
            "setsid sleep 300 & echo booting; echo 'CUDA out of memory' >&2; exit 1".into(),
        ),
        &marker,
    );
    let e = EngineProcess::spawn(launch(&c, &dir.path().join("e.log")))
        .await
        .expect("spawn");
    let err = e
        .wait_ready(&CancellationToken::new(), 20)
        .await
        .expect_err("must fail");
    let msg = err.to_string();
    assert_contains(&msg, "engine exited with status 1 before becoming ready");
    assert_contains(&msg, "CUDA out of memory");
    assert_contains(&msg, "booting");
    let r = e.stop().await;
    assert!(r.group_gone, "{r:?}");
    assert!(
        eventually(Duration::from_secs(20), || marked(&marker).is_empty()).await,
        "left behind: {:?}",
        marked(&marker)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_program_is_a_spawn_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = cfg(
        CommandSpec::Argv(vec!["/nonexistent/vllm-serve".into()]),
        "missing",
    );
    let err = EngineProcess::spawn(launch(&c, &dir.path().join("e.log")))
        .await
        .expect_err("must fail")
        .to_string();
    assert_contains(&err, "`/nonexistent/vllm-serve`");
    assert_contains(&err, "No such file or directory");
}

#[tokio::test(flavor = "multi_thread")]
async fn readiness_times_out_within_the_configured_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = cfg(CommandSpec::Shell("sleep 30".into()), "timeout");
    c.readiness_timeout_s = 1.0;
    let e = EngineProcess::spawn(launch(&c, &dir.path().join("e.log")))
        .await
        .expect("spawn");
    let err = e
        .wait_ready(&CancellationToken::new(), 5)
        .await
        .expect_err("must time out");
    assert!(err.to_string().contains("not ready after 1.0s"), "{err}");
    let r = e.stop().await;
    assert!(r.group_gone);
}
