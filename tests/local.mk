# Every test of the project is registered here; tests/ mirrors src/:
#   tests/proto, tests/rail, tests/wire, tests/sched, tests/mr, tests/util, tests/topo,
#   tests/tools, tests/tuner
#     GoogleTest unit tests of the module of the same name (linked against
#     its convenience library, never the plugin);
#   tests/functional, tests/abi, tests/netns
#     the built plugin driven as NCCL drives it (dlopen of
#     .libs/libnccl-net-srd.so, one ncclNetPlugin_vN table), by forked ranks;
#   tests/lib
#     their shared plumbing: the version adapter, forked process groups with
#     an out-of-band channel, data patterns, the captured plugin log;
#   tests/mutation
#     the planted-bug check (run by hand, not by make check: see CONTRIBUTING.md).
# Each functional program runs over tcp;ofi_rxm and shm (argument 1 or
# SRD_TEST_PROVIDERS picks others, comma-separated; argument 2 one case).
# Scripts exit 77 (skipped) where they cannot run (no root, no namespaces).

noinst_LTLIBRARIES += tests/lib/libsrdtest.la
tests_lib_libsrdtest_la_SOURCES = tests/lib/srdtest.h tests/lib/net.c tests/lib/group.c
tests_lib_libsrdtest_la_LIBADD = -ldl

SRD_TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/lib
SRD_TEST_LDADD = tests/lib/libsrdtest.la -lpthread

# The user's test command (README) and the per-test times of a make check.
EXTRA_DIST += tests/suite.sh tests/timings.sh tests/show-failed.sh

# ---------- architecture: dependencies across src/ point down ----------

# make -j starts tests in TESTS order: the longest (tests/timings.sh) go
# first, so that none of them starts last and runs alone at the end. Each is
# built or distributed in its own section below, and run only from here.
if EFA_EMULATOR
TESTS += tests/efa/efa-suite.sh
endif
TESTS += tests/functional/threads/sizes.threads tests/netns/multirail.sh tests/functional/manycomms \
	tests/tools/srd-perf-raw.sh tests/security/rogue tests/functional/sizes tests/functional/rma \
	tests/functional/threads/sizes.lanes4.threads tests/netns/failover-lanes.sh tests/tools/srd-perf-plugin.sh \
	tests/tools/srd-perf-rma.sh tests/functional/threads/close.threads tests/functional/threads/inflight.threads

TESTS += tests/arch/layers.sh
EXTRA_DIST += tests/arch/layers.sh

# ---------- functional and ABI ----------

# sizes, manycomms and rma run among the longest (above).
SRD_FUNCTIONAL_TESTS = \
	tests/functional/connect \
	tests/functional/groups \
	tests/functional/truncate \
	tests/functional/mixed \
	tests/functional/inflight \
	tests/functional/close \
	tests/functional/peerkill \
	tests/functional/slowpeer \
	tests/functional/allreduce \
	tests/functional/badinput \
	tests/functional/paths
SRD_ABI_TESTS = tests/abi/dlopen

check_PROGRAMS += $(SRD_FUNCTIONAL_TESTS) tests/functional/sizes tests/functional/manycomms tests/functional/rma \
	$(SRD_ABI_TESTS)
check_PROGRAMS += tests/functional/lanes
# The key programs again with progress lanes: tests/functional/threads.sh runs
# each .threads file (its program's runs), one test per file (PROGRAM.VARIANT.threads: more runs of PROGRAM).
# (sizes, sizes.lanes4, close and inflight run among the longest, above.)
SRD_THREADS_TESTS = tests/functional/threads/connect.threads tests/functional/threads/groups.threads \
	tests/functional/threads/truncate.threads tests/functional/threads/peerkill.threads \
	tests/functional/threads/allreduce.threads
TEST_EXTENSIONS = .threads
THREADS_LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/functional/threads.sh
TESTS += $(SRD_ABI_TESTS) tests/abi/exports.sh $(SRD_FUNCTIONAL_TESTS) tests/functional/lanes \
	tests/functional/reorder.sh tests/functional/nic-signals.sh tests/functional/recv-refuse.sh $(SRD_THREADS_TESTS)
EXTRA_DIST += tests/abi/exports.sh tests/functional/reorder.sh tests/functional/nic-signals.sh \
	tests/functional/recv-refuse.sh tests/functional/threads.sh $(SRD_THREADS_TESTS) tests/libfabric.lsan \
	tests/functional/threads/sizes.threads tests/functional/threads/sizes.lanes4.threads \
	tests/functional/threads/close.threads tests/functional/threads/inflight.threads

