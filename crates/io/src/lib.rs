//! infergate-io: The process's edges: durable file writes, secrets masked, external text made
//! inert, and printing that survives a closed pipe (`outln!`/`errln!`/`out!`).
//!
//! - [`redact`], [`untrusted_text`]: secrets masked and external text made inert before anything
//!   is printed, written or posted;
//! - [`stdio`]: printing that survives a closed pipe (`outln!`/`errln!`; the std print macros
//!   are denied in the crate), every write through the last guard
//!   `untrusted_text::console_sink`.
//!
//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.

// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit
// tests use only some of the dev-dependencies, so they are exempt.
#![cfg_attr(test, allow(unused_crate_dependencies))]
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
pub mod stdio;
pub mod fsio;
pub mod redact;
pub mod untrusted_text;
