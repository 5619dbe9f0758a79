/*
 * rb_pipe.c: one connection's ring-buffer pipes, set-up and send side (the
 * receive side is rb_rx.c, the frame rules both use rb_frame.h).  Design,
 * frame layout and rules are in rb_pipe.h; the memory-ordering rules (GCC
 * __atomic builtins) are noted at the loads and stores that carry them:
 * rb_tx_tail_seen (acquire of the credit) here, rb_tx_frame (release of
 * the head flag) and rb_rx_release in rb_frame.h, rb_rx_parse in rb_rx.c.
 */
#include <string.h>
#include "rb_impl.h"

rdma_status_t rb_pipe_init(rb_pipe_t * p, const rb_config_t * cfg, const rb_xport_ops_t * ops,
                           void *ctx, void *stage, volatile uint64_t * tail_word,
                           volatile void *ring, volatile uint64_t * head_word)
{
    int basic;

    if (!p || rb_config_check(cfg, NULL) || !ops || !ops->write || !ops->credit
        || !stage || !tail_word || !ring)
        return RDMA_ERR_INVAL;
    if (cfg->ring_max > cfg->ring_size
        && (!ops->ring_new || !ops->ring_drop || !ops->stage_new || !ops->ring_move))
        return RDMA_ERR_INVAL;
    basic = cfg->mode == RB_MODE_BASIC;
    if ((basic && (!ops->head || !head_word)) || ((uintptr_t) stage | (uintptr_t) ring) & 7)
        return RDMA_ERR_INVAL;
    memset(p, 0, sizeof(*p));
    p->cfg = *cfg;
    p->tx.cfg = p->rx.cfg = rb_config_fit(cfg, cfg->ring_size);
    p->ops = ops;
    p->ctx = ctx;
    p->tx.stage = stage;
    p->tx.tail_word = tail_word;
    p->tx.seq = 1;
    p->tx.wr_target = (double) p->tx.cfg.sched_c0;
    p->rx.ring = ring;
    p->rx.head_word = head_word;
    p->rx.seq = 1;
    p->tail_kind = cfg->verify ? RB_TAIL_CHECK
        : !cfg->flag_publishes && !cfg->completion_driven ? RB_TAIL_FLAG : RB_TAIL_NONE;
    p->ovh = p->tail_kind ? RB_FRAME_OVERHEAD : RB_HDR;
    p->express = basic ? 0 : cfg->completion_driven ? RB_EXPRESS_LANDED
        : cfg->flag_publishes ? RB_EXPRESS_FLAG : RB_EXPRESS_TAIL;
    p->lazy = cfg->flag_publishes && cfg->ring_max <= cfg->ring_size
        && cfg->ring_size / cfg->chunk_size <= RB_STALE_BITS;
    p->stale_from = (int) (cfg->ring_size / cfg->chunk_size);
    return RDMA_OK;
}

/* ---- send side ---- */

/* Set (set = 1) or clear bits [from, to) of the lazy sender's stale[]. */
static void rb_stale_mark(uint64_t * b, size_t from, size_t to, int set)
{
    for (; from < to; from = (from | 63) + 1) {
        uint64_t m = ~(uint64_t) 0 << (from & 63);

        if (to - (from & ~(size_t) 63) < 64)
            m &= ~(~(uint64_t) 0 << (to & 63));
        b[from / 64] = set ? b[from / 64] | m : b[from / 64] & ~m;
    }
}

/* The lowest chunk of stale[] with its bit set, or the ring's chunk count. */
static size_t rb_stale_first(const rb_pipe_t * p)
{
    size_t i, n = p->tx.cfg.ring_size / p->tx.cfg.chunk_size, words = (n + 63) / 64;

    for (i = 0; i < words && !p->stale[i]; i++)
        ;
    return i < words ? i * 64 + (size_t) __builtin_ctzll(p->stale[i]) : n;
}

