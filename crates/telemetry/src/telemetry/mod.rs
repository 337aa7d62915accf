//! Hardware identity and GPU telemetry. Everything here degrades cleanly without a GPU: no NVML
//! library, no device or no permission gives a `cpu` fingerprint and "unavailable" telemetry
//! with the reason, and the run goes on.
//!
//! - [`detect_hardware`]: the fingerprint part of the profile key (GPU model and count, driver);
//! - [`nvml::NvmlSampler`]: samples GPU counters during each cell's steady-state window.

pub mod nvml;
mod summary;

use infergate_schema::results::{CellTelemetry, HardwareFingerprint};

pub use nvml::NvmlSampler;
pub use summary::unavailable;

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

/// Detects the hardware fingerprint of this machine: the GPUs NVML reports (model, count,
/// driver), or a `cpu` profile named from the CPU model when there is no usable NVML or GPU.
/// A gate that samples telemetry takes it from its [`NvmlSampler`] instead
/// ([`NvmlSampler::hardware`]): each NVML initialisation costs 10–15 ms of CPU on an H200.
pub fn detect_hardware() -> HardwareFingerprint {
    fingerprint_of(nvml::gpu_inventory().ok())
}

/// The fingerprint of an NVML inventory; `None` or no device gives the `cpu` profile.
fn fingerprint_of(inventory: Option<nvml::GpuInventory>) -> HardwareFingerprint {
    let cpu = cpu_model();
    match inventory {
        Some(inv) if !inv.names.is_empty() => {
            let mut distinct: Vec<&str> = inv.names.iter().map(String::as_str).collect();
            distinct.sort_unstable();
            distinct.dedup();
            HardwareFingerprint {
                kind: "gpu".into(),
                gpu_model: Some(distinct.join("+")),
                gpu_count: inv.names.len() as u32,
                driver_version: inv.driver_version,
                cpu_model: cpu,
            }
        }
        _ => HardwareFingerprint {
            kind: "cpu".into(),
            gpu_model: None,
            gpu_count: 0,
            driver_version: None,
            cpu_model: cpu,
        },
    }
}

/// CPU model name from `/proc/cpuinfo`, when readable.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| {
            l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model")
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_fingerprint_is_consistent_with_nvml_availability() {
        let hw = detect_hardware();
        match nvml::gpu_inventory() {
            Ok(inv) if !inv.names.is_empty() => {
                assert_eq!(hw.kind, "gpu");
                assert_eq!(hw.gpu_count as usize, inv.names.len());
            }
            _ => {
                assert_eq!(hw.kind, "cpu");
                assert_eq!(hw.gpu_count, 0);
                assert!(hw.gpu_model.is_none());
            }
        }
    }
}
