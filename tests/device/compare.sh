#!/bin/bash
# On the GPU device machine: our net plugin against NCCL's Socket transport in
# one call, nccl-tests all_reduce, interleaved per rank count so drift hits
# every variant alike (issue 13's table). With the defaults (2, 4 and 8 ranks,
# 8 B..128 KiB, 2 MiB, 256 MiB..1 GiB, three forced algorithms) it takes about
# 6 minutes on the 16-core H200 machine and stops starting runs after
# BUDGET_S (480) seconds, so one call fits a 10-minute command.
#
#   bash tests/device/compare.sh      # from the root of the carried checkout
#
# Runs on libfabric LIBFABRIC (2.6 by default, native tcp; 1.17 for
# Debian's tcp;ofi_rxm): needs what srd_libfabric (nccl-tests.sh) names
# (.device/install-lf2 and .device/lf2, or .device/install), .device/gpu-env.sh and
# nccl-tests as source in .device/nccl-tests (built here with MPI) or built
# (NCCL_TESTS=dir with *_perf).
# Every plugin variant sets NCCL_NET=SRD: if our plugin does not load, NCCL
# fails the run instead of quietly using its own Socket transport under our
# name (seen: a 2.x-built plugin on 1.17 measured NCCL Socket twice).
# Variants: socket (NCCL_NET=Socket), srd (our plugin, no NCCL_SRD_* set),
# srd-nolanes (NCCL_SRD_PROGRESS_THREADS=0), srd-nofailover
# (NCCL_SRD_FAILOVER=0: writes complete on their own, not on delivery), srd-notuner (our plugin without
# our tuner: NCCL_TUNER_PLUGIN=none; NCCL otherwise loads the tuner the plugin
# library exports), srd+VAR=VALUE (our plugin with one setting, e.g.
# srd+NCCL_SRD_EAGER_MAX=65536), base (another build of the plugin,
# BASE_NET=path: an older commit for an A/B in the same call); FORCED adds runs
# of socket and srd (and base when BASE_NET is set) with NCCL_ALGO/NCCL_PROTO
# forced equal, small sizes only (per-hop cost).
# Knobs: RANKS="2 4 8" VARIANTS="socket srd srd-nolanes"
#        FORCED="Ring/LL Tree/LL Ring/Simple" (empty: none) SMALL_MAX=128K
#        LARGE_MAX=1G LARGE_ITERS=3 RUN_TIMEOUT=120
#        BUDGET_S=480 (no new run starts after this many seconds; empty: no limit)
# The srd variant runs with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET so that its
# log shows how many progress threads the plugin chose (summary: "lanes").
# Writes to $OUT (or ./compare-out): summary.md and logs.tgz (a log per run:
# one archive, because the device tool brings back only a few files).
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./compare-out}
mkdir -p "$out"
start=$SECONDS

if ! declare -f mpiranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh
fi
RANKS=${RANKS:-"2 4 8"}
VARIANTS=${VARIANTS:-"socket srd srd-nolanes"}
FORCED=${FORCED-"Ring/LL Tree/LL Ring/Simple"}
SMALL_MAX=${SMALL_MAX:-128K}
LARGE_MAX=${LARGE_MAX:-1G}
LARGE_ITERS=${LARGE_ITERS:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
BUDGET_S=${BUDGET_S-480}
LIBFABRIC=${LIBFABRIC:-2.6}
# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh
srd_libfabric "$LIBFABRIC" || { echo "$lf_error" | tee "$out/error.txt"; exit 1; }
export LD_LIBRARY_PATH=$lf_path:$LD_LIBRARY_PATH
BASE_NET=${BASE_NET:-}
forced_variants="socket srd"
if [ -n "$BASE_NET" ]; then
  [ -e "$BASE_NET" ] || { echo "no plugin at BASE_NET=$BASE_NET" | tee "$out/error.txt"; exit 1; }
  forced_variants="$forced_variants base"
fi

nccl_tests_build "$out/nccl-tests-build.log" || { echo "$nccl_tests_error" | tee "$out/error.txt"; exit 1; }

{
  date -u
  git log -1 --format='commit %h %s' 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  python3 -c 'import torch;print("NCCL", torch.cuda.nccl.version())' 2>&1
  echo "cpus $(nproc) libfabric=$LIBFABRIC ranks=$RANKS variants=$VARIANTS forced=$FORCED"
} >"$out/env.txt"

export NCCL_TESTS_DEVICE=0 NCCL_DEBUG=WARN FI_PROVIDER=tcp
unset NCCL_DEBUG_SUBSYS NCCL_ALGO NCCL_PROTO NCCL_NET NCCL_NET_PLUGIN NCCL_TUNER_PLUGIN
for v in $(env | grep -oE '^NCCL_SRD_[A-Z_]+'); do unset "$v"; done

skipped=
# run TAG VARIANT N ALGO/PROTO RANGES...: one log per tag; each range "b e iters warmup".
run() {
  local tag=$1 variant=$2 n=$3 forced=$4 log envs
  shift 4
  log=$out/$tag.log
  if [ -n "${BUDGET_S:-}" ] && ((SECONDS - start > BUDGET_S)); then skipped="$skipped $tag"; return; fi
  case $variant in
    socket) envs="NCCL_NET=Socket" ;;
    srd) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net" ;;
    srd-nolanes) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_SRD_PROGRESS_THREADS=0" ;;
    srd-nofailover) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_SRD_FAILOVER=0" ;;
    srd-notuner) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_TUNER_PLUGIN=none" ;;
    base) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$BASE_NET" ;;
    srd+*=*) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net ${variant#srd+}" ;;
    *) echo "unknown variant $variant" | tee "$out/error.txt"; exit 1 ;;
  esac
  [ "$forced" = - ] || envs="$envs NCCL_ALGO=${forced%/*} NCCL_PROTO=${forced#*/}"
  [ "$variant$forced" = srd- ] && envs="$envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET"
  echo "# $envs" >"$log"
  local range
  for range in "$@"; do
    # shellcheck disable=SC2086
    set -- $range
    (export $envs; bounded "$RUN_TIMEOUT" bash -c "$(declare -f mpiranks); mpiranks $n $tests_dir/all_reduce_perf -b $1 -e $2 -f 2 -g 1 -n $3 -w $4 -c 1") \
      >>"$log" 2>&1
    echo "# exit $? range $1-$2" >>"$log"
  done
}

