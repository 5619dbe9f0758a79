/*
 * rb_rx.c: one connection's ring-buffer pipes, receive side (rb_pipe.h;
 * the send side is rb_pipe.c).  Memory ordering: rb_rx_parse (acquire of
 * the flags, then a barrier) here, rb_rx_parse_express (the same) and
 * rb_rx_release (relaxed clears, ordered by the credit's release) in
 * rb_frame.h.
 */
#include "rb_impl.h"

rdma_status_t rb_rx_credit(rb_pipe_t * p)
{
    if (p->ops->credit(p->ctx, p->rx.tail))
        return RDMA_ERR_XPORT;
    p->rx.tail_sent = p->rx.tail;
    p->rx.consumed_sent = p->rx.consumed;
    p->stats.credits_tx++;
    return RDMA_OK;
}

/* Verifying pipe: the frame at rx.tail (fr, ring offset off), its flag
 * read with the expected seq, is complete: its tail word matches rb_check
 * of what we read, and one not verified itself has landed (rb_pipe.h,
 * "Self-verifying frames").  0: not yet -- also for a flag that no sender
 * writes, which may be one landing byte-wise in any order.  The check read
 * every word it vouches for, so later reads of them need no barrier:
 * coherence gives the same values (or a retransmission's, which are
 * equal). */
int rb_rx_verified(rb_pipe_t * p, volatile const uint8_t * fr, uint64_t flag, size_t off,
                   size_t len)
{
    volatile const uint64_t *w = (volatile const uint64_t *) (fr + RB_HDR);
    size_t n = rb_pad8(len) / 8;
    int v = (flag & 3) == RB_ALT_VERIFIED;

    if (v && p->rx_verified == p->rx.tail + 1)
        return 1;               /* verified before, still at the tail */
    if (rb_rx_flag_bad(p, flag, off, len) || (v && p->ovh + 8 * n > RB_VERIFY_MAX)
        || (!v && p->rx.landed == p->rx.consumed)
        || w[n] != rb_check(p->rx.tail, flag, w[-1], w, v ? n : 0))
        return 0;
    if (v) {                    /* it landed: counted once, as a completion would be */
        p->rx_verified = p->rx.tail + 1;
        p->rx.landed++;
    }
    return 1;
}

/* A small frame's other cache lines, fetched at once rather than one
 * miss after another as the copy reaches them (larger frames stream). */
static void rb_rx_prefetch(volatile const uint8_t * fr, size_t len)
{
    size_t c;

    for (c = 64; c < RB_HDR + len && c < 1024; c += 64)
        __builtin_prefetch((const void *) (fr + c));
}

/* Is the frame at rx.tail complete?  1 (filling *f), 0, or RDMA_ERR_PROTO. */
static inline __attribute__ ((always_inline))
rb_peek_t rb_rx_parse(rb_pipe_t * p, rb_frame_t * f)
{
    size_t off = rb_ring_off(&p->rx.cfg, p->rx.tail);
    volatile uint8_t *fr = p->rx.ring + off;
    int known = 0;              /* the transport says the frame is there */
    uint64_t flag, info;
    size_t len;

    if (p->rx.cfg.completion_driven && p->tail_kind != RB_TAIL_CHECK) {
        if (p->rx.landed == p->rx.consumed)
            return 0;
        known = 1;
    }
    if (p->rx.cfg.mode == RB_MODE_BASIC) {
        if ((int64_t) (__atomic_load_n(p->rx.head_word, __ATOMIC_ACQUIRE) - p->rx.tail) <= 0)
            return 0;
        known = 1;
    }
    flag = __atomic_load_n((volatile uint64_t *) fr, __ATOMIC_ACQUIRE);
    /* Flag polling: 0 is "nothing yet"; another seq is a flag still landing
     * byte-wise (its unwritten seq bytes are 0, and seq is never 0) -- or a
     * corrupt ring, which this cannot tell from a slow write. */
    if (flag == 0 || (uint32_t) (flag >> 32) != p->rx.seq)
        return known ? RDMA_ERR_PROTO : 0;
    len = rb_flag_len(flag);
    if (p->tail_kind == RB_TAIL_CHECK && !rb_rx_verified(p, fr, flag, off, len))
        return 0;
    /* rx.off > len: the peer rewrote a frame we had partly read (callers
     * compute len - rx.off) */
    if (rb_rx_flag_bad(p, flag, off, len) || p->rx.off > len)
        return RDMA_ERR_PROTO;
    if (p->tail_kind == RB_TAIL_FLAG && rb_rx_tail_word(fr, len) != flag)
        return known ? RDMA_ERR_PROTO : 0;
    /* complete: no payload or info read may move before the flag reads (a
     * ring the CPU writes, flag_publishes, needs only the acquire above; a
     * landed completion made the write visible before it was reported; a
     * check read every word it vouches for, rb_rx_verified) */
    if (p->tail_kind == RB_TAIL_FLAG)
        RB_RX_BARRIER();
    if (!p->rx.off)
        rb_rx_prefetch(fr, len);
    info = ((volatile uint64_t *) fr)[1];
    f->type = (int) (info >> 56);
    f->quiet = !!(info & RB_INFO_QUIET);
    if ((f->type == RB_FRAME_PAD || f->type == RB_FRAME_SWITCH) && len)
        return RDMA_ERR_PROTO;
    if (info & RB_INFO_GROW)
        rb_grow_asked(p);
    if (p->rx.cfg.mode == RB_MODE_PIGGYBACK)
        rb_rx_credit_in(p, info);
    f->payload = (uint8_t *) (fr + RB_HDR);
    f->len = len;
    f->span = rb_frame_span_info(p, &p->rx.cfg, off, f->type, len, info);
    if (f->type == RB_FRAME_SWITCH) {
        if (!p->rx.next.ring || p->rx.offer)
            return RDMA_ERR_PROTO;
        f->span = rb_switch_span(p->rx.tail, p->rx.next.size);
    }
    return 1;
}

