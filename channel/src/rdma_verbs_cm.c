/*
 * rdma_verbs_cm.c -- the verbs transport: connection manager and RC QP
 * state machine (rdma_verbs.h).
 *
 * Connection management (UD, mimics a PMI exchange).  The card is
 * "<gid hex>.<lid>.<udqpn>.<port>.<qkey hex>.<auth hex>".  qkey and auth are
 * drawn at random by open() (getrandom), so only processes that read the
 * job's PMI KVS know them: the CM QP takes datagrams with our QKEY only
 * (bit 31 clear: kernels since 6.4 refuse privileged QKEYs without
 * CAP_NET_RAW), and every CM message carries the 64-bit auth of its
 * destination; one without ours is dropped and counted (stats), never
 * fatal, before anything is looked up or allocated.
 *   connect() creates the connection's memory and QP (INIT) and sends REQ
 * {rank, qpn, psn, ring and ctl
 * addr+rkey, max_rd_atomic, in-order capability}.  The responder gets the
 * object with conn_of(rank) (NULL: the REQ is ignored and the initiator times
 * out), creates the same if needed, goes RTR+RTS and answers REP.  The
 * initiator goes RTR+RTS on REP, sends RTU and is READY; the responder is
 * READY on RTU or, completion-driven, on the first receive completion of the
 * connection (the RTU is late or lost and the initiator already writes).
 *   Simultaneous connects: both sides sent REQ with their existing QP.  The
 * REQ of the lower rank wins: the lower rank ignores the higher rank's REQ,
 * the higher rank answers the lower rank's REQ as a responder, with the QP it
 * already has.  There is exactly one QP per peer, so no duplicates.
 *   UD is unreliable: REQ (initiator) and REP (responder) are retransmitted
 * with exponential backoff; a duplicate REQ is answered with the same REP, a
 * duplicate REP with the same RTU.  Without an answer for prm->timeout
 * seconds the connection fails with RDMA_ERR_PEER.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* -------------------------------------------------------------- CM (UD) */

uint8_t *rdma_verbs_ud_slot(rdma_xport_t * xp, uint32_t i)
{
    return (uint8_t *) xp->udm.buf + (size_t) i * RDMA_VERBS_UD_SLOT;
}

int rdma_verbs_ud_post_recv(rdma_xport_t * xp, uint32_t i)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t) rdma_verbs_ud_slot(xp, i), .length = RDMA_VERBS_UD_SLOT,
        .lkey = xp->udm.mr->lkey
    };
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
    return ibv_post_recv(xp->ud, &wr, &bad);
}

static int rdma_verbs_ud_modify(rdma_xport_t * xp, enum ibv_qp_state s)
{
    struct ibv_qp_attr a = {.qp_state = s, .port_num = xp->port, .qkey = xp->qkey };
    int mask = IBV_QP_STATE;

    if (s == IBV_QPS_INIT)
        mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    else if (s == IBV_QPS_RTS)
        mask |= IBV_QP_SQ_PSN;
    return ibv_modify_qp(xp->ud, &a, mask);
}

rdma_status_t rdma_verbs_ud_create(rdma_xport_t * xp)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = xp->cq, .recv_cq = xp->cq, .qp_type = IBV_QPT_UD,
        .cap = {.max_send_wr = RDMA_VERBS_UD_NSEND, .max_recv_wr = RDMA_VERBS_UD_NRECV,
                .max_send_sge = 1, .max_recv_sge = 1}
    };
    uint32_t i;

    if (rdma_verbs_mem_alloc(xp, &xp->udm, (size_t) RDMA_VERBS_UD_SLOT *
                             (RDMA_VERBS_UD_NRECV + RDMA_VERBS_UD_NSEND), IBV_ACCESS_LOCAL_WRITE))
        return RDMA_ERR_XPORT;
    xp->ud = ibv_create_qp(xp->pd, &ia);
    if (!xp->ud || rdma_verbs_ud_modify(xp, IBV_QPS_INIT) || rdma_verbs_ud_modify(xp, IBV_QPS_RTR)
        || rdma_verbs_ud_modify(xp, IBV_QPS_RTS))
        return RDMA_ERR_XPORT;
    for (i = 0; i < RDMA_VERBS_UD_NRECV; i++)
        if (rdma_verbs_ud_post_recv(xp, i))
            return RDMA_ERR_XPORT;
    xp->ud_send_free = RDMA_VERBS_UD_NSEND;
    return RDMA_OK;
}