tests_functional_rma_SOURCES = tests/functional/rma.c
tests_functional_rma_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_rma_LDADD = $(SRD_TEST_LDADD)
tests_functional_manycomms_SOURCES = tests/functional/manycomms.c
tests_functional_manycomms_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_manycomms_LDADD = $(SRD_TEST_LDADD)
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
tests_functional_mixed_SOURCES = tests/functional/mixed.c
tests_functional_mixed_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_mixed_LDADD = $(SRD_TEST_LDADD)
tests_functional_inflight_SOURCES = tests/functional/inflight.c
tests_functional_inflight_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_inflight_LDADD = $(SRD_TEST_LDADD)
tests_functional_close_SOURCES = tests/functional/close.c
tests_functional_close_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_close_LDADD = $(SRD_TEST_LDADD)
tests_functional_peerkill_SOURCES = tests/functional/peerkill.c
tests_functional_peerkill_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_peerkill_LDADD = $(SRD_TEST_LDADD)
tests_functional_slowpeer_SOURCES = tests/functional/slowpeer.c
tests_functional_slowpeer_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_slowpeer_LDADD = $(SRD_TEST_LDADD)
tests_functional_allreduce_SOURCES = tests/functional/allreduce.c
tests_functional_allreduce_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_allreduce_LDADD = $(SRD_TEST_LDADD)
# Security (tests/security): a rogue peer (a bare libfabric endpoint speaking
# our wire format) against the plugin, and misuse of the plugin's API (run
# among the longest).
check_PROGRAMS += tests/security/rogue
tests_security_rogue_SOURCES = tests/security/rogue.c tests/security/rogue_ep.c tests/security/misuse.c \
	tests/security/insider.c tests/security/unexpected.c tests/security/places.c tests/security/floods.c \
	tests/security/rogue.h src/wire/wire.c
tests_security_rogue_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_security_rogue_LDADD = $(SRD_TEST_LDADD) $(FABRIC_LIBS)

tests_functional_badinput_SOURCES = tests/functional/badinput.c
tests_functional_badinput_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_badinput_LDADD = $(SRD_TEST_LDADD)
tests_functional_lanes_SOURCES = tests/functional/lanes.c
tests_functional_lanes_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_lanes_LDADD = $(SRD_TEST_LDADD)
tests_functional_paths_SOURCES = tests/functional/paths.c
tests_functional_paths_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_paths_LDADD = $(SRD_TEST_LDADD)
tests_abi_dlopen_SOURCES = tests/abi/dlopen.c
tests_abi_dlopen_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_abi_dlopen_LDADD = $(SRD_TEST_LDADD)
# fi_version() reporting another version (SRD_TEST_FI_VERSION), preloaded by
# .ci/run to run the plugin as on an older 2.x runtime.
check_LTLIBRARIES += tests/abi/libfi-version-as.la
tests_abi_libfi_version_as_la_SOURCES = tests/abi/fi_version_as.c
tests_abi_libfi_version_as_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir) \
	-Wl,--version-script=$(srcdir)/tests/abi/fi_version_as.map
EXTRA_DIST += tests/abi/fi_version_as.map

# ---------- netns: two namespaces joined by 4 veth rails (tests/netns/netns.sh) ----------

# raildown runs only from raildown.sh; list_nics prints what srd_topo_discover
# finds inside a namespace.
check_PROGRAMS += tests/functional/raildown tests/functional/failover tests/topo/list_nics
# (multirail and failover-lanes run among the longest.)
TESTS += tests/netns/raildown.sh tests/netns/raildown-lanes.sh tests/netns/topo-netns.sh \
	tests/netns/failover.sh tests/netns/failover-reorder.sh tests/netns/rma-cut.sh
EXTRA_DIST += tests/netns/multirail.sh tests/netns/raildown.sh tests/netns/raildown-lanes.sh tests/netns/netns.sh \
	tests/netns/topo-netns.sh tests/netns/failover.sh tests/netns/failover-reorder.sh tests/netns/failover-lanes.sh \
	tests/netns/rma-cut.sh
tests_functional_raildown_SOURCES = tests/functional/raildown.c
tests_functional_raildown_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_raildown_LDADD = $(SRD_TEST_LDADD)
tests_functional_failover_SOURCES = tests/functional/failover.c
tests_functional_failover_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_failover_LDADD = $(SRD_TEST_LDADD)
tests_topo_list_nics_SOURCES = tests/topo/list_nics.c
tests_topo_list_nics_LDADD = libsrd_topo.la libsrd_util.la

# ---------- tools: srd-perf and srd-info run briefly ----------

