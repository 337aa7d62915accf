//! The simulated engine in process: an [`EngineBoot`] that starts `infergate sim` as tasks of
//! the gate's own process (127.0.0.1, a free port) instead of a supervised child, for tests
//! whose subject is the pipeline's logic (judging, confirmation, adaptive rounds, reports),
//! not process semantics (teardown, signals, isolation). It lives here because this is the
//! one crate that may use both the engine seam and the simulator, and it holds
//! `infergate sim`'s argument parser, so the in-process engine takes the same profile, fault
//! and speed flags from the `[engine] command` as the process does.

use std::net::SocketAddr;
use std::time::Instant;

use clap::Parser as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use infergate_engine::engine::seam::BoxFuture;
use infergate_engine::engine::{
    Containment, EngineBoot, EngineError, EngineExit, EngineLaunch, ReadyInfo, RunningEngine,
    StopReport,
};
use infergate_sim::sim::{Fault, SimServer};

/// Starts `[engine] command = ["{infergate}", "sim", FLAGS...]` in process. `--host` and
/// `--port` are not used: it listens on 127.0.0.1 on a port the OS picks.
#[derive(Debug, Clone, Copy, Default)]
pub struct InProcessSim;

/// `infergate sim`'s flags, parsed as the subcommand parses them.
#[derive(Debug, clap::Parser)]
struct SimCommand {
    #[command(flatten)]
    args: super::sim::SimArgs,
}

/// The simulator's options from an engine command whose program runs `sim FLAGS...`.
fn options_of(argv: &[String]) -> Result<infergate_sim::sim::SimOptions, EngineError> {
    let Some(at) = argv.iter().position(|a| a == "sim") else {
        return Err(EngineError::InProcess(format!(
            "`{}` is not an `infergate sim` command (an argument vector with `sim` in it)",
            argv.join(" ")
        )));
    };
    let parsed = SimCommand::try_parse_from(&argv[at..])
        .map_err(|e| EngineError::InProcess(e.to_string()))?;
    let opts = super::sim::options_from_args(&parsed.args)
        .map_err(|e| EngineError::InProcess(format!("{e:#}")))?;
    if opts
        .faults
        .iter()
        .any(|f| matches!(f, Fault::CrashAfter(_)))
    {
        // The simulator's crash exits its process, which here is the gate's.
        return Err(EngineError::InProcess(
            "the fault crash-after ends the whole process: test it with the process engine".into(),
        ));
    }
    Ok(opts)
}

impl EngineBoot for InProcessSim {
    fn start(
        &self,
        mut launch: EngineLaunch,
    ) -> BoxFuture<'_, Result<Box<dyn RunningEngine>, EngineError>> {
        Box::pin(async move {
            let opts = options_of(&launch.argv)?;
            let started = Instant::now();
            let line = format!(
                "infergate sim in process (profile {}, time-scale {})",
                opts.profile.name, opts.time_scale
            );
            // Its own runtime, as `infergate sim` has (every core): the engine's scheduling
            // does not take turns with the measuring client on the gate's thread.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .thread_name("infergate-sim")
                .enable_all()
                .build()
                .map_err(|e| EngineError::InProcess(format!("its runtime: {e}")))?;
            let bind = SocketAddr::from(([127, 0, 0, 1], 0));
            let in_process = |e: &dyn std::fmt::Display| EngineError::InProcess(e.to_string());
            let server = (runtime.spawn(infergate_sim::sim::start(opts, bind)).await)
                .map_err(|e| in_process(&e))?
                .map_err(|e| in_process(&e))?;
            launch.base_url = server.url();
            write_log(&launch, &format!("{line} listening on {}\n", server.url()))?;
            let (exit_tx, exit_rx) = watch::channel(None);
            Ok(Box::new(SimTask {
                server: Some(server),
                runtime: Some(runtime),
                launch,
                started,
                _exit_tx: exit_tx,
                exit_rx,
            }) as Box<dyn RunningEngine>)
        })
    }
}

/// The engine log: one line saying where the in-process engine listens (the simulator itself
/// writes nothing there).
fn write_log(launch: &EngineLaunch, text: &str) -> Result<(), EngineError> {
    use std::io::Write as _;
    let log_error = |source| EngineError::Log {
        path: launch.log_path.display().to_string(),
        source,
    };
    if let Some(dir) = launch
        .log_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(log_error)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.log_path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(log_error)
}

/// A simulated engine serving from its own runtime in the gate's process; stopped by its
/// shutdown (or its drop).
struct SimTask {
    server: Option<SimServer>,
    runtime: Option<tokio::runtime::Runtime>,
    launch: EngineLaunch,
    started: Instant,
    /// Held so the exit watch stays open: a task of the gate's process does not exit alone.
    _exit_tx: watch::Sender<Option<EngineExit>>,
    exit_rx: watch::Receiver<Option<EngineExit>>,
}

