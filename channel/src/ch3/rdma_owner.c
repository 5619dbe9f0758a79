/*
 * rdma_owner.c -- what the channel core asks of CH3, its owner
 * (rdma_chan_owner_t): the link of a rank, a rank's business card, a link
 * that became READY (the ready list progress polls, CH3's accept queue) or
 * FAILED (ch3_fail.c), and the links to processes outside the job.  And
 * how CH3 meets early messages: the buffers that hold them, its eager
 * limit per VC.
 *
 * Dynamic processes (spawn, connect/accept): VCs of other process groups
 * and CH3's temporary connect-to-root VCs are links outside the job
 * (rdma_chan_dyn_add), connected on first use like the others.  A
 * connecting process presents a hello (rdma_conn_t): "g:<pg id>:<rank>:
 * <its token>" for a VC of its group, "p:<port tag>:<our token>" for a
 * port, whose name carries our business card (MPIDI_CH3_Get_business_card).
 * Hellos without the right token are refused: a port name is a capability.
 */
#include "rdma_glue.h"

static rdma_link_t *rdma_owner_link_of(void *arg, int rank)
{
    MPIDI_PG_t *pg = MPIDI_CH3I_RDMA_pg;

    (void) arg;
    return rank >= 0 && rank < pg->size ? MPIDI_CH3I_link(&pg->vct[rank]) : NULL;
}

/* CH3's P<rank>-businesscard key, published by MPIDI_PG_SetConnInfo. */
static rdma_status_t rdma_owner_card_of(void *arg, int rank, char *buf, size_t len)
{
    (void) arg;
    if (MPIDI_PG_GetConnString(MPIDI_CH3I_RDMA_pg, rank, buf, (int) len) == MPI_SUCCESS)
        return RDMA_OK;
    return rdma_say(buf, len, RDMA_ERR_PEER, "no business card for rank %d", rank);
}

/* --- CH3's early messages: the buffers that hold them, its eager limit -- */

/* EARLY_BUFS (rdma_bufs.h).  CH3 mallocs a buffer for each message that
 * arrives before its receive and frees it once copied out.  glibc gave the
 * top of its heap back to the kernel beyond 128 KiB free, so a stream of
 * early messages faulted in every page again (mpi_early: 992 faults a
 * round for 64 x 64 KiB; mpi_bench --tests bw at 64 KiB: 3.2 GB/s instead
 * of 21 in 6 runs of 15, host H 2026-12-03).  Kept here they are reused;
 * raising glibc's thresholds instead (mallopt) also moved the
 * application's own buffers of 128 KiB-32 MiB to the heap, which made a
 * CMA ping-pong over fresh ones 5-9% slower at 256-512 KiB.  Initialised
 * in MPIDI_CH3I_RDMA_init before any message; the global critical section
 * guards it, as CH3 holds it wherever it allocates or frees these. */
static rdma_bufs_t rdma_early;

static void *rdma_early_alloc(void *arg, size_t len)
{
    (void) arg;
    return MPL_malloc(len, MPL_MEM_BUFFER);
}

static void rdma_early_release(void *arg, void *p, size_t len)
{
    (void) arg;
    (void) len;
    MPL_free(p);
}

void MPIDI_CH3I_RDMA_early_init(void)
{
    static const rdma_bufs_backend_t be = { rdma_early_alloc, rdma_early_release, NULL };

    rdma_bufs_init(&rdma_early, MPIDI_CH3I_chan.cfg.early_bufs, &be);
}

/* At finalize: what the cache did (VERBOSE), then every buffer back. */
void MPIDI_CH3I_RDMA_early_fini(void)
{
    const rdma_bufs_t *b = &rdma_early;

    if (MPIDI_CH3I_chan.cfg.verbose && b->allocated)
        fprintf(stderr, "[ch3:rdma] rank %d: early messages: %llu buffers allocated, %llu "
                "reused, %llu given back over the %zu-byte cap\n", MPIDI_CH3I_chan.rank,
                (unsigned long long) b->allocated, (unsigned long long) b->reused,
                (unsigned long long) b->returned, b->cap);
    rdma_bufs_fini(&rdma_early);
}

