/*
 * rdma_xport_verbs.c -- the verbs transport of ch3:rdma (libibverbs only,
 * no rdma_cm, no MPICH): its rdma_xport_ops_t.  Internals, and which file
 * does which job: rdma_verbs.h.
 *
 * Test hook: CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER=1 (read by open) makes the
 * local in-order answer 1, to measure flag polling on devices (rxe) that do
 * not promise it.  Never for production.
 *
 * describe() gives one line per connection: the mode ("flag-poll" |
 * "write-imm" | "unknown"), both in-order answers, inline granted,
 * max_rd_atomic, MTU and queue depths.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

static void rdma_verbs_xp_free(rdma_xport_t * xp)
{
    if (xp->kick_fd >= 0)
        close(xp->kick_fd);
    if (xp->wake_fd >= 0)
        close(xp->wake_fd);
    pthread_mutex_destroy(&xp->cm_lock);
    free(xp->slots);
    free(xp->gens);
    free(xp);
}

/* The transport object without a device: parameters, the slot table (one
 * per job peer and RDMA_VERBS_DYN_SLOTS more), the CM lock and the two eventfds (rdma_verbs.h). */
static rdma_xport_t *rdma_verbs_xp_alloc(const rdma_xport_params_t * prm)
{
    rdma_xport_t *xp = calloc(1, sizeof(*xp));

    if (!xp)
        return NULL;
    xp->prm = *prm;
    xp->vp = *(const rdma_verbs_params_t *) prm->own;
    xp->kick_fd = xp->wake_fd = -1;
    pthread_mutex_init(&xp->cm_lock, NULL);
    xp->nslots = (uint32_t) (prm->size > 0 ? prm->size : 1) + RDMA_VERBS_DYN_SLOTS;
    xp->slots = calloc(xp->nslots, sizeof(*xp->slots));
    xp->gens = calloc(xp->nslots, sizeof(*xp->gens));
    xp->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    xp->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (gethostname(xp->host, sizeof(xp->host) - 1) || !xp->host[0])
        snprintf(xp->host, sizeof(xp->host), "?");
    if (!xp->slots || !xp->gens || xp->kick_fd < 0 || xp->wake_fd < 0) {
        rdma_verbs_xp_free(xp);
        return NULL;
    }
    return xp;
}

static rdma_status_t rdma_verbs_open(const rdma_xport_params_t * prm, rdma_xport_t ** xpp,
                                     char *card, size_t cardlen, char *err, size_t errlen)
{
    rdma_xport_t *xp;
    size_t user;
    int rc;

    if (!prm->own)
        return rdma_say(err, errlen, RDMA_ERR_INVAL, "verbs: no settings (rdma_verbs_params_t)");
    if (prm->chunk_size == 0 || prm->ring_size % prm->chunk_size) {
        rdma_say(err, errlen, RDMA_ERR_XPORT, "invalid ring geometry (ring %zu, chunk %zu)",
                 prm->ring_size, prm->chunk_size);
        return RDMA_ERR_XPORT;
    }
    if ((rc = rdma_verbs_memlock_check(prm, err, errlen))
        || (rc = rdma_verbs_pinned_check(prm, &user, err, errlen)))
        return rc;
    if (!(xp = rdma_verbs_xp_alloc(prm))) {
        rdma_say(err, errlen, RDMA_ERR_NOMEM, "out of memory, or no eventfd: %s",
                 strerror(errno));
        return RDMA_ERR_NOMEM;
    }
    xp->pinned.max = user;
    if (xp->vp.timeout <= 0)
        xp->vp.timeout = 30;
    xp->qp_timeout = rdma_verbs_qp_timeout(xp->vp.timeout);
    xp->inline_req = (uint32_t) xp->vp.inline_size;
    /* test/diagnostic only: flag polling although the device does not say
     * it is safe (see the ordering notes at the top) */
    xp->in_order_override = getenv("CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER") != NULL;
    xp->t_keepalive = rdma_verbs_now() + xp->vp.timeout / 4;
    xp->linger_tail = &xp->linger;
    xp->rng[0] = (unsigned short) getpid();
    xp->rng[1] = (unsigned short) time(NULL);
    xp->rng[2] = (unsigned short) (uintptr_t) xp;
    if (rdma_verbs_cm_keys(xp)) {
        rdma_say(err, errlen, RDMA_ERR_XPORT, "cannot draw the connection keys: getrandom: %s",
                 strerror(errno));
        rc = RDMA_ERR_XPORT;
        goto err_free;
    }
    xp->fork_mode = rdma_xport_verbs_fork_mode(rdma_verbs_fork_query, ibv_fork_init);
    if (!strcmp(xp->fork_mode, "unprotected"))
        fprintf(stderr, "[ch3:rdma] rank %d: ibv_fork_init failed: memory registered for RDMA "
                "is not protected against fork() (system(), popen()) on this kernel\n",
                prm->rank);
    if ((rc = rdma_verbs_dev_open(xp, err, errlen)))
        goto err_free;
    if ((rc = rdma_verbs_dev_setup(xp, err, errlen)))
        goto err_close;
    rdma_verbs_card_format(xp, card, cardlen);
    *xpp = xp;
    return RDMA_OK;
  err_close:
    ibv_close_device(xp->ctx);
  err_free:
    rdma_verbs_xp_free(xp);
    return rc;
}

