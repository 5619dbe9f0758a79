/*
 * mpi_ptracer: who may copy a rank's memory with CMA (process_vm_readv)
 * under Yama ptrace_scope 1, where only ancestors may, unless the target
 * opened itself (PR_SET_PTRACER).  Rank 1 tries to read rank 0: before
 * any large message, after one large message from rank 0 (a zero-copy
 * part exposes rank 0's memory), and after both called MPI_Finalize.
 * Run it without CAP_SYS_PTRACE (which bypasses Yama).  Rank 1 prints
 *   cma before=<ok|errno> after-large=<...> after-finalize=<...>
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

static const char *probe(pid_t pid, void *addr)
{
    char c;
    struct iovec l = { &c, 1 }, r = { addr, 1 };

    return process_vm_readv(pid, &l, 1, &r, 1, 0) == 1 ? "ok" : strerror(errno);
}

/* Files in dir mark rank 0's finalize and rank 1's last probe. */
static void mark(const char *dir, const char *what)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, what);
    if ((f = fopen(path, "w")))
        fclose(f);
}

static int wait_mark(const char *dir, const char *what)
{
    char path[512];
    int i;

    snprintf(path, sizeof(path), "%s/%s", dir, what);
    for (i = 0; i < 2000 && access(path, F_OK); i++)
        usleep(10000);
    return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
    size_t len = 1 << 20;
    unsigned char *b = calloc(1, len);
    const char *dir = argc > 1 ? argv[1] : "/tmp", *p1, *p2;
    long info[2] = { (long) getpid(), (long) (uintptr_t) b };
    int rank;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        MPI_Send(info, 2, MPI_LONG, 1, 0, MPI_COMM_WORLD);
    else if (rank == 1)
        MPI_Recv(info, 2, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    p1 = rank == 1 ? probe((pid_t) info[0], (void *) info[1]) : "";
    /* rank 0's large send exposes its memory at the RTS (rdma_rndv.c): not
     * before rank 1's first probe */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_Send(b, (int) len, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    else if (rank == 1)
        MPI_Recv(b, (int) len, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    p2 = rank == 1 ? probe((pid_t) info[0], (void *) info[1]) : "";
    MPI_Finalize();
    if (rank == 0) {
        mark(dir, "finalized");
        wait_mark(dir, "probed");   /* stay alive for the last probe */
    } else if (rank == 1) {
        const char *p3 = wait_mark(dir, "finalized") ? probe((pid_t) info[0], (void *) info[1])
            : "rank 0 never finalized";
        printf("cma before=%s after-large=%s after-finalize=%s\n", p1, p2, p3);
        mark(dir, "probed");
    }
    free(b);
    return 0;
}
