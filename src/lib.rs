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
//! The modules live in the workspace's crates, bottom first (a crate depends only on crates
//! listed before it; its `Cargo.toml` says which, and the compiler holds it to that):
//!
//! - `infergate-schema`: [`results`], [`exit`], [`verdict`], [`policy`], [`answer`];
//! - `infergate-io`: [`stdio`], [`fsio`], [`redact`], [`untrusted_text`];
//! - `infergate-model`: [`stats`], [`synthetic`];
//! - `infergate-sim`: [`sim`];
//! - `infergate-config`: [`config`];
//! - `infergate-telemetry`: [`telemetry`];
//! - `infergate-measure`: [`bench`](mod@bench);
//! - `infergate-engine`: [`engine`];
//! - `infergate-store`: [`import`], [`baseline`], [`export`];
//! - `infergate-report`: [`merge`], [`report`];
//! - `infergate-gate`: [`run`];
//! - `infergate-eval`: [`eval`];
//! - `infergate-cli`: [`doctor`], [`cli`].
//!
//! This crate re-exports them under their old names, so `infergate::results` and the rest
//! keep working for the binary, tests/ and benches/.

// Its unit tests (none) see the dev-dependencies tests/ and benches/ use as unused.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![warn(missing_docs)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

// The binary's own dependencies: the lib target does not use them.
use clap as _;
use tokio as _;

pub use infergate_cli::{cli, doctor};
pub use infergate_config::config;
pub use infergate_engine::engine;
pub use infergate_eval::eval;
pub use infergate_gate::run;
pub use infergate_io::{errln, out, outln};
pub use infergate_io::{fsio, redact, stdio, untrusted_text};
pub use infergate_measure::bench;
pub use infergate_model::{stats, synthetic};
pub use infergate_report::{merge, report};
pub use infergate_schema::{answer, exit, policy, results, verdict};
pub use infergate_sim::sim;
pub use infergate_store::{baseline, export, import};
pub use infergate_telemetry::telemetry;
