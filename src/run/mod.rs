//! The gate's orchestration: boot one engine and measure a suite ([`measure`], reusable for
//! A/B runs), load the baseline history a gate is judged on ([`decide`]; the judge is `stats::judge`), write the outputs ([`outputs`]),
//! the whole pipeline of `run` and `ab` ([`gate`]), and the bisection of `bisect`
//! ([`bisect`]). Nothing here prints: progress goes out as events, and the CLI renders the
//! outcome.

pub(crate) mod ab;
pub(crate) mod adaptive;
pub(crate) mod bisect;
pub(crate) mod confirm;
pub(crate) mod decide;
pub(crate) mod gate;
pub(crate) mod measure;
pub(crate) mod outputs;
pub(crate) mod rejudge;
pub(crate) mod watchdog;

pub(crate) use gate::{Design, GateRequest, SetupError, github_wanted};
