# Architecture checks: layers point down (includes and calls across src/).
TESTS += tests/arch/layers.sh
EXTRA_DIST += tests/arch/layers.sh
