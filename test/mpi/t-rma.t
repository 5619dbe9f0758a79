#!/usr/bin/env bash
# One-sided MPI and MPI-3 shared memory on this host (the shm transport):
# node communicators and shared windows that share (mpi_shm_win), and the
# randomized RMA stress (mpi_rma_stress: every window flavour and
# synchronisation mode, verified against a local model of the window; the
# seed is printed, replay: mpi_rma_stress SECONDS SEED on as many ranks),
# and direct operations (mpi_rma_direct: contiguous puts and gets into
# MPI_Win_create windows go by CMA, counted by the pvars, with every
# synchronisation's completion rule; the stress runs them too).  On a node
# direct operations are CMA only from MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN (off by
# default, rdma_chan_rma): 1 KiB is set here so that the 2 KiB ones go
# direct, in MPI_Win_create and dynamic windows, and in the 3-rank stress.
# Large puts sent as messages keep to the ring up to 384 KiB (ch3_send.c).
# CH3RDMA_RMA_SECONDS per stress run (default 10).
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 11
mpi_setup
T=${CH3RDMA_RMA_SECONDS:-10}
expect_output 0 '^ok 5 ' "node communicator of 2 ranks; shared windows share (stores through shared_query seen by the owner)" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_shm_win"
expect_output 0 '^ok 5 ' "the same with 4 ranks (oversubscribed)" -- "$P/bin/mpiexec" -n 4 "$W/mpi_shm_win"
CMA="MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN=1024"
expect_output 0 '^1\.\.10$' "direct puts and gets (CMA into MPI_Win_create and dynamic windows), 2 ranks: every sync mode, exclusive-lock counter, messages counted and carrying lock, unlock and flush, puts and gets to a granted target started at the call" -- \
    env $CMA "$P/bin/mpiexec" -n 2 "$W/mpi_rma_direct"
expect_output 0 '^1\.\.10$' "the same with 3 ranks (oversubscribed)" -- env $CMA "$P/bin/mpiexec" -n 3 "$W/mpi_rma_direct"
expect_output 0 '^1\.\.10$' "MPIR_CVAR_CH3_RDMA_RMA_DIRECT=0: the same results, no operation direct" -- \
    env $CMA MPIR_CVAR_CH3_RDMA_RMA_DIRECT=0 "$P/bin/mpiexec" -n 2 "$W/mpi_rma_direct" 0
expect_output 0 '^1\.\.10$' "RMA_CMA_MIN unset: on the node every operation is a message (the target's split copy is faster)" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_rma_direct" 0
expect_output 0 '^ok 1 ' "MPI_Win_create puts and gets as messages: a 256 KiB put and queued 256 KiB get answers keep to the ring, a 1 MiB put and a lone get answer go zero-copy (ring_only)" -- \
    env MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy "$P/bin/mpiexec" -n 2 "$W/mpi_rma_direct" parts
expect_output 0 '^1\.\.8$' "windows whose accumulates the NIC would do (which_accumulate_ops, disable_shm_accumulate): on shared memory CH3's messages do them, every result right, none counted as the NIC's (a dynamic window with coll_attach too)" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_rma_amo" 0
expect_output 0 '^1\.\.8$' "the same in MPI_Win_allocate windows: CH3's loads and stores do them, none counted" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_rma_amo" 3
EXPECT_TIMEOUT=$((T * 4 + 120))
expect_output 0 '^1\.\.24$' "RMA stress $T s, 2 ranks: 4 window flavours x 6 synchronisation modes verified" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_rma_stress" "$T"
expect_output 0 '^1\.\.24$' "RMA stress $T s, 3 ranks (oversubscribed), direct CMA from 1 KiB" -- \
    env $CMA "$P/bin/mpiexec" -n 3 "$W/mpi_rma_stress" "$T"
done_testing
