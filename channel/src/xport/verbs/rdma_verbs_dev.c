/*
 * rdma_verbs_dev.c -- the verbs transport: device, port and GID selection,
 * registered memory, fork protection (rdma_verbs.h).
 *
 * Fork.  A registered page that the parent writes after fork() is copied
 * (copy-on-write) while the device keeps the old page: received bytes land
 * in the child's copy, sent bytes come from stale memory.  Kernels >= 5.13
 * copy pinned pages at fork instead (rdma-core: IBV_FORK_UNNEEDED); on
 * older ones open() calls ibv_fork_init() before the first registration,
 * which makes every registered range MADV_DONTFORK (a child that touches
 * such a page faults).  RDMAV_FORK_SAFE/IBV_FORK_SAFE make rdma-core do the
 * same by itself.  Our rings, stages, ctl pages and CM buffers are
 * MADV_DONTFORK in every mode: a child has no use for them.  describe()
 * says which mode is in force.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* ------------------------------------------------------------------ util */

double rdma_verbs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Our CM QKEY and auth from the kernel's random source. */
rdma_status_t rdma_verbs_cm_keys(rdma_xport_t * xp)
{
    uint64_t r[2];

    if (getrandom(r, sizeof(r), 0) != (ssize_t) sizeof(r))
        return RDMA_ERR_SYS;
    xp->qkey = (uint32_t) r[0] & 0x7fffffffu;
    xp->auth = r[1];
    return RDMA_OK;
}

/* Zeroed, whole pages, not inherited by a child (see Fork), registered
 * (never with RELAXED_ORDERING). */
size_t rdma_verbs_page_round(size_t len)
{
    size_t page = (size_t) sysconf(_SC_PAGESIZE);

    return (len + page - 1) & ~(page - 1);
}

int rdma_verbs_mem_alloc(rdma_xport_t * xp, rdma_verbs_mem_t * m, size_t len, int access)
{
    m->len = rdma_verbs_page_round(len);
    if (posix_memalign(&m->buf, (size_t) sysconf(_SC_PAGESIZE), m->len))
        m->buf = NULL;
    if (m->buf) {
        memset(m->buf, 0, m->len);
        madvise(m->buf, m->len, MADV_DONTFORK);
        m->mr = ibv_reg_mr(xp->pd, m->buf, len, access);
    }
    return m->buf && m->mr ? RDMA_OK : RDMA_ERR_NOMEM;
}

/* The heap gets the pages back inheritable. */
void rdma_verbs_mem_free(rdma_verbs_mem_t * m)
{
    if (m->mr)
        ibv_dereg_mr(m->mr);
    if (m->buf)
        madvise(m->buf, m->len, MADV_DOFORK);
    free(m->buf);
    m->mr = NULL;
    m->buf = NULL;
}

/* The fork mode (see Fork): "unneeded", "enabled" (by the environment, an
 * earlier call or init() now) or "unprotected" (init() failed).  query and
 * init are ibv_is_fork_initialized and ibv_fork_init, or a test's fakes. */
const char *rdma_xport_verbs_fork_mode(int (*query)(void), int (*init)(void))
{
    switch (query()) {
    case IBV_FORK_UNNEEDED:
        return "unneeded";
    case IBV_FORK_ENABLED:
        return "enabled";
    default:
        return init() ? "unprotected" : "enabled";
    }
}

int rdma_verbs_fork_query(void)
{
    return (int) ibv_is_fork_initialized();
}

/* -------------------------------------------------------- device and port */

/* Bytes one connection pins from its start: ring, stage (RING_INIT_SIZE
 * each; they grow with its traffic, up to RING_SIZE, where memory allows)
 * and control page. */
size_t rdma_verbs_conn_pinned(const rdma_xport_params_t * prm)
{
    return 2 * prm->ring_size + (size_t) sysconf(_SC_PAGESIZE);
}

/* Under a cap (prm->own: pinned_max_bytes), every job peer's connection memory
 * and the datagram slots are pinned for good and never evicted: user
 * buffers get the rest of the cap (*user; 0 when there is no cap; a
 * connection outside the job takes its share from it while it lives,
 * rdma_verbs_conn_create).  No rest is an error that names both values. */
