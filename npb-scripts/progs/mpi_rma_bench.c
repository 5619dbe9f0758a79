/* mpi_rma_bench.c -- one-sided micro-benchmarks between two MPI ranks.
 *
 *   mpiexec -n 2 mpi_rma_bench [--min SIZE] [--max SIZE] [--reps R]
 *       [--ops put,get,acc,fop,cas] [--flavors create,allocate,dynamic,coll]
 *       [--syncs flush,lock,fence,pscw] [--tests lat,bw] [--window W]
 *       [--nic-hints 0|1]
 *
 * Rank 0 is the origin, rank 1 the target, in a window of the flavour
 * (MPI_Win_create over malloc'ed memory, MPI_Win_allocate, or
 * MPI_Win_create_dynamic with malloc'ed memory attached, without and
 * (coll) with info coll_attach=true; create and allocate by default).
 *   lat  one operation, then the synchronisation that completes it:
 *        flush  (inside one lock_all: MPI_Win_flush(1) after each op)
 *        lock   (MPI_Win_lock(shared, 1), op, MPI_Win_unlock(1))
 *        fence  (both ranks: fence, op on rank 0, fence)
 *        pscw   (rank 0: start, op, complete; rank 1: post, wait)
 *        time per operation, completed
 *   bw   W operations of SIZE bytes (W = --window, 64 by default, fewer
 *        where W x SIZE would pass 64 MiB), then one synchronisation;
 *        MB/s (10^6 B) of operation payload
 * put and get move SIZE bytes of MPI_BYTE; acc adds SIZE / 4 MPI_INTs
 * (MPI_SUM); fop (MPI_Fetch_and_op, MPI_SUM) and cas
 * (MPI_Compare_and_swap) work on one int64 (size 8, lat only).
 * --nic-hints 1 creates every window with the info keys
 * which_accumulate_ops=sum,no_op,cswap and disable_shm_accumulate=true,
 * which let an implementation do fop and cas with the NIC's atomics.
 * Each measurement runs warm-up iterations then iterations scaled with
 * the size, R times (default 5, at most MAX_REPS); the median is printed.
 *
 * Output: comment lines starting with '#', then one line per measurement
 * under "# test size_bytes median_us median_MBps", the test named
 * OP-TEST-FLAVOUR-SYNC (e.g. put-lat-allocate-flush), as npb-scripts/ab.sh
 * reads it (a test with "lat" in its name compares times, others MB/s).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TARGET_BYTES (64UL << 20)
#define MAX_ITERS 2000
#define WINDOW_BYTES (64UL << 20)
#define MAX_REPS 64

enum { PUT, GET, ACC, FOP, CAS, NOP };
enum { FLUSH, LOCK, FENCE, PSCW, NSYNC };
static const char *op_name[NOP] = { "put", "get", "acc", "fop", "cas" };
static const char *sync_name[NSYNC] = { "flush", "lock", "fence", "pscw" };
enum { CREATE, ALLOCATE, DYNAMIC, COLL, NFLAV };
static const char *flav_name[NFLAV] = { "create", "allocate", "dynamic", "coll" };

static struct {
    size_t min, max;
    int reps, window, ops[NOP], syncs[NSYNC], flavs[NFLAV], lat, bw, nic;
} o = { 1, 4UL << 20, 5, 64, {1, 1, 1, 1, 1}, {1, 0, 0, 0}, {1, 1, 0, 0}, 1, 1, 0 };

/* Zeroes a window through a pointer the compiler cannot see through: GCC
 * turns malloc + memset(0) into calloc, which leaves fresh pages untouched,
 * so the target read 4 MiB windows of zero pages and its copies out of them
 * ran 4-5x slower (docs/results/rma.md, 2026-12-06). */
static void *(*volatile zero_fill) (void *, int, size_t) = memset;

static int rank;
static MPI_Group peer;          /* the other rank */
static char *obuf, *rbuf;       /* origin and result buffers */
static MPI_Aint tbase;          /* displacement 0: rank 1's address in a dynamic window */

