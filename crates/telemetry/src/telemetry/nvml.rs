//! GPU telemetry through NVML (`nvml-wrapper`): the device inventory for the fingerprint and
//! `doctor`, and [`NvmlSampler`], which samples every GPU a few times per second during each
//! cell's steady-state window.
//!
//! NVML is loaded at run time (`libnvidia-ml.so.1`); when it is missing, the driver is not
//! loaded, there is no device or no permission, every entry point returns [`NvmlUnavailable`]
//! with the reason in words, and callers carry on without telemetry.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::error::NvmlError;
use serde::Serialize;

use super::WindowSampler;
use super::summary::{GpuSample, RunAccumulator, WindowAccumulator, mean, unavailable};
use infergate_schema::results::{CellTelemetry, TelemetrySummary};

/// Why GPU telemetry is not available, in words for the run's notice and `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct NvmlUnavailable {
    /// Why, in words.
    pub reason: String,
}

fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(inner) => format!(
            "NVML library not found ({inner}): no NVIDIA driver on this machine"
        ),
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".into(),
        NvmlError::NoPermission => {
            "no permission to query the GPUs through NVML (run as a user with access to /dev/nvidia*)"
                .into()
        }
        other => format!("NVML initialisation failed: {other}"),
    }
}

fn init() -> Result<Nvml, NvmlUnavailable> {
    Nvml::init().map_err(|e| NvmlUnavailable {
        reason: describe(&e),
    })
}

/// What NVML says about the machine as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GpuInventory {
    /// Device names in index order.
    pub names: Vec<String>,
    pub driver_version: Option<String>,
    /// CUDA version the driver supports, e.g. `12.8`.
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
}

/// Per-device facts for `doctor`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuDetails {
    pub index: u32,
    pub name: Option<String>,
    pub(crate) uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub memory_total_mib: Option<f64>,
    pub(crate) memory_used_mib: Option<f64>,
    pub pcie_link_gen_current: Option<u32>,
    pub pcie_link_gen_max: Option<u32>,
    pub pcie_link_width_current: Option<u32>,
    pub pcie_link_width_max: Option<u32>,
    pub power_limit_w: Option<f64>,
    pub temperature_c: Option<u32>,
    pub(crate) sm_clock_max_mhz: Option<u32>,
    /// Whether the total-energy counter works (J/token is exact rather than integrated).
    pub energy_counter: bool,
}

fn inventory_of(nvml: &Nvml) -> Result<GpuInventory, NvmlUnavailable> {
    let count = nvml.device_count().map_err(|e| NvmlUnavailable {
        reason: format!("NVML could not count the GPUs: {}", describe(&e)),
    })?;
    let mut names = Vec::new();
    for i in 0..count {
        match nvml.device_by_index(i).and_then(|d| d.name()) {
            Ok(n) => names.push(n),
            Err(e) => names.push(format!("GPU {i} (name unreadable: {e})")),
        }
    }
    let cuda = nvml.sys_cuda_driver_version().ok().map(|v| {
        format!(
            "{}.{}",
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v)
        )
    });
    Ok(GpuInventory {
        names,
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: cuda,
        nvml_version: nvml.sys_nvml_version().ok(),
    })
}

/// The GPUs NVML sees (empty `names` on a machine whose driver reports no device).
pub(crate) fn gpu_inventory() -> Result<GpuInventory, NvmlUnavailable> {
    inventory_of(&init()?)
}

/// The inventory plus per-device details (PCIe link, memory, power limit) for `doctor`.
pub fn gpu_details() -> Result<(GpuInventory, Vec<GpuDetails>), NvmlUnavailable> {
    let nvml = init()?;
    let inv = inventory_of(&nvml)?;
    let details = (0..inv.names.len() as u32).map(|i| {
        let Ok(d) = nvml.device_by_index(i) else {
            return GpuDetails {
                index: i,
                ..Default::default()
            };
        };
        let mem = d.memory_info().ok();
        GpuDetails {
            index: i,
            name: d.name().ok(),
            uuid: d.uuid().ok(),
            pci_bus_id: d.pci_info().ok().map(|p| p.bus_id),
            memory_total_mib: mem.as_ref().map(|m| m.total as f64 / 1_048_576.0),
            memory_used_mib: mem.as_ref().map(|m| m.used as f64 / 1_048_576.0),
            pcie_link_gen_current: d.current_pcie_link_gen().ok(),
            pcie_link_gen_max: d.max_pcie_link_gen().ok(),
            pcie_link_width_current: d.current_pcie_link_width().ok(),
            pcie_link_width_max: d.max_pcie_link_width().ok(),
            power_limit_w: d.enforced_power_limit().ok().map(|mw| mw as f64 / 1000.0),
            temperature_c: d.temperature(TemperatureSensor::Gpu).ok(),
            sm_clock_max_mhz: d.max_clock_info(Clock::SM).ok(),
            energy_counter: d.total_energy_consumption().is_ok(),
        }
    });
    Ok((inv, details.collect()))
}