static rdma_status_t rdma_verbs_connect(rdma_xport_t * xp, rdma_conn_t * c)
{
    return rdma_verbs_cm_connect(xp, c);
}

static rdma_status_t rdma_verbs_close(rdma_xport_t * xp, rdma_conn_t * c)
{
    if (c->priv) {
        xp->closes++;
        xp->drain_bound += (uint64_t) rdma_verbs_drain(c->priv);
        rdma_verbs_rma_fail(c->priv);
        rdma_verbs_grow_release(c->priv);
    }
    pthread_mutex_lock(&xp->cm_lock);
    if (c->priv)
        rdma_verbs_conn_linger(c->priv);
    pthread_mutex_unlock(&xp->cm_lock);
    rdma_verbs_linger_reap(xp, rdma_verbs_now());
    c->state = RDMA_CONN_CLOSED;
    return RDMA_OK;
}

/* The channel thread is stopped (rdma_xport.h): no lock needed. */
static rdma_status_t rdma_verbs_finalize(rdma_xport_t * xp)
{
    uint32_t i;

    for (i = 0; i < xp->nslots; i++)
        if (xp->slots[i])
            rdma_verbs_close(xp, xp->slots[i]->c);
    /* peers closing too may still need ACKs from the lingering QPs */
    while (xp->linger) {
        double wait = xp->linger->t_linger - rdma_verbs_now();
        struct timespec ts = { 0, wait > 0 ? (long) (wait * 1e9) : 0 };

        nanosleep(&ts, NULL);
        rdma_verbs_linger_reap(xp, rdma_verbs_now());
    }
    rdma_verbs_dev_teardown(xp);
    ibv_close_device(xp->ctx);
    rdma_verbs_xp_free(xp);
    return RDMA_OK;
}

/* The channel thread: the CM, then the registration helper. */
static double rdma_verbs_bg_run(void *arg, double now)
{
    rdma_xport_t *xp = arg;
    double cm = rdma_verbs_cm_run(xp, now), rh = xp->rh_on ? rh_run(&xp->rh, now) : 0;

    return cm == 0 || (rh > 0 && rh < cm) ? rh : cm;
}

/* The channel thread sleeps on the CM CQ's events, our kicks and the
 * device's asynchronous events. */
static int rdma_verbs_bg_fds(rdma_xport_t * xp, int *fds, int max)
{
    if (max < 3)
        return 0;
    fds[0] = xp->cm_chan->fd;
    fds[1] = xp->kick_fd;
    fds[2] = xp->ctx->async_fd;
    return 3;
}

static const char *rdma_verbs_error(const rdma_xport_t * xp)
{
    return xp->err;
}

/* "flag-poll", "verified" (write-imm but small frames, rb_pipe.h) or
 * "write-imm" once READY; "unknown" before */
static const char *rdma_verbs_mode(const rdma_conn_t * c)
{
    const rdma_verbs_conn_t *vc = c->priv;
    if (!vc || vc->cm != RDMA_VERBS_CM_READY)
        return "unknown";
    return !vc->completion ? "flag-poll" : vc->verify ? "verified" : "write-imm";
}

/* One line: mode, in-order answers, inline granted, max_rd_atomic, MTU,
 * queues (rq: the receives it may hold; "(srq)": in the shared queue). */
static int rdma_verbs_describe(const rdma_conn_t * c, char *buf, size_t len)
{
    const rdma_verbs_conn_t *vc = c->priv;
    if (!vc)
        return snprintf(buf, len, "not connected");
    return snprintf(buf, len, "verbs mode=%s in_order=%d/%d%s inline=%u max_rd_atomic=%d mtu=%d "
                    "sq=%u/%u signalled=%u rq=%u%s window=%u qp_timeout=%d dev=%s gid_index=%d cm=%d "
                    "fork=%s",
                    rdma_verbs_mode(c), vc->in_order_local, vc->remote.in_order & 1,
                    vc->xp->in_order_override ? "(unsafe override)" : "", vc->max_inline,
                    vc->max_rd_atomic, 128 << vc->mtu, vc->sq_free,
                    vc->sq_depth, vc->sig_head - vc->sig_tail, vc->rq_depth,
                    vc->xp->srq ? "(srq)" : "", rdma_verbs_window(vc), vc->xp->qp_timeout,
                    ibv_get_device_name(vc->xp->ctx->device), vc->xp->gid_index, vc->cm,
                    vc->xp->fork_mode);
}

const rdma_xport_ops_t rdma_xport_verbs = {
    .name = "verbs",
    .wire = 1,
    .open = rdma_verbs_open,
    .connect = rdma_verbs_connect,
    .progress = rdma_verbs_progress,
    .closing = rdma_verbs_closing,
    .quiesce = rdma_xport_quiesce_plain,
    .abort = rdma_verbs_abort,
    .close = rdma_verbs_close,
    .finalize = rdma_verbs_finalize,
    .error = rdma_verbs_error,
    .describe = rdma_verbs_describe,
    .wait_arm = rdma_verbs_wait_arm,
    .wait = rdma_verbs_wait,
    .wait_disarm = rdma_verbs_wait_disarm,
    .bg_fds = rdma_verbs_bg_fds,
    .bg_run = rdma_verbs_bg_run,
    .pipe_ops = &rdma_verbs_pipe_ops,
    .zc = &rdma_verbs_zc_ops,
    .rma = &rdma_verbs_rma_ops,
    .stats = rdma_verbs_stats,
    .counters = rdma_verbs_counters
};
