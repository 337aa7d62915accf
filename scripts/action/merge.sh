#!/usr/bin/env bash
# Mode `merge` of the composite action (the final job of a fan-out workflow): joins every shard
# under the results directory (each a downloaded artifact holding verdict.json, or results.json alone) into one verdict,
# appends one summary to the job summary, sets the outputs, and posts ONE check run and ONE
# sticky PR comment (found by its hidden marker and edited in place).
#
# The shards are data produced on other runners: they are only ever parsed by `infergate merge`
# (typed JSON, unknown shapes rejected) and never executed or sourced.
#
# The exit code, the `verdict` output and the check run's conclusion are all infergate's, from
# its one gate policy under the `fail-on` input: this script re-derives none of them.
#
# Inputs (env): INFERGATE_BIN, INPUT_RESULTS_DIR, INPUT_FAIL_ON, INPUT_EXPECT_SHARDS, GITHUB_OUTPUT,
# GITHUB_STEP_SUMMARY; for posting: GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH,
# GITHUB_SHA, GITHUB_SERVER_URL, GITHUB_RUN_ID, and `gh` + `jq` on PATH (GitHub-hosted runners).
set -euo pipefail

usage_error() { echo "::error title=infergate merge::$*" >&2; exit 2; }

out_file="${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}"
bin="${INFERGATE_BIN:-infergate}"
results_dir="${INPUT_RESULTS_DIR:-infergate-results}"
fail_on="${INPUT_FAIL_ON:-regression}" # run.sh checked the word
expect_shards="${INPUT_EXPECT_SHARDS:-}"
[[ -z "$expect_shards" || "$expect_shards" =~ ^[1-9][0-9]{0,3}$ ]] || usage_error "input 'expect-shards' must be the number of shards the workflow launched (got '$expect_shards')"

[[ -d "$results_dir" ]] || usage_error "results directory '$results_dir' not found (input 'results-dir')"
# A shard is a directory holding verdict.json, or only results.json when its run compared
# nothing (no baseline yet, or cancelled: `infergate merge` fails closed on the latter).
shards=()
while IFS= read -r -d '' dir; do
  shards+=(--shard "$dir")
done < <(find "$results_dir" -mindepth 1 -maxdepth 3 -type f \( -name verdict.json -o -name results.json \) -printf '%h\0' | LC_ALL=C sort -zu)
[[ "${#shards[@]}" -gt 0 ]] || usage_error "no shard verdict.json or results.json found under '$results_dir'"
policy=(--fail-on "$fail_on")
[[ -z "$expect_shards" ]] || policy+=(--expect-shards "$expect_shards")

merged_md="$results_dir/merged-summary.md"
merged_json="$results_dir/merged-verdict.json"
scratch="$(mktemp)"
trap 'rm -f "$scratch"' EXIT

set +e
"$bin" merge "${shards[@]}" "${policy[@]}" --format json --out "$merged_json" --github-output "$scratch"
rc=$?
set -e
# 0 pass, 1 a verdict fail-on fails, 3 a shard not measured or missing (still summarised and
# posted, then the same exit); 2 is bad input: nothing to post.
[[ "$rc" -le 1 || "$rc" -eq 3 ]] || exit "$rc"
"$bin" merge "${shards[@]}" "${policy[@]}" --format md --out "$merged_md" || true
"$bin" merge "${shards[@]}" "${policy[@]}" --format text || true

verdict="$(sed -n 's/^verdict=//p' "$scratch")"
conclusion="$(sed -n 's/^conclusion=//p' "$scratch")"
regressions="$(sed -n 's/^regressions=//p' "$scratch")"
{
  cat "$scratch"
  echo "results-path=$merged_json"
  echo "summary-path=$merged_md"
} >> "$out_file"
# GitHub refuses a job summary over 1 MiB per step (and then shows none): keep under it.
summary_limit=1000000
if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
  if [[ "$(wc -c < "$merged_md")" -gt "$summary_limit" ]]; then
    head -c "$summary_limit" "$merged_md" >> "$GITHUB_STEP_SUMMARY"
    printf '\n\n_(truncated at 1 MB, GitHub'"'"'s job summary limit: the full summary is merged-summary.md in the artifact)_\n' >> "$GITHUB_STEP_SUMMARY"
  else
    cat "$merged_md" >> "$GITHUB_STEP_SUMMARY"
  fi
