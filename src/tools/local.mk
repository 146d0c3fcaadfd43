# srd-perf and srd-info. Their pure parts (argument parsing, statistics, the
# JSON writer) live in a convenience library of their own so that the unit
# tests in tests/tools link exactly the code the tools run.
noinst_LTLIBRARIES += libsrd_toolkit.la
libsrd_toolkit_la_SOURCES = src/tools/perf_args.c src/tools/perf_args.h src/tools/perf_stats.c \
	src/tools/perf_stats.h src/tools/json_writer.c src/tools/json_writer.h

SRD_TOOL_LIBS = libsrd_toolkit.la libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) -ldl -lm

bin_PROGRAMS += srd-perf srd-info
srd_perf_SOURCES = src/tools/srd_perf.c src/tools/perf_bench.c src/tools/perf_bench.h src/tools/perf_ctrl.c \
	src/tools/perf_ctrl.h src/tools/perf_log.c src/tools/perf_log.h src/tools/perf_plugin.c src/tools/perf_raw.c \
	src/tools/perf_report.c src/tools/perf_report.h src/tools/perf_transport.h
srd_perf_LDADD = $(SRD_TOOL_LIBS)
srd_info_SOURCES = src/tools/srd_info.c src/tools/info_probe.c src/tools/info_probe.h
srd_info_LDADD = $(SRD_TOOL_LIBS)

# Unit tests of the pure parts.
if HAVE_GTEST
check_PROGRAMS += tests/tools/perf_args_test tests/tools/perf_stats_test tests/tools/json_writer_test
TESTS += tests/tools/perf_args_test tests/tools/perf_stats_test tests/tools/json_writer_test
SRD_TOOL_TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/tools
tests_tools_perf_args_test_SOURCES = tests/tools/perf_args_test.cc
tests_tools_perf_args_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_perf_args_test_LDADD = libsrd_toolkit.la libsrd_util.la $(SRD_GTEST_LIBS)
tests_tools_perf_stats_test_SOURCES = tests/tools/perf_stats_test.cc
tests_tools_perf_stats_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_perf_stats_test_LDADD = libsrd_toolkit.la $(SRD_GTEST_LIBS)
tests_tools_json_writer_test_SOURCES = tests/tools/json_writer_test.cc
tests_tools_json_writer_test_CPPFLAGS = $(SRD_TOOL_TEST_CPPFLAGS)
tests_tools_json_writer_test_LDADD = libsrd_toolkit.la $(SRD_GTEST_LIBS)
endif

# Functional: the tools themselves, run briefly (exit 77 = skipped). Their
# JSON is checked by a small validator so python3 is not required.
check_PROGRAMS += tests/tools/json_validate
tests_tools_json_validate_SOURCES = tests/tools/json_validate.cc
SRD_TOOL_CHECKS = tests/tools/srd-info.sh tests/tools/srd-perf-raw.sh tests/tools/srd-perf-plugin.sh \
	tests/tools/srd-perf-errors.sh
TESTS += $(SRD_TOOL_CHECKS)
EXTRA_DIST += $(SRD_TOOL_CHECKS) tests/tools/json_check.sh tests/tools/benchmarks.sh
