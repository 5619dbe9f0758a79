/*
 * mpi_rma_stress: randomized one-sided traffic, verified against a local
 * model of every window, the seed printed for replay.
 *
 *   mpiexec -n N mpi_rma_stress [SECONDS [SEED]]     (default 10 s, seed from the clock)
 *
 * Each round makes a window of one flavour (create, allocate, dynamic,
 * every other one with info coll_attach=true, its memory from malloc anew
 * each round; shared when every rank is on one node) and runs epochs under
 * one synchronisation mode (fence, PSCW, lock_all with flush or
 * flush_local, lock/unlock per op, shared or exclusive).  Every rank owns a
 * slice of every window and models it: puts, gets, accumulates and
 * get_accumulates (SUM on ints) of random sizes (4 B to 64 KiB), offsets
 * and target datatypes (contiguous or strided) go to its own slices only,
 * never twice to the same bytes before the first is complete at the target
 * (a flush, an unlock, the epoch's end), so the model is exact and every
 * result is checked.  All ranks also fetch_and_op one shared counter per
 * window (atomicity across origins) and compare_and_swap a slot of their
 * own.  At the end of a round the owner checks its memory against the
 * origins' models with loads, and the counter against the count of
 * fetch_and_ops.
 * One TAP line per round kind (flavour x mode) at the end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "mpi_tap.h"

#define SLICE (256 * 1024)      /* bytes an origin owns in each window */
#define MAXOP (64 * 1024)
#define NMODE 6
#define NFLAV 4
#define MAXPEND 256

enum { PUT, GET, ACC, GACC, NOPS };
enum { FENCE, PSCW, FLUSH, FLUSH_LOCAL, LOCK_SHARED, LOCK_EXCL };
enum { CREATE, ALLOCATE, DYNAMIC, SHARED };
static const char *mode_name[NMODE] = { "fence", "pscw", "lock_all+flush",
    "lock_all+flush_local", "lock shared", "lock exclusive"
};
static const char *flav_name[NFLAV] = { "create", "allocate", "dynamic", "shared" };

typedef struct {                /* an op's buffers until it completes */
    int *src, *res, *want;      /* res, want: a get or get_accumulate to check */
    size_t n;
    int op, t;
} pending_t;

static unsigned char *model;    /* [size][SLICE]: my slice in each window */
static unsigned char *touched;  /* [size][SLICE / 4]: ints used, not yet complete */
static pending_t pend[MAXPEND];
static int npend, one_node;
static long errs, nfop;
static uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The pending ops to t (all: t < 0) are complete at the origin: check
 * the results, free the buffers. */
static void complete_local(int t)
{
    int kept = 0;

    for (int i = 0; i < npend; i++) {
        pending_t *p = &pend[i];
        size_t k = 0;

        if (t >= 0 && p->t != t) {
            pend[kept++] = *p;
            continue;
        }
        while (p->res && k < p->n && p->res[k] == p->want[k])
            k++;
        if (p->res && k < p->n) {
            errs++;
            fprintf(stderr, "rank %d: %s of %zu ints from %d: int %zu is %d, not %d\n", rank,
                    p->op == GET ? "a get" : "a get_accumulate", p->n, p->t, k, p->res[k],
                    p->want[k]);
        }
        free(p->src);
        free(p->res);
        free(p->want);
    }
    npend = kept;
}

/* ... and at t (all: t < 0): its bytes may be used again. */
static void complete_remote(int t)
{
    complete_local(t);
    if (t < 0)
        memset(touched, 0, (size_t) size * (SLICE / 4));
    else
        memset(touched + (size_t) t * (SLICE / 4), 0, SLICE / 4);
}

/* The ints first + k * stride (k < n) of my slice at t are free: mark them. */
static int claim(int t, size_t first, size_t n, size_t stride)
{
    unsigned char *u = touched + (size_t) t * (SLICE / 4);

    for (size_t k = 0; k < n; k++)
        if (u[first + k * stride])
            return 0;
    for (size_t k = 0; k < n; k++)
        u[first + k * stride] = 1;
    return 1;
}

/* One random op on my slice at t (base: the slice's displacement); 0 if
 * it would touch bytes still in flight (nothing issued). */
