#!/usr/bin/env bash
# What the measuring client costs: whole-process CPU of `infergate bench` (not the engine) per
# 1,000 streamed tokens and per second of window, and its peak RSS, at C=1, 8 and 64 against
# the simulated engine (`--profile test --time-scale 5`: ~830 tok/s at C=1).
#
# Usage: scripts/bench/client-cost.sh [BIN ...]
#   BIN   infergate binaries to measure side by side, interleaved (default: target/release/infergate,
#         built if missing). Pass an older build first to get before/after figures in one run.
#   env REPS       repetitions per binary and concurrency (default 3)
#   env DURATION   window length (default 10s); WARMUP (default 3s)
#   env CONCURRENCY  space-separated list (default "1 8 64")
#
# Tokens are the simulated engine's own per-token counter (vllm:generation_tokens_total) over
# the whole process run (readiness, warm-up and window), so CPU per 1,000 tokens is whole-run
# CPU over whole-run tokens. CPU per window-second is whole-run CPU over the window length.
# CPU and peak RSS come from /usr/bin/time (the infergate process only; the sim runs apart).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REPS="${REPS:-3}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
CONCURRENCY="${CONCURRENCY:-1 8 64}"
[ -x /usr/bin/time ] || { echo "client-cost: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

BINS=("$@")
if [ ${#BINS[@]} -eq 0 ]; then
    [ -x target/release/infergate ] || cargo build --release --bin infergate >&2
    BINS=(target/release/infergate)
fi
SIM_BIN="${SIM_BIN:-${BINS[-1]}}"

WORK="$(mktemp -d)"
SIM_PID=""
cleanup() {
    if [ -n "$SIM_PID" ]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

"$SIM_BIN" sim --profile test --time-scale 5 --port 0 --port-file "$WORK/port" >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
[ -s "$WORK/port" ] || { echo "client-cost: the simulated engine did not start:" >&2; cat "$WORK/sim.log" >&2; exit 3; }
URL="http://127.0.0.1:$(cat "$WORK/port")"

counter() {
    curl -s "$URL/metrics" | awk '/^vllm:generation_tokens_total/ {s += $NF} END {printf "%.0f\n", s}'
}
window_s() { echo "$DURATION" | sed 's/s$//'; }

printf '%-28s %4s %10s %12s %14s %14s %9s\n' binary C tokens cpu_s "cpu_s/1k_tok" "cpu_s/win_s" rss_mb
for c in $CONCURRENCY; do
    for rep in $(seq "$REPS"); do
        for bin in "${BINS[@]}"; do
            before=$(counter)
            /usr/bin/time -f "%U %S %M" -o "$WORK/time" "$bin" bench --url "$URL" \
                --concurrency "$c" --contexts 0 --duration "$DURATION" --warmup "$WARMUP" \
                --out "$WORK/out" >/dev/null 2>"$WORK/bench.log" \
                || { echo "client-cost: $bin bench failed:" >&2; tail -5 "$WORK/bench.log" >&2; exit 3; }
            after=$(counter)
            read -r user sys rss_kb <"$WORK/time"
            awk -v b="$bin" -v c="$c" -v t="$((after - before))" -v u="$user" -v s="$sys" \
                -v r="$rss_kb" -v w="$(window_s)" 'BEGIN {
                    cpu = u + s;
                    printf "%-28s %4d %10d %12.3f %14.4f %14.4f %9.1f\n",
                        substr(b, length(b) > 28 ? length(b) - 27 : 1), c, t, cpu,
                        (t > 0 ? cpu * 1000 / t : 0), cpu / w, r / 1024 }'
        done
    done
done
