/*
 * mpi_tap.h: shared helpers of the MPI test programs (header-only): the
 * byte pattern, a collective TAP line per check printed by rank 0, the
 * channel's MPI_T pvars read by name, and fresh mappings.
 */
#ifndef MPI_TAP_H_INCLUDED
#define MPI_TAP_H_INCLUDED

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

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

/* The channel's pvars names[0..n-1] (n <= 8), opened in one MPI_T session;
 * a missing one aborts the job. */
static __attribute__ ((unused)) MPI_T_pvar_session tap_ses;
static __attribute__ ((unused)) MPI_T_pvar_handle tap_hnd[8];

static __attribute__ ((unused)) void tap_pvars_open(const char *const *names, int n)
{
    int num, i, j, nl, dl, vb, cls, bind, ro, cont, at, count, found = 0, prov;
    char name[64], desc[256];
    MPI_Datatype dt;
    MPI_T_enum et;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &prov);
    MPI_T_pvar_get_num(&num);
    MPI_T_pvar_session_create(&tap_ses);
    for (i = 0; i < num; i++) {
        nl = sizeof(name);
        dl = sizeof(desc);
        if (MPI_T_pvar_get_info(i, name, &nl, &vb, &cls, &dt, &et, desc, &dl, &bind, &ro, &cont,
                                &at) != MPI_SUCCESS)
            continue;
        for (j = 0; j < n; j++)
            if (strcmp(name, names[j]) == 0
                && MPI_T_pvar_handle_alloc(tap_ses, i, NULL, &tap_hnd[j], &count) == MPI_SUCCESS)
                found++;
    }
    if (found != n) {
        fprintf(stderr, "rank %d: %d of the %d pvars (%s, ...) found\n", rank, found, n, names[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static __attribute__ ((unused)) unsigned long long tap_pvar(int j)
{
    unsigned long long v = 0;

    MPI_T_pvar_read(tap_ses, tap_hnd[j], &v);
    return v;
}

static __attribute__ ((unused)) void tap_pvars_close(void)
{
    MPI_T_pvar_session_free(&tap_ses);
    MPI_T_finalize();
}

/* len bytes of new anonymous memory at `at` if that is still free, else
 * anywhere (also when at is NULL): another thread may have mapped there
 * since the program unmapped it -- over verbs the provider moves its queues
 * when the channel thread grows the SRQ or CQ (mmap_taken.c).  NULL only
 * when there is no memory. */
static __attribute__ ((unused)) unsigned char *map_new(void *at, size_t len)
{
    void *p = MAP_FAILED;

    if (at)
        p = mmap(at, len, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

#endif /* MPI_TAP_H_INCLUDED */
