#!/usr/bin/env bash
# Large messages on this host's shared-memory transport: every protocol
# forced in turn (zero-copy = CMA), data verified, the path taken checked
# in the MPIR_CVAR_CH3_RDMA_VERBOSE report; CMA forbidden -> ring fallback;
# which messages skip CH3's rendezvous (EAGER_MAX).
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 36
mpi_setup
V="MPIR_CVAR_CH3_RDMA_VERBOSE=1"
L=MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL
expect_output 0 'rank 0 -> 1: zero-copy [1-9].*refused 0/0, split [0-9]+ \(pushed [1-9]' \
    "zcopy (CMA), 2 ranks, 0..64 MiB; the sender pushes half of the large parts" -- \
    env $V $L=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_large"
expect_output 0 'rank 0 -> 1: zero-copy [1-9].*split 0 \(pushed 0 B' \
    "zcopy (CMA) with split copy off: the receiver copies alone" -- \
    env $V $L=zcopy MPIR_CVAR_CH3_RDMA_CMA_SPLIT=0 "$P/bin/mpiexec" -n 2 "$W/mpi_large" 8
expect_output 0 'rank 0 -> 1: zero-copy 0 .* copy [1-9]' "copy path only, 2 ranks" -- \
    env $V $L=copy "$P/bin/mpiexec" -n 2 "$W/mpi_large"
# the address a remapped buffer had is taken meanwhile (mmap_taken.c): both
# ranks go on with memory elsewhere, none gives up while the other waits
expect_output 0 '^ok 3 - receive buffer unmapped and mapped again' \
    "remaps whose old address is taken (EEXIST) map elsewhere: all checks pass" -- \
    env LD_PRELOAD="$W/mmap_taken.so" "$P/bin/mpiexec" -n 2 "$W/mpi_large" 8
# auto: the shm transport's probe (rdma_shm_probe.c) says which path large
# parts take on this host, and they take it
out=$(env $V $L=auto timeout 600 "$P/bin/mpiexec" -n 3 "$W/mpi_large" 8 2>&1); r=$?
want='rank 0 -> 1: zero-copy [1-9]'
grep -q 'rank 0: shm: large messages through the ring' <<< "$out" &&
    want='rank 0 -> 1: zero-copy 0 .* copy [1-9]'
probe='rank 0: shm: large messages (zero-copy|through the ring): process_vm_readv took [0-9.]+x the time of the ring.s copy between two cores \(1 MiB: CMA [0-9.]+, ring [0-9.]+'
[ $r -eq 0 ] && grep -Eq "$probe" <<< "$out" && grep -Eq "$want" <<< "$out"
r=$?
ok $r "auto, 3 ranks (oversubscribed): the probe timed the ring between two cores, large parts take the path it chose ($(grep -o \
    'large messages [^:]*: process_vm_readv took [0-9.]*x' <<< "$out" | head -1))"
[ $r -eq 0 ] || echo "$out" | tail -30 | diag
# Both ranks bound to one CPU: the probe's helper runs on another (or the
# probe says memcpy stood in), and nothing waits for it
out=$(env $V $L=auto timeout 300 taskset -c 0 "$P/bin/mpiexec" -n 2 "$W/mpi_large" 2 2>&1); r=$?
[ $r -eq 0 ] && grep -Eq 'rank 1: shm: large messages [^:]*: process_vm_readv took [0-9.]+x the time of (the ring|memcpy)' \
    <<< "$out" && grep -q '^ok 6 ' <<< "$out"
r=$?
ok $r "auto, both ranks bound to CPU 0: the probe finishes, data verified"
[ $r -eq 0 ] || echo "$out" | tail -30 | diag
expect_output 0 'rank 0 -> 1: zero-copy 0 .*ring frames [0-9]+ \([0-9]+ B\) in [0-9]+ writes' \
    "copy path, fixed pipeline (one write per 16 KiB frame)" -- \
    env $V $L=copy MPIR_CVAR_CH3_RDMA_PIPELINE=fixed "$P/bin/mpiexec" -n 2 "$W/mpi_large"
