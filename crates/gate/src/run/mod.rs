//! The gate's orchestration: boot one engine and measure a suite ([`measure`], reusable for
//! A/B runs), load the baseline history a gate is judged on ([`decide`]; the judge is `stats::judge`), write the outputs ([`outputs`]),
//! the whole pipeline of `run` and `ab` ([`gate`]), and the bisection of `bisect`
//! ([`bisect`]). Nothing here prints: progress goes out as events, and the CLI renders the
//! outcome.

pub mod ab;
pub mod adaptive;
pub mod bisect;
pub mod confirm;
pub mod decide;
pub mod gate;
pub mod measure;
pub mod outputs;
pub mod rejudge;
pub mod watchdog;

pub use gate::{Design, GateRequest, SetupError, github_wanted};