void rdma_verbs_card_format(rdma_xport_t * xp, char *card, size_t len)
{
    char hex[33];
    int i;

    for (i = 0; i < 16; i++)
        sprintf(hex + 2 * i, "%02x", xp->gid.raw[i]);
    snprintf(card, len, "%s.%u.%u.%u.%x.%016llx", hex, xp->pattr.lid, xp->ud->qp_num, xp->port,
             xp->qkey, (unsigned long long) xp->auth);
}

/* Card -> the peer's CM QP number, QKEY and auth, and an address vector
 * through our port. */
static rdma_status_t rdma_verbs_card_parse(rdma_verbs_conn_t * vc, const char *card)
{
    struct ibv_ah_attr *ah = &vc->path;
    unsigned lid, qpn, port, qkey, b, i;
    unsigned long long auth;
    char hex[33];

    if (sscanf(card, "%32[0-9a-f].%u.%u.%u.%x.%llx", hex, &lid, &qpn, &port, &qkey, &auth) != 6
        || strlen(hex) != 32)
        return RDMA_ERR_INVAL;
    memset(ah, 0, sizeof(*ah));
    for (i = 0; i < 16; i++) {
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return RDMA_ERR_INVAL;
        ah->grh.dgid.raw[i] = (uint8_t) b;
    }
    ah->port_num = vc->xp->port;
    ah->dlid = (uint16_t) lid;
    if (vc->xp->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ah->is_global = 1;
        ah->grh.sgid_index = (uint8_t) vc->xp->gid_index;
        ah->grh.hop_limit = 64;
    }
    vc->peer_udqpn = qpn;
    vc->peer_qkey = qkey;
    vc->peer_auth = auth;
    return RDMA_OK;
}

static void rdma_verbs_msg_fill(rdma_verbs_conn_t * vc, rdma_verbs_msg_t * m, int type)
{
    rdma_xport_t *xp = vc->xp;

    memset(m, 0, sizeof(*m));
    m->magic = RDMA_VERBS_MAGIC;
    m->auth = vc->peer_auth;
    m->type = (uint8_t) type;
    m->in_order = (uint8_t) vc->in_order_local;
    m->rd_atomic = (uint8_t) vc->max_rd_atomic;
    m->basic = (uint8_t) xp->prm.head_writes;
    m->src = xp->prm.rank;
    m->dst = vc->c->peer;
    m->qpn = vc->qp->qp_num;
    m->psn = vc->psn;
    m->token = vc->token;
    m->echo = vc->remote.token;
    m->ring_addr = (uintptr_t) vc->ring.buf;
    m->ring_rkey = vc->ring.mr->rkey;
    m->ctl_addr = (uintptr_t) vc->ctl.buf;
    m->ctl_rkey = vc->ctl.mr->rkey;
    m->ring_size = xp->prm.ring_size;
    m->chunk_size = xp->prm.chunk_size;
}

