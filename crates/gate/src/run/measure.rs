//! Boot one engine and measure one suite: the reusable unit of `run` (and, later, of paired
//! A/B runs, which boot two engines alternately).
//!
//! [`boot_and_measure`] never leaves the engine running: it is stopped (whole process group) on
//! success, error and cancellation, and the engine's drop (the process engine's guard) covers
//! panics. It always returns a [`MeasuredRun`] with a results file's worth of data, even when
//! the engine never became ready (every cell `error` with the reason), so the caller can write
//! and report something on every path. The engine is started through the seam
//! ([`infergate_engine::engine::seam`]): a process, or in process for tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use infergate_config::config::{EngineConfig, SuiteConfig};
use infergate_engine::engine::{EngineBoot, EngineLaunch, ReadyInfo, RunningEngine, StopReport};
use infergate_measure::bench::{BenchOptions, BenchSession, BenchTarget, EventSink};
use infergate_schema::results::{
    CellResult, CellStatus, EngineIdentity, Event, EventKind, HardwareFingerprint, ProfileKey,
    RunResults, RunStatus, TelemetrySummary, ToolInfo,
};
use infergate_telemetry::telemetry::{NvmlSampler, WindowSampler};

/// What one boot-and-measure needs.
#[derive(Clone)]
pub(crate) struct MeasureRequest<'a> {
    /// How the engine is started: a supervised process
    /// ([`infergate_engine::engine::ProcessEngine`]), or in process for tests of the pipeline.
    pub boot: &'a dyn EngineBoot,
    /// The engine to boot (for A/B: `[engine.a]` or `[engine.b]`).
    pub engine: &'a EngineConfig,
    /// Model to request (`{model}`); `None` = the engine's first.
    pub model: Option<&'a str>,
    pub suite: &'a SuiteConfig,
    /// The fingerprint results are keyed by (detected, or pinned by `[profile] hardware`).
    pub hardware: HardwareFingerprint,
    /// GPU telemetry, or why there is none.
    pub telemetry: Result<Arc<NvmlSampler>, String>,
    /// `--engine-arg` values appended to the command.
    pub engine_args: &'a [String],
    /// Where the engine's output goes.
    pub log_path: PathBuf,
    /// Engine-log lines shown when the engine fails.
    pub log_tail_lines: usize,
    /// Labels copied into the results (git SHA, runner, ...).
    pub labels: BTreeMap<String, String>,
    /// Where the results are kept current (status `in_progress`) after every finished cell,
    /// so a killed gate keeps them; `None` = only the caller's final write. The directory
    /// must exist.
    pub progress_file: Option<PathBuf>,
}

/// Why a run failed (exit 3).
#[derive(Debug, Clone, PartialEq)]
pub enum RunFailure {
    /// The engine could not be started or never became ready.
    Boot(String),
    /// The engine process died during the matrix.
    EngineDied { status: String, log_tail: String },
    /// SIGINT/SIGTERM.
    Cancelled,
    /// The engine served but nothing could be measured (unreachable, calibration, every cell
    /// errored).
    Measurement(String),
    /// The engine stopped answering mid-run (the process alive, its sockets open): the
    /// matrix was stopped.
    Unresponsive { reason: String, log_tail: String },
}

impl RunFailure {
    /// One message for people (and the GitHub check).
    pub(crate) fn message(&self) -> String {
        match self {
            RunFailure::Boot(m) | RunFailure::Measurement(m) => m.clone(),
            RunFailure::EngineDied { status, log_tail } => format!(
                "engine exited with {status} during the matrix; remaining cells are `error`\n--- last lines of the engine log ---\n{log_tail}"
            ),
            RunFailure::Unresponsive { reason, log_tail } => format!(
                "{reason}; the matrix was stopped, remaining cells are `error`\n--- last lines of the engine log ---\n{log_tail}"
            ),
            RunFailure::Cancelled => {
                "cancelled by SIGINT/SIGTERM; partial results written, engine stopped".into()
            }
        }
    }
}

/// The outcome of one boot-and-measure.
#[derive(Debug)]
pub(crate) struct MeasuredRun {
    /// Complete, partial or cancelled results (all cells `error` when the engine never
    /// became ready).
    pub results: RunResults,
    /// Set when the run must exit 3.
    pub failure: Option<RunFailure>,
    /// How teardown went (`None` when the engine never started).
    pub stop: Option<StopReport>,
    /// The engine's log file.
    pub engine_log: PathBuf,
    /// Seconds from spawn to ready.
    pub boot_s: Option<f64>,
}

