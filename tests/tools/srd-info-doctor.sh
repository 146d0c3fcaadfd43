#!/bin/sh
# srd-info --check and --expect: passes on a good setup and fails, one line
# per failed expectation naming the cause, on each misconfiguration we can
# seed here: a wrong provider, FI_PROVIDER filtering it out, bad variables,
# no EFA device, low memlock, huge pages the cgroup may not use, a missing
# peermem module, a small /dev/shm, an unresolvable NCCL_NET_PLUGIN, NCCL_NET
# naming another network or unset. System files are read under
# SRD_INFO_SYSROOT.
set -u
bin="${top_builddir:-.}/srd-info"
tmp=$(mktemp -d) || exit 99
trap 'umount "$tmp/small/dev/shm" 2>/dev/null; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

good=$tmp/good
mkdir -p "$good/proc" "$good/dev/shm" "$good/dev/infiniband" "$good/sys/module" "$good/sys/fs/cgroup"
printf 'HugePages_Total:     128\nHugePages_Free:      100\nHugepagesize:       2048 kB\n' > "$good/proc/meminfo"
echo max > "$good/sys/fs/cgroup/hugetlb.2MB.max"

# check CMD...: runs srd-info with the good root, output in $tmp/out, status in $rc.
check() {
  env SRD_INFO_SYSROOT="$good" "$@" > "$tmp/out" 2>&1
  rc=$?
}
# expect_fail NAME TEXT: a FAIL line of check NAME that contains TEXT, and
# the summary counts exactly the FAIL lines.
expect_fail() {
  [ "$rc" -eq 1 ] || { cat "$tmp/out"; fail "exit status $rc, expected 1 ($1)"; }
  grep "^FAIL  $1 " "$tmp/out" | grep -qF -- "$2" || { cat "$tmp/out"; fail "no FAIL line for $1 saying '$2'"; }
  n=$(grep -c '^FAIL' "$tmp/out")
  grep -q "^srd-info --check: $n of [0-9]* check(s) failed" "$tmp/out" || { cat "$tmp/out"; fail "summary miscounts"; }
}

check "$bin" --check
[ "$rc" -eq 0 ] || { cat "$tmp/out"; fail "--check fails on a good setup"; }
grep -q '^ok    provider ' "$tmp/out" || fail "no provider line"
grep -q '^srd-info --check: 0 of' "$tmp/out" || fail "no summary"

check "$bin" --check --json
[ "$rc" -eq 0 ] || fail "--check --json exited $rc"
. "${top_srcdir:-.}/tests/tools/json_check.sh"
json_check "$tmp/out" || { cat "$tmp/out"; fail "--check --json is not valid JSON"; }

# Wrong provider, and FI_PROVIDER named as the cause when it filters it out.
check env NCCL_SRD_PROVIDER=no-such-provider "$bin" --check
expect_fail provider "NCCL_SRD_PROVIDER=no-such-provider is not usable"
check env NCCL_SRD_PROVIDER=shm FI_PROVIDER=tcp "$bin" --check
expect_fail provider "FI_PROVIDER=tcp does not name shm"
check env NCCL_SRD_PROVIDER=shm 'FI_PROVIDER=^shm' "$bin" --check
expect_fail provider "FI_PROVIDER=^shm excludes shm"