/* MPIDI_CH3_EARLY_BUF_ALLOC / _FREE (mpidi_ch3_pre.h). */
void *MPIDI_CH3I_early_buf_alloc(size_t len)
{
    return rdma_bufs_get(&rdma_early, len);
}

void MPIDI_CH3I_early_buf_free(void *p, size_t len)
{
    rdma_bufs_put(&rdma_early, p, len);
}

/* CH3's eager limit on vc (MPIR_CVAR_CH3_RDMA_EAGER_MAX), set on the
 * job's VCs at init and on the others once READY.  It stays CH3's unless
 * set.  Skipping CH3's RTS/CTS took 10-14% off a 128 KiB ping-pong through
 * the ring, but a message that arrives before its receive is copied twice
 * (into CH3's buffer, then out): with early buffers kept, 64 messages of
 * 128 KiB in flight moved 0.87x the bytes of CH3's rendezvous, 13.8-22.8
 * GB/s against a steady 21-23 (ab.sh, 15 pairs, host H 2026-12-03).
 * Where the channel pulls large parts, the pull would also land in that
 * buffer (1.84x the time of 256 KiB in a ping-pong, CMA). */
void MPIDI_CH3I_RDMA_eager_set(MPIDI_VC_t * vc)
{
    const int m = MPIDI_CH3I_chan.cfg.eager_max;

    if (m > 0)                  /* CH3 counts its header */
        vc->eager_max_msg_sz = m + (int) sizeof(MPIDI_CH3_Pkt_eager_send_t);
}

static void rdma_owner_ready(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;

    (void) arg;
    if (vc->ch.terminating == MPIDI_CH3I_TERM_FAILED) {
        rdma_chan_quiesce(&MPIDI_CH3I_chan, l);  /* connected after its process was reported dead */
        return;
    }
    MPIDI_CH3I_RDMA_eager_set(vc);     /* a VC outside the job knows its transport now */
    /* A passively connected VC takes part in CH3's close protocol too. */
    if (vc->state == MPIDI_VC_STATE_INACTIVE)
        MPIDI_CHANGE_VC_STATE(vc, ACTIVE);
    if (!vc->ch.on_ready_list) {
        vc->ch.on_ready_list = 1;
        vc->ch.next_ready = MPIDI_CH3I_ready_vcs;
        MPIDI_CH3I_ready_vcs = vc;
    }
    if (vc->ch.accept_tag) {
        int tag = vc->ch.accept_tag - 1;

        vc->ch.accept_tag = 0;
        if (MPIDI_CH3I_Acceptq_enqueue(vc, tag) != MPI_SUCCESS)
            fprintf(stderr, "[ch3:rdma] a connection to port tag %d could not be queued\n", tag);
    }
}

/* Progress stops polling vc. */
void MPIDI_CH3I_RDMA_ready_drop(MPIDI_VC_t * vc)
{
    MPIDI_VC_t **pp;

    for (pp = &MPIDI_CH3I_ready_vcs; *pp; pp = &(*pp)->ch.next_ready)
        if (*pp == vc) {
            *pp = vc->ch.next_ready;
            break;
        }
    vc->ch.on_ready_list = 0;
}

/* --- the cap on live connections (rdma_chan_evict.c) ------------------- */

/* vc's link may close while CH3 queued nothing on it; it starts a close
 * (answer 0) unless CH3 is tearing vc down, and answers the peer's in any
 * case.  CH3's close protocol then goes on over the next connection: a
 * link it pinned while the peer is not in MPI_Finalize yet (REMOTE_CLOSE
 * here, waiting for our own CLOSE) would otherwise hold a slot the peer's
 * last messages before MPI_Finalize may need (the cap: rdma_chan_evict.c;
 * mpi_conns hung with 8 ranks and a cap of 2). */
