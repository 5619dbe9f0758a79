/*
 * mpi_early: a stream of messages that arrive before their receives.
 * CH3 buffers each in memory it mallocs, copies it out when the receive
 * is posted and frees it; glibc used to give that memory back to the
 * kernel (heap trim) after every burst and take it again, a page fault
 * per 4 KiB of every message.  2 ranks.
 *
 *   mpi_early SIZE COUNT ROUNDS
 *
 * Each round rank 0 sends COUNT messages of SIZE bytes, then a "go";
 * rank 1 receives the "go" first (so the COUNT messages are all early),
 * then posts their receives and checks every byte.  Rank 1 counts its
 * minor page faults per round (getrusage).  Rank 0 prints one line:
 *   "early SIZE x COUNT: faults per round F1 F2 ..., max after the first
 *    M of P pages a round, data ok|N bad messages"
 * and the program exits 0 when the data is intact.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include "mpi_tap.h"

#define MAX_ROUNDS 16

static long minflt(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* MPI_Waitall with statuses: gcc 12 misreads MPI_STATUSES_IGNORE as an
 * array of size 0. */
static void wait_all(int count, MPI_Request * req)
{
    MPI_Status *st = malloc(sizeof(*st) * (size_t) count);

    MPI_Waitall(count, req, st);
    free(st);
}

/* Rank 1's round: faults taken while COUNT early messages were buffered
 * and received; *bad counts corrupt ones. */
static long recv_round(unsigned char **b, size_t len, int count, int round, long *bad)
{
    MPI_Request *req = malloc(sizeof(*req) * (size_t) count);
    long f0 = minflt(), f;
    int go;

    MPI_Recv(&go, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < count; i++)
        MPI_Irecv(b[i], (int) len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[i]);
    wait_all(count, req);
    f = minflt() - f0;
    for (int i = 0; i < count; i++)
        *bad += bad_bytes(b[i], len, (unsigned) (round * count + i)) != 0;
    free(req);
    return f;
}

static void send_round(unsigned char **b, size_t len, int count, int round)
{
    MPI_Request *req = malloc(sizeof(*req) * (size_t) count);
    int go = 1;

    for (int i = 0; i < count; i++) {
        fill(b[i], len, (unsigned) (round * count + i));
        MPI_Isend(b[i], (int) len, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[i]);
    }
    MPI_Send(&go, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
    wait_all(count, req);
    free(req);
}

int main(int argc, char **argv)
{
    size_t len = argc > 3 ? strtoul(argv[1], NULL, 0) : 0;
    int count = argc > 3 ? atoi(argv[2]) : 0, rounds = argc > 3 ? atoi(argv[3]) : 0;
    long f[MAX_ROUNDS], bad = 0, worst = 0;
    unsigned char **b;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || len == 0 || len > (1u << 26) || count < 1 || count > 1024 || rounds < 2
        || rounds > MAX_ROUNDS) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 mpi_early SIZE (1..2^26) COUNT (1..1024) "
                    "ROUNDS (2..%d)\n", MAX_ROUNDS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    b = malloc(sizeof(*b) * (size_t) count);
    for (int i = 0; i < count; i++) {
        b[i] = malloc(len);
        fill(b[i], len, 0);     /* touched: the receive buffers take no faults */
    }
    for (int r = 0; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            send_round(b, len, count, r);
        else
            f[r] = recv_round(b, len, count, r, &bad);
    }
    if (rank == 1) {
        MPI_Send(f, rounds, MPI_LONG, 0, 3, MPI_COMM_WORLD);
        MPI_Send(&bad, 1, MPI_LONG, 0, 3, MPI_COMM_WORLD);
    } else {
        MPI_Recv(f, rounds, MPI_LONG, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&bad, 1, MPI_LONG, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("early %zu x %d: faults per round", len, count);
        for (int r = 0; r < rounds; r++) {
            printf(" %ld", f[r]);
            worst = r > 0 && f[r] > worst ? f[r] : worst;
        }
        printf(", max after the first %ld of %zu pages a round, ", worst,
               len * (size_t) count / 4096);
        if (bad)
            printf("data %ld bad messages\n", bad);
        else
            printf("data ok\n");
    }
    for (int i = 0; i < count; i++)
        free(b[i]);
    free(b);
    MPI_Finalize();
    return bad != 0;
}
