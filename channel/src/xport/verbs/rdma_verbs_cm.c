/*
 * rdma_verbs_cm.c -- the verbs transport: connection manager (rdma_verbs.h).
 * It runs in the channel thread (rdma_verbs_cm_run, the transport's
 * bg_run) with xp->cm_lock held; main enters it only to start a connection
 * (rdma_verbs_cm_connect), to hand it REQs from outside the job
 * (rdma_verbs_cm_parked) and to adopt what it finished (rdma_verbs_adopt,
 * at the end of this file).
 *
 * Connection management (UD, mimics a PMI exchange; the UD QP is made in
 * rdma_verbs_dev.c, cards are read in rdma_verbs_conn.c).  qkey and
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
 * (the RTU is late or lost and the initiator already writes; a
 * self-verifying frame raises none, and REP's retransmission brings the
 * RTU again, as with flag polling).  Both use the
 * smaller of the two port MTUs.  READY (or DEAD) connections go on
 * xp->adopt; main binds and reports them (rdma_verbs_adopt).
 *   Simultaneous connects: both sides sent REQ with their existing QP.  The
 * REQ of the lower rank wins: the lower rank ignores the higher rank's REQ,
 * the higher rank answers the lower rank's REQ as a responder, with the QP it
 * already has.  There is exactly one QP per peer, so no duplicates.
 *   Connecting again (the owner closed the connection, rdma_chan_evict.c):
 * the peer's main may still hold its old one, READY here, until it polls
 * again; the thread answers such a new REQ with WAIT, which extends the
 * initiator's deadline (the peer is alive), and as usual once main closed
 * the old one (close() clears c->priv under cm_lock).
 *   The owner's cap (ev.admit, rdma_chan_evict.c): a side pairs only once
 * its owner admitted the connection, the responder on the REQ, the
 * initiator on the REP; one not admitted answers WAIT, and the other
 * side asks again (after 1 ms, the gap doubling up to 0.1 s), its
 * deadline extended.  (The owner takes its slot before connecting to a
 * higher rank, after the peer's admission when connecting to a lower one:
 * slots are taken lower rank first, so waits for them cannot form a
 * cycle.)
 *   UD is unreliable: REQ (initiator) and REP (responder) are retransmitted
 * with exponential backoff; a duplicate REQ is answered with the same REP, a
 * duplicate REP with the same RTU.  A live peer's thread answers within
 * milliseconds whatever its application does, so a peer that does not
 * answer for vp.timeout seconds is dead (process or node gone): the
 * connection fails with RDMA_ERR_PEER and a line naming rank and host.
 *   Peers outside the job (dynamic processes; ids from prm.size up): their
 * messages carry dyn and a REQ the connector's hello.  The thread cannot
 * ask the owner who that is (ev.accept may call into MPICH), so it parks
 * the REQ and wakes main, whose progress asks (rdma_verbs_cm_parked) and
 * then handles the REQ as above, under cm_lock; a REQ the owner refuses
 * gets a REJ, one it does not know yet (RDMA_CONN_LATER) stays parked.  A
 * repeated REQ of a connection already made is answered by the thread
 * (rdma_verbs_cm_known): the owner is asked once per connection.
 * Simultaneous connects: the smaller hello wins.  REP, RTU and REJ are
 * matched by the connection tokens (echo) and the dyn mark.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* -------------------------------------------------------------- CM (UD) */

static void rdma_verbs_cm_answer(rdma_xport_t * xp, const rdma_verbs_msg_t * m, int type,
                                 const char *why);

static void rdma_verbs_cm_reject(rdma_xport_t * xp, const rdma_verbs_msg_t * m,
                                 const char *why)
{
    xp->cm_refused++;
    snprintf(xp->cm_why, sizeof(xp->cm_why), "%s", why);
    rdma_verbs_cm_answer(xp, m, RDMA_VERBS_MSG_REJ, why);
}

