/*
 * mpi_rma_direct: one-sided operations that go without the target's CPU
 * (RDMA write/read between nodes, CMA into user-memory windows on a
 * node), one TAP line per check.
 *
 *   mpiexec -n N mpi_rma_direct [DIRECT]
 *
 * DIRECT 1 (default): contiguous puts and gets must be counted by the
 * pvars rdma_rma_direct_puts/gets; 0 (MPIR_CVAR_CH3_RDMA_RMA_DIRECT=0):
 * none may be.  Windows over user memory (MPI_Win_create), N >= 2.
 * 1. lock_all + flush: each rank puts a block into the next rank's window
 *    and gets the previous rank's block; all verified by the owners.
 * 2. fence, 3. PSCW: the same, the owner reads after its epoch ends.
 * 3b. lock_all with one flush after both puts and one after both gets: the
 *    second of each is still pending when the flush asks for the epoch's
 *    end, so it must stay a message (a direct one carries no FLUSH, and
 *    CH3 would never send one: the flush hung); only the data is checked.
 * 4. An exclusive-lock counter at rank 0: get, flush, put +1, unlock,
 *    K times per rank; it ends at N*K only if each unlock waited for its
 *    put to land before the next holder read.
 * 5. Accumulates and derived-datatype puts are sent as messages (counted
 *    by rdma_rma_messages, never as direct).
 * 6. A dynamic window (MPI_Win_attach, addresses exchanged): lock_all +
 *    flush puts and gets as in 1, direct where the peer shares our node
 *    communicator (CMA needs no registration), messages across nodes.
 * 8. A dynamic window with info coll_attach=true: the same, direct to
 *    every rank (attached memory registered, keys exchanged), in two
 *    regions; then detached, unmapped, mapped again at the same address
 *    (new pages) and attached larger: operations land in the new pages.
 * 9. Messages carry their epoch's synchronisation: rank 0 alone, K times
 *    MPI_Win_lock + an 8-byte MPI_Accumulate + MPI_Win_unlock to rank 1:
 *    one ring frame each (rdma_ring_frames; CH3 keeps the operation back
 *    to carry the lock and unlock), not a LOCK message besides; then K
 *    times MPI_Fetch_and_op + MPI_Accumulate + MPI_Win_flush inside one
 *    lock_all: two frames, the flush riding on the second, not a FLUSH
 *    message besides.  The sums and the values fetched are checked.
 * 10. Started at the call (rdma_rma_direct_at_call): in lock_all, once the
 *    first operation's lock request is granted, K rounds of a 2 KiB put,
 *    MPI_Win_flush_local, MPI_Rput, flush, then a get and MPI_Rget to the
 *    next rank, read back right: all 4K started at the call if DIRECT
 *    (the flush_local leaves the target idle), none if
 *    not; a put queued behind an accumulate CH3 keeps back is not (it
 *    waits in CH3's queue), and both land; a put after a flush_local that
 *    sent such an accumulate is again.
 *
 *   mpiexec -n N mpi_rma_direct parts
 *
 * Shared memory, puts and gets as messages (RMA_CMA_MIN unset), large
 * parts forced zero-copy (LARGE_PROTOCOL=zcopy): only check 7.  A 256 KiB
 * put's data keeps to the ring (rdma_copy_parts grows, rdma_zcopy_parts
 * does not), a 1 MiB put's is a zero-copy part; so is the answer to a lone
 * 256 KiB get, while of four such gets in one flush the answers queued
 * behind the first keep to the ring (ch3_send.c, ring_only); all land.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "mpi_tap.h"

enum { BLOCK = 4096, K = 200, V_PUT = 0, V_GET = 1, V_MSG = 2 };
enum { V_ZC = 3, V_COPY = 4, V_FRAMES = 5, V_AT_CALL = 6 };
static const char *const pvar_names[] = { "rdma_rma_direct_puts", "rdma_rma_direct_gets",
    "rdma_rma_messages", "rdma_zcopy_parts", "rdma_copy_parts", "rdma_ring_frames",
    "rdma_rma_direct_at_call"
};

static int expect_direct = 1;

/* The three counters now ({puts, gets, messages}). */
static void counts(unsigned long long *now)
{
    for (int j = 0; j < 3; j++)
        now[j] = tap_pvar(j);
}

