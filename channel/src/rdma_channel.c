/*
 * rdma_channel.c -- the CH3 glue of the five-function RDMA channel
 * interface (the paper's, seed 003 sec. 2.2): init_process_group, init,
 * finalize, put_datav, read_datav, over the plain-C core in rdma_chan.c.
 * What is MPICH's stays here: the process group and its VCs, PMI business
 * cards, VC states, the ready list, the global critical section, and the
 * one place where channel statuses become mpi_errno (rdma_mpi_errno).
 *
 * The channel's counters (rdma_chan_counters_get) are MPI_T performance
 * variables, registered at init (rdma_pvars.c).
 *
 * Every VC owns one rdma_link_t (vc->ch.conn): its transport connection,
 * pipe and rendezvous (rdma_link.h).  Its transport is chosen once, in
 * init_process_group: shm for peers on this node, verbs for the others
 * (MPIR_CVAR_CH3_RDMA_TRANSPORT overrides).  Connections are made on first
 * use; the peer's business card comes from PMI (CH3's P<rank>-businesscard
 * key, published by MPIDI_PG_SetConnInfo).  Settings come validated from
 * rdma_cvars.c.
 *
 * Dynamic processes (spawn, connect/accept): VCs of other process groups
 * and CH3's temporary connect-to-root VCs are links outside the job
 * (rdma_chan_dyn_add), connected on first use like the others.  A
 * connecting process presents a hello (rdma_conn_t): "g:<pg id>:<rank>:
 * <its token>" for a VC of its group, "p:<port tag>:<our token>" for a
 * port, whose name carries our business card (MPIDI_CH3_Get_business_card).
 * Hellos without the right token are refused: a port name is a capability.
 */
#include "mpidi_ch3_impl.h"
#include <sched.h>
#include <time.h>
#include <unistd.h>

rdma_chan_t MPIDI_CH3I_chan;
static MPIDI_PG_t *rdma_pg;
static char rdma_card[1024];    /* this process's business card */
struct MPIDI_VC *MPIDI_CH3I_ready_vcs;
int MPIDI_CH3I_poll_spins;

/* The one place a channel status becomes an mpi_errno: the diagnosis is
 * MPIDI_CH3I_chan.msg, under the error class of the phase (an operation on
 * a VC whose peer failed: MPIX_ERR_PROC_FAILED). */
enum { RDMA_AT_CONFIG, RDMA_AT_INIT, RDMA_AT_RUN, RDMA_AT_VC };
static int rdma_mpi_errno(rdma_status_t st, int at)
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

/* --- what the core asks of its owner (rdma_chan_owner_t) -------------- */

static rdma_link_t *rdma_link_of_rank(void *arg, int rank)
{
    (void) arg;
    return rank >= 0 && rank < rdma_pg->size ? &rdma_pg->vct[rank].ch.conn : NULL;
}

/* CH3's P<rank>-businesscard key, published by MPIDI_PG_SetConnInfo. */
static int rdma_card_of(void *arg, int rank, char *buf, size_t len)
{
    (void) arg;
    return MPIDI_PG_GetConnString(rdma_pg, rank, buf, (int) len) != MPI_SUCCESS;
}

