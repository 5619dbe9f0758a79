/*
 * mpi_conns: every rank talks to every other, with partners that drift:
 * R rounds, each an MPI_Alltoall of L bytes per pair, then a ring exchange
 * (MPI_Sendrecv) with the rank k away for k = 1..size-1, every byte
 * verified.  Then each rank prints what ch3:rdma's MPI_T counters say of
 * its connections over the network, one line:
 *   rank R: opened O evicted E live V live_max M
 * (the rdma_conns_* pvars; -1 where one is missing), and rank 0 "ok".
 *
 *   mpiexec -n N mpi_conns R L
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pat(int src, int dst, int round, size_t i)
{
    return (unsigned char) (src * 131 + dst * 17 + round * 7 + i * 13 + (i >> 8));
}

static void check(const unsigned char *buf, int src, int dst, int round, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (buf[i] != pat(src, dst, round, i)) {
            fprintf(stderr, "rank %d: byte %zu from rank %d in round %d is wrong\n", dst, i, src,
                    round);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
}

/* The value of the pvar `name` (a rdma_conns_* one), or -1. */
static long long pvar(const char *name)
{
    int i, n, nl, vb, cls, bind, ro, cont, atomic, dl, count;
    char nm[64], desc[256];
    MPI_Datatype dt;
    MPI_T_enum et;
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    unsigned long long v;

    MPI_T_pvar_get_num(&n);
    for (i = 0; i < n; i++) {
        nl = sizeof(nm), dl = sizeof(desc);
        if (MPI_T_pvar_get_info(i, nm, &nl, &vb, &cls, &dt, &et, desc, &dl, &bind, &ro, &cont,
                                &atomic) == MPI_SUCCESS && !strcmp(nm, name))
            break;
    }
    if (i == n || MPI_T_pvar_session_create(&s) != MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count) != MPI_SUCCESS || count != 1
        || MPI_T_pvar_read(s, h, &v) != MPI_SUCCESS)
        v = (unsigned long long) -1;
    MPI_T_pvar_handle_free(s, &h);
    MPI_T_pvar_session_free(&s);
    return (long long) v;
}

int main(int argc, char **argv)
{
    int rank, size, provided, r, k, p, rounds = argc > 1 ? atoi(argv[1]) : 4;
    size_t len = argc > 2 ? (size_t) atol(argv[2]) : 1024, i;
    unsigned char *out, *in;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    out = malloc(len * size);
    in = malloc(len * size);
    if (!out || !in)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (r = 0; r < rounds; r++) {
        for (p = 0; p < size; p++)
            for (i = 0; i < len; i++)
                out[p * len + i] = pat(rank, p, r, i);
        MPI_Alltoall(out, (int) len, MPI_BYTE, in, (int) len, MPI_BYTE, MPI_COMM_WORLD);
        for (p = 0; p < size; p++)
            check(in + p * len, p, rank, r, len);
        for (k = 1; k < size; k++) {
            int to = (rank + k) % size, from = (rank - k + size) % size;

            for (i = 0; i < len; i++)
                out[i] = pat(rank, to, r + 1000, i);
            MPI_Sendrecv(out, (int) len, MPI_BYTE, to, k, in, (int) len, MPI_BYTE, from, k,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            check(in, from, rank, r + 1000, len);
        }
    }
    printf("rank %d: opened %lld evicted %lld live %lld live_max %lld\n", rank,
           pvar("rdma_conns_opened"), pvar("rdma_conns_evicted"), pvar("rdma_conns_live"),
           pvar("rdma_conns_live_max"));
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("ok: %d ranks, %d rounds of %zu bytes per pair verified\n", size, rounds, len);
    free(out);
    free(in);
    MPI_Finalize();
    MPI_T_finalize();
    return 0;
}
