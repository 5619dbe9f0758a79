#!/usr/bin/env bash
# ch3:rdma on this host's shared-memory transport: startup, close protocol,
# verified traffic, pipe modes and geometries, oversubscription.
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 9
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
done_testing
