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
//! - [`report`]: terminal tables, Markdown, GitHub check runs, comments and job summaries;
//! - [`cli`]: argument structs and the glue each subcommand runs (the binary stays thin).

pub mod baseline;
pub mod bench;
pub mod cli;
pub mod config;
pub mod engine;
pub mod exit;
pub mod export;
pub mod import;
pub mod merge;
pub mod policy;
pub mod report;
pub mod results;
pub mod run;
pub mod sim;
pub mod stats;
pub mod telemetry;
pub mod verdict;
