#!/usr/bin/env bash
# verbs-guest.sh PREFIX DIR -- runs inside the Soft-RoCE VM (run-vm --nodes 2):
# ch3:rdma over verbs, on one "node" (verbs forced) and across two.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/build-progs.sh"
P=$1 W=$2
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-300}
plan 62

# Yama ptrace_scope 1 (this guest kernel has Yama): CMA between sibling
# ranks needs the target's PR_SET_PTRACER.  The ranks run without
# CAP_SYS_PTRACE, which would bypass Yama.
ptracer_checks() {
    local y=/proc/sys/kernel/yama/ptrace_scope old no='Operation not permitted'
    local drop=(setpriv --inh-caps=-sys_ptrace --bounding-set=-sys_ptrace --)
    if [ ! -w $y ]; then
        ok 0 "# SKIP Yama ptrace_scope: no Yama in this kernel"
        ok 0 "# SKIP Yama ptrace_scope: no Yama in this kernel"
        return
    fi
    old=$(cat $y) && echo 1 >$y
    mkdir -p "$W/pt1" "$W/pt2"
    expect_output 0 "cma before=$no after-large=$no after-finalize=$no" \
        "Yama scope 1, copy protocol: no rank opens itself to CMA" -- \
        "${drop[@]}" env MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy "$P/bin/mpiexec" -n 2 \
        "$W/mpi_ptracer" "$W/pt1"
    expect_output 0 "cma before=$no after-large=ok after-finalize=$no" \
        "Yama scope 1, zero-copy: a rank opens itself at its first exposure, closes at finalize" -- \
        "${drop[@]}" env MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy "$P/bin/mpiexec" -n 2 \
        "$W/mpi_ptracer" "$W/pt2"
    echo "$old" >$y
}
V=MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs
expect_output 0 '^1\.\.6' "verbs forced, 2 ranks, arrival mode auto" -- \
    env $V "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
rnr=/sys/class/infiniband/rxe0/ports/1/hw_counters/send_rnr_err
rnr0=$(cat $rnr 2>/dev/null)
expect_output 0 '^1\.\.6' "verbs forced, write-with-immediate arrival" -- \
    env $V MPIR_CVAR_CH3_RDMA_WRITE_IMM=1 "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
# receives are reposted in batches (rdma_verbs_data.c): still never too few posted
if [ -n "$rnr0" ]; then
    rnr1=$(cat $rnr)
    [ "$rnr1" = "$rnr0" ]
    ok $? "write-with-immediate: no receiver-not-ready NAK ($((rnr1 - rnr0)) sent)"
else
    ok 0 "# SKIP write-with-immediate RNR NAKs: rxe0 has no send_rnr_err counter"
fi
expect_output 0 '^1\.\.6' "verbs forced, basic pipe mode" -- \
    env $V MPIR_CVAR_CH3_RDMA_PIPE_MODE=basic "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
