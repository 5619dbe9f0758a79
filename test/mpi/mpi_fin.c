/*
 * mpi_fin: how long MPI_Finalize takes after a little traffic.  Every
 * rank exchanges a few messages with its neighbours, then times its own
 * MPI_Finalize (CLOCK_MONOTONIC) and prints "rank R: finalize S s".
 *
 *   mpi_fin [messages]   (100)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, rank, size, i;
    long out = 0, in = 0;
    double t;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (i = 0; i < n; i++) {
        out = i;
        MPI_Sendrecv(&out, 1, MPI_LONG, (rank + 1) % size, 0, &in, 1, MPI_LONG,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (in != i) {
            fprintf(stderr, "rank %d: message %d carried %ld\n", rank, i, in);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    t = now();
    MPI_Finalize();
    printf("rank %d: finalize %.3f s\n", rank, now() - t);
    return 0;
}
