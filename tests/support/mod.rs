//! Helpers shared by the end-to-end tests that run the real `infergate run` against the
//! simulated engine: invoking the gate, reading its outputs, checking that no engine process
//! is left, and building a baseline store around a calibration run of this machine.

#![allow(dead_code)]

pub mod actions;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use infergate::baseline::BaselineStore;
use infergate::results::{CellResult, RunResults};

/// Writes `template` as `dir/NAME.toml` with `sim_args` added at the end of its `[engine]
/// command` (the first line starting `command = [`): a test's config with the simulated
/// engine's faults or speed; its path.
pub fn config_with_sim_args(
    template: &str,
    dir: &Path,
    name: &str,
    sim_args: &[&str],
) -> std::path::PathBuf {
    let extra: String = sim_args.iter().map(|a| format!(", \"{a}\"")).collect();
    let text: Vec<String> = template
        .split('\n')
        .scan(false, |done, line| {
            let hit = !*done && line.starts_with("command = [") && line.ends_with(']');
            *done |= hit;
            Some(if hit {
                format!("{}{extra}]", &line[..line.len() - 1])
            } else {
                line.to_string()
            })
        })
        .collect();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text.join("\n")).expect("write config");
    path
}

/// A JSON file of a gate's output directory (`verdict.json`, `results.json`).
pub fn read_json(out: &Path, file: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join(file)).expect(file);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file} does not parse: {e}"))
}

/// The text with its line breaks and indents folded to single spaces: console lines (errors
/// included) are wrapped at 100 columns, and a phrase a test looks for may span a break.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A small gate config on the simulated engine (3 cells, C 1/2/4 at context 0, ~1 s each), with
/// the `[profile]` hardware pinned; tests append their own tables (`[thresholds]`, ...).
pub const SMALL_SIM_CONFIG: &str = r#"model = "sim-test"

[engine]
command = ["{infergate}", "sim", "--profile", "test", "--port", "{port}", "--time-scale", "2", "--seed", "5"]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"

[profile]
hardware = "sim"

[suites.pr]
concurrency = [1, 2, 4]
contexts = ["0"]
duration = "1s"
warmup = "0.25s"
ready_stable = "0.4s"
max_tokens = 128
sub_windows = 4
"#;

/// `infergate run --config CONFIG --out OUT --baseline-dir STORE` outside GitHub Actions.
pub fn gate_command(config: &Path, out: &Path, store: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_infergate"));
    cmd.args(["run", "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .arg("--baseline-dir")
        .arg(store)
        .env_remove("GITHUB_ACTIONS");
    cmd
}

/// Runs [`gate_command`] with `EXTRA...` to its end; returns the exit code and stderr.
pub fn gate(config: &Path, out: &Path, store: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let output = gate_command(config, out, store)
        .args(extra)
        .output()
        .expect("run infergate");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// Starts [`gate_command`] with stderr piped (to follow its progress) and stdout dropped.
pub fn spawn_gate(config: &Path, out: &Path, store: &Path) -> Child {
    gate_command(config, out, store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn infergate")
}

/// Reads `lines` into `seen` up to and including the first line containing `pattern`;
/// whether it came before the end.
pub fn read_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    pattern: &str,
    seen: &mut Vec<String>,
) -> bool {
    for line in lines.by_ref() {
        let Ok(line) = line else { return false };
        let found = line.contains(pattern);
        seen.push(line);
        if found {
            return true;
        }
    }
    false
}

/// A results file written by the gate.
pub fn read_results(path: &Path) -> RunResults {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} not written: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()))
}

