/*
 * pingpong: 2-rank MPI ping-pong with data verification, used by peers.sh and t-runner.t.
 * Each rank prints its MPI_Get_processor_name(); rank 0 prints the half round-trip time per
 * size and "pingpong: PASS" or "pingpong: FAIL". usage: pingpong [ITERATIONS]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static const int sizes[] = { 8, 4096, 65536, 1 << 20 };

int main(int argc, char **argv)
{
    int rank, nranks, len, iters = argc > 1 ? atoi(argv[1]) : 20, errors = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Get_processor_name(name, &len);
    printf("rank %d of %d on %s\n", rank, nranks, name);
    fflush(stdout);
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: needs exactly 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    unsigned char *buf = malloc(1 << 20);
    int peer = 1 - rank;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        int n = sizes[s];
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = 0;
        for (int i = -1; i < iters; i++) {      /* i == -1: untimed warm-up */
            if (i == 0)
                t0 = MPI_Wtime();
            if (rank == 0) {
                for (int k = 0; k < n; k++)
                    buf[k] = (unsigned char) (k * 7 + i);
                MPI_Send(buf, n, MPI_BYTE, peer, i + 1, MPI_COMM_WORLD);
                MPI_Recv(buf, n, MPI_BYTE, peer, i + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < n; k++)
                    errors += buf[k] != (unsigned char) (k * 7 + i + 1);
            } else {
                MPI_Recv(buf, n, MPI_BYTE, peer, i + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < n; k++)
                    buf[k]++;   /* the reply proves the data arrived intact */
                MPI_Send(buf, n, MPI_BYTE, peer, i + 1, MPI_COMM_WORLD);
            }
        }
        double us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
        if (rank == 0) {
            printf("%8d B  %10.1f us  %8.2f MB/s\n", n, us, n / us);
            fflush(stdout);
        }
    }
    if (rank == 0)
        printf("pingpong: %s (%d bad bytes)\n", errors ? "FAIL" : "PASS", errors);
    free(buf);
    MPI_Finalize();
    return errors != 0;
}
