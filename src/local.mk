# Internal convenience libraries, one per layer; the plugin is their union.
noinst_LTLIBRARIES += libsrd_util.la libsrd_core.la
libsrd_util_la_SOURCES = src/util/log.c src/util/param.c
libsrd_util_la_LIBADD = -lpthread

libsrd_core_la_SOURCES =
libsrd_core_la_LIBADD = libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) -ldl

lib_LTLIBRARIES += libnccl-net-srd.la
libnccl_net_srd_la_SOURCES = src/api/net_v8.c
libnccl_net_srd_la_LIBADD = libsrd_core.la
# Only the plugin tables are exported: everything else is hidden.
libnccl_net_srd_la_LDFLAGS = -module -avoid-version -shared -Wl,--exclude-libs,ALL -Wl,--no-undefined $(SAN_FLAGS)
