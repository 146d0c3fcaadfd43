#!/bin/bash
# On the GPU device machine: the latency-bound middle (sendrecv and all_reduce, 8 B to 2 MiB), in
# one call: nccl-tests sendrecv (2 ranks) and all_reduce (2, 4, 8 ranks),
# 8 B to 2 MiB by 4, our plugin against NCCL's Socket transport, on
# libfabric 2.6's native tcp first and 1.17's tcp;ofi_rxm beside it. Every
# variant of one test runs back to back, ROUNDS times over, so drift hits all
# alike; only ratios inside a round are compared. Then the large sizes
# (all_reduce 2 ranks, 128 MiB..1 GiB, Socket and ours) on the first
# libfabric, which nothing may cost.
#
#   OUT=dir bash tests/device/mid.sh      # from the root of the carried checkout
#
# Needs .device/gpu-env.sh, nccl-tests as source in .device/nccl-tests (only
# all_reduce_perf and sendrecv_perf are built) or built (NCCL_TESTS=dir), and
# per libfabric what srd_libfabric (nccl-tests.sh) names: .device/install-lf2
# and .device/lf2 for 2.6, .device/install for 1.17.
# Variants: socket, srd (defaults, nothing set), base (another build for an
# A/B in the same call: BASE_NET_2_6 / BASE_NET_1_17, the plugin built
# against that libfabric; skipped where unset), srd+VAR=VALUE[,VAR=VALUE...]
# (settings; FI_OFI_RXM_* ones only on 1.17, the one with rxm).
# Knobs: LIBFABRICS="2.6 1.17" VARIANTS="socket srd" TESTS="sr2 ar2 ar4 ar8"
#        ROUNDS=2 ITERS=50 LARGE=1 LARGE_VARIANTS="socket srd" RUN_TIMEOUT=90
#        BUDGET_S=420 (no run starts after this many seconds; empty: no limit)
# Writes $OUT/summary.md and $OUT/logs.tgz.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./mid-out}
mkdir -p "$out"
start=$SECONDS
if ! declare -f mpiranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh
fi
LIBFABRICS=${LIBFABRICS:-"2.6 1.17"}
VARIANTS=${VARIANTS:-"socket srd"}
TESTS=${TESTS:-"sr2 ar2 ar4 ar8"}
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-50}
LARGE=${LARGE:-1}
LARGE_VARIANTS=${LARGE_VARIANTS:-"socket srd"}
RUN_TIMEOUT=${RUN_TIMEOUT:-90}
BUDGET_S=${BUDGET_S-420}
export NCCL_TESTS_BINS=${NCCL_TESTS_BINS:-"all_reduce sendrecv"}
# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh
nccl_tests_build "$out/nccl-tests-build.log" || { echo "$nccl_tests_error" | tee "$out/error.txt"; exit 1; }
{
  date -u
  git log -1 --format='commit %h %s' 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  python3 -c 'import torch;print("NCCL", torch.cuda.nccl.version())' 2>&1
  echo "cpus $(nproc) libfabrics=$LIBFABRICS variants=$VARIANTS tests=$TESTS rounds=$ROUNDS iters=$ITERS"
} >"$out/env.txt"
export NCCL_TESTS_DEVICE=0 NCCL_DEBUG=WARN FI_PROVIDER=tcp
unset NCCL_DEBUG_SUBSYS NCCL_ALGO NCCL_PROTO NCCL_NET NCCL_NET_PLUGIN NCCL_TUNER_PLUGIN
for v in $(env | grep -oE '^NCCL_SRD_[A-Z_]+'); do unset "$v"; done
base_ld=$LD_LIBRARY_PATH
skipped=

