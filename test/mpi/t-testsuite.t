#!/usr/bin/env bash
# MPICH's own test suite (fast subset) against ch3:rdma on shared memory.
# The full comparison with ch3:nemesis is `make testsuite-compare`.
. "$(dirname "$0")/../lib.sh"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$TOP/test/mpi/testsuite.sh" rdma "${TESTSUITE_DIRS:-init,pt2pt,datatype,errhan,spawn,rma}" "$out" | diag
testsuite_tap "$out" rdma
