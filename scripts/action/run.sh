#!/usr/bin/env bash
# Step 3 of the composite action: turn the inputs into one infergate command, then set the step
# outputs and decide whether the step fails.
#
#   gate      infergate run  --config C [--suite S] --out DIR [...]        (PR gate)
#   nightly   infergate run  ... [--update-baseline]                       (default branch only)
#   dispatch  infergate run  ...                                           (manual run)
#   ab        infergate ab   --config C [--suite S] --out DIR              (paired A/B)
#   report    infergate report --results DIR/results.json --trusted-config C [--baseline-dir B]
#             [--pr N] [--head-sha SHA] --github
#             (workflow_run reporter: DIR is a downloaded artifact, read as data only; C and B
#             come from a checkout of the base branch, and the verdict is recomputed from the
#             results against them: the artifact's verdict.json is never read)
#   merge     merge.sh: infergate merge over every shard under DIR, one check, one comment
#   alert     infergate changes --baseline-dir B [--suite S] [--candidate DIR/results.json]
#             --alert --format html --out DIR/trend.html
#             (nightly, GitHub-hosted: each new change point of the store's history reported once
#             as an issue, updated, closed when accepted or reverted; the trend report written)
#
# Inputs (env): INFERGATE_BIN (default: infergate on PATH), INPUT_CONFIG, INPUT_SUITE, INPUT_MODE,
# INPUT_BASELINE_DIR, INPUT_FAIL_ON, INPUT_ENGINE_ARGS, INPUT_UPDATE_BASELINE, INPUT_RESULTS_DIR,
# INPUT_EXPORT (formats for `infergate export`: bmf, gab, junit, csv; space or comma separated),
# INPUT_PR_NUMBER, INPUT_HEAD_SHA (mode report), GITHUB_OUTPUT, GITHUB_EVENT_NAME, GITHUB_ACTIONS,
# RUNNER_TEMP; GITHUB_TOKEN is passed through to infergate (which never prints it) and is never
# echoed here.
# Outputs: verdict, regressions, results-path, summary-path (mode alert: trend-report-path
# only), and per exported format
# export-bmf-path, export-gab-bigger-path + export-gab-smaller-path, export-junit-path,
# export-csv-path (files next to results.json).
# Exit: infergate's own (0 pass, or a verdict fail-on does not fail; 1 a verdict it fails on;
# 2 bad input; 3 engine or measurement failure): never re-derived here.
set -euo pipefail

usage_error() { echo "::error title=infergate::$*" >&2; exit 2; }

out_file="${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set (run inside GitHub Actions or set it to a file)}"
bin="${INFERGATE_BIN:-infergate}"
config="${INPUT_CONFIG:-infergate.toml}"
suite="${INPUT_SUITE:-}"
mode="${INPUT_MODE:-gate}"
baseline_dir="${INPUT_BASELINE_DIR:-}"
# Empty: the config's `fail_on` decides (merge: regression).
fail_on="${INPUT_FAIL_ON:-}"
update_baseline="${INPUT_UPDATE_BASELINE:-false}"
results_dir="${INPUT_RESULTS_DIR:-infergate-results}"
export_formats="${INPUT_EXPORT:-}"
read -r -a exports <<< "${export_formats//,/ }" || true
for fmt in "${exports[@]}"; do
  case "$fmt" in
    bmf | gab | junit | csv) ;;
    *) usage_error "input 'export' takes bmf, gab, junit, csv (got '$fmt')" ;;
  esac
done
pr_number="${INPUT_PR_NUMBER:-}"
head_sha="${INPUT_HEAD_SHA:-}"

case "$mode" in
  gate | nightly | dispatch | ab) ;;
  report | merge | alert)
    [[ -d "$results_dir" ]] || usage_error "mode $mode: results directory '$results_dir' not found (input 'results-dir')"
    ;;
  *) usage_error "input 'mode' must be gate, nightly, dispatch, ab, report, merge or alert (got '$mode')" ;;