/* Best effort: a message lost here is retransmitted by the timers. */
void rdma_verbs_ud_send(rdma_verbs_conn_t * vc, int type)
{
    rdma_xport_t *xp = vc->xp;
    uint32_t i = RDMA_VERBS_UD_NRECV + xp->ud_send_next % RDMA_VERBS_UD_NSEND;
    struct ibv_sge sge = {
        .addr = (uintptr_t) rdma_verbs_ud_slot(xp, i), .length = sizeof(rdma_verbs_msg_t),
        .lkey = xp->udm.mr->lkey
    };
    struct ibv_send_wr wr = {
        .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.ud = {.ah = vc->ah, .remote_qpn = vc->peer_udqpn, .remote_qkey = vc->peer_qkey}
    }, *bad;

    if (!xp->ud_send_free)
        rdma_verbs_cq_poll(xp);
    if (!xp->ud_send_free)
        return;
    rdma_verbs_msg_fill(vc, (rdma_verbs_msg_t *) rdma_verbs_ud_slot(xp, i), type);
    if (!ibv_post_send(xp->ud, &wr, &bad)) {
        xp->ud_send_next++;
        xp->ud_send_free--;
    }
}

/* --------------------------------------------------------- connections */

void __attribute__((format(printf, 2, 3)))
rdma_verbs_conn_fail(rdma_verbs_conn_t * vc, const char *fmt, ...)
{
    va_list ap;

    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return;
    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        vc->xp->n_connecting--;
    vc->cm = RDMA_VERBS_CM_DEAD;
    vc->c->state = RDMA_CONN_FAILED;
    vc->xp->new_failures++;
    va_start(ap, fmt);
    vsnprintf(vc->xp->err, sizeof(vc->xp->err), fmt, ap);
    va_end(ap);
    rdma_conn_failed(vc->c, vc->xp->err);
}

rdma_verbs_conn_t *rdma_verbs_conn_lookup(rdma_xport_t * xp, uint64_t token)
{
    uint32_t slot = (uint32_t) token;
    if (slot >= xp->nslots || xp->gens[slot] != (uint32_t) (token >> 32))
        return NULL;
    return xp->slots[slot];
}

static rdma_status_t rdma_verbs_slot_grow(rdma_xport_t * xp)
{
    uint32_t n = xp->nslots ? 2 * xp->nslots : 16;
    rdma_verbs_conn_t **s = realloc(xp->slots, n * sizeof(*s));
    uint32_t *g;

    if (!s)
        return RDMA_ERR_NOMEM;
    xp->slots = s;
    g = realloc(xp->gens, n * sizeof(*g));
    if (!g)
        return RDMA_ERR_NOMEM;
    xp->gens = g;
    memset(s + xp->nslots, 0, (n - xp->nslots) * sizeof(*s));
    memset(g + xp->nslots, 0, (n - xp->nslots) * sizeof(*g));
    xp->nslots = n;
    return RDMA_OK;
}

static rdma_status_t rdma_verbs_slot_get(rdma_xport_t * xp, rdma_verbs_conn_t * vc)
{
    uint32_t i = 0;

    while (i < xp->nslots && xp->slots[i])
        i++;
    if (i == xp->nslots && rdma_verbs_slot_grow(xp))
        return RDMA_ERR_NOMEM;
    xp->slots[i] = vc;
    vc->token = ((uint64_t) ++xp->gens[i] << 32) | i;
    return RDMA_OK;
}

/* Grow the shared CQ so it holds every completion vc can have in flight. */
static rdma_status_t rdma_verbs_cq_reserve(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    int n = (int) (vc->sq_depth + vc->rq_depth), want = xp->cq_need + n;

    if (want > xp->cq_size) {
        if (want > xp->dev.max_cqe || ibv_resize_cq(xp->cq, want))
            return RDMA_ERR_NOMEM;
        xp->cq_size = want;
    }
    xp->cq_need = want;
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
        ia.cap.max_recv_wr = vc->rq_depth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
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
    return RDMA_OK;
}

static int rdma_verbs_qp_in_order(rdma_verbs_conn_t * vc)
{
    if (vc->xp->prm.force_completion)
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
            IBV_ACCESS_REMOTE_READ
    };
    return ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                         IBV_QP_ACCESS_FLAGS);
}

