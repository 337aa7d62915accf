//! What `infergate doctor` reports about the runner: GPUs, driver, PCIe links, NVML
//! availability (and why not), CPU, and whether the engine answers. Gathering is here; the CLI
//! only prints, as text or JSON.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use infergate_measure::bench::lateness::sample;
use infergate_model::stats::DecisionRule;
use infergate_report::report::console::wrap_labelled;
use infergate_schema::results::{HardwareFingerprint, Percentiles};
use infergate_schema::verdict::Metric;
use infergate_telemetry::telemetry::nvml::{GpuDetails, gpu_details};

/// Whether NVML works here.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct NvmlStatus {
    pub available: bool,
    /// Why not, when unavailable.
    pub reason: Option<String>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
}

impl NvmlStatus {
    fn unavailable(reason: String) -> NvmlStatus {
        NvmlStatus {
            reason: Some(reason),
            ..NvmlStatus::default()
        }
    }
}

/// The answer of one engine endpoint.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct EndpointCheck {
    pub path: String,
    /// HTTP status, when it answered.
    pub status: Option<u16>,
    /// Transport error, when it did not.
    pub error: Option<String>,
}

impl EndpointCheck {
    fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Reachability of the engine at a URL.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct EngineCheck {
    pub url: String,
    /// `/health` answered 2xx and `/v1/models` listed a model.
    pub reachable: bool,
    pub health: EndpointCheck,
    pub models_endpoint: EndpointCheck,
    pub models: Vec<String>,
    pub version: Option<String>,
    pub metrics_endpoint: EndpointCheck,
    /// `vllm`, `sglang`, `llamacpp`, or `unknown` when `/metrics` answered in another dialect.
    pub metrics_flavor: Option<String>,
}

/// Everything `doctor` reports.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DoctorReport {
    pub tool_version: String,
    /// The fingerprint the profile key would use on this machine.
    pub hardware: HardwareFingerprint,
    pub cpu_model: Option<String>,
    pub cpu_cores: Option<usize>,
    pub nvml: NvmlStatus,
    pub gpus: Vec<GpuDetails>,
    /// Present when `--url` was given, or `--config` booted the engine.
    pub engine: Option<EngineCheck>,
    /// Present when `--config` was given: whether the configured engine command booted.
    pub engine_boot: Option<BootCheck>,
    /// How late this host ran the gate's probe thread over one second, seconds: the figure a
    /// run records per cell (`host_lateness_s`), whose p99 must stay under a share of a tail
    /// latency for the gate to vouch for it.
    pub host_lateness_s: Option<Percentiles>,
}

/// Outcome of booting the configured engine (`doctor --config`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BootCheck {
    /// The command line (environment values not shown).
    pub command: String,
    pub ready: bool,
    /// Seconds until `/health` and `/v1/models` answered.
    pub boot_s: Option<f64>,
    /// Why it did not become ready.
    pub error: Option<String>,
    /// Whether teardown left no process of the engine's group behind.
    pub teardown_clean: Option<bool>,
}

/// Gathers the report; probes the engine at `engine_url` when given.
pub(crate) async fn gather(engine_url: Option<&str>) -> DoctorReport {
    let (nvml, gpus) = match tokio::task::spawn_blocking(gpu_details).await {
        Ok(Ok((inv, gpus))) => (
            NvmlStatus {
                available: !inv.names.is_empty(),
                reason: inv
                    .names
                    .is_empty()
                    .then(|| "NVML is installed but reports no GPU".to_string()),
                driver_version: inv.driver_version,
                cuda_driver_version: inv.cuda_driver_version,
                nvml_version: inv.nvml_version,
            },
            gpus,
        ),
        Ok(Err(e)) => (NvmlStatus::unavailable(e.reason), Vec::new()),
        Err(e) => {
            let why = format!("the NVML probe crashed: {e}");
            (NvmlStatus::unavailable(why), Vec::new())
        }
    };
    let hardware = tokio::task::spawn_blocking(infergate_telemetry::telemetry::detect_hardware)
        .await
        .unwrap_or_else(|_| HardwareFingerprint {
            kind: "cpu".into(),
            gpu_model: None,
            gpu_count: 0,
            driver_version: None,
            cpu_model: infergate_telemetry::telemetry::cpu_model(),
        });
    let lateness = tokio::task::spawn_blocking(|| sample(Duration::from_secs(1)));
    let engine = match engine_url {
        Some(u) => Some(check_engine(u).await),
        None => None,
    };
    DoctorReport {
        tool_version: env!("CARGO_PKG_VERSION").into(),
        cpu_model: infergate_telemetry::telemetry::cpu_model(),
        cpu_cores: std::thread::available_parallelism().ok().map(|n| n.get()),
        hardware,
        nvml,
        gpus,
        engine,
        engine_boot: None,
        host_lateness_s: lateness.await.ok().flatten(),
    }
}

