# Unit tests of the pure parts of the data path: wire encoding, striping,
# registration cache. They link the core library directly, not the plugin.
if HAVE_GTEST
SRD_UNIT_TESTS = tests/unit/wire_test tests/unit/sched_test tests/unit/mr_test
check_PROGRAMS += $(SRD_UNIT_TESTS)
TESTS += $(SRD_UNIT_TESTS)
SRD_UNIT_LDADD = libsrd_core.la libsrd_topo.la libsrd_util.la $(FABRIC_LIBS) $(HWLOC_LIBS) $(SRD_GTEST_LIBS)
tests_unit_wire_test_SOURCES = tests/unit/wire_test.cc
tests_unit_wire_test_LDADD = $(SRD_UNIT_LDADD)
tests_unit_sched_test_SOURCES = tests/unit/sched_test.cc
tests_unit_sched_test_LDADD = $(SRD_UNIT_LDADD)
tests_unit_mr_test_SOURCES = tests/unit/mr_test.cc
tests_unit_mr_test_LDADD = $(SRD_UNIT_LDADD)
endif