static void rdma_link_ready(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;

    (void) arg;
    if (vc->ch.terminating == 3) {
        rdma_link_quiesce(l);   /* connected after its process was reported dead */
        return;
    }
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
static void rdma_ready_list_drop(MPIDI_VC_t * vc)
{
    MPIDI_VC_t **pp;

    for (pp = &MPIDI_CH3I_ready_vcs; *pp; pp = &(*pp)->ch.next_ready)
        if (*pp == vc) {
            *pp = vc->ch.next_ready;
            break;
        }
    vc->ch.on_ready_list = 0;
}

/* --- dynamic processes: links outside the job -------------------------- */

/* Who we are to VCs of other process groups (set at init). */
static char rdma_hello[256];

/* A link outside the job that CH3 closed (MPI_Comm_disconnect) is used
 * again (connect/accept between the same groups): a new connection. */
static void rdma_vc_reopen(MPIDI_VC_t * vc)
{
    vc->ch.terminating = 0;
    vc->ch.recv_active = NULL;
    vc->ch.pkt_off = 0;
    rdma_chan_dyn_reopen(&MPIDI_CH3I_chan, &vc->ch.conn);
}

/* vc (of another process group) is about to connect: its card from the
 * group's connection strings (exchanged by CH3's connect/accept), or it
 * was closed before. */
static rdma_status_t rdma_link_resolve(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;
    char card[sizeof(rdma_card)];

    (void) arg;
    if (l->xc.state == RDMA_CONN_CLOSED) {
        rdma_vc_reopen(vc);
        return RDMA_OK;
    }
    if (!vc->pg || vc->pg == rdma_pg
        || MPIDI_PG_GetConnString(vc->pg, vc->pg_rank, card, sizeof(card)) != MPI_SUCCESS)
        return rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_PEER,
                        "no business card for rank %d of process group %s", vc->pg_rank,
                        vc->pg ? (const char *) vc->pg->id : "(none)");
    return rdma_chan_dyn_add(&MPIDI_CH3I_chan, l, card, rdma_hello);
}

/* A connect-to-root for the port with that tag: a new VC for CH3's accept
 * queue (rdma_link_ready). */
static rdma_link_t *rdma_link_accept_root(int tag)
{
    MPIDI_VC_t *vc = MPL_malloc(sizeof(MPIDI_VC_t), MPL_MEM_ADDRESS);

    if (!vc)
        return NULL;
    MPIDI_VC_Init(vc, NULL, 0);
    vc->ch.accept_tag = tag + 1;
    if (vc->ch.pkt && rdma_chan_dyn_add(&MPIDI_CH3I_chan, &vc->ch.conn, NULL, NULL) == RDMA_OK)
        return &vc->ch.conn;
    MPIDI_CH3_VC_Destroy(vc);
    MPL_free(vc);
    return NULL;
}

/* The token of process group pg's rank r (its card), or "". */
static void rdma_pg_token(MPIDI_PG_t * pg, int r, char *token, size_t len)
{
    char card[sizeof(rdma_card)];

    if (MPIDI_PG_GetConnString(pg, r, card, sizeof(card)) != MPI_SUCCESS
        || rdma_chan_card_token(card, "token", token, len))
        token[0] = '\0';
}

/* A hello from a process outside the job (rdma_chan_owner_t.accept). */
static rdma_link_t *rdma_link_accept(void *arg, const char *who)
{
    char id[256], token[64], theirs[64];
    int tag, rank, n = 0;
    MPIDI_PG_t *pg;
    MPIDI_VC_t *vc;

    (void) arg;
    if (sscanf(who, "p:%d:%63s%n", &tag, token, &n) == 2 && !who[n])
        return strcmp(token, MPIDI_CH3I_chan.token) ? NULL : rdma_link_accept_root(tag);
    if (sscanf(who, "g:%255[^:]:%d:%63s%n", id, &rank, token, &n) != 3 || who[n])
        return NULL;
    if (MPIDI_PG_Find(id, &pg) != MPI_SUCCESS || !pg)
        return RDMA_LINK_LATER;         /* CH3 is still distributing that group */
    if (pg == rdma_pg || rank < 0 || rank >= pg->size)
        return NULL;
    rdma_pg_token(pg, rank, theirs, sizeof(theirs));
    vc = &pg->vct[rank];
    if (strcmp(token, theirs))
        return NULL;
    if (vc->ch.conn.xc.state == RDMA_CONN_READY
        && (vc->ch.terminating || vc->state != MPIDI_VC_STATE_ACTIVE))
        return RDMA_LINK_LATER;         /* our end of the close is still draining */
    if ((!vc->ch.conn.xc.ops || vc->ch.conn.xc.state == RDMA_CONN_CLOSED)
        && rdma_link_resolve(NULL, &vc->ch.conn) != RDMA_OK)
        return NULL;
    return &vc->ch.conn;
}

/* CH3 frees a VC: a link outside the job is forgotten (its connection
 * closed); a world VC keeps its link until finalize. */
