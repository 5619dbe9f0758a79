/*
 * mpi_shm_win: MPI-3 shared memory on one node, one TAP line per check.
 *
 *   mpiexec -n N mpi_shm_win
 *
 * 1. MPI_COMM_TYPE_SHARED holds every rank whose processor name is ours.
 * 2. MPI_Win_allocate_shared: a store through the next node rank's
 *    MPI_Win_shared_query pointer is seen by that rank (and the pointer is
 *    not our own segment).
 * 3. The same with alloc_shared_noncontig, and a rank of size 0.
 * 4. shared_query(MPI_PROC_NULL) is the first non-empty segment.
 * 5. MPI_Win_allocate on the node: a put and an accumulate to each node
 *    peer under lock_all/flush, read back by the owner with loads.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_tap.h"

static MPI_Comm node;           /* the ranks of this host, by processor name */
static int nrank, nsize;

static void check_node_comm(void)
{
    char me[MPI_MAX_PROCESSOR_NAME] = { 0 }, *all;
    int len, same = 0, first = -1, tsize;
    MPI_Comm typed;

    MPI_Get_processor_name(me, &len);
    all = calloc((size_t) size, MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        if (strcmp(all + (size_t) i * MPI_MAX_PROCESSOR_NAME, me) == 0) {
            same++;
            first = first < 0 ? i : first;
        }
    free(all);
    MPI_Comm_split(MPI_COMM_WORLD, first, rank, &node);
    MPI_Comm_rank(node, &nrank);
    MPI_Comm_size(node, &nsize);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &typed);
    MPI_Comm_size(typed, &tsize);
    MPI_Comm_free(&typed);
    if (tsize != same)
        fprintf(stderr, "rank %d: node communicator of %d ranks, %d share the host\n", rank,
                tsize, same);
    report(tsize != same, "MPI_COMM_TYPE_SHARED holds every rank of the node");
}

/* Each node rank owns n ints; it stores into the next rank's through the
 * shared-query pointer, then checks what the previous one stored. */
static long store_ring(MPI_Info info, MPI_Aint n, int zero_rank)
{
    MPI_Aint mine = nrank == zero_rank ? 0 : n, qsize;
    int *base, *peer, du, next = (nrank + 1) % nsize, prev = (nrank + nsize - 1) % nsize;
    long errs = 0;
    MPI_Win win;

    MPI_Win_allocate_shared(mine * (MPI_Aint) sizeof(int), sizeof(int), info, node, &base, &win);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    MPI_Win_shared_query(win, next, &qsize, &du, &peer);
    if (nsize > 1 && next != zero_rank) {
        errs += (mine && peer == base) || qsize != n * (MPI_Aint) sizeof(int)
            || du != (int) sizeof(int);
        for (MPI_Aint i = 0; i < n; i++)
            peer[i] = (int) (nrank * 1000003 + i);
    }
    MPI_Win_sync(win);
    MPI_Barrier(node);
    MPI_Win_sync(win);
    if (nsize > 1 && nrank != zero_rank)
        for (MPI_Aint i = 0; i < n; i++)
            errs += base[i] != (int) (prev * 1000003 + i);
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    return errs;
}

static long proc_null_query(void)
{
    MPI_Aint qsize;
    int *base, *first, *q, du;
    long errs = 0;
    MPI_Win win;

    /* node rank 0 allocates nothing: rank 1's segment comes first */
    MPI_Win_allocate_shared(nrank == 0 ? 0 : 64, 1, MPI_INFO_NULL, node, &base, &win);
    MPI_Win_shared_query(win, MPI_PROC_NULL, &qsize, &du, &q);
    if (nsize > 1) {
        MPI_Win_shared_query(win, 1, &qsize, &du, &first);
        errs += q != first || qsize != 64;
    }
    MPI_Win_free(&win);
    return errs;
}

/* MPI_Win_allocate: puts and accumulates from every node rank to every
 * other, the owner reads with loads after the epoch. */
static long allocate_ops(void)
{
    const int n = 4096;
    int *base, *src = malloc(n * sizeof(int)), one = 1;
    long errs = 0;
    MPI_Win win;

    MPI_Win_allocate((MPI_Aint) (n + 1) * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &base, &win);
    memset(base, 0, (n + 1) * sizeof(int));
    MPI_Barrier(node);
    for (int i = 0; i < n; i++)
        src[i] = nrank * 7919 + i;
    MPI_Win_lock_all(0, win);
    if (nsize > 1)
        MPI_Put(src, n / nsize, MPI_INT, (nrank + 1) % nsize, (MPI_Aint) (n / nsize) * nrank,
                n / nsize, MPI_INT, win);
    for (int t = 0; t < nsize; t++)
        MPI_Accumulate(&one, 1, MPI_INT, t, n, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    MPI_Barrier(node);
    MPI_Win_lock(MPI_LOCK_SHARED, nrank, 0, win);
    for (int o = 0; o < nsize && nsize > 1; o++)
        if ((o + 1) % nsize == nrank)
            for (int i = 0; i < n / nsize; i++)
                errs += base[(n / nsize) * o + i] != o * 7919 + i;
    errs += base[n] != nsize;
    MPI_Win_unlock(nrank, win);
    MPI_Win_free(&win);
    free(src);
    return errs;
}

int main(int argc, char **argv)
{
    MPI_Info nc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..5\n");
    check_node_comm();
    report(store_ring(MPI_INFO_NULL, 100000, -1),
           "MPI_Win_allocate_shared: a store through a peer's shared_query pointer is seen by the owner");
    MPI_Info_create(&nc);
    MPI_Info_set(nc, "alloc_shared_noncontig", "true");
    report(store_ring(nc, 3, 0), "the same, noncontiguous, node rank 0 of size 0");
    MPI_Info_free(&nc);
    report(proc_null_query(), "shared_query(MPI_PROC_NULL) is the first non-empty segment");
    report(allocate_ops(), "MPI_Win_allocate on the node: puts and accumulates seen by the owner");
    MPI_Comm_free(&node);
    MPI_Finalize();
    return failures != 0;
}
