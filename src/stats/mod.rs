//! The noise model and the decision rule: turns baseline history and candidate runs into a
//! [`ComparisonReport`](crate::verdict::ComparisonReport). See `docs/statistics.md` for the design
//! and its measured error rates (`infergate stats-eval`).
//!
//! The pieces, one concept per module:
//! - [`rule`]: the [`DecisionRule`] knobs and every internal constant, named once;
//! - [`noise`]: the two-way model of the baseline history (run effect + cell + residual);
//! - [`interval`]: a log change, its standardized statistic and reference t;
//! - [`sensitivity`]: what the gate's plan can detect, and the runs a thin history still needs;
//! - [`sequential`]: alpha spending over adaptive re-measurement rounds;
//! - [`confirm`]: the two-boot plan of the matrix-wide test;
//! - [`capacity`]: capacity-limited and saturated cells against their history's rate;
//! - [`compare`]: one look: candidate runs against the baseline runs of a store;
//! - [`paired`]: the paired comparison of an A/B run (B boots against A boots, pair by pair);
//! - [`build`]: the report frame, cells, matrix-wide test and gate both comparisons share;
//! - [`headline`]: the one line for people every comparison ends with;
//! - [`eval`]: the Monte Carlo of the whole rule on synthetic matrices;
//! - [`bisect`]: which cells moved between two builds, and whether a build between them is good.

pub mod bisect;
pub(crate) mod build;
pub(crate) mod capacity;
pub(crate) mod changepoint;
pub(crate) mod changepoint_eval;
pub mod compare;
pub mod confirm;
pub(crate) mod eval;
pub(crate) mod headline;
pub(crate) mod interval;
pub(crate) mod noise;
pub(crate) mod paired;
pub(crate) mod rule;
pub(crate) mod sensitivity;
pub(crate) mod sequential;

pub use build::{finish, gate_of};
pub use compare::{Look, compare, compare_at};
pub use confirm::two_boot_verdict;
pub use headline::{Against, headline};
pub use paired::{PairedError, paired_compare};
pub use rule::DecisionRule;
pub use sequential::AlphaSpending;

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
}
