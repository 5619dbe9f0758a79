/*
 * rdma_verbs_data.c -- the verbs transport: data path (rdma_verbs.h).
 *
 * Arrival detection and ordering -- read this before touching the code.
 *   Flag polling (the pipe polls ring memory: completion_driven = 0 in the
 * rdma_conn_mem_t handed to ev.bind) is only correct if the responder places one RDMA write in increasing address
 * order, so that a frame's tail flag is never visible before its payload.
 * The verbs API does not promise that: data is defined only at completion.
 * ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, ...) is the one query that
 * says "the reader may poll for data": we use flag polling only when both
 * QPs report WHOLE_MSG and neither side set force_completion (the REQ/REP
 * carry each side's answer; both compute the same mode).  Otherwise the pipe
 * runs completion-driven: every frame is an RDMA_WRITE_WITH_IMM that consumes
 * a posted receive, and the CQE of that receive (data visible by definition)
 * is reported with ev.landed().  Credit and head writes are WITH_IMM too in that
 * mode so that their words are visible at their CQE (and pre-posted receives
 * are replenished).  Unless either side set force_completion (vc->verify,
 * bit 1 of the CM message's in_order), small frames then verify
 * themselves: a frame of at most RB_VERIFY_MAX bytes goes as a plain
 * RDMA_WRITE, and the pipe takes it once its tail word matches a 64-bit
 * check over its position and bytes (rb_pipe.h, "Self-verifying frames"):
 * a torn frame reads as not yet arrived, whatever order the responder
 * placed its bytes in, so this assumes no ordering at all; it saves the
 * receive, its CQE and the repost per small message.  Since those frames
 * raise no CQE, a verifying transport never sleeps on CQ events
 * (flag_polled).  The query describes ordering within ONE write only:
 * nothing here relies on ordering between separate WQEs.  Hence basic mode
 * (the receiver trusts a head word written by a LATER WQE than the data) is
 * always completion-driven here.
 *   The ring is never registered with IBV_ACCESS_RELAXED_ORDERING (which voids
 * the in-order answer), and the acquire barrier after the tail flag is in
 * the pipe; the transport never reads ring memory.
 *   rdma-core >= 33 has the query; passing flags 0 is documented as equivalent
 * to RETURN_CAPS + WHOLE_MSG, so we use 0 (Debian 12 ships v44, which knows no
 * RETURN_CAPS).  Build without the function: HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER
 * = 0 (autoconf AC_CHECK_DECLS) => "unknown" => completion-driven.
 *
 * Queue depths come from a write window, not from the ring, so a
 * connection's queues stay small while its ring grows: completion-driven,
 * the pipe leaves at most RDMA_VERBS_WINDOW frame writes uncredited
 * (rb_config_t.max_writes, rb_pipe.h "Write window"), which bounds the
 * receives they take; flag polling takes none, and its writes are bounded
 * by the send queue alone (below), which frees at the NIC's pace, so it
 * runs without the window and its extra credits.
 *
 * Send queue.  What could be in flight at once is WINDOW (x2 in basic mode
 * for head writes) + RDMA_VERBS_SIG_EVERY (credited writes whose covering
 * signal has not completed yet) + RDMA_VERBS_READS_MAX + RDMA_VERBS_RMA_OPS
 * (one-sided operations, rdma_verbs_rma.c) + RDMA_VERBS_SQ_RESERVE (120),
 * but sq_depth is at most RDMA_VERBS_SQ_MAX (63): providers keep depth + 1
 * slots rounded up to a power of two, so 64 slots instead of 128, half of
 * a connection's driver memory (rxe: 512-byte entries, 32 KiB instead of
 * 64; docs/results/memory.md).  They share the 63: every post takes a free
 * slot or waits for one (writes), or does less (reads: fewer in flight;
 * one-sided operations: sent as messages); sends complete at the NIC's
 * pace, so waiting is short.  The last RESERVE slots are kept for
 * credit/head/keepalive writes so credit updates can always be posted.  Every SIG_EVERY-th WR is signalled, and every WR
 * once the queue is nearly full, so a full queue always ends in a signalled
 * WR.  With no free slot, writes poll the CQ (bounded by vp.timeout):
 * send completions need only the peer's NIC, not its process.  Stage bytes
 * of a non-inline write are rewritten only after the peer returned their
 * credit, i.e. after the write landed, so no completion is needed for that.
 *
 * Receive queue (completion-driven only).  A peer's write-with-immediate
 * holds one of our receives until we poll its CQE, which comes before we
 * consume and credit its frames: its uncredited frame writes (at most
 * WINDOW) bound the receives it holds, plus RDMA_VERBS_RQ_RESERVE for its
 * credit writes (one per WINDOW/2 frames or credit_threshold bytes we sent
 * it); basic mode adds a head write per frame and a credit per frame we
 * sent (x3).  rq_depth adds RDMA_VERBS_RQ_BATCH, since consumed receives
 * are reposted RQ_BATCH at a time (one ibv_post_recv per batch).  Should
 * credit writes still outrun the reserve (our CQ polled late), the peer
 * meets an RNR NAK and retries (rnr_retry 7: forever): slower, never lost.
 * With the shared receive queue (rdma_verbs_srq.c) no QP has receives of
 * its own: rq_depth counts toward what the SRQ may hold (srq_want).
 *
 * Liveness.  RC retries: retry_cnt 6 (rxe retries 7 forever), ACK timeout
 * from vp.timeout (rdma_verbs_qp_timeout: a link outage shorter than 6
 * tries is ridden out), rnr_retry 7.  A peer that died while we wait
 * for credits leaves nothing in flight to fail, so progress() rewrites the
 * last credit value (idempotent, no immediate) on READY connections without
 * a signalled WR in flight every timeout/4 s; its retry exhaustion reports
 * the dead peer (IBV_WC_RETRY_EXC_ERR -> RDMA_ERR_PEER).
 *
 * Closing.  closing() (a CH3 CLOSE arrived) makes every later frame
 * write signalled.  quiesce() (CH3's close handshake done) moves c to
 * CLOSED: no more keepalives, and a failure seen on it is not reported,
 * since the peer may exit as soon as its handshake is done (or the owner
 * already knows it died); one-sided operations still in flight on it fail
 * through rma_done all the same (rma_orphans).  close() drains
 * first (rdma_verbs_drain): the last CLOSE the peer waits for may still
 * sit in our send queue, and destroying the QP would discard it; it waits
 * for the signalled frames only, never for a write posted after the peer
 * may have left.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* ------------------------------------------------------ posting writes */

