/*
 * mpi_rma_amo: accumulates the NIC does (rdma_rma.c, "Atomics"), one TAP
 * line per check.
 *
 *   mpiexec -n N mpi_rma_amo [MODE]      (MODE 0 .. 4)
 *
 * Windows created with the info keys which_accumulate_ops=sum,no_op,cswap
 * and disable_shm_accumulate=true.  MODE 1: every check's atomics must be
 * counted by the pvar rdma_rma_direct_atomics (one rank per node over
 * verbs, or TRANSPORT=verbs); 2: ranks share nodes over shared memory and
 * the job spans nodes, every window but check 8's is made by
 * MPI_Win_allocate (node peers reach each other's parts through the node
 * segment) and its atomics must be counted, check 8's none; 3: the same
 * windows on one node, none counted (CH3's loads and stores); 0 (default):
 * every window but check 8's is made by MPI_Win_create and none may be
 * counted (shared memory, or ranks sharing a node): the same results
 * through CH3's messages.  4: check 9 only (2 nodes x 2 ranks, ranks
 * alternating between them, MPIR_CVAR_CH3_RDMA_MAX_CONNS=1).
 * 1. A counter at rank 0: every rank (rank 0 too, through its own path)
 *    fetch-and-adds 1, K times, lock_all + flush: the values fetched are
 *    0 .. N*K-1, each once, and the counter ends at N*K.
 * 2. The same in lock epochs: lock exclusive + fetch-and-op + unlock (the
 *    lock request goes apart, the unlock after the atomic), MPI_Win_allocate
 *    (MODE 1 too).
 * 3. A compare-and-swap spin lock at rank 0 guarding a plain counter read
 *    with MPI_Get and written with MPI_Put: it ends at N*K.
 * 4. MPI_Accumulate (sum) of 3 and of 40 int64 (more than one transport
 *    atomic) into the next rank's window, and MPI_Get_accumulate (no_op)
 *    reading them back under fence: every element is the sum.
 * 5. PSCW: fetch-and-adds to the next rank in one access epoch: the
 *    values fetched and the counter right.
 * 6. The pvar: each rank's atomics counted (MODE 1, 2), or none (0, 3).
 * 7. An accumulate of a derived datatype of int64 to ourselves (which the
 *    CPU would do, not atomic with the NIC's): refused with an error
 *    (MPI_ERRORS_RETURN) where the NIC does the window's accumulates, and
 *    the window unchanged; done where it does not.
 * 8. A dynamic window created with coll_attach=true too, every rank's
 *    memory attached together: the counter of check 1 at rank 0 and
 *    accumulates of LONG_N int64 into the next rank's region, read back
 *    by their owners; the pvar counts them (MODE 1) or not (0, 2, 3).
 * 9. Fence epochs, each rank's accumulates to a peer on the other node,
 *    the other one each epoch: with one connection a rank may hold, each
 *    epoch's first accumulate finds its peer not connected, and the
 *    epoch must still end (the closing fence once issued nothing more
 *    when the first had to wait for the connection: a hang).
 */
#include <stdlib.h>
#include <string.h>
#include "mpi_tap.h"

enum { K = 100, LONG_N = 40 };
static const char *const pvar_names[] = { "rdma_rma_direct_atomics" };

static int mode, nic;    /* nic: atomics through the NIC expected (modes 1, 2, 4) */

static MPI_Info amo_info(void)
{
    MPI_Info info;

    MPI_Info_create(&info);
    MPI_Info_set(info, "which_accumulate_ops", "sum,no_op,cswap");
    MPI_Info_set(info, "disable_shm_accumulate", "true");
    return info;
}

/* Is a window that asks for MPI_Win_allocate (alloc) made by it?  (MODE) */
static int by_allocate(int alloc)
{
    return (alloc && mode == 1) || mode >= 2;
}

/* A window of n int64 (zero) on every rank, MPI_Win_allocate if
 * by_allocate(alloc). */
static MPI_Win amo_win(int n, int alloc, int64_t ** base)
{
    MPI_Info info = amo_info();
    MPI_Win win;

    if (by_allocate(alloc))
        MPI_Win_allocate(n * 8, 8, info, MPI_COMM_WORLD, base, &win);
    else {
        MPI_Alloc_mem(n * 8, MPI_INFO_NULL, base);
        MPI_Win_create(*base, n * 8, 8, info, MPI_COMM_WORLD, &win);
    }
    MPI_Info_free(&info);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    memset(*base, 0, (size_t) n * 8);
    MPI_Win_unlock(rank, win);
    MPI_Barrier(MPI_COMM_WORLD);
    return win;
}

