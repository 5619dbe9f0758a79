# build-progs.sh -- sourced by the MPI tests after lib.sh.
# mpi_setup: P = the ch3:rdma prefix, W = a scratch directory (removed on
# exit) holding cpi and the test programs of test/mpi (mpi_check, mpi_large, mpi_eager, mpi_early,
# mpi_stress, mpi_fork, mpi_ptracer, mpi_life, mpi_hot, mpi_pvars, mpi_spawn, mpi_port, mpi_fin,
# mpi_waits, mpi_shm_win, mpi_rma_stress, mpi_rma_direct, mpi_rma_amo, mpi_rndv, mpi_conns,
# mpi_conn_wait)
# built with P's mpicc, no_cma (CMA forbidden by seccomp, as in containers)
# and mmap_taken.so (an address unmapped is taken before the remap).
mpi_setup() {
    P=$(mpich_prefix rdma) || { echo "Bail out! ch3:rdma is not built (run make)"; exit 1; }
    W=$(mktemp -d)
    trap 'rm -rf "$W"' EXIT
    "$P/bin/mpicc" -O2 -o "$W/cpi" "$P/../src/examples/cpi.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_check" "$TOP/test/mpi/mpi_check.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_large" "$TOP/test/mpi/mpi_large.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_eager" "$TOP/test/mpi/mpi_eager.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_early" "$TOP/test/mpi/mpi_early.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_stress" "$TOP/test/mpi/mpi_stress.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_fork" "$TOP/test/mpi/mpi_fork.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_ptracer" "$TOP/test/mpi/mpi_ptracer.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_life" "$TOP/test/mpi/mpi_life.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_hot" "$TOP/test/mpi/mpi_hot.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_pvars" "$TOP/test/mpi/mpi_pvars.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_spawn" "$TOP/test/mpi/mpi_spawn.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_port" "$TOP/test/mpi/mpi_port.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_fin" "$TOP/test/mpi/mpi_fin.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_waits" "$TOP/test/mpi/mpi_waits.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_shm_win" "$TOP/test/mpi/mpi_shm_win.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_rma_stress" "$TOP/test/mpi/mpi_rma_stress.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_rma_direct" "$TOP/test/mpi/mpi_rma_direct.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_rma_amo" "$TOP/test/mpi/mpi_rma_amo.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_rndv" "$TOP/test/mpi/mpi_rndv.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_conns" "$TOP/test/mpi/mpi_conns.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_conn_wait" "$TOP/test/mpi/mpi_conn_wait.c" &&
        "$P/bin/mpicc" -O2 -o "$W/no_cma" "$TOP/test/mpi/no_cma.c" &&
        "${CC:-cc}" -O2 -shared -fPIC -o "$W/mmap_taken.so" "$TOP/test/mpi/mmap_taken.c" -ldl ||
        { echo "Bail out! cannot compile the MPI test programs"; exit 1; }
}

# spawn_fault_checks LABEL SECS [ENV...]: three TAP lines (mpi_spawn.c),
# ENV (e.g. verbs forced) before mpiexec -disable-auto-cleanup.  A spawned
# child, then a parent, exits without MPI_Finalize: the survivor reads its
# last message, then its receive fails with MPIX_ERR_PROC_FAILED within
# SECS (a regex of the whole seconds).  The one that dies exits 1 and
# mpiexec's status is that of whichever group Hydra reports, so the
# survivor's line is the check (a hang times out).  Then a child that
# finalizes while its parent is busy: nothing reported.
spawn_fault_checks() {
    local label=$1 secs=$2 who; shift 2
    for who in child parent; do
        EXPECT_TIMEOUT=60 expect_output 0 \
            "^dead $who: the last message intact, then MPIX_ERR_PROC_FAILED after $secs\.[0-9] s" \
            "$label: the $who exits without MPI_Finalize; the survivor reads its last 16 KiB, then fails" -- \
            sh -c '"$@"; exit 0' sh env "$@" "$P/bin/mpiexec" -disable-auto-cleanup -n 1 \
            "$W/mpi_spawn" dead $who
    done
    EXPECT_TIMEOUT=60 expect_output 0 '^late: the parent finalized$' \
        "$label: a child finalizes and exits while the parent is busy: nothing reported" -- \
        sh -c 'out=$("$@" 2>&1); echo "$out"; ! echo "$out" | grep -F "[ch3:rdma]"' sh \
        env "$@" "$P/bin/mpiexec" -disable-auto-cleanup -n 1 "$W/mpi_spawn" late
}