/* Wait (polling the CQ, bounded by vp.timeout) until ready(vc, n): the
 * queue named `what` in the diagnosis has room. */
rdma_status_t rdma_verbs_wait_room(rdma_verbs_conn_t * vc,
                                   int (*ready) (const rdma_verbs_conn_t *, uint32_t), uint32_t n,
                                   const char *what)
{
    double limit = 0;
    unsigned spins = 0;

    while (!ready(vc, n)) {
        if (vc->cm == RDMA_VERBS_CM_DEAD)
            return RDMA_ERR_PEER;
        rdma_verbs_cq_poll(vc->xp);
        if ((++spins & 1023) == 0) {
            double now = rdma_verbs_now();
            if (limit == 0)
                limit = now + vc->xp->vp.timeout;
            else if (now > limit) {
                rdma_verbs_conn_fail(vc, "%s to %s made no progress for %g s", what, vc->who,
                                     vc->xp->vp.timeout);
                return RDMA_ERR_PEER;
            }
        }
    }
    return RDMA_OK;
}

/* More than keep send-queue slots are free. */
static int rdma_verbs_sq_above(const rdma_verbs_conn_t * vc, uint32_t keep)
{
    return vc->sq_free > keep;
}

/* Post wr on vc's send queue (wr->wr_id vc->token: completions find vc by
 * it): data WRs leave the reserve free for credit/head/keepalive words
 * (POST_LEAVE_RESERVE); POST_SENT: signalled, and its completion reports
 * ev.sent (sig_fifo marks it), as POST_RMA's reports rdma_verbs_rma_done. */
