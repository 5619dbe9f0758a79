/*
 * mpi_port: connect/accept between two separately launched jobs (no shared
 * PMI KVS), the port name passed through a file.
 *   mpi_port serve FILE      open a port, write its name to FILE, accept
 *                            one connection, exchange BYTES both ways
 *                            verified, disconnect; prints one TAP line
 *   mpi_port connect FILE    connect to the port in FILE, same exchange;
 *                            with MPI_PORT_STDERR=PATH its stderr goes to
 *                            PATH from the connect on, so that a refusal's
 *                            fatal error is kept (Hydra may end the job
 *                            before forwarding an aborting process'
 *                            stderr: 3 of 100 runs lost it)
 *   mpi_port forge FILE      connect with the port's token changed: must be
 *                            refused; prints one TAP line
 *   mpi_port soak FILE N MS  a port server that stays up: errors returned,
 *                            it accepts N clients that exchange (above),
 *                            each after MS ms of unrelated progress (and
 *                            while FILE.hold exists), where misbehaving
 *                            clients fail (killed, refused);
 *                            prints its resident and malloc'd memory and
 *                            open fds at the start and the end, and one
 *                            TAP line: no error, every exchange verified
 *   mpi_port die FILE MS     connect, killed (SIGALRM) MS ms after MPI_Init
 *   mpi_port scribble FILE   connect and exchange over shm (PIPE_MODE=basic,
 *                            both jobs), then corrupt the link as a broken
 *                            client could: its head word claims frames it
 *                            never wrote; wait 3 s, exit without
 *                            MPI_Finalize
 */
#include <dirent.h>
#include <malloc.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include "mpi_tap.h"

#define BYTES (1 << 20)

static long exchange(MPI_Comm inter, unsigned mine, unsigned theirs)
{
    unsigned char *out = malloc(BYTES), *in = calloc(1, BYTES);
    MPI_Request rq[2];
    MPI_Status st[2];
    long bad;

    fill(out, BYTES, mine);
    MPI_Irecv(in, BYTES, MPI_BYTE, 0, 5, inter, &rq[0]);
    MPI_Isend(out, BYTES, MPI_BYTE, 0, 5, inter, &rq[1]);
    MPI_Waitall(2, rq, st);
    bad = (long) bad_bytes(in, BYTES, theirs);
    free(out);
    free(in);
    return bad;
}