/// The engine while it still serves, after the matrix: what the driver of the gate may use
/// (re-measure cells the judge asks for) before the engine is stopped.
pub(crate) struct Live<'a> {
    /// The measurement session on the running engine.
    pub session: &'a BenchSession,
    /// The matrix as measured (the driver may fold re-measurements into it).
    pub results: &'a mut RunResults,
    /// Cancelled when the gate is, the engine dies or stops answering.
    pub cancel: &'a CancellationToken,
    /// Events to the console and into the results' event log.
    pub emit: &'a mpsc::UnboundedSender<Event>,
    /// A first guess of one cell's cost in seconds (warm-up and window).
    pub est_cell_s: f64,
}

/// Why the measurement token was cancelled.
#[derive(Debug, Clone, PartialEq)]
enum StopCause {
    Signal,
    EngineDied(String),
    /// The watchdog found the engine unresponsive (the reason).
    Unresponsive(String),
}

fn send(events: &EventSink, log: &Mutex<Vec<Event>>, e: Event) {
    let _ = events.send(e.clone());
    if let Ok(mut l) = log.lock() {
        l.push(e);
    }
}

/// The results header used when the bench session never started (boot failure, calibration
/// failure): identity from the config, every cell `error` with `reason`.
pub(crate) fn unmeasured_results(
    req: &MeasureRequest<'_>,
    command: Option<String>,
    reason: &str,
    status: RunStatus,
) -> RunResults {
    let model = req.model.unwrap_or("unknown").to_string();
    let matrix = req.suite.matrix_spec(&model);
    let engine_name = req.engine.name.clone().unwrap_or_else(|| "unknown".into());
    let first_line = reason.lines().next().unwrap_or(reason);
    let now = chrono::Utc::now();
    RunResults {
        schema_version: infergate_schema::results::SCHEMA_VERSION,
        tool: ToolInfo::current(),
        run_id: format!(
            "{}-{:08x}",
            now.format("%Y%m%dT%H%M%SZ"),
            rand::random::<u32>()
        ),
        suite: Some(req.suite.name.clone()),
        started_at: now,
        finished_at: Some(now),
        status,
        status_reason: Some(first_line.to_string()),
        profile: ProfileKey::derive(req.hardware.clone(), &engine_name, &model, &matrix),
        engine: EngineIdentity {
            name: engine_name,
            command,
            ..EngineIdentity::default()
        },
        cells: matrix
            .contexts
            .iter()
            .flat_map(|&l| {
                (matrix.concurrency.iter())
                    .map(move |&c| CellResult::unmeasured(c, l, CellStatus::Error, first_line))
            })
            .collect(),
        matrix,
        telemetry: None,
        events: Vec::new(),
        source: infergate_schema::results::ResultsSource::Infergate,
        labels: req.labels.clone(),
        prefill: Vec::new(),
        burst: None,
        gate_failure: None,
    }
}

/// Boots the engine, waits until it serves, measures every cell of the suite, and stops the
/// engine: [`LiveEngine`]'s three steps for a boot whose driver asks nothing of the live
/// engine (A/B boots, bisection, the confirmation boot).
pub(crate) async fn boot_and_measure(
    req: MeasureRequest<'_>,
    events: EventSink,
    cancel: CancellationToken,
) -> MeasuredRun {
    match LiveEngine::boot(req, events, cancel).await {
        Ok(mut live) => {
            live.measure_matrix().await;
            live.stop().await
        }
        Err(not_served) => *not_served,
    }
}

/// The GPU sampler, or the telemetry summary saying why there is none (and a notice that the
/// run goes on without it).
fn telemetry_of(
    req: &MeasureRequest<'_>,
    events: &EventSink,
    log: &Arc<Mutex<Vec<Event>>>,
) -> (Option<Arc<NvmlSampler>>, Option<TelemetrySummary>) {
    match &req.telemetry {
        Ok(s) => (Some(s.clone()), None),
        Err(reason) => {
            let notice = format!("GPU telemetry unavailable: {reason}; the run goes on without it");
            send(events, log, Event::now(EventKind::Notice, notice));
            (
                None,
                Some(infergate_telemetry::telemetry::unavailable(reason.clone())),
            )
        }
    }
}