void MPIDI_CH3I_RDMA_vc_destroy(MPIDI_VC_t * vc)
{
    rdma_ready_list_drop(vc);
    rdma_chan_dyn_del(&MPIDI_CH3I_chan, &vc->ch.conn);
}

/* A port name: the tag CH3 put there, then our card (the token in it is
 * what MPIDI_CH3_Connect_to_root presents). */
int MPIDI_CH3_Get_business_card(int myRank, char *value, int length)
{
    int mpi_errno = MPI_SUCCESS;

    MPL_UNREFERENCED_ARG(myRank);
    if (MPL_str_add_string_arg(&value, &length, "rdma", rdma_card) != MPL_SUCCESS)
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
    char card[sizeof(rdma_card)], token[64], hello[96];
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
    st = rdma_chan_dyn_add(&MPIDI_CH3I_chan, &vc->ch.conn, card, hello);
    if (st == RDMA_OK)
        st = rdma_chan_connect(&MPIDI_CH3I_chan, &vc->ch.conn);
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

/* A VC of a process group, ours or one connected to it (spawned,
 * connected): a failure of its link fails it (ch3_fail.c).  CH3's
 * temporary connect-to-root VCs have none: CH3 waits on them through its
 * own requests and cannot fail them, so a failure there is the error of
 * the MPI call that sees it. */
static int rdma_vc_of_group(const MPIDI_VC_t * vc)
{
    return vc->pg != NULL;
}

/* A failed connection fails its VC (ch3_fail.c; not after its close
 * handshake): at once, or if it was READY once its frames are read
 * (rdma_vc_errno).  Of a temporary VC it is the MPI call's error while
 * CH3 uses the VC. */
static rdma_status_t rdma_link_failed(void *arg, rdma_link_t * l)
{
    MPIDI_VC_t *vc = l->xc.owner;

    (void) arg;
    if (!rdma_vc_of_group(vc))
        return vc->state != MPIDI_VC_STATE_ACTIVE && vc->state != MPIDI_VC_STATE_INACTIVE
            ? RDMA_OK : rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_PEER,
                                 "%s", l->xc.why);
    if (vc->ch.on_ready_list || MPIDI_CH3I_VC_fail(vc, l->xc.why) == MPI_SUCCESS)
        return RDMA_OK;
    return rdma_say(MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg), RDMA_ERR_SYS,
                    "completing the operations of a failed connection failed (%s)", l->xc.why);
}

/* KVS key of a rank's CPU set (rdma_cpus_publish, rdma_poll_spins). */
#define RDMA_CPUS_KEY "P%d-rdma-cpus"

/* This process's CPU set; -1 if the kernel does not say. */
__attribute__ ((cold)) static int rdma_cpus_mine(rdma_chan_cpus_t * s)
{
    cpu_set_t set;
    int i;

    memset(s, 0, sizeof(*s));
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    for (i = 0; i < RDMA_CHAN_CPUS_MAX && i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set))
            s->w[i / 64] |= 1ull << (i % 64);
    return 0;
}

__attribute__ ((cold)) static int rdma_local_ranks(MPIDI_PG_t * pg, int pg_rank)
{
    int i, local = 0;

    for (i = 0; i < pg->size; i++)
        local += pg->vct[i].node_id == pg->vct[pg_rank].node_id;
    return local;
}

/* With node peers, this rank's CPU set goes into the KVS before the
 * card, whose commit and barrier publish both (MPIDI_PG_SetConnInfo). */
__attribute__ ((cold)) static int rdma_cpus_publish(MPIDI_PG_t * pg, int pg_rank)
{
    char key[32], val[RDMA_CHAN_CPUS_MAX / 4 + 1];
    rdma_chan_cpus_t s;

    if (rdma_local_ranks(pg, pg_rank) < 2 || rdma_cpus_mine(&s))
        return MPI_SUCCESS;
    rdma_chan_cpus_format(&s, val, sizeof(val));
    snprintf(key, sizeof(key), RDMA_CPUS_KEY, pg_rank);
    return MPIR_pmi_kvs_put(key, val);
}

