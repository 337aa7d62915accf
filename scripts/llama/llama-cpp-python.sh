#!/usr/bin/env bash
# The gate against a real OpenAI-compatible server it was never written for: llama-cpp-python's
# own server (`python -m llama_cpp.server`), serving the tiny random-weight GGUF of
# gen_tiny_gguf.py on CPU. Prints what docs/engines.md's llama-cpp-python row is made from:
#   1. `infergate bench` at C=1 and C=2 (the server decodes one request at a time and aborts the
#      running one when another arrives: C=2 must not be `ok`, its aborted requests counted);
#   2. a 3-run baseline of the C=1 suite (1 decode thread), 3. an A/A run against it, 4. a slower
#      setup: 2 decode threads, which on a 2-core runner share the cores with the gate's client and
#      decode slower and far noisier (measured here: 82-141 tok/s against 1 thread's ~200).
#
# Usage: scripts/llama/llama-cpp-python.sh [INFERGATE_BIN]
#   env INFERGATE_CACHE  cache root (default: $HOME/.cache/infergate); the venv is built there once
#   (llama-cpp-python compiles llama.cpp from its sdist: ~10 min on 2 cores).
# Not part of CI (the build is long); run by hand, paste its output into docs/engines.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

BIN="${1:-target/release/infergate}"
[ -x "$BIN" ] || cargo build --release --bin infergate >&2
BIN="$(realpath "$BIN")"
CACHE_ROOT="${INFERGATE_CACHE:-${HOME:-/tmp}/.cache/infergate}"
VENV="$CACHE_ROOT/lcpp-venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    python3 -m venv "$VENV"
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
        "$VENV/bin/pip" install -q 'llama-cpp-python[server]' >&2
fi
"$VENV/bin/pip" install -q -r scripts/llama/requirements.txt >&2
export LCPP_PYTHON="$VENV/bin/python"
LLAMA_MODEL="$("$LCPP_PYTHON" scripts/llama/gen_tiny_gguf.py --cache "$CACHE_ROOT/models" | tail -n1)"
export LLAMA_MODEL
echo "llama-cpp-python $("$LCPP_PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)'), model $LLAMA_MODEL"

# A gate run that could not measure ends the script at once with its reason: exit 2 is the
# config's (under a root gate: an engine, venv or model uid 65534 cannot reach, e.g. this
# cache under /root), exit 3 the engine's. Exit 0 and 1 are verdicts.
gate_failed() { # NAME CODE LOG
    echo "$1: exit $2: the gate could not measure; its log ends:" >&2
    tail -n 20 "$3" >&2
    if [ "$2" = 2 ] && [ "$(id -u)" = 0 ]; then
        echo "llama-cpp-python.sh: as root the gate runs the engine as uid 65534: set INFERGATE_CACHE to a directory it can read (e.g. /opt/infergate-cache) and run again" >&2
    fi
    exit "$2"
}

WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

echo
echo "== 1. bench at C=1,2 against a server started by hand"
PORT="$("$LCPP_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$LCPP_PYTHON" -m llama_cpp.server --model "$LLAMA_MODEL" --model_alias tiny-llama \
    --host 127.0.0.1 --port "$PORT" --n_threads 2 --n_ctx 2048 >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break; sleep 0.1; done
start=$(date +%s.%N)
"$BIN" bench --url "http://127.0.0.1:$PORT" --concurrency 1,2 --contexts 0 --duration 3s \
    --warmup 1s --max-tokens 128 --sub-windows 4 --ready-stable 0.5s --out "$WORK/bench.json" || true
echo "(bench took $(python3 -c "import time; print(round(time.time() - $start, 1))") s)"
python3 - "$WORK/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["cells"]:
    t = c.get("requests") or {}
    print(f"C={c['concurrency']}: status={c['status']} aggregate_tps={c.get('aggregate_tps')} "
          f"requests={json.dumps(t, separators=(',', ':'))}\n  reason={c.get('reason')}\n  unverified={c.get('unverified')}")
PY
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""

CFG="$WORK/lcpp.toml"
sed -e 's/^concurrency = \[1, 2\]/concurrency = [1]/' \
    -e "s|^dir = .*|dir = \"$WORK/store\"|" examples/llama-cpp-python.toml >"$CFG"
mkdir -p "$WORK/store"
echo
export LLAMA_THREADS=1
echo "== 2. a 3-run baseline (C=1, 1 thread)"
for i in 1 2 3; do
    code=0
    "$BIN" run --config "$CFG" --out "$WORK/base-$i" --update-baseline >"$WORK/base-$i.log" 2>&1 || code=$?
    echo "baseline run $i: exit $code"
    [ "$code" -le 1 ] || gate_failed "baseline run $i" "$code" "$WORK/base-$i.log"
    grep -E "cell done" "$WORK/base-$i.log" || true
done
echo
echo "== 3. A/A (1 thread)"
aa=0
"$BIN" run --config "$CFG" --out "$WORK/aa" >"$WORK/aa.log" 2>&1 || aa=$?
[ "$aa" -le 1 ] || gate_failed "A/A run" "$aa" "$WORK/aa.log"
slow=0
LLAMA_THREADS=2 "$BIN" run --config "$CFG" --out "$WORK/slow" >"$WORK/slow.log" 2>&1 || slow=$?
[ "$slow" -le 1 ] || gate_failed "slower run" "$slow" "$WORK/slow.log"
# A log without these lines (an engine that failed) must not end the script unexplained.
grep -E "cell done|^[✓✗?] |matrix: t|^verdict" "$WORK/aa.log" || true
echo "A/A exit $aa"
echo
echo "== 4. slower setup (2 threads on 2 cores)"
grep -E "cell done|^[✓✗?] |matrix: t|^verdict" "$WORK/slow.log" || true
echo "slower exit $slow"
