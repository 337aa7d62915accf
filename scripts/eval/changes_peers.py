#!/usr/bin/env python3
"""E-Divisive means and Apache Otava on the histories `infergate changes-eval` draws.

    cargo run --release -- changes-eval --trials 200 --export-histories /tmp/histories
    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install -r scripts/eval/requirements.txt
    /tmp/peers/bin/pip install --no-deps apache-otava==0.8.0
    /tmp/peers/bin/python scripts/eval/changes_peers.py /tmp/histories --jobs 2 --out /tmp/peers.md

Each exported history is replayed night by night exactly as `changes-eval` replays
infergate (`eval::changes::nightly_alerts`): from the warm-up night on, the peer analyses the
series so far (the matrix-mean series' logs, or cell 0's logs: a single-cell change is in cell 0
alone); a change point that lies within `min_segment` nights of an alert already open in the
same direction updates it, any other opens a new alert. The figures are computed the same way
for infergate (from its own exported alerts) and the peers:

- stable: false alerts per 100 analysed nights, histories with any;
- a change: found (an alert on or after the onset placed at most `min_segment` nights before
  it) within the watched nights (30) and within `early` (10) nights, the delay (nights from the
  onset to that alert) median and 90th percentile, its place within +-2 nights, alerts from the
  onset on per history.

Each peer runs at its defaults (E-Divisive: `e_divisive(pvalue=0.05, permutations=100)` of
`signal_processing_algorithms.energy_statistics`; Otava: `compute_change_points(window_len=50,
max_pvalue=0.001, min_magnitude=0.0)` of `otava.analysis`, its `AnalysisOptions` defaults) and on a
threshold grid; "at infergate's rate" is the loosest grid threshold whose false-alert rate on the
stable histories is at or below infergate's on the same series (matrix, or one cell).

E-Divisive's grid comes from one run per night with 999 permutations (`ed_ladder`): the package's
own statistic and permutation test, the same random stream, recording the p-value of each split
in the order the package takes them; at a stricter threshold the package stops at the first split
whose p-value is above it, so its answer is the ladder's prefix. Otava's grid is one run per
threshold (it is deterministic: t-tests).

Apache Otava 0.8.0 pins numpy 2.2 and signal-processing-algorithms 2.1.6 numpy < 2; the
analysis code of both runs on numpy 1.26, so Otava is installed with `--no-deps` (it needs only
numpy and scipy for `otava.analysis`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from otava.analysis import compute_change_points
from signal_processing_algorithms.energy_statistics.energy_statistics import (
    _calculate_t_stats,
    _get_distance_matrix,
    _get_valid_input,
    e_divisive,
)

ED_PERMUTATIONS = 999
ED_GRID = [0.02, 0.01, 0.005, 0.002, 0.001, 0.0]
OTAVA_GRID = [1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 1e-6, 1e-7, 1e-8]


def pairwise(xs):
    return list(zip(xs, xs[1:]))


def ed_ladder(series, permutations, p_max):
    """(change point, p-value) in the order `e_divisive` adds them, until the first p > p_max.

    The loop of `_get_next_significant_change_point`, with the p-value kept; the permutations
    of the last (failing) split stop once its p-value is known to exceed `p_max`.
    """
    distances = _get_distance_matrix(_get_valid_input(series))
    n = len(distances)
    cps, out, memo = [], [], {}
    limit = p_max * (permutations + 1)
    while True:
        windows = [0] + sorted(cps) + [n]
        candidates = []
        for a, b in pairwise(windows):
            if (a, b) not in memo:
                stats = _calculate_t_stats(distances[a:b, a:b])
                idx = int(np.argmax(stats))
                memo[(a, b)] = (idx + a, stats[idx])
            candidates.append(memo[(a, b)])
        best = max(candidates, key=lambda x: x[1])
        better = 0
        for _ in range(permutations):
            permute_t = []
            for a, b in pairwise(windows):
                rows = np.arange(b - a) + a
                np.random.shuffle(rows)
                permute_t.append(max(_calculate_t_stats(distances[np.ix_(rows, rows)])))
            if max(permute_t) >= best[1]:
                better += 1
                if better > limit:
                    break
        p = better / (permutations + 1)
        # The package stops at a falsy index too (`while cp := ...`).
        if p > p_max or not best[0]:
            return out
        cps.append(best[0])
        out.append((best[0], p))


CUSUM_GRID = [4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0]


def cusum_page(series, h, drift_per_run=0.001, k=0.5, clip=3.0):
    """Prototype (not a peer): Page's two-sided CUSUM on the standardised one-step prediction
    errors of the local-level model infergate's `min_z` uses (white noise `w` from the MAD of
    the successive differences, random walk `drift_per_run`), each clipped at `clip` (an
    outlier night adds at most `clip - k`, and moves the filtered level by at most that much).
    A change point is the night after the sum last stood at zero (Page's estimate) when it
    passes `h`; the same direction raises no other until its sum has returned to zero (a creep
    keeps it above: one change point, not a staircase).
    """
    y = np.asarray(series, dtype=float)
    if len(y) < 4:
        return []
    dy = np.diff(y)
    w = max(1.4826 * float(np.median(np.abs(dy - np.median(dy)))) / math.sqrt(2.0), 1e-9)
    d2 = drift_per_run**2
    level, p = y[0], w * w
    sums = [0.0, 0.0]  # up, down
    zero = [1, 1]
    alarmed = [False, False]
    cps = []
    for t in range(1, len(y)):
        p += d2
        f = p + w * w
        e = max(-clip, min(clip, (y[t] - level) / math.sqrt(f)))
        gain = p / f
        level += gain * e * math.sqrt(f)
        p *= 1.0 - gain
        for i, x in enumerate((e, -e)):
            sums[i] = max(0.0, sums[i] + x - k)
            if sums[i] == 0.0:
                zero[i] = t + 1
                alarmed[i] = False
            elif sums[i] > h and not alarmed[i]:
                alarmed[i] = True
                if zero[i] < len(y):
                    cps.append(zero[i])
    return sorted(set(cps))


def direction_up(series, cps, cp):
    """Whether the segment starting at `cp` lies above the one before it (means)."""
    bounds = [0] + sorted(cps) + [len(series)]
    i = bounds.index(cp)
    before = series[bounds[i - 1] : cp]
    after = series[cp : bounds[i + 1]]
    return float(np.mean(after)) > float(np.mean(before))


class Replay:
    """Nightly alerts as `eval::changes::nightly_alerts` keeps them (steps: no creep spans)."""

    def __init__(self, tolerance):
        self.tolerance = tolerance
        self.alerts = []  # dicts: night, at, up, latest_at

    def night(self, night, series, cps):
        touched = []
        for cp in map(int, cps):
            up = direction_up(series, cps, cp)
            same = [
                (abs(a["latest_at"] - cp), i)
                for i, a in enumerate(self.alerts)
                if a["up"] == up and i not in touched and abs(a["latest_at"] - cp) <= self.tolerance
            ]
            if same:
                i = min(same)[1]
                touched.append(i)
                self.alerts[i]["latest_at"] = cp
            else:
                touched.append(len(self.alerts))
                self.alerts.append({"night": night, "at": cp, "up": up, "latest_at": cp})


def replay_series(series, warmup, tolerance, seed, methods):
    """Alerts per method key for one series, replayed night by night."""
    keys = []
    if "edivisive" in methods:
        keys += ["edivisive default"] + [f"edivisive p<={p}" for p in ED_GRID]
    if "otava" in methods:
        keys += ["otava default"] + [f"otava p<={p:g}" for p in OTAVA_GRID]
    if "cusum" in methods:
        keys += [f"cusum h={h:g}" for h in CUSUM_GRID]
    replays = {k: Replay(tolerance) for k in keys}
    for night in range(max(warmup, 1), len(series)):
        prefix = list(series[: night + 1])
        if "cusum" in methods:
            for h in CUSUM_GRID:
                replays[f"cusum h={h:g}"].night(night, prefix, cusum_page(prefix, h))
        if "edivisive" not in methods:
            continue
        np.random.seed((seed * 1_000_003 + night) % (2**32))
        cps = sorted(e_divisive(prefix, pvalue=0.05, permutations=100))
        replays["edivisive default"].night(night, prefix, cps)
        np.random.seed((seed * 1_000_033 + night) % (2**32))
        ladder = ed_ladder(prefix, ED_PERMUTATIONS, max(ED_GRID))
        for p in ED_GRID:
            kept = []
            for cp, pv in ladder:
                if pv > p:
                    break
                kept.append(cp)
            replays[f"edivisive p<={p}"].night(night, prefix, sorted(kept))
        if "otava" not in methods:
            continue
        otava_default = sorted(c.index for c in compute_change_points(prefix)[0])
        replays["otava default"].night(night, prefix, otava_default)
        for p in OTAVA_GRID:
            cps = sorted(c.index for c in compute_change_points(prefix, max_pvalue=p)[0])
            replays[f"otava p<={p:g}"].night(night, prefix, cps)
    return {k: r.alerts for k, r in replays.items()}


def task(args):
    _, scenario, trial, kind, cell, warmup, tolerance, series, seed, methods = args
    alerts = replay_series(np.asarray(series), warmup, tolerance, seed, methods)
    return scenario, trial, kind, cell, alerts


def infergate_alerts(exported):
    return [
        {"night": a["night"], "at": a["at"], "up": a["up"], "latest_at": a["latest_at"]}
        for a in exported
    ]


def quantile(xs, q):
    return float(np.quantile(xs, q)) if xs else math.nan


def stable_figures(per_history, nights):
    counts = [len(a) for a in per_history]
    return {
        "false_per_100_nights": 100.0 * sum(counts) / (len(counts) * nights),
        "histories_with_alert": sum(c > 0 for c in counts) / len(counts),
        "histories": len(counts),
    }


def shift_figures(per_history, onset, early, tolerance):
    delays, near, after = [], 0, 0
    found_early = 0
    for alerts in per_history:
        after += sum(a["night"] >= onset for a in alerts)
        hit = next(
            (a for a in alerts if a["night"] >= onset and a["at"] + tolerance >= onset), None
        )
        if hit is not None:
            d = hit["night"] - onset
            delays.append(d)
            found_early += d <= early
            near += abs(hit["latest_at"] - onset) <= 2
    n = len(per_history)
    return {
        "found": len(delays) / n,
        "found_early": found_early / n,
        "delay_median": quantile(delays, 0.5),
        "delay_p90": quantile(delays, 0.9),
        "within_2_latest": near / max(len(delays), 1),
        "alerts_after_onset": after / n,
        "histories": n,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="the directory of `changes-eval --export-histories`")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument(
        "--stable-cells",
        type=int,
        default=1,
        help="cells of each stable history the peers' one-cell false-alert rate is measured on",
    )
    ap.add_argument(
        "--render",
        type=Path,
        help="skip the replay: print the tables of a --json file written before (same export)",
    )
    ap.add_argument("--trials", type=int, help="use only the first N histories of each scenario")
    ap.add_argument("--offset", type=int, default=0, help="skip the first N histories of each scenario")
    ap.add_argument("--save-alerts", type=Path, help="write every replayed series' alerts here")
    ap.add_argument(
        "--load-alerts",
        type=Path,
        nargs="*",
        default=[],
        help="instead of replaying, merge the alerts of earlier --save-alerts runs (batches)",
    )
    ap.add_argument("--out", type=Path, help="write the tables (Markdown) here too")
    ap.add_argument("--json", type=Path, help="write every figure (JSON) here")
    ap.add_argument(
        "--methods",
        default="edivisive,otava,cusum",
        help="comma-separated subset of edivisive, otava, cusum (the prototype)",
    )
    args = ap.parse_args()
    methods = set(args.methods.split(","))

    scenarios = {}
    for f in sorted(args.dir.glob("*.json")):
        s = json.loads(f.read_text())
        end = args.offset + args.trials if args.trials else None
        s["histories"] = s["histories"][args.offset : end]
        scenarios[s["scenario"]] = s
    if "stable" not in scenarios:
        sys.exit("no stable.json in the export")

    if args.render:
        saved = json.loads(args.render.read_text())
        figures = {tuple(k.split("|")): v for k, v in saved.items()}
        keys = list(dict.fromkeys(k[2] for k in figures if k[:2] == ("stable", "matrix")))
        render(args, scenarios, figures, keys, methods)
        return

    if args.load_alerts:
        results = {}
        for f in args.load_alerts:
            for name, trial, kind, cell, alerts in json.loads(f.read_text()):
                results[(name, trial, kind, cell)] = alerts
        for name, s in scenarios.items():
            s["histories"] = [h for h in s["histories"] if (name, h["trial"], "matrix", 0) in results]
        summarise(args, scenarios, results, methods)
        return

    tasks = []
    for name, s in scenarios.items():
        tol = s["min_segment"]
        for h in s["histories"]:
            tasks.append((f"{name}", name, h["trial"], "matrix", 0, s["warmup"], tol, h["matrix_log"], h["seed"], methods))
            cells = range(args.stable_cells) if name == "stable" else [0]
            for c in cells:
                tasks.append((name, name, h["trial"], "cell", c, s["warmup"], tol, h["cells_log"][c], h["seed"] + 7919 * (c + 1), methods))
    print(f"{len(tasks)} series to replay", file=sys.stderr)
    results = {}
    with Pool(args.jobs) as pool:
        for k, (name, trial, kind, cell, alerts) in enumerate(pool.imap_unordered(task, tasks, chunksize=1)):
            results[(name, trial, kind, cell)] = alerts
            if (k + 1) % 20 == 0:
                print(f"{k + 1}/{len(tasks)}", file=sys.stderr)
    if args.save_alerts:
        args.save_alerts.write_text(json.dumps([[*k, v] for k, v in results.items()], default=int))
    summarise(args, scenarios, results, methods)


def summarise(args, scenarios, results, methods):
    """The figures of every method from the replayed alerts (and infergate's exported ones)."""
    figures = {}
    for name, s in scenarios.items():
        for kind in ["matrix", "cell"]:
            per_method = {}
            ig = [
                infergate_alerts(h[f"infergate_{kind}"]) for h in s["histories"]
            ]
            per_method["infergate"] = ig
            for (n2, trial, k2, cell), alerts in sorted(results.items()):
                if n2 != name or k2 != kind:
                    continue
                for m, a in alerts.items():
                    per_method.setdefault(m, []).append(a)
            keys = list(per_method)
            for m, hs in per_method.items():
                if s["onset"] is None:
                    f = stable_figures(hs, s["nights"] - s["warmup"])
                else:
                    f = shift_figures(hs, s["onset"], s["early"], s["min_segment"])
                figures[(name, kind, m)] = f
    render(args, scenarios, figures, keys, methods)
    if args.json:
        args.json.write_text(json.dumps({"|".join(map(str, k)): v for k, v in figures.items()}, indent=1))


def render(args, scenarios, figures, keys, methods):
    """Prints (and writes to --out) the stable grid and the side-by-side table."""
    # Calibration: per series kind, each peer's loosest grid threshold at or below infergate's rate.
    chosen = {}
    for kind in ["matrix", "cell"]:
        target = figures[("stable", kind, "infergate")]["false_per_100_nights"]
        for peer, grid in [("edivisive", [f"edivisive p<={p}" for p in ED_GRID]),
                           ("otava", [f"otava p<={p:g}" for p in OTAVA_GRID]),
                           ("cusum", [f"cusum h={h:g}" for h in CUSUM_GRID])]:
            if ("stable", kind, grid[0]) not in figures:
                continue
            ok = [m for m in grid if figures[("stable", kind, m)]["false_per_100_nights"] <= target]
            chosen[(kind, peer)] = ok[0] if ok else grid[-1]

    lines = []
    n_hist = len(scenarios["stable"]["histories"])
    lines.append(f"Histories per scenario: {n_hist}; one-cell false alerts over {args.stable_cells} cell(s) of each stable history.\n")
    lines.append("| method | series | threshold | false alerts / 100 stable nights | stable histories with any |")
    lines.append("|---|---|---|---:|---:|")
    for kind in ["matrix", "cell"]:
        for m in keys:
            f = figures[("stable", kind, m)]
            lines.append(f"| {m.split(' ')[0]} | {kind} | {m.partition(' ')[2] or 'defaults'} | {f['false_per_100_nights']:.3f} | {f['histories_with_alert']:.1%} |")
    lines.append("")
    def shown(kind):
        rows = [("infergate", "infergate")]
        if "edivisive" in methods:
            rows.append(("E-Divisive defaults", "edivisive default"))
        if "otava" in methods:
            rows.append(("Otava defaults", "otava default"))
        for peer, label in [("edivisive", "E-Divisive"), ("otava", "Otava"), ("cusum", "prototype CUSUM")]:
            if (kind, peer) in chosen:
                m = chosen[(kind, peer)]
                rows.append((f"{label} at infergate's rate ({m.partition(' ')[2]})", m))
        return rows

    lines.append("| change | series | method | false / 100 stable nights | found in 30 nights | within 10 nights | delay median / p90 | latest place within ±2 | alerts from onset |")
    lines.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for name, s in scenarios.items():
        if s["onset"] is None:
            continue
        for kind in ["matrix", "cell"]:
            for label, m in shown(kind):
                f = figures[(name, kind, m)]
                fa = figures[("stable", kind, m)]["false_per_100_nights"]
                series = kind if kind == "matrix" else "one cell (change in it alone)"
                lines.append(
                    f"| {name} (night {s['onset']}) | {series} | {label} | {fa:.3f} | {f['found']:.1%} | {f['found_early']:.1%} | "
                    f"{f['delay_median']:.0f} / {f['delay_p90']:.0f} | {f['within_2_latest']:.1%} | {f['alerts_after_onset']:.2f} |"
                )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