# port_checks [SERVER-HOST CLIENT-HOST]: three TAP lines (mpi_port.c): two
# jobs launched apart (no shared PMI KVS) meet through a port name in a
# file: a forged token is refused first, then the real name connects, and
# the server served it.  With hosts: the server runs on the first, the
# clients on the second.
port_checks() {
    local pf=$W/port sv=() cl=() server rc rc2
    [ -z "$1" ] || { sv=(-hosts "$1"); cl=(-hosts "$2"); }
    rm -f "$pf"
    timeout -k 5 120 "$P/bin/mpiexec" "${sv[@]}" -n 1 "$W/mpi_port" serve "$pf" > "$W/serve.out" 2>&1 &
    server=$!
    expect_output 0 '^ok - a port name with a forged token is refused' \
        "a connect with a forged token in the port name fails with MPI_ERR_PORT" -- \
        "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" forge "$pf"
    expect_output 0 '' "a job launched apart connects to the port and exchanges data" -- \
        "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" connect "$pf"
    wait "$server"; rc=$?
    [ $rc -eq 0 ] && grep -q '^ok - accepted' "$W/serve.out"; rc2=$?
    ok $rc2 "the server accepted it after refusing the forged one (exit $rc)"
    [ $rc2 -eq 0 ] || tail -20 "$W/serve.out" | diag
}

# port_frames [SERVER-HOST CLIENT-HOST]: two TAP lines (mpi_port soak): a
# port server with the default pipe settings serves clients launched apart
# with other ones, every job moving its 1 MiB through the ring
# (LARGE_PROTOCOL=copy).  Frame sizes are agreed: a client sending larger
# frames (PIPELINE_CHUNK=65536) and one taking only smaller (4096) both
# exchange verified data (before wire version 9 the end with the smaller
# limit failed with "protocol violation", a port server in every later
# call).  Slot sizes are not: a client of RING_CHUNK=256, between those two,
# is refused naming the ring settings, and the server goes on.
port_frames() {
    local pf=$W/frames sv=() cl=() server rc f bad= env=(MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=copy)
    [ -z "$1" ] || { sv=(-hosts "$1"); cl=(-hosts "$2"); }
    rm -f "$pf"
    timeout -k 5 300 env "${env[@]}" "$P/bin/mpiexec" "${sv[@]}" -n 1 \
        "$W/mpi_port" soak "$pf" 2 0 > "$W/frames.out" 2>&1 &
    server=$!
    for f in 65536 chunk 4096; do
        if [ $f = chunk ]; then
            timeout -k 5 120 env "${env[@]}" MPIR_CVAR_CH3_RDMA_RING_CHUNK=256 \
                MPI_PORT_STDERR="$W/frames-$f.err" "$P/bin/mpiexec" "${cl[@]}" -n 1 \
                "$W/mpi_port" connect "$pf" > "$W/frames-$f.out" 2>&1
            cat "$W/frames-$f.err" >> "$W/frames-$f.out" 2> /dev/null
            continue
        fi
        timeout -k 5 120 env "${env[@]}" MPIR_CVAR_CH3_RDMA_PIPELINE=fixed \
            MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=$f "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" \
            connect "$pf" > "$W/frames-$f.out" 2>&1 || bad="$bad $f"
    done
    wait "$server"; rc=$?
    [ $rc -eq 0 ] && [ -z "$bad" ] && grep -q '^ok - port server: 2 clients' "$W/frames.out"
    ok $? "clients with frames of 64 KiB and 4 KiB against the server's default: data verified both ways (server exit $rc; clients failed:${bad:- none})"
    [ $rc -eq 0 ] && [ -z "$bad" ] || tail -n 5 "$W/frames.out" "$W"/frames-*.out | diag
    grep -Eq 'RING_CHUNK alike|another ring geometry' "$W/frames-chunk.out"; rc=$?
    ok $rc "a client of another RING_CHUNK is refused, naming the ring settings: $(grep -Eo '(uses (other|another) ring).*' "$W/frames-chunk.out" | head -n 1)"
    [ $rc -eq 0 ] || tail -n 5 "$W/frames-chunk.out" | diag
}

