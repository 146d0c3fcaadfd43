#!/bin/bash
# On the GPU device machine: what one network hop costs at the bottom of issue
# 13's small-message rows, in one call, each measure twice and interleaved:
#   - raw loopback TCP (tests/device/tcp_pingpong.c: plain socket calls),
#   - srd-perf: our plugin against raw libfabric (fi_writedata) on the same
#     provider,
#   - one hop inside NCCL (nccl-tests sendrecv_perf, 2 ranks, each sends to
#     the other) over NCCL's Socket transport and over our plugin.
# Sizes 8 B, 512 B, 8 KiB, 32 KiB, 64 KiB (NCCL's chunk of a 128-512 KiB
# sendrecv on tcp), 128 KiB, 512 KiB, 2 MiB; about 2 minutes.
#
#   OUT=dir bash tests/device/floor.sh      # from the root of the carried checkout
#
# Needs what compare.sh needs (the plugin for LIBFABRIC, 2.6 by default,
# .device/gpu-env.sh, nccl-tests) and a C compiler. Writes
# $OUT/summary.md and a log per run.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./floor-out}
mkdir -p "$out"
if ! declare -f mpiranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh
fi
# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh
nccl_tests_build "$out/nccl-tests-build.log" || { echo "$nccl_tests_error" | tee "$out/error.txt"; exit 1; }
cc -O2 -o "$out/tcp_pingpong" tests/device/tcp_pingpong.c 2>"$out/cc.log" || { cat "$out/cc.log"; exit 1; }
LIBFABRIC=${LIBFABRIC:-2.6}
srd_libfabric "$LIBFABRIC" || { echo "$lf_error" | tee "$out/error.txt"; exit 1; }
export LD_LIBRARY_PATH=$lf_path:$LD_LIBRARY_PATH
perf_bin=${net%/lib/*}/bin/srd-perf
export NCCL_TESTS_DEVICE=0 NCCL_DEBUG=WARN FI_PROVIDER=tcp
unset NCCL_DEBUG_SUBSYS NCCL_ALGO NCCL_PROTO NCCL_NET NCCL_NET_PLUGIN NCCL_TUNER_PLUGIN
for v in $(env | grep -oE '^NCCL_SRD_[A-Z_]+'); do unset "$v"; done
sizes="8 512 8192 32768 65536 131072 524288 2097152"
for round in 1 2; do
  # shellcheck disable=SC2086
  bounded 60 taskset -c 2,3 "$out/tcp_pingpong" 20000 $sizes >"$out/tcp-$round.log" 2>&1
  bounded 90 "$perf_bin" --pin -t lat -b 8 -e 2M -f 2 >"$out/srd-perf-$round.log" 2>&1
  for v in socket srd; do
    if [ $v = socket ]; then e="NCCL_NET=Socket"; else e="NCCL_NET=SRD NCCL_NET_PLUGIN=$net"; fi
    # shellcheck disable=SC2086
    (export $e; bounded 60 bash -c "$(declare -f mpiranks); mpiranks 2 $tests_dir/sendrecv_perf -b 8 -e 2M -f 2 -g 1 -n 500 -w 50 -c 1") \
      >"$out/sendrecv-$v-$round.log" 2>&1
    echo "# exit $?" >>"$out/sendrecv-$v-$round.log"
  done
done

# tcp LOG SIZE: p50; perf LOG SIZE COLUMN (2 plugin, 4 raw: srd-perf's side-by-side row is size,
# then per metric plugin, its runs' min-max, raw, its min-max, ratio); hop LOG SIZE: out-of-place time.
tcp() { awk -v s="$2" '$1 == s {print $2}' "$1" 2>/dev/null; }
human() { awk -v s="$1" 'BEGIN {if (s >= 1048576) printf "%d MiB", s / 1048576; else if (s >= 1024) printf "%d KiB", s / 1024; else printf "%d B", s}'; }
perf() { awk -v s="$(human "$2")" -v f="$3" '$1 " " $2 == s {print $(f + 1)}' "$1" 2>/dev/null; }
hop() { awk -v s="$2" '$1 == s && NF >= 12 {print $6}' "$1" 2>/dev/null; }
two() { printf '%s, %s' "${1:--}" "${2:--}"; }
{
  echo "# One hop, 8 B to 2 MiB, $(date -u '+%F %H:%M UTC')"
  echo
  echo "    $(git log -1 --format='commit %h' 2>/dev/null), $(nproc) cpus, libfabric $LIBFABRIC, FI_PROVIDER=tcp (loopback), two runs each"
  echo
  echo "Half the round trip, p50 us (tcp_pingpong, srd-perf); NCCL sendrecv_perf out-of-place time us (one hop per iteration)."
  echo
  echo "| size | raw TCP | raw libfabric | our plugin (srd-perf) | NCCL Socket hop | our hop in NCCL |"
  echo "|---|---|---|---|---|---|"
  for s in $sizes; do
    echo "| $(human "$s") | $(two "$(tcp "$out/tcp-1.log" "$s")" "$(tcp "$out/tcp-2.log" "$s")") |" \
      "$(two "$(perf "$out/srd-perf-1.log" "$s" 4)" "$(perf "$out/srd-perf-2.log" "$s" 4)") |" \
      "$(two "$(perf "$out/srd-perf-1.log" "$s" 2)" "$(perf "$out/srd-perf-2.log" "$s" 2)") |" \
      "$(two "$(hop "$out/sendrecv-socket-1.log" "$s")" "$(hop "$out/sendrecv-socket-2.log" "$s")") |" \
      "$(two "$(hop "$out/sendrecv-srd-1.log" "$s")" "$(hop "$out/sendrecv-srd-2.log" "$s")") |"
  done
} >"$out/summary.md"
cat "$out/summary.md"
