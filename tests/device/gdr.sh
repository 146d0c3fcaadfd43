#!/bin/bash
# On the GPU device machine: NCCL moving GPU buffers through our plugin
# (GPUDirect on), against the host-staged path (NCCL_SRD_GDR=0) and NCCL's
# Socket transport, in one call, interleaved per collective and rank count so
# that drift hits every variant alike. libfabric is the CUDA-aware build in
# .device/lf2, provider shm (it copies into GPU memory itself).
#
#   bash tests/device/gdr.sh      # from the root of the carried checkout
#
# Needs, carried in .device/: gpu-env.sh, lf2 (libfabric 2.6 built with CUDA,
# ../shared/third-party/README.md), install (make install of this tree; best
# configured with PKG_CONFIG_PATH=$PWD/.device/lf2/lib/pkgconfig), nccl-tests
# (source, built here with MPI, or NCCL_TESTS=dir with *_perf).
# SRD_INSTALL=dir: the plugin and srd-perf from another make install (default
# .device/install; one configured against .device/lf2 sets the CUDA promise).
# Variants: gdr (our plugin, NCCL_SRD_GDR=1), staged (our plugin,
# NCCL_SRD_GDR=0), socket (NCCL_NET=Socket). The ranks share one GPU and talk
# through no PCIe NIC, so NCCL's distance rule would refuse GPUDirect: every
# variant runs with NCCL_NET_GDR_LEVEL=$GDR_LEVEL (default SYS), and gdr also
# with NCCL_NET_GDR_READ=1 (send buffers in GPU memory too).
# Knobs: RANKS="2 4 8" COLLS="all_reduce all_gather reduce_scatter"
#        VARIANTS="gdr staged socket" MAX_BYTES=1G SMALL_ITERS=20 LARGE_ITERS=3
#        GDR_LEVEL=SYS RUN_TIMEOUT=240 BUDGET_S= (no new run after this many s)
#        TORCH=0 (1: tests/device/gdr_torch.py with GDR forced, 2 and 4 ranks;
#        over shm it hangs at the first all_reduce: DESIGN.md, GPU memory)
#        PERF=1 (srd-perf --cuda --check, plugin and --raw, before the runs)
# Writes to $OUT (or ./gdr-out): summary.md and logs.tgz (env.txt, a log per
# run: one archive, because the device tool brings back only a few files).
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./gdr-out}
mkdir -p "$out"
start=$SECONDS

if ! declare -f mpiranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh
fi
RANKS=${RANKS:-"2 4 8"}
COLLS=${COLLS:-"all_reduce all_gather reduce_scatter"}
VARIANTS=${VARIANTS:-"gdr staged socket"}
MAX_BYTES=${MAX_BYTES:-1G}
SMALL_ITERS=${SMALL_ITERS:-20}
LARGE_ITERS=${LARGE_ITERS:-3}
GDR_LEVEL=${GDR_LEVEL:-SYS}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
TORCH=${TORCH:-0}
PERF=${PERF:-1}
lf2=$PWD/.device/lf2
inst=${SRD_INSTALL:-$PWD/.device/install}
net=$inst/lib/libnccl-net-srd.so
fail() { echo "$*" | tee "$out/error.txt"; exit 1; }
[ -e "$net" ] || fail "no plugin at $net (make install into .device/install)"
[ -e "$lf2/lib/libfabric.so" ] || fail "no CUDA-aware libfabric in $lf2"

# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh
cudart=$(srd_cudart_dir)
export LD_LIBRARY_PATH=$inst/lib:$lf2/lib${cudart:+:$cudart}:$LD_LIBRARY_PATH
export PATH=$inst/bin:$lf2/bin:$PATH
export FI_PROVIDER=shm NCCL_TESTS_DEVICE=0
unset NCCL_ALGO NCCL_PROTO NCCL_NET NCCL_NET_PLUGIN NCCL_TUNER_PLUGIN NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
for v in $(env | grep -oE '^NCCL_SRD_[A-Z_]+'); do unset "$v"; done

nccl_tests_build "$out/nccl-tests-build.log" || fail "$nccl_tests_error"