static int rdma_owner_quiet(void *arg, rdma_link_t * l, int answer)
{
    MPIDI_VC_t *vc = l->xc.owner;

    (void) arg;
    return vc->ch.sendq_head == NULL && (answer || vc->ch.terminating == MPIDI_CH3I_TERM_NONE);
}

/* vc's link closed: progress stops polling it; what waits to go reopens
 * it.  vc stays ACTIVE: MPI_Finalize's close protocol reopens it (made
 * INACTIVE, it would skip the protocol here while the peer, whose CLOSE
 * was queued behind the eviction, runs it: CH3 asserts on a CLOSE to a
 * closed VC). */
static rdma_status_t rdma_owner_evicted(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;

    (void) arg;
    MPIDI_CH3I_RDMA_ready_drop(vc);
    return vc->ch.sendq_head ? rdma_chan_connect(&MPIDI_CH3I_chan, l) : RDMA_OK;
}

/* --- dynamic processes: links outside the job -------------------------- */

/* Who we are to VCs of other process groups (set at init). */
static char rdma_hello[256];

void MPIDI_CH3I_RDMA_hello_init(MPIDI_PG_t * pg, int pg_rank)
{
    snprintf(rdma_hello, sizeof(rdma_hello), "g:%s:%d:%s", (const char *) pg->id, pg_rank,
             MPIDI_CH3I_chan.token);
}

/* A link outside the job that CH3 closed (MPI_Comm_disconnect) is used
 * again (connect/accept between the same groups): a new connection. */
static void rdma_owner_reopen(MPIDI_VC_t * vc)
{
    vc->ch.terminating = MPIDI_CH3I_TERM_NONE;
    vc->ch.recv_active = NULL;
    vc->ch.pkt_off = 0;
    rdma_chan_dyn_reopen(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc));
}

/* vc (of another process group) is about to connect: its card from the
 * group's connection strings (exchanged by CH3's connect/accept), or it
 * was closed before. */
static rdma_status_t rdma_owner_resolve(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;
    char card[sizeof(MPIDI_CH3I_RDMA_card)];

    (void) arg;
    if (l->xc.state == RDMA_CONN_CLOSED) {
        rdma_owner_reopen(vc);
        return RDMA_OK;
    }
    if (!vc->pg || vc->pg == MPIDI_CH3I_RDMA_pg
        || MPIDI_PG_GetConnString(vc->pg, vc->pg_rank, card, sizeof(card)) != MPI_SUCCESS)
        return rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_PEER,
                        "no business card for rank %d of process group %s", vc->pg_rank,
                        vc->pg ? (const char *) vc->pg->id : "(none)");
    return rdma_chan_dyn_add(&MPIDI_CH3I_chan, l, card, rdma_hello);
}

/* A connect-to-root for the port with that tag: a new VC for CH3's accept
 * queue (rdma_owner_ready). */
static rdma_link_t *rdma_owner_accept_root(int tag)
{
    MPIDI_VC_t *vc = MPL_malloc(sizeof(MPIDI_VC_t), MPL_MEM_ADDRESS);

    if (!vc)
        return NULL;
    MPIDI_VC_Init(vc, NULL, 0);
    vc->connreq_obj = NULL;     /* MPIDI_VC_Init leaves it */
    vc->ch.accept_tag = tag + 1;
    vc->ch.accepted = 1;
    MPIDI_CH3I_link(vc)->fail_reads = 1;        /* fails once matched */
    if (vc->ch.pkt
        && rdma_chan_dyn_add(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), NULL, NULL) == RDMA_OK)
        return MPIDI_CH3I_link(vc);
    MPIDI_CH3_VC_Destroy(vc);
    MPL_free(vc);
    return NULL;
}

