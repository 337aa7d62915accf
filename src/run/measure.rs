//! Boot one engine and measure one suite: the reusable unit of `run` (and, later, of paired
//! A/B runs, which boot two engines alternately).
//!
//! [`boot_and_measure`] never leaves the engine running: it is stopped (whole process group) on
//! success, error and cancellation, and the [`EngineProcess`] drop guard covers panics. It
//! always returns a [`MeasuredRun`] with a results file's worth of data, even when the engine
//! never became ready (every cell `error` with the reason), so the caller can write and report
//! something on every path.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::bench::{BenchOptions, BenchSession, BenchTarget, EventSink};
use crate::config::{EngineConfig, SuiteConfig};
use crate::engine::{EngineLaunch, EngineProcess, StopReport};
use crate::results::{
    CellResult, CellStatus, EngineIdentity, Event, EventKind, HardwareFingerprint, ProfileKey,
    RunResults, RunStatus, TelemetrySummary, ToolInfo,
};
use crate::telemetry::{NvmlSampler, WindowSampler};

/// What one boot-and-measure needs.
#[derive(Clone)]
pub(crate) struct MeasureRequest<'a> {
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
    /// Re-measure inconclusive cells on the live engine after the matrix (`[adaptive]`);
    /// `None` = measure the matrix only.
    pub adaptive: Option<super::adaptive::AdaptiveRequest>,
    /// Where the results are kept current (status `in_progress`) after every finished cell,
    /// so a killed gate keeps them; `None` = only the caller's final write. The directory
    /// must exist.
    pub progress_file: Option<PathBuf>,
}

/// Why a run failed (exit 3).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RunFailure {
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
    /// The adaptive phase (comparison and re-measurement), when requested and the matrix was
    /// measured without failure.
    pub adaptive: Option<super::adaptive::AdaptiveOutcome>,
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
    let first_line = reason.lines().next().unwrap_or(reason).to_string();
    let now = chrono::Utc::now();
    RunResults {
        schema_version: crate::results::SCHEMA_VERSION,
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
        status_reason: Some(first_line.clone()),
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
                let first_line = first_line.clone();
                matrix.concurrency.iter().map(move |&c| {
                    CellResult::unmeasured(c, l, CellStatus::Error, first_line.clone())
                })
            })
            .collect(),
        matrix,
        telemetry: None,
        events: Vec::new(),
        source: crate::results::ResultsSource::Infergate,
        labels: req.labels.clone(),
        prefill: Vec::new(),
    }
}

