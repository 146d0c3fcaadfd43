#!/bin/sh
# srd-perf --check on corrupt data: through a plugin that wraps ours and flips
# a byte of every message it receives (tests/tools/corrupt_plugin.c), the run
# names the wrong byte and exits non-zero; through the same wrapper with the
# flipping off it passes, so the failure is the corruption's. Skipped (77)
# when the plugin or the wrapper is not built.
set -u
bin="${top_builddir:-.}/srd-perf"
lib="${top_builddir:-.}/.libs/libnccl-net-srd.so"
wrap="${top_builddir:-.}/tests/tools/.libs/libsrd-corrupt.so"
[ -f "$lib" ] && [ -f "$wrap" ] || { echo "SKIP: $lib or $wrap not built"; exit 77; }
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# srd-perf gives up on a silent peer after --timeout (15 s); the bound here is
# many times one run's work, never what a run should take.
run() {
  SRD_TEST_WRAPPED_PLUGIN="$lib" SRD_TEST_CORRUPT="$1" NCCL_SRD_PROVIDER="$2" timeout 300 "$bin" --plugin "$wrap" \
    --check -b 8 -e 64K -f 8 -n 5 -w 1 -t lat,bw > "$tmp/out" 2>&1
}

for prov in tcp shm; do
  echo "== $prov"
  run 0 "$prov" || { cat "$tmp/out"; fail "$prov: the run through the wrapper failed without corruption"; }
  run 1 "$prov"
  rc=$?
  cat "$tmp/out"
  [ "$rc" -ne 124 ] || fail "$prov: srd-perf on corrupt data did not end"
  [ "$rc" -ne 0 ] || fail "$prov: srd-perf --check exited 0 on corrupt data"
  grep -q -- "--check: .* byte [0-9]* of [0-9]* is 0x" "$tmp/out" || fail "$prov: the corrupt byte was not reported"
done
echo "PASS"
