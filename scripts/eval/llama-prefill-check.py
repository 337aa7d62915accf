#!/usr/bin/env python3
"""The prefill layer held against llama.cpp's own prefill counters, at contexts of 4k and more.

Issue 57's must-show: on llama.cpp's `llama-server`, at a context of at least 4k tokens, the
prefill layer's tok/s is within 5% of the server's own `llamacpp:prompt_tokens_total` /
`llamacpp:prompt_seconds_total` deltas. A measurement script, not a CI test: one cold 8k
prefill of the tiny CPU model takes seconds to tens of seconds on a busy 2-core machine.

What it does:
1. Takes `llama-server` (scripts/llama/build-llama-server.sh: built once, then cached) and a
   tiny model whose trained context holds the largest context asked for
   (scripts/llama/gen_tiny_gguf.py --ctx; by default a 256-wide 4-layer shape, so an 8k cold
   prefill is seconds, not minutes).
2. Writes a config whose engine is that server on 127.0.0.1 with `--metrics`, one slot and a
   context of 2 x the largest context, and whose suite runs the prefill layer at each context
   (`prefill_samples` cold samples each) with one short C=1 decode cell per context.
3. `infergate run` boots the server, measures, stops it. Its results.json holds, per
   context, the prefill layer's figure (the median of the cold samples' prompt tokens / TTFT)
   and the deltas of the server's two counters over the cold samples (read before the first
   and after the last, never a gauge).
4. Independently of infergate's scraping, the server's log (engine.log) has each request's
   own `prompt eval time = X ms / N tokens` (the same `t_prompt_processing` the counter adds
   up): the script pairs the one-token requests in the log with the prefill samples in
   results.json and sums those of the cold samples.

Prints, per context: infergate's prefill tok/s, the counters' tok/s, the server log's tok/s,
the client's tok/s over exactly the counted requests (sum of tokens / sum of TTFT), the ratio
infergate / counters (what the exit status holds to the tolerance), the ratio client /
counters (the same requests: what TTFT adds to the server's prompt time) and that addition per
sample in ms, and the spread of the per-sample rates. Exit 0 when every infergate / counters ratio is within the tolerance (5%), 1 when
one is not, 2 when something could not be measured (no counter, a failed run).

    scripts/eval/llama-prefill-check.py                       # contexts 4k,8k; 3 cold samples
    scripts/eval/llama-prefill-check.py --contexts 4k,8k,16k --samples 5
    INFERGATE=target/release/infergate scripts/eval/llama-prefill-check.py
    scripts/eval/llama-prefill-check.py --report /tmp/check   # the table of a kept --out run

Environment: INFERGATE (the binary; default target/release/infergate, else target/debug),
LLAMA_SERVER (skip the build script), INFERGATE_CACHE (as the llama scripts).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# llama-server's per-request timing lines (print_timings).
PROMPT_EVAL = re.compile(r"prompt eval time =\s*([0-9.]+) ms /\s*([0-9]+) tokens")
EVAL = re.compile(r"(?<!prompt )eval time =\s*([0-9.]+) ms /\s*([0-9]+) tokens")


def die(code: int, msg: str) -> None:
    print(f"llama-prefill-check: {msg}", file=sys.stderr)
    sys.exit(code)


def context_tokens(label: str) -> int:
    label = label.strip().lower()
    return int(label[:-1]) * 1024 if label.endswith("k") else int(label)


def last_line(cmd: list[str]) -> str:
    out = subprocess.run(cmd, cwd=REPO, check=False, stdout=subprocess.PIPE, text=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        die(2, f"{' '.join(cmd)} failed (exit {out.returncode})")
    return lines[-1]


def infergate_binary() -> str:
    if os.environ.get("INFERGATE"):
        return os.environ["INFERGATE"]
    for profile in ("release", "debug"):
        path = REPO / "target" / profile / "infergate"
        if path.exists():
            return str(path)
    die(2, "no infergate binary: `cargo build --release` first, or set INFERGATE")
    return ""


def write_config(dir: Path, a, contexts: list[str], server: str, model: str) -> Path:
    largest = max(context_tokens(c) for c in contexts)
    n_ctx = 2 * largest
    isolation = 'isolation = "off"\n' if os.geteuid() == 0 else ""
    # Under root the gate runs the engine as uid 65534 (docs/security.md), which cannot reach
    # the build and model in root's own cache; this script measures llama.cpp, not isolation.
    text = f"""model = "tiny-llama"

