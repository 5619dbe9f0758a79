/*
 * rdma_rndv.c -- one rendezvous per large message.
 *
 * Above its eager limit CH3 sends RTS, waits for CTS, then sends the data,
 * whose large entry took the channel's own rendezvous (zcopy/zc.h: REQ,
 * copy, FIN): three control hops before the copy starts.  Here the RTS
 * carries the send buffer's address, and the receiver copies from it as
 * soon as the receive is matched (at the RTS, or later in MPID_Recv through
 * vc->rndvRecv_fn), as ch3:nemesis' LMT does.  CH3's eager limit is
 * ours per send (MPIDI_CH3I_eager_limit, ch3-eager-limit.patch): where the
 * peer answered our last frame it drops below answered_min, so a
 * ping-pong's messages from there come here too, not only those above
 * CH3's own limit.
 *
 *   sender                               receiver
 *   RDMA_RTS {CH3's RTS, addr, key}  ->  matched; split: RDMA_PUSH {off,
 *                                        len, raddr}; copies [0, off) from
 *                                        addr; RDMA_DONE once copied
 *   PUSH: writes [off, off+len) to   <-
 *   raddr; RDMA_PUSHED               ->  PUSHED: the receive completes
 *   DONE: the send completes             (no split: once it has copied)
 *
 * The copy is one process_vm_readv on a node, an RDMA read between nodes
 * (rdma_chan_rndv_copy).  The split copy is zc.h's, on a node only (both
 * cores copy a part, from CMA_SPLIT bytes): the receiver asks, the sender
 * writes its part.  Each direction is one ordered stream, so the sender
 * has written its part (PUSH came first) when it reads DONE, and only then
 * may the user reuse the buffer.
 *
 * Over verbs the send buffer is registered in the send cache (the RTS
 * carries its rkey; released when DONE or CH3's CTS arrives), and the
 * read completes later: the transport's rma_done hands the receive to
 * MPIDI_CH3I_Rndv_read_done, and its DONE goes out from a progress hook,
 * not from inside the transport's poll.  Until then the link is busy
 * (rdma_link_busy: not evicted), and a connection that fails completes
 * the receive with its error through rma_done.
 *
 * Fallbacks, all through CH3's own rendezvous, whose requests are set up
 * the same way: a sender whose link does not qualify (rdma_chan_rndv_ok),
 * whose buffer is not contiguous or cannot be exposed sends CH3's RTS; a
 * receive buffer that is not contiguous or is shorter than the message
 * answers CH3's CTS (truncation is CH3's to report); a copy that is
 * refused (EPERM) ends in CH3's data, and so does one that cannot start
 * now (verbs: registration limits, a full queue) where no read is in
 * flight on its link (with one, it waits in reads_wait and tries again
 * when a read finishes): the receiver answers DONE {refused}, or the
 * sender's PUSHED {refused} turns its DONE into a CTS.  A receive waiting
 * for CH3's data (REFUSED) ignores PUSHED; that data overwrites whatever
 * was copied.  CH3's data, from zc's threshold, takes zc's zero-copy path,
 * whose refusal marks the link (zc.refused): no later message to that
 * peer tries this rendezvous.
 *
 * Failure: a send waits for DONE, and a receive for PUSHED or CH3's data,
 * in the owed list (ch3_owed.c), so a peer that dies completes them with
 * its error (a send's registration stays cached until finalize).  All of
 * it runs under the global critical section, rma_done included.
 */
#include "rdma_glue.h"

/* A receive's rendezvous (req->ch.rndv); a send's: OK, or REFUSED once
 * its part of a split copy could not be written. */
enum {
    RNDV_CH3 = 0,               /* CH3's RTS: CTS and data (ch3u_rndv.c) */
    RNDV_RTS,                   /* RDMA_RTS, not yet matched */
    RNDV_READ,                  /* copies alone (not owed); or waits in
                                 * reads_wait for room on its link */
    RNDV_PUSH,                  /* copies its part, then waits for PUSHED (owed) */
    RNDV_REFUSED                /* waits for CH3's data (owed) */
};
#define RNDV_OK RNDV_CH3

/* Receives whose read finished (rma_done), DONE still to send: a stack
 * through ch.rndv_u.next, emptied by the progress hook reads_hook.  The
 * global critical section's. */
static MPIR_Request *reads_done;
static int reads_hook = -1;

