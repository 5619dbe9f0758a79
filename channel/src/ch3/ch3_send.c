/*
 * ch3_send.c -- CH3's send entry points over put_datav.
 *
 * Every message is an iov whose first entry is a CH3 header, sent as
 * MPIDI_CH3I_pkt_wire_len bytes (the pipe is a byte stream; the
 * receiver derives a header's length from the transport and the header).
 * If the VC's send queue is empty the iov goes straight into the pipe;
 * what the pipe does not take is kept in a request (header copied into
 * dev.pending_pkt, since callers pass it on their stack) and queued.
 * Queued requests drain in MPIDI_CH3I_Send_progress, in FIFO order.
 *
 * Request references: a request created here starts at 2 (the caller's and
 * the completion's); the send queue holds one more while it is queued.
 */
#include "rdma_glue.h"

static void sendq_enqueue(MPIDI_CH3I_VC * vcch, MPIR_Request * req)
{
    MPIR_Request_add_ref(req);
    req->next = NULL;
    if (vcch->sendq_tail)
        vcch->sendq_tail->next = req;
    else
        vcch->sendq_head = req;
    vcch->sendq_tail = req;
}

static void sendq_dequeue(MPIDI_CH3I_VC * vcch)
{
    MPIR_Request *req = vcch->sendq_head;

    vcch->sendq_head = req->next;
    if (vcch->sendq_head == NULL)
        vcch->sendq_tail = NULL;
    MPIR_Request_free(req);
}

/* Drop nb sent bytes from the front of iov[0..*n); compacts in place. */
static void iov_advance(struct iovec *iov, int *n, size_t nb)
{
    int i = 0, j;

    while (i < *n && nb >= iov[i].iov_len)
        nb -= iov[i++].iov_len;
    for (j = 0; i + j < *n; j++)
        iov[j] = iov[i + j];
    *n = j;
    if (j > 0) {
        iov[0].iov_base = (char *) iov[0].iov_base + nb;
        iov[0].iov_len -= nb;
    }
}

/* Store the unsent rest of iov (nb bytes already sent) in sreq; hdr says
 * whether iov[0] is the packet header. */
static void req_save_iov(MPIR_Request * sreq, const struct iovec *iov, int n, size_t nb, int hdr)
{
    struct iovec tmp[MPL_IOV_LIMIT];
    int i;

    MPIR_Assert(n <= MPL_IOV_LIMIT);
    for (i = 0; i < n; i++)
        tmp[i] = iov[i];
    if (hdr && nb < tmp[0].iov_len && tmp[0].iov_base != (void *) &sreq->dev.pending_pkt) {
        /* the header is not fully sent: it may live on the caller's stack */
        sreq->dev.pending_pkt = *(MPIDI_CH3_Pkt_t *) tmp[0].iov_base;
        tmp[0].iov_base = (void *) &sreq->dev.pending_pkt;
    }
    iov_advance(tmp, &n, nb);
    for (i = 0; i < n; i++)
        sreq->dev.iov[i] = tmp[i];
    sreq->dev.iov_count = n;
    sreq->dev.iov_offset = 0;
}

/* All of sreq's current iov is in the pipe: run its completion action.
 * *complete is FALSE when OnDataAvail loaded more data into the iov. */
static int req_sent(MPIDI_VC_t * vc, MPIR_Request * sreq, int *complete)
{
    int (*fn) (MPIDI_VC_t *, MPIR_Request *, int *) = sreq->dev.OnDataAvail;

    if (fn == NULL) {
        *complete = TRUE;
        return MPID_Request_complete(sreq);
    }
    return fn(vc, sreq, complete);
}

/* Bytes in iov[0..n). */
static inline size_t iov_bytes(const struct iovec *iov, int n)
{
    size_t t = 0;

    while (n-- > 0)
        t += iov[n].iov_len;
    return t;
}

/* Data that keeps to the ring on shared memory (rdma_chan_putv_ring): an
 * accumulate's (a stream unit of at most 256 KiB, which the target reduces
 * as it arrives), a put's of at most RDMA_RMA_RING_MAX bytes, and a get's
 * answer of at most that many that queues behind another send.  zc runs
 * one rendezvous per direction at a time, so a stream of them as
 * zero-copy parts waits a control round trip per operation, while the
 * ring overlaps both ranks' copies: 192-384 KiB puts into an
 * MPI_Win_create window moved 1.10-1.46x the bandwidth through the ring,
 * one put took 0.88-1.02x the time; from 448 KiB the two were even.  A
 * get stream moved 1.24-1.46x at 256-384 KiB, but one get took
 * 1.08-1.18x the time through the ring, so a get's answer that goes out
 * at once stays zero-copy (host H, 2026-12-06, docs/results/rma.md). */
