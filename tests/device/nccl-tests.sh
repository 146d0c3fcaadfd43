# Sourced by the device scripts. nccl_tests_build LOG sets tests_dir to
# nccl-tests' binaries: $NCCL_TESTS when set (built already), else
# .device/nccl-tests/build, built here with MPI on first use for this
# machine's GPU only (every architecture costs minutes of a 10-minute call),
# against $SRD_NCCL_HOME, and only the tests NCCL_TESTS_BINS names when set
# (e.g. "all_reduce sendrecv"; the first one must be there afterwards).
# On failure it returns 1 with the reason in nccl_tests_error.
nccl_tests_build() {
  local log=$1 src=$PWD/.device/nccl-tests cap
  tests_dir=${NCCL_TESTS:-$src/build}
  if [ -z "${NCCL_TESTS:-}" ] && [ ! -x "$tests_dir/all_reduce_perf" ] && [ -f "$src/Makefile" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
    make -C "$src" -j16 MPI=1 MPI_HOME="$SRD_MPI_HOME" NCCL_HOME="$SRD_NCCL_HOME" \
      CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" ${cap:+NVCC_GENCODE=-gencode=arch=compute_$cap,code=sm_$cap} \
      ${NCCL_TESTS_BINS:+BIN_FILES_LIST="$NCCL_TESTS_BINS"} \
      >"$log" 2>&1 || { nccl_tests_error="nccl-tests build failed (its log: $log)"; return 1; }
  fi
  local first=${NCCL_TESTS_BINS:-all_reduce}
  first=${first%% *}
  [ -x "$tests_dir/${first}_perf" ] || { nccl_tests_error="no ${first}_perf in $tests_dir"; return 1; }
}

# srd_nccl230: NCCL 2.30.7 (the image's is 2.28.9, which has no RMA plugin
# path), unpacked once per machine from the pieces carried in .device/nccl230
# (../shared/third-party/nccl-2.30.7-sm90/README.md). Sets nccl (its prefix);
# returns 1 with nccl_error when the pieces are missing or do not unpack.
srd_nccl230() {
  nccl=/tmp/nccl230
  if [ ! -e $nccl/lib/libnccl.so.2 ]; then
    ls .device/nccl230/nccl-2.30.7-sm90.tar.xz.* >/dev/null 2>&1 ||
      { nccl_error="no .device/nccl230/nccl-2.30.7-sm90.tar.xz.*"; return 1; }
    mkdir -p $nccl
    cat .device/nccl230/nccl-2.30.7-sm90.tar.xz.* | xz -d | tar -x -C $nccl ||
      { nccl_error="unpacking NCCL 2.30.7 failed"; return 1; }
  fi
  [ -e $nccl/lib/libnccl.so ] || ln -sf libnccl.so.2 $nccl/lib/libnccl.so
}

# srd_libfabric VERSION: which libfabric our plugin runs on. 2.6 (the
# default of the device scripts: what AWS users run; FI_PROVIDER=tcp is its
# native tcp): the plugin in .device/install-lf2 (configured against 2.x
# headers) on the CUDA build of libfabric 2.6 in .device/lf2. 1.17: the
# plugin in .device/install on Debian's libfabric (tcp;ofi_rxm), which
# gpu-env.sh puts on the library path. Sets net (the plugin) and lf_path
# (what goes first on LD_LIBRARY_PATH); returns 1 with lf_error when the
# pieces are missing (a 2.x-built plugin does not load on 1.17).
srd_libfabric() {
  case $1 in
    2.6)
      net=$PWD/.device/install-lf2/lib/libnccl-net-srd.so
      lf_path=$PWD/.device/install-lf2/lib:$PWD/.device/lf2/lib
      [ -e "$PWD/.device/lf2/lib/libfabric.so" ] || { lf_error="no libfabric 2.6 in .device/lf2"; return 1; } ;;
    1.17)
      net=$PWD/.device/install/lib/libnccl-net-srd.so
      lf_path=$PWD/.device/install/lib ;;
    *) lf_error="unknown libfabric $1 (2.6 or 1.17)"; return 1 ;;
  esac
  [ -e "$net" ] || { lf_error="no plugin at $net (make install there, configured against libfabric $1)"; return 1; }
}

