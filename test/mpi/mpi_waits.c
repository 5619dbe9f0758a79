/*
 * mpi_waits: do a ping-pong's waits spin or block?  Ranks 0 and 1
 * exchange verified 8-byte messages; each counts the voluntary context
 * switches of its main thread meanwhile (getrusage RUSAGE_THREAD): a wait
 * that spins makes none, one that blocks in the kernel one or more.
 * Rank 0 prints TAP; every rank prints its count.
 *
 *   mpi_waits round_trips spin    each rank switched fewer than 1 in 20
 *   mpi_waits round_trips block   each rank switched at least 1 in 4
 *
 * Run it with ranks bound to cores of their own (they should spin: the
 * node is not oversubscribed) and bound to one core (they should block).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "mpi_tap.h"

static long switches(void)
{
    struct rusage ru;

    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : -1;
}

int main(int argc, char **argv)
{
    long trips = argc > 1 ? atol(argv[1]) : 2000, errs = 0, sw;
    int spin = argc < 3 || strcmp(argv[2], "block") != 0;
    unsigned char b[8];
    char what[160];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    sw = switches();
    errs = round_trips(b, sizeof(b), trips);
    sw = switches() - sw;
    printf("waits: rank %d made %ld voluntary context switches in %ld round trips\n", rank, sw,
           trips);
    fflush(stdout);
    snprintf(what, sizeof(what), "%ld round trips verify", trips);
    report(errs, what);
    snprintf(what, sizeof(what), "every rank's waits %s (voluntary switches %s %ld)",
             spin ? "spin" : "block", spin ? "<" : ">=", spin ? trips / 20 : trips / 4);
    report(rank < 2 && (sw < 0 || (spin ? sw >= trips / 20 : sw < trips / 4)), what);
    if (rank == 0)
        printf("1..%d\n", ntests);
    MPI_Finalize();
    return failures != 0;
}