/* The ring is empty (every frame consumed) but for a small frame with a
 * payload (not a PAD, which precedes large frames too) about to go out,
 * whose bits are clear: zero the stale words of the hot window, where
 * small frames go (rb_config_t.hot_window), so small messages stop paying
 * for rb_tx_stale until a frame reaches a stale word again.  Only those:
 * each store is to a line the receiver read last, and a 128 KiB message
 * leaves 2,048 stale words (a sweep of them all took 25 us, 4x the
 * message, where CH3's rendezvous sent an RTS after each one). */
static void rb_tx_stale_sweep(rb_pipe_t * p)
{
    size_t i, k = p->tx.cfg.chunk_size, hot = p->tx.cfg.hot_window ? p->tx.cfg.hot_window
        : p->tx.cfg.ring_size, words = (hot / k + 63) / 64;
    uint64_t m;
    uint8_t *w;

    for (i = 0; i < words; i++) {
        m = i + 1 < words || !(hot / k & 63) ? ~(uint64_t) 0
            : ~(~(uint64_t) 0 << (hot / k & 63));
        for (; p->stale[i] & m; p->stale[i] &= p->stale[i] - 1) {
            w = p->tx.stage + (i * 64 + (size_t) __builtin_ctzll(p->stale[i])) * k;
            __atomic_store_n((uint64_t *) w, 0, __ATOMIC_RELAXED);
        }
    }
    p->stale_from = (int) rb_stale_first(p);
}

void rb_tx_stale(rb_pipe_t * p, size_t off, uint64_t wrote, uint64_t span)
{
    size_t k = p->tx.cfg.chunk_size, c = off / k, n = (wrote + k - 1) / k;
    size_t t = rb_ring_off(&p->tx.cfg, p->tx.head + span) / k;

    if (n <= RB_CLEAR_ALL && wrote > p->ovh && p->tx.head == p->tx.tail) {
        rb_stale_mark(p->stale, c, c + n, 0);   /* its words: the receiver's */
        rb_tx_stale_sweep(p);
        if (t < (size_t) p->stale_from)
            return;
    }
    rb_stale_mark(p->stale, c, c + 1, 0);
    rb_stale_mark(p->stale, c + 1, c + n, n > RB_CLEAR_ALL);
    if (n > RB_CLEAR_ALL && c + 1 < (size_t) p->stale_from)
        p->stale_from = (int) (c + 1);
    if (p->stale[t / 64] >> (t & 63) & 1) {
        __atomic_store_n((uint64_t *) (p->tx.stage + t * k), 0, __ATOMIC_RELAXED);
        rb_stale_mark(p->stale, t, t + 1, 0);
    }
}

uint64_t rb_tx_check(rb_pipe_t * p, uint8_t * f, uint64_t flag, uint64_t info, size_t len,
                     int user)
{
    int v = rb_tx_verified(p, len, user);

    flag ^= v ? 1 ^ RB_ALT_VERIFIED : 0;
    *(uint64_t *) (f + RB_HDR + rb_pad8(len)) = rb_check(p->tx.head, flag, info,
                                                         (uint64_t *) (f + RB_HDR),
                                                         v ? rb_pad8(len) / 8 : 0);
    return flag;
}

rdma_status_t rb_tx_commit_check(rb_pipe_t * p, size_t len)
{
    return rb_tx_commit_as(p, len, RB_TX_STAGE);
}

/* rb_tx_window when the window looks full: retire the credited writes.
 * The credit word is read relaxed: the window only bounds the peer's
 * queue, it orders no data. */
int rb_tx_window_retire(rb_pipe_t * p, unsigned n)
{
    unsigned w = p->tx.cfg.max_writes;

    rb_tx_credit(p, __atomic_load_n(p->tx.tail_word, __ATOMIC_RELAXED));
    while (p->tx.win_out != p->tx.win_in
           && (int64_t) (p->tx.credit - p->win_end[p->tx.win_out % RB_WRITES_MAX]) >= 0)
        p->tx.win_out++;
    return p->tx.win_in - p->tx.win_out + n <= w;
}

