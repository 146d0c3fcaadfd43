#!/usr/bin/env bash
# The test suite, from the source tree after the quick start's first command:
#
#   bash tests/suite.sh
#
# 1. `make check` of the quick-start build (build/, against the libfabric that
#    pkg-config finds: Debian's 1.17), configured here if it is not yet;
# 2. where a libfabric 2.x is found, the same suite built against it, in
#    build-lf2/: an installed one (SRD_LIBFABRIC2=PREFIX, or the EFA
#    installer's /opt/amazon/efa), else a release tarball built once into
#    build-lf2/libfabric (SRD_LIBFABRIC_TAR=FILE, or the 2.6.0 snapshot in
#    ../shared/third-party beside this checkout or the one it was cloned from).
# It ends by saying which libfabrics it ran. Tests run side by side
# (make -j, SRD_SUITE_JOBS, default 2 per core); each test isolates its own
# ports, shm names and namespaces. Root adds the multi-rail tests (network
# namespaces); without root they skip, saying so.
#
# SRD_SUITE_BUILD=DIR     the 1.17 build directory (default build)
# SRD_SUITE_BUILD2=DIR    the 2.x build directory (default build-lf2)
# SRD_SUITE_CONFIGURE=..  configure arguments of builds made here
#                         (default --with-gtest=yes)
# SRD_SUITE_CONFIGURE2=.. those of the 2.x build (default: SRD_SUITE_CONFIGURE)
# SRD_SUITE_ONLY=1.17|2   run one of the two
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
t0=$(date +%s)
say() { echo "suite: $* ($(( $(date +%s) - t0 )) s)"; }
jobs=${SRD_SUITE_JOBS:-$(( 2 * $(nproc) ))}
build=${SRD_SUITE_BUILD:-$top/build}
case $build in /*) ;; *) build=$top/$build ;; esac
read -r -a conf1 <<< "${SRD_SUITE_CONFIGURE:---with-gtest=yes}"
read -r -a conf2 <<< "${SRD_SUITE_CONFIGURE2:-${SRD_SUITE_CONFIGURE:---with-gtest=yes}}"
only=${SRD_SUITE_ONLY:-}
lf2_version=2.6.0

[ -x "$top/configure" ] || ./autogen.sh >/dev/null

configure_in() { # dir, 1|2 (which arguments), env assignments for configure...
  local dir=$1 which=$2; shift 2
  local -n conf=conf$which
  mkdir -p "$dir"
  [ -f "$dir/config.status" ] && return 0
  (cd "$dir" && env "$@" "$top/configure" "${conf[@]}" >configure.log 2>&1) ||
    { tail -30 "$dir/configure.log"; echo "suite: configure failed in $dir" >&2; exit 1; }
}

# Each failed test's log: its failed cases, its warnings, its tail.
show_failed() { # dir
  find "$1/tests" -name '*.log' -newer "$1/config.status" -exec grep -l -E '^(FAIL|ERROR)' {} + 2>/dev/null |
    sh "$top/tests/show-failed.sh"
}

check_in() { # dir, label, env assignments for make...
  local dir=$1 label=$2; shift 2
  say "$label: build in $dir"
  (cd "$dir" && env "$@" make -j"$(nproc)" >make.log 2>&1) ||
    { grep -E -m 20 -B2 -A8 'error|Error' "$dir/make.log"; echo "suite: $label: build failed" >&2; exit 1; }
  say "$label: make check (-j$jobs)"
  if ! (cd "$dir" && env "$@" make -j"$jobs" check >check.log 2>&1); then
    grep -E '^(PASS|FAIL|SKIP|XFAIL|ERROR|# )' "$dir/check.log" | grep -v '^PASS' || true
    show_failed "$dir"
    echo "suite: $label: make check failed ($dir/check.log)" >&2
    exit 1
  fi
  grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR)' "$dir/check.log" | tr '\n' ' '; echo
  grep -E '^SKIP' "$dir/check.log" || true
  ran+=("$label")
}

ran=()
if [ "$only" != 2 ]; then
  configure_in "$build" 1
  v=$(pkg-config --modversion libfabric 2>/dev/null || echo '?')
  case " ${conf1[*]} " in *" --enable-sanitizers "*) v="$v, AddressSanitizer + UBSan" ;; esac
  check_in "$build" "libfabric $v (pkg-config)"
fi

# A libfabric 2.x: installed, or built once from a release tarball.
lf2=${SRD_LIBFABRIC2:-}
if [ -z "$lf2" ] && [ -r /opt/amazon/efa/lib/pkgconfig/libfabric.pc ] &&
   [ "$(PKG_CONFIG_PATH=/opt/amazon/efa/lib/pkgconfig pkg-config --modversion libfabric | cut -d. -f1)" -ge 2 ]; then
  lf2=/opt/amazon/efa
fi
lf2_build=${SRD_SUITE_BUILD2:-$top/build-lf2}
case $lf2_build in /*) ;; *) lf2_build=$top/$lf2_build ;; esac
if [ -z "$lf2" ] && [ "$only" != 1.17 ]; then
  rel=shared/third-party/libfabric-$lf2_version.tar.gz
  tar=${SRD_LIBFABRIC_TAR:-$top/../$rel}
  origin=$(git -C "$top" config --get remote.origin.url 2>/dev/null || true)
  if [ -z "${SRD_LIBFABRIC_TAR:-}" ] && [ ! -r "$tar" ] && [ -d "$origin" ] && [ -r "$origin/../$rel" ]; then
    tar=$(cd "$origin/.." && pwd)/$rel
  fi
  if [ -r "$tar" ]; then
    lf2=$lf2_build/libfabric
    if [ ! -r "$lf2/lib/pkgconfig/libfabric.pc" ]; then
      say "libfabric from $tar into $lf2 (tcp, shm)"
      src=$lf2_build/libfabric-src
      rm -rf "$src" && mkdir -p "$src"
      tar xzf "$tar" -C "$src" --strip-components=1
      # A git snapshot has no configure yet; a release tarball has.
      (cd "$src" && { [ -x configure ] || ./autogen.sh >"$lf2_build/libfabric-build.log" 2>&1; } &&
       ./configure --prefix="$lf2" --enable-only --enable-tcp --enable-shm --enable-rxm \
         --disable-static >>"$lf2_build/libfabric-build.log" 2>&1 &&
       make -j"$(nproc)" install >>"$lf2_build/libfabric-build.log" 2>&1) ||
        { tail -40 "$lf2_build/libfabric-build.log"; echo "suite: libfabric build failed" >&2; exit 1; }
      rm -rf "$src"
    fi
  fi
fi
if [ "$only" != 1.17 ]; then
  if [ -n "$lf2" ]; then
    pc=$lf2/lib/pkgconfig
    v=$(PKG_CONFIG_PATH=$pc pkg-config --modversion libfabric)
    configure_in "$lf2_build" 2 PKG_CONFIG_PATH="$pc"
    check_in "$lf2_build" "libfabric $v ($lf2)" LD_LIBRARY_PATH="$lf2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  elif [ "$only" = 2 ]; then
    echo "suite: no libfabric 2.x found (SRD_LIBFABRIC2=PREFIX or SRD_LIBFABRIC_TAR=FILE)" >&2; exit 1
  else
    say "no libfabric 2.x found (SRD_LIBFABRIC2=PREFIX or SRD_LIBFABRIC_TAR=FILE adds one): not run"
  fi
fi
say "passed: $(IFS=';'; echo "${ran[*]}" | sed 's/;/; /g')"
