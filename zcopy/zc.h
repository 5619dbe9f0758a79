/*
 * zc: zero-copy rendezvous for large iov entries over an rb_pipe (P3
 * sec. 5: the "special packet" carrying address, size and key, pulled by
 * the receiver with RDMA read).  Transport independent: the transport
 * supplies expose/unexpose/pull (zc_ops_t); verbs pulls with RDMA read
 * from a registration-cache region, shm with process_vm_readv (CMA).
 *
 * Sender (zc_putv).  An iov entry of at least cfg.threshold bytes does not
 * go through the ring: the sender exposes it, sends a REQ control frame
 * {addr, len, key, id} in its place and reports the entry as NOT accepted,
 * so CH3 keeps offering the same iov and the user buffer stays untouched.
 * When FIN {id, ok} has arrived, the next zc_putv accepts the whole entry
 * and unexposes it.  FIN {id, refused} (the receiver cannot pull: no CMA
 * permission, registration refused) sends the entry, and every later one,
 * through the ring instead; FIN {id, busy} (registration limits: memlock,
 * the pinned-memory cap) sends it through the ring and backs off like a
 * failed expose.  When the receiver had pulled part of it before it
 * could pin no more, FIN carries that count, the next zc_putv accepts
 * those bytes and the rest of the entry goes through the ring.  Entries before and after go through the ring
 * as usual; the byte stream is unchanged.
 *
 * Receiver (zc_getv).  Copies DATA frames like rb_pipe_getv.  At a REQ it
 * pulls into the caller's iov and never beyond it: CH3 advances its iov by
 * what we return and reloads it only once it is full, so bytes in flight
 * always land in memory the caller passes again.  Pulls may complete later
 * (verbs): the transport reports completed bytes with zc_pulled().  When
 * all len bytes are in, FIN goes out (from zc_getv/zc_putv later if the
 * ring is full) and the REQ frame is consumed.  FIN frames answering our
 * own REQs are consumed wherever they appear in the stream.
 *
 * Split copy (transports with push, i.e. shm/CMA; cfg.split_min > 0).  A
 * REQ of at least split_min bytes whose destination is one contiguous
 * range is copied by both ends at once: the receiver exposes the second
 * half (ops->expose, released at PUSHED) and sends PUSH {id, off, len,
 * raddr} asking the sender to write it into its memory (ops->push), and
 * pulls the first half itself meanwhile; the sender
 * answers PUSHED {id, status}.  Both cores copy half the bytes: where one
 * core's copy is bound by memory traffic, that is up to twice the
 * bandwidth.  A refused push is pulled by the receiver after all.
 *
 * Eager sends from user memory (P2; cfg.eager_min > 0 and
 * ops->hold).  When a put's iov ends in an entry of at least eager_min
 * bytes (below threshold: not a rendezvous candidate) and all of it fits
 * RB_USER_SEGS frames on an idle pipe (every frame consumed and credited: a stream
 * of sends keeps the copy path, whose sends are accepted at once), the
 * transport is asked whether that buffer is a frequent one
 * (ops->hold: counted, registered once frequent).  If so, the iov goes in
 * one write whose last entry the transport gathers from user memory
 * (rb_pipe_put_user): no copy on this side, the same bytes on the wire.
 * Like a rendezvous entry, it is not accepted until the transport reports
 * the write complete (zc_sent): the caller keeps offering it, and its
 * buffer stays untouched meanwhile.
 *
 * One rendezvous per direction at a time: the stream is ordered, so nothing
 * after the entry could be accepted before it anyway.
 *
 * Protocol choice (cfg.mode): COPY never pulls; ZCOPY always (transport
 * permitting); AUTO follows the registration cache: after ZC_AUTO_WINDOW
 * exposures with a hit rate below 1/4 the next ZC_AUTO_BACKOFF large
 * entries take the copy path, then zero-copy is tried again (P1's
 * future work: switch between pipeline and rcache on the observed hit
 * rate).  A failed expose (registration limits) backs off the same way in
 * every mode.  Decisions are counted per power-of-two size in zc_stats_t.
 *
 * Not thread safe: the caller serialises all calls on one connection.
 */
#ifndef ZC_H_INCLUDED
#define ZC_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "rb_pipe.h"

enum {
    ZC_FRAME_REQ = RB_FRAME_CTRL, ZC_FRAME_FIN = RB_FRAME_CTRL + 1,
    ZC_FRAME_PUSH = RB_FRAME_CTRL + 2, ZC_FRAME_PUSHED = RB_FRAME_CTRL + 3,
    /* the connection closes (the channel evicts it): its sender's last
     * frame but the FIN and PUSHED of rendezvous under way */
    ZC_FRAME_BYE = RB_FRAME_CTRL + 4
};