static void rdma_verbs_msg_fill(rdma_verbs_conn_t * vc, rdma_verbs_msg_t * m, int type)
{
    rdma_xport_t *xp = vc->xp;

    memset(m, 0, sizeof(*m));
    m->h.magic = RDMA_VERBS_MAGIC;
    m->h.version = RDMA_WIRE_VERSION;
    m->h.auth = vc->peer_auth;
    m->h.type = (uint8_t) type;
    /* bit 0: our QP places writes in order; bit 1: we may verify frames */
    m->in_order = (uint8_t) (vc->in_order_local | !xp->vp.force_completion << 1);
    m->rd_atomic = (uint8_t) vc->max_rd_atomic;
    m->basic = (uint8_t) xp->prm.head_writes;
    m->src = xp->prm.rank;
    m->dst = vc->c->peer;
    m->qpn = vc->qp->qp_num;
    m->psn = vc->psn;
    m->h.token = vc->token;
    m->h.echo = vc->remote.h.token;
    m->ring_addr = vc->ring_addr0;
    m->ring_rkey = vc->ring_rkey0;
    m->ctl_addr = (uintptr_t) vc->ctl.buf;
    m->ctl_rkey = vc->ctl.mr->rkey;
    m->ring_size = xp->prm.ring_size;
    m->chunk_size = xp->prm.chunk_size;
    m->ring_max = xp->prm.ring_max;
    m->max_frame = xp->prm.max_frame;
    memcpy(m->h.gid, xp->gid.raw, sizeof(m->h.gid));
    m->h.udqpn = xp->ud->qp_num;
    m->h.qkey = xp->qkey;
    m->h.lid = xp->pattr.lid;
    m->mtu = (uint8_t) xp->pattr.active_mtu;
    m->h.src_auth = xp->auth;
    m->h.pid = (uint32_t) getpid();
    snprintf(m->h.host, sizeof(m->h.host), "%s", xp->host);
    m->h.dyn = vc->c->peer >= xp->prm.size;
    if (m->h.dyn && type == RDMA_VERBS_MSG_REQ)
        snprintf(m->hello, sizeof(m->hello), "%s", vc->c->hello ? vc->c->hello : "");
}

/* The bytes that count of a message: a dyn one's or a REJ's string too. */
static uint32_t rdma_verbs_msg_len(const rdma_verbs_msg_t * m)
{
    return (uint32_t) (RDMA_VERBS_MSG_MIN + (m->h.dyn || m->h.type == RDMA_VERBS_MSG_REJ ?
                                             strlen(m->hello) + 1 : 0));
}

/* Received datagram b of len bytes (GRH included): its hello ends within
 * (the slot holds a whole message and more, see the assertion). */
static const rdma_verbs_msg_t *rdma_verbs_msg_at(rdma_xport_t * xp, uint32_t b, uint32_t len)
{
    rdma_verbs_msg_t *m = (rdma_verbs_msg_t *) (rdma_verbs_ud_slot(xp, b) + RDMA_VERBS_GRH);

    len -= RDMA_VERBS_GRH;
    ((char *) m)[len < sizeof(*m) ? len : sizeof(*m) - 1] = '\0';
    return m;
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
                RDMA_VERBS_MSG_MIN)
                rdma_verbs_cm_dispatch(xp, rdma_verbs_msg_at(xp, b, wc[i].byte_len));
            rdma_verbs_ud_post_recv(xp, b);
        }
    }
}

/* Send m to the CM QP qpn behind ah.  Best effort: a message lost here
 * is retransmitted by the timers. */
static void rdma_verbs_ud_post(rdma_xport_t * xp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
                               const rdma_verbs_msg_t * m)
{
    uint32_t i = RDMA_VERBS_UD_NRECV + xp->ud_send_next % RDMA_VERBS_UD_NSEND;
    struct ibv_sge sge = {
        .addr = (uintptr_t) rdma_verbs_ud_slot(xp, i), .length = rdma_verbs_msg_len(m),
        .lkey = xp->udm.mr->lkey
    };
    struct ibv_send_wr wr = {
        .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.ud = {.ah = ah, .remote_qpn = qpn, .remote_qkey = qkey}
    }, *bad;

    if (!xp->ud_send_free)
        rdma_verbs_cm_poll(xp);
    if (!xp->ud_send_free)
        return;
    memcpy(rdma_verbs_ud_slot(xp, i), m, sge.length);
    if (!ibv_post_send(xp->ud, &wr, &bad)) {
        xp->ud_send_next++;
        xp->ud_send_free--;
    }
}