/// One GET: its status and body, or why there was none (the client's error when it could not
/// be built).
async fn get(http: &Result<reqwest::Client, String>, url: &str) -> (EndpointCheck, String) {
    let path = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
        .unwrap_or_else(|| "/".into());
    let failed = |error: String| EndpointCheck {
        path: path.clone(),
        status: None,
        error: Some(error),
    };
    let sent = match http {
        Ok(http) => http.get(url).send().await,
        Err(e) => return (failed(e.clone()), String::new()),
    };
    match sent {
        Ok(r) => {
            let status = Some(r.status().as_u16());
            let body = r.text().await.unwrap_or_default();
            (
                EndpointCheck {
                    path,
                    status,
                    error: None,
                },
                body,
            )
        }
        Err(e) if e.is_connect() => (failed("connection refused".into()), String::new()),
        Err(e) if e.is_timeout() => (failed("timed out".into()), String::new()),
        Err(e) => (failed(e.to_string()), String::new()),
    }
}

/// Which engine's metric names a Prometheus page uses.
fn metrics_flavor(page: &str) -> String {
    let has = |p: &str| {
        page.lines()
            .any(|l| !l.starts_with('#') && l.starts_with(p))
    };
    let named = [
        ("vllm:", "vllm"),
        ("sglang:", "sglang"),
        ("llamacpp:", "llamacpp"),
        ("trtllm_", "trtllm"),
    ];
    match named.iter().find(|(prefix, _)| has(prefix)) {
        Some((_, name)) => name,
        // trtllm-serve: `/metrics` is JSON iteration stats; Prometheus is at
        // `/prometheus/metrics`, only with `return_perf_metrics`.
        None if infergate_measure::bench::identify::is_trtllm_iteration_stats(page) => {
            "trtllm-iteration-stats"
        }
        None => "unknown",
    }
    .into()
}

