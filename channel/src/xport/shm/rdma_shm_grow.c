/*
 * rdma_shm_grow.c: the shared-memory transport's growing rings, the four
 * pipe ops of ringbuf/rb_pipe.h's "Growing rings" (the protocol is the
 * pipe's).  A ring that is not a connection's first is a memfd of its own:
 * the receiver makes it (ring_new: the descriptor is its fd and size), the
 * sender maps it through /proc/<pid>/fd/<fd>, as it maps regions, and
 * writes it directly (the stage IS the peer's ring).
 *   Ordering: the sender's SWITCH, its last frame in the old ring, is
 * published by the pipe's release store like any frame; the receiver
 * drops the old ring after consuming it, and the sender unmaps its view of
 * the old ring at once (its stores are done; the receiver's mapping is its
 * own).  A first ring (a slot of the region, or of a dynamic link) cannot
 * be unmapped alone: its pages are given back (MADV_REMOVE).
 *   Main only, like every op of this transport.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "rdma_shm.h"

typedef struct shm_ring_desc {
    int64_t fd;
    uint64_t size;
} shm_ring_desc_t;

/* map NULL: nothing (so a zeroed shm_peer_t holds no ring) */
static void rdma_shm_ring_free(shm_ring_t * r)
{
    if (!r->map)
        return;
    munmap(r->map, r->len);
    if (r->fd >= 0)
        close(r->fd);
    *r = (shm_ring_t) { NULL, 0, -1 };
}

void rdma_shm_grow_free(shm_peer_t * pe)
{
    rdma_shm_ring_free(&pe->rx);
    rdma_shm_ring_free(&pe->rx_next);
    rdma_shm_ring_free(&pe->tx);
    rdma_shm_ring_free(&pe->tx_next);
}

rdma_status_t rdma_shm_ring_new(void *ctx, size_t size, void *desc, size_t *dlen,
                                volatile void **ring)
{
    shm_peer_t *pe = ctx;
    shm_ring_t *r = &pe->rx_next;
    shm_ring_desc_t d;

    if (r->map || rdma_shm_memfd_make("ch3-rdma.ring", size, &r->fd, &r->map, pe->xp->err,
                                      sizeof(pe->xp->err))) {
        r->map = NULL;
        return RDMA_ERR_NOMEM;
    }
    r->len = size;
    d = (shm_ring_desc_t) { r->fd, size };
    memcpy(desc, &d, sizeof(d));
    *dlen = sizeof(d);
    *ring = r->map;
    return RDMA_OK;
}

void rdma_shm_ring_drop(void *ctx, volatile void *old)
{
    shm_peer_t *pe = ctx;

    if (pe->rx.map && old == pe->rx.map)
        rdma_shm_ring_free(&pe->rx);
    else
        madvise((void *) old, pe->xp->prm.ring_size, MADV_REMOVE);
    pe->rx = pe->rx_next;
    pe->rx_next = (shm_ring_t) { NULL, 0, -1 };
}

rdma_status_t rdma_shm_stage_new(void *ctx, size_t size, const void *desc, size_t dlen,
                                 void **stage)
{
    shm_peer_t *pe = ctx;
    shm_ring_t *r = &pe->tx_next;
    shm_ring_desc_t d;

    if (r->map || dlen != sizeof(d))
        return RDMA_ERR_NOMEM;
    memcpy(&d, desc, sizeof(d));
    if (d.size != size || rdma_shm_map_fd(pe->xp, pe->pid, (int) d.fd, size, size,
                                          "a peer's new ring", &r->map)) {
        r->map = NULL;
        return RDMA_ERR_NOMEM;
    }
    r->len = size;
    r->fd = -1;
    *stage = r->map;
    return RDMA_OK;
}

void rdma_shm_ring_move(void *ctx, size_t size, const void *desc, size_t dlen)
{
    shm_peer_t *pe = ctx;

    (void) size, (void) desc, (void) dlen;      /* stage_new mapped the ring */
    rdma_shm_ring_free(&pe->tx);
    pe->tx = pe->tx_next;
    pe->tx_next = (shm_ring_t) { NULL, 0, -1 };
}
