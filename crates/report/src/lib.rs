//! infergate-report: all rendering ([`report`]: terminal tables, Markdown, GitHub check runs,
//! comments and job summaries) and shards merged into one run ([`merge`]).
//!
//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies, so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]

// (used on some targets only, e.g. a non-Linux stub: never an unused-import error)
#[allow(unused_imports)]
#[macro_use]
extern crate infergate_io;

pub mod merge;
pub mod report;
