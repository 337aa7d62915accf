//! The engine's word is cross-checked: a simulated engine that inflates or deflates its usage,
//! or whose generation counter disagrees with what it streamed, never passes (every cell is
//! `error` with the disagreement named, exit 3), while an honest one with step-time jitter
//! passes with every check recorded and within tolerance. Requests cut short under `ignore_eos`
//! (`truncate-at`) make their cell `error` too.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

mod support;

use infergate::results::CellStatus;
use infergate_schema::asserts::{assert_contains, assert_starts_with};
use support::run_sim;

fn assert_every_cell_caught(fault: &str, reason: &str, check: &str) {
    let (code, stderr, results) = run_sim(&["--fault", fault]);
    assert_ne!(code, Some(0), "{fault} must not pass: {stderr}");
    assert_eq!(code, Some(3), "{fault}: {stderr}");
    for cell in &results.cells {
        assert_eq!(cell.status, CellStatus::Error, "{fault}: {cell:?}");
        let why = cell.reason.as_deref().unwrap_or_default();
        assert!(why.contains(reason), "{fault}: {why}");
        let failed: Vec<&str> = cell
            .cross_checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        assert!(
            failed.contains(&check),
            "{fault}: {failed:?} {:?}",
            cell.cross_checks
        );
    }
    assert!(
        support::flat(&stderr).contains(reason),
        "{fault}: the console names it: {stderr}"
    );
}

#[test]
fn doubled_usage_is_caught() {
    assert_every_cell_caught(
        "lie-usage=2.0",
        "usage disagrees with the engine's counters",
        "usage_vs_counter_window",
    );
}

#[test]
fn halved_usage_is_caught() {
    assert_every_cell_caught(
        "lie-usage=0.5",
        "usage disagrees with the engine's counters",
        "chunks_vs_usage",
    );
}

#[test]
fn absurd_usage_is_caught() {
    assert_every_cell_caught("lie-usage=1e15", "usage is implausible", "stream_tps");
}

#[test]
fn a_counter_that_disagrees_is_caught() {
    assert_every_cell_caught(
        "counter-lies=1.5",
        "usage disagrees with the engine's counters",
        "usage_vs_counter_window",
    );
}

#[test]
fn an_honest_engine_with_jitter_raises_no_alarm() {
    let (code, stderr, results) = run_sim(&["--jitter", "0.05"]);
    assert_eq!(code, Some(0), "{stderr}");
    for cell in &results.cells {
        assert_eq!(cell.status, CellStatus::Ok, "{cell:?}");
        for name in [
            "chunks_vs_usage",
            "usage_vs_counter_window",
            "tokens_per_request",
            "stream_tps",
        ] {
            let c = cell
                .cross_checks
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("{name} ran: {:?}", cell.cross_checks));
            assert!(c.ok, "{c:?}");
        }
    }
}

#[test]
fn requests_cut_short_under_ignore_eos_make_the_cell_an_error() {
    let (code, stderr, results) = run_sim(&["--fault", "truncate-at=40"]);
    assert_eq!(code, Some(3), "{stderr}");
    for cell in &results.cells {
        assert_eq!(cell.status, CellStatus::Error, "{cell:?}");
        let why = cell.reason.as_deref().unwrap_or_default();
        assert_starts_with(why, "truncated: ");
        assert_contains(why, "fewer than max_tokens = 128");
        let t = cell.truncated_requests.expect("counted");
        assert!(t.short > 0 && t.short == t.finished, "{t:?}");
        assert_eq!(t.fewest_tokens, 40);
        assert!(
            cell.cross_checks.iter().all(|c| c.ok),
            "an honest engine otherwise"
        );
    }
    assert_contains(&stderr, "truncated: ");
}
