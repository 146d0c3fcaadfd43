# The tuner (libnccl-tuner-srd.so). Its logic is a convenience library so that
# the net plugin can carry the same tuner; the exported tables are in
# tuner/api.c, compiled directly into each library that exports them
# (--exclude-libs hides every symbol that comes from an archive).
noinst_LTLIBRARIES += libsrd_tuner.la
libsrd_tuner_la_SOURCES = tuner/model.c tuner/config.c tuner/topo_input.c tuner/plugin.c
# topo and util are linked beside it, never folded in (the net plugin has them already).

lib_LTLIBRARIES += libnccl-tuner-srd.la
libnccl_tuner_srd_la_SOURCES = tuner/api.c
libnccl_tuner_srd_la_LIBADD = libsrd_tuner.la libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) -lpthread
libnccl_tuner_srd_la_LDFLAGS = -module -avoid-version -shared -Wl,--exclude-libs,ALL -Wl,--no-undefined $(SAN_FLAGS)

EXTRA_DIST += include/srd/tuner.h include/nccl/tuner.h include/nccl/tuner_common.h include/nccl/tuner_v2.h \
	include/nccl/tuner_v3.h include/nccl/tuner_v4.h include/nccl/tuner_v5.h include/nccl/tuner_v6.h
