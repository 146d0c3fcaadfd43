#!/bin/sh
# The size, grouped-receive and one-sided RMA tests between two "hosts": rank 0 in one
# network namespace, rank 1 in the other, joined by 4 veth rails
# (tests/netns/netns.sh), over tcp (tcp;ofi_rxm on libfabric 1.x). Messages from the stripe threshold up
# (NCCL_SRD_STRIPE_THRESHOLD) are striped over every rail. Then the same with
# 1 rail on side a against 4 on side b (NCCL_SRD_IFNAME names va0 and vb0..vb3;
# each side sees only its own): then va0 must carry all of it and va1..va3
# nothing. Interface byte counts are the evidence in both. raildown.sh cuts a
# rail mid-transfer.
# Skips (77) where namespaces cannot be made.
set -u

here=$(cd "$(dirname "$0")" && pwd)
netns="$here/netns.sh"
dir="${top_builddir:-.}/tests/functional"
export SRD_NETNS="srdrail$$"
SRD_TEST_NETNS="$SRD_NETNS-a,$SRD_NETNS-b"
NCCL_SRD_PROVIDER='tcp'
export SRD_TEST_NETNS NCCL_SRD_PROVIDER
unset FI_PROVIDER NCCL_SRD_IFNAME NCCL_SRD_RAILS
fails=0

for prog in sizes groups rma; do
  [ -x "$dir/$prog" ] || { echo "multirail: $dir/$prog is not built" >&2; exit 99; }
done
"$netns" check || exit $?
trap '"$netns" down' EXIT
"$netns" up 4 || exit 99

run() {
  echo "== $*"
  "$@" || fails=$((fails + 1))
}

# Bytes received and sent so far on interface $1 of side a.
traffic() {
  "$netns" run a sh -c "cat /sys/class/net/$1/statistics/rx_bytes /sys/class/net/$1/statistics/tx_bytes" |
    awk '{ s += $1 } END { print s + 0 }'
}

# Every rail must have carried at least $1 MiB since the counts in $before.
check_striped() {
  k=0
  for was in $before; do
    moved=$(( ($(traffic va$k) - was) >> 20 ))
    if [ "$moved" -ge "$1" ]; then
      echo "ok: va$k carried $moved MiB"
    else
      echo "FAIL: va$k carried $moved MiB, less than $1: messages were not striped over every rail"
      fails=$((fails + 1))
    fi
    k=$((k + 1))
  done
}

# Since the counts in $before: va0 carried at least $1 MiB, the others under 1.
check_one_rail() {
  k=0
  for was in $before; do
    moved=$(( ($(traffic va$k) - was) >> 20 ))
    if [ $k -eq 0 ] && [ "$moved" -lt "$1" ]; then
      echo "FAIL: va0 carried $moved MiB, less than $1: where did side a's traffic go?"
      fails=$((fails + 1))
    elif [ $k -gt 0 ] && [ "$moved" -ge 1 ]; then
      echo "FAIL: va$k carried $moved MiB although NCCL_SRD_IFNAME leaves side a only va0"
      fails=$((fails + 1))
    else
      echo "ok: va$k carried $moved MiB"
    fi
    k=$((k + 1))
  done
}

# The sizes cases that move data differently over rails (max-p2p: the
# largest message NCCL is offered, over 4 rails and over 1 against 4); its
# API-version cases (sizes-v8, sizes-abi) and max-p2p-striped are
# tests/functional/sizes: the api shims sit above the rails, and striped
# endpoints are the same paths on one rail.
echo "### 4 rails against 4 rails"
before="$(traffic va0) $(traffic va1) $(traffic va2) $(traffic va3)"
run "$dir/sizes" 'tcp' sizes,sizes-striped,max-p2p
# sizes sends a 64 MiB message at least once: 16 MiB a rail when striped.
check_striped 12
run "$dir/groups" 'tcp'
# One-sided: put+signal 1 B..64 MiB checked byte for byte, then the ordering
# rule (a signal shows only puts whose data all landed) with stripes spread
# over the 4 rails, delivered in order and shuffled.
before="$(traffic va0) $(traffic va1) $(traffic va2) $(traffic va3)"
run "$dir/rma" 'tcp' put-sizes
check_striped 12
run "$dir/rma" 'tcp' ordering
NCCL_SRD_TEST_REORDER=1 run "$dir/rma" 'tcp' ordering

echo "### 1 rail (va0) against 4 rails (vb0..vb3)"
before="$(traffic va0) $(traffic va1) $(traffic va2) $(traffic va3)"
NCCL_SRD_IFNAME=va0,vb0,vb1,vb2,vb3 run "$dir/sizes" 'tcp' sizes,sizes-striped,max-p2p
# sizes moves over 64 MiB in its largest message alone.
check_one_rail 64
NCCL_SRD_IFNAME=va0,vb0,vb1,vb2,vb3 run "$dir/groups" 'tcp'

[ "$fails" -eq 0 ] || { echo "multirail: $fails run(s) failed"; exit 1; }
echo "multirail: all runs passed"