esac
case "$fail_on" in
  "" | regression | insufficient | never) ;;
  # The words of older versions: both mean `insufficient` now.
  inconclusive | insufficient_baseline) fail_on=insufficient ;;
  *) usage_error "input 'fail-on' must be regression, insufficient or never (got '$fail_on')" ;;
esac
[[ -z "$pr_number" || "$pr_number" =~ ^[1-9][0-9]{0,9}$ ]] || usage_error "input 'pr-number' must be a pull request number (got '$pr_number')"
[[ -z "$head_sha" || "$head_sha" =~ ^[0-9a-f]{40}$ ]] || usage_error "input 'head-sha' must be a full 40-character commit SHA (got '$head_sha')"
case "$update_baseline" in
  true | false) ;;
  *) usage_error "input 'update-baseline' must be true or false (got '$update_baseline')" ;;
esac
if [[ "$update_baseline" == "true" ]]; then
  case "${GITHUB_EVENT_NAME:-}" in
    pull_request | pull_request_target | merge_group)
      usage_error "update-baseline is refused on '${GITHUB_EVENT_NAME}' events: baselines are only updated from the default branch (see docs/security.md)"
      ;;
  esac
  [[ "$mode" != "ab" ]] || usage_error "update-baseline does not apply to mode ab (an A/B run compares two builds, not a baseline)"
fi
# Merge: no engine, no config; its own script joins the shards and posts the one check/comment.
[[ "$mode" != "merge" ]] || exec "$(dirname "$0")/merge.sh"

# Alert: no engine, no config; the store's history (with the night's results when the artifact
# holds them, read as data) analysed for change points, alerts filed, the trend report written.
if [[ "$mode" == "alert" ]]; then
  trend="$results_dir/trend.html"
  args=(changes --baseline-dir "${baseline_dir:-baselines}" --alert --format html --out "$trend")
  [[ -z "$suite" ]] || args+=(--suite "$suite")
  [[ ! -f "$results_dir/results.json" ]] || args+=(--candidate "$results_dir/results.json")
  echo "infergate ${args[*]}"
  set +e
  "$bin" "${args[@]}"
  rc=$?
  set -e
  [[ ! -f "$trend" ]] || echo "trend-report-path=$trend" >> "$out_file"
  echo "infergate: exit $rc (alerts and trend report)"
  exit "$rc"
fi

if [[ "$mode" == "report" ]]; then
  [[ -f "$config" ]] || usage_error "mode report: trusted config '$config' not found (input 'config': the gate config of a checkout of the base branch, never the PR's; relative to $(pwd))"
else
  [[ -f "$config" ]] || usage_error "config file '$config' not found (input 'config', relative to $(pwd))"
fi

mkdir -p "$results_dir"

args=()
case "$mode" in
  ab) args+=(ab --config "$config" --out "$results_dir") ;;
  report)
    # The artifact's verdict.json is the untrusted run's word: never read. The verdict is
    # recomputed from results.json against the trusted config and baselines, and written here.
    trusted_dir="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/infergate-trusted.XXXXXX")"
    args+=(report --results "$results_dir/results.json" --trusted-config "$config"
      --verdict-out "$trusted_dir/verdict.json")
    [[ -z "$baseline_dir" ]] || args+=(--baseline-dir "$baseline_dir")
    [[ -z "$pr_number" ]] || args+=(--pr "$pr_number")
    [[ -z "$head_sha" ]] || args+=(--head-sha "$head_sha")
    ;;
  *) args+=(run --config "$config" --out "$results_dir") ;;
