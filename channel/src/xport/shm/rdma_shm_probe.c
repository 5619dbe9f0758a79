/*
 * rdma_shm_probe.c: does zero-copy (CMA) pay on this host?  Asked once,
 * when the shm transport opens with LARGE_PROTOCOL=auto
 * (rdma_xport_ops.zcopy_slow).
 *
 * It times three ways to move 1 MiB, best of RDMA_SHM_PROBE_REPS: a
 * memcpy, a process_vm_readv of its own memory (CMA walks and pins every
 * page first), and the ring's pipelined copy between two cores: a helper
 * thread on another CPU copies 16 KiB frames into a 512 KiB ring (the
 * defaults when RDMA_SHM_CMA_SLOW was fitted) while this thread copies
 * them out.  Where CMA takes over RDMA_SHM_CMA_SLOW times the ring's time,
 * large parts go through the ring.
 *
 * Why the ring is timed, not modelled: the ring's cross-core copy moves
 * 0.8-1.2 of memcpy's bandwidth on host D but 0.45 on host H (both 2-core
 * AMD EPYC guests; 2026-12-02), where CMA took 2.1-3.9x memcpy's time on
 * both.  The ring won on D (1.6-1.8x zero-copy's bytes at 1-4 MiB) and lost
 * on H (zero-copy 0.56x the ring's time at 4 MiB); memcpy alone cannot
 * tell them apart.  On host H a 1 MiB message moved 1.47x the probe's CMA
 * bandwidth by zero-copy (both ranks copy halves) and 0.69x the probe's
 * ring bandwidth through the real ring (its frames, flags and credits), so
 * the two break even where CMA takes about 2.1x the probe ring's time.
 * Measured: host H 0.7-2.0x (24 probes; the second of two ranks reads
 * the higher ones), host D about 3-8x (CMA 2.8-4.6x memcpy's time, the
 * real ring 0.8-1.2 of memcpy's bandwidth), hosts A and B (CMA at
 * memcpy's speed) about 1.  RDMA_SHM_CMA_SLOW sits between H and D.
 *
 * The ranks of a job start together, and on a small node two probes at
 * once would time each other's threads: a lock file per user in /dev/shm
 * lets one probe run at a time (waiting at most RDMA_SHM_PROBE_LOCK_S).
 * The helper thread lives for the probe only (about 1 ms), touches only
 * the probe's buffers and is joined before the probe returns.  With one
 * CPU, or when the helper cannot start or gets no CPU within
 * RDMA_SHM_PROBE_WAIT_S, memcpy stands in for the ring (the old rule).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* process_vm_readv, sched_getcpu, CPU_SET */
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include "rdma_shm.h"

#define RDMA_SHM_PROBE_LEN (1u << 20)
#define RDMA_SHM_PROBE_RING (512u << 10)
#define RDMA_SHM_PROBE_FRAME (16u << 10)
#define RDMA_SHM_PROBE_REPS 5
#define RDMA_SHM_PROBE_WAIT_S 0.2
#define RDMA_SHM_PROBE_LOCK_S 2.0
#define RDMA_SHM_CMA_SLOW 2.5

/* The emulated ring.  head: bytes the pusher wrote (its release store, the
 * puller's acquire load); tail: bytes the puller consumed (the puller's
 * release store, the pusher's acquire load); round: rounds the puller
 * started, -1 to stop (its release store, the pusher's acquire load). */
typedef struct shm_probe_ring {
    char *ring;
    const char *src;
    uint64_t head __attribute__((aligned(64)));
    uint64_t tail __attribute__((aligned(64)));
    int round __attribute__((aligned(64)));
} shm_probe_ring_t;

