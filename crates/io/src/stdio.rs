//! Writing to stdout and stderr without panicking, and without a workflow command nobody meant.
//!
//! Every write passes [`crate::untrusted_text::console_sink`] (secrets masked, control bytes
//! escaped, a line that would start a `::command::` defused): text from an engine, a store or
//! an artifact that a print site forgot to neutralise still cannot drive the Actions runner.
//! The gate's own workflow commands are the one exception, written by
//! [`write_workflow_command`].
//! `println!` panics when the reader of a pipe
//! has gone (`infergate run 2>&1 | head`): the gate died with exit 101 in the middle of a run,
//! losing its exit code. Everything the crate prints goes through [`outln!`](crate::outln),
//! [`out!`](crate::out) and [`errln!`](crate::errln) instead: output nobody reads any more is
//! dropped and the run goes on to its exit code (clippy's `print_stdout` / `print_stderr`
//! lints keep `println!` out of the crate).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes to stdout. A closed pipe is not an error; another write error (a full disk behind
/// `> file`) is said once on stderr, and the run goes on.
pub fn write_stdout(args: fmt::Arguments<'_>) {
    write_stdout_raw(&crate::untrusted_text::console_sink(&args.to_string()));
}

/// Writes one workflow command line the gate built itself
/// (`infergate_report::report::actions::command`, whose escaping keeps it one line) to stdout, or to
/// stderr with `to_stderr`: the only text that bypasses [`crate::untrusted_text::console_sink`].
pub fn write_workflow_command(line: &str, to_stderr: bool) {
    let line = format!("{}\n", line.replace(['\n', '\r'], " "));
    if to_stderr {
        write_stderr_raw(&line);
    } else {
        write_stdout_raw(&line);
    }
}

fn write_stdout_raw(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush())
        && e.kind() != ErrorKind::BrokenPipe
    {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| write_stderr(format_args!("warning: cannot write to stdout: {e}\n")));
    }
}

/// Writes to stderr; any error (a closed pipe) drops the text, as there is nowhere to say it.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    write_stderr_raw(&crate::untrusted_text::console_sink(&args.to_string()));
}

fn write_stderr_raw(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// `println!` that survives a closed stdout (see [`crate::stdio`]).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdio::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdio::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that survives a closed stdout (see [`crate::stdio`]).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdio::write_stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that survives a closed stderr (see [`crate::stdio`]).
#[macro_export]
macro_rules! errln {
    () => {
        $crate::stdio::write_stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdio::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}
