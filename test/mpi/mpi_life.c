/*
 * mpi_life: connection lifecycle under real timing (issue: a busy peer is
 * not a dead peer).  One scenario per run:
 *
 *   mpi_life late S     rank 0 sends 1 MiB to rank 1 right after MPI_Init;
 *                       rank 1 makes no MPI call for S seconds, then
 *                       receives and verifies.  Prints "late: ok after S s".
 *   mpi_life stagger S  every pair exchanges a message, then rank r waits
 *                       r * S seconds before MPI_Finalize (rank 1 exits while
 *                       rank 0 still waits for the others in its finalize).
 *                       Prints "stagger: rank r finalized".
 *   mpi_life window S   the closing window: rank 1 exchanges with rank 0
 *                       only and exits at once; ranks 2.. exchange with
 *                       rank 0, then wait S seconds before MPI_Finalize.
 *                       Rank 0's connection to rank 1 is closed while its
 *                       finalize waits S s for the others: nothing on that
 *                       closed connection may fail the job.  3 ranks or more.
 *                       Rank 0 prints "window: rank 0 finalized" (one
 *                       writer: Hydra may split lines of ranks that print at
 *                       once; the others' exit status says they finalized).
 *   mpi_life kill       after a barrier rank 1 SIGKILLs itself; rank 0 then
 *                       exchanges with it (MPI_ERRORS_RETURN) and prints
 *                       "kill: rank 0 saw the failure after T s: <class>: <error>",
 *                       exit status 3.  Run with mpiexec -disable-auto-cleanup.
 *   mpi_life killsend   rank 1 sends rank 0 16 KiB, then SIGKILLs itself;
 *                       rank 0, 1 s later, must receive them intact, then
 *                       fail to receive more and print "killsend: rank 0
 *                       got the last message intact, then saw the failure
 *                       after T s: <error>", exit status 3.  Shared memory
 *                       (where a returned MPI_Send has written the ring);
 *                       mpiexec -disable-auto-cleanup.
 *   mpi_life kill exit, mpi_life killsend exit
 *                       the same, but rank 1 ends with _exit(1), without
 *                       MPI_Finalize: no signal, since a Hydra proxy whose
 *                       rank a signal killed kills its other ranks too
 *                       (-disable-auto-cleanup or not), which one node's
 *                       ranks share.
 *   mpi_life poweroff   the same as kill, but rank 1 powers its node off (sysrq 'o':
 *                       a node gone, no goodbye from its kernel either; only
 *                       in a VM of run-vm --vms, as root).
 *   mpi_life notice     SIGUSR1, which Hydra sends every survivor when a
 *                       process dies under -disable-auto-cleanup, arrives
 *                       at rank 0 once between MPI calls and once while it
 *                       waits in MPI_Recv (from rank 1, same node); 1 MiB
 *                       then goes each way, verified.  Rank 0 prints
 *                       "notice: ok" (or CORRUPT) after the exchange.
 *   mpi_life notice 1   the same with the program's own SIGUSR1 handler,
 *                       installed before MPI_Init: it must see both.
 *   mpi_life others [exit]
 *                       3 ranks: rank 1 dies; ranks 0 and 2 exchange 1 MiB
 *                       each way 20 times over 1.5 s, verified, then rank 0
 *                       receives from rank 1; rank 0 prints "others: ok"
 *                       if every exchange succeeded and the receive failed
 *                       with MPIX_ERR_PROC_FAILED.
 *   mpi_life bigsend|bigrecv|bigpost|bigread|ssend [exit]
 *                       a rendezvous (4 MiB) with a rank that dies:
 *                       rank 0 sends to it, or receives what it began to
 *                       send (its receive posted after or before the RTS
 *                       came), or MPI_Ssends it 1 KiB; prints "bigsend:
 *                       MPIX_ERR_PROC_FAILED after T s" (or bigrecv,
 *                       bigpost, ssend) if it failed so.
 *   mpi_life rmafence [exit]
 *                       active-target RMA with a rank that dies: rank 1
 *                       dies after the opening fence; rank 0 puts 1 KiB
 *                       into its window and fences; prints "rmafence:
 *                       MPIX_ERR_PROC_FAILED after T s" if that failed so.
 *                       (A passive-target epoch with a dead target waits
 *                       forever instead, with ch3:nemesis too: CH3's RMA
 *                       waits for the lock grant or the ack, docs/observability.md.)
 *
 * Timings are printed, never asserted here: the test scripts compare them
 * with MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT.
 */
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEN (1 << 20)
#define SMALL (16 << 10)

