/*
 * mpi_conn_wait: a connection whose initiator waits long for a slot of the
 * cap after its peer answered (run with MPIR_CVAR_CH3_RDMA_MAX_CONNS=1 and a
 * CONNECT_TIMEOUT shorter than S, 3 ranks over verbs):
 *   - rank 2 talks to rank 0 (its one slot), then sends it L bytes (a
 *     zero-copy rendezvous from 32 KiB: the link is busy, it cannot close)
 *     while rank 0 computes for S seconds;
 *   - meanwhile rank 2 sends to rank 1.  Rank 1, a lower rank, answers the
 *     request at once; rank 2 takes its slot only when rank 0 has pulled the
 *     L bytes and the link to rank 0 closed.  Rank 1 waits S seconds for
 *     rank 2 to finish the handshake, and must not take it for dead: rank 2
 *     answers each REP with WAIT, which extends rank 1's deadline.
 * Every byte verified; rank 0 prints "ok" and the time rank 1 waited.
 *
 *   mpiexec -n 3 mpi_conn_wait S L
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned char pat(size_t i)
{
    return (unsigned char) (i * 7 + (i >> 9));
}

int main(int argc, char **argv)
{
    int rank, size, secs = argc > 1 ? atoi(argv[1]) : 6, bad = 0;
    size_t len = argc > 2 ? (size_t) atol(argv[2]) : 65536, i;
    unsigned char *buf;
    double t = 0;
    MPI_Request r[2];
    MPI_Status st[2];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    buf = malloc(len);
    if (size != 3 || !buf)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 2) {
        for (i = 0; i < len; i++)
            buf[i] = pat(i);
        MPI_Sendrecv(&bad, 1, MPI_INT, 0, 0, &t, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Isend(buf, (int) len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(&bad, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, st);
    } else if (rank == 0) {
        MPI_Sendrecv(&t, 1, MPI_DOUBLE, 2, 0, &bad, 1, MPI_INT, 2, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        sleep((unsigned) secs); /* no MPI call: rank 2's rendezvous waits */
        MPI_Recv(buf, (int) len, MPI_BYTE, 2, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (i = 0; i < len; i++)
            bad += buf[i] != pat(i);
        if (bad)
            fprintf(stderr, "rank 0: %d bytes from rank 2 are wrong\n", bad);
    } else {
        t = MPI_Wtime();
        MPI_Recv(&bad, 1, MPI_INT, 2, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t = MPI_Wtime() - t;
    }
    MPI_Bcast(&t, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !bad)
        printf("ok: rank 1 waited %.1f s for rank 2's connection\n", t);
    free(buf);
    MPI_Finalize();
    return bad != 0;
}
