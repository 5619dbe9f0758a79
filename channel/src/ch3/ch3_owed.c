/*
 * ch3_owed.c -- answers owed by a peer.  CH3 leaves some requests waiting
 * for the peer's answer, in no queue CH3 or the channel searches: a
 * rendezvous send for its CTS or DONE (rdma_rndv.c), a rendezvous receive
 * for its data once its CTS is sent or for PUSHED, a synchronous send for
 * its acknowledgement (ch3_send.c sees each CTS and synchronous send go
 * out).  They are listed here, with a reference each, until the
 * answer arrives, so that a failing VC completes them with its error.
 * The list is the global critical section's.
 */
#include "rdma_glue.h"
#include "utlist.h"

typedef struct owed {
    MPIDI_VC_t *vc;
    MPIR_Request *req;
    struct owed *next, *prev;
} owed_t;
static owed_t *owed_head;

static void owed_done(owed_t * o, int err)
{
    DL_DELETE(owed_head, o);
    if (err != MPI_SUCCESS) {
        o->req->status.MPI_ERROR = err;
        MPID_Request_complete(o->req);
    }
    MPIR_Request_free(o->req);
    MPL_free(o);
}

/* Not on a VC that failed: the send of what asks for the answer fails. */
void MPIDI_CH3I_Owed_add(MPIDI_VC_t * vc, MPIR_Request * req)
{
    owed_t *o = vc->ch.terminating == MPIDI_CH3I_TERM_FAILED ? NULL
        : MPL_malloc(sizeof(*o), MPL_MEM_OTHER);

    if (o == NULL)
        return;
    o->vc = vc;
    o->req = req;
    MPIR_Request_add_ref(req);
    DL_APPEND(owed_head, o);
}

/* The packet req (handle) waited for arrived. */
void MPIDI_CH3I_Owed_paid(MPI_Request handle)
{
    owed_t *o, *t;

    DL_FOREACH_SAFE(owed_head, o, t) {
        if (o->req->handle == handle) {
            owed_done(o, MPI_SUCCESS);
            return;
        }
    }
}

int MPIDI_CH3I_Owed_rndv_send(MPIR_Request ** sreq_p, const void *buf, MPI_Aint count,
                              MPI_Datatype datatype, int dt_contig, intptr_t data_sz,
                              MPI_Aint dt_true_lb, int rank, int tag, MPIR_Comm * comm,
                              int context_offset)
{
    MPIDI_VC_t *vc;
    int mpi_errno = MPIDI_CH3_RndvSend(sreq_p, buf, count, datatype, dt_contig, data_sz,
                                       dt_true_lb, rank, tag, comm, context_offset);

    MPIDI_Comm_get_vc(comm, rank, &vc);
    if (mpi_errno == MPI_SUCCESS && *sreq_p && !MPIR_Request_is_complete(*sreq_p))
        MPIDI_CH3I_Owed_add(vc, *sreq_p);
    return mpi_errno;
}

void MPIDI_CH3I_Owed_pkt(MPIDI_VC_t * vc, const MPIDI_CH3_Pkt_t * pkt)
{
    MPIR_Request *req;

    if (pkt->type == MPIDI_CH3_PKT_RNDV_CLR_TO_SEND)
        MPIR_Request_get_ptr(pkt->rndv_clr_to_send.receiver_req_id, req);
    else
        MPIR_Request_get_ptr(pkt->eager_sync_send.sender_req_id, req);
    if (req)
        MPIDI_CH3I_Owed_add(vc, req);
}

/* CH3's CTS: also for a send that tried the channel's rendezvous, whose
 * exposure goes before CH3 sends the data. */
static int owed_cts(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                    MPIR_Request ** rreqp)
{
    MPIR_Request *sreq;

    MPIR_Request_get_ptr(pkt->rndv_clr_to_send.sender_req_id, sreq);
    MPIDI_CH3I_Owed_paid(pkt->rndv_clr_to_send.sender_req_id);
    MPIDI_CH3I_Rndv_release(vc, sreq);
    return MPIDI_CH3_PktHandler_RndvClrToSend(vc, pkt, data, buflen, rreqp);
}

static int owed_data(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                     MPIR_Request ** rreqp)
{
    MPIDI_CH3I_Owed_paid(pkt->rndv_send.receiver_req_id);
    return MPIDI_CH3_PktHandler_RndvSend(vc, pkt, data, buflen, rreqp);
}

static int owed_ack(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                    MPIR_Request ** rreqp)
{
    MPIDI_CH3I_Owed_paid(pkt->eager_sync_ack.sender_req_id);
    return MPIDI_CH3_PktHandler_EagerSyncAck(vc, pkt, data, buflen, rreqp);
}

/* vc is destroyed: what waits on it is CH3's to end (err MPI_SUCCESS), or
 * vc failed, err each request's error. */
void MPIDI_CH3I_Owed_end(MPIDI_VC_t * vc, int err)
{
    owed_t *o, *t;

    DL_FOREACH_SAFE(owed_head, o, t) {
        if (o->vc == vc)
            owed_done(o, err);
    }
}

/* Route the packets that pay CH3's rendezvous through the list. */
void MPIDI_CH3I_Owed_init(MPIDI_CH3_PktHandler_Fcn ** pkt)
{
    pkt[MPIDI_CH3_PKT_RNDV_CLR_TO_SEND] = owed_cts;
    pkt[MPIDI_CH3_PKT_RNDV_SEND] = owed_data;
    pkt[MPIDI_CH3_PKT_EAGER_SYNC_ACK] = owed_ack;
}
