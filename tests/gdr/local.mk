# GPU memory without a GPU: the CUDA driver loader against a fake driver, the
# GPUDirect decision for every combination of its inputs, NCCL_SRD_GDR, and
# the inputs gathered from this host's libfabric (no libcuda needed).
if HAVE_GTEST
check_PROGRAMS += tests/gdr/gdr_test
TESTS += tests/gdr/gdr_test
tests_gdr_gdr_test_SOURCES = tests/gdr/cuda_test.cc tests/gdr/gdr_test.cc tests/gdr/fake_cuda.h
tests_gdr_gdr_test_LDADD = libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) $(SRD_GTEST_LIBS) -ldl
endif

# srd-info's per-device GPU memory line (text and JSON).
TESTS += tests/gdr/srd-info-gdr.sh
EXTRA_DIST += tests/gdr/srd-info-gdr.sh

# srd-perf --cuda where GPU memory is impossible: a reason, exit status 1.
TESTS += tests/gdr/srd-perf-cuda.sh
EXTRA_DIST += tests/gdr/srd-perf-cuda.sh