typedef enum { ZC_MODE_COPY = 0, ZC_MODE_ZCOPY = 1, ZC_MODE_AUTO = 2 } zc_mode_t;

enum { ZC_AUTO_WINDOW = 16, ZC_AUTO_BACKOFF = 64, ZC_LOG2_MAX = 48 };

typedef struct zc_ops {
    /* Make [addr, addr+len) readable by the peer: *key goes into the REQ,
     * *handle to unexpose, *hit = 1 when nothing new had to be registered.
     * Non-zero: cannot (the entry takes the copy path). */
    rdma_status_t (*expose)(void *ctx, const void *addr, size_t len, uint64_t * key, void **handle,
                  int *hit);
    void (*unexpose)(void *ctx, void *handle);
    /* Start reading len bytes at the peer's raddr into dst[0..n) (which
     * holds at least len bytes); *posted = bytes started (bounded by the
     * transport's outstanding limit), completions via zc_pulled() (possibly
     * before pull returns).  RDMA_ERR_REFUSED: nothing started, this side
     * cannot pull (more) from that peer: once nothing is in flight, the
     * rest of the entry comes through the ring; RDMA_ERR_NOMEM: the same,
     * but only for now (limits: the sender backs off, then tries again);
     * RDMA_ERR_XPORT: the connection broke. */
    rdma_status_t (*pull)(void *ctx, const struct iovec *dst, int n, uint64_t raddr, uint64_t key,
                size_t len, size_t *posted);
    /* Split copy (NULL: not supported): write len bytes at src into the
     * peer's raddr, synchronously.  Non-zero: refused (nothing assumed
     * written; the receiver pulls them). */
    rdma_status_t (*push)(void *ctx, const void *src, size_t len, uint64_t raddr);
    /* Eager sends (NULL: none): count a use of [addr, addr+len); 0 if it
     * is a frequent buffer, registered for sending from where it lies
     * (*handle, for rb_pipe_put_user, released with unexpose). */
    rdma_status_t (*hold)(void *ctx, const void *addr, size_t len, void **handle);
} zc_ops_t;

typedef struct zc_config {
    size_t threshold;           /* entries >= threshold are candidates */
    zc_mode_t mode;
    uint32_t answered_min;      /* not zc's: the channel's rendezvous of a
                                 * message (rdma_chan_rndv_ok) from this size
                                 * below threshold when the peer answered
                                 * our last frame; 0: never.  32 bits: in
                                 * mode's padding (the link's size is fixed
                                 * in the VC, MPIDI_CH3I_LINK_BYTES) */
    size_t split_min;           /* split copy from this size; 0: never */
    size_t eager_min;           /* eager sends from user memory from this
                                 * size (ops->hold); 0: never */
} zc_config_t;

typedef struct zc_stats {
    uint64_t zc_msgs, zc_bytes;         /* entries (and bytes, also of parts) sent zero-copy */
    uint64_t copy_msgs, copy_bytes;     /* candidates sent through the ring */
    uint64_t hits, misses;              /* exposures served by the cache or not */
    uint64_t refused_tx, refused_rx;    /* FIN refused or busy sent / received */
    uint64_t pulled_msgs, pulled_bytes; /* REQs served as receiver, bytes pulled */
    uint64_t split_msgs, pushed_bytes;  /* receiver: split REQs; sender: bytes pushed */
    uint64_t eager_zc;          /* eager sends whose payload went from user memory */
    uint64_t zc_by_log2[ZC_LOG2_MAX], copy_by_log2[ZC_LOG2_MAX];
} zc_stats_t;

enum { ZC_TX_IDLE = 0, ZC_TX_WAIT, ZC_TX_DONE, ZC_TX_PART };
enum { ZC_EAGER_IDLE = 0, ZC_EAGER_WAIT, ZC_EAGER_DONE };