/* Receives whose read could not start for want of room on their link
 * (RDMA_ERR_NOMEM with reads in flight there): a FIFO through
 * ch.rndv_u.next, retried by reads_hook after any read finishes; one that
 * finds no read in flight on its link goes through CH3's rendezvous.  The
 * global critical section's. */
static MPIR_Request *reads_wait, **reads_wait_tail = &reads_wait;

static int rndv_ctl(MPIDI_VC_t * vc, int type, MPI_Request sreq_id, MPI_Request rreq_id,
                    int status, uint64_t raddr, uint64_t key, uint64_t off, uint64_t len)
{
    MPIDI_CH3_Pkt_t upkt;
    MPIDI_CH3I_Pkt_rctl_t *p = &upkt.rdma_ctl;
    MPIR_Request *req = NULL;
    int mpi_errno;

    MPIDI_Pkt_init(p, type);
    p->sender_req_id = sreq_id;
    p->receiver_req_id = rreq_id;
    p->status = status;
    p->raddr = raddr;
    p->key = key;
    p->off = off;
    p->len = len;
    mpi_errno = MPIDI_CH3_iStartMsg(vc, p, sizeof(*p), &req);
    if (req)
        MPIR_Request_free(req);
    return mpi_errno;
}

/* The smallest answered_min of the transports' (zc_config_t), SIZE_MAX
 * for none: set once at init (MPIDI_CH3I_Rndv_config), then read-only. */
size_t MPIDI_CH3I_eager_from = SIZE_MAX;

void MPIDI_CH3I_Rndv_config(const rdma_chan_config_t * cfg)
{
    int k;

    for (k = 0; k < RDMA_XP_N; k++)
        if (cfg->link[k].zc.answered_min && cfg->link[k].zc.answered_min < MPIDI_CH3I_eager_from)
            MPIDI_CH3I_eager_from = cfg->link[k].zc.answered_min;
}

/* MPIDI_CH3_EAGER_LIMIT of a contiguous send from eager_from bytes: vc's
 * limit, or one below answered_min where the channel's rendezvous would
 * take a message of that size now (the peer answered our last frame,
 * rdma_chan_rndv_ok): CH3 then hands it to rndv_send instead of sending
 * it eagerly through the ring.  CH3 counts its header in the limit. */
int MPIDI_CH3I_eager_limit(const MPIDI_VC_t * vc)
{
    const rdma_link_t *l = MPIDI_CH3I_link(vc);
    size_t a = l->zc.cfg.answered_min;
    int lim = (int) a - 1 + (int) sizeof(MPIDI_CH3_Pkt_eager_send_t);

    return a && lim < vc->eager_max_msg_sz && rdma_chan_rndv_ok(l, a) ? lim : vc->eager_max_msg_sz;
}

