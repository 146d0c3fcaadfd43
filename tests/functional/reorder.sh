#!/bin/sh
# The size, grouped-receive and load tests again with NCCL_SRD_TEST_REORDER=1:
# the plugin then delays and shuffles completions, so any dependence on the
# order of delivery or of completions shows up as a failure.
# Argument 1 (optional): the providers, as for the test programs.
set -u
dir="${top_builddir:-.}/tests/functional"
NCCL_SRD_TEST_REORDER=1
export NCCL_SRD_TEST_REORDER
providers="${1:-}"
status=0
for run in "sizes sizes" "groups grouped-recv" "inflight inflight-32" "inflight comms-72" "rma ordering" \
  "rma ordering-4"; do
  set -- $run
  echo "== $1 $2 with NCCL_SRD_TEST_REORDER=1"
  "$dir/$1" "$providers" "$2" || status=1
done
exit $status