# run LOG VARIANT BINARY RANKS ARGS...: one nccl-tests run under the
# libfabric srd_libfabric chose last; returns 1 when the variant does not apply.
run() {
  local log=$1 variant=$2 bin=$3 n=$4 envs base_var
  shift 4
  if [ -n "${BUDGET_S:-}" ] && ((SECONDS - start > BUDGET_S)); then skipped="$skipped ${log##*/}"; return; fi
  case $variant in
    socket) envs="NCCL_NET=Socket" ;;
    srd) envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net" ;;
    base)
      base_var=BASE_NET_${lf//./_}
      [ -n "${!base_var:-}" ] || return 1
      envs="NCCL_NET=SRD NCCL_NET_PLUGIN=${!base_var}" ;;
    srd+*=*)
      # rxm's settings reach only 1.17's tcp;ofi_rxm: 2.x's native tcp has no rxm
      [ "$lf" = 1.17 ] || [[ ${variant#srd+} != FI_OFI_RXM_* ]] || return 1
      envs="NCCL_NET=SRD NCCL_NET_PLUGIN=$net ${variant#srd+}" envs=${envs//,/ } ;;
    *) echo "unknown variant $variant" | tee "$out/error.txt"; exit 1 ;;
  esac
  echo "# $envs LD_LIBRARY_PATH=$lf_path:..." >"$log"
  # shellcheck disable=SC2086
  (export $envs LD_LIBRARY_PATH=$lf_path:$base_ld
    if [ "$bin" = torch ]; then
      bounded "$RUN_TIMEOUT" bash -c "$(declare -f ranks); ranks $n python3 tests/device/gdr_torch.py"
    else
      bounded "$RUN_TIMEOUT" bash -c "$(declare -f mpiranks); mpiranks $n $tests_dir/${bin}_perf $*"
    fi) >>"$log" 2>&1
  echo "# exit $?" >>"$log"
}

test_bin() { case $1 in sr*) echo sendrecv ;; ar*) echo all_reduce ;; esac; }
for lf in $LIBFABRICS; do
  srd_libfabric "$lf" || { echo "libfabric $lf: $lf_error" | tee -a "$out/error.txt"; continue; }
  for round in $(seq "$ROUNDS"); do
    for t in $TESTS; do
      for v in $VARIANTS; do
        run "$out/$lf-$t-$v-r$round.log" "$v" "$(test_bin "$t")" "${t#??}" -b 8 -e 2M -f 4 -g 1 -n "$ITERS" -w 10 -c 1
      done
    done
  done
  if [ "$LARGE" = 1 ] && [ "$lf" = "${LIBFABRICS%% *}" ]; then
    for v in $LARGE_VARIANTS; do
      run "$out/$lf-large-$v.log" "$v" all_reduce 2 -b 128M -e 1G -f 2 -g 1 -n 5 -w 1 -c 1
      run "$out/$lf-torch-$v.log" "$v" torch 2
    done
  fi
done

# rows LOG: "size time_us busbw wrong" of the out-of-place columns.
rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $8, $9 + $13}' "$1" 2>/dev/null; }
at() { rows "$1" | awk -v s="$2" -v f="$3" '$1 == s {v = $f} END {print v == "" ? "-" : v}'; }
wrong() { rows "$1" | awk '{w += $4} END {print w + 0}'; }
torch_algbw() { awk '/^all_reduce 268435456 B:/ {v = $6} END {print v == "" ? "-" : v}' "$1" 2>/dev/null; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
name() { case $1 in sr2) echo "sendrecv 2" ;; ar*) echo "all_reduce ${1#ar}" ;; esac; }
{
  echo "# The latency-bound middle, ours vs NCCL Socket ($(date -u +%F))"
  echo
  sed 's/^/    /' "$out/env.txt"
  echo
  echo "Out-of-place time (us) per round; x = ours / Socket in the same round (< 1: faster than Socket)."
  for lf in $LIBFABRICS; do
    echo
    echo "## libfabric $lf, FI_PROVIDER=tcp"
    echo
    echo "| test (ranks) | variant | 8 B | 128 KiB | 512 KiB | 2 MiB | #wrong |"
    echo "|---|---|---|---|---|---|---|"
    for t in $TESTS; do
      for v in $VARIANTS; do
        [ -e "$out/$lf-$t-$v-r1.log" ] || continue
        line="| $(name "$t") | $v |"
        w=0
        for size in 8 131072 524288 2097152; do
          cell=
          for round in $(seq "$ROUNDS"); do
            l=$out/$lf-$t-$v-r$round.log
            a=$(at "$l" $size 2)
            if [ "$v" = socket ]; then cell="$cell${cell:+, }$a"
            else cell="$cell${cell:+, }$a (x$(ratio "$a" "$(at "$out/$lf-$t-socket-r$round.log" $size 2)"))"; fi
          done
          line="$line $cell |"
        done
        for round in $(seq "$ROUNDS"); do w=$((w + $(wrong "$out/$lf-$t-$v-r$round.log"))); done
        echo "$line $w |"
      done
    done
    for v in $LARGE_VARIANTS; do
      [ "$v" != socket ] && [ -e "$out/$lf-large-$v.log" ] || continue
      echo
      echo "all_reduce 2 ranks, busbw GB/s, $v (x Socket):"
      echo
      for size in 134217728 268435456 536870912 1073741824; do
        b=$(at "$out/$lf-large-$v.log" $size 3) s=$(at "$out/$lf-large-socket.log" $size 3)
        echo "- $((size >> 20)) MiB: $b vs $s (x$(ratio "$b" "$s")), #wrong $(wrong "$out/$lf-large-$v.log")"
      done
      b=$(torch_algbw "$out/$lf-torch-$v.log") s=$(torch_algbw "$out/$lf-torch-socket.log")
      echo "- PyTorch all_reduce 256 MiB, algbw: $b vs $s (x$(ratio "$b" "$s")), $(grep -ho 'RESULT.*' "$out/$lf-torch-$v.log" || echo 'no RESULT line')"
    done
  done
  [ -z "$skipped" ] || printf '\nSkipped (budget):%s\n' "$skipped"
} >"$out/summary.md"
cat "$out/summary.md"
logs=$(mktemp) && tar czf "$logs" -C "$out" --exclude=./summary.md . &&
  find "$out" -mindepth 1 ! -name summary.md -delete && mv "$logs" "$out/logs.tgz"