typedef struct zc_conn {
    zc_config_t cfg;
    const zc_ops_t *ops;        /* NULL: the transport has no zero-copy */
    void *ctx;
    rb_pipe_t *pipe;
    struct {
        const void *addr;
        size_t len;
        void *handle;
        uint32_t id;
        int state;              /* ZC_TX_* */
        int pushed_due, pushed_status;  /* PUSHED still to send */
        size_t part;            /* FIN refused after this many bytes pulled */
    } tx;
    struct {
        const void *addr;       /* the entry sent from user memory */
        size_t len;
        void *handle;
        int state;              /* ZC_EAGER_* */
    } eager;
    struct {
        uint64_t raddr, key;
        size_t len, posted, done, returned;
        size_t pull_end;        /* pulls stop here (split_at while the push is
                                 * pending or done, else len) */
        size_t split_at;        /* split copy: the pushed part starts here */
        size_t pushed;          /* PUSHED ok: bytes that join done and posted
                                 * once done (really pulled) reaches split_at */
        void *push_handle;      /* the pushed range, exposed until PUSHED */
        uint32_t id, fin_id;
        size_t fin_done;        /* FIN refused: bytes the caller got */
        int active, fin_due, fin_status, push_wait;
    } rx;
    const char *copy_end;       /* end of the entry the ring is copying */
    size_t put_small_max;       /* zc_put_small: puts below this size */
    unsigned char refused;      /* the peer cannot pull: copy from now on */
    unsigned char keep;         /* the caller's current zc_putv goes through
                                 * the ring whatever the entries' sizes */
    unsigned char bye_rx;       /* the peer's BYE was read (zc_getv) */
    unsigned win_n, win_hits, backoff;
    zc_stats_t stats;
} zc_conn_t;

void zc_init(zc_conn_t * z, const zc_config_t * cfg, const zc_ops_t * ops, void *ctx,
             rb_pipe_t * pipe);

/* rb_pipe_putv with rendezvous for large entries (see above). */
rdma_status_t zc_putv(zc_conn_t * z, const struct iovec *iov, int n, size_t *nbytes);

/* rb_pipe_getv that serves REQs and consumes FINs. */
rdma_status_t zc_getv(zc_conn_t * z, const struct iovec *iov, int n, size_t *nbytes);

/* Send BYE; *sent = 0: no room in the ring yet (try again). */
rdma_status_t zc_bye(zc_conn_t * z, int *sent);

/* The transport finished bytes of earlier pulls (in order). */
void zc_pulled(zc_conn_t * z, size_t bytes);

/* The transport's write of the eager entry from user memory completed. */
void zc_sent(zc_conn_t * z);

/* 1 while a pull is in flight or a FIN is still to be sent. */
static inline int zc_busy(const zc_conn_t * z)
{
    return z->rx.active || z->rx.fin_due || z->rx.push_wait || z->tx.pushed_due
        || z->tx.state != ZC_TX_IDLE || z->eager.state != ZC_EAGER_IDLE;
}

/* Receive fast path: a view of the current DATA frame's unread bytes, valid
 * until zc_consume (rb_peek_t; RB_PEEK_SLOW: use zc_getv, a rendezvous or
 * control message is under way, or the next frame is not DATA; an error
 * shows there too). */
static inline rb_peek_t zc_peek(zc_conn_t * z, const void **buf, size_t *len)
{
    if (z->rx.active || z->rx.fin_due || z->tx.pushed_due)
        return RB_PEEK_SLOW;
    return rb_pipe_view(z->pipe, buf, len);
}

/* Mark n bytes of the zc_peek view read (n <= len). */
static inline rdma_status_t zc_consume(zc_conn_t * z, size_t n)
{
    return rb_pipe_view_done(z->pipe, n);
}

/* The small-message path: a put of `total` bytes, too small for a
 * rendezvous or an eager send (put_small_max), on a connection with
 * neither under way, is the pipe's alone (rb_pipe_put_small); else
 * zc_putv. */
static inline rdma_status_t zc_put_small(zc_conn_t * z, const struct iovec *iov, int n,
                                         size_t total, size_t *nbytes)
{
    rdma_status_t rc;

    if (total >= z->put_small_max || zc_busy(z))
        return zc_putv(z, iov, n, nbytes);
    *nbytes = 0;
    rc = rb_pipe_put_small(z->pipe, iov, n, total, nbytes);
    if (*nbytes == total)
        z->copy_end = NULL;     /* as zc_putv: every copied entry is complete */
    return rc;
}

/* zc_put_small in two steps (rb_pipe_claim, rb_pipe_commit): NULL where
 * zc_put_small would not take the pipe's path. */
static inline void *zc_claim(zc_conn_t * z, size_t len)
{
    return len < z->put_small_max && !zc_busy(z) ? rb_pipe_claim(z->pipe, len) : NULL;
}

static inline __attribute__ ((always_inline))
rdma_status_t zc_commit(zc_conn_t * z, size_t len)
{
    z->copy_end = NULL;         /* as zc_putv: every copied entry is complete */
    return rb_pipe_commit(z->pipe, len);
}

#endif /* ZC_H_INCLUDED */
