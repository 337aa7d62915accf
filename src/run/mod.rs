//! `infergate run` orchestration: boot one engine and measure a suite ([`measure`], reusable
//! for A/B runs), then compare with the baseline and write the outputs ([`gate`]). Nothing here
//! prints: progress goes out as events, and the CLI renders the outcome.

pub mod ab;
pub mod adaptive;
pub mod confirm;
pub mod design_eval;
pub mod gate;
pub mod measure;
pub mod rejudge;

pub use gate::{
    Decision, GateError, OutputFiles, baseline_worthy, decide, decide_runs, exit_code,
    write_outputs,
};
pub use measure::{
    MeasureRequest, MeasuredRun, RunFailure, boot_and_measure, measure_cells, unmeasured_results,
};
