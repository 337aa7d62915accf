//! Turns raw GPU samples of one window into a [`CellTelemetry`], and windows into the run's
//! [`TelemetrySummary`]. Pure arithmetic, separate from NVML so it is tested without a GPU.

use std::collections::BTreeSet;

use infergate_schema::results::{CellTelemetry, TelemetrySummary};

/// One reading of all sampled GPUs at one instant (sums or maxima across devices as noted).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct GpuSample {
    /// Seconds since the window opened.
    pub(crate) t_s: f64,
    /// Mean GPU utilisation across devices, percent.
    pub(crate) gpu_util: Option<f64>,
    /// Mean memory-controller utilisation across devices, percent.
    pub(crate) mem_util: Option<f64>,
    /// Total board power across devices, watts.
    pub(crate) power_w: Option<f64>,
    /// Hottest device, °C.
    pub(crate) temperature_c: Option<f64>,
    /// Mean SM clock, MHz.
    pub(crate) sm_clock_mhz: Option<f64>,
    /// Mean memory clock, MHz.
    pub(crate) mem_clock_mhz: Option<f64>,
    /// VRAM used across devices, MiB.
    pub(crate) vram_used_mib: Option<f64>,
    /// PCIe receive / transmit across devices, KiB/s.
    pub(crate) pcie_rx_kib_s: Option<f64>,
    /// PCIe transmit across devices, KiB/s.
    pub(crate) pcie_tx_kib_s: Option<f64>,
    /// Throttle reasons active at this instant (`sw_power_cap`, ...), idle excluded.
    pub(crate) throttle_reasons: Vec<String>,
}

/// Collects one window's samples and energy counter readings.
#[derive(Debug, Clone, Default)]
pub(crate) struct WindowAccumulator {
    samples: Vec<GpuSample>,
    /// Energy from the hardware counter over the window (sum across devices), joules, when
    /// every device supports it.
    pub(crate) counter_energy_j: Option<f64>,
}

/// The mean of `v`, `None` when empty.
pub(crate) fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| s / n as f64)
}

fn max(v: impl Iterator<Item = f64>) -> Option<f64> {
    v.fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))
}

impl WindowAccumulator {
    /// Adds a sample.
    pub(crate) fn push(&mut self, s: GpuSample) {
        self.samples.push(s);
    }

    /// Energy by the trapezoidal rule over the power samples, joules (fallback where the
    /// energy counter is unsupported).
    fn integrated_energy_j(&self) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self
            .samples
            .iter()
            .filter_map(|s| s.power_w.map(|p| (s.t_s, p)))
            .collect();
        if pts.len() < 2 {
            return None;
        }
        Some(
            pts.windows(2)
                .map(|w| (w[1].0 - w[0].0).max(0.0) * (w[0].1 + w[1].1) / 2.0)
                .sum(),
        )
    }

    /// The window's summary; `None` without samples.
    pub(crate) fn finish(&self, output_tokens: u64) -> Option<CellTelemetry> {
        if self.samples.is_empty() {
            return None;
        }
        let s = &self.samples;
        let energy_j = self.counter_energy_j.or_else(|| self.integrated_energy_j());
        let reasons: BTreeSet<&String> = s.iter().flat_map(|x| &x.throttle_reasons).collect();
        let mut cell = CellTelemetry {
            samples: s.len() as u32,
            gpu_util_avg: mean(s.iter().filter_map(|x| x.gpu_util)),
            mem_util_avg: mean(s.iter().filter_map(|x| x.mem_util)),
            power_w_avg: mean(s.iter().filter_map(|x| x.power_w)),
            power_w_max: max(s.iter().filter_map(|x| x.power_w)),
            energy_j,
            joules_per_token: energy_j
                .filter(|_| output_tokens > 0)
                .map(|e| e / output_tokens as f64),
            temperature_c_max: max(s.iter().filter_map(|x| x.temperature_c)),
            sm_clock_mhz_avg: mean(s.iter().filter_map(|x| x.sm_clock_mhz)),
            mem_clock_mhz_avg: mean(s.iter().filter_map(|x| x.mem_clock_mhz)),
            vram_used_mib_max: max(s.iter().filter_map(|x| x.vram_used_mib)),
            pcie_rx_kib_s_avg: mean(s.iter().filter_map(|x| x.pcie_rx_kib_s)),
            pcie_tx_kib_s_avg: mean(s.iter().filter_map(|x| x.pcie_tx_kib_s)),
            throttle_reasons: reasons.into_iter().cloned().collect(),
        };
        // A GPU that ran no kernel did not make these tokens (a CPU engine on a GPU runner: an
        // H200 idled at 78 W, "0.27 J/token"): its energy is kept, not charged to them.
        if cell.gpu_idle() {
            cell.joules_per_token = None;
        }
        Some(cell)
    }
}

