#!/bin/sh
# One-sided RMA and a lost rail: tests/functional/rma's rail-cut case (puts
# striped over 4 veth rails in flight when rail 2 is cut; rail-cut-lanes with
# the origin's writes posted by a progress thread) in failover.sh's
# namespaces. Its exit status is failover.sh's: 77 (skipped) stays a skip.
SRD_FAILOVER_PROG=rma SRD_FAILOVER_CASES="rail-cut rail-cut-lanes" exec "$(dirname "$0")/failover.sh"