expect_output 0 '^ok 6 ' "copy path, superpipeline on a 16 KiB ring (groups capped at 4 KiB)" -- \
    env $L=copy MPIR_CVAR_CH3_RDMA_PIPELINE=super MPIR_CVAR_CH3_RDMA_RING_SIZE=16384 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 '^ok 6 ' "copy path, superpipeline q = 2, 1 KiB blocks, basic pipe mode, 3 ranks" -- \
    env $L=copy MPIR_CVAR_CH3_RDMA_PIPELINE=super MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q=2 \
    MPIR_CVAR_CH3_RDMA_SUPERPIPE_BLOCK=1000 \
    MPIR_CVAR_CH3_RDMA_PIPE_MODE=basic "$P/bin/mpiexec" -n 3 "$W/mpi_large" 8
# > 2 GiB in one message (count of a 1 MiB type), both ranks' buffers resident
avail_gib=$(awk '/^MemAvailable:/ { print int($2 / 1048576) }' /proc/meminfo)
if [ "$avail_gib" -ge 6 ]; then
    expect_output 0 '^ok 7 ' "2 GiB + 1 MiB message, zero-copy (split copy), verified" -- \
        env $L=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_large" 1 huge
    expect_output 0 '^ok 7 ' "2 GiB + 1 MiB message through the ring, verified" -- \
        env $L=copy "$P/bin/mpiexec" -n 2 "$W/mpi_large" 1 huge
else
    ok 0 "# SKIP 2 GiB messages: $avail_gib GiB of memory available, 6 needed"
    ok 0 "# SKIP 2 GiB messages: $avail_gib GiB of memory available, 6 needed"
fi
# > 4 GiB zero-copy with the default split: each half of the split copy
# exceeds one process_vm_readv (about 2 GiB), so the receiver's copies
# come back short
if [ "$avail_gib" -ge 12 ]; then
    expect_output 0 '^ok 7 ' "4200 MiB message into an unaligned buffer (offset 3), zcopy, default split" -- \
        env $L=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_large" 1 huge 4200 3
    expect_output 0 '^ok 7 ' "4608 MiB message into an aligned buffer, zcopy, default split" -- \
        env $L=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_large" 1 huge 4608 0
else
    ok 0 "# SKIP 4 GiB messages: $avail_gib GiB of memory available, 12 needed"
    ok 0 "# SKIP 4 GiB messages: $avail_gib GiB of memory available, 12 needed"
fi
expect_output 0 '^ok 6 ' "zcopy from 1 KiB (threshold at its minimum), tiny ring" -- \
    env $L=zcopy MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD=1024 MPIR_CVAR_CH3_RDMA_RING_SIZE=16384 \
    MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=4096 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 'CMA \(process_vm_readv\) not permitted.*double copy' \
    "CMA forbidden (seccomp): one-line notice, ring fallback, data verified" -- \
    env $V $L=zcopy "$P/bin/mpiexec" -n 2 "$W/no_cma" "$W/mpi_large" 8
expect_output 0 'refused [1-9]' "CMA forbidden: the refusal is counted" -- \
    env $V $L=zcopy "$P/bin/mpiexec" -n 2 "$W/no_cma" "$W/mpi_large" 2
expect_output 0 '^ok 6 ' "mpi_check (all-to-all windows) with zcopy, 4 ranks" -- \
    env $L=zcopy "$P/bin/mpiexec" -n 4 "$W/mpi_check" 1048576