esac
[[ -z "$suite" ]] || args+=(--suite "$suite")
# The input decides what fails the gate, for the step's exit code and the check run alike:
# the binary ends by its one policy, and this script re-derives nothing from the verdict.
[[ -z "$fail_on" ]] || args+=(--fail-on "$fail_on")
if [[ "$mode" != "ab" && "$mode" != "report" ]]; then
  [[ -z "$baseline_dir" ]] || args+=(--baseline-dir "$baseline_dir")
  [[ "$update_baseline" != "true" ]] || args+=(--update-baseline)
  # Engine flags: whitespace-separated words, taken literally (no globbing, no expansion).
  set -f
  read -r -d '' -a extra <<< "${INPUT_ENGINE_ARGS:-}" || true
  set +f
  for word in "${extra[@]}"; do
    args+=("--engine-arg=$word")
  done
fi
# Inside Actions, infergate writes the job summary and outputs itself, and posts the check and
# comment when the token allows (without one: a notice, never an error).
[[ "${GITHUB_ACTIONS:-}" != "true" ]] || args+=(--github)

echo "infergate ${args[*]}"
outputs_before="$(wc -l < "$out_file")"
# On cancel the runner signals this shell (SIGINT, then SIGTERM ~7.5 s later, then SIGKILL
# ~2.5 s after that), not infergate: forward each signal so the gate stops the engine and
# writes its results inside that window. infergate runs in the background so the traps fire
# while it runs; `wait` returns early when a trapped signal arrives, so wait again until the
# gate itself has ended and take its status.
set +e
"$bin" "${args[@]}" &
gate_pid=$!
# shellcheck disable=SC2329 # invoked by the traps below
forward() { kill -s "$1" "$gate_pid" 2> /dev/null; }
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward HUP' HUP
wait "$gate_pid"
rc=$?
while kill -0 "$gate_pid" 2> /dev/null; do
  wait "$gate_pid"
  rc=$?
done
trap - INT TERM HUP
set -e

results_path="$results_dir/results.json"
summary_path="$results_dir/summary.md"
verdict_path="$results_dir/verdict.json"
if [[ "$mode" == "report" ]]; then
  verdict_path="$trusted_dir/verdict.json"
fi
# infergate writes the outputs (verdict, conclusion, regressions, ...) itself, from the policy
# that gave its exit code. A gate that stopped before reporting (bad input, a crash) wrote
# none: then the step says `error`, as its exit code does.
if ! tail -n "+$((outputs_before + 1))" "$out_file" | grep -q '^verdict='; then
  {
    echo "verdict=error"
    echo "regressions=0"
    [[ ! -f "$results_path" ]] || echo "results-path=$results_path"
    [[ ! -f "$summary_path" ]] || echo "summary-path=$summary_path"
  } >> "$out_file"
fi

# Exports render the files just written (rendering only: they never change the verdict or the
# exit code; a failed export is a warning and its output is left unset).
export_one() { # output-name file infergate-export-args...
  local name="$1" file="$2"
  shift 2
  if "$bin" export "$@" --results "$results_path" "${verdict_args[@]}" --out "$file"; then
    echo "$name=$file" >> "$out_file"
  else
    echo "::warning title=infergate::export to $file failed (see the log above)"
  fi
}
verdict_args=()
[[ ! -f "$verdict_path" ]] || verdict_args=(--verdict "$verdict_path")
if [[ ${#exports[@]} -gt 0 && -f "$results_path" ]]; then
  for fmt in "${exports[@]}"; do
    case "$fmt" in
      bmf) export_one export-bmf-path "$results_dir/export.bmf.json" --format bmf ;;
      junit) export_one export-junit-path "$results_dir/export.junit.xml" --format junit ;;
      csv) export_one export-csv-path "$results_dir/export.csv" --format csv ;;
      gab)
        export_one export-gab-bigger-path "$results_dir/export.gab-bigger.json" --format gab --gab-tool customBiggerIsBetter
        export_one export-gab-smaller-path "$results_dir/export.gab-smaller.json" --format gab --gab-tool customSmallerIsBetter
        ;;
    esac
  done
fi

echo "infergate: exit $rc (fail-on: ${fail_on:-from the config})"
exit "$rc"
