/*
 * rdma_verbs_srq.c -- the shared receive queue (issue 68).
 *
 * A write with immediate carries no data for a receive: the receive is only
 * the right to a completion.  So one SRQ per process serves every RC QP
 * and no QP has a receive queue of its own (driver memory per connection:
 * its send queue and CQ share only).  Flag-polled connections take no
 * receives at all.  Without SRQ support, or with
 * MPIR_CVAR_CH3_RDMA_SRQ_SIZE=0, each QP keeps its own (rdma_verbs_data.c,
 * "Receive queue").
 *
 * Sizing.  A completion-driven connection holds at most rq_depth receives
 * at once (its peer's uncredited writes, rdma_verbs_data.c); want is the
 * sum over the connections attached, the most that can ever be needed.
 * The SRQ starts with room for vp.srq_size receives and holds
 * min(size, want) of them posted.  When more are in use than it holds (many
 * peers writing while main does not poll), a write meets an RNR NAK and is
 * retried (rnr_retry 7: slower, never lost), and the SRQ's limit event
 * (armed at a quarter of size) tells the channel thread, which doubles size
 * up to want and the device's limit, and posts the new receives.
 *
 * Accounting.  out counts receives posted whose completion main has not
 * polled yet: in the SRQ or in the CQ.  The CQ reserves size entries for
 * them (cq_need), so out <= size keeps both the SRQ and the CQ from
 * overflowing; posters reserve with a compare-and-swap before posting.
 * Main gives back polled receives RQ_BATCH at a time (srq_owed) and refills.
 * A receive that a write took while its QP was being destroyed would never
 * complete and leave out one too high (one receive fewer posted): QPs are
 * destroyed after the close handshake, when the peer writes nothing more
 * with immediate, or after it failed.
 *
 * Which connection.  A receive completion's wr_id names no connection (the
 * receive was the SRQ's), so main finds it by wc.qp_num in a hash whose
 * chains are the connections (qpn_next): the CM inserts at a chain's head
 * under cm_lock with a release store before the QP can receive; release
 * (main, under cm_lock) unlinks; main reads without the lock (acquire).
 * Main is the only reader and the only one to free, so no reader sees a
 * connection freed.  A completion still in the CQ when its connection was
 * released finds none (its receive is counted all the same); a QP number
 * reused at once could mislead it (rxe allocates them cyclically, and a
 * closed connection's last writes completed before its close handshake).
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

static uint32_t rdma_verbs_qpn_hash(const rdma_xport_t * xp, uint32_t qpn)
{
    return (qpn * 2654435761u) & (xp->qpn_nbkt - 1);
}

static rdma_verbs_conn_t *rdma_verbs_qpn_first(rdma_xport_t * xp, uint32_t qpn)
{
    return __atomic_load_n(&xp->qpn_bkt[rdma_verbs_qpn_hash(xp, qpn)], __ATOMIC_ACQUIRE);
}

/* [main] */
RDMA_HOT rdma_verbs_conn_t *rdma_verbs_qpn_lookup(rdma_xport_t * xp, uint32_t qpn)
{
    rdma_verbs_conn_t *vc = rdma_verbs_qpn_first(xp, qpn);

    while (vc && vc->qp->qp_num != qpn)
        vc = __atomic_load_n(&vc->qpn_next, __ATOMIC_ACQUIRE);
    return vc;
}

/* Post n receives (<= RQ_BATCH) to the SRQ. */
static int rdma_verbs_srq_post(rdma_xport_t * xp, uint32_t n)
{
    struct ibv_recv_wr wr[RDMA_VERBS_RQ_BATCH], *bad;

    return ibv_post_srq_recv(xp->srq, rdma_verbs_recv_chain(wr, n, RDMA_VERBS_SRQ_WRID), &bad);
}

/* Post receives until min(size, want) are out.  Either thread.  Returns
 * 0 or the failed post's errno. */