[engine]
{isolation}command = ["{server}", "-m", "{model}", "--alias", "{{model}}", "--host", "{{host}}", "--port", "{{port}}", "-t", "{a.threads}", "-np", "1", "-c", "{n_ctx}", "--metrics", "--no-webui"]
name = "llamacpp"
readiness_timeout = "120s"
stop_grace = "5s"

[suites.check]
description = "the prefill layer at each context, one short C=1 decode cell per context"
concurrency = [1]
contexts = [{", ".join(f'"{c}"' for c in contexts)}]
duration = "1s"
warmup = "0.5s"
ready_stable = "0.5s"
max_tokens = 8
sub_windows = 2
prefill_samples = {a.samples}
prefill_max_context = {largest}
request_timeout = "600s"
ready_timeout = "600s"

[baseline]
dir = "baselines"
"""
    path = dir / "llama-prefill-check.toml"
    path.write_text(text)
    return path


def one_token_requests(log: str) -> list[tuple[float, int]]:
    """(prompt ms, prompt tokens) of every request that prefilled more than 64 tokens and
    generated one, in log order: the prefill samples (a decode request repeats a cached prompt
    and prefills one token; one cut off by its window's end may have generated one)."""
    out = []
    pending = None
    for line in log.splitlines():
        if m := PROMPT_EVAL.search(line):
            pending = (float(m.group(1)), int(m.group(2)))
        elif (m := EVAL.search(line)) and pending is not None:
            if int(m.group(2)) == 1 and pending[1] > 64:
                out.append(pending)
            pending = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", default="4k,8k", help="contexts, each >= 4k (default 4k,8k)")
    ap.add_argument("--samples", type=int, default=3, help="cold samples per context")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=2, help="llama-server -t")
    ap.add_argument("--shape", default="--width 256 --layers 4 --ff 768 --heads 4",
                    help="gen_tiny_gguf.py shape flags (default: 256 wide, 4 layers)")
    ap.add_argument("--out", help="keep the run here (default: a temporary directory)")
    ap.add_argument("--report", metavar="DIR",
                    help="only read the run kept in DIR (an earlier --out) and print its table")
    a = ap.parse_args()
    if a.report:
        sys.exit(report(Path(a.report), a.tolerance, None, "(kept run)"))
    contexts = [c.strip() for c in a.contexts.split(",") if c.strip()]
    if not contexts or min(context_tokens(c) for c in contexts) < 4096:
        ap.error("every context must be at least 4k (4096 tokens)")
    if a.samples < 1:
        ap.error("--samples must be at least 1")

    server = os.environ.get("LLAMA_SERVER") or last_line(
        ["scripts/llama/build-llama-server.sh"])
    py = last_line(["scripts/llama/build-llama-server.sh", "--print-venv"])
    trained = 2 * max(context_tokens(c) for c in contexts)
    model = last_line([py, "scripts/llama/gen_tiny_gguf.py", "--ctx", str(trained),
                       *a.shape.split()])
    binary = infergate_binary()

    work = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="llama-prefill-check-"))
    work.mkdir(parents=True, exist_ok=True)
    config = write_config(work, a, contexts, server, model)
    out = work / "run"
    # An empty store: the run has no baseline to compare with, which is all this needs.
    (work / "baselines").mkdir(exist_ok=True)
    print(f"llama-prefill-check: {binary} run --config {config} (model {Path(model).name})",
          file=sys.stderr)
    run = subprocess.run(
        [binary, "run", "--config", str(config), "--suite", "check", "--out", str(out),
         "--baseline-dir", str(work / "baselines")],
        cwd=REPO, env={k: v for k, v in os.environ.items()
                       if k not in ("GITHUB_ACTIONS", "GITHUB_TOKEN")},
    )
    results_path = out / "results.json"
    records = (json.loads(results_path.read_text()).get("prefill") or []
               if results_path.exists() else [])
    if len(records) != len(contexts):
        die(2, f"infergate run exited {run.returncode} with {len(records)} prefill records "
               f"for {len(contexts)} contexts ({results_path})")
    sys.exit(report(work, a.tolerance, run.returncode,
                    f"llama-server {Path(server).parent.parent.name}, model {Path(model).name}, "
                    f"-t {a.threads}, {a.samples} cold samples per context, load average "
                    f"after the run {os.getloadavg()[0]:.1f}"))