/* Spin budget of blocking waits (rdma_chan_spins): this node's ranks
 * against the CPUs they may run on together, the union of their sets.
 * A rank's own set alone makes ranks bound to cores of their own
 * (mpiexec -bind-to core, taskset) look oversubscribed, one CPU each,
 * and block on every wait: 8 B over shm took 30 us instead of 0.21.
 * A peer whose set is not known leaves the union smaller (blocking is
 * the safe side).  These run once: cold, out of the hot code's way. */
__attribute__ ((cold)) static int rdma_poll_spins(MPIDI_PG_t * pg, int pg_rank)
{
    char key[32], val[RDMA_CHAN_CPUS_MAX / 4 + 1];
    int i, local = rdma_local_ranks(pg, pg_rank);
    rdma_chan_cpus_t all;

    if (rdma_cpus_mine(&all))
        return rdma_chan_spins(&MPIDI_CH3I_chan.cfg, local,
                               (int) sysconf(_SC_NPROCESSORS_ONLN));
    for (i = 0; local > 1 && i < pg->size; i++) {
        if (i == pg_rank || pg->vct[i].node_id != pg->vct[pg_rank].node_id)
            continue;
        snprintf(key, sizeof(key), RDMA_CPUS_KEY, i);
        if (MPIR_pmi_kvs_get(i, key, val, sizeof(val)) != MPI_SUCCESS
            || rdma_chan_cpus_merge(&all, val))
            break;
    }
    return rdma_chan_spins(&MPIDI_CH3I_chan.cfg, local, rdma_chan_cpus_count(&all));
}

/* --- the five functions ---------------------------------------------- */

/* Assign each peer its transport.  (CH3 itself creates the process group
 * through PMI; what is left for the channel is the per-peer choice.) */
