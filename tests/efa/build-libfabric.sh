#!/bin/sh
# Builds libfabric with its efa provider over the emulated EFA device.
#   tests/efa/build-libfabric.sh LIBFABRIC_TARBALL PREFIX
# 1. fetches Debian trixie's libibverbs-dev (rdma-core 56 headers: RDMA
#    write, unsolicited write receive, efadv_query_mr) with apt-get download
#    and private package lists, unpacks it with dpkg-deb -x under
#    PREFIX/rdma (nothing is installed on the system);
# 2. builds the emulator (tests/efa/emu) into PREFIX/emu/lib;
# 3. builds the libfabric release (efa, tcp, shm, rxm; shared only: libtool
#    would compile every file twice) into PREFIX, linked
#    against the emulated libraries (run path PREFIX/emu/lib; LIBS names
#    them so that its programs, fi_info among them, link them rather than a
#    system rdma-core that libfabric.so's dependencies would find), so that
#    only programs pointed at PREFIX/lib load it.
# Then: ../configure --with-efa-emulator=PREFIX (see CONTRIBUTING.md).
set -eu
[ $# -eq 2 ] || { echo "usage: $0 LIBFABRIC_TARBALL PREFIX" >&2; exit 2; }
tar=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
mkdir -p "$2"
prefix=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-2}
work=$prefix/build
rm -rf "$work" && mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"

echo "build-libfabric: rdma-core 56 headers (Debian trixie libibverbs-dev)"
echo 'deb http://deb.debian.org/debian trixie main' >"$work/apt/sources.list"
apt_opts="-o Dir::Etc::sourcelist=$work/apt/sources.list -o Dir::Etc::sourceparts=-
  -o Dir::State::Lists=$work/apt/lists -o Dir::Cache=$work/apt/cache
  -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
# shellcheck disable=SC2086
apt-get -q $apt_opts update >"$work/apt.log" 2>&1 ||
  { tail -20 "$work/apt.log"; echo "build-libfabric: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
(cd "$work" && apt-get -q $apt_opts download libibverbs-dev=56.1-1 >>"$work/apt.log" 2>&1) ||
  { tail -20 "$work/apt.log"; echo "build-libfabric: libibverbs-dev 56.1-1 download failed" >&2; exit 1; }
rm -rf "$prefix/rdma"
dpkg-deb -x "$work"/libibverbs-dev_56.1-1_*.deb "$prefix/rdma"
inc=$prefix/rdma/usr/include

echo "build-libfabric: emulated device into $prefix/emu/lib"
"$here/emu/build.sh" "$inc" "$prefix/emu/lib"
mkdir -p "$prefix/emu/bin"
cp "$here/emu/sysfs.sh" "$prefix/emu/bin/"

echo "build-libfabric: $(basename "$tar") into $prefix (log: $work/libfabric.log)"
tar xzf "$tar" -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'libfabric-*' | head -1)
emu=$prefix/emu/lib
(cd "$src" && ./autogen.sh &&
  ./configure --prefix="$prefix" CPPFLAGS="-I$inc" \
    LDFLAGS="-L$emu -Wl,-rpath,$emu" LIBS="-lefa -libverbs" \
    --enable-only --enable-efa --enable-tcp --enable-shm --enable-rxm --disable-static &&
  make -j"$jobs" install) >"$work/libfabric.log" 2>&1 ||
  { tail -40 "$work/libfabric.log"; echo "build-libfabric: libfabric build failed" >&2; exit 1; }
# The efa provider must be built in and must take the emulated libraries.
ldd "$prefix/lib/libfabric.so.1" | grep -q "$emu/libefa.so.1" ||
  { echo "build-libfabric: $prefix/lib/libfabric.so.1 does not load $emu/libefa.so.1" >&2; exit 1; }
rm -rf "$src"
echo "build-libfabric: done: $prefix"