static inline rdma_status_t rdma_verbs_post_wr_in(rdma_verbs_conn_t * vc,
                                                  struct ibv_send_wr *wr, int flags)
{
    uint32_t keep = flags & RDMA_VERBS_POST_LEAVE_RESERVE ? RDMA_VERBS_SQ_RESERVE : 0;
    struct ibv_send_wr *bad;
    int rc;

    if (vc->sq_free <= keep && rdma_verbs_wait_room(vc, rdma_verbs_sq_above, keep, "send queue"))
        return RDMA_ERR_PEER;
    vc->sq_free--;
    if (++vc->unsig >= RDMA_VERBS_SIG_EVERY || vc->sq_free <= RDMA_VERBS_SQ_RESERVE
        || (flags & (RDMA_VERBS_POST_SIGNAL | RDMA_VERBS_POST_SENT | RDMA_VERBS_POST_RMA))) {
        wr->send_flags |= IBV_SEND_SIGNALED;
        vc->sig_fifo[vc->sig_head++ % vc->sq_depth] = vc->unsig
            | (flags & RDMA_VERBS_POST_SENT ? RDMA_VERBS_SIG_SENT : 0)
            | (flags & RDMA_VERBS_POST_RMA ? RDMA_VERBS_SIG_RMA : 0);
        vc->unsig = 0;
    }
    rc = ibv_post_send(vc->qp, wr, &bad);
    if (flags & RDMA_VERBS_POST_LAST)
        vc->frame_at = rdma_verbs_wr_posted(vc);
    if (rc)
        rdma_verbs_conn_fail(vc, "connection to %s failed: ibv_post_send: %s", vc->who,
                             strerror(rc));
    return rc ? -1 : 0;
}

/* One RDMA write (with immediate imm if imm != 0) of a frame or a word
 * gathered from sg[0..n) (no entry empty: some providers read 0 as 2 GiB),
 * or (imm < 0) one RDMA read; flags as rdma_verbs_post_wr's. */
RDMA_HOT rdma_status_t rdma_verbs_post_sg(rdma_verbs_conn_t * vc, struct ibv_sge *sg, int n,
                                 uint64_t raddr, uint32_t rkey, int imm, int flags)
{
    uint32_t len = 0;
    struct ibv_send_wr wr = {
        .wr_id = vc->token, .sg_list = sg, .num_sge = n,
        .opcode = imm < 0 ? IBV_WR_RDMA_READ : imm ? IBV_WR_RDMA_WRITE_WITH_IMM :
            IBV_WR_RDMA_WRITE,
        .imm_data = htonl((uint32_t) (imm > 0 ? imm : 0)),
        .wr.rdma = {.remote_addr = raddr, .rkey = rkey}
    };
    int i;

    for (i = 0; i < n; i++)
        len += sg[i].length;
    wr.send_flags = imm >= 0 && len <= vc->max_inline ? IBV_SEND_INLINE : 0;
    return rdma_verbs_post_wr_in(vc, &wr, flags);
}

rdma_status_t rdma_verbs_post_wr(rdma_verbs_conn_t * vc, struct ibv_send_wr *wr, int flags)
{
    return rdma_verbs_post_wr_in(vc, wr, flags);
}

rdma_status_t rdma_verbs_post(rdma_verbs_conn_t * vc, uint64_t laddr, uint32_t lkey,
                              uint32_t len, uint64_t raddr, uint32_t rkey, int imm, int flags)
{
    struct ibv_sge sge = {.addr = laddr, .length = len, .lkey = lkey };

    return rdma_verbs_post_sg(vc, &sge, 1, raddr, rkey, imm, flags);
}

/* frames 0: self-verifying frames only (rb_pipe.h), a plain write */
static int rdma_verbs_frame_imm(const rdma_verbs_conn_t * vc, unsigned frames)
{
    return vc->completion && frames ? RDMA_VERBS_IMM_FRAME | (int) frames << 2 : 0;
}