/* The token of process group pg's rank r (its card), or "". */
static void rdma_owner_token(MPIDI_PG_t * pg, int r, char *token, size_t len)
{
    char card[sizeof(MPIDI_CH3I_RDMA_card)];

    if (MPIDI_PG_GetConnString(pg, r, card, sizeof(card)) != MPI_SUCCESS
        || rdma_chan_card_token(card, "token", token, len))
        token[0] = '\0';
}

/* A hello from a process outside the job (rdma_chan_owner_t.accept). */
static rdma_link_t *rdma_owner_accept(void *arg, const char *who)
{
    char id[256], token[64], theirs[64];
    int tag, rank, n = 0;
    MPIDI_PG_t *pg;
    MPIDI_VC_t *vc;

    (void) arg;
    if (sscanf(who, "p:%d:%63s%n", &tag, token, &n) == 2 && !who[n])
        return strcmp(token, MPIDI_CH3I_chan.token) ? NULL : rdma_owner_accept_root(tag);
    if (sscanf(who, "g:%255[^:]:%d:%63s%n", id, &rank, token, &n) != 3 || who[n])
        return NULL;
    if (MPIDI_PG_Find(id, &pg) != MPI_SUCCESS || !pg)
        return RDMA_LINK_LATER;         /* CH3 is still distributing that group */
    if (pg == MPIDI_CH3I_RDMA_pg || rank < 0 || rank >= pg->size)
        return NULL;
    rdma_owner_token(pg, rank, theirs, sizeof(theirs));
    vc = &pg->vct[rank];
    if (strcmp(token, theirs))
        return NULL;
    if (MPIDI_CH3I_link(vc)->xc.state == RDMA_CONN_READY
        && (vc->ch.terminating || vc->state != MPIDI_VC_STATE_ACTIVE))
        return RDMA_LINK_LATER;         /* our end of the close is still draining */
    if ((!MPIDI_CH3I_link(vc)->xc.ops || MPIDI_CH3I_link(vc)->xc.state == RDMA_CONN_CLOSED)
        && rdma_owner_resolve(NULL, MPIDI_CH3I_link(vc)) != RDMA_OK)
        return NULL;
    return MPIDI_CH3I_link(vc);
}

/* CH3 frees a VC: a link outside the job is forgotten (its connection
 * closed); a world VC keeps its link until finalize. */
void MPIDI_CH3I_RDMA_vc_destroy(MPIDI_VC_t * vc)
{
    MPIDI_CH3I_RDMA_ready_drop(vc);
    rdma_chan_dyn_del(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc));
}

/* A port name: the tag CH3 put there, then our card (the token in it is
 * what MPIDI_CH3_Connect_to_root presents). */
int MPIDI_CH3_Get_business_card(int myRank, char *value, int length)
{
    int mpi_errno = MPI_SUCCESS;

    MPL_UNREFERENCED_ARG(myRank);
    if (MPL_str_add_string_arg(&value, &length, "rdma", MPIDI_CH3I_RDMA_card) != MPL_SUCCESS)
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**buscard_len");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* A new VC connecting to the process that opened port_name; CH3 then
 * waits for that process to accept (ch3u_port.c). */
int MPIDI_CH3_Connect_to_root(const char *port_name, MPIDI_VC_t ** new_vc)
{
    int mpi_errno = MPI_SUCCESS, tag;
    char card[sizeof(MPIDI_CH3I_RDMA_card)], token[64], hello[96];
    MPIDI_VC_t *vc;
    rdma_status_t st;

    *new_vc = NULL;
    if (MPL_str_get_string_arg(port_name, "rdma", card, sizeof(card)) != MPL_SUCCESS
        || rdma_chan_card_token(card, "token", token, sizeof(token)))
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_PORT, "**ch3|rdma|port", "**ch3|rdma|port %s",
                             port_name);
    mpi_errno = MPIDI_GetTagFromPort(port_name, &tag);
    MPIR_ERR_CHECK(mpi_errno);
    vc = MPL_malloc(sizeof(MPIDI_VC_t), MPL_MEM_ADDRESS);
    MPIR_ERR_CHKANDJUMP(!vc, mpi_errno, MPI_ERR_OTHER, "**nomem");
    MPIDI_VC_Init(vc, NULL, 0);
    MPIDI_CHANGE_VC_STATE(vc, ACTIVE);
    *new_vc = vc;
    snprintf(hello, sizeof(hello), "p:%d:%s", tag, token);
    st = rdma_chan_dyn_add(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), card, hello);
    if (st == RDMA_OK)
        st = rdma_chan_connect(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc));
    mpi_errno = rdma_mpi_errno(st, RDMA_AT_RUN);
    MPIR_ERR_CHECK(mpi_errno);
  fn_exit:
    return mpi_errno;
  fn_fail:
    if (*new_vc) {
        MPIDI_CH3_VC_Destroy(*new_vc);
        MPL_free(*new_vc);
        *new_vc = NULL;
    }
    goto fn_exit;
}