impl RunningEngine for SimTask {
    fn base_url(&self) -> &str {
        &self.launch.base_url
    }

    fn api_key(&self) -> Option<&str> {
        self.launch.api_key.as_deref()
    }

    fn process_group(&self) -> Option<i32> {
        None
    }

    fn containment_record(&self) -> String {
        Containment::InProcess.as_str().to_string()
    }

    fn exit_watch(&self) -> watch::Receiver<Option<EngineExit>> {
        self.exit_rx.clone()
    }

    fn wait_ready<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        log_tail_lines: usize,
    ) -> BoxFuture<'a, Result<ReadyInfo, EngineError>> {
        Box::pin(infergate_engine::engine::wait_serving(
            &self.launch,
            self.started,
            self.exit_rx.clone(),
            cancel,
            log_tail_lines,
            move |exit| EngineError::ExitedBeforeReady {
                status: exit.description.clone(),
                hint: String::new(),
                log: self.launch.log_path.display().to_string(),
                tail: infergate_engine::engine::log_tail(&self.launch.log_path, log_tail_lines),
            },
        ))
    }

    fn stop(mut self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(async move {
            let t0 = Instant::now();
            if let Some(server) = self.server.take() {
                server.shutdown().await;
            }
            drop(self);
            StopReport {
                exit: Some(EngineExit {
                    description: "stopped in process".into(),
                    code: Some(0),
                }),
                killed: false,
                group_gone: true,
                stop_s: t0.elapsed().as_secs_f64(),
                containment: Containment::InProcess,
                isolation: String::new(),
            }
        })
    }
}

impl Drop for SimTask {
    fn drop(&mut self) {
        // The server's drop cancels its tasks; the runtime ends without blocking (the gate's
        // async context may not block).
        drop(self.server.take());
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;

    /// `{infergate} sim --profile test --time-scale 10 EXTRA...`, its log in `dir`.
    fn launch(dir: &std::path::Path, extra: &[&str]) -> EngineLaunch {
        let argv: Vec<String> = "infergate sim --profile test --time-scale 10"
            .split(' ')
            .chain(extra.iter().copied())
            .map(String::from)
            .collect();
        EngineLaunch {
            display: argv.join(" "),
            argv,
            env: Vec::new(),
            workdir: None,
            log_path: dir.join("engine.log"),
            base_url: String::new(),
            readiness_timeout: std::time::Duration::from_secs(20),
            stop_grace: std::time::Duration::from_secs(1),
            api_key: None,
            supervisor: "infergate".into(),
            isolation: infergate_config::config::EngineIsolation::Off,
            self_exec: None,
        }
    }

    #[tokio::test]
    async fn it_serves_from_the_process_until_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = InProcessSim
            .start(launch(dir.path(), &[]))
            .await
            .expect("started");
        let ready = engine
            .wait_ready(&CancellationToken::new(), 5)
            .await
            .expect("ready");
        assert_eq!(ready.models, vec!["sim-test".to_string()]);
        assert!(engine.base_url().starts_with("http://127.0.0.1:"));
        assert_eq!(engine.process_group(), None);
        let log = std::fs::read_to_string(dir.path().join("engine.log")).expect("log");
        assert_contains(&log, engine.base_url());
        let stop = engine.stop().await;
        assert!(stop.group_gone && !stop.killed, "{stop:?}");
        assert_eq!(stop.containment_record(), "in-process");
    }

    #[tokio::test]
    async fn a_never_ready_fault_ends_in_the_readiness_time_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut never = launch(dir.path(), &["--fault", "never-ready"]);
        never.readiness_timeout = std::time::Duration::from_secs(1);
        let engine = InProcessSim.start(never).await.expect("started");
        let e = engine
            .wait_ready(&CancellationToken::new(), 5)
            .await
            .expect_err("never ready");
        assert!(matches!(e, EngineError::ReadinessTimeout { .. }), "{e}");
        engine.stop().await;
    }

    #[test]
    fn the_flags_of_the_command_reach_the_simulator() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let opts = options_of(&words("/bin/infergate sim --profile test --slowdown 10%"))
            .expect("options");
        assert_eq!(opts.profile.name, "test");
        assert!((opts.slowdown - 1.1).abs() < 1e-12);
        let shell: Vec<String> = ["sh", "-c", "exec infergate serve"]
            .map(String::from)
            .to_vec();
        assert!(options_of(&shell).is_err());
        let e = options_of(&words("x sim --fault crash-after=1")).expect_err("crash-after refused");
        assert!(e.to_string().contains("process engine"), "{e}");
    }
}