/* vc->rndvSend_fn: RDMA_RTS where the link qualifies, else CH3's RTS. */
static int rndv_send(MPIR_Request ** sreq_p, const void *buf, MPI_Aint count,
                     MPI_Datatype datatype, int dt_contig, intptr_t data_sz, MPI_Aint dt_true_lb,
                     int rank, int tag, MPIR_Comm * comm, int context_offset)
{
    MPIDI_VC_t *vc;
    MPIDI_CH3_Pkt_t upkt;
    MPIDI_CH3I_Pkt_rts_t *p = &upkt.rdma_rts;
    MPIR_Request *sreq = *sreq_p, *rts_req = NULL;
    const void *addr = MPIR_get_contig_ptr(buf, dt_true_lb);
    int mpi_errno;

    MPIDI_Comm_get_vc_set_active(comm, rank, &vc);
    sreq->ch.rndv_u.handle = NULL;
    if (!dt_contig || !rdma_chan_rndv_ok(MPIDI_CH3I_link(vc), (size_t) data_sz)
        || rdma_chan_rndv_expose(MPIDI_CH3I_link(vc), addr, (size_t) data_sz, &p->key,
                                 &sreq->ch.rndv_u.handle) != RDMA_OK)
        return MPIDI_CH3I_Owed_rndv_send(sreq_p, buf, count, datatype, dt_contig, data_sz,
                                         dt_true_lb, rank, tag, comm, context_offset);
    sreq->dev.OnDataAvail = 0;
    sreq->dev.partner_request = NULL;
    sreq->ch.rndv = RNDV_OK;
    MPIDI_Pkt_init(&p->rts, MPIDI_CH3_PKT_RDMA_RTS);
    p->rts.match.parts.rank = comm->rank;
    p->rts.match.parts.tag = tag;
    p->rts.match.parts.context_id = comm->context_id + context_offset;
    p->rts.sender_req_id = sreq->handle;
    p->rts.data_sz = data_sz;
    p->addr = (uintptr_t) addr;
    mpi_errno = MPIDI_CH3_iStartMsg(vc, p, sizeof(*p), &rts_req);
    if (mpi_errno == MPI_SUCCESS && rts_req) {
        mpi_errno = rts_req->status.MPI_ERROR;
        MPIR_Request_free(rts_req);
    }
    if (mpi_errno != MPI_SUCCESS) {
        rdma_chan_rndv_unexpose(MPIDI_CH3I_link(vc), sreq->ch.rndv_u.handle);
        MPIR_Request_free(sreq);
        *sreq_p = NULL;
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**ch3|rtspkt");
    }
    rdma_chan_rndv_count(&MPIDI_CH3I_chan, 0);
    MPIDI_CH3I_Owed_add(vc, sreq);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* A matched RDMA_RTS goes through CH3's rendezvous after all (CTS). */
static int rndv_recv_ch3(MPIDI_VC_t * vc, MPIR_Request * rreq)
{
    rreq->ch.rndv = RNDV_CH3;
    rdma_chan_rndv_count(&MPIDI_CH3I_chan, 1);
    return MPIDI_CH3_RecvRndv(vc, rreq);
}

/* A copy failed: refused or not now (st RDMA_ERR_REFUSED, _NOMEM), rreq
 * waits for CH3's data; else the connection broke (vc fails, and with it
 * rreq: owed). */
static int rndv_recv_refused(MPIDI_VC_t * vc, MPIR_Request * rreq, rdma_status_t st)
{
    if (rreq->ch.rndv == RNDV_READ)
        MPIDI_CH3I_Owed_add(vc, rreq);
    if (st != RDMA_ERR_REFUSED && st != RDMA_ERR_NOMEM)
        return MPIDI_CH3I_RDMA_errno(vc, st);
    if (rreq->ch.rndv != RNDV_REFUSED)
        rdma_chan_rndv_count(&MPIDI_CH3I_chan, 1);
    rreq->ch.rndv = RNDV_REFUSED;
    return MPI_SUCCESS;
}

/* rreq's copy of its part ended with st: DONE {refused or not}; a receive
 * that copied alone completes (its data is in, whether DONE went or not). */
static int rndv_copied(MPIDI_VC_t * vc, MPIR_Request * rreq, rdma_status_t st)
{
    int mpi_errno = MPI_SUCCESS, err;

    if (st != RDMA_OK) {
        mpi_errno = rndv_recv_refused(vc, rreq, st);
        MPIR_ERR_CHECK(mpi_errno);
    }
    mpi_errno = rndv_ctl(vc, MPIDI_CH3_PKT_RDMA_DONE, rreq->dev.sender_req_id, rreq->handle,
                         st != RDMA_OK, 0, 0, 0, 0);
    if (rreq->ch.rndv == RNDV_READ) {
        err = MPID_Request_complete(rreq);
        mpi_errno = mpi_errno ? mpi_errno : err;
    }
  fn_fail:
    return mpi_errno;
}

/* A split copy (shared memory, from CMA_SPLIT; its exposure needs no
 * release): the sender is asked to write [*off, len) of the message into
 * dst.  Else *off = len. */
static int rndv_split(MPIDI_VC_t * vc, MPIR_Request * rreq, char *dst, size_t len, size_t *off)
{
    rdma_link_t *l = MPIDI_CH3I_link(vc);
    uint64_t key;
    void *handle;

    *off = rdma_chan_rndv_split(l, len);
    rreq->ch.rndv = RNDV_READ;
    if (*off == len)
        return MPI_SUCCESS;
    if (rdma_chan_rndv_expose(l, dst, len, &key, &handle) != RDMA_OK) {
        *off = len;
        return MPI_SUCCESS;
    }
    MPIDI_CH3I_Owed_add(vc, rreq);
    rreq->ch.rndv = RNDV_PUSH;
    return rndv_ctl(vc, MPIDI_CH3_PKT_RDMA_PUSH, rreq->dev.sender_req_id, rreq->handle, 0,
                    (uintptr_t) dst + *off, key, *off, len - *off);
}

/* Where rreq's receive buffer starts, if *contig (its *size bytes). */
static char *rndv_dst(const MPIR_Request * rreq, int *contig, intptr_t * size)
{
    MPIR_Datatype *dtp;
    MPI_Aint lb;

    MPIDI_Datatype_get_info(rreq->dev.user_count, rreq->dev.datatype, *contig, *size, dtp, lb);
    (void) dtp;
    return MPIR_get_contig_ptr(rreq->dev.user_buf, lb);
}

/* vc->rndvRecv_fn: rreq, a rendezvous receive, was matched. */
static int rndv_recv(MPIDI_VC_t * vc, MPIR_Request * rreq)
{
    rdma_link_t *l = MPIDI_CH3I_link(vc);
    size_t len = (size_t) rreq->dev.recv_data_sz, off;
    intptr_t user_sz;
    int contig, done = 0, mpi_errno;
    char *dst;
    rdma_status_t st;

    if (rreq->ch.rndv != RNDV_RTS)
        return MPIDI_CH3_RecvRndv(vc, rreq);
    dst = rndv_dst(rreq, &contig, &user_sz);
    if (!contig || (size_t) user_sz < len || l->xc.state != RDMA_CONN_READY)
        return rndv_recv_ch3(vc, rreq);
    mpi_errno = rndv_split(vc, rreq, dst, len, &off);
    if (mpi_errno)
        return mpi_errno;
    st = rdma_chan_rndv_copy(l, 1, dst, off, rreq->ch.rndv_addr, rreq->ch.rndv_key, rreq, &done);
    if (st == RDMA_OK && !done)
        return MPI_SUCCESS;     /* MPIDI_CH3I_Rndv_read_done follows */
    if (st == RDMA_ERR_NOMEM && l->rndv_copies > 0) {
        rreq->ch.rndv_u.next = NULL;    /* a read in flight here makes room */
        *reads_wait_tail = rreq;
        reads_wait_tail = &rreq->ch.rndv_u.next;
        return MPI_SUCCESS;
    }
    return rndv_copied(vc, rreq, st);
}

/* rreq's read failed with its connection: it completes with the error. */
static void rndv_read_failed(rdma_link_t * l, MPIR_Request * rreq)
{
    rreq->status.MPI_ERROR = MPIDI_CH3I_RDMA_peer_errno(l->xc.why[0] ? l->xc.why
                                                        : MPIDI_CH3I_chan.msg);
    MPID_Request_complete(rreq);
}

/* Start the read of waiting rreq again (its link had no room): 1 while it
 * must wait more; else it is on its way (read, CH3's rendezvous, failed). */
static int rndv_retry(MPIR_Request * rreq, int *mpi_errno)
{
    MPIDI_VC_t *vc;
    rdma_link_t *l;
    rdma_status_t st = RDMA_ERR_NOMEM;  /* a link no longer READY: CH3's rendezvous */
    intptr_t sz;
    int contig, done = 0;

    MPIDI_Comm_get_vc(rreq->comm, rreq->status.MPI_SOURCE, &vc);
    l = MPIDI_CH3I_link(vc);
    if (vc->ch.terminating == MPIDI_CH3I_TERM_FAILED) {
        rndv_read_failed(l, rreq);
        return 0;
    }
    if (l->xc.state == RDMA_CONN_READY) {
        st = rdma_chan_rndv_copy(l, 1, rndv_dst(rreq, &contig, &sz),
                                 (size_t) rreq->dev.recv_data_sz, rreq->ch.rndv_addr,
                                 rreq->ch.rndv_key, rreq, &done);
        if (st == RDMA_ERR_NOMEM && l->rndv_copies > 0)
            return 1;
    }
    if (st != RDMA_OK || done)
        *mpi_errno = rndv_copied(vc, rreq, st);
    return 0;
}

/* Retry the waiting receives, in order (a read finished: there may be
 * room now). */
static void rndv_retry_waiting(int *mpi_errno)
{
    MPIR_Request **p = &reads_wait, *rreq, *next;

    while (*mpi_errno == MPI_SUCCESS && (rreq = *p) != NULL) {
        next = rreq->ch.rndv_u.next;    /* rreq may be freed once on its way */
        if (rndv_retry(rreq, mpi_errno))
            p = &rreq->ch.rndv_u.next;
        else
            *p = next;
    }
    while (*p)
        p = &(*p)->ch.rndv_u.next;
    reads_wait_tail = p;
}

/* Progress hook: DONE for the reads that finished, then the waiting
 * receives' turn. */
static int rndv_reads_hook(int *made)
{
    MPIR_Request *rreq;
    MPIDI_VC_t *vc;
    int mpi_errno = MPI_SUCCESS;

    *made = reads_done != NULL;
    while (mpi_errno == MPI_SUCCESS && (rreq = reads_done) != NULL) {
        reads_done = rreq->ch.rndv_u.next;
        MPIDI_Comm_get_vc(rreq->comm, rreq->status.MPI_SOURCE, &vc);
        mpi_errno = rndv_copied(vc, rreq, RDMA_OK);
    }
    if (mpi_errno == MPI_SUCCESS)
        rndv_retry_waiting(&mpi_errno);
    if (reads_done == NULL)
        MPIR_Progress_hook_deactivate(reads_hook);
    return mpi_errno;
}

void MPIDI_CH3I_Rndv_read_done(rdma_link_t * l, MPIR_Request * rreq, rdma_status_t st)
{
    rdma_chan_rndv_copied(l);
    if (reads_wait)
        MPIR_Progress_hook_activate(reads_hook);
    if (st != RDMA_OK) {
        rndv_read_failed(l, rreq);
        return;
    }
    rreq->ch.rndv_u.next = reads_done;
    reads_done = rreq;
    MPIR_Progress_hook_activate(reads_hook);
}

void MPIDI_CH3I_Rndv_release(MPIDI_VC_t * vc, MPIR_Request * sreq)
{
    rdma_chan_rndv_unexpose(MPIDI_CH3I_link(vc), sreq->ch.rndv_u.handle);
    sreq->ch.rndv_u.handle = NULL;
}

/* CH3's RTS and RDMA_RTS: CH3's handler (MPIDI_CH3_PktHandler_RndvReqToSend),
 * which knows one receive function only, plus where the sender's buffer is. */
static int rndv_rts(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                    MPIR_Request ** rreqp)
{
    MPIDI_CH3_Pkt_send_t *rts = &pkt->rndv_req_to_send;
    MPIR_Request *rreq;
    int found, mpi_errno = MPI_SUCCESS;

    (void) data;
    *buflen = 0;
    *rreqp = NULL;
    MPID_THREAD_CS_ENTER(POBJ, MPIR_THREAD_POBJ_MSGQ_MUTEX);
    rreq = MPIDI_CH3U_Recvq_FDP_or_AEU(&rts->match, &found);
    if (rreq && (found || MPIR_cc_get(rreq->cc) != 0)) {        /* 0: a revoked comm's */
        rreq->status.MPI_SOURCE = rts->match.parts.rank;
        rreq->status.MPI_TAG = rts->match.parts.tag;
        MPIR_STATUS_SET_COUNT(rreq->status, rts->data_sz);
        rreq->dev.sender_req_id = rts->sender_req_id;
        rreq->dev.recv_data_sz = rts->data_sz;
        MPIDI_Request_set_msg_type(rreq, MPIDI_REQUEST_RNDV_MSG);
        rreq->ch.rndv = RNDV_CH3;
        if (pkt->type == MPIDI_CH3_PKT_RDMA_RTS) {
            rreq->ch.rndv = RNDV_RTS;
            rreq->ch.rndv_addr = pkt->rdma_rts.addr;
            rreq->ch.rndv_key = pkt->rdma_rts.key;
        }
    }
    MPID_THREAD_CS_EXIT(POBJ, MPIR_THREAD_POBJ_MSGQ_MUTEX);
    MPIR_ERR_CHKANDJUMP1(!rreq, mpi_errno, MPI_ERR_OTHER, "**nomemreq", "**nomemuereq %d",
                         MPIDI_CH3U_Recvq_count_unexp());
    if (found)
        mpi_errno = rndv_recv(vc, rreq);
    else if (MPIR_cc_get(rreq->cc) != 0)
        MPIDI_CH3_Progress_signal_completion();
  fn_fail:
    return mpi_errno;
}

/* A control packet carries no data: none taken, no request to go on;
 * its request, the sender's (sender 1) or the receiver's. */
static MPIR_Request *rndv_ctl_req(const MPIDI_CH3I_Pkt_rctl_t * p, int sender, intptr_t * buflen,
                                  MPIR_Request ** rreqp)
{
    MPIR_Request *req;

    *buflen = 0;
    *rreqp = NULL;
    MPIR_Request_get_ptr(sender ? p->sender_req_id : p->receiver_req_id, req);
    return req;
}

/* Sender: write the receiver's part of a split copy from sreq's buffer. */
static int rndv_push(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                     MPIR_Request ** rreqp)
{
    MPIDI_CH3I_Pkt_rctl_t *p = &pkt->rdma_ctl;
    MPIR_Request *sreq = rndv_ctl_req(p, 1, buflen, rreqp);
    MPIR_Datatype *dtp;
    MPI_Aint lb;
    intptr_t sz;
    int contig, done = 0;
    rdma_status_t st;

    (void) data;
    MPIDI_Datatype_get_info(sreq->dev.user_count, sreq->dev.datatype, contig, sz, dtp, lb);
    st = rdma_chan_rndv_copy(MPIDI_CH3I_link(vc), 0,
                             (char *) MPIR_get_contig_ptr(sreq->dev.user_buf, lb) + p->off,
                             p->len, p->raddr, p->key, NULL, &done);
    MPIR_Assert(st != RDMA_OK || done); /* a push is shared memory's: synchronous */
    if (st != RDMA_OK && st != RDMA_ERR_REFUSED)
        return MPIDI_CH3I_RDMA_errno(vc, st);
    if (st != RDMA_OK)
        sreq->ch.rndv = RNDV_REFUSED;
    return rndv_ctl(vc, MPIDI_CH3_PKT_RDMA_PUSHED, p->sender_req_id, p->receiver_req_id,
                    st != RDMA_OK, 0, 0, 0, 0);
}

/* Receiver: the sender wrote its part (or could not). */
static int rndv_pushed(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                       MPIR_Request ** rreqp)
{
    MPIDI_CH3I_Pkt_rctl_t *p = &pkt->rdma_ctl;
    MPIR_Request *rreq = rndv_ctl_req(p, 0, buflen, rreqp);

    (void) data;
    if (rreq->ch.rndv == RNDV_REFUSED)
        return MPI_SUCCESS;
    if (p->status)
        return rndv_recv_refused(vc, rreq, RDMA_ERR_REFUSED);
    MPIDI_CH3I_Owed_paid(rreq->handle);
    return MPID_Request_complete(rreq);
}

/* Sender: the receiver has read the buffer; or either end could not copy
 * (a CTS, then: CH3 sends the data). */
static int rndv_done(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                     MPIR_Request ** rreqp)
{
    MPIDI_CH3I_Pkt_rctl_t *p = &pkt->rdma_ctl;
    MPIR_Request *sreq = rndv_ctl_req(p, 1, buflen, rreqp);
    MPIDI_CH3_Pkt_t cts;

    MPIDI_CH3I_Owed_paid(p->sender_req_id);
    MPIDI_CH3I_Rndv_release(vc, sreq);
    if (!p->status && sreq->ch.rndv == RNDV_OK)
        return MPID_Request_complete(sreq);
    MPIDI_Pkt_init(&cts.rndv_clr_to_send, MPIDI_CH3_PKT_RNDV_CLR_TO_SEND);
    cts.rndv_clr_to_send.sender_req_id = p->sender_req_id;
    cts.rndv_clr_to_send.receiver_req_id = p->receiver_req_id;
    return MPIDI_CH3_PktHandler_RndvClrToSend(vc, &cts, data, buflen, rreqp);
}

void MPIDI_CH3I_Rndv_finalize(void)
{
    if (reads_hook >= 0)
        MPIR_Progress_hook_deregister(reads_hook);
    reads_hook = -1;
}

void MPIDI_CH3I_Rndv_init(MPIDI_VC_t * vc, MPIDI_CH3_PktHandler_Fcn ** pkt)
{
    if (vc) {
        vc->rndvSend_fn = rndv_send;
        vc->rndvRecv_fn = rndv_recv;
        return;
    }
    if (reads_hook < 0)
        MPIR_Progress_hook_register(rndv_reads_hook, &reads_hook);
    pkt[MPIDI_CH3_PKT_RNDV_REQ_TO_SEND] = rndv_rts;
    pkt[MPIDI_CH3_PKT_RDMA_RTS] = rndv_rts;
    pkt[MPIDI_CH3_PKT_RDMA_PUSH] = rndv_push;
    pkt[MPIDI_CH3_PKT_RDMA_PUSHED] = rndv_pushed;
    pkt[MPIDI_CH3_PKT_RDMA_DONE] = rndv_done;
}