/* A frame write's flags: once the close handshake began, signalled and
 * marked as the last so far (rdma_verbs_drain). */
static int rdma_verbs_frame_flags(const rdma_verbs_conn_t * vc, int flags)
{
    return vc->last_frames ? flags | RDMA_VERBS_POST_SIGNAL | RDMA_VERBS_POST_LAST : flags;
}

static RDMA_HOT rdma_status_t rdma_verbs_pipe_write(void *ctx, size_t off, size_t len, unsigned frames)
{
    rdma_verbs_conn_t *vc = ctx;

    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return RDMA_ERR_PEER;
    return rdma_verbs_post(vc, (uintptr_t) vc->stage.buf + off, vc->stage.mr->lkey,
                                 (uint32_t) len, vc->remote.ring_addr + off,
                                 vc->remote.ring_rkey, rdma_verbs_frame_imm(vc, frames),
                                 rdma_verbs_frame_flags(vc, RDMA_VERBS_POST_LEAVE_RESERVE));
}

/* Frames whose user parts come from the held region (rdma_verbs_eager.c):
 * gather entries alternate stage and user memory; empty stage pieces are
 * left out (a payload ending on a word without a tail flag).  The caller
 * keeps the user bytes until this write's completion says ev.sent. */
static rdma_status_t rdma_verbs_pipe_write_user(void *ctx, size_t off, size_t len,
                                                unsigned frames, const rb_user_t * u)
{
    rdma_verbs_conn_t *vc = ctx;
    const rcache_region_t *r = u->handle;
    uintptr_t st = (uintptr_t) vc->stage.buf;
    uint32_t lkey = vc->stage.mr->lkey, ukey = ((struct ibv_mr *) r->mr)->lkey;
    struct ibv_sge sg[RDMA_VERBS_USER_SGE];
    size_t at = off;
    unsigned j;
    int n = 0;

    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return RDMA_ERR_PEER;
    for (j = 0; j <= u->n; j++) {
        size_t to = j < u->n ? u->seg[j].at : off + len;

        if (to > at)
            sg[n++] = (struct ibv_sge) { st + at, (uint32_t) (to - at), lkey };
        if (j < u->n) {
            sg[n++] = (struct ibv_sge) {
            (uintptr_t) u->seg[j].addr, (uint32_t) u->seg[j].len, ukey};
            at = to + u->seg[j].len;
        }
    }
    return rdma_verbs_post_sg(vc, sg, n, vc->remote.ring_addr + off, vc->remote.ring_rkey,
                              rdma_verbs_frame_imm(vc, frames),
                              rdma_verbs_frame_flags(vc, RDMA_VERBS_POST_LEAVE_RESERVE
                                                     | RDMA_VERBS_POST_SENT));
}

/* Credit/head: 8 bytes into the peer's ctl block, from our registered word
 * (values only grow, so a later value in the source slot is harmless). */
static rdma_status_t rdma_verbs_word_write(rdma_verbs_conn_t * vc, uint64_t * src, size_t roff,
                                           int imm, int flags)
{
    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return RDMA_ERR_PEER;
    return rdma_verbs_post(vc, (uintptr_t) src, vc->ctl.mr->lkey, sizeof(*src),
                                 vc->remote.ctl_addr + roff, vc->remote.ctl_rkey,
                                 vc->completion ? imm : 0, flags);
}

static rdma_status_t rdma_verbs_pipe_credit(void *ctx, uint64_t tail)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;

    ctl->src_credit = vc->last_credit = tail;
    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return RDMA_OK;         /* no one to tell; what the peer wrote is still read */
    return rdma_verbs_word_write(vc, &ctl->src_credit, offsetof(rdma_verbs_ctl_t, tail_word),
                                 RDMA_VERBS_IMM_CREDIT, 0);
}

static rdma_status_t rdma_verbs_pipe_head(void *ctx, uint64_t head)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;

    ctl->src_head = head;
    return rdma_verbs_word_write(vc, &ctl->src_head, offsetof(rdma_verbs_ctl_t, head_word),
                                 RDMA_VERBS_IMM_HEAD, 0);
}

