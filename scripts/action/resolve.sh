#!/usr/bin/env bash
# Step 1 of the composite action: decide how infergate gets onto the runner.
#
#   method=given    INFERGATE_BIN already points at an executable (tests, pre-provisioned runners)
#   method=release  download the release asset for this OS/arch (verified by its .sha256)
#   method=source   `cargo build --release --locked` from the action's own source, cached
#
# Inputs (env): INPUT_VERSION, ACTION_REF, GITHUB_ACTION_PATH, RUNNER_OS, RUNNER_ARCH,
# RUNNER_TEMP, GITHUB_OUTPUT; optional INFERGATE_BIN.
# Outputs: method, tag, bin-dir, cache-key.
set -euo pipefail

die() { echo "::error title=infergate action::$*" >&2; exit 2; }

out="${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set (run inside GitHub Actions or set it to a file)}"
action_path="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}"
version="${INPUT_VERSION:-}"
# github.action_ref is not promised inside composite actions (github/docs#25336): when it is
# empty, the ref is the last component of the action's checkout directory, which the runner
# names after the ref the workflow wrote (`_actions/OWNER/REPO/REF`).
ref="${ACTION_REF:-}"
if [[ -z "$ref" ]]; then
  ref="$(basename "$action_path")"
fi
temp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"

if [[ "${RUNNER_OS:-Linux}" != "Linux" ]]; then
  die "infergate runs on Linux runners only (RUNNER_OS=${RUNNER_OS})"
fi
case "${RUNNER_ARCH:-X64}" in
  X64) arch=x86_64 ;;
  ARM64) arch=aarch64 ;;
  *) die "unsupported runner architecture ${RUNNER_ARCH}; supported: X64, ARM64" ;;
esac

semver_tag='^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$'
major_tag='^v[0-9]+(\.[0-9]+)?$'

method=source
tag=""
if [[ -n "${INFERGATE_BIN:-}" ]]; then
  [[ -x "$INFERGATE_BIN" ]] || die "INFERGATE_BIN=$INFERGATE_BIN is not an executable file"
  method=given
elif [[ "$version" == "source" ]]; then
  method=source
elif [[ -n "$version" ]]; then
  [[ "$version" =~ $semver_tag ]] || die "input 'version' must be a release tag like v0.1.0 or 'source' (got '$version')"
  method=release
  tag="$version"
elif [[ "$ref" =~ $semver_tag ]]; then
  method=release
  tag="$ref"
elif [[ "$ref" =~ $major_tag || "$ref" =~ ^[0-9a-f]{40}$ ]]; then
  # A moving major tag (v1) or a pin by commit SHA (the recommended way to use an action):
  # install the exact release the action's own source declares in its Cargo.toml. If that
  # release has no asset (an unreleased commit), install.sh says so and builds from source.
  pkg_version="$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$action_path/Cargo.toml" | head -n1)"
  [[ -n "$pkg_version" ]] || die "cannot read the package version from $action_path/Cargo.toml"
  method=release
  tag="v$pkg_version"
fi

bin_dir="$temp/infergate-action/bin-$arch"
cache_key=""
if [[ "$method" == "source" ]]; then
  # hashFiles() only sees the workspace, not the action's directory: hash the sources here.
  src_hash="$(
    cd "$action_path"
    find Cargo.toml Cargo.lock src crates -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-32
  )"
  cache_key="infergate-bin-${RUNNER_OS:-Linux}-$arch-$src_hash"
fi

{
  echo "method=$method"
  echo "tag=$tag"
  echo "bin-dir=$bin_dir"
  echo "cache-key=$cache_key"
} >> "$out"
echo "infergate install: method=$method${tag:+ tag=$tag} arch=$arch"
