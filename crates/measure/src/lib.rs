//! infergate-measure: Measurement of the sustained-decode matrix against any OpenAI-compatible
//! engine.
//!
//! - [`bench`]: measurement of the sustained-decode matrix against any OpenAI-compatible engine;
//!
//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies, so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod bench;
