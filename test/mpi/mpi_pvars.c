/*
 * mpi_pvars: a plain MPI_T client of ch3:rdma's performance variables.
 * Lists every pvar named rdma_*, runs N 8-byte ping-pongs and R round
 * trips of L bytes between ranks 0 and 1 (data checked), cycling through
 * B distinct buffers (default 1), then (I > 0) keeps polling without
 * traffic for I seconds, then prints "rank R: NAME VALUE" for each, read
 * through a pvar session; rank 0 reads them once more after MPI_Finalize
 * ("after finalize: ...").
 *
 *   mpiexec -n 2 mpi_pvars N L R [B [I]]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXV = 32 };

static int idx[MAXV], nv;
static char names[MAXV][64];

static void die(const char *what, int rc)
{
    fprintf(stderr, "mpi_pvars: %s failed (%d)\n", what, rc);
    exit(1);
}

static const char *class_name(int cls)
{
    return cls == MPI_T_PVAR_CLASS_COUNTER ? "counter" : cls == MPI_T_PVAR_CLASS_LEVEL ? "level"
        : cls == MPI_T_PVAR_CLASS_HIGHWATERMARK ? "highwatermark" : "other";
}

static void list(int rank)
{
    int i, n, rc, nl, vb, cls, bind, ro, cont, atomic;
    char name[64], desc[256];
    MPI_Datatype dt;
    MPI_T_enum et;

    if ((rc = MPI_T_pvar_get_num(&n)) != MPI_SUCCESS)
        die("MPI_T_pvar_get_num", rc);
    for (i = 0; i < n && nv < MAXV; i++) {
        int dl = sizeof(desc);

        nl = sizeof(name);
        if (MPI_T_pvar_get_info(i, name, &nl, &vb, &cls, &dt, &et, desc, &dl, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS || strncmp(name, "rdma_", 5))
            continue;
        if (rank == 0)
            printf("pvar %s class %s readonly %d continuous %d: %s\n", name, class_name(cls), ro != 0,
                   cont != 0, desc);
        idx[nv] = i;
        snprintf(names[nv++], sizeof(names[0]), "%s", name);
    }
}

static void read_all(const char *who)
{
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    unsigned long long v;
    int i, count, rc;

    if ((rc = MPI_T_pvar_session_create(&s)) != MPI_SUCCESS)
        die("MPI_T_pvar_session_create", rc);
    for (i = 0; i < nv; i++) {
        if ((rc = MPI_T_pvar_handle_alloc(s, idx[i], NULL, &h, &count)) != MPI_SUCCESS)
            die("MPI_T_pvar_handle_alloc", rc);
        if (count != 1 || (rc = MPI_T_pvar_read(s, h, &v)) != MPI_SUCCESS)
            die("MPI_T_pvar_read", rc);
        printf("%s: %s %llu\n", who, names[i], v);
        MPI_T_pvar_handle_free(s, &h);
    }
    MPI_T_pvar_session_free(&s);
}

static void pingpong(int rank, char **bufs, int nb, size_t len, int reps)
{
    int i, peer = 1 - rank;
    size_t k;

    for (i = 0; i < reps; i++) {
        char *buf = bufs[i % nb];

        if (rank == 0) {
            for (k = 0; k < len; k++)
                buf[k] = (char) (k * 7 + i);
            MPI_Send(buf, (int) len, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, (int) len, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int) len, MPI_CHAR, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int) len, MPI_CHAR, peer, 0, MPI_COMM_WORLD);
        }
        for (k = 0; k < len; k++)
            if (buf[k] != (char) (k * 7 + i)) {
                fprintf(stderr, "rank %d: byte %zu of round %d is wrong\n", rank, k, i);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
    }
}

int main(int argc, char **argv)
{
    int rank, provided, n = argc > 1 ? atoi(argv[1]) : 1000, reps = argc > 3 ? atoi(argv[3]) : 4;
    int i, nb = argc > 4 ? atoi(argv[4]) : 1, flag;
    double idle = argc > 5 ? atof(argv[5]) : 0, t0;
    size_t len = argc > 2 ? (size_t) atol(argv[2]) : 4194304;
    char **bufs = calloc(nb > 0 ? nb : 1, sizeof(*bufs)), who[32];

    for (i = 0; i < nb; i++)
        if (!(bufs[i] = malloc(len > 8 ? len : 8)))
            die("malloc", 0);

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    list(rank);
    if (rank < 2) {
        pingpong(rank, bufs, 1, 8, n);
        pingpong(rank, bufs, nb, len, reps);
    }
    for (t0 = MPI_Wtime(); MPI_Wtime() - t0 < idle;)   /* progress, no messages */
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    snprintf(who, sizeof(who), "rank %d", rank);
    read_all(who);
    MPI_Finalize();
    if (rank == 0)
        read_all("after finalize");
    MPI_T_finalize();
    for (i = 0; i < nb; i++)
        free(bufs[i]);
    free(bufs);
    return 0;
}
