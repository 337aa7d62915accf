//! infergate: a performance regression gate for LLM inference engines.
//!
//! The crate is split the way the gate works, and the parts talk only through plain data
//! ([`results`] and [`verdict`]):
//!
//! - [`sim`]: the simulated OpenAI-compatible engine (vLLM-style metrics, speed model, faults);
//! - [`bench`]: measurement of the sustained-decode matrix against any OpenAI-compatible engine;
//! - [`config`], [`engine`], [`telemetry`], [`run`]: the gate config, the supervised engine
//!   process, hardware fingerprint and NVML telemetry, and the `run` orchestration;
//! - [`stats`], [`baseline`], [`import`]: the noise model and decision rule, the baseline store,
//!   and readers of other tools' result files;
//! - [`eval`]: the gate's error rates and power measured on synthetic runners (`stats-eval`,
//!   `changes-eval`, `ab-eval`);
//! - [`report`]: terminal tables, Markdown, GitHub check runs, comments and job summaries;
//! - [`redact`], [`untrusted_text`]: secrets masked and external text made inert before anything
//!   is printed, written or posted;
//! - [`cli`]: argument structs and the glue each subcommand runs (the binary stays thin);
//! - [`stdio`]: printing that survives a closed pipe (`outln!`/`errln!`; the std print macros
//!   are denied in the crate), every write through the last guard
//!   [`untrusted_text::console_sink`].
//!
//! Layers, bottom first; a module uses only modules below it (checked by a unit test in
//! `src/layering.rs`, which reads every module's non-test `crate::` paths):
//!
//! 1. leaves: [`results`], [`exit`] (exit codes and `fail_on`), [`fsio`] (durable file
//!    writes), [`redact`] →
//!    [`untrusted_text`] → [`stdio`], [`sim`];
//! 2. [`verdict`] → [`policy`] (exit code, check conclusion and verdict word, in one place) →
//!    [`answer`] (the answer in words: the first line every report leads with) → [`stats`]
//!    (pure decisions over plain data) → [`config`];
//! 3. [`telemetry`] → [`bench`](mod@bench) (measurement) → [`engine`] (the supervised process);
//! 4. [`import`] → [`baseline`] (storage, never renders) → [`merge`] (shards joined) →
//!    [`report`] (all rendering) and [`export`] (other tools' formats);
//! 5. [`run`] (the gate pipeline) → [`eval`] (the gate measured on synthetic runners) →
//!    [`doctor`] → [`cli`].

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies (the rest serve tests/), so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
pub mod stdio;

pub mod answer;
pub mod baseline;
pub mod bench;
pub mod cli;
pub mod config;
pub(crate) mod doctor;
pub mod engine;
pub(crate) mod eval;
pub mod exit;
pub mod export;
pub(crate) mod fsio;
pub mod import;
pub(crate) mod merge;
pub mod policy;
pub(crate) mod redact;
pub mod report;
pub mod results;
pub(crate) mod run;
pub(crate) mod sim;
pub mod stats;
pub mod telemetry;
pub mod untrusted_text;
pub mod verdict;

#[cfg(test)]
mod layering;