int rdma_verbs_pinned_check(const rdma_xport_params_t * prm, size_t *user, char *err,
                            size_t errlen)
{
    const rdma_verbs_params_t *vp = prm->own;
    size_t cap = vp->pinned_max_bytes, fixed = (size_t) prm->peers * rdma_verbs_conn_pinned(prm)
        + (size_t) RDMA_VERBS_UD_SLOT * (RDMA_VERBS_UD_NRECV + RDMA_VERBS_UD_NSEND);

    *user = cap > fixed ? cap - fixed : 0;
    if (!cap || *user)
        return RDMA_OK;
    return rdma_say(err, errlen, RDMA_ERR_INVAL, "MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB=%zu leaves "
                    "nothing for user buffers: the rings and staging areas of %d verbs peer%s "
                    "alone pin %zu KiB (their rings start at %zu KiB); raise it or lower "
                    "MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE", cap >> 20, prm->peers,
                    prm->peers == 1 ? "" : "s", (fixed + 1023) / 1024, prm->ring_size >> 10);
}

int rdma_verbs_memlock_check(const rdma_xport_params_t * prm, char *err, size_t errlen)
{
    struct rlimit rl;
    size_t need = rdma_verbs_conn_pinned(prm)
        + (size_t) RDMA_VERBS_UD_SLOT * (RDMA_VERBS_UD_NRECV + RDMA_VERBS_UD_NSEND);

    if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return RDMA_OK;
    rdma_say(err, errlen, RDMA_ERR_NOMEM, "ulimit -l is %llu KiB but ch3:rdma needs at least "
             "%zu KiB (connection manager and one connection); raise it (ulimit -l unlimited / "
             "limits.conf memlock)", (unsigned long long) rl.rlim_cur / 1024, (need + 1023) / 1024);
    return RDMA_ERR_NOMEM;
}

/* First active port of ctx (or the requested one); 0 if none. */
static uint8_t rdma_verbs_port_find(struct ibv_context *ctx, int want, struct ibv_port_attr *pa)
{
    struct ibv_device_attr da;
    int p;

    if (ibv_query_device(ctx, &da))
        return 0;
    for (p = 1; p <= da.phys_port_cnt; p++) {
        if (want && p != want)
            continue;
        if (!ibv_query_port(ctx, p, pa) && pa->state == IBV_PORT_ACTIVE)
            return (uint8_t) p;
    }
    return 0;
}

int rdma_verbs_dev_open(rdma_xport_t * xp, char *err, size_t errlen)
{
    const char *want = xp->vp.device;
    struct ibv_device **list;
    int i, n = 0;

    list = ibv_get_device_list(&n);
    for (i = 0; list && i < n && !xp->ctx; i++) {
        if (want && *want && strcmp(want, ibv_get_device_name(list[i])))
            continue;
        xp->ctx = ibv_open_device(list[i]);
        if (xp->ctx && !(xp->port = rdma_verbs_port_find(xp->ctx, xp->vp.port, &xp->pattr))) {
            ibv_close_device(xp->ctx);
            xp->ctx = NULL;
        }
    }
    if (list)
        ibv_free_device_list(list);
    if (xp->ctx)
        return RDMA_OK;
    rdma_say(err, errlen, RDMA_ERR_NODEV, "no RDMA device with an active port "
             "(ibv_get_device_list found %d devices; wanted device %s, port %d (0 = any)); check "
             "ibv_devinfo, 'rdma link' and the device/port settings", n,
             want && *want ? want : "any", xp->vp.port);
    return RDMA_ERR_NODEV;
}