/* The newest peer tail known: replica or credit word (acquire: the peer
 * cleared its chunk-start words before storing it). */
uint64_t rb_tx_tail_seen(const rb_pipe_t * p)
{
    uint64_t t = __atomic_load_n(p->tx.tail_word, __ATOMIC_ACQUIRE);

    return rb_tail_newer(p, t) ? t : p->tx.tail;
}

/* Write the frames built since the last flush with one transport write,
 * and grow the superpipeline target. */
static rdma_status_t rb_tx_flush(rb_pipe_t * p)
{
    const rb_config_t *c = &p->tx.cfg;
    unsigned frames = p->tx.wr_frames;

    if (!frames)
        return RDMA_OK;
    p->tx.wr_frames = 0;
    p->tx.wr_target = rb_sched_next(p->tx.wr_target, c->sched_q, c->sched_max);
    return rb_tx_write(p, p->tx.wr_off, p->tx.wr_len, p->tx.wr_landed, NULL);
}

/* Complete the frame whose payload is in place and add it to the pending
 * group, which is written once it reaches the superpipeline target (at
 * once without a schedule).  Space was checked by the caller. */
rdma_status_t rb_tx_send(rb_pipe_t * p, int type, size_t len)
{
    size_t off = rb_ring_off(&p->tx.cfg, p->tx.head);
    int rc;

    /* a group is contiguous in the ring: it ends where the ring wraps */
    if (off == 0 && (rc = rb_tx_flush(p)) != RDMA_OK)
        return rc;
    rb_tx_frame(p, type, len, RB_TX_STAGE);
    if (!p->tx.wr_frames++) {
        p->tx.wr_off = off;
        p->tx.wr_landed = 0;
    }
    p->tx.wr_landed += !rb_tx_verified(p, len, 0);
    p->tx.wr_len = off + p->ovh + rb_pad8(len) - p->tx.wr_off;
    return (double) p->tx.wr_len >= p->tx.wr_target ? rb_tx_flush(p) : RDMA_OK;
}

/* Hot window (rb_config_t.hot_window): on an empty ring past the window,
 * a PAD frame over the ring end makes the next frame start at offset 0.
 * The PAD is the last frame of its group, as at any ring end. */
static rdma_status_t rb_tx_rewind(rb_pipe_t * p, uint64_t bytes)
{
    if (!rb_tx_past_hot(p, rb_ring_off(&p->tx.cfg, p->tx.head), bytes) || p->tx.head != p->tx.tail
        || !rb_tx_window(p, 1))
        return RDMA_OK;
    p->stats.rewinds++;
    return rb_tx_send(p, RB_FRAME_PAD, 0);
}

