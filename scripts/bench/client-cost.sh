#!/usr/bin/env bash
# What the measuring client costs next to the physical floor: whole-process CPU of `infergate
# bench` (not the engine) per 1,000 streamed tokens, and the same for `floor` (scripts/bench/floor.c:
# a minimal C client doing only what any client must — one read and one clock read per arriving
# chunk, count `data:` events) and for `tokio-floor` (scripts/bench/tokio-floor/: the same loop as
# one tokio task per stream on a current-thread runtime, infergate's runtime: what the runtime
# itself adds), interleaved on one simulated engine per rate, at C = 1, 8, 64
# and two token rates: `--time-scale 1` (the sim's default, ~170 tok/s per stream at C=1) and
# `--time-scale 0.25` (~42 tok/s per stream, a GPU's decode rate, where a cost per second of
# window weighs more).
#
# Usage: scripts/bench/client-cost.sh [BIN ...]
#   BIN   infergate binaries to measure side by side, interleaved with the floor (default:
#         target/release/infergate, built if missing). Pass an older build first to get
#         before/after figures in one run.
#   env REPS         repetitions per client, rate and concurrency (default 4; medians are printed)
#   env DURATION     window length (default 10s); WARMUP (default 3s)
#   env CONCURRENCY  space-separated list (default "1 8 64")
#   env RATES        space-separated sim time scales (default "1 0.25")
#   env TOKIO_FLOOR_TARGET  where tokio-floor is built (default target/tokio-floor)
#   env PROFILE      the simulated engine's profile (default `test`); with RATES=1,
#                    scripts/bench/gpu-rate.toml keeps a GPU's per-stream rate at every C
#                    (see its header and docs/performance.md)
#
# The floor posts the exact bytes `infergate bench` posts: the script captures one streaming
# request through a loopback recording proxy first. It runs for the warm-up plus the window.
# Tokens are the simulated engine's own per-token counter (vllm:generation_tokens_total) over
# each client's whole run, so CPU per 1,000 tokens is whole-run CPU over whole-run tokens
# (infergate's includes its probes, warm-up and write-out). CPU and peak RSS are the client
# process's own (`wait4`'s resource usage, microseconds; the sims run apart). The load average
# is printed before and after: figures from a busy machine are not worth recording.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

REPS="${REPS:-4}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-3s}"
CONCURRENCY="${CONCURRENCY:-1 8 64}"
RATES="${RATES:-1 0.25}"
PROFILE="${PROFILE:-test}"
for tool in python3 curl cc cargo; do
    command -v "$tool" >/dev/null || { echo "client-cost: needs $tool" >&2; exit 2; }
done