# mode_run MODE [VAR=VALUE...] PROG ARGS (2 ranks, verbose): r and jr, the
# exit status; modes, how many of the 2 connections run MODE
mode_run() {
    local m=$1
    shift
    out=$(env $V MPIR_CVAR_CH3_RDMA_VERBOSE=1 timeout 300 env "$@" 2>&1)
    r=$? jr=$?
    modes=$(grep -c "rank [01] -> [01]: verbs mode=$m " <<< "$out")
}
# mode_diag: a failed mode_run check's job status (a hang shows as the
# timeout), TAP and channel lines
mode_diag() {
    { [ "$jr" -ne 124 ] && echo "job exit status $jr" || echo "job exit status 124: timed out after 300 s"
      grep -E 'ok|verbs mode|ch3:rdma' <<< "$out"; } | diag
}
# rxe does not report in-order placement: the auto mode verifies small
# frames and writes the rest with immediate (rb_pipe.h, "Self-verifying
# frames"); random sizes mix both kinds in one stream
mode_run verified "$P/bin/mpiexec" -n 2 "$W/mpi_stress" --seconds 20 --max 1048576
[[ $r -eq 0 && $modes -eq 2 ]] && grep -q '^ok 1 .* 0 mismatches' <<< "$out"
r=$?
ok $r "verbs forced, auto mode self-verifying on both connections: randomized stress, 20 s, sizes 0..1 MiB, 0 mismatches"
[ $r -eq 0 ] || mode_diag
# the receives of both connections come from one shared receive queue; at 16
# (of 2 x 96 wanted) writes meet RNR NAKs and its limit event grows it
mode_run verified MPIR_CVAR_CH3_RDMA_SRQ_SIZE=16 "$P/bin/mpiexec" -n 2 "$W/mpi_stress" --seconds 10 --max 1048576
srqs=$(grep -Ec "rank [01] -> [01]: verbs .* rq=[0-9]+\(srq\) " <<< "$out")
grew=$(grep -Ec "rank [01] verbs: .*; srq: room (32|64|128|256), [1-9][0-9]* limit events, [1-9][0-9]* grows" <<< "$out")
[[ $r -eq 0 && $srqs -eq 2 && $grew -ge 1 ]] && grep -q '^ok 1 .* 0 mismatches' <<< "$out"
r=$?
ok $r "verbs forced, SRQ_SIZE=16: randomized stress, 10 s, both connections' receives in the shared queue ($srqs of 2), grown on its limit event ($grew of 2 ranks), 0 mismatches"
[ $r -eq 0 ] || mode_diag
mode_run verified MPIR_CVAR_CH3_RDMA_SRQ_SIZE=0 "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
own=$(grep -Ec "rank [01] -> [01]: verbs .* rq=[0-9]+ " <<< "$out")
[[ $r -eq 0 && $own -eq 2 ]] && grep -q '^1\.\.6' <<< "$out"
ok $? "verbs forced, SRQ_SIZE=0: a receive queue per connection ($own of 2), mpi_check 0..256 KiB"
# Flag polling (the pipe polls ring memory for the tail flag; what
# vm-lat's "flag" rows measure), forced here with the test hook, on the
# same data checks
F=CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER=1
flag_run() {
    mode_run flag-poll $F "$P/bin/mpiexec" -n 2 "$@"
}
flag_run "$W/mpi_check" 262144
[[ $r -eq 0 && $modes -eq 2 ]] && grep -q '^1\.\.6' <<< "$out" && ! grep -q '^not ok' <<< "$out"
r=$?
ok $r "verbs forced, flag polling forced: mpi_check 0..256 KiB, both connections polled ($modes of 2)"
[ $r -eq 0 ] || mode_diag
flag_run "$W/mpi_stress" --seconds 20 --max 1048576
[[ $r -eq 0 && $modes -eq 2 ]] && grep -q '^ok 1 .* 0 mismatches' <<< "$out"
r=$?
ok $r "verbs forced, flag polling forced: randomized stress, 20 s, sizes 0..1 MiB, 0 mismatches"
[ $r -eq 0 ] || mode_diag
# Over verbs a point-to-point header travels as its own struct, an
# eager-short one only up to its data's end (MPIDI_CH3I_pkt_wire_len): an
# 8-byte message is 32 B of frame payload, not 80 + 8 (nor the 40-byte struct)
out=$(env $V MPIR_CVAR_CH3_RDMA_VERBOSE=1 "$P/bin/mpiexec" -n 2 "$W/mpi_hot" 2000 8 1000000 2>&1)
per=$(sed -n 's/.*rank 0 -> 1: .*ring frames \([0-9]*\) (\([0-9]*\) B).*/\2 \1/p' <<< "$out" \
    | awk '$2 > 0 { print int($1 / $2) }')
