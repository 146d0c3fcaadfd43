# Unit tests of the protocol's state machines against a fake rail (the
# srd_rail_ops seam under proto).
if HAVE_GTEST
check_PROGRAMS += tests/proto/proto_test
TESTS += tests/proto/proto_test
tests_proto_proto_test_SOURCES = tests/proto/proto_test.cc
tests_proto_proto_test_LDADD = libsrd_core.la libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) $(SRD_GTEST_LIBS)
endif
