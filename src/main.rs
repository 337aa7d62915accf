//! The `infergate` binary: parse arguments, run the library, map the outcome to an exit code.

// Dependencies are checked by the library target; the binary uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::process::ExitCode;

use clap::Parser;
use infergate::cli::{Cli, Command};
use infergate::errln;
use infergate::exit::exit_for_error;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version: stdout, exit 0
        Err(e) => {
            let text = infergate::cli::plain_parse_error(&e.render().to_string());
            errln!("{}", text.trim_end());
            return ExitCode::from(2);
        }
    };
    // The simulated engine serves many streams: all cores. Everything else (the measuring
    // client above all) runs on one thread: no cross-thread wake-ups or work stealing per
    // streamed chunk, which is most of what a client costs per token and per second.
    let mut builder = match cli.command {
        Command::Sim(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    };
    // The gate keeps what its engines leave when their supervisor dies (the supervisor keeps
    // its own tree): orphans are re-parented to it and killed as it exits.
    let keeper = !matches!(cli.command, Command::Supervise(_) | Command::Sim(_));
    if keeper {
        infergate::engine::adopt_orphans();
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(3);
        }
    };
    let outcome = runtime.block_on(infergate::cli::execute(cli));
    // Every task, and every child that belonged to one, is gone with the runtime; what is
    // left below the gate is an engine tree whose supervisor died.
    drop(runtime);
    if keeper {
        let left = infergate::engine::kill_leftover_descendants();
        if left > 0 {
            errln!(
                "warning: {left} engine process(es) outlived their supervisor (killed by the engine or from outside); the gate killed them as it exits"
            );
        }
    }
    match outcome {
        Ok(outcome) => ExitCode::from(outcome.code()),
        Err(err) => {
            // The error may quote engine, config or artifact text: made inert and redacted.
            // Wrapped at 100 columns, its own lines kept.
            errln!(
                "{}",
                infergate::report::console::error_line(&infergate::exit::error_text(&err))
            );
            ExitCode::from(exit_for_error(&err).code())
        }
    }
}
