#!/bin/sh
# raildown.sh with 2 progress lanes per NIC (4 veth rails in two namespaces:
# 8 lane rails a side): a rail that loses its link fails its comms with lanes
# too. Its exit status is raildown.sh's: 77 (skipped) stays a skip.
NCCL_SRD_PROGRESS_THREADS=2 SRD_TEST_EXPECT_LANES=2 exec "$(dirname "$0")/raildown.sh"