#define RDMA_RMA_RING_MAX (384 * 1024)

static inline int ring_only(const MPIDI_VC_t * vc, const struct iovec *iov, int n)
{
    const MPIDI_CH3_Pkt_t *p = iov[0].iov_base;

    return p->type == MPIDI_CH3_PKT_ACCUMULATE || p->type == MPIDI_CH3_PKT_GET_ACCUM
        || ((p->type == MPIDI_CH3_PKT_PUT
             || (p->type == MPIDI_CH3_PKT_GET_RESP && vc->ch.sendq_head != NULL))
            && iov_bytes(iov + 1, n - 1) <= RDMA_RMA_RING_MAX);
}

/* Queue the unsent rest of iov (nb bytes sent) in sreq, or in a new
 * request returned in *sreq_out (sreq NULL: iStartMsg's). */
static int send_queue(MPIDI_VC_t * vc, MPIR_Request * sreq, const struct iovec *iov, int n,
                      size_t nb, int hdr, MPIR_Request ** sreq_out)
{
    int mpi_errno = MPI_SUCCESS;

    if (sreq == NULL) {
        sreq = MPIR_Request_create(MPIR_REQUEST_KIND__SEND);
        MPIR_ERR_CHKANDJUMP(sreq == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
        MPIR_Object_set_ref(sreq, 2);
        sreq->dev.OnDataAvail = NULL;
        sreq->ch.ring = ring_only(vc, iov, n);
        *sreq_out = sreq;
    }
    req_save_iov(sreq, iov, n, nb, hdr);
    sendq_enqueue(&vc->ch, sreq);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* A CTS or a synchronous send leaves a request waiting for the peer's
 * answer: listed from here on (ch3_fail.c). */
static inline int owes(const void *pkt)
{
    const MPIDI_CH3_Pkt_t *p = pkt;

    return p->type == MPIDI_CH3_PKT_RNDV_CLR_TO_SEND || p->type == MPIDI_CH3_PKT_EAGER_SYNC_SEND;
}

/* Connect vc if needed (the header's length on the wire depends on the
 * link's transport, which a VC of another process group learns when it
 * first connects), set that length in iov[0]; *total: the iov's bytes. */
static inline int send_prepare(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * total)
{
    int mpi_errno = MPI_SUCCESS;

    if (unlikely(MPIDI_CH3I_link(vc)->xc.state != RDMA_CONN_READY)
        && (mpi_errno = MPIDI_CH3I_RDMA_connect(vc)) != MPI_SUCCESS)
        return mpi_errno;
    iov[0].iov_len = MPIDI_CH3I_pkt_wire_len(vc, iov[0].iov_base, sizeof(MPIDI_CH3_Pkt_t));
    *total = iov_bytes(iov, n);
    return mpi_errno;
}

/* iStartMsg(v): one put when nothing is queued; a request (*sreq_out) only
 * for what the pipe does not take. */
static inline __attribute__ ((always_inline))
int start_msg(MPIDI_VC_t * vc, struct iovec *iov, int n, MPIR_Request ** sreq_out)
{
    size_t nb = 0, total;
    int mpi_errno;

    *sreq_out = NULL;
    mpi_errno = send_prepare(vc, iov, n, &total);
    MPIR_ERR_CHECK(mpi_errno);
    if (likely(vc->ch.sendq_head == NULL)) {
        mpi_errno = MPIDI_CH3I_RDMA_put_datav(vc, ring_only(vc, iov, n), iov, n, &nb);
        MPIR_ERR_CHECK(mpi_errno);
        if (nb == total)
            goto fn_exit;
    }
    mpi_errno = send_queue(vc, NULL, iov, n, nb, TRUE, sreq_out);
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* iSend(v): send iov for sreq, running its completion action each time
 * its iov is in the pipe; the rest stays queued in sreq.  If vc fails,
 * sreq completes with the error (MPI_Isend returns, MPI_Wait reports). */
static int send_req(MPIDI_VC_t * vc, MPIR_Request * sreq, struct iovec *iov, int n)
{
    int mpi_errno, complete, hdr = TRUE;
    size_t nb = 0, total;

    if (unlikely(owes(iov[0].iov_base)))
        MPIDI_CH3I_Owed_pkt(vc, iov[0].iov_base);
    sreq->ch.ring = ring_only(vc, iov, n);
    mpi_errno = send_prepare(vc, iov, n, &total);
    MPIR_ERR_CHECK(mpi_errno);
    while (vc->ch.sendq_head == NULL) {
        mpi_errno = MPIDI_CH3I_RDMA_put_datav(vc, sreq->ch.ring, iov, n, &nb);
        MPIR_ERR_CHECK(mpi_errno);
        if (nb < total)
            break;
        mpi_errno = req_sent(vc, sreq, &complete);
        MPIR_ERR_CHECK(mpi_errno);
        if (complete)
            goto fn_exit;
        /* OnDataAvail reloaded sreq->dev.iov with the next piece */
        hdr = FALSE;
        iov = sreq->dev.iov;
        n = sreq->dev.iov_count;
        total = iov_bytes(iov, n);
        nb = 0;
    }
    mpi_errno = send_queue(vc, sreq, iov, n, nb, hdr, NULL);
  fn_exit:
    return mpi_errno;
  fn_fail:
    if (MPIR_ERR_GET_CLASS(mpi_errno) == MPIX_ERR_PROC_FAILED) {
        /* vc's peer failed: the error goes with sreq, as with queued ones
         * (a synchronous send's acknowledgement will not come either) */
        sreq->status.MPI_ERROR = mpi_errno;
        mpi_errno = MPI_SUCCESS;
        while (!MPIR_Request_is_complete(sreq) && mpi_errno == MPI_SUCCESS)
            mpi_errno = MPID_Request_complete(sreq);
    }
    goto fn_exit;
}

/* start_small over a NIC: the header at its own length there
 * (MPIDI_CH3I_pkt_wire_len), without start_msg's iov walk (41 fewer
 * instructions per 8-byte send over verbs, callgrind in the guest).  Out
 * of line and its branch marked unlikely, so that the shared-memory path
 * keeps its code and layout (without the hint its 8-64 B ping-pong took
 * 1.01-1.03x the time; with it 0.98-1.01x, A/A 0.98-1.00x). */
static RDMA_HOT int __attribute__ ((noinline))
start_small_wire(MPIDI_VC_t * vc, const struct iovec *iov, size_t dl, int *done)
{
    size_t hl = MPIDI_CH3I_pkt_wire_len(vc, iov[0].iov_base, sizeof(MPIDI_CH3_Pkt_t));
    char *d = MPIDI_CH3I_RDMA_put_claim(vc, hl + dl);

    if (d == NULL)
        return MPI_SUCCESS;
    memcpy(d, iov[0].iov_base, hl);
    if (dl)
        memcpy(d + hl, iov[1].iov_base, dl);
    *done = TRUE;
    return MPIDI_CH3I_RDMA_put_commit(vc, hl + dl);
}

/* iStartMsg(v)'s common case: a header alone, or with one data entry,
 * with nothing queued, copied straight into one frame; *done is FALSE
 * where it does not apply (a link not READY claims nothing: start_msg
 * then connects it), and nothing was sent.  On shared memory the header
 * is at its length there (MPIDI_CH3I_shm_hdr_len), and the data goes in
 * first: the header shares the cache line the receiver polls for the head
 * flag (rb_pipe_claim), so its stores come right before the flag's (1-2
 * KiB ping-pong 0.76-0.79x the time of header first, docs/results/shm.md). */
static inline __attribute__ ((always_inline))
int start_small(MPIDI_VC_t * vc, const struct iovec *iov, int n, int *done)
{
    size_t hl, dl = n == 2 ? iov[1].iov_len : 0;
    char *d;

    *done = FALSE;
    if (n > 2 || vc->ch.sendq_head != NULL)
        return MPI_SUCCESS;
    if (unlikely(rdma_chan_over_wire(MPIDI_CH3I_link(vc))))
        return start_small_wire(vc, iov, dl, done);
    hl = MPIDI_CH3I_shm_hdr_len(iov[0].iov_base);
    if ((d = MPIDI_CH3I_RDMA_put_claim(vc, hl + dl)) == NULL)
        return MPI_SUCCESS;
    if (dl)
        memcpy(d + hl, iov[1].iov_base, dl);
    if (hl == MPIDI_CH3I_SHM_SEND_HDR)  /* shm_hdr_len's two sizes as constants:
                                         * inline stores, not rep movsq */
        memcpy(d, iov[0].iov_base, MPIDI_CH3I_SHM_SEND_HDR);
    else
        memcpy(d, iov[0].iov_base, sizeof(MPIDI_CH3_Pkt_t));
    *done = TRUE;
    return MPIDI_CH3I_RDMA_put_commit(vc, hl + dl);
}

RDMA_HOT int MPIDI_CH3_iStartMsgv(MPIDI_VC_t * vc, struct iovec *iov, int n_iov, MPIR_Request ** sreq_ptr)
{
    int mpi_errno, done;

    mpi_errno = start_small(vc, iov, n_iov, &done);
    if (done) {
        *sreq_ptr = NULL;
        return mpi_errno;
    }
    return start_msg(vc, iov, n_iov, sreq_ptr);
}

RDMA_HOT int MPIDI_CH3_iStartMsg(MPIDI_VC_t * vc, void *pkt, intptr_t pkt_sz, MPIR_Request ** sreq_ptr)
{
    struct iovec iov = { pkt, (size_t) pkt_sz };

    if (unlikely(owes(pkt)))
        MPIDI_CH3I_Owed_pkt(vc, pkt);
    return MPIDI_CH3_iStartMsgv(vc, &iov, 1, sreq_ptr);
}

int MPIDI_CH3_iSend(MPIDI_VC_t * vc, MPIR_Request * sreq, void *pkt, intptr_t pkt_sz)
{
    struct iovec iov = { pkt, (size_t) pkt_sz };

    return send_req(vc, sreq, &iov, 1);
}

int MPIDI_CH3_iSendv(MPIDI_VC_t * vc, MPIR_Request * sreq, struct iovec *iov, int n_iov)
{
    return send_req(vc, sreq, iov, n_iov);
}

/* A direct one-sided operation in flight (rdma_rma.c) takes its place in
 * vc's send queue as a hold: what is sent after it waits until req
 * completes, i.e. until its bytes are in place (the transport orders
 * nothing after a write).  An RMA-kind request is never a message here. */
void MPIDI_CH3I_Sendq_hold(MPIDI_VC_t * vc, MPIR_Request * req)
{
    req->dev.iov_count = 0;
    sendq_enqueue(&vc->ch, req);
}

/* Drain vc's send queue as far as the pipe allows. */
int MPIDI_CH3I_Send_progress(MPIDI_VC_t * vc, int *progressed)
{
    int mpi_errno = MPI_SUCCESS, complete;
    MPIR_Request *sreq;
    size_t nb;

    while ((sreq = vc->ch.sendq_head) != NULL) {
        if (sreq->kind == MPIR_REQUEST_KIND__RMA) {     /* a hold */
            if (!MPIR_Request_is_complete(sreq))
                break;
            sendq_dequeue(&vc->ch);
            *progressed = TRUE;
            continue;
        }
        mpi_errno = MPIDI_CH3I_RDMA_put_datav(vc, sreq->ch.ring, sreq->dev.iov, sreq->dev.iov_count,
                                              &nb);
        MPIR_ERR_CHECK(mpi_errno);
        if (nb == 0)
            break;
        *progressed = TRUE;
        iov_advance(sreq->dev.iov, &sreq->dev.iov_count, nb);
        if (sreq->dev.iov_count > 0)
            break;
        mpi_errno = req_sent(vc, sreq, &complete);
        MPIR_ERR_CHECK(mpi_errno);
        if (complete)
            sendq_dequeue(&vc->ch);
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    if (vc->ch.terminating == MPIDI_CH3I_TERM_FAILED)
        mpi_errno = MPI_SUCCESS;        /* vc failed: its requests carry the error */
    goto fn_exit;
}

/* vc failed (ch3_fail.c): every queued request completes with err; a
 * hold is only dropped (the transport reports its operation failed). */
void MPIDI_CH3I_Sendq_fail(MPIDI_VC_t * vc, int err)
{
    MPIR_Request *sreq;

    while ((sreq = vc->ch.sendq_head) != NULL) {
        int hold = sreq->kind == MPIR_REQUEST_KIND__RMA;

        if (!hold)
            sreq->status.MPI_ERROR = err;
        sendq_dequeue(&vc->ch);
        if (!hold)
            MPID_Request_complete(sreq);
    }
}