static void read_port(const char *file, char *port)
{
    FILE *f = NULL;
    int i;

    for (i = 0; i < 600 && !(f = fopen(file, "r")); i++)
        usleep(100000);
    if (!f || !fgets(port, MPI_MAX_PORT_NAME, f)) {
        fprintf(stderr, "mpi_port: no port name in %s\n", file);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fclose(f);
    port[strcspn(port, "\n")] = '\0';
}

/* Change one hex digit of the token in the port name. */
static void forge(char *port)
{
    char *t = strstr(port, "token:");

    if (!t) {
        fprintf(stderr, "mpi_port: no token in %s\n", port);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    t += 6;
    *t = *t == '0' ? '1' : '0';
}

/* The head words of the shm link to the server (the mapping named
 * ch3-rdma-link; shm_link_t.ctl[d].head at 64 + 64 d, channel/src/xport/
 * shm/rdma_shm.h, whose layout t_wire pins to the wire version): a
 * receiver in basic mode reads frames up to its peer's.  Both moved 1 MiB
 * on (whichever end made the link, ours is one of them); 1 if found. */
static int scribble(void)
{
    char line[512];
    unsigned long lo, hi;
    int n = 0;
    FILE *f = fopen("/proc/self/maps", "r");

    while (f && fgets(line, sizeof(line), f))
        if (strstr(line, "ch3-rdma-link") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
            __atomic_fetch_add((uint64_t *) (lo + 64), 1 << 20, __ATOMIC_RELEASE);
            __atomic_fetch_add((uint64_t *) (lo + 128), 1 << 20, __ATOMIC_RELEASE);
            n++;
        }
    if (f)
        fclose(f);
    return n == 1;
}

/* Resident KiB, KiB allocated with malloc (glibc: what a leak would
 * grow, not freed memory the allocator keeps) and open fds of this
 * process (Linux /proc). */
static void usage_now(long *rss_kib, long *heap_kib, int *fds)
{
    struct mallinfo2 mi = mallinfo2();
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    DIR *d = opendir("/proc/self/fd");

    *rss_kib = -1;
    *fds = -1;      /* the directory's own fd counted out below */
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld", rss_kib) == 1)
            break;
    if (f)
        fclose(f);
    while (d && readdir(d))
        (*fds)++;
    if (d)
        closedir(d);
    *fds -= 2;      /* . and .. */
    *heap_kib = (long) ((mi.uordblks + mi.hblkhd) / 1024);
}

/* With SOAK_MAPS set: resident KiB per kind of mapping (its path, or
 * [anon]) from /proc/self/smaps, where a server's memory went. */
static void maps_now(const char *when)
{
    char line[512], path[256] = "", names[64][64];
    long kib, sum[64] = { 0 };
    unsigned long lo, hi;
    int n = 0, i;
    FILE *f = getenv("SOAK_MAPS") ? fopen("/proc/self/smaps", "r") : NULL;

    while (f && fgets(line, sizeof(line), f)) {
        int got = sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &lo, &hi, path);

        if (got == 2)
            snprintf(path, sizeof(path), "[anon]");
        if (got >= 2 || sscanf(line, "Rss: %ld", &kib) != 1 || kib == 0)
            continue;
        for (i = 0; i < n && strncmp(names[i], path, 63); i++);
        if (i == n && n < 64)
            snprintf(names[n++], 64, "%s", path);
        if (i < n)
            sum[i] += kib;
    }
    for (i = 0; i < n; i++)
        printf("# maps %s: %s %ld KiB\n", when, names[i], sum[i]);
    if (f)
        fclose(f);
}

/* Unrelated progress for ms milliseconds, and while the file hold exists
 * (the launcher holds the server out of MPI_Comm_accept while a client it
 * kills connects and dies). */
static int idle(int ms, const char *hold)
{
    double end = MPI_Wtime() + ms / 1e3;
    int flag, rc = MPI_SUCCESS;

    while (rc == MPI_SUCCESS && (MPI_Wtime() < end || access(hold, F_OK) == 0))
        rc = MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
    return rc;
}

static void say_error(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len;

    MPI_Error_string(rc, msg, &len);
    printf("# %s failed: %s\n", what, msg);
}

static int soak(const char *file, int n, int ms)
{
    char port[MPI_MAX_PORT_NAME], tmp[4096], hold[4096];
    long rss0, rss1, heap0, heap1, bad = 0;
    int fds0, fds1, served = 0, rc, errors = 0;
    MPI_Comm inter;
    FILE *f;

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Open_port(MPI_INFO_NULL, port);
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    snprintf(hold, sizeof(hold), "%s.hold", file);
    f = fopen(tmp, "w");
    fprintf(f, "%s\n", port);
    fclose(f);
    rename(tmp, file);
    usage_now(&rss0, &heap0, &fds0);
    printf("# start: %ld KiB resident, %ld KiB malloc'd, %d fds\n", rss0, heap0, fds0);
    fflush(stdout);
    while (served < n && errors < n) {
        if ((rc = idle(ms, hold)) != MPI_SUCCESS) {
            errors++;
            say_error("progress between clients", rc);
        }
        if ((rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter))
            != MPI_SUCCESS) {
            errors++;
            say_error("MPI_Comm_accept", rc);
            continue;
        }
        MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
        bad += exchange(inter, 1, 2) != 0;
        if ((rc = MPI_Comm_disconnect(&inter)) != MPI_SUCCESS) {
            errors++;
            say_error("MPI_Comm_disconnect", rc);
        }
        if (++served == 1)      /* the first connection's lasting allocations */
            usage_now(&rss0, &heap0, &fds0), maps_now("first");
        printf("# served %d\n", served);
        fflush(stdout);
    }
    usage_now(&rss1, &heap1, &fds1);
    maps_now("end");
    printf("# end: %ld KiB resident, %ld KiB malloc'd, %d fds (after the first client: %ld "
           "KiB, %ld KiB, %d fds)\n", rss1, heap1, fds1, rss0, heap0, fds0);
    MPI_Close_port(port);
    printf("%s - port server: %d clients served, %d errors, %ld exchanges bad\n",
           errors || bad ? "not ok" : "ok", served, errors, bad);
    return errors || bad;
}

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME], tmp[4096], msg[MPI_MAX_ERROR_STRING];
    MPI_Comm inter;
    int rc, len, cls;
    FILE *f;

    if (argc < 3 || argc != (!strcmp(argv[1], "soak") ? 5 : !strcmp(argv[1], "die") ? 4 : 3)) {
        fprintf(stderr, "usage: mpi_port serve|connect|forge|scribble FILE | soak FILE N MS | "
                "die FILE MS\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    if (!strcmp(argv[1], "soak")) {
        rc = soak(argv[2], atoi(argv[3]), atoi(argv[4]));
        MPI_Finalize();
        return rc;
    }
    if (!strcmp(argv[1], "die")) {
        struct itimerval it = {.it_value = {atoi(argv[3]) / 1000, atoi(argv[3]) % 1000 * 1000}};

        signal(SIGALRM, SIG_DFL);
        setitimer(ITIMER_REAL, &it, NULL);
    }
    if (!strcmp(argv[1], "serve")) {
        MPI_Open_port(MPI_INFO_NULL, port);
        snprintf(tmp, sizeof(tmp), "%s.tmp", argv[2]);
        f = fopen(tmp, "w");
        fprintf(f, "%s\n", port);
        fclose(f);
        rename(tmp, argv[2]);
        MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        rc = exchange(inter, 1, 2) != 0;
        MPI_Comm_disconnect(&inter);
        MPI_Close_port(port);
        printf("%s - accepted a job launched apart: 1 MiB both ways verified\n",
               rc ? "not ok" : "ok");
    } else {
        read_port(argv[2], port);
        if (!strcmp(argv[1], "forge")) {
            forge(port);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
            MPI_Error_class(rc, &cls);
            MPI_Error_string(rc, msg, &len);
            printf("%s - a port name with a forged token is refused (MPI_ERR_PORT)\n",
                   cls == MPI_ERR_PORT ? "ok" : "not ok");
            if (cls != MPI_ERR_PORT)
                printf("# %s\n", msg);
            MPI_Finalize();
            return 0;
        }
        if (getenv("MPI_PORT_STDERR") && !freopen(getenv("MPI_PORT_STDERR"), "w", stderr)) {
            printf("# mpi_port: cannot write %s: stderr is lost\n", getenv("MPI_PORT_STDERR"));
            fflush(stdout);
        }
        MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        rc = exchange(inter, 2, 1) != 0;
        if (!strcmp(argv[1], "scribble")) {
            printf("%s - after the exchange (%s), the link to the server found and its head "
                   "word moved\n", scribble() && !rc ? "ok" : "not ok", rc ? "bad" : "verified");
            fflush(stdout);
            sleep(3);
            _exit(0);
        }
        MPI_Comm_disconnect(&inter);
        if (rc)
            fprintf(stderr, "mpi_port: data from the server differs\n");
    }
    MPI_Finalize();
    return rc;
}
