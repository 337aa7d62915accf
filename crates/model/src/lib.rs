//! infergate-model: The noise model and decision rule: pure decisions over plain data (no async
//! runtime, no network, no files), and the synthetic runner profile its evaluations and tests draw
//! from.
//!
//! - [`stats`]: the noise model, the decision rule and the nightly change-point search;
//! - [`synthetic`]: the synthetic runner profile.
//!
//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies, so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod stats;
pub mod synthetic;