const rb_xport_ops_t rdma_verbs_pipe_ops = {
    .write = rdma_verbs_pipe_write,
    .credit = rdma_verbs_pipe_credit,
    .head = rdma_verbs_pipe_head,
    .write_user = rdma_verbs_pipe_write_user,
    .ring_new = rdma_verbs_ring_new,
    .ring_drop = rdma_verbs_ring_drop,
    .stage_new = rdma_verbs_stage_new,
    .ring_move = rdma_verbs_ring_move
};

/* Rewrite the last credit (signalled, no immediate): idempotent, and its
 * completion covers every earlier WR (RC completes in order). */
static rdma_status_t rdma_verbs_credit_again(rdma_verbs_conn_t * vc)
{
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;

    ctl->src_credit = vc->last_credit;
    return rdma_verbs_word_write(vc, &ctl->src_credit, offsetof(rdma_verbs_ctl_t, tail_word), 0,
                                 RDMA_VERBS_POST_SIGNAL);
}

/* READY (or CLOSING) connections without a signalled WR in flight: a credit rewrite, so
 * that a dead peer shows up as a retry-exceeded completion; this also
 * reclaims unsignalled slots.  Quiesced (CLOSED) ones are left alone. */
static void rdma_verbs_keepalive(rdma_xport_t * xp)
{
    uint32_t i;

    for (i = 0; i < xp->nslots; i++) {
        rdma_verbs_conn_t *vc = __atomic_load_n(&xp->slots[i], __ATOMIC_ACQUIRE);
        if (vc && vc->adopted && (vc->c->state == RDMA_CONN_READY
                                  || vc->c->state == RDMA_CONN_CLOSING)
            && vc->cm != RDMA_VERBS_CM_DEAD
            && vc->sig_head == vc->sig_tail)
            rdma_verbs_credit_again(vc);
    }
}

/* The owner's close handshake begins: its frames from now on are signalled
 * (rdma_verbs_frame_flags).  [main] */
void rdma_verbs_closing(rdma_xport_t * xp, rdma_conn_t * c)
{
    rdma_verbs_conn_t *vc = c->priv;

    (void) xp;
    if (vc)
        vc->last_frames = 1;
}

/* abort(): c's peer is dead.  Its QP goes to ERR, which stops the device's
 * writes into our memory for it (a read's response) and flushes what is
 * posted; its one-sided operations fail on the next progress()
 * (rma_orphans), not after retry_cnt ACK timeouts (30 s at the default
 * timeout).  The flushed completions find vc dead and are dropped. */
void rdma_verbs_abort(rdma_xport_t * xp, rdma_conn_t * c)
{
    rdma_verbs_conn_t *vc = c->priv;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR };

    (void) xp;
    if (vc == NULL || vc->cm == RDMA_VERBS_CM_DEAD)
        return;
    if (vc->qp)
        (void) ibv_modify_qp(vc->qp, &a, IBV_QP_STATE);
    rdma_verbs_conn_fail(vc, "%s on %s is dead: its operations in flight abandoned", vc->who,
                         vc->host);
}

/* Before close() destroys vc's QP: wait until the frames posted on it have
 * landed at the peer, which may still wait for the last one (CH3's CLOSE
 * ack).  After closing() those frames were signalled, and nothing written
 * after them counts: a credit word to a peer that has read our last frame
 * and left would never be acknowledged (its QP is gone), and waiting for
 * it cost a whole drain bound, 8.6 s at the default timeout, in about
 * half of the jobs.  Without closing(), one signalled write after the
 * unsignalled ones covers them all.  Bounded per close
 * (rdma_verbs_drain_bound: by then a dead peer's QP has failed its writes,
 * and every later drain to a dead peer ends at once).  1: it ended at the
 * bound. */
