//! The seam between the gate and the engine it measures: the pipeline starts every boot
//! through an [`EngineBoot`] and holds the [`RunningEngine`] it gets (its endpoint, exit watch,
//! log and stop), so the same pipeline runs the engine under test as a supervised process
//! ([`ProcessEngine`], what `infergate run` always uses) or, in tests of the pipeline's logic,
//! the simulated engine as a task of the gate's own process (`infergate_cli::cli::sim_engine`:
//! the only crate that may use both this crate and the simulator).
//!
//! The traits return boxed futures so the pipeline holds `&dyn EngineBoot` without a type
//! parameter through every driver (run, confirmation, A/B, bisection).

use std::future::Future;
use std::pin::Pin;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{EngineError, EngineExit, EngineLaunch, EngineProcess, ReadyInfo, StopReport};

/// A future the seam's traits return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Starts the engine a resolved `[engine]` command describes.
pub trait EngineBoot: Send + Sync + std::fmt::Debug {
    /// Starts the engine (not yet serving: [`RunningEngine::wait_ready`] waits for that). Its
    /// output goes to `launch.log_path`.
    fn start(
        &self,
        launch: EngineLaunch,
    ) -> BoxFuture<'_, Result<Box<dyn RunningEngine>, EngineError>>;
}

/// A started engine, held by the gate until [`RunningEngine::stop`]; dropping it without a
/// stop must still end it (the process engine's drop guard kills its group).
pub trait RunningEngine: Send + Sync {
    /// Base URL it serves on.
    fn base_url(&self) -> &str;
    /// Bearer token of its API, if it has one.
    fn api_key(&self) -> Option<&str>;
    /// Its process group, when it is a process tree of its own.
    fn process_group(&self) -> Option<i32>;
    /// `engine.containment` in the results: how it is held and kept from the gate.
    fn containment_record(&self) -> String;
    /// Changes once when the engine ends on its own (for the watcher of a measurement).
    fn exit_watch(&self) -> watch::Receiver<Option<EngineExit>>;
    /// Waits until it serves (`/health`, `/v1/models`), its readiness time-out, its end or a
    /// cancel, whichever comes first ([`super::wait_serving`]).
    fn wait_ready<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        log_tail_lines: usize,
    ) -> BoxFuture<'a, Result<ReadyInfo, EngineError>>;
    /// Stops it and reports how teardown went.
    fn stop(self: Box<Self>) -> BoxFuture<'static, StopReport>;
}

/// The engine under test as a supervised process tree ([`EngineProcess`]): isolation, process
/// group teardown, readiness, the redacted log.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEngine;

impl EngineBoot for ProcessEngine {
    fn start(
        &self,
        launch: EngineLaunch,
    ) -> BoxFuture<'_, Result<Box<dyn RunningEngine>, EngineError>> {
        Box::pin(async move {
            let engine = EngineProcess::spawn(launch).await?;
            Ok(Box::new(engine) as Box<dyn RunningEngine>)
        })
    }
}

impl RunningEngine for EngineProcess {
    fn base_url(&self) -> &str {
        &self.launch.base_url
    }

    fn api_key(&self) -> Option<&str> {
        self.launch.api_key.as_deref()
    }

    fn process_group(&self) -> Option<i32> {
        Some(self.pgid)
    }

    fn containment_record(&self) -> String {
        super::containment_record(self.containment, &self.isolation)
    }

    fn exit_watch(&self) -> watch::Receiver<Option<EngineExit>> {
        self.exit_rx.clone()
    }

    fn wait_ready<'a>(
        &'a self,
        cancel: &'a CancellationToken,
        log_tail_lines: usize,
    ) -> BoxFuture<'a, Result<ReadyInfo, EngineError>> {
        Box::pin(EngineProcess::wait_ready(self, cancel, log_tail_lines))
    }

    fn stop(self: Box<Self>) -> BoxFuture<'static, StopReport> {
        Box::pin(EngineProcess::stop(*self))
    }
}
