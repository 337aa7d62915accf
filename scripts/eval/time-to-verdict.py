#!/usr/bin/env python3
"""Engine-minutes to a verdict, two builds side by side (issue 57: "before and after the new
layers: the new layers cost at most 20% more").

For each build (a binary and the checkout whose configs and bundled baseline it reads) and
each round, interleaved (A B A B ... so a load that drifts hits both alike):
- the default config (`infergate.toml`, suite `pr`) against its bundled baseline
  (`baselines/` of that checkout), the simulated engine at time scale 1;
- `examples/ldb-rtx5090.toml` suite `pr` (the simulated engine's ldb-rtx5090 profile at
  `--time-scale 20`) against a store of `--ldb-history` runs of the same build, recorded first
  with `--update-baseline` (the store is the build's own: the prefill layer gates only on a
  history that has it).

Time to a verdict = the wall time of `infergate run`, from its start (the engine boots at once)
to its exit after the verdict, which covers every boot (the confirmation boot when the plan
takes one) and the re-measure rounds; engine time = that × the engine's time scale. Also
printed: the boots taken and the matrix time (results*.json `started_at` → `finished_at`,
summed over boots).

    scripts/eval/time-to-verdict.py --build before=/tmp/infergate-before:/work/wt/before \
        --build now=target/debug/infergate:. --runs 3 --ldb-history 10
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LDB_SCALE = 20


def parse_time(s: str) -> float:
    # 2026-12-05T20:10:25.913135030Z: keep microseconds.
    head, _, frac = s.rstrip("Z").partition(".")
    t = dt.datetime.fromisoformat(head).replace(tzinfo=dt.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def gate(binary: str, checkout: Path, config: str, out: Path, store: Path | None,
         update: bool = False) -> dict:
    cmd = [binary, "run", "--config", config, "--suite", "pr", "--out", str(out)]
    if store is not None:
        cmd += ["--baseline-dir", str(store)]
    if update:
        cmd.append("--update-baseline")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "GITHUB_TOKEN")}
    began = time.monotonic()
    run = subprocess.run(cmd, cwd=checkout, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - began
    boots, matrix = 0, 0.0
    for name in ("results.json", "results-confirm.json"):
        p = out / name
        if p.exists():
            r = json.loads(p.read_text())
            boots += 1
            if r.get("finished_at"):
                matrix += parse_time(r["finished_at"]) - parse_time(r["started_at"])
    vp = out / "verdict.json"
    verdict = json.loads(vp.read_text()).get("gate", "?") if vp.exists() else "no verdict"
    return {"code": run.returncode, "wall": wall, "boots": boots, "matrix": matrix,
            "verdict": verdict, "log": run.stdout}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", required=True,
                    help="LABEL=BINARY:CHECKOUT (twice: before and now)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ldb-history", type=int, default=10,
                    help="runs recorded into each build's ldb-rtx5090 store first")
    ap.add_argument("--work", help="keep outputs here (default: a temporary directory)")
    ap.add_argument("--skip-default", action="store_true")
    ap.add_argument("--skip-ldb", action="store_true")
    a = ap.parse_args()
    builds = []
    for spec in a.build:
        label, _, rest = spec.partition("=")
        binary, _, checkout = rest.partition(":")
        builds.append((label, str(Path(binary).resolve()), Path(checkout).resolve()))
    work = Path(a.work or tempfile.mkdtemp(prefix="time-to-verdict-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: dict[tuple[str, str], list[dict]] = {}

    def record(label: str, what: str, r: dict, scale: int) -> None:
        r["engine_min"] = r["wall"] * scale / 60
        rows.setdefault((label, what), []).append(r)
        print(f"{label:>8} {what:<22} exit {r['code']} {r['boots']} boot(s) wall {r['wall']:6.1f} s "
              f"matrix {r['matrix']:6.1f} s = {r['engine_min']:6.2f} engine-min, {r['verdict']}",
              flush=True)

    if not a.skip_ldb:
        for label, binary, checkout in builds:
            store = work / f"ldb-store-{label}"
            shutil.rmtree(store, ignore_errors=True)
            for i in range(a.ldb_history):
                r = gate(binary, checkout, "examples/ldb-rtx5090.toml", work / f"hist-{label}-{i}",
                         store, update=True)
                print(f"{label:>8} ldb history {i + 1}/{a.ldb_history}: exit {r['code']} "
                      f"wall {r['wall']:.1f} s", flush=True)
                if r["code"] not in (0,):
                    print(r["log"][-3000:], file=sys.stderr)
    for i in range(a.runs):
        for label, binary, checkout in builds:
            if not a.skip_default:
                r = gate(binary, checkout, "infergate.toml", work / f"default-{label}-{i}", None)
                record(label, "default pr (scale 1)", r, 1)
            if not a.skip_ldb:
                r = gate(binary, checkout, "examples/ldb-rtx5090.toml", work / f"ldb-{label}-{i}",
                         work / f"ldb-store-{label}")
                record(label, "ldb-rtx5090 pr (x20)", r, LDB_SCALE)

    print(f"\nload average now {os.getloadavg()}; outputs in {work}")
    print("| config | build | runs: engine-minutes (boots) | mean | matrix s (mean) | verdicts |")
    print("|---|---|---|---|---|---|")
    whats = sorted({w for _, w in rows}, key=lambda w: w)
    for what in whats:
        means = {}
        for label, _, _ in builds:
            rs = rows.get((label, what), [])
            if not rs:
                continue
            m = statistics.mean(r["engine_min"] for r in rs)
            means[label] = m
            runs = ", ".join(f"{r['engine_min']:.2f} ({r['boots']})" for r in rs)
            verdicts = ", ".join(f"{r['verdict']} (exit {r['code']})" for r in rs)
            print(f"| {what} | {label} | {runs} | {m:.2f} | "
                  f"{statistics.mean(r['matrix'] for r in rs):.1f} | "
                  f"{verdicts} |")
        if len(means) == 2:
            (la, ma), (lb, mb) = list(means.items())
            print(f"| {what} | {lb} / {la} | | {mb / ma:.3f} ({(mb / ma - 1) * 100:+.1f}%) | | |")


if __name__ == "__main__":
    main()
