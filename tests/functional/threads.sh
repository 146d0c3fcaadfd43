#!/bin/sh
# The progress-lane test (lanes), then the key functional cases again with
# progress threads (NCCL_SRD_PROGRESS_THREADS): every program with 2 lanes
# per NIC, the order-independence runs with 2 lanes and
# NCCL_SRD_TEST_REORDER=1, the heaviest data cases with 4 lanes (the
# rail-failure case with 2 lanes is tests/netns/raildown-lanes.sh). Every
# process checks that its device really opened with that many threaded lanes
# (SRD_TEST_EXPECT_LANES): a plugin that falls back to no lanes fails here.
# Argument 1 (optional): the providers, as for the test programs.
set -u
dir="${top_builddir:-.}/tests/functional"
providers="${1:-}"
status=0
run() { # lanes reorder program [case]
  lanes=$1 reorder=$2 prog=$3
  shift 3
  echo "== $prog ${1:-(all cases)} with NCCL_SRD_PROGRESS_THREADS=$lanes NCCL_SRD_TEST_REORDER=$reorder"
  NCCL_SRD_PROGRESS_THREADS=$lanes SRD_TEST_EXPECT_LANES=$lanes NCCL_SRD_TEST_REORDER=$reorder \
    "$dir/$prog" "$providers" "$@" || status=1
}
echo "== lanes (each process sets its own lane count)"
"$dir/lanes" "$providers" || status=1
for prog in connect sizes groups truncate inflight peerkill allreduce close; do run 2 0 $prog; done
run 2 1 sizes sizes
run 2 1 groups grouped-recv
run 2 1 inflight inflight-32
run 4 0 sizes
run 4 0 inflight
run 4 0 allreduce
exit $status
