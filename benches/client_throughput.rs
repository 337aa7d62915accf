//! Client efficiency benchmark: how many streamed tokens per second the measurement client
//! ingests and time-stamps, what it costs in CPU and memory, and whether its count matches the
//! engine's own counter. Drives `infergate sim --profile zero` (zero step time: the engine
//! emits as fast as the client reads) with `BenchSession::measure_cell` in this process.
//!
//! Run: `cargo bench --bench client_throughput`

// Dependencies are checked by the library target; this target uses only a few of them.
#![allow(unused_crate_dependencies)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use infergate::bench::{BenchOptions, BenchSession, BenchTarget};
use infergate::results::MatrixSpec;
use tokio_util::sync::CancellationToken;

struct Sim(Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU seconds (user + system) of this process only, and peak RSS in MiB.
fn rusage() -> (f64, f64) {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return (f64::NAN, f64::NAN);
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_maxrss as f64 / 1024.0,
    )
}

fn generation_total(metrics: &str) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| l.starts_with("vllm:generation_tokens_total"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .reduce(|a, b| a + b)
}

async fn engine_tokens(url: &str) -> Option<f64> {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    generation_total(&text)
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port_file = dir.path().join("port");
    let child = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["sim", "--profile", "zero", "--port", "0", "--port-file"])
        .arg(&port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start infergate sim");
    let _sim = Sim(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    let port: u16 = loop {
        if let Some(p) = std::fs::read_to_string(&port_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "sim did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let url = format!("http://127.0.0.1:{port}");
    let duration_s: f64 = std::env::var("CLIENT_BENCH_DURATION_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5.0);
    let levels = [1u32, 32, 256];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _ = rustls::crypto::ring::default_provider().install_default();
    rt.block_on(async {
        let matrix = MatrixSpec {
            model: String::new(),
            concurrency: levels.to_vec(),
            contexts: vec![0],
            timing: infergate::results::CellTiming {
                duration_s,
                warmup_s: 1.0,
                max_tokens: 4096,
                unique_context_percent: 25.0,
                sub_windows: 5,
                ..infergate::results::CellTiming::DEFAULT
            },
            repetitions: 1,
        };
        let mut opts = BenchOptions::new(matrix, infergate::telemetry::detect_hardware());
        opts.matrix.timing.ready_stable_s = 0.5;
        let target = BenchTarget {
            base_url: url.clone(),
            model: None,
            api_key: None,
        };
        let session = BenchSession::connect(&target, &opts, None)
            .await
            .expect("connect to the sim");
        let cancel = CancellationToken::new();
        let (_, rss0) = rusage();
        println!("client peak RSS before the first cell (runtime, HTTP client): {rss0:.1} MiB");
        println!(
            "{:>8} {:>14} {:>14} {:>8} {:>18} {:>12} {:>8}",
            "streams",
            "client tok/s",
            "engine tok/s",
            "diff %",
            "CPU-s / 1k tokens",
            "peak MiB",
            "status"
        );
        for c in levels {
            let e0 = engine_tokens(&url).await;
            let (cpu0, _) = rusage();
            let cell = session.measure_cell(c, 0, &cancel).await;
            let (cpu1, peak) = rusage();
            let e1 = engine_tokens(&url).await;
            // Tokens streamed to this client during the whole cell (readiness, warm-up,
            // window): the engine's count, scaled down by the client/engine ratio of the
            // window when the engine ran ahead of what it delivered (conservative).
            let ratio = cell
                .server_tps
                .map(|s| (cell.aggregate_tps / s).min(1.0))
                .unwrap_or(1.0);
            let streamed = match (e0, e1) {
                (Some(a), Some(b)) => (b - a) * ratio,
                _ => f64::NAN,
            };
            let per_k = (cpu1 - cpu0) / (streamed / 1000.0);
            let server = cell.server_tps.unwrap_or(f64::NAN);
            println!(
                "{:>8} {:>14.0} {:>14.0} {:>8.2} {:>18.5} {:>12.1} {:>8?}",
                c,
                cell.aggregate_tps,
                server,
                (cell.aggregate_tps / server - 1.0) * 100.0,
                per_k,
                peak,
                cell.status
            );
        }
    });
}
