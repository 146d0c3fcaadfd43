# srd-perf and srd-info. Their pure parts (argument parsing, statistics, the
# JSON writer) live in a convenience library of their own so that the unit
# tests in tests/tools link exactly the code the tools run.
noinst_LTLIBRARIES += libsrd_toolkit.la
libsrd_toolkit_la_SOURCES = src/tools/perf_args.c src/tools/perf_args.h src/tools/perf_stats.c \
	src/tools/perf_stats.h src/tools/json_writer.c src/tools/json_writer.h src/tools/perf_report.c \
	src/tools/perf_report.h

SRD_TOOL_LIBS = libsrd_toolkit.la libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) -ldl -lm

bin_PROGRAMS += srd-perf srd-info
srd_perf_SOURCES = src/tools/srd_perf.c src/tools/perf_bench.c src/tools/perf_bench.h src/tools/perf_ctrl.c \
	src/tools/perf_ctrl.h src/tools/perf_log.c src/tools/perf_log.h src/tools/perf_plugin.c src/tools/perf_raw.c \
	src/tools/perf_raw.h src/tools/perf_raw_comm.c src/tools/perf_raw_lanes.c src/tools/perf_raw_lanes.h \
	src/tools/perf_transport.h src/tools/perf_mem.c src/tools/perf_mem.h \
	src/tools/perf_plugin.h src/tools/perf_rma.h src/tools/perf_rma_bench.c src/tools/perf_rma_plugin.c src/tools/perf_rma_raw.c
srd_perf_LDADD = $(SRD_TOOL_LIBS)
srd_info_SOURCES = src/tools/srd_info.c src/tools/info_probe.c src/tools/info_probe.h src/tools/info_doctor.c \
	src/tools/info_doctor.h
# libsrd_tuner: --check parses NCCL_SRD_TUNER_CONFIG as the tuner would.
srd_info_LDADD = libsrd_tuner.la $(SRD_TOOL_LIBS)
