#!/bin/sh
# The time each test of the last `make check` in a build directory took, longest
# first: from its .log's birth (the harness creates it as the test starts) to
# its .trs (written when it ends). Needs a filesystem that records birth
# times (ext4, xfs, btrfs); prints '?' where it does not.
#
#   sh tests/timings.sh BUILDDIR
set -eu
dir=${1:?usage: timings.sh BUILDDIR}
find "$dir/tests" -name '*.trs' | while read -r trs; do
  log=${trs%.trs}.log
  [ -f "$log" ] || continue
  born=$(stat -c %W "$log")
  ended=$(stat -c %Y "$trs")
  result=$(sed -n 's/^:test-result: //p' "$trs" | head -n 1)
  name=${trs#"$dir"/}
  if [ "$born" -gt 0 ]; then
    echo "$((ended - born)) $result ${name%.trs}"
  else
    echo "? $result ${name%.trs}"
  fi
done | sort -rn
