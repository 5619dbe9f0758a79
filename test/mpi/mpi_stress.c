/*
 * mpi_stress: randomized data-integrity stress.  Every iteration each rank
 * sends one message to rank + k and receives one from rank - k (k drawn per
 * iteration), half of the receives with MPI_ANY_SOURCE.  Sizes are
 * log-uniform from 0 B to --max; each side picks its own layout (contiguous
 * or a strided vector) and its own misalignment; buffers come from malloc
 * (freed after use) or from a mapping that is unmapped and mapped again at
 * the same address now and then, with other contents (elsewhere when
 * another thread mapped there meanwhile).  The receiver checks every
 * payload byte and that nothing outside the payload was written.
 * Every choice comes from the seed, which is printed: the same seed and
 * rank count replay the same traffic.  Run it with each
 * MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL.  Rank 0 prints TAP.
 *
 *   mpi_stress [--seed S] [--iters N | --seconds T] [--max BYTES] [--huge K]
 *     --huge K: K extra iterations of one 2100 MiB contiguous message
 *     from rank 0 to rank 1 (more than one process_vm_readv moves)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mpi_tap.h"

#define GUARD 64                /* sentinel bytes after each buffer */
#define SENTINEL 0xA5

typedef struct layout {
    int vector;
    size_t blk, stride, count, off;     /* vector: count blocks of blk bytes */
} layout_t;

typedef struct plan {
    size_t len;                 /* payload bytes */
    layout_t tx;                /* the sender's layout */
    uint64_t seed;              /* payload pattern */
} plan_t;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

/* Deterministic stream per (seed, iteration, rank, purpose). */
typedef struct rng {
    uint64_t s;
} rng_t;

static rng_t rng_of(uint64_t seed, uint64_t it, int rank, int what)
{
    uint64_t who = (uint64_t) rank << 32 | (unsigned) what;
    rng_t r = { mix(seed ^ mix(it * 0x9e3779b97f4a7c15ULL ^ who)) };

    return r;
}

static uint64_t rnd(rng_t * r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return mix(r->s);
}

static size_t rnd_in(rng_t * r, size_t lo, size_t hi)
{
    return lo + rnd(r) % (hi - lo + 1);
}

static unsigned char pat(uint64_t seed, size_t j)
{
    return (unsigned char) (mix(seed + (j >> 3)) >> (8 * (j & 7)));
}

/* Log-uniform size in [0, max], with the edges (0, 1, thresholds) likely. */
static size_t pick_len(rng_t * r, size_t max)
{
    size_t bits = 0, n;

    while ((2ULL << bits) <= max)
        bits++;
    if (rnd(r) % 16 == 0)
        return rnd(r) % 2;
    n = (size_t) 1 << rnd_in(r, 0, bits);
    n += rnd(r) % n;
    return n > max ? max : n;
}

static layout_t pick_layout(rng_t * r, size_t len)
{
    static const size_t blks[] = { 1, 8, 64, 1000, 4096, 65536 };
    layout_t l = { 0, len, len, 1, rnd_in(r, 0, 63) };
    size_t blk = blks[rnd(r) % 6];

    /* gaps of at most blk bytes: the extent stays below 2 len */
    if (len > 0 && len % blk == 0 && len / blk <= (1u << 20) && rnd(r) % 3 == 0) {
        l.vector = 1;
        l.blk = blk;
        l.count = len / blk;
        l.stride = blk + rnd_in(r, 1, blk < 64 ? blk : 64);
    }
    return l;
}

static size_t extent(const layout_t * l)
{
    return l->count ? (l->count - 1) * l->stride + l->blk : 0;
}

/* Byte j of the payload lives at buf[pos(l, j)]. */
static size_t pos(const layout_t * l, size_t j)
{
    return l->vector ? j / l->blk * l->stride + j % l->blk : j;
}

static MPI_Datatype type_of(const layout_t * l, int *count)
{
    MPI_Datatype t = MPI_BYTE;

    *count = (int) l->count;
    if (l->vector) {
        MPI_Type_vector((int) l->count, (int) l->blk, (int) l->stride, MPI_BYTE, &t);
        MPI_Type_commit(&t);
        *count = 1;
    } else {
        *count = (int) l->blk;
    }
    return t;
}

