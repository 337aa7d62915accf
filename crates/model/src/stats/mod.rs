//! The noise model and the decision rule: turns baseline history and candidate runs into a
//! [`ComparisonReport`](infergate_schema::verdict::ComparisonReport). `docs/statistics.md` is the one-page
//! account of the design and its measured error rates (`infergate stats-eval`); each module's
//! header says which part of it the module holds.

pub mod bisect;
pub mod build;
pub mod capacity;
pub mod changepoint;
pub mod compare;
pub mod confirm;
pub mod interval;
pub mod judge;
pub mod noise;
pub mod paired;
pub mod rule;
pub mod sensitivity;
pub mod sequential;

pub use build::finish;
pub use build::quantile;
pub use changepoint::throughput_changes;
pub use compare::{History, Look, compare, compare_at, compare_on};
pub use judge::{Evidence, Judge, Next, Plan, replay};
pub use paired::{PairedError, paired_compare};
pub use rule::DecisionRule;

/// Why a comparison could not be made at all (as opposed to cells that are not comparable).
#[derive(Debug, thiserror::Error)]
#[allow(
    missing_docs,
    reason = "each field is named by its variant\'s #[error] message"
)]
pub enum StatsError {
    /// Baseline and candidate were measured under different profiles (hardware, engine, model
    /// or matrix): comparing them would measure the difference in setup, not in code.
    #[error(
        "profile mismatch: baseline run `{run_id}` has profile `{baseline}` but the candidate has `{candidate}`; compare runs of one profile only"
    )]
    ProfileMismatch {
        baseline: String,
        candidate: String,
        run_id: String,
    },
    /// No candidate run was given.
    #[error("no candidate run given: pass at least one candidate results file")]
    NoCandidate,
    /// A rule parameter is out of range (e.g. `alpha` outside (0, 1)).
    #[error("invalid decision rule: {0}")]
    InvalidRule(String),
    /// A driver gave the judge evidence it did not ask for (a bug in the driver).
    #[error("the plan of looks was not followed: {0}")]
    OutOfTurn(String),
}