void rdma_verbs_ud_send(rdma_verbs_conn_t * vc, int type)
{
    rdma_verbs_msg_t m;

    rdma_verbs_msg_fill(vc, &m, type);
    rdma_verbs_ud_post(vc->xp, vc->ah, vc->peer_udqpn, vc->peer_qkey, &m);
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

/* --------------------------------------------------------- connections */

static void rdma_verbs_timer_arm(rdma_verbs_conn_t * vc, rdma_verbs_cm_t cm)
{
    double now = rdma_verbs_now();

    if (vc->cm != RDMA_VERBS_CM_REQ_SENT && vc->cm != RDMA_VERBS_CM_REP_SENT)
        vc->xp->n_connecting++;
    vc->cm = cm;
    vc->backoff = 0.1;
    vc->wait_gap = 0;
    vc->t_retx = now + vc->backoff;
    vc->t_deadline = now + vc->xp->vp.timeout;
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

    vc->remote = *m;    /* also for a doomed one: a repeated REQ is known */
    if (m->ring_size != xp->prm.ring_size || m->chunk_size != xp->prm.chunk_size
        || m->ring_max != xp->prm.ring_max || m->basic != xp->prm.head_writes) {
        rdma_verbs_conn_doom(vc, "%s on %s uses another ring geometry or mode (ring %llu "
                             "up to %llu, chunk %llu)", vc->who, vc->host,
                             (unsigned long long) m->ring_size,
                             (unsigned long long) m->ring_max,
                             (unsigned long long) m->chunk_size);
        return RDMA_ERR_PEER;
    }
    vc->completion = m->basic || !(vc->in_order_local && (m->in_order & 1));
    /* both ends compute the same: neither forced write with immediate */
    vc->verify = vc->completion && !m->basic && !xp->vp.force_completion
        && (m->in_order & 2);
    if (m->rd_atomic < vc->max_rd_atomic)
        vc->max_rd_atomic = m->rd_atomic;
    vc->mtu = rdma_verbs_mtu_pick(xp->pattr.active_mtu, m->mtu);
    if (rdma_verbs_cq_reserve(vc)) {
        rdma_verbs_conn_doom(vc, "no room in the completion queue for the connection to %s "
                             "on %s (%d entries in use, the device allows %d)", vc->who,
                             vc->host, xp->cq_need, xp->dev.max_cqe);
        return RDMA_ERR_NOMEM;
    }
    if ((vc->completion && rdma_verbs_rq_fill(vc)) || rdma_verbs_qp_rtr_rts(vc)) {
        rdma_verbs_conn_doom(vc, "cannot connect the QP to %s on %s: %s", vc->who,
                             vc->host, strerror(errno));
        return RDMA_ERR_PEER;
    }
    return RDMA_OK;
}

/* The peer answered our REQ (or REP) with WAIT: it is alive but holds
 * its old connection to us, or is at its cap; or it answered, and our
 * owner has no slot yet.  Ask again soon (a slot goes to whoever asks
 * first): 1 ms after the first WAIT, the gap doubling up to 0.1 s.  A slot
 * that frees within milliseconds (a close handshake) is then taken within
 * about as long, where a fixed 0.1 s made every evict-and-reopen cost
 * 70-185 ms in the test bed; a long wait still costs the peer at most ten
 * REQs a second.  The deadline is extended past the next ask. */
static void rdma_verbs_cm_wait(rdma_verbs_conn_t * vc)
{
    vc->wait_gap = vc->wait_gap > 0 ? 2 * vc->wait_gap : RDMA_VERBS_WAIT_FIRST;
    if (vc->wait_gap > RDMA_VERBS_WAIT_MAX)
        vc->wait_gap = RDMA_VERBS_WAIT_MAX;
    vc->backoff = vc->wait_gap;
    vc->t_retx = rdma_verbs_now() + vc->backoff;
    vc->t_deadline = vc->t_retx + vc->xp->vp.timeout;
}

/* Before c pairs on the peer's REQ or REP: does the owner admit it (its
 * cap, ev.admit)?  If not, the peer is answered WAIT: it stays alive and
 * asks again. */
static int rdma_verbs_cm_admit(rdma_xport_t * xp, rdma_conn_t * c, const rdma_verbs_msg_t * m)
{
    if (rdma_xport_admit(&xp->prm.ev, c, 1))
        return 1;
    rdma_verbs_cm_answer(xp, m, RDMA_VERBS_MSG_WAIT, "");
    return 0;
}

/* A REQ from a peer we have no connection to: make one from the REQ, if
 * the owner admits it.  A failure (slots, memory, QP or CQ limits) is
 * REJected with the reason. */
static rdma_verbs_conn_t *rdma_verbs_cm_accept(rdma_xport_t * xp, rdma_conn_t * c,
                                               const rdma_verbs_msg_t * m)
{
    rdma_verbs_peer_t peer;
    rdma_verbs_conn_t *vc;
    char why[RDMA_MSG_LEN];

    if (!rdma_verbs_cm_admit(xp, c, m))
        return NULL;
    rdma_verbs_msg_peer(m, &peer);
    if (rdma_verbs_conn_create(xp, c, &peer, &vc, why, sizeof(why)) == RDMA_OK)
        return vc;
    rdma_xport_admit(&xp->prm.ev, c, 0);
    rdma_verbs_cm_reject(xp, m, why);
    return NULL;
}

/* Simultaneous connects: does our REQ win over the peer's m?  The lower
 * rank's, or outside the job the smaller hello's. */
static int rdma_verbs_req_ours_wins(rdma_xport_t * xp, rdma_verbs_conn_t * vc,
                                    const rdma_verbs_msg_t * m)
{
    if (m->h.dyn)
        return strcmp(vc->c->hello ? vc->c->hello : "", m->hello) < 0;
    return xp->prm.rank < m->src;
}

/* A REQ for c (conn_of, or the owner's accept; NULL: ignored). */
static void rdma_verbs_cm_req(rdma_xport_t * xp, rdma_conn_t * c, const rdma_verbs_msg_t * m)
{
    rdma_verbs_conn_t *vc;

    if (!c)
        return;
    vc = c->priv ? c->priv : rdma_verbs_cm_accept(xp, c, m);
    if (!vc)
        return;
    switch (vc->cm) {
    case RDMA_VERBS_CM_REQ_SENT:
        if (rdma_verbs_req_ours_wins(xp, vc, m))
            return;     /* the peer answers ours */
        /* fallthrough */
    case RDMA_VERBS_CM_NONE:
        if (!rdma_verbs_cm_admit(xp, c, m)) {
            if (vc->cm == RDMA_VERBS_CM_REQ_SENT)
                rdma_verbs_cm_wait(vc); /* the peer is alive; our slot is awaited */
            return;
        }
        vc->initiator = 0;
        if (rdma_verbs_conn_pair(vc, m)) {
            rdma_verbs_cm_reject(xp, m, vc->why);       /* the initiator learns why */
            return;
        }
        rdma_verbs_timer_arm(vc, RDMA_VERBS_CM_REP_SENT);
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REP);
        return;
    case RDMA_VERBS_CM_REP_SENT:
    case RDMA_VERBS_CM_READY:
        if (m->qpn == vc->remote.qpn && m->h.token == vc->remote.h.token)
            rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REP);
        else if (vc->cm == RDMA_VERBS_CM_READY && !m->h.dyn)
            rdma_verbs_cm_answer(xp, m, RDMA_VERBS_MSG_WAIT, "");       /* evicted there */
        return;
    case RDMA_VERBS_CM_DEAD:
        return;
    }
}

