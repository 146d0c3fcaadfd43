#!/bin/sh
# NIC discovery and grouping on a two-namespace host with 4 veth rails:
# every vaK is a rail, lo is not, NCCL_SRD_IFNAME and NCCL_SRD_RAILS select,
# and with no GPU and no PCI NIC all rails form one device, whose speed NCCL
# is told is the sum of its rails'.
# Skips (77) where namespaces cannot be made.
set -u

here=$(cd "$(dirname "$0")" && pwd)
netns="$here/netns.sh"
list_nics="${top_builddir:-.}/tests/topo/list_nics"
export SRD_NETNS="srdtopo$$"
fails=0

[ -x "$list_nics" ] || { echo "topo-netns: $list_nics is not built" >&2; exit 99; }
dlopen="${top_builddir:-.}/tests/abi/dlopen"
[ -x "$dlopen" ] || { echo "topo-netns: $dlopen is not built" >&2; exit 99; }
"$netns" check || exit $?
trap '"$netns" down' EXIT
"$netns" up 4 || exit 99

# The output of list_nics inside srd-a, with the given environment.
discover() {
  env -u FI_PROVIDER NCCL_SRD_PROVIDER='tcp' "$@" "$netns" run a "$list_nics" 2>&1
}

expect() {
  what=$1
  want=$2
  got=$3
  if [ "$got" = "$want" ]; then
    echo "ok: $what"
  else
    echo "FAIL: $what"
    echo "  want: $want"
    echo "  got:  $got"
    fails=$((fails + 1))
  fi
}

out=$(discover)
echo "$out"
expect "every veth is a rail, in order, no lo" "va0 va1 va2 va3" \
  "$(echo "$out" | awk '$1 == "nic" { printf "%s%s", sep, $3; sep = " " }')"
expect "one device holding the 4 rails" "group 0 gpu=-1 rails=va0,va1,va2,va3" \
  "$(echo "$out" | awk '$1 == "group" { print $1, $2, $3, $4 }')"

# The speed NCCL is told (getProperties, every ABI version) is the device's:
# the sum over its 4 rails, not one NIC's.
rails_mbps=$(echo "$out" | awk '$1 == "nic" { sub("speed=", "", $6); s += $6 } END { print s + 0 }')
props=$(env -u FI_PROVIDER SRD_TEST_PROVIDERS=tcp top_builddir="${top_builddir:-.}" \
  "$netns" run a "$dlopen" 2>&1)
expect "getProperties of every version reports the 4 rails' $rails_mbps Mb/s" \
  "v8:$rails_mbps v9:$rails_mbps v10:$rails_mbps v11:$rails_mbps v12:$rails_mbps" \
  "$(echo "$props" | awk '/ dev 0: / { for (i = 1; i < NF; i++) { if ($(i + 1) == "dev") ver = $i; if ($i == "speed") v[ver] = $(i + 1) } }
    END { for (k = 8; k <= 12; k++) printf "%sv%d:%s", (k > 8 ? " " : ""), k, v["v" k] }')"

out=$(discover NCCL_SRD_IFNAME=va1,va3)
expect "NCCL_SRD_IFNAME=va1,va3 selects 2 rails" "rails=va1,va3" \
  "$(echo "$out" | awk '$1 == "group" { print $4 }')"

out=$(discover NCCL_SRD_IFNAME=^va0)
expect "NCCL_SRD_IFNAME=^va0 leaves 3 rails" "rails=va1,va2,va3" \
  "$(echo "$out" | awk '$1 == "group" { print $4 }')"

out=$(discover NCCL_SRD_RAILS=2)
expect "NCCL_SRD_RAILS=2 caps the device at 2 rails" "rails=va0,va1" \
  "$(echo "$out" | awk '$1 == "group" { print $4 }')"

out=$(discover NCCL_SRD_IFNAME==va)
expect "NCCL_SRD_IFNAME==va (exact, no such interface) fails with exit 1" "1" "$?"
expect "... and says why" "1" "$(echo "$out" | grep -c 'selects')"

[ "$fails" -eq 0 ] || exit 1