int MPIDI_CH3I_RDMA_init_process_group(MPIDI_PG_t * pg, int pg_rank)
{
    static const rdma_xport_ops_t *const ops[RDMA_XP_N] = { &rdma_xport_shm, &rdma_xport_verbs };
    static const rdma_chan_owner_t owner = { rdma_link_of_rank, rdma_card_of, rdma_link_ready,
        rdma_link_failed, rdma_link_resolve, rdma_link_accept, NULL
    };
    int mpi_errno = MPI_SUCCESS, i, *node = NULL;
    rdma_chan_config_t cfg;
    rdma_status_t st;
    MPIR_CHKLMEM_DECL(1);

    rdma_pg = pg;
    st = MPIDI_CH3I_RDMA_config_get(&cfg, MPIDI_CH3I_chan.msg, sizeof(MPIDI_CH3I_chan.msg));
    mpi_errno = rdma_mpi_errno(st, RDMA_AT_CONFIG);
    MPIR_ERR_CHECK(mpi_errno);
    rdma_chan_init(&MPIDI_CH3I_chan, &cfg, ops, pg_rank, pg->size, (const char *) pg->id, &owner);
    MPIR_CHKLMEM_MALLOC(node, int *, pg->size * sizeof(int), mpi_errno, "node ids", MPL_MEM_OTHER);
    for (i = 0; i < pg->size; i++) {
        node[i] = pg->vct[i].node_id;
        pg->vct[i].ch.conn.xc.owner = &pg->vct[i];
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
    int mpi_errno;

    mpi_errno = MPIDI_CH3I_RDMA_init_process_group(pg, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = rdma_mpi_errno(rdma_chan_open(&MPIDI_CH3I_chan, rdma_card, sizeof(rdma_card)),
                               RDMA_AT_INIT);
    MPIR_ERR_CHECK(mpi_errno);
    snprintf(rdma_hello, sizeof(rdma_hello), "g:%s:%d:%s", (const char *) pg->id, pg_rank,
             MPIDI_CH3I_chan.token);
    mpi_errno = rdma_cpus_publish(pg, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_PG_SetConnInfo(pg_rank, rdma_card);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_CH3I_poll_spins = rdma_poll_spins(pg, pg_rank);
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
    st = rdma_pg ? rdma_chan_finalize(&MPIDI_CH3I_chan) : RDMA_OK;

    MPIDI_CH3I_ready_vcs = NULL;
    return rdma_mpi_errno(st, RDMA_AT_RUN);
}

/* An operation on vc failed with st.  RDMA_ERR_PEER fails vc, but not
 * before its frames are read: a link that failed while READY (vc on the
 * ready list) waits for the read that finds none left (drained). */
static int rdma_vc_errno(MPIDI_VC_t * vc, rdma_status_t st, int drained)
{
    int grp = rdma_vc_of_group(vc), mpi_errno = rdma_mpi_errno(st, grp ? RDMA_AT_VC : RDMA_AT_RUN);

    if (st == RDMA_ERR_PEER && grp && (drained || !vc->ch.on_ready_list
                                       || vc->ch.conn.xc.state != RDMA_CONN_FAILED))
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
    char card[sizeof(rdma_card)], host[256] = "?";

    if (rdma_card_of(NULL, vc->pg_rank, card, sizeof(card)) == 0)
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
    rdma_status_t st = rdma_chan_getv(&MPIDI_CH3I_chan, &vc->ch.conn, iov, n, nbytes);

    return st == RDMA_OK ? MPI_SUCCESS : rdma_vc_errno(vc, st, 1);
}

/* --- connections ------------------------------------------------------ */

int MPIDI_CH3I_RDMA_connect(MPIDI_VC_t * vc)
{
    rdma_status_t st;

    if (vc->ch.terminating == 3)        /* its peer failed (ch3_fail.c) */
        return MPIDI_CH3I_RDMA_peer_errno("a send to a rank that failed earlier");
    st = rdma_chan_connect(&MPIDI_CH3I_chan, &vc->ch.conn);
    return st == RDMA_OK ? MPI_SUCCESS : MPIDI_CH3I_RDMA_errno(vc, st);
}

RDMA_HOT int MPIDI_CH3I_RDMA_poll_transports(void)
{
    rdma_status_t st = rdma_chan_poll(&MPIDI_CH3I_chan);

    return st == RDMA_OK ? MPI_SUCCESS : rdma_mpi_errno(st, RDMA_AT_RUN);
}

/* Idle for `over` polls past the spin phase: arm the transport that can
 * wake us, poll once more, then block until a peer writes to us or a
 * timeout passes (outside the global critical section); the choice of
 * waiter and sleep is rdma_chan_wait_arm's.  Cold (.text.unlikely): the
 * idle path must not move the hot poll code; a change of this function's
 * size once cost 0.1 us of 8-byte shm latency through code layout alone. */
__attribute__ ((cold)) int MPIDI_CH3I_RDMA_block(int (*poll) (int *), int *progressed, unsigned long over)
{
    long us;
    int k = rdma_chan_wait_arm(&MPIDI_CH3I_chan, over, MPIR_IS_THREADED, &us);
    int mpi_errno = poll(progressed);

    if (mpi_errno || *progressed) {
        rdma_chan_wait(&MPIDI_CH3I_chan, k, us, 0);
        return mpi_errno;
    }
    MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    rdma_chan_wait(&MPIDI_CH3I_chan, k, us, 1);
    MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    return MPI_SUCCESS;
}

/* A CLOSE arrived on vc: what it writes from now on are its last frames. */
__attribute__ ((cold)) void MPIDI_CH3I_RDMA_closing(MPIDI_VC_t * vc)
{
    rdma_link_closing(&vc->ch.conn);
}

/* CH3's close protocol is done: stop polling vc and quiesce its link (the
 * peer may exit now).  The transport keeps the connection's memory until
 * finalize so late credit writes from the peer still land somewhere valid. */
int MPIDI_CH3I_RDMA_close(MPIDI_VC_t * vc)
{
    rdma_ready_list_drop(vc);
    rdma_link_quiesce(&vc->ch.conn);
    return MPI_SUCCESS;
}

/* 1 while vc's link must not be torn down (rdma_link_busy). */
int MPIDI_CH3I_RDMA_busy(MPIDI_VC_t * vc)
{
    return rdma_link_busy(&vc->ch.conn);
}
