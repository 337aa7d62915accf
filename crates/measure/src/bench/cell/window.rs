//! The steady-state window's engine view: the polling of running / waiting requests while the window is open.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::bench::client::EngineClient;
use crate::bench::metrics::{MetricsDialect, scrape};

/// What the engine reported while the window was open.
#[derive(Default)]
pub(super) struct WindowLoad {
    /// `running` gauge of each poll.
    pub(super) running: Vec<f64>,
    /// `waiting` gauge of each poll.
    pub(super) waiting: Vec<f64>,
    /// The window was cut short by cancellation.
    pub(super) cancelled: bool,
}

/// Polls `/metrics` every `poll` until `close` (or cancellation).
pub(super) async fn poll_until(
    client: &EngineClient,
    dialect: Option<MetricsDialect>,
    close: Instant,
    poll: Duration,
    cancel: &CancellationToken,
) -> WindowLoad {
    let mut load = WindowLoad::default();
    loop {
        let now = Instant::now();
        if now >= close {
            break;
        }
        let wake = (now + poll).min(close);
        tokio::select! {
            _ = cancel.cancelled() => { load.cancelled = true; break; }
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
        if Instant::now() >= close {
            break;
        }
        if let Some((_, st)) = scrape(client, dialect).await {
            load.running.extend(st.running);
            load.waiting.extend(st.waiting);
        }
    }
    load
}
