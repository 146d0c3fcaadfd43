#!/bin/sh
# srd-perf drives our built plugin the way NCCL does, over tcp and shm, with
# data verification. Skipped (77) only when the plugin is not in the build tree.
set -u
. "${top_srcdir:-.}/tests/tools/json_check.sh"
bin="${top_builddir:-.}/srd-perf"
lib="${top_builddir:-.}/.libs/libnccl-net-srd.so"
[ -f "$lib" ] || { echo "SKIP: $lib not built"; exit 77; }
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# timeout 600: a hang guard (srd-perf gives up on a silent peer itself, --timeout 15 s), never a
# bound on how fast a loaded machine runs these.

for prov in tcp shm; do
  echo "== $prov"
  # The default run: plugin and raw side by side, naming the provider.
  NCCL_SRD_PROVIDER="$prov" timeout 600 "$bin" --check -b 0 -e 1M -f 8 -n 20 -w 2 -t all > "$tmp/default" ||
    { cat "$tmp/default"; fail "$prov: basic"; }
  cat "$tmp/default"
  grep -q "^# provider $prov" "$tmp/default" || fail "$prov: the default run does not name the provider"
  grep -q "lat_us  *runs  *raw  *runs  *ratio  *bw_GB/s  *runs  *raw  *runs  *ratio  *bibw_GB/s .*ratio" "$tmp/default" ||
    fail "$prov: the default run does not put plugin and raw side by side"
  # Every cell: the median run, the runs' spread (three runs by default) and
  # which way is better.
  grep -q "^# each value: the median of 3 runs, then the runs' min-max" "$tmp/default" || fail "$prov: no spread"
  grep -q "^# lat_us: lower is better .* bw: higher is better" "$tmp/default" || fail "$prov: no direction hint"
  grep -Eq "^ *4 KiB( +[0-9]+\.[0-9]+(-[0-9]+\.[0-9]+)?[!^]*){15}\$" "$tmp/default" ||
    fail "$prov: no full row (median, spread, raw, spread, ratio per metric) for 4 KiB"
  # --pin in the default run pins both passes: the raw pass's server is forked
  # from the plugin pass's client, which must give its one CPU back first
  # (else that server finds no second CPU and shares the client's: ~4 ms
  # latency, the scheduler's slice).
  if [ "$prov" = tcp ] && [ "$(nproc)" -ge 2 ]; then
    NCCL_SRD_PROVIDER=tcp timeout 600 "$bin" --pin -b 8 -e 8 -n 5 -w 1 -t lat > "$tmp/pin" 2>&1 ||
      { cat "$tmp/pin"; fail "tcp: --pin"; }
    if grep -q -- "--pin:" "$tmp/pin"; then cat "$tmp/pin"; fail "tcp: --pin did not pin both passes"; fi
  fi
  NCCL_SRD_PROVIDER="$prov" timeout 600 "$bin" --plugin "$lib" --check -b 8 -e 256K -f 64 -n 30 -w 1 -c 4 -W 16 \
    -g 4 -t bw,bibw || fail "$prov: 4 comms, window 16, groups of 4"
  for v in 8 9 10 11 12; do
    NCCL_SRD_PROVIDER="$prov" timeout 600 "$bin" --net-version "$v" --check -b 8 -e 64K -f 1024 -n 5 -w 1 -c 2 -g 2 \
      -t all > "$tmp/v$v" || { cat "$tmp/v$v"; fail "$prov: ncclNet v$v"; }
    grep -q "(ncclNet v$v)" "$tmp/v$v" || fail "$prov: --net-version $v did not drive v$v"
  done
  NCCL_SRD_PROVIDER="$prov" timeout 600 "$bin" --json -b 8 -e 64K -f 8 -n 10 > "$tmp/json" || fail "$prov: json run"
  json_check "$tmp/json" || { cat "$tmp/json"; fail "$prov: --json is not valid JSON"; }
  grep -q '"transport": "plugin"' "$tmp/json" || fail "$prov: JSON lacks the transport"
  # One run per size unless --runs says otherwise; the spread rides beside.
  grep -q '"runs": 1,' "$tmp/json" || fail "$prov: JSON lacks the run count"
  [ "$(grep -c '"runs_spread"' "$tmp/json")" -eq 6 ] || fail "$prov: JSON lacks a runs_spread per size"
  grep -q "\"provider\": \"$prov" "$tmp/json" || fail "$prov: JSON does not name our plugin's provider"
done
echo "PASS"