# eu-stack for bounded: the machine's own, else elfutils' Debian packages
# carried in .device/dbg (unpacked once, used with their own library path;
# fetched here with: cd .device/dbg && apt-get download elfutils libdw1 libelf1
# libasm1 libdebuginfod1).
eu_stack=$(command -v eu-stack 2>/dev/null)
if [ -z "$eu_stack" ] && ls .device/dbg/*.deb >/dev/null 2>&1; then
  [ -x /opt/srd-dbg/usr/bin/eu-stack ] || for f in .device/dbg/*.deb; do dpkg -x "$f" /opt/srd-dbg; done
  [ -x /opt/srd-dbg/usr/bin/eu-stack ] &&
    eu_stack="env LD_LIBRARY_PATH=/opt/srd-dbg/usr/lib/x86_64-linux-gnu /opt/srd-dbg/usr/bin/eu-stack"
fi

# srd_cudart_dir: a directory with "libcudart.so" (no version), which a
# libfabric built with --enable-cuda-dlopen loads; a link in /tmp where CUDA
# has only versioned names. Empty when there is none.
srd_cudart_dir() {
  local d f
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib" \
    $(python3 -c 'import nvidia.cuda_runtime,os;print(list(nvidia.cuda_runtime.__path__)[0]+"/lib")' 2>/dev/null); do
    [ -e "$d/libcudart.so" ] && { echo "$d"; return; }
    for f in "$d"/libcudart.so.*; do
      [ -e "$f" ] || continue
      mkdir -p /tmp/srd-cudart && ln -sf "$f" /tmp/srd-cudart/libcudart.so && { echo /tmp/srd-cudart; return; }
    done
  done
}

# bounded SECONDS CMD...: CMD with a time limit, like timeout(1) (exit 124 when
# it ran out), but first sends each process under it BOUNDED_DUMP_SIGNAL (if
# set: a program's own state dump) and writes every thread's stack to stdout
# (eu-stack, where the machine has it: carried in .device/dbg), so a hang on
# the device says where it waits without a debugger there.
bounded() {
  local limit=$1 pid t=0 p kids
  shift
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && ((t < limit * 10)); do
    sleep 0.1
    t=$((t + 1))
  done
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid"
    return
  fi
  kids=$pid
  for p in $(descendants "$pid"); do kids="$kids $p"; done
  echo "# bounded: still running after ${limit}s; stacks of:$(for p in $kids; do printf ' %s(%s)' "$p" "$(cat /proc/$p/comm 2>/dev/null)"; done)"
  if [ -n "${BOUNDED_DUMP_SIGNAL:-}" ]; then
    for p in $kids; do
      case $(cat /proc/"$p"/comm 2>/dev/null) in bash | timeout | mpirun* | orted | srd-rank.sh | sleep) continue ;; esac
      kill -"$BOUNDED_DUMP_SIGNAL" "$p" 2>/dev/null
    done
    sleep 2
  fi
  if [ -n "$eu_stack" ]; then
    for p in $kids; do
      case $(cat /proc/"$p"/comm 2>/dev/null) in bash | timeout | mpirun* | orted | srd-rank.sh | sleep) continue ;; esac
      echo "## eu-stack -p $p ($(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-120))"
      timeout 20 $eu_stack -p "$p" 2>&1 | head -400
    done
  else
    echo "## no eu-stack on this machine"
  fi
  for p in $kids; do kill -KILL "$p" 2>/dev/null; done
  wait "$pid" 2>/dev/null
  return 124
}

# descendants PID: every process below PID (from /proc, no ps needed).
descendants() {
  local p
  for p in $(awk -v pp="$1" '$4 == pp {print $1}' /proc/[0-9]*/stat 2>/dev/null); do
    echo "$p"
    descendants "$p"
  done
}