/// Whether no process of the group is left.
pub fn group_gone(pgid: i32) -> bool {
    matches!(
        nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// The engine's process group recorded in the results.
pub fn engine_pgid(results: &RunResults) -> i32 {
    results
        .engine_process_group()
        .expect("an engine_spawned event with the process group")
}

/// Adds `runs` baseline runs around `calib` (a run measured on this machine, so machine speed
/// cancels) with a run factor and cell terms of about 1% from a fixed sequence;
/// `cell_factor(run, cell)` scales single cells of baseline run `run` (0-based) on top (1.0 = as
/// measured).
pub fn baseline_around(
    store_dir: &Path,
    calib: &RunResults,
    runs: usize,
    cell_factor: impl Fn(usize, &CellResult) -> f64,
) {
    let store = BaselineStore::open(store_dir).expect("store");
    let z: [f64; 12] = [
        0.3, -1.1, 0.8, -0.4, 1.4, -0.9, 0.1, -0.2, 1.0, -1.3, 0.6, -0.5,
    ];
    for run in 0..runs {
        let mut r = calib.clone();
        r.run_id = format!("20260101T0000{run:02}Z-base{run}");
        let run_f = (0.01 * z[run % z.len()]).exp();
        for (k, cell) in r.cells.iter_mut().enumerate() {
            let f = run_f * (0.01 * z[(run * 3 + k + 5) % z.len()]).exp() * cell_factor(run, cell);
            cell.aggregate_tps *= f;
            for s in &mut cell.samples {
                *s *= f;
            }
        }
        store.add(&r).expect("add baseline run");
    }
}

/// Processes whose environment holds `CONTAIN_MARKER=marker` (a test's engines and whatever
/// they started).
pub fn marked(marker: &str) -> Vec<i32> {
    processes_with_env(&format!("CONTAIN_MARKER={marker}"))
}

/// Processes whose environment holds the entry `name_eq_value` (`NAME=value`): it survives
/// `setsid` and re-parenting, so it finds what a test started wherever it went.
pub fn processes_with_env(name_eq_value: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ"))
            && env
                .split(|&b| b == 0)
                .any(|kv| kv == name_eq_value.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

/// Polls `f` every 50 ms until it holds (true) or `limit` has passed (false).
pub fn eventually(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs [`SMALL_SIM_CONFIG`] (C=1,2,4 × ctx 0, ~1 s windows) with extra `infergate sim`
/// arguments and an empty store; exit code, stderr, results.
pub fn run_sim(sim_args: &[&str]) -> (Option<i32>, String, RunResults) {
    let dir = tempfile::tempdir().expect("tempdir");
    let extra: String = sim_args.iter().map(|a| format!(", \"{a}\"")).collect();
    let config_text = SMALL_SIM_CONFIG.replacen(
        "\"--seed\", \"5\"]",
        &format!("\"--seed\", \"5\"{extra}]"),
        1,
    );
    assert!(
        sim_args.is_empty() || config_text != SMALL_SIM_CONFIG,
        "the sim command line was extended"
    );
    let config = dir.path().join("gate.toml");
    std::fs::write(&config, config_text).expect("write config");
    let out = dir.path().join("out");
    let store = dir.path().join("baselines");
    std::fs::create_dir_all(&store).expect("store dir");
    let (code, stderr) = gate(&config, &out, &store, &[]);
    let results = read_results(&out.join("results.json"));
    (code, stderr, results)
}

/// A complete run of `config`'s `pr` suite, as `run` would record it on a CPU runner, every
/// cell at `tps` per stream (with a little sub-window jitter): results for the subcommands that
/// judge recorded runs (`compare`, `report --trusted-config`, `merge`) without booting anything.
pub fn measured(config: &Path, run_id: &str, tps: f64) -> RunResults {
    use chrono::TimeZone;
    use infergate::results::{
        CellStatus, EngineIdentity, HardwareFingerprint, ProfileKey, ResultsSource, RunStatus,
        ToolInfo,
    };
    let cfg = infergate::config::GateConfig::load(config).unwrap();
    let suite = cfg.suite(Some("pr")).unwrap().clone();
    let model = cfg.model.clone().unwrap();
    let matrix = suite.matrix_spec(&model);
    let hardware = cfg.profile.hardware(HardwareFingerprint {
        kind: "cpu".into(),
        gpu_model: None,
        gpu_count: 0,
        driver_version: None,
        cpu_model: Some("test".into()),
    });
    let engine = cfg.engine.name.clone().unwrap();
    let profile = ProfileKey::derive(hardware, &engine, &model, &matrix);
    let jitter = [0.996, 1.003, 0.999, 1.002];
    let cells = suite
        .contexts
        .iter()
        .flat_map(|&l| suite.concurrency.iter().map(move |&c| (c, l)))
        .map(|(c, l)| {
            let mut cell = CellResult::unmeasured(c, l, CellStatus::Ok, "");
            cell.reason = None;
            cell.aggregate_tps = tps * c as f64;
            cell.samples = jitter.iter().map(|j| j * cell.aggregate_tps).collect();
            cell.output_tokens = (cell.aggregate_tps * 1.0) as u64;
            cell.measured_s = 1.0;
            cell
        })
        .collect();
    RunResults {
        schema_version: 1,
        tool: ToolInfo {
            name: "infergate".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        run_id: run_id.into(),
        suite: Some("pr".into()),
        started_at: chrono::Utc.with_ymd_and_hms(2026, 11, 2, 10, 0, 0).unwrap(),
        finished_at: None,
        status: RunStatus::Complete,
        status_reason: None,
        profile,
        engine: EngineIdentity {
            name: engine,
            ..Default::default()
        },
        matrix,
        cells,
        telemetry: None,
        events: Vec::new(),
        source: ResultsSource::Infergate,
        labels: std::collections::BTreeMap::new(),
        prefill: Vec::new(),
        burst: None,
        gate_failure: None,
    }
}

/// What [`gate_in_process`] gave back: the exit code, the progress events as `kind: message`
/// lines (what the binary's progress shows on stderr), and the run (or why it aborted).
pub struct InProcessGate {
    pub code: i32,
    pub events: String,
    pub run: Result<infergate::run::gate::GateRun, String>,
}

/// [`gate`] without the binary: `infergate run --config CONFIG --out OUT --baseline-dir STORE
/// EXTRA...` (`EXTRA`: `--update-baseline`, `--engine-arg=ARG`) as the whole gate
/// (`GatePlan::run`: boots, judge, store, reports written) in this process, against the
/// simulated engine in process (`cli::sim_engine::InProcessSim`, its flags from the config's
/// `[engine] command`). For tests of the pipeline's logic; tests of process semantics
/// (teardown, signals, isolation) run the binary.
pub fn gate_in_process(config: &Path, out: &Path, store: &Path, extra: &[&str]) -> InProcessGate {
    use infergate::run::gate::{GatePlan, ProgressSink};
    use infergate::run::{Design, GateRequest};
    use std::sync::{Arc, Mutex};

    let mut update_baseline = false;
    let mut engine_args = Vec::new();
    for arg in extra {
        match arg.strip_prefix("--engine-arg=") {
            Some(a) => engine_args.push(a.to_string()),
            None if *arg == "--update-baseline" => update_baseline = true,
            None => panic!("gate_in_process does not take {arg}"),
        }
    }
    let request = GateRequest {
        config: infergate::config::GateConfig::load(config).expect("config loads"),
        suite: None,
        design: Design::Baseline { update_baseline },
        out: out.to_path_buf(),
        baseline_dir: Some(store.to_path_buf()),
        github: false,
        engine_args,
        labels: Default::default(),
    };
    let mut plan = GatePlan::new(request).expect("a valid gate");
    plan.boot = Arc::new(infergate::cli::sim_engine::InProcessSim);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let progress = |_cells: u64| {
        let (events, mut rx) = tokio::sync::mpsc::unbounded_channel::<infergate::results::Event>();
        let seen = seen.clone();
        let done = tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                let line = format!("{}: {}", e.kind.as_str(), e.message);
                seen.lock().expect("events").push(line);
            }
        });
        ProgressSink { events, done }
    };
    // As the binary runs the gate: one thread (the in-process engine has its own runtime).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = runtime.block_on(plan.run(&progress, tokio_util::sync::CancellationToken::new()));
    drop(runtime);
    let events = seen.lock().expect("events").join("\n");
    match run {
        Ok(run) => InProcessGate {
            code: i32::from(run.ending.exit.code()),
            events,
            run: Ok(run),
        },
        Err(abort) => InProcessGate {
            code: 3,
            events,
            run: Err(abort.error.to_string()),
        },
    }
}
