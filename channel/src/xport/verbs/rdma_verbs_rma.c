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
 * Atomics (rdma_xport_amo_t) are one 8-byte FETCH_AND_ADD or CMP_AND_SWP
 * WR per word, where the device has them (xp->amo: then windows and QPs
 * allow REMOTE_ATOMIC); the words found land in a bounce slot, copied out
 * at completion as a bounced get's.  The device's atomics are atomic with
 * each other only (IBV_ATOMIC_HCA), not with the CPU's accesses, so the
 * owner's accumulates to its own memory take the device too, through a QP
 * connected to itself (amo_qp, its own CQ polled by the caller: the call
 * returns when they are done).
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
    if (xp->amo_qp)
        ibv_destroy_qp(xp->amo_qp);
    if (xp->amo_cq)
        ibv_destroy_cq(xp->amo_cq);
    rdma_verbs_mem_free(&xp->amo_mem);
    xp->amo_qp = NULL;
    xp->amo_cq = NULL;
    xp->amo_state = 0;
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

    if (st == RDMA_OK && vc->rma[t].read && vc->rma[t].slot >= 0 && vc->rma[t].dst)
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

/* ---- atomics ---- */

/* Atomics of up to RDMA_XP_AMO_MAX words possible: the device has them and
 * a bounce slot holds their words (ops.amo_ok). */
static int rdma_verbs_amo_ok(rdma_xport_t * xp)
{
    return xp->amo && xp->vp.rma_bcopy_max >= 8 * RDMA_XP_AMO_MAX && rdma_verbs_bounce_open(xp);
}

/* Word i of a as a WR on local (lkey) and raddr. */
static void rdma_verbs_amo_wr(const rdma_xport_amo_t * a, int i, struct ibv_sge *sg,
                              uintptr_t local, uint32_t lkey, uint64_t raddr, uint64_t key,
                              struct ibv_send_wr *wr)
{
    *sg = (struct ibv_sge) {.addr = local + 8 * (unsigned) i, .length = 8, .lkey = lkey };
    *wr = (struct ibv_send_wr) {
        .sg_list = sg, .num_sge = 1,
        .opcode = a->cas ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD,
        .wr.atomic = {.remote_addr = raddr + 8 * (unsigned) i, .rkey = (uint32_t) key,
                      .compare_add = a->cas ? a->cmp : a->add[i], .swap = a->add[0]}
    };
}

/* vc has room for an atomic of nwr WRs, and a bounce slot is free. */
static int rdma_verbs_amo_room(const rdma_verbs_conn_t * vc, uint32_t nwr)
{
    return rdma_verbs_rma_room(vc, nwr) && vc->xp->bounce_nfree;
}

static rdma_status_t rdma_verbs_rma_atomic(void *ctx, const rdma_xport_amo_t * a,
                                           uint64_t raddr, uint64_t key, void *cookie)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_xport_t *xp = vc->xp;
    struct ibv_send_wr wr;
    struct ibv_sge sg;
    rdma_status_t st;
    uint32_t t;
    int i, slot;

    if (!rdma_verbs_amo_ok(xp) || a->n < 1 || a->n > RDMA_XP_AMO_MAX || (a->cas && a->n != 1))
        return RDMA_ERR_REFUSED;
    if ((st = rdma_verbs_wait_room(vc, rdma_verbs_amo_room, (uint32_t) a->n,
                                   "one-sided operations")))
        return st;
    slot = xp->bounce_free[--xp->bounce_nfree];
    for (i = 0; i < a->n; i++) {
        rdma_verbs_amo_wr(a, i, &sg, (uintptr_t) rdma_verbs_bounce_buf(xp, slot),
                          xp->bounce.mr->lkey, raddr, key, &wr);
        wr.wr_id = vc->token;   /* its completion finds vc by it */
        if (rdma_verbs_post_wr(vc, &wr, RDMA_VERBS_POST_LEAVE_RESERVE
                               | (i == a->n - 1 ? RDMA_VERBS_POST_RMA : 0))) {
            rdma_verbs_rma_release(xp, 1, slot, NULL);
            return RDMA_ERR_PEER;
        }
    }
    t = vc->rma_head++ % RDMA_VERBS_RMA_OPS;
    vc->rma[t] = (__typeof__(vc->rma[t])) {.cookie = cookie, .read = 1, .slot = slot,
        .dst = a->result, .len = (uint32_t) (8 * a->n)};
    return RDMA_OK;
}

