/*
 * rdma_verbs_rma.c -- the verbs transport: one-sided operations on MPI
 * window memory (rdma_xport_rma_ops_t, rdma_xport.h).
 *
 * Windows are registered through the window cache (rc_win: LOCAL_WRITE,
 * REMOTE_WRITE, REMOTE_READ), under the same pinned-memory account and cap
 * as the zero-copy caches; the rkey goes to the peers (the owner exchanges
 * it).  A put is one RDMA write per RDMA_VERBS_RMA_CHUNK bytes from the
 * caller's buffer (inline when it fits, else registered through the send
 * cache), a get one RDMA read per chunk into a region of the receive cache.
 * Only an operation's last WR is signalled (POST_RMA: its sig_fifo entry is
 * marked SIG_RMA); completions on one RC QP come in order, so that one
 * covers the chunks before it.
 *
 * What a completion means.  A signalled RDMA write completes at the
 * requester once the responder acknowledged it, i.e. once the bytes are in
 * the target's memory (IB spec, RC): from then on any access to that
 * memory, by the target's CPU or another peer's NIC, sees them.  This is
 * what MPI's remote completion asks of a put (flush, unlock, fence, PSCW),
 * and the owner waits for this completion before it tells the target
 * anything about the put.  Nothing else orders the put: a frame posted
 * after it on the same QP may become visible first (the transport never
 * relies on ordering between WQEs, rdma_verbs_data.c), so there is no
 * cheaper signal to wait for.  A read completes once its bytes are in our
 * memory.
 *
 * In flight: at most RDMA_VERBS_RMA_OPS operations per connection (the
 * send queue has room for them beside the frames, rdma_verbs_depths), in a
 * FIFO that completions pop.  A connection that fails reports its
 * operations in flight from progress() (rdma_verbs_rma_fail), never from
 * inside put/get, so that the owner hears of each exactly once.
 *
 * Threading: main only ([main] fields of rdma_verbs_conn_t); the caches
 * under rc_lock as everywhere.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* ---- windows ---- */

static rdma_status_t rdma_verbs_win_expose(rdma_xport_t * xp, void *addr, size_t len,
                                           uint64_t * key, void **handle)
{
    rcache_region_t *r;
    rdma_status_t st = rdma_verbs_rc_get(&xp->rc_win, addr, len, &r, NULL);

    if (st)
        return st;
    *key = r->key;
    *handle = r;
    return RDMA_OK;
}

static void rdma_verbs_win_unexpose(rdma_xport_t * xp, void *handle)
{
    pthread_mutex_lock(&xp->rc_lock);
    rcache_put(xp->rc_win.rc, handle);
    pthread_mutex_unlock(&xp->rc_lock);
}

/* ---- operations ---- */

/* Room for an operation of nwr WRs: a FIFO slot and send-queue slots
 * beside the reserve; never waits (the owner then sends it as a message). */
static int rdma_verbs_rma_room(const rdma_verbs_conn_t * vc, uint32_t nwr)
{
    return vc->rma_head - vc->rma_tail < RDMA_VERBS_RMA_OPS
        && vc->sq_free > RDMA_VERBS_SQ_RESERVE + nwr;
}

/* Post len bytes between local (lkey) and raddr in chunks, reads if read;
 * the last chunk is signalled and marked SIG_RMA. */
static rdma_status_t rdma_verbs_rma_post(rdma_verbs_conn_t * vc, uintptr_t local, uint32_t lkey,
                                         size_t len, uint64_t raddr, uint64_t key, int read)
{
    size_t off = 0;

    do {
        size_t k = len - off < RDMA_VERBS_RMA_CHUNK ? len - off : RDMA_VERBS_RMA_CHUNK;
        int last = off + k == len;

        if (rdma_verbs_post(vc, local + off, lkey, (uint32_t) k, raddr + off, (uint32_t) key,
                            read ? -1 : 0, RDMA_VERBS_POST_LEAVE_RESERVE
                            | (last ? RDMA_VERBS_POST_RMA : 0)))
            return RDMA_ERR_PEER;
        off += k;
    } while (off < len);
    return RDMA_OK;
}

/* One put (read 0) or get (read 1) started; k: the cache of r (0 send,
 * 1 receive), r NULL for an inline write. */
static rdma_status_t rdma_verbs_rma(rdma_verbs_conn_t * vc, void *local, size_t len,
                                    uint64_t raddr, uint64_t key, void *cookie, int read,
                                    int *done)
{
    rdma_xport_t *xp = vc->xp;
    uint32_t nwr = (uint32_t) ((len + RDMA_VERBS_RMA_CHUNK - 1) / RDMA_VERBS_RMA_CHUNK);
    rcache_region_t *r = NULL;
    uint32_t lkey = 0, t;
    rdma_status_t st;

    *done = 0;
    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return RDMA_ERR_PEER;
    if (!rdma_verbs_rma_room(vc, nwr ? nwr : 1))
        return RDMA_ERR_NOMEM;
    if (read || len > vc->max_inline) {
        if ((st = rdma_verbs_rc_get(read ? &xp->rc_dst : &xp->rc_src, local, len, &r, NULL)))
            return RDMA_ERR_NOMEM;      /* limits, or memory that cannot be registered */
        lkey = ((struct ibv_mr *) r->mr)->lkey;
    }
    if ((st = rdma_verbs_rma_post(vc, (uintptr_t) local, lkey, len, raddr, key, read))) {
        if (r)
            rdma_verbs_rc_put(xp, read, r);
        return st;
    }
    t = vc->rma_head++ % RDMA_VERBS_RMA_OPS;
    vc->rma[t].cookie = cookie;
    vc->rma[t].reg = r;
    vc->rma[t].read = read;
    return RDMA_OK;
}

static rdma_status_t rdma_verbs_rma_put(void *ctx, const void *src, size_t len, uint64_t raddr,
                                        uint64_t key, void *cookie, int *done)
{
    return rdma_verbs_rma(ctx, (void *) src, len, raddr, key, cookie, 0, done);
}

static rdma_status_t rdma_verbs_rma_get(void *ctx, void *dst, size_t len, uint64_t raddr,
                                        uint64_t key, void *cookie, int *done)
{
    return rdma_verbs_rma(ctx, dst, len, raddr, key, cookie, 1, done);
}

/* The oldest operation in flight on vc finished with st. */
static void rdma_verbs_rma_pop(rdma_verbs_conn_t * vc, rdma_status_t st)
{
    uint32_t t = vc->rma_tail++ % RDMA_VERBS_RMA_OPS;
    rdma_xport_t *xp = vc->xp;

    if (vc->rma[t].reg)
        rdma_verbs_rc_put(xp, vc->rma[t].read, vc->rma[t].reg);
    xp->prm.ev.rma_done(xp->prm.ev.arg, vc->c, vc->rma[t].cookie, st);
}

/* A completion marked SIG_RMA. */
void rdma_verbs_rma_done(rdma_verbs_conn_t * vc)
{
    rdma_verbs_rma_pop(vc, RDMA_OK);
}

/* vc is DEAD (or closing): every operation in flight failed. */
void rdma_verbs_rma_fail(rdma_verbs_conn_t * vc)
{
    while (vc->rma_tail != vc->rma_head)
        rdma_verbs_rma_pop(vc, RDMA_ERR_PEER);
}

const rdma_xport_rma_ops_t rdma_verbs_rma_ops = {
    rdma_verbs_win_expose, rdma_verbs_win_unexpose, rdma_verbs_rma_put, rdma_verbs_rma_get
};