/// The event that the engine started, with how it is contained (and its process group).
fn spawned_event(engine: &dyn RunningEngine) -> Event {
    match engine.process_group() {
        Some(pgid) => Event {
            message: format!(
                "engine contained by {}, engine process group {pgid}",
                engine.containment_record(),
            ),
            ..Event::engine_spawned(pgid)
        },
        None => Event::now(
            EventKind::EngineSpawned,
            format!("engine started {}", engine.containment_record()),
        ),
    }
}

/// The event that the engine serves: after how long, where, its models and its containment.
fn ready_event(engine: &dyn RunningEngine, ready: &ReadyInfo) -> Event {
    Event::now(
        EventKind::EngineReady,
        format!(
            "engine ready after {} at {} (models: {}; {})",
            infergate_schema::results::duration_label(ready.boot_s),
            engine.base_url(),
            ready.models.join(", "),
            engine.process_group().map_or_else(
                || engine.containment_record(),
                |g| format!("process group {g}")
            )
        ),
    )
}

/// Measurement events go to the console and into the results' event log: the sender the
/// session writes to, and the task forwarding them.
fn forward_events(
    events: &EventSink,
    log: &Arc<Mutex<Vec<Event>>>,
) -> (mpsc::UnboundedSender<Event>, tokio::task::JoinHandle<()>) {
    let (bench_tx, mut bench_rx) = mpsc::unbounded_channel::<Event>();
    let (events, log) = (events.clone(), log.clone());
    let forward = tokio::spawn(async move {
        while let Some(e) = bench_rx.recv().await {
            send(&events, &log, e);
        }
    });
    (bench_tx, forward)
}

/// A boot cancelled while the engine was getting ready: the run is cancelled, and its cells
/// were skipped, not failed.
fn cancelled_before_ready(mut run: MeasuredRun) -> MeasuredRun {
    run.failure = Some(RunFailure::Cancelled);
    run.results.status = RunStatus::Cancelled;
    for c in &mut run.results.cells {
        c.status = CellStatus::Skipped;
        c.reason = Some("cancelled before the engine was ready".into());
    }
    run
}

/// One boot of the engine, held by the gate's driver: booted and serving, the matrix
/// measured, cells measured again when the judge asks ([`LiveEngine::live`]), then stopped
/// ([`LiveEngine::stop`]), which always returns a results file's worth of data. Cancelling
/// `cancel` (SIGINT/SIGTERM) stops measuring at once: the current cell is `error` "cancelled",
/// the rest `skipped`, and the partial results come back with [`RunFailure::Cancelled`]. The
/// engine's drop (the process engine's guard) covers panics.
pub(crate) struct LiveEngine<'a> {
    req: MeasureRequest<'a>,
    events: EventSink,
    log: Arc<Mutex<Vec<Event>>>,
    telemetry_summary: Option<TelemetrySummary>,
    sampler: Option<Arc<NvmlSampler>>,
    command: String,
    engine: Box<dyn RunningEngine>,
    boot_s: f64,
    /// Why the measurement token was cancelled (recorded before it is).
    cause: Arc<Mutex<Option<StopCause>>>,
    measure_cancel: CancellationToken,
    watcher: tokio::task::JoinHandle<()>,
    watchdog: Option<tokio::task::JoinHandle<()>>,
    bench_tx: mpsc::UnboundedSender<Event>,
    forward: tokio::task::JoinHandle<()>,
    session: Option<BenchSession>,
    journal: Option<super::outputs::InProgressResults>,
    results: Option<RunResults>,
    unreachable: Option<String>,
    failure: Option<RunFailure>,
}

