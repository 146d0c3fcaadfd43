#!/bin/sh
# What a failed test's log says, short enough to read at the end of CI's
# output: the failed cases and their FAIL lines, the plugin's warnings once
# each with a count (a test of many cases repeats the same one), then the
# log's tail. Logs are arguments, or names on stdin.
#
#   sh tests/show-failed.sh LOG...
# Every filter reads its whole input (awk, not head): under `set -o pipefail`
# a writer cut off by head dies of SIGPIPE and takes the caller with it.
show() {
  echo "==== $1: failed cases and FAIL lines"
  awk '/^(FAIL|ERROR)|\] FAIL / && n < 40 { print FNR ": " $0; n++ }' "$1"
  echo "==== $1: warnings, each once (count, first line)"
  awk '/\] WARN / { m = $0; sub(/^\[[^]]*\] /, "", m)
                    if (!(m in seen)) { order[++k] = m; first[m] = FNR } seen[m]++ }
       END { for (i = 1; i <= k && i <= 20; i++) print seen[order[i]] "x (line " first[order[i]] "): " order[i] }' "$1"
  echo "==== $1: tail"
  tail -n 25 "$1"
}
if [ $# -gt 0 ]; then
  for f; do show "$f"; done
else
  while read -r f; do show "$f"; done
fi
