/*
 * rdma_verbs_eager.c -- the verbs transport: eager sends from registered
 * user buffers (P2; rdma_verbs.h).
 *
 * zc asks hold() about the last entry of an eager put (at least
 * FREQ_MIN_LEN bytes, all of the put in RB_USER_SEGS frames, on an idle
 * pipe; zc.h).  hold counts the buffer's use in the frequent-buffer table
 * (reg/freq) and, once it is frequent, takes a region of the send cache
 * for it: the regions the rendezvous exposes, whose lkey also serves a
 * gather list.  The pipe then sends the frames with one RDMA write
 * (rdma_verbs_data.c, write_user) whose gather entries alternate the stage
 * (frame headers, padding, tail flags) and the region (payload).  That
 * write is signalled; its completion reports ev.sent, zc then accepts the
 * entry and releases the region.  Freeing or unmapping the buffer drops
 * the region like any other (memev); without memev there is no cache and
 * nothing is held.
 *
 * When to register (MPIR_CVAR_CH3_RDMA_EAGER_REG_USES): at a fixed number
 * of uses, or (-1) at the paper's 25% of n_min = Rm / (Cm - V) (freq.h),
 * from costs measured here at open on an 8 KiB buffer: Rm one ibv_reg_mr
 * plus ibv_dereg_mr, Cm one memcpy, V one table lookup plus one cache hit
 * under rc_lock (in a cache of the probe's own); medians.  Where Cm <= V
 * nothing is registered, nor on a software device (rxe, siw), which
 * copies the payload itself: there -1 means never (measured in the VM:
 * 8 KiB ping-pongs 1.0-1.1x slower gathered than copied).
 *
 * Threads: main only; the table is [main], the cache calls take rc_lock.
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* Software devices (rxe, siw: ibv_device_attr.vendor_id) move the bytes
 * with a CPU copy of their own: a gather list saves no copy there. */
enum { RXE_VENDOR_ID = 0xffffff, SIW_VENDOR_ID = 0x626d74 };

enum { EAGER_PROBE = 8192, EAGER_RUNS = 9, EAGER_REPS = 16, EAGER_BITS = 20,
    EAGER_ENTRIES = 1 << 16
};

static int rdma_verbs_cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}

/* What the probes work on: an 8 KiB buffer (and one to copy to), and a
 * cache of their own, so that the send cache's counters and the pinned
 * peak see nothing of them. */
typedef struct rdma_verbs_probe {
    rdma_xport_t *xp;
    char *buf;
    rcache_t *rc;
} rdma_verbs_probe_t;

/* Median over EAGER_RUNS runs of what f does EAGER_REPS times, per time. */
static double rdma_verbs_eager_time(void (*f)(rdma_verbs_probe_t *), rdma_verbs_probe_t * pr)
{
    double t[EAGER_RUNS], t0;
    int i, k;

    for (i = 0; i < EAGER_RUNS; i++) {
        t0 = rdma_thread_now();         /* rdma_verbs_now is too coarse */
        for (k = 0; k < EAGER_REPS; k++)
            f(pr);
        t[i] = (rdma_thread_now() - t0) / EAGER_REPS;
    }
    qsort(t, EAGER_RUNS, sizeof(t[0]), rdma_verbs_cmp_double);
    return t[EAGER_RUNS / 2];
}

static void rdma_verbs_probe_reg(rdma_verbs_probe_t * pr)
{
    struct ibv_mr *mr = ibv_reg_mr(pr->xp->pd, pr->buf, EAGER_PROBE, IBV_ACCESS_REMOTE_READ);

    if (mr)
        ibv_dereg_mr(mr);
}

static void rdma_verbs_probe_copy(rdma_verbs_probe_t * pr)
{
    memcpy(pr->buf + EAGER_PROBE, pr->buf, EAGER_PROBE);
    __asm__ volatile ("":::"memory");   /* keep the copy */
}

/* V: the table lookup and a cache hit under rc_lock, as rdma_verbs_hold */
static void rdma_verbs_probe_lookup(rdma_verbs_probe_t * pr)
{
    rcache_region_t *r;

    freq_use(&pr->xp->freq, pr->buf, EAGER_PROBE, 0);
    pthread_mutex_lock(&pr->xp->rc_lock);
    if (rcache_get(pr->rc, pr->buf, EAGER_PROBE, &r, NULL) == RDMA_OK)
        rcache_put(pr->rc, r);
    pthread_mutex_unlock(&pr->xp->rc_lock);
}

