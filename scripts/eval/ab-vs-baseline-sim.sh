#!/usr/bin/env bash
# Real-boot evaluation of paired A/B against a stored baseline on the simulated engine with a
# per-boot speed factor (--boot-noise CV): false-alarm rate (A/A) and power at a uniform -3%
# (B --slowdown 1.03). Every trial boots real engines through the real gate.
#
#   scripts/eval/ab-vs-baseline-sim.sh [TRIALS=10] [PAIRS=4] [BOOT_NOISE=0.02] [BIN=target/debug/infergate]
#
# Prints one line per design. Small matrix (one cell, C=2 x 0, 0.6 s window, time-scale 2) so a
# trial takes seconds; ~6 minutes in all with the defaults on a 2-core machine.
set -euo pipefail
trials="${1:-10}"
pairs="${2:-4}"
noise="${3:-0.02}"
bin="$(realpath "${4:-target/debug/infergate}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

sim() { # slowdown
  echo "[\"{infergate}\", \"sim\", \"--profile\", \"test\", \"--port\", \"{port}\", \"--time-scale\", \"2\", \"--boot-noise\", \"$noise\", \"--slowdown\", \"$1\"]"
}
common() {
  cat <<EOT
[profile]
hardware = "sim"

[suites.pr]
concurrency = [2]
contexts = ["0"]
duration = "0.6s"
warmup = "0.2s"
ready_stable = "0.3s"
max_tokens = 128
sub_windows = 3

[baseline]
dir = "baselines"
EOT
}
ab_config() { # b-slowdown
  cat <<EOT
model = "sim-test"
[engine]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"
[engine.a]
command = $(sim 1.0)
[engine.b]
command = $(sim "$1")
[ab]
rounds = $pairs
$(common)
EOT
}
run_config() { # slowdown
  cat <<EOT
model = "sim-test"
[engine]
name = "infergate-sim"
readiness_timeout = "20s"
stop_grace = "3s"
command = $(sim "$1")
$(common)
EOT
}

start=$(date +%s)
# Stored baseline: 10 runs of the unchanged engine (each its own boot).
run_config 1.0 > "$work/base.toml"
run_config 1.03 > "$work/slow.toml"
for i in $(seq 10); do
  "$bin" run --config "$work/base.toml" --out "$work/h$i" --update-baseline > /dev/null 2>&1
done
t_hist=$(( $(date +%s) - start ))
count() { # config -> number of exit-1 trials; also accumulate seconds
  local cfg="$1" mode="$2" n=0 rc
  for i in $(seq "$trials"); do
    set +e
    if [[ "$mode" == ab ]]; then
      "$bin" ab --config "$cfg" --out "$work/o" > /dev/null 2>&1
    else
      "$bin" run --config "$cfg" --out "$work/o" > /dev/null 2>&1
    fi
    rc=$?
    set -e
    if [[ "$rc" -eq 1 ]]; then n=$((n + 1)); elif [[ "$rc" -ne 0 ]]; then echo "trial failed: exit $rc" >&2; fi
  done
  echo "$n"
}
t0=$(date +%s)
fa_base=$(count "$work/base.toml" run)
pw_base=$(count "$work/slow.toml" run)
t_base=$(( $(date +%s) - t0 ))
ab_config 1.0 > "$work/aa.toml"
ab_config 1.03 > "$work/ab.toml"
t0=$(date +%s)
fa_ab=$(count "$work/aa.toml" ab)
pw_ab=$(count "$work/ab.toml" ab)
t_ab=$(( $(date +%s) - t0 ))
echo "boot noise $noise, uniform -3%, $trials trials per rate (history: 10 runs, ${t_hist}s)"
echo "stored baseline (1 boot/trial): false alarms $fa_base/$trials, power at -3% $pw_base/$trials, ${t_base}s for $((2 * trials)) trials"
echo "paired A/B ($pairs pairs = $((2 * pairs)) boots/trial): false alarms $fa_ab/$trials, power at -3% $pw_ab/$trials, ${t_ab}s for $((2 * trials)) trials"
