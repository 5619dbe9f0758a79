/*
 * mpi_tap.h: shared helpers of the MPI test programs (header-only): the
 * byte pattern and a collective TAP line per check, printed by rank 0.
 */
#ifndef MPI_TAP_H_INCLUDED
#define MPI_TAP_H_INCLUDED

#include <mpi.h>
#include <stdio.h>

static __attribute__ ((unused)) int rank, size, failures, ntests;

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char) (seed * 131u + i * 7u + (i >> 9));
}

static size_t bad_bytes(const unsigned char *b, size_t n, unsigned seed)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += b[i] != (unsigned char) (seed * 131u + i * 7u + (i >> 9));
    return bad;
}

/* Ranks 0 and 1 (of 2 or more): `trips` verified round trips of len
 * bytes through b, rank 0 sending first; this rank's bad round trips. */
static __attribute__ ((unused)) long round_trips(unsigned char *b, size_t len, long trips)
{
    long errs = 0;

    for (long i = 0; i < trips && rank < 2 && size > 1; i++) {
        unsigned seed = (unsigned) (2 * i + rank);
        if (rank == 0) {
            fill(b, len, seed);
            MPI_Send(b, (int) len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(b, (int) len, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            errs += bad_bytes(b, len, seed + 1) != 0;
        } else {
            MPI_Recv(b, (int) len, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            errs += bad_bytes(b, len, seed - 1) != 0;
            fill(b, len, seed);
            MPI_Send(b, (int) len, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    return errs;
}

/* Every rank reports its error count; rank 0 prints one TAP line. */
static __attribute__ ((unused)) void report(long errs, const char *what)
{
    long total = 0;
    MPI_Reduce(&errs, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    ntests++;
    if (rank == 0) {
        printf("%s %d - %s\n", total ? "not ok" : "ok", ntests, what);
        fflush(stdout);
    }
    failures += total != 0;
}

#endif /* MPI_TAP_H_INCLUDED */
