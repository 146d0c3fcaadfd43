#!/bin/sh
# The long in-flight load (2048 messages, every receive buffer reposted many
# times) with the provider refusing every third repost of a receive buffer
# (NCCL_SRD_TEST_RECV_REFUSE=3, as a provider short of memory may): a refused
# buffer waits and is posted again later. Were it dropped, the endpoint would
# run out of receive buffers and the bounded waits would fail.
# Argument 1 (optional): the providers, as for the test programs.
set -u
dir="${top_builddir:-.}/tests/functional"
NCCL_SRD_TEST_RECV_REFUSE=3
export NCCL_SRD_TEST_RECV_REFUSE
"$dir/inflight" "${1:-}" inflight-32x64
