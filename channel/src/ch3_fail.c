/*
 * ch3_fail.c -- a peer that dies: its VC fails, what waits on it completes
 * with MPIX_ERR_PROC_FAILED, and the rest of the job goes on.
 *
 * A death is learnt two ways:
 *   - the channel sees it: a transport fails the connection (verbs retry
 *     exhaustion, a shm peer's pidfd, a pull from a dead process) and the
 *     core tells its owner (rdma_chan_owner_t.failed, rdma_channel.c), or
 *     an operation on the VC returns RDMA_ERR_PEER (MPIDI_CH3I_RDMA_errno);
 *   - the process manager says so: under -disable-auto-cleanup Hydra sends
 *     every survivor SIGUSR1 when a process exits before MPI_Finalize.  The
 *     handler only counts; the next progress pass reads Hydra's list of
 *     dead processes (MPIDI_CH3U_Check_for_failed_procs), which terminates
 *     their VCs (MPIDI_CH3_Connection_terminate), each after reading what
 *     its peer wrote before it died.  That also reaches a rank that died
 *     before it ever connected, which no transport can see.
 *
 * Failing a VC (MPIDI_CH3I_VC_fail; once: terminating 3): one line on
 * stderr naming the rank and its host, unless MPIR_CVAR_ENABLE_FT says the
 * program handles failures itself (and MPICH's ft tests take any output
 * but theirs for a failure); the VC leaves the poll list and its
 * link is quiesced; its queued sends and the receive in progress complete
 * with MPIX_ERR_PROC_FAILED carrying that line; CH3 completes the posted
 * receives and marks the VC MORIBUND (MPIDI_CH3U_Handle_connection), so
 * later operations on it fail at once and MPI_Finalize skips it.  A VC
 * whose close handshake is done (terminating 1 or 2) is never failed, nor
 * one of CH3's temporary connect-to-root VCs (rdma_channel.c: a failure
 * there is an error of the MPI call, as CH3's dynamic-process code
 * expects); VCs of other process groups (spawned, connected) fail like the
 * job's.
 */
#include "mpidi_ch3_impl.h"
#include <signal.h>
#include "utlist.h"

/* SIGUSR1s received: bumped by the handler in whatever thread the signal
 * lands (atomic, relaxed: only the count matters), compared by progress
 * with usr1_seen (the global critical section's).  usr1_prev is written
 * before the handler is installed and never again. */
MPL_atomic_int_t MPIDI_CH3I_usr1_count = MPL_ATOMIC_INT_T_INITIALIZER(0);
int MPIDI_CH3I_usr1_seen;
static struct sigaction usr1_prev;

/* The notice also passes on to the handler the program had before
 * MPI_Init; a blocking wait it interrupts (EINTR) goes back to polling.
 * Installed once and kept after MPI_Finalize, like ch3:nemesis' handler:
 * a peer that dies later still signals, and the default action would end
 * this process. */
__attribute__ ((cold))
static void usr1_notice(int sig, siginfo_t * info, void *ctx)
{
    MPL_atomic_fetch_add_int(&MPIDI_CH3I_usr1_count, 1);
    if (usr1_prev.sa_flags & SA_SIGINFO)
        usr1_prev.sa_sigaction(sig, info, ctx);
    else if (usr1_prev.sa_handler != SIG_DFL && usr1_prev.sa_handler != SIG_IGN)
        usr1_prev.sa_handler(sig);
}

