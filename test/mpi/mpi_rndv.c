/*
 * mpi_rndv: the channel's rendezvous of large messages on a node
 * (channel/src/ch3/rdma_rndv.c), 2 ranks, data verified, the path each
 * case takes checked with the pvars rdma_rndv_sends (rank 0) and
 * rdma_rndv_fallbacks (rank 1).  Rank 0 prints TAP.
 *
 *   mpi_rndv [expect [mid]]
 *       expect 1 (default): messages from the zero-copy threshold take the
 *       rendezvous; 0: none does (LARGE_PROTOCOL=copy, ...); 2: CMA is
 *       refused (no_cma): the first one tries, its receiver falls back to
 *       CH3's rendezvous, and no later message tries
 *       mid 1 (default, as on shm): from 64 KiB, messages sent after their
 *       receiver answered take it too, CH3's eager ones included; 0: no
 *       such rule (as over verbs: 96 KiB messages go eagerly)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mpi_tap.h"

#define LEN (1u << 20)

static const char *const pvar_names[] = { "rdma_rndv_sends", "rdma_rndv_fallbacks" };

static int expect = 1, mid = 1, checks;

/* After a case that moved `msgs` large messages from rank 0 to rank 1:
 * did rank 0 send `msgs` by the rendezvous (when expected), and did rank
 * 1 take `fallbacks` of them through CH3's?  1 if not. */
static long path_check(unsigned long long before, int msgs, int fallbacks, const char *what)
{
    int j = rank == 0 ? 0 : 1;
    unsigned long long want = (unsigned long long) (rank == 0 ? msgs : fallbacks),
        got = tap_pvar(j) - before;

    if (expect != 1)
        want = expect == 2 && checks++ == 0;

    if (rank > 1 || got == want)
        return 0;
    fprintf(stderr, "rank %d: %s: %s grew by %llu, expected %llu\n", rank, what, pvar_names[j],
            got, want);
    return 1;
}

/* Rank 0 sends len bytes (seed) to rank 1, which receives into r after
 * `late` (the message arrives before its receive), from `src`. */