/* Counted as it should: of the two operations of a kind, at least one
 * direct (the first to a target may carry the epoch's lock request, which
 * is a message) if expect, else none. */
static long direct_ok(const unsigned long long *before, int j, int expect)
{
    unsigned long long d = tap_pvar(j) - before[j];

    if (expect ? d >= 1 && d <= 2 : d == 0)
        return 0;
    fprintf(stderr, "rank %d: %s grew by %llu, expected %s\n", rank, pvar_names[j], d,
            expect ? "1 or 2" : "0");
    return 1;
}

/* The block as two puts from target displacement pd and the peer's as two
 * gets from gd, the second half of each half a block (half) further on;
 * flush 1: each flushed, so that the lock carried by the first is granted
 * when the second is issued (a direct operation never carries a lock
 * request or an epoch's end); 2: one flush after each pair. */
static void put_get(const double *src, double *got, int n, int next, int prev, MPI_Win win,
                    int flush, MPI_Aint pd, MPI_Aint gd, MPI_Aint half)
{
    for (int h = 0; h < 2; h++) {
        MPI_Put(src + h * n / 2, n / 2, MPI_DOUBLE, next, pd + h * half, n / 2, MPI_DOUBLE, win);
        if (flush == 1 || (flush == 2 && h == 1))
            MPI_Win_flush(next, win);
    }
    for (int h = 0; h < 2; h++) {
        MPI_Get(got + h * n / 2, n / 2, MPI_DOUBLE, prev, gd + h * half, n / 2, MPI_DOUBLE, win);
        if (flush == 1 || (flush == 2 && h == 1))
            MPI_Win_flush(prev, win);
    }
}

static void pattern(double *b, int n, int who, int round)
{
    for (int i = 0; i < n; i++)
        b[i] = who * 1e6 + round * 1e3 + i;
}

static long bad_block(const double *b, int n, int who, int round)
{
    for (int i = 0; i < n; i++)
        if (b[i] != who * 1e6 + round * 1e3 + i)
            return 1;
    return 0;
}

/* One round in sync mode m (0 lock_all/flush, 1 fence, 2 PSCW, 3 lock_all
 * with one flush per pair of operations): the window
 * holds [0, BLOCK) written by the previous rank, [BLOCK, 2 BLOCK) ours. */
static long round_trip(int m, int round)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, n = BLOCK / 8;
    double *win_mem = calloc(2 * n, sizeof(double)), src[BLOCK / 8], got[BLOCK / 8];
    unsigned long long before[3];
    MPI_Group world, pair;
    int ranks[2] = { prev, next };
    long errs = 0;
    MPI_Win win;

    pattern(win_mem + n, n, rank, round + 1);
    pattern(src, n, rank, round);
    MPI_Win_create(win_mem, 2 * BLOCK, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, size > 2 ? 2 : 1, ranks, &pair);
    counts(before);
    if (m == 0 || m == 3) {
        MPI_Win_lock_all(0, win);
        put_get(src, got, n, next, prev, win, m == 0 ? 1 : 2, 0, n, n / 2);
        MPI_Win_unlock_all(win);
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (m == 1) {
        MPI_Win_fence(0, win);
        put_get(src, got, n, next, prev, win, 0, 0, n, n / 2);
        MPI_Win_fence(0, win);
    } else {
        MPI_Win_post(pair, 0, win);
        MPI_Win_start(pair, 0, win);
        put_get(src, got, n, next, prev, win, 0, 0, n, n / 2);
        MPI_Win_complete(win);
        MPI_Win_wait(win);
    }
    errs += bad_block(win_mem, n, prev, round) + bad_block(got, n, prev, round + 1);
    if (m != 3)
        errs += direct_ok(before, V_PUT, expect_direct) + direct_ok(before, V_GET, expect_direct);
    MPI_Win_free(&win);
    MPI_Group_free(&pair);
    MPI_Group_free(&world);
    free(win_mem);
    return errs;
}

