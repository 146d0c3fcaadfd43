#!/bin/bash
# On the GPU device machine: NCCL 2.30.7's one-sided host API (ncclPutSignal,
# ncclWaitSignal on windows from ncclCommWindowRegister) through our
# ncclRmaPlugin_v14 with GPU windows (issue 26): 2 ranks on one GPU, shm with
# FI_HMEM (the CUDA-aware libfabric 2.6 in .device/lf2), NCCL_SRD_RMA=gpu.
# tests/device/rma_putsignal.c checks the data each signal promised and,
# through NCCL's running signal counts, the signal values.
#
#   bash tests/device/rma.sh      # from the root of the carried checkout
#
# Needs, carried in .device/: gpu-env.sh and debs (../shared/device/bundle.sh),
# lf2 (libfabric 2.6 with CUDA, ../shared/third-party/README.md), nccl230 (the
# NCCL 2.30.7 pieces, ../shared/third-party/nccl-2.30.7-sm90/README.md), and a
# make install of this tree configured against lf2: SRD_INSTALL=dir, default
# .device/install-lf2 (else .device/install).
# Knobs: ROUNDS=8 (puts per size, 1..64) RUN_TIMEOUT=180 TIME=1 (0: no timing run)
# Writes to $OUT (or ./rma-out): summary.txt, env.txt, build.log, a log per
# run and NCCL's debug file per rank.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./rma-out}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
fail() { say "ERROR: $*"; exit 1; }

if ! declare -f ranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh || fail "cannot source .device/gpu-env.sh"
fi
# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh # bounded: a hang prints every thread's stack
ROUNDS=${ROUNDS:-8}
RUN_TIMEOUT=${RUN_TIMEOUT:-180}
lf2=$PWD/.device/lf2
inst=${SRD_INSTALL:-}
[ -z "$inst" ] && { [ -d .device/install-lf2 ] && inst=$PWD/.device/install-lf2 || inst=$PWD/.device/install; }
net=$inst/lib/libnccl-net-srd.so
[ -e "$net" ] || fail "no plugin at $net (make install of a build configured with PKG_CONFIG_PATH=$lf2/lib/pkgconfig)"
[ -e "$lf2/lib/libfabric.so" ] || fail "no CUDA-aware libfabric in $lf2"

srd_nccl230 || fail "$nccl_error"

cuda=${CUDA_HOME:-/usr/local/cuda}
cudart=$(srd_cudart_dir)
export LD_LIBRARY_PATH=$nccl/lib:$inst/lib:$lf2/lib${cudart:+:$cudart}:$LD_LIBRARY_PATH
export PATH=$inst/bin:$lf2/bin:$PATH

# The test program, against NCCL 2.30.7's headers.
bin=/tmp/srd-rma-putsignal
{
  echo "# gcc"
  gcc -std=c11 -O2 -Wall -o $bin tests/device/rma_putsignal.c -I$nccl/include -I"$cuda/include" \
    -L$nccl/lib -L"$cuda/lib64" ${cudart:+-L$cudart} -lnccl -lcudart 2>&1 ||
    { echo "# gcc failed: nvcc"; nvcc -O2 -x cu -o $bin tests/device/rma_putsignal.c -I$nccl/include -L$nccl/lib -lnccl 2>&1; }
} >"$out/build.log"
[ -x $bin ] || fail "building rma_putsignal failed: $(tail -5 "$out/build.log")"

unset NCCL_ALGO NCCL_PROTO NCCL_NET NCCL_TUNER_PLUGIN NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
for v in $(env | grep -oE '^NCCL_SRD_[A-Z_]+'); do unset "$v"; done
# What makes NCCL route ncclPutSignal to a net plugin's RMA table on one
# node: every rank its own LSA team (else peers on the node use the copy
# engine), the net plugin, cross-NIC allowed. NCCL_SRD_GDR=1: shm makes CUDA
# calls of its own, so the plugin offers GPU memory there only when forced.
# NCCL_NET=SRD: an error, not a silent fallback, if the plugin does not load.
common="FI_PROVIDER=shm NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_LSA_TEAM_SIZE=1 NCCL_CROSS_NIC=1 NCCL_NET_GDR_LEVEL=SYS"
# NCCL_RMA_PROXY_DUMP_SIGNAL=10: a rank still waiting when bounded stops it
# prints NCCL's RMA queues on SIGUSR1 (bounded sends it first).
common="$common NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET FI_LOG_LEVEL=warn NCCL_RMA_PROXY_DUMP_SIGNAL=10"
{
  date -u
  git log -1 --format='commit %h %s' 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1
  echo "plugin $net; libfabric $lf2; NCCL $nccl; libcudart.so in ${cudart:-(not found)}"
  echo "--- fi_info -p shm -c FI_HMEM"
  fi_info -p shm -c FI_HMEM 2>&1 | head -8
  echo "--- srd-info (FI_PROVIDER=shm NCCL_SRD_RMA=gpu NCCL_SRD_GDR=1 CUDA_DEVICE_MAX_CONNECTIONS=32)"
  FI_PROVIDER=shm NCCL_SRD_RMA=gpu NCCL_SRD_GDR=1 CUDA_DEVICE_MAX_CONNECTIONS=32 srd-info 2>&1
} >"$out/env.txt"
grep -A2 "one-sided RMA" "$out/env.txt" | tee -a "$summary"

