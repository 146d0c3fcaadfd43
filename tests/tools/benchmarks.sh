#!/bin/sh
# Regenerates the "plugin vs raw" rows of BENCHMARKS.md on this machine: for
# each provider, srd-perf's 8-byte latency (p50) and 64 MiB bandwidth through
# the plugin and with --raw, each the median of RUNS runs. Not part of
# `make check` (it measures, it does not test).
#
#   tests/tools/benchmarks.sh [BUILD_DIR]            local processes, tcp and shm
#   RAILS=4 tests/tools/benchmarks.sh [BUILD_DIR]    two network namespaces joined by
#                                                   4 veth pairs (root), tcp only
set -u
build=${1:-.}
bin="$build/srd-perf"
runs=${RUNS:-3}
rails=${RAILS:-}
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$bin" ] || { echo "no srd-perf in $build" >&2; exit 1; }

# The value of "key": NUMBER in srd-perf's JSON (first occurrence).
json_num() { sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" | head -n 1; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.2f\n", v[int((NR + 1) / 2)]; else print "-"}'; }

# The build host is shared: the two processes get a CPU each and the
# highest ordinary priority (when we may raise it), the same for plugin and raw.
prio=""
[ "$(id -u)" = 0 ] && prio="nice -n -19"

# One srd-perf run with the given options, printing its JSON.
run_once() {
  if [ -n "$rails" ]; then
    port=$(( 21000 + $$ % 1000 ))
    SRD_NETNS=srdbench sh "$here/../netns/netns.sh" run b $prio taskset -c 1 "$bin" --server --port "$port" \
      --timeout 60 "$@" > /dev/null 2>&1 &
    server=$!
    SRD_NETNS=srdbench sh "$here/../netns/netns.sh" run a $prio taskset -c 0 "$bin" --client 10.77.0.2 \
      --port "$port" --timeout 60 --json "$@"
    wait $server
  else
    $prio "$bin" --pin --json "$@"
  fi
}

measure() { # KEY OPTIONS...: median over the runs of one JSON number
  key=$1
  shift
  i=0
  while [ $i -lt "$runs" ]; do
    run_once "$@" | json_num "$key"
    i=$((i + 1))
  done | median
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

if [ -n "$rails" ]; then
  SRD_NETNS=srdbench sh "$here/../netns/netns.sh" up "$rails" || exit $?
  trap 'SRD_NETNS=srdbench sh "$here/../netns/netns.sh" down' EXIT
  providers="tcp;ofi_rxm"
else
  providers="tcp;ofi_rxm shm"
fi
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $runs runs each"
echo "| provider | rails | 8 B latency, plugin (us) | 8 B latency, raw (us) | plugin / raw | 64 MiB bw, plugin (GB/s) | 64 MiB bw, raw (GB/s) | plugin / raw |"
for prov in $providers; do
  export FI_PROVIDER="$prov" NCCL_SRD_PROVIDER="$prov"
  lat_plugin=$(measure p50 -t lat -b 8 -e 8)
  lat_raw=$(measure p50 --raw -t lat -b 8 -e 8)
  bw_plugin=$(measure bw_GBps -t bw -b 64M -e 64M -n 20)
  bw_raw=$(measure bw_GBps --raw -t bw -b 64M -e 64M -n 20)
  echo "| $prov | ${rails:-1} | $lat_plugin | $lat_raw | $(ratio "$lat_plugin" "$lat_raw") | $bw_plugin | $bw_raw |" \
    "$(ratio "$bw_plugin" "$bw_raw") |"
done