/* Check 4: the counter at rank 0 under exclusive locks. */
static long locked_counter(void)
{
    long *mem = calloc(1, sizeof(long)), v, errs = 0;
    MPI_Win win;

    MPI_Win_create(mem, sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    for (int i = 0; i < K; i++) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Get(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
        MPI_Win_flush(0, win);
        v++;
        MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && *mem != (long) size * K) {
        fprintf(stderr, "counter %ld, expected %ld: an unlock let the next holder in early\n",
                *mem, (long) size * K);
        errs++;
    }
    MPI_Win_free(&win);
    free(mem);
    return errs;
}

/* Check 5: accumulates and a strided put go as messages. */
static long messages(void)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double *mem = calloc(64, sizeof(double)), one[32];
    unsigned long long before[3];
    MPI_Datatype strided;
    long errs = 0;
    MPI_Win win;

    for (int i = 0; i < 32; i++)
        one[i] = 1.0;
    MPI_Type_vector(16, 1, 2, MPI_DOUBLE, &strided);
    MPI_Type_commit(&strided);
    MPI_Win_create(mem, 64 * sizeof(double), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    counts(before);
    MPI_Win_lock_all(0, win);
    MPI_Accumulate(one, 32, MPI_DOUBLE, next, 0, 32, MPI_DOUBLE, MPI_SUM, win);
    MPI_Put(one, 16, MPI_DOUBLE, next, 32, 1, strided, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 32; i++)
        errs += mem[i] != 1.0 || mem[32 + i] != (i % 2 == 0 ? 1.0 : 0.0);
    if (tap_pvar(V_PUT) != before[V_PUT] || tap_pvar(V_MSG) < before[V_MSG] + 2) {
        fprintf(stderr, "rank %d: direct puts +%llu, messages +%llu (expected 0, 2)\n", rank,
                tap_pvar(V_PUT) - before[V_PUT], tap_pvar(V_MSG) - before[V_MSG]);
        errs++;
    }
    (void) prev;
    MPI_Win_free(&win);
    MPI_Type_free(&strided);
    free(mem);
    return errs;
}

/* Check 9: at most per frames an epoch, and a stray one every 4 epochs. */
static long frames_ok(const char *what, unsigned long long f0, int per)
{
    unsigned long long d = tap_pvar(V_FRAMES) - f0;

    if (d <= (unsigned long long) (per * K + K / 4))
        return 0;
    fprintf(stderr, "rank 0: %s: %llu ring frames for %d epochs, expected %d each\n", what, d,
            K, per);
    return 1;
}

/* Check 9: rank 0's accumulates and fetch-and-ops to rank 1, the epoch's
 * synchronisation carried by the last message. */
static long piggyback(void)
{
    long *mem = calloc(2, sizeof(long)), one = 1, old, errs = 0;
    unsigned long long f0;
    MPI_Win win;

    MPI_Win_create(mem, 2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (rank == 0) {
        f0 = tap_pvar(V_FRAMES);
        for (int i = 0; i < K; i++) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
            MPI_Accumulate(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, MPI_SUM, win);
            MPI_Win_unlock(1, win);
        }
        errs += frames_ok("lock, accumulate, unlock", f0, 1);
        MPI_Win_lock_all(0, win);
        f0 = tap_pvar(V_FRAMES);
        for (int i = 0; i < K; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 1, MPI_SUM, win);
            MPI_Accumulate(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, MPI_SUM, win);
            MPI_Win_flush(1, win);
            errs += old != i;
        }
        errs += frames_ok("fetch-and-op, accumulate, flush", f0, 2);
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1 && (mem[0] != 2 * K || mem[1] != K)) {
        fprintf(stderr, "rank 1: sums %ld and %ld, expected %d and %d\n", mem[0], mem[1], 2 * K, K);
        errs++;
    }
    MPI_Win_free(&win);
    free(mem);
    return errs;
}