static void amo_free(MPI_Win * win, int alloc, int64_t * base)
{
    MPI_Win_free(win);
    if (!by_allocate(alloc))
        MPI_Free_mem(base);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;

    return (x > y) - (x < y);
}

/* Rank 0: the N*K values fetched are 0 .. N*K-1 once each, and the
 * counter (read after the epochs) is N*K. */
static long fetched_ok(const int64_t * got, int64_t counter)
{
    int64_t *all = rank ? NULL : malloc((size_t) size * K * 8);
    long errs = 0;

    MPI_Gather(got, K, MPI_INT64_T, all, K, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank)
        return 0;
    qsort(all, (size_t) size * K, 8, cmp64);
    for (int i = 0; i < size * K; i++)
        errs += all[i] != i;
    errs += counter != (int64_t) size * K;
    if (errs)
        fprintf(stderr, "rank 0: %ld values fetched wrong or counter %lld (expected %d)\n",
                errs, (long long) counter, size * K);
    free(all);
    return errs;
}

/* Check 1 (lock 0) or 2 (lock 1). */
static long counter(int lock)
{
    int64_t *base, got[K], one = 1, now;
    MPI_Win win = amo_win(1, lock, &base);
    long errs;

    if (!lock)
        MPI_Win_lock_all(0, win);
    for (int i = 0; i < K; i++) {
        if (lock)
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, 0, 0, MPI_SUM, win);
        if (lock)
            MPI_Win_unlock(0, win);
        else
            MPI_Win_flush(0, win);
    }
    if (!lock)
        MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Fetch_and_op(NULL, &now, MPI_INT64_T, 0, 0, MPI_NO_OP, win);
    MPI_Win_unlock(0, win);
    errs = fetched_ok(got, now);
    amo_free(&win, lock, base);
    return errs;
}

/* Check 3: word 0 the lock (0 free, r+1 held by rank r), word 1 the count. */
static long spin_lock(void)
{
    int64_t *base, free_ = 0, mine = rank + 1, was, v;
    MPI_Win win = amo_win(2, 0, &base);
    long errs = 0;

    MPI_Win_lock_all(0, win);
    for (int i = 0; i < K; i++) {
        do {
            MPI_Compare_and_swap(&mine, &free_, &was, MPI_INT64_T, 0, 0, win);
            MPI_Win_flush(0, win);
        } while (was != 0);
        MPI_Get(&v, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, win);
        MPI_Win_flush(0, win);
        v++;
        MPI_Put(&v, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, win);
        MPI_Win_flush(0, win);
        MPI_Compare_and_swap(&free_, &mine, &was, MPI_INT64_T, 0, 0, win);
        MPI_Win_flush(0, win);
        errs += was != mine;
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && base[1] != (int64_t) size * K) {
        fprintf(stderr, "rank 0: count %lld under the lock, expected %d\n",
                (long long) base[1], size * K);
        errs++;
    }
    amo_free(&win, 0, base);
    return errs;
}

/* Check 4: words [0, 3) and [8, 8 + LONG_N) of the next rank's window. */
static long sums(void)
{
    int64_t *base, add[LONG_N], got[LONG_N];
    int next = (rank + 1) % size;
    MPI_Win win = amo_win(8 + LONG_N, 0, &base);
    long errs = 0;

    for (int i = 0; i < LONG_N; i++)
        add[i] = i + 1;
    MPI_Win_fence(0, win);
    for (int i = 0; i < K / 10; i++) {
        MPI_Accumulate(add, 3, MPI_INT64_T, next, 0, 3, MPI_INT64_T, MPI_SUM, win);
        MPI_Accumulate(add, LONG_N, MPI_INT64_T, next, 8, LONG_N, MPI_INT64_T, MPI_SUM, win);
    }
    MPI_Win_fence(0, win);
    MPI_Get_accumulate(NULL, 0, MPI_INT64_T, got, LONG_N, MPI_INT64_T, next, 8, LONG_N,
                       MPI_INT64_T, MPI_NO_OP, win);
    MPI_Win_fence(0, win);
    for (int i = 0; i < LONG_N; i++)
        errs += got[i] != (int64_t) (K / 10) * (i + 1) || (i < 3 && base[i] != (K / 10) * (i + 1));
    if (errs)
        fprintf(stderr, "rank %d: %ld sums wrong\n", rank, errs);
    amo_free(&win, 0, base);
    return errs;
}

