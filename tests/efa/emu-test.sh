#!/bin/sh
# The emulated EFA device's own tests (make check under
# --with-efa-emulator=PREFIX): emu_test's cases on every profile, the knobs,
# and fi_info -p efa over each profile listing the fabrics fi_efa(7) gives.
#   EFA_EMU_PREFIX=PREFIX tests/efa/emu-test.sh [PROFILE...]
set -u
prefix=${EFA_EMU_PREFIX:?EFA_EMU_PREFIX names what tests/efa/build-libfabric.sh built}
bin=${top_builddir:-.}/tests/efa/emu/emu_test
# make check's copy of the emulator (rebuilt from its sources), else PREFIX's.
emu_lib=${top_builddir:-.}/tests/efa/emu/lib
[ -e "$emu_lib/libibverbs.so.1" ] || emu_lib=$prefix/emu/lib
dir=$(mktemp -d "${TMPDIR:-/tmp}/srd-efa-emu.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$prefix/emu/bin/sysfs.sh" "$dir/sys" 4
SYSFS_PATH=$dir/sys
export SYSFS_PATH
fails=0

run() { # profile, case, [VAR=value...]
  p=$1 c=$2
  shift 2
  env SRD_EFA_EMU_PROFILE="$p" "$@" "$bin" "$c" >"$dir/out" 2>&1
  rc=$?
  case $rc in
    0) echo "PASS: $p $c $*" ;;
    77) echo "SKIP: $p $c $* (not on this profile)" ;;
    *) echo "FAIL: $p $c $* (exit $rc)"; sed 's/^/  /' "$dir/out"; fails=$((fails + 1)) ;;
  esac
}

# What fi_info -p efa lists per device (fi_efa(7); efa_prov_info.c,
# efa_user_info.c): without hints efa-direct's and efa's RDM entries and
# efa's DGRAM entry on every profile; asked for FI_RMA, efa-direct only where
# the device both reads and writes (fi_info's hints take FI_RX_CQ_DATA, so
# unsolicited write receive is not needed: the plugin's hints, which do not,
# are checked by efa-suite.sh).
fabrics() { # profile, fi_info arguments...
  p=$1
  shift
  SRD_EFA_EMU_PROFILE=$p LD_LIBRARY_PATH=$emu_lib:$prefix/lib "$prefix/bin/fi_info" -p efa "$@" 2>&1 |
    awk '/fabric:/ { f = $2 } /domain:/ { d = $2 } /type:/ && $2 ~ /FI_EP_/ { print d, f, $2 }' |
    sort -u | tr '\n' ';'
}

expect_fabrics() { # profile, expected, fi_info arguments...
  p=$1 want=$2
  shift 2
  got=$(fabrics "$p" "$@")
  if [ "$got" = "$want" ]; then
    echo "PASS: $p fi_info -p efa $*"
  else
    echo "FAIL: $p fi_info -p efa $*: got '$got', want '$want'"
    fails=$((fails + 1))
  fi
}

sorted() { tr ';' '\n' | sort -u | tr '\n' ';'; }

devs() { # fabric, type, domain suffix: the four devices' entries
  for i in 0 1 2 3; do printf 'rdmap%s-%s %s %s;' "$i" "$3" "$1" "$2"; done
}

profiles=${*:-gen1 p4d p5 p5en}
for p in $profiles; do
  for c in devices send rnr0 rnr3 write write-imm unsolicited read vanish; do
    run "$p" "$c"
  done
done
for p in $profiles; do
  all="$(devs efa FI_EP_RDM rdm)$(devs efa FI_EP_DGRAM dgrm)"
  rma="$(devs efa FI_EP_RDM rdm)"
  case $p in
    gen1|p4d) direct_rma= ;;
    *) direct_rma="$(devs efa-direct FI_EP_RDM rdm)" ;;
  esac
  expect_fabrics "$p" "$(printf '%s%s' "$all" "$(devs efa-direct FI_EP_RDM rdm)" | sorted)"
  expect_fabrics "$p" "$(printf '%s%s' "$rma" "$direct_rma" | sorted)" -c 'FI_MSG|FI_RMA'
done
# The knobs, on the profile that has everything.
run p5en send SRD_EFA_EMU_DROP_PM=300
run p5en send SRD_EFA_EMU_RNR_PM=300
run p5en send SRD_EFA_EMU_DELAY_US=20000
run p5en dark SRD_EFA_EMU_VANISH_AFTER=1
[ "$fails" -eq 0 ] || { echo "emu-test: $fails failed"; exit 1; }