/* Measure Rm, Cm and V (eager_uses 0 if that cannot be done). */
static void rdma_verbs_eager_costs(rdma_xport_t * xp, const rcache_ops_t * ops)
{
    rcache_config_t cfg = { SIZE_MAX, 1, 1, NULL };
    rdma_verbs_probe_t pr = { xp, aligned_alloc(4096, 2 * EAGER_PROBE), NULL };
    freq_cost_t *c = &xp->eager_cost;

    if (pr.buf && rcache_create(&cfg, ops, &xp->rc_src, &pr.rc) == RDMA_OK) {
        memset(pr.buf, 1, 2 * EAGER_PROBE);
        c->reg = rdma_verbs_eager_time(rdma_verbs_probe_reg, &pr);
        c->copy_per_byte = rdma_verbs_eager_time(rdma_verbs_probe_copy, &pr) / EAGER_PROBE;
        c->lookup = rdma_verbs_eager_time(rdma_verbs_probe_lookup, &pr);
        rcache_destroy(pr.rc);
        freq_destroy(&xp->freq);
    }
    if (!pr.rc || freq_init(&xp->freq, EAGER_BITS, EAGER_ENTRIES))
        xp->eager_uses = 0;
    free(pr.buf);
}

void rdma_verbs_eager_open(rdma_xport_t * xp, const rcache_ops_t * ops)
{
    xp->eager_uses = xp->vp.eager_reg_uses;
    xp->eager_soft = xp->dev.vendor_id == RXE_VENDOR_ID || xp->dev.vendor_id == SIW_VENDOR_ID;
    if (!xp->memev_on || !xp->eager_uses || (xp->eager_uses < 0 && xp->eager_soft)
        || xp->dev.max_sge < RDMA_VERBS_USER_SGE
        || freq_init(&xp->freq, EAGER_BITS, EAGER_ENTRIES))
        xp->eager_uses = 0;
    else if (xp->eager_uses < 0)
        rdma_verbs_eager_costs(xp, ops);
}

void rdma_verbs_eager_close(rdma_xport_t * xp)
{
    freq_destroy(&xp->freq);
}

/* zc_ops_t.hold: a frequent buffer, registered (see the top). */
rdma_status_t rdma_verbs_hold(void *ctx, const void *addr, size_t len, void **handle)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_xport_t *xp = vc->xp;
    uint32_t uses;
    rcache_region_t *r;

    if (xp->eager_uses == 0 || vc->max_send_sge < RDMA_VERBS_USER_SGE)
        return RDMA_ERR_REFUSED;
    uses = xp->eager_uses < 0 ? freq_uses_auto(&xp->eager_cost, len) : (uint32_t) xp->eager_uses;
    if (!uses || !freq_use(&xp->freq, addr, len, uses)
        || rdma_verbs_rc_get(&xp->rc_src, addr, len, &r, NULL) != RDMA_OK)
        return RDMA_ERR_REFUSED;
    *handle = r;
    return RDMA_OK;
}

/* VERBOSE: the rule and what the table saw. */
int rdma_verbs_eager_stats(const rdma_xport_t * xp, char *buf, size_t len)
{
    const freq_cost_t *c = &xp->eager_cost;

    if (xp->eager_uses == 0)
        return snprintf(buf, len, "; eager from user memory: off%s", xp->eager_soft
                        && xp->vp.eager_reg_uses < 0 ? " (auto: a software device copies "
                        "anyway, nothing to save)" : "");
    if (xp->eager_uses > 0)
        return snprintf(buf, len, "; eager from user memory after %d uses: %llu buffers "
                        "counted, %llu frequent", xp->eager_uses,
                        (unsigned long long) xp->freq.st.entries,
                        (unsigned long long) xp->freq.st.frequent);
    return snprintf(buf, len, "; eager from user memory: Rm %.2f us, Cm(8 KiB) %.2f us, V %.2f "
                    "us, registered after %u uses at 8 KiB, %u at 1 KiB (25%% of n_min; 0: never): "
                    "%llu buffers counted, %llu frequent%s", c->reg * 1e6,
                    c->copy_per_byte * EAGER_PROBE * 1e6, c->lookup * 1e6,
                    freq_uses_auto(c, 8192), freq_uses_auto(c, 1024),
                    (unsigned long long) xp->freq.st.entries,
                    (unsigned long long) xp->freq.st.frequent,
                    xp->freq.stopped ? " (table growth stopped)" : "");
}