/* rb_pipe_putv past the one-frame case: as many frames as fit. */
static rdma_status_t rb_tx_putv(rb_pipe_t * p, const struct iovec *iov, size_t total, size_t *nbytes)
{
    rb_cursor_t cur = { iov, 0 };
    size_t done = 0, fmax;
    int rc = RDMA_OK, win = 0;

    p->tx.tail = rb_tx_tail_seen(p);
    p->tx.quiet = p->tx.head == p->tx.tail;
    fmax = p->tx.quiet ? p->tx.cfg.quiet_frame : p->tx.cfg.max_frame;  /* fitted: never 0 */
    if (total)
        rc = rb_tx_rewind(p, p->ovh + rb_pad8(total));
    while (done < total && rc == RDMA_OK) {
        /* room: chunk multiples, so a non-zero room holds >= 40 payload
         * bytes; the frame ends at the ring end at the latest */
        size_t off = rb_ring_off(&p->tx.cfg, p->tx.head);
        uint64_t room = rb_tx_room(p);
        size_t len = total - done;

        if (room > p->tx.cfg.ring_size - off)
            room = p->tx.cfg.ring_size - off;
        if (room > fmax)
            room = fmax;
        if (room < p->tx.cfg.chunk_size)
            break;
        /* a frame that opens a write (a group ends where the ring wraps) */
        if ((!p->tx.wr_frames || !off) && (win = !rb_tx_window(p, p->tx.wr_frames ? 2 : 1)))
            break;
        if (len > room - p->ovh)
            len = room - p->ovh;
        rb_cursor_copy(&cur, rb_tx_payload(p, len), len, 1);
        rc = rb_tx_send(p, RB_FRAME_DATA, len);
        done += rc == RDMA_OK ? len : 0;
    }
    if (rc == RDMA_OK)
        rc = rb_tx_flush(p);
    p->stats.window_stalls += win;
    if (done < total && rc == RDMA_OK && !win)
        rb_grow_stalled(p, !done);
    if (done == total)
        p->tx.wr_target = (double) p->tx.cfg.sched_c0;     /* the message is complete */
    *nbytes = done;
    return rc;
}

rdma_status_t rb_pipe_putv(rb_pipe_t * p, const struct iovec *iov, int n, size_t * nbytes)
{
    size_t total;
    int rc;

    if (!p || !nbytes || n < 0 || (n && !iov))
        return RDMA_ERR_INVAL;
    if (p->pend && (rc = rb_grow_step(p)) != RDMA_OK)
        return rc;
    total = rb_iov_total(iov, n);
    return rb_tx_one_fits(p, total) ? rb_tx_one(p, iov, n, total, nbytes)
        : rb_tx_putv(p, iov, total, nbytes);
}

size_t rb_pipe_user_max(const rb_pipe_t * p)
{
    return RB_USER_SEGS * (p->tx.cfg.max_frame - p->ovh);
}

/* Make `span` ring bytes of frames start where they fit: the newest peer
 * tail, a rewind to the hot window, a PAD over the ring end (a frame never
 * wraps; the PAD alone may go out, invisible to the receiver's user).
 * *fits = 1: room for them at tx.head, no group pending. */
static rdma_status_t rb_tx_place(rb_pipe_t * p, uint64_t span, int *fits)
{
    size_t off;
    int rc;

    *fits = 0;
    p->tx.tail = rb_tx_tail_seen(p);
    if (!rb_tx_window(p, 2)) {  /* a PAD's write, then theirs */
        p->stats.window_stalls++;
        return RDMA_OK;
    }
    if ((rc = rb_tx_rewind(p, span)) != RDMA_OK)
        return rc;
    off = rb_ring_off(&p->tx.cfg, p->tx.head);
    if (off + span > p->tx.cfg.ring_size) {
        if (rb_tx_room(p) < p->tx.cfg.ring_size - off)
            goto full;
        if ((rc = rb_tx_send(p, RB_FRAME_PAD, 0)) != RDMA_OK)
            return rc;
    }
    if (rb_tx_room(p) < span)
        goto full;
    *fits = 1;
  full:
    if (!*fits)
        rb_grow_stalled(p, 1);
    return rb_tx_flush(p);      /* a PAD frame may be pending */
}

/* rb_pipe_put_user's frames, placed: the entries but the last copied, the
 * last one's bytes noted per frame as user segments; one write. */