/* A connection from outside the job, accepted here, failed before an
 * MPI_Comm_accept matched it (channel/patches/ch3-port-forget.patch): it
 * costs the server nothing, its connector has the diagnosis.  Not READY
 * yet, or in CH3's accept queue (queued 1): the VC goes (its link with it).
 * Answered by an accept call waiting for the client's reply (queued 2):
 * the VC is made INACTIVE, its sends fail, and that call frees it. */
static rdma_status_t rdma_owner_forget(MPIDI_VC_t * vc, int queued, const char *why)
{
    if (MPIDI_CH3I_chan.cfg.verbose)
        fprintf(stderr, "[ch3:rdma] a connection from outside the job failed before it was "
                "accepted: %s\n", why);
    if (queued == 2) {
        MPIDI_CH3I_RDMA_close(vc);
        MPIDI_CH3I_Sendq_fail(vc, MPIDI_CH3I_RDMA_peer_errno(why));
        MPIDI_CHANGE_VC_STATE(vc, INACTIVE);
        return RDMA_OK;
    }
    MPIDI_CH3_VC_Destroy(vc);
    MPL_free(vc);
    return RDMA_OK;
}

/* A failed connection fails its VC (ch3_fail.c; not after its close
 * handshake; MPIDI_CH3I_RDMA_vc_fails): at once, or if it was READY once
 * its frames are read (rdma_channel.c: rdma_vc_errno).  One accepted here
 * that no accept call matched yet is forgotten; of another temporary VC
 * it is the MPI call's error while CH3 uses the VC. */
static rdma_status_t rdma_owner_failed(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;
    int queued;

    (void) arg;
    if (vc->ch.accepted && !vc->ch.accept_tag && vc->state == MPIDI_VC_STATE_INACTIVE)
        return RDMA_OK;         /* forgotten (queued 2), the accept call frees it */
    queued = vc->ch.accepted ? (vc->ch.accept_tag ? 1 : MPIDI_CH3I_Acceptq_forget(vc)) : 0;
    if (queued)
        return rdma_owner_forget(vc, queued, l->xc.why);
    if (!MPIDI_CH3I_RDMA_vc_fails(vc))
        return vc->state != MPIDI_VC_STATE_ACTIVE && vc->state != MPIDI_VC_STATE_INACTIVE
            ? RDMA_OK : rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_PEER,
                                 "%s", l->xc.why);
    if (vc->ch.on_ready_list || MPIDI_CH3I_VC_fail(vc, l->xc.why) == MPI_SUCCESS)
        return RDMA_OK;
    return rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_SYS,
                    "completing the operations of a failed connection failed (%s)", l->xc.why);
}

const rdma_chan_owner_t MPIDI_CH3I_RDMA_owner = {
    rdma_owner_link_of, rdma_owner_card_of, rdma_owner_ready, rdma_owner_failed,
    rdma_owner_resolve, rdma_owner_accept, MPIDI_CH3I_RDMA_rma_done, NULL,
    rdma_owner_quiet, rdma_owner_evicted
};
