#!/usr/bin/env bash
# TAP: the verbs transport (rdma_xport_verbs + rb_pipe) on a real verbs device:
# rxe0 inside the Soft-RoCE VM (or natively, see run-vm).  Builds
# test/xport/t_xport_verbs if needed, runs it through run-vm and passes its TAP
# through, preceded by an ib_write_lat reference figure from the same VM.
# Usage: prove test/xport/t-xport-verbs.t        (about 1-2 minutes under TCG)
# Select scenarios: CH3RDMA_T_XPORT_VERBS_ONLY=default,write-imm,basic,
#   simultaneous,late,kill,silent
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 1

# The automake build knows the sources and their dependencies: (re)make the
# program there (./configure, or test/run-tests.sh, makes that build).
build=${CH3RDMA_BUILD:-$TOP} log=$CACHE/t_xport_verbs.log
bin=$build/test/xport/t_xport_verbs
mkdir -p "$CACHE" && rm -f "$log"
if [ ! -f "$build/Makefile" ] || ! make -C "$build" test/xport/t_xport_verbs >"$log" 2>&1; then
    echo "1..1"
    ok 1 "t_xport_verbs builds (make -C $build test/xport/t_xport_verbs; no Makefile: run ./configure)"
    [ ! -f "$log" ] || diag <"$log"
    exit 1
fi

# Guest side: reference latency (not a test), then the TAP program.
guest='
ref() {
    command -v ib_write_lat >/dev/null || return 0
    . "$1/test/softroce/common.sh"
    local gid; gid=$(roce_v2_ipv4_gid rxe0) || return 0
    timeout 60 ib_write_lat -d rxe0 -x "$gid" -n 300 -s 8 -p 18611 >/dev/null 2>&1 &
    sleep 1
    timeout 60 ib_write_lat -d rxe0 -x "$gid" -n 300 -s 8 -p 18611 127.0.0.1 2>/dev/null |
        awk "/t_typical/ { getline; print \"# reference: ib_write_lat 8 B in this VM: t_min \" \$3 \
             \" us, t_typical \" \$5 \" us (host load makes every figure noisy)\" }"
    wait
}
ref "$1"
exec "$2"
'
exec "$TOP/test/softroce/run-vm" --timeout 900 -- bash -c "$guest" guest "$TOP" "$bin"
