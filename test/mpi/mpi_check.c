/*
 * mpi_check: data-verified point-to-point traffic for the channel tests.
 * Rank 0 prints TAP.  Every payload byte is checked.
 *
 *   mpi_check [max_bytes]      (default 4 MiB)
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_tap.h"

/* Ping-pong between ranks 0 and 1 at every power of two up to max (and
 * odd sizes around them), unaligned buffers. */
static void pingpong(size_t max)
{
    unsigned char *buf = malloc(max + 16);
    long errs = 0;
    char what[80];

    for (size_t n = 0; n <= max; n = n ? n * 2 : 1) {
        size_t sizes[3] = { n, n + 3, n > 7 ? n - 7 : n };
        for (int k = 0; k < 3 && rank < 2 && size > 1; k++) {
            size_t len = sizes[k] > max ? max : sizes[k];
            unsigned char *b = buf + 1 + k;
            if (rank == 0) {
                fill(b, len, (unsigned) len);
                MPI_Send(b, (int) len, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
                memset(b, 0, len);
                MPI_Recv(b, (int) len, MPI_BYTE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                errs += bad_bytes(b, len, (unsigned) len + 1) != 0;
            } else {
                MPI_Recv(b, (int) len, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                errs += bad_bytes(b, len, (unsigned) len) != 0;
                fill(b, len, (unsigned) len + 1);
                MPI_Send(b, (int) len, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
            }
        }
        if (n >= max)
            break;
    }
    snprintf(what, sizeof(what), "ping-pong 0..%zu bytes, unaligned, verified", max);
    report(errs, what);
    free(buf);
}

/* Every rank sends a window of messages to every other rank at once
 * (both directions fill their rings together). */
static void all_to_all_window(size_t len, int window)
{
    int n = size * window;
    unsigned char *sb = malloc(len * n), *rb = malloc(len * n);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * n);
    MPI_Status *sts = malloc(sizeof(MPI_Status) * 2 * n);
    long errs = 0;
    int q = 0;
    char what[96];

    for (int p = 0; p < size; p++)
        for (int w = 0; w < window; w++) {
            size_t i = (size_t) p * window + w;
            fill(sb + i * len, len, (unsigned) (rank * 1000 + p * 10 + w));
            MPI_Irecv(rb + i * len, (int) len, MPI_BYTE, p, w, MPI_COMM_WORLD, &rq[q++]);
        }
    for (int p = 0; p < size; p++)
        for (int w = 0; w < window; w++) {
            size_t i = (size_t) p * window + w;
            MPI_Isend(sb + i * len, (int) len, MPI_BYTE, p, w, MPI_COMM_WORLD, &rq[q++]);
        }
    MPI_Waitall(q, rq, sts);
    for (int p = 0; p < size; p++)
        for (int w = 0; w < window; w++)
            errs += bad_bytes(rb + ((size_t) p * window + w) * len, len,
                              (unsigned) (p * 1000 + rank * 10 + w)) != 0;
    snprintf(what, sizeof(what), "all-to-all window %d x %zu bytes, verified", window, len);
    report(errs, what);
    free(sb);
    free(rb);
    free(rq);
    free(sts);
}

/* Messages that arrive before their receive is posted. */
static void unexpected(void)
{
    long errs = 0;
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    unsigned char small[100], big[200000];

    fill(small, sizeof(small), 3);
    fill(big, sizeof(big), 4);
    MPI_Send(small, sizeof(small), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    MPI_Request r;
    MPI_Isend(big, sizeof(big), MPI_BYTE, peer, 2, MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Status st;
    MPI_Probe(from, 2, MPI_COMM_WORLD, &st);
    static unsigned char rbig[200000];
    MPI_Recv(rbig, sizeof(rbig), MPI_BYTE, from, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(small, sizeof(small), MPI_BYTE, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    errs += bad_bytes(small, sizeof(small), 3) != 0;
    errs += bad_bytes(rbig, sizeof(rbig), 4) != 0;
    report(errs, "unexpected eager and rendezvous messages, probe, verified");
}

/* Collectives and a non-contiguous datatype. */
static void collectives(void)
{
    long errs = 0;
    int v = rank + 1, sum = 0;
    double col[64][4], got[64];

    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    errs += sum != size * (size + 1) / 2;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 4; j++)
            col[i][j] = i * 4 + j;
    MPI_Datatype column;
    MPI_Type_vector(64, 1, 4, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    if (size > 1 && rank == 0)
        MPI_Send(&col[0][2], 1, column, 1, 9, MPI_COMM_WORLD);
    if (size > 1 && rank == 1) {
        MPI_Recv(got, 64, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < 64; i++)
            errs += got[i] != i * 4 + 2;
    }
    MPI_Type_free(&column);
    report(errs, "allreduce and a strided datatype");
}

/* "# N ranks on K kernels": distinct boot ids among the ranks (run-vm --vms
 * boots one kernel per node; node names in one VM share theirs). */
static void kernels(void)
{
    char id[40] = "", *all = NULL;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    int k = 0;

    if (f && !fgets(id, sizeof(id), f))
        id[0] = 0;
    if (f)
        fclose(f);
    if (rank == 0)
        all = calloc((size_t) size, sizeof(id));
    MPI_Gather(id, sizeof(id), MPI_CHAR, all, sizeof(id), MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0)
        return;
    for (int i = 0, j; i < size; i++) {
        for (j = 0; j < i && strcmp(all + i * sizeof(id), all + j * sizeof(id)); j++)
            ;
        k += j == i;
    }
    printf("# %d ranks on %d kernels\n", size, k);
    free(all);
}

int main(int argc, char **argv)
{
    size_t max = argc > 1 ? strtoul(argv[1], NULL, 0) : (4u << 20);
    char name[MPI_MAX_PROCESSOR_NAME];
    int len;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);
    if (rank == 0)
        printf("1..6\n# %d ranks, rank 0 on %s\n", size, name);
    kernels();
    pingpong(max);
    all_to_all_window(8, 64);
    all_to_all_window(20000, 8);
    all_to_all_window(300000, 2);
    unexpected();
    collectives();
    MPI_Finalize();
    return failures ? 1 : 0;
}
