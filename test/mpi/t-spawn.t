#!/usr/bin/env bash
# Dynamic processes on this host's shared-memory transport: MPI_Comm_spawn,
# connect/accept through a port, data verified both ways between the groups,
# disconnect (mpi_spawn.c); two jobs launched apart meet through a port
# name in a file, and a forged token is refused (mpi_port.c); jobs whose
# settings allow other frame sizes agree on the smaller; a client that
# corrupts its link fails only its own connection.  A spawned
# child or its parent that exits without MPI_Finalize fails the survivor's
# receive with MPIX_ERR_PROC_FAILED after the survivor read what it sent
# (before 2026-11-30 the survivor waited forever); one that finalizes
# while the other is busy is not reported.
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 15
mpi_setup

# mpi_spawn exits 1 if one of its four checks failed
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-300}
expect_output 0 '^ok 4 ' "1 parent spawns 2 children (64 B and 1 MiB both ways, merge, port, disconnect)" -- \
    "$P/bin/mpiexec" -n 1 "$W/mpi_spawn" 2
expect_output 0 '^ok 4 ' "2 parents spawn 2 children: every parent talks to every child" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_spawn" 2
expect_output 0 '^ok 4 ' "large messages between the groups through the ring (LARGE_PROTOCOL=copy)" -- \
    env MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy "$P/bin/mpiexec" -n 2 "$W/mpi_spawn" 1 4194304
expect_output 0 '^ok 4 ' "tiny rings (16 KiB): 4 MiB between the groups in many frames" -- \
    env MPIR_CVAR_CH3_RDMA_RING_SIZE=16384 MPIR_CVAR_CH3_RDMA_RING_CHUNK=64 MPIR_CVAR_CH3_RDMA_PIPELINE=fixed \
    MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=4096 "$P/bin/mpiexec" -n 1 "$W/mpi_spawn" 3 4194304

spawn_fault_checks "shm" "[0-4]"
port_checks
port_frames
port_scribble
port_soak 3 shm die,forge,ring 1500 500
done_testing