for n in $RANKS; do
  for v in $VARIANTS; do
    run "$n-$v" "$v" "$n" - "8 $SMALL_MAX 50 10" "2M 2M 20 5" "256M $LARGE_MAX $LARGE_ITERS 1"
  done
  for f in $FORCED; do
    for v in $forced_variants; do run "$n-$v-${f/\//-}" "$v" "$n" "$f" "8 $SMALL_MAX 50 10"; done
  done
done

# rows LOG: "size time_us busbw wrong" of the out-of-place columns.
rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $8, $9 + $13}' "$1" 2>/dev/null; }
# at LOG SIZE FIELD(2 time, 3 busbw): one value or "-".
at() { rows "$1" | awk -v s="$2" -v f="$3" '$1 == s {v = $f} END {print v == "" ? "-" : v}'; }
wrong() { rows "$1" | awk '{w += $4} END {print w + 0}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
# worst LOG SOCKETLOG: the largest time ratio to Socket over the sizes up to
# 128 KiB both logs have, and its size ("x@size"; below 1 everywhere meets
# issue 13's small-message goal).
worst() {
  LC_ALL=C join <(rows "$1" | awk '$1 <= 131072 {print $1, $2}' | LC_ALL=C sort) <(rows "$2" | awk '$1 <= 131072 {print $1, $2}' | LC_ALL=C sort) |
    awk '$3 > 0 {r = $2 / $3; if (r > w) {w = r; s = $1}} END {if (s == "") print "-"; else printf "x%.2f@%s", w, s}'
}
# lanes LOG: what the plugin chose (its INFO lines, srd variant only).
lanes() {
  grep -ohE '[0-9]+ progress thread\(s\) (per NIC|started)' "$1" 2>/dev/null | sort | uniq -c | awk '{$1 = $1 "x"; print}' |
    paste -sd ';' -
}

{
  echo "# Plugin vs NCCL Socket, all_reduce ($(date -u +%F))"
  echo
  sed 's/^/    /' "$out/env.txt"
  echo
  echo "Times are out-of-place us; busbw GB/s; x = ratio to Socket in the same call (time: < 1 is faster, busbw: > 1 is better)."
  echo
  echo "| ranks | variant | 8 B | 1 KiB | 128 KiB | 2 MiB | 256 MiB busbw | 1 GiB busbw | worst 8 B-128 KiB | #wrong |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for n in $RANKS; do
    s=$out/$n-socket.log
    for v in $VARIANTS; do
      l=$out/$n-$v.log
      line="| $n | $v |"
      for size in 8 1024 131072 2097152; do
        t=$(at "$l" $size 2)
        if [ "$v" = socket ]; then line="$line $t |"; else line="$line $t (x$(ratio "$t" "$(at "$s" $size 2)")) |"; fi
      done
      for size in 268435456 1073741824; do
        b=$(at "$l" $size 3)
        if [ "$v" = socket ]; then line="$line $b |"; else line="$line $b (x$(ratio "$b" "$(at "$s" $size 3)")) |"; fi
      done
      if [ "$v" = socket ]; then line="$line |"; else line="$line $(worst "$l" "$s") |"; fi
      echo "$line $(wrong "$l") |"
    done
  done
  echo
  for n in $RANKS; do echo "lanes, $n ranks (srd): $(lanes "$out/$n-srd.log")"; done
  if [ -n "$FORCED" ]; then
    echo
    echo "Forced equal (NCCL_ALGO/NCCL_PROTO on both sides), out-of-place us:"
    echo
    echo "| ranks | algo/proto | size | Socket | ours | ours/Socket | base | base/Socket | #wrong (all sizes) |"
    echo "|---|---|---|---|---|---|---|---|---|"
    for n in $RANKS; do
      for f in $FORCED; do
        for size in 8 1024 131072; do
          a=$(at "$out/$n-socket-${f/\//-}.log" $size 2)
          b=$(at "$out/$n-srd-${f/\//-}.log" $size 2)
          c=$(at "$out/$n-base-${f/\//-}.log" $size 2)
          w=0
          for v in $forced_variants; do w=$((w + $(wrong "$out/$n-$v-${f/\//-}.log"))); done
          echo "| $n | $f | $size | $a | $b | $(ratio "$b" "$a") | $c | $(ratio "$c" "$a") | $w |"
        done
      done
    done
  fi
  [ -z "$skipped" ] || printf '\nSkipped (budget):%s\n' "$skipped"
} >"$out/summary.md"
cat "$out/summary.md"
# The archive is written outside $out: tar refuses a folder that changes under it.
logs=$(mktemp) && tar czf "$logs" -C "$out" --exclude=./summary.md . &&
  find "$out" -mindepth 1 ! -name summary.md -delete && mv "$logs" "$out/logs.tgz"