impl<'a> LiveEngine<'a> {
    /// Boots the engine and connects the measurement session. `Err` holds the finished run
    /// when the engine never served (it could not start, never became ready, or the gate was
    /// cancelled first): every cell `error` (or `skipped`) with the reason, the engine stopped.
    pub(crate) async fn boot(
        req: MeasureRequest<'a>,
        events: EventSink,
        cancel: CancellationToken,
    ) -> Result<LiveEngine<'a>, Box<MeasuredRun>> {
        let log = Arc::new(Mutex::new(Vec::<Event>::new()));
        let (sampler, telemetry_summary) = telemetry_of(&req, &events, &log);
        let failed = |command, e: &dyn std::fmt::Display, stop| {
            Box::new(boot_failure(
                &req,
                command,
                e.to_string(),
                &log,
                telemetry_summary.clone(),
                stop,
            ))
        };
        let launch = match EngineLaunch::from_config(
            req.engine,
            req.model,
            req.engine_args,
            req.log_path.clone(),
        ) {
            Ok(l) => l,
            Err(e) => return Err(failed(None, &e, None)),
        };
        let command = launch.display.clone();
        if cancel.is_cancelled() {
            // No boot after a cancel: the engine is never started.
            let run = not_booted_cancelled(&req, command, &log, telemetry_summary);
            return Err(Box::new(run));
        }
        send(
            &events,
            &log,
            Event::now(
                EventKind::EngineStart,
                format!(
                    "starting engine: {command} (log: {})",
                    launch.log_path.display()
                ),
            ),
        );
        let engine = match req.boot.start(launch).await {
            Ok(e) => e,
            Err(e) => return Err(failed(Some(command), &e, None)),
        };
        send(&events, &log, spawned_event(engine.as_ref()));
        let ready = match engine.wait_ready(&cancel, req.log_tail_lines).await {
            Ok(r) => r,
            Err(e) => {
                let cancelled = matches!(e, infergate_engine::engine::EngineError::Cancelled);
                let run = failed(Some(command), &e, Some(engine.stop().await));
                return Err(if cancelled {
                    Box::new(cancelled_before_ready(*run))
                } else {
                    run
                });
            }
        };
        send(&events, &log, ready_event(engine.as_ref(), &ready));
        let cause: Arc<Mutex<Option<StopCause>>> = Arc::new(Mutex::new(None));
        let measure_cancel = CancellationToken::new();
        let watcher = watch_engine(engine.as_ref(), &cause, &measure_cancel, &cancel);
        let (bench_tx, forward) = forward_events(&events, &log);
        let mut live = LiveEngine {
            req,
            events,
            log,
            telemetry_summary,
            sampler,
            command,
            engine,
            boot_s: ready.boot_s,
            cause,
            measure_cancel,
            watcher,
            watchdog: None,
            bench_tx,
            forward,
            session: None,
            journal: None,
            results: None,
            unreachable: None,
            failure: None,
        };
        live.connect().await;
        Ok(live)
    }

    /// Connects the measurement session (probe, calibration) and starts the watchdog and the
    /// in-progress results file; a session that cannot start is the run's failure.
    async fn connect(&mut self) {
        let model = self.req.model.map(str::to_string);
        let mut opts = BenchOptions::new(
            self.req.suite.matrix_spec(model.as_deref().unwrap_or("")),
            self.req.hardware.clone(),
        );
        opts.engine_name = self.req.engine.name.clone();
        opts.sampler = self.sampler.clone().map(|s| s as Arc<dyn WindowSampler>);
        opts.suite = Some(self.req.suite.name.clone());
        opts.skip_cells = self.req.suite.skip.clone();
        opts.skip_doomed = self.req.suite.skip_doomed;
        opts.prefill = self.req.suite.prefill;
        opts.burst = self.req.suite.burst.clone();
        let target = BenchTarget {
            base_url: self.engine.base_url().to_string(),
            model,
            api_key: self.engine.api_key().map(str::to_string),
        };
        let session = tokio::select! {
            _ = self.measure_cancel.cancelled() => None,
            s = BenchSession::connect(&target, &opts, Some(self.bench_tx.clone())) => Some(s),
        };
        match session {
            Some(Ok(session)) => {
                self.watchdog = Some(self.start_watchdog(&session));
                let results = session.results_skeleton();
                self.journal = self.req.progress_file.clone().and_then(|path| {
                    let mut header = results.clone();
                    header.engine.command = Some(self.command.clone());
                    header.engine.containment = Some(self.engine.containment_record());
                    header.labels.extend(self.req.labels.clone());
                    super::outputs::InProgressResults::start(path, header)
                        .inspect_err(|e| {
                            let _ = self.bench_tx.send(journal_failed(e));
                        })
                        .ok()
                });
                self.results = Some(results);
                self.session = Some(session);
            }
            Some(Err(e)) => {
                self.failure = Some(RunFailure::Measurement(format!(
                    "measurement could not start: {e}"
                )));
            }
            None => {}
        }
    }

    /// The watchdog stops the measurement when the engine stops answering.
    fn start_watchdog(&self, session: &BenchSession) -> tokio::task::JoinHandle<()> {
        let liveness = session.liveness();
        let cause = self.cause.clone();
        let measure_cancel = self.measure_cancel.clone();
        let exit = self.engine.exit_watch();
        let settings = super::watchdog::WatchdogSettings::from(&self.req.engine.watchdog);
        tokio::spawn(async move {
            let why = super::watchdog::watch(liveness, settings).await;
            let alive = if exit.borrow().is_none() {
                "; the process is still running"
            } else {
                ""
            };
            if let Ok(mut c) = cause.lock() {
                c.get_or_insert(StopCause::Unresponsive(format!("{why}{alive}")));
            }
            measure_cancel.cancel();
        })
    }

    /// Measures every cell of the suite (each finished cell kept current in the in-progress
    /// results file).
    pub async fn measure_matrix(&mut self) {
        let (Some(session), Some(results)) = (&self.session, self.results.as_mut()) else {
            return;
        };
        let said = std::sync::atomic::AtomicBool::new(false);
        let journal = &self.journal;
        let bench_tx = &self.bench_tx;
        let on_cell = |cell: &CellResult| {
            if let Some(j) = journal
                && let Err(e) = j.cell_done(cell)
                && !said.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                let _ = bench_tx.send(journal_failed(&e));
            }
        };
        let measured = session.measure_matrix(&self.measure_cancel, &on_cell).await;
        results.cells = measured.cells;
        results.prefill = measured.prefill;
        results.burst = measured.burst;
        self.unreachable = measured.unreachable;
    }

    /// The engine while it still serves, for the driver to measure cells again: `None` once
    /// measuring stopped (a cancel, the engine's death, an unresponsive engine) or when the
    /// matrix measured nothing.
    pub(crate) fn live(&mut self) -> Option<Live<'_>> {
        let (Some(session), Some(results)) = (&self.session, self.results.as_mut()) else {
            return None;
        };
        let measured_any = results
            .cells
            .iter()
            .any(|c| c.status != CellStatus::Error && c.status != CellStatus::Skipped);
        if self.measure_cancel.is_cancelled() || !measured_any {
            return None;
        }
        let t = &self.req.suite.timing;
        // the readiness confirmation overlaps the warm-up
        let est_cell_s = t.ready_stable_s.max(t.warmup_s) + t.duration_s;
        Some(Live {
            session,
            results,
            cancel: &self.measure_cancel,
            emit: &self.bench_tx,
            est_cell_s,
        })
    }

    /// Stops the engine (its whole process group) and returns the run: results as measured,
    /// or every cell `error` with the reason; the failure that makes the run exit 3, if any.
    pub(crate) async fn stop(mut self) -> MeasuredRun {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
        self.session = None;
        drop(self.bench_tx);
        let _ = self.forward.await;
        // Why measuring stopped early, if it did.
        let stop_cause = self.cause.lock().ok().and_then(|c| c.clone());
        self.watcher.abort();
        let stop = self.engine.stop().await;
        let (events, log, req) = (&self.events, &self.log, &self.req);
        if !stop.group_gone {
            let message = format!(
                "engine process group {} did not disappear after SIGKILL",
                stop.exit
                    .as_ref()
                    .map_or("?".into(), |e| e.description.clone())
            );
            send(events, log, Event::now(EventKind::Notice, message));
        }
        let tail = infergate_engine::engine::log_tail(&req.log_path, req.log_tail_lines);
        let mut failure = self.failure;
        let log_tail = tail.clone();
        match stop_cause {
            Some(StopCause::Signal) => failure = Some(RunFailure::Cancelled),
            Some(StopCause::EngineDied(status)) => {
                let message = format!("engine exited with {status} during the run");
                send(events, log, Event::now(EventKind::EngineExit, message));
                failure = Some(RunFailure::EngineDied { status, log_tail });
            }
            Some(StopCause::Unresponsive(reason)) => {
                send(
                    events,
                    log,
                    Event::now(EventKind::Unreachable, reason.clone()),
                );
                failure = Some(RunFailure::Unresponsive { reason, log_tail });
            }
            None => {}
        }
        if failure.is_none()
            && let Some(reason) = self.unreachable
        {
            // The engine process lives but stopped answering mid-matrix: the cells after it
            // were not measured, so the run cannot be judged (fail closed).
            failure = Some(RunFailure::Measurement(format!(
                "{reason}; the remaining cells were not measured\n--- last lines of the engine log ---\n{tail}"
            )));
        }
        let mut results = match self.results {
            Some(r) => r,
            None => unmeasured_after(req, &self.command, failure.as_ref()),
        };
        results.engine.command = Some(self.command);
        results.engine.containment = Some(stop.containment_record());
        results.labels.extend(req.labels.clone());
        settle_failure(&mut results, &mut failure, &tail);
        results.telemetry = self
            .telemetry_summary
            .or_else(|| self.sampler.as_ref().map(|s| s.summary()));
        results.finished_at = Some(chrono::Utc::now());
        if let Ok(l) = log.lock() {
            for e in l.iter() {
                if !results.events.contains(e) {
                    results.events.push(e.clone());
                }
            }
        }
        results.events.sort_by_key(|e| e.at);
        redacted(MeasuredRun {
            results,
            failure,
            stop: Some(stop),
            engine_log: req.log_path.clone(),
            boot_s: Some(self.boot_s),
        })
    }
}