static int rdma_verbs_gid_is_ipv4(const union ibv_gid *g)
{
    static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* RoCE: RoCE v2 IPv4-mapped, else any RoCE v2, else 0.  IB: GID 0 + LID. */
int rdma_verbs_gid_pick(rdma_xport_t * xp)
{
    struct ibv_gid_entry e;
    int i, v2 = -1, v4 = -1;

    xp->gid_index = 0;
    if (xp->vp.gid_index >= 0)
        xp->gid_index = xp->vp.gid_index;
    else if (xp->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        for (i = 0; i < xp->pattr.gid_tbl_len && v4 < 0; i++) {
            if (ibv_query_gid_ex(xp->ctx, xp->port, i, &e, 0)
                || e.gid_type != IBV_GID_TYPE_ROCE_V2)
                continue;
            if (v2 < 0)
                v2 = i;
            if (rdma_verbs_gid_is_ipv4(&e.gid))
                v4 = i;
        }
        xp->gid_index = v4 >= 0 ? v4 : v2 >= 0 ? v2 : 0;
    }
    return ibv_query_gid(xp->ctx, xp->port, xp->gid_index, &xp->gid);
}

/* Seconds of one RC ACK timeout try at exponent t (IB: 4.096 us * 2^t). */
double rdma_verbs_ack_s(int t)
{
    return 4.096e-6 * (double) (1u << t);
}

/* RC ACK timeout exponent (rdma_verbs_ack_s per try): the largest whose
 * (retry_cnt + 1) tries fit in vp.timeout, so that a dead peer is still
 * reported within it and a link outage shorter than retry_cnt tries is
 * ridden out (CONNECT_TIMEOUT's default 60 s: 20, 4.3 s per try, outages up
 * to 25 s); at least 16 (0.27 s per try) to survive TCG emulation. */
int rdma_verbs_qp_timeout(double seconds)
{
    int t = 31;
    while (t > 16 && (RDMA_VERBS_RETRY_CNT + 1) * rdma_verbs_ack_s(t) > seconds)
        t--;
    return t;
}

/* close()'s drain, per connection: two ACK timeouts (a lost
 * last packet's retransmission fits), at least RDMA_VERBS_DRAIN_S, at most
 * the timeout. */
double rdma_verbs_drain_bound(double seconds, int qp_timeout)
{
    double b = 2 * rdma_verbs_ack_s(qp_timeout);

    if (b < RDMA_VERBS_DRAIN_S)
        b = RDMA_VERBS_DRAIN_S;
    return b < seconds ? b : seconds;
}

/* ------------------------------------------- the connection manager's UD QP */

uint8_t *rdma_verbs_ud_slot(rdma_xport_t * xp, uint32_t i)
{
    return (uint8_t *) xp->udm.buf + (size_t) i * RDMA_VERBS_UD_SLOT;
}

int rdma_verbs_ud_post_recv(rdma_xport_t * xp, uint32_t i)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t) rdma_verbs_ud_slot(xp, i), .length = RDMA_VERBS_UD_SLOT,
        .lkey = xp->udm.mr->lkey
    };
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
    return ibv_post_recv(xp->ud, &wr, &bad);
}

static int rdma_verbs_ud_modify(rdma_xport_t * xp, enum ibv_qp_state s)
{
    struct ibv_qp_attr a = {.qp_state = s, .port_num = xp->port, .qkey = xp->qkey };
    int mask = IBV_QP_STATE;

    if (s == IBV_QPS_INIT)
        mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    else if (s == IBV_QPS_RTS)
        mask |= IBV_QP_SQ_PSN;
    return ibv_modify_qp(xp->ud, &a, mask);
}

rdma_status_t rdma_verbs_ud_create(rdma_xport_t * xp)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = xp->cm_cq, .recv_cq = xp->cm_cq, .qp_type = IBV_QPT_UD,
        .cap = {.max_send_wr = RDMA_VERBS_UD_NSEND, .max_recv_wr = RDMA_VERBS_UD_NRECV,
                .max_send_sge = 1, .max_recv_sge = 1}
    };
    uint32_t i;

    if (rdma_verbs_mem_alloc(xp, &xp->udm, (size_t) RDMA_VERBS_UD_SLOT *
                             (RDMA_VERBS_UD_NRECV + RDMA_VERBS_UD_NSEND), IBV_ACCESS_LOCAL_WRITE))
        return RDMA_ERR_XPORT;
    xp->ud = ibv_create_qp(xp->pd, &ia);
    if (!xp->ud || rdma_verbs_ud_modify(xp, IBV_QPS_INIT) || rdma_verbs_ud_modify(xp, IBV_QPS_RTR)
        || rdma_verbs_ud_modify(xp, IBV_QPS_RTS))
        return RDMA_ERR_XPORT;
    for (i = 0; i < RDMA_VERBS_UD_NRECV; i++)
        if (rdma_verbs_ud_post_recv(xp, i))
            return RDMA_ERR_XPORT;
    xp->ud_send_free = RDMA_VERBS_UD_NSEND;
    return ibv_req_notify_cq(xp->cm_cq, 0) ? RDMA_ERR_XPORT : RDMA_OK;
}