/// Boots the engine, waits until it serves, measures every cell of the suite, and stops the
/// engine. Cancelling `cancel` (SIGINT/SIGTERM) stops measuring at once: the current cell is
/// `error` "cancelled", the rest `skipped`, the engine is stopped, and the partial results are
/// returned with [`RunFailure::Cancelled`].
pub(crate) async fn boot_and_measure(
    req: MeasureRequest<'_>,
    events: EventSink,
    cancel: CancellationToken,
) -> MeasuredRun {
    let log = Arc::new(Mutex::new(Vec::<Event>::new()));
    let telemetry_summary: Option<TelemetrySummary>;
    let sampler: Option<Arc<NvmlSampler>> = match &req.telemetry {
        Ok(s) => {
            telemetry_summary = None;
            Some(s.clone())
        }
        Err(reason) => {
            send(
                &events,
                &log,
                Event::now(
                    EventKind::Notice,
                    format!("GPU telemetry unavailable: {reason}; the run goes on without it"),
                ),
            );
            telemetry_summary = Some(crate::telemetry::unavailable(reason.clone()));
            None
        }
    };

    let launch = match EngineLaunch::from_config(
        req.engine,
        req.model,
        req.engine_args,
        req.log_path.clone(),
    ) {
        Ok(l) => l,
        Err(e) => {
            return boot_failure(&req, None, e.to_string(), &log, telemetry_summary, None);
        }
    };
    let command = launch.display.clone();
    if cancel.is_cancelled() {
        // No boot after a cancel: the engine is never started.
        return not_booted_cancelled(&req, command, &log, telemetry_summary);
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
    let engine = match EngineProcess::spawn(launch).await {
        Ok(e) => e,
        Err(e) => {
            return boot_failure(
                &req,
                Some(command),
                e.to_string(),
                &log,
                telemetry_summary,
                None,
            );
        }
    };
    send(
        &events,
        &log,
        Event {
            message: format!(
                "engine contained by {}, engine process group {}",
                engine.containment_record(),
                engine.pgid()
            ),
            ..Event::engine_spawned(engine.pgid())
        },
    );
    let ready = engine.wait_ready(&cancel, req.log_tail_lines).await;
    let ready = match ready {
        Ok(r) => r,
        Err(e) => {
            let cancelled = matches!(e, crate::engine::EngineError::Cancelled);
            let stop = engine.stop().await;
            let mut run = boot_failure(
                &req,
                Some(command),
                e.to_string(),
                &log,
                telemetry_summary,
                Some(stop),
            );
            if cancelled {
                run.failure = Some(RunFailure::Cancelled);
                run.results.status = RunStatus::Cancelled;
                for c in &mut run.results.cells {
                    c.status = CellStatus::Skipped;
                    c.reason = Some("cancelled before the engine was ready".into());
                }
            }
            return run;
        }
    };
    send(
        &events,
        &log,
        Event::now(
            EventKind::EngineReady,
            format!(
                "engine ready after {} at {} (models: {}; process group {})",
                crate::results::duration_label(ready.boot_s),
                engine.base_url(),
                ready.models.join(", "),
                engine.pgid()
            ),
        ),
    );

    // Watcher: the engine dying mid-run cancels the measurement (cause recorded first).
    let cause: Arc<Mutex<Option<StopCause>>> = Arc::new(Mutex::new(None));
    let measure_cancel = CancellationToken::new();
    let watcher = {
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
    };

    // Measurement events go to the console and into the results' event log.
    let (bench_tx, mut bench_rx) = mpsc::unbounded_channel::<Event>();
    let forward = {
        let events = events.clone();
        let log = log.clone();
        tokio::spawn(async move {
            while let Some(e) = bench_rx.recv().await {
                send(&events, &log, e);
            }
        })
    };

    let model = req.model.map(str::to_string);
    let mut opts = BenchOptions::new(
        req.suite.matrix_spec(model.as_deref().unwrap_or("")),
        req.hardware.clone(),
    );
    opts.engine_name = req.engine.name.clone();
    opts.sampler = sampler.clone().map(|s| s as Arc<dyn WindowSampler>);
    opts.suite = Some(req.suite.name.clone());
    opts.skip_cells = req.suite.skip.clone();
    opts.skip_doomed = req.suite.skip_doomed;
    opts.prefill = req.suite.prefill;
    let target = BenchTarget {
        base_url: engine.base_url().to_string(),
        model,
        api_key: engine.launch().api_key.clone(),
    };

    let session = tokio::select! {
        _ = measure_cancel.cancelled() => None,
        s = BenchSession::connect(&target, &opts, Some(bench_tx.clone())) => Some(s),
    };
    let mut failure = None;
    let mut adaptive = None;
    let mut unreachable = None;
    let mut results = match session {
        Some(Ok(session)) => {
            // The watchdog stops the measurement when the engine stops answering.
            let watchdog = {
                let liveness = session.liveness();
                let cause = cause.clone();
                let measure_cancel = measure_cancel.clone();
                let exit = engine.exit_watch();
                let settings = super::watchdog::WatchdogSettings::from(&req.engine.watchdog);
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
            };
            let mut results = session.results_skeleton();
            let journal = req.progress_file.clone().and_then(|path| {
                let mut header = results.clone();
                header.engine.command = Some(command.clone());
                header.engine.containment = Some(engine.containment_record());
                header.labels.extend(req.labels.clone());
                start_journal(path, header, &bench_tx)
            });
            let journal_failed = std::sync::atomic::AtomicBool::new(false);
            let on_cell = |cell: &CellResult| {
                if let Some(j) = &journal
                    && let Err(e) = j.cell_done(cell)
                    && !journal_failed.swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    let _ = bench_tx.send(Event::now(
                        EventKind::Notice,
                        format!("cannot keep the results current after each cell: {e}"),
                    ));
                }
            };
            let measured = session.measure_matrix(&measure_cancel, &on_cell).await;
            results.cells = measured.cells;
            results.prefill = measured.prefill;
            unreachable = measured.unreachable;
            let measured_any = results
                .cells
                .iter()
                .any(|c| c.status != CellStatus::Error && c.status != CellStatus::Skipped);
            if let Some(ad) = req.adaptive.as_ref().filter(|a| a.config.enabled)
                && !measure_cancel.is_cancelled()
                && measured_any
            {
                let t = &req.suite.timing;
                // the readiness confirmation overlaps the warm-up
                let est = t.ready_stable_s.max(t.warmup_s) + t.duration_s;
                let tx = bench_tx.clone();
                let emit = move |e: Event| {
                    let _ = tx.send(e);
                };
                adaptive = Some(
                    super::adaptive::run_adaptive(
                        &session,
                        &mut results,
                        ad,
                        est,
                        &measure_cancel,
                        &emit,
                    )
                    .await,
                );
            }
            watchdog.abort();
            Some(results)
        }
        Some(Err(e)) => {
            failure = Some(RunFailure::Measurement(format!(
                "measurement could not start: {e}"
            )));
            None
        }
        None => None,
    };
    drop(bench_tx);
    let _ = forward.await;

    // Why measuring stopped early, if it did.
    let stop_cause = cause.lock().ok().and_then(|c| c.clone());
    watcher.abort();
    let stop = engine.stop().await;
    if !stop.group_gone {
        send(
            &events,
            &log,
            Event::now(
                EventKind::Notice,
                format!(
                    "engine process group {} did not disappear after SIGKILL",
                    stop.exit
                        .as_ref()
                        .map_or("?".into(), |e| e.description.clone())
                ),
            ),
        );
    }
    let tail = crate::engine::log_tail(&req.log_path, req.log_tail_lines);
    match &stop_cause {
        Some(StopCause::Signal) => failure = Some(RunFailure::Cancelled),
        Some(StopCause::EngineDied(status)) => {
            send(
                &events,
                &log,
                Event::now(
                    EventKind::EngineExit,
                    format!("engine exited with {status} during the run"),
                ),
            );
            failure = Some(RunFailure::EngineDied {
                status: status.clone(),
                log_tail: tail.clone(),
            });
        }
        Some(StopCause::Unresponsive(reason)) => {
            send(
                &events,
                &log,
                Event::now(EventKind::Unreachable, reason.clone()),
            );
            failure = Some(RunFailure::Unresponsive {
                reason: reason.clone(),
                log_tail: tail.clone(),
            });
        }
        None => {}
    }
    if failure.is_none()
        && let Some(reason) = unreachable
    {
        // The engine process lives but stopped answering mid-matrix: the cells after it
        // were not measured, so the run cannot be judged (fail closed).
        failure = Some(RunFailure::Measurement(format!(
            "{reason}; the remaining cells were not measured\n--- last lines of the engine log ---\n{tail}"
        )));
    }

    let mut results = match results.take() {
        Some(r) => r,
        None => {
            let reason = failure
                .as_ref()
                .map_or_else(|| "not measured".to_string(), RunFailure::message);
            let status = if matches!(failure, Some(RunFailure::Cancelled)) {
                RunStatus::Cancelled
            } else {
                RunStatus::Partial
            };
            let mut r = unmeasured_results(&req, Some(command.clone()), &reason, status);
            if status == RunStatus::Cancelled {
                for c in &mut r.cells {
                    c.status = CellStatus::Skipped;
                    c.reason = Some("cancelled".into());
                }
            }
            r
        }
    };
    results.engine.command = Some(command);
    results.engine.containment = Some(engine_containment(&stop));
    results.labels.extend(req.labels.clone());
    match &failure {
        Some(RunFailure::Cancelled) => {
            results.status = RunStatus::Cancelled;
            results.status_reason = Some("cancelled by SIGINT/SIGTERM".into());
        }
        Some(RunFailure::EngineDied { status, .. }) => {
            let reason = format!("engine exited with {status}");
            for c in &mut results.cells {
                let unfinished = matches!(c.status, CellStatus::Error | CellStatus::Skipped)
                    && c.reason
                        .as_deref()
                        .is_some_and(|r| r.contains("cancelled") || r.starts_with("engine"));
                if unfinished {
                    c.status = CellStatus::Error;
                    c.reason = Some(reason.clone());
                }
            }
            results.status = RunStatus::Partial;
            results.status_reason = Some(reason);
        }
        Some(RunFailure::Unresponsive { .. }) => {
            let reason = "engine unresponsive".to_string();
            for c in &mut results.cells {
                let unfinished = matches!(c.status, CellStatus::Error | CellStatus::Skipped)
                    && c.reason.as_deref().is_some_and(|r| r.contains("cancelled"));
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
        failure = Some(RunFailure::Measurement(format!(
            "every cell errored (first: {first})\n--- last lines of the engine log ---\n{tail}"
        )));
    }
    results.settle_status();
    results.telemetry = telemetry_summary.or_else(|| sampler.as_ref().map(|s| s.summary()));
    results.finished_at = Some(chrono::Utc::now());
    let mut all_events = std::mem::take(&mut results.events);
    if let Ok(l) = log.lock() {
        for e in l.iter() {
            if !all_events.contains(e) {
                all_events.push(e.clone());
            }
        }
    }
    all_events.sort_by_key(|e| e.at);
    results.events = all_events;
    redacted(MeasuredRun {
        results,
        failure,
        stop: Some(stop),
        engine_log: req.log_path.clone(),
        boot_s: Some(ready.boot_s),
        adaptive,
    })
}

/// How the engine's tree was held, for `engine.containment` in the results.
fn engine_containment(stop: &StopReport) -> String {
    stop.containment_record()
}

/// The run with every known secret masked in its results and failure text: everything
/// written, printed or posted about a run comes from here, and engine-controlled strings
/// (model ids, error bodies, the log tail) may carry a secret the engine was given.
fn redacted(mut run: MeasuredRun) -> MeasuredRun {
    let r = crate::redact::process();
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

/// Opens the in-progress results file; a failure is said once as a notice (the final write
/// will report it as an error if the directory stays unwritable).
fn start_journal(
    path: PathBuf,
    header: RunResults,
    events: &mpsc::UnboundedSender<Event>,
) -> Option<super::outputs::InProgressResults> {
    match super::outputs::InProgressResults::start(path, header) {
        Ok(j) => Some(j),
        Err(e) => {
            let _ = events.send(Event::now(
                EventKind::Notice,
                format!("cannot keep the results current after each cell: {e}"),
            ));
            None
        }
    }
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
        adaptive: None,
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
    results.engine.containment = stop.as_ref().map(engine_containment);
    redacted(MeasuredRun {
        results,
        failure: Some(RunFailure::Boot(message)),
        stop,
        engine_log: req.log_path.clone(),
        boot_s: None,
        adaptive: None,
    })
}
