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
 * Small ones (vp.rma_bcopy_max, MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX) skip the
 * cache: a put is copied into a bounce slot, registered once for the
 * process, and written from it; a get reads into a slot and is copied out
 * when its read completes, before the owner hears of it.  UCX does the same
 * (bcopy below its zcopy threshold): a copy of a few KiB costs less than
 * a cache lookup and the memory events it drains.  No free slot (they are
 * shared by every connection), or a cap with no room for them: the cache.
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
 * In flight: at most RDMA_VERBS_RMA_OPS operations per connection, as the
 * send queue has room for them beside the frames (rdma_verbs_rma_room), in
 * a FIFO that completions pop.  A connection that fails reports its
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

/* The bounce slots made (once; a refusal stands); 1 if there are. */
static int rdma_verbs_bounce_open(rdma_xport_t * xp)
{
    int i;

    if (xp->bounce_state)
        return xp->bounce_state > 0;
    xp->bounce_state = -1;
    if (rdma_verbs_grow_alloc(xp, &xp->bounce, RDMA_VERBS_RMA_BOUNCE * xp->vp.rma_bcopy_max,
                              IBV_ACCESS_LOCAL_WRITE))
        return 0;
    for (i = 0; i < RDMA_VERBS_RMA_BOUNCE; i++)
        xp->bounce_free[i] = (uint8_t) i;
    xp->bounce_nfree = RDMA_VERBS_RMA_BOUNCE;
    xp->bounce_state = 1;
    return 1;
}

void rdma_verbs_rma_close(rdma_xport_t * xp)
{
    if (xp->bounce_state > 0)
        rdma_verbs_grow_free(xp, &xp->bounce);
    xp->bounce_state = 0;
}

static char *rdma_verbs_bounce_buf(rdma_xport_t * xp, int slot)
{
    return (char *) xp->bounce.buf + (size_t) slot * xp->vp.rma_bcopy_max;
}

/* A slot for an operation of len bytes, -1 if it takes the cache. */
static int rdma_verbs_bounce_get(rdma_xport_t * xp, size_t len)
{
    if (len > xp->vp.rma_bcopy_max || !rdma_verbs_bounce_open(xp) || !xp->bounce_nfree)
        return -1;
    return xp->bounce_free[--xp->bounce_nfree];
}

/* The local side of an operation: a bounce slot (*slot), or a region of
 * the cache (*r), or neither for an inline put; its lkey and address. */
static rdma_status_t rdma_verbs_rma_local(rdma_verbs_conn_t * vc, void *local, size_t len,
                                          int read, int *slot, rcache_region_t ** r,
                                          uint32_t * lkey, uintptr_t * addr)
{
    rdma_xport_t *xp = vc->xp;

    *addr = (uintptr_t) local;
    if (!read && len <= vc->max_inline)
        return RDMA_OK;
    if ((*slot = rdma_verbs_bounce_get(xp, len)) >= 0) {
        *addr = (uintptr_t) rdma_verbs_bounce_buf(xp, *slot);
        if (!read)
            memcpy((void *) *addr, local, len);
        *lkey = xp->bounce.mr->lkey;
        return RDMA_OK;
    }
    if (rdma_verbs_rc_get(read ? &xp->rc_dst : &xp->rc_src, local, len, r, NULL))
        return RDMA_ERR_NOMEM;  /* limits, or memory that cannot be registered */
    *lkey = ((struct ibv_mr *) (*r)->mr)->lkey;
    return RDMA_OK;
}

/* What rdma_verbs_rma_local took, given back. */
static void rdma_verbs_rma_release(rdma_xport_t * xp, int read, int slot, rcache_region_t * r)
{
    if (slot >= 0)
        xp->bounce_free[xp->bounce_nfree++] = (uint8_t) slot;
    if (r)
        rdma_verbs_rc_put(xp, read, r);
}

/* One put (read 0) or get (read 1) started. */
static rdma_status_t rdma_verbs_rma(rdma_verbs_conn_t * vc, void *local, size_t len,
                                    uint64_t raddr, uint64_t key, void *cookie, int read,
                                    int *done)
{
    uint32_t nwr = (uint32_t) ((len + RDMA_VERBS_RMA_CHUNK - 1) / RDMA_VERBS_RMA_CHUNK);
    rcache_region_t *r = NULL;
    uint32_t lkey = 0, t;
    uintptr_t addr;
    int slot = -1;
    rdma_status_t st;

    *done = 0;
    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return RDMA_ERR_PEER;
    if (!rdma_verbs_rma_room(vc, nwr ? nwr : 1))
        return RDMA_ERR_NOMEM;
    if ((st = rdma_verbs_rma_local(vc, local, len, read, &slot, &r, &lkey, &addr)))
        return st;
    if ((st = rdma_verbs_rma_post(vc, addr, lkey, len, raddr, key, read))) {
        rdma_verbs_rma_release(vc->xp, read, slot, r);
        return st;
    }
    t = vc->rma_head++ % RDMA_VERBS_RMA_OPS;
    vc->rma[t].cookie = cookie;
    vc->rma[t].reg = r;
    vc->rma[t].read = read;
    vc->rma[t].slot = slot;
    vc->rma[t].dst = local;
    vc->rma[t].len = (uint32_t) len;
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

    if (st == RDMA_OK && vc->rma[t].read && vc->rma[t].slot >= 0)
        memcpy(vc->rma[t].dst, rdma_verbs_bounce_buf(xp, vc->rma[t].slot), vc->rma[t].len);
    rdma_verbs_rma_release(xp, vc->rma[t].read, vc->rma[t].slot, vc->rma[t].reg);
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
    rdma_verbs_win_expose, rdma_verbs_win_unexpose, rdma_verbs_rma_put, rdma_verbs_rma_get, 0
};
