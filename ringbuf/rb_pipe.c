/*
 * rb_pipe.c: one connection's ring-buffer pipes.  Design, frame layout and
 * rules are in rb_pipe.h; the memory-ordering rules (GCC __atomic builtins)
 * are noted at the loads and stores that carry them: rb_tx_send (release of
 * the head flag), rb_rx_parse (acquire of the flags, then a barrier),
 * rb_rx_release (relaxed clears, ordered by the credit's release) and
 * rb_tx_tail_seen (acquire of the credit).
 */
#include <string.h>
#include "rb_pipe.h"

#define RB_HDR 16                                      /* flag + info */

/* Acquire barrier between "frame complete" and the payload reads.  A NIC
 * may have written the ring, so use rdma-core's udma_from_device_barrier
 * where the C11 fence is not enough for device writes. */
#if defined(__x86_64__)
#define RB_RX_BARRIER() __asm__ volatile("lfence" ::: "memory")
#elif defined(__aarch64__)
#define RB_RX_BARRIER() __asm__ volatile("dmb oshld" ::: "memory")
#else
#define RB_RX_BARRIER() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* Position in an iovec; zero-length entries are stepped over. */
typedef struct rb_cursor {
    const struct iovec *iov;
    size_t off;
} rb_cursor_t;

static size_t rb_pad8(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

static size_t rb_ring_off(const rb_pipe_t * p, uint64_t pos)
{
    return pos & (p->cfg.ring_size - 1);
}

/* Ring bytes covered by a frame at ring offset off: whole chunks, or up to
 * the ring end for a PAD frame.  Sender and receiver both use this. */
static uint64_t rb_frame_span(const rb_pipe_t * p, size_t off, int type, size_t len)
{
    size_t c = p->cfg.chunk_size;

    if (type == RB_FRAME_PAD)
        return p->cfg.ring_size - off;
    return (p->ovh + rb_pad8(len) + c - 1) & ~(uint64_t) (c - 1);
}

/* seq skips 0: a flag word that landed only in part (unwritten bytes still
 * 0) can then never carry the expected seq (see rb_rx_parse). */
static uint32_t rb_seq_next(uint32_t seq)
{
    return seq + 1 ? seq + 1 : 1;
}

static size_t rb_iov_total(const struct iovec *iov, int n)
{
    size_t t = 0;

    while (n-- > 0)
        t += iov[n].iov_len;
    return t;
}

/* Move len bytes between buf and the iov at c (to_buf: iov -> buf).  The
 * caller guarantees that the iov holds len more bytes. */
static void rb_cursor_copy(rb_cursor_t * c, uint8_t * buf, size_t len, int to_buf)
{
    while (len) {
        size_t k = c->iov->iov_len - c->off;
        uint8_t *u = (uint8_t *) c->iov->iov_base + c->off;

        if (!k) {
            c->iov++;
            c->off = 0;
            continue;
        }
        if (k > len)
            k = len;
        if (to_buf)
            memcpy(buf, u, k);
        else
            memcpy(u, buf, k);
        buf += k;
        len -= k;
        c->off += k;
    }
}

rdma_status_t rb_pipe_init(rb_pipe_t * p, const rb_config_t * cfg, const rb_xport_ops_t * ops,
                           void *ctx, void *stage, volatile uint64_t * tail_word,
                           volatile void *ring, volatile uint64_t * head_word)
{
    int basic;

    if (!p || rb_config_check(cfg, NULL) || !ops || !ops->write || !ops->credit
        || !stage || !tail_word || !ring)
        return RDMA_ERR_INVAL;
    basic = cfg->mode == RB_MODE_BASIC;
    if ((basic && (!ops->head || !head_word)) || ((uintptr_t) stage | (uintptr_t) ring) & 7)
        return RDMA_ERR_INVAL;
    memset(p, 0, sizeof(*p));
    p->cfg = *cfg;
    p->ops = ops;
    p->ctx = ctx;
    p->tx.stage = stage;
    p->tx.tail_word = tail_word;
    p->tx.seq = 1;
    p->tx.wr_target = (double) cfg->sched_c0;
    p->rx.ring = ring;
    p->rx.head_word = head_word;
    p->rx.seq = 1;
    p->tail_flag = !cfg->flag_publishes && !cfg->completion_driven;
    p->ovh = p->tail_flag ? RB_FRAME_OVERHEAD : RB_HDR;
    return RDMA_OK;
}

/* ---- send side ---- */

/* t is a peer tail ahead of the replica and not beyond what was sent. */
static int rb_tail_newer(const rb_pipe_t * p, uint64_t t)
{
    return (int64_t) (t - p->tx.tail) > 0 && (int64_t) (p->tx.head - t) >= 0;
}

/* The newest peer tail known: replica or credit word (acquire: the peer
 * cleared its chunk-start words before storing it). */
static uint64_t rb_tx_tail_seen(const rb_pipe_t * p)
{
    uint64_t t = __atomic_load_n(p->tx.tail_word, __ATOMIC_ACQUIRE);

    return rb_tail_newer(p, t) ? t : p->tx.tail;
}

static uint64_t rb_tx_room(const rb_pipe_t * p)
{
    return p->cfg.ring_size - (p->tx.head - p->tx.tail);
}

/* Payload area of the next frame, its last partial word zeroed (pad8). */
static uint8_t *rb_tx_payload(rb_pipe_t * p, size_t len)
{
    uint8_t *d = p->tx.stage + rb_ring_off(p, p->tx.head) + RB_HDR;

    if (len & 7)
        *(uint64_t *) (d + (len & ~(size_t) 7)) = 0;
    return d;
}

/* One transport write of len ring bytes at off holding `frames` frames
 * (then, in basic mode, the head). */
static int rb_tx_write(rb_pipe_t * p, size_t off, size_t len, unsigned frames)
{
    p->stats.writes_tx++;
    if (p->ops->write(p->ctx, off, len, frames)
        || (p->cfg.mode == RB_MODE_BASIC && p->ops->head(p->ctx, p->tx.head)))
        return RDMA_ERR_XPORT;
    return RDMA_OK;
}

/* Write the frames built since the last flush with one transport write,
 * and grow the superpipeline target. */
static int rb_tx_flush(rb_pipe_t * p)
{
    const rb_config_t *c = &p->cfg;
    unsigned frames = p->tx.wr_frames;

    if (!frames)
        return RDMA_OK;
    p->tx.wr_frames = 0;
    p->tx.wr_target = rb_sched_next(p->tx.wr_target, c->sched_q, c->sched_max);
    return rb_tx_write(p, p->tx.wr_off, p->tx.wr_len, frames);
}

/* Complete the frame whose payload is in place at tx.head and publish it
 * in the stage; returns its ring offset.  Space was checked by the caller. */
static size_t rb_tx_frame(rb_pipe_t * p, int type, size_t len)
{
    size_t off = rb_ring_off(p, p->tx.head);
    uint8_t *f = p->tx.stage + off;
    uint64_t *tailp = (uint64_t *) (f + RB_HDR + rb_pad8(len));
    uint64_t flag = (uint64_t) p->tx.seq << 32 | (uint64_t) len << 2 | 1;

    ((uint64_t *) f)[1] = (p->cfg.mode == RB_MODE_BASIC ? 0 : p->rx.tail & RB_CREDIT_MASK)
        | (uint64_t) type << 56;
    /* The receiver's word at the tail position is 0 or what our stage holds
     * there: make the tail flag differ from it (alt 1 -> 2).  Without a tail
     * flag this read is skipped; on shm it would fetch a line the peer
     * holds before the frame can be published. */
    if (p->tail_flag) {
        if (*tailp == flag)
            flag ^= 3;
        *tailp = flag;
    }
    /* release: payload, info and tail flag before the head flag (for shm,
     * whose stage is the peer's ring, this store publishes the frame: the
     * receiver copies it out while we build the next sub-block) */
    __atomic_store_n((uint64_t *) f, flag, __ATOMIC_RELEASE);
    p->tx.head += rb_frame_span(p, off, type, len);
    p->tx.seq = rb_seq_next(p->tx.seq);
    p->stats.frames_tx++;
    p->stats.bytes_tx += len;
    p->tx.hot_bytes = (off ? p->tx.hot_bytes : 0) + p->ovh + len;
    if (p->cfg.mode != RB_MODE_BASIC)
        p->rx.tail_sent = p->rx.tail;   /* piggybacked */
    return off;
}

/* Complete the frame whose payload is in place and add it to the pending
 * group, which is written once it reaches the superpipeline target (at
 * once without a schedule).  Space was checked by the caller. */
static int rb_tx_send(rb_pipe_t * p, int type, size_t len)
{
    size_t off = rb_ring_off(p, p->tx.head);
    int rc;

    /* a group is contiguous in the ring: it ends where the ring wraps */
    if (off == 0 && (rc = rb_tx_flush(p)) != RDMA_OK)
        return rc;
    rb_tx_frame(p, type, len);
    if (!p->tx.wr_frames++)
        p->tx.wr_off = off;
    p->tx.wr_len = off + p->ovh + rb_pad8(len) - p->tx.wr_off;
    return (double) p->tx.wr_len >= p->tx.wr_target ? rb_tx_flush(p) : RDMA_OK;
}

/* A frame at ring offset off would lie past the hot window (by offset, or
 * by the frame bytes written since offset 0). */
static int rb_tx_past_hot(const rb_pipe_t * p, size_t off)
{
    return p->cfg.hot_window && off
        && (off >= p->cfg.hot_window || p->tx.hot_bytes >= p->cfg.hot_window / 4);
}

/* Hot window (rb_config_t.hot_window): on an empty ring past the window,
 * a PAD frame over the ring end makes the next frame start at offset 0.
 * The PAD is the last frame of its group, as at any ring end. */
static int rb_tx_rewind(rb_pipe_t * p)
{
    if (!rb_tx_past_hot(p, rb_ring_off(p, p->tx.head)) || p->tx.head != p->tx.tail)
        return RDMA_OK;
    p->stats.rewinds++;
    return rb_tx_send(p, RB_FRAME_PAD, 0);
}

/* The common small message: all of it fits in one frame at tx.head now
 * (room by the replica, before the ring end, inside the hot window if
 * there is one, no group pending).  rb_pipe_putv's loop would build
 * exactly that frame. */
static int rb_tx_one_fits(const rb_pipe_t * p, size_t len)
{
    size_t off = rb_ring_off(p, p->tx.head);
    uint64_t span = rb_frame_span(p, off, RB_FRAME_DATA, len);

    return len && span <= p->cfg.max_frame && off + span <= p->cfg.ring_size
        && span <= rb_tx_room(p) && !p->tx.wr_frames && !rb_tx_past_hot(p, off);
}

/* Send the iov as the one frame rb_tx_one_fits found room for. */
static int rb_tx_one(rb_pipe_t * p, const struct iovec *iov, int n, size_t len, size_t * nbytes)
{
    uint8_t *d = rb_tx_payload(p, len);
    int i, rc;

    for (i = 0; i < n; d += iov[i++].iov_len)
        memcpy(d, iov[i].iov_base, iov[i].iov_len);
    rc = rb_tx_write(p, rb_tx_frame(p, RB_FRAME_DATA, len), p->ovh + rb_pad8(len), 1);
    p->tx.wr_target = (double) p->cfg.sched_c0; /* the message is complete */
    *nbytes = rc == RDMA_OK ? len : 0;
    return rc;
}

rdma_status_t rb_pipe_putv(rb_pipe_t * p, const struct iovec *iov, int n, size_t * nbytes)
{
    rb_cursor_t cur = { iov, 0 };
    size_t total, done = 0;
    int rc = RDMA_OK;

    if (!p || !nbytes || n < 0 || (n && !iov))
        return RDMA_ERR_INVAL;
    total = rb_iov_total(iov, n);
    if (rb_tx_one_fits(p, total))
        return rb_tx_one(p, iov, n, total, nbytes);
    p->tx.tail = rb_tx_tail_seen(p);
    if (total)
        rc = rb_tx_rewind(p);
    while (done < total && rc == RDMA_OK) {
        /* room: chunk multiples, so a non-zero room holds >= 40 payload
         * bytes; the frame ends at the ring end at the latest */
        size_t off = rb_ring_off(p, p->tx.head);
        uint64_t room = rb_tx_room(p);
        size_t len = total - done;

        if (room > p->cfg.ring_size - off)
            room = p->cfg.ring_size - off;
        if (room > p->cfg.max_frame)
            room = p->cfg.max_frame;
        if (room < p->cfg.chunk_size)
            break;
        if (len > room - p->ovh)
            len = room - p->ovh;
        rb_cursor_copy(&cur, rb_tx_payload(p, len), len, 1);
        rc = rb_tx_send(p, RB_FRAME_DATA, len);
        done += rc == RDMA_OK ? len : 0;
    }
    if (rc == RDMA_OK)
        rc = rb_tx_flush(p);
    if (total && !done && rc == RDMA_OK)
        p->stats.full_stalls++;
    if (done == total)
        p->tx.wr_target = (double) p->cfg.sched_c0;     /* the message is complete */
    *nbytes = done;
    return rc;
}

rdma_status_t rb_pipe_put_ctrl(rb_pipe_t * p, int type, const void *buf, size_t len, int *sent)
{
    size_t off;
    int rc;

    if (!p || !sent || type < RB_FRAME_CTRL || type >= RB_FRAME_PAD || (len && !buf)
        || len > p->cfg.max_frame - RB_FRAME_OVERHEAD)
        return RDMA_ERR_INVAL;
    *sent = 0;
    p->tx.tail = rb_tx_tail_seen(p);
    rc = rb_tx_rewind(p);
    if (rc)
        return rc;
    off = rb_ring_off(p, p->tx.head);
    /* A frame never wraps: fill the ring end with a PAD frame first.  The
     * PAD alone may go out; it is invisible to the receiver's user. */
    if (off + rb_frame_span(p, off, type, len) > p->cfg.ring_size) {
        if (rb_tx_room(p) < p->cfg.ring_size - off)
            goto full;
        rc = rb_tx_send(p, RB_FRAME_PAD, 0);
        if (rc)
            return rc;
    }
    if (rb_tx_room(p) < rb_frame_span(p, 0, type, len))
        goto full;
    if (len)
        memcpy(rb_tx_payload(p, len), buf, len);
    rc = rb_tx_send(p, type, len);
    rc = rc == RDMA_OK ? rb_tx_flush(p) : rc;
    *sent = rc == RDMA_OK;
    return rc;
  full:
    p->stats.full_stalls++;
    return rb_tx_flush(p);      /* a PAD frame may be pending */
}

size_t rb_pipe_tx_space(const rb_pipe_t * p)
{
    return p->cfg.ring_size - (p->tx.head - rb_tx_tail_seen(p));
}

/* ---- receive side ---- */

static int rb_rx_credit(rb_pipe_t * p)
{
    if (p->ops->credit(p->ctx, p->rx.tail))
        return RDMA_ERR_XPORT;
    p->rx.tail_sent = p->rx.tail;
    p->stats.credits_tx++;
    return RDMA_OK;
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
static int rb_rx_parse(rb_pipe_t * p, rb_frame_t * f)
{
    size_t off = rb_ring_off(p, p->rx.tail);
    volatile uint8_t *fr = p->rx.ring + off;
    int known = 0;              /* the transport says the frame is there */
    uint64_t flag, info;
    size_t len;

    if (p->cfg.completion_driven) {
        if (p->rx.landed == p->rx.consumed)
            return 0;
        known = 1;
    }
    if (p->cfg.mode == RB_MODE_BASIC) {
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
    len = flag >> 2 & RB_LEN_MAX;
    /* rx.off > len: the peer rewrote a frame we had partly read (callers
     * compute len - rx.off) */
    if ((flag & 3) == 0 || (flag & 3) == 3 || p->ovh + rb_pad8(len) > p->cfg.max_frame
        || off + p->ovh + rb_pad8(len) > p->cfg.ring_size || p->rx.off > len)
        return RDMA_ERR_PROTO;
    if (p->tail_flag
        && __atomic_load_n((volatile uint64_t *) (fr + RB_HDR + rb_pad8(len)), __ATOMIC_ACQUIRE)
        != flag)
        return known ? RDMA_ERR_PROTO : 0;
    /* complete: no payload or info read may move before the flag reads (a
     * ring the CPU writes, flag_publishes, needs only the acquire above; a
     * landed completion made the write visible before it was reported) */
    if (p->tail_flag)
        RB_RX_BARRIER();
    if (!p->rx.off)
        rb_rx_prefetch(fr, len);
    info = ((volatile uint64_t *) fr)[1];
    f->type = (int) (info >> 56);
    if (f->type == RB_FRAME_PAD && len)
        return RDMA_ERR_PROTO;
    if (p->cfg.mode == RB_MODE_PIGGYBACK) {
        /* 56-bit credit: rebuild the full tail, which lies within a ring of
         * tx.head */
        uint64_t t = p->tx.head - ((p->tx.head - info) & RB_CREDIT_MASK);

        if (rb_tail_newer(p, t))
            p->tx.tail = t;
    }
    f->payload = (uint8_t *) (fr + RB_HDR);
    f->len = len;
    f->span = rb_frame_span(p, off, f->type, len);
    return 1;
}

/* Release the frame at rx.tail: clear the chunk-start words its bytes cover
 * (so they read as "no frame" when reused; the rest of a PAD frame's span
 * was never written), advance, and return credit when due. */
static int rb_rx_release(rb_pipe_t * p, const rb_frame_t * f)
{
    volatile uint8_t *r = p->rx.ring + rb_ring_off(p, p->rx.tail);
    uint64_t c, wrote = p->ovh + rb_pad8(f->len);

    /* relaxed: the credit's release store (ops->credit, or the head flag
     * of the next frame that piggybacks it) orders these before reuse */
    for (c = 0; c < wrote; c += p->cfg.chunk_size)
        __atomic_store_n((volatile uint64_t *) (r + c), 0, __ATOMIC_RELAXED);
    p->rx.tail += f->span;
    p->rx.seen.span = 0;
    p->rx.off = 0;
    p->rx.seq = rb_seq_next(p->rx.seq);
    p->rx.consumed++;
    p->stats.frames_rx++;
    if (p->cfg.mode == RB_MODE_BASIC
        || p->rx.tail - p->rx.tail_sent >= p->cfg.credit_threshold)
        return rb_rx_credit(p);
    return RDMA_OK;
}

/* rb_rx_parse, with PAD frames released on the way: never shown. */
static int rb_rx_poll(rb_pipe_t * p, rb_frame_t * f)
{
    int rc;

    while ((rc = rb_rx_parse(p, f)) == 1 && f->type == RB_FRAME_PAD) {
        rc = rb_rx_release(p, f);
        if (rc)
            return rc;
    }
    return rc;
}

static int rb_rx_advance(rb_pipe_t * p, const rb_frame_t * f, size_t n)
{
    p->rx.off += n;
    p->stats.bytes_rx += n;
    return p->rx.off == f->len ? rb_rx_release(p, f) : RDMA_OK;
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

rdma_status_t rb_pipe_peek(rb_pipe_t * p, int *type, const void **buf, size_t * len)
{
    rb_frame_t f;
    int rc;

    if (!p || !type || !buf || !len)
        return RDMA_ERR_INVAL;
    rc = rb_rx_poll(p, &f);
    if (rc == 1) {
        p->rx.seen = f;
        *type = f.type;
        *buf = f.payload + p->rx.off;
        *len = f.len - p->rx.off;
    }
    return rc;
}

/* The frame peek found is still at rx.tail until released: not parsed
 * again. */
rdma_status_t rb_pipe_consume(rb_pipe_t * p, size_t n)
{
    rb_frame_t f;
    int rc;

    if (!p)
        return RDMA_ERR_INVAL;
    f = p->rx.seen;
    rc = f.span ? 1 : rb_rx_poll(p, &f);
    if (rc < 0)
        return rc;
    return rc == 0 || n > f.len - p->rx.off ? RDMA_ERR_INVAL : rb_rx_advance(p, &f, n);
}

void rb_pipe_landed(rb_pipe_t * p, unsigned frames)
{
    p->rx.landed += frames;
}

rdma_status_t rb_pipe_flush_credit(rb_pipe_t * p)
{
    if (!p)
        return RDMA_ERR_INVAL;
    return p->rx.tail != p->rx.tail_sent ? rb_rx_credit(p) : RDMA_OK;
}
