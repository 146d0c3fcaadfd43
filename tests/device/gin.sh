#!/bin/bash
# On the GPU device machine: NCCL 2.30.7's device API over our RMA table
# (issue 26). nccl-tests' alltoall with -D 3 runs a GIN kernel: the GPU asks
# NCCL's GIN proxy for puts with signals (ncclGin::put, SignalInc), which the
# proxy turns into ncclRmaPlugin_v14 calls on our plugin; the kernel waits for
# every peer's signal and nccl-tests checks the bytes (-c 1). 2 ranks on one
# GPU, shm with FI_HMEM (the CUDA-aware libfabric 2.6 in .device/lf2),
# NCCL_SRD_RMA=gpu, windows registered symmetric (-R 2).
#
#   bash tests/device/gin.sh      # from the root of the carried checkout
#
# Needs, carried in .device/: gpu-env.sh and debs (../shared/device/bundle.sh),
# lf2, nccl230 (as tests/device/rma.sh), nccl-tests (its source, fetched, not
# committed) and a make install of this tree configured against lf2:
# SRD_INSTALL=dir, default .device/install-lf2.
# Knobs: SIZES="-b 8 -e 256M -f 4" ITERS="-n 20 -w 5" RUN_TIMEOUT=240 COMPARE=1
# (0: no -D 0 run of the same alltoall by NCCL's kernels beside it)
# Writes to $OUT (or ./gin-out): summary.txt, the nccl-tests build log, a
# log per run and NCCL's debug file per rank.
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./gin-out}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
fail() { say "ERROR: $*"; exit 1; }

if ! declare -f mpiranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh || fail "cannot source .device/gpu-env.sh"
fi
# shellcheck source=tests/device/nccl-tests.sh
. tests/device/nccl-tests.sh
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
lf2=$PWD/.device/lf2
inst=${SRD_INSTALL:-$PWD/.device/install-lf2}
net=$inst/lib/libnccl-net-srd.so
[ -e "$net" ] || fail "no plugin at $net (make install of a build configured with PKG_CONFIG_PATH=$lf2/lib/pkgconfig)"
[ -e "$lf2/lib/libfabric.so" ] || fail "no CUDA-aware libfabric in $lf2"
srd_nccl230 || fail "$nccl_error"

# nccl-tests' alltoall alone, against NCCL 2.30.7: its device kernels are
# compiled against that NCCL's device API.
SRD_NCCL_HOME=$nccl NCCL_TESTS_BINS=alltoall nccl_tests_build "$out/nccl-tests-build.log" || fail "$nccl_tests_error"

cudart=$(srd_cudart_dir)
export LD_LIBRARY_PATH=$nccl/lib:$inst/lib:$lf2/lib${cudart:+:$cudart}:$LD_LIBRARY_PATH
unset NCCL_ALGO NCCL_PROTO NCCL_NET NCCL_TUNER_PLUGIN NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
for v in $(env | grep -oE '^NCCL_SRD_[A-Z_]+'); do unset "$v"; done
# As rma.sh: every rank its own LSA team so that NCCL's GIN goes through the
# net plugin's RMA table; 32 CUDA queues, without which the plugin refuses
# GPU windows on shm (DESIGN.md "One-sided RMA").
export FI_PROVIDER=shm NCCL_NET=SRD NCCL_NET_PLUGIN=$net NCCL_LSA_TEAM_SIZE=1 NCCL_CROSS_NIC=1 \
  NCCL_NET_GDR_LEVEL=SYS NCCL_SRD_RMA=gpu NCCL_SRD_GDR=1 CUDA_DEVICE_MAX_CONNECTIONS=32 \
  NCCL_TESTS_DEVICE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET FI_LOG_LEVEL=warn \
  NCCL_RMA_PROXY_DUMP_SIGNAL=10

# alltoall NAME D: one bounded 2-rank alltoall_perf with -D D into $out/NAME.log;
# PASS when it exits 0 with rows and nccl-tests' data check reports 0 wrong.
alltoall() {
  local name=$1 log=$out/$1.log rc rows
  # shellcheck disable=SC2086 # SIZES and ITERS are option words
  NCCL_DEBUG_FILE=$out/$name.nccl.%h.%p BOUNDED_DUMP_SIGNAL=USR1 bounded "$RUN_TIMEOUT" bash -c "$(declare -f mpiranks); mpiranks 2 \
    $tests_dir/alltoall_perf ${SIZES:--b 8 -e 256M -f 4} ${ITERS:--n 20 -w 5} -g 1 -c 1 -R 2 -D $2" >"$log" 2>&1
  rc=$?
  echo "# exit $rc" >>"$log"
  rows=$(grep -cE "^ +[0-9]+ +[0-9]+ " "$log")
  say "$name: alltoall_perf -R 2 -D $2, 2 ranks: exit $rc$([ $rc = 124 ] && echo ' (TIMEOUT: stacks in the log)'), rows $rows, $(grep -o "Out of bounds values.*" "$log" || echo "no data check line")"
  grep -E "^ +[0-9]+ +[0-9]+ " "$log" | sed 's/^/    /' | tee -a "$summary"
  grep -E "requires GIN|Incompatible|NCCL WARN|failed" "$log" | head -5 | sed 's/^/    /' | tee -a "$summary"
  # Which GIN and RMA path NCCL took, and what the plugin said.
  cat "$out/$name".nccl.* 2>/dev/null | grep -E "GIN/Plugin: Assigned|RMA/Plugin: (Loaded|Assigned)|NET/SRD RMA|WARN" |
    sed 's/^[^ ]* *[^ ]* *//' | sort -u | head -16 | sed 's/^/    nccl: /' | tee -a "$summary"
  [ $rc = 0 ] && [ "$rows" -gt 0 ] && grep -q "Out of bounds values : 0 OK" "$log"
}

ok=1
alltoall gin 3 || ok=0
# The same alltoall by NCCL's own kernels (send/recv through our net table),
# same call, for the time column (BENCHMARKS.md).
[ "${COMPARE:-1}" = 1 ] && { alltoall sendrecv 0 || ok=0; }
say "result: $([ $ok = 1 ] && echo PASS || echo FAIL)"
[ $ok = 1 ]
