#!/bin/sh
# The fail-fast path (NCCL_SRD_FAILOVER=0): a rail dies mid-transfer and
# every comm of the device fails. tests/functional/raildown streams 16 MiB messages
# between two namespaces joined by 4 veth rails (tcp, striped over all
# of them) and cuts rail 2 (`netns.sh cut 2`: va2 down) while one is in
# flight. Both sides must get an error within 30 s, never hang, never deliver
# wrong bytes, and close cleanly. Skips (77) where namespaces cannot be made.
set -u

here=$(cd "$(dirname "$0")" && pwd)
netns="$here/netns.sh"
prog="${top_builddir:-.}/tests/functional/raildown"
export SRD_NETNS="srdcut$$"
SRD_TEST_NETNS="$SRD_NETNS-a,$SRD_NETNS-b"
SRD_RAILDOWN_CUT="$netns cut 2"
export SRD_TEST_NETNS SRD_RAILDOWN_CUT
NCCL_SRD_FAILOVER=0
export NCCL_SRD_FAILOVER
unset FI_PROVIDER NCCL_SRD_IFNAME NCCL_SRD_RAILS

[ -x "$prog" ] || { echo "raildown: $prog is not built" >&2; exit 99; }
"$netns" check || exit $?
trap '"$netns" down' EXIT
"$netns" up 4 || exit 99
"$prog" 'tcp'
