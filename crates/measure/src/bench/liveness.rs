//! Whether the engine still answers: the time since any byte last came from it (a stream
//! chunk, response headers, a probe's answer), kept by the client on every response, and a
//! health probe with a short time-out. A gate's watchdog asks only when the engine has been
//! quiet, so a busy engine is never probed for nothing and a hung one is found in seconds
//! instead of a request time-out per remaining cell.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::client::EngineClient;

/// When the engine last sent anything (shared by every clone of one client).
#[derive(Debug)]
pub(crate) struct Activity {
    origin: Instant,
    /// Milliseconds since `origin` of the last byte.
    last_ms: AtomicU64,
}

impl Activity {
    /// Activity starting now.
    pub(crate) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            origin: Instant::now(),
            last_ms: AtomicU64::new(0),
        })
    }

    /// Records that the engine just sent something (one relaxed store: the hot path calls it
    /// per streamed chunk).
    pub(crate) fn note(&self) {
        self.note_at(Instant::now());
    }

    /// [`Activity::note`] with the arrival time the caller already read (no second clock
    /// read per streamed chunk).
    pub(crate) fn note_at(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.origin).as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// How long the engine has sent nothing.
    pub(crate) fn quiet_for(&self) -> Duration {
        let now = self.origin.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// The liveness view of one engine: cheap to clone, `'static`, for a watchdog task.
#[derive(Clone)]
pub struct Liveness {
    client: EngineClient,
}

impl Liveness {
    /// The liveness of the engine behind `client`.
    pub(crate) fn new(client: EngineClient) -> Self {
        Liveness { client }
    }

    /// How long the engine has sent nothing at all.
    pub fn quiet_for(&self) -> Duration {
        self.client.activity().quiet_for()
    }

    /// `GET /health` with `timeout`: any HTTP answer (even 404 or 503) means the engine
    /// answers; a time-out, a refused or reset connection means it does not.
    pub async fn responds(&self, timeout: Duration) -> Result<(), String> {
        self.client
            .get_text("/health", timeout)
            .await
            .map(drop)
            .map_err(|e| format!("GET /health: {}", e.failure()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_time_restarts_with_every_note() {
        let a = Activity::new();
        std::thread::sleep(Duration::from_millis(30));
        assert!(a.quiet_for() >= Duration::from_millis(30));
        a.note();
        assert!(a.quiet_for() < Duration::from_millis(30));
    }
}
