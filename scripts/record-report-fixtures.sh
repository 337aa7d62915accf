#!/usr/bin/env bash
# Re-records tests/fixtures/reports/{pass,regression,insufficient} from real gate runs of the
# current build on the default config (the simulated engine and the bundled baseline):
#   pass          a clean run against baselines/
#   regression    a 10% slower engine (--slowdown 1.1), confirmed on a second boot
#   insufficient  a clean run against a fresh 2-run store (too thin to be sensitive)
# Then refresh the snapshots and screenshots:
#   INSTA_UPDATE=always INFERGATE_UPDATE_SCREENSHOTS=1 INFERGATE_REQUIRE_RENDER=1 \
#     cargo test --test rendered_reports --test cli_errors
# Usage: scripts/record-report-fixtures.sh [BIN]   (default target/release/infergate, built if missing)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN="${1:-target/release/infergate}"
[ -x "$BIN" ] || cargo build --release --bin infergate >&2
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$BIN" run --out "$WORK/pass" >"$WORK/pass.log" 2>&1 || true
"$BIN" run --out "$WORK/regression" --engine-arg --slowdown --engine-arg 1.1 \
    >"$WORK/regression.log" 2>&1 || true
mkdir "$WORK/thin"
for i in 1 2; do
    "$BIN" run --out "$WORK/thin-$i" --baseline-dir "$WORK/thin" --update-baseline \
        >"$WORK/thin-$i.log" 2>&1 || true
done
"$BIN" run --out "$WORK/insufficient" --baseline-dir "$WORK/thin" >"$WORK/insufficient.log" 2>&1 || true
for case in pass regression insufficient; do
    # The last line is `verdict: WORD — the answer in words` (wrapped): its word decides.
    verdict="$(grep -h '^verdict: ' "$WORK/$case.log" | sed 's/ — .*//' || true)"
    if [ "$verdict" != "verdict: $case" ]; then
        echo "record-report-fixtures: the $case run said '${verdict:-nothing}', not 'verdict: $case':" >&2
        tail -5 "$WORK/$case.log" >&2
        exit 1
    fi
    cp "$WORK/$case/results.json" "$WORK/$case/verdict.json" "tests/fixtures/reports/$case/"
    echo "$case: recorded"
done
