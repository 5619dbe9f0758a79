/*
 * rdma_verbs_conn.c -- the verbs transport: connection objects (slot,
 * memory, RC QP) and the QP state machine INIT -> RTR -> RTS
 * (rdma_verbs.h).  Called by the CM (rdma_verbs_cm.c) with xp->cm_lock
 * held, from either thread; rdma_verbs_conn_lookup is main's lock-free
 * read of the slot table.  A connection closed in order lingers before
 * its QP goes (rdma_verbs_conn_linger, main only).
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

RDMA_HOT rdma_verbs_conn_t *rdma_verbs_conn_lookup(rdma_xport_t * xp, uint64_t token)
{
    uint32_t slot = (uint32_t) token;
    rdma_verbs_conn_t *vc;

    if (slot >= xp->nslots)
        return NULL;
    vc = __atomic_load_n(&xp->slots[slot], __ATOMIC_ACQUIRE);
    return vc && vc->token == token ? vc : NULL;
}

/* A free slot (one per job peer, RDMA_VERBS_DYN_SLOTS for the peers
 * outside the job) and a fresh generation; the slot
 * is published (main can look it up) when vc is complete.  [cm] */
static rdma_status_t rdma_verbs_slot_get(rdma_xport_t * xp, rdma_verbs_conn_t * vc)
{
    uint32_t i = 0;

    while (i < xp->nslots && xp->slots[i])
        i++;
    if (i == xp->nslots)
        return RDMA_ERR_NOMEM;
    vc->token = ((uint64_t) ++xp->gens[i] << 32) | i;
    return RDMA_OK;
}

static void rdma_verbs_slot_put(rdma_xport_t * xp, rdma_verbs_conn_t * vc)
{
    uint32_t i = (uint32_t) vc->token;

    if (vc->token && xp->slots[i] == vc)
        __atomic_store_n(&xp->slots[i], NULL, __ATOMIC_RELEASE);
}

/* Make room in the data CQ for n more completions (the provider's lock
 * makes the resize safe against main's polls).  [cm] */
rdma_status_t rdma_verbs_cq_room(rdma_xport_t * xp, int n)
{
    int want = xp->cq_need + n;

    if (want > xp->cq_size) {
        if (want > xp->dev.max_cqe || ibv_resize_cq(xp->cq, want))
            return RDMA_ERR_NOMEM;
        xp->cq_size = want;
    }
    xp->cq_need = want;
    return RDMA_OK;
}

/* Reserve every completion vc can have in flight: its sends, and its
 * receives unless the SRQ's entries (reserved once) take them.  At
 * pairing (rdma_verbs_conn_pair): a QP that waits in INIT for its peer
 * (or, under the owner's cap, for a slot) completes nothing, so the CQ
 * follows the paired connections, not the connects under way. */
rdma_status_t rdma_verbs_cq_reserve(rdma_verbs_conn_t * vc)
{
    int n = (int) (vc->sq_depth + (vc->xp->srq ? 0 : vc->rq_depth));

    if (rdma_verbs_cq_room(vc->xp, n))
        return RDMA_ERR_NOMEM;
    vc->cq_share = n;
    return RDMA_OK;
}

/* Create the RC QP, probing the inline size: irdma rejects any, rxe grants
 * about 400; start from what worked last time. */
static rdma_status_t rdma_verbs_qp_create(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    struct ibv_qp_init_attr ia;
    uint32_t req = xp->inline_req;

    for (;;) {
        memset(&ia, 0, sizeof(ia));
        ia.send_cq = ia.recv_cq = xp->cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = vc->sq_depth;
        ia.cap.max_recv_wr = xp->srq ? 0 : vc->rq_depth;
        ia.srq = xp->srq;
        ia.cap.max_send_sge = xp->dev.max_sge >= RDMA_VERBS_USER_SGE ? RDMA_VERBS_USER_SGE : 1;
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = req;
        vc->qp = ibv_create_qp(xp->pd, &ia);
        if (vc->qp || !req)
            break;
        req = req > 64 ? req / 2 : 0;
    }
    if (!vc->qp)
        return RDMA_ERR_NOMEM;
    xp->inline_req = req;
    vc->max_inline = req ? ia.cap.max_inline_data : 0;
    vc->max_send_sge = ia.cap.max_send_sge;
    return RDMA_OK;
}

static int rdma_verbs_qp_in_order(rdma_verbs_conn_t * vc)
{
    if (vc->xp->vp.force_completion)
        return 0;
    if (vc->xp->in_order_override)
        return 1;
#if HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER
    return ibv_query_qp_data_in_order(vc->qp, IBV_WR_RDMA_WRITE, 0) == 1;
#else
    return 0;
#endif
}

