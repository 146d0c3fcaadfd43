# Sourced by the device scripts. nccl_tests_build LOG sets tests_dir to
# nccl-tests' binaries: $NCCL_TESTS when set (built already), else
# .device/nccl-tests/build, built here with MPI on first use for this
# machine's GPU only (every architecture costs minutes of a 10-minute call).
# On failure it returns 1 with the reason in nccl_tests_error.
nccl_tests_build() {
  local log=$1 src=$PWD/.device/nccl-tests cap
  tests_dir=${NCCL_TESTS:-$src/build}
  if [ -z "${NCCL_TESTS:-}" ] && [ ! -x "$tests_dir/all_reduce_perf" ] && [ -f "$src/Makefile" ]; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
    make -C "$src" -j16 MPI=1 MPI_HOME="$SRD_MPI_HOME" NCCL_HOME="$SRD_NCCL_HOME" \
      CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" ${cap:+NVCC_GENCODE=-gencode=arch=compute_$cap,code=sm_$cap} \
      >"$log" 2>&1 || { nccl_tests_error="nccl-tests build failed (its log: $log)"; return 1; }
  fi
  [ -x "$tests_dir/all_reduce_perf" ] || { nccl_tests_error="no nccl-tests in $tests_dir"; return 1; }
}
