#!/bin/sh
# The planted-bug check: each mutation listed in tests/mutation/mutations (a
# small source edit, matched by code text, that breaks the product) is applied
# to a scratch copy of this tree (tracked and untracked files, in
# $SRD_MUTATION_DIR or a fresh /tmp/srd-mutation.*), which is rebuilt; then the
# tests the mutation names run until one of them fails, as one must.
# SRD_MUTATION_WORKERS copies (default: one per core) take mutations side by
# side, each rebuilding only what the edit touches. The tests must all
# pass on the unmutated copy first. Prints a table (mutation, caught by,
# result) and exits 1 when a mutation survives or no longer applies.
#
#   tests/mutation/run.sh [CONFIGURE ARGS...]     # e.g. PKG_CONFIG_PATH=/opt/libfabric-2.6/lib/pkgconfig
#
# SRD_MUTATIONS=name,name runs only those; SRD_MUTATION_JOBS sets make -j;
# SRD_MUTATION_MAKE_ARGS is added to every make command (e.g. CFLAGS=...).
# The whole list needs SRD_LIBFABRIC2=PREFIX (a libfabric 2.x: the bugs only
# 2.x shows) and SRD_EFA_EMU_PREFIX=PREFIX (tests/efa/build-libfabric.sh's:
# one more copy, configured --with-efa-emulator, takes the emulator's bugs).
# Not part of make check: it rebuilds once per mutation (CONTRIBUTING.md: Planted bugs).
command -v python3 >/dev/null 2>&1 || { echo "mutation: python3 is needed" >&2; exit 77; }
exec python3 "$(dirname "$0")/mutate.py" "$@"
