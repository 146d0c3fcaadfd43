#!/bin/sh
# Rail failover (tests/functional/failover): two namespaces joined by 4 veth
# rails (tcp, striped over all of them), 64 MiB messages with every byte
# checked. cut-one cuts rail 2 mid-transfer, mends it and waits for it to
# rejoin; cut-all cuts rails 1, 2, 3 in turn, then rail 0, after which every
# comm must fail within 1 s naming the rails. Skips (77) where namespaces
# cannot be made. failover-reorder.sh and failover-lanes.sh run it with
# NCCL_SRD_TEST_REORDER=1 and with progress lanes; rma-cut.sh runs another
# program's cases here (SRD_FAILOVER_PROG, under tests/functional).
set -u

here=$(cd "$(dirname "$0")" && pwd)
netns="$here/netns.sh"
prog="${top_builddir:-.}/tests/functional/${SRD_FAILOVER_PROG:-failover}"
export SRD_NETNS="srdfo$$"
SRD_TEST_NETNS="$SRD_NETNS-a,$SRD_NETNS-b"
SRD_FAILOVER_NETNS="$netns"
export SRD_TEST_NETNS SRD_FAILOVER_NETNS
unset FI_PROVIDER NCCL_SRD_IFNAME NCCL_SRD_RAILS NCCL_SRD_FAILOVER
# Operations on dead links never complete: close waits this long for them.
NCCL_SRD_CLOSE_TIMEOUT_MS=${NCCL_SRD_CLOSE_TIMEOUT_MS:-1000}
export NCCL_SRD_CLOSE_TIMEOUT_MS

[ -x "$prog" ] || { echo "failover: $prog is not built" >&2; exit 99; }
"$netns" check || exit $?
trap '"$netns" down' EXIT
fails=0
for case in ${SRD_FAILOVER_CASES:-cut-one cut-idle cut-all}; do
  "$netns" up 4 || exit 99
  "$prog" tcp "$case" || fails=$((fails + 1))
done
[ "$fails" = 0 ]
