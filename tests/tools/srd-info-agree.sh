#!/bin/sh
# srd-info and the plugin agree on every setting: for each case, every
# warning the plugin logs (driven by srd-perf as NCCL would) is a WARNING of
# srd-info in the same words, the plugin's init fails exactly when srd-info
# exits 1, and srd-info --check fails on every bad setting.
set -u
build="${top_builddir:-.}"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# agree CHECK_RC VAR=VALUE...: CHECK_RC is --check's expected exit status.
agree() {
  want_check=$1
  shift
  env "$@" "$build/srd-perf" --plugin "$build/.libs/libnccl-net-srd.so" -b 8 -e 8 -n 4 -w 1 -t lat --timeout 60 \
    > "$tmp/perf" 2>&1
  perf_rc=$?
  env "$@" "$build/srd-info" > "$tmp/info" 2>&1
  info_rc=$?
  env "$@" "$build/srd-info" --check > "$tmp/check" 2>&1
  check_rc=$?
  [ $((perf_rc != 0)) -eq $((info_rc != 0)) ] ||
    { cat "$tmp/perf" "$tmp/info"; fail "$*: the plugin's run exited $perf_rc, srd-info $info_rc"; }
  [ "$check_rc" -eq "$want_check" ] || { cat "$tmp/check"; fail "$*: srd-info --check exited $check_rc"; }
  sed -n 's/^NCCL WARN NET\/SRD //p' "$tmp/perf" | sort -u > "$tmp/plugin-warnings"
  [ -s "$tmp/plugin-warnings" ] || [ "$want_check" -eq 0 ] || { cat "$tmp/perf"; fail "$*: the plugin said nothing"; }
  while IFS= read -r line; do
    grep -qxF "WARNING: $line" "$tmp/info" || { cat "$tmp/info"; fail "$*: srd-info lacks the plugin's warning '$line'"; }
  done < "$tmp/plugin-warnings"
  if [ "$perf_rc" -ne 0 ]; then
    grep -q '^srd-perf: error: ' "$tmp/perf" || { cat "$tmp/perf"; fail "$*: srd-perf exited $perf_rc without saying why"; }
  fi
  echo "agree: $* (plugin $perf_rc, srd-info $info_rc, --check $check_rc)"
}

agree 0 NCCL_SRD_EAGER_MAX=4K
agree 1 NCCL_SRD_GDR=maybe
agree 1 NCCL_SRD_GDR=1
agree 1 NCCL_SRD_TOPO_FILE=/nonexistent
agree 1 NCCL_SRD_KEEPALIVE_MS=10s
agree 1 NCCL_SRD_KEEPALIVE_MS=5
agree 1 NCCL_SRD_PROVIDER=shm FI_PROVIDER=tcp
agree 1 NCCL_SRD_PROVIDER=no-such-provider
echo "PASS"
