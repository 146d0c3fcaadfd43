#!/bin/sh
# srd-perf --rma over tcp and shm: put, putsig and get through our plugin's
# ncclRmaPlugin_v14 table against raw libfabric RMA, side by side at small
# sizes and a striped one (4 MiB over 4 endpoints); the raw half alone on
# lanes (forced to 2 threads, the stripe threshold lowered to 16 KiB) for
# sizes on both sides of the threshold, and the plugin alone so; every size in both halves, data
# checked at each (a wrong byte fails the run); JSON that
# parses; then the errors: a bad op, a plugin without the RMA table, RMA not
# offered (the plugin's reason printed). Skipped (77) when the plugin or the
# wrapper (a plugin with no RMA table) is not built.
set -u
. "${top_srcdir:-.}/tests/tools/json_check.sh"
bin="${top_builddir:-.}/srd-perf"
lib="${top_builddir:-.}/.libs/libnccl-net-srd.so"
wrap="${top_builddir:-.}/tests/tools/.libs/libsrd-corrupt.so"
[ -f "$lib" ] && [ -f "$wrap" ] || { echo "SKIP: $lib or $wrap not built"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# timeout 600: a hang guard (srd-perf gives up on a silent peer itself, --timeout 15 s), never a
# bound on how fast a loaded machine runs these.
striped() {
  NCCL_SRD_RAILS=1 NCCL_SRD_EPS_PER_RAIL=4 NCCL_SRD_STRIPE_THRESHOLD=16K NCCL_SRD_MIN_STRIPE=4K "$@"
}

for prov in tcp shm; do
  for op in put putsig get; do
    echo "== $prov $op"
    NCCL_SRD_PROVIDER="$prov" striped timeout 600 "$bin" --rma "$op" -b 8 -e 4M -f 512 -n 10 -w 1 > "$tmp/out" 2>&1 ||
      { cat "$tmp/out"; fail "$prov $op: the run failed"; }
    cat "$tmp/out"
    grep -q "(ncclRma v14)" "$tmp/out" || fail "$prov $op: the plugin half did not drive ncclRmaPlugin_v14"
    grep -q "^# one-sided .*data checked at every size" "$tmp/out" || fail "$prov $op: no one-sided header"
    grep -q "^# provider $prov" "$tmp/out" || fail "$prov $op: the provider is not named"
    # Every size: plugin and raw latency and bandwidth, each with its ratio.
    for size in "8 B" "4 KiB" "2 MiB" "4 MiB"; do
      grep -Eq "^ *$size( +[0-9]+\.[0-9]+(-[0-9]+\.[0-9]+)?[!^]*){10}\$" "$tmp/out" ||
        fail "$prov $op: no full plugin/raw row for $size"
    done
  done
  # The plugin alone on lanes, where stripes of the timed puts may land
  # after the put completed (no signal fences them): the data check must not
  # read bytes a timed op writes.
  for op in put putsig get; do
    echo "== $prov $op, plugin on lanes"
    NCCL_SRD_PROVIDER="$prov" NCCL_SRD_PROGRESS_THREADS=2 striped timeout 600 "$bin" --plugin "$lib" --rma "$op" \
      -b 4K -e 1M -f 4 -n 10 -w 1 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "$prov $op: the plugin run on lanes failed"; }
    for size in "4 KiB" "16 KiB" "1 MiB"; do
      grep -Eq "^ *$size +10( +[0-9]+\.[0-9]+){5}\$" "$tmp/out" || fail "$prov $op: no plugin row for $size on lanes"
    done
  done
  # The raw half alone (the plugin's own striping is tested above).
  for op in put putsig get; do
    echo "== $prov $op, raw striped over lanes"
    NCCL_SRD_PROVIDER="$prov" NCCL_SRD_PROGRESS_THREADS=2 striped timeout 600 "$bin" --raw --rma "$op" -b 4K -e 1M -f 4 \
      -n 10 -w 1 > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "$prov $op: the raw run on lanes failed"; }
    cat "$tmp/out"
    grep -q "^# srd-perf .*: raw .* x 3 lanes, .* or more striped over the threads' lanes" "$tmp/out" ||
      fail "$prov $op: the raw half did not stripe over 2 threads' lanes"
    grep -q "provider $prov" "$tmp/out" || fail "$prov $op: raw on lanes: the provider is not named"
    for size in "4 KiB" "16 KiB" "1 MiB"; do
      grep -Eq "^ *$size +10( +[0-9]+\.[0-9]+){5}\$" "$tmp/out" || fail "$prov $op: no raw row for $size on lanes"
    done
  done
  NCCL_SRD_PROVIDER="$prov" timeout 600 "$bin" --rma get --json -b 8 -e 64K -f 8 -n 10 -w 1 > "$tmp/json" ||
    fail "$prov: --rma --json run"
  json_check "$tmp/json" || { cat "$tmp/json"; fail "$prov: --rma --json is not valid JSON"; }
  grep -q '"rma": "get"' "$tmp/json" || fail "$prov: JSON does not name the op"
  FI_PROVIDER="$prov" timeout 600 "$bin" --raw --rma putsig -t lat -b 8 -e 64K -f 8 -n 10 -w 1 > "$tmp/raw" ||
    { cat "$tmp/raw"; fail "$prov: --raw --rma putsig"; }
  grep -Eq "^ *64 KiB +10 +[0-9.]+ +[0-9.]+ +[0-9.]+\$" "$tmp/raw" || { cat "$tmp/raw"; fail "$prov: --raw table"; }
done

echo "== errors"
"$bin" --rma write > "$tmp/err" 2>&1
[ $? -eq 2 ] || fail "a bad op did not exit 2"
grep -q "bad value 'write' for '--rma'" "$tmp/err" || { cat "$tmp/err"; fail "a bad op is not explained"; }
"$bin" --rma put -t bibw > "$tmp/err" 2>&1
[ $? -eq 2 ] || fail "--rma with bibw did not exit 2"
NCCL_SRD_PROVIDER=tcp timeout 600 "$bin" --rma put --plugin "$wrap" -b 8 -e 8 -n 2 > "$tmp/err" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a plugin without ncclRmaPlugin_v14 ran (rc $rc)"
grep -q "exports no usable ncclRmaPlugin_v14 table" "$tmp/err" || { cat "$tmp/err"; fail "no table: not explained"; }
NCCL_SRD_RMA=0 NCCL_SRD_PROVIDER=tcp timeout 600 "$bin" --rma get -b 8 -e 8 -n 2 > "$tmp/err" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "RMA not offered, yet the run went on (rc $rc)"
grep -q "the plugin's RMA init failed: .*RMA: not offered" "$tmp/err" || { cat "$tmp/err"; fail "no reason given"; }
[ "$(grep -c "RMA init failed" "$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "the reason is printed more than once"; }
echo "PASS"
