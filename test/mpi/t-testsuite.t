#!/usr/bin/env bash
# MPICH's own test suite (fast subset) against ch3:rdma on shared memory.
# The full comparison with ch3:nemesis is `make testsuite-compare`.
. "$(dirname "$0")/../lib.sh"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$TOP/test/mpi/testsuite.sh" rdma "${TESTSUITE_DIRS:-init,pt2pt,datatype,errhan}" "$out" | diag
tap="$out/summary-rdma.tap"
[ -s "$tap" ] || { echo "1..1"; ok 1 "runtests produced results"; tail -20 "$out"/runtests-rdma.log | diag; exit 1; }
grep -c '^\(not \)\?ok ' "$tap" | sed 's/^/1../'
grep '^\(not \)\?ok ' "$tap" | awk '/^(not )?ok /{sub(/^(not )?ok [0-9]+/, ($1=="not" ? "not ok " : "ok ") ++n)} {print}'
! grep -q '^not ok ' "$tap"