# ofi_rxm's eager buffers (1.x's tcp): too small for NCCL's 16-32 KiB steps
# is a warning naming what to set, and so is an eager size they cannot hold.
check env -u FI_OFI_RXM_BUFFER_SIZE -u NCCL_SRD_EAGER_MAX "$bin" --check
if grep -q '^ok    provider  *tcp;ofi_rxm ' "$tmp/out"; then
  grep -q '^warn  eager  *ofi_rxm.s 16384-byte eager buffers hold eager messages up to 8192 bytes.*FI_OFI_RXM_BUFFER_SIZE=32808 ' "$tmp/out" ||
    { cat "$tmp/out"; fail "no advice on ofi_rxm's default eager buffers"; }
  check env FI_OFI_RXM_BUFFER_SIZE=32808 "$bin" --check
  grep -q '^ok    eager  *eager messages up to 32768 bytes in ofi_rxm.s 32808-byte buffers' "$tmp/out" ||
    { cat "$tmp/out"; fail "FI_OFI_RXM_BUFFER_SIZE=32808 not taken"; }
  check env -u FI_OFI_RXM_BUFFER_SIZE NCCL_SRD_EAGER_MAX=32768 "$bin" --check
  grep -q '^warn  eager  *NCCL_SRD_EAGER_MAX=32768 .*set FI_OFI_RXM_BUFFER_SIZE=32808$' "$tmp/out" ||
    { cat "$tmp/out"; fail "an eager size above ofi_rxm's buffers not warned"; }
elif grep -q '^[a-zA-Z]*  *eager ' "$tmp/out"; then
  cat "$tmp/out"; fail "an eager line for a provider other than ofi_rxm"
fi

# Bad variables: one line each, in the plugin's words.
check env NCCL_SRD_KEEPALIVE_MS=10s NCCL_SRD_GDR=maybe NCCL_SRD_TOPO_FILE=/nonexistent NCCL_SRD_EAGER_MAX=1M "$bin" --check
expect_fail variables "NCCL_SRD_KEEPALIVE_MS=10s is not a number"
expect_fail variables "NCCL_SRD_GDR=maybe is not auto, 0 or 1"
expect_fail variables "NCCL_SRD_TOPO_FILE=/nonexistent cannot be read"
expect_fail variables "NCCL_SRD_EAGER_MAX=1M is out of range [-1, 65536]"
[ "$(grep -c '^FAIL' "$tmp/out")" -eq 4 ] || { cat "$tmp/out"; fail "not one line per bad variable"; }

# A tuner rule file that cannot be read, or does not parse: the tuner would
# run without it, so --check fails and says why.
check env NCCL_SRD_TUNER_CONFIG=/nonexistent "$bin" --check
expect_fail variables "NCCL_SRD_TUNER_CONFIG=/nonexistent cannot be read"
printf 'coll=allreduce algo=nonsense\n' > "$tmp/bad.conf"
check env NCCL_SRD_TUNER_CONFIG="$tmp/bad.conf" "$bin" --check
expect_fail tuner "NCCL_SRD_TUNER_CONFIG=$tmp/bad.conf: line 1:"
check env NCCL_SRD_TUNER_CONFIG="${top_srcdir:-.}/tests/tuner/example.conf" "$bin" --check
grep -q "^ok    tuner .*example.conf: [1-9][0-9]* rule(s)" "$tmp/out" || { cat "$tmp/out"; fail "a good rule file not reported"; }

# NCCL_SRD_GDR=1 where no device can offer GPU memory: the plugin's init fails.
check env NCCL_SRD_GDR=1 "$bin" --check
expect_fail init "NCCL_SRD_GDR=1 but device 0 cannot offer GPU memory"

# efa expected: not chosen here, and why; FI_PROVIDER named when it hides efa.
check "$bin" --expect efa
expect_fail efa "not chosen: libfabric"
check env FI_PROVIDER=tcp "$bin" --expect efa
expect_fail efa "FI_PROVIDER=tcp does not name efa"
rmdir "$good/dev/infiniband"
check "$bin" --expect efa
expect_fail efa "dev/infiniband (no EFA device here"
mkdir "$good/dev/infiniband"

# Low memlock fails with efa expected (efa pins memory), not on tcp alone.
check prlimit --memlock=65536 "$bin" --check
grep -q '^ok    memlock  *64 KiB' "$tmp/out" || { cat "$tmp/out"; fail "memlock not reported as 64 KiB"; }
check prlimit --memlock=65536 "$bin" --expect efa
expect_fail memlock "64 KiB: efa pins every buffer"

