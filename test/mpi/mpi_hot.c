/*
 * mpi_hot: a small-message ping-pong on a quiet connection must not walk
 * the whole ring (MPIR_CVAR_CH3_RDMA_RING_HOT).  Ranks 0 and 1 exchange
 * verified messages, then each sums the resident bytes of the channel's
 * shared-memory regions (its own and the peer's, /proc/self/smaps) and
 * the job fails if a rank holds more than limit KiB of them.  Rank 0
 * prints TAP.
 *
 *   mpi_hot [round_trips [size [limit_kib]]]   (20000, 8, 128)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_tap.h"

/* KiB resident in this process's mappings of the channel's regions. */
static long ring_rss_kib(void)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    long kib = 0, v;
    int ours = 0;

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        if (strchr(line, '-') && strchr(line, '-') < strchr(line, ' '))
            ours = strstr(line, "memfd:ch3-rdma.") != NULL;     /* a mapping's first line */
        else if (ours && sscanf(line, "Rss: %ld kB", &v) == 1)
            kib += v;
    }
    fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    long trips = argc > 1 ? atol(argv[1]) : 20000, limit = argc > 3 ? atol(argv[3]) : 128;
    size_t len = argc > 2 ? strtoul(argv[2], NULL, 0) : 8;
    unsigned char *b = malloc(len + 1);
    long errs = 0, kib, worst;
    char what[160];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    errs = round_trips(b, len, trips);
    snprintf(what, sizeof(what), "%ld round trips of %zu B verify", trips, len);
    report(errs, what);
    kib = ring_rss_kib();
    MPI_Reduce(&kib, &worst, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    snprintf(what, sizeof(what), "channel regions resident: at most %ld KiB per rank "
             "(limit %ld)", rank == 0 ? worst : 0, limit);
    report(kib < 0 || kib > limit, what);
    if (rank == 0)
        printf("1..%d\n", ntests);
    MPI_Finalize();
    free(b);
    return failures != 0;
}
