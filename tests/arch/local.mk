# Architecture checks: layers point down (includes and calls across src/).
TESTS += tests/arch/layers.sh
EXTRA_DIST += tests/arch/layers.sh

# Scale: 20,000 comm pairs between two processes (memory and connect time per comm).
check_PROGRAMS += tests/functional/manycomms
TESTS += tests/functional/manycomms
tests_functional_manycomms_SOURCES = tests/functional/manycomms.c
tests_functional_manycomms_CPPFLAGS = $(SRD_TEST_CPPFLAGS)
tests_functional_manycomms_LDADD = $(SRD_TEST_LDADD)