static rdma_status_t rb_tx_user(rb_pipe_t * p, const struct iovec *iov, int n, size_t total,
                                void *handle, size_t *nbytes)
{
    const struct iovec *e = &iov[n - 1];
    size_t fmax = p->tx.cfg.max_frame - p->ovh, hlen = total - e->iov_len, done = 0, end = 0;
    size_t off = rb_ring_off(&p->tx.cfg, p->tx.head), len, h;
    rb_cursor_t cur = { iov, 0 };
    rb_user_t u = {.n = 0,.handle = handle };
    uint8_t *d;
    unsigned j, frames;
    int rc;

    for (frames = 0; done < total; frames++) {
        len = total - done < fmax ? total - done : fmax;
        d = rb_tx_payload(p, len);
        h = done < hlen ? (hlen - done < len ? hlen - done : len) : 0;
        rb_cursor_copy(&cur, d, h, 1);
        if (len > h) {
            u.seg[u.n].at = (size_t) (d - p->tx.stage) + h;
            u.seg[u.n].addr = (const char *) e->iov_base + (done + h - hlen);
            u.seg[u.n++].len = len - h;
        }
        end = rb_tx_frame(p, RB_FRAME_DATA, len, RB_TX_USER) + p->ovh + rb_pad8(len);
        done += len;
    }
    rc = rb_tx_write(p, off, end - off, frames, &u);
    for (j = 0; p->tail_kind == RB_TAIL_FLAG && j < u.n; j++)  /* the mirror, while the NIC sends */
        memcpy(p->tx.stage + u.seg[j].at, u.seg[j].addr, u.seg[j].len);
    p->tx.wr_target = (double) p->tx.cfg.sched_c0; /* the message is complete */
    *nbytes = rc == RDMA_OK ? total : 0;
    return rc;
}

rdma_status_t rb_pipe_put_user(rb_pipe_t * p, const struct iovec *iov, int n, void *handle,
                               size_t *nbytes)
{
    size_t total, fmax, k;
    uint64_t span;
    int rc, fits;

    if (!p || !nbytes || n < 1 || !iov || !handle || !p->ops->write_user
        || p->tx.cfg.flag_publishes)
        return RDMA_ERR_INVAL;
    *nbytes = 0;
    if (p->pend && (rc = rb_grow_step(p)) != RDMA_OK)
        return rc;
    total = rb_iov_total(iov, n);
    fmax = p->tx.cfg.max_frame - p->ovh;
    if (!total || total > rb_pipe_user_max(p))
        return RDMA_ERR_INVAL;
    k = (total - 1) / fmax;     /* full frames before the last */
    span = k * rb_frame_span(p, &p->tx.cfg, 0, RB_FRAME_DATA, fmax)
        + rb_frame_span(p, &p->tx.cfg, 0, RB_FRAME_DATA, total - k * fmax);
    if ((rc = rb_tx_place(p, span, &fits)) != RDMA_OK || !fits)
        return rc;
    return rb_tx_user(p, iov, n, total, handle, nbytes);
}

rdma_status_t rb_pipe_put_ctrl(rb_pipe_t * p, int type, const void *buf, size_t len, int *sent)
{
    int rc;

    if (!p || !sent || type < RB_FRAME_CTRL || type >= RB_FRAME_MOVE || (len && !buf)
        || len > p->tx.cfg.max_frame - RB_FRAME_OVERHEAD)
        return RDMA_ERR_INVAL;
    if (p->pend && (rc = rb_grow_step(p)) != RDMA_OK)
        return rc;
    return rb_tx_ctrl(p, type, buf, len, sent);
}

/* One control frame (any type but PAD), placed and written at once. */
rdma_status_t rb_tx_ctrl(rb_pipe_t * p, int type, const void *buf, size_t len, int *sent)
{
    int rc = rb_tx_place(p, rb_frame_span(p, &p->tx.cfg, 0, type, len), sent);

    if (rc != RDMA_OK || !*sent)
        return rc;
    if (len)
        memcpy(rb_tx_payload(p, len), buf, len);
    rc = rb_tx_send(p, type, len);
    rc = rc == RDMA_OK ? rb_tx_flush(p) : rc;
    *sent = rc == RDMA_OK;
    return rc;
}

size_t rb_pipe_tx_space(const rb_pipe_t * p)
{
    return p->tx.cfg.ring_size - (p->tx.head - rb_tx_tail_seen(p));
}

