# lib.sh -- shared helpers for the project's shell tests (TAP output).
# Source it from a test script; it sets TOP, CACHE, and TAP functions.
TOP=${CH3RDMA_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
CACHE=${CH3RDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ch3-rdma}
export CH3RDMA_CACHE=$CACHE
_tap_n=0 _tap_fail=0

plan() { echo "1..$1"; }
ok() {  # ok STATUS DESCRIPTION
    _tap_n=$((_tap_n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $_tap_n - $2"; else echo "not ok $_tap_n - $2"; _tap_fail=$((_tap_fail + 1)); fi
}
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
diag() { sed 's/^/# /'; }
done_testing() { [ "$_tap_fail" -eq 0 ]; exit $?; }

# Installed prefix of an MPICH build of this project (rdma, sock, nemesis).
mpich_prefix() {
    local p="$CACHE/4.0.2/$1"
    [ -x "$p/bin/mpichversion" ] || {
        echo "no ch3:$1 build in $p: run $([ "$1" = rdma ] && echo make || echo make baselines)" >&2
        return 1
    }
    (cd "$p" && pwd -P)
}

# expect_output STATUS_WANTED REGEX DESCRIPTION -- CMD...: run CMD (600 s
# cap), pass if its exit status matches (0 / nonzero) and output matches.
expect_output() {
    local want=$1 re=$2 what=$3 out rc; shift 4
    out=$(timeout -k 5 "${EXPECT_TIMEOUT:-600}" "$@" 2>&1); rc=$?
    if { [ "$want" = 0 ] && [ $rc -eq 0 ]; } || { [ "$want" != 0 ] && [ $rc -ne 0 ] && [ $rc -ne 124 ]; }; then
        if echo "$out" | grep -Eq -- "$re"; then ok 0 "$what"; return 0; fi
    fi
    ok 1 "$what (exit $rc)"; echo "$out" | tail -30 | diag; return 1
}

# testsuite_tap OUT TAG: MPICH test-suite results OUT/summary-TAG.tap (testsuite.sh)
# as this test's TAP, one line per MPICH test; fails if any failed or none ran.
testsuite_tap() {
    local tap="$1/summary-$2.tap"
    [ -s "$tap" ] && grep -q '^\(not \)\?ok ' "$tap" || {
        plan 1; ok 1 "runtests produced results"
        tail -20 "$1/runtests-$2.log" 2>/dev/null | diag; return 1; }
    grep -c '^\(not \)\?ok ' "$tap" | sed 's/^/1../'
    awk '/^(not )?ok /{sub(/^(not )?ok [0-9]*/, ($1=="not" ? "not ok " : "ok ") ++n); print}' "$tap"
    ! grep -q '^not ok ' "$tap"
}
