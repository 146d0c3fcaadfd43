#!/bin/sh
# Builds the emulated EFA device's libibverbs.so.1 and libefa.so.1.
#   tests/efa/emu/build.sh RDMA_INCLUDE_DIR OUT_DIR [CC]
# RDMA_INCLUDE_DIR holds rdma-core 56's infiniband/verbs.h and efadv.h
# (tests/efa/build-libfabric.sh unpacks them); OUT_DIR gets the libraries
# and their link-time names.  A test fixture: never installed or packaged.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 RDMA_INCLUDE_DIR OUT_DIR [CC]" >&2; exit 2; }
inc=$1 out=$2 cc=${3:-${CC:-cc}}
src=$(cd "$(dirname "$0")" && pwd)
[ -f "$inc/infiniband/efadv.h" ] || { echo "$0: no infiniband/efadv.h under $inc" >&2; exit 1; }
mkdir -p "$out"
flags="-std=c11 -Wall -Wextra -Werror -O2 -g -fPIC -fvisibility=hidden -I$inc ${EMU_CFLAGS:-}"
# shellcheck disable=SC2086
$cc $flags -shared -o "$out/libibverbs.so.1" -Wl,-soname,libibverbs.so.1 \
  -Wl,--version-script="$src/libibverbs.map" \
  "$src/profile.c" "$src/device.c" "$src/hw.c" "$src/cq.c" "$src/qp.c" \
  "$src/loop.c" "$src/tx.c" "$src/rx.c" -lpthread
# shellcheck disable=SC2086
$cc $flags -shared -o "$out/libefa.so.1" -Wl,-soname,libefa.so.1 \
  -Wl,--version-script="$src/libefa.map" "$src/efadv.c" \
  "$out/libibverbs.so.1" -Wl,-rpath,"$out"
ln -sf libibverbs.so.1 "$out/libibverbs.so"
ln -sf libefa.so.1 "$out/libefa.so"
