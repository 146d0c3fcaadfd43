#!/bin/sh
# One-sided RMA and a lost rail (tests/functional/rma, case rail-cut): two
# namespaces joined by 4 veth rails (tcp), puts striped over all of them in
# flight when rail 2 is cut. Skips (77) where namespaces cannot be made.
set -u

here=$(cd "$(dirname "$0")" && pwd)
netns="$here/netns.sh"
prog="${top_builddir:-.}/tests/functional/rma"
export SRD_NETNS="srdrc$$"
SRD_TEST_NETNS="$SRD_NETNS-a,$SRD_NETNS-b"
SRD_FAILOVER_NETNS="$netns"
export SRD_TEST_NETNS SRD_FAILOVER_NETNS
unset FI_PROVIDER NCCL_SRD_IFNAME NCCL_SRD_RAILS NCCL_SRD_FAILOVER
# Writes on the dead link never complete: close waits this long for them.
NCCL_SRD_CLOSE_TIMEOUT_MS=${NCCL_SRD_CLOSE_TIMEOUT_MS:-1000}
export NCCL_SRD_CLOSE_TIMEOUT_MS

[ -x "$prog" ] || { echo "rma-cut: $prog is not built" >&2; exit 99; }
"$netns" check || exit $?
trap '"$netns" down' EXIT
"$netns" up 4 || exit 99
"$prog" tcp rail-cut
