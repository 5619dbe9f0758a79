#!/usr/bin/env bash
# life-guest.sh PREFIX DIR -- runs inside the Soft-RoCE VM (run-vm --nodes 2):
# connection lifecycle under real timing, over verbs between the two node
# names (mpi_life, mpi_large; CONNECT_TIMEOUT 5 s unless said otherwise).
. "$(dirname "$0")/../lib.sh"
P=$1 W=$2 T=5
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-400}
V=(env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT=$T)
H=(-hosts node0,node1)
plan 13

expect_output 0 'late: ok after' \
    "a rank that computes 3x CONNECT_TIMEOUT before its first receive gets its message" -- \
    "${V[@]}" "$P/bin/mpiexec" "${H[@]}" -n 2 "$W/mpi_life" late $((3 * T))
expect_output 0 'window: rank 0 finalized' \
    "a rank exits right after its close handshake while rank 0 waits 3x the timeout in finalize" -- \
    "${V[@]}" "$P/bin/mpiexec" "${H[@]}" -n 3 "$W/mpi_life" window $((3 * T))
# (the four ranks' lines may interleave: count the words)
expect_output 0 '(finalized.*){4}' \
    "4 ranks on 2 nodes (shm and verbs) whose finalize calls are 40 s apart" -- \
    bash -c "'$P/bin/mpiexec' ${H[*]} -n 4 '$W/mpi_life' stagger 40 | tr '\n' ' '"

# A killed rank: the survivor reports it within the timeout, naming rank and
# host.  Hydra must not kill the survivor first (-disable-auto-cleanup),
# and its SIGUSR1 notice of the death must not either.
t0=$(date +%s.%N)
out=$("${V[@]}" timeout 120 "$P/bin/mpiexec" -disable-auto-cleanup "${H[@]}" -n 2 \
    "$W/mpi_life" kill 2>&1)
krc=$? took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
t=$(sed -n 's/^kill: rank 0 saw the failure after \([0-9.]*\) s:.*/\1/p' <<<"$out")
ok $([[ -n $t ]] && awk -v t="$t" -v T=$T 'BEGIN { exit !(t <= T + 1) }' && echo 0 || echo 1) \
    "a SIGKILLed rank is reported within the timeout (${t:-never} s, timeout $T s)"
grep -q 'rank 1 on node1' <<<"$out"
ok $? "the diagnosis names the dead rank and its host"
[[ $(grep -c . <<<"$out") -lt 40 ]] && grep -E 'kill:|ch3:rdma|rank 1' <<<"$out" | head -5 | diag
[[ -n $t ]] || { echo "no 'kill:' line (mpiexec exit status $krc after $took s); the output ends:"
    tail -n 15 <<<"$out"; } | diag

# Rank 1 (node1) exits without MPI_Finalize while ranks 0 and 2 (node0)
# exchange over verbs: their traffic goes on, verified, and rank 0's
# receive from rank 1 fails with MPIX_ERR_PROC_FAILED.
expect_output 1 '^others: ok ' \
    "ranks 0 and 2 exchange 1 MiB over verbs, verified, while and after rank 1 dies; a receive from it fails" -- \
    "${V[@]}" "$P/bin/mpiexec" -disable-auto-cleanup "${H[@]}" -n 3 "$W/mpi_life" others exit

# Requests waiting for the answer of a rank on the other node that dies
# each fail: a send's (RTS: CTS or DONE; a synchronous send's ack), a
# receive's in CH3's rendezvous (CTS: data; LARGE_PROTOCOL=copy, since the
# channel's rendezvous reads without the sender, which may finish before
# it dies), and a receive posted after the message's sender died (both
# rendezvous: the read or the CTS fails, or the failure is known first).
for m in bigsend copy:bigrecv copy:bigpost bigread copy:bigread ssend; do
    e=() how=""
    [[ $m == copy:* ]] && e=(MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy) how=" (CH3's rendezvous)"
    expect_output 1 "^${m#copy:}: MPIX_ERR_PROC_FAILED after" \
        "${m#copy:} over verbs$how: waiting for the answer of a rank that dies fails with MPIX_ERR_PROC_FAILED" -- \
        env "${e[@]}" "${V[@]}" "$P/bin/mpiexec" -disable-auto-cleanup "${H[@]}" -n 2 "$W/mpi_life" "${m#copy:}" exit
done

# A receiver whose pinning fails mid-rendezvous (no CAP_IPC_LOCK, 16 MiB
# memlock, a 64 MiB message whose first 8 MiB it can pin, the rest not)
# falls back to the copy path for the rest, data intact.
expect_output 0 'rank 1: cannot register .*using the copy path.*ok 1 - 64 MiB message .* verified' \
    "a receiver that pins 8 MiB of 64 MiB, then no more (ulimit -l 16 MiB, no CAP_IPC_LOCK): copy path for the rest, data intact" -- \
    bash -c "$(printf '%q ' "${V[@]}") MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy \
        MPIR_CVAR_CH3_RDMA_VERBOSE=1 '$P/bin/mpiexec' -n 1 '$W/mpi_large' 0 huge 64 edge : \
        -n 1 setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock -- \
        bash -c 'ulimit -l 16384 && exec $W/mpi_large 0 huge 64 edge' 2>&1 | tr '\n' ' '"
done_testing
