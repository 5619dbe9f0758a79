/*
 * mpi_spawn: dynamic processes, data verified both ways (TAP from the
 * parents' rank 0).
 *   mpi_spawn [NCHILD [BYTES]]   (default 2 children, 1 MiB)
 *   MPI_SPAWN_HOST=H in the parents' environment: the children run on host
 *   H (info key "host"), e.g. another node than the parents'.
 * The parents spawn NCHILD copies of this program, then:
 *   1 every parent and child exchange 64 B and BYTES with each other
 *     (eager and rendezvous across the two process groups);
 *   2 MPI_Intercomm_merge, then an allreduce over both groups;
 *   3 the children open a port and the parents connect to it: a second
 *     intercommunicator between the same processes carries data too;
 *   4 MPI_Comm_disconnect of both, then every group goes on alone.
 * The parents' rank 0 exits 1 if a check failed.
 *
 *   mpi_spawn dead child|parent   (mpiexec -disable-auto-cleanup -n 1)
 * One parent spawns one child; they exchange 64 B; the one named sends the
 * other 16 KiB and exits at once (_exit(1), no MPI_Finalize); the survivor,
 * 1 s later, receives the 16 KiB, then receives from the dead one again
 * (MPI_ERRORS_RETURN), then finalizes.  It prints "dead child: the last
 * message intact, then MPIX_ERR_PROC_FAILED after T s" (or what it saw).
 *
 *   mpi_spawn late   (mpiexec -disable-auto-cleanup -n 1)
 * A child that finalizes normally is no failure: one parent spawns one
 * child; they exchange 64 B; the child calls MPI_Finalize without
 * disconnecting (its close handshake waits for the parent) and exits; the
 * parent makes no MPI call for 2 s, then probes the child for 1.5 s (the
 * child exits meanwhile), then finalizes and prints "late: the parent
 * finalized" if every call succeeded.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mpi_tap.h"

static size_t bytes = 1 << 20;

/* Send my pattern to every remote rank and check what each sends me. */
static long exchange(MPI_Comm inter, int is_child, size_t n)
{
    int rsize, r;
    long errs = 0;
    unsigned char *out = malloc(n), *in = malloc(n);
    MPI_Request rq[2];
    MPI_Status st[2];

    MPI_Comm_remote_size(inter, &rsize);
    for (r = 0; r < rsize; r++) {
        unsigned mine = (unsigned) (is_child * 1000 + rank * 10 + r);
        unsigned theirs = (unsigned) (!is_child * 1000 + r * 10 + rank);

        fill(out, n, mine);
        memset(in, 0, n);
        MPI_Irecv(in, (int) n, MPI_BYTE, r, 7, inter, &rq[0]);
        MPI_Isend(out, (int) n, MPI_BYTE, r, 7, inter, &rq[1]);
        MPI_Waitall(2, rq, st);
        errs += bad_bytes(in, n, theirs) != 0;
    }
    free(out);
    free(in);
    return errs;
}

/* One TAP line per check: errors summed over both groups through the
 * intercommunicator (each group's rank 0 gets the other's sum). */
static void report_inter(MPI_Comm inter, int is_child, long errs, const char *what)
{
    long mine = 0, theirs = 0;

    MPI_Reduce(&errs, &mine, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        MPI_Sendrecv(&mine, 1, MPI_LONG, 0, 9, &theirs, 1, MPI_LONG, 0, 9, inter,
                     MPI_STATUS_IGNORE);
    ntests++;
    failures += mine + theirs != 0;
    if (rank == 0 && !is_child) {
        printf("%s %d - %s\n", mine + theirs ? "not ok" : "ok", ntests, what);
        fflush(stdout);
    }
}

static void checks(MPI_Comm inter, int is_child)
{
    MPI_Comm merged, inter2;
    char port[MPI_MAX_PORT_NAME] = "";
    int one = 1, sum = 0, msize;
    long errs;

    errs = exchange(inter, is_child, 64) + exchange(inter, is_child, bytes);
    report_inter(inter, is_child, errs, "data both ways, 64 B and large, parents <-> children");

    MPI_Intercomm_merge(inter, is_child, &merged);
    MPI_Comm_size(merged, &msize);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
    report_inter(inter, is_child, sum != msize, "merged intracommunicator: allreduce");
    MPI_Comm_free(&merged);

    if (is_child) {
        if (rank == 0)
            MPI_Open_port(MPI_INFO_NULL, port);
        if (rank == 0)
            MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 3, inter);
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter2);
    } else {
        if (rank == 0)
            MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 3, inter, MPI_STATUS_IGNORE);
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter2);
    }
    errs = exchange(inter2, is_child, bytes);
    report_inter(inter, is_child, errs, "MPI_Comm_connect/accept to the children's port: data");
    MPI_Comm_disconnect(&inter2);
    if (is_child && rank == 0)
        MPI_Close_port(port);
}