static void rdma_verbs_cm_rep(rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    if (vc->cm == RDMA_VERBS_CM_REQ_SENT) {
        if (!rdma_verbs_cm_admit(vc->xp, vc->c, m)) {
            rdma_verbs_cm_wait(vc);     /* the peer is alive; our slot is awaited */
            return;
        }
        if (rdma_verbs_conn_pair(vc, m))
            return;
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_RTU);
        rdma_verbs_conn_ready(vc);
    } else if (vc->cm == RDMA_VERBS_CM_READY && vc->initiator && m->qpn == vc->remote.qpn)
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_RTU);
}

/* --------------------------------------------- peers outside the job */

/* Two copies of one REQ: the same connection token and QP from the same
 * process (its auth and CM QP) at the same port address: tokens and QPNs
 * repeat across hosts and processes. */
static int rdma_verbs_same_req(const rdma_verbs_msg_t * a, const rdma_verbs_msg_t * b)
{
    return a->h.token == b->h.token && a->qpn == b->qpn && a->h.src_auth == b->h.src_auth
        && a->h.udqpn == b->h.udqpn && a->h.lid == b->h.lid
        && !memcmp(a->h.gid, b->h.gid, sizeof(a->h.gid));
}

/* The connection made from an earlier copy of the REQ m, if any. */
static rdma_verbs_conn_t *rdma_verbs_cm_known(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    uint32_t i;

    for (i = 0; i < xp->nslots; i++) {
        rdma_verbs_conn_t *vc = xp->slots[i];
        if (vc && vc->c->peer >= xp->prm.size && rdma_verbs_same_req(&vc->remote, m))
            return vc;
    }
    return NULL;
}

