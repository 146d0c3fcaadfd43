#!/bin/sh
# The key functional programs again with progress threads
# (NCCL_SRD_PROGRESS_THREADS), one test per program so they run side by side:
# tests/functional/threads/PROGRAM.threads lists its runs, a line each,
# "LANES REORDER [CASE]" (REORDER: NCCL_SRD_TEST_REORDER, shuffled
# completions). make check runs this script on each .threads file. Every
# process checks that its device really opened with that many threaded lanes
# (SRD_TEST_EXPECT_LANES): a plugin that falls back to no lanes fails here.
# The lane machinery itself is tests/functional/lanes; the rail-failure case
# with lanes is tests/netns/raildown-lanes.sh.
#   threads.sh tests/functional/threads/PROGRAM.threads
set -u
list=${1:?usage: threads.sh PROGRAM.threads}
# PROGRAM.VARIANT.threads: more runs of PROGRAM, a test of their own.
prog=$(basename "$list" .threads); prog=${prog%%.*}
dir="${top_builddir:-.}/tests/functional"
[ -x "$dir/$prog" ] || { echo "threads.sh: no program $dir/$prog" >&2; exit 99; }
status=0 runs=0
while read -r lanes reorder case; do
  case $lanes in ''|'#'*) continue ;; esac
  echo "== $prog ${case:-(all cases)} with NCCL_SRD_PROGRESS_THREADS=$lanes NCCL_SRD_TEST_REORDER=$reorder"
  NCCL_SRD_PROGRESS_THREADS=$lanes SRD_TEST_EXPECT_LANES=$lanes NCCL_SRD_TEST_REORDER=$reorder \
    "$dir/$prog" "" $case || status=1
  runs=$((runs + 1))
done < "$list"
[ "$runs" -gt 0 ] || { echo "threads.sh: $list lists no run" >&2; exit 99; }
exit $status