# Huge pages free on the host that the cgroup may not use: efa's buffers would fault.
echo 0 > "$good/sys/fs/cgroup/hugetlb.2MB.max"
check "$bin" --expect efa
expect_fail hugepages "this cgroup may use none"
check env FI_EFA_USE_HUGE_PAGE=0 "$bin" --expect efa
grep -q '^ok    hugepages  *FI_EFA_USE_HUGE_PAGE=0' "$tmp/out" || { cat "$tmp/out"; fail "FI_EFA_USE_HUGE_PAGE=0 not taken"; }
echo max > "$good/sys/fs/cgroup/hugetlb.2MB.max"

# GPU memory expected on a GPU machine (a topology file): tcp offers none,
# and without a peermem module or dma-buf an efa NIC could not reach the GPU.
gpu_topo="${top_srcdir:-.}/tests/topo/single.xml"
check env NCCL_SRD_TOPO_FILE="$gpu_topo" "$bin" --expect efa --expect gdr
expect_fail gdr "device 0: GPU memory not offered: provider"
expect_fail peermem "none of efa_nv_peermem, nvidia_peermem, nv_peer_mem loaded"
mkdir "$good/sys/module/efa_nv_peermem"
check env NCCL_SRD_TOPO_FILE="$gpu_topo" "$bin" --expect efa --expect gdr
grep -q '^ok    peermem  *efa_nv_peermem$' "$tmp/out" || { cat "$tmp/out"; fail "efa_nv_peermem not seen"; }
check "$bin" --expect gdr
expect_fail gdr "no GPU found"

# NCCL_NET_PLUGIN: resolvable to ours, or a failure naming what was tried.
check env NCCL_NET_PLUGIN=no-such-net "$bin" --check
expect_fail NCCL_NET_PLUGIN "neither no-such-net nor libnccl-net-no-such-net.so"
check env LD_LIBRARY_PATH="${top_builddir:-.}/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NCCL_NET_PLUGIN=srd NCCL_NET=SRD "$bin" --check
grep -q '^ok    NCCL_NET_PLUGIN srd loads libnccl-net-srd.so (net SRD)' "$tmp/out" || { cat "$tmp/out"; fail "NCCL_NET_PLUGIN=srd not resolved"; }
grep -q '^ok    NCCL_NET  *SRD' "$tmp/out" || { cat "$tmp/out"; fail "NCCL_NET=SRD not taken"; }
# NCCL_NET selecting another network (or none, README: a quiet fallback to
# Socket) is a warning, never the ok line.
for net in Socket IB; do
  check env NCCL_NET="$net" "$bin" --check
  grep -q "^warn  NCCL_NET  *NCCL_NET=$net: set NCCL_NET=SRD" "$tmp/out" || { cat "$tmp/out"; fail "NCCL_NET=$net not warned"; }
  grep -q '^ok    NCCL_NET ' "$tmp/out" && { cat "$tmp/out"; fail "NCCL_NET=$net passed"; }
done
check env -u NCCL_NET "$bin" --check
grep -q '^warn  NCCL_NET  *unset: set NCCL_NET=SRD' "$tmp/out" || { cat "$tmp/out"; fail "NCCL_NET unset not warned"; }

# A container's 64 MiB /dev/shm (needs root to mount a small tmpfs).
small=$tmp/small
mkdir -p "$small/dev/shm"
if mount -t tmpfs -o size=64m tmpfs "$small/dev/shm" 2>/dev/null; then
  env SRD_INFO_SYSROOT="$small" "$bin" --check > "$tmp/out" 2>&1
  rc=$?
  expect_fail /dev/shm "64 MiB: NCCL's intra-node buffers live there"
else
  echo "SKIP: the small /dev/shm case needs root (mount -t tmpfs)"
fi

"$bin" --expect nothing > /dev/null 2>&1 && fail "--expect nothing accepted"
echo "PASS"