/* ------------------------------------------------------------ set-up */

/* The process-wide objects on the open device: PD, the data and CM CQs
 * and their event channels, the CM's UD QP, the registration caches, the
 * shared receive queue.  On failure the
 * diagnosis is in err and nothing of them is left. */
int rdma_verbs_dev_setup(rdma_xport_t * xp, char *err, size_t errlen)
{
    const char *what;
    uint32_t sq, rq;

    if (ibv_query_device(xp->ctx, &xp->dev) || rdma_verbs_gid_pick(xp)) {
        rdma_say(err, errlen, RDMA_ERR_XPORT, "cannot query %s port %u: %s",
                 ibv_get_device_name(xp->ctx->device), xp->port, strerror(errno));
        return RDMA_ERR_XPORT;
    }
    xp->amo = xp->dev.atomic_cap != IBV_ATOMIC_NONE;
    rdma_verbs_depths(xp, &sq, &rq);
    if ((int) (sq > rq ? sq : rq) > xp->dev.max_qp_wr)
        return rdma_say(err, errlen, RDMA_ERR_XPORT, "%s allows %d work requests per queue, "
                        "ch3:rdma needs %u", ibv_get_device_name(xp->ctx->device),
                        xp->dev.max_qp_wr, sq > rq ? sq : rq);
    xp->cq_size = xp->cq_need = RDMA_VERBS_CQ_BASE;
    if (!(xp->pd = ibv_alloc_pd(xp->ctx)))
        what = "ibv_alloc_pd";
    else if (!(xp->chan = rdma_verbs_chan_open(xp)) || !(xp->cm_chan = rdma_verbs_chan_open(xp)))
        what = "ibv_create_comp_channel";
    else if (!(xp->cq = ibv_create_cq(xp->ctx, xp->cq_size, NULL, xp->chan, 0))
             || !(xp->cm_cq = ibv_create_cq(xp->ctx, RDMA_VERBS_UD_NRECV + RDMA_VERBS_UD_NSEND,
                                            NULL, xp->cm_chan, 0)))
        what = "ibv_create_cq";
    else if (rdma_verbs_ud_create(xp))
        what = "the connection-manager UD QP";
    else if (rdma_verbs_rc_open(xp))
        what = "the registration cache";
    else if (rdma_verbs_srq_open(xp))
        what = "the shared receive queue";
    else
        return RDMA_OK;
    rdma_say(err, errlen, RDMA_ERR_NOMEM, "cannot set up %s: %s failed: %s",
             ibv_get_device_name(xp->ctx->device), what, strerror(errno));
    rdma_verbs_dev_teardown(xp);
    return RDMA_ERR_NOMEM;
}

/* Release what dev_setup created, in reverse order (any prefix of it). */
void rdma_verbs_dev_teardown(rdma_xport_t * xp)
{
    rdma_verbs_srq_close(xp);
    rdma_verbs_rc_close(xp);
    if (xp->ud)
        ibv_destroy_qp(xp->ud);
    while (xp->n_rej_ah > 0)
        ibv_destroy_ah(xp->rej_ah[--xp->n_rej_ah].ah);
    rdma_verbs_mem_free(&xp->udm);
    if (xp->cm_cq)
        ibv_destroy_cq(xp->cm_cq);
    if (xp->cq)
        ibv_destroy_cq(xp->cq);
    if (xp->cm_chan)
        ibv_destroy_comp_channel(xp->cm_chan);
    if (xp->chan)
        ibv_destroy_comp_channel(xp->chan);
    if (xp->pd)
        ibv_dealloc_pd(xp->pd);
    xp->ud = NULL;
    xp->cq = xp->cm_cq = NULL;
    xp->chan = xp->cm_chan = NULL;
    xp->pd = NULL;
}

/* A CQ event channel, non-blocking: its fd is polled (main's waits, the
 * channel thread). */
struct ibv_comp_channel *rdma_verbs_chan_open(rdma_xport_t * xp)
{
    struct ibv_comp_channel *ch = ibv_create_comp_channel(xp->ctx);
    int fl = ch ? fcntl(ch->fd, F_GETFL) : -1;

    if (ch && (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0)) {
        ibv_destroy_comp_channel(ch);
        return NULL;
    }
    return ch;
}
