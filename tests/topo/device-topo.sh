#!/bin/sh
# On the GPU device machine: record its real topology and what discovery and
# grouping make of it, so the grouping can be checked against real hardware
# and the XML kept as a test input.
#
#   . ./.device/gpu-env.sh                       # hwloc and libfabric from the bundle
#   sh tests/topo/device-topo.sh [LIST_NICS]     # LIST_NICS: a built tests/topo/list_nics
#
# Writes to $OUT (or ./device-topo-out): topology.xml (lstopo, I/O included),
# lstopo.txt, fi_info.txt, list_nics.txt (NCCL_DEBUG=INFO, live machine) and
# list_nics-xml.txt (the same NICs grouped from topology.xml, which must agree:
# every line but the one naming the topology's source; a difference is printed
# and the exit status is 1).
set -u
status=0
out=${OUT:-./device-topo-out}
mkdir -p "$out"

list_nics=${1:-}
if [ -z "$list_nics" ]; then
  for c in tests/topo/list_nics .device/build/tests/topo/list_nics build/tests/topo/list_nics; do
    [ -x "$c" ] && list_nics=$c && break
  done
fi

lstopo=$(command -v lstopo-no-graphics || command -v lstopo || true)
if [ -n "$lstopo" ]; then
  timeout 60 "$lstopo" --filter io:all --of xml -f "$out/topology.xml" >"$out/lstopo.err" 2>&1
  timeout 60 "$lstopo" --filter io:all --of console -v >"$out/lstopo.txt" 2>&1
else
  echo "no lstopo here" >"$out/lstopo.txt"
fi
command -v fi_info >/dev/null 2>&1 && timeout 60 fi_info -t FI_EP_RDM >"$out/fi_info.txt" 2>&1
command -v nvidia-smi >/dev/null 2>&1 && timeout 60 nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1

if [ -n "$list_nics" ]; then
  NCCL_DEBUG=INFO timeout 120 "$list_nics" >"$out/list_nics.txt" 2>&1
  echo "exit $?" >>"$out/list_nics.txt"
  if [ -s "$out/topology.xml" ]; then
    NCCL_DEBUG=INFO NCCL_SRD_TOPO_FILE="$out/topology.xml" timeout 120 "$list_nics" >"$out/list_nics-xml.txt" 2>&1
    echo "exit $?" >>"$out/list_nics-xml.txt"
    for f in list_nics list_nics-xml; do grep -v 'topology: grouping .* with ' "$out/$f.txt" >"$out/$f.cmp"; done
    if diff -u "$out/list_nics.cmp" "$out/list_nics-xml.cmp" >"$out/agree.diff"; then
      echo "the live machine and topology.xml group the NICs alike"
    else
      echo "FAIL: the live machine and topology.xml group the NICs differently:"
      cat "$out/agree.diff"
      status=1
    fi
  fi
else
  echo "list_nics not found: pass its path" >"$out/list_nics.txt"
fi
ls -l "$out"
exit $status
