#!/usr/bin/env bash
# Layers point down only: api > comm > proto > wire, sched > rail > mr, topo >
# util (tools sit above them all; the tuner, a library of its own over topo
# and util, sits below the tools, which parse its rule files). A module may use modules of lower layers;
# one of the same layer (wire and sched, mr and topo) or a higher one is an
# upward or cyclic dependency and fails the check. Two views are checked:
# the srd/ headers every source and header includes, and the functions and
# data every object file of src/ takes from another folder (nm).
set -u
src=${top_srcdir:-.}
build=${top_builddir:-.}

rank() { # module -> layer, higher calls lower
  case $1 in
  tools) echo 8 ;; api | tuner) echo 7 ;; comm) echo 6 ;; proto) echo 5 ;; wire | sched) echo 4 ;;
  rail) echo 3 ;; mr | topo) echo 2 ;; util) echo 1 ;; *) echo 0 ;;
  esac
}

header_module() { # srd/<name>.h -> the module it belongs to
  case $1 in
  net | comm) echo comm ;; rma) echo proto ;; log | param | sys | err | cuda | stats) echo util ;; gdr) echo topo ;; *) echo "$1" ;;
  esac
}

bad=0
check() { # from-module to-module what
  [ "$1" = "$2" ] && return
  local a b
  a=$(rank "$1") b=$(rank "$2")
  if [ "$a" = 0 ] || [ "$b" = 0 ]; then
    echo "layers: $3: unknown module ($1 -> $2): add it to tests/arch/layers.sh"
    bad=1
  elif [ "$b" -ge "$a" ]; then
    echo "layers: $3: $1 (layer $a) depends on $2 (layer $b): upward or sideways"
    bad=1
  fi
}

# Includes.
for f in "$src"/src/*/*.[ch] "$src"/include/srd/*.h; do
  case $f in
  */include/srd/tuner.h) continue ;; # the tuner is a library of its own
  */include/srd/*) from=$(header_module "$(basename "$f" .h)") ;;
  *) from=$(basename "$(dirname "$f")") ;;
  esac
  for h in $(sed -n 's|^#include "srd/\([a-z_]*\)\.h".*|\1|p' "$f"); do
    check "$from" "$(header_module "$h")" "${f#"$src"/} includes srd/$h.h"
  done
done

# Calls and data across folders, from the objects of sources that exist.
objs=()
for o in "$build"/src/*/.libs/*.o "$build"/src/*/*.o; do
  [ -e "$o" ] || continue
  case $o in
  */.libs/*) dir=$(basename "$(dirname "$(dirname "$o")")") ;;
  *) dir=$(basename "$(dirname "$o")") ;;
  esac
  name=$(basename "$o" .o)
  [ -e "$src/src/$dir/${name##*-}.c" ] && objs+=("$dir:$o")
done
if [ ${#objs[@]} -lt 10 ]; then
  echo "layers: found ${#objs[@]} object files under $build/src: build first"
  exit 1
fi
declare -A owner
for e in "${objs[@]}"; do
  for s in $(nm -g --defined-only "${e#*:}" | awk '{print $3}'); do owner[$s]=${e%%:*}; done
done
for e in "${objs[@]}"; do
  for s in $(nm -u "${e#*:}" | awk '{print $2}'); do
    [ -n "${owner[$s]:-}" ] && check "${e%%:*}" "${owner[$s]}" "$(basename "${e#*:}") uses $s"
  done
done
[ $bad = 0 ] && echo "layers: ${#objs[@]} objects and their includes point down"
exit $bad