static int rdma_verbs_qp_init(rdma_verbs_conn_t * vc)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = vc->xp->port,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
            IBV_ACCESS_REMOTE_READ | (vc->xp->amo ? IBV_ACCESS_REMOTE_ATOMIC : 0)
    };
    return ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                         IBV_QP_ACCESS_FLAGS);
}

rdma_status_t rdma_verbs_qp_rtr_rts(rdma_verbs_conn_t * vc)
{
    struct ibv_qp_attr a = {
        /* the smaller of both ports' active MTUs (rdma_verbs_mtu_pick) */
        .qp_state = IBV_QPS_RTR, .path_mtu = vc->mtu, .ah_attr = vc->path,
        .dest_qp_num = vc->remote.qpn, .rq_psn = vc->remote.psn,
        .max_dest_rd_atomic = (uint8_t) vc->max_rd_atomic, .min_rnr_timer = 12
    };

    if (ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                      IBV_QP_MIN_RNR_TIMER))
        return RDMA_ERR_XPORT;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t) vc->xp->qp_timeout;
    a.retry_cnt = RDMA_VERBS_RETRY_CNT;
    a.rnr_retry = 7;
    a.sq_psn = vc->psn;
    a.max_rd_atomic = (uint8_t) vc->max_rd_atomic;
    return ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Post n (<= RDMA_VERBS_RQ_BATCH) receives to vc's own queue in one call. */
int rdma_verbs_rq_post(rdma_verbs_conn_t * vc, uint32_t n)
{
    struct ibv_recv_wr wr[RDMA_VERBS_RQ_BATCH], *bad;

    return ibv_post_recv(vc->qp, rdma_verbs_recv_chain(wr, n, vc->token), &bad);
}

/* The receives of a completion-driven vc, before RTR: the SRQ's, or
 * rq_depth of its own. */
int rdma_verbs_rq_fill(rdma_verbs_conn_t * vc)
{
    uint32_t i, n;

    if (vc->xp->srq)
        return rdma_verbs_srq_attach(vc);
    for (i = 0; i < vc->rq_depth; i += n) {
        n = vc->rq_depth - i < RDMA_VERBS_RQ_BATCH ? vc->rq_depth - i : RDMA_VERBS_RQ_BATCH;
        if (rdma_verbs_rq_post(vc, n))
            return -1;
    }
    return 0;
}

/* Take vc out of every lookup (slots, the QP-number hash, the adopt list)
 * and off its rdma_conn_t: no completion finds it any more.  [cm_lock] */
static void rdma_verbs_conn_unhook(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    rdma_verbs_conn_t **pp;

    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        xp->n_connecting--;
    for (pp = &xp->adopt; *pp; pp = &(*pp)->next_adopt)
        if (*pp == vc) {
            *pp = vc->next_adopt;
            xp->n_adopt--;
            break;
        }
    if (vc->qp)
        rdma_verbs_srq_detach(vc);
    rdma_verbs_slot_put(xp, vc);
    vc->c->priv = NULL;
}

/* Destroy vc's QP, free its memory.  [cm_lock] */
static void rdma_verbs_conn_free(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;

    if (vc->qp)
        ibv_destroy_qp(vc->qp);
    xp->cq_need -= vc->cq_share;
    if (vc->ah)
        ibv_destroy_ah(vc->ah);
    rdma_verbs_mem_free(&vc->ctl);
    rdma_verbs_mem_free(&vc->stage);
    rdma_verbs_mem_free(&vc->ring);
    rdma_verbs_mem_free(&vc->next_stage);
    rdma_verbs_mem_free(&vc->next_ring);
    while (vc->n_retired)
        rdma_verbs_mem_free(&vc->retired[--vc->n_retired].m);
    if (vc->charged)
        rdma_verbs_ring_charge(xp, -(long long) vc->charged);
    free(vc->sig_fifo);
    free(vc);
}

void rdma_verbs_conn_release(rdma_verbs_conn_t * vc)
{
    rdma_verbs_conn_unhook(vc);
    rdma_verbs_conn_free(vc);
}

/* A READY connection closed in order (close()): its QP stays in RTS and
 * its memory registered for RDMA_VERBS_LINGER_S, out of every lookup.
 * Each side closes once it has read the other's last frame, and the ACK
 * of that frame may still be leaving the QP that took it (rxe sends it
 * after placing the data): a QP destroyed at once never sent it, and the
 * peer's drain waited two ACK timeouts for it (8.6 s at the default
 * CONNECT_TIMEOUT; 25 times in 240 s of coll/reduce with 10 ranks and a
 * cap of 2, and at MPI_Finalize).  TCP's TIME_WAIT, for the same reason.
 * A retransmission after a lost ACK (one ACK timeout) may still find the
 * QP gone: then the peer's drain ends at its bound.  Main frees it
 * (rdma_verbs_linger_reap).  [main, cm_lock] */