BINS=("$@")
if [ ${#BINS[@]} -eq 0 ]; then
    [ -x target/release/infergate ] || cargo build --release --bin infergate >&2
    BINS=(target/release/infergate)
fi
SIM_BIN="${SIM_BIN:-${BINS[-1]}}"

WORK="$(mktemp -d)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

cc -O2 -o "$WORK/floor" scripts/bench/floor.c
cargo build --release --quiet --manifest-path scripts/bench/tokio-floor/Cargo.toml \
    --target-dir "${TOKIO_FLOOR_TARGET:-target/tokio-floor}" >&2
TOKIO_FLOOR="${TOKIO_FLOOR_TARGET:-target/tokio-floor}/release/tokio-floor"

secs() { echo "$1" | sed 's/s$//'; }
wait_port() {
    for _ in $(seq 100); do [ -s "$1" ] && break; sleep 0.1; done
    [ -s "$1" ] || { echo "client-cost: $2 did not start:" >&2; cat "$3" >&2; exit 3; }
}

declare -A URLS PORTS
for rate in $RATES; do
    "$SIM_BIN" sim --profile "$PROFILE" --time-scale "$rate" --port 0 --port-file "$WORK/port-$rate" \
        >"$WORK/sim-$rate.log" 2>&1 &
    PIDS+=($!)
    wait_port "$WORK/port-$rate" "the simulated engine" "$WORK/sim-$rate.log"
    PORTS[$rate]="$(cat "$WORK/port-$rate")"
    URLS[$rate]="http://127.0.0.1:${PORTS[$rate]}"
done

# Captures the first streaming POST that `infergate bench` sends, byte for byte, through a
# loopback proxy in front of the first sim.
first_rate="${RATES%% *}"
python3 - "${PORTS[$first_rate]}" "$WORK/proxy-port" "$WORK/request.bin" >"$WORK/proxy.log" 2>&1 <<'EOF' &
import socket, sys, threading
upstream, port_file, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = threading.Lock()
def pump(src, dst, record):
    buf = b""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
            if record is None:
                continue
            buf += data
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if not sep or not head.startswith(b"POST ") or b"/v1/completions" not in head:
                continue
            length = [int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")
                      if l.lower().startswith(b"content-length:")]
            if length and len(rest) >= length[0] and b'"stream":true' in rest[:length[0]]:
                with lock:
                    try:
                        with open(out, "xb") as f:
                            f.write(head + sep + rest[:length[0]])
                    except FileExistsError:
                        pass
                record = None
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(128)
open(port_file, "w").write(str(srv.getsockname()[1]))
while True:
    c, _ = srv.accept()
    u = socket.create_connection(("127.0.0.1", upstream))
    threading.Thread(target=pump, args=(c, u, True), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, None), daemon=True).start()
EOF
PROXY_PID=$!
PIDS+=("$PROXY_PID")
wait_port "$WORK/proxy-port" "the recording proxy" "$WORK/proxy.log"
"${BINS[-1]}" bench --url "http://127.0.0.1:$(cat "$WORK/proxy-port")" --concurrency 1 --contexts 0 \
    --duration 1s --warmup 0s --out "$WORK/capture" >/dev/null 2>"$WORK/capture.log" || true
kill "$PROXY_PID" 2>/dev/null || true
[ -s "$WORK/request.bin" ] || {
    echo "client-cost: no streaming request was captured:" >&2
    tail -5 "$WORK/capture.log" "$WORK/proxy.log" >&2
    exit 3
}

counter() {
    curl -s "$1/metrics" | awk '/^vllm:generation_tokens_total/ {s += $NF} END {printf "%.0f\n", s}'
}

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

floor_secs=$(python3 -c "print($(secs "$WARMUP") + $(secs "$DURATION"))")
CLIENTS=("${BINS[@]}" tokio-floor floor)
RAW="$WORK/raw.tsv"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)   ($(nproc) cores)"
printf '%-28s %5s %4s %8s %9s %13s %7s\n' client scale C tokens cpu_s "cpu_s/1k_tok" rss_mb
for c in $CONCURRENCY; do
    for rep in $(seq "$REPS"); do
        for rate in $RATES; do
            url="${URLS[$rate]}"
            for client in "${CLIENTS[@]}"; do
                if [ "$client" = floor ]; then
                    cmd=("$WORK/floor" "${PORTS[$rate]}" "$c" "$floor_secs" "$WORK/request.bin")
                elif [ "$client" = tokio-floor ]; then
                    cmd=("$TOKIO_FLOOR" "${PORTS[$rate]}" "$c" "$floor_secs" "$WORK/request.bin")
                else
                    cmd=("$client" bench --url "$url" --concurrency "$c" --contexts 0 \
                        --duration "$DURATION" --warmup "$WARMUP" --out "$WORK/out")
                fi
                before=$(counter "$url")
                figures=$(OUT_FILE="$WORK/client.out" ERR_FILE="$WORK/client.log" measured "${cmd[@]}") \
                    || { echo "client-cost: $client failed:" >&2; tail -5 "$WORK/client.log" >&2; exit 3; }
                after=$(counter "$url")
                read -r user sys rss_kb wall <<<"$figures"
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$client" "$rate" "$c" "$((after - before))" \
                    "$user" "$sys" "$rss_kb" "$wall" >>"$RAW"
                awk -v b="$client" -v r="$rate" -v c="$c" -v t="$((after - before))" -v u="$user" \
                    -v s="$sys" -v m="$rss_kb" 'BEGIN {
                        cpu = u + s;
                        printf "%-28s %5s %4d %8d %9.4f %13.4f %7.1f\n",
                            substr(b, length(b) > 28 ? length(b) - 27 : 1), r, c, t, cpu,
                            (t > 0 ? cpu * 1000 / t : 0), m / 1024 }'
            done
        done
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$RAW" "$REPS" <<'EOF'
import statistics, sys
from collections import defaultdict
per = defaultdict(list)
clients = []
for line in open(sys.argv[1]):
    b, rate, c, tok, u, s, rss, wall = line.rstrip("\n").split("\t")
    if b not in clients:
        clients.append(b)
    if int(tok) > 0:
        per[(b, float(rate), int(c))].append((float(u) + float(s)) * 1000 / int(tok))
print()
print(f"median CPU-s per 1,000 tokens of {sys.argv[2]} reps, and each client's ratio to the floor")
print("(tokio-floor's ratio is what the runtime alone adds to the floor's loop)")
head = f"{'scale':>5} {'C':>4}" + "".join(f" {b[-22:]:>22}" for b in clients)
head += "".join(f" {'ratio ' + b[-16:]:>22}" for b in clients if b != "floor")
print(head)
for rate, c in sorted({(r, c) for _, r, c in per}, key=lambda k: (-k[0], k[1])):
    med = {b: statistics.median(per[(b, rate, c)]) for b in clients if per[(b, rate, c)]}
    row = f"{rate:>5g} {c:>4}" + "".join(f" {med.get(b, float('nan')):>22.4f}" for b in clients)
    floor = med.get("floor")
    row += "".join(f" {(med[b] / floor if floor and b in med else float('nan')):>21.2f}x"
                   for b in clients if b != "floor")
    print(row)
EOF
