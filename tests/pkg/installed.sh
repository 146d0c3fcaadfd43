#!/bin/sh
# The packages of BUILDDIR (made by `make deb` in a build configured with
# --prefix=PREFIX) install into a clean root and work from there: files in
# place, the ld.so.conf.d entry names the prefix's lib, the tools need the
# library package, NCCL's loader finds the plugin by name from the installed
# path (srd-info --check), and the installed plugin passes the ABI test
# (tests/abi/dlopen, built in BUILDDIR). Run by .ci/run; `dpkg -x` needs no
# root and touches nothing outside the scratch root.
# Usage: tests/pkg/installed.sh BUILDDIR PREFIX
set -u
build=$1 prefix=$2
fail() { echo "FAIL: $*"; exit 1; }
root=$(mktemp -d) || exit 99
trap 'rm -rf "$root"' EXIT

lib_deb=$(ls "$build"/libnccl-net-srd_*.deb 2>/dev/null | head -1)
tools_deb=$(ls "$build"/nccl-srd-tools_*.deb 2>/dev/null | head -1)
[ -n "$lib_deb" ] && [ -n "$tools_deb" ] || fail "no .deb in $build (make deb)"
for deb in "$lib_deb" "$tools_deb"; do
  dpkg-deb --info "$deb" > /dev/null || fail "$deb is not a valid package"
  dpkg -x "$deb" "$root" || fail "dpkg -x $deb"
  echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version): $(dpkg-deb -c "$deb" | grep -c -v '/$') file(s)"
done
dpkg-deb -f "$tools_deb" Depends | grep -q "libnccl-net-srd (= $(dpkg-deb -f "$lib_deb" Version))" ||
  fail "nccl-srd-tools does not depend on this libnccl-net-srd"
dpkg-deb -f "$lib_deb" Depends | grep -q libfabric && fail "libnccl-net-srd depends on a libfabric package"

lib=$root$prefix/lib
for f in "$lib/libnccl-net-srd.so" "$lib/libnccl-tuner-srd.so" "$root$prefix/bin/srd-info" "$root$prefix/bin/srd-perf" \
  "$root/usr/share/doc/libnccl-net-srd/copyright" "$root/usr/share/doc/libnccl-net-srd/changelog.gz"; do
  [ -e "$f" ] || fail "$f is not installed"
done
# The tools are on PATH: /usr/bin links to the prefix's (when it is elsewhere).
if [ "$prefix" != /usr ]; then
  for t in srd-info srd-perf; do
    [ "$(readlink "$root/usr/bin/$t")" = "$prefix/bin/$t" ] ||
      fail "/usr/bin/$t is '$(readlink "$root/usr/bin/$t")', not a link to $prefix/bin/$t"
  done
fi
[ "$(cat "$root/etc/ld.so.conf.d/nccl-srd.conf")" = "$prefix/lib" ] ||
  fail "ld.so.conf.d entry is '$(cat "$root/etc/ld.so.conf.d/nccl-srd.conf")', not $prefix/lib"

# NCCL_NET_PLUGIN=srd resolves, through the library path the entry gives, to
# the installed plugin, which names itself SRD; the installed tools run.
LD_LIBRARY_PATH=$lib NCCL_NET_PLUGIN=srd NCCL_NET=SRD "$root$prefix/bin/srd-info" --check > "$root/check.out" 2>&1 ||
  { cat "$root/check.out"; fail "the installed srd-info --check fails"; }
grep -q '^ok    NCCL_NET_PLUGIN srd loads libnccl-net-srd.so (net SRD)' "$root/check.out" ||
  { cat "$root/check.out"; fail "the installed plugin is not found by name"; }
ldd "$root$prefix/bin/srd-info" | grep -q "$build" && fail "the installed srd-info uses the build tree's libraries"

(cd "$build" && make tests/abi/dlopen > /dev/null 2>&1) || fail "cannot build tests/abi/dlopen in $build"
SRD_TEST_PLUGIN=$lib/libnccl-net-srd.so top_builddir=$build "$build/tests/abi/dlopen" > "$root/dlopen.out" 2>&1 ||
  { cat "$root/dlopen.out"; fail "the installed plugin fails the ABI test"; }
echo "PASS: packages install under $prefix and the installed plugin loads"
