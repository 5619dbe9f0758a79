# build-progs.sh -- sourced by the MPI tests after lib.sh.
# mpi_setup: P = the ch3:rdma prefix, W = a scratch directory (removed on
# exit) holding cpi and mpi_check built with P's mpicc.
mpi_setup() {
    P=$(mpich_prefix rdma) || { echo "Bail out! ch3:rdma is not built (run make)"; exit 1; }
    W=$(mktemp -d)
    trap 'rm -rf "$W"' EXIT
    "$P/bin/mpicc" -O2 -o "$W/cpi" "$P/../src/examples/cpi.c" &&
        "$P/bin/mpicc" -O2 -o "$W/mpi_check" "$TOP/test/mpi/mpi_check.c" ||
        { echo "Bail out! cannot compile the MPI test programs"; exit 1; }
}
