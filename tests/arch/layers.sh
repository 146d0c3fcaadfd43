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

# Module -> layer (higher calls lower); srd/<name>.h -> the module it
# belongs to where the names differ. Lookups, not subshells: the check runs
# in every make check, beside the other tests.
declare -A rank=([tools]=8 [api]=7 [tuner]=7 [comm]=6 [proto]=5 [wire]=4 [sched]=4 [rail]=3 [mr]=2 [topo]=2 [util]=1)
declare -A header_module=([net]=comm [comm]=comm [rma]=proto [log]=util [param]=util [sys]=util [err]=util
  [cuda]=util [stats]=util [gdr]=topo)

bad=0
check() { # from-module to-module what
  [ "$1" = "$2" ] && return
  local a b
  a=${rank[$1]:-0} b=${rank[$2]:-0}
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
  */include/srd/*) b=${f##*/} b=${b%.h} from=${header_module[$b]:-$b} ;;
  *) d=${f%/*} from=${d##*/} ;;
  esac
  for h in $(sed -n 's|^#include "srd/\([a-z_]*\)\.h".*|\1|p' "$f"); do
    check "$from" "${header_module[$h]:-$h}" "${f#"$src"/} includes srd/$h.h"
  done
done

# Calls and data across folders, from the objects of sources that exist.
objs=()
for o in "$build"/src/*/.libs/*.o "$build"/src/*/*.o; do
  [ -e "$o" ] || continue
  d=${o%/*} d=${d%/.libs} dir=${d##*/}
  name=${o##*/} name=${name%.o}
  [ -e "$src/src/$dir/${name##*-}.c" ] && objs+=("$dir:$o")
done
if [ ${#objs[@]} -lt 10 ]; then
  echo "layers: found ${#objs[@]} object files under $build/src: build first"
  exit 1
fi
# One nm for all objects (-A names the file on each line): a process per
# object is what made this check slow on a busy machine.
declare -A owner dir_of
paths=()
for e in "${objs[@]}"; do dir_of[${e#*:}]=${e%%:*}; paths+=("${e#*:}"); done
while read -r file _ sym; do
  owner[$sym]=${dir_of[${file%%:*}]}
done < <(nm -A -g --defined-only "${paths[@]}")
while read -r file _ sym; do
  file=${file%%:*}
  [ -n "${owner[$sym]:-}" ] && check "${dir_of[$file]}" "${owner[$sym]}" "$(basename "$file") uses $sym"
done < <(nm -A -u "${paths[@]}")
[ $bad = 0 ] && echo "layers: ${#objs[@]} objects and their includes point down"
exit $bad