# Their JSON is checked by a small validator so python3 is not required.
check_PROGRAMS += tests/tools/json_validate
tests_tools_json_validate_SOURCES = tests/tools/json_validate.cc
# (srd-perf-raw, srd-perf-plugin and srd-perf-rma run among the longest.)
SRD_TOOL_CHECKS = tests/tools/srd-info.sh tests/tools/srd-perf-raw.sh tests/tools/srd-perf-plugin.sh \
	tests/tools/srd-perf-errors.sh tests/tools/srd-info-gdr.sh tests/tools/srd-perf-cuda.sh \
	tests/tools/srd-perf-corrupt.sh tests/tools/srd-info-doctor.sh tests/tools/srd-info-agree.sh \
	tests/tools/srd-perf-rma.sh
# A plugin wrapping ours that corrupts what it receives (srd-perf-corrupt.sh).
check_LTLIBRARIES += tests/tools/libsrd-corrupt.la
tests_tools_libsrd_corrupt_la_SOURCES = tests/tools/corrupt_plugin.c
tests_tools_libsrd_corrupt_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)
tests_tools_libsrd_corrupt_la_LIBADD = -ldl -lpthread
TESTS += tests/tools/srd-info.sh tests/tools/srd-perf-errors.sh tests/tools/srd-info-gdr.sh \
	tests/tools/srd-perf-cuda.sh tests/tools/srd-perf-corrupt.sh tests/tools/srd-info-doctor.sh \
	tests/tools/srd-info-agree.sh
EXTRA_DIST += $(SRD_TOOL_CHECKS) tests/tools/json_check.sh tests/tools/benchmarks.sh
# The packages (make deb) installed into a clean root: run by .ci/run.
EXTRA_DIST += tests/pkg/installed.sh
# doc/aws.md's examples (MPIJob YAML, Dockerfile) parse.
TESTS += tests/doc/aws-examples.sh
EXTRA_DIST += tests/doc/aws-examples.sh tests/doc/aws_examples.py
# doc/variables.md is what the parameter table prints.
check_PROGRAMS += tests/doc/variables
tests_doc_variables_SOURCES = tests/doc/variables.c
tests_doc_variables_LDADD = libsrd_util.la
TESTS += tests/doc/variables.sh
EXTRA_DIST += tests/doc/variables.sh doc/variables.md
# README's and doc/'s claims: links, variables, options, exported versions, numbers.
TESTS += tests/doc/readme.sh
EXTRA_DIST += tests/doc/readme.sh tests/doc/readme_claims.py

# ---------- not run by make check ----------

# On a GPU machine with NCCL (CONTRIBUTING.md); topologies for the grouping tests
# are written by make_topologies.py; the planted-bug check.
SRD_TOPO_XML = tests/topo/p5.xml tests/topo/p4d.xml tests/topo/single.xml tests/topo/cross-numa.xml \
	tests/topo/shared-switch.xml tests/topo/no-gpu.xml tests/topo/mixed.xml
EXTRA_DIST += $(SRD_TOPO_XML) tests/topo/make_topologies.py tests/topo/device-topo.sh \
	tests/tuner/device-bench.sh tests/tuner/device-ab.sh tests/tuner/tuner_ab.c tests/tuner/example.conf
TESTS += tests/mutation/applies.sh
EXTRA_DIST += tests/mutation/run.sh tests/mutation/mutate.py tests/mutation/mutations tests/mutation/applies.sh
EXTRA_DIST += tests/device/compare.sh tests/device/mid.sh tests/device/gdr.sh tests/device/gdr_torch.py tests/device/floor.sh tests/device/nccl-tests.sh \
	tests/device/tcp_pingpong.c tests/device/cpu_share.py tests/device/rma.sh tests/device/rma_putsignal.c tests/device/launch_queue.c \
	tests/device/gin.sh

# ---------- unit tests (GoogleTest) ----------

if HAVE_GTEST
SRD_UNIT_TESTS = \
	tests/util/param_test tests/util/cuda_test \
	tests/mr/mr_test \
	tests/topo/group_test tests/topo/ifname_test tests/topo/gdr_test tests/topo/efa_select_test \
	tests/proto/proto_test tests/rail/av_index_test tests/rail/rail_write_test tests/wire/wire_test tests/sched/sched_test \
	tests/tools/perf_args_test tests/tools/perf_stats_test tests/tools/perf_report_test tests/tools/json_writer_test \
	tests/tuner/model_test tests/tuner/rules_test tests/tuner/abi_test
check_PROGRAMS += $(SRD_UNIT_TESTS)
TESTS += $(SRD_UNIT_TESTS)

