#!/usr/bin/env bash
# Step 3 of the composite action: turn the inputs into one infergate command, then set the step
# outputs and decide whether the step fails.
#
#   gate      infergate run  --config C [--suite S] --out DIR [...]        (PR gate)
#   nightly   infergate run  ... [--update-baseline]                       (default branch only)
#   dispatch  infergate run  ...                                           (manual run)
#   ab        infergate ab   --config C [--suite S] --out DIR              (paired A/B)
#   report    infergate report --results DIR/results.json [--verdict DIR/verdict.json] --github
#             (workflow_run reporter: DIR is a downloaded artifact, read as data only)
#   merge     merge.sh: infergate merge over every shard under DIR, one check, one comment
#
# Inputs (env): INFERGATE_BIN (default: infergate on PATH), INPUT_CONFIG, INPUT_SUITE, INPUT_MODE,
# INPUT_BASELINE_DIR, INPUT_FAIL_ON, INPUT_ENGINE_ARGS, INPUT_UPDATE_BASELINE, INPUT_RESULTS_DIR,
# INPUT_EXPORT (formats for `infergate export`: bmf, gab, junit, csv; space or comma separated),
# GITHUB_OUTPUT, GITHUB_EVENT_NAME, GITHUB_ACTIONS; GITHUB_TOKEN is passed through to infergate
# (which never prints it) and is never echoed here.
# Outputs: verdict, regressions, results-path, summary-path, and per exported format
# export-bmf-path, export-gab-bigger-path + export-gab-smaller-path, export-junit-path,
# export-csv-path (files next to results.json).
# Exit: 0 pass (or below the fail-on threshold), 1 regression (per fail-on), 2 bad input,
# 3 engine or measurement failure, as infergate itself.
set -euo pipefail

usage_error() { echo "::error title=infergate::$*" >&2; exit 2; }

out_file="${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set (run inside GitHub Actions or set it to a file)}"
bin="${INFERGATE_BIN:-infergate}"
config="${INPUT_CONFIG:-infergate.toml}"
suite="${INPUT_SUITE:-}"
mode="${INPUT_MODE:-gate}"
baseline_dir="${INPUT_BASELINE_DIR:-}"
fail_on="${INPUT_FAIL_ON:-regression}"
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

case "$mode" in
  gate | nightly | dispatch | ab) ;;
  report | merge)
    [[ -d "$results_dir" ]] || usage_error "mode $mode: results directory '$results_dir' not found (input 'results-dir')"
    ;;
  *) usage_error "input 'mode' must be gate, nightly, dispatch, ab, report or merge (got '$mode')" ;;
esac
case "$fail_on" in
  regression | inconclusive | never) ;;
  *) usage_error "input 'fail-on' must be regression, inconclusive or never (got '$fail_on')" ;;
esac
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

if [[ "$mode" != "report" ]]; then
  [[ -f "$config" ]] || usage_error "config file '$config' not found (input 'config', relative to $(pwd))"
fi

mkdir -p "$results_dir"

args=()
case "$mode" in
  ab) args+=(ab --config "$config" --out "$results_dir") ;;
  report)
    # A run without a baseline has no verdict.json: report the results alone.
    args+=(report --results "$results_dir/results.json")
    [[ ! -f "$results_dir/verdict.json" ]] || args+=(--verdict "$results_dir/verdict.json")
    ;;
  *) args+=(run --config "$config" --out "$results_dir") ;;
esac
[[ -z "$suite" || "$mode" == "report" ]] || args+=(--suite "$suite")
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
set +e
"$bin" "${args[@]}"
rc=$?
set -e

results_path="$results_dir/results.json"
summary_path="$results_dir/summary.md"
verdict_path="$results_dir/verdict.json"
verdict=error
regressions=0
if [[ ( "$rc" -eq 0 || "$rc" -eq 1 ) && -f "$verdict_path" ]]; then
  # Read the verdict through infergate itself (no jq on the runner needed): merge of one shard.
  scratch="$(mktemp)"
  set +e
  "$bin" merge --shard "$results_dir" --format text --github-output "$scratch" > /dev/null
  merge_rc=$?
  set -e
  if [[ "$merge_rc" -le 1 ]]; then
    verdict="$(sed -n 's/^verdict=//p' "$scratch")"
    regressions="$(sed -n 's/^regressions=//p' "$scratch")"
  fi
  rm -f "$scratch"
elif [[ "$rc" -eq 0 || "$rc" -eq 1 ]]; then
  # A run without a comparison (e.g. no baseline store yet) still passes or fails by its code.
  if [[ "$rc" -eq 1 ]]; then verdict=regression; else verdict=no_baseline; fi
fi

{
  echo "verdict=$verdict"
  echo "regressions=$regressions"
  [[ ! -f "$results_path" ]] || echo "results-path=$results_path"
  [[ ! -f "$summary_path" ]] || echo "summary-path=$summary_path"
} >> "$out_file"

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

echo "infergate: exit $rc, verdict $verdict, $regressions regressions (fail-on: $fail_on)"
if [[ "$rc" -ge 2 ]]; then
  exit "$rc"
fi
case "$fail_on:$verdict" in
  never:*) exit 0 ;;
  regression:regression | inconclusive:regression) exit 1 ;;
  inconclusive:inconclusive)
    echo "::error title=infergate::inconclusive verdict and fail-on is 'inconclusive'"
    exit 1
    ;;
  *) exit 0 ;;
esac
