#!/bin/bash
# On the GPU device machine: nccl-tests with and without our tuner, same
# session, same transport, interleaved so drift hits both alike.
#
#   bash tests/tuner/device-bench.sh            # from the root of the carried checkout
#
# Needs (carried in .device/): install/lib/libnccl-tuner-srd.so (make install
# of this tree), gpu-env.sh, and nccl-tests either built (NCCL_TESTS=dir with
# *_perf) or as source in .device/nccl-tests (built here with MPI).
# Knobs (environment):
#   TRANSPORT=srd|socket  srd: NCCL_NET_PLUGIN=our net plugin (default when it is
#                         installed); socket: NCCL's own Socket transport
#   RANKS="2 4 8"  COLLS="all_reduce all_gather reduce_scatter"
#   SMALL_ITERS=50 LARGE_ITERS=5  iterations for 8 B..1 MiB and 2 MiB..1 GiB
#   MAX_BYTES=1G   REPEAT=1 (runs per variant; the table keeps the fastest)
#   RUN_TIMEOUT=240 seconds per nccl-tests run
#   CALIBRATION="model hop_us=10 rail_gbps=32"  adds a third variant, the tuner
#                         with this NCCL_SRD_TUNER_CONFIG text (the ranks of one
#                         host talk over loopback, not a real network)
# Writes to $OUT (or ./tuner-bench-out): one log per run, env.txt, summary.md.
# Timed runs log at WARN: at INFO with TUNING, rank 0 writes a line per
# collective. Which algorithm each side picks: tests/tuner/device-ab.sh.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./tuner-bench-out}
mkdir -p "$out"

if ! declare -f mpiranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh
fi

install=$PWD/.device/install/lib
tuner=${TUNER:-$install/libnccl-tuner-srd.so}
net=${NET:-$install/libnccl-net-srd.so}
if [ -z "${TRANSPORT:-}" ]; then
  TRANSPORT=socket
  [ -e "$net" ] && TRANSPORT=srd
fi
RANKS=${RANKS:-"2 4 8"}
COLLS=${COLLS:-"all_reduce all_gather reduce_scatter"}
SMALL_ITERS=${SMALL_ITERS:-50}
LARGE_ITERS=${LARGE_ITERS:-5}
MAX_BYTES=${MAX_BYTES:-1G}
REPEAT=${REPEAT:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}

[ -e "$tuner" ] || { echo "no tuner at $tuner (make install into .device/install)" | tee "$out/error.txt"; exit 1; }

# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh
nccl_tests_build "$out/nccl-tests-build.log" || { echo "$nccl_tests_error" | tee "$out/error.txt"; exit 1; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1
  python3 -c 'import torch;print("NCCL", torch.cuda.nccl.version())' 2>&1
  echo "transport=$TRANSPORT tuner=$tuner net=$net ranks=$RANKS colls=$COLLS"
  echo "iters small=$SMALL_ITERS large=$LARGE_ITERS max=$MAX_BYTES repeat=$REPEAT"
} >"$out/env.txt"

export NCCL_TESTS_DEVICE=0
export NCCL_DEBUG=WARN
unset NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
unset NCCL_ALGO NCCL_PROTO NCCL_SRD_TUNER_CONFIG
if [ "$TRANSPORT" = srd ]; then
  export NCCL_NET_PLUGIN=$net FI_PROVIDER=tcp
  unset NCCL_NET
else
  unset NCCL_NET_PLUGIN
  export NCCL_NET=Socket
fi

# run COLL RANKS VARIANT REP: both size ranges into one log.
run() {
  local coll=$1 n=$2 variant=$3 rep=$4
  local tag=$coll-${n}r-$variant-$rep log
  log=$out/$tag.log
  local tuner_env=$tuner config=
  [ "$variant" = base ] && tuner_env=none
  [ "$variant" = cal ] && config=$out/calibration.conf
  : >"$log"
  for range in "8 1M $SMALL_ITERS 10" "2M $MAX_BYTES $LARGE_ITERS 2"; do
    # shellcheck disable=SC2086
    set -- $range
    NCCL_TUNER_PLUGIN=$tuner_env NCCL_SRD_TUNER_CONFIG=$config \
      timeout "$RUN_TIMEOUT" bash -c "$(declare -f mpiranks); mpiranks $n $tests_dir/${coll}_perf -b $1 -e $2 -f 2 -g 1 -n $3 -w $4 -c 1" \
      >>"$log" 2>&1
    echo "# exit $? range $1-$2" >>"$log"
  done
}

variants="base tuner"
if [ -n "${CALIBRATION:-}" ]; then
  echo "$CALIBRATION" >"$out/calibration.conf"
  variants="$variants cal"
fi

for coll in $COLLS; do
  for n in $RANKS; do
    for ((rep = 1; rep <= REPEAT; rep++)); do
      for v in $variants; do run "$coll" "$n" "$v" "$rep"; done
    done
  done
done

# summary.md: per collective and rank count, the fastest out-of-place time of
# each variant per size, the ratio to NCCL alone, and any wrong results.
summarize() {
  local coll=$1 n=$2 v
  echo "### $coll, $n ranks ($TRANSPORT)"
  echo
  : >"$out/.rows"
  for v in $variants; do
    cat "$out/$coll-${n}r-$v-"*.log | awk -v v="$v" '$1 ~ /^[0-9]+$/ && NF >= 13 {print v, $1, $6, $8, $9 + $13}' >>"$out/.rows"
  done
  awk -v variants="$variants" '
    BEGIN { nv = split(variants, vs, " ") }
    { key = $2; sizes[key] = 1
      if (!(($1, key) in t) || $3 < t[$1, key]) { t[$1, key] = $3; bw[$1, key] = $4 }
      wrong[$1, key] += $5 }
    END {
      printf "| size (B) | NCCL alone (us) |"
      for (k = 2; k <= nv; k++) printf " %s (us) | %s/NCCL |", vs[k], vs[k]
      printf " busbw NCCL (GB/s) | note |\n|---:|---:|"
      for (k = 2; k <= nv; k++) printf "---:|---:|"
      printf "---:|---|\n"
      n = 0; for (s in sizes) order[n++] = s + 0
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (order[j] < order[i]) { x = order[i]; order[i] = order[j]; order[j] = x }
      for (i = 0; i < n; i++) {
        s = order[i]; b = t["base", s]; note = ""
        printf "| %d | %s |", s, b == "" ? "-" : sprintf("%.1f", b)
        for (k = 2; k <= nv; k++) {
          u = t[vs[k], s]
          if (b == "" || u == "") { printf " - | - |"; note = note " missing"; continue }
          r = u / b
          printf " %.1f | %.3f |", u, r
          if (r > 1.05) note = note " " vs[k] ":SLOWER"
          else if (r < 0.95) note = note " " vs[k] ":faster"
        }
        for (k = 1; k <= nv; k++) if (wrong[vs[k], s] > 0) note = note " " vs[k] ":WRONG"
        printf " %s |%s |\n", bw["base", s], note
      }
    }' "$out/.rows"
  rm -f "$out/.rows"
  echo
}

{
  echo "# Tuner benchmark ($(date -u +%F))"
  echo
  sed 's/^/    /' "$out/env.txt"
  echo
  for coll in $COLLS; do
    for n in $RANKS; do summarize "$coll" "$n"; done
  done
} >"$out/summary.md"
cat "$out/summary.md"