static int one_op(MPI_Win win, int t, MPI_Aint base)
{
    int op = (int) (rnd() % NOPS), strided = rnd() % 3 == 0, stride = strided ? 3 : 1;
    size_t n = 1 + rnd() % (rnd() % 4 ? 64 : MAXOP / 4 / stride);
    size_t first = rnd() % (SLICE / 4 - n * stride + 1);
    int *slice = (int *) (model + (size_t) t * SLICE), tc = strided ? 1 : (int) n;
    MPI_Aint disp = base + (MPI_Aint) (first * sizeof(int));
    MPI_Datatype tt = MPI_INT;
    pending_t *p = &pend[npend];

    if (npend == MAXPEND || !claim(t, first, n, stride))
        return 0;
    npend++;
    *p = (pending_t) {.src = malloc(n * sizeof(int)),.n = n,.op = op,.t = t };
    for (size_t k = 0; k < n; k++)
        p->src[k] = (int) (rnd() & 0xffff);
    if (op == GET || op == GACC) {
        p->res = malloc(n * sizeof(int));
        p->want = malloc(n * sizeof(int));
        for (size_t k = 0; k < n; k++)
            p->want[k] = slice[first + k * stride];
    }
    if (strided) {
        MPI_Type_vector((int) n, 1, stride, MPI_INT, &tt);
        MPI_Type_commit(&tt);
    }
    if (op == PUT)
        MPI_Put(p->src, (int) n, MPI_INT, t, disp, tc, tt, win);
    else if (op == GET)
        MPI_Get(p->res, (int) n, MPI_INT, t, disp, tc, tt, win);
    else if (op == ACC)
        MPI_Accumulate(p->src, (int) n, MPI_INT, t, disp, tc, tt, MPI_SUM, win);
    else
        MPI_Get_accumulate(p->src, (int) n, MPI_INT, p->res, (int) n, MPI_INT, t, disp, tc, tt,
                           MPI_SUM, win);
    for (size_t k = 0; k < n && op != GET; k++)
        slice[first + k * stride] = op == PUT ? p->src[k] : slice[first + k * stride] + p->src[k];
    if (strided)
        MPI_Type_free(&tt);
    return 1;
}

/* The shared counter (int64 0 of t's common area) and my CAS slot (rank + 1). */
static void atomics(MPI_Win win, int t, MPI_Aint common, int64_t * cas_model)
{
    int64_t one = 1, old, want = cas_model[t], next = want + 1 + (int64_t) (rnd() % 7), got;

    MPI_Fetch_and_op(&one, &old, MPI_INT64_T, t, common, MPI_SUM, win);
    MPI_Compare_and_swap(&next, &want, &got, MPI_INT64_T, t,
                         common + (MPI_Aint) ((rank + 1) * sizeof(int64_t)), win);
    MPI_Win_flush(t, win);
    nfop++;
    errs += old < 0 || got != want;
    if (got != want)
        fprintf(stderr, "rank %d: compare_and_swap at %d found %lld, not %lld\n", rank, t,
                (long long) got, (long long) want);
    cas_model[t] = next;
}

/* One epoch of ops under mode (passive modes: inside lock_all or a lock
 * per op).  base[t]: displacement of t's window start. */
static void epoch(MPI_Win win, int mode, const MPI_Aint * base, MPI_Group world)
{
    int nops = 1 + (int) (rnd() % 24);

    if (mode == FENCE)
        MPI_Win_fence(0, win);
    else if (mode == PSCW) {
        MPI_Win_post(world, 0, win);
        MPI_Win_start(world, 0, win);
    }
    for (int i = 0; i < nops; i++) {
        int t = (int) (rnd() % size), lock = mode == LOCK_SHARED || mode == LOCK_EXCL;
        MPI_Aint at = base[t] + (MPI_Aint) rank * SLICE;

        if (lock)
            MPI_Win_lock(mode == LOCK_EXCL ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, t, 0, win);
        if (!one_op(win, t, at) && mode == FLUSH) {
            MPI_Win_flush(t, win);
            complete_remote(t);
            one_op(win, t, at);
        }
        if (lock) {
            MPI_Win_unlock(t, win);
            complete_remote(t);
        } else if (mode == FLUSH_LOCAL && rnd() % 4 == 0) {
            MPI_Win_flush_local_all(win);
            complete_local(-1);
        }
    }
    if (mode == FENCE)
        MPI_Win_fence(0, win);
    else if (mode == PSCW) {
        MPI_Win_complete(win);
        MPI_Win_wait(win);
    } else if (mode == FLUSH || mode == FLUSH_LOCAL)
        MPI_Win_flush_all(win);
    complete_remote(-1);
}

/* The owner's loads against the origins' models, and the counter. */
static void owner_check(unsigned char *mem, int64_t count)
{
    unsigned char *theirs = malloc((size_t) size * SLICE);
    int64_t *common = (int64_t *) (mem + (size_t) size * SLICE);
    long bad = 0;

    MPI_Alltoall(model, SLICE, MPI_BYTE, theirs, SLICE, MPI_BYTE, MPI_COMM_WORLD);
    for (int o = 0; o < size; o++)
        bad += memcmp(mem + (size_t) o * SLICE, theirs + (size_t) o * SLICE, SLICE) != 0;
    if (bad || common[0] != count)
        fprintf(stderr, "rank %d: %ld slices differ from their origins' models, counter %lld "
                "(want %lld)\n", rank, bad, (long long) common[0], (long long) count);
    errs += bad + (common[0] != count);
    free(theirs);
}

