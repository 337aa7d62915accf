#!/usr/bin/env bash
# Step 2 of the composite action: put the infergate binary on the runner (see resolve.sh).
#
# Release assets (built by .github/workflows/release.yml) are named
#   infergate-<tag>-<arch>-unknown-linux-gnu.tar.gz  (+ .sha256)
# and the checksum is ALWAYS verified; a mismatch is fatal (never fall back to anything else).
# A release that cannot be downloaded (e.g. an unreleased tag) falls back to a source build.
#
# Inputs (env): INSTALL_METHOD, INSTALL_TAG, INSTALL_BIN_DIR, ACTION_REPOSITORY,
# GITHUB_ACTION_PATH, GITHUB_SERVER_URL, RUNNER_ARCH, GITHUB_OUTPUT, GITHUB_PATH; optional
# INFERGATE_BIN (method=given).
# Outputs: bin (absolute path of the executable).
set -euo pipefail

die() { echo "::error title=infergate install::$*" >&2; exit 3; }

out="${GITHUB_OUTPUT:?GITHUB_OUTPUT is not set}"
method="${INSTALL_METHOD:?INSTALL_METHOD is not set}"
bin_dir="${INSTALL_BIN_DIR:?INSTALL_BIN_DIR is not set}"
case "${RUNNER_ARCH:-X64}" in
  X64) arch=x86_64 ;;
  ARM64) arch=aarch64 ;;
  *) die "unsupported runner architecture ${RUNNER_ARCH}" ;;
esac

install_release() {
  local tag="${INSTALL_TAG:?INSTALL_TAG is not set}"
  local repo="${ACTION_REPOSITORY:-}"
  if [[ -z "$repo" ]]; then
    # Not promised inside composite actions: the runner's checkout is _actions/OWNER/REPO/REF.
    local ref_dir="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}"
    repo="$(basename "$(dirname "$(dirname "$ref_dir")")")/$(basename "$(dirname "$ref_dir")")"
  fi
  [[ "$repo" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || die "cannot tell the action's repository (got '$repo')"
  local server="${GITHUB_SERVER_URL:-https://github.com}"
  local asset="infergate-$tag-$arch-unknown-linux-gnu.tar.gz"
  local url="$server/$repo/releases/download/$tag/$asset"
  local work
  work="$(mktemp -d)"
  echo "Downloading $url"
  if ! curl --fail --silent --show-error --location --retry 3 -o "$work/$asset" "$url" ||
    ! curl --fail --silent --show-error --location --retry 3 -o "$work/$asset.sha256" "$url.sha256"; then
    echo "::warning title=infergate install::release asset $asset not available for $repo@$tag; falling back to a source build (cargo build --release, minutes on the runner)"
    rm -rf "$work"
    return 1
  fi
  # The .sha256 file is `<hex>  <asset name>`; check it against the file we actually downloaded.
  local want have
  want="$(cut -d' ' -f1 < "$work/$asset.sha256")"
  have="$(sha256sum "$work/$asset" | cut -d' ' -f1)"
  [[ "$want" =~ ^[0-9a-f]{64}$ ]] || die "malformed checksum file $asset.sha256"
  [[ "$want" == "$have" ]] || die "checksum mismatch for $asset: expected $want, got $have"
  mkdir -p "$bin_dir"
  tar -xzf "$work/$asset" -C "$work"
  install -m 0755 "$work/infergate" "$bin_dir/infergate"
  rm -rf "$work"
}

install_source() {
  local action_path="${GITHUB_ACTION_PATH:?GITHUB_ACTION_PATH is not set}"
  if [[ -x "$bin_dir/infergate" ]]; then
    echo "Using the cached source build in $bin_dir"
    return 0
  fi
  command -v cargo >/dev/null || die "cargo not found: install a Rust toolchain on the runner, or use a release tag of the action"
  local target="${RUNNER_TEMP:-/tmp}/infergate-action/target"
  echo "::notice title=infergate install::building infergate from source in $action_path (cargo build --release --locked): no release binary is used"
  cargo build --release --locked --manifest-path "$action_path/Cargo.toml" --target-dir "$target"
  mkdir -p "$bin_dir"
  install -m 0755 "$target/release/infergate" "$bin_dir/infergate"
}

case "$method" in
  given)
    bin="${INFERGATE_BIN:?INFERGATE_BIN is not set}"
    ;;
  release)
    install_release || install_source
    bin="$bin_dir/infergate"
    ;;
  source)
    install_source
    bin="$bin_dir/infergate"
    ;;
  *) die "unknown install method '$method'" ;;
esac

"$bin" --version
echo "bin=$bin" >> "$out"
if [[ -n "${GITHUB_PATH:-}" ]]; then
  dirname "$bin" >> "$GITHUB_PATH"
fi