/* Is world rank r in our node communicator? */
static int on_node(int r)
{
    MPI_Comm node;
    MPI_Group world, g;
    int in;

    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Comm_group(node, &g);
    MPI_Group_translate_ranks(world, 1, &r, g, &in);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    MPI_Comm_free(&node);
    return in != MPI_UNDEFINED;
}

/* One round of checks 6 and 8: mem (len bytes, 2 BLOCK used) attached to
 * the dynamic window win, the absolute addresses exchanged; lock_all +
 * flush puts of pattern p and gets of pattern p + 1, direct as dput and
 * dget say. */
static long attached_round(MPI_Win win, double *mem, size_t len, int p, int dput, int dget)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, n = BLOCK / 8;
    double src[BLOCK / 8], got[BLOCK / 8];
    MPI_Aint *addr = malloc(size * sizeof(MPI_Aint));
    unsigned long long before[3];
    long errs;

    memset(mem, 0, BLOCK);
    pattern(mem + n, n, rank, p + 1);
    pattern(src, n, rank, p);
    MPI_Win_attach(win, mem, (MPI_Aint) len);
    MPI_Get_address(mem, &addr[rank]);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    counts(before);
    MPI_Win_lock_all(0, win);
    put_get(src, got, n, next, prev, win, 1, addr[next], addr[prev] + BLOCK, BLOCK / 2);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    errs = bad_block(mem, n, prev, p) + bad_block(got, n, prev, p + 1);
    errs += direct_ok(before, V_PUT, dput) + direct_ok(before, V_GET, dget);
    MPI_Win_detach(win, mem);
    free(addr);
    return errs;
}

/* Check 6: a dynamic window without coll_attach: direct on the node only. */
static long dynamic(void)
{
    double *mem = malloc(2 * BLOCK);
    int near_next = on_node((rank + 1) % size), near_prev = on_node((rank + size - 1) % size);
    long errs;
    MPI_Win win;

    MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    errs = attached_round(win, mem, 2 * BLOCK, 6, expect_direct && near_next,
                          expect_direct && near_prev);
    MPI_Win_free(&win);
    free(mem);
    return errs;
}

/* Check 8: a dynamic window with coll_attach; 2 BLOCK of a mapping of
 * 4 attached, detached, the mapping unmapped and mapped again where it
 * was, and all 4 attached: a key to the first region, had a peer kept it,
 * would be found first for the same target range (and reach deregistered
 * memory, or the old pages). */
static long coll_attach(void)
{
    double *other = calloc(BLOCK / 8, sizeof(double)), *mem = NULL;
    long errs = 0;
    MPI_Info info;
    MPI_Win win;

    MPI_Info_create(&info);
    MPI_Info_set(info, "coll_attach", "true");
    MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win);
    MPI_Info_free(&info);
    MPI_Win_attach(win, other, BLOCK);
    for (int round = 0; round < 2; round++) {
        void *at = mmap(mem, 4 * BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);

        if (at == MAP_FAILED)
            return 1;
        if (round && at != mem)
            printf("# rank %d: mapped again at %p, not %p\n", rank, at, (void *) mem);
        mem = at;
        errs += attached_round(win, mem, (size_t) (2 + 2 * round) * BLOCK, 10 + 2 * round,
                               expect_direct, expect_direct);
        munmap(mem, 4 * BLOCK);
    }
    MPI_Win_detach(win, other);
    MPI_Win_free(&win);
    free(other);
    return errs;
}

/* 1 (and a message) unless the zero-copy and copy parts this rank sent
 * since z0, c0 lie in [zlo, zhi] and [clo, chi]. */
static long parts_check(const char *what, size_t len, unsigned long long z0,
                        unsigned long long c0, unsigned long long zlo, unsigned long long zhi,
                        unsigned long long clo, unsigned long long chi)
{
    unsigned long long z = tap_pvar(V_ZC) - z0, c = tap_pvar(V_COPY) - c0;

    if (z >= zlo && z <= zhi && c >= clo && c <= chi)
        return 0;
    fprintf(stderr, "rank %d: %s of %zu B: zero-copy parts +%llu, copy parts +%llu "
            "(expected %llu..%llu, %llu..%llu)\n", rank, what, len, z, c, zlo, zhi, clo, chi);
    return 1;
}