# The data path's pure parts link the core library directly, not the plugin.
SRD_UNIT_LDADD = libsrd_core.la libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) $(SRD_GTEST_LIBS)

tests_util_param_test_SOURCES = tests/util/param_test.cc
tests_util_param_test_LDADD = libsrd_util.la $(SRD_GTEST_LIBS)

# GPU memory without a GPU: the CUDA driver loader against a fake driver, the
# GPUDirect decision for every combination of its inputs, NCCL_SRD_GDR, and
# the inputs gathered from this host's libfabric (no libcuda needed).
tests_util_cuda_test_SOURCES = tests/util/cuda_test.cc tests/lib/fake_cuda.h
tests_util_cuda_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/lib
tests_util_cuda_test_LDADD = libsrd_util.la $(SRD_GTEST_LIBS) -ldl
tests_topo_gdr_test_SOURCES = tests/topo/gdr_test.cc tests/lib/fake_cuda.h
tests_topo_gdr_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/lib
tests_topo_gdr_test_LDADD = libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) $(SRD_GTEST_LIBS) -ldl

tests_mr_mr_test_SOURCES = tests/mr/mr_test.cc
tests_mr_mr_test_LDADD = $(SRD_UNIT_LDADD)

tests_topo_group_test_SOURCES = tests/topo/group_test.cc
tests_topo_group_test_CPPFLAGS = $(AM_CPPFLAGS) -DTOPO_XML_DIR='"$(abs_top_srcdir)/tests/topo"'
tests_topo_group_test_LDADD = libsrd_topo.la libsrd_util.la $(SRD_GTEST_LIBS)
# efa's offer as its sources describe it (the fixture names each source).
tests_topo_efa_select_test_SOURCES = tests/topo/efa_select_test.cc
tests_topo_efa_select_test_CPPFLAGS = $(AM_CPPFLAGS) -DEFA_FIXTURE='"$(abs_top_srcdir)/tests/topo/efa_fi_info.txt"'
tests_topo_efa_select_test_LDADD = $(SRD_UNIT_LDADD)
EXTRA_DIST += tests/topo/efa_fi_info.txt
tests_topo_ifname_test_SOURCES = tests/topo/ifname_test.cc
tests_topo_ifname_test_LDADD = libsrd_topo.la libsrd_util.la $(SRD_GTEST_LIBS)

# The protocol's state machines against a fake rail (the srd_rail_ops seam).
tests_proto_proto_test_SOURCES = tests/proto/proto_test.cc tests/lib/fake_cuda.h
tests_proto_proto_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/lib
tests_proto_proto_test_LDADD = $(SRD_UNIT_LDADD) -ldl
tests_rail_av_index_test_SOURCES = tests/rail/av_index_test.cc
tests_rail_av_index_test_LDADD = $(SRD_UNIT_LDADD)
# Writes between two real rails (tcp): a refused delivery-complete write fails at the writer.
tests_rail_rail_write_test_SOURCES = tests/rail/rail_write_test.cc
tests_rail_rail_write_test_LDADD = $(SRD_UNIT_LDADD)
tests_wire_wire_test_SOURCES = tests/wire/wire_test.cc
tests_wire_wire_test_LDADD = $(SRD_UNIT_LDADD)
tests_sched_sched_test_SOURCES = tests/sched/sched_test.cc
tests_sched_sched_test_LDADD = $(SRD_UNIT_LDADD)

# The tools' pure parts (arguments, statistics, the JSON writer): exactly the
# code the tools run.
SRD_TOOL_TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/tools
tests_tools_perf_args_test_SOURCES = tests/tools/perf_args_test.cc
tests_tools_perf_args_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_perf_args_test_LDADD = libsrd_toolkit.la libsrd_util.la $(SRD_GTEST_LIBS)
tests_tools_perf_stats_test_SOURCES = tests/tools/perf_stats_test.cc
tests_tools_perf_stats_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_perf_stats_test_LDADD = libsrd_toolkit.la $(SRD_GTEST_LIBS)
tests_tools_perf_report_test_SOURCES = tests/tools/perf_report_test.cc
tests_tools_perf_report_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_perf_report_test_LDADD = libsrd_toolkit.la libsrd_util.la $(SRD_GTEST_LIBS)
tests_tools_json_writer_test_SOURCES = tests/tools/json_writer_test.cc
tests_tools_json_writer_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_json_writer_test_LDADD = libsrd_toolkit.la $(SRD_GTEST_LIBS)

