/*
 * zc.c -- zero-copy rendezvous over rb_pipe control frames (see zc.h).
 */
#include <stdint.h>
#include <string.h>
#include "zc.h"

enum { ZC_ENTRY_WAIT = 0, ZC_ENTRY_TAKEN, ZC_ENTRY_COPY, ZC_ENTRY_PART };  /* zc_tx_entry */
/* FIN status: BUSY = refused for now (the receiver's registration limits):
 * the sender backs off (zc.h) instead of giving up for good. */
enum { ZC_FIN_PULLED = 0, ZC_FIN_REFUSED = 1, ZC_FIN_BUSY = 2 };
enum { ZC_IOV_MAX = 64 };

/* Wire formats (both ends share byte order: homogeneous jobs). */
typedef struct zc_req {
    uint64_t addr, len, key;
    uint32_t id, pad;
} zc_req_t;

typedef struct zc_fin {         /* FIN and PUSHED */
    uint32_t id, status;
    uint64_t done;              /* FIN refused: bytes pulled before the
                                 * refusal, the rest comes through the ring */
} zc_fin_t;

typedef struct zc_push {
    uint32_t id, pad;
    uint64_t off, len, raddr;
} zc_push_t;

static size_t zc_min(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* dst = iov minus its first skip bytes, at most cap bytes and max entries. */
static int zc_iov_view(const struct iovec *iov, int n, size_t skip, size_t cap,
                       struct iovec *dst, int max)
{
    int i, m = 0;

    for (i = 0; i < n && m < max && cap > 0; i++) {
        size_t len = iov[i].iov_len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        dst[m].iov_base = (char *) iov[i].iov_base + skip;
        dst[m].iov_len = zc_min(len - skip, cap);
        cap -= dst[m++].iov_len;
        skip = 0;
    }
    return m;
}

static unsigned zc_log2(size_t len)
{
    unsigned k = 0;

    while ((len >>= 1) != 0 && k < ZC_LOG2_MAX - 1)
        k++;
    return k;
}

void zc_init(zc_conn_t * z, const zc_config_t * cfg, const zc_ops_t * ops, void *ctx,
             rb_pipe_t * pipe)
{
    memset(z, 0, sizeof(*z));
    z->cfg = *cfg;
    z->ops = ops;
    z->ctx = ctx;
    z->pipe = pipe;
    z->put_small_max = cfg->eager_min && cfg->eager_min < cfg->threshold ? cfg->eager_min
        : cfg->threshold;
}

/* Send the FIN or PUSHED that *due says is owed, if the ring has room. */
static rdma_status_t zc_ctrl_send(zc_conn_t * z, int type, uint32_t id, int status, size_t done, int *due)
{
    zc_fin_t m = { id, (uint32_t) status, done };
    int sent = 0;
    rdma_status_t rc;

    if (!*due)
        return RDMA_OK;
    rc = rb_pipe_put_ctrl(z->pipe, type, &m, sizeof(m), &sent);
    *due = !sent;
    return rc;
}

static rdma_status_t zc_ctrl_flush(zc_conn_t * z)
{
    rdma_status_t rc;

    if (!z->tx.pushed_due && !z->rx.fin_due)
        return RDMA_OK;         /* the common case, on every put and get */
    rc = zc_ctrl_send(z, ZC_FRAME_PUSHED, z->tx.id, z->tx.pushed_status, 0, &z->tx.pushed_due);
    return rc ? rc : zc_ctrl_send(z, ZC_FRAME_FIN, z->rx.fin_id, z->rx.fin_status,
                                  z->rx.fin_done, &z->rx.fin_due);
}

/* ------------------------------------------------------------ sender */

static void zc_copy_note(zc_conn_t * z, const struct iovec *e)
{
    z->copy_end = (const char *) e->iov_base + e->iov_len;
    z->stats.copy_msgs++;
    z->stats.copy_bytes += e->iov_len;
    z->stats.copy_by_log2[zc_log2(e->iov_len)]++;
}

/* Does entry e go zero-copy?  Decided once per entry: the rest of an entry
 * that the ring accepted in part ends at copy_end and stays on the ring. */
static int zc_candidate(zc_conn_t * z, const struct iovec *e)
{
    if (z->tx.state != ZC_TX_IDLE)
        return e->iov_base == z->tx.addr && e->iov_len == z->tx.len;
    if (e->iov_len < z->cfg.threshold || (const char *) e->iov_base + e->iov_len == z->copy_end)
        return 0;
    if (z->keep) {
        zc_copy_note(z, e);
        return 0;
    }
    if (!z->ops || z->cfg.mode == ZC_MODE_COPY || z->refused || z->backoff) {
        z->backoff -= z->backoff > 0;
        zc_copy_note(z, e);
        return 0;
    }
    return 1;
}

static void zc_auto_note(zc_conn_t * z, int hit)
{
    if (hit)
        z->stats.hits++;
    else
        z->stats.misses++;
    if (z->cfg.mode != ZC_MODE_AUTO)
        return;
    z->win_hits += hit != 0;
    if (++z->win_n < ZC_AUTO_WINDOW)
        return;
    if (z->win_hits * 4 < ZC_AUTO_WINDOW)
        z->backoff = ZC_AUTO_BACKOFF;
    z->win_n = z->win_hits = 0;
}

/* Advance the rendezvous of candidate e, *done = ZC_ENTRY_TAKEN when FIN
 * ok arrived (e is accepted), _COPY when e must take the copy path after
 * all, _PART when the receiver pulled tx.part bytes of it and refused the
 * rest (those are accepted, the rest takes the copy path), else _WAIT. */
static rdma_status_t zc_tx_entry(zc_conn_t * z, const struct iovec *e, int *done)
{
    zc_req_t req = { (uintptr_t) e->iov_base, e->iov_len, 0, z->tx.id + 1, 0 };
    void *handle;
    int hit = 0, sent = 0;
    rdma_status_t rc;

    *done = ZC_ENTRY_WAIT;
    if (z->tx.state == ZC_TX_WAIT)
        return RDMA_OK;
    if (z->tx.state == ZC_TX_PART) {
        z->tx.state = ZC_TX_IDLE;
        z->stats.zc_bytes += z->tx.part;
        *done = ZC_ENTRY_PART;
        return RDMA_OK;
    }
    if (z->tx.state == ZC_TX_DONE) {
        z->ops->unexpose(z->ctx, z->tx.handle);
        z->tx.state = ZC_TX_IDLE;
        z->stats.zc_msgs++;
        z->stats.zc_bytes += e->iov_len;
        z->stats.zc_by_log2[zc_log2(e->iov_len)]++;
        *done = ZC_ENTRY_TAKEN;
        return RDMA_OK;
    }
    if (z->ops->expose(z->ctx, e->iov_base, e->iov_len, &req.key, &handle, &hit)) {
        z->backoff = ZC_AUTO_BACKOFF;
        zc_copy_note(z, e);
        *done = ZC_ENTRY_COPY;
        return RDMA_OK;
    }
    rc = rb_pipe_put_ctrl(z->pipe, ZC_FRAME_REQ, &req, sizeof(req), &sent);
    if (rc != RDMA_OK || !sent) {
        z->ops->unexpose(z->ctx, handle);       /* no room: again later */
        return rc;
    }
    zc_auto_note(z, hit);
    z->tx.addr = e->iov_base;
    z->tx.len = e->iov_len;
    z->tx.handle = handle;
    z->tx.id = req.id;
    z->tx.state = ZC_TX_WAIT;
    return RDMA_OK;
}

/* Seed 001: the run iov[0..n) ends in an entry e that the transport holds
 * as a frequent buffer: all of it goes in one write, e from user memory.
 * *got = the bytes before e (e is accepted at zc_sent); *held = 0: not
 * eligible, copy the run.  Only on an idle pipe (every frame consumed and
 * credited, as in a ping-pong): e holds up the caller's next message until
 * its write completes, which a stream of sends must not wait for. */
static rdma_status_t zc_eager_put(zc_conn_t * z, const struct iovec *iov, int n, size_t run, size_t *got,
                                  int *held)
{
    const struct iovec *e = &iov[n - 1];
    void *h;
    rdma_status_t rc;

    *got = 0;
    *held = 0;
    if (e->iov_len < z->cfg.eager_min || n < 2 || run == e->iov_len
        || run > rb_pipe_user_max(z->pipe) || !z->ops || !z->ops->hold
        || rb_pipe_tx_space(z->pipe) < z->pipe->tx.cfg.ring_size
        || z->ops->hold(z->ctx, e->iov_base, e->iov_len, &h))
        return RDMA_OK;
    *held = 1;
    rc = rb_pipe_put_user(z->pipe, iov, n, h, got);
    if (rc != RDMA_OK || !*got) {       /* no room: again later */
        z->ops->unexpose(z->ctx, h);
        *got = 0;
        return rc;
    }
    *got = run - e->iov_len;
    z->eager.addr = e->iov_base;
    z->eager.len = e->iov_len;
    z->eager.handle = h;
    z->eager.state = ZC_EAGER_WAIT;
    return RDMA_OK;
}

void zc_sent(zc_conn_t * z)
{
    if (z->eager.state == ZC_EAGER_WAIT)
        z->eager.state = ZC_EAGER_DONE;
}

/* The entry zc_eager_put sent is iov[0] until its write completed: then
 * it is accepted (*skip = 1, its bytes in *nbytes) and released. */
static rdma_status_t zc_eager_accept(zc_conn_t * z, const struct iovec *iov, int n, size_t *nbytes,
                                     int *skip)
{
    *skip = 0;
    if (n < 1 || iov[0].iov_base != z->eager.addr || iov[0].iov_len != z->eager.len)
        return RDMA_ERR_PROTO;
    if (z->eager.state == ZC_EAGER_WAIT)
        return RDMA_OK;
    z->ops->unexpose(z->ctx, z->eager.handle);
    z->eager.state = ZC_EAGER_IDLE;
    z->stats.eager_zc++;
    *nbytes += iov[0].iov_len;
    *skip = 1;
    return RDMA_OK;
}

rdma_status_t zc_putv(zc_conn_t * z, const struct iovec *iov, int n, size_t *nbytes)
{
    size_t got, run;
    int i = 0, k, done, held;
    rdma_status_t rc = zc_ctrl_flush(z);

    *nbytes = 0;
    if (rc == RDMA_OK && z->eager.state != ZC_EAGER_IDLE
        && ((rc = zc_eager_accept(z, iov, n, nbytes, &i)) != RDMA_OK || !i))
        return rc;
    while (rc == RDMA_OK && i < n) {
        for (k = i, run = 0; k < n && !zc_candidate(z, &iov[k]); k++)
            run += iov[k].iov_len;
        if (k > i) {
            held = 0;
            if (k == n && z->cfg.eager_min)     /* shm: 0, one test per put */
                rc = zc_eager_put(z, iov + i, k - i, run, &got, &held);
            if (rc == RDMA_OK && !held)
                rc = rb_pipe_putv(z->pipe, iov + i, k - i, &got);
            *nbytes += got;
            if (rc != RDMA_OK || got < run)
                break;
            z->copy_end = NULL; /* every copied entry is complete */
        }
        if (k == n)
            break;
        rc = zc_tx_entry(z, &iov[k], &done);
        if (done == ZC_ENTRY_PART)
            *nbytes += z->tx.part;      /* CH3 offers the rest again: ring */
        if (done == ZC_ENTRY_WAIT || done == ZC_ENTRY_PART)
            break;
        if (done == ZC_ENTRY_TAKEN)
            *nbytes += iov[k].iov_len;
        i = done == ZC_ENTRY_TAKEN ? k + 1 : k;
    }
    return rc;
}

/* FIN for our REQ: ok -> the entry is accepted by the next zc_putv;
 * refused -> unexpose; the next zc_putv accepts the fin->done bytes the
 * receiver pulled (none if it could pull nothing), the rest of the entry
 * and later ones go through the ring. */
static rdma_status_t zc_tx_fin(zc_conn_t * z, const zc_fin_t * fin)
{
    if (z->tx.state != ZC_TX_WAIT || fin->id != z->tx.id || fin->status > ZC_FIN_BUSY
        || fin->done >= z->tx.len)
        return RDMA_ERR_PROTO;
    if (fin->status == ZC_FIN_PULLED) {
        z->tx.state = ZC_TX_DONE;
        return RDMA_OK;
    }
    z->ops->unexpose(z->ctx, z->tx.handle);
    z->tx.state = fin->done ? ZC_TX_PART : ZC_TX_IDLE;
    z->tx.part = fin->done;
    if (fin->status == ZC_FIN_BUSY)
        z->backoff = ZC_AUTO_BACKOFF;
    else
        z->refused = 1;
    z->stats.refused_rx++;
    return RDMA_OK;
}

/* PUSH for our REQ: write the asked part into the receiver's memory
 * (split copy), then answer PUSHED. */
static rdma_status_t zc_tx_push(zc_conn_t * z, const zc_push_t * m)
{
    if (z->tx.state != ZC_TX_WAIT || m->id != z->tx.id || m->off > z->tx.len
        || m->len > z->tx.len - m->off)
        return RDMA_ERR_PROTO;
    z->tx.pushed_status = ZC_FIN_REFUSED;
    if (z->ops->push && !z->ops->push(z->ctx, (const char *) z->tx.addr + m->off, m->len, m->raddr)) {
        z->tx.pushed_status = ZC_FIN_PULLED;
        z->stats.pushed_bytes += m->len;
    }
    z->tx.pushed_due = 1;
    return zc_ctrl_flush(z);
}

/* ---------------------------------------------------------- receiver */

void zc_pulled(zc_conn_t * z, size_t bytes)
{
    z->rx.done += bytes;
}

static rdma_status_t zc_rx_finish(zc_conn_t * z, int status)
{
    z->rx.active = 0;
    z->rx.fin_id = z->rx.id;
    z->rx.fin_status = status;
    z->rx.fin_done = status == ZC_FIN_PULLED ? 0 : z->rx.returned;
    z->rx.fin_due = 1;
    if (status == ZC_FIN_PULLED) {
        z->stats.pulled_msgs++;
        z->stats.pulled_bytes += z->rx.len;
    } else {
        z->stats.refused_tx++;
        z->stats.pulled_bytes += z->rx.fin_done;
    }
    return zc_ctrl_flush(z);
}

static rdma_status_t zc_rx_start(zc_conn_t * z, const zc_req_t * req)
{
    if (z->rx.fin_due || z->rx.push_wait || req->len == 0)
        return RDMA_ERR_PROTO;    /* the peer sent a REQ before our FIN or PUSHED */
    memset(&z->rx, 0, sizeof(z->rx));
    z->rx.raddr = req->addr;
    z->rx.key = req->key;
    z->rx.len = req->len;
    z->rx.id = req->id;
    z->rx.pull_end = req->len;
    z->rx.active = 1;
    return z->ops ? RDMA_OK : zc_rx_finish(z, ZC_FIN_REFUSED);
}

/* Before the first pull of a large REQ whose destination is one range
 * (dst, the caller's iov from the REQ's first byte): expose the second
 * half to the sender (it writes there), ask it to push that half, and
 * pull only the first. */
static rdma_status_t zc_rx_split(zc_conn_t * z, const struct iovec *dst)
{
    size_t h = z->rx.len / 2 & ~(size_t) 4095;
    zc_push_t m = { z->rx.id, 0, h, z->rx.len - h, (uintptr_t) dst->iov_base + h };
    uint64_t key;
    int sent = 0, hit;
    rdma_status_t rc;

    if (!z->cfg.split_min || z->rx.len < z->cfg.split_min || !z->ops->push || !h
        || dst->iov_len < z->rx.len
        || z->ops->expose(z->ctx, (const char *) dst->iov_base + h, z->rx.len - h, &key,
                          &z->rx.push_handle, &hit))
        return RDMA_OK;
    rc = rb_pipe_put_ctrl(z->pipe, ZC_FRAME_PUSH, &m, sizeof(m), &sent);
    if (rc == RDMA_OK && sent) {
        z->rx.pull_end = z->rx.split_at = h;
        z->rx.push_wait = 1;
        z->stats.split_msgs++;
    } else {
        z->ops->unexpose(z->ctx, z->rx.push_handle);
    }
    return rc;
}

/* PUSHED for the REQ we serve: ok -> the second half is in, but it counts
 * (in done and posted) only once our own pulls really reached split_at:
 * they may still be short (zc_rx_serve); refused -> pull it too.  It may
 * come after we refused the REQ (our pull was refused after the PUSH). */
static rdma_status_t zc_rx_pushed(zc_conn_t * z, const zc_fin_t * m)
{
    if (!z->rx.push_wait || m->id != z->rx.id || m->status > ZC_FIN_REFUSED)
        return RDMA_ERR_PROTO;
    z->rx.push_wait = 0;
    z->ops->unexpose(z->ctx, z->rx.push_handle);
    if (!z->rx.active)
        return RDMA_OK;           /* we refused the REQ meanwhile (no CMA) */
    if (m->status == ZC_FIN_PULLED)
        z->rx.pushed = z->rx.len - z->rx.split_at;
    else
        z->rx.pull_end = z->rx.len;
    return RDMA_OK;
}

/* Hand completed bytes to the caller (*got), finish, or pull more into
 * the part of iov that no pull covers yet. */
static rdma_status_t zc_rx_serve(zc_conn_t * z, const struct iovec *iov, int n, size_t *got)
{
    struct iovec dst[ZC_IOV_MAX];
    size_t avail = rb_iov_total(iov, n), busy, want, posted = 0;
    int m;
    rdma_status_t rc;

    if (z->rx.pushed && z->rx.done == z->rx.split_at) {
        /* pulls complete in order and stop at split_at: posted == done */
        z->rx.done += z->rx.pushed;     /* done stays a prefix */
        z->rx.posted = z->rx.pull_end = z->rx.len;
        z->rx.pushed = 0;
    }
    *got = zc_min(z->rx.done - z->rx.returned, avail);
    z->rx.returned += *got;
    if (z->rx.returned == z->rx.len)
        return zc_rx_finish(z, ZC_FIN_PULLED);
    if (z->rx.posted == 0 && n > 0 && (rc = zc_rx_split(z, iov)) != RDMA_OK)
        return rc;
    busy = *got + (z->rx.posted - z->rx.returned);
    want = avail > busy ? zc_min(z->rx.pull_end - z->rx.posted, avail - busy) : 0;
    if (want == 0)
        return RDMA_OK;
    m = zc_iov_view(iov, n, busy, want, dst, ZC_IOV_MAX);
    rc = z->ops->pull(z->ctx, dst, m, z->rx.raddr + z->rx.posted, z->rx.key,
                      rb_iov_total(dst, m), &posted);
    /* refused, or not now (verbs: the next window cannot be pinned under
     * the limits): once nothing is in flight and the caller has every
     * pulled byte, the rest comes through the ring (FIN says from where) */
    if (rc == RDMA_ERR_REFUSED || rc == RDMA_ERR_NOMEM)
        return z->rx.posted == z->rx.returned ?
            zc_rx_finish(z, rc == RDMA_ERR_NOMEM ? ZC_FIN_BUSY : ZC_FIN_REFUSED) : RDMA_OK;
    if (rc != RDMA_OK)
        return RDMA_ERR_XPORT;
    z->rx.posted += posted;
    return RDMA_OK;
}

rdma_status_t zc_bye(zc_conn_t * z, int *sent)
{
    const uint64_t none = 0;

    return rb_pipe_put_ctrl(z->pipe, ZC_FRAME_BYE, &none, sizeof(none), sent);
}

/* The frame at the head of the stream, if it is ours: REQ, FIN, PUSH,
 * PUSHED or BYE. */
static rdma_status_t zc_ctrl_take(zc_conn_t * z, int *taken)
{
    const void *buf;
    size_t len;
    int type;
    rb_peek_t seen = rb_pipe_peek(z->pipe, &type, &buf, &len);
    rdma_status_t rc;

    *taken = 0;
    if (seen != RB_PEEK_READY || type == RB_FRAME_DATA)
        return seen < 0 ? (rdma_status_t) seen : RDMA_OK;
    if (type == ZC_FRAME_REQ && len == sizeof(zc_req_t)) {
        zc_req_t req;
        memcpy(&req, buf, sizeof(req));
        rc = rb_pipe_consume(z->pipe, len);
        rc = rc == RDMA_OK ? zc_rx_start(z, &req) : rc;
    } else if ((type == ZC_FRAME_FIN || type == ZC_FRAME_PUSHED) && len == sizeof(zc_fin_t)) {
        zc_fin_t fin;
        memcpy(&fin, buf, sizeof(fin));
        rc = rb_pipe_consume(z->pipe, len);
        rc = rc ? rc : type == ZC_FRAME_FIN ? zc_tx_fin(z, &fin) : zc_rx_pushed(z, &fin);
    } else if (type == ZC_FRAME_BYE && len == sizeof(uint64_t)) {
        rc = rb_pipe_consume(z->pipe, len);
        z->bye_rx = 1;
    } else if (type == ZC_FRAME_PUSH && len == sizeof(zc_push_t)) {
        zc_push_t push;
        memcpy(&push, buf, sizeof(push));
        rc = rb_pipe_consume(z->pipe, len);
        rc = rc == RDMA_OK ? zc_tx_push(z, &push) : rc;
    } else {
        return RDMA_ERR_PROTO;
    }
    *taken = 1;
    return rc;
}

static rdma_status_t zc_getv_more(zc_conn_t * z, const struct iovec *iov, int n, size_t *nbytes)
{
    struct iovec view[ZC_IOV_MAX];
    size_t got, done0;
    int m, taken;
    rdma_status_t rc = zc_ctrl_flush(z);

    while (rc == RDMA_OK) {
        m = zc_iov_view(iov, n, *nbytes, SIZE_MAX, view, ZC_IOV_MAX);
        if (z->rx.active) {
            done0 = z->rx.done;
            taken = 0;
            rc = zc_rx_serve(z, view, m, &got);
            *nbytes += got;
            /* only control frames can follow the REQ: PUSHED, or ours */
            if (rc == RDMA_OK && z->rx.push_wait)
                rc = zc_ctrl_take(z, &taken);
            if (z->rx.active && got == 0 && z->rx.done == done0 && !taken)
                break;          /* pulls or the push in flight, or iov full */
            continue;
        }
        got = 0;
        rc = m > 0 ? rb_pipe_getv(z->pipe, view, m, &got) : RDMA_OK;
        *nbytes += got;
        taken = 0;
        /* a control frame stopped getv, or there is no iov to fill (FINs
         * are consumed then too); else no second poll on the hot path */
        if (rc == RDMA_OK && (m == 0 || rb_pipe_rx_at_ctrl(z->pipe)))
            rc = zc_ctrl_take(z, &taken);
        if (!taken)
            break;
    }
    return rc;
}

/* The idle poll returns at once: no rendezvous pending, nothing landed. */
rdma_status_t zc_getv(zc_conn_t * z, const struct iovec *iov, int n, size_t *nbytes)
{
    *nbytes = 0;
    if (!z->rx.active && !z->rx.fin_due && !rb_pipe_rx_maybe(z->pipe))
        return RDMA_OK;
    return zc_getv_more(z, iov, n, nbytes);
}