/// Probes `/health`, `/v1/models`, `/version` and `/metrics` of an engine.
pub(crate) async fn check_engine(url: &str) -> EngineCheck {
    let base = url
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let http = infergate_engine::engine::probe_client(Duration::from_secs(5))
        .map_err(|e| format!("cannot build the HTTP client: {e}"));
    let (health, _) = get(&http, &format!("{base}/health")).await;
    let (models_endpoint, body) = get(&http, &format!("{base}/v1/models")).await;
    let models = infergate_measure::bench::parse_model_ids(&body).unwrap_or_default();
    let (version_check, vbody) = get(&http, &format!("{base}/version")).await;
    let version = version_check.ok().then(|| {
        serde_json::from_str::<serde_json::Value>(&vbody)
            .ok()
            .and_then(|v| {
                v.get("version")
                    .and_then(|x| x.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| vbody.trim().chars().take(80).collect())
    });
    let (metrics_endpoint, mbody) = get(&http, &format!("{base}/metrics")).await;
    let mut metrics_flavor = metrics_endpoint.ok().then(|| metrics_flavor(&mbody));
    if metrics_flavor.as_deref() == Some("trtllm-iteration-stats") {
        // With `return_perf_metrics` the Prometheus page is beside it.
        let (prom, pbody) = get(&http, &format!("{base}/prometheus/metrics")).await;
        if prom.ok() && self::metrics_flavor(&pbody) == "trtllm" {
            metrics_flavor = Some("trtllm".into());
        }
    }
    EngineCheck {
        url: base,
        reachable: (health.ok() || health.status == Some(404))
            && models_endpoint.ok()
            && !models.is_empty(),
        health,
        models_endpoint,
        models,
        version,
        metrics_endpoint,
        metrics_flavor,
    }
}

/// A value, or `-` when there is none.
fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".into(), ToString::to_string)
}

fn endpoint(e: &EndpointCheck) -> String {
    match (e.status, &e.error) {
        (Some(s), _) => format!("HTTP {s}"),
        (None, Some(err)) => err.clone(),
        (None, None) => "-".into(),
    }
}

/// The report as text for people.
pub(crate) fn render_text(r: &DoctorReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "infergate {}", r.tool_version);
    let _ = writeln!(
        s,
        "CPU:     {} ({} cores)",
        opt(&r.cpu_model),
        opt(&r.cpu_cores)
    );
    if r.nvml.available {
        let _ = writeln!(
            s,
            "NVML:    available (NVML {}, driver {}, CUDA {})",
            opt(&r.nvml.nvml_version),
            opt(&r.nvml.driver_version),
            opt(&r.nvml.cuda_driver_version)
        );
    } else {
        let line = format!(
            "unavailable: {} (GPU telemetry will be marked unavailable; runs still work)",
            opt(&r.nvml.reason)
        );
        let _ = writeln!(s, "{}", wrap_labelled("NVML:    ", &line));
    }
    if r.gpus.is_empty() {
        let _ = writeln!(s, "GPUs:    none");
    }
    for g in &r.gpus {
        let _ = writeln!(
            s,
            "GPU {}:   {} [{}] {} MiB, PCIe gen {}/{} x{}/x{} (current/max), power limit {} W, {} °C, energy counter {}",
            g.index,
            opt(&g.name),
            opt(&g.pci_bus_id),
            g.memory_total_mib.map_or("-".into(), |m| format!("{m:.0}")),
            opt(&g.pcie_link_gen_current),
            opt(&g.pcie_link_gen_max),
            opt(&g.pcie_link_width_current),
            opt(&g.pcie_link_width_max),
            g.power_limit_w.map_or("-".into(), |w| format!("{w:.0}")),
            opt(&g.temperature_c),
            if g.energy_counter { "yes" } else { "no" }
        );
    }
    let hw = &r.hardware;
    let _ = writeln!(
        s,
        "Profile: {} (hardware part of the baseline profile key)",
        match (&hw.gpu_model, hw.kind.as_str()) {
            (Some(m), "gpu") => format!("gpu {m} x{}", hw.gpu_count),
            _ => format!("cpu {}", opt(&hw.cpu_model)),
        }
    );
    if let Some(p) = &r.host_lateness_s {
        let line = format!(
            "the gate's probe ran {:.2} ms late at p99 over 1 s (median {:.2} ms): a run vouches for a cell's tail latency only where its probe stays under a share of it (a fifth for a p99 at +50%), so as busy as now, for no such p99 shorter than {:.1} ms",
            1e3 * p.p99,
            1e3 * p.p50,
            1e3 * p.p99 / DecisionRule::default().host_late_share(Metric::ItlP99),
        );
        let _ = writeln!(s, "{}", wrap_labelled("Host:    ", &line));
    }
    if let Some(b) = &r.engine_boot {
        write_boot(&mut s, b);
    }
    if let Some(e) = &r.engine {
        write_engine(&mut s, e);
    }
    // The boot error quotes the engine's log tail, the GPU names are the driver's: inert
    // before they reach the Actions log.
    infergate_io::untrusted_text::console(&s)
}

