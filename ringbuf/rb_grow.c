/*
 * rb_grow.c: growing rings (rb_pipe.h, "Growing rings"): the sender's ask,
 * the receiver's MOVE, the sender's SWITCH, and each end's change of
 * geometry at SWITCH.  Called from the pipe's entry points while p->pend
 * and from its receive loop (MOVE and SWITCH frames); the caller
 * serialises every call on a pipe, so no field here needs more.
 */
#include <stddef.h>
#include "rb_impl.h"

/* MOVE's payload: the new ring's size and the transport's descriptor. */
typedef struct rb_move_msg {
    uint64_t size, dlen;
    uint8_t desc[RB_DESC_MAX];
} rb_move_msg_t;

static void rb_grow_pend(rb_pipe_t * p)
{
    p->pend = p->rx.offer || p->tx.move.size;
}

/* Offer the peer a ring of `size` bytes, unless an offer is under way. */
static void rb_grow_offer_set(rb_pipe_t * p, size_t size)
{
    if (!p->rx.next.ring && !p->rx.offer) {
        p->rx.offer = size;
        p->pend = 1;
    }
}

/* A put could not take all it was given (full: nothing at all). */
void rb_grow_stalled(rb_pipe_t * p, int full)
{
    p->stats.full_stalls += full;
    if (p->tx.cfg.ring_size < p->cfg.ring_max && p->tx.asked < p->tx.cfg.ring_size) {
        p->tx.ask = RB_INFO_GROW;
        p->tx.asked = p->tx.cfg.ring_size;
    }
}

void rb_grow_asked(rb_pipe_t * p)
{
    if (p->rx.grow_seq == p->rx.seq)
        return;
    p->rx.grow_seq = p->rx.seq;
    if (p->rx.cfg.ring_size < p->cfg.ring_max)
        rb_grow_offer_set(p, 2 * p->rx.cfg.ring_size);
}

rdma_status_t rb_pipe_shrink(rb_pipe_t * p)
{
    if (!p || p->rx.cfg.ring_size <= p->cfg.ring_size)
        return RDMA_OK;
    rb_grow_offer_set(p, p->cfg.ring_size);
    return rb_grow_step(p);
}

/* Receiver: a ring of rx.offer bytes, offered with MOVE (again at the next
 * step while the reverse ring has no room).  A refused ring ends it. */
static rdma_status_t rb_grow_offer(rb_pipe_t * p)
{
    rb_move_msg_t m;
    int sent, rc;

    if (!p->rx.next.ring) {
        size_t size = p->rx.offer;
        volatile void *r = NULL;

        p->rx.next.dlen = 0;
        if (p->ops->ring_new(p->ctx, size, p->rx.next.desc, &p->rx.next.dlen, &r) != RDMA_OK) {
            p->rx.offer = 0;
            return RDMA_OK;
        }
        if (p->rx.next.dlen > RB_DESC_MAX)
            return RDMA_ERR_INVAL;
        p->rx.next.ring = r;
        p->rx.next.size = size;
    }
    m.size = p->rx.next.size;
    m.dlen = p->rx.next.dlen;
    memcpy(m.desc, p->rx.next.desc, m.dlen);
    rc = rb_tx_ctrl(p, RB_FRAME_MOVE, &m, offsetof(rb_move_msg_t, desc) + m.dlen, &sent);
    if (rc == RDMA_OK && sent)
        p->rx.offer = 0;
    return rc;
}

rdma_status_t rb_grow_moved(rb_pipe_t * p, const rb_frame_t * f)
{
    rb_move_msg_t m;

    if (f->len < offsetof(rb_move_msg_t, desc) || f->len > sizeof(m))
        return RDMA_ERR_PROTO;
    memcpy(&m, f->payload, f->len);
    if (m.dlen != f->len - offsetof(rb_move_msg_t, desc) || p->tx.move.size
        || m.size & (m.size - 1) || m.size < p->cfg.ring_size || m.size > p->cfg.ring_max
        || m.size == p->tx.cfg.ring_size)
        return RDMA_ERR_PROTO;
    p->tx.move.size = m.size;
    p->tx.move.dlen = m.dlen;
    memcpy(p->tx.move.desc, m.desc, m.dlen);
    p->pend = 1;
    return RDMA_OK;
}

/* Sender: SWITCH as the old ring's last frame once it fits, then write
 * the new ring from a new stage.  A refused stage ends it (never asked
 * again). */
static rdma_status_t rb_grow_switch(rb_pipe_t * p)
{
    size_t size = p->tx.move.size, was = p->tx.cfg.ring_size;
    int sent, rc;

    if (!p->tx.move.stage && p->ops->stage_new(p->ctx, size, p->tx.move.desc, p->tx.move.dlen,
                                               &p->tx.move.stage) != RDMA_OK) {
        p->tx.move.stage = NULL;
        p->tx.move.size = 0;
        p->tx.asked = p->cfg.ring_max;
        return RDMA_OK;
    }
    rc = rb_tx_ctrl(p, RB_FRAME_SWITCH, NULL, 0, &sent);
    if (rc != RDMA_OK || !sent)
        return rc;
    p->ops->ring_move(p->ctx, size, p->tx.move.desc, p->tx.move.dlen);
    p->tx.stage = p->tx.move.stage;
    p->tx.cfg = rb_config_fit(&p->cfg, size);
    p->tx.tail = p->tx.head;    /* the new ring is empty at P */
    p->tx.hot_bytes = 0;
    p->tx.asked = 0;
    p->tx.move.size = 0;
    p->tx.move.stage = NULL;
    p->stats.grows += size > was;
    p->stats.shrinks += size < was;
    return RDMA_OK;
}

rdma_status_t rb_grow_step(rb_pipe_t * p)
{
    int rc = p->rx.offer ? rb_grow_offer(p) : RDMA_OK;

    if (rc == RDMA_OK && p->tx.move.size)
        rc = rb_grow_switch(p);
    rb_grow_pend(p);
    return rc;
}

void rb_grow_switched(rb_pipe_t * p, volatile uint8_t * old)
{
    p->rx.ring = p->rx.next.ring;
    p->rx.cfg = rb_config_fit(&p->cfg, p->rx.next.size);
    p->rx.next.ring = NULL;
    p->ops->ring_drop(p->ctx, old);
}