/// Run-level roll-up of the cell windows.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunAccumulator {
    /// Energy of every window that had a figure (`None`: none had).
    energy_j: Option<f64>,
    /// Windows in which the GPU ran no kernel.
    idle_windows: u32,
    /// Energy of the windows with a J/token, and their tokens.
    charged_energy_j: f64,
    energy_tokens: u64,
    power_weighted: f64,
    power_weight: f64,
    temperature_c_max: Option<f64>,
    throttle: BTreeSet<String>,
    windows: u32,
}

impl RunAccumulator {
    /// Adds one window's summary (with its length, for the power average).
    pub(crate) fn add(&mut self, cell: &CellTelemetry, output_tokens: u64, window_s: f64) {
        self.windows += 1;
        if let Some(e) = cell.energy_j {
            self.energy_j = Some(self.energy_j.unwrap_or(0.0) + e);
        }
        if cell.gpu_idle() {
            self.idle_windows += 1;
        }
        // J/token over the windows whose tokens the GPU made (see `finish`).
        if let (Some(e), Some(_)) = (cell.energy_j, cell.joules_per_token) {
            self.charged_energy_j += e;
            self.energy_tokens += output_tokens;
        }
        if let Some(p) = cell.power_w_avg {
            let w = window_s.max(1e-3);
            self.power_weighted += p * w;
            self.power_weight += w;
        }
        if let Some(t) = cell.temperature_c_max {
            self.temperature_c_max = Some(self.temperature_c_max.map_or(t, |m| m.max(t)));
        }
        self.throttle.extend(cell.throttle_reasons.iter().cloned());
    }

    /// The run's summary for `devices`.
    pub(crate) fn summary(&self, devices: Vec<String>) -> TelemetrySummary {
        TelemetrySummary {
            status: "available".into(),
            reason: (self.windows == 0).then(|| "no cell window was sampled".to_string()),
            devices,
            energy_j: self.energy_j,
            joules_per_token: (self.energy_tokens > 0)
                .then(|| self.charged_energy_j / self.energy_tokens as f64),
            power_w_avg: (self.power_weight > 0.0).then(|| self.power_weighted / self.power_weight),
            temperature_c_max: self.temperature_c_max,
            throttle_reasons: self.throttle.iter().cloned().collect(),
            idle_windows: (self.idle_windows > 0).then_some(self.idle_windows),
        }
    }
}

