#!/usr/bin/env bash
# A rank that dies, as MPICH's own fault-tolerance tests see it (test/mpi/ft,
# MPIR_CVAR_ENABLE_FT=1 under mpiexec -disable-auto-cleanup): a send to or a
# receive from the dead rank fails with MPIX_ERR_PROC_FAILED, whether it
# died before or after it connected, and the survivor's MPI_Finalize
# returns.  mpi_life: the error class of an exchange the death interrupts,
# and the one line naming the dead rank and its host.
. "$(dirname "$0")/../lib.sh"
plan 6
P=$(mpich_prefix rdma) || { echo "Bail out! ch3:rdma is not built (run make)"; exit 1; }
T=$P/../build/test/mpi
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
tests=(senddead recvdead isenddead irecvdead)
{ make -C "$T/util" libmtest_single.la && make -C "$T/ft" "${tests[@]}" &&
    "$P/bin/mpicc" -O2 -o "$W/mpi_life" "$TOP/test/mpi/mpi_life.c"; } > "$W/build.log" 2>&1 ||
    { tail -20 "$W/build.log" | diag; echo "Bail out! cannot build the test programs"; exit 1; }
for t in "${tests[@]}"; do
    EXPECT_TIMEOUT=60 expect_output 0 '^ No Errors' "ft/$t: MPIX_ERR_PROC_FAILED, then MPI_Finalize returns" -- \
        env MPIR_CVAR_ENABLE_FT=1 "$P/bin/mpiexec" -disable-auto-cleanup -n 2 "$T/ft/$t"
done
out=$(timeout -k 5 60 "$P/bin/mpiexec" -disable-auto-cleanup -n 2 "$W/mpi_life" kill exit 2>&1)
grep -Eq '^kill: rank 0 saw the failure after [0-4]\.[0-9] s: MPIX_ERR_PROC_FAILED' <<<"$out"
ok $? "an exchange with a rank gone without MPI_Finalize fails with MPIX_ERR_PROC_FAILED"
grep -Eq "rank 1 on $(hostname) " <<<"$out"
ok $? "the survivor names the dead rank and its host"
grep -E 'kill:|rank 1' <<<"$out" | head -5 | diag
done_testing