/// The engine dying mid-run cancels the measurement (its cause recorded first), as does the
/// gate's own cancel.
fn watch_engine(
    engine: &dyn RunningEngine,
    cause: &Arc<Mutex<Option<StopCause>>>,
    measure_cancel: &CancellationToken,
    cancel: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mut exit = engine.exit_watch();
    let cause = cause.clone();
    let measure_cancel = measure_cancel.clone();
    let cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = cancel.cancelled() => {
                if let Ok(mut c) = cause.lock() { c.get_or_insert(StopCause::Signal); }
            }
            _ = async {
                loop {
                    if let Some(e) = exit.borrow().clone() { return e; }
                    if exit.changed().await.is_err() {
                        if let Some(e) = exit.borrow().clone() { return e; }
                        std::future::pending::<()>().await;
                    }
                }
            } => {
                let desc = exit.borrow().as_ref().map(|e| e.description.clone()).unwrap_or_default();
                if let Ok(mut c) = cause.lock() { c.get_or_insert(StopCause::EngineDied(desc)); }
            }
        }
        measure_cancel.cancel();
    })
}

/// The results of a boot whose matrix was never measured (the session could not start, or
/// it was cancelled first): every cell `error` (`skipped` when cancelled) with the reason.
fn unmeasured_after(
    req: &MeasureRequest<'_>,
    command: &str,
    failure: Option<&RunFailure>,
) -> RunResults {
    let reason = failure.map_or_else(|| "not measured".to_string(), RunFailure::message);
    let status = if matches!(failure, Some(RunFailure::Cancelled)) {
        RunStatus::Cancelled
    } else {
        RunStatus::Partial
    };
    let mut r = unmeasured_results(req, Some(command.to_string()), &reason, status);
    if status == RunStatus::Cancelled {
        for c in &mut r.cells {
            c.status = CellStatus::Skipped;
            c.reason = Some("cancelled".into());
        }
    }
    r
}

