#!/bin/sh
# Two "hosts" on one machine: network namespaces srd-a and srd-b joined by N
# veth pairs (vaK in srd-a, vbK in srd-b, 10.77.K.1/24 <-> 10.77.K.2/24), so
# each side has N tcp interfaces, hence N rails.
#
#   netns.sh up N          create (replacing any previous setup)
#   netns.sh down          remove both namespaces (and with them the veths)
#   netns.sh cut K         take vaK down inside srd-a (a rail dies)
#   netns.sh mend K        bring vaK back up
#   netns.sh run a|b CMD   run CMD inside srd-a or srd-b
#   netns.sh check         exit 0 when this machine can do the above
#
# SRD_NETNS=name changes the namespace names to name-a and name-b, so tests
# that run at the same time (make -j check) do not tear down each other's.
#
# Exits 77 (automake's "skipped") with a message on stderr when it cannot
# run here: not root, no `ip`, or namespaces not permitted.
set -u

NS_A=${SRD_NETNS:-srd}-a
NS_B=${SRD_NETNS:-srd}-b
SKIP=77

skip() {
  echo "netns.sh: SKIP: $*" >&2
  exit $SKIP
}

die() {
  echo "netns.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '6,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Probe with a throwaway namespace, so a failure says "cannot here" rather
# than leaving half a setup behind.
can_run() {
  [ "$(id -u)" = 0 ] || skip "needs root (uid $(id -u))"
  command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"
  probe=srd-probe-$$
  ip netns add "$probe" 2>/dev/null || skip "network namespaces are not permitted here (ip netns add failed)"
  if ! ip netns exec "$probe" ip link set lo up 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null
    skip "cannot run commands inside a network namespace (ip netns exec failed)"
  fi
  # Inside the probe namespace: tests that check at the same time must not
  # collide on the pair's names (one saw the other's pair and skipped).
  if ! ip -n "$probe" link add probe-a type veth peer name probe-b 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null
    skip "veth interfaces are not available (ip link add type veth failed)"
  fi
  ip netns del "$probe" 2>/dev/null
  return 0
}

ns_exists() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"
}

is_count() {
  case "$1" in '' | *[!0-9]*) return 1 ;; esac
  return 0
}

down() {
  for ns in $NS_A $NS_B; do
    if ns_exists "$ns"; then
      ip netns del "$ns" || die "cannot delete namespace $ns"
    fi
  done
}

up() {
  n=$1
  is_count "$n" && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "up: N must be a number from 1 to 32, got '$n'"
  down
  ip netns add $NS_A || die "cannot create namespace $NS_A"
  ip netns add $NS_B || die "cannot create namespace $NS_B"
  ip -n $NS_A link set lo up || die "cannot bring lo up in $NS_A"
  ip -n $NS_B link set lo up || die "cannot bring lo up in $NS_B"
  k=0
  while [ "$k" -lt "$n" ]; do
    ip link add "va$k" netns $NS_A type veth peer name "vb$k" netns $NS_B || die "cannot create veth pair va$k/vb$k"
    ip -n $NS_A addr add "10.77.$k.1/24" dev "va$k" || die "cannot address va$k"
    ip -n $NS_B addr add "10.77.$k.2/24" dev "vb$k" || die "cannot address vb$k"
    ip -n $NS_A link set "va$k" up || die "cannot bring va$k up"
    ip -n $NS_B link set "vb$k" up || die "cannot bring vb$k up"
    k=$((k + 1))
  done
  wait_up "$n"
}

# A veth pair reports its carrier a moment after "link set up"; a test that
# starts earlier sees a rail without a link.
wait_up() {
  tries=0
  while [ "$tries" -lt 100 ]; do
    k=0 down_links=0
    while [ "$k" -lt "$1" ]; do
      ip -n $NS_A link show "va$k" | grep -q "state UP" || down_links=1
      ip -n $NS_B link show "vb$k" | grep -q "state UP" || down_links=1
      k=$((k + 1))
    done
    [ "$down_links" = 0 ] && return 0
    sleep 0.05
    tries=$((tries + 1))
  done
  die "links did not come up within 5 s"
}

set_link() {
  k=$1
  state=$2
  is_count "$k" || die "$3: K must be a number, got '$k'"
  ip -n $NS_A link show "va$k" >/dev/null 2>&1 || die "$3: no interface va$k in $NS_A (run 'up' first)"
  ip -n $NS_A link set "va$k" "$state" || die "$3: cannot set va$k $state"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  check)
    can_run
    ;;
  up)
    [ $# -eq 1 ] || usage
    can_run
    up "$1"
    ;;
  down)
    [ $# -eq 0 ] || usage
    can_run
    down
    ;;
  cut)
    [ $# -eq 1 ] || usage
    set_link "$1" down cut
    ;;
  mend)
    [ $# -eq 1 ] || usage
    set_link "$1" up mend
    ;;
  run)
    [ $# -ge 2 ] || usage
    case "$1" in
      a) ns=$NS_A ;;
      b) ns=$NS_B ;;
      *) die "run: the side is a or b, got '$1'" ;;
    esac
    shift
    ns_exists "$ns" || die "run: namespace $ns does not exist (run 'up' first)"
    exec ip netns exec "$ns" "$@"
    ;;
  *)
    usage
    ;;
esac
