#!/usr/bin/env bash
# TAP: the verbs transport (rdma_xport_verbs + rb_pipe) on a real verbs device:
# rxe0 inside the Soft-RoCE VM (or natively, see run-vm).  Builds
# test/verbs/t_xport_verbs if needed, runs it through run-vm and passes its TAP
# through, preceded by an ib_write_lat reference figure from the same VM.
# Usage: prove test/verbs/t-xport-verbs.t        (about 1-2 minutes under TCG)
# Select scenarios: CH3RDMA_T_XPORT_VERBS_ONLY=default,write-imm,basic,
#   simultaneous,late,kill,silent
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 1

srcs=(ringbuf/rb_pipe.c ringbuf/rb_pipe.h channel/src/rdma_xport.h
      channel/src/rdma_xport_verbs.c test/verbs/t_xport_verbs.c test/tap.h)
stale() {  # stale BINARY: missing or older than a source
    local s
    [ -x "$1" ] || return 0
    for s in "${srcs[@]}"; do [ "$s" -nt "$1" ] && return 0; done
    return 1
}

# The automake build (make check) if current, else our own in the cache.
bin=${CH3RDMA_BUILD:-$TOP}/test/verbs/t_xport_verbs
if stale "$bin"; then
    bin=$CACHE/t_xport_verbs/t_xport_verbs
    mkdir -p "${bin%/*}"
    if stale "$bin" && ! gcc -std=gnu11 -O2 -g -Wall -Wextra -Werror -Iringbuf -Ichannel/src \
            -Itest ringbuf/rb_pipe.c channel/src/rdma_xport_verbs.c test/verbs/t_xport_verbs.c \
            -libverbs -o "$bin" >"$bin.log" 2>&1; then
        echo "1..1"
        ok 1 "t_xport_verbs compiles"
        diag <"$bin.log"
        exit 1
    fi
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