/* The internal frame (PAD, MOVE, SWITCH) rb_rx_parse found at rx.tail,
 * and those after it, acted on and released; the next other frame parsed. */
static __attribute__ ((noinline)) int rb_rx_internal(rb_pipe_t * p, rb_frame_t * f)
{
    int rc = 1;

    while (rc == 1 && f->type >= RB_FRAME_MOVE) {
        volatile uint8_t *old = p->rx.ring;

        if (f->type == RB_FRAME_MOVE && (rc = rb_grow_moved(p, f)) != RDMA_OK)
            return rc;
        if ((rc = rb_rx_release(p, f)) != RDMA_OK)
            return rc;
        if (f->type == RB_FRAME_SWITCH)
            rb_grow_switched(p, old);
        if (f->type == RB_FRAME_MOVE && (rc = rb_grow_step(p)) != RDMA_OK)
            return rc;  /* switch at once: the sender may be idle */
        rc = rb_rx_parse(p, f);
    }
    return rc;
}

/* rb_rx_parse, with the internal frames acted on and released on the way:
 * never shown.  Grow work owed goes first. */
static inline __attribute__ ((always_inline))
rb_peek_t rb_rx_poll(rb_pipe_t * p, rb_frame_t * f)
{
    int rc;

    if (p->pend && (rc = rb_grow_step(p)) != RDMA_OK)
        return rc;
    rc = rb_rx_parse(p, f);
    return rc == 1 && f->type >= RB_FRAME_MOVE ? rb_rx_internal(p, f) : rc;
}

rdma_status_t rb_pipe_getv(rb_pipe_t * p, const struct iovec *iov, int n, size_t * nbytes)
{
    rb_cursor_t cur = { iov, 0 };
    rb_frame_t f;
    size_t total, done = 0;
    int rc = RDMA_OK;

    if (!p || !nbytes || n < 0 || (n && !iov))
        return RDMA_ERR_INVAL;
    total = rb_iov_total(iov, n);
    while (done < total && (rc = rb_rx_poll(p, &f)) == 1 && f.type == RB_FRAME_DATA) {
        size_t k = f.len - p->rx.off;

        if (k > total - done)
            k = total - done;
        rb_cursor_copy(&cur, f.payload + p->rx.off, k, 0);
        done += k;
        rc = rb_rx_advance(p, &f, k);
        if (rc)
            break;
    }
    *nbytes = done;
    p->rx.at_ctrl = rc == 1 && f.type != RB_FRAME_DATA;
    return rc < 0 ? rc : RDMA_OK;
}

/* Parsed in place into rx.seen, which rb_pipe_consume reuses while its
 * span is set (until the frame's release clears it).  On an
 * RB_EXPRESS_LANDED pipe the common frame, once landed, on an
 * RB_EXPRESS_TAIL pipe once its tail flag came, is parsed the express way
 * instead (rx.seen unused: rb_pipe_view_done releases it
 * whole, rb_pipe_consume parses it again); anything else, a flag that is
 * not the expected one too, goes the general way, which judges it. */
RDMA_HOT rb_peek_t rb_pipe_peek(rb_pipe_t * p, int *type, const void **buf, size_t * len)
{
    rb_frame_t *f;
    rb_peek_t rc;

    if (!p || !type || !buf || !len)
        return RDMA_ERR_INVAL;
    if (p->express >= RB_EXPRESS_LANDED && rb_pipe_rx_maybe(p)
        && rb_rx_parse_express(p, buf, len, p->express) == 1) {
        *type = RB_FRAME_DATA;
        return RB_PEEK_READY;
    }
    f = &p->rx.seen;
    rc = rb_rx_poll(p, f);
    if (rc == RB_PEEK_READY) {
        *type = f->type;
        *buf = f->payload + p->rx.off;
        *len = f->len - p->rx.off;
    }
    return rc;
}

/* The frame peek found is still at rx.tail until released: not parsed
 * again. */
rdma_status_t rb_pipe_consume(rb_pipe_t * p, size_t n)
{
    rb_frame_t *f;
    int rc;

    if (!p)
        return RDMA_ERR_INVAL;
    f = &p->rx.seen;
    rc = f->span ? 1 : rb_rx_poll(p, f);
    if (rc < 0)
        return rc;
    return rc == 0 || n > f->len - p->rx.off ? RDMA_ERR_INVAL : rb_rx_advance(p, f, n);
}

RDMA_HOT void rb_pipe_landed(rb_pipe_t * p, unsigned frames)
{
    p->rx.landed += frames;
}

rdma_status_t rb_pipe_flush_credit(rb_pipe_t * p)
{
    if (!p)
        return RDMA_ERR_INVAL;
    return p->rx.tail != p->rx.tail_sent ? rb_rx_credit(p) : RDMA_OK;
}
