#!/usr/bin/env bash
# Dynamic processes on this host's shared-memory transport: MPI_Comm_spawn,
# connect/accept through a port, data verified both ways between the groups,
# disconnect (mpi_spawn.c); two jobs launched apart meet through a port
# name in a file, and a forged token is refused (mpi_port.c).
. "$(dirname "$0")/../lib.sh"
. "$TOP/test/mpi/build-progs.sh"
plan 7
mpi_setup

# spawn_ok WHAT -- MPIEXEC-ARGS...: mpi_spawn's four checks all pass.
spawn_ok() {
    local what=$1 out rc; shift 2
    out=$(timeout -k 5 "${EXPECT_TIMEOUT:-300}" "$@" 2>&1); rc=$?
    [ $rc -eq 0 ] && [ "$(echo "$out" | grep -c '^ok [1-4] ')" = 4 ]; rc=$?
    ok $rc "$what"
    [ $rc -eq 0 ] || echo "$out" | tail -30 | diag
}
spawn_ok "1 parent spawns 2 children (64 B and 1 MiB both ways, merge, port, disconnect)" -- \
    "$P/bin/mpiexec" -n 1 "$W/mpi_spawn" 2
spawn_ok "2 parents spawn 2 children: every parent talks to every child" -- \
    "$P/bin/mpiexec" -n 2 "$W/mpi_spawn" 2
spawn_ok "large messages between the groups through the ring (LARGE_PROTOCOL=copy)" -- \
    env MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy "$P/bin/mpiexec" -n 2 "$W/mpi_spawn" 1 4194304
spawn_ok "tiny rings (16 KiB): 4 MiB between the groups in many frames" -- \
    env MPIR_CVAR_CH3_RDMA_RING_SIZE=16384 MPIR_CVAR_CH3_RDMA_RING_CHUNK=64 MPIR_CVAR_CH3_RDMA_PIPELINE=fixed \
    MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=4096 "$P/bin/mpiexec" -n 1 "$W/mpi_spawn" 3 4194304

# Two jobs launched apart (no shared PMI KVS): a forged port name first,
# then the real one; the server must serve the second.
pf=$W/port
timeout -k 5 120 "$P/bin/mpiexec" -n 1 "$W/mpi_port" serve "$pf" > "$W/serve.out" 2>&1 &
server=$!
expect_output 0 '^ok - a port name with a forged token is refused' \
    "a connect with a forged token in the port name fails with MPI_ERR_PORT" -- \
    "$P/bin/mpiexec" -n 1 "$W/mpi_port" forge "$pf"
expect_output 0 '' "a job launched apart connects to the port and exchanges data" -- \
    "$P/bin/mpiexec" -n 1 "$W/mpi_port" connect "$pf"
wait "$server"; rc=$?
[ $rc -eq 0 ] && grep -q '^ok - accepted' "$W/serve.out"; rc2=$?
ok $rc2 "the server accepted it after refusing the forged one (exit $rc)"
[ $rc2 -eq 0 ] || tail -20 "$W/serve.out" | diag
done_testing