/// The summary written when telemetry could not be collected at all.
pub fn unavailable(reason: impl Into<String>) -> TelemetrySummary {
    TelemetrySummary {
        status: "unavailable".into(),
        reason: Some(reason.into()),
        devices: Vec::new(),
        energy_j: None,
        joules_per_token: None,
        power_w_avg: None,
        temperature_c_max: None,
        throttle_reasons: Vec::new(),
        idle_windows: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, p: f64, temp: f64, reasons: &[&str]) -> GpuSample {
        GpuSample {
            t_s: t,
            gpu_util: Some(90.0),
            mem_util: Some(40.0),
            power_w: Some(p),
            temperature_c: Some(temp),
            sm_clock_mhz: Some(1800.0),
            mem_clock_mhz: Some(10000.0),
            vram_used_mib: Some(30000.0 + t),
            pcie_rx_kib_s: Some(100.0),
            pcie_tx_kib_s: Some(50.0),
            throttle_reasons: reasons.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn window_integrates_power_when_no_energy_counter() {
        let mut w = WindowAccumulator::default();
        w.push(sample(0.0, 300.0, 60.0, &[]));
        w.push(sample(1.0, 500.0, 70.0, &["sw_power_cap"]));
        w.push(sample(2.0, 500.0, 65.0, &[]));
        let c = w.finish(800).expect("summary");
        // 1 s at mean 400 W + 1 s at 500 W = 900 J over 800 tokens.
        assert_eq!(c.energy_j, Some(900.0));
        assert_eq!(c.joules_per_token, Some(900.0 / 800.0));
        assert_eq!(c.power_w_max, Some(500.0));
        assert_eq!(c.temperature_c_max, Some(70.0));
        assert_eq!(c.vram_used_mib_max, Some(30002.0));
        assert_eq!(c.throttle_reasons, vec!["sw_power_cap".to_string()]);
        assert_eq!(c.samples, 3);
    }

    #[test]
    fn window_prefers_the_energy_counter_and_handles_zero_tokens() {
        let mut w = WindowAccumulator::default();
        w.push(sample(0.0, 300.0, 60.0, &[]));
        w.counter_energy_j = Some(123.0);
        let c = w.finish(0).expect("summary");
        assert_eq!(c.energy_j, Some(123.0));
        assert_eq!(c.joules_per_token, None);
        assert!(WindowAccumulator::default().finish(10).is_none());
    }

    #[test]
    fn run_summary_weights_power_by_window_length() {
        let mut w1 = WindowAccumulator::default();
        w1.push(sample(0.0, 200.0, 50.0, &[]));
        w1.counter_energy_j = Some(200.0);
        let mut w2 = WindowAccumulator::default();
        w2.push(sample(0.0, 400.0, 80.0, &["hw_thermal_slowdown"]));
        w2.counter_energy_j = Some(1200.0);
        let mut r = RunAccumulator::default();
        r.add(&w1.finish(100).expect("w1"), 100, 1.0);
        r.add(&w2.finish(600).expect("w2"), 600, 3.0);
        let s = r.summary(vec!["0: GPU".into()]);
        assert_eq!(s.status, "available");
        assert_eq!(s.energy_j, Some(1400.0));
        assert_eq!(s.joules_per_token, Some(2.0));
        assert_eq!(s.power_w_avg, Some(350.0));
        assert_eq!(s.temperature_c_max, Some(80.0));
        assert_eq!(s.throttle_reasons, vec!["hw_thermal_slowdown".to_string()]);
        let u = unavailable("no GPU");
        assert_eq!(u.status, "unavailable");
    }

    /// A window in which the GPU ran no kernel keeps its energy but charges no J/token, in the
    /// cell and in the run (a CPU engine on a GPU runner).
    #[test]
    fn an_idle_gpu_charges_no_energy_to_the_tokens() {
        let idle = |t| GpuSample {
            gpu_util: Some(0.0),
            ..sample(t, 78.0, 38.0, &[])
        };
        let mut w = WindowAccumulator::default();
        w.push(idle(0.0));
        w.push(idle(1.0));
        let c = w.finish(166).expect("a window");
        assert_eq!(c.energy_j, Some(78.0));
        assert_eq!(c.joules_per_token, None);
        let mut busy = WindowAccumulator::default();
        busy.push(sample(0.0, 600.0, 60.0, &[]));
        busy.push(GpuSample {
            gpu_util: Some(0.0),
            ..sample(1.0, 600.0, 60.0, &[])
        });
        let b = busy.finish(300).expect("a window");
        assert_eq!(b.joules_per_token, Some(2.0), "one busy sample is enough");
        let mut r = RunAccumulator::default();
        r.add(&c, 166, 1.0);
        let s = r.summary(vec!["0: GPU".into()]);
        assert_eq!((s.energy_j, s.joules_per_token), (Some(78.0), None));
        assert_eq!(s.idle_windows, Some(1));
        r.add(&b, 300, 1.0);
        let s = r.summary(vec!["0: GPU".into()]);
        assert_eq!(s.energy_j, Some(678.0));
        assert_eq!(s.joules_per_token, Some(2.0));
    }
}
