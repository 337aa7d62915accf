//! Hardware identity and GPU telemetry. Everything here degrades cleanly without a GPU: no NVML
//! library, no device or no permission gives a `cpu` fingerprint and "unavailable" telemetry.

use crate::results::{CellTelemetry, HardwareFingerprint};

/// Samples hardware during one cell's steady-state window. The measurement core calls
/// `start_window` when the window opens and `finish_window` when it closes, so telemetry
/// covers exactly the tokens that were counted (J/token is energy over the same window).
pub trait WindowSampler: Send + Sync {
    /// The steady-state window of a cell has started.
    fn start_window(&self);
    /// The window has ended with `output_tokens` counted; returns the window's summary, or
    /// `None` when nothing could be sampled.
    fn finish_window(&self, output_tokens: u64) -> Option<CellTelemetry>;
}

/// Detects the hardware fingerprint of this machine (CPU-only for now; NVML is added by the
/// telemetry issue).
pub fn detect_hardware() -> HardwareFingerprint {
    HardwareFingerprint {
        kind: "cpu".into(),
        gpu_model: None,
        gpu_count: 0,
        driver_version: None,
        cpu_model: cpu_model(),
    }
}

/// CPU model name from `/proc/cpuinfo`, when readable.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}
