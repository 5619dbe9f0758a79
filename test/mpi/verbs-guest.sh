#!/usr/bin/env bash
# verbs-guest.sh PREFIX DIR -- runs inside the Soft-RoCE VM (run-vm --nodes 2):
# ch3:rdma over verbs, on one "node" (verbs forced) and across two.
. "$(dirname "$0")/../lib.sh"
P=$1 W=$2
EXPECT_TIMEOUT=${EXPECT_TIMEOUT:-300}
plan 10
V=MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs
expect_output 0 '^1\.\.6' "verbs forced, 2 ranks, flag polling or write-imm (auto)" -- \
    env $V "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
expect_output 0 '^1\.\.6' "verbs forced, write-with-immediate arrival" -- \
    env $V MPIR_CVAR_CH3_RDMA_WRITE_IMM=1 "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
expect_output 0 '^1\.\.6' "verbs forced, basic pipe mode" -- \
    env $V MPIR_CVAR_CH3_RDMA_PIPE_MODE=basic "$P/bin/mpiexec" -n 2 "$W/mpi_check" 262144
expect_output 0 'rank 0 on node0' "2 nodes x 2 ranks (shm on-node, verbs across)" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_check" 262144
expect_output 0 'pi is approximately' "cpi across 2 nodes" -- "$P/bin/mpiexec" -hosts node0,node1 -n 2 "$W/cpi"
expect_output 0 'verbs: rcache on: hits [1-9]' \
    "verbs forced, zero-copy RDMA read: 0..4 MiB, remapped buffers, data verified" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=zcopy MPIR_CVAR_CH3_RDMA_VERBOSE=1 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 'rank 0 -> 1: zero-copy 0 .* copy [1-9]' "verbs forced, copy path only (superpipeline)" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy MPIR_CVAR_CH3_RDMA_VERBOSE=1 \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 '^ok 6 ' "verbs forced, copy path, fixed 16 KiB frames" -- \
    env $V MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy MPIR_CVAR_CH3_RDMA_PIPELINE=fixed \
    "$P/bin/mpiexec" -n 2 "$W/mpi_large" 4
expect_output 0 '^ok 6 ' "large messages across 2 nodes x 2 ranks (auto)" -- \
    "$P/bin/mpiexec" -hosts node0,node1 -n 4 "$W/mpi_large" 2
expect_output 1 'ulimit -l' "low memlock limit gives a one-line diagnosis" -- \
    bash -c 'ulimit -l 64; exec env MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs '"$P/bin/mpiexec"' -n 2 '"$W/cpi"
done_testing
