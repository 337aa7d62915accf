#!/usr/bin/env bash
# Checks that a Linux binary needs no glibc symbol version newer than a floor (default 2.17,
# the glibc of RHEL/CentOS 7; Ubuntu 20.04 has 2.31, RHEL 8 2.28), so the release binary starts
# on old distributions. Reads the dynamic symbol table with `objdump -T` (binutils).
#
#   scripts/check-glibc.sh target/x86_64-unknown-linux-gnu/release/infergate [2.17]
#
# Exit 0 when every GLIBC_x.y symbol version is <= the floor, 1 otherwise (the offending
# symbols are listed), 2 on a usage problem. The release workflow runs it on every asset.
set -euo pipefail

bin="${1:?usage: check-glibc.sh BINARY [MAX_GLIBC]}"
max="${2:-2.17}"
[[ -f "$bin" ]] || { echo "check-glibc: $bin not found" >&2; exit 2; }
# OBJDUMP: an objdump that reads the binary's architecture (aarch64-linux-gnu-objdump for an
# aarch64 binary checked on x86_64).
objdump="${OBJDUMP:-objdump}"
command -v "$objdump" > /dev/null || { echo "check-glibc: $objdump not found (install binutils)" >&2; exit 2; }

version_le() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" == "$1" ]]; }

mapfile -t versions < <("$objdump" -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV)
if [[ "${#versions[@]}" -eq 0 ]]; then
  echo "check-glibc: $bin needs no versioned glibc symbol (static or musl)"
  exit 0
fi
newest="${versions[-1]}"
if version_le "$newest" "$max"; then
  echo "check-glibc: $bin needs glibc $newest at most (floor $max): ok"
  exit 0
fi
echo "check-glibc: $bin needs glibc $newest, newer than $max; symbols:" >&2
"$objdump" -T "$bin" | grep -E "GLIBC_[0-9.]+" | awk -v max="$max" '{
  match($0, /GLIBC_[0-9.]+/); v = substr($0, RSTART + 6, RLENGTH - 6)
  print "  " v "  " $NF
}' | sort -uV | while read -r v sym; do
  version_le "$v" "$max" || echo "  GLIBC_$v $sym" >&2
done
exit 1
