#!/bin/bash
# TAP: Soft-RoCE self-test. Boots the VM once (or runs natively, see run-vm) and checks rxe0,
# perftest ib_write_lat/ib_read_lat and verbs_selftest.c (checks and ping-pong). Usage: prove test/softroce/t-selftest.t
# Logs are kept in <cache>/softroce/selftest-last/.
set -euo pipefail
. "$(dirname "$0")/common.sh"

echo "1..11"
res=$(mktemp -d /tmp/softroce-selftest.XXXXXX)
trap 'mkdir -p "$SOFTROCE_CACHE" && rm -rf "$SOFTROCE_CACHE/selftest-last" &&
      mv "$res" "$SOFTROCE_CACHE/selftest-last"' EXIT

rc=0
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$res/verbs_selftest" \
    "$SOFTROCE_DIR/verbs_selftest.c" "$SOFTROCE_DIR/lat_calls.c" -libverbs >"$res/cc.log" 2>&1 || rc=$?
tap $rc "verbs_selftest.c compiles"
[[ $rc == 0 ]] || diag "$res/cc.log"

rc=0
start=$(date +%s)
read -ra runvm_args <<<"${CH3RDMA_SELFTEST_RUNVM_ARGS:-}"   # e.g. "--vm" or "--native"
"$SOFTROCE_DIR/run-vm" "${runvm_args[@]}" -- "$SOFTROCE_DIR/selftest-guest.sh" \
    "$res" "$res/verbs_selftest" >"$res/run-vm.log" 2>&1 || rc=$?
tap $rc "run-vm runs the guest self-test ($(($(date +%s) - start)) s)"
[[ $rc == 0 ]] || diag "$res/run-vm.log"

result() {  # result NAME DESCRIPTION: the guest check NAME, with its log on failure
    local rc=1
    [[ -f $res/$1.rc ]] && rc=$(<"$res/$1.rc")
    tap "$rc" "$2"
    [[ $rc == 0 || ! -f $res/$1.log ]] || diag "$res/$1.log"
}
perf_figures() {  # the table row of a perftest latency run
    awk '/t_min/ { getline; print "# " name ": bytes iters t_min t_max t_typical t_avg (usec): " \
         $1, $2, $3, $4, $5, $6 }' name="$1" "$res/$1.log" 2>/dev/null || true
}
verbs_op() {  # verbs_op OP DESCRIPTION
    local rc=0
    grep -qx "op $1: PASS" "$res/verbs.log" 2>/dev/null || rc=1
    tap $rc "$2"
    grep " $1 " "$res/verbs.log" 2>/dev/null | diag || true
}

result devinfo "ibv_devinfo -d rxe0 shows PORT_ACTIVE"
result write_lat "ib_write_lat over rxe0"
perf_figures write_lat
result read_lat "ib_read_lat over rxe0"
perf_figures read_lat
grep '^#' "$res/verbs.log" 2>/dev/null || true
verbs_op write "verbs RC RDMA WRITE 1 B, 4 KiB, 1 MiB verified"
verbs_op read "verbs RC RDMA READ 1 B, 4 KiB, 1 MiB verified"
verbs_op write_imm "verbs RC RDMA WRITE WITH IMM: imm, byte_len and data verified"
result lat_imm "verbs_selftest lat imm: 8 B and 1 KiB frames found by their completions, each verified (LAT_CALLS=64)"
grep '^# lat' "$res/lat_imm.log" 2>/dev/null || true
result lat_write "verbs_selftest lat write: 8 B and 1 KiB frames found by polling memory, each verified (LAT_TOUCH=16)"
grep '^# lat' "$res/lat_write.log" 2>/dev/null || true
rc=0
grep -q '^data_in_order RDMA_WRITE: [01]$' "$res/verbs.log" 2>/dev/null || rc=1
tap $rc "ibv_query_qp_data_in_order answers for RDMA_WRITE"
grep '^data_in_order' "$res/verbs.log" 2>/dev/null | diag || true
echo "# logs: $SOFTROCE_CACHE/selftest-last"
