#!/bin/sh
# The size, grouped-receive and load tests again with NCCL_SRD_TEST_REORDER=1:
# the plugin then delays and shuffles completions, so any dependence on the
# order of delivery or of completions shows up as a failure.
set -u
dir="${top_builddir:-.}/tests/functional"
NCCL_SRD_TEST_REORDER=1
export NCCL_SRD_TEST_REORDER
status=0
for t in sizes groups inflight; do
  echo "== $t with NCCL_SRD_TEST_REORDER=1"
  "$dir/$t" "$@" || status=1
done
exit $status
