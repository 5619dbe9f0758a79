/*
 * rdma_channel.c -- the five-function RDMA channel interface (the
 * paper's, seed 003 sec. 2.2): init_process_group, init, finalize,
 * put_datav, read_datav, plus the per-VC connection management beneath
 * them.  The one place where channel statuses become mpi_errno.
 *
 * Every VC owns one rdma_link_t (vc->ch.conn): its transport connection,
 * pipe and rendezvous (rdma_link.h).  Its transport is chosen once, in
 * init_process_group: shm for peers on this node, verbs for the others
 * (MPIR_CVAR_CH3_RDMA_TRANSPORT overrides).  Connections are made on first
 * use; the peer's business card comes from PMI (CH3's P<rank>-businesscard
 * key, published by MPIDI_PG_SetConnInfo).  Settings come validated from
 * rdma_cvars.c.
 */
#include "mpidi_ch3_impl.h"
#include <sched.h>
#include <time.h>
#include <unistd.h>

/* One transport in use by this process, the card key that names it and
 * the protocol settings of its links (the bind event's arg). */
typedef struct {
    const rdma_xport_ops_t *ops;
    rdma_xport_t *xp;
    const char *key;
    const rdma_link_config_t *link;
} rdma_xport_slot_t;

static rdma_xport_slot_t xports[RDMA_XP_N] = {
    {&rdma_xport_shm, NULL, "shm", NULL},
    {&rdma_xport_verbs, NULL, "ib", NULL}
};

static MPIDI_PG_t *rdma_pg;
static rdma_chan_config_t rdma_cfg;
struct MPIDI_VC *MPIDI_CH3I_ready_vcs;
int MPIDI_CH3I_poll_spins;

/* Spin budget of blocking waits: none when this node's ranks outnumber
 * the cores this process may run on. */
static int rdma_poll_spins(MPIDI_PG_t * pg, int pg_rank)
{
    cpu_set_t set;
    int i, local = 0, cores;

    if (rdma_cfg.poll_spins >= 0)
        return rdma_cfg.poll_spins;
    for (i = 0; i < pg->size; i++)
        local += pg->vct[i].node_id == pg->vct[pg_rank].node_id;
    cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
        : (int) sysconf(_SC_NPROCESSORS_ONLN);
    return local > cores ? 0 : 2000;
}

/* --- events the transports report (rdma_xport_events_t) --------------- */

static rdma_conn_t *rdma_conn_of(void *arg, int rank)
{
    rdma_xport_slot_t *slot = arg;
    MPIDI_VC_t *vc;

    if (rank < 0 || rank >= rdma_pg->size || rank == MPIR_Process.rank)
        return NULL;
    vc = &rdma_pg->vct[rank];
    return vc->ch.conn.xc.ops == slot->ops ? &vc->ch.conn.xc : NULL;
}

/* Copy the "<key>:<fragment>" token of rank's business card into buf.
 * Tokens are separated by ';': PMI-1 values cannot contain spaces. */
