//! infergate-store: The baseline store and interop: readers of other tools' result files, the
//! history and accepted baselines, and other tools' formats.
//!
//! - `stats`, [`baseline`], [`import`]: the noise model and decision rule, the baseline store,
//!   and readers of other tools' result files;
//!
//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies, so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod baseline;
pub mod export;
pub mod import;
