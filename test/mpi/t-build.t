#!/usr/bin/env bash
# The ch3:rdma build: right device, compilers work, tunables are listed.
. "$(dirname "$0")/../lib.sh"
plan 6
P=$(mpich_prefix rdma) || { ok 1 "ch3:rdma is built"; exit 1; }
expect_output 0 'ch3:rdma' "mpichversion reports ch3:rdma" -- "$P/bin/mpichversion"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
expect_output 0 '' "mpicc builds cpi" -- "$P/bin/mpicc" -o "$W/cpi" "$P/../src/examples/cpi.c"
expect_output 0 '' "mpicc builds mpi_check" -- "$P/bin/mpicc" -O2 -o "$W/mpi_check" "$TOP/test/mpi/mpi_check.c"
expect_output 0 'MPIR_CVAR_CH3_RDMA_RING_SIZE' "MPI_T lists the channel tunables (mpivars)" -- "$P/bin/mpivars"
# Built with build-mpich.sh's own arguments (not MPICH_CONFIG_ARGS/--source)?
B="$TOP/channel/build-mpich.sh"
own=0
[ "$(readlink -f "$(bash "$B" --cache "$CACHE" --print-prefix rdma 2>/dev/null)")" = "$P" ] && own=1
other="# SKIP the prefix was built with other arguments (MPICH_CONFIG_ARGS/--source)"
# MPICH's embedded hwloc, whatever the host has installed (build-mpich.sh): no
# libhwloc.so, whose plugins would cost every rank about 0.8 MiB.
if ((own)); then
    libs=$(ldd "$P/lib/libmpi.so" 2>&1)
    ! grep -q 'libhwloc\.so' <<<"$libs"
    r=$?
    ok $r "libmpi uses MPICH's embedded hwloc, not the system's"
    [ $r -eq 0 ] || grep hwloc <<<"$libs" | diag
else
    echo "ok 5 $other"
fi
# A build with nothing changed leaves the installed prefix alone.
if ((own == 0)); then
    echo "ok 6 $other"
else
    before=$(stat -L -c %Y "$P/lib/libmpi.so")
    expect_output 0 'ch3:rdma is up to date' "an unchanged rebuild leaves the prefix untouched" \
        -- bash -c "bash '$B' --cache '$CACHE' rdma && [ \$(stat -L -c %Y '$P/lib/libmpi.so') = $before ]"
fi
done_testing