static long one(unsigned char *b, unsigned char *r, size_t len, unsigned seed, int late, int src)
{
    if (rank == 0) {
        fill(b, len, seed);
        MPI_Send(b, (int) len, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
        memset(r, 0, len);
        if (late)
            usleep(200000);
        MPI_Recv(r, (int) len, MPI_BYTE, src, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return bad_bytes(r, len, seed) != 0;
    }
    return 0;
}

static void case_one(unsigned char *b, unsigned char *r, int late, int src, const char *what)
{
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    long errs = one(b, r, LEN, 3 + late, late, src);

    report(errs + path_check(before, 1, 0, what), what);
}

/* A receive the rendezvous cannot copy into: a vector type (every other
 * KiB), or a contiguous derived type (it can). */
static void case_types(unsigned char *b, unsigned char *r)
{
    MPI_Datatype vec, con;
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    long errs = 0;
    size_t i;

    MPI_Type_vector(LEN / 1024, 1024, 2048, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    MPI_Type_contiguous(LEN / 4, MPI_INT, &con);
    MPI_Type_commit(&con);
    if (rank == 0) {
        fill(b, LEN, 9);
        MPI_Send(b, LEN, MPI_BYTE, 1, 6, MPI_COMM_WORLD);
        MPI_Send(b, LEN, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
    } else if (rank == 1) {
        fill(b, LEN, 9);
        memset(r, 0, 2 * LEN);
        MPI_Recv(r, 1, vec, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (i = 0; i < LEN / 1024; i++)
            errs += memcmp(r + 2048 * i, b + 1024 * i, 1024) != 0;
        memset(r, 0, LEN);
        MPI_Recv(r, 1, con, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errs += bad_bytes(r, LEN, 9) != 0;
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&con);
    report(errs + path_check(before, 2, 1, "vector type"),
           "receive into a vector type (CH3's rendezvous) and a contiguous derived type");
}

/* Several in flight, received in the reverse order of their tags; a
 * synchronous send; both directions at once. */
static void case_many(unsigned char *b, unsigned char *r)
{
    enum { N = 6 };
    MPI_Request q[N];
    MPI_Status sts[N];
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    long errs = 0;
    int i;

    if (rank == 0) {
        for (i = 0; i < N; i++) {
            fill(b + (size_t) i * LEN, LEN, 20 + i);
            MPI_Isend(b + (size_t) i * LEN, LEN, MPI_BYTE, 1, 100 + i, MPI_COMM_WORLD, &q[i]);
        }
        MPI_Waitall(N, q, sts);
        fill(b, LEN, 40);
        MPI_Ssend(b, LEN, MPI_BYTE, 1, 8, MPI_COMM_WORLD);
    } else if (rank == 1) {
        for (i = N - 1; i >= 0; i--)
            MPI_Irecv(r + (size_t) i * LEN, LEN, MPI_BYTE, 0, 100 + i, MPI_COMM_WORLD, &q[i]);
        MPI_Waitall(N, q, sts);
        for (i = 0; i < N; i++)
            errs += bad_bytes(r + (size_t) i * LEN, LEN, 20 + i) != 0;
        MPI_Recv(r, LEN, MPI_BYTE, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errs += bad_bytes(r, LEN, 40) != 0;
    }
    errs += path_check(before, N + 1, 0, "in flight");
    if (rank < 2) {
        int peer = 1 - rank;
        fill(b, LEN, 50 + rank);
        MPI_Sendrecv(b, LEN, MPI_BYTE, peer, 9, r, LEN, MPI_BYTE, peer, 9, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        errs += bad_bytes(r, LEN, 50 + peer) != 0;
    }
    report(errs, "6 in flight received in reverse order, MPI_Ssend, MPI_Sendrecv both ways");
}

/* More in flight than a connection takes reads at once (verbs: 16): 24
 * receives of 256 KiB posted, then the sends; every one by the channel's
 * rendezvous, none through CH3's (the later reads wait for room). */
static void case_crowd(unsigned char *b, unsigned char *r)
{
    enum { N = 24 };
    const size_t len = LEN / 4;
    MPI_Request q[N];
    MPI_Status sts[N];
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    long errs = 0;
    int i;

    if (rank == 1)
        for (i = 0; i < N; i++)
            MPI_Irecv(r + i * len, (int) len, MPI_BYTE, 0, 200 + i, MPI_COMM_WORLD, &q[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        for (i = 0; i < N; i++) {
            fill(b + i * len, len, 70 + i);
            MPI_Isend(b + i * len, (int) len, MPI_BYTE, 1, 200 + i, MPI_COMM_WORLD, &q[i]);
        }
    if (rank < 2)
        MPI_Waitall(N, q, sts);
    for (i = 0; rank == 1 && i < N; i++)
        errs += bad_bytes(r + i * len, len, 70 + i) != 0;
    errs += path_check(before, N, 0, "crowd");
    report(errs, "24 of 256 KiB in flight, receives posted first: none falls back");
}

/* Probe, then matched probe, then a receive too short (MPI_ERR_TRUNCATE). */
static void case_probe(unsigned char *b, unsigned char *r)
{
    MPI_Status st;
    MPI_Message m;
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    long errs = 0;
    int count = 0, err, cls = 0;

    if (rank == 0) {
        fill(b, LEN, 60);
        MPI_Send(b, LEN, MPI_BYTE, 1, 10, MPI_COMM_WORLD);
        MPI_Send(b, LEN, MPI_BYTE, 1, 11, MPI_COMM_WORLD);
        MPI_Send(b, LEN, MPI_BYTE, 1, 12, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Probe(0, 10, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &count);
        errs += count != (int) LEN;
        MPI_Recv(r, LEN, MPI_BYTE, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        errs += bad_bytes(r, LEN, 60) != 0;
        MPI_Mprobe(0, 11, MPI_COMM_WORLD, &m, &st);
        memset(r, 0, LEN);
        MPI_Mrecv(r, LEN, MPI_BYTE, &m, MPI_STATUS_IGNORE);
        errs += bad_bytes(r, LEN, 60) != 0;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        err = MPI_Recv(r, LEN / 2, MPI_BYTE, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Error_class(err, &cls);
        errs += cls != MPI_ERR_TRUNCATE;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    }
    errs += path_check(before, 3, 1, "probe");
    report(errs, "MPI_Probe, MPI_Mprobe/MPI_Mrecv; a short receive gets MPI_ERR_TRUNCATE");
}

/* Messages below CH3's eager limit and above the rule for answered ones
 * (96 KiB; shm at the default ZCOPY_THRESHOLD): one sent after a frame came
 * back from its receiver (a ping-pong) takes the rendezvous; of 4 sent back
 * to back only the first does, the others go eagerly through the ring
 * (mid 0: none takes it). */
static void case_answered(unsigned char *b, unsigned char *r)
{
    enum { N = 4, MID = 98304 };
    MPI_Request q[N];
    MPI_Status sts[N];
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    long errs = 0;
    int i, k, n;

    for (k = 0; k <= N && rank < 2; k++) {      /* k < N: a ping-pong; k = N: N in a row */
        n = k < N ? 1 : N;
        if (rank == 1) {
            for (i = 0; i < n; i++)
                MPI_Irecv(r + (size_t) i * LEN, MID, MPI_BYTE, 0, 13 + i, MPI_COMM_WORLD, &q[i]);
            MPI_Send(NULL, 0, MPI_BYTE, 0, 12, MPI_COMM_WORLD);     /* the answer */
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (i = 0; i < n; i++) {
                fill(b + (size_t) i * LEN, MID, 60 + k + i);
                MPI_Isend(b + (size_t) i * LEN, MID, MPI_BYTE, 1, 13 + i, MPI_COMM_WORLD, &q[i]);
            }
        }
        MPI_Waitall(n, q, sts);
        for (i = 0; rank == 1 && i < n; i++)
            errs += bad_bytes(r + (size_t) i * LEN, MID, 60 + k + i) != 0;
    }
    errs += path_check(before, mid ? N + 1 : 0, 0, "answered");
    report(errs, "96 KiB, 4 answered by the receiver and 4 in a row: each on its path");
}

/* A non-contiguous 96 KiB send (a vector type) to a peer that answered:
 * the rendezvous cannot take it, so it goes eagerly, as below the rule
 * (it went to CH3's RTS/CTS instead): with the rule (mid 1, shm, whose
 * ring holds it) MPI_Send returns while its receiver still sleeps.  Over
 * verbs (mid 0) the ring starts at 16 KiB, so an eager send of 96 KiB
 * waits for its receiver to take frames: only data and path checked. */
static void case_vector_send(unsigned char *b, unsigned char *r)
{
    enum { MID = 98304, SLEEP_US = 1000000 };
    MPI_Datatype vec;
    unsigned long long before = tap_pvar(rank == 0 ? 0 : 1);
    double took = 0;
    long errs = 0;
    size_t i;

    MPI_Type_vector(MID / 1024, 1024, 2048, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    if (rank == 1) {
        MPI_Send(NULL, 0, MPI_BYTE, 0, 12, MPI_COMM_WORLD);     /* the answer */
        usleep(SLEEP_US);
        MPI_Recv(r, MID, MPI_BYTE, 0, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fill(b, 2 * (size_t) MID, 80);
        for (i = 0; i < MID / 1024; i++)
            errs += memcmp(r + 1024 * i, b + 2048 * i, 1024) != 0;
    } else if (rank == 0) {
        fill(b, 2 * (size_t) MID, 80);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        took = MPI_Wtime();
        MPI_Send(b, 1, vec, 1, 14, MPI_COMM_WORLD);
        took = MPI_Wtime() - took;
        if (mid && took > SLEEP_US / 2e6) {
            fprintf(stderr, "rank 0: the vector send took %.3f s: it waited for its receive\n",
                    took);
            errs++;
        }
    }
    MPI_Type_free(&vec);
    errs += path_check(before, 0, 0, "vector send");
    report(errs, mid ? "96 KiB from a vector type to a peer that answered: sent eagerly (its "
           "MPI_Send returns before the receive), data right" : "96 KiB from a vector type: "
           "data right, not by the rendezvous");
}

int main(int argc, char **argv)
{
    unsigned char *b, *r;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        expect = atoi(argv[1]);
    if (argc > 2)
        mid = atoi(argv[2]);
    tap_pvars_open(pvar_names, 2);
    b = malloc(6 * (size_t) LEN);
    r = malloc(6 * (size_t) LEN);
    if (rank == 0)
        printf("1..9\n");
    MPI_Barrier(MPI_COMM_WORLD);        /* connected: the first message may go */
    case_one(b, r, 0, 0, "1 MiB, receive posted");
    case_one(b, r, 1, 0, "1 MiB, message before its receive");
    case_one(b, r, 1, MPI_ANY_SOURCE, "1 MiB, MPI_ANY_SOURCE after the message");
    case_types(b, r);
    case_many(b, r);
    case_probe(b, r);
    case_crowd(b, r);
    case_answered(b, r);
    case_vector_send(b, r);
    free(b);
    free(r);
    tap_pvars_close();
    MPI_Finalize();
    return failures != 0;
}
