#!/bin/sh
# The functional suite over libfabric's efa provider on the emulated EFA
# device (make check under --with-efa-emulator=PREFIX): 2 processes, 4
# devices each, every profile on the efa fabric and the p5en-like one on
# efa-direct.
#   EFA_EMU_PREFIX=PREFIX tests/efa/efa-suite.sh [PROFILE[:FABRIC]...] [-- TEST...]
# Runs from the build directory (top_builddir).
set -u
prefix=${EFA_EMU_PREFIX:?EFA_EMU_PREFIX names what tests/efa/build-libfabric.sh built}
top_builddir=${top_builddir:-.}
export top_builddir
runs= tests=
while [ $# -gt 0 ]; do
  [ "$1" = -- ] && { shift; tests=$*; break; }
  runs="$runs $1"
  shift
done
# The default: the whole list on the p5-like profile and on the p5en-like
# one's efa-direct, connect, sizes, close and badinput on the other
# profiles. Known to fail, a finding (CONTRIBUTING.md, "The emulated EFA
# device"): p4d peerkill (kill-sender). Name it to run it:
# efa-suite.sh p4d:efa -- peerkill
all="connect sizes groups truncate mixed inflight close peerkill slowpeer allreduce badinput paths manycomms rma"
default=
if [ -z "$runs" ] && [ -z "$tests" ]; then
  runs="p5:efa p5en:efa-direct"
  default="p4d:efa p5en:efa gen1:efa"
fi
runs=${runs:-p5:efa}
tests=${tests:-$all}
dir=$(mktemp -d "${TMPDIR:-/tmp}/srd-efa-suite.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$prefix/emu/bin/sysfs.sh" "$dir/sys" 4
SYSFS_PATH=$dir/sys
# make check's copy of the emulator (rebuilt from its sources), else PREFIX's.
emu_lib=$top_builddir/tests/efa/emu/lib
[ -e "$emu_lib/libibverbs.so.1" ] || emu_lib=$prefix/emu/lib
LD_LIBRARY_PATH=$emu_lib:$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
SRD_TEST_PROVIDERS=efa
export SYSFS_PATH LD_LIBRARY_PATH SRD_TEST_PROVIDERS
fails=0

for run in $runs $default; do
  profile=${run%%:*} fabric=${run#*:}
  list=$tests
  case " $default " in *" $run "*) list="connect sizes close badinput" ;; esac
  for t in $list; do
    log=$dir/$profile-$fabric-$t.log
    SRD_EFA_EMU_PROFILE=$profile NCCL_SRD_EFA_FABRIC=$fabric \
      timeout 900 "$top_builddir/tests/functional/$t" efa >"$log" 2>&1
    rc=$?
    case $rc in
      0) echo "PASS: $profile $fabric $t" ;;
      77) echo "SKIP: $profile $fabric $t"; grep -i 'does not apply' "$log" | head -3 ;;
      *) echo "FAIL: $profile $fabric $t (exit $rc)"; tail -25 "$log"; fails=$((fails + 1)) ;;
    esac
  done
done
[ "$fails" -eq 0 ] || { echo "efa-suite: $fails failed"; exit 1; }
