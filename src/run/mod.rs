//! The gate's orchestration: boot one engine and measure a suite ([`measure`], reusable for
//! A/B runs), compare with the baseline store ([`decide`]), write the outputs ([`outputs`]),
//! the whole pipeline of `run` and `ab` ([`gate`]), and the bisection of `bisect`
//! ([`bisect`]). Nothing here prints: progress goes out as events, and the CLI renders the
//! outcome.

pub mod ab;
pub mod adaptive;
pub mod bisect;
pub mod confirm;
pub mod decide;
pub mod design_eval;
pub mod gate;
pub mod measure;
pub mod outputs;
pub mod rejudge;

pub use decide::{Decision, GateError, decide, decide_runs};
pub use gate::{
    AbortError, Design, GateAbort, GatePlan, GateRequest, GateRun, ProgressSink, SetupError,
    github_wanted,
};
pub use measure::{MeasureRequest, MeasuredRun, RunFailure, boot_and_measure, unmeasured_results};
pub use outputs::{OutputFiles, baseline_worthy, write_outputs};
