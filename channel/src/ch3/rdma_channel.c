/*
 * rdma_channel.c -- the CH3 glue of the five-function RDMA channel
 * interface (P3 sec. 2.2): init_process_group, init, finalize, put_datav
 * (inline, rdma_glue.h), read_datav, over the plain-C core in rdma_chan.c,
 * and the one place where channel statuses become mpi_errno
 * (rdma_mpi_errno).  What the core asks of CH3 (VCs, cards, hellos) is
 * rdma_owner.c's; the blocking wait and its spin budget rdma_block.c's.
 *
 * Every VC owns one rdma_link_t (MPIDI_CH3I_link(vc)): its transport
 * connection, pipe and rendezvous (rdma_link.h).  Its transport is chosen
 * once, in init_process_group: shm for peers on this node, verbs for the
 * others (MPIR_CVAR_CH3_RDMA_TRANSPORT overrides).  Connections are made on
 * first use; the peer's business card comes from PMI (CH3's
 * P<rank>-businesscard key, published by MPIDI_PG_SetConnInfo).  Settings
 * come validated from rdma_cvars.c; the counters are MPI_T performance
 * variables from init to finalize (rdma_pvars.c).
 */
#include "rdma_glue.h"

rdma_chan_t MPIDI_CH3I_chan;
MPIDI_PG_t *MPIDI_CH3I_RDMA_pg;
char MPIDI_CH3I_RDMA_card[MPIDI_CH3I_RDMA_CARD_LEN];
struct MPIDI_VC *MPIDI_CH3I_ready_vcs;
int MPIDI_CH3I_poll_spins;

/* The one place a channel status becomes an mpi_errno: the diagnosis is
 * MPIDI_CH3I_chan.msg, under the error class of the phase (an operation on
 * a VC whose peer failed: MPIX_ERR_PROC_FAILED). */
int rdma_mpi_errno(rdma_status_t st, int at)
{
    int mpi_errno = MPI_SUCCESS;
    const char *msg = MPIDI_CH3I_chan.msg;

    if (st == RDMA_OK)
        return MPI_SUCCESS;
    if (at == RDMA_AT_CONFIG)
        MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|cvar", "**ch3|rdma|cvar %s", msg);
    else if (at == RDMA_AT_INIT)
        MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|init", "**ch3|rdma|init %s", msg);
    else if (at == RDMA_AT_VC && st == RDMA_ERR_PEER)
        MPIR_ERR_SET1(mpi_errno, MPIX_ERR_PROC_FAILED, "**ch3|rdma|xport", "**ch3|rdma|xport %s",
                      msg);
    else
        MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport", "**ch3|rdma|xport %s", msg);
    return mpi_errno;
}

/* --- the five functions ---------------------------------------------- */

/* Assign each peer its transport.  (CH3 itself creates the process group
 * through PMI; what is left for the channel is the per-peer choice.) */
