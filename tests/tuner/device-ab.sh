#!/bin/bash
# On the GPU device machine: the paired A/B of tuner_ab.c (our tuner's choice
# against NCCL's, both timed in the same processes, plus an NCCL-vs-NCCL
# control), and which algorithm each side got per size.
#
#   bash tests/tuner/device-ab.sh      # from the root of the carried checkout
#
# Needs .device/install (make install of this tree) and .device/gpu-env.sh.
# Knobs: RANKS="2 4 8" COLLS="allreduce allgather reducescatter" MAX_BYTES=1G
#        RUN_TIMEOUT=300 (seconds per run) ROUNDS= (tuner_ab -n; default by size)
#        BUDGET_S= (no new run starts after this many seconds; skipped ones are named)
# Writes to $OUT (or ./tuner-ab-out): ab.md (the tables), ab-logs.txt (every
# run's output and NCCL's tuning lines of rank 0).
set -u
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-./tuner-ab-out}
mkdir -p "$out"
work=$(mktemp -d /tmp/tuner-ab.XXXXXX)

if ! declare -f ranks >/dev/null; then
  # shellcheck disable=SC1091
  . ./.device/gpu-env.sh
fi
RANKS=${RANKS:-"2 4 8"}
COLLS=${COLLS:-"allreduce allgather reducescatter"}
MAX_BYTES=${MAX_BYTES:-1G}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
lib=$PWD/.device/install/lib
cuda=${CUDA_HOME:-/usr/local/cuda}
logs=$out/ab-logs.txt
: >"$logs"

bin=$work/tuner_ab
gcc -std=gnu11 -O2 -Wall -Wextra -o "$bin" tests/tuner/tuner_ab.c -I"$cuda/include" -I"$SRD_NCCL_HOME/include" \
  -L"$cuda/lib64" -lcudart -L"$SRD_NCCL_HOME/lib" -lnccl -Wl,-rpath,"$SRD_NCCL_HOME/lib" >>"$logs" 2>&1 ||
  { echo "tuner_ab did not build (see ab-logs.txt)"; exit 1; }

export FI_PROVIDER=tcp NCCL_NET_PLUGIN=$lib/libnccl-net-srd.so NCCL_TUNER_PLUGIN=$lib/libnccl-tuner-srd.so
unset NCCL_ALGO NCCL_PROTO NCCL_SRD_TUNER_CONFIG NCCL_NET

# one COLL N [--decisions]: output in $work/COLL-N[.dec], NCCL's debug files of a decisions run in $work/dbg-COLL-N
one() {
  local coll=$1 n=$2 mode=${3:-} tag=$1-$2 args=()
  [ -n "${ROUNDS:-}" ] && args+=(-n "$ROUNDS")
  if [ -n "$mode" ]; then
    tag=$tag.dec
    mkdir -p "$work/dbg-$coll-$n"
    args=(--decisions)
    export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_DEBUG_FILE=$work/dbg-$coll-$n/nccl.%p.log
  else
    export NCCL_DEBUG=WARN
    unset NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
  fi
  if [ -n "${BUDGET_S:-}" ] && [ "$SECONDS" -ge "$BUDGET_S" ]; then
    echo "## $tag: skipped (BUDGET_S=$BUDGET_S reached)" | tee -a "$logs" >"$work/$tag"
    return
  fi
  local t0=$SECONDS
  SRD_AB_IDS=$work/ids-$tag MASTER_PORT=$((29600 + n)) timeout "$RUN_TIMEOUT" \
    bash -c "$(declare -f ranks); ranks $n $bin -c $coll -b 8 -e $MAX_BYTES ${args[*]}" >"$work/$tag" 2>&1
  local rc=$?
  { echo "## $tag: exit $rc, $((SECONDS - t0)) s"; cat "$work/$tag"; } >>"$logs"
}

# NCCL's own line per collective (rank 0, in order) zipped with what tuner_ab ran.
decisions() {
  local coll=$1 n=$2 f
  f=$(grep -l "Bytes -> Algo" "$work/dbg-$coll-$n"/nccl.* 2>/dev/null | head -1)
  [ -n "$f" ] || return 0
  { echo "## NCCL tuning lines of $coll-$n"; grep -h "NET/SRD tuner\|Bytes -> Algo" "$f"; } >>"$logs"
  paste -d' ' <(grep '^decision ' "$work/$coll-$n.dec" | awk '{print $3, $4}') \
    <(grep -o 'Algo [A-Za-z]* proto [A-Za-z0-9]*' "$f" | awk '{print $2 "/" $4}')
}

for coll in $COLLS; do
  for n in $RANKS; do
    one "$coll" "$n" --decisions
    one "$coll" "$n"
  done
done

{
  echo "# Tuner A/B in the same processes ($(date -u +%F))"
  echo
  echo "tuner: our tuner decides; nccl: NCCL decides (NCCL_ALGO lists every algorithm, our tuner stands back);"
  echo "nccl2: NCCL again (control). Times are medians of the rounds; ratios are medians of per-round ratios."
  for coll in $COLLS; do
    for n in $RANKS; do
      echo
      echo "### $coll, $n ranks"
      echo
      decisions "$coll" "$n" >"$work/picks"
      awk -v picks="$work/picks" '
        BEGIN { while ((getline l < picks) > 0) { split(l, f, " "); pick[f[2], f[1]] = f[3] } }
        /^#/ || NF < 11 || $1 ~ /^rank/ { next }
        $3 ~ /^[0-9]+$/ {
          s = $3; tp = pick["tuner", s]; np = pick["nccl", s]
          if (tp == "") tp = "?"; if (np == "") np = "?"
          if (!hdr++) {
            print "| size (B) | NCCL picks | tuner picks | NCCL (us) | tuner (us) | tuner/NCCL | control | verdict | wrong |"
            print "|---:|---|---|---:|---:|---:|---:|---|---:|"
          }
          v = "same choice"
          if (tp != np || tp == "?") v = $9 < 0.95 ? "faster" : $9 > 1.05 ? "SLOWER" : "even"
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s, np, tp, $7, $6, $9, $10, v, $11
        }
        END { if (!hdr) print "(no results: see ab-logs.txt)" }' "$work/$coll-$n"
    done
  done
} >"$out/ab.md"
cat "$out/ab.md"
rm -rf "$work"
