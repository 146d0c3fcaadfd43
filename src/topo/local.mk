noinst_LTLIBRARIES += libsrd_topo.la
libsrd_topo_la_SOURCES = src/topo/nics.c src/topo/provider.c src/topo/ifname.c
libsrd_topo_la_LIBADD = $(FABRIC_LIBS) $(HWLOC_LIBS)
