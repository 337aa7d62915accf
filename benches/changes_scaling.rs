//! Scaling of `infergate changes`: the change-point analysis of nightly histories of 1,000,
//! 3,000 and 10,000 runs (every series of the 6-cell matrix of `tests/results_gen`, so 7),
//! each with a planted −10% step at 70% of the history, alone and with a −0.3%/run creep over
//! the newest 200 runs after it, and whether the step is found: a matrix-wide change point
//! within 2 runs of it, sized within 3 points of −10%.
//!
//! The noise is `changes-eval`'s: 1% per run, 2% per cell, 1% per sub-window, a random-walk
//! drift of 0.1% per run (so a 10,000-run history wanders by ±10%) and every 20th run an
//! outlier at −8%. Each cell's ITL percentiles rest on 5,000 gaps, so its p99 is a series too:
//! the last column times what `infergate changes` searches by default (every metric the gate
//! gates; here aggregate tok/s and ITL p99, the runs having no prefill or burst layer), side by
//! side with aggregate tok/s alone.
//!
//! Run: `cargo bench --bench changes_scaling` (or `-- 2000 5000` for other lengths).

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

#[path = "../tests/results_gen/mod.rs"]
mod results_gen;

use std::time::Instant;

use infergate::results::RunResults;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal};
use results_gen::{Gen, run};

/// A history of `n` runs with the step to 0.90 at run `at` and, when `creep`, a −0.3%/run
/// decline over the newest 200 runs.
fn history(n: usize, at: usize, creep: bool) -> Vec<RunResults> {
    let mut rng = StdRng::seed_from_u64(0x0c4a_9e17 + n as u64);
    let drift = Normal::new(0.0, 0.001).expect("valid normal");
    let mut walk: f64 = 0.0;
    (0..n)
        .map(|i| {
            walk += drift.sample(&mut rng);
            let step = if i >= at { 0.90 } else { 1.0 };
            let moved = (i + 200).saturating_sub(n);
            let creep = if creep {
                0.997f64.powi(moved as i32)
            } else {
                1.0
            };
            let outlier = if i % 20 == 19 { 0.92 } else { 1.0 };
            let g = Gen {
                suite: Some("nightly".into()),
                factor: walk.exp() * step * outlier * creep,
                run_cv: 0.01,
                cell_cv: 0.02,
                sample_cv: 0.01,
                ..Gen::default()
            };
            let mut r = run(&g, i as u64);
            for p in r.cells.iter_mut().filter_map(|c| c.itl_s.as_mut()) {
                p.count = 5_000;
            }
            r
        })
        .collect()
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 3_000, 10_000]
    } else {
        sizes
    };
    println!(
        "runs    creep  series  seconds  change points (matrix)  planted step at  found as          every gated metric: series, seconds"
    );
    let mut missed = Vec::new();
    for (n, creep) in sizes.iter().flat_map(|&n| [(n, false), (n, true)]) {
        let at = n * 7 / 10;
        let runs = history(n, at, creep);
        let start = Instant::now();
        let changes = infergate::stats::throughput_changes(&runs).expect("analysis");
        let secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let metrics = infergate::stats::changepoint::default_metrics();
        let settings = infergate::stats::changepoint::ChangeSettings::default();
        let all = infergate::stats::changepoint::analyse(&runs, &metrics, &[], &settings)
            .expect("analysis");
        let all_secs = start.elapsed().as_secs_f64();
        let index = |id: &str| runs.iter().position(|r| r.run_id == id).expect("a run");
        let matrix: Vec<(usize, f64)> = changes
            .iter()
            .filter(|c| c.0)
            .map(|c| (index(&c.1), c.2))
            .collect();
        let found = matrix
            .iter()
            .find(|(i, change)| i.abs_diff(at) <= 2 && (change + 0.10).abs() <= 0.03);
        let said = found.map_or_else(
            || "NOT FOUND".to_string(),
            |(i, c)| format!("run {i}, {:+.1}%", c * 100.0),
        );
        println!(
            "{n:<7} {:<6} {:<7} {secs:<8.2} {:<23} {at:<16} {said:<17} {}, {all_secs:.2}",
            if creep { "yes" } else { "no" },
            1 + results_gen::CONCURRENCY.len() * results_gen::CONTEXTS.len(),
            format!("{} ({})", changes.len(), matrix.len()),
            all.series.len(),
        );
        if found.is_none() {
            missed.push((n, creep));
        }
    }
    assert!(
        missed.is_empty(),
        "the planted step was missed at (runs, creep) {missed:?}"
    );
}