# port_scribble: two TAP lines (mpi_port soak, shm, PIPE_MODE=basic): of a
# port server's three clients the second exchanges its data, then corrupts
# its link (mpi_port scribble: a head word past what it wrote), stays 3 s
# and exits.
# The server fails that connection only, naming the protocol violation,
# and serves the third (before 2026-12-05 the violation came back from
# every later call, MPI_Finalize too, and the third client failed).
port_scribble() {
    local pf=$W/scribble server rc bad= env=(MPIR_CVAR_CH3_RDMA_PIPE_MODE=basic) k
    rm -f "$pf"
    timeout -k 5 300 env "${env[@]}" "$P/bin/mpiexec" -n 1 "$W/mpi_port" soak "$pf" 3 0 \
        > "$W/scribble.out" 2>&1 &
    server=$!
    for k in 1 2 3; do
        if [ $k = 2 ]; then
            timeout -k 5 120 env "${env[@]}" "$P/bin/mpiexec" -n 1 "$W/mpi_port" scribble "$pf" \
                > "$W/scribble-$k.out" 2>&1
        else
            timeout -k 5 120 env "${env[@]}" "$P/bin/mpiexec" -n 1 "$W/mpi_port" connect "$pf" \
                > "$W/scribble-$k.out" 2>&1 || bad="$bad $k"
        fi
    done
    wait "$server"; rc=$?
    grep -q '^ok - after the exchange' "$W/scribble-2.out"
    ok $? "a client corrupts its shm link to a port server: $(grep -o 'after the exchange.*' "$W/scribble-2.out")"
    grep -q 'protocol violation' "$W/scribble.out" && grep -q 'port server: 3 clients served' \
        "$W/scribble.out" && ! grep -q 'Fatal error' "$W/scribble.out" && [ -z "$bad" ]
    ok $? "the server fails that connection only, naming the violation, and serves the next client (server exit $rc; good clients failed:${bad:- none})"
    grep -E 'protocol violation|clients served|Fatal' "$W/scribble.out" | head -n 4 | diag
}

# port_soak ROUNDS LABEL BAD IDLE DIE [SERVER-HOST CLIENT-HOST [RING-ENV]]:
# one TAP line (mpi_port soak): a port server stays up while ROUNDS x 5
# clients, launched apart one after another, come and go; four in five
# connect, exchange 1 MiB both ways verified and disconnect, the fifth
# misbehaves in the way BAD (a comma list) names next: die (killed DIE ms
# after MPI_Init, while its request waits for the server's MPI_Comm_accept:
# the server spends IDLE ms in other calls before each, and as long as the
# client lives), forge (a forged token), ring (ring settings unlike the
# server's: RING-ENV, default a smaller MPIR_CVAR_CH3_RDMA_RING_SIZE), old
# (a client of another build: the MPICH prefix in SOAK_OLD_PREFIX, e.g.
# one from before the wire version; the same program, its libmpi
# swapped).  The server sees no error and every exchange verifies; its
# memory (resident, malloc'd) and fd counts, start and end, are in the
# diagnostics.
port_soak() {
    local rounds=$1 label=$2 idle=$4 die=$5 pf=$W/soak sv=() cl=() bad
    local ring=${8:-MPIR_CVAR_CH3_RDMA_RING_SIZE=16384} server r k rc
    IFS=, read -r -a bad <<< "$3"
    [[ ",$3," != *,old,* || ( -n $SOAK_OLD_PREFIX && -x $SOAK_OLD_PREFIX/bin/mpiexec ) ]] || {
        ok 1 "$label: 'old' clients need SOAK_OLD_PREFIX, an MPICH prefix (got '$SOAK_OLD_PREFIX')"
        return; }
    [ -z "$6" ] || { sv=(-hosts "$6"); cl=(-hosts "$7"); }
    rm -f "$pf" "$pf.hold"
    timeout -k 5 $((120 + rounds * 180)) "$P/bin/mpiexec" "${sv[@]}" -n 1 "$W/mpi_port" soak "$pf" \
        $((rounds * 4)) "$idle" > "$W/soak.out" 2>&1 &
    server=$!
    for ((r = 0; r < rounds; r++)); do
        for k in 0 1 2 3 4; do
            case $k${bad[r % ${#bad[@]}]} in
            4die) touch "$pf.hold"
                timeout -k 5 60 "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" die "$pf" "$die"
                rm -f "$pf.hold" ;;
            4forge) timeout -k 5 60 "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" forge "$pf" ;;
            4ring) timeout -k 5 60 env "$ring" "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" connect "$pf" ;;
            4old) timeout -k 5 120 env LD_LIBRARY_PATH="$SOAK_OLD_PREFIX/lib" \
                "$SOAK_OLD_PREFIX/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" connect "$pf" ;;
            *) timeout -k 5 120 "$P/bin/mpiexec" "${cl[@]}" -n 1 "$W/mpi_port" connect "$pf" ||
                echo "# good client $r.$k failed" >> "$W/soak.out" ;;
            esac > /dev/null 2>&1
        done
    done
    wait "$server"; rc=$?
    [ $rc -eq 0 ] && grep -q '^ok - port server' "$W/soak.out" && ! grep -q '^# good client' "$W/soak.out"
    ok $? "$label: a port server serves $((rounds * 4)) clients while $rounds misbehave ($3) (exit $rc)"
    grep -E '^# (start|end|good|.*failed)' "$W/soak.out" | sed 's/^# //' | diag
    [ $rc -eq 0 ] || tail -20 "$W/soak.out" | diag
}
