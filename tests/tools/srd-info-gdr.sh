#!/bin/sh
# srd-info shows the GPU memory decision of every device and why: tcp has no
# FI_HMEM; shm has FI_HMEM, and the libfabric here has no CUDA (or this host
# no CUDA driver); NCCL_SRD_GDR=0 says so; --json carries the same.
set -u
. "${top_srcdir:-.}/tests/tools/json_check.sh"
bin="${top_builddir:-.}/srd-info"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

NCCL_SRD_PROVIDER='tcp;ofi_rxm' "$bin" > "$tmp/tcp" 2>&1 || { cat "$tmp/tcp"; exit 77; }
grep -qF 'GPU memory: not offered: provider tcp;ofi_rxm does not offer FI_HMEM' "$tmp/tcp" ||
  { cat "$tmp/tcp"; fail "tcp: no GPU memory line with its reason"; }

if NCCL_SRD_PROVIDER=shm "$bin" > "$tmp/shm" 2>&1; then
  grep -q '^  FI_HMEM (GPU memory) *yes' "$tmp/shm" || { cat "$tmp/shm"; fail "shm's FI_HMEM not seen"; }
  grep -E 'GPU memory: not offered: provider shm offers FI_HMEM but libfabric cannot handle CUDA memory|GPU memory: (not )?offered: .*CUDA|libcuda' "$tmp/shm" >/dev/null ||
    { cat "$tmp/shm"; fail "shm: the reason does not name libfabric's CUDA support or the CUDA driver"; }
fi

NCCL_SRD_GDR=0 "$bin" > "$tmp/off" 2>&1 || fail "srd-info with NCCL_SRD_GDR=0 exited non-zero"
grep -qF 'GPU memory: not offered: NCCL_SRD_GDR=0: host memory only' "$tmp/off" || { cat "$tmp/off"; fail "NCCL_SRD_GDR=0 not shown"; }

NCCL_SRD_PROVIDER='tcp;ofi_rxm' "$bin" --json > "$tmp/json" || fail "srd-info --json exited non-zero"
json_check "$tmp/json" || fail "--json is not valid JSON"
grep -A2 '"gpu_memory"' "$tmp/json" | grep -q '"offered": false' || { cat "$tmp/json"; fail "--json lacks gpu_memory.offered"; }
grep -q '"reason": "provider tcp;ofi_rxm does not offer FI_HMEM (GPU memory)"' "$tmp/json" || fail "--json lacks the reason"
grep -q '"flush_reason"' "$tmp/json" || fail "--json lacks the flush reason"
echo "PASS"
