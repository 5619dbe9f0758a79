/*
 * rb_impl.h: what the two halves of the general path share (rb_pipe.c:
 * set-up and send side; rb_rx.c: receive side; rb_grow.c), besides the
 * frame rules (rb_frame.h, through rb_pipe.h).  Internal to ringbuf/.
 */
#ifndef RB_IMPL_H_INCLUDED
#define RB_IMPL_H_INCLUDED

#include <string.h>
#include "rb_pipe.h"

/* Position in an iovec; zero-length entries are stepped over. */
typedef struct rb_cursor {
    const struct iovec *iov;
    size_t off;
} rb_cursor_t;

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

/* rb_pipe.c */
rdma_status_t rb_tx_ctrl(rb_pipe_t * p, int type, const void *buf, size_t len, int *sent);
rdma_status_t rb_tx_send(rb_pipe_t * p, int type, size_t len);
uint64_t rb_tx_tail_seen(const rb_pipe_t * p);

/* rb_grow.c: growing rings (rb_pipe.h) */
void rb_grow_stalled(rb_pipe_t * p, int full);
void rb_grow_asked(rb_pipe_t * p);
rdma_status_t rb_grow_step(rb_pipe_t * p);
rdma_status_t rb_grow_moved(rb_pipe_t * p, const rb_frame_t * f);
void rb_grow_switched(rb_pipe_t * p, volatile uint8_t * old);

#endif /* RB_IMPL_H_INCLUDED */