fi

post() {
  if [[ -z "${GITHUB_TOKEN:-}" ]]; then
    echo "::notice title=infergate merge::no github-token given: job summary and outputs only (no check run, no comment)"
    return 0
  fi
  if ! command -v gh > /dev/null || ! command -v jq > /dev/null; then
    echo "::notice title=infergate merge::gh or jq not on PATH: job summary and outputs only"
    return 0
  fi
  export GH_TOKEN="$GITHUB_TOKEN"
  # On GitHub Enterprise Server gh must be told the host (else it talks to github.com), and
  # reads the token from GH_ENTERPRISE_TOKEN there.
  local server_host="${GITHUB_SERVER_URL:-https://github.com}"
  server_host="${server_host#*://}"
  server_host="${server_host%%/*}"
  if [[ -n "$server_host" && "$server_host" != "github.com" ]]; then
    export GH_HOST="$server_host"
    export GH_ENTERPRISE_TOKEN="$GITHUB_TOKEN"
  fi
  local repo="${GITHUB_REPOSITORY:?GITHUB_REPOSITORY is not set}"
  local event="${GITHUB_EVENT_PATH:-/dev/null}"
  local head_sha pr
  head_sha="$(jq -r '.workflow_run.head_sha // .pull_request.head.sha // empty' "$event" 2> /dev/null || true)"
  head_sha="${head_sha:-${GITHUB_SHA:-}}"
  pr="$(jq -r '(.workflow_run.pull_requests[0].number // .pull_request.number // empty)' "$event" 2> /dev/null || true)"
  [[ "$head_sha" =~ ^[0-9a-f]{40}$ ]] || { echo "::warning::no commit to attach the check to"; return 0; }

  local title
  title="infergate: $verdict ($regressions regressions)"
  # GitHub caps a check summary and a comment body at 65,535 characters.
  local body
  body="$(head -c 65000 "$merged_md")"
  if [[ "$(wc -c < "$merged_md")" -gt 65000 ]]; then
    body+=$'\n\n_(truncated: the full summary is in the job summary and the merged-verdict artifact)_'
  fi
  jq -n --arg name "infergate / merged" --arg sha "$head_sha" --arg conclusion "$conclusion" \
    --arg title "$title" --arg summary "$body" \
    '{name: $name, head_sha: $sha, status: "completed", conclusion: $conclusion,
      output: {title: $title, summary: $summary}}' |
    gh api --method POST "repos/$repo/check-runs" --input - > /dev/null ||
    echo "::warning title=infergate merge::could not create the check run (needs 'checks: write')"

  if [[ "$pr" =~ ^[0-9]+$ ]]; then
    # Only a comment this token wrote is ours to edit: anyone can paste the marker. GraphQL's
    # viewer answers for every token kind (GITHUB_TOKEN: github-actions[bot]).
    local marker="<!-- infergate:merged -->" existing="" me
    me="$(gh api graphql -f query='query { viewer { login } }' --jq .data.viewer.login 2> /dev/null || true)"
    if [[ "$me" =~ ^[A-Za-z0-9][A-Za-z0-9-]*(\[bot\])?$ ]]; then
      existing="$(gh api --paginate "repos/$repo/issues/$pr/comments" \
        --jq ".[] | select(.user.login == \"$me\" and (.body | startswith(\"$marker\"))) | .id" 2> /dev/null | head -n1 || true)"
    fi
    if [[ "$existing" =~ ^[0-9]+$ ]]; then
      jq -n --arg body "$body" '{body: $body}' |
        gh api --method PATCH "repos/$repo/issues/comments/$existing" --input - > /dev/null ||
        echo "::warning title=infergate merge::could not update the PR comment (needs 'pull-requests: write')"
    else
      jq -n --arg body "$body" '{body: $body}' |
        gh api --method POST "repos/$repo/issues/$pr/comments" --input - > /dev/null ||
        echo "::warning title=infergate merge::could not comment on the PR (needs 'pull-requests: write')"
    fi
  fi
}
# A reporting failure never changes the verdict or the exit code.
post || true

# infergate's exit code, under fail-on: 3 (a profile not measured, a shard missing) whatever
# fail-on says, as engine failures do.
exit "$rc"