enum Command {
    Start,
    Finish(u64, Sender<Option<(CellTelemetry, f64)>>),
}

/// Samples all GPUs on a background thread during each cell's steady-state window
/// ([`WindowSampler`]) and rolls the windows up into the run's [`TelemetrySummary`].
pub struct NvmlSampler {
    tx: Mutex<Option<Sender<Command>>>,
    inventory: GpuInventory,
    run: Mutex<RunAccumulator>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for NvmlSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSampler")
            .field("devices", &self.inventory.names)
            .finish()
    }
}

impl NvmlSampler {
    /// Initialises NVML on a sampler thread that reads every GPU each `interval` while a
    /// window is open. Fails (with the reason) when NVML or a GPU is not usable.
    pub fn start(interval: Duration) -> Result<Arc<NvmlSampler>, NvmlUnavailable> {
        let (tx, rx) = mpsc::channel::<Command>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<GpuInventory, NvmlUnavailable>>();
        let interval = interval.max(Duration::from_millis(50));
        let thread = std::thread::Builder::new()
            .name("infergate-nvml".into())
            .spawn(move || {
                let fail = |e| drop(ready_tx.send(Err(e)));
                let nvml = match init() {
                    Ok(n) => n,
                    Err(e) => return fail(e),
                };
                let inv = match inventory_of(&nvml) {
                    Ok(i) if i.names.is_empty() => {
                        return fail(NvmlUnavailable {
                            reason: "NVML is installed but reports no GPU".into(),
                        });
                    }
                    Ok(i) => i,
                    Err(e) => return fail(e),
                };
                let count = inv.names.len() as u32;
                let _ = ready_tx.send(Ok(inv));
                sampler_loop(&nvml, count, &rx, interval);
            })
            .map_err(|e| NvmlUnavailable {
                reason: format!("cannot start the telemetry thread: {e}"),
            })?;
        let inventory = match ready_rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(inv)) => inv,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                return Err(NvmlUnavailable {
                    reason: "NVML did not initialise within 20 s".into(),
                });
            }
        };
        Ok(Arc::new(NvmlSampler {
            tx: Mutex::new(Some(tx)),
            inventory,
            run: Mutex::new(RunAccumulator::default()),
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// The sampled devices (`index: name`).
    pub(crate) fn devices(&self) -> Vec<String> {
        self.inventory
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{i}: {n}"))
            .collect()
    }

    /// This machine's hardware fingerprint from the sampler's own NVML inventory, the same
    /// as [`super::detect_hardware`] gives without a second NVML initialisation.
    pub fn hardware(&self) -> infergate_schema::results::HardwareFingerprint {
        super::fingerprint_of(Some(self.inventory.clone()))
    }

    /// The run-level summary of every window finished so far.
    pub fn summary(&self) -> TelemetrySummary {
        match self.run.lock() {
            Ok(r) => r.summary(self.devices()),
            Err(_) => unavailable("telemetry state was poisoned by a panic"),
        }
    }

    fn send(&self, cmd: Command) -> bool {
        match self.tx.lock() {
            Ok(g) => g.as_ref().is_some_and(|tx| tx.send(cmd).is_ok()),
            Err(_) => false,
        }
    }
}

impl WindowSampler for NvmlSampler {
    fn start_window(&self) {
        self.send(Command::Start);
    }

    fn finish_window(&self, output_tokens: u64) -> Option<CellTelemetry> {
        let (reply_tx, reply_rx) = mpsc::channel();
        if !self.send(Command::Finish(output_tokens, reply_tx)) {
            return None;
        }
        let (cell, window_s) = reply_rx.recv_timeout(Duration::from_secs(5)).ok()??;
        if let Ok(mut r) = self.run.lock() {
            r.add(&cell, output_tokens, window_s);
        }
        Some(cell)
    }
}

impl Drop for NvmlSampler {
    fn drop(&mut self) {
        if let Ok(mut g) = self.tx.lock() {
            g.take();
        }
        if let Some(t) = self.thread.lock().ok().and_then(|mut g| g.take()) {
            let _ = t.join();
        }
    }
}

struct OpenWindow {
    started: Instant,
    acc: WindowAccumulator,
    energy_start_mj: Option<Vec<u64>>,
}

fn energy_mj(devs: &[nvml_wrapper::Device<'_>]) -> Option<Vec<u64>> {
    devs.iter()
        .map(|d| d.total_energy_consumption().ok())
        .collect()
}

fn sampler_loop(nvml: &Nvml, count: u32, rx: &Receiver<Command>, interval: Duration) {
    let devs: Vec<_> = (0..count)
        .filter_map(|i| nvml.device_by_index(i).ok())
        .collect();
    let mut window: Option<OpenWindow> = None;
    loop {
        let msg = match &window {
            Some(_) => rx.recv_timeout(interval),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match msg {
            Err(RecvTimeoutError::Timeout) => {
                if let Some(w) = window.as_mut() {
                    let t = w.started.elapsed().as_secs_f64();
                    w.acc.push(read_sample(&devs, t));
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Ok(Command::Start) => {
                let started = Instant::now();
                let energy_start_mj = energy_mj(&devs);
                let mut acc = WindowAccumulator::default();
                acc.push(read_sample(&devs, 0.0));
                window = Some(OpenWindow {
                    started,
                    acc,
                    energy_start_mj,
                });
            }
            Ok(Command::Finish(tokens, reply)) => {
                let out = window.take().and_then(|mut w| {
                    let t = w.started.elapsed().as_secs_f64();
                    w.acc.push(read_sample(&devs, t));
                    if let (Some(a), Some(b)) = (&w.energy_start_mj, energy_mj(&devs)) {
                        let mj: u64 = a.iter().zip(&b).map(|(a, b)| b.saturating_sub(*a)).sum();
                        w.acc.counter_energy_j = Some(mj as f64 / 1000.0);
                    }
                    w.acc.finish(tokens).map(|c| (c, t))
                });
                let _ = reply.send(out);
            }
        }
    }
}

fn throttle_names(r: nvml_wrapper::bitmasks::device::ThrottleReasons) -> Vec<String> {
    r.iter_names()
        .filter(|(n, _)| *n != "GPU_IDLE" && *n != "NONE")
        .map(|(n, _)| n.to_ascii_lowercase())
        .collect()
}

fn read_sample(devs: &[nvml_wrapper::Device<'_>], t_s: f64) -> GpuSample {
    let mut util = Vec::new();
    let mut mem_util = Vec::new();
    let mut power = Vec::new();
    let mut temp = Vec::new();
    let mut sm = Vec::new();
    let mut memclk = Vec::new();
    let mut vram = Vec::new();
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    let mut reasons = Vec::new();
    for d in devs {
        if let Ok(u) = d.utilization_rates() {
            util.push(u.gpu as f64);
            mem_util.push(u.memory as f64);
        }
        if let Ok(p) = d.power_usage() {
            power.push(p as f64 / 1000.0);
        }
        if let Ok(t) = d.temperature(TemperatureSensor::Gpu) {
            temp.push(t as f64);
        }
        if let Ok(c) = d.clock_info(Clock::SM) {
            sm.push(c as f64);
        }
        if let Ok(c) = d.clock_info(Clock::Memory) {
            memclk.push(c as f64);
        }
        if let Ok(m) = d.memory_info() {
            vram.push(m.used as f64 / 1_048_576.0);
        }
        if let Ok(v) = d.pcie_throughput(PcieUtilCounter::Receive) {
            rx.push(v as f64);
        }
        if let Ok(v) = d.pcie_throughput(PcieUtilCounter::Send) {
            tx.push(v as f64);
        }
        if let Ok(r) = d.current_throttle_reasons() {
            for n in throttle_names(r) {
                if !reasons.contains(&n) {
                    reasons.push(n);
                }
            }
        }
    }
    let sum = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>());
    GpuSample {
        t_s,
        gpu_util: mean(util.iter().copied()),
        mem_util: mean(mem_util.iter().copied()),
        power_w: sum(&power),
        temperature_c: temp.iter().copied().reduce(f64::max),
        sm_clock_mhz: mean(sm.iter().copied()),
        mem_clock_mhz: mean(memclk.iter().copied()),
        vram_used_mib: sum(&vram),
        pcie_rx_kib_s: sum(&rx),
        pcie_tx_kib_s: sum(&tx),
        throttle_reasons: reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampler_either_works_or_says_why() {
        match NvmlSampler::start(Duration::from_millis(100)) {
            Ok(s) => {
                assert!(!s.devices().is_empty());
                // One NVML initialisation per gate: the sampler's fingerprint is detect_hardware's.
                assert_eq!(s.hardware(), crate::telemetry::detect_hardware());
                s.start_window();
                std::thread::sleep(Duration::from_millis(350));
                let c = s.finish_window(1000).expect("a window on a GPU machine");
                assert!(c.samples >= 2, "{c:?}");
                assert_eq!(s.summary().status, "available");
            }
            Err(e) => {
                assert!(!e.reason.is_empty());
                assert!(
                    gpu_inventory().is_err() || gpu_inventory().is_ok_and(|i| i.names.is_empty())
                );
            }
        }
    }

    #[test]
    fn throttle_reason_names_are_snake_case_without_idle() {
        use nvml_wrapper::bitmasks::device::ThrottleReasons;
        let r = ThrottleReasons::GPU_IDLE
            | ThrottleReasons::SW_POWER_CAP
            | ThrottleReasons::HW_THERMAL_SLOWDOWN;
        let n = throttle_names(r);
        assert_eq!(
            n,
            vec![
                "sw_power_cap".to_string(),
                "hw_thermal_slowdown".to_string()
            ]
        );
    }
}