{
  date -u
  git log -1 --format='commit %h %s' 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  python3 -c 'import torch;print("NCCL", torch.cuda.nccl.version())' 2>&1
  echo "cpus $(nproc) ranks=$RANKS colls=$COLLS variants=$VARIANTS NCCL_NET_GDR_LEVEL=$GDR_LEVEL libcudart.so in ${cudart:-(not found)}"
  echo "--- fi_info -p shm -c FI_HMEM"
  fi_info -p shm -c FI_HMEM 2>&1 | head -8
  echo "--- srd-info (FI_PROVIDER=shm)"
  NCCL_SRD_GDR=1 srd-info 2>&1
} >"$out/env.txt"

envs_of() {
  case $1 in
    gdr) echo "NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_SRD_GDR=1 NCCL_NET_GDR_LEVEL=$GDR_LEVEL NCCL_NET_GDR_READ=1" ;;
    staged) echo "NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_SRD_GDR=0 NCCL_NET_GDR_LEVEL=$GDR_LEVEL" ;;
    socket) echo "NCCL_NET=Socket NCCL_NET_GDR_LEVEL=$GDR_LEVEL" ;;
  esac
}

mpirun_in() { # LOG ENVS N CMD...: one mpiranks run, bounded, appended to LOG
  local log=$1 envs=$2 n=$3
  shift 3
  # shellcheck disable=SC2086
  (export $envs; bounded "$RUN_TIMEOUT" bash -c "$(declare -f mpiranks); mpiranks $n $*") >>"$log" 2>&1
  echo "# exit $? $*" >>"$log"
}

if [ "$PERF" = 1 ]; then
  for mode in "" --raw; do
    log=$out/srd-perf${mode:+-raw}.log
    echo "# NCCL_SRD_GDR=1 srd-perf $mode --cuda --check -e 64M" >"$log"
    NCCL_SRD_GDR=1 bounded "$RUN_TIMEOUT" srd-perf $mode --cuda --check -e 64M >>"$log" 2>&1
    echo "# exit $?" >>"$log"
  done
fi

skipped=
# run COLL N VARIANT: a short NCCL_DEBUG=INFO run for the GDR lines, then the
# timed sweep at WARN, into one log.
run() {
  local coll=$1 n=$2 v=$3 log envs
  log=$out/$coll-$n-$v.log
  if [ -n "${BUDGET_S:-}" ] && ((SECONDS - start > BUDGET_S)); then skipped="$skipped $coll-$n-$v"; return; fi
  envs=$(envs_of "$v")
  echo "# $envs" >"$log"
  : >"$out/$coll-$n-$v.info"
  mpirun_in "$out/$coll-$n-$v.info" "$envs NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET" "$n" \
    "$tests_dir/${coll}_perf -b 1M -e 1M -g 1 -n 1 -w 1 -c 1"
  mpirun_in "$log" "$envs NCCL_DEBUG=WARN" "$n" "$tests_dir/${coll}_perf -b 8 -e 1M -f 2 -g 1 -n $SMALL_ITERS -w 5 -c 1"
  mpirun_in "$log" "$envs NCCL_DEBUG=WARN" "$n" \
    "$tests_dir/${coll}_perf -b 2M -e $MAX_BYTES -f 2 -g 1 -n $LARGE_ITERS -w 1 -c 1"
}

for n in $RANKS; do
  for coll in $COLLS; do
    for v in $VARIANTS; do run "$coll" "$n" "$v"; done
  done
done

if [ "$TORCH" = 1 ]; then
  for n in 2 4; do
    log=$out/torch-$n-gdr.log
    if [ -n "${BUDGET_S:-}" ] && ((SECONDS - start > BUDGET_S)); then skipped="$skipped torch-$n"; continue; fi
    # shellcheck disable=SC2046
    (export $(envs_of gdr) NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET
      bounded "$RUN_TIMEOUT" bash -c "$(declare -f ranks); ranks $n python3 tests/device/gdr_torch.py") >"$log" 2>&1
    echo "# exit $?" >>"$log"
  done
fi