expect_output 0 '^ok 1 ' "fork()+exec and children writing into buffers in flight (all sizes)" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_fork"
# EAGER_MAX: by default CH3's limit (128 KiB), whatever the path: beyond
# it CH3's RTS waits for the receive (an early message is copied twice).
# Set, a message up to it goes at once, its send done before the receive
# is posted.
E=MPIR_CVAR_CH3_RDMA_EAGER_MAX
expect_output 0 '^eager 262144: waited, data ok$' \
    "256 KiB, copy path, default: CH3's rendezvous waits for the receive, data verified" -- \
    env $L=copy "$P/bin/mpiexec" -n 2 "$W/mpi_eager" 262144 1
expect_output 0 '^eager 1048576: early, data ok$' \
    "1 MiB, copy path, EAGER_MAX=1048576: sent before its receive was posted, data verified" -- \
    env $L=copy $E=1048576 "$P/bin/mpiexec" -n 2 "$W/mpi_eager" 1048576
expect_output 0 '^eager 1048577: waited, data ok$' \
    "1 MiB + 1 B, copy path, EAGER_MAX=1048576: CH3's rendezvous, data verified" -- \
    env $L=copy $E=1048576 "$P/bin/mpiexec" -n 2 "$W/mpi_eager" 1048577 1
expect_output 0 '^eager 262144: waited, data ok$' \
    "256 KiB, zcopy, default: the channel's rendezvous waits for the receive, copies into the posted buffer" -- \
    env $L=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_eager" 262144 1
expect_output 0 '^eager 4194304: early, data ok$' \
    "4 MiB, zcopy, EAGER_MAX=4194304: at once, pulled into CH3's buffer, data verified" -- \
    env $L=zcopy $E=4194304 "$P/bin/mpiexec" -n 2 "$W/mpi_eager" 4194304
# Early messages are buffered whole in memory CH3 allocates and frees
# (channel/patches/ch3-early-bufs.patch): the channel keeps those buffers
# (EARLY_BUFS), so after the first round the receiver takes no page
# faults for them (given back to malloc: one per 4 KiB, every round)
expect_output 0 'max after the first [0-9]{1,2} of 1024 pages a round, data ok$' \
    "64 early 64 KiB messages a round: no page faults after the first round, data verified" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_early" 65536 64 4
expect_output 0 'max after the first [0-9]{1,2} of 8192 pages a round, data ok$' \
    "32 early 1 MiB messages a round (EAGER_MAX=1048576, ring): kept too, no faults" -- \
    env $L=copy $E=1048576 "$P/bin/mpiexec" -n 2 "$W/mpi_early" 1048576 32 4
expect_output 0 'rank 1: early messages: 64 buffers allocated, 192 reused, 0 given back' \
    "VERBOSE counts them: 64 allocated in the first round, reused in the three others" -- \
    env $V "$P/bin/mpiexec" -n 2 "$W/mpi_early" 65536 64 4
expect_output 0 'rank 1: early messages: 208 buffers allocated, 48 reused, 192 given back over the 1048576-byte cap' \
    "EARLY_BUFS=1048576: 16 of the 64 buffers kept a round, 48 given back and allocated again" -- \
    env $V MPIR_CVAR_CH3_RDMA_EARLY_BUFS=1048576 "$P/bin/mpiexec" -n 2 "$W/mpi_early" 65536 64 4
expect_output 1 'MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=fast: allowed auto, copy or zcopy' \
    "bad protocol name is rejected with the allowed values" -- \
    env $L=fast "$P/bin/mpiexec" -n 2 "$W/cpi"
# The channel's rendezvous (rdma_rndv.c): posted, unexpected, any-source,
# derived types, many in flight, probes; the path checked by pvars
expect_output 0 '^ok 9 ' "rendezvous on shm: 9 cases (1 MiB; 24 of 256 KiB in flight; 96 KiB answered and in a row; a 96 KiB vector eagerly), each on the path it should take (mpi_rndv)" -- \
    env $L=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_rndv"
expect_output 0 '^ok 9 ' "the same with 3 ranks (oversubscribed)" -- \
    env $L=zcopy "$P/bin/mpiexec" -n 3 "$W/mpi_rndv"