/// The run's status and its unfinished cells as the failure says; a run whose every cell
/// errored fails even when nothing else did.
fn settle_failure(results: &mut RunResults, failure: &mut Option<RunFailure>, tail: &str) {
    match &*failure {
        Some(RunFailure::Cancelled) => {
            results.status = RunStatus::Cancelled;
            results.status_reason = Some("cancelled by SIGINT/SIGTERM".into());
        }
        Some(f @ (RunFailure::EngineDied { .. } | RunFailure::Unresponsive { .. })) => {
            // The cells the stop left unfinished; a dead engine's own errors among them.
            let (reason, died) = match f {
                RunFailure::EngineDied { status, .. } => {
                    (format!("engine exited with {status}"), true)
                }
                _ => ("engine unresponsive".to_string(), false),
            };
            for c in &mut results.cells {
                let unfinished = matches!(c.status, CellStatus::Error | CellStatus::Skipped)
                    && (c.reason.as_deref()).is_some_and(|r| {
                        r.contains("cancelled") || (died && r.starts_with("engine"))
                    });
                if unfinished {
                    c.status = CellStatus::Error;
                    c.reason = Some(reason.clone());
                }
            }
            results.status = RunStatus::Partial;
            results.status_reason = Some(reason);
        }
        Some(RunFailure::Measurement(m)) => {
            results.status = RunStatus::Partial;
            results.status_reason = Some(m.lines().next().unwrap_or(m).to_string());
        }
        Some(RunFailure::Boot(_)) | None => {}
    }
    if failure.is_none()
        && !results.cells.is_empty()
        && results.cells.iter().all(|c| c.status == CellStatus::Error)
    {
        let first = results.cells[0].reason.clone().unwrap_or_default();
        *failure = Some(RunFailure::Measurement(format!(
            "every cell errored (first: {first})\n--- last lines of the engine log ---\n{tail}"
        )));
    }
    results.settle_status();
}

