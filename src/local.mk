# Internal convenience libraries, one per layer group; the plugin is their union.
noinst_LTLIBRARIES += libsrd_util.la libsrd_core.la
libsrd_util_la_SOURCES = src/util/log.c src/util/param.c src/util/sys.c src/util/cuda.c src/util/cuda_stream.c src/util/stats.c
libsrd_util_la_LIBADD = -lpthread -ldl

libsrd_core_la_SOURCES = \
	src/rail/rail.c src/rail/rail_mr.c src/rail/rail_write.c src/rail/rail_listen.c src/rail/av_index.c \
	src/rail/shm_names.c \
	src/mr/mr_cache.c \
	src/wire/wire.c src/sched/sched.c \
	src/proto/dev.c src/proto/comms.c src/proto/ctrl.c src/proto/probe.c src/proto/failover.c src/proto/fence.c src/proto/lanes.c src/proto/regs.c \
	src/proto/request.c src/proto/send.c src/proto/recv.c src/proto/bye.c src/proto/flush.c \
	src/proto/rma.c src/proto/rma_gpu.c src/proto/rma_nic.c src/proto/rma_target.c \
	src/comm/dispatch.c src/comm/handshake.c src/comm/close.c src/comm/net.c src/comm/rma_init.c src/comm/rma_net.c
libsrd_core_la_LIBADD = libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) -ldl

lib_LTLIBRARIES += libnccl-net-srd.la
libnccl_net_srd_la_SOURCES = src/api/api.h src/api/common.c \
	src/api/net_v8.c src/api/net_v9.c src/api/net_v10.c src/api/net_v11.c src/api/net_v12.c \
	src/api/rma_common.c src/api/rma_v14.c src/api/rma_v15.c
# NCCL looks for a tuner in the net plugin when NCCL_TUNER_PLUGIN is unset,
# so the same tables are exported here too.
libnccl_net_srd_la_SOURCES += tuner/api.c
libnccl_net_srd_la_LIBADD = libsrd_tuner.la libsrd_core.la
# Only the plugin tables are exported: everything else is hidden, and the
# static convenience libraries' symbols stay inside.
libnccl_net_srd_la_LDFLAGS = -module -avoid-version -shared -Wl,--exclude-libs,ALL -Wl,--no-undefined $(SAN_FLAGS)