/* The loopback QP connected to itself; 0 or errno. */
static int rdma_verbs_amo_loop_connect(rdma_xport_t * xp)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = xp->port,
        .qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC
    };
    rdma_verbs_peer_t me = {.lid = xp->pattr.lid };

    memcpy(me.gid, xp->gid.raw, sizeof(me.gid));
    if (ibv_modify_qp(xp->amo_qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT
                      | IBV_QP_ACCESS_FLAGS))
        return errno;
    a = (struct ibv_qp_attr) {.qp_state = IBV_QPS_RTR, .path_mtu = xp->pattr.active_mtu,
        .dest_qp_num = xp->amo_qp->qp_num, .max_dest_rd_atomic = 1, .min_rnr_timer = 12};
    rdma_verbs_path_of(xp, &me, &a.ah_attr);
    if (ibv_modify_qp(xp->amo_qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU
                      | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC
                      | IBV_QP_MIN_RNR_TIMER))
        return errno;
    a = (struct ibv_qp_attr) {.qp_state = IBV_QPS_RTS, .timeout = (uint8_t) xp->qp_timeout,
        .retry_cnt = RDMA_VERBS_RETRY_CNT, .rnr_retry = 7, .max_rd_atomic = 1};
    return ibv_modify_qp(xp->amo_qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT
                         | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) ? errno : 0;
}

/* The loopback QP made (once; a refusal stands, said in err); 1 if there
 * is one. */
static int rdma_verbs_amo_loop(rdma_xport_t * xp)
{
    struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = RDMA_XP_AMO_MAX, .max_recv_wr = 1, .max_send_sge = 1,
                .max_recv_sge = 1}
    };
    int e = 0;

    if (xp->amo_state)
        return xp->amo_state > 0;
    xp->amo_state = -1;
    if (!xp->amo)
        e = ENOTSUP;
    else if (rdma_verbs_mem_alloc(xp, &xp->amo_mem, 8 * RDMA_XP_AMO_MAX, IBV_ACCESS_LOCAL_WRITE)
             || !(xp->amo_cq = ibv_create_cq(xp->ctx, RDMA_XP_AMO_MAX, NULL, NULL, 0)))
        e = errno ? errno : ENOMEM;
    else {
        ia.send_cq = ia.recv_cq = xp->amo_cq;
        e = !(xp->amo_qp = ibv_create_qp(xp->pd, &ia)) ? errno : rdma_verbs_amo_loop_connect(xp);
    }
    if (e) {
        rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_XPORT, "no QP of %s to itself for atomics "
                 "on this process's memory: %s", ibv_get_device_name(xp->ctx->device),
                 strerror(e));
        return 0;
    }
    xp->amo_state = 1;
    return 1;
}

/* The loopback's one signalled completion (its last WR), bounded by the
 * timeout; a failure leaves the QP in error, so atomics on our own memory
 * are refused from then on. */
static rdma_status_t rdma_verbs_amo_loop_wait(rdma_xport_t * xp)
{
    struct ibv_wc wc;
    double limit = rdma_verbs_now() + xp->vp.timeout;
    unsigned spins = 0;
    int got;

    while (!(got = ibv_poll_cq(xp->amo_cq, 1, &wc)))
        if ((++spins & 1023) == 0 && rdma_verbs_now() > limit)
            break;
    if (got == 1 && wc.status == IBV_WC_SUCCESS)
        return RDMA_OK;
    xp->amo_state = -1;
    rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_XPORT, "an atomic on this process's own memory "
             "through %s failed: %s", ibv_get_device_name(xp->ctx->device),
             got == 1 ? ibv_wc_status_str(wc.status) : "no completion");
    return RDMA_ERR_XPORT;
}

static rdma_status_t rdma_verbs_rma_self(rdma_xport_t * xp, const rdma_xport_amo_t * a,
                                         uint64_t addr, uint64_t key)
{
    struct ibv_send_wr wr[RDMA_XP_AMO_MAX], *bad;
    struct ibv_sge sg[RDMA_XP_AMO_MAX];
    rdma_status_t st;
    int i;

    if (xp->amo_state < 0 || a->n < 1 || a->n > RDMA_XP_AMO_MAX || (a->cas && a->n != 1)
        || !rdma_verbs_amo_loop(xp))
        return RDMA_ERR_REFUSED;
    for (i = 0; i < a->n; i++) {
        rdma_verbs_amo_wr(a, i, &sg[i], (uintptr_t) xp->amo_mem.buf, xp->amo_mem.mr->lkey,
                          addr, key, &wr[i]);
        wr[i].next = i + 1 < a->n ? &wr[i + 1] : NULL;
    }
    wr[a->n - 1].send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(xp->amo_qp, wr, &bad))
        return RDMA_ERR_XPORT;
    if ((st = rdma_verbs_amo_loop_wait(xp)))
        return st;
    if (a->result)
        memcpy(a->result, xp->amo_mem.buf, 8 * (size_t) a->n);
    return RDMA_OK;
}

const rdma_xport_rma_ops_t rdma_verbs_rma_ops = {
    .expose = rdma_verbs_win_expose, .unexpose = rdma_verbs_win_unexpose,
    .put = rdma_verbs_rma_put, .get = rdma_verbs_rma_get,
    .atomic = rdma_verbs_rma_atomic, .self = rdma_verbs_rma_self, .amo_ok = rdma_verbs_amo_ok
};