tests_tuner_model_test_SOURCES = tests/tuner/model_test.cc
tests_tuner_model_test_LDADD = libsrd_tuner.la libsrd_topo.la libsrd_util.la $(SRD_GTEST_LIBS)
tests_tuner_rules_test_SOURCES = tests/tuner/rules_test.cc
tests_tuner_rules_test_CPPFLAGS = $(AM_CPPFLAGS) -DTUNER_EXAMPLE_CONF='"$(abs_top_srcdir)/tests/tuner/example.conf"'
tests_tuner_rules_test_LDADD = libsrd_tuner.la libsrd_topo.la libsrd_util.la $(SRD_GTEST_LIBS)
# Loads the built libraries (.libs/) with dlopen.
tests_tuner_abi_test_SOURCES = tests/tuner/abi_test.cc
tests_tuner_abi_test_LDADD = $(SRD_GTEST_LIBS) -ldl
endif

# ---------- the emulated EFA device (configure --with-efa-emulator=PREFIX) ----------
# tests/efa/emu is a test fixture: libibverbs.so.1 and libefa.so.1 of our own
# that libfabric's efa provider loads (built by tests/efa/build-libfabric.sh
# with rdma-core 56's headers into PREFIX, never linked into the plugin).
# emu-test.sh runs its own tests and fi_info per profile; efa-suite.sh the
# functional suite over efa and efa-direct.
EXTRA_DIST += tests/efa/build-libfabric.sh tests/efa/emu-test.sh tests/efa/efa-suite.sh tests/efa/emu/build.sh \
	tests/efa/emu/sysfs.sh tests/efa/emu/libibverbs.map tests/efa/emu/libefa.map \
	tests/efa/emu/emu.h tests/efa/emu/wire.h tests/efa/emu/profile.c tests/efa/emu/device.c \
	tests/efa/emu/hw.c tests/efa/emu/cq.c tests/efa/emu/qp.c tests/efa/emu/loop.c \
	tests/efa/emu/tx.c tests/efa/emu/rx.c tests/efa/emu/efadv.c \
	tests/efa/emu/emu_test.h tests/efa/emu/emu_test.c tests/efa/emu/emu_test_util.c \
	tests/efa/emu/emu_test_rma.c
if EFA_EMULATOR
# The emulator is rebuilt here from its sources (a planted bug in it is seen
# by the next make check); the tests put this copy ahead of PREFIX's in
# LD_LIBRARY_PATH, which wins over libfabric's run path.
EFA_EMU_FILES = $(srcdir)/tests/efa/emu/emu.h $(srcdir)/tests/efa/emu/wire.h \
	$(srcdir)/tests/efa/emu/profile.c $(srcdir)/tests/efa/emu/device.c $(srcdir)/tests/efa/emu/hw.c \
	$(srcdir)/tests/efa/emu/cq.c $(srcdir)/tests/efa/emu/qp.c $(srcdir)/tests/efa/emu/loop.c \
	$(srcdir)/tests/efa/emu/tx.c $(srcdir)/tests/efa/emu/rx.c $(srcdir)/tests/efa/emu/efadv.c \
	$(srcdir)/tests/efa/emu/libibverbs.map $(srcdir)/tests/efa/emu/libefa.map $(srcdir)/tests/efa/emu/build.sh
tests/efa/emu/lib/libibverbs.so.1: $(EFA_EMU_FILES)
	$(AM_V_GEN)$(SHELL) $(srcdir)/tests/efa/emu/build.sh $(EFA_EMU_PREFIX)/rdma/usr/include tests/efa/emu/lib "$(CC)"
check_PROGRAMS += tests/efa/emu/emu_test
tests_efa_emu_emu_test_SOURCES = tests/efa/emu/emu_test.h tests/efa/emu/emu_test.c \
	tests/efa/emu/emu_test_util.c tests/efa/emu/emu_test_rma.c
tests_efa_emu_emu_test_CPPFLAGS = -I$(EFA_EMU_PREFIX)/rdma/usr/include
tests_efa_emu_emu_test_DEPENDENCIES = tests/efa/emu/lib/libibverbs.so.1
tests_efa_emu_emu_test_LDFLAGS = -Ltests/efa/emu/lib -Wl,-rpath,$(abs_builddir)/tests/efa/emu/lib
tests_efa_emu_emu_test_LDADD = -libverbs -lefa
TESTS += tests/efa/emu-test.sh
tests/efa/emu-test.log tests/efa/efa-suite.log: tests/efa/emu/lib/libibverbs.so.1
AM_TESTS_ENVIRONMENT += EFA_EMU_PREFIX=$(EFA_EMU_PREFIX); export EFA_EMU_PREFIX;
endif
clean-local:
	rm -rf tests/efa/emu/lib