# rows LOG: "size time_us busbw wrong" of the out-of-place columns.
rows() { awk '$1 ~ /^[0-9]+$/ && NF >= 13 {print $1, $6, $8, $9 + $13}' "$1" 2>/dev/null; }
at() { rows "$1" | awk -v s="$2" -v f="$3" '$1 == s {v = $f} END {print v == "" ? "-" : v}'; }
wrong() { rows "$1" | awk '{w += $4} END {print w + 0}'; }
nrows() { rows "$1" | wc -l; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }
# gdr_seen INFO: what NCCL said about GPUDirect on our device, then what our
# plugin decided ("device N: GPU pointers offered|not offered: why").
gdr_seen() {
  local f=$1 nccl ours
  [ -s "$f" ] || { echo "-"; return; }
  if grep -q 'GPU Direct RDMA Enabled' "$f" && grep -q 'via NET/SRD/[0-9]*/GDRDMA' "$f"; then nccl="Enabled, GDRDMA"
  elif grep -q 'GPU Direct RDMA Enabled' "$f"; then nccl="Enabled"
  elif grep -q 'GPU Direct RDMA Disabled' "$f"; then nccl="Disabled"
  else nccl="none"; fi
  if grep -q 'NET/SRD.*GPU pointers offered' "$f"; then ours="; SRD: offered"
  elif grep -q 'NET/SRD.*GPU pointers not offered' "$f"; then ours="; SRD: not offered"
  else ours=""; fi
  echo "$nccl$ours"
}

{
  echo "# GPU memory through the plugin: GDR vs host-staged vs NCCL Socket ($(date -u +%F))"
  echo
  sed 's/^/    /' "$out/env.txt" | head -8
  echo
  echo "FI_PROVIDER=shm (libfabric $lf2), NCCL_NET_GDR_LEVEL=$GDR_LEVEL forced for every variant (one GPU, no PCIe"
  echo "NIC: NCCL's distance rule would refuse GPUDirect). Times are out-of-place us, busbw GB/s; x = ratio to Socket"
  echo "in the same call (time: < 1 is faster; busbw: > 1 is better). GDR: what NCCL's INIT/NET log said."
  echo
  echo "| coll | ranks | variant | GDR | 8 B | 1 KiB | 128 KiB | 2 MiB | 128 MiB busbw | 1 GiB busbw | sizes | #wrong |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for coll in $COLLS; do
    for n in $RANKS; do
      s=$out/$coll-$n-socket.log
      for v in $VARIANTS; do
        l=$out/$coll-$n-$v.log
        line="| $coll | $n | $v | $(gdr_seen "$out/$coll-$n-$v.info") |"
        for size in 8 1024 131072 2097152; do
          t=$(at "$l" $size 2)
          if [ "$v" = socket ]; then line="$line $t |"; else line="$line $t (x$(ratio "$t" "$(at "$s" $size 2)")) |"; fi
        done
        for size in 134217728 1073741824; do
          b=$(at "$l" $size 3)
          if [ "$v" = socket ]; then line="$line $b |"; else line="$line $b (x$(ratio "$b" "$(at "$s" $size 3)")) |"; fi
        done
        echo "$line $(nrows "$l") | $(wrong "$l") |"
      done
    done
  done
  echo
  echo "Runs that did not exit 0:"
  grep -l '^# exit [1-9]' "$out"/*.log "$out"/*.info 2>/dev/null | sed 's/^/- /' || true
  if [ "$PERF" = 1 ]; then
    echo
    echo "srd-perf --cuda --check (exit status, last lines):"
    for f in "$out"/srd-perf*.log; do
      echo "- $(basename "$f"): $(tail -1 "$f")"
      tail -4 "$f" | head -3 | sed 's/^/      /'
    done
  fi
  if [ "$TORCH" = 1 ]; then
    echo
    echo "PyTorch (GDR on):"
    for f in "$out"/torch-*.log; do
      [ -e "$f" ] || continue
      echo "- $(basename "$f"): $(tail -1 "$f"), GDR $(gdr_seen "$f")"
      grep -E '^(all_reduce|all_gather|RESULT)' "$f" | sed 's/^/      /'
    done
  fi
  [ -z "$skipped" ] || printf '\nSkipped (budget):%s\n' "$skipped"
} >"$out/summary.md"
cat "$out/summary.md"
# The archive is written outside $out: tar refuses a folder that changes under it.
logs=$(mktemp) && tar czf "$logs" -C "$out" --exclude=./summary.md . &&
  find "$out" -mindepth 1 ! -name summary.md -delete && mv "$logs" "$out/logs.tgz"
