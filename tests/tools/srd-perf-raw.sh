#!/bin/sh
# srd-perf --raw (libfabric directly) over tcp and shm: data verified, every
# pattern, eager and clear-to-send sizes, several and many comms on the shared
# endpoints, grouped receives, large messages striped over lanes (2 progress
# threads, and the automatic count) with as many lanes as the plugin, JSON
# that parses.
set -u
. "${top_srcdir:-.}/tests/tools/json_check.sh"
bin="${top_builddir:-.}/srd-perf"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# timeout 600: a hang guard (srd-perf gives up on a silent peer itself, --timeout 15 s), never a
# bound on how fast a loaded machine runs these.

for prov in tcp shm; do
  echo "== $prov"
  FI_PROVIDER="$prov" timeout 600 "$bin" --raw --check -b 0 -e 1M -f 8 -n 20 -w 2 -t all || fail "$prov: basic"
  FI_PROVIDER="$prov" timeout 600 "$bin" --raw --check -b 8 -e 256K -f 64 -n 30 -w 1 -c 4 -W 16 -g 4 -t bw,bibw ||
    fail "$prov: 4 comms, window 16, groups of 4"
  FI_PROVIDER="$prov" timeout 600 "$bin" --raw --check -b 8 -e 64K -f 8 -n 20 -w 1 -c 64 -W 32 -t bw,bibw ||
    fail "$prov: 64 comms sharing the endpoints and the eager credits, window 32"
  # From the stripe threshold up, stripes on the lanes' threads: every byte checked.
  NCCL_SRD_PROGRESS_THREADS=2 FI_PROVIDER="$prov" timeout 600 "$bin" --raw --check -b 64K -e 4M -f 4 -n 10 -w 1 -c 2 \
    -W 8 -t lat,bw,bibw > "$tmp/lanes" 2>&1 || { cat "$tmp/lanes"; fail "$prov: 2 lanes' threads, 2 comms"; }
  grep -q "1 NIC x 3 lanes" "$tmp/lanes" || { cat "$tmp/lanes"; fail "$prov: 2 progress threads did not give 3 lanes"; }
  FI_PROVIDER="$prov" timeout 600 "$bin" --raw --check -b 128K -e 2M -f 16 -n 10 -w 1 -t bw ||
    fail "$prov: large messages, automatic lane count"
  FI_PROVIDER="$prov" timeout 600 "$bin" --raw --json -b 8 -e 64K -f 8 -n 10 > "$tmp/json" || fail "$prov: json run"
  json_check "$tmp/json" || { cat "$tmp/json"; fail "$prov: --json is not valid JSON"; }
  grep -q '"transport": "raw"' "$tmp/json" || fail "$prov: JSON lacks the transport"
  [ "$(grep -c '"size"' "$tmp/json")" -eq 6 ] || fail "$prov: expected 6 sizes (8 B .. 64 KiB by 8) in JSON"
  # The raw half sends eagerly up to the size the plugin does on this provider,
  # or the plugin/raw ratio between the two sizes compares eager with rendezvous.
  NCCL_DEBUG=INFO FI_PROVIDER="$prov" timeout 600 "$bin" -b 8 -e 8 -n 2 -w 1 > "$tmp/both" 2>&1 || fail "$prov: plugin run"
  plugin=$(sed -n 's/.*eager messages up to \([0-9]*\) bytes.*/\1/p' "$tmp/both" | head -n 1)
  raw=$(sed -n 's/.*raw libfabric.*eager fi_senddata up to \([0-9]*\) B.*/\1/p' "$tmp/both" | head -n 1)
  [ -n "$plugin" ] && [ "$plugin" = "$raw" ] || { cat "$tmp/both"; fail "$prov: raw eager size '$raw' against the plugin's '$plugin'"; }
  # And stripes large messages over as many lanes per NIC as the plugin.
  # The automatic count with NCCL_SRD_TEST_CPUS=4096: the most lanes (4 threads)
  # for up to 682 processes of ours on the host, so tests beside it (make -j check,
  # other suites on the machine) change nothing.
  for setting in NCCL_SRD_PROGRESS_THREADS=1 NCCL_SRD_TEST_CPUS=4096; do
    env "$setting" NCCL_DEBUG=INFO FI_PROVIDER="$prov" timeout 600 "$bin" -b 8 -e 8 -n 2 -w 1 \
      > "$tmp/both" 2>&1 || fail "$prov: plugin run ($setting)"
    plugin=$(sed -n 's/.*NIC(s) x \([0-9]*\) lane(s).*/\1/p' "$tmp/both" | head -n 1)
    raw=$(sed -n 's/.*raw libfabric.* x \([0-9]*\) lanes*, one endpoint each.*/\1/p' "$tmp/both" | head -n 1)
    [ -n "$plugin" ] && [ "$plugin" = "$raw" ] ||
      { cat "$tmp/both"; fail "$prov: raw lanes '$raw' against the plugin's '$plugin' ($setting)"; }
  done
done
echo "PASS"
