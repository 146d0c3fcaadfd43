#!/bin/sh
# make deb: two Debian packages from this build tree, installed under the
# configured prefix (configure --prefix=/opt/nccl-srd):
#   libnccl-net-srd   the NCCL net and tuner plugins, and an ld.so.conf.d
#                     entry for the prefix's lib so NCCL finds them by name
#   nccl-srd-tools    srd-info and srd-perf, with links in /usr/bin when the
#                     prefix's bin is elsewhere, so that they are on PATH
# Usage: pkg/deb.sh BUILDDIR SRCDIR VERSION PREFIX LIBDIR BINDIR
# Writes libnccl-net-srd_VERSION_ARCH.deb and nccl-srd-tools_VERSION_ARCH.deb
# into BUILDDIR. libfabric is not a dependency: on AWS it is the EFA
# installer's (/opt/amazon/efa, no Debian package), elsewhere Debian's.
set -eu
build=$1 src=$2 version=$3 prefix=$4 libdir=$5 bindir=$6
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make -C "$build" install DESTDIR="$stage/root" >/dev/null

# The Debian packages of the libraries the files link directly (their
# NEEDED entries; libfabric left out).
deps() {
  for f in "$@"; do
    for name in $(objdump -p "$f" | awk '$1 == "NEEDED" {print $2}'); do
      case $name in libfabric.so*) continue ;; esac
      path=$(ldd "$f" | awk -v n="$name" '$1 == n && $3 ~ /^\// {print $3}')
      [ -n "$path" ] && { dpkg -S "$(readlink -f "$path")" 2>/dev/null || dpkg -S "$path" 2>/dev/null; }
    done
  done | sed 's/:.*//' | sort -u | paste -sd, - | sed 's/,/, /g'
}

# package NAME DESCRIPTION DEPENDS FILE...: FILE paths are under the stage root.
package() {
  name=$1 desc=$2 depends=$3
  shift 3
  dir=$stage/$name
  mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$name"
  for f in "$@"; do
    mkdir -p "$dir$(dirname "$f")"
    cp -a "$stage/root$f" "$dir$f"
  done
  cp "$src/LICENSE" "$dir/usr/share/doc/$name/copyright"
  gzip -9n < "$src/CHANGELOG.md" > "$dir/usr/share/doc/$name/changelog.gz"
  size=$(du -sk "$dir" | cut -f1)
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: nccl-srd developers <nccl-srd@invalid>"
    echo "Installed-Size: $size"
    [ -z "$depends" ] || echo "Depends: $depends"
    echo "Section: libs"
    echo "Priority: optional"
    echo "Description: $desc"
  } > "$dir/DEBIAN/control"
  dpkg-deb --root-owner-group --build -Zxz "$dir" "$build/${name}_${version}_${arch}.deb" >/dev/null
  echo "$build/${name}_${version}_${arch}.deb"
}

net=$libdir/libnccl-net-srd.so tuner=$libdir/libnccl-tuner-srd.so
mkdir -p "$stage/root/etc/ld.so.conf.d"
echo "$libdir" > "$stage/root/etc/ld.so.conf.d/nccl-srd.conf"
# ldconfig runs after install and removal so NCCL finds libnccl-net-srd.so by name.
lib_pkg=$stage/libnccl-net-srd
mkdir -p "$lib_pkg/DEBIAN"
printf '#!/bin/sh\nset -e\n[ "$1" = configure ] && ldconfig\nexit 0\n' > "$lib_pkg/DEBIAN/postinst"
printf '#!/bin/sh\nset -e\n[ "$1" = remove ] && ldconfig\nexit 0\n' > "$lib_pkg/DEBIAN/postrm"
chmod 755 "$lib_pkg/DEBIAN/postinst" "$lib_pkg/DEBIAN/postrm"
package libnccl-net-srd "NCCL network plugin over libfabric RDM (AWS EFA/SRD, tcp, shm)
 libnccl-net-srd.so (ncclNet v8..v12, NCCL 2.20..2.30) and libnccl-tuner-srd.so,
 installed in $libdir, with $libdir in ld.so.conf.d. Needs libfabric 1.17 or
 newer at run time; on AWS build against the EFA installer's libfabric." \
  "$(deps "$stage/root$net" "$stage/root$tuner")" "$net" "$tuner" /etc/ld.so.conf.d/nccl-srd.conf
# /opt/nccl-srd/bin is on nobody's PATH: after dpkg -i, a bare srd-info
# must be found, as the docs call it.
tools="$bindir/srd-info $bindir/srd-perf"
if [ "$bindir" != /usr/bin ]; then
  mkdir -p "$stage/root/usr/bin"
  for t in srd-info srd-perf; do
    ln -s "$bindir/$t" "$stage/root/usr/bin/$t"
    tools="$tools /usr/bin/$t"
  done
fi
# shellcheck disable=SC2086
package nccl-srd-tools "srd-info (diagnostics, --check) and srd-perf (benchmark) for nccl-srd
 srd-info shows what the SRD plugin would run on and checks a node
 (srd-info --check, --expect efa, --expect gdr); srd-perf measures the plugin
 as NCCL drives it against raw libfabric." \
  "libnccl-net-srd (= $version)$(d=$(deps "$stage/root$bindir/srd-info" "$stage/root$bindir/srd-perf"); [ -z "$d" ] || echo ", $d")" \
  $tools
