#!/usr/bin/env bash
# testsuite.sh BUILD DIRS OUT -- run MPICH's own test/mpi directories DIRS
# (comma list, e.g. init,pt2pt) against BUILD (rdma|sock|nemesis) with its
# runtests; writes OUT/summary-BUILD.{tap,xml} and prints "BUILD: P of N passed".
# Extra environment (e.g. MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs) is inherited.
# TESTSUITE_BUILD_ONLY=1: only build the helper libraries and DIRS' programs.
# TESTSUITE_LIST=NAME: each directory's list of tests is NAME, not testlist
# (a subset written beside it, e.g. to finish a run that was cut short).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
build=$1 dirs=$2 out=$(mkdir -p "$3" && cd "$3" && pwd)
P=$(mpich_prefix "$build")
T=$P/../build/test/mpi
[ -x "$T/runtests" ] || { echo "testsuite: no configured test suite in $T" >&2; exit 1; }
tag=${TESTSUITE_TAG:-$build}
# The helper libraries first: a fresh test tree builds them on demand from
# inside single tests, which has failed there (datatype/sendrecvt2).
(cd "$T/util" && make libmtest_single.la libmtest.la libdtypes.la > "$out/util-build-$tag.log" 2>&1) ||
    { echo "testsuite: building $T/util failed (see $out/util-build-$tag.log)" >&2; exit 1; }
if [ -n "${TESTSUITE_BUILD_ONLY:-}" ]; then
    for d in ${dirs//,/ }; do make -C "$T/$d" -k > "$out/prebuild-${d//\//-}.log" 2>&1 || true; done
    exit 0
fi
(cd "$T" && make testing TESTDIRS="$dirs" TESTLIST="${TESTSUITE_LIST:-testlist}" MPIEXEC="$P/bin/mpiexec" \
    SUMMARY_BASENAME="$out/summary-$tag" > "$out/runtests-$tag.log" 2>&1) || true
total=$(grep -c '^\(not \)\?ok ' "$out/summary-$tag.tap" || true)
failed=$(grep -c '^not ok ' "$out/summary-$tag.tap" || true)
echo "$tag: $((total - failed)) of $total passed ($dirs)"
