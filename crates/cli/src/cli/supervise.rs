//! `infergate __supervise` (hidden): the engine's supervisor, started by the gate itself for
//! every engine boot. See [`infergate_engine::engine::supervisor`].

use infergate_schema::exit::GateExit;

/// Arguments of `infergate __supervise`.
#[derive(Debug, clap::Args)]
pub struct SuperviseArgs {
    /// The gate's pid: the supervisor kills the tree when its parent is no longer this.
    #[arg(long)]
    pub parent: i32,
    /// SIGTERM → SIGKILL grace for the leftovers when the engine's leader exits on its own.
    #[arg(long, default_value_t = 5000)]
    pub grace_ms: u64,
    /// Do not try a cgroup even where cgroup v2 is delegated (the subreaper alone).
    #[arg(long)]
    pub no_cgroup: bool,
    /// Write the command's stdout to this file instead of the supervisor's stderr (a bisect
    /// build, whose stdout names the build).
    #[arg(long, value_name = "FILE")]
    pub stdout_file: Option<std::path::PathBuf>,
    /// The engine's private working directory made by the gate: removed once the tree is
    /// gone if the gate died (a SIGKILLed gate cannot remove it itself).
    #[arg(long, value_name = "DIR")]
    pub private_dir: Option<std::path::PathBuf>,
    /// `[engine] isolation` (`auto`, `off`, `UID:GID`): another user under root, a mount
    /// namespace covering the `--hide` directories.
    #[arg(long, default_value = "off", value_parser = parse_isolation)]
    pub isolation: infergate_config::config::EngineIsolation,
    /// A directory the engine must not see (covered by an empty tmpfs); repeatable.
    #[arg(long, value_name = "DIR")]
    pub hide: Vec<std::path::PathBuf>,
    /// Run the command as this process's user even under root (a bisect build, which writes
    /// the checkout): only the `--hide` directories are covered.
    #[arg(long)]
    pub keep_user: bool,
    /// The engine command.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Runs the supervisor until the engine's tree is gone; its code is the process's exit code.
pub async fn execute(args: SuperviseArgs) -> anyhow::Result<GateExit> {
    // The supervisor is synchronous and this process does nothing else: it runs on the
    // (current-thread) runtime's only thread, which has no other task to starve.
    let code = infergate_engine::engine::supervisor::supervise(
        args.parent,
        args.grace_ms,
        !args.no_cgroup,
        args.stdout_file.as_deref(),
        args.private_dir.as_deref(),
        &infergate_engine::engine::isolate::IsolationPlan {
            isolation: args.isolation,
            cover: args.hide,
            keep_user: args.keep_user,
        },
        &args.command,
    );
    std::process::exit(code)
}

fn parse_isolation(s: &str) -> Result<infergate_config::config::EngineIsolation, String> {
    infergate_config::config::EngineIsolation::parse(s)
        .ok_or_else(|| format!("`{s}`: auto, off or UID:GID"))
}
