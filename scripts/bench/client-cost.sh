#!/usr/bin/env bash
# What the measuring client costs: whole-process CPU of `infergate bench` (not the engine) per
# 1,000 streamed tokens and per second of window, and its peak RSS, at C=1, 8 and 64 against
# the simulated engine (`--profile test`), at two token rates: `--time-scale 5` (~850 tok/s
# per stream at C=1, the rate of issue 19's figures) and `--time-scale 0.25` (~42 tok/s per
# stream, a GPU's decode rate, where a cost per second of window would dominate).
#
# Usage: scripts/bench/client-cost.sh [BIN ...]
#   BIN   infergate binaries to measure side by side, interleaved (default: target/release/infergate,
#         built if missing). Pass an older build first to get before/after figures in one run.
#   env REPS         repetitions per binary, rate and concurrency (default 3)
#   env DURATION     window length (default 10s); WARMUP (default 3s)
#   env CONCURRENCY  space-separated list (default "1 8 64")
#   env RATES        space-separated sim time scales (default "5 0.25")
#
# Tokens are the simulated engine's own per-token counter (vllm:generation_tokens_total) over
# the whole process run (readiness, warm-up and window), so CPU per 1,000 tokens is whole-run
# CPU over whole-run tokens. CPU per window-second is whole-run CPU over the window length.
# CPU and peak RSS are the infergate process's own (`wait4`'s resource usage, microseconds:
# the sims run apart). The summary fits, per binary and C, CPU = a x tokens + b x wall seconds
# over both rates: `a` is what a token costs, `b` what a second costs whatever streams.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REPS="${REPS:-3}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
CONCURRENCY="${CONCURRENCY:-1 8 64}"
RATES="${RATES:-5 0.25}"
command -v python3 >/dev/null || { echo "client-cost: needs python3" >&2; exit 2; }
command -v curl >/dev/null || { echo "client-cost: needs curl" >&2; exit 2; }

BINS=("$@")
if [ ${#BINS[@]} -eq 0 ]; then
    [ -x target/release/infergate ] || cargo build --release --bin infergate >&2
    BINS=(target/release/infergate)
fi
SIM_BIN="${SIM_BIN:-${BINS[-1]}}"

WORK="$(mktemp -d)"
SIM_PIDS=()
cleanup() {
    for pid in "${SIM_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

declare -A URLS
for rate in $RATES; do
    "$SIM_BIN" sim --profile test --time-scale "$rate" --port 0 --port-file "$WORK/port-$rate" \
        >"$WORK/sim-$rate.log" 2>&1 &
    SIM_PIDS+=($!)
    for _ in $(seq 100); do [ -s "$WORK/port-$rate" ] && break; sleep 0.1; done
    [ -s "$WORK/port-$rate" ] || { echo "client-cost: the simulated engine did not start:" >&2; cat "$WORK/sim-$rate.log" >&2; exit 3; }
    URLS[$rate]="http://127.0.0.1:$(cat "$WORK/port-$rate")"
done

counter() {
    curl -s "$1/metrics" | awk '/^vllm:generation_tokens_total/ {s += $NF} END {printf "%.0f\n", s}'
}
window_s() { echo "$DURATION" | sed 's/s$//'; }

# Runs a command with its output to files and prints its own user and system CPU seconds,
# peak RSS (KiB) and wall seconds, from wait4 (GNU time rounds CPU to 10 ms).
measured() {
    python3 - "$@" <<'EOF'
import os, sys, time
out = os.open(os.environ["OUT_FILE"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
err = os.open(os.environ["ERR_FILE"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
start = time.monotonic()
pid = os.fork()
if pid == 0:
    os.dup2(out, 1)
    os.dup2(err, 2)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - start
print(f"{ru.ru_utime:.6f} {ru.ru_stime:.6f} {ru.ru_maxrss} {wall:.3f}")
sys.exit(os.waitstatus_to_exitcode(status) and 1)
EOF
}

RAW="$WORK/raw.tsv"
printf '%-28s %5s %4s %8s %9s %13s %14s %7s\n' binary scale C tokens cpu_s "cpu_s/1k_tok" "cpu_ms/win_s" rss_mb
for c in $CONCURRENCY; do
    for rep in $(seq "$REPS"); do
        for rate in $RATES; do
            url="${URLS[$rate]}"
            for bin in "${BINS[@]}"; do
                before=$(counter "$url")
                figures=$(OUT_FILE=/dev/null ERR_FILE="$WORK/bench.log" measured "$bin" bench \
                    --url "$url" --concurrency "$c" --contexts 0 --duration "$DURATION" \
                    --warmup "$WARMUP" --out "$WORK/out") \
                    || { echo "client-cost: $bin bench failed:" >&2; tail -5 "$WORK/bench.log" >&2; exit 3; }
                after=$(counter "$url")
                read -r user sys rss_kb wall <<<"$figures"
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$bin" "$rate" "$c" "$((after - before))" \
                    "$user" "$sys" "$rss_kb" "$wall" >>"$RAW"
                awk -v b="$bin" -v r="$rate" -v c="$c" -v t="$((after - before))" -v u="$user" \
                    -v s="$sys" -v m="$rss_kb" -v w="$(window_s)" 'BEGIN {
                        cpu = u + s;
                        printf "%-28s %5s %4d %8d %9.4f %13.4f %14.2f %7.1f\n",
                            substr(b, length(b) > 28 ? length(b) - 27 : 1), r, c, t, cpu,
                            (t > 0 ? cpu * 1000 / t : 0), cpu * 1000 / w, m / 1024 }'
            done
        done
    done
done

python3 - "$RAW" <<'EOF'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    b, rate, c, tok, u, s, rss, wall = line.rstrip("\n").split("\t")
    runs[(b, int(c))].append((float(rate), int(tok), float(u) + float(s), float(wall)))
print()
print("median CPU-s per 1k tokens at each scale; fit CPU = a x tokens + b x wall over all runs")
print(f"{'binary':<28} {'C':>4} {'per scale':<34} {'a (us/token)':>13} {'b (CPU-ms/s)':>13}")
for (b, c), rs in sorted(runs.items()):
    med = []
    for rate in sorted({r[0] for r in rs}, reverse=True):
        per = [cpu * 1000 / tok for r0, tok, cpu, _ in rs if r0 == rate and tok > 0]
        med.append(f"{rate:g}: {statistics.median(per):.4f}" if per else f"{rate:g}: -")
    # Least squares of cpu on (tokens, wall) without intercept.
    stt = sum(t * t for _, t, _, _ in rs); sww = sum(w * w for *_, w in rs)
    stw = sum(t * w for _, t, _, w in rs)
    sct = sum(cpu * t for _, t, cpu, _ in rs); scw = sum(cpu * w for _, _, cpu, w in rs)
    det = stt * sww - stw * stw
    fit = ("-", "-")
    if len({r[0] for r in rs}) > 1 and det > 0:
        a = (sct * sww - scw * stw) / det
        bb = (scw * stt - sct * stw) / det
        fit = (f"{a * 1e6:.1f}", f"{bb * 1e3:.2f}")
    name = b[-28:]
    print(f"{name:<28} {c:>4} {', '.join(med):<34} {fit[0]:>13} {fit[1]:>13}")
EOF
