/*
 * mpi_mem: the memory a job's ranks use after all-to-all traffic (issue 19).
 * Every rank does ITERS MPI_Alltoall of BYTES per peer (every pair
 * connected, every ring used), then reads its proportional set size (Pss:
 * a page shared by k processes counts 1/k to each, so the sum over ranks is
 * the job's memory) and its resident set from /proc/self/smaps_rollup,
 * ch3:rdma's ring memory (MPI_T pvar rdma_ring_bytes; -1 elsewhere) and
 * the verbs device memory mapped into the process (/proc/self/maps lines
 * of /dev/infiniband/uverbs*: the queue pairs and CQs a software provider
 * such as rxe shares with the kernel; 0 without verbs) and its network
 * connections ready now (MPI_T rdma_conns_live; -1 elsewhere).  Rank 0
 * prints one line:
 *
 *   mem RANKS PSS_SUM_KIB PSS_MAX_KIB RSS_MAX_KIB RING_MAX_KIB DEVQ_MAX_KIB LIVE_MAX
 *
 *   mpi_mem [iters=300] [bytes=4096]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KiB of this process's mappings of the verbs device (0: none). */
static long uverbs_kib(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long lo, hi;
    long sum = 0;

    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "uverbs") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
            sum += (long) ((hi - lo) >> 10);
    if (f)
        fclose(f);
    return sum;
}

/* kB of the smaps_rollup field "key:" (-1 if unreadable). */
static long rollup_kib(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);

    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

/* The LEVEL pvar `name`, -1 if this MPI has none. */
static long pvar_level(const char *name)
{
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    unsigned long long v = 0;
    int idx, count, ok;

    if (MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_LEVEL, &idx) != MPI_SUCCESS
        || MPI_T_pvar_session_create(&s) != MPI_SUCCESS)
        return -1;
    ok = MPI_T_pvar_handle_alloc(s, idx, NULL, &h, &count) == MPI_SUCCESS;
    ok = ok && count == 1 && MPI_T_pvar_read(s, h, &v) == MPI_SUCCESS;
    if (ok)
        MPI_T_pvar_handle_free(s, &h);
    MPI_T_pvar_session_free(&s);
    return ok ? (long) v : -1;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 300, rank, size, provided;
    size_t bytes = argc > 2 ? strtoul(argv[2], NULL, 0) : 4096;
    long mine[5], sum = 0, max[5];
    char *sb, *rb;

    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sb = malloc(bytes * size);
    rb = malloc(bytes * size);
    if (!sb || !rb || iters < 1)
        MPI_Abort(MPI_COMM_WORLD, 2);
    memset(sb, rank, bytes * size);
    for (int i = 0; i < iters; i++)
        MPI_Alltoall(sb, (int) bytes, MPI_BYTE, rb, (int) bytes, MPI_BYTE, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    mine[0] = rollup_kib("Pss");
    mine[1] = rollup_kib("Rss");
    mine[2] = pvar_level("rdma_ring_bytes");
    mine[2] = mine[2] < 0 ? -1 : mine[2] / 1024;
    mine[3] = uverbs_kib();
    mine[4] = pvar_level("rdma_conns_live");
    MPI_Reduce(&mine[0], &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, max, 5, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);        /* nobody unmaps before all have read */
    if (rank == 0)
        printf("mem %d %ld %ld %ld %ld %ld %ld\n", size, sum, max[0], max[1], max[2], max[3],
               max[4]);
    free(sb);
    free(rb);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
