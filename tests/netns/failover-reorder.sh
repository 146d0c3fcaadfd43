#!/bin/sh
# failover.sh with completions shuffled and delayed (NCCL_SRD_TEST_REORDER=1).
# Its exit status is failover.sh's: 77 (skipped) stays a skip.
NCCL_SRD_TEST_REORDER=1 exec "$(dirname "$0")/failover.sh"