/* coll: a dynamic window's memory attached with info coll_attach=true
 * (registered and its keys exchanged: direct between nodes too). */
static void round_of(int flav, int mode, int coll, int epochs, MPI_Group world)
{
    size_t len = (size_t) size * SLICE + (size_t) (size + 1) * sizeof(int64_t);
    unsigned char *mem = NULL;
    MPI_Aint *base = calloc((size_t) size, sizeof(MPI_Aint)), mine = 0;
    int64_t *cas = calloc((size_t) size, sizeof(int64_t)), count = 0;
    MPI_Win win;

    if (flav == CREATE || flav == DYNAMIC)
        mem = malloc(len);
    if (flav == CREATE)
        MPI_Win_create(mem, (MPI_Aint) len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    else if (flav == ALLOCATE)
        MPI_Win_allocate((MPI_Aint) len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    else if (flav == SHARED)
        MPI_Win_allocate_shared((MPI_Aint) len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    else {
        MPI_Info info;

        MPI_Info_create(&info);
        MPI_Info_set(info, "coll_attach", coll ? "true" : "false");
        MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win);
        MPI_Info_free(&info);
        MPI_Win_attach(win, mem, (MPI_Aint) len);
        MPI_Get_address(mem, &mine);
    }
    MPI_Allgather(&mine, 1, MPI_AINT, base, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    memset(mem, 0, len);
    MPI_Win_unlock(rank, win);
    memset(model, 0, (size_t) size * SLICE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (mode == FLUSH || mode == FLUSH_LOCAL)
        MPI_Win_lock_all(0, win);
    for (int e = 0; e < epochs; e++)
        epoch(win, mode, base, world);
    if (mode == FLUSH || mode == FLUSH_LOCAL) {
        for (int t = 0; t < size; t++)
            atomics(win, t, base[t] + (MPI_Aint) size * SLICE, cas);
        MPI_Win_unlock_all(win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Allreduce(&nfop, &count, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    nfop = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    owner_check(mem, count / size);
    MPI_Win_unlock(rank, win);
    if (flav == DYNAMIC)
        MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    if (flav == CREATE || flav == DYNAMIC)
        free(mem);
    free(base);
    free(cas);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 10, until;
    unsigned long long seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (unsigned long long) time(NULL);
    long kind_errs[NFLAV][NMODE] = { {0} }, kind_runs[NFLAV][NMODE] = { {0} };
    MPI_Group world;
    MPI_Comm node;
    int nsize;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &nsize);
    MPI_Allreduce(MPI_IN_PLACE, &nsize, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    one_node = nsize == size;
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("# mpi_rma_stress: %d ranks, %s, seed %llu (replay: mpi_rma_stress %g %llu)\n",
               size, one_node ? "one node" : "several nodes", seed, secs, seed);
    model = malloc((size_t) size * SLICE);
    touched = calloc((size_t) size, SLICE / 4);
    until = MPI_Wtime() + secs;
    for (int r = 0, go = 1; go; r++) {
        int kind = r % (NFLAV * NMODE), flav = kind / NMODE, mode = kind % NMODE;
        long before = errs;

        int epochs;

        rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t) r * 1000003u + 1;
        epochs = 1 + (int) (rnd() % 6);         /* the same on every rank */
        if (flav == SHARED && !one_node)
            flav = ALLOCATE;
        rng += (uint64_t) rank * 7919u;
        round_of(flav, mode, (r / (NFLAV * NMODE) + mode) % 2, epochs, world);
        kind_runs[flav][mode]++;
        kind_errs[flav][mode] += errs != before;
        go = MPI_Wtime() < until || r + 1 < NFLAV * NMODE;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    for (int f = 0; f < NFLAV; f++)
        for (int m = 0; m < NMODE; m++)
            if (kind_runs[f][m]) {
                char what[96];
                snprintf(what, sizeof(what), "%s windows, %s: %ld rounds verified", flav_name[f],
                         mode_name[m], kind_runs[f][m]);
                report(kind_errs[f][m], what);
            }
    if (rank == 0)
        printf("1..%d\n", ntests);
    MPI_Group_free(&world);
    MPI_Comm_free(&node);
    free(model);
    free(touched);
    MPI_Finalize();
    return failures != 0;
}