# run NAME ENVS [signal|time]: 2 ranks, bounded, log and NCCL debug files in $out.
run() {
  local name=$1 envs=$2 mode=${3:-} log=$out/$1.log rc
  rm -f /tmp/srd-rma-putsignal.id
  # shellcheck disable=SC2086,SC2163 # the words of $common and $envs are the assignments
  (export $common $envs NCCL_DEBUG_FILE=$out/$name.nccl.%h.%p SRD_ID_FILE=/tmp/srd-rma-putsignal.id
   BOUNDED_DUMP_SIGNAL=USR1 bounded "$RUN_TIMEOUT" bash -c "$(declare -f ranks); ranks 2 $bin $ROUNDS $mode") >"$log" 2>&1
  rc=$?
  echo "# exit $rc" >>"$log"
  local ok
  ok=$(grep -c "PASS (" "$log")
  say "$name: exit $rc, ranks passed $ok of 2$([ $rc = 124 ] && echo ' (TIMEOUT: a signal never reached its count; stacks in the log)')"
  grep -h "FAIL\|failed" "$log" | head -5 | sed 's/^/    /' | tee -a "$summary"
  # Which RMA path NCCL took, what the plugin said, what libfabric warned.
  cat "$out/$name".nccl.* 2>/dev/null | grep -iE "RMA|GIN|Loaded net plugin|ncclRma|NET/SRD.*(GPU|device 0)" | sort -u |
    head -20 | sed 's/^/    nccl: /' | tee -a "$summary"
  if grep -q "cudaDeviceSynchronize" "$log"; then
    say "    a thread synchronised the whole device (a deadlock risk with the stream waits):"
    grep "cudaDeviceSynchronize" "$log" | head -3 | sed 's/^/    /' | tee -a "$summary"
  fi
  return $rc
}

say "== NCCL 2.30.7 ncclPutSignal/ncclWaitSignal, 2 ranks on one GPU, shm, $ROUNDS rounds per size"
# signal: no data, so shm makes no CUDA copy and only the plugin's stream
# writes reach GPU memory. gpu: puts with signals. Both with 32 CUDA hardware
# queues; at the default 8, shm's synchronous cudaMemcpy of a put can queue
# behind the stream waiting for its signal (every such run hung: DESIGN.md
# "One-sided RMA"), so there the plugin refuses GPU windows: the "refused"
# run checks that NCCL is told at once, with what to set, and nothing hangs.
rc=0
gpu="NCCL_SRD_RMA=gpu NCCL_SRD_GDR=1"
run signal "$gpu CUDA_DEVICE_MAX_CONNECTIONS=32" signal || rc=1
run gpu "$gpu CUDA_DEVICE_MAX_CONNECTIONS=32" || rc=1
run refused "$gpu"
r=$?
if [ $r = 0 ] || [ $r = 124 ] || ! cat "$out"/refused.nccl.* | grep -q "set CUDA_DEVICE_MAX_CONNECTIONS=32"; then
  say "refused: expected a prompt failure naming CUDA_DEVICE_MAX_CONNECTIONS=32 (exit $r)"
  rc=1
fi
# time: a ring step as put+signal against the same step as send/recv (both
# through the plugin, GPU buffers), 8 B to 64 MiB (BENCHMARKS.md).
if [ "${TIME:-1}" = 1 ]; then
  run time "$gpu CUDA_DEVICE_MAX_CONNECTIONS=32" time || rc=1
  grep "^time " "$out/time.log" | sed 's/^/    /' | tee -a "$summary"
fi
say "result: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