static int rank, size, die_by_exit;

static void pause_s(double s)
{
    struct timespec ts = { (time_t) s, (long) ((s - (double) (time_t) s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void fill(unsigned char *b, int n, int seed)
{
    for (int i = 0; i < n; i++)
        b[i] = (unsigned char) (seed * 31 + i * 7 + (i >> 10));
}

static int check(const unsigned char *b, int n, int seed)
{
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += b[i] != (unsigned char) (seed * 31 + i * 7 + (i >> 10));
    return bad;
}

static int late(double s)
{
    unsigned char *b = malloc(LEN);
    double t0 = MPI_Wtime();
    int bad = 0;

    if (rank == 0) {
        fill(b, LEN, 1);
        MPI_Send(b, LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        pause_s(s);     /* computing: no MPI call */
        MPI_Recv(b, LEN, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = check(b, LEN, 1);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("late: %s after %.1f s (%d bad bytes)\n", bad ? "CORRUPT" : "ok",
               MPI_Wtime() - t0, bad);
    free(b);
    return bad != 0;
}

static int stagger(double s)
{
    int i, out = rank, in, bad = 0;

    for (i = 0; i < size; i++)
        if (i != rank) {
            MPI_Sendrecv(&out, 1, MPI_INT, i, 0, &in, 1, MPI_INT, i, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            bad += in != i;
        }
    pause_s(rank * s);
    return bad != 0;
}

static int window(double s)
{
    int i, out = rank, in, bad = 0;

    for (i = 0; i < size; i++)
        if (i != rank && (rank == 0 || i == 0)) {
            MPI_Sendrecv(&out, 1, MPI_INT, i, 0, &in, 1, MPI_INT, i, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            bad += in != i;
        }
    if (rank >= 2)
        pause_s(s);
    return bad != 0;
}

/* Rank 1's end: SIGKILL, _exit(1), or its node off (then SIGKILL if that
 * fails). */
static void die(int node)
{
    FILE *f = node ? fopen("/proc/sysrq-trigger", "w") : NULL;

    if (die_by_exit)
        _exit(1);
    if (f) {
        fputs("o", f);
        fclose(f);
        pause_s(10);
    }
    raise(SIGKILL);
}

/* Rank 0 saw rank 1's death in rc, t0 after it began to wait: print
 * "WHAT after T s: <error class>: <error>" on one line, exit 3. */
static void __attribute__ ((noreturn)) report_death(const char *what, int rc, double t0)
{
    char msg[MPI_MAX_ERROR_STRING] = "", cls[32];
    int len = 0, c = 0;

    MPI_Error_string(rc, msg, &len);
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    MPI_Error_class(rc, &c);
    if (c == MPIX_ERR_PROC_FAILED)
        snprintf(cls, sizeof(cls), "MPIX_ERR_PROC_FAILED");
    else
        snprintf(cls, sizeof(cls), "error class %d", c);
    printf("%s after %.1f s: %s: %s\n", what, MPI_Wtime() - t0, cls, msg);
    fflush(stdout);
    _exit(3);
}

static int kill_one(int node)
{
    int v = 0, rc;
    double t0;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        die(node);
    if (rank != 0)
        return 0;
    pause_s(0.5);
    t0 = MPI_Wtime();
    rc = MPI_Sendrecv_replace(&v, 1, MPI_INT, 1, 0, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
        printf("kill: rank 0 exchanged with a killed rank\n");
        return 1;
    }
    report_death("kill: rank 0 saw the failure", rc, t0);
}

/* Rank 1 dies after a barrier; ranks 0 and 2 go on exchanging 1 MiB each
 * way, verified, for about 1.5 s (the death is seen meanwhile), then rank
 * 0 receives from rank 1.  Every exchange must succeed, the receive fail
 * with MPIX_ERR_PROC_FAILED. */
static int others(void)
{
    unsigned char *b = malloc(LEN);
    int i, rc = MPI_SUCCESS, c = 0, bad = 0, peer = 2 - rank;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        die(0);
    for (i = 0; i < 20 && rank <= 2 && rc == MPI_SUCCESS; i++) {
        fill(b, LEN, i + rank);
        rc = MPI_Sendrecv_replace(b, LEN, MPI_BYTE, peer, 0, peer, 0, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE);
        bad += rc == MPI_SUCCESS ? check(b, LEN, i + peer) : 0;
        pause_s(0.075);
    }
    if (rank == 0) {
        int r1 = MPI_Recv(b, 1, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

        MPI_Error_class(r1, &c);
        printf("others: %s (%d exchanges with rank 2, %d bad bytes; receive from rank 1: %s)\n",
               rc || bad || c != MPIX_ERR_PROC_FAILED ? "FAILED" : "ok", i, bad,
               c == MPIX_ERR_PROC_FAILED ? "MPIX_ERR_PROC_FAILED" : "not that class");
    }
    free(b);
    return rc != MPI_SUCCESS || bad || (rank == 0 && c != MPIX_ERR_PROC_FAILED);
}

/* Print "WHAT: <MPIX_ERR_PROC_FAILED, another error or success> after T s";
 * 0 if rc is of MPIX_ERR_PROC_FAILED. */
static int report_class(const char *what, int rc, double t0)
{
    int c = 0;

    MPI_Error_class(rc, &c);
    printf("%s: %s after %.1f s\n", what,
           c == MPIX_ERR_PROC_FAILED ? "MPIX_ERR_PROC_FAILED" : rc ? "another error" : "success",
           MPI_Wtime() - t0);
    return c != MPIX_ERR_PROC_FAILED;
}

/* A rendezvous with a rank that dies (messages over CH3's eager limit).
 * bigsend: rank 1 dies 0.5 s after a barrier; rank 0 sends it 4 MiB (its
 * RTS waits for a CTS or DONE).  bigrecv: rank 1 starts a 4 MiB send to
 * rank 0 and dies 0.5 s later; rank 0 probes until the RTS arrives, then
 * receives (CH3's CTS waits for the data; the channel's rendezvous reads
 * it without the sender, and may finish before it dies).  bigpost: the
 * same with rank 0's receive posted before the RTS arrives.  bigread:
 * bigrecv, but rank 0 receives 1.5 s after the probe, from a sender gone
 * (the read, or the CTS, fails).  ssend: bigsend's timing, but 1 KiB by
 * MPI_Ssend (eager; it waits for the acknowledgement).  Rank 0 prints
 * "MODE: MPIX_ERR_PROC_FAILED after T s". */
static int rendezvous(const char *mode)
{
    unsigned char *b = calloc(4, LEN);
    int rc, flag = 0, recv = strcmp(mode, "bigsend") && strcmp(mode, "ssend"),
        probe = !strcmp(mode, "bigrecv") || !strcmp(mode, "bigread");
    MPI_Request r;
    double t0;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 0 && !strcmp(mode, "bigpost"))
        MPI_Irecv(b, 4 * LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        if (recv)
            MPI_Isend(b, 4 * LEN, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &r);
        pause_s(0.5);   /* rank 0 waits in the rendezvous by now */
        die(0);
    }
    if (rank != 0)
        return 0;
    t0 = MPI_Wtime();
    while (probe && !flag && MPI_Wtime() - t0 < 5)
        MPI_Iprobe(1, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    if (!strcmp(mode, "bigread"))
        pause_s(1.5);   /* the sender is gone before its receive */
    if (!strcmp(mode, "bigpost"))
        rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    else if (!strcmp(mode, "ssend"))
        rc = MPI_Ssend(b, 1024, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    else
        rc = recv ? MPI_Recv(b, 4 * LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
            : MPI_Send(b, 4 * LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    free(b);
    return report_class(mode, rc, t0);
}

/* See the header (rmafence). */
static int rma_fence(void)
{
    int buf[256] = { 0 }, rc;
    MPI_Win win;
    double t0;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Win_create(buf, sizeof(buf), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_fence(0, win);
    if (rank == 1)
        die(0);
    if (rank != 0)
        return 0;
    t0 = MPI_Wtime();
    rc = MPI_Put(buf, 256, MPI_INT, 1, 0, 256, MPI_INT, win);
    if (rc == MPI_SUCCESS)
        rc = MPI_Win_fence(0, win);
    return report_class("rmafence", rc, t0);
}

static volatile sig_atomic_t usr1_seen;

static void usr1_count(int sig)
{
    (void) sig;
    usr1_seen++;
}

static int notice(int own)
{
    unsigned char *b = malloc(LEN);
    int64_t pid = getpid();
    int bad = 0;

    MPI_Bcast(&pid, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        raise(SIGUSR1);
        MPI_Recv(b, LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = check(b, LEN, 2);
        fill(b, LEN, 3);
        MPI_Send(b, LEN, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
    } else if (rank == 1) {
        pause_s(0.5);   /* rank 0 is in MPI_Recv by now */
        kill((pid_t) pid, SIGUSR1);
        pause_s(0.5);
        fill(b, LEN, 2);
        MPI_Send(b, LEN, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        MPI_Recv(b, LEN, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        bad = check(b, LEN, 3);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("notice: %s (%d bad bytes; the program's handler saw %d signals)\n",
               bad ? "CORRUPT" : own && usr1_seen != 2 ? "HANDLER SKIPPED" : "ok", bad,
               (int) usr1_seen);
    free(b);
    return bad != 0 || (rank == 0 && own && usr1_seen != 2);
}

static int kill_after_send(void)
{
    unsigned char *b = malloc(SMALL);
    int rc;
    double t0;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        fill(b, SMALL, 4);
        MPI_Send(b, SMALL, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        die(0);
    }
    if (rank != 0)
        return 0;
    pause_s(1.0);
    rc = MPI_Recv(b, SMALL, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || check(b, SMALL, 4)) {
        printf("killsend: rank 0 lost the last message (%s)\n", rc ? "error" : "corrupt");
        return 1;
    }
    t0 = MPI_Wtime();
    rc = MPI_Recv(b, SMALL, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) {
        printf("killsend: rank 0 received a message the killed rank never sent\n");
        return 1;
    }
    report_death("killsend: rank 0 got the last message intact, then saw the failure", rc, t0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    double s = argc > 2 ? atof(argv[2]) : 0;
    int rc;

    die_by_exit = argc > 2 && !strcmp(argv[2], "exit");
    if (!strcmp(mode, "notice") && s == 1)
        signal(SIGUSR1, usr1_count);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (size < 2) {
        fprintf(stderr, "mpi_life: needs 2 ranks or more\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!strcmp(mode, "late"))
        rc = late(s);
    else if (!strcmp(mode, "stagger"))
        rc = stagger(s);
    else if (!strcmp(mode, "window") && size >= 3)
        rc = window(s);
    else if (!strcmp(mode, "kill") || !strcmp(mode, "poweroff"))
        rc = kill_one(!strcmp(mode, "poweroff"));
    else if (!strcmp(mode, "killsend"))
        rc = kill_after_send();
    else if (!strcmp(mode, "notice"))
        rc = notice(s == 1);
    else if (!strcmp(mode, "others") && size >= 3)
        rc = others();
    else if (!strcmp(mode, "bigsend") || !strcmp(mode, "bigrecv") || !strcmp(mode, "bigpost")
             || !strcmp(mode, "bigread") || !strcmp(mode, "ssend"))
        rc = rendezvous(mode);
    else if (!strcmp(mode, "rmafence") && size == 2)
        rc = rma_fence();
    else {
        fprintf(stderr, "usage: mpi_life late S | stagger S | window S (3 ranks+) | kill | poweroff"
                " | killsend [exit] | notice [1] | others [exit] (3 ranks+)"
                " | bigsend|bigrecv|bigpost|ssend [exit] | rmafence [exit] (2 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }
    MPI_Finalize();
    if (!strcmp(mode, "stagger") || (!strcmp(mode, "window") && rank == 0))
        printf("%s: rank %d finalized%s\n", mode, rank, rc ? " (bad data)" : "");
    return rc;
}