void rdma_verbs_conn_linger(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;

    if (!vc->adopted || vc->cm != RDMA_VERBS_CM_READY) {
        rdma_verbs_conn_release(vc);
        return;
    }
    rdma_verbs_conn_unhook(vc);
    vc->t_linger = rdma_verbs_now() + RDMA_VERBS_LINGER_S;
    vc->next_linger = NULL;
    *xp->linger_tail = vc;
    xp->linger_tail = &vc->next_linger;
}

/* Free the lingering connections due by now (the lock only if one is).
 * [main] */
void rdma_verbs_linger_reap(rdma_xport_t * xp, double now)
{
    rdma_verbs_conn_t *vc;

    if (!xp->linger || now < xp->linger->t_linger)
        return;
    pthread_mutex_lock(&xp->cm_lock);
    while ((vc = xp->linger) && now >= vc->t_linger) {
        xp->linger = vc->next_linger;
        rdma_verbs_conn_free(vc);
    }
    if (!xp->linger)
        xp->linger_tail = &xp->linger;
    pthread_mutex_unlock(&xp->cm_lock);
}

/* Queue depths from the write window, not the ring (rdma_verbs_data.c,
 * "Send queue", "Receive queue"); dev_setup checks them against the device. */
void rdma_verbs_depths(const rdma_xport_t * xp, uint32_t * sq, uint32_t * rq)
{
    uint32_t basic = xp->prm.head_writes ? 1 : 0;

    *sq = RDMA_VERBS_WINDOW * (1 + basic) + RDMA_VERBS_SIG_EVERY + RDMA_VERBS_SQ_RESERVE
        + RDMA_VERBS_READS_MAX + RDMA_VERBS_RMA_OPS;
    *sq = *sq < RDMA_VERBS_SQ_MAX ? *sq : RDMA_VERBS_SQ_MAX;
    *rq = RDMA_VERBS_WINDOW * (1 + 2 * basic) + RDMA_VERBS_RQ_RESERVE + RDMA_VERBS_RQ_BATCH;
}

static int rdma_verbs_conn_resources(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    size_t rs = xp->prm.ring_size;
    int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

    rdma_verbs_depths(xp, &vc->sq_depth, &vc->rq_depth);
    vc->sq_free = vc->sq_depth;
    vc->sig_fifo = calloc(vc->sq_depth, sizeof(*vc->sig_fifo));
    if (!vc->sig_fifo || rdma_verbs_mem_alloc(xp, &vc->ring, rs, rw)
        || rdma_verbs_mem_alloc(xp, &vc->stage, rs, IBV_ACCESS_LOCAL_WRITE)
        || rdma_verbs_mem_alloc(xp, &vc->ctl, (size_t) sysconf(_SC_PAGESIZE), rw))
        return RDMA_ERR_NOMEM;
    vc->ring_addr0 = (uintptr_t) vc->ring.buf;
    vc->ring_rkey0 = vc->ring.mr->rkey;
    if (rdma_verbs_qp_create(vc) || rdma_verbs_qp_init(vc))
        return RDMA_ERR_NOMEM;
    vc->in_order_local = rdma_verbs_qp_in_order(vc);
    vc->max_rd_atomic = xp->dev.max_qp_rd_atom < xp->dev.max_qp_init_rd_atom ?
        xp->dev.max_qp_rd_atom : xp->dev.max_qp_init_rd_atom;
    vc->psn = (uint32_t) (nrand48(xp->rng) & 0xffffff);
    return RDMA_OK;
}

/* The card is "<gid hex>.<lid>.<udqpn>.<port>.<qkey hex>.<auth hex>.<pid>.<host>"
 * (rdma_verbs_cm.c says why qkey and auth are secret). */
void rdma_verbs_card_format(rdma_xport_t * xp, char *card, size_t len)
{
    char hex[33];
    int i;

    for (i = 0; i < 16; i++)
        sprintf(hex + 2 * i, "%02x", xp->gid.raw[i]);
    snprintf(card, len, "%s.%u.%u.%u.%x.%016llx.%u.%s", hex, xp->pattr.lid, xp->ud->qp_num,
             xp->port, xp->qkey, (unsigned long long) xp->auth, (unsigned) getpid(), xp->host);
}

/* Card -> the peer's address, CM QP, QKEY, auth, pid and host. */
rdma_status_t rdma_verbs_card_parse(const char *card, rdma_verbs_peer_t * p)
{
    unsigned lid, qpn, port, qkey, pid, b, i;
    unsigned long long auth;
    char hex[33];

    memset(p, 0, sizeof(*p));
    if (sscanf(card, "%32[0-9a-f].%u.%u.%u.%x.%llx.%u.%63s", hex, &lid, &qpn, &port, &qkey,
               &auth, &pid, p->host) != 8 || strlen(hex) != 32)
        return RDMA_ERR_INVAL;
    for (i = 0; i < 16; i++) {
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return RDMA_ERR_INVAL;
        p->gid[i] = (uint8_t) b;
    }
    p->lid = (uint16_t) lid;
    p->udqpn = qpn;
    p->qkey = qkey;
    p->auth = auth;
    p->pid = pid;
    return RDMA_OK;
}

