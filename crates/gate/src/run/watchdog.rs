//! The hung-engine watchdog: beside the measurement of one boot, it asks the engine's health
//! whenever the engine has sent nothing for a while, and calls the engine unresponsive when
//! several probes in a row get no answer at all. The gate then stops the matrix (remaining
//! cells `error: engine unresponsive`, exit 3) instead of waiting out a request time-out in
//! every remaining cell (722 s on the default nightly suite).
//!
//! Only silence triggers a probe, so an engine that streams tokens is never probed, and a
//! long prefill with a responsive server (vLLM, SGLang answer `/health` from their HTTP loop
//! while the GPU works) only costs one cheap request per second of silence.

use std::time::Duration;

use infergate_config::config::WatchdogConfig;
use infergate_measure::bench::liveness::Liveness;

/// When the watchdog probes and when it gives up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WatchdogSettings {
    /// Silence (no byte from the engine) before the first probe.
    pub quiet: Duration,
    /// Time-out of one `/health` probe.
    pub probe_timeout: Duration,
    /// Unanswered probes in a row that make the engine unresponsive.
    pub probes: u32,
    /// Pause between probes while the engine stays silent.
    pub period: Duration,
}

impl From<&WatchdogConfig> for WatchdogSettings {
    /// The config's `[engine.watchdog]` (validated there: every duration above zero). By
    /// default 5 s of silence, then three unanswered 3 s probes a second apart: a hang is
    /// called about 16 s after it starts, and only after 11 s of the engine answering nothing.
    fn from(c: &WatchdogConfig) -> Self {
        WatchdogSettings {
            quiet: Duration::from_secs_f64(c.quiet_s),
            probe_timeout: Duration::from_secs_f64(c.probe_timeout_s),
            probes: c.probes,
            period: Duration::from_secs_f64(c.period_s),
        }
    }
}

/// Watches until the engine is unresponsive and returns why (never returns while it
/// answers; the caller drops or aborts it when the measurement ends).
pub(crate) async fn watch(liveness: Liveness, settings: WatchdogSettings) -> String {
    let mut unanswered = 0u32;
    loop {
        let quiet_for = liveness.quiet_for();
        if quiet_for < settings.quiet {
            unanswered = 0;
            // Nothing to ask before the silence can reach `quiet`: sleep until then, so an
            // engine that streams costs one wake-up per `quiet`, not one per `period`.
            tokio::time::sleep(settings.quiet - quiet_for).await;
            continue;
        }
        match liveness.responds(settings.probe_timeout).await {
            Ok(()) => unanswered = 0,
            Err(why) => {
                unanswered += 1;
                if unanswered >= settings.probes {
                    return format!(
                        "engine unresponsive: nothing received from it for {:.0} s and {unanswered} health probes in a row unanswered (last: {why})",
                        liveness.quiet_for().as_secs_f64()
                    );
                }
            }
        }
        tokio::time::sleep(settings.period).await;
    }
}