[[ -n $per && $per -le 32 ]]
ok $? "verbs forced, 8-byte messages: ${per:-?} B of payload per ring frame (short headers; at most 32)"
# MPI_Finalize must not wait out close()'s drain bound (two ACK timeouts,
# 8.6 s at the default CONNECT_TIMEOUT) for a write to a peer that has
# already left: a handful of jobs, each rank's finalize timed
fin_check() {
    local what=$1 i max=0 t
    shift
    for i in 1 2 3 4 5; do
        out=$(timeout 300 "$@" "$W/mpi_fin" 100 2>&1)
        t=$(sed -n 's/^rank [0-9]*: finalize \([0-9.]*\) s$/\1/p' <<< "$out" | sort -g | tail -1)
        [ -n "$t" ] || { max=none; break; }
        max=$(awk -v a="$max" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
    done
    awk -v m="$max" 'BEGIN { exit !(m != "none" && m < 3) }'
    ok $? "$what: MPI_Finalize within 3 s in 5 jobs (longest ${max} s)"
    [ "$max" != none ] || echo "$out" | diag
}
fin_check "verbs forced, 2 ranks" env $V "$P/bin/mpiexec" -n 2
fin_check "2 nodes, verbs across" "$P/bin/mpiexec" -hosts node0,node1 -n 2
expect_output 0 'rank 0 on node0' "2 nodes x 2 ranks (shm on-node, verbs across)" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_check" 262144
expect_output 0 'pi is approximately' "cpi across 2 nodes" -- "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/cpi"
# One-sided MPI and MPI-3 shared memory (rdma_win.c): node communicators
# of the node's 2 ranks, shared windows within each node, RMA across
expect_output 0 '^ok 5 ' "2 nodes x 2 ranks: node communicators of 2, shared windows share on each node" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_shm_win"
expect_output 1 'shared window: no shared memory \(MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs\)' \
    "verbs forced: MPI_COMM_TYPE_SHARED is each rank alone, MPI_Win_allocate_shared says why it cannot share" -- \
    env $V "$P/bin/mpiexec" -n 2 "$W/mpi_shm_win"
# The cap on live connections (MAX_CONNS, rdma_chan_evict.c): all-to-all
# and a drifting ring exchange, every byte verified; each rank's counters
# (rdma_conns_* pvars): every peer opened, evictions, never more than the
# cap open (rdma_conns_live_max: connects and peers wait for a slot)
conns_check() {
    local what=$1 cap=$2 np=$3 peers=$4 bad
    shift 4
    out=$(timeout 900 env MPIR_CVAR_CH3_RDMA_MAX_CONNS=$cap "$@" "$W/mpi_conns" 3 1024 2>&1)
    r=$?
    bad=$(awk -v cap="$cap" -v np="$np" -v peers="$peers" '/^rank [0-9]+: opened/ {
              n++; ev += $6
              if ($4 < peers || $8 > cap || $10 < 1 || $10 > cap) bad++ }
          END { if (n != np || ev == 0) bad++; print bad + 0 }' <<< "$out")
    [[ $r -eq 0 && $bad -eq 0 ]] && grep -q "^ok: $np ranks" <<< "$out"
    r=$?
    ok $r "$what: every byte verified, each rank opened every peer, $(awk '/^rank [0-9]+: opened/ { e += $6 } END { print e + 0 }' <<< "$out") evictions, at most $cap open at once (peak $(awk '/^rank [0-9]+: opened/ && $10 > m { m = $10 } END { print m + 0 }' <<< "$out"))"
    [ $r -eq 0 ] || echo "$out" | grep -E 'rank|ok|rror' | head -30 | diag
}
conns_check "2 nodes x 8 ranks, MAX_CONNS=4 (8 peers over verbs each)" 4 16 8 \
    "$P/bin/mpiexec" -hosts node0,node1 -n 16
# MPI_Finalize's close protocol meets evicted connections (CH3 asserted on
# a CLOSE to a VC an eviction had made INACTIVE)
conns_check "verbs forced, 8 ranks, MAX_CONNS=2 (7 peers each), then MPI_Finalize" 2 8 7 \
    env $V MPIR_CVAR_CH3_RDMA_VERBOSE=1 "$P/bin/mpiexec" -n 8
# ... and no close of those waited its drain bound (8.6 s) for the ACK of
# its last frame: the peer that read that frame keeps its QP a while
# (rdma_verbs_conn_linger) instead of destroying it before the ACK left
read -r nl nc nb < <(grep -o "closes: [0-9]*, [0-9]* waited the drain bound" <<< "$out" |
    awk '{ c += $2; b += $3; n++ } END { print n + 0, c + 0, b + 0 }')
[[ $nl -eq 8 && $nc -gt 0 && $nb -eq 0 ]]
r=$?
ok $r "verbs forced, 8 ranks, MAX_CONNS=2: $nc closes, $nb of them waited the drain bound (VERBOSE, $nl ranks)"
[ $r -eq 0 ] || grep "drain bound" <<< "$out" | diag
# A connect that waits for its own slot after the peer answered (its link to
# the sleeping rank 0 is busy): its WAIT answers to the REP keep extending the
# peer's deadline, far past CONNECT_TIMEOUT
expect_output 0 '^ok: rank 1 waited ([6-9]|[1-9][0-9])\.' "verbs forced, MAX_CONNS=1, CONNECT_TIMEOUT=3: rank 1 waits at least 6 s for rank 2 to take a slot (its connect answered), not taken for dead" -- \
    env $V MPIR_CVAR_CH3_RDMA_MAX_CONNS=1 MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT=3 \
    MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy "$P/bin/mpiexec" -n 3 "$W/mpi_conn_wait" 8 65536
expect_output 0 '^1\.\.18$' "2 nodes x 2 ranks: RMA stress, 20 s, 3 window flavours x 6 synchronisation modes verified" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_rma_stress" 20
# Direct puts and gets (rdma_rma.c): RDMA write/read across, CMA on a node
expect_output 0 '^1\.\.10$' "2 nodes: puts and gets as RDMA writes and reads, every sync mode, exclusive-lock counter (each unlock waits for its write), started at the call once the lock is granted" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/mpi_rma_direct"
expect_output 0 '^1\.\.10$' "verbs forced, 2 ranks: the same over RDMA on one node" -- \
    env $V "$P/bin/mpiexec" -n 2 "$W/mpi_rma_direct"
expect_output 0 '^1\.\.10$' "2 nodes x 2 ranks: RDMA across, CMA (from 1 KiB) on each node, dynamic windows direct on the node only, with coll_attach across too" -- \
    env MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN=1024 "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_rma_direct"
# Accumulates the NIC does (rdma_rma.c, "Atomics"): windows with the hints
expect_output 0 '^1\.\.8$' "2 nodes: fetch-and-add, compare-and-swap, accumulate and get_accumulate through the NIC (the owner's own through its loopback QP; a dynamic window with coll_attach too), every result right" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/mpi_rma_amo" 1
expect_output 0 '^1\.\.8$' "verbs forced, 3 ranks: the same, node peers through the NIC too" -- \
    env $V "$P/bin/mpiexec" -n 3 "$W/mpi_rma_amo" 1
expect_output 0 '^1\.\.8$' "2 nodes x 2 ranks, MPI_Win_allocate: node peers' parts through the node segment, the rest across, all through the NIC (dynamic windows: messages)" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_rma_amo" 2
# fences' accumulates to a peer not connected yet: the closing fence's
# one issue pass left them queued on an inactive window (a hang)
expect_output 0 '^1\.\.1$' "2 nodes x 2 ranks, MAX_CONNS=1: 40 fence epochs of NIC accumulates, each epoch's to a peer not connected: every epoch ends, the sums right" -- \
    env MPIR_CVAR_CH3_RDMA_MAX_CONNS=1 "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_rma_amo" 4
expect_output 0 '^1\.\.8$' "2 ranks on one node, MPI_Win_allocate: CH3's loads and stores, none through the NIC (the window spans no nodes)" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_rma_amo" 3
expect_output 0 '^1\.\.8$' "2 nodes x 2 ranks, MPI_Win_create and dynamic windows: node peers over shared memory, so CH3's messages do them, none through the NIC" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_rma_amo" 0
# The channel's rendezvous (rdma_rndv.c): RDMA read into the receive buffer
expect_output 0 '^ok 9 ' "verbs forced, rendezvous: 9 cases (1 MiB; 24 of 256 KiB in flight; 96 KiB eagerly, a vector too) read with RDMA, each on the path it should take" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_rndv" 1 0
expect_output 0 '^ok 9 ' "2 nodes: the same across" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/mpi_rndv" 1 0
expect_output 0 'verbs: rcache on, send: hits [1-9]' \
    "verbs forced, zero-copy RDMA read: 0..4 MiB, remapped buffers, data verified" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy MPIR_CVAR_CH3_RDMA_VERBOSE=1 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
# first touch of a malloc'd buffer 16 bytes past a page: registered in a few
# windows, not once per RDMA read (it was 128 misses)
expect_output 0 'rank 1 verbs: rcache on, send: [^;]*; [^;]*; receive: hits [0-9]+ misses [1-4] ' \
    "verbs forced, 128 MiB first-touch zero-copy into offset 16: at most 4 receive registrations" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy MPIR_CVAR_CH3_RDMA_VERBOSE=1 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 0 huge 128 16
# MPI_T over verbs: the registration cache and the pinned-memory peak
out=$(env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy timeout 300 "$P/bin/mpiexec" -n 2 \
    "$W/mpi_pvars" 100 4194304 8 2>&1)
grep -q '^rank 0: rdma_rcache_hits [1-9]' <<< "$out" && grep -q '^rank 0: rdma_rndv_sends [1-9]' <<< "$out" &&
    grep -q '^rank 0: rdma_pinned_bytes_max [1-9][0-9]\{6\}' <<< "$out"
r=$?
ok $r "verbs forced, MPI_T: rcache hits, messages by the channel's rendezvous, a pinned-bytes peak of at least 1 MB"
[ $r -eq 0 ] || echo "$out" | grep '^rank 0' | diag
# Growing rings (issue 19): small messages leave the rings at their first
# 16 KiB (RING_INIT_SIZE); 4 MiB through the ring grows both to RING_SIZE
out=$(env $V timeout 300 "$P/bin/mpiexec" -n 2 "$W/mpi_pvars" 1000 64 4 2>&1)
grep -q '^rank 0: rdma_ring_bytes 32768$' <<< "$out" && grep -q '^rank 0: rdma_ring_grows 0$' <<< "$out"
r=$?
ok $r "verbs forced, small messages: 32 KiB of ring memory for the peer (16 KiB ring and stage)"
[ $r -eq 0 ] || echo "$out" | grep '^rank 0: rdma_ring' | diag
out=$(env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy timeout 300 "$P/bin/mpiexec" -n 2 \
    "$W/mpi_pvars" 100 4194304 4 2>&1)
grep -q '^rank 0: rdma_ring_grows 5$' <<< "$out" && grep -q '^rank 0: rdma_ring_bytes 1048576$' <<< "$out"
r=$?
ok $r "verbs forced, 4 MiB copied through the ring both ways, verified: 5 moves each way, 16 KiB -> 512 KiB"
[ $r -eq 0 ] || echo "$out" | grep '^rank 0: rdma_ring' | diag
# ... and with RING_IDLE=1, 4 s of polling without messages bring them back
out=$(env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy MPIR_CVAR_CH3_RDMA_RING_IDLE=1 timeout 300 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_pvars" 100 4194304 4 1 4 2>&1)
grep -q '^rank 0: rdma_ring_grows 5$' <<< "$out" && grep -q '^rank 0: rdma_ring_shrinks 1$' <<< "$out" &&
    grep -q '^rank 0: rdma_ring_bytes 32768$' <<< "$out"
r=$?
ok $r "verbs forced, RING_IDLE=1: after the 4 MiB round trips and 4 s idle the rings are back at 16 KiB"
[ $r -eq 0 ] || echo "$out" | grep '^rank 0: rdma_ring' | diag
# Seed 004 (issue 18): 64 distinct 4 MiB buffers cycled four times under
# a 32 MiB cap (rings included) with the registration helper: idle
# registrations make room, the helper registers ahead of use: send-side
# hits (both ranks' sum), where the cyclic LRU alone has none (receive
# windows hit anyway, one registration serves four 1 MiB reads); data
# intact.  The predictor works from measured times: on the emulated VM a
# run can miss every send (seen in CI: 243 registrations, 0 send hits;
# later two runs in a row, 135 and 72), so a run without any is repeated,
# up to 3 runs; a helper that registers too early or too late misses in
# all of them.
helper_run() {
    out=$(env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB=32 \
        MPIR_CVAR_CH3_RDMA_REG_HELPER=1 MPIR_CVAR_CH3_RDMA_VERBOSE=1 timeout 600 \
        "$P/bin/mpiexec" -n 2 "$W/mpi_pvars" 10 4194304 256 64 2>&1)
    r=$?
    max=$( (pv 0 pinned_bytes_max; pv 1 pinned_bytes_max) | sort -n | tail -1)
    zp=$(( $(pv 0 zcopy_parts) + $(pv 0 rndv_sends) ))
    hr=$(pv 0 helper_registrations) hits=$(pv 0 rcache_hits)
    sh=$(sed -n 's/.*rank [01] verbs: rcache on, send: hits \([0-9]*\) .*/\1/p' <<< "$out" |
        awk '{ s += $1 } END { print s + 0 }')
}
pv() { sed -n "s/^rank $1: rdma_$2 \([0-9]*\)$/\1/p" <<< "$out"; }
helper_run
for try in 2 3; do
    [[ $r -eq 0 && $sh -eq 0 ]] || break
    echo "# helper run without send-side hits (${hr:-?} registrations ahead); run $try of 3"
    helper_run
done
[[ $r -eq 0 && -n $max && $max -le 33554432 && ${zp:-0} -ge 128 && ${hr:-0} -gt 0 && ${hits:-0} -gt 0 && ${sh:-0} -gt 0 ]]
r=$?
ok $r "verbs forced, PINNED_MAX_MB=32 + REG_HELPER, 64 x 4 MiB buffers x 4: pinned at most ${max:-?} B, ${zp:-?} zero-copy parts and messages, ${hr:-?} helper registrations, ${hits:-?} hits (${sh:-?} on the send side, both ranks), data intact"
[ $r -eq 0 ] || echo "$out" | grep -E '^rank 0|verbs:|ch3:rdma' | diag
# Seed 001 (issue 18): 2,000 ping-pongs of 8 KiB from one buffer across
# the two nodes, registered after 8 uses: eager sends gathered from user
# memory on both sides, every round's bytes checked
out=$(env MPIR_CVAR_CH3_RDMA_EAGER_REG_USES=8 MPIR_CVAR_CH3_RDMA_VERBOSE=1 timeout 600 \
    "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/mpi_pvars" 10 8192 2000 2>&1)
r=$?
e0=$(pv 0 eager_zcopy_sends) e1=$(pv 1 eager_zcopy_sends)
[[ $r -eq 0 && ${e0:-0} -ge 1900 && ${e1:-0} -ge 1900 ]]
r=$?
ok $r "2 nodes, EAGER_REG_USES=8, 2000 x 8 KiB ping-pongs from one buffer: ${e0:-?} / ${e1:-?} eager sends from user memory, data intact"
[ $r -eq 0 ] || echo "$out" | grep -E '^rank|verbs:|ch3:rdma' | diag
out=$(env $V MPIR_CVAR_CH3_RDMA_EAGER_REG_USES=1 MPIR_CVAR_CH3_RDMA_VERBOSE=1 timeout 300 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_stress" --seconds 20 --max 65536 2>&1)
r=$?
eg=$(sed -n 's/.*rank [01] -> [01]: .*eager from user memory \([0-9]*\);.*/\1/p' <<< "$out" |
    awk '{ s += $1 } END { print s + 0 }')
[[ $r -eq 0 && ${eg:-0} -gt 0 ]] && grep -q '^ok 1 .* 0 mismatches' <<< "$out"
r=$?
ok $r "verbs forced, EAGER_REG_USES=1, randomized stress, 20 s: ${eg:-?} eager sends from user memory, 0 mismatches"
[ $r -eq 0 ] || echo "$out" | grep -E '^(not )?ok|rank 0 -> 1|ch3:rdma\] rank' | diag
expect_output 1 'MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB=1 leaves nothing for user buffers: the rings and staging areas of 1 verbs peer alone pin [0-9]+ KiB' \
    "verbs forced, PINNED_MAX_MB below the rings (fixed 512 KiB rings): MPI_Init fails naming both values" -- \
    env $V MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB=1 MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE=524288 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_check" 4096
expect_output 0 'rank 0 -> 1: zero-copy 0 .* copy [1-9]' "verbs forced, copy path only (superpipeline)" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy MPIR_CVAR_CH3_RDMA_VERBOSE=1 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 '^ok 6 ' "verbs forced, copy path, fixed 16 KiB frames" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy MPIR_CVAR_CH3_RDMA_PIPELINE=fixed \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 '^ok 6 ' "large messages across 2 nodes x 2 ranks (auto)" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_large" 2
expect_output 0 'fork=(unneeded|enabled)' \
    "verbs forced, fork()+exec and children writing into buffers in flight; fork mode reported" -- \
    env $V MPIR_CVAR_CH3_RDMA_VERBOSE=1 "$P/bin/mpiexec" -n 2 "$W/mpi_fork"
expect_output 0 '^ok 1 .* 0 mismatches' "verbs forced, randomized stress, 40 s, sizes 0..4 MiB" -- \
    env $V "$P/bin/mpiexec" -n 2 "$W/mpi_stress" --seconds 40 --max 4194304
ptracer_checks
# Dynamic processes over verbs: process groups on two nodes (mpi_spawn exits
# 1 if one of its checks failed), then two jobs launched apart (port_checks)
expect_output 0 'rank 0 -> [0-9]+: verbs' \
    "spawn: 1 parent on node0, 2 children on node1 over verbs (data, merge, port, disconnect)" -- \
    env MPI_SPAWN_HOST=node1 MPIR_CVAR_CH3_RDMA_VERBOSE=1 "$P/bin/mpiexec" -hosts node0,node1 -n 1 \
    "$W/mpi_spawn" 2
expect_output 0 '^ok 4 ' "spawn: parents on node0 and node1, children on node1 (verbs and shm between the groups)" -- \
    env MPI_SPAWN_HOST=node1 "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/mpi_spawn" 2
expect_output 0 '^ok 4 ' "spawn, verbs forced on one node: 4 MiB between the groups" -- \
    env $V "$P/bin/mpiexec" -n 1 "$W/mpi_spawn" 2 4194304
# Deaths found by the keepalive's retries (CONNECT_TIMEOUT 4 s; before
# 2026-11-30: MPI_ERR_OTHER, then a fatal error in MPI_Finalize)
spawn_fault_checks "verbs forced" "[0-9]+" $V MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT=4
port_checks node1 node0
port_frames node1 node0
# Over verbs a client killed while queued is noticed only when the accept
# writes to it (before 2026-12-02 that MPI_Comm_accept then failed)
port_soak 3 verbs die,forge,ring 2000 5000 node1 node0 MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE=32768
expect_output 1 'ulimit -l' "low memlock limit gives a one-line diagnosis" -- \
    bash -c 'ulimit -l 64; exec env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs '"$P/bin/mpiexec"' -n 2 '"$W/cpi"
done_testing
