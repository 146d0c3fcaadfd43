noinst_LTLIBRARIES += libsrd_topo.la
libsrd_topo_la_SOURCES = src/topo/nics.c src/topo/provider.c src/topo/ifname.c src/topo/group.c src/topo/efa.c src/topo/gdr.c src/topo/fi_api.c \
	src/topo/filter.c
# libsrd_util.la is not folded in: libsrd_core takes both, and a convenience
# library inside another would define every util symbol twice. Link both.
libsrd_topo_la_LIBADD = $(FABRIC_LIBS) $(HWLOC_LIBS)
