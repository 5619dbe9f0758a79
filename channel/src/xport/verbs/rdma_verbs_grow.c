/*
 * rdma_verbs_grow.c -- the verbs transport: growing rings (rdma_verbs.h),
 * the four pipe ops of ringbuf/rb_pipe.h's "Growing rings" (the protocol is
 * the pipe's).  Main only: the CM sends only the first ring's address and
 * key (ring_addr0, ring_rkey0), so main may replace vc->ring and vc->stage
 * once it adopted the connection.
 *   Ordering: the receiver frees its old ring when it has consumed SWITCH,
 * the old ring's last frame; RC writes land in order, so no write into it
 * is still on the way.  The sender's old stage is a write source until the
 * WRs posted before the switch complete: it is retired then (wr_done, from
 * signalled completions, each covering the unsignalled WRs before it).
 *   Memory: under PINNED_MAX_MB every grown ring and stage is charged to the
 * cap (rdma_verbs_ring_charge): a ring grows only while the user buffers'
 * share still holds what they pin; a refused grow leaves the ring as it is.
 */
#include "rdma_verbs.h"

/* Memory of size bytes in *m (empty), registered with access and
 * charged to the pinned cap; else *m stays empty.  [main] */
rdma_status_t rdma_verbs_grow_alloc(rdma_xport_t * xp, rdma_verbs_mem_t * m, size_t size,
                                    int access)
{
    long long pages = (long long) rdma_verbs_page_round(size);

    if (m->buf || rdma_verbs_ring_charge(xp, pages))
        return RDMA_ERR_NOMEM;
    if (rdma_verbs_mem_alloc(xp, m, size, access) == RDMA_OK)
        return RDMA_OK;
    rdma_verbs_mem_free(m);
    rdma_verbs_ring_charge(xp, -pages);
    return RDMA_ERR_NOMEM;
}

/* *m freed, its bytes given back to the cap.  [main] */
void rdma_verbs_grow_free(rdma_xport_t * xp, rdma_verbs_mem_t * m)
{
    rdma_verbs_ring_charge(xp, -(long long) m->len);
    rdma_verbs_mem_free(m);
}

/* Before close: give the cap back what the connection's rings grew by
 * (the first ring and stage are charged at open for every peer). */
void rdma_verbs_grow_release(rdma_verbs_conn_t * vc)
{
    long long first = (long long) rdma_verbs_page_round(vc->xp->prm.ring_size), d;
    uint32_t i;

    d = (long long) (vc->ring.len + vc->stage.len + vc->next_ring.len + vc->next_stage.len)
        - 2 * first;
    for (i = 0; i < vc->n_retired; i++)
        d += (long long) vc->retired[i].m.len;
    rdma_verbs_ring_charge(vc->xp, -d);
}

/* A new ring, as the first: a descriptor of its address and key. */
rdma_status_t rdma_verbs_ring_new(void *ctx, size_t size, void *desc, size_t *dlen,
                                  volatile void **ring)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_verbs_mem_t *m = &vc->next_ring;
    uint64_t d[2];

    if (rdma_verbs_grow_alloc(vc->xp, m, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))
        return RDMA_ERR_NOMEM;
    d[0] = (uintptr_t) m->buf;
    d[1] = m->mr->rkey;
    memcpy(desc, d, sizeof(d));
    *dlen = sizeof(d);
    *ring = m->buf;
    return RDMA_OK;
}

/* The peer moved: every write into the old ring landed before its SWITCH. */
void rdma_verbs_ring_drop(void *ctx, volatile void *old)
{
    rdma_verbs_conn_t *vc = ctx;

    (void) old;                 /* always vc->ring */
    rdma_verbs_grow_free(vc->xp, &vc->ring);
    vc->ring = vc->next_ring;
    memset(&vc->next_ring, 0, sizeof(vc->next_ring));
}

rdma_status_t rdma_verbs_stage_new(void *ctx, size_t size, const void *desc, size_t dlen,
                                   void **stage)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_verbs_mem_t *m = &vc->next_stage;

    (void) desc, (void) dlen;   /* a stage of our own: only ring_move needs the ring */
    if (vc->n_retired == RDMA_VERBS_RETIRED
        || rdma_verbs_grow_alloc(vc->xp, m, size, IBV_ACCESS_LOCAL_WRITE))
        return RDMA_ERR_NOMEM;
    *stage = m->buf;
    return RDMA_OK;
}

/* The old stage is read until the WRs posted so far complete: it retires
 * then (rdma_verbs_retire), at the next signalled completion (every
 * RDMA_VERBS_SIG_EVERY-th WR, or the keepalive). */
void rdma_verbs_ring_move(void *ctx, size_t size, const void *desc, size_t dlen)
{
    rdma_verbs_conn_t *vc = ctx;
    uint64_t d[2];

    memcpy(d, desc, dlen < sizeof(d) ? dlen : sizeof(d));
    vc->retired[vc->n_retired].m = vc->stage;
    vc->retired[vc->n_retired++].done_at = rdma_verbs_wr_posted(vc);
    vc->stage = vc->next_stage;
    memset(&vc->next_stage, 0, sizeof(vc->next_stage));
    vc->remote.ring_addr = d[0];
    vc->remote.ring_rkey = (uint32_t) d[1];
    vc->remote.ring_size = size;
}

/* Free the replaced stages whose writes all completed (oldest first). */
void rdma_verbs_retire(rdma_verbs_conn_t * vc)
{
    uint32_t i, k = 0;

    while (k < vc->n_retired && vc->wr_done >= vc->retired[k].done_at)
        rdma_verbs_grow_free(vc->xp, &vc->retired[k++].m);
    for (i = k; i < vc->n_retired; i++)
        vc->retired[i - k] = vc->retired[i];
    vc->n_retired -= k;
}
