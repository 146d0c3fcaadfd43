# Functional and ABI tests. They drive the built plugin exactly as NCCL does
# (dlopen of .libs/libnccl-net-srd.so, one ncclNetPlugin_vN table), never by
# linking it. tests/lib holds their shared plumbing: the version adapter,
# forked process groups with an out-of-band channel, data patterns.
# Each functional program runs over tcp;ofi_rxm and shm (argument 1 or
# SRD_TEST_PROVIDERS picks others, comma-separated; argument 2 one case).
noinst_LTLIBRARIES += tests/lib/libsrdtest.la
tests_lib_libsrdtest_la_SOURCES = tests/lib/srdtest.h tests/lib/net.c tests/lib/group.c
tests_lib_libsrdtest_la_LIBADD = -ldl

SRD_TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/lib
SRD_TEST_LDADD = tests/lib/libsrdtest.la -lpthread

SRD_FUNCTIONAL_TESTS = \
	tests/functional/connect \
	tests/functional/sizes \
	tests/functional/groups \
	tests/functional/truncate \
	tests/functional/inflight \
	tests/functional/close \
	tests/functional/peerkill \
	tests/functional/allreduce \
	tests/functional/badinput
SRD_ABI_TESTS = tests/abi/dlopen

check_PROGRAMS += $(SRD_FUNCTIONAL_TESTS) $(SRD_ABI_TESTS)
# lanes runs from threads.sh (with its LeakSanitizer note, lanes.lsan).
check_PROGRAMS += tests/functional/lanes
TESTS += $(SRD_ABI_TESTS) tests/abi/exports.sh $(SRD_FUNCTIONAL_TESTS) tests/functional/reorder.sh \
	tests/functional/threads.sh
EXTRA_DIST += tests/abi/exports.sh tests/functional/reorder.sh tests/functional/threads.sh tests/functional/lanes.lsan

# Two namespaces joined by 4 veth rails (tests/netns/netns.sh); raildown runs only from raildown.sh.
check_PROGRAMS += tests/functional/raildown
TESTS += tests/netns/multirail.sh tests/netns/raildown.sh
EXTRA_DIST += tests/netns/multirail.sh tests/netns/raildown.sh
tests_functional_raildown_SOURCES = tests/functional/raildown.c
tests_functional_raildown_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_raildown_LDADD = $(SRD_TEST_LDADD)

tests_functional_connect_SOURCES = tests/functional/connect.c
tests_functional_connect_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_connect_LDADD = $(SRD_TEST_LDADD)
tests_functional_sizes_SOURCES = tests/functional/sizes.c
tests_functional_sizes_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_sizes_LDADD = $(SRD_TEST_LDADD)
tests_functional_groups_SOURCES = tests/functional/groups.c
tests_functional_groups_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_groups_LDADD = $(SRD_TEST_LDADD)
tests_functional_truncate_SOURCES = tests/functional/truncate.c
tests_functional_truncate_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_truncate_LDADD = $(SRD_TEST_LDADD)
tests_functional_inflight_SOURCES = tests/functional/inflight.c
tests_functional_inflight_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_inflight_LDADD = $(SRD_TEST_LDADD)
tests_functional_close_SOURCES = tests/functional/close.c
tests_functional_close_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_close_LDADD = $(SRD_TEST_LDADD)
tests_functional_peerkill_SOURCES = tests/functional/peerkill.c
tests_functional_peerkill_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_peerkill_LDADD = $(SRD_TEST_LDADD)
tests_functional_allreduce_SOURCES = tests/functional/allreduce.c
tests_functional_allreduce_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_allreduce_LDADD = $(SRD_TEST_LDADD)
tests_functional_badinput_SOURCES = tests/functional/badinput.c
tests_functional_badinput_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_badinput_LDADD = $(SRD_TEST_LDADD)
tests_functional_lanes_SOURCES = tests/functional/lanes.c
tests_functional_lanes_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_lanes_LDADD = $(SRD_TEST_LDADD)
tests_abi_dlopen_SOURCES = tests/abi/dlopen.c
tests_abi_dlopen_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_abi_dlopen_LDADD = $(SRD_TEST_LDADD)
