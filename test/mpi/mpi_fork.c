/*
 * mpi_fork: fork() in user code (system(), popen()) next to transfers.
 * Ranks 0 and 1 move eager, ring and zero-copy sized messages; between
 * transfers each forks and execs /bin/true; during a nonblocking transfer
 * each forks a child that writes into the buffer in flight and exits.
 * Every byte is verified in the parent.  Kernels < 5.13 need fork
 * protection for registered memory (ibv_fork_init, MADV_DONTFORK) or the
 * parent's copy-on-write pages part from the device's; there a child that
 * touches a protected page dies, which the parent ignores.  Rank 0 prints TAP.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "mpi_tap.h"

static void spawn_true(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        execl("/bin/true", "true", (char *) NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

/* A child that scribbles over buf and exits at once. */
static void spawn_writer(unsigned char *buf, size_t len)
{
    pid_t pid = fork();

    if (pid == 0) {
        memset(buf, 0xEE, len);
        _exit(0);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

static long round_trip(unsigned char *b, size_t len, unsigned seed)
{
    MPI_Request q;
    long errs = 0;

    spawn_true();
    if (rank == 0) {
        fill(b, len, seed);
        MPI_Isend(b, (int) len, MPI_BYTE, 1, 5, MPI_COMM_WORLD, &q);
        spawn_writer(b, len);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        errs += bad_bytes(b, len, seed) != 0;  /* the parent's copy is untouched */
    } else if (rank == 1) {
        memset(b, 0, len);
        MPI_Irecv(b, (int) len, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &q);
        spawn_writer(b, len);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        errs += bad_bytes(b, len, seed) != 0;
    }
    spawn_true();
    return errs;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 1000, 200000, 8 << 20 };
    unsigned char *b = malloc(8 << 20);
    long errs = 0;
    int r, k;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("1..1\n");
    for (r = 0; r < 4; r++)
        for (k = 0; k < 3; k++)
            errs += round_trip(b, sizes[k], (unsigned) (10 * r + k));
    report(errs, "fork()+exec between transfers, children writing into buffers in flight: "
           "every byte intact in the parents");
    free(b);
    MPI_Finalize();
    return failures ? 1 : 0;
}