/* Check 5: K/10 fetch-and-adds to the next rank in one PSCW epoch. */
static long pscw(void)
{
    int64_t *base, one = 1, got[K / 10];
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Group world, to, from;
    MPI_Win win = amo_win(1, 0, &base);
    long errs = 0;

    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &next, &to);
    MPI_Group_incl(world, 1, &prev, &from);
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    for (int i = 0; i < K / 10; i++)
        MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, next, 0, MPI_SUM, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    for (int i = 0; i < K / 10; i++)
        errs += got[i] != i;
    if (base[0] != K / 10 || errs)
        fprintf(stderr, "rank %d: PSCW counter %lld (expected %d), %ld values fetched wrong\n",
                rank, (long long) base[0], K / 10, errs);
    errs += base[0] != K / 10;
    MPI_Group_free(&to);
    MPI_Group_free(&from);
    MPI_Group_free(&world);
    MPI_Barrier(MPI_COMM_WORLD);
    amo_free(&win, 0, base);
    return errs;
}

/* Check 7. */
static long derived(void)
{
    int64_t *base, add[2] = { 5, 6 };
    MPI_Datatype two;
    MPI_Win win = amo_win(2, 0, &base);
    int rc;
    long errs = 0;

    MPI_Type_contiguous(2, MPI_INT64_T, &two);
    MPI_Type_commit(&two);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    rc = MPI_Accumulate(add, 1, two, rank, 0, 1, two, MPI_SUM, win);
    MPI_Win_unlock(rank, win);
    if (nic ? rc == MPI_SUCCESS || base[0] || base[1] : rc != MPI_SUCCESS || base[0] != 5) {
        fprintf(stderr, "rank %d: accumulate of a derived type returned %d, window %lld %lld\n",
                rank, rc, (long long) base[0], (long long) base[1]);
        errs++;
    }
    if (nic && rc != MPI_SUCCESS && rank == 0) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;

        MPI_Error_string(rc, msg, &len);
        printf("# %s\n", strrchr(msg, '\n') ? strrchr(msg, '\n') + 1 : msg);  /* the cause */
    }
    MPI_Type_free(&two);
    MPI_Barrier(MPI_COMM_WORLD);
    amo_free(&win, 0, base);
    return errs;
}