/* A REQ -> the same facts about its sender. */
void rdma_verbs_msg_peer(const rdma_verbs_msg_t * m, rdma_verbs_peer_t * p)
{
    memset(p, 0, sizeof(*p));
    memcpy(p->gid, m->h.gid, sizeof(p->gid));
    p->lid = m->h.lid;
    p->udqpn = m->h.udqpn;
    p->qkey = m->h.qkey;
    p->auth = m->h.src_auth;
    p->pid = m->h.pid;
    snprintf(p->host, sizeof(p->host), "%.*s", (int) sizeof(m->h.host) - 1, m->h.host);
}

/* The peer's address through our port. */
void rdma_verbs_path_of(rdma_xport_t * xp, const rdma_verbs_peer_t * p, struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof(*ah));
    memcpy(ah->grh.dgid.raw, p->gid, sizeof(p->gid));
    ah->port_num = xp->port;
    ah->dlid = p->lid;
    if (xp->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ah->is_global = 1;
        ah->grh.sgid_index = (uint8_t) xp->gid_index;
        ah->grh.hop_limit = 64;
    }
}

/* What we know of the peer, and its address. */
static void rdma_verbs_peer_apply(rdma_verbs_conn_t * vc, const rdma_verbs_peer_t * p)
{
    vc->peer_udqpn = p->udqpn;
    vc->peer_qkey = p->qkey;
    vc->peer_auth = p->auth;
    snprintf(vc->host, sizeof(vc->host), "%s", p->host[0] ? p->host : "?");
    vc->mtu = vc->xp->pattr.active_mtu;
    rdma_verbs_path_of(vc->xp, p, &vc->path);
}

/* A connection to c->peer: memory, QP (INIT), the address handle of the
 * peer's CM QP (peer fields filled by the caller: card or REQ).  On
 * failure the diagnosis is in why and nothing is left.  [cm] */
rdma_status_t rdma_verbs_conn_create(rdma_xport_t * xp, rdma_conn_t * c,
                                     const rdma_verbs_peer_t * peer, rdma_verbs_conn_t ** vcp,
                                     char *why, size_t len)
{
    rdma_verbs_conn_t *vc = calloc(1, sizeof(*vc));
    rdma_status_t st = RDMA_ERR_NOMEM;

    if (!vc)
        return rdma_say(why, len, st, "cannot create the connection to rank %d: out of "
                        "memory", c->peer);
    vc->c = c;
    vc->xp = xp;
    if (c->peer < xp->prm.size)
        snprintf(vc->who, sizeof(vc->who), "rank %d", c->peer);
    else
        snprintf(vc->who, sizeof(vc->who), "process %u outside the job", (unsigned) peer->pid);
    rdma_verbs_peer_apply(vc, peer);
    if (rdma_verbs_slot_get(xp, vc)) {
        rdma_say(why, len, st, "cannot create the connection to %s on %s: more than %u "
                 "connections to processes outside the job", vc->who, vc->host,
                 RDMA_VERBS_DYN_SLOTS);
        goto fail;
    }
    if (c->peer >= xp->prm.size
        && rdma_verbs_ring_charge(xp, (long long) rdma_verbs_conn_pinned(&xp->prm))) {
        rdma_say(why, len, st, "cannot create the connection to %s on %s: the pinned-memory "
                 "cap (MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB, %zu KiB) has no room for its rings "
                 "(%zu KiB)", vc->who, vc->host, xp->vp.pinned_max_bytes >> 10,
                 rdma_verbs_conn_pinned(&xp->prm) >> 10);
        goto fail;
    }
    vc->charged = c->peer >= xp->prm.size ? rdma_verbs_conn_pinned(&xp->prm) : 0;
    if (rdma_verbs_conn_resources(vc)) {
        rdma_say(why, len, st, "cannot create the connection to %s on %s (memory "
                 "registration, QP or CQ limits: %s)", vc->who, vc->host, strerror(errno));
        goto fail;
    }
    vc->ah = ibv_create_ah(xp->pd, &vc->path);
    if (!vc->ah) {
        st = rdma_say(why, len, RDMA_ERR_PEER, "cannot create an address handle for %s on %s: "
                      "%s", vc->who, vc->host, strerror(errno));
        goto fail;
    }
    c->priv = vc;
    __atomic_store_n(&xp->slots[(uint32_t) vc->token], vc, __ATOMIC_RELEASE);
    *vcp = vc;
    return RDMA_OK;
  fail:
    rdma_verbs_conn_release(vc);
    return st;
}
