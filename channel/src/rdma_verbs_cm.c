/*
 * rdma_verbs_cm.c -- the verbs transport: connection manager (rdma_verbs.h).
 * It runs in the channel thread (rdma_verbs_cm_run, the transport's
 * bg_run) with xp->cm_lock held; main enters it only to start a connection
 * (rdma_verbs_cm_connect) and to adopt what it finished (rdma_verbs_adopt).
 *
 * Connection management (UD, mimics a PMI exchange).  The card is
 * "<gid hex>.<lid>.<udqpn>.<port>.<qkey hex>.<auth hex>.<host>".  qkey and
 * auth are drawn at random by open() (getrandom), so only processes that
 * read the job's PMI KVS know them: the CM QP takes datagrams with our QKEY
 * only (bit 31 clear: kernels since 6.4 refuse privileged QKEYs without
 * CAP_NET_RAW), and every CM message carries the 64-bit auth of its
 * destination; one without ours is dropped and counted (stats), never
 * fatal, before anything is looked up or allocated.
 *   connect() creates the connection's memory and QP (INIT) and sends REQ
 * {rank, qpn, psn, ring and ctl addr+rkey, max_rd_atomic, in-order
 * capability, port MTU, and its own address, CM QP, QKEY, auth and host}.
 * The responder's thread gets the object with conn_of(rank) (NULL: the REQ
 * is ignored and the initiator times out), creates the same from the REQ
 * if needed, goes RTR+RTS and answers REP.  The initiator goes RTR+RTS on
 * REP, sends RTU and is READY; the responder is READY on RTU or,
 * completion-driven, on the first receive completion of the connection
 * (the RTU is late or lost and the initiator already writes).  Both use the
 * smaller of the two port MTUs.  READY (or DEAD) connections go on
 * xp->adopt; main binds and reports them (rdma_verbs_adopt).
 *   Simultaneous connects: both sides sent REQ with their existing QP.  The
 * REQ of the lower rank wins: the lower rank ignores the higher rank's REQ,
 * the higher rank answers the lower rank's REQ as a responder, with the QP it
 * already has.  There is exactly one QP per peer, so no duplicates.
 *   UD is unreliable: REQ (initiator) and REP (responder) are retransmitted
 * with exponential backoff; a duplicate REQ is answered with the same REP, a
 * duplicate REP with the same RTU.  A live peer's thread answers within
 * milliseconds whatever its application does, so a peer that does not
 * answer for prm->timeout seconds is dead (process or node gone): the
 * connection fails with RDMA_ERR_PEER and a line naming rank and host.
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
        .send_cq = xp->cm_cq, .recv_cq = xp->cm_cq, .qp_type = IBV_QPT_UD,
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
    return ibv_req_notify_cq(xp->cm_cq, 0) ? RDMA_ERR_XPORT : RDMA_OK;
}

void rdma_verbs_card_format(rdma_xport_t * xp, char *card, size_t len)
{
    char hex[33];
    int i;

    for (i = 0; i < 16; i++)
        sprintf(hex + 2 * i, "%02x", xp->gid.raw[i]);
    snprintf(card, len, "%s.%u.%u.%u.%x.%016llx.%s", hex, xp->pattr.lid, xp->ud->qp_num,
             xp->port, xp->qkey, (unsigned long long) xp->auth, xp->host);
}

/* Card -> the peer's address, CM QP, QKEY, auth and host. */
rdma_status_t rdma_verbs_card_parse(const char *card, rdma_verbs_peer_t * p)
{
    unsigned lid, qpn, port, qkey, b, i;
    unsigned long long auth;
    char hex[33];

    memset(p, 0, sizeof(*p));
    if (sscanf(card, "%32[0-9a-f].%u.%u.%u.%x.%llx.%63s", hex, &lid, &qpn, &port, &qkey, &auth,
               p->host) != 7 || strlen(hex) != 32)
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
    return RDMA_OK;
}

/* A REQ -> the same facts about its sender. */
static void rdma_verbs_msg_peer(const rdma_verbs_msg_t * m, rdma_verbs_peer_t * p)
{
    memset(p, 0, sizeof(*p));
    memcpy(p->gid, m->gid, sizeof(p->gid));
    p->lid = m->lid;
    p->udqpn = m->udqpn;
    p->qkey = m->qkey;
    p->auth = m->src_auth;
    snprintf(p->host, sizeof(p->host), "%.*s", (int) sizeof(m->host) - 1, m->host);
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
    memcpy(m->gid, xp->gid.raw, sizeof(m->gid));
    m->udqpn = xp->ud->qp_num;
    m->qkey = xp->qkey;
    m->lid = xp->pattr.lid;
    m->mtu = (uint8_t) xp->pattr.active_mtu;
    m->src_auth = xp->auth;
    snprintf(m->host, sizeof(m->host), "%s", xp->host);
}