static void plan_of(plan_t * p, uint64_t seed, uint64_t it, int src, size_t max)
{
    rng_t r = rng_of(seed, it, src, 1);

    p->len = pick_len(&r, max);
    p->tx = pick_layout(&r, p->len);
    p->seed = mix(seed ^ it ^ (uint64_t) src << 48);
}

/* Buffers: a slab mapping remapped at the same address now and then, or
 * malloc (freed after the iteration). */
typedef struct slab {
    unsigned char *base;
    size_t len;
} slab_t;

static unsigned char *slab_get(slab_t * s, size_t need, rng_t * r)
{
    if (s->base && (need > s->len || rnd(r) % 4 == 0)) {
        void *at = need > s->len ? NULL : s->base;

        munmap(s->base, s->len);
        s->len = need > s->len ? need : s->len;
        s->base = map_new(at, s->len);
    } else if (!s->base) {
        s->len = need;
        s->base = map_new(NULL, need);
    }
    return s->base;
}

/* A buffer of need bytes; one that cannot be had ends the job (the peer
 * waits for this iteration's message). */
static unsigned char *buf_get(slab_t * s, size_t need, rng_t * r, int *mallocd)
{
    unsigned char *b;

    *mallocd = rnd(r) % 2;
    b = *mallocd ? malloc(need) : slab_get(s, need, r);
    if (!b) {
        fprintf(stderr, "mpi_stress: rank %d: no memory for a %zu-byte buffer\n", rank, need);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return b;
}

/* Check the received payload and that every other byte kept its sentinel. */
static size_t verify(const unsigned char *b, const layout_t * l, size_t len, uint64_t seed,
                     size_t *first_bad)
{
    size_t j, bad = 0, e = extent(l), end = l->off + e + GUARD;

    *first_bad = SIZE_MAX;
    for (j = 0; j < len; j++)
        if (b[l->off + pos(l, j)] != pat(seed, j)) {
            if (!bad++)
                *first_bad = j;
        }
    for (j = 0; j < end; j++) {
        int payload = j >= l->off && j < l->off + e
            && (!l->vector || (j - l->off) % l->stride < l->blk);
        if (!payload && b[j] != SENTINEL) {
            if (!bad++)
                *first_bad = SIZE_MAX - 1;
        }
    }
    return bad;
}

static void fill_layout(unsigned char *b, const layout_t * l, size_t len, uint64_t seed)
{
    for (size_t j = 0; j < len; j++)
        b[l->off + pos(l, j)] = pat(seed, j);
}

typedef struct totals {
    long msgs, mismatches;
    double bytes;
} totals_t;

/* One iteration: send to rank + k, receive from rank - k (or any). */
static void iteration(uint64_t seed, uint64_t it, size_t max, slab_t slabs[2], totals_t * t)
{
    rng_t g = rng_of(seed, it, -1, 0), r = rng_of(seed, it, rank, 2);
    int k = (int) rnd_in(&g, 1, (size_t) size - 1), to = (rank + k) % size;
    int from = (rank - k + size) % size, any = rnd(&r) % 2, sm, rm, sc, rc;
    plan_t out, in;
    layout_t rx;
    unsigned char *sb, *rb;
    MPI_Datatype st, rt;
    MPI_Request q[2];
    MPI_Status s[2];
    size_t first_bad, bad;

    plan_of(&out, seed, it, rank, max);
    plan_of(&in, seed, it, from, max);
    rx = pick_layout(&r, in.len);
    sb = buf_get(&slabs[0], out.tx.off + extent(&out.tx) + GUARD, &r, &sm);
    rb = buf_get(&slabs[1], rx.off + extent(&rx) + GUARD, &r, &rm);
    fill_layout(sb, &out.tx, out.len, out.seed);
    memset(rb, SENTINEL, rx.off + extent(&rx) + GUARD);
    st = type_of(&out.tx, &sc);
    rt = type_of(&rx, &rc);
    MPI_Irecv(rb + rx.off, rc, rt, any ? MPI_ANY_SOURCE : from, (int) (it & 0x7fff),
              MPI_COMM_WORLD, &q[0]);
    MPI_Isend(sb + out.tx.off, sc, st, to, (int) (it & 0x7fff), MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, s);
    bad = verify(rb, &rx, in.len, in.seed, &first_bad) + (s[0].MPI_SOURCE != from);
    if (bad) {
        t->mismatches++;
        fprintf(stderr, "# MISMATCH seed %llu iteration %llu: rank %d from %d (source %d%s), "
                "%zu B, sender %s blk %zu stride %zu off %zu, receiver %s blk %zu stride %zu "
                "off %zu: %zu bad bytes, first at %zd (-2: outside the payload)\n",
                (unsigned long long) seed, (unsigned long long) it, rank, from,
                s[0].MPI_SOURCE, any ? ", any" : "", in.len,
                in.tx.vector ? "vector" : "contig", in.tx.blk, in.tx.stride, in.tx.off,
                rx.vector ? "vector" : "contig", rx.blk, rx.stride, rx.off, bad,
                (ssize_t) first_bad);
    }
    t->msgs++;
    t->bytes += (double) in.len;
    if (st != MPI_BYTE)
        MPI_Type_free(&st);
    if (rt != MPI_BYTE)
        MPI_Type_free(&rt);
    if (sm)
        free(sb);
    if (rm)
        free(rb);
}

/* Rank 0 -> rank 1, one contiguous message of len bytes at odd offsets. */
static void huge(uint64_t seed, uint64_t it, size_t len, totals_t * t)
{
    layout_t l = { 0, len, len, 1, rank == 0 ? 5 : 3 };
    unsigned char *b = rank < 2 ? malloc(len + 8 + GUARD) : NULL;
    uint64_t s = mix(seed ^ it);
    size_t first_bad, bad = 0;
    MPI_Datatype mib;

    MPI_Type_contiguous(1 << 20, MPI_BYTE, &mib);
    MPI_Type_commit(&mib);
    if (rank < 2 && !b)
        bad = 1;
    else if (rank == 0) {
        fill_layout(b, &l, len, s);
        MPI_Send(b + l.off, (int) (len >> 20), mib, 1, 0x7fff, MPI_COMM_WORLD);
    } else if (rank == 1) {
        memset(b, SENTINEL, l.off + len + GUARD);
        MPI_Recv(b + l.off, (int) (len >> 20), mib, 0, 0x7fff, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        bad = verify(b, &l, len, s, &first_bad);
        if (bad)
            fprintf(stderr, "# MISMATCH seed %llu huge %zu B: %zu bad bytes, first at %zd\n",
                    (unsigned long long) seed, len, bad, (ssize_t) first_bad);
        t->msgs++;
        t->bytes += (double) len;
    }
    t->mismatches += bad != 0;
    MPI_Type_free(&mib);
    free(b);
}

int main(int argc, char **argv)
{
    uint64_t seed = 0, it;
    long iters = -1, nhuge = 0;
    double seconds = 10, t0, t_rand;
    size_t max = 64u << 20;
    slab_t slabs[2] = { {NULL, 0}, {NULL, 0} };
    totals_t t = { 0, 0, 0 }, sum;
    int i, go = 1;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--iters"))
            iters = strtol(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--max"))
            max = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--huge"))
            nhuge = strtol(argv[i + 1], NULL, 0);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (seed == 0)
        seed = (uint64_t) MPI_Wtime() * 1000003u ^ (uint64_t) getpid();
    MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("1..1\n# mpi_stress --seed %llu on %d ranks, sizes 0..%zu B (replay: same seed, "
               "ranks and --iters)\n", (unsigned long long) seed, size, max);
        fflush(stdout);
    }
    t0 = t_rand = MPI_Wtime();
    for (it = 0; size > 1 && go; it++) {
        if ((long) it < nhuge) {
            huge(seed, it, 2100u << 20, &t);
            t_rand = MPI_Wtime();       /* --seconds is for the random traffic */
        } else {
            iteration(seed, it, max, slabs, &t);
        }
        if (rank == 0)
            go = iters >= 0 ? (long) it + 1 < iters + nhuge : MPI_Wtime() - t_rand < seconds;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    MPI_Reduce(&t.msgs, &sum.msgs, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t.mismatches, &sum.mismatches, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&t.bytes, &sum.bytes, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s 1 - %llu iterations, %ld messages, %.3f GB verified in %.0f s, %ld "
               "mismatches (seed %llu)\n", sum.mismatches ? "not ok" : "ok",
               (unsigned long long) it, sum.msgs, sum.bytes / 1e9, MPI_Wtime() - t0,
               sum.mismatches, (unsigned long long) seed);
    for (i = 0; i < 2; i++)
        if (slabs[i].base)
            munmap(slabs[i].base, slabs[i].len);
    MPI_Finalize();
    return rank == 0 && sum.mismatches ? 1 : 0;
}