/* Park the REQ m for main (a repeated one refreshes its entry; a full
 * table drops it: the connector repeats it). */
static void rdma_verbs_cm_park(rdma_xport_t * xp, const rdma_verbs_msg_t * m, double t_expire)
{
    int i;

    for (i = 0; i < xp->n_parked && !rdma_verbs_same_req(&xp->parked[i].m, m); i++)
        ;
    if (i == RDMA_VERBS_PARK)
        return;
    xp->parked[i].m = *m;
    xp->parked[i].t_expire = t_expire;
    if (i == xp->n_parked)
        __atomic_store_n(&xp->n_parked, i + 1, __ATOMIC_RELAXED);
    rdma_verbs_fd_poke(xp->wake_fd);
}

/* The address handle for a REJ to peer (see rej_ah); NULL: none now (the
 * connector repeats its REQ, or times out). */
static struct ibv_ah *rdma_verbs_rej_ah(rdma_xport_t * xp, const rdma_verbs_peer_t * peer)
{
    struct rdma_verbs_rej_ah *e;
    struct ibv_ah_attr path;
    struct ibv_ah *ah;
    int i;

    for (i = 0; i < xp->n_rej_ah; i++)
        if (xp->rej_ah[i].lid == peer->lid && !memcmp(xp->rej_ah[i].gid, peer->gid, 16))
            return xp->rej_ah[i].ah;
    if (xp->n_rej_ah == RDMA_VERBS_REJ_AH && xp->ud_send_free < RDMA_VERBS_UD_NSEND)
        return NULL;
    rdma_verbs_path_of(xp, peer, &path);
    if (!(ah = ibv_create_ah(xp->pd, &path)))
        return NULL;
    if (xp->n_rej_ah < RDMA_VERBS_REJ_AH)
        e = &xp->rej_ah[xp->n_rej_ah++];
    else {
        e = &xp->rej_ah[xp->rej_next++ % RDMA_VERBS_REJ_AH];
        ibv_destroy_ah(e->ah);
    }
    memcpy(e->gid, peer->gid, 16);
    e->lid = peer->lid;
    e->ah = ah;
    return ah;
}

/* Answer the REQ m with a head only: REJ (refused: why; counted by
 * rdma_verbs_cm_reject, the last why is in the statistics) or WAIT (the
 * connection it replaces is still closing here: its connector waits
 * longer).  Only m's head is read: m may be of another wire version,
 * whose connector reads only our REJ's head. */
