//! `infergate doctor` on this machine: NVML availability (and why not), engine reachability,
//! booting a config's engine; always exit 0.

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use infergate_schema::asserts::{assert_contains, assert_ends_with};
use std::process::Command;

fn doctor(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("doctor")
        .args(args)
        .output()
        .expect("run doctor");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn doctor_json_reports_nvml_availability_with_a_reason() {
    let (code, stdout, stderr) = doctor(&["--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let nvml = &v["nvml"];
    let available = nvml["available"].as_bool().expect("nvml.available");
    if available {
        assert!(!v["gpus"].as_array().expect("gpus").is_empty());
        assert_eq!(v["hardware"]["kind"], "gpu");
        assert!(
            v["gpus"][0]["pcie_link_gen_max"].is_number()
                || v["gpus"][0]["pcie_link_gen_max"].is_null()
        );
    } else {
        // This machine (CI, the dev container) has no NVIDIA driver.
        let reason = nvml["reason"].as_str().expect("a reason when unavailable");
        assert!(!reason.is_empty());
        assert_eq!(v["hardware"]["kind"], "cpu");
        assert_eq!(v["gpus"].as_array().map(Vec::len), Some(0));
    }
    assert!(v["cpu_cores"].as_u64().is_some_and(|n| n > 0));
    assert!(v["engine"].is_null());
    // The host-lateness probe ran for its second (how many ~1.2 ms cycles fit in it depends on
    // how busy the host is; none is negative).
    let late = &v["host_lateness_s"];
    assert!(late["count"].as_u64().is_some_and(|n| n >= 1), "{late}");
    let (p50, p99) = (late["p50"].as_f64(), late["p99"].as_f64());
    assert!(
        p50.zip(p99).is_some_and(|(a, b)| 0.0 <= a && a <= b),
        "{late}"
    );
}

#[test]
fn doctor_text_says_why_nvml_is_unavailable_and_reports_an_unreachable_engine() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let url = format!("http://127.0.0.1:{port}");
    let (code, stdout, stderr) = doctor(&["--url", &url]);
    assert_eq!(code, 0, "{stderr}");
    assert_contains(&stdout, "NVML:");
    assert_contains(&stdout, "Host:    the gate's probe ran ");
    assert_contains(&stdout, "NOT reachable");
    assert_contains(&stdout, "connection refused");
    let (code, _, stderr) = doctor(&["--url", "localhost:8000"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn doctor_with_a_config_boots_checks_and_stops_the_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gate.toml");
    std::fs::write(
        &cfg,
        r#"[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}"]
readiness_timeout = "20s"

[suites.pr]
concurrency = [1]
contexts = ["0"]
"#,
    )
    .expect("write config");
    let cfg_s = cfg.display().to_string();
    let (code, stdout, stderr) = doctor(&["--format", "json", "--config", &cfg_s]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(v["engine_boot"]["ready"], true, "{stdout}");
    assert_eq!(v["engine_boot"]["teardown_clean"], true, "{stdout}");
    assert_eq!(v["engine"]["reachable"], true, "{stdout}");
    assert_eq!(v["engine"]["metrics_flavor"], "vllm", "{stdout}");
    assert_eq!(v["engine"]["models"][0], "sim-test", "{stdout}");
}

/// A config whose engine program does not exist: the report says so with `run`'s message
/// (checked before booting), and nothing is booted.
#[test]
fn doctor_reports_an_engine_program_that_does_not_exist_without_booting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gate.toml");
    std::fs::write(
        &cfg,
        "[engine]\ncommand = [\"/nonexistent/bin/vllm\", \"--port\", \"{port}\"]\n\n[suites.pr]\nconcurrency = [1]\ncontexts = [\"0\"]\n",
    )
    .expect("write config");
    let cfg_s = cfg.display().to_string();
    let (code, stdout, stderr) = doctor(&["--format", "json", "--config", &cfg_s]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(v["engine_boot"]["ready"], false, "{stdout}");
    let error = v["engine_boot"]["error"].as_str().unwrap_or_default();
    assert_ends_with(
        error,
        "gate.toml: [engine] command: its program `/nonexistent/bin/vllm` does not exist: correct the path (an absolute one, or set [engine] workdir)",
    );
    assert_eq!(
        v["engine_boot"]["teardown_clean"],
        serde_json::Value::Null,
        "{stdout}"
    );
}
