//! Writing to stdout and stderr without panicking. `println!` panics when the reader of a pipe
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
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush())
        && e.kind() != ErrorKind::BrokenPipe
    {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| write_stderr(format_args!("warning: cannot write to stdout: {e}\n")));
    }
}

/// Writes to stderr; any error (a closed pipe) drops the text, as there is nowhere to say it.
pub fn write_stderr(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
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
