#!/usr/bin/env bash
# The README's test command: installs what is missing, configures, builds
# MPICH 4.0.2 with ch3:rdma (cached outside the repository), runs every test
# (unit, Soft-RoCE self-test, verbs transport, MPI over shm and verbs) and
# ends with "N passed, N failed".
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash build-aux/install-deps.sh build vm
[ -f Makefile ] || ./configure ${CONFIGURE_ARGS:-}
make -j"$(nproc)"
rc=0
make -j1 check || rc=$?
log=test-suite.log
count() { sed -n "s/^# $1: *\([0-9]*\).*/\1/p" "$log" | head -1; }
if [ -f "$log" ]; then
    pass=$(count PASS) fail=$(( $(count FAIL) + $(count ERROR) + $(count XPASS) )) skip=$(count SKIP)
    [ "$rc" -eq 0 ] || grep -E '^(FAIL|ERROR)' "$log" | head -40 || true
    echo "${pass:-0} passed, ${fail:-0} failed, ${skip:-0} skipped"
fi
exit "$rc"