static rdma_status_t rdma_verbs_qp_rtr_rts(rdma_verbs_conn_t * vc)
{
    struct ibv_qp_attr a = {
        /* active_mtu <= IBV_MTU_4096 by definition: min(active, 4096) */
        .qp_state = IBV_QPS_RTR, .path_mtu = vc->xp->pattr.active_mtu, .ah_attr = vc->path,
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

int rdma_verbs_rq_post(rdma_verbs_conn_t * vc)
{
    struct ibv_recv_wr wr = {.wr_id = vc->token, .num_sge = 0 }, *bad;
    return ibv_post_recv(vc->qp, &wr, &bad);
}

void rdma_verbs_conn_release(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;

    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        xp->n_connecting--;
    if (vc->qp)
        ibv_destroy_qp(vc->qp);
    xp->cq_need -= vc->cq_share;
    if (vc->ah)
        ibv_destroy_ah(vc->ah);
    rdma_verbs_mem_free(&vc->ctl);
    rdma_verbs_mem_free(&vc->stage);
    rdma_verbs_mem_free(&vc->ring);
    if (vc->token)
        xp->slots[(uint32_t) vc->token] = NULL;
    vc->c->priv = NULL;
    free(vc->sig_fifo);
    free(vc);
}

static int rdma_verbs_conn_resources(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    size_t rs = xp->prm.ring_size;
    uint32_t frames = (uint32_t) (rs / xp->prm.chunk_size);
    uint32_t per = xp->prm.head_writes ? 2 : 1;
    uint32_t max_wr = (uint32_t) xp->dev.max_qp_wr;
    int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

    vc->sq_depth = frames * per + RDMA_VERBS_SQ_RESERVE + RDMA_VERBS_READS_MAX;
    vc->sq_depth = vc->sq_depth < max_wr ? vc->sq_depth : max_wr;
    vc->rq_depth = frames * per + RDMA_VERBS_RQ_RESERVE;
    vc->rq_depth = vc->rq_depth < max_wr ? vc->rq_depth : max_wr;
    vc->sq_free = vc->sq_depth;
    vc->sig_fifo = calloc(vc->sq_depth, sizeof(*vc->sig_fifo));
    if (!vc->sig_fifo || rdma_verbs_mem_alloc(xp, &vc->ring, rs, rw)
        || rdma_verbs_mem_alloc(xp, &vc->stage, rs, IBV_ACCESS_LOCAL_WRITE)
        || rdma_verbs_mem_alloc(xp, &vc->ctl, (size_t) sysconf(_SC_PAGESIZE), rw))
        return RDMA_ERR_NOMEM;
    if (rdma_verbs_cq_reserve(vc)
        || rdma_verbs_qp_create(vc) || rdma_verbs_qp_init(vc))
        return RDMA_ERR_NOMEM;
    vc->in_order_local = rdma_verbs_qp_in_order(vc);
    vc->max_rd_atomic = xp->dev.max_qp_rd_atom < xp->dev.max_qp_init_rd_atom ?
        xp->dev.max_qp_rd_atom : xp->dev.max_qp_init_rd_atom;
    vc->psn = (uint32_t) (nrand48(xp->rng) & 0xffffff);
    return RDMA_OK;
}

/* Allocate the connection's memory, QP and the peer's address. */
int rdma_verbs_conn_create(rdma_xport_t * xp, rdma_conn_t * c, rdma_verbs_conn_t ** vcp)
{
    rdma_verbs_conn_t *vc = calloc(1, sizeof(*vc));
    char card[256];
    int rc;

    if (!vc)
        return RDMA_ERR_NOMEM;
    vc->c = c;
    vc->xp = xp;
    c->priv = vc;
    c->xport = xp;
    c->ops = &rdma_xport_verbs;
    rc = rdma_verbs_slot_get(xp, vc) ? RDMA_ERR_NOMEM : rdma_verbs_conn_resources(vc);
    if (rc) {
        rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_NOMEM, "cannot create the connection to "
                 "rank %d (memory registration, QP or CQ limits: %s)", c->peer, strerror(errno));
        goto fail;
    }
    rc = RDMA_ERR_XPORT;
    card[0] = '\0';
    if (xp->prm.ev.card_of(xp->prm.ev.arg, c->peer, card, sizeof(card))
        || rdma_verbs_card_parse(vc, card)) {
        rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_PEER, "no valid verbs address for rank %d "
                 "(business card fragment '%s')", c->peer, card);
        goto fail;
    }
    vc->ah = ibv_create_ah(xp->pd, &vc->path);
    if (!vc->ah) {
        rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_PEER, "cannot create an address handle for "
                 "rank %d: %s", c->peer, strerror(errno));
        goto fail;
    }
    *vcp = vc;
    return RDMA_OK;
  fail:
    rdma_verbs_conn_release(vc);
    return rc;
}

