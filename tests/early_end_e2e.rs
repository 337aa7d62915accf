//! Every request accounted for, against the simulated engine's `llama-cpp-python` fault (one
//! request decodes at a time; by default a request arriving while another streams aborts
//! that one with `data: [DONE]` and no `finish_reason`, and the chunked body never ends):
//! at C=2 and C=4 the cells are not `ok`, the aborted requests are counted by cause, no
//! throughput is published as work done, and the reason (what the client saw) is found in
//! seconds, not after the readiness time-out. With `=queue` (requests wait their turn) the
//! cell is capacity-limited, again in seconds. A healthy engine's latencies agree with
//! each other: TPOT p50 within 20% of 1 / per-user tok/s.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::{CellStatus, EarlyEnd, RunStatus};
use infergate_schema::asserts::{assert_contains, assert_starts_with};
use support::run_sim;

#[test]
fn a_server_that_aborts_requests_gets_no_throughput_and_a_reason_in_seconds() {
    let (_, stderr, results) = run_sim(&["--fault", "llama-cpp-python"]);
    assert_eq!(results.status, RunStatus::Partial, "{stderr}");
    let c1 = &results.cells[0];
    assert_eq!(c1.concurrency, 1);
    assert_eq!(c1.status, CellStatus::Ok, "{c1:?}");
    let t1 = c1.requests.as_ref().expect("requests counted");
    assert!(t1.completed > 0 && t1.early() == 0, "{t1:?}");
    assert!(c1.aggregate_tps > 0.0);
    // No usage in the stream and no metrics page: said, not hidden.
    let why = c1.unverified.as_deref().expect("unverified");
    assert_starts_with(
        why,
        "client count not cross-checked: the engine sent no usage",
    );
    assert!(
        stderr.contains("cell done C=1 ctx=0")
            && stderr.contains("(client count not cross-checked)"),
        "{stderr}"
    );
    for cell in &results.cells[1..] {
        let c = cell.concurrency;
        assert_eq!(cell.status, CellStatus::Error, "C={c}: {cell:?}");
        let why = cell.reason.as_deref().unwrap_or_default();
        assert!(
            why.contains(&format!("the server ran 1 of {c} streams at a time")),
            "C={c}: {why}"
        );
        assert!(why.contains("requests aborted ("), "C={c}: {why}");
        assert!(
            why.contains("[DONE] without a finish_reason"),
            "C={c}: {why}"
        );
        let t = cell.requests.as_ref().expect("requests counted");
        let aborted = t.ended_early.get(&EarlyEnd::DoneWithoutFinish).copied();
        assert!(aborted.unwrap_or(0) >= c, "C={c}: {t:?}");
        assert_eq!(t.max_streams_at_once, 1, "C={c}: {t:?}");
        assert_eq!(cell.errors, t.early(), "C={c}");
        // No throughput published as work done.
        assert_eq!(cell.aggregate_tps, 0.0, "C={c}");
        assert!(cell.samples.is_empty() && cell.output_tokens == 0, "C={c}");
        // Found from what the client saw, in seconds (the readiness time-out is 120 s).
        let found = cell.ready_after_s.expect("decided at admission");
        assert!(found < 10.0, "C={c}: {found} s");
    }
    assert_contains(&stderr, "the server ran 1 of 2 streams at a time");
}

#[test]
fn a_server_that_runs_one_request_at_a_time_is_capacity_limited_in_seconds() {
    let (_, stderr, results) = run_sim(&["--fault", "llama-cpp-python=queue"]);
    let c2 = &results.cells[1];
    assert_eq!(c2.concurrency, 2);
    assert_eq!(c2.status, CellStatus::CapacityLimited, "{c2:?}");
    let why = c2.reason.as_deref().unwrap_or_default();
    assert!(
        why.contains("the server ran 1 of 2 streams at a time (as the client saw"),
        "{why}"
    );
    let found = c2.ready_after_s.expect("admission ended");
    assert!(found < 10.0, "{found} s: {stderr}");
    let t = c2.requests.as_ref().expect("requests counted");
    assert_eq!(t.early(), 0, "queued requests are not aborted: {t:?}");
}

/// The latencies of a healthy engine, as vLLM and guidellm define them, agree: per request
/// TPOT p50 within 20% of 1 / per-user tok/s p50, and ITL is the gap between arrivals
/// (never the ~0 gaps of chunks read together).
#[test]
fn tpot_agrees_with_the_per_user_rate() {
    let (code, stderr, results) = run_sim(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    for cell in &results.cells {
        let c = cell.concurrency;
        assert_eq!(cell.status, CellStatus::Ok, "C={c}: {cell:?}");
        let per_user = cell.per_user_tps.expect("per-user rate").p50;
        let tpot = cell.tpot_s.expect("tpot").p50;
        let itl = cell.itl_s.expect("itl").p50;
        let ratio = tpot * per_user;
        assert!(
            (ratio - 1.0).abs() < 0.2,
            "C={c}: tpot {tpot} per-user {per_user}"
        );
        assert!(itl * per_user > 0.5, "C={c}: itl {itl} per-user {per_user}");
        let t = cell.requests.as_ref().expect("requests counted");
        assert_eq!(t.early(), 0, "C={c}: {t:?}");
        assert!(t.completed > 0, "C={c}: {t:?}");
        assert!(
            cell.unverified.is_none(),
            "C={c}: usage and counter checked"
        );
    }
}