static int rdma_card_of(void *arg, int rank, char *buf, size_t len)
{
    rdma_xport_slot_t *slot = arg;
    char card[1024], *p, *end;
    size_t klen = strlen(slot->key), n;

    if (MPIDI_PG_GetConnString(rdma_pg, rank, card, sizeof(card)) != MPI_SUCCESS)
        return -1;
    for (p = card; (p = strstr(p, slot->key)) != NULL; p += klen) {
        if ((p == card || p[-1] == ';') && p[klen] == ':')
            break;
    }
    if (p == NULL)
        return -1;
    p += klen + 1;
    end = strchr(p, ';');
    n = end ? (size_t) (end - p) : strlen(p);
    if (n >= len)
        return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

static int rdma_conn_bind(void *arg, rdma_conn_t * c, const rdma_conn_mem_t * mem)
{
    return rdma_link_bind(c, ((rdma_xport_slot_t *) arg)->link, mem);
}

static void rdma_conn_ready(void *arg, rdma_conn_t * c)
{
    MPIDI_VC_t *vc = c->owner;
    char desc[256];

    (void) arg;
    if (rdma_cfg.verbose) {
        c->ops->describe(c, desc, sizeof(desc));
        fprintf(stderr, "[ch3:rdma] rank %d -> %d: %s\n", MPIR_Process.rank, c->peer, desc);
    }
    /* A passively connected VC takes part in CH3's close protocol too. */
    if (vc->state == MPIDI_VC_STATE_INACTIVE)
        MPIDI_CHANGE_VC_STATE(vc, ACTIVE);
    if (!vc->ch.on_ready_list) {
        vc->ch.on_ready_list = 1;
        vc->ch.next_ready = MPIDI_CH3I_ready_vcs;
        MPIDI_CH3I_ready_vcs = vc;
    }
}

/* --- the five functions ---------------------------------------------- */

/* Assign each peer its transport.  (CH3 itself creates the process group
 * through PMI; what is left for the channel is the per-peer choice.) */
int MPIDI_CH3I_RDMA_init_process_group(MPIDI_PG_t * pg, int pg_rank)
{
    int mpi_errno = MPI_SUCCESS, i;
    rdma_transport_choice_t t = rdma_cfg.transport;
    int my_node = pg->vct[pg_rank].node_id;

    for (i = 0; i < pg->size; i++) {
        MPIDI_VC_t *vc = &pg->vct[i];
        int local = vc->node_id == my_node;
        int k = t == RDMA_TRANSPORT_VERBS || (!local && t != RDMA_TRANSPORT_SHM)
            ? RDMA_XP_VERBS : RDMA_XP_SHM;

        if (i == pg_rank)
            continue;
        MPIR_ERR_CHKANDJUMP1(!local && t == RDMA_TRANSPORT_SHM, mpi_errno, MPI_ERR_OTHER,
                             "**ch3|rdma|init", "**ch3|rdma|init %s",
                             "MPIR_CVAR_CH3_RDMA_TRANSPORT=shm but the job spans several nodes");
        vc->ch.conn.xc.ops = xports[k].ops;
        vc->ch.conn.xc.peer = i;
        vc->ch.conn.xc.owner = vc;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* What every transport is opened with; ev.arg is the transport's slot. */
static void rdma_xport_params_fill(rdma_xport_params_t * prm, MPIDI_PG_t * pg, int pg_rank)
{
    const rb_config_t *ring = &rdma_cfg.link[RDMA_XP_SHM].ring;

    memset(prm, 0, sizeof(*prm));
    prm->rank = pg_rank;
    prm->size = pg->size;
    prm->job = (const char *) pg->id;
    prm->ring_size = ring->ring_size;   /* the same for both transports */
    prm->chunk_size = ring->chunk_size;
    prm->head_writes = ring->mode == RB_MODE_BASIC;
    prm->ev.conn_of = rdma_conn_of;
    prm->ev.card_of = rdma_card_of;
    prm->ev.bind = rdma_conn_bind;
    prm->ev.ready = rdma_conn_ready;
    prm->ev.landed = rdma_link_landed;
    prm->ev.pulled = rdma_link_pulled;
    prm->device = rdma_cfg.device;
    prm->port = rdma_cfg.port;
    prm->gid_index = rdma_cfg.gid_index;
    prm->inline_size = rdma_cfg.inline_size;
    prm->force_completion = rdma_cfg.force_completion;
    prm->timeout = rdma_cfg.timeout;
    prm->rcache_max_bytes = rdma_cfg.rcache_max_bytes;
    prm->rcache_max_entries = rdma_cfg.rcache_max_entries;
}

/* Open the transports some peer needs and publish the business card. */
int MPIDI_CH3I_RDMA_init(MPIDI_PG_t * pg, int pg_rank)
{
    int mpi_errno = MPI_SUCCESS, i, k;
    rdma_xport_params_t prm;
    char card[1024] = "", frag[512], err[512];
    int needed[RDMA_XP_N] = { 0 };

    rdma_pg = pg;
    mpi_errno = MPIDI_CH3I_RDMA_config_get(&rdma_cfg);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_CH3I_RDMA_init_process_group(pg, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_CH3I_poll_spins = rdma_poll_spins(pg, pg_rank);

    for (i = 0; i < pg->size; i++)
        for (k = 0; k < RDMA_XP_N; k++)
            needed[k] |= (i != pg_rank && pg->vct[i].ch.conn.xc.ops == xports[k].ops);

    rdma_xport_params_fill(&prm, pg, pg_rank);
    for (k = 0; k < RDMA_XP_N; k++) {
        if (!needed[k])
            continue;
        xports[k].link = &rdma_cfg.link[k];
        prm.ev.arg = &xports[k];
        err[0] = '\0';
        if (xports[k].ops->open(&prm, &xports[k].xp, frag, sizeof(frag), err, sizeof(err))) {
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|init",
                                 "**ch3|rdma|init %s", err);
        }
        MPL_snprintf(card + strlen(card), sizeof(card) - strlen(card), "%s%s:%s",
                     card[0] ? ";" : "", xports[k].key, frag);
    }
    for (i = 0; i < pg->size; i++)
        if (i != pg_rank)
            pg->vct[i].ch.conn.xc.xport =
                xports[pg->vct[i].ch.conn.xc.ops == &rdma_xport_verbs].xp;

    mpi_errno = MPIDI_PG_SetConnInfo(pg_rank, card[0] ? card : "none");
    MPIR_ERR_CHECK(mpi_errno);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPIR_CVAR_CH3_RDMA_VERBOSE: which path large parts took, per size. */
static void rdma_link_print(const rdma_link_t * l)
{
    char line[1024];

    if (rdma_link_report(l, line, sizeof(line)) > 0)
        fprintf(stderr, "[ch3:rdma] rank %d -> %d: %s\n", MPIR_Process.rank, l->xc.peer, line);
}

static void rdma_xport_report(const rdma_xport_slot_t * slot)
{
    char line[512];

    if (slot->xp && slot->ops->stats && slot->ops->stats(slot->xp, line, sizeof(line)) > 0)
        fprintf(stderr, "[ch3:rdma] rank %d %s: %s\n", MPIR_Process.rank, slot->ops->name, line);
}

int MPIDI_CH3I_RDMA_finalize(void)
{
    int mpi_errno = MPI_SUCCESS, i, k;

    for (i = 0; rdma_pg && i < rdma_pg->size; i++) {
        rdma_link_t *l = &rdma_pg->vct[i].ch.conn;
        if (rdma_cfg.verbose && i != MPIR_Process.rank)
            rdma_link_print(l);
        if (l->xc.xport && l->xc.state != RDMA_CONN_IDLE)
            l->xc.ops->close(l->xc.xport, &l->xc);
    }
    for (k = 0; k < RDMA_XP_N; k++) {
        if (rdma_cfg.verbose)
            rdma_xport_report(&xports[k]);
        if (xports[k].xp && xports[k].ops->finalize(xports[k].xp) != RDMA_XPORT_OK)
            mpi_errno = MPI_ERR_OTHER;
        xports[k].xp = NULL;
    }
    MPIDI_CH3I_ready_vcs = NULL;
    MPIR_ERR_CHKANDJUMP1(mpi_errno, mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport",
                         "**ch3|rdma|xport %s", "transport finalization failed");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int rdma_xport_error(rdma_conn_t * c)
{
    int mpi_errno = MPI_SUCCESS;

    MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport", "**ch3|rdma|xport %s",
                  c->ops->error(c->xport));
    return mpi_errno;
}

static int rdma_pipe_error(MPIDI_VC_t * vc, int rc)
{
    int mpi_errno = MPI_SUCCESS;
    rdma_conn_t *c = &vc->ch.conn.xc;

    if (rc == RB_ERR_XPORT)
        return rdma_xport_error(c);
    MPIR_ERR_SET2(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|pipe", "**ch3|rdma|pipe %d %d",
                  c->peer, rc);
    return mpi_errno;
}

/* Put up to the iov total into vc's pipe; *nbytes = bytes accepted (0 while
 * the connection is being made, the ring is full or the peer is still
 * pulling a large part: zc.h). */
int MPIDI_CH3I_RDMA_put_datav(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * nbytes)
{
    int mpi_errno = MPI_SUCCESS, rc;

    *nbytes = 0;
    if (vc->ch.conn.xc.state != RDMA_CONN_READY) {
        mpi_errno = MPIDI_CH3I_RDMA_connect(vc);
        if (mpi_errno || vc->ch.conn.xc.state != RDMA_CONN_READY)
            goto fn_exit;       /* shm connects at once, verbs later */
    }
    rc = rdma_link_putv(&vc->ch.conn, iov, n, nbytes);
    if (rc != RB_OK)
        mpi_errno = rdma_pipe_error(vc, rc);
  fn_exit:
    return mpi_errno;
}

/* Read what vc's peer has put into the iov, pulling large parts (zc.h);
 * *nbytes may be 0. */
int MPIDI_CH3I_RDMA_read_datav(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * nbytes)
{
    int rc = rdma_link_getv(&vc->ch.conn, iov, n, nbytes);

    return rc == RB_OK ? MPI_SUCCESS : rdma_pipe_error(vc, rc);
}

/* --- connections ------------------------------------------------------ */

int MPIDI_CH3I_RDMA_connect(MPIDI_VC_t * vc)
{
    rdma_conn_t *c = &vc->ch.conn.xc;

    if (c->state == RDMA_CONN_FAILED ||
        (c->state == RDMA_CONN_IDLE && c->ops->connect(c->xport, c) != RDMA_XPORT_OK))
        return rdma_xport_error(c);
    return MPI_SUCCESS;
}

/* A failed connection only matters while CH3 still uses the VC: the peer
 * may tear down its side once the close protocol is done. */
static int rdma_failed_conn_check(void)
{
    int i;

    for (i = 0; i < rdma_pg->size; i++) {
        MPIDI_VC_t *vc = &rdma_pg->vct[i];
        if (vc->ch.conn.xc.state == RDMA_CONN_FAILED &&
            (vc->state == MPIDI_VC_STATE_ACTIVE || vc->state == MPIDI_VC_STATE_INACTIVE))
            return rdma_xport_error(&vc->ch.conn.xc);
    }
    return MPI_SUCCESS;
}

int MPIDI_CH3I_RDMA_poll_transports(void)
{
    int mpi_errno = MPI_SUCCESS, k, rc;

    for (k = 0; k < RDMA_XP_N && mpi_errno == MPI_SUCCESS; k++) {
        if (!xports[k].xp)
            continue;
        rc = xports[k].ops->progress(xports[k].xp);
        if (rc == RDMA_XPORT_EPEER)
            mpi_errno = rdma_failed_conn_check();
        else if (rc != RDMA_XPORT_OK)
            MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport", "**ch3|rdma|xport %s",
                          xports[k].ops->error(xports[k].xp));
    }
    return mpi_errno;
}

/* Idle for `over` polls past the spin phase: arm the transport that can
 * wake us, poll once more, then block until a peer writes to us or a
 * timeout passes (outside the global critical section).  With shm peers
 * the waiter is shm's futex, which verbs arrivals cannot wake: with both,
 * the sleep is short.  Verbs alone: short sleeps for the first
 * RDMA_BLOCK_SHORT sleeps (on Soft-RoCE a CQ-event wakeup measured slower
 * than a 50 us sleep), then the CQ event, unless a flag-polled connection
 * makes the waiter decline (no event per arrival: 500 us sleeps).  With
 * several threads sharing the waiter a wakeup may be missed, so the sleep
 * is bounded there too.  Cold (.text.unlikely): the idle path must not
 * move the hot poll code; a change of this function's size once cost
 * 0.1 us of 8-byte shm latency through code layout alone. */
enum { RDMA_BLOCK_SHORT = 3000 };
__attribute__ ((cold)) int MPIDI_CH3I_RDMA_block(int (*poll) (int *), int *progressed, unsigned long over)
{
    int shm = xports[RDMA_XP_SHM].xp != NULL, verbs = xports[RDMA_XP_VERBS].xp != NULL;
    rdma_xport_slot_t *w = shm ? &xports[RDMA_XP_SHM] :
        verbs && over >= RDMA_BLOCK_SHORT ? &xports[RDMA_XP_VERBS] : NULL;
    int armed = w && w->ops->wait_arm(w->xp);
    long us = armed && !(shm && verbs) ? (MPIR_IS_THREADED ? 1000 : 20000) :
        over < RDMA_BLOCK_SHORT ? 50 : 500;
    int mpi_errno;

    mpi_errno = poll(progressed);
    if (mpi_errno || *progressed) {
        if (armed)
            w->ops->wait_disarm(w->xp);
        return mpi_errno;
    }
    MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    if (armed) {
        w->ops->wait(w->xp, us);
    } else {
        struct timespec ts = { 0, us * 1000 };
        nanosleep(&ts, NULL);
    }
    MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    return MPI_SUCCESS;
}

/* CH3's close protocol is done: stop polling vc.  The transport keeps the
 * connection's memory until finalize so late credit writes from the peer
 * still land somewhere valid. */
int MPIDI_CH3I_RDMA_close(MPIDI_VC_t * vc)
{
    MPIDI_VC_t **pp;

    for (pp = &MPIDI_CH3I_ready_vcs; *pp; pp = &(*pp)->ch.next_ready) {
        if (*pp == vc) {
            *pp = vc->ch.next_ready;
            break;
        }
    }
    vc->ch.on_ready_list = 0;
    rdma_link_flush(&vc->ch.conn);
    return MPI_SUCCESS;
}

/* 1 while vc's link must not be torn down (rdma_link_busy). */
int MPIDI_CH3I_RDMA_busy(MPIDI_VC_t * vc)
{
    return rdma_link_busy(&vc->ch.conn);
}