static void rdma_verbs_cm_answer(rdma_xport_t * xp, const rdma_verbs_msg_t * m, int type,
                                 const char *why)
{
    rdma_verbs_msg_t r = {.h = {.magic = RDMA_VERBS_MAGIC, .version = RDMA_WIRE_VERSION,
                                .type = (uint8_t) type, .dyn = m->h.dyn,
                                .auth = m->h.src_auth, .echo = m->h.token,
                                .src_auth = xp->auth, .pid = (uint32_t) getpid()},
    .src = xp->prm.rank
    };
    rdma_verbs_peer_t peer;
    struct ibv_ah *ah;

    rdma_verbs_msg_peer(m, &peer);
    if (!(ah = rdma_verbs_rej_ah(xp, &peer)))
        return;
    snprintf(r.h.host, sizeof(r.h.host), "%s", xp->host);
    snprintf(r.hello, sizeof(r.hello), "%s", why);
    rdma_verbs_ud_post(xp, ah, peer.udqpn, peer.qkey, &r);
}

/* Main, under cm_lock: the owner gave c for the REQ m.  c is ours from now
 * (closed by close() whatever its state); a connection that cannot be made
 * fails c, so the owner forgets it, with the reason the REJ carried (also
 * what error() says after progress() reports it). */
static void rdma_verbs_cm_req_dyn(rdma_xport_t * xp, rdma_conn_t * c, const rdma_verbs_msg_t * m)
{
    c->ops = &rdma_xport_verbs;
    c->xport = xp;
    rdma_verbs_cm_req(xp, c, m);
    if (!c->priv && c->state != RDMA_CONN_FAILED) {
        snprintf(xp->err, sizeof(xp->err), "%s", xp->cm_why);
        rdma_conn_failed(c, xp->err);
        xp->new_failures++;
    }
}

/* Main: ask the owner about each parked REQ (outside cm_lock), then
 * answer it as a REQ of that connection, refuse it, or park it again. */
void rdma_verbs_cm_parked(rdma_xport_t * xp)
{
    struct rdma_verbs_parked p[RDMA_VERBS_PARK];
    double now = rdma_verbs_now();
    rdma_verbs_conn_t *vc;
    int i, n = 0;
    rdma_conn_t *c;

    pthread_mutex_lock(&xp->cm_lock);
    for (i = 0; i < xp->n_parked; i++)
        if ((vc = rdma_verbs_cm_known(xp, &xp->parked[i].m)))
            rdma_verbs_cm_req(xp, vc->c, &xp->parked[i].m);
        else if (now < xp->parked[i].t_expire)
            p[n++] = xp->parked[i];
    __atomic_store_n(&xp->n_parked, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&xp->cm_lock);
    for (i = 0; i < n; i++) {
        c = xp->prm.ev.accept(xp->prm.ev.arg, p[i].m.hello);
        pthread_mutex_lock(&xp->cm_lock);
        if (c == RDMA_CONN_LATER)
            rdma_verbs_cm_park(xp, &p[i].m, p[i].t_expire);
        else if (!c)
            rdma_verbs_cm_reject(xp, &p[i].m, "its owner does not know this process, or the "
                                 "port's token is wrong");
        else
            rdma_verbs_cm_req_dyn(xp, c, &p[i].m);
        pthread_mutex_unlock(&xp->cm_lock);
    }
}

/* Is m from vc's peer?  In the job its rank; outside it the dyn mark
 * (the tokens matched already). */
static int rdma_verbs_msg_from(const rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    return vc->c->peer >= vc->xp->prm.size ? m->h.dyn : !m->h.dyn && m->src == vc->c->peer;
}

/* A message of another wire version: only its head is read.  A REQ gets a
 * REJ; a REJ of our REQ fails that connection, naming both versions. */
