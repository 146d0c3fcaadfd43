#!/bin/sh
# srd-perf --cuda on a host where GPU memory cannot be used: a one-line reason
# and exit status 1, never a crash or a hang (plugin and --raw). The plugin
# under NCCL_SRD_GDR=1 fails init with the reason.
set -u
bin="${top_builddir:-.}/srd-perf"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -e /dev/nvidia0 ] && { echo "SKIP: this host has a GPU"; exit 77; }

expect_error() { # WHAT PATTERN PROVIDER ARGS...
  what=$1 pattern=$2 provider=$3
  shift 3
  NCCL_SRD_PROVIDER=$provider "$bin" -e 4K --timeout 20 "$@" > "$tmp/out" 2>&1
  rc=$?
  [ "$rc" -eq 1 ] || { cat "$tmp/out"; fail "$what: exit status $rc, expected 1"; }
  grep -qE -e "$pattern" "$tmp/out" || { cat "$tmp/out"; fail "$what: no '$pattern' in the output"; }
}

expect_error "plugin" "--cuda: no usable GPU on this host \((no CUDA driver|cuInit failed|no CUDA device)" \
  'tcp;ofi_rxm' --cuda
expect_error "raw tcp" "raw: --cuda: provider tcp;ofi_rxm offers no FI_HMEM" 'tcp;ofi_rxm' --raw --cuda
expect_error "raw shm" "--cuda: (no CUDA driver|cuInit failed|no CUDA device|fi_mr_regattr \(FI_HMEM_CUDA\))" \
  shm --raw --cuda --check
NCCL_SRD_GDR=1 expect_error "NCCL_SRD_GDR=1" \
  "NCCL_SRD_GDR=1 but GPU memory cannot be offered: provider tcp;ofi_rxm does not offer FI_HMEM" 'tcp;ofi_rxm'
grep -qF "plugin init failed: ncclResult 2" "$tmp/out" || { cat "$tmp/out"; fail "NCCL_SRD_GDR=1: init did not fail"; }
echo "PASS"