static int pick(const char *list, const char *const *names, int n, int *on)
{
    char *dup = strdup(list), *tok, *save = NULL;

    memset(on, 0, n * sizeof(int));
    for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < n && strcmp(tok, names[k]))
            k++;
        if (k == n) {
            if (rank == 0)
                fprintf(stderr, "mpi_rma_bench: unknown '%s'\n", tok);
            free(dup);
            return -1;
        }
        on[k] = 1;
    }
    free(dup);
    return 0;
}

static int parse(int argc, char **argv)
{
    static const char *const tests[2] = { "lat", "bw" };
    int t[2];

    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        int rc = 0;
        if (!strcmp(a, "--min"))
            o.min = strtoul(v, NULL, 0);
        else if (!strcmp(a, "--max"))
            o.max = strtoul(v, NULL, 0);
        else if (!strcmp(a, "--reps"))
            o.reps = atoi(v);
        else if (!strcmp(a, "--window"))
            o.window = atoi(v);
        else if (!strcmp(a, "--nic-hints"))
            o.nic = atoi(v);
        else if (!strcmp(a, "--ops"))
            rc = pick(v, op_name, NOP, o.ops);
        else if (!strcmp(a, "--syncs"))
            rc = pick(v, sync_name, NSYNC, o.syncs);
        else if (!strcmp(a, "--flavors"))
            rc = pick(v, flav_name, NFLAV, o.flavs);
        else if (!strcmp(a, "--tests")) {
            rc = pick(v, tests, 2, t);
            o.lat = t[0];
            o.bw = t[1];
        } else
            rc = -1;
        if (rc)
            return -1;
    }
    return o.min >= 1 && o.min <= o.max && o.reps >= 1 && o.reps <= MAX_REPS && o.window >= 1
        ? 0 : -1;
}

/* One op of n bytes at displacement d of rank 1's window. */
static void issue(MPI_Win win, int op, size_t n, MPI_Aint d)
{
    int64_t one = 1, cmp = 0;

    d += tbase;
    if (op == PUT)
        MPI_Put(obuf, (int) n, MPI_BYTE, 1, d, (int) n, MPI_BYTE, win);
    else if (op == GET)
        MPI_Get(rbuf, (int) n, MPI_BYTE, 1, d, (int) n, MPI_BYTE, win);
    else if (op == ACC)
        MPI_Accumulate(obuf, (int) (n / 4), MPI_INT, 1, d, (int) (n / 4), MPI_INT, MPI_SUM, win);
    else if (op == FOP)
        MPI_Fetch_and_op(&one, rbuf, MPI_INT64_T, 1, tbase, MPI_SUM, win);
    else
        MPI_Compare_and_swap(&one, &cmp, rbuf, MPI_INT64_T, 1, tbase, win);
}

/* Open and close one synchronisation around the ops of an iteration
 * (flush: inside the lock_all the caller holds). */
static void sync_open(MPI_Win win, int sync)
{
    if (sync == LOCK && rank == 0)
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    else if (sync == FENCE)
        MPI_Win_fence(0, win);
    else if (sync == PSCW && rank == 0)
        MPI_Win_start(peer, 0, win);
    else if (sync == PSCW)
        MPI_Win_post(peer, 0, win);
}