/* Poll the CM CQ: send slots come back, datagrams are dispatched. */
static void rdma_verbs_cm_poll(rdma_xport_t * xp)
{
    struct ibv_wc wc[RDMA_VERBS_POLL_BATCH];
    int i, n;

    while ((n = ibv_poll_cq(xp->cm_cq, RDMA_VERBS_POLL_BATCH, wc)) > 0) {
        for (i = 0; i < n; i++) {
            uint32_t b = (uint32_t) wc[i].wr_id;
            if (b >= RDMA_VERBS_UD_NRECV) {
                xp->ud_send_free++;
                continue;
            }
            if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= RDMA_VERBS_GRH +
                sizeof(rdma_verbs_msg_t))
                rdma_verbs_cm_dispatch(xp, (const rdma_verbs_msg_t *)
                                       (rdma_verbs_ud_slot(xp, b) + RDMA_VERBS_GRH));
            rdma_verbs_ud_post_recv(xp, b);
        }
    }
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
        rdma_verbs_cm_poll(xp);
    if (!xp->ud_send_free)
        return;
    rdma_verbs_msg_fill(vc, (rdma_verbs_msg_t *) rdma_verbs_ud_slot(xp, i), type);
    if (!ibv_post_send(xp->ud, &wr, &bad)) {
        xp->ud_send_next++;
        xp->ud_send_free--;
    }
}

/* --------------------------------------------------- handing to main */

void rdma_verbs_fd_poke(int fd)
{
    uint64_t one = 1;

    while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

/* vc is READY or DEAD: main adopts it at its next progress. */
static void rdma_verbs_adopt_push(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;

    vc->next_adopt = xp->adopt;
    xp->adopt = vc;
    __atomic_store_n(&xp->n_adopt, xp->n_adopt + 1, __ATOMIC_RELAXED);
    rdma_verbs_fd_poke(xp->wake_fd);
}

/* The CM gives up on a connecting vc; main reports it.  [cm] */
static void __attribute__((format(printf, 2, 3)))
rdma_verbs_conn_doom(rdma_verbs_conn_t * vc, const char *fmt, ...)
{
    va_list ap;

    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        vc->xp->n_connecting--;
    vc->cm = RDMA_VERBS_CM_DEAD;
    va_start(ap, fmt);
    vsnprintf(vc->why, sizeof(vc->why), fmt, ap);
    va_end(ap);
    rdma_verbs_adopt_push(vc);
}

/* Main found vc dead (a failed completion or post).  [main] */
void __attribute__((format(printf, 2, 3)))
rdma_verbs_conn_fail(rdma_verbs_conn_t * vc, const char *fmt, ...)
{
    rdma_xport_t *xp = vc->xp;
    va_list ap;

    pthread_mutex_lock(&xp->cm_lock);
    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        xp->n_connecting--;
    vc->cm = RDMA_VERBS_CM_DEAD;
    pthread_mutex_unlock(&xp->cm_lock);
    if (vc->c->state == RDMA_CONN_FAILED || vc->c->state == RDMA_CONN_CLOSED)
        return;                 /* reported once; after quiesce() not at all */
    xp->new_failures++;
    va_start(ap, fmt);
    vsnprintf(xp->err, sizeof(xp->err), fmt, ap);
    va_end(ap);
    rdma_conn_failed(vc->c, xp->err);
}

/* Bind and report what the CM finished.  [main] */
static void rdma_verbs_adopt_one(rdma_xport_t * xp, rdma_verbs_conn_t * vc)
{
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;
    rdma_conn_mem_t mem = { vc->stage.buf, &ctl->tail_word, vc->ring.buf, &ctl->head_word,
        vc->completion
    };
    rdma_conn_t *c = vc->c;

    c->ops = &rdma_xport_verbs;
    c->xport = xp;
    if (c->state == RDMA_CONN_FAILED)
        return;
    if (vc->cm == RDMA_VERBS_CM_DEAD) {
        xp->new_failures++;
        snprintf(xp->err, sizeof(xp->err), "%s", vc->why);
        rdma_conn_failed(c, vc->why);
        return;
    }
    if (xp->prm.ev.bind(xp->prm.ev.arg, c, &mem)) {
        rdma_verbs_conn_fail(vc, "the channel cannot use the pipe to rank %d", c->peer);
        return;
    }
    vc->adopted = 1;
    xp->flag_polled |= !vc->completion;     /* sticky: see rdma_verbs_wait_arm */
    if (vc->early)
        xp->prm.ev.landed(c, vc->early);
    c->state = RDMA_CONN_READY;
    xp->prm.ev.ready(xp->prm.ev.arg, c);
}

void rdma_verbs_adopt(rdma_xport_t * xp)
{
    rdma_verbs_conn_t *list, *vc, *rev = NULL;

    pthread_mutex_lock(&xp->cm_lock);
    list = xp->adopt;
    xp->adopt = NULL;
    __atomic_store_n(&xp->n_adopt, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&xp->cm_lock);
    while ((vc = list)) {       /* oldest first */
        list = vc->next_adopt;
        vc->next_adopt = rev;
        rev = vc;
    }
    while ((vc = rev)) {
        rev = vc->next_adopt;
        vc->next_adopt = NULL;
        rdma_verbs_adopt_one(xp, vc);
    }
}

/* --------------------------------------------------------- connections */

static void rdma_verbs_timer_arm(rdma_verbs_conn_t * vc, rdma_verbs_cm_t cm)
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
    rdma_verbs_adopt_push(vc);
}

