//! The `infergate` binary: parse arguments, run the library, map the outcome to an exit code.

// Dependencies are checked by the library target; the binary uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::process::ExitCode;

use clap::Parser;
use infergate::cli::Cli;
use infergate::errln;
use infergate::exit::exit_for_error;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(3);
        }
    };
    match runtime.block_on(infergate::cli::execute(cli)) {
        Ok(outcome) => ExitCode::from(outcome.code()),
        Err(err) => {
            // The error may quote engine, config or artifact text: made inert and redacted.
            errln!(
                "error: {}",
                infergate::untrusted_text::console(&format!("{err:#}"))
            );
            ExitCode::from(exit_for_error(&err).code())
        }
    }
}