def report(work: Path, tolerance: float, code: int | None, what: str) -> int:
    """Prints the table of the run kept in `work`; its exit status."""
    out = work / "run"
    results_path = out / "results.json"
    if not results_path.exists():
        die(2, f"no {results_path}")
    records = json.loads(results_path.read_text()).get("prefill") or []
    if not records:
        die(2, f"no prefill record in {results_path} (infergate run exited {code})")

    # The server's own per-request prompt times, in the order the samples were sent.
    log_requests = one_token_requests((out / "engine.log").read_text(errors="replace"))
    samples = [s for r in records for s in r["samples"]]
    by_log = log_requests if len(log_requests) == len(samples) else None
    if by_log is None:
        print(f"llama-prefill-check: engine.log has {len(log_requests)} one-token requests, "
              f"results.json {len(samples)} prefill samples: no log column", file=sys.stderr)

    print(f"\n{what}")
    header = ("context", "tokens", "infergate tok/s", "counters tok/s", "server log tok/s",
              "client sum tok/s", "infergate/counters", "client/counters",
              "TTFT - prompt time per sample", "per-sample tok/s (min-max)")
    print(" | ".join(header))
    status = 0
    at = 0
    for r in records:
        label = f"{r['context_tokens'] // 1024}k" if r["context_tokens"] % 1024 == 0 \
            else str(r["context_tokens"])
        counters = r.get("engine_counters") or {}
        # The requests inside the counters' window: every cold sample (a cold warm-up too);
        # builds before 2026-12-05 read the counters after the warm-up (the unique ones only).
        cold = [(i, s) for i, s in enumerate(r["samples"], start=at) if s["cold"]]
        unique = [(i, s) for i, s in cold if s["kind"] == "unique"]
        moved = counters.get("prompt_tokens", 0)
        off = lambda ss: abs(sum(s["prompt_tokens"] for _, s in ss) - moved)  # noqa: E731
        unique = cold if off(cold) <= off(unique) else unique
        at += len(r["samples"])
        figure = r.get("prefill_tps")
        engine = counters.get("engine_prefill_tps")
        if r.get("error") or figure is None or engine is None:
            print(f"{label} | not measured: error {r.get('error')!r}, counters {counters!r}")
            status = max(status, 2)
            continue
        rates = [s["prefill_tps"] for _, s in unique]
        tokens = sum(s["prompt_tokens"] for _, s in unique)
        ttft = sum(s["ttft_s"] for _, s in unique)
        client = tokens / ttft if ttft > 0 else float("nan")
        log_col = "—"
        if by_log is not None:
            ms = sum(by_log[i][0] for i, _ in unique)
            n = sum(by_log[i][1] for i, _ in unique)
            log_col = f"{n / (ms / 1000):,.1f}" if ms > 0 else "—"
        ratio = figure / engine
        ok = abs(ratio - 1) <= tolerance
        if not ok:
            status = max(status, 1)
        print(f"{label} | {counters.get('prompt_tokens', 0):,.0f} | {figure:,.1f} | "
              f"{engine:,.1f} | {log_col} | {client:,.1f} | {ratio:.4f} "
              f"({(ratio - 1) * 100:+.2f}%){'' if ok else ' OUTSIDE'} | "
              f"{client / engine:.4f} | "
              f"{(ttft - counters.get('seconds', 0)) / max(len(unique), 1) * 1000:.1f} ms | "
              f"{min(rates):,.0f}-{max(rates):,.0f}")
    verdict = {0: f"within {tolerance:.0%} at every context", 1: "OUTSIDE the tolerance",
               2: "NOT MEASURED at every context"}[status]
    print(f"result: infergate's prefill tok/s vs llama-server's counters: {verdict} "
          f"(run in {work})")
    return status


if __name__ == "__main__":
    main()
