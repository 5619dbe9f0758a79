/*
 * mpi_eager: does a message of SIZE bytes go at once (eager: its send
 * completes before the receive is posted, the receiver buffering it) or
 * wait for its receive (CH3's rendezvous, RTS/CTS)?  And does it arrive
 * intact either way?  2 ranks.
 *
 *   mpi_eager SIZE [WAIT_S]
 *
 * Rank 0 starts an MPI_Isend of SIZE bytes and tests it for up to WAIT_S
 * seconds (default 3), then tells rank 1, which posts the receive only
 * then and checks every byte.  Rank 0 prints one line:
 *   "eager SIZE: early|waited, data ok|N bad bytes"
 * and the program exits 0 when the data is intact.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "mpi_tap.h"

int main(int argc, char **argv)
{
    size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 0;
    double wait_s = argc > 2 ? atof(argv[2]) : 3.0, t0;
    unsigned char *b;
    long bad = 0;
    int done = 0;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || len == 0 || len > (1u << 30)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 mpi_eager SIZE (1..2^30) [WAIT_S]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    b = malloc(len);
    if (rank == 0) {
        fill(b, len, 7);
        MPI_Isend(b, (int) len, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req);
        for (t0 = MPI_Wtime(); !done && MPI_Wtime() - t0 < wait_s;)
            MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        MPI_Send(&done, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Recv(&bad, 1, MPI_LONG, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (bad)
            printf("eager %zu: %s, data %ld bad bytes\n", len, done ? "early" : "waited", bad);
        else
            printf("eager %zu: %s, data ok\n", len, done ? "early" : "waited");
    } else {
        MPI_Recv(&done, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(b, (int) len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = (long) bad_bytes(b, len, 7);
        MPI_Send(&bad, 1, MPI_LONG, 0, 3, MPI_COMM_WORLD);
    }
    free(b);
    MPI_Finalize();
    return bad != 0;
}
