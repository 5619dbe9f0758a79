/*
 * ring_walk.c -- what a shared-memory ring's slot pattern costs, without
 * MPI or the channel: two processes ping-pong 88-byte messages (an 8-byte
 * eager message's frame on shm) through one ring per direction, each
 * message in the next 128-byte slot of a window of W bytes, then back to
 * offset 0.  The receiver polls the slot's flag word (acquire), copies the
 * message out and clears the slot's words, as rb_pipe does.  W = 128 is a
 * fixed slot, as ch3:nemesis' fastbox; W = 16384 is the channel's hot
 * window before lap ends (rb_pipe.h, hot_window).
 *
 *   ring_walk [ROUNDS [ROUND_TRIPS [W...]]]
 *
 * Windows run interleaved, ROUNDS times; prints each window's median ns
 * per round trip and its ratio to the first window's.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 88
#define SLOT 128
#define RING (1 << 20)
#define MAXW 16
#define MAXR 99

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void msg_send(char *ring, size_t off, uint64_t seq, const char *src)
{
    memcpy(ring + off + 8, src, MSG - 8);
    __atomic_store_n((uint64_t *) (ring + off), seq, __ATOMIC_RELEASE);
}

static void msg_recv(char *ring, size_t off, uint64_t seq, char *dst)
{
    size_t c;

    while (__atomic_load_n((uint64_t *) (ring + off), __ATOMIC_ACQUIRE) != seq)
        ;
    memcpy(dst, ring + off + 8, MSG - 8);
    for (c = 0; c < MSG; c += 64)
        __atomic_store_n((uint64_t *) (ring + off + c), 0, __ATOMIC_RELAXED);
}

/* ns per round trip over n round trips (the first 1000 not timed) in a
 * window of w bytes; -1 if the child could not be started. */
static double walk(size_t w, long n)
{
    char *m = mmap(NULL, 2 * RING, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char buf[MSG] = { 0 };
    size_t off = 0;
    double t0 = 0;
    long i;
    pid_t pid;

    if (m == MAP_FAILED || (pid = fork()) < 0)
        return -1;
    if (pid == 0) {
        for (i = 1; i <= n; i++, off = (off + SLOT) % w) {
            msg_recv(m, off, (uint64_t) i, buf);
            msg_send(m + RING, off, (uint64_t) i, buf);
        }
        _exit(0);
    }
    for (i = 1; i <= n; i++, off = (off + SLOT) % w) {
        if (i == 1000)
            t0 = now();
        msg_send(m, off, (uint64_t) i, buf);
        msg_recv(m + RING, off, (uint64_t) i, buf);
    }
    t0 = now() - t0;
    waitpid(pid, NULL, 0);
    munmap(m, 2 * RING);
    return t0 / (double) (n - 1000) * 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t win[MAXW] = { 128, 256, 512, 1024, 4096, 16384 };
    int nw = 6, rounds = argc > 1 ? atoi(argv[1]) : 7, i, r;
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    double t[MAXW][MAXR], med[MAXW];

    if (argc > 3)
        for (nw = 0; nw < MAXW && nw < argc - 3; nw++)
            win[nw] = strtoul(argv[nw + 3], NULL, 0);
    if (rounds < 1 || rounds > MAXR || n <= 1000) {
        fprintf(stderr, "ring_walk: ROUNDS 1..%d, ROUND_TRIPS > 1000\n", MAXR);
        return 2;
    }
    for (i = 0; i < nw; i++)
        if (win[i] < SLOT || win[i] > RING || win[i] % SLOT) {
            fprintf(stderr, "ring_walk: window %zu: a multiple of %d up to %d\n", win[i], SLOT,
                    RING);
            return 2;
        }
    for (r = 0; r < rounds; r++)
        for (i = 0; i < nw; i++)
            if ((t[i][r] = walk(win[i], n)) < 0) {
                perror("ring_walk");
                return 1;
            }
    printf("# %d rounds of %ld round trips, 88-byte messages in 128-byte slots\n", rounds, n);
    printf("%10s %12s %8s\n", "window", "ns/RT", "ratio");
    for (i = 0; i < nw; i++) {
        qsort(t[i], rounds, sizeof(double), cmp);
        med[i] = t[i][rounds / 2];
        printf("%10zu %12.1f %8.2f\n", win[i], med[i], med[i] / med[0]);
    }
    return 0;
}