/* Check 8: region words [0, 1) the counter, [8, 8 + LONG_N) the sums. */
static long dynamic(void)
{
    int64_t *mem, one = 1, got[K], add[LONG_N], now;
    MPI_Aint *addr = malloc((size_t) size * sizeof(*addr)), a;
    MPI_Info info = amo_info();
    int next = (rank + 1) % size;
    unsigned long long before = tap_pvar(0), d;
    MPI_Win win;
    long errs;

    MPI_Info_set(info, "coll_attach", "true");
    MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win);
    MPI_Info_free(&info);
    MPI_Alloc_mem((8 + LONG_N) * 8, MPI_INFO_NULL, &mem);
    memset(mem, 0, (8 + LONG_N) * 8);
    MPI_Win_attach(win, mem, (8 + LONG_N) * 8);
    MPI_Get_address(mem, &a);
    MPI_Allgather(&a, 1, MPI_AINT, addr, 1, MPI_AINT, MPI_COMM_WORLD);
    for (int i = 0; i < LONG_N; i++)
        add[i] = i + 1;
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < K; i++) {
        MPI_Fetch_and_op(&one, &got[i], MPI_INT64_T, 0, addr[0], MPI_SUM, win);
        MPI_Win_flush(0, win);
    }
    for (int i = 0; i < K / 10; i++)
        MPI_Accumulate(add, LONG_N, MPI_INT64_T, next, addr[next] + 64, LONG_N, MPI_INT64_T,
                       MPI_SUM, win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    MPI_Fetch_and_op(NULL, &now, MPI_INT64_T, 0, addr[0], MPI_NO_OP, win);
    MPI_Win_unlock(0, win);
    errs = fetched_ok(got, now);
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
    for (int i = 0; i < LONG_N; i++)
        if (mem[8 + i] != (int64_t) (K / 10) * (i + 1)) {
            fprintf(stderr, "rank %d: dynamic window, sum %d is %lld, expected %d\n", rank, i,
                    (long long) mem[8 + i], (K / 10) * (i + 1));
            errs++;
        }
    MPI_Win_unlock(rank, win);
    d = tap_pvar(0) - before;
    if (mode == 1 ? d < K + K / 10 : d != 0) {
        fprintf(stderr, "rank %d: rdma_rma_direct_atomics grew by %llu\n", rank, d);
        errs++;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_detach(win, mem);
    MPI_Win_free(&win);
    MPI_Free_mem(mem);
    free(addr);
    return errs;
}

/* Check 9: EPOCHS fence epochs; in epoch e, rank r adds 1 to the 3 words
 * of rank (r + 1 + 2 (e % 2)) % size, a rank on the other node. */
static long reconnect(void)
{
    enum { EPOCHS = 40 };
    int64_t *base, one[3] = { 1, 1, 1 };
    MPI_Win win = amo_win(3, 1, &base);
    long errs = 0;

    for (int e = 0; e < EPOCHS; e++) {
        MPI_Win_fence(0, win);
        MPI_Accumulate(one, 3, MPI_INT64_T, (rank + 1 + 2 * (e % 2)) % size, 0, 3, MPI_INT64_T,
                       MPI_SUM, win);
        MPI_Win_fence(0, win);
    }
    for (int i = 0; i < 3; i++)
        errs += base[i] != EPOCHS;
    if (errs)
        fprintf(stderr, "rank %d: words %lld %lld %lld, expected %d\n", rank,
                (long long) base[0], (long long) base[1], (long long) base[2], EPOCHS);
    amo_free(&win, 1, base);
    return errs;
}

int main(int argc, char **argv)
{
    unsigned long long before;
    char what[160];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tap_pvars_open(pvar_names, 1);
    mode = argc > 1 ? atoi(argv[1]) : 0;
    nic = mode == 1 || mode == 2 || mode == 4;
    before = tap_pvar(0);
    if (mode == 4) {
        report(size % 2 ? 1 : reconnect(), "fence epochs of NIC accumulates, each to a peer "
               "not connected (one connection at most): every epoch ends, every sum right");
        goto done;
    }
    report(counter(0), mode >= 2 ? "MPI_Win_allocate, lock_all + flush: fetch-and-add from "
           "every rank (node peers and the owner too) fetches each value once, the counter "
           "ends at N*K" : "MPI_Win_create, lock_all + flush: fetch-and-add from every rank "
           "(the owner too) fetches each value once, the counter ends at N*K");
    report(counter(1), mode ? "MPI_Win_allocate, lock + fetch-and-op + unlock: the same" :
           "lock + fetch-and-op + unlock: the same");
    report(spin_lock(), "compare-and-swap spin lock guarding a get/put counter: exclusive");
    report(sums(), "accumulate of 3 and 40 int64 under fence, read back with get_accumulate "
           "(no_op): every element summed");
    report(pscw(), "PSCW: fetch-and-adds to the next rank, the last ending the epoch: counter "
           "and values fetched right");
    {
        unsigned long long d = tap_pvar(0) - before;
        /* this rank's at least: 2K fetch-and-adds + 2 reads, the spin lock's
         * 2K swaps, K/5 accumulates and a get_accumulate */
        long bad = nic ? d < 4ULL * K : d != 0;

        if (bad)
            fprintf(stderr, "rank %d: rdma_rma_direct_atomics grew by %llu\n", rank, d);
        snprintf(what, sizeof(what), "rdma_rma_direct_atomics: %s", nic ?
                 "every rank's atomics went through the NIC" : "none (CH3's messages)");
        report(bad, what);
    }
    report(derived(), nic ? "an accumulate of a derived datatype of int64 is refused with an "
           "error, the window unchanged" : "an accumulate of a derived datatype of int64 is done");
    report(dynamic(), mode == 1 ? "dynamic window with coll_attach: counter and sums right, every "
           "rank's atomics through the NIC" : "dynamic window with coll_attach: counter and "
           "sums right, none through the NIC");
  done:
    if (rank == 0)
        printf("1..%d\n", ntests);
    tap_pvars_close();
    MPI_Finalize();
    return failures != 0;
}
