#!/bin/sh
# One-sided RMA with every signal written by a loopback RDMA write of the
# plugin's, as GPU windows on efa take them (NCCL_SRD_TEST_NIC_SIGNALS=1 makes
# host windows do so): the ring of put sizes, the ordering invariant (a
# signal never shows before the data of the puts it counts) at 2 and 4 ranks,
# with completions shuffled too, and put+signal to ourselves, on the real
# providers' loopback.
# Argument 1 (optional): the providers, as for the test programs.
set -u
dir="${top_builddir:-.}/tests/functional"
NCCL_SRD_TEST_NIC_SIGNALS=1
export NCCL_SRD_TEST_NIC_SIGNALS
providers="${1:-}"
status=0
for run in "put-sizes" "ordering" "ordering-4" "loopback" "reorder ordering-4"; do
  set -- $run
  if [ "$1" = reorder ]; then
    echo "== rma $2 with NCCL_SRD_TEST_NIC_SIGNALS=1 NCCL_SRD_TEST_REORDER=1"
    NCCL_SRD_TEST_REORDER=1 "$dir/rma" "$providers" "$2" || status=1
  else
    echo "== rma $1 with NCCL_SRD_TEST_NIC_SIGNALS=1"
    "$dir/rma" "$providers" "$1" || status=1
  fi
done
exit $status
