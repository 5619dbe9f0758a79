#!/bin/bash
# Guest half of t-selftest.t (run through run-vm): device check, perftest latency pairs and
# verbs_selftest (its checks, then its ping-pong in both arrival modes). For each check NAME writes RESULTS/NAME.log and RESULTS/NAME.rc.
# usage: selftest-guest.sh RESULTS_DIR VERBS_SELFTEST_BINARY
set -uo pipefail
. "$(dirname "$0")/common.sh"
res=$1 verbs=$2 dev=${CH3RDMA_DEVICE:-rxe0}

check() {  # check NAME COMMAND...
    local name=$1 rc=0
    shift
    "$@" >"$res/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$res/$name.rc"
}

devinfo() { ibv_devinfo -v -d "$dev" && ibv_devinfo -d "$dev" | grep -q PORT_ACTIVE; }

# perftest server and client on this node over $dev; the client's output is the result.
perf_pair() {  # perf_pair PORT COMMAND ARGS...
    local port=$1 i rc=0
    shift
    timeout 120 "$@" -p "$port" >"$res/server-$port.log" 2>&1 &
    for ((i = 0; i < 100; i++)); do
        ss -ltn "sport = :$port" | grep -q LISTEN && break
        sleep 0.2
    done
    timeout 120 "$@" -p "$port" 127.0.0.1 || rc=$?
    wait $! || rc=1
    return "$rc"
}

gid=$(roce_v2_ipv4_gid "$dev")
check devinfo devinfo
check write_lat perf_pair 18515 ib_write_lat -d "$dev" -x "$gid" -n 200 -s 2
check read_lat perf_pair 18516 ib_read_lat -d "$dev" -x "$gid" -n 200 -s 2
check verbs timeout 120 "$verbs" "$dev"
check lat_imm timeout 120 env LAT_CALLS=64 "$verbs" "$dev" lat imm 2000 8 1024
check lat_write timeout 120 env LAT_TOUCH=16 "$verbs" "$dev" lat write 2000 8 1024
! grep -qvx 0 "$res"/*.rc