/* See the header (dead); inter: the other group; dies: this process is
 * the one that dies. */
static void dead(MPI_Comm inter, const char *who, int dies)
{
    enum { LAST = 16384 };
    unsigned char *b = calloc(1, LAST);
    int rc, c = 0, intact;
    double t0;

    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    MPI_Sendrecv_replace(b, 64, MPI_BYTE, 0, 1, 0, 1, inter, MPI_STATUS_IGNORE);
    if (dies) {
        fill(b, LAST, 5);
        MPI_Send(b, LAST, MPI_BYTE, 0, 2, inter);
        _exit(1);
    }
    sleep(1);
    intact = MPI_Recv(b, LAST, MPI_BYTE, 0, 2, inter, MPI_STATUS_IGNORE) == MPI_SUCCESS
        && bad_bytes(b, LAST, 5) == 0;
    t0 = MPI_Wtime();
    rc = MPI_Recv(b, 64, MPI_BYTE, 0, 3, inter, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &c);
    printf("dead %s: %s, then %s after %.1f s\n", who,
           intact ? "the last message intact" : "the last message LOST or CORRUPT",
           c == MPIX_ERR_PROC_FAILED ? "MPIX_ERR_PROC_FAILED" : rc ? "another error" : "success",
           MPI_Wtime() - t0);
    fflush(stdout);
    free(b);
    MPI_Finalize();
    exit(!intact || c != MPIX_ERR_PROC_FAILED);
}

/* See the header (late). */
static void late(MPI_Comm inter, int is_child)
{
    char b[64] = "";
    int bad, flag;
    double t0;

    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    bad = MPI_Sendrecv_replace(b, 64, MPI_BYTE, 0, 1, 0, 1, inter, MPI_STATUS_IGNORE);
    if (!is_child) {
        sleep(2);
        for (t0 = MPI_Wtime(); MPI_Wtime() - t0 < 1.5 && !bad;)
            bad = MPI_Iprobe(0, 2, inter, &flag, MPI_STATUS_IGNORE);
    }
    bad |= MPI_Finalize();
    if (!is_child)
        printf("late: the parent finalized%s\n", bad ? ", but a call failed" : "");
    exit(bad != 0);
}

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int nchild = argc > 1 ? atoi(argv[1]) : 2, is_child, errcodes[64], i, bad = 0;

    if (argc > 2)
        bytes = strtoul(argv[2], NULL, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_parent(&parent);
    is_child = parent != MPI_COMM_NULL;
    if (argc > 1 && (!strcmp(argv[1], "late") || (argc > 2 && !strcmp(argv[1], "dead")))) {
        if (!is_child)          /* one child, with our arguments */
            MPI_Comm_spawn(argv[0], argv + 1, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &parent,
                           MPI_ERRCODES_IGNORE);
        if (!strcmp(argv[1], "late"))
            late(parent, is_child);
        dead(parent, argv[2], is_child == !strcmp(argv[2], "child"));
    }
    if (is_child) {
        inter = parent;
    } else {
        char *args[] = { argc > 1 ? argv[1] : "2", argc > 2 ? argv[2] : "1048576", NULL };
        MPI_Info info = MPI_INFO_NULL;

        if (nchild > 64)
            nchild = 64;
        if (rank == 0)
            printf("1..4\n");
        if (getenv("MPI_SPAWN_HOST")) {
            MPI_Info_create(&info);
            MPI_Info_set(info, "host", getenv("MPI_SPAWN_HOST"));
        }
        MPI_Comm_spawn(argv[0], args, nchild, info, 0, MPI_COMM_WORLD, &inter, errcodes);
        if (info != MPI_INFO_NULL)
            MPI_Info_free(&info);
        for (i = 0; i < nchild && rank == 0; i++)
            bad += errcodes[i] != MPI_SUCCESS;
    }
    checks(inter, is_child);
    MPI_Comm_disconnect(&inter);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && !is_child)
        printf("%s 4 - spawn error codes, disconnect, each group alone after it\n",
               bad ? "not ok" : "ok");
    MPI_Finalize();
    return rank == 0 && !is_child && (failures || bad);
}