void rdma_verbs_timer_arm(rdma_verbs_conn_t * vc, rdma_verbs_cm_t cm)
{
    double now = rdma_verbs_now();

    if (vc->cm != RDMA_VERBS_CM_REQ_SENT && vc->cm != RDMA_VERBS_CM_REP_SENT)
        vc->xp->n_connecting++;
    vc->cm = cm;
    vc->backoff = 0.1;
    vc->t_retx = now + vc->backoff;
    vc->t_deadline = now + vc->xp->prm.timeout;
}

static void rdma_verbs_conn_ready(rdma_verbs_conn_t * vc)
{
    vc->xp->n_connecting--;
    vc->cm = RDMA_VERBS_CM_READY;
    vc->c->state = RDMA_CONN_READY;
    vc->xp->prm.ev.ready(vc->xp->prm.ev.arg, vc->c);
}

/* The peer's REQ or REP is known: pick the mode, hand the pipe's memory to
 * the owner and post the receives (before RTR, so nothing can land
 * before), go RTR + RTS. */
static rdma_status_t rdma_verbs_conn_pair(rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    rdma_xport_t *xp = vc->xp;
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;
    rdma_conn_mem_t mem = { vc->stage.buf, &ctl->tail_word, vc->ring.buf, &ctl->head_word, 0 };
    uint32_t i;

    if (m->ring_size != xp->prm.ring_size || m->chunk_size != xp->prm.chunk_size
        || m->basic != xp->prm.head_writes) {
        rdma_verbs_conn_fail(vc, "rank %d uses another ring geometry or mode (ring %llu, chunk "
                             "%llu)", vc->c->peer, (unsigned long long) m->ring_size,
                             (unsigned long long) m->chunk_size);
        return RDMA_ERR_PEER;
    }
    vc->remote = *m;
    vc->completion = m->basic || !(vc->in_order_local && m->in_order);
    if (m->rd_atomic < vc->max_rd_atomic)
        vc->max_rd_atomic = m->rd_atomic;
    mem.completion_driven = vc->completion;
    xp->flag_polled |= !vc->completion;     /* sticky: see rdma_verbs_wait_arm */
    if (xp->prm.ev.bind(xp->prm.ev.arg, vc->c, &mem)) {
        rdma_verbs_conn_fail(vc, "the channel cannot use the pipe to rank %d", vc->c->peer);
        return RDMA_ERR_PEER;
    }
    for (i = 0; vc->completion && i < vc->rq_depth; i++)
        if (rdma_verbs_rq_post(vc))
            break;
    if ((vc->completion && i < vc->rq_depth) || rdma_verbs_qp_rtr_rts(vc)) {
        rdma_verbs_conn_fail(vc, "cannot connect the QP to rank %d: %s", vc->c->peer,
                             strerror(errno));
        return RDMA_ERR_PEER;
    }
    return RDMA_OK;
}

