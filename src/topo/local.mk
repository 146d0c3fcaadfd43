noinst_LTLIBRARIES += libsrd_topo.la
libsrd_topo_la_SOURCES = src/topo/nics.c src/topo/provider.c src/topo/ifname.c src/topo/group.c src/topo/efa.c
# libsrd_util.la is not folded in: libsrd_core takes both, and a convenience
# library inside another would define every util symbol twice. Link both.
libsrd_topo_la_LIBADD = $(FABRIC_LIBS) $(HWLOC_LIBS)

# Topologies for the grouping tests, written by tests/topo/make_topologies.py.
SRD_TOPO_XML = tests/topo/p5.xml tests/topo/p4d.xml tests/topo/single.xml tests/topo/cross-numa.xml \
	tests/topo/shared-switch.xml tests/topo/no-gpu.xml tests/topo/mixed.xml
EXTRA_DIST += $(SRD_TOPO_XML) tests/topo/make_topologies.py tests/topo/device-topo.sh tests/netns/netns.sh tests/netns/topo-netns.sh

# Prints what srd_topo_discover finds (used inside network namespaces).
check_PROGRAMS += tests/topo/list_nics
tests_topo_list_nics_SOURCES = tests/topo/list_nics.c
tests_topo_list_nics_LDADD = libsrd_topo.la libsrd_util.la

# Needs root and namespaces; exits 77 (skip) where it cannot run.
TESTS += tests/netns/topo-netns.sh

if HAVE_GTEST
check_PROGRAMS += tests/topo/group_test tests/topo/ifname_test tests/topo/param_test
TESTS += tests/topo/group_test tests/topo/ifname_test tests/topo/param_test
tests_topo_group_test_SOURCES = tests/topo/group_test.cc
tests_topo_group_test_CPPFLAGS = $(AM_CPPFLAGS) -DTOPO_XML_DIR='"$(abs_top_srcdir)/tests/topo"'
tests_topo_group_test_LDADD = libsrd_topo.la libsrd_util.la $(SRD_GTEST_LIBS)
tests_topo_ifname_test_SOURCES = tests/topo/ifname_test.cc
tests_topo_ifname_test_LDADD = libsrd_topo.la libsrd_util.la $(SRD_GTEST_LIBS)
tests_topo_param_test_SOURCES = tests/topo/param_test.cc
tests_topo_param_test_LDADD = libsrd_util.la $(SRD_GTEST_LIBS)
endif
