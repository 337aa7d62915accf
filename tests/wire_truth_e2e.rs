//! Every number true to the wire, against the simulated engine's fault modes: a server with
//! regular stalls keeps its ITL p50 (its real step, though far under the mean token gap); a
//! server that aborts every stream after its first token is never said to run "0 of 2"
//! streams; a C=1 cell whose only request stalled and never finished is not `ok`.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::{CellStatus, EarlyEnd, RunResults};
use infergate_schema::asserts::assert_lacks;
use support::{SMALL_SIM_CONFIG, gate, read_results};

/// Runs the small sim config with `sim_args` appended to the engine command and `suite`
/// replacing its `[suites.pr]` matrix lines; exit code, stderr, results.
fn run_with(sim_args: &[&str], suite: &[(&str, &str)]) -> (Option<i32>, String, RunResults) {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra: String = sim_args.iter().map(|a| format!(", \"{a}\"")).collect();
    let mut text = SMALL_SIM_CONFIG.replacen(
        "\"--seed\", \"5\"]",
        &format!("\"--seed\", \"5\"{extra}]"),
        1,
    );
    for (from, to) in suite {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, text).expect("write config");
    let out = dir.path().join("out");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("store dir");
    let (code, stderr) = gate(&config, &out, &store, &[]);
    (code, stderr, read_results(&out.join("results.json")))
}

/// `stall-every=4:0.03` at time-scale 2: 3 ms steps and a 30 ms pause every 4 (10.5 ms a
/// token on average). The ITL p50 is the 3 ms step: under half the mean gap, which the report
/// used to hide as "tokens that came together" (with the cell's ITL changes).
#[test]
fn a_server_with_regular_stalls_keeps_its_itl() {
    let (code, stderr, results) = run_with(
        &["--fault", "stall-every=4:0.03"],
        &[
            ("concurrency = [1, 2, 4]", "concurrency = [1]"),
            ("max_tokens = 128", "max_tokens = 64"),
            ("duration = \"1s\"", "duration = \"2s\""),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let cell = &results.cells[0];
    assert_eq!(cell.status, CellStatus::Ok, "{cell:?}");
    let itl = cell.itl_s.expect("itl").p50;
    let per_user = cell.per_user_tps.expect("per-user rate").p50;
    // The regime the old rule hid: the p50 is under half the mean token gap...
    assert!(
        itl * per_user < 0.5,
        "itl {itl} s, per-user {per_user} tok/s"
    );
    // ...and it is the step, a latency: shown (the console's and the report's rule).
    assert!(itl > 1e-3, "{itl}");
    assert!(infergate::results::itl_is_latency(itl, Some(per_user)));
}

/// llama-cpp-python's default server with a slow prefill (a CPU: 1k prompt tokens at 2,000
/// tok/s, no prefix cache, 0.25 s at time-scale 2): each request is aborted right after its
/// first token, because the next one arrives during its prefill, so no stream ever decodes.
/// The reason says so, never "the server ran 0 of 2 streams at a time".
#[test]
fn a_server_that_aborts_every_stream_after_its_first_token_is_not_said_to_run_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = dir.path().join("slow-prefill.toml");
    std::fs::write(
        &profile,
        r#"name = "slow-prefill"
model = "sim-test"
max_model_len = 65536
kv_budget_tokens = 200000
kv_cost_per_token = 1.0
base_ms = 5.0
per_seq_ms = 1.0
per_kv_token_us = 0.01
prefill_tps = 2000.0
chars_per_token = 4.0
prefix_caching = false
"#,
    )
    .expect("profile");
    let profile = profile.to_str().expect("utf-8 path");
    let (_, stderr, results) = run_with(
        &["--fault", "llama-cpp-python"],
        &[
            (
                "\"--profile\", \"test\"",
                &format!("\"--profile\", \"{profile}\""),
            ),
            ("concurrency = [1, 2, 4]", "concurrency = [2]"),
            ("contexts = [\"0\"]", "contexts = [\"1k\"]"),
        ],
    );
    let cell = &results.cells[0];
    assert_eq!(cell.status, CellStatus::Error, "{cell:?}");
    let why = cell.reason.as_deref().unwrap_or_default();
    let t = cell.requests.as_ref().expect("requests counted");
    // A loaded host can delay the other stream's next request until one request has finished
    // alone (`.ci/run`, 1 run in about 15): the server did then run one stream at a time, and
    // the reason says why no more (the engine aborts the running request for the next one).
    match t.max_streams_at_once {
        0 => assert!(
            why.starts_with("no stream of 2 got past its first token; "),
            "{why}"
        ),
        1 => assert!(
            why.contains("aborts the running one when another arrives"),
            "{t:?}: {why}"
        ),
        n => panic!("{n} streams at once: {t:?}: {why}"),
    }
    assert!(why.contains("requests aborted ("), "{why}");
    assert_lacks(&stderr, "ran 0 of");
}

/// `stall-after=300` at C=1 with a 60 s request time-out: the one stream stops after ~0.9 s,
/// inside the 2 s window, its connection open. The cell was `ok` (it published the tokens
/// before the stall as the engine's rate); now the stalled request is an early end (timed out,
/// "stream stalled": silent for half the window or more at its close) and the cell is `error`.
#[test]
fn a_cell_whose_request_stalled_and_never_finished_is_not_ok() {
    let (code, stderr, results) = run_with(
        &["--fault", "stall-after=300"],
        &[
            ("concurrency = [1, 2, 4]", "concurrency = [1]"),
            ("max_tokens = 128", "max_tokens = 1024"),
            ("duration = \"1s\"", "duration = \"2s\""),
        ],
    );
    assert_ne!(code, Some(0), "{stderr}");
    let cell = &results.cells[0];
    assert_eq!(cell.status, CellStatus::Error, "{cell:?}");
    let why = cell.reason.as_deref().unwrap_or_default();
    assert!(
        why.contains("1 timed out") && why.contains("stream stalled"),
        "{why}"
    );
    let t = cell.requests.as_ref().expect("requests counted");
    assert_eq!((t.completed, t.cut_at_close), (0, 0), "{t:?}");
    assert_eq!(t.ended_early.get(&EarlyEnd::TimedOut), Some(&1), "{t:?}");
}
