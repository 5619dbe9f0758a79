#!/usr/bin/env bash
# Bad input stops MPI_Init with a one-line diagnosis naming the variable and
# its range; a missing device and a killed peer end the job, never hang.
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 27
mpi_setup
EXPECT_TIMEOUT=60
bad() {  # bad VAR=VALUE REGEX [OTHER=VALUE...]
    local v=$1 re=$2
    shift 2
    expect_output 1 "$re" "rejects $v" -- env "$@" "$v" "$P/bin/mpiexec" -n 2 "$W/cpi"
}
bad MPIR_CVAR_CH3_RDMA_RING_SIZE=1000 'MPIR_CVAR_CH3_RDMA_RING_SIZE=1000: allowed a power of two in 16384\.\.67108864'
bad MPIR_CVAR_CH3_RDMA_RING_CHUNK=48 'MPIR_CVAR_CH3_RDMA_RING_CHUNK=48: allowed'
bad MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=1000000 'MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=1000000: allowed' \
    MPIR_CVAR_CH3_RDMA_PIPELINE=fixed
bad MPIR_CVAR_CH3_RDMA_PIPELINE=fast 'MPIR_CVAR_CH3_RDMA_PIPELINE=fast: allowed auto, super or fixed'
bad MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q=0.5 'MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q=0\.5: allowed 1\.\.16'
bad MPIR_CVAR_CH3_RDMA_CMA_SPLIT=100 'MPIR_CVAR_CH3_RDMA_CMA_SPLIT=100: allowed 0 or 65536\.\.1073741824'
bad MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0=100 'MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0=100: allowed 1024\.\.67108864'
bad MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD=1 'MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD=1: allowed'
bad MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE=1000 'MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE=1000: allowed -1 \(auto\) or a power of two in 2048\.\.524288'
bad MPIR_CVAR_CH3_RDMA_RING_IDLE=-1 'MPIR_CVAR_CH3_RDMA_RING_IDLE=-1: allowed 0 \(never\) or 1\.\.86400'
bad MPIR_CVAR_CH3_RDMA_RING_HOT=32 'MPIR_CVAR_CH3_RDMA_RING_HOT=32: allowed -1 \(auto\), 0 \(off\) or 64\.\.262144'
bad MPIR_CVAR_CH3_RDMA_TRANSPORT=tcp 'MPIR_CVAR_CH3_RDMA_TRANSPORT=tcp: allowed auto, shm or verbs'
bad MPIR_CVAR_CH3_RDMA_PIPE_MODE=fast 'MPIR_CVAR_CH3_RDMA_PIPE_MODE=fast: allowed piggyback or basic'
bad MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD=100 'MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD=100: allowed -1 \(auto\) or 1024\.\.1073741824'
bad MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB=-1 'MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB=-1: allowed 0\.\.1048576'
bad MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB=-1 'MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB=-1: allowed 0 \(no cap\) or 1\.\.1048576'
bad MPIR_CVAR_CH3_RDMA_EAGER_REG_USES=-2 'MPIR_CVAR_CH3_RDMA_EAGER_REG_USES=-2: allowed -1 \(auto\), 0 \(never\) or 1\.\.1000000'
bad MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX=65537 'MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX=65537: allowed 0 \(never\) or 1\.\.65536 \(bytes\)'
bad MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN=-1 'MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN=-1: allowed 0 \(never\) or 1\.\.1073741824 \(bytes\)'
bad MPIR_CVAR_CH3_RDMA_EAGER_MAX=-1 'MPIR_CVAR_CH3_RDMA_EAGER_MAX=-1: allowed 0 \(CH3.s\) or 1\.\.1073741824 \(bytes\)'
bad MPIR_CVAR_CH3_RDMA_SRQ_SIZE=8 'MPIR_CVAR_CH3_RDMA_SRQ_SIZE=8: allowed 0 \(a receive queue per connection\) or 16\.\.1048576'
bad MPIR_CVAR_CH3_RDMA_EARLY_BUFS=-1 'MPIR_CVAR_CH3_RDMA_EARLY_BUFS=-1: allowed 0 \(keep none\) or 1\.\.1073741824 \(bytes\)'
bad MPIR_CVAR_CH3_RDMA_MAX_CONNS=-1 'MPIR_CVAR_CH3_RDMA_MAX_CONNS=-1: allowed 0 \(no cap\) or 1\.\.1048576'
# RING_CHUNK auto: 64-byte slots on shared memory; a set value is used as is.
expect_output 0 'shm mode=flag-poll ring=524288 chunk=64$' "RING_CHUNK auto: shm rings use 64-byte slots" -- \
    env MPIR_CVAR_CH3_RDMA_VERBOSE=1 "$P/bin/mpiexec" -n 2 "$W/cpi"
expect_output 0 'shm mode=flag-poll ring=524288 chunk=512$' "RING_CHUNK=512 is used on shm" -- \
    env MPIR_CVAR_CH3_RDMA_VERBOSE=1 MPIR_CVAR_CH3_RDMA_RING_CHUNK=512 "$P/bin/mpiexec" -n 2 "$W/cpi"
if ibv_devices 2>/dev/null | grep -q '^ *[a-z]'; then
    ok 0 "# SKIP this host has an RDMA device"
else
    bad MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs 'no RDMA device'
fi
# A peer killed mid-run: the job ends (non-zero) within the timeout.
cat > "$W/spin.c" <<'C'
#include <mpi.h>
#include <signal.h>
#include <unistd.h>
int main(int c, char **v) {
    int r, x = 0; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);
    for (int i = 0; ; i++) {
        if (r == 1 && i == 2000) kill(getpid(), SIGKILL);
        if (r == 0) { MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD); MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
        else { MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD); }
    }
}
C
"$P/bin/mpicc" -o "$W/spin" "$W/spin.c"
EXPECT_TIMEOUT=30
expect_output 1 'KILLED|killed|Killed|TERMINATION' "a peer killed mid-run ends the job with a diagnosis" -- \
    "$P/bin/mpiexec" -n 2 "$W/spin"
done_testing
