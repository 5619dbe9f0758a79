# build-progs.sh PREFIX DIR -- compile the MPI test programs with PREFIX's
# mpicc into DIR (sourced by the MPI tests).
build_progs() {
    "$1/bin/mpicc" -O2 -o "$2/cpi" "$1/../src/examples/cpi.c" &&
        "$1/bin/mpicc" -O2 -o "$2/mpi_check" "$TOP/test/mpi/mpi_check.c"
}
