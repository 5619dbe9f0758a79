/*
 * rb_impl.h: what the two halves of the pipe share (rb_pipe.c: set-up and
 * send side; rb_rx.c: receive side).  Internal to ringbuf/.
 */
#ifndef RB_IMPL_H_INCLUDED
#define RB_IMPL_H_INCLUDED

#include <string.h>
#include "rb_pipe.h"

#define RB_HDR 16                                      /* flag + info */

/* Position in an iovec; zero-length entries are stepped over. */
typedef struct rb_cursor {
    const struct iovec *iov;
    size_t off;
} rb_cursor_t;

static inline size_t rb_pad8(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

/* c: the direction's geometry, p->tx.cfg or p->rx.cfg */
static inline size_t rb_ring_off(const rb_config_t * c, uint64_t pos)
{
    return pos & (c->ring_size - 1);
}

/* Ring bytes covered by a frame at ring offset off: whole chunks, or up to
 * the ring end for a PAD frame.  Sender and receiver both use this (a
 * SWITCH frame's span is rb_switch_span's). */
static inline uint64_t rb_frame_span(const rb_pipe_t * p, const rb_config_t * c, size_t off,
                                     int type, size_t len)
{
    size_t k = c->chunk_size;

    if (type == RB_FRAME_PAD)
        return c->ring_size - off;
    return (p->ovh + rb_pad8(len) + k - 1) & ~(uint64_t) (k - 1);
}

/* A SWITCH frame at position pos spans up to the next multiple of the new
 * ring's size: the new ring starts empty at its offset 0. */
static inline uint64_t rb_switch_span(uint64_t pos, size_t size)
{
    return size - (pos & (size - 1));
}

/* seq skips 0: a flag word that landed only in part (unwritten bytes still
 * 0) can then never carry the expected seq (see rb_rx_parse). */
static inline uint32_t rb_seq_next(uint32_t seq)
{
    return seq + 1 ? seq + 1 : 1;
}

/* Move len bytes between buf and the iov at c (to_buf: iov -> buf).  The
 * caller guarantees that the iov holds len more bytes. */
static inline void rb_cursor_copy(rb_cursor_t * c, uint8_t * buf, size_t len, int to_buf)
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

/* Position t is after `after` and not beyond what was sent. */
static inline int rb_tx_ahead(const rb_pipe_t * p, uint64_t after, uint64_t t)
{
    return (int64_t) (t - after) > 0 && (int64_t) (p->tx.head - t) >= 0;
}

/* t is a peer tail ahead of the replica (and sent). */
static inline int rb_tail_newer(const rb_pipe_t * p, uint64_t t)
{
    return rb_tx_ahead(p, p->tx.tail, t);
}

/* The peer credited t (tail word or piggyback): the window's rule. */
static inline void rb_tx_credit(rb_pipe_t * p, uint64_t t)
{
    if (rb_tx_ahead(p, p->tx.credit, t))
        p->tx.credit = t;
}

/* rb_pipe.c */
int rb_tx_ctrl(rb_pipe_t * p, int type, const void *buf, size_t len, int *sent);
int rb_tx_send(rb_pipe_t * p, int type, size_t len);
uint64_t rb_tx_tail_seen(const rb_pipe_t * p);

/* rb_grow.c: growing rings (rb_pipe.h) */
void rb_grow_stalled(rb_pipe_t * p, int full);
void rb_grow_asked(rb_pipe_t * p);
int rb_grow_step(rb_pipe_t * p);
int rb_grow_moved(rb_pipe_t * p, const rb_frame_t * f);
void rb_grow_switched(rb_pipe_t * p, volatile uint8_t * old);

#endif /* RB_IMPL_H_INCLUDED */
