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
