/*
 * rdma_shm_probe.c: does zero-copy (CMA) pay on this host?  Asked once,
 * when the shm transport opens with LARGE_PROTOCOL=auto
 * (rdma_xport_ops.zcopy_slow).
 *
 * The ring's pipelined copy stays in cache and moves 0.8-1.2 memcpy's
 * bandwidth here; the split CMA copy walks and pins every page first.
 * Where a 1 MiB process_vm_readv takes r times a memcpy, zero-copy moves
 * about 1.35/r of memcpy's bandwidth at 1-4 MiB, and less per byte below
 * (a fixed cost per call): the ring wins from r = 1.4-1.8 (256 KiB-4 MiB).
 * Measured: host D (2-core AMD EPYC, 2026-11-28) r = 2.8-4.6 between
 * phases of the host; at r = 2.8-2.9 the ring moved 1.6-1.8x zero-copy's
 * bytes at 1-4 MiB and 2-5x at 32-512 KiB (11 pairs).  Hosts A and B
 * r = 1 (memcpy 14.4 GB/s, split CMA 21-28 GB/s): zero-copy moved 1.6-2x
 * the ring's.  RDMA_SHM_CMA_SLOW sits between the two.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* process_vm_readv */
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include "rdma_shm.h"

#define RDMA_SHM_PROBE_LEN (1u << 20)
#define RDMA_SHM_PROBE_REPS 3
#define RDMA_SHM_CMA_SLOW 1.5

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

int rdma_shm_zcopy_slow(rdma_xport_t * xp, char *why, size_t len)
{
    size_t n = RDMA_SHM_PROBE_LEN;
    char *buf = mmap(NULL, 2 * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    double t_copy, t_cma;
    int slow = 0;

    (void) xp;
    if (buf == MAP_FAILED) {
        snprintf(why, len, "shm: large messages zero-copy (no probe: mmap: %s)", strerror(errno));
        return 0;
    }
    memset(buf, 1, 2 * n);
    if (rdma_shm_probe_times(buf, buf + n, n, &t_copy, &t_cma) != 0)
        snprintf(why, len, "shm: large messages zero-copy (no probe: process_vm_readv: %s)",
                 strerror(errno));
    else {
        slow = t_cma > RDMA_SHM_CMA_SLOW * t_copy;
        snprintf(why, len, "shm: large messages %s: process_vm_readv took %.1fx memcpy's time "
                 "(1 MiB: %.1f vs %.1f GB/s; the ring from %.1fx)", slow ? "through the ring"
                 : "zero-copy", t_cma / t_copy, 1e-9 * (double) n / t_cma,
                 1e-9 * (double) n / t_copy, RDMA_SHM_CMA_SLOW);
    }
    munmap(buf, 2 * n);
    return slow;
}
