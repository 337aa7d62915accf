#!/usr/bin/env python3
"""Where an estimator that knows the shape would place each creep (issue 60).

    cargo run --release -- changes-eval --trials 200 --export-histories /tmp/histories
    python3 scripts/eval/creep_onset_oracle.py /tmp/histories
    python3 scripts/eval/creep_onset_oracle.py --cell /tmp/histories

`changes_peers.py` counts a creep as found when the first alert opened on or after its onset
places it at most `min_segment` (3) nights before the onset. This script asks how often an
estimator that *knows* the series is flat and then declines in a straight line from one onset,
and nothing else, would place the onset more than 3 nights early, given the same runs: the
least-squares hinge (level, slope and onset unknown; the onset searched over every night
leaving 5 runs before it and 4 from it) on the series up to a night, ordinary (OLS) and
generalised under the local-level model the creep test assumes (GLS: white noise `w` from the
MAD of the successive differences, a random walk of 0.1% per night), with outlier nights (more
than 4 `w` off the median of the 5 runs around them) left out as the creep test leaves them
out. Read at infergate's own first alert night (`first alert`), and at the onset + 10, + 20
and + 29 nights; `infergate` is the place of its first alert. A share placed early that no
shape-knowing fit avoids is the data's (the runner's drift and noise before the onset), not
the detector's.

`--cell`: cell 0's series read against the rest of its runs as infergate reads it (its log
minus the median over the other cells of their logs about their medians, the medians over the
runs so far), with infergate's cell alerts. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

MIN_FLAT = 5
MIN_AFTER = 4
OUTLIER_SD = 4.0
DRIFT_PER_RUN = 0.001
EARLY = 3


def white_and_outliers(y):
    """The white noise SD (MAD of successive differences / sqrt 2) and the outlier nights."""
    diffs = [b - a for a, b in zip(y, y[1:])]
    centre = statistics.median(diffs)
    w = 1.4826 * statistics.median(abs(x - centre) for x in diffs) / math.sqrt(2)
    n = len(y)
    out = set()
    for i in range(n):
        lo = max(0, min(i - 2, n - 5))
        if abs(y[i] - statistics.median(y[lo : lo + 5])) > OUTLIER_SD * w:
            out.add(i)
    return max(w, 1e-9), out


def cholesky(idx, w, d):
    """Lower factor of `w^2 I + d^2 min(s, t)` over the kept runs `idx`."""
    n = len(idx)
    cov = [
        [(w * w if i == j else 0.0) + d * d * (min(idx[i], idx[j]) - idx[0] + 1) for j in range(n)]
        for i in range(n)
    ]
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = cov[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            low[i][j] = math.sqrt(s) if i == j else s / low[j][j]
    return low


def whiten(low, v):
    x = [0.0] * len(v)
    for i, vi in enumerate(v):
        x[i] = (vi - sum(low[i][k] * x[k] for k in range(i))) / low[i][i]
    return x


def rss_and_slope(x1, x2, y):
    """Least squares of y on (x1, x2): the residual sum of squares and x2's coefficient."""
    s11 = sum(a * a for a in x1)
    s12 = sum(a * b for a, b in zip(x1, x2))
    s22 = sum(b * b for b in x2)
    t1 = sum(a * c for a, c in zip(x1, y))
    t2 = sum(b * c for b, c in zip(x2, y))
    det = s11 * s22 - s12 * s12
    if det <= 1e-18:
        return None
    a = (s22 * t1 - s12 * t2) / det
    b = (s11 * t2 - s12 * t1) / det
    return sum((c - a * p - b * q) ** 2 for p, q, c in zip(x1, x2, y)), b


def hinge_onset(y, gls):
    """The least-squares onset of a declining hinge on `y` (None: no onset fits)."""
    w, out = white_and_outliers(y)
    idx = [i for i in range(len(y)) if i not in out]
    if len(idx) <= MIN_FLAT:
        return None
    ys = [y[i] for i in idx]
    ones = [1.0] * len(idx)
    low = cholesky(idx, w, DRIFT_PER_RUN) if gls else None
    if low:
        ys, ones = whiten(low, ys), whiten(low, ones)
    best = None
    for tau in range(idx[MIN_FLAT], len(y) - MIN_AFTER + 1):
        x = [max(0, i - tau + 1) for i in idx]
        fit = rss_and_slope(ones, whiten(low, x) if low else x, ys)
        if fit and fit[1] < 0 and (best is None or fit[0] < best[0]):
            best = (fit[0], tau)
    return best[1] if best else None


def cell_series(h, night):
    cells = [c[: night + 1] for c in h["cells_log"]]
    centres = [statistics.median(c) for c in cells]
    rest = [
        statistics.median(cells[k][i] - centres[k] for k in range(1, len(cells)))
        for i in range(night + 1)
    ]
    return [cells[0][i] - rest[i] for i in range(night + 1)]


def row(name, errors, total):
    e = [x for x in errors if x is not None]
    if not e:
        return f"| {name} | 0 | – | – | – | – |"
    early = sum(1 for x in e if x < -EARLY)
    near = sum(1 for x in e if abs(x) <= EARLY)
    return (
        f"| {name} | {len(e)} | {100 * early / total:.1f}% | {statistics.median(e):+.1f} / "
        f"{statistics.median(abs(x) for x in e):.1f} | {100 * near / total:.1f}% |"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=Path, help="a changes-eval --export-histories directory")
    ap.add_argument("--cell", action="store_true", help="cell 0 against the rest of its runs")
    args = ap.parse_args()
    alerts_key = "infergate_cell" if args.cell else "infergate_matrix"
    print("| creep | estimate | placed | placed > 3 nights early | place − onset: median / median abs | within ±3 |")
    print("|---|---|---:|---:|---:|---:|")
    for f in sorted(args.dir.glob("creep_*.json")):
        d = json.loads(f.read_text())
        onset = d["onset"]
        errors = {}
        for h in d["histories"]:
            series = (lambda n: cell_series(h, n)) if args.cell else (lambda n: h["matrix_log"][: n + 1])
            first = next((a for a in h[alerts_key] if a["night"] >= onset), None)
            nights = {f"onset + {k}": onset + k for k in (10, 20, 29)}
            if first:
                nights["first alert"] = first["night"]
                errors.setdefault("infergate, first alert", []).append(first["at"] - onset)
            for label, night in nights.items():
                for gls in (False, True):
                    t = hinge_onset(series(night), gls)
                    key = f"{'GLS' if gls else 'OLS'} hinge at {label}"
                    errors.setdefault(key, []).append(None if t is None else t - onset)
        total = len(d["histories"])
        for key in sorted(errors, key=lambda k: (not k.startswith("infergate"), k)):
            print(row(f"{d['scenario']} | {key}", errors[key], total))


if __name__ == "__main__":
    main()