static void sync_close(MPI_Win win, int sync)
{
    if (sync == FLUSH && rank == 0)
        MPI_Win_flush(1, win);
    else if (sync == LOCK && rank == 0)
        MPI_Win_unlock(1, win);
    else if (sync == FENCE)
        MPI_Win_fence(0, win);
    else if (sync == PSCW && rank == 0)
        MPI_Win_complete(win);
    else if (sync == PSCW)
        MPI_Win_wait(win);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* Median time of one iteration (w ops of n bytes + their sync). */
static double measure(MPI_Win win, int op, int sync, size_t n, int w)
{
    long iters = (long) (TARGET_BYTES / (n * (size_t) w));
    double t[MAX_REPS];

    iters = iters < 20 ? 20 : iters > MAX_ITERS ? MAX_ITERS : iters;
    if (sync == FLUSH)
        MPI_Win_lock_all(0, win);
    for (int r = 0; r < o.reps; r++) {
        double t0 = 0;
        for (long i = -iters / 10 - 2; i < iters; i++) {
            if (i == 0) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = MPI_Wtime();
            }
            sync_open(win, sync);
            for (int k = 0; k < w && rank == 0; k++)
                issue(win, op, n, (MPI_Aint) ((size_t) k * n));
            sync_close(win, sync);
        }
        t[r] = (MPI_Wtime() - t0) / (double) iters;
        MPI_Bcast(&t[r], 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    if (sync == FLUSH)
        MPI_Win_unlock_all(win);
    qsort(t, (size_t) o.reps, sizeof(double), cmp_double);
    return t[o.reps / 2];
}

static void run(int flav, int op, int sync, int bw, size_t n)
{
    int w = 1;
    size_t len;
    char *mem = NULL, name[64];
    MPI_Info hints = MPI_INFO_NULL;
    MPI_Win win;
    double s;

    if (o.nic) {
        MPI_Info_create(&hints);
        MPI_Info_set(hints, "which_accumulate_ops", "sum,no_op,cswap");
        MPI_Info_set(hints, "disable_shm_accumulate", "true");
    }
    if (bw) {
        w = o.window;
        while (w > 1 && (size_t) w * n > WINDOW_BYTES)
            w /= 2;
    }
    len = (size_t) w * n + 64;
    tbase = 0;
    if (flav == ALLOCATE) {
        MPI_Win_allocate((MPI_Aint) len, 1, hints, MPI_COMM_WORLD, &mem, &win);
        memset(mem, 0, len);
    } else {
        mem = malloc(len);
        zero_fill(mem, 0, len);
    }
    if (flav == CREATE)
        MPI_Win_create(mem, (MPI_Aint) len, 1, hints, MPI_COMM_WORLD, &win);
    if (flav == DYNAMIC || flav == COLL) {
        MPI_Info info;

        MPI_Info_create(&info);
        MPI_Info_set(info, "coll_attach", flav == COLL ? "true" : "false");
        if (o.nic) {
            MPI_Info_set(info, "which_accumulate_ops", "sum,no_op,cswap");
            MPI_Info_set(info, "disable_shm_accumulate", "true");
        }
        MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win);
        MPI_Info_free(&info);
        MPI_Win_attach(win, mem, (MPI_Aint) len);
        MPI_Get_address(mem, &tbase);
        MPI_Bcast(&tbase, 1, MPI_AINT, 1, MPI_COMM_WORLD);
    }
    if (o.nic)
        MPI_Info_free(&hints);
    MPI_Barrier(MPI_COMM_WORLD);
    s = measure(win, op, sync, n, w);
    snprintf(name, sizeof(name), "%s-%s-%s-%s", op_name[op], bw ? "bw" : "lat", flav_name[flav],
             sync_name[sync]);
    if (rank == 0)
        printf("%-28s %10zu %12.3f %12.3f\n", name, n, s * 1e6 / w, (double) n * w / s / 1e6);
    fflush(stdout);
    if (flav == DYNAMIC || flav == COLL)
        MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    if (flav != ALLOCATE)
        free(mem);
}

int main(int argc, char **argv)
{
    int size;
    MPI_Group world;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2 || parse(argc, argv)) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 mpi_rma_bench [--min S] [--max S] [--reps 1..64] "
                    "[--ops put,get,acc,fop,cas] [--flavors create,allocate,dynamic,coll] "
                    "[--syncs flush,lock,fence,pscw] [--tests lat,bw] [--window W]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, (int[]) { 1 - rank }, &peer);
    obuf = malloc(o.max);
    rbuf = malloc(o.max > 8 ? o.max : 8);
    memset(obuf, 1, o.max);
    if (rank == 0)
        printf("# mpi_rma_bench: rank 0 -> rank 1, median of %d\n"
               "# test size_bytes median_us median_MBps\n", o.reps);
    for (int f = 0; f < NFLAV; f++)
        for (int sy = 0; sy < NSYNC; sy++)
            for (int op = 0; op < NOP; op++)
                for (int bw = 0; bw < 2; bw++) {
                    int atomic = op == FOP || op == CAS;
                    if (!o.flavs[f] || !o.syncs[sy] || !o.ops[op] || !(bw ? o.bw : o.lat)
                        || (bw && atomic))
                        continue;
                    for (size_t n = atomic ? 8 : o.min; n <= (atomic ? 8 : o.max); n *= 2)
                        if (op != ACC || n >= 4)
                            run(f, op, sy, bw, n);
                }
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    free(obuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
