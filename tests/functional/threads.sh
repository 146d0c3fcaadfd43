#!/bin/sh
# The key functional cases again with progress threads (NCCL_SRD_PROGRESS_THREADS):
# every program with 2 lanes per NIC, the order-independence runs with 2
# lanes and NCCL_SRD_TEST_REORDER=1, and the heaviest data cases with 4 lanes.
# Argument 1 (optional): the providers, as for the test programs.
set -u
dir="${top_builddir:-.}/tests/functional"
providers="${1:-}"
status=0
run() { # lanes reorder program [case]
  lanes=$1 reorder=$2 prog=$3
  shift 3
  echo "== $prog ${1:-(all cases)} with NCCL_SRD_PROGRESS_THREADS=$lanes NCCL_SRD_TEST_REORDER=$reorder"
  NCCL_SRD_PROGRESS_THREADS=$lanes NCCL_SRD_TEST_REORDER=$reorder "$dir/$prog" "$providers" "$@" || status=1
}
for prog in connect sizes groups truncate inflight close peerkill allreduce; do run 2 0 $prog; done
run 2 1 sizes sizes
run 2 1 groups grouped-recv
run 2 1 inflight inflight-32
run 4 0 sizes
run 4 0 inflight
run 4 0 allreduce
exit $status
