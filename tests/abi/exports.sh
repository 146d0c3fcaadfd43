#!/bin/sh
# The plugin libraries export their NCCL tables and nothing else:
# ncclNetPlugin_v8 .. _v12 and ncclRmaPlugin_v14 and _v15 must be there, and every
# defined dynamic symbol must be an ncclNetPlugin_v*, ncclRmaPlugin_v* or
# ncclTunerPlugin_v* table (never ncclGinPlugin_*: NCCL's own GIN proxy runs
# on the RMA table). The tuner library,
# when it is built, is held to the same rule. Neither has thread-local
# storage: NCCL dlopens them, so a thread-local is dynamic TLS, reached through
# __tls_get_addr on every access, and GCC 12's LeakSanitizer faults scanning it
# ("Tracer caught signal 11" at exit of every process that touched it).
set -u
libs="${top_builddir:-.}/.libs"
net="$libs/libnccl-net-srd.so"
status=0

fail() {
  echo "FAIL: $*"
  status=1
}

# AddressSanitizer builds add an ODR indicator (__odr_asan.NAME) beside each
# exported global; it exists only in those builds, so it is not counted.
exports() {
  nm -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' | grep -v '^__odr_asan[._]' | sort -u
}

check_only_tables() {
  lib=$1
  extra=$(exports "$lib" | grep -Ev '^(ncclNetPlugin_v[0-9]+|ncclRmaPlugin_v[0-9]+|ncclTunerPlugin_v[0-9]+)$')
  if [ -n "$extra" ]; then
    fail "$lib exports symbols other than the plugin tables:"
    echo "$extra" | sed 's/^/  /'
  else
    echo "ok: $lib exports only: $(exports "$lib" | tr '\n' ' ')"
  fi
}

check_no_tls() {
  if readelf -lW "$1" | grep -q '^ *TLS '; then
    fail "$1 has thread-local storage (a TLS segment):"
    readelf -sW "$1" | awk '$4 == "TLS" { print "  " $8 }'
  else
    echo "ok: $1 has no thread-local storage"
  fi
}

command -v readelf >/dev/null || { echo "FAIL: readelf not found"; exit 1; }
command -v nm >/dev/null || { echo "FAIL: nm not found"; exit 1; }
[ -f "$net" ] || { echo "FAIL: $net is not built"; exit 1; }

for v in 8 9 10 11 12; do
  exports "$net" | grep -qx "ncclNetPlugin_v$v" || fail "$net does not export ncclNetPlugin_v$v"
done
for v in 14 15; do
  exports "$net" | grep -qx "ncclRmaPlugin_v$v" || fail "$net does not export ncclRmaPlugin_v$v"
done
check_only_tables "$net"
check_no_tls "$net"

tuner="$libs/libnccl-tuner-srd.so"
if [ -f "$tuner" ]; then
  check_only_tables "$tuner"
  check_no_tls "$tuner"
fi

exit $status