int rdma_verbs_drain(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    double by;
    uint64_t upto;

    if (!vc->adopted || vc->cm == RDMA_VERBS_CM_DEAD)
        return 0;
    by = rdma_verbs_now() + rdma_verbs_drain_bound(xp->vp.timeout, xp->qp_timeout);
    if (!vc->last_frames && vc->unsig && rdma_verbs_credit_again(vc) != RDMA_OK)
        return 0;
    upto = vc->last_frames ? vc->frame_at : rdma_verbs_wr_posted(vc);
    while (vc->wr_done < upto && vc->cm != RDMA_VERBS_CM_DEAD)
        if (rdma_verbs_cq_poll(xp) == 0 && rdma_verbs_now() > by)
            return 1;
    return 0;
}

/* --------------------------------------------------------- completions */

/* A frame landed on vc; before main adopted it, count it for adoption. */
static void rdma_verbs_wc_recv(rdma_verbs_conn_t * vc, const struct ibv_wc *wc)
{
    unsigned frames = (ntohl(wc->imm_data) & 3) == RDMA_VERBS_IMM_FRAME ?
        ntohl(wc->imm_data) >> 2 : 0;

    if (!vc->adopted) {
        vc->early += frames;
        rdma_verbs_rtu_implied(vc);
    } else if (frames)
        vc->xp->prm.ev.landed(vc->c, frames);
    if (vc->xp->srq || ++vc->rq_owed < RDMA_VERBS_RQ_BATCH)
        return;
    vc->rq_owed = 0;
    if (rdma_verbs_rq_post(vc, RDMA_VERBS_RQ_BATCH))
        rdma_verbs_conn_fail(vc, "connection to %s on %s failed: cannot repost a receive",
                             vc->who, vc->host);
}

static void rdma_verbs_wc_rc(rdma_verbs_conn_t * vc, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS) {
        rdma_verbs_conn_fail(vc, "connection to %s on %s failed: %s (process or node "
                             "gone, or unreachable)", vc->who, vc->host,
                             ibv_wc_status_str(wc->status));
        return;
    }
    if (!(wc->opcode & IBV_WC_RECV)) {
        uint32_t s = vc->sig_fifo[vc->sig_tail++ % vc->sq_depth];

        vc->sq_free += RDMA_VERBS_SIG_WRS(s);
        vc->wr_done += RDMA_VERBS_SIG_WRS(s);
        if (vc->n_retired)
            rdma_verbs_retire(vc);
        if (s & RDMA_VERBS_SIG_RMA)
            rdma_verbs_rma_done(vc);
        else if (wc->opcode == IBV_WC_RDMA_READ)
            rdma_verbs_read_done(vc);
        if (s & RDMA_VERBS_SIG_SENT)
            vc->xp->prm.ev.sent(vc->c);
        return;
    }
    rdma_verbs_wc_recv(vc, wc);
}

/* ---------------------------------------------------- failures (main) */

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
    if (vc->c->state == RDMA_CONN_FAILED)
        return;                 /* reported once */
    va_start(ap, fmt);
    vsnprintf(vc->c->why, sizeof(vc->c->why), fmt, ap);
    va_end(ap);
    if (vc->c->state == RDMA_CONN_CLOSED) {
        xp->rma_orphans += vc->rma_tail != vc->rma_head;        /* fail those, silently */
        return;
    }
    xp->new_failures++;
    snprintf(xp->err, sizeof(xp->err), "%s", vc->c->why);
    rdma_conn_failed(vc->c, xp->err);
}

/* One batch of the data CQ.  Safe to call from inside a pipe write: it
 * only updates counters and lands frames. */
RDMA_HOT int rdma_verbs_cq_poll(rdma_xport_t * xp)
{
    struct ibv_wc wc[RDMA_VERBS_POLL_BATCH];
    int i, n = ibv_poll_cq(xp->cq, RDMA_VERBS_POLL_BATCH, wc);

    for (i = 0; i < n; i++) {
        rdma_verbs_conn_t *vc;

        if (wc[i].wr_id == RDMA_VERBS_SRQ_WRID) {       /* even a stale one took a receive */
            rdma_verbs_srq_polled(xp);
            vc = rdma_verbs_qpn_lookup(xp, wc[i].qp_num);
        } else
            vc = rdma_verbs_conn_lookup(xp, wc[i].wr_id);
        if (vc && vc->cm != RDMA_VERBS_CM_DEAD)
            rdma_verbs_wc_rc(vc, &wc[i]);
    }
    return n;
}