/// The run with every known secret masked in its results and failure text: everything
/// written, printed or posted about a run comes from here, and engine-controlled strings
/// (model ids, error bodies, the log tail) may carry a secret the engine was given.
fn redacted(mut run: MeasuredRun) -> MeasuredRun {
    let r = infergate_io::redact::process();
    if r.is_empty() {
        return run;
    }
    run.results = r.redact_serde(run.results);
    run.failure = run.failure.map(|f| match f {
        RunFailure::Boot(m) => RunFailure::Boot(r.redact(&m)),
        RunFailure::Measurement(m) => RunFailure::Measurement(r.redact(&m)),
        RunFailure::EngineDied { status, log_tail } => RunFailure::EngineDied {
            status: r.redact(&status),
            log_tail: r.redact(&log_tail),
        },
        RunFailure::Unresponsive { reason, log_tail } => RunFailure::Unresponsive {
            reason: r.redact(&reason),
            log_tail: r.redact(&log_tail),
        },
        RunFailure::Cancelled => RunFailure::Cancelled,
    });
    run
}

/// The notice that the in-progress results file cannot be kept current, said once (the final
/// write will report it as an error if the directory stays unwritable).
fn journal_failed(e: &super::decide::GateError) -> Event {
    let why = format!("cannot keep the results current after each cell: {e}");
    Event::now(EventKind::Notice, why)
}

/// The results of a boot that was cancelled before the engine was started: every cell
/// `skipped`, status `cancelled`, no engine process.
fn not_booted_cancelled(
    req: &MeasureRequest<'_>,
    command: String,
    log: &Mutex<Vec<Event>>,
    telemetry: Option<TelemetrySummary>,
) -> MeasuredRun {
    let reason = "cancelled before the engine was started";
    let mut results = unmeasured_results(req, Some(command), reason, RunStatus::Cancelled);
    for c in &mut results.cells {
        c.status = CellStatus::Skipped;
    }
    results.telemetry = telemetry;
    results.events = log.lock().map(|l| l.clone()).unwrap_or_default();
    results
        .events
        .push(Event::now(EventKind::Cancelled, reason.to_string()));
    redacted(MeasuredRun {
        results,
        failure: Some(RunFailure::Cancelled),
        stop: None,
        engine_log: req.log_path.clone(),
        boot_s: None,
    })
}

fn boot_failure(
    req: &MeasureRequest<'_>,
    command: Option<String>,
    message: String,
    log: &Mutex<Vec<Event>>,
    telemetry: Option<TelemetrySummary>,
    stop: Option<StopReport>,
) -> MeasuredRun {
    let mut results = unmeasured_results(req, command, &message, RunStatus::Partial);
    results.telemetry = telemetry;
    results.events = log.lock().map(|l| l.clone()).unwrap_or_default();
    results.events.push(Event::now(
        EventKind::EngineError,
        message.lines().next().unwrap_or("").to_string(),
    ));
    results.engine.containment = stop.as_ref().map(StopReport::containment_record);
    redacted(MeasuredRun {
        results,
        failure: Some(RunFailure::Boot(message)),
        stop,
        engine_log: req.log_path.clone(),
        boot_s: None,
    })
}
