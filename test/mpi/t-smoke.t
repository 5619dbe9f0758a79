#!/usr/bin/env bash
# ch3:rdma on this host's shared-memory transport: startup, close protocol,
# verified traffic, pipe modes and geometries, oversubscription, ranks
# bound to cores, Hydra's SIGUSR1 notice, a rank that dies.
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 15
mpi_setup
expect_output 0 'pi is approximately' "cpi, 2 ranks" -- "$P/bin/mpiexec" -n 2 "$W/cpi"
expect_output 0 'pi is approximately' "cpi, 4 ranks (oversubscribed)" -- "$P/bin/mpiexec" -n 4 "$W/cpi"
expect_output 0 '^1\.\.6' "mpi_check, 2 ranks" -- "$P/bin/mpiexec" -n 2 "$W/mpi_check"
expect_output 0 '^1\.\.6' "mpi_check, 4 ranks (oversubscribed)" -- "$P/bin/mpiexec" -n 4 "$W/mpi_check" 1048576
expect_output 0 '^1\.\.6' "mpi_check, basic pipe mode" -- \
    env MPIR_CVAR_CH3_RDMA_PIPE_MODE=basic "$P/bin/mpiexec" -n 2 "$W/mpi_check" 1048576
expect_output 0 '^1\.\.6' "mpi_check, tiny ring (16 KiB, 64 B chunks, fixed 4 KiB frames), 3 ranks" -- \
    env MPIR_CVAR_CH3_RDMA_RING_SIZE=16384 MPIR_CVAR_CH3_RDMA_RING_CHUNK=64 MPIR_CVAR_CH3_RDMA_PIPELINE=fixed \
    MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=4096 "$P/bin/mpiexec" -n 3 "$W/mpi_check" 1048576
expect_output 0 '^1\.\.6' "mpi_check, coalesced credits at the smallest threshold" -- \
    env MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD=512 "$P/bin/mpiexec" -n 2 "$W/mpi_check" 1048576
# MPIR_CVAR_CH3_RDMA_RING_HOT: a quiet ping-pong keeps to the ring start
expect_output 0 '^ok 2 ' "small-message ping-pong stays in the rings' hot window" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_hot" 20000 8 128
expect_output 1 '^not ok 2 ' "without the hot window the ping-pong walks the whole ring" -- \
    env MPIR_CVAR_CH3_RDMA_RING_HOT=0 "$P/bin/mpiexec" -n 2 "$W/mpi_hot" 20000 8 128
# Hydra sends SIGUSR1 to every survivor when a process dies under
# -disable-auto-cleanup: a rank must outlive it, between MPI calls and
# while it waits, and its traffic go on intact.
expect_output 0 '^notice: ok ' "SIGUSR1 (Hydra's notice of a dead process) kills no rank, idle or waiting" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_life" notice
expect_output 0 '^notice: ok .*saw 2 signals' "SIGUSR1 reaches the program's own handler, installed before MPI_Init" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_life" notice 1
# A rank that exits without MPI_Finalize, under -disable-auto-cleanup
# (Hydra lets the survivor run): the survivor reports it, naming the rank,
# instead of waiting forever, and what the dead rank sent first arrives
# intact.  _exit, not a signal: mpi_life.c says why.
EXPECT_TIMEOUT=60 expect_output 1 '^kill: rank 0 saw the failure after [0-4]\.[0-9] s: MPIX_ERR_PROC_FAILED' \
    "a rank gone without MPI_Finalize is reported by its shared-memory peer within seconds (MPIX_ERR_PROC_FAILED)" -- \
    "$P/bin/mpiexec" -disable-auto-cleanup -n 2 "$W/mpi_life" kill exit
EXPECT_TIMEOUT=60 expect_output 1 '^killsend: rank 0 got the last message intact, then saw the failure after [0-4]\.[0-9] s' \
    "what a rank sent before it was gone arrives intact; then its end is reported" -- \
    "$P/bin/mpiexec" -disable-auto-cleanup -n 2 "$W/mpi_life" killsend exit
# Ranks bound to cores of their own are not oversubscribed: their waits
# spin (each rank's CPU set has one CPU; the node's ranks have two).
read -r c0 c1 _ < <(awk '/^Cpus_allowed_list/ { n = split($2, r, ",")
    for (i = 1; i <= n; i++) { split(r[i], b, "-"); for (c = b[1]; c <= (b[2] == "" ? b[1] : b[2]); c++) printf "%d ", c }
    print "" }' /proc/self/status)
if [ -n "$c1" ] && command -v taskset >/dev/null; then
    expect_output 0 '^ok 2 ' "2 ranks bound to a core each (taskset -c $c0, -c $c1) spin in their waits" -- \
        "$P/bin/mpiexec" -n 1 taskset -c "$c0" "$W/mpi_waits" 2000 spin : \
        -n 1 taskset -c "$c1" "$W/mpi_waits" 2000 spin
    expect_output 0 '^ok 2 ' "2 ranks bound to one core (taskset -c $c0: oversubscribed) block in their waits" -- \
        "$P/bin/mpiexec" -n 2 taskset -c "$c0" "$W/mpi_waits" 2000 block
else
    ok 0 "# SKIP binding ranks needs 2 allowed CPUs and taskset (allowed: ${c0:-none} ${c1:-})"
    ok 0 "# SKIP binding ranks needs 2 allowed CPUs and taskset"
fi
done_testing
