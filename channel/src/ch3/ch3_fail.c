/*
 * ch3_fail.c -- a peer that dies: its VC fails, what waits on it completes
 * with MPIX_ERR_PROC_FAILED, and the rest of the job goes on.
 *
 * A death is learnt two ways:
 *   - the channel sees it: a transport fails the connection (verbs retry
 *     exhaustion, a shm peer's pidfd, a pull from a dead process) and the
 *     core tells its owner (rdma_chan_owner_t.failed, rdma_owner.c), or
 *     an operation on the VC returns RDMA_ERR_PEER (MPIDI_CH3I_RDMA_errno);
 *   - the process manager says so: under -disable-auto-cleanup Hydra sends
 *     every survivor SIGUSR1 when a process exits before MPI_Finalize.  The
 *     handler only counts; the next progress pass reads Hydra's list of
 *     dead processes (MPIDI_CH3U_Check_for_failed_procs), which terminates
 *     their VCs (MPIDI_CH3_Connection_terminate), each after reading what
 *     its peer wrote before it died.  That also reaches a rank that died
 *     before it ever connected, which no transport can see.
 *
 * Failing a VC (MPIDI_CH3I_VC_fail; once: MPIDI_CH3I_TERM_FAILED): one line on
 * stderr naming the rank and its host, unless MPIR_CVAR_ENABLE_FT says the
 * program handles failures itself (and MPICH's ft tests take any output
 * but theirs for a failure); the VC leaves the poll list and its
 * link is quiesced; its queued sends and the receive in progress complete
 * with MPIX_ERR_PROC_FAILED carrying that line; CH3 completes the posted
 * receives and marks the VC MORIBUND (MPIDI_CH3U_Handle_connection), so
 * later operations on it fail at once and MPI_Finalize skips it.  A VC
 * whose close handshake is done (TERM_CLOSED or TERM_DOWN) is never failed, nor
 * one of CH3's temporary connect-to-root VCs (rdma_owner.c: a failure
 * there is an error of the MPI call, as CH3's dynamic-process code
 * expects); VCs of other process groups (spawned, connected) fail like the
 * job's.  The requests that wait for an answer from the peer are in
 * ch3_owed.c's list.
 */
#include "rdma_glue.h"
#include <signal.h>

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

int MPIDI_CH3I_VC_fail(MPIDI_VC_t * vc, const char *why)
{
    int err;
    MPIR_Request *req;

    if (vc->ch.terminating || vc->state == MPIDI_VC_STATE_MORIBUND
        || vc->state == MPIDI_VC_STATE_INACTIVE_CLOSED || vc->state == MPIDI_VC_STATE_CLOSED)
        return MPI_SUCCESS;
    vc->ch.terminating = MPIDI_CH3I_TERM_FAILED;
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
    rdma_link_abort(MPIDI_CH3I_link(vc));       /* its reads in flight fail now */
    return drained != MPI_SUCCESS ? drained : mpi_errno;
}
