#!/bin/sh
# srd-info runs, finds a usable provider here, and its --json parses; with an
# impossible provider it exits non-zero and still prints valid JSON.
set -u
. "${top_srcdir:-.}/tests/tools/json_check.sh"
bin="${top_builddir:-.}/srd-info"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bin" --help | grep -q -- --json || fail "--help does not mention --json"
"$bin" > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "srd-info exited non-zero on a machine with tcp"; }
cat "$tmp/out"
for section in "chosen provider" "NCCL devices" capabilities "settings (NCCL_SRD_" NCCL_SRD_PROVIDER; do
  grep -qF "$section" "$tmp/out" || fail "text output lacks '$section'"
done

"$bin" --json > "$tmp/json" || fail "srd-info --json exited non-zero"
json_check "$tmp/json" || { cat "$tmp/json"; fail "srd-info --json is not valid JSON"; }
grep -q '"usable": true' "$tmp/json" || fail "--json does not say usable"
grep -q '"NCCL_SRD_EAGER_MAX"' "$tmp/json" || fail "--json lacks the settings"

FI_PROVIDER=shm "$bin" --json > "$tmp/shm" || fail "srd-info with FI_PROVIDER=shm exited non-zero"
json_check "$tmp/shm" || fail "shm JSON invalid"
grep -q '"name": "shm"' "$tmp/shm" || fail "FI_PROVIDER=shm did not choose shm"

NCCL_SRD_EAGER_MAX=4K "$bin" --json > "$tmp/param" || fail "srd-info with a setting exited non-zero"
grep -A2 '"NCCL_SRD_EAGER_MAX"' "$tmp/param" | grep -q '"value": 4096' || fail "setting in force not shown"

# A rejected value is shown as such, with the default in force.
NCCL_SRD_EAGER_MAX=1M "$bin" > "$tmp/bad" 2>&1 || fail "srd-info with a rejected setting exited non-zero"
grep -q 'NCCL_SRD_EAGER_MAX  *-1  *(invalid NCCL_SRD_EAGER_MAX=1M' "$tmp/bad" ||
  { cat "$tmp/bad"; fail "a rejected setting is not shown as invalid with the default in force"; }
grep -q '^libfabric .*oldest supported 1\.17)' "$tmp/out" || fail "the oldest supported libfabric is not stated"

# libfabric 2.x's ofi_rxm crashes in its error path: with no provider named,
# native tcp comes first there.
major=$(sed -n 's/^libfabric *\([0-9][0-9]*\)\..*/\1/p' "$tmp/out")
if [ "${major:-0}" -ge 2 ] && grep -q '^chosen provider  tcp;ofi_rxm' "$tmp/out"; then
  fail "libfabric $major.x: tcp;ofi_rxm chosen before native tcp"
fi

# A GPU machine described by a topology file: the GPU has no NIC of ours
# behind its switch, and host-only tcp cannot register GPU memory.
NCCL_SRD_TOPO_FILE="${top_srcdir:-.}/tests/topo/single.xml" "$bin" --json > "$tmp/gpu" ||
  fail "srd-info with a GPU topology exited non-zero"
json_check "$tmp/gpu" || fail "GPU topology JSON invalid"
grep -q '"gpus": 1' "$tmp/gpu" || fail "the topology's GPU was not found"
grep -q 'has no NIC behind its PCIe switch' "$tmp/gpu" || fail "no warning for a GPU without a local NIC"
grep -q 'GPU memory cannot be registered' "$tmp/gpu" || fail "no warning for missing GPU memory registration"
grep -q '"name": "NCCL_SRD_TOPO_FILE"' "$tmp/gpu" || fail "settings lack NCCL_SRD_TOPO_FILE"

# NCCL_SRD_RMA=gpu: refused on tcp (no FI_HMEM), with the device and why.
NCCL_SRD_RMA=gpu FI_PROVIDER=tcp "$bin" > "$tmp/rma" 2>&1 || fail "srd-info with NCCL_SRD_RMA=gpu exited non-zero"
grep -q '^  one-sided RMA (ncclRma v14)  *not offered: ' "$tmp/rma" ||
  { grep -A1 'one-sided' "$tmp/rma"; fail "NCCL_SRD_RMA=gpu on tcp shown as offered"; }
grep -q '^    why not  *device 0: provider tcp.* does not offer FI_HMEM.*GPU windows need efa or shm' "$tmp/rma" ||
  { grep -A1 'one-sided' "$tmp/rma"; fail "NCCL_SRD_RMA=gpu on tcp: no reason naming the device and FI_HMEM"; }

NCCL_SRD_PROVIDER=no-such-provider "$bin" --json > "$tmp/none" 2> "$tmp/none.err"
rc=$?
[ "$rc" -ne 0 ] || fail "no usable NIC but exit status 0"
json_check "$tmp/none" || fail "JSON invalid when nothing is usable"
grep -q '"usable": false' "$tmp/none" || fail "--json does not say unusable"
"$bin" --bogus > /dev/null 2>&1 && fail "unknown option accepted"
echo "PASS"
