/*
 * mpi_large: data-verified large-message traffic for the zero-copy and
 * copy paths (run it with each MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL).  Rank 0
 * prints TAP.
 *
 *   mpi_large [max_mib [huge [MIB [ROFF]]]]
 *       sizes up to max_mib MiB (default 64); huge: also one message of
 *       MIB MiB (default 2049: 2 GiB + 1 MiB) received at offset ROFF
 *       (edge: 8 MiB before a 64 MiB boundary, where verbs starts a new
 *       receive registration window);
 *       max_mib 0: that message only
 *
 * The remap checks catch stale registrations: a buffer is sent (so its
 * pages may be cached as registered), unmapped, and new memory is mapped
 * at the same address with other contents; a cache that missed the unmap
 * would move the old pages.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "mpi_tap.h"

#define MiB (1u << 20)

/* Rank 0 sends len bytes of pattern seed from b to rank 1, which receives
 * into r and counts bad bytes. */
static long xfer(unsigned char *b, unsigned char *r, size_t len, unsigned seed)
{
    if (rank == 0) {
        fill(b, len, seed);
        MPI_Send(b, (int) len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    } else if (rank == 1) {
        memset(r, 0, len);
        MPI_Recv(r, (int) len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return bad_bytes(r, len, seed) != 0;
    }
    return 0;
}

/* Send from (side 0) or receive into (side 1) a mapping, unmap it, map new
 * memory at the same address (if no other thread took it) and transfer
 * again. */
static void remap(int side)
{
    size_t len = 4 * MiB;
    unsigned char *own = rank < 2 ? malloc(len) : NULL, *m = map_new(NULL, len);
    long errs = 0;
    char what[96];
    int round;

    for (round = 0; round < 3; round++) {
        unsigned char *b = side == 0 ? m : own, *r = side == 0 ? own : m;
        errs += xfer(b, r, len, 11 + round);
        errs += xfer(b, r, len, 21 + round);   /* reuse: the cache hits */
        munmap(m, len);
        if ((m = map_new(m, len)) == NULL) {
            fprintf(stderr, "mpi_large: rank %d: no memory for %zu bytes\n", rank, len);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    munmap(m, len);
    free(own);
    snprintf(what, sizeof(what), "%s buffer unmapped and mapped again (same address if free), "
             "fresh data each time", side == 0 ? "send" : "receive");
    report(errs, what);
}

/* free() then malloc() of the same size usually returns the same address
 * (glibc returns large chunks to the OS with munmap). */
static void realloc_cycle(void)
{
    long errs = 0;
    int i;

    for (i = 0; i < 4; i++) {
        unsigned char *b = malloc(8 * MiB), *r = malloc(8 * MiB);
        errs += b == NULL || r == NULL || xfer(b, r, 8 * MiB, 31 + i);
        free(b);
        free(r);
    }
    report(errs, "8 MiB malloc/free cycles on both sides, data verified");
}

/* MPI_Alloc_mem blocks: from 1 MiB whole transparent huge pages (the
 * channel's MPIDI_CH3I_Alloc_mem), so 2 MiB-aligned; data verified at
 * unaligned offsets, each size allocated and freed twice (the second block
 * may get the first's address, with new contents). */
static void alloc_mem(size_t max)
{
    long errs = 0, misaligned = 0;
    size_t n;
    char what[160];

    for (n = MiB; n <= max; n *= 2)
        for (int i = 0; i < 2; i++) {
            unsigned char *b = NULL, *r = NULL;

            MPI_Alloc_mem((MPI_Aint) (n + 64), MPI_INFO_NULL, &b);
            MPI_Alloc_mem((MPI_Aint) (n + 64), MPI_INFO_NULL, &r);
            misaligned += ((uintptr_t) b | (uintptr_t) r) % (2 * MiB) != 0;
            errs += xfer(b + i, r + 3, n, (unsigned) (n + i));
            MPI_Free_mem(b);
            MPI_Free_mem(r);
        }
    snprintf(what, sizeof(what), "MPI_Alloc_mem 1..%zu MiB, twice each, verified; "
             "%ld blocks of 1 MiB or more not 2 MiB-aligned", max / MiB, misaligned);
    report(errs + misaligned, what);
}

/* Sizes around the threshold and the ring, unaligned on both sides. */
static void sizes(size_t max)
{
    unsigned char *b = malloc(max + 64), *r = malloc(max + 64);
    long errs = 0;
    size_t n;
    char what[80];

    for (n = 1024; n <= max; n *= 2) {
        size_t v[3] = { n - 1, n, n + 5 };
        for (int k = 0; k < 3; k++)
            errs += xfer(b + 1 + k, r + 7 - k, v[k] > max ? max : v[k], (unsigned) v[k]);
    }
    snprintf(what, sizeof(what), "1 KiB..%zu MiB, unaligned, verified", max / MiB);
    report(errs, what);
    free(b);
    free(r);
}

/* A strided datatype: CH3 packs it, the channel sees pack buffers. */
static void vector(void)
{
    int count = 16384, blk = 64, stride = 128;
    unsigned char *b = malloc((size_t) count * stride);
    long errs = 0;
    MPI_Datatype t;

    MPI_Type_vector(count, blk, stride, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    if (rank == 0) {
        fill(b, (size_t) count * stride, 41);
        MPI_Send(b, 1, t, 1, 2, MPI_COMM_WORLD);
    } else if (rank == 1) {
        memset(b, 0, (size_t) count * stride);
        MPI_Recv(b, 1, t, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        unsigned char *want = malloc((size_t) count * stride);
        fill(want, (size_t) count * stride, 41);
        for (int i = 0; i < count; i++)
            errs += memcmp(b + (size_t) i * stride, want + (size_t) i * stride, blk) != 0;
        free(want);
    }
    MPI_Type_free(&t);
    free(b);
    report(errs, "1 MiB strided vector datatype, verified");
}

/* Every rank sends 3 MiB to every other at once, receives posted late
 * (after a barrier), so parts arrive unexpected. */
static void crossing(void)
{
    size_t len = 3 * MiB + 17;
    unsigned char *s = malloc(len * size), *r = malloc(len * size);
    MPI_Request *q = malloc(2 * size * sizeof(*q));
    MPI_Status *st = malloc(2 * size * sizeof(*st));    /* not IGNORE: gcc 12 warns */
    long errs = 0;
    int p, n = 0;

    for (p = 0; p < size; p++)
        if (p != rank) {
            fill(s + len * p, len, 100 * rank + p);
            MPI_Isend(s + len * p, (int) len, MPI_BYTE, p, 3, MPI_COMM_WORLD, &q[n++]);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    for (p = 0; p < size; p++)
        if (p != rank)
            MPI_Irecv(r + len * p, (int) len, MPI_BYTE, p, 3, MPI_COMM_WORLD, &q[n++]);
    MPI_Waitall(n, q, st);
    for (p = 0; p < size; p++)
        errs += p != rank && bad_bytes(r + len * p, len, 100 * p + rank) != 0;
    report(errs, "3 MiB to every rank at once, receives posted late, verified");
    free(s);
    free(r);
    free(q);
    free(st);
}

#define EDGE SIZE_MAX
#define WINDOW (64 * (size_t) MiB)

/* One message of mib MiB (count of a 1 MiB contiguous type) received at
 * byte offset roff of the receive buffer: > 2 GiB exceeds what one
 * process_vm_readv moves, so the copies come back short.  roff EDGE: the
 * receiver can pin the first 8 MiB (one window) and, under a low memlock
 * limit, not the next window. */
static void huge(size_t mib, size_t roff)
{
    size_t len = mib * MiB, extra = roff == EDGE ? WINDOW : roff;
    unsigned char *b = rank < 2 ? malloc(len + extra) : NULL;
    long errs = rank < 2 && b == NULL;
    char what[80];
    MPI_Datatype t;

    if (roff == EDGE)
        roff = (WINDOW - ((uintptr_t) b + 8 * MiB) % WINDOW) % WINDOW;

    MPI_Type_contiguous(MiB, MPI_BYTE, &t);
    MPI_Type_commit(&t);
    if (b && rank == 0) {
        fill(b, len, 51);
        MPI_Send(b, (int) mib, t, 1, 4, MPI_COMM_WORLD);
    } else if (b && rank == 1) {
        memset(b, 0, len + extra);
        MPI_Recv(b + roff, (int) mib, t, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errs += bad_bytes(b + roff, len, 51) != 0;
    }
    MPI_Type_free(&t);
    free(b);
    snprintf(what, sizeof(what), "%zu MiB message into receive offset %zu, verified", mib, roff);
    report(errs, what);
}

int main(int argc, char **argv)
{
    size_t max = argc > 1 ? strtoul(argv[1], NULL, 0) * MiB : 64 * MiB;
    int big = argc > 2 && !strcmp(argv[2], "huge");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..%d\n", max ? 7 + big : big);
    if (max) {
        sizes(max);
        remap(0);
        remap(1);
        realloc_cycle();
        vector();
        crossing();
        alloc_mem(max);
    }
    if (big)
        huge(argc > 3 ? strtoul(argv[3], NULL, 0) : 2049, argc < 5 ? 0 :
             !strcmp(argv[4], "edge") ? EDGE : strtoul(argv[4], NULL, 0));
    MPI_Finalize();
    return failures ? 1 : 0;
}
