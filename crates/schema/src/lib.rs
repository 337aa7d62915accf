//! infergate-schema: The plain data every layer talks through: `results.json` and `verdict.json`
//! schemas, exit codes, the gate policy and the answer in words every report leads with (the two
//! waists of the crate graph).
//!
//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies, so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

pub mod answer;
#[cfg(any(test, feature = "testkit"))]
pub mod asserts;
pub mod exit;
pub mod policy;
pub mod results;
pub mod verdict;