enum ibv_mtu rdma_verbs_mtu_pick(enum ibv_mtu local, unsigned remote)
{
    if (remote < IBV_MTU_256 || remote > IBV_MTU_4096)
        return local;           /* not given: our own */
    return remote < (unsigned) local ? (enum ibv_mtu) remote : local;
}

/* The peer's REQ or REP is known: pick the mode and MTU, post the receives
 * (before RTR, so nothing can land before), go RTR + RTS. */
static rdma_status_t rdma_verbs_conn_pair(rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    rdma_xport_t *xp = vc->xp;
    uint32_t i;

    if (m->ring_size != xp->prm.ring_size || m->chunk_size != xp->prm.chunk_size
        || m->basic != xp->prm.head_writes) {
        rdma_verbs_conn_doom(vc, "rank %d on %s uses another ring geometry or mode (ring %llu, "
                             "chunk %llu)", vc->c->peer, vc->host,
                             (unsigned long long) m->ring_size,
                             (unsigned long long) m->chunk_size);
        return RDMA_ERR_PEER;
    }
    vc->remote = *m;
    vc->completion = m->basic || !(vc->in_order_local && m->in_order);
    if (m->rd_atomic < vc->max_rd_atomic)
        vc->max_rd_atomic = m->rd_atomic;
    vc->mtu = rdma_verbs_mtu_pick(xp->pattr.active_mtu, m->mtu);
    for (i = 0; vc->completion && i < vc->rq_depth; i += RDMA_VERBS_RQ_BATCH)
        if (rdma_verbs_rq_post(vc, RDMA_VERBS_RQ_BATCH < vc->rq_depth - i ?
                               RDMA_VERBS_RQ_BATCH : vc->rq_depth - i))
            break;
    if ((vc->completion && i < vc->rq_depth) || rdma_verbs_qp_rtr_rts(vc)) {
        rdma_verbs_conn_doom(vc, "cannot connect the QP to rank %d on %s: %s", vc->c->peer,
                             vc->host, strerror(errno));
        return RDMA_ERR_PEER;
    }
    return RDMA_OK;
}

/* A REQ from a peer we have no connection to: make one from the REQ.  A
 * failure is reported to main through a DEAD connection. */
static rdma_verbs_conn_t *rdma_verbs_cm_accept(rdma_xport_t * xp, rdma_conn_t * c,
                                               const rdma_verbs_msg_t * m)
{
    rdma_verbs_peer_t peer;
    rdma_verbs_conn_t *vc;
    char why[RDMA_MSG_LEN];

    rdma_verbs_msg_peer(m, &peer);
    if (rdma_verbs_conn_create(xp, c, &peer, &vc, why, sizeof(why)) == RDMA_OK)
        return vc;
    xp->cm_refused++;
    snprintf(xp->cm_why, sizeof(xp->cm_why), "%s", why);
    return NULL;
}

