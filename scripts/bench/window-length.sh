#!/usr/bin/env bash
# What shorter windows cost and save on the seed's matrix shape (examples/ldb-rtx5090.toml,
# suite `pr`, the simulated engine at time scale 20): for each window length given, a store of
# BASE runs recorded with `--update-baseline`, then AA gates against it, the arms interleaved
# run by run. Prints each run's engine-minutes (`started_at` → `finished_at` of results.json ×
# 20) and each A/A gate's headline and sensitivity line (docs/performance.md, "Where the floor
# of this shape is").
#
# Usage: scripts/bench/window-length.sh DURATION... (e.g. 0.5s 0.25s: 10 and 5 engine-seconds)
#   env BIN   the infergate binary (default target/release/infergate, built if missing)
#   env BASE  baseline runs per arm (default 12); AA: A/A gates per arm (default 3)
#   env WORK  where stores and results go (default a new temporary directory, kept)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ $# -gt 0 ] || { echo "usage: $0 DURATION... (e.g. 0.5s 0.25s)" >&2; exit 2; }
BIN="${BIN:-target/release/infergate}"
[ -x "$BIN" ] || cargo build --release --bin infergate >&2
BASE="${BASE:-12}"
AA="${AA:-3}"
WORK="${WORK:-$(mktemp -d)}"
echo "work: $WORK   load average: $(cut -d' ' -f1-3 /proc/loadavg)"

configs=()
cleanup() { rm -f "${configs[@]}"; }
trap cleanup EXIT
for d in "$@"; do
    mkdir -p "$WORK/$d/store"
    # Beside the example, so its relative paths resolve as they do for the example.
    cfg="examples/.window-length-$d.toml"
    sed -e "/^\[suites.pr\]/,/^\[/ s/^duration = \"0.5s\"/duration = \"$d\"/" \
        examples/ldb-rtx5090.toml >"$cfg"
    configs+=("$cfg")
done

engine_minutes() {
    python3 - "$1/results.json" <<'PY'
import datetime, json, sys
r = json.load(open(sys.argv[1]))
t = lambda s: datetime.datetime.fromisoformat(s[:26].rstrip("Z"))
print(f"{(t(r['finished_at']) - t(r['started_at'])).total_seconds() * 20 / 60:.2f}")
PY
}

gate() {  # gate DURATION NAME [--update-baseline]
    local d="$1" name="$2" out="$WORK/$1/$2"
    shift 2
    local rc=0
    "$BIN" run --config "examples/.window-length-$d.toml" --suite pr \
        --baseline-dir "$WORK/$d/store" --out "$out" "$@" >"$out.log" 2>&1 || rc=$?
    echo "$d $name exit $rc engine-minutes $(engine_minutes "$out")"
}

for i in $(seq "$BASE"); do
    for d in "$@"; do gate "$d" "base-$i" --update-baseline; done
done
for i in $(seq "$AA"); do
    for d in "$@"; do
        gate "$d" "aa-$i"
        grep -E "^(✓|✗|\?)|Sensitivity" "$WORK/$d/aa-$i.log" | head -3
    done
done
