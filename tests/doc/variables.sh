#!/bin/sh
# doc/variables.md is what the parameter table prints (tests/doc/variables.c):
# a variable added, removed or reworded in src/util/param.c without the page
# regenerated fails here, with the difference.
#   tests/doc/variables.sh                  (make check: compare)
#   tests/doc/variables.sh --write BUILDDIR (rewrite doc/variables.md)
set -u
if [ "${1:-}" = --write ]; then
  top_builddir=${2:?usage: variables.sh --write BUILDDIR}
  top_srcdir=$(cd "$(dirname "$0")/../.." && pwd)
fi
gen="${top_builddir:-.}/tests/doc/variables"
page="${top_srcdir:-.}/doc/variables.md"
[ -x "$gen" ] || { echo "FAIL: $gen is not built (make tests/doc/variables)"; exit 1; }
tmp=$(mktemp) || exit 99
trap 'rm -f "$tmp"' EXIT
# The environment must not leak into the defaults the page shows.
env -i "$gen" > "$tmp" || { echo "FAIL: $gen exited $?"; exit 1; }
if [ "${1:-}" = --write ]; then
  cp "$tmp" "$page" && echo "wrote $page"
  exit 0
fi
diff -u "$page" "$tmp" || { echo "FAIL: doc/variables.md is stale: tests/doc/variables.sh --write BUILDDIR"; exit 1; }
grep -q '^| `NCCL_SRD_PROVIDER` ' "$page" || { echo "FAIL: no NCCL_SRD_PROVIDER row"; exit 1; }
echo "PASS: doc/variables.md matches the parameter table ($(grep -c '^| `NCCL_SRD_' "$page") variables)"