int MPIDI_CH3I_RDMA_init_process_group(MPIDI_PG_t * pg, int pg_rank)
{
    static const rdma_xport_ops_t *const ops[RDMA_XP_N] = { &rdma_xport_shm, &rdma_xport_verbs };
    int mpi_errno = MPI_SUCCESS, i, *node = NULL;
    rdma_chan_config_t cfg;
    rdma_status_t st;
    MPIR_CHKLMEM_DECL(1);

    MPIDI_CH3I_RDMA_pg = pg;
    st = MPIDI_CH3I_RDMA_config_get(&cfg, MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg));
    mpi_errno = rdma_mpi_errno(st, RDMA_AT_CONFIG);
    MPIR_ERR_CHECK(mpi_errno);
    rdma_chan_init(&MPIDI_CH3I_chan, &cfg, ops, pg_rank, pg->size, (const char *) pg->id,
                   &MPIDI_CH3I_RDMA_owner);
    MPIDI_CH3I_Rndv_config(&cfg);
    MPIR_CHKLMEM_MALLOC(node, int *, pg->size * sizeof(int), mpi_errno, "node ids", MPL_MEM_OTHER);
    for (i = 0; i < pg->size; i++) {
        node[i] = pg->vct[i].node_id;
        MPIDI_CH3I_link(&pg->vct[i])->xc.owner = &pg->vct[i];
    }
    mpi_errno = rdma_mpi_errno(rdma_chan_assign(&MPIDI_CH3I_chan, node), RDMA_AT_INIT);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    MPIR_CHKLMEM_FREEALL();
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Open the transports some peer needs and publish the business card. */
int MPIDI_CH3I_RDMA_init(MPIDI_PG_t * pg, int pg_rank)
{
    int mpi_errno, i;

    mpi_errno = MPIDI_CH3I_RDMA_init_process_group(pg, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = rdma_mpi_errno(rdma_chan_open(&MPIDI_CH3I_chan, MPIDI_CH3I_RDMA_card,
                                              sizeof(MPIDI_CH3I_RDMA_card)),
                               RDMA_AT_INIT);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_CH3I_RDMA_hello_init(pg, pg_rank);
    MPIDI_CH3I_RDMA_early_init();
    for (i = 0; i < pg->size; i++)
        if (i != pg_rank)
            MPIDI_CH3I_RDMA_eager_set(&pg->vct[i]);
    mpi_errno = MPIDI_CH3I_RDMA_cpus_publish(pg, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_PG_SetConnInfo(pg_rank, MPIDI_CH3I_RDMA_card);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_CH3I_poll_spins = MPIDI_CH3I_RDMA_spins(pg, pg_rank);
    MPIDI_CH3I_RDMA_pvars_start();
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

int MPIDI_CH3I_RDMA_finalize(void)
{
    rdma_status_t st;

    MPIDI_CH3I_RDMA_pvars_stop();
    MPIDI_CH3I_RDMA_early_fini();
    st = MPIDI_CH3I_RDMA_pg ? rdma_chan_finalize(&MPIDI_CH3I_chan) : RDMA_OK;

    MPIDI_CH3I_ready_vcs = NULL;
    return rdma_mpi_errno(st, RDMA_AT_RUN);
}

/* An operation on vc failed with st.  RDMA_ERR_PEER fails vc, but not
 * before its frames are read: a link that failed while READY (vc on the
 * ready list) waits for the read that finds none left (drained).
 * RDMA_ERR_PROTO (the peer broke the pipe's protocol, or wrote over its
 * memory) fails vc at once: nothing more can be read from it, and the
 * error is that peer's alone (a port server outlives such a client; until
 * 2026-12-05 every later call, MPI_Finalize too, returned it). */
static int rdma_vc_errno(MPIDI_VC_t * vc, rdma_status_t st, int drained)
{
    int grp = MPIDI_CH3I_RDMA_vc_fails(vc);
    int mpi_errno = rdma_mpi_errno(st, grp ? RDMA_AT_VC : RDMA_AT_RUN);

    if (grp && (st == RDMA_ERR_PROTO
                || (st == RDMA_ERR_PEER && (drained || !vc->ch.on_ready_list
                                            || MPIDI_CH3I_link(vc)->xc.state != RDMA_CONN_FAILED))))
        MPIDI_CH3I_VC_fail(vc, MPIDI_CH3I_chan.msg);
    return mpi_errno;
}

int MPIDI_CH3I_RDMA_errno(MPIDI_VC_t * vc, rdma_status_t st)
{
    return rdma_vc_errno(vc, st, 0);
}

/* Why job VC vc failed when the process manager reports its process
 * dead: its rank and host (its business card's). */
void MPIDI_CH3I_RDMA_dead_why(MPIDI_VC_t * vc, char *why, size_t len)
{
    char card[sizeof(MPIDI_CH3I_RDMA_card)], host[256] = "?";

    if (MPIDI_CH3I_RDMA_owner.card_of(NULL, vc->pg_rank, card, sizeof(card)) == RDMA_OK)
        rdma_chan_card_token(card, "host", host, sizeof(host));
    snprintf(why, len, "rank %d on %s failed: the process manager reports its process dead",
             vc->pg_rank, host);
}

/* The error of the operations on a VC whose peer failed (why). */
int MPIDI_CH3I_RDMA_peer_errno(const char *why)
{
    if (why != MPIDI_CH3I_chan.msg)
        rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_PEER, "%s", why);
    return rdma_mpi_errno(RDMA_ERR_PEER, RDMA_AT_VC);
}

/* Read what vc's peer has put into the iov, pulling large parts (zc.h);
 * *nbytes may be 0. */
int MPIDI_CH3I_RDMA_read_datav(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * nbytes)
{
    rdma_status_t st = rdma_chan_getv(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), iov, n, nbytes);

    return st == RDMA_OK ? MPI_SUCCESS : rdma_vc_errno(vc, st, 1);
}

/* --- connections ------------------------------------------------------ */

int MPIDI_CH3I_RDMA_connect(MPIDI_VC_t * vc)
{
    rdma_status_t st;

    if (vc->ch.terminating == MPIDI_CH3I_TERM_FAILED)  /* ch3_fail.c */
        return MPIDI_CH3I_RDMA_peer_errno("a send to a rank that failed earlier");
    st = rdma_chan_connect(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc));
    return st == RDMA_OK ? MPI_SUCCESS : MPIDI_CH3I_RDMA_errno(vc, st);
}

RDMA_HOT int MPIDI_CH3I_RDMA_poll_transports(void)
{
    rdma_status_t st = rdma_chan_poll(&MPIDI_CH3I_chan);

    return st == RDMA_OK ? MPI_SUCCESS : rdma_mpi_errno(st, RDMA_AT_RUN);
}

/* A CLOSE arrived on vc: what it writes from now on are its last frames. */
__attribute__ ((cold)) void MPIDI_CH3I_RDMA_closing(MPIDI_VC_t * vc)
{
    rdma_link_closing(MPIDI_CH3I_link(vc));
}

/* CH3's close protocol is done: stop polling vc and quiesce its link (the
 * peer may exit now); rdma_chan_close says when its memory goes. */
int MPIDI_CH3I_RDMA_close(MPIDI_VC_t * vc)
{
    MPIDI_CH3I_RDMA_ready_drop(vc);
    rdma_chan_close(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc));
    return MPI_SUCCESS;
}

/* 1 while vc's link must not be torn down (rdma_link_busy). */
int MPIDI_CH3I_RDMA_busy(MPIDI_VC_t * vc)
{
    return rdma_link_busy(MPIDI_CH3I_link(vc));
}