/* One put of len bytes to next at displacement disp, flushed: its data a
 * zero-copy part (zc) or through the ring. */
static long put_part(const unsigned char *src, size_t len, int next, MPI_Aint disp, MPI_Win win,
                     int zc)
{
    unsigned long long z0 = tap_pvar(V_ZC), c0 = tap_pvar(V_COPY);

    MPI_Put(src, (int) len, MPI_BYTE, next, disp, (int) len, MPI_BYTE, win);
    MPI_Win_flush(next, win);
    return parts_check("a put", len, z0, c0, zc, zc ? ~0ULL : 0, !zc, ~0ULL);
}

/* n gets of len bytes from next into dst, one flush; this rank answers
 * its previous one's: a lone answer is a zero-copy part, answers queued
 * behind another keep to the ring (at least one of n > 1). */
static long get_parts(unsigned char *dst, size_t len, int n, int next, MPI_Win win)
{
    unsigned long long z0 = tap_pvar(V_ZC), c0 = tap_pvar(V_COPY);

    for (int i = 0; i < n; i++)
        MPI_Get(dst + (size_t) i * len, (int) len, MPI_BYTE, next, (MPI_Aint) ((size_t) i * len),
                (int) len, MPI_BYTE, win);
    MPI_Win_flush(next, win);
    MPI_Barrier(MPI_COMM_WORLD);        /* every answer accepted and counted */
    return parts_check(n > 1 ? "queued get answers" : "a lone get's answer", len, z0, c0,
                       n > 1 ? 0 : 1, (unsigned) n, n > 1, (unsigned) n - 1)
        + (bad_bytes(dst, (size_t) n * len, (unsigned) next) != 0);
}