static void *rdma_shm_probe_push(void *arg)
{
    shm_probe_ring_t *p = arg;
    uint64_t h = 0, off;
    int seen = 0, round;

    for (;;) {
        while ((round = __atomic_load_n(&p->round, __ATOMIC_ACQUIRE)) == seen)
            continue;
        if (round < 0)
            return NULL;
        seen = round;
        for (off = 0; off < RDMA_SHM_PROBE_LEN; off += RDMA_SHM_PROBE_FRAME) {
            while (h + RDMA_SHM_PROBE_FRAME - __atomic_load_n(&p->tail, __ATOMIC_ACQUIRE)
                   > RDMA_SHM_PROBE_RING)
                if (__atomic_load_n(&p->round, __ATOMIC_ACQUIRE) < 0)
                    return NULL;
            memcpy(p->ring + h % RDMA_SHM_PROBE_RING, p->src + off, RDMA_SHM_PROBE_FRAME);
            h += RDMA_SHM_PROBE_FRAME;
            __atomic_store_n(&p->head, h, __ATOMIC_RELEASE);
        }
    }
}

/* Round `round`: the frames out of the ring into dst; its time, or -1 when
 * a frame took longer than RDMA_SHM_PROBE_WAIT_S (the pusher got no CPU). */
static double rdma_shm_probe_pull(shm_probe_ring_t * p, char *dst, int round)
{
    uint64_t t = __atomic_load_n(&p->tail, __ATOMIC_RELAXED), off;
    double t0 = rdma_thread_now(), last = t0;

    __atomic_store_n(&p->round, round, __ATOMIC_RELEASE);
    for (off = 0; off < RDMA_SHM_PROBE_LEN; off += RDMA_SHM_PROBE_FRAME) {
        while (__atomic_load_n(&p->head, __ATOMIC_ACQUIRE) < t + RDMA_SHM_PROBE_FRAME)
            if (rdma_thread_now() - last > RDMA_SHM_PROBE_WAIT_S)
                return -1;
        memcpy(dst + off, p->ring + t % RDMA_SHM_PROBE_RING, RDMA_SHM_PROBE_FRAME);
        t += RDMA_SHM_PROBE_FRAME;
        __atomic_store_n(&p->tail, t, __ATOMIC_RELEASE);
        last = rdma_thread_now();
    }
    return rdma_thread_now() - t0;
}

/* Start the pusher on a CPU other than this thread's (one of the process's
 * own where it has two, else any online one).  0 if it runs. */
static int rdma_shm_probe_start(pthread_t * th, shm_probe_ring_t * p)
{
    cpu_set_t mine, set;
    pthread_attr_t attr;
    int self = sched_getcpu(), n = (int) sysconf(_SC_NPROCESSORS_ONLN), cpu = -1, i, rc;

    if (n < 2 || self < 0)
        return -1;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0)
        CPU_ZERO(&mine);
    for (i = 0; i < CPU_SETSIZE && cpu < 0; i++)
        if (i != self && CPU_ISSET(i, &mine))
            cpu = i;
    if (cpu < 0)
        cpu = (self + 1) % n;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_attr_init(&attr) != 0)
        return -1;
    rc = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
    rc = pthread_create(th, rc == 0 ? &attr : NULL, rdma_shm_probe_push, p);
    if (rc != 0)        /* the CPU may be outside this cgroup's: unpinned */
        rc = pthread_create(th, NULL, rdma_shm_probe_push, p);
    pthread_attr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

/* The best of RDMA_SHM_PROBE_REPS rounds of the ring between two cores;
 * -1 where it could not be timed. */