static void rdma_verbs_cm_version(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_verbs_conn_t *vc;
    char why[RDMA_MSG_LEN];

    if (m->h.type == RDMA_VERBS_MSG_REQ) {
        snprintf(why, sizeof(why), "process %u on %.*s runs ch3:rdma wire version %u, this "
                 "process on %s version %u", (unsigned) m->h.pid, (int) sizeof(m->h.host) - 1,
                 m->h.host, (unsigned) m->h.version, xp->host, RDMA_WIRE_VERSION);
        rdma_verbs_cm_reject(xp, m, why);
    } else if (m->h.type == RDMA_VERBS_MSG_REJ && (vc = rdma_verbs_conn_lookup(xp, m->h.echo))
               && vc->cm == RDMA_VERBS_CM_REQ_SENT)
        rdma_verbs_conn_doom(vc, "%s on %s runs ch3:rdma wire version %u, this process on %s "
                             "version %u: connect only builds of the same wire version",
                             vc->who, vc->host, (unsigned) m->h.version, xp->host,
                             RDMA_WIRE_VERSION);
    else
        xp->cm_dropped++;
}

void rdma_verbs_cm_dispatch(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_verbs_conn_t *vc;

    if (m->h.magic != RDMA_VERBS_MAGIC || m->h.auth != xp->auth) {
        xp->cm_dropped++;
        return;
    }
    if (m->h.version != RDMA_WIRE_VERSION) {
        rdma_verbs_cm_version(xp, m);
        return;
    }
    if (m->h.type == RDMA_VERBS_MSG_REQ && m->h.dyn) {
        vc = rdma_verbs_cm_known(xp, m);
        if (vc)
            rdma_verbs_cm_req(xp, vc->c, m);
        else
            rdma_verbs_cm_park(xp, m, rdma_verbs_now() + xp->vp.timeout);
        return;
    }
    if (m->h.type == RDMA_VERBS_MSG_REQ) {
        if (m->dst == xp->prm.rank && m->src >= 0 && m->src < xp->prm.size)
            rdma_verbs_cm_req(xp, xp->prm.ev.conn_of(xp->prm.ev.arg, m->src), m);
        return;
    }
    vc = rdma_verbs_conn_lookup(xp, m->h.echo);
    if (!vc || !rdma_verbs_msg_from(vc, m))
        return;
    if (m->h.type == RDMA_VERBS_MSG_REP)
        rdma_verbs_cm_rep(vc, m);
    else if (m->h.type == RDMA_VERBS_MSG_RTU && vc->cm == RDMA_VERBS_CM_REP_SENT
             && m->qpn == vc->remote.qpn)
        rdma_verbs_conn_ready(vc);
    else if (m->h.type == RDMA_VERBS_MSG_REJ && vc->cm == RDMA_VERBS_CM_REQ_SENT)
        rdma_verbs_conn_doom(vc, "%s on %s refused the connection: %s", vc->who, vc->host,
                             m->hello);
    else if (m->h.type == RDMA_VERBS_MSG_WAIT
             && (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT))
        rdma_verbs_cm_wait(vc);
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
            rdma_verbs_conn_doom(vc, "%s on %s did not answer the connection request "
                                 "within %g s (process or node gone, or unreachable)",
                                 vc->who, vc->host, xp->vp.timeout);
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
 * event, handle the device's events, every datagram and timer. */
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
    rdma_verbs_async_run(xp);
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

/* ------------------------------------------------------ adoption (main) */

/* Bind and report what the CM finished.  [main] */
static void rdma_verbs_adopt_one(rdma_xport_t * xp, rdma_verbs_conn_t * vc)
{
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;
    rdma_conn_mem_t mem = { vc->stage.buf, &ctl->tail_word, vc->ring.buf, &ctl->head_word,
        vc->completion, rdma_verbs_window(vc), vc->verify,
        vc->remote.max_frame
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
        rdma_verbs_conn_fail(vc, "the channel cannot use the pipe to %s", vc->who);
        return;
    }
    vc->adopted = 1;
    xp->flag_polled |= !vc->completion || vc->verify;       /* sticky: see rdma_verbs_wait_arm */
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