void MPIDI_CH3I_Fault_init(void)
{
    struct sigaction sa = {.sa_sigaction = usr1_notice, .sa_flags = SA_SIGINFO | SA_RESTART };
    struct sigaction cur;

    if (sigaction(SIGUSR1, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO
                                                 && cur.sa_sigaction == usr1_notice))
        return;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
        return;                 /* ignored: no notices (and no harm) */
    usr1_prev = cur;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

/* Hydra's notice arrived: fail the VCs of the processes it lists.  Not
 * once MPI_Finalize has freed MPI_COMM_WORLD (before the device's part):
 * MPICH builds a group of the list, from it.  The transports still see a
 * connected peer die there, which is all the close handshake waits for. */
int MPIDI_CH3I_Fault_notice(void)
{
    MPIDI_CH3I_usr1_seen = MPL_atomic_relaxed_load_int(&MPIDI_CH3I_usr1_count);
    return MPIR_Process.comm_world ? MPIDI_CH3U_Check_for_failed_procs() : MPI_SUCCESS;
}

/* --- answers owed by a peer --------------------------------------------
 * CH3 leaves some requests waiting for the peer's answer, in no queue CH3
 * or the channel searches: a rendezvous send for its CTS (rndvSend_fn), a
 * rendezvous receive for its data once its CTS is sent, a synchronous
 * send for its acknowledgement (ch3_send.c sees each CTS and synchronous
 * send go out).  They are listed here, with a reference each, until the
 * answer arrives, so that a failing VC completes them with its error.
 * The list is the global critical section's. */
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
static void owed_add(MPIDI_VC_t * vc, MPIR_Request * req)
{
    owed_t *o = vc->ch.terminating == 3 ? NULL : MPL_malloc(sizeof(*o), MPL_MEM_OTHER);

    if (o == NULL)
        return;
    o->vc = vc;
    o->req = req;
    MPIR_Request_add_ref(req);
    DL_APPEND(owed_head, o);
}

/* The packet req (handle) waited for arrived. */
static void owed_paid(MPI_Request handle)
{
    owed_t *o, *t;

    DL_FOREACH_SAFE(owed_head, o, t) {
        if (o->req->handle == handle) {
            owed_done(o, MPI_SUCCESS);
            return;
        }
    }
}

static int owed_rndv_send(MPIR_Request ** sreq_p, const void *buf, MPI_Aint count,
                          MPI_Datatype datatype, int dt_contig, intptr_t data_sz,
                          MPI_Aint dt_true_lb, int rank, int tag, MPIR_Comm * comm,
                          int context_offset)
{
    MPIDI_VC_t *vc;
    int mpi_errno = MPIDI_CH3_RndvSend(sreq_p, buf, count, datatype, dt_contig, data_sz,
                                       dt_true_lb, rank, tag, comm, context_offset);

    MPIDI_Comm_get_vc(comm, rank, &vc);
    if (mpi_errno == MPI_SUCCESS && *sreq_p && !MPIR_Request_is_complete(*sreq_p))
        owed_add(vc, *sreq_p);
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
        owed_add(vc, req);
}

static int owed_cts(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                    MPIR_Request ** rreqp)
{
    owed_paid(pkt->rndv_clr_to_send.sender_req_id);
    return MPIDI_CH3_PktHandler_RndvClrToSend(vc, pkt, data, buflen, rreqp);
}

static int owed_data(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                     MPIR_Request ** rreqp)
{
    owed_paid(pkt->rndv_send.receiver_req_id);
    return MPIDI_CH3_PktHandler_RndvSend(vc, pkt, data, buflen, rreqp);
}

static int owed_ack(MPIDI_VC_t * vc, MPIDI_CH3_Pkt_t * pkt, void *data, intptr_t * buflen,
                    MPIR_Request ** rreqp)
{
    owed_paid(pkt->eager_sync_ack.sender_req_id);
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

/* Route vc's rendezvous, and the packets that pay them, through the list. */
void MPIDI_CH3I_Owed_init(MPIDI_VC_t * vc, MPIDI_CH3_PktHandler_Fcn ** pkt)
{
    if (vc)
        vc->rndvSend_fn = owed_rndv_send;
    else {
        pkt[MPIDI_CH3_PKT_RNDV_CLR_TO_SEND] = owed_cts;
        pkt[MPIDI_CH3_PKT_RNDV_SEND] = owed_data;
        pkt[MPIDI_CH3_PKT_EAGER_SYNC_ACK] = owed_ack;
    }
}

int MPIDI_CH3I_VC_fail(MPIDI_VC_t * vc, const char *why)
{
    int err;
    MPIR_Request *req;

    if (vc->ch.terminating || vc->state == MPIDI_VC_STATE_MORIBUND
        || vc->state == MPIDI_VC_STATE_INACTIVE_CLOSED || vc->state == MPIDI_VC_STATE_CLOSED)
        return MPI_SUCCESS;
    vc->ch.terminating = 3;
    if (!MPIR_CVAR_ENABLE_FT)
        fprintf(stderr, "[ch3:rdma] rank %d: %s\n", MPIR_Process.rank, why);
    MPIDI_CH3I_RDMA_close(vc);
    err = MPIDI_CH3I_RDMA_peer_errno(why);
    MPIDI_CH3I_Sendq_fail(vc, err);
    MPIDI_CH3I_Owed_end(vc, err);
    if ((req = vc->ch.recv_active) != NULL) {
        vc->ch.recv_active = NULL;
        req->status.MPI_ERROR = err;
        MPID_Request_complete(req);
    }
    vc->ch.pkt_off = 0;
    return MPIDI_CH3U_Handle_connection(vc, MPIDI_VC_EVENT_TERMINATED);
}

/* Read what vc's peer wrote before it died (it writes no more): until a
 * few passes over the transports find nothing new. */
static int vc_drain(MPIDI_VC_t * vc)
{
    int mpi_errno = MPI_SUCCESS, progressed, idle = 0;

    while (idle < 64 && mpi_errno == MPI_SUCCESS && vc->ch.on_ready_list && !vc->ch.terminating) {
        progressed = FALSE;
        mpi_errno = MPIDI_CH3I_RDMA_poll_transports();
        if (mpi_errno == MPI_SUCCESS)
            mpi_errno = MPIDI_CH3I_Recv_progress(vc, &progressed);
        idle = progressed ? 0 : idle + 1;
    }
    return mpi_errno;
}

/* The process manager lists vc's process as dead: fail vc, naming its
 * rank and host (MPIDI_CH3I_RDMA_dead_why). */
int MPIDI_CH3I_VC_dead(MPIDI_VC_t * vc)
{
    char why[384];
    int drained = vc_drain(vc), mpi_errno;

    MPIDI_CH3I_RDMA_dead_why(vc, why, sizeof(why));
    mpi_errno = MPIDI_CH3I_VC_fail(vc, why);
    return drained != MPI_SUCCESS ? drained : mpi_errno;
}