/// The engine's boot: how long it took (or that it failed, with the error) and its teardown.
fn write_boot(s: &mut String, b: &BootCheck) {
    let _ = writeln!(
        s,
        "Boot:    {} {}",
        if b.ready {
            format!(
                "ready after {}",
                infergate_schema::results::duration_label(b.boot_s.unwrap_or(0.0))
            )
        } else {
            "FAILED".to_string()
        },
        b.command
    );
    if let Some(err) = &b.error {
        for line in err.lines() {
            let _ = writeln!(s, "  {line}");
        }
    }
    if b.teardown_clean == Some(false) {
        let _ = writeln!(
            s,
            "  warning: processes of the engine's group survived teardown"
        );
    }
}

/// The engine's endpoints, as reached.
fn write_engine(s: &mut String, e: &EngineCheck) {
    let _ = writeln!(
        s,
        "Engine:  {} {}",
        e.url,
        if e.reachable {
            "reachable"
        } else {
            "NOT reachable"
        }
    );
    let _ = writeln!(s, "  /health     {}", endpoint(&e.health));
    let _ = writeln!(
        s,
        "  /v1/models  {}{}",
        endpoint(&e.models_endpoint),
        if e.models.is_empty() {
            String::new()
        } else {
            format!(" ({})", e.models.join(", "))
        }
    );
    let _ = writeln!(s, "  /version    {}", opt(&e.version));
    let _ = writeln!(
        s,
        "  /metrics    {}{}",
        endpoint(&e.metrics_endpoint),
        e.metrics_flavor
            .as_ref()
            .map_or(String::new(), |f| format!(" (flavour: {f})"))
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;

    #[test]
    fn metrics_flavor_is_detected_from_names() {
        for (text, flavor) in [
            ("# HELP x\nvllm:num_requests_running 1\n", "vllm"),
            ("sglang:num_running_reqs 2\n", "sglang"),
            ("llamacpp:requests_processing 0\n", "llamacpp"),
            ("process_cpu_seconds_total 3\n", "unknown"),
            ("trtllm_num_requests_running 2\n", "trtllm"),
            (
                r#"[{"iter":3,"numActiveRequests":2}]"#,
                "trtllm-iteration-stats",
            ),
        ] {
            assert_eq!(metrics_flavor(text), flavor, "{text}");
        }
    }

    #[tokio::test]
    async fn unreachable_engine_is_reported_not_fatal() {
        let port = infergate_engine::engine::free_port("127.0.0.1").expect("port");
        let e = check_engine(&format!("http://127.0.0.1:{port}/v1")).await;
        assert!(!e.reachable);
        assert_eq!(e.url, format!("http://127.0.0.1:{port}"));
        assert!(e.health.error.is_some());
        let text = render_text(&without_nvml(Some(e), None));
        assert_contains(&text, "NVML:    unavailable: no driver");
        assert_contains(&text, "NOT reachable");
    }

    #[test]
    fn a_boot_errors_log_tail_issues_no_workflow_command() {
        let text = render_text(&without_nvml(
            None,
            Some(BootCheck {
                command: "engine".into(),
                ready: false,
                boot_s: None,
                error: Some("exited; log tail:\n::error title=pwned::forged\n##[warning]x".into()),
                teardown_clean: Some(true),
            }),
        ));
        assert_contains(&text, "pwned");
        for line in text.lines() {
            assert!(
                !line.trim_start().starts_with("::") && !line.contains("##["),
                "{line:?}\n{text}"
            );
        }
    }

    /// A report of a machine without NVML, with the given engine checks.
    fn without_nvml(engine: Option<EngineCheck>, engine_boot: Option<BootCheck>) -> DoctorReport {
        DoctorReport {
            tool_version: "0".into(),
            hardware: infergate_telemetry::telemetry::detect_hardware(),
            cpu_model: None,
            cpu_cores: Some(2),
            nvml: NvmlStatus::unavailable("no driver".into()),
            gpus: Vec::new(),
            engine,
            engine_boot,
            host_lateness_s: None,
        }
    }
}