static void rdma_verbs_cm_req(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_conn_t *c = xp->prm.ev.conn_of(xp->prm.ev.arg, m->src);
    rdma_verbs_conn_t *vc;

    if (!c)
        return;         /* conn_of: c is served by this transport */
    vc = c->priv ? c->priv : rdma_verbs_cm_accept(xp, c, m);
    if (!vc)
        return;
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

/* Main: the first arrival on a responder's connection implies the RTU. */
void rdma_verbs_rtu_implied(rdma_verbs_conn_t * vc)
{
    pthread_mutex_lock(&vc->xp->cm_lock);
    if (vc->cm == RDMA_VERBS_CM_REP_SENT)
        rdma_verbs_conn_ready(vc);
    pthread_mutex_unlock(&vc->xp->cm_lock);
}

/* Retransmissions and deadlines of connecting connections; returns the
 * next time something is due (0: nothing connecting). */
static double rdma_verbs_timer_run(rdma_xport_t * xp, double now)
{
    double next = 0;
    uint32_t i;

    for (i = 0; i < xp->nslots && xp->n_connecting > 0; i++) {
        rdma_verbs_conn_t *vc = xp->slots[i];
        if (!vc || (vc->cm != RDMA_VERBS_CM_REQ_SENT && vc->cm != RDMA_VERBS_CM_REP_SENT))
            continue;
        if (now >= vc->t_deadline) {
            rdma_verbs_conn_doom(vc, "rank %d on %s did not answer the connection request "
                                 "within %g s (process or node gone, or unreachable)",
                                 vc->c->peer, vc->host, xp->prm.timeout);
            continue;
        }
        if (now >= vc->t_retx) {
            vc->backoff = vc->backoff < 1.0 ? 2 * vc->backoff : 2.0;
            vc->t_retx = now + vc->backoff;
            rdma_verbs_ud_send(vc, vc->cm == RDMA_VERBS_CM_REQ_SENT ?
                               RDMA_VERBS_MSG_REQ : RDMA_VERBS_MSG_REP);
        }
        if (next == 0 || vc->t_retx < next)
            next = vc->t_retx;
        if (vc->t_deadline < next)
            next = vc->t_deadline;
    }
    return next;
}

/* The channel thread's entry (bg_run): drain our fds, re-arm the CM CQ
 * event, then handle every datagram and timer. */
double rdma_verbs_cm_run(void *arg, double now)
{
    rdma_xport_t *xp = arg;
    struct ibv_cq *cq;
    void *ctx;
    uint64_t n;
    double next;

    pthread_mutex_lock(&xp->cm_lock);
    while (read(xp->kick_fd, &n, sizeof(n)) > 0)
        ;
    while (ibv_get_cq_event(xp->cm_chan, &cq, &ctx) == 0)
        ibv_ack_cq_events(cq, 1);
    ibv_req_notify_cq(xp->cm_cq, 0);
    rdma_verbs_cm_poll(xp);
    next = rdma_verbs_timer_run(xp, now);
    pthread_mutex_unlock(&xp->cm_lock);
    return next;
}

/* Main: start connecting to c->peer (its card read before the lock: PMI
 * may take long). */
rdma_status_t rdma_verbs_cm_connect(rdma_xport_t * xp, rdma_conn_t * c)
{
    rdma_verbs_peer_t peer;
    rdma_verbs_conn_t *vc;
    char card[256] = "";
    rdma_status_t st;

    if (xp->prm.ev.card_of(xp->prm.ev.arg, c->peer, card, sizeof(card))
        || rdma_verbs_card_parse(card, &peer))
        return rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_PEER, "no valid verbs address for "
                        "rank %d (business card fragment '%s')", c->peer, card);
    c->ops = &rdma_xport_verbs;
    c->xport = xp;
    pthread_mutex_lock(&xp->cm_lock);
    vc = c->priv;
    if (vc) {   /* the peer connected to us first */
        st = vc->cm == RDMA_VERBS_CM_DEAD ? RDMA_ERR_PEER : RDMA_OK;
    } else if ((st = rdma_verbs_conn_create(xp, c, &peer, &vc, xp->err, sizeof(xp->err)))
               == RDMA_OK) {
        vc->initiator = 1;
        rdma_verbs_timer_arm(vc, RDMA_VERBS_CM_REQ_SENT);
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REQ);
        rdma_verbs_fd_poke(xp->kick_fd);        /* the thread arms the timers */
    }
    pthread_mutex_unlock(&xp->cm_lock);
    if (st == RDMA_OK && c->state == RDMA_CONN_IDLE)
        c->state = RDMA_CONN_CONNECTING;
    return st;
}
