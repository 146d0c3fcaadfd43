#!/bin/sh
# failover.sh with 2 progress lanes per NIC (8 lane rails a side; a cut link
# takes down the 2 rails on it). Its exit status is failover.sh's.
NCCL_SRD_PROGRESS_THREADS=2 SRD_TEST_EXPECT_LANES=2 exec "$(dirname "$0")/failover.sh"