static double rdma_shm_probe_ring_time(char *ring, const char *src, char *dst)
{
    shm_probe_ring_t p;
    pthread_t th;
    double t, best = 1e9;
    int i;

    memset(&p, 0, sizeof(p));
    p.ring = ring;
    p.src = src;
    if (rdma_shm_probe_start(&th, &p) != 0)
        return -1;
    for (i = 1; i <= RDMA_SHM_PROBE_REPS && best > 0; i++)
        if ((t = rdma_shm_probe_pull(&p, dst, i)) < best)
            best = t;
    __atomic_store_n(&p.round, -1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    return best;
}

/* The best of RDMA_SHM_PROBE_REPS copies of len bytes src -> dst, by memcpy
 * and by process_vm_readv from this process; -1 if CMA fails (errno). */
static int rdma_shm_probe_times(char *dst, char *src, size_t len, double *t_copy,
                                double *t_cma)
{
    struct iovec l = { dst, len }, r = { src, len };
    double t;
    int i;

    *t_copy = *t_cma = 1e9;
    for (i = 0; i < RDMA_SHM_PROBE_REPS; i++) {
        t = rdma_thread_now();
        memcpy(dst, src, len);
        if ((t = rdma_thread_now() - t) < *t_copy)
            *t_copy = t;
        t = rdma_thread_now();
        if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t) len)
            return -1;
        if ((t = rdma_thread_now() - t) < *t_cma)
            *t_cma = t;
    }
    return 0;
}

/* One probe on this node at a time: the lock file's descriptor, or -1
 * (none, or still busy after RDMA_SHM_PROBE_LOCK_S: probe anyway). */
static int rdma_shm_probe_lock(void)
{
    char path[64];
    struct timespec ms = { 0, 1000000 };
    double t0 = rdma_thread_now();
    int fd;

    snprintf(path, sizeof(path), "/dev/shm/ch3-rdma-probe.%u", (unsigned) getuid());
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0)
        if (errno != EWOULDBLOCK || rdma_thread_now() - t0 > RDMA_SHM_PROBE_LOCK_S) {
            close(fd);
            return -1;
        } else
            nanosleep(&ms, NULL);
    return fd;
}

/* Times the three copies in buf (two probe lengths and a ring); 1 if the
 * ring wins, why says what was measured. */
static int rdma_shm_probe_run(char *buf, char *why, size_t len)
{
    const size_t n = RDMA_SHM_PROBE_LEN;
    double t_copy, t_cma, t_ring, t_ref;
    int lock = rdma_shm_probe_lock(), slow;

    if (rdma_shm_probe_times(buf, buf + n, n, &t_copy, &t_cma) != 0) {
        snprintf(why, len, "shm: large messages zero-copy (no probe: process_vm_readv: %s)",
                 strerror(errno));
        slow = 0;
    } else {
        t_ring = rdma_shm_probe_ring_time(buf + 2 * n, buf + n, buf);
        t_ref = t_ring > 0 ? t_ring : t_copy;   /* not timed: memcpy stands in */
        slow = t_cma > RDMA_SHM_CMA_SLOW * t_ref;
        snprintf(why, len, "shm: large messages %s: process_vm_readv took %.1fx the time of "
                 "%s (1 MiB: CMA %.1f, ring %.1f, memcpy %.1f GB/s; the ring from %.1fx)",
                 slow ? "through the ring" : "zero-copy", t_cma / t_ref, t_ring > 0 ?
                 "the ring's copy between two cores" : "memcpy (the ring not timed)",
                 1e-9 * (double) n / t_cma, t_ring > 0 ? 1e-9 * (double) n / t_ring : 0.0,
                 1e-9 * (double) n / t_copy, RDMA_SHM_CMA_SLOW);
    }
    if (lock >= 0)
        close(lock);
    return slow;
}

int rdma_shm_zcopy_slow(rdma_xport_t * xp, char *why, size_t len)
{
    const size_t bytes = 2 * RDMA_SHM_PROBE_LEN + RDMA_SHM_PROBE_RING;
    char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int slow;

    (void) xp;
    if (buf == MAP_FAILED) {
        snprintf(why, len, "shm: large messages zero-copy (no probe: mmap: %s)", strerror(errno));
        return 0;
    }
    memset(buf, 1, bytes);
    slow = rdma_shm_probe_run(buf, why, len);
    munmap(buf, bytes);
    return slow;
}
