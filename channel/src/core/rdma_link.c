/*
 * rdma_link.c -- a peer's pipe and rendezvous over its transport
 * connection (rdma_link.h).
 */
#include <stdio.h>
#include "rdma_link.h"

rdma_status_t rdma_link_bind(rdma_conn_t * c, const rdma_link_config_t * cfg,
                             const rdma_conn_mem_t * mem)
{
    rdma_link_t *l = rdma_link_of(c);
    rb_config_t ring = cfg->ring;
    int rc;

    ring.completion_driven = mem->completion_driven;
    ring.max_writes = mem->max_writes;
    ring.verify = mem->verify;
    if (mem->peer_max_frame && mem->peer_max_frame < ring.max_frame)
        ring.max_frame = mem->peer_max_frame;   /* both ends: the smaller */
    if (ring.quiet_frame > ring.max_frame)
        ring.quiet_frame = (uint32_t) ring.max_frame;
    rc = rb_pipe_init(&l->pipe, &ring, c->ops->pipe_ops, c->priv, mem->stage, mem->tail_word,
                      mem->ring, mem->head_word);
    if (rc == RDMA_OK)
        zc_init(&l->zc, &cfg->zc, c->ops->zc, c->priv, &l->pipe);
    return rc;
}

rdma_status_t rdma_link_config_check(const rdma_link_config_t * cfg, const char **what)
{
    return rb_config_check(&cfg->ring, what);
}

int rdma_link_config_fit(rdma_link_config_t * cfg, const rdma_xport_ops_t * ops,
                         rdma_xport_t * xp, char *why, size_t len)
{
    if (cfg->zc.mode != ZC_MODE_AUTO || !ops->zcopy_slow)
        return 0;
    if (ops->zcopy_slow(xp, why, len))
        cfg->zc.mode = ZC_MODE_COPY;
    return 1;
}

RDMA_HOT void rdma_link_landed(rdma_conn_t * c, unsigned frames)
{
    rb_pipe_landed(&rdma_link_of(c)->pipe, frames);
}

void rdma_link_pulled(rdma_conn_t * c, size_t bytes)
{
    zc_pulled(&rdma_link_of(c)->zc, bytes);
}

void rdma_link_sent(rdma_conn_t * c)
{
    zc_sent(&rdma_link_of(c)->zc);
}

int rdma_link_busy(const rdma_link_t * l)
{
    return (l->xc.state == RDMA_CONN_READY || l->xc.state == RDMA_CONN_CLOSING)
        && (zc_busy(&l->zc) || l->rndv_copies);
}

rdma_status_t rdma_link_idle(rdma_link_t * l)
{
    uint64_t mark = l->pipe.stats.frames_tx + l->pipe.stats.frames_rx;
    int idle = mark == l->idle_mark;

    l->idle_mark = mark;
    return idle && l->xc.state == RDMA_CONN_READY ? rb_pipe_shrink(&l->pipe) : RDMA_OK;
}

__attribute__ ((cold)) void rdma_link_closing(rdma_link_t * l)
{
    if (l->xc.state == RDMA_CONN_READY && l->xc.ops->closing)
        l->xc.ops->closing(l->xc.xport, &l->xc);
}

void rdma_link_quiesce(rdma_link_t * l)
{
    if (l->xc.state != RDMA_CONN_READY && l->xc.state != RDMA_CONN_CLOSING)
        return;
    (void) rb_pipe_flush_credit(&l->pipe);      /* the peer may be gone: no error */
    l->xc.ops->quiesce(l->xc.xport, &l->xc);
}

__attribute__ ((cold)) void rdma_link_abort(rdma_link_t * l)
{
    if (l->xc.state == RDMA_CONN_CLOSED && l->xc.ops->abort)
        l->xc.ops->abort(l->xc.xport, &l->xc);
}

int rdma_link_report(const rdma_link_t * l, char *buf, size_t len)
{
    const zc_stats_t *st = &l->zc.stats;
    int n, k;

    if ((l->xc.state != RDMA_CONN_READY && l->xc.state != RDMA_CONN_CLOSED)
        || l->pipe.stats.frames_tx + st->zc_msgs + st->copy_msgs + st->pulled_msgs
        + st->eager_zc == 0)
        return 0;
    n = snprintf(buf, len, "zero-copy %llu (%llu B, cache hits %llu/%llu), copy %llu (%llu B), "
                 "pulled %llu (%llu B), refused %llu/%llu, split %llu (pushed %llu B), eager "
                 "from user memory %llu; ring frames %llu (%llu B) in %llu writes, %llu credit "
                 "writes, %llu rewinds and %llu lap ends in the hot window, %llu moves to a larger "
                 "ring; by size 2^k zcopy/copy:",
                 (unsigned long long) st->zc_msgs, (unsigned long long) st->zc_bytes,
                 (unsigned long long) st->hits, (unsigned long long) (st->hits + st->misses),
                 (unsigned long long) st->copy_msgs, (unsigned long long) st->copy_bytes,
                 (unsigned long long) st->pulled_msgs, (unsigned long long) st->pulled_bytes,
                 (unsigned long long) st->refused_tx, (unsigned long long) st->refused_rx,
                 (unsigned long long) st->split_msgs, (unsigned long long) st->pushed_bytes,
                 (unsigned long long) st->eager_zc, (unsigned long long) l->pipe.stats.frames_tx,
                 (unsigned long long) l->pipe.stats.bytes_tx,
                 (unsigned long long) l->pipe.stats.writes_tx,
                 (unsigned long long) l->pipe.stats.credits_tx,
                 (unsigned long long) l->pipe.stats.rewinds,
                 (unsigned long long) l->pipe.stats.wraps,
                 (unsigned long long) l->pipe.stats.grows);
    for (k = 0; k < ZC_LOG2_MAX && n >= 0 && (size_t) n < len; k++)
        if (st->zc_by_log2[k] + st->copy_by_log2[k])
            n += snprintf(buf + n, len - n, " %d:%llu/%llu", k,
                          (unsigned long long) st->zc_by_log2[k],
                          (unsigned long long) st->copy_by_log2[k]);
    return n;
}