int rdma_verbs_srq_fill(rdma_xport_t * xp)
{
    int rc;

    for (;;) {
        uint32_t size = __atomic_load_n(&xp->srq_size, __ATOMIC_ACQUIRE);
        uint32_t want = __atomic_load_n(&xp->srq_want, __ATOMIC_RELAXED);
        uint32_t out = __atomic_load_n(&xp->srq_out, __ATOMIC_RELAXED);
        uint32_t target = want < size ? want : size, n;

        if (out >= target)
            return 0;
        n = target - out < RDMA_VERBS_RQ_BATCH ? target - out : RDMA_VERBS_RQ_BATCH;
        if (!__atomic_compare_exchange_n(&xp->srq_out, &out, out + n, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        if ((rc = rdma_verbs_srq_post(xp, n))) {
            __atomic_fetch_sub(&xp->srq_out, n, __ATOMIC_RELAXED);
            return rc;
        }
    }
}

/* Main polled a receive completion of the SRQ. */
RDMA_HOT void rdma_verbs_srq_polled(rdma_xport_t * xp)
{
    int rc;

    if (++xp->srq_owed < RDMA_VERBS_RQ_BATCH)
        return;
    __atomic_fetch_sub(&xp->srq_out, xp->srq_owed, __ATOMIC_RELAXED);
    xp->srq_owed = 0;
    if ((rc = rdma_verbs_srq_fill(xp)) && !xp->srq_said) {
        xp->srq_said = 1;
        fprintf(stderr, "[ch3:rdma] rank %d: cannot post receives to the shared receive "
                "queue: %s (peers' writes wait and retry)\n", xp->prm.rank, strerror(rc));
    }
}

static int rdma_verbs_srq_arm(rdma_xport_t * xp)
{
    struct ibv_srq_attr a = {.srq_limit = xp->srq_size / 4 ? xp->srq_size / 4 : 1 };

    return ibv_modify_srq(xp->srq, &a, IBV_SRQ_LIMIT);
}

/* vc will be completion-driven: count its receives, find it by QP number,
 * post.  Before its QP can receive.  [cm] */
int rdma_verbs_srq_attach(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    rdma_verbs_conn_t **bkt = &xp->qpn_bkt[rdma_verbs_qpn_hash(xp, vc->qp->qp_num)];

    __atomic_store_n(&vc->qpn_next, *bkt, __ATOMIC_RELAXED);
    __atomic_store_n(bkt, vc, __ATOMIC_RELEASE);
    vc->srq_attached = 1;
    __atomic_fetch_add(&xp->srq_want, vc->rq_depth, __ATOMIC_RELAXED);
    if (!xp->srq_armed && rdma_verbs_srq_arm(xp) == 0)
        xp->srq_armed = 1;
    return rdma_verbs_srq_fill(xp);
}

/* vc is released (main, cm_lock held): its receives are no longer wanted;
 * those posted stay for the others. */
void rdma_verbs_srq_detach(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    rdma_verbs_conn_t **pp = &xp->qpn_bkt[rdma_verbs_qpn_hash(xp, vc->qp->qp_num)];

    if (!vc->srq_attached)
        return;
    while (*pp && *pp != vc)
        pp = &(*pp)->qpn_next;
    if (*pp)
        __atomic_store_n(pp, vc->qpn_next, __ATOMIC_RELEASE);
    __atomic_fetch_sub(&xp->srq_want, vc->rq_depth, __ATOMIC_RELAXED);
    vc->srq_attached = 0;
}

/* The limit event (channel thread, cm_lock held): grow toward want, post,
 * re-arm. */
static void rdma_verbs_srq_limit(rdma_xport_t * xp)
{
    uint32_t want = __atomic_load_n(&xp->srq_want, __ATOMIC_RELAXED), size = xp->srq_size;
    uint32_t grow = size * 2 < want ? size * 2 : want;
    struct ibv_srq_attr a = {.max_wr = grow };

    xp->srq_limits++;
    if (grow > (uint32_t) xp->dev.max_srq_wr)
        grow = a.max_wr = (uint32_t) xp->dev.max_srq_wr;
    if (grow > size && (xp->dev.device_cap_flags & IBV_DEVICE_SRQ_RESIZE)
        && rdma_verbs_cq_room(xp, (int) (grow - size)) == RDMA_OK) {
        if (ibv_modify_srq(xp->srq, &a, IBV_SRQ_MAX_WR) == 0) {
            __atomic_store_n(&xp->srq_size, grow, __ATOMIC_RELEASE);   /* after the CQ grew */
            xp->srq_grows++;
        } else
            xp->cq_need -= (int) (grow - size);
    }
    rdma_verbs_srq_fill(xp);
    xp->srq_armed = rdma_verbs_srq_arm(xp) == 0;
}

/* The device's asynchronous events (channel thread, cm_lock held): the
 * SRQ's limit; the rest are acknowledged (failures show in completions). */
void rdma_verbs_async_run(rdma_xport_t * xp)
{
    struct ibv_async_event ev;

    while (ibv_get_async_event(xp->ctx, &ev) == 0) {
        if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && xp->srq)
            rdma_verbs_srq_limit(xp);
        ibv_ack_async_event(&ev);
    }
}

/* At set-up: the SRQ with room for vp.srq_size receives, its CQ entries,
 * the hash; none (per-QP receive queues) when the size is 0 or the device
 * has no SRQ or refuses one.  -1: no memory for the hash, or the async
 * events' fd cannot be made non-blocking. */
int rdma_verbs_srq_open(rdma_xport_t * xp)
{
    uint32_t size = (uint32_t) xp->vp.srq_size, nbkt = 64;
    struct ibv_srq_init_attr ia = {.attr = {.max_sge = 1 } };
    int fl = fcntl(xp->ctx->async_fd, F_GETFL);

    if (fl < 0 || fcntl(xp->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    if (size == 0 || xp->dev.max_srq <= 0)
        return 0;
    if (size > (uint32_t) xp->dev.max_srq_wr)
        size = (uint32_t) xp->dev.max_srq_wr;
    while (nbkt < xp->nslots / 4)
        nbkt *= 2;
    ia.attr.max_wr = size;
    if (rdma_verbs_cq_room(xp, (int) size))
        return 0;       /* per-QP receive queues, as without SRQ support */
    if (!(xp->srq = ibv_create_srq(xp->pd, &ia))) {
        xp->cq_need -= (int) size;
        return 0;
    }
    xp->qpn_nbkt = nbkt;
    xp->srq_size = size;
    return (xp->qpn_bkt = calloc(nbkt, sizeof(*xp->qpn_bkt))) ? 0 : -1;
}

/* For rdma_verbs_stats (the thread stopped). */
int rdma_verbs_srq_stats(const rdma_xport_t * xp, char *buf, size_t len)
{
    if (!xp->srq)
        return snprintf(buf, len, "; srq: none (a receive queue per connection)");
    return snprintf(buf, len, "; srq: room %u, %llu limit events, %llu grows", xp->srq_size,
                    (unsigned long long) xp->srq_limits, (unsigned long long) xp->srq_grows);
}

void rdma_verbs_srq_close(rdma_xport_t * xp)
{
    if (xp->srq)
        ibv_destroy_srq(xp->srq);
    free(xp->qpn_bkt);
    xp->srq = NULL;
    xp->qpn_bkt = NULL;
}
