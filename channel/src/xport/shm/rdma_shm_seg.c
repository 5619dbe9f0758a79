/*
 * rdma_shm_seg.c: node segments over shared memory (rdma_seg_t,
 * rdma_xport.h), the memory of MPI-3 shared windows.  A segment is a memfd
 * like the rings: its maker keeps the fd open until the node's other
 * processes have opened /proc/<pid>/fd/<fd> and mapped it, then seals it
 * (closes the fd).  Nothing is left in /dev/shm when a process dies.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "rdma_shm.h"

static rdma_status_t rdma_shm_seg_make(rdma_xport_t * xp, size_t len, rdma_seg_t * seg)
{
    uint8_t *map;
    int fd;
    rdma_status_t rc = rdma_shm_memfd_make("ch3-rdma-win", len, &fd, &map, xp->err,
                                           sizeof(xp->err));

    if (rc != RDMA_OK)
        return rc;
    seg->map = map;
    seg->len = len;
    seg->pid = (int32_t) getpid();
    seg->fd = fd;
    return RDMA_OK;
}

static rdma_status_t rdma_shm_seg_map(rdma_xport_t * xp, rdma_seg_t * seg)
{
    uint8_t *map;
    rdma_status_t rc = rdma_shm_map_fd(xp, seg->pid, seg->fd, seg->len, seg->len,
                                       "a shared window", &map);

    seg->fd = -1;               /* not ours */
    seg->map = rc == RDMA_OK ? map : NULL;
    return rc;
}

static void rdma_shm_seg_seal(rdma_seg_t * seg)
{
    if (seg->fd >= 0)
        close(seg->fd);
    seg->fd = -1;
}

static void rdma_shm_seg_free(rdma_seg_t * seg)
{
    rdma_shm_seg_seal(seg);
    if (seg->map)
        munmap(seg->map, seg->len);
    seg->map = NULL;
}

const rdma_xport_seg_ops_t rdma_shm_seg_ops = {
    .make = rdma_shm_seg_make,
    .map = rdma_shm_seg_map,
    .seal = rdma_shm_seg_seal,
    .free = rdma_shm_seg_free,
};
