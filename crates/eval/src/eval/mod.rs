//! The gate measured on synthetic runners: Monte Carlo harnesses that build real
//! [`RunResults`](infergate_schema::results::RunResults) from a noise model of a GPU runner and decide them
//! with the gate's own procedures, so their figures are the product's error rates and power.
//! They sit above [`run`](infergate_gate::run) and [`stats`](infergate_model::stats), which they only call: nothing
//! the gate decides with lives here.
//!
//! - [`gate`]: the gate's false alarms, passes and power over a grid of runners (`stats-eval`),
//!   and the synthetic 20-cell runs the unit tests share;
//! - [`changes`]: the nightly change-point search replayed night by night (`changes-eval`);
//! - [`design`]: the measurement designs of `run` and `ab` (`ab-eval`);
//! - [`latency`]: the secondary metrics (TTFT, ITL, per-user tok/s) on a busy host whose
//!   boots differ in latency alone (`stats-eval`'s latency line);
//! - [`layers`]: the layers' plants (decode, prefill, the burst's TTFT) found and named
//!   (`stats-eval`'s layers line);
//! - [`peers`]: the rules users know (Bencher, github-action-benchmark, Perfherder) on
//!   `stats-eval`'s trials.

pub mod changes;
pub mod design;
pub mod gate;
pub mod latency;
pub mod layers;
pub mod peers;