/* One-sided operations in flight on connections found dead: failed
 * (reported here, on progress, never inside the call that found it). */
static void rdma_verbs_rma_fail_dead(rdma_xport_t * xp)
{
    uint32_t i;

    for (i = 0; i < xp->nslots; i++) {
        rdma_verbs_conn_t *vc = __atomic_load_n(&xp->slots[i], __ATOMIC_ACQUIRE);
        if (vc && vc->cm == RDMA_VERBS_CM_DEAD)
            rdma_verbs_rma_fail(vc);
    }
}

RDMA_HOT rdma_status_t rdma_verbs_progress(rdma_xport_t * xp)
{
    int i, n;
    double now;

    if (__atomic_load_n(&xp->n_adopt, __ATOMIC_RELAXED))
        rdma_verbs_adopt(xp);
    if (__atomic_load_n(&xp->n_parked, __ATOMIC_RELAXED))
        rdma_verbs_cm_parked(xp);
    for (i = 0; i < 4; i++) {
        n = rdma_verbs_cq_poll(xp);
        if (n < 0) {
            rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_XPORT, "ibv_poll_cq failed on %s",
                     ibv_get_device_name(xp->ctx->device));
            return RDMA_ERR_XPORT;
        }
        if (n < RDMA_VERBS_POLL_BATCH)
            break;
    }
    /* Keepalives (every timeout/4 s) need the clock: keep clock_gettime
     * off most polls. */
    if ((++xp->polls & 255) == 0) {
        now = rdma_verbs_now();
        if (now >= xp->t_keepalive) {
            xp->t_keepalive = now + xp->vp.timeout / 4;
            rdma_verbs_keepalive(xp);
        }
        rdma_verbs_linger_reap(xp, now);
    }
    if (xp->new_failures || xp->rma_orphans) {
        n = xp->new_failures;
        xp->new_failures = xp->rma_orphans = 0;
        rdma_verbs_rma_fail_dead(xp);
        if (n)
            return RDMA_ERR_PEER;
    }
    return RDMA_OK;
}

/* ---- blocking wait ----
 * Every arrival on a completion-driven connection and every read or
 * signalled-write completion is a CQE on the data CQ, so a CQ event wakes
 * the waiter; the channel thread writes wake_fd when it has a connection
 * for main to adopt.  Arm, then the owner polls once more (a CQE that came
 * before the arm is found by that poll, one after it raises the event).
 * Flag-polled and self-verifying arrivals raise nothing: once a connection
 * polls memory, wait_arm declines and the owner sleeps in short steps. */
int rdma_verbs_wait_arm(rdma_xport_t * xp)
{
    return !xp->flag_polled && ibv_req_notify_cq(xp->cq, 0) == 0;
}

/* Nothing to undo: an event that fires later makes one wait return early. */
void rdma_verbs_wait_disarm(rdma_xport_t * xp)
{
    (void) xp;
}

/* Sleep until a CQ event, a connection to adopt or timeout_us; consume
 * every pending event. */
void rdma_verbs_wait(rdma_xport_t * xp, long timeout_us)
{
    struct pollfd p[2] = { {.fd = xp->chan->fd, .events = POLLIN},
    {.fd = xp->wake_fd, .events = POLLIN}
    };
    struct timespec ts = { timeout_us / 1000000, (timeout_us % 1000000) * 1000 };
    struct ibv_cq *cq;
    void *ctx;
    uint64_t n;

    if (ppoll(p, 2, &ts, NULL) < 1) {
        xp->polls |= 255;       /* idle: the next progress checks keepalives */
        return;
    }
    while (ibv_get_cq_event(xp->chan, &cq, &ctx) == 0)
        ibv_ack_cq_events(cq, 1);
    while (read(xp->wake_fd, &n, sizeof(n)) > 0)
        ;
}