/* Check 7: which large puts and get answers keep to the ring. */
static long rma_parts(void)
{
    const size_t small = 256 << 10, large = 1 << 20;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    unsigned char *mem = calloc(1, small + large), *src = malloc(large), *dst = malloc(large);
    long errs = 0;
    MPI_Win win;

    fill(src, large, (unsigned) rank);
    MPI_Win_create(mem, small + large, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_lock_all(0, win);
    errs += put_part(src, small, next, 0, win, 0) + put_part(src, large, next, small, win, 1);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    errs += bad_bytes(mem, small, (unsigned) prev) != 0;
    errs += bad_bytes(mem + small, large, (unsigned) prev) != 0;
    fill(mem, small + large, (unsigned) rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    errs += get_parts(dst, small, 1, next, win) + get_parts(dst, small, 4, next, win);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    free(dst);
    free(src);
    free(mem);
    return errs;
}

/* Check 10, one round: block i of ours (2n longs) to the next rank's slots
 * 0 and 1, by a put and, after a flush_local, an MPI_Rput; read back by a
 * get and an MPI_Rget. */
static long at_call_round(long *src, long *got, int n, int next, int i, MPI_Win win)
{
    MPI_Request q;

    for (int j = 0; j < 2 * n; j++)
        src[j] = rank * 1000000L + i * 1000L + j;
    MPI_Put(src, n, MPI_LONG, next, 0, n, MPI_LONG, win);
    MPI_Win_flush_local(next, win);     /* the next one starts at the call too */
    MPI_Rput(src + n, n, MPI_LONG, next, n, n, MPI_LONG, win, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_Win_flush(next, win);
    MPI_Get(got, n, MPI_LONG, next, 0, n, MPI_LONG, win);
    MPI_Win_flush(next, win);
    MPI_Rget(got + n, n, MPI_LONG, next, n, n, MPI_LONG, win, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    return memcmp(src, got, 2 * (size_t) n * sizeof(long)) != 0;
}

/* Check 10: operations started at the call. */
static long at_call(void)
{
    enum { N = 2048 / sizeof(long) };
    long *mem = calloc(2 * N + 1, sizeof(long)), src[2 * N], got[2 * N], one = 1, errs = 0;
    int next = (rank + 1) % size;
    unsigned long long a0, a;
    MPI_Win win;

    MPI_Win_create(mem, (2 * N + 1) * sizeof(long), sizeof(long), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &win);
    MPI_Win_lock_all(0, win);
    MPI_Get(got, N, MPI_LONG, next, 0, N, MPI_LONG, win);       /* carries the lock request */
    MPI_Win_flush(next, win);
    a0 = tap_pvar(V_AT_CALL);
    for (int i = 0; i < K; i++)
        errs += at_call_round(src, got, N, next, i, win);
    a = tap_pvar(V_AT_CALL) - a0;
    if (a != (expect_direct ? 4ULL * K : 0)) {
        fprintf(stderr, "rank %d: rdma_rma_direct_at_call grew by %llu, expected %d\n", rank, a,
                expect_direct ? 4 * K : 0);
        errs++;
    }
    MPI_Accumulate(&one, 1, MPI_LONG, next, 2 * N, 1, MPI_LONG, MPI_SUM, win);  /* kept back */
    MPI_Put(src, N, MPI_LONG, next, 0, N, MPI_LONG, win);
    MPI_Win_flush(next, win);
    if (tap_pvar(V_AT_CALL) - a0 != a) {
        fprintf(stderr, "rank %d: a put queued behind an accumulate started at the call\n", rank);
        errs++;
    }
    MPI_Accumulate(&one, 1, MPI_LONG, next, 2 * N, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_flush_local(next, win);     /* sends it; CH3's FLUSH_LOCAL flag stays set */
    MPI_Put(src, N, MPI_LONG, next, 0, N, MPI_LONG, win);
    MPI_Win_flush(next, win);
    if (tap_pvar(V_AT_CALL) - a0 != a + (expect_direct ? 1 : 0)) {
        fprintf(stderr, "rank %d: a put after a flush_local that sent an accumulate did not "
                "start at the call\n", rank);
        errs++;
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    errs += mem[2 * N] != 2 || mem[1] != ((rank + size - 1) % size) * 1000000L + (K - 1) * 1000L + 1;
    MPI_Win_free(&win);
    free(mem);
    return errs;
}

int main(int argc, char **argv)
{
    static const char *mode[] = { "lock_all + flush", "fence", "PSCW" };
    char what[160];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_pvars_open(pvar_names, 7);
    if (argc > 1 && !strcmp(argv[1], "parts")) {
        report(rma_parts(), "shm, puts and gets as messages: a 256 KiB put's data keeps to the "
               "ring, a 1 MiB put's and a lone 256 KiB get's answer go zero-copy, get answers "
               "queued behind another keep to the ring; all land");
        goto done;
    }
    expect_direct = argc > 1 ? atoi(argv[1]) : 1;
    for (int m = 0; m < 3; m++) {
        snprintf(what, sizeof(what), "MPI_Win_create, %s: puts and gets land, %s", mode[m],
                 expect_direct ? "counted as direct" : "none direct");
        report(round_trip(m, m), what);
    }
    report(round_trip(3, 3), "MPI_Win_create, lock_all, one flush per two operations: no hang, "
           "puts and gets land");
    report(locked_counter(), "exclusive-lock counter: every unlock waits for its put");
    report(messages(), "accumulate and strided put: sent as messages, counted");
    report(dynamic(), "MPI_Win_create_dynamic, lock_all + flush: puts and gets land, direct "
           "to ranks of the node communicator only");
    report(coll_attach(), "MPI_Win_create_dynamic with coll_attach: puts and gets land, direct "
           "to every rank; memory detached, mapped again and attached larger: they land in the "
           "new pages");
    report(piggyback(), "lock + accumulate + unlock, and fetch-and-op + accumulate + flush: the "
           "synchronisation rides on the last message");
    report(at_call(), expect_direct ? "lock_all, the lock granted: puts, gets, MPI_Rput and "
           "MPI_Rget start at the call (not one queued behind a kept-back accumulate); all land"
           : "lock_all: puts, gets, MPI_Rput and MPI_Rget land, none started at the call");
  done:
    if (rank == 0)
        printf("1..%d\n", ntests);
    tap_pvars_close();
    MPI_Finalize();
    return failures != 0;
}