static void rdma_verbs_cm_req(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_conn_t *c = xp->prm.ev.conn_of(xp->prm.ev.arg, m->src);
    rdma_verbs_conn_t *vc;

    if (!c || (c->priv && c->xport != xp))
        return;
    vc = c->priv;
    if (!vc) {
        if (rdma_verbs_conn_create(xp, c, &vc)) {
            rdma_conn_failed(c, xp->err);
            xp->new_failures++;
            return;
        }
        c->state = RDMA_CONN_CONNECTING;
    }
    switch (vc->cm) {
    case RDMA_VERBS_CM_REQ_SENT:
        if (xp->prm.rank < m->src)
            return;     /* our REQ wins; the peer answers it */
        /* fallthrough */
    case RDMA_VERBS_CM_NONE:
        vc->initiator = 0;
        if (rdma_verbs_conn_pair(vc, m))
            return;
        rdma_verbs_timer_arm(vc, RDMA_VERBS_CM_REP_SENT);
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REP);
        return;
    case RDMA_VERBS_CM_REP_SENT:
    case RDMA_VERBS_CM_READY:
        if (m->qpn == vc->remote.qpn && m->token == vc->remote.token)
            rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REP);
        return;
    case RDMA_VERBS_CM_DEAD:
        return;
    }
}

static void rdma_verbs_cm_rep(rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    if (vc->cm == RDMA_VERBS_CM_REQ_SENT) {
        if (rdma_verbs_conn_pair(vc, m))
            return;
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_RTU);
        rdma_verbs_conn_ready(vc);
    } else if (vc->cm == RDMA_VERBS_CM_READY && vc->initiator && m->qpn == vc->remote.qpn)
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_RTU);
}

void rdma_verbs_cm_dispatch(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_verbs_conn_t *vc;

    if (m->magic != RDMA_VERBS_MAGIC || m->auth != xp->auth) {
        xp->cm_dropped++;
        return;
    }
    if (m->dst != xp->prm.rank || m->src < 0 || m->src >= xp->prm.size)
        return;
    if (m->type == RDMA_VERBS_MSG_REQ) {
        rdma_verbs_cm_req(xp, m);
        return;
    }
    vc = rdma_verbs_conn_lookup(xp, m->echo);
    if (!vc || vc->c->peer != m->src)
        return;
    if (m->type == RDMA_VERBS_MSG_REP)
        rdma_verbs_cm_rep(vc, m);
    else if (m->type == RDMA_VERBS_MSG_RTU && vc->cm == RDMA_VERBS_CM_REP_SENT
             && m->qpn == vc->remote.qpn)
        rdma_verbs_conn_ready(vc);
}

/* Retransmissions, deadlines and implied RTUs of connecting connections. */
void rdma_verbs_timer_run(rdma_xport_t * xp, double now)
{
    uint32_t i;

    for (i = 0; i < xp->nslots && xp->n_connecting > 0; i++) {
        rdma_verbs_conn_t *vc = xp->slots[i];
        if (!vc || (vc->cm != RDMA_VERBS_CM_REQ_SENT && vc->cm != RDMA_VERBS_CM_REP_SENT))
            continue;
        if (vc->rtu_implied && vc->cm == RDMA_VERBS_CM_REP_SENT)
            rdma_verbs_conn_ready(vc);
        else if (now >= vc->t_deadline)
            rdma_verbs_conn_fail(vc, "rank %d did not answer the connection request within "
                                 "%g s (dead peer or unreachable)", vc->c->peer,
                                 xp->prm.timeout);
        else if (now >= vc->t_retx) {
            vc->backoff = vc->backoff < 1.0 ? 2 * vc->backoff : 2.0;
            vc->t_retx = now + vc->backoff;
            rdma_verbs_ud_send(vc, vc->cm == RDMA_VERBS_CM_REQ_SENT ?
                               RDMA_VERBS_MSG_REQ : RDMA_VERBS_MSG_REP);
        }
    }
}