expect_output 0 '^ok 9 ' "CMA refused: the first message falls back to CH3's rendezvous, none after tries" -- \
    env $L=zcopy "$P/bin/mpiexec" -n 2 "$W/no_cma" "$W/mpi_rndv" 2
expect_output 0 '^ok 9 ' "LARGE_PROTOCOL=copy: no message takes the rendezvous" -- \
    env $L=copy "$P/bin/mpiexec" -n 2 "$W/mpi_rndv" 0
# MPI_T: the channel's pvars, read by a plain MPI_T client (mpi_pvars.c)
out=$(env $L=zcopy timeout 300 "$P/bin/mpiexec" -n 2 "$W/mpi_pvars" 1000 4194304 4 2>&1)
n=$(grep -c '^pvar rdma_' <<< "$out")
[[ $n -eq 25 ]] && grep -q '^pvar rdma_pinned_bytes_max class highwatermark readonly 1 continuous 1' <<< "$out" &&
    grep -q '^pvar rdma_rma_direct_puts class counter readonly 1 continuous 1' <<< "$out" &&
    grep -q '^pvar rdma_rma_direct_atomics class counter readonly 1 continuous 1' <<< "$out" &&
    grep -q '^pvar rdma_rma_direct_at_call class counter readonly 1 continuous 1' <<< "$out" &&
    grep -q '^pvar rdma_conns_live_max class highwatermark readonly 1 continuous 1' <<< "$out" &&
    grep -q '^rank 0: rdma_rma_messages 0$' <<< "$out" &&
    grep -q '^rank 0: rdma_rma_direct_at_call 0$' <<< "$out" && grep -q '^rank 0: rdma_conns_opened 0$' <<< "$out"
ok $? "MPI_T lists the 25 rdma_* pvars ($n), read-only and continuous; no one-sided operation, no network connection here"
grep -q '^rank 0: rdma_ring_frames [1-9]' <<< "$out" && grep -q '^rank 0: rdma_ring_writes [1-9]' <<< "$out" &&
    grep -q '^rank 0: rdma_rndv_sends [1-9]' <<< "$out" && grep -q '^rank 1: rdma_rndv_fallbacks 0$' <<< "$out" &&
    grep -q '^rank 0: rdma_pinned_bytes 0$' <<< "$out" &&
    grep -q '^after finalize: rdma_ring_frames [1-9]' <<< "$out" &&
    grep -q '^rank 0: rdma_eager_zcopy_sends 0$' <<< "$out"
r=$?
ok $r "MPI_T reads: ring frames and writes, 4 MiB messages by the channel's rendezvous, nothing pinned and no eager send from user memory on shm, values after finalize"
[ $r -eq 0 ] || echo "$out" | diag
# Growing rings on shm (RING_INIT_SIZE set): verified all-to-all windows,
# then 4 MiB through the ring (16 KiB -> 512 KiB) and back after idling
I=MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE=16384
expect_output 0 '^ok 6 ' "mpi_check (all-to-all windows), 4 ranks, shm rings growing from 16 KiB" -- \
    env $I "$P/bin/mpiexec" -n 4 "$W/mpi_check" 1048576
out=$(env $I $L=copy MPIR_CVAR_CH3_RDMA_RING_IDLE=1 timeout 300 "$P/bin/mpiexec" -n 2 \
    "$W/mpi_pvars" 100 4194304 4 1 4 2>&1)
grep -q '^rank 0: rdma_ring_grows 5$' <<< "$out" && grep -q '^rank 0: rdma_ring_shrinks 1$' <<< "$out" &&
    grep -q '^rank 0: rdma_ring_bytes 16384$' <<< "$out"
r=$?
ok $r "shm, RING_INIT_SIZE=16384, copy path: 5 doublings to 512 KiB under 4 MiB round trips, back to 16 KiB after 4 s idle (RING_IDLE=1)"
[ $r -eq 0 ] || echo "$out" | grep '^rank 0: rdma_ring' | diag
done_testing
