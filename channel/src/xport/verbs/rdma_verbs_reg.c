/*
 * rdma_verbs_reg.c -- the verbs transport: registration caches and
 * zero-copy RDMA reads (rdma_verbs.h).
 *
 * Zero-copy (zc.h): RDMA read.  The sender exposes its buffer through the
 * send registration cache (reg/rcache; regions REMOTE_READ only) and
 * sends the rkey; the receiver registers its destination through the
 * receive cache (LOCAL_WRITE only: no peer can read or write it) and posts
 * signalled RDMA reads of at most RDMA_VERBS_READ_MAX bytes, at most
 * min(negotiated max_rd_atomic, RDMA_VERBS_READS_MAX) outstanding, never
 * eating the send-queue reserve.  Destinations are registered in windows
 * aligned to RDMA_VERBS_REG_WINDOW in the address space: every read of a
 * window hits the region its first read registered, and windows share no
 * page, so an unaligned buffer never makes the cache merge ever-growing
 * regions.  Read completions arrive in order (one RC QP): each releases its
 * region and reports its bytes with ev.pulled().  Cached registrations are
 * only safe while the memory stays mapped: reg/memev reports unmaps (watch
 * before register, so none is missed) and the cache drains those events
 * before every lookup; without memev every registration is dropped after
 * use (rcache cache=0), said once.
 *
 * Registration helper (P4, MPIR_CVAR_CH3_RDMA_REG_HELPER; needs the
 * cache): after the last use of a region of at least RH_MIN_BYTES, main
 * notes it (rhelper.h); the channel thread predicts the next use, drops the
 * region's registration meanwhile and registers it again ahead of time.
 * Both caches and their pinned account are then shared: every rcache call
 * holds rc_lock (a helper registration holds it for one ibv_reg_mr).
 */
#define _GNU_SOURCE
#include "rdma_verbs.h"

/* ----------------------------------------------- zero-copy: RDMA read */

/* rcache backend (ctx: rdma_verbs_rc_t).  Watch before registering: an
 * unmap in between cannot be missed (the registration then fails or its
 * event is queued).  Memory that cannot be watched (file-backed, e.g. an
 * executable's .data) is registered for one use only. */
static rdma_status_t rdma_verbs_rc_reg(void *ctx, void *addr, size_t len, void **mr,
                                       uint64_t * key)
{
    rdma_verbs_rc_t *vr = ctx;
    int once = vr->xp->memev_on && memev_watch(addr, len) != RDMA_OK;
    struct ibv_mr *m = ibv_reg_mr(vr->xp->pd, addr, len, vr->access);

    if (!m)
        return errno ? -errno : -ENOMEM;
    *mr = m;
    *key = m->rkey;
    return once ? RCACHE_REG_ONCE : 0;
}

static void rdma_verbs_rc_dereg(void *ctx, void *mr)
{
    (void) ctx;
    ibv_dereg_mr(mr);
}

/* A released range invalidates both caches (arg: the xport). */
static void rdma_verbs_rc_inval(void *arg, uintptr_t start, size_t len)
{
    rdma_xport_t *xp = arg;

    rcache_invalidate(xp->rc_src.rc, start, len);
    rcache_invalidate(xp->rc_dst.rc, start, len);
    rcache_invalidate(xp->rc_win.rc, start, len);
}

static void rdma_verbs_rc_flush(void *arg)
{
    rdma_xport_t *xp = arg;

    rcache_flush(xp->rc_src.rc);
    rcache_flush(xp->rc_dst.rc);
    rcache_flush(xp->rc_win.rc);
}

static void rdma_verbs_rc_drain(void *ctx, rcache_t * rc)
{
    rdma_xport_t *xp = ((rdma_verbs_rc_t *) ctx)->xp;

    (void) rc;
    if (xp->memev_on)
        memev_drain(rdma_verbs_rc_inval, rdma_verbs_rc_flush, xp);
}

static const rcache_ops_t rdma_verbs_rc_ops = {
    rdma_verbs_rc_reg, rdma_verbs_rc_dereg, rdma_verbs_rc_drain
};

/* ------------------------------------- the helper's backend (the thread) */

static void rdma_verbs_rh_drop(void *ctx, int k, uintptr_t start, size_t len)
{
    rdma_xport_t *xp = ctx;

    pthread_mutex_lock(&xp->rc_lock);
    rcache_drop_idle(k ? xp->rc_dst.rc : xp->rc_src.rc, start, len);
    pthread_mutex_unlock(&xp->rc_lock);
}

static int rdma_verbs_rh_reg(void *ctx, int k, uintptr_t start, size_t len)
{
    rdma_xport_t *xp = ctx;
    rcache_t *rc = k ? xp->rc_dst.rc : xp->rc_src.rc;
    rcache_region_t *r;
    int hit = 0, st;

    pthread_mutex_lock(&xp->rc_lock);
    st = rcache_get(rc, (void *) start, len, &r, &hit);
    if (st == RDMA_OK)
        rcache_put(rc, r);
    pthread_mutex_unlock(&xp->rc_lock);
    return st ? -1 : !hit;
}

static const rh_ops_t rdma_verbs_rh_ops = {
    rdma_verbs_rh_drop, rdma_verbs_rh_reg, rdma_thread_now
};

/* The caches rc_open created (destroying NULL is a no-op). */
static void rdma_verbs_rc_destroy(rdma_xport_t * xp)
{
    rcache_destroy(xp->rc_src.rc);
    rcache_destroy(xp->rc_dst.rc);
    rcache_destroy(xp->rc_win.rc);
    xp->rc_src.rc = xp->rc_dst.rc = xp->rc_win.rc = NULL;
}

rdma_status_t rdma_verbs_rc_open(rdma_xport_t * xp)
{
    rcache_config_t cfg = { xp->vp.rcache_max_bytes, xp->vp.rcache_max_entries, 1,
        &xp->pinned
    };

    /* RCACHE_MAX_MB bounds idle bytes, within the cap */
    if (xp->pinned.max && cfg.max_bytes > xp->pinned.max)
        cfg.max_bytes = xp->pinned.max;
    pthread_mutex_init(&xp->rc_lock, NULL);
    rcache_pinned_clock(&xp->pinned, rdma_thread_now);
    xp->memev_on = memev_open(xp->memev_err, sizeof(xp->memev_err)) == RDMA_OK;
    cfg.cache = xp->memev_on;
    xp->rh_on = xp->vp.reg_helper && cfg.cache;
    rh_init(&xp->rh, &rdma_verbs_rh_ops, xp);
    xp->rc_src = (rdma_verbs_rc_t) { .xp = xp, .access = IBV_ACCESS_REMOTE_READ,
        .fallback = "using the copy path" };
    xp->rc_dst = (rdma_verbs_rc_t) { .xp = xp, .access = IBV_ACCESS_LOCAL_WRITE,
        .fallback = "using the copy path" };
    xp->rc_win = (rdma_verbs_rc_t) { .xp = xp, .access = IBV_ACCESS_LOCAL_WRITE
        | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
        | (xp->amo ? IBV_ACCESS_REMOTE_ATOMIC : 0),
        .fallback = "one-sided operations on this window go as messages" };
    if (rcache_create(&cfg, &rdma_verbs_rc_ops, &xp->rc_src, &xp->rc_src.rc)
        || rcache_create(&cfg, &rdma_verbs_rc_ops, &xp->rc_dst, &xp->rc_dst.rc)
        || rcache_create(&cfg, &rdma_verbs_rc_ops, &xp->rc_win, &xp->rc_win.rc)) {
        rdma_verbs_rc_destroy(xp);
        return RDMA_ERR_NOMEM;
    }
    rdma_verbs_eager_open(xp, &rdma_verbs_rc_ops);
    return RDMA_OK;
}

/* Whatever rc_open created. */
void rdma_verbs_rc_close(rdma_xport_t * xp)
{
    rdma_verbs_eager_close(xp);
    rdma_verbs_rma_close(xp);
    rdma_verbs_rc_destroy(xp);
    if (xp->memev_on)
        memev_close();
    xp->memev_on = 0;
    pthread_mutex_destroy(&xp->rc_lock);
}

/* A region of cache vr for [addr, addr+len).  RDMA_ERR_NOMEM: not now
 * (the cap, counted; memlock or NIC limits, said once); RDMA_ERR_REG: this
 * memory cannot be registered. */
rdma_status_t rdma_verbs_rc_get(rdma_verbs_rc_t * vr, const void *addr, size_t len,
                                rcache_region_t ** r, int *hit)
{
    rdma_xport_t *xp = vr->xp;
    rdma_status_t st;
    int e;

    if (!xp->memev_on && !xp->said_memev++)
        fprintf(stderr, "[ch3:rdma] rank %d: registration cache off (%s): every zero-copy "
                "message registers its buffers anew\n", xp->prm.rank, xp->memev_err);
    pthread_mutex_lock(&xp->rc_lock);
    st = rcache_get(vr->rc, addr, len, r, hit);
    e = st == RDMA_ERR_REG ? rcache_reg_errno(vr->rc) : ENOMEM;
    if (st == RDMA_OK && xp->rh_on && rcache_region_users(*r) == 1)
        (*r)->t_use = rdma_thread_now();        /* [main]: the helper's note */
    pthread_mutex_unlock(&xp->rc_lock);
    if (st == RDMA_OK || st == RDMA_ERR_REFUSED)
        return st ? RDMA_ERR_NOMEM : RDMA_OK;
    rdma_say(xp->err, sizeof(xp->err), RDMA_ERR_REG, "cannot register %zu bytes at %p: %s%s", len,
             addr, strerror(e), e == ENOMEM || e == EAGAIN ?
             " (memlock or NIC limit: raise ulimit -l or lower "
             "MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB)" : "");
    /* limits deserve a notice, once per cache; memory that cannot be
     * registered at all (e.g. read-only) just takes the fallback (VERBOSE
     * counts it) */
    if (e != ENOMEM && e != EAGAIN)
        return RDMA_ERR_REG;
    if (!vr->said++)
        fprintf(stderr, "[ch3:rdma] rank %d: %s; %s\n", xp->prm.rank, xp->err, vr->fallback);
    return RDMA_ERR_NOMEM;
}

/* Release r of cache k (0: send, 1: receive); after its last use, tell
 * the helper when that use began (the next one is predicted from the
 * starts: a release time would be late by the time the region was busy),
 * waking the thread if the helper had nothing left to read. */
void rdma_verbs_rc_put(rdma_xport_t * xp, int k, rcache_region_t * r)
{
    uintptr_t start = r->start;
    size_t len = r->end - r->start;
    double t = r->t_use;
    int last;

    pthread_mutex_lock(&xp->rc_lock);
    last = rcache_put(k ? xp->rc_dst.rc : xp->rc_src.rc, r);
    pthread_mutex_unlock(&xp->rc_lock);
    if (last && xp->rh_on && len >= RH_MIN_BYTES
        && rh_note(&xp->rh, t, k, start, len, rh_site(len)))
        rdma_verbs_fd_poke(xp->kick_fd);
}

static rdma_status_t rdma_verbs_expose(void *ctx, const void *addr, size_t len, uint64_t * key,
                                       void **handle, int *hit)
{
    rdma_verbs_conn_t *vc = ctx;
    rcache_region_t *r;

    rdma_status_t st = rdma_verbs_rc_get(&vc->xp->rc_src, addr, len, &r, hit);

    if (st)
        return st;
    *key = r->key;
    *handle = r;
    return RDMA_OK;
}

static void rdma_verbs_unexpose(void *ctx, void *handle)
{
    rdma_verbs_rc_put(((rdma_verbs_conn_t *) ctx)->xp, 0, handle);
}

/* The receive region for a read into [at, at+len): registered for the
 * rest of len within at's window (see the top), so the window's later
 * reads hit it.  *k is cut back to end at the window's end. */
static rdma_status_t rdma_verbs_dst_get(rdma_xport_t * xp, char *at, size_t len, size_t *k,
                                        rcache_region_t ** r)
{
    size_t w = RDMA_VERBS_REG_WINDOW - ((uintptr_t) at & (RDMA_VERBS_REG_WINDOW - 1));

    w = w < len ? w : len;
    *k = *k < w ? *k : w;
    return rdma_verbs_rc_get(&xp->rc_dst, at, w, r, NULL);
}

rdma_status_t rdma_xport_verbs_dst_key(rdma_xport_t * xp, void *addr, size_t len, uint64_t * key,
                                       void **handle)
{
    size_t k = len;
    rcache_region_t *r;

    if (rdma_verbs_dst_get(xp, addr, len, &k, &r))
        return RDMA_ERR_REG;
    *key = r->key;
    *handle = r;
    return RDMA_OK;
}

void rdma_xport_verbs_dst_put(rdma_xport_t * xp, void *handle)
{
    rdma_verbs_rc_put(xp, 1, handle);
}

static uint32_t rdma_verbs_reads_max(const rdma_verbs_conn_t * vc)
{
    return vc->max_rd_atomic < RDMA_VERBS_READS_MAX ? (uint32_t) vc->max_rd_atomic :
        RDMA_VERBS_READS_MAX;
}

/* Post reads into dst while the read and send-queue limits allow.  A
 * destination that cannot be registered refuses the pull if nothing of
 * it is in flight (the sender then uses the ring; NOMEM: for now, limits),
 * else waits: completions release regions. */
static rdma_status_t rdma_verbs_pull(void *ctx, const struct iovec *dst, int n, uint64_t raddr,
                                     uint64_t key, size_t len, size_t *posted)
{
    rdma_verbs_conn_t *vc = ctx;
    size_t off = 0, k;
    rcache_region_t *r;
    rdma_status_t st;
    int i = 0;

    *posted = 0;
    if (rdma_verbs_reads_max(vc) == 0)
        return RDMA_ERR_REFUSED;
    while (i < n && *posted < len && vc->rd_head - vc->rd_tail < rdma_verbs_reads_max(vc)
           && vc->sq_free > RDMA_VERBS_SQ_RESERVE + 1) {
        char *at = (char *) dst[i].iov_base + off;
        size_t rest = dst[i].iov_len - off;

        rest = rest < len - *posted ? rest : len - *posted;
        k = rest < RDMA_VERBS_READ_MAX ? rest : RDMA_VERBS_READ_MAX;
        if ((st = rdma_verbs_dst_get(vc->xp, at, rest, &k, &r)))
            return *posted || vc->rd_head != vc->rd_tail ? RDMA_OK
                : st == RDMA_ERR_NOMEM ? RDMA_ERR_NOMEM : RDMA_ERR_REFUSED;
        if (rdma_verbs_post(vc, (uintptr_t) at, ((struct ibv_mr *) r->mr)->lkey, (uint32_t) k,
                            raddr + *posted, (uint32_t) key, -1,
                            RDMA_VERBS_POST_LEAVE_RESERVE | RDMA_VERBS_POST_SIGNAL)) {
            rdma_verbs_rc_put(vc->xp, 1, r);
            return RDMA_ERR_XPORT;
        }
        vc->reads[vc->rd_head % RDMA_VERBS_READS_MAX].len = (uint32_t) k;
        vc->reads[vc->rd_head++ % RDMA_VERBS_READS_MAX].reg = r;
        *posted += k;
        off += k;
        if (off == dst[i].iov_len) {
            i++;
            off = 0;
        }
    }
    return RDMA_OK;
}

void rdma_verbs_read_done(rdma_verbs_conn_t * vc)
{
    uint32_t t = vc->rd_tail++ % RDMA_VERBS_READS_MAX;

    rdma_verbs_rc_put(vc->xp, 1, vc->reads[t].reg);
    vc->xp->prm.ev.pulled(vc->c, vc->reads[t].len);
}

/* No split copy: both halves would cross the same link. */
const zc_ops_t rdma_verbs_zc_ops = {
    rdma_verbs_expose, rdma_verbs_unexpose, rdma_verbs_pull, NULL, rdma_verbs_hold
};

static int rdma_verbs_rc_stats(const rdma_verbs_rc_t * vr, const char *what, char *buf,
                               size_t len)
{
    rcache_stats_t st;

    rcache_stats_get(vr->rc, &st);
    return snprintf(buf, len, "%s: hits %llu misses %llu evictions %llu invalidations "
                    "%llu uncached %llu failures %llu over the cap %llu; %zu regions (%zu B), "
                    "%zu idle", what, (unsigned long long) st.hits,
                    (unsigned long long) st.misses, (unsigned long long) st.evictions,
                    (unsigned long long) st.invalidations, (unsigned long long) st.uncached,
                    (unsigned long long) st.reg_failures, (unsigned long long) st.over_cap,
                    st.regions, st.bytes, st.idle_regions);
}

/* A ring or stage of a growing ring under a cap (PINNED_MAX_MB): its
 * bytes move from the user buffers' share of the cap (pinned.max) to the
 * rings if what is pinned now still fits the rest; released bytes (delta <
 * 0) move back.  Without a cap, nothing to do.  [main], takes rc_lock. */
rdma_status_t rdma_verbs_ring_charge(rdma_xport_t * xp, long long delta)
{
    rdma_status_t st = RDMA_OK;

    if (!xp->vp.pinned_max_bytes)
        return RDMA_OK;
    pthread_mutex_lock(&xp->rc_lock);
    if (delta > 0 && (long long) (xp->pinned.max - xp->pinned.now) <= delta)
        st = RDMA_ERR_NOMEM;
    else
        xp->pinned.max = (size_t) ((long long) xp->pinned.max - delta);
    pthread_mutex_unlock(&xp->rc_lock);
    return st;
}

/* The lock is not part of the value: const callers take it too. */
static pthread_mutex_t *rdma_verbs_rc_lock(const rdma_xport_t * xp)
{
    return (pthread_mutex_t *) &xp->rc_lock;
}

void rdma_verbs_counters(const rdma_xport_t * xp, rdma_xport_counters_t * c)
{
    const rdma_verbs_rc_t *vr[3] = { &xp->rc_src, &xp->rc_dst, &xp->rc_win };
    rcache_stats_t st;
    rh_stats_t hs;
    int i;

    pthread_mutex_lock(rdma_verbs_rc_lock(xp));
    for (i = 0; i < 3; i++) {
        if (!vr[i]->rc)
            continue;
        rcache_stats_get(vr[i]->rc, &st);
        c->reg_hits += st.hits;
        c->reg_misses += st.misses;
    }
    c->pinned_bytes += xp->pinned.now;
    c->pinned_bytes_max += xp->pinned.peak;
    pthread_mutex_unlock(rdma_verbs_rc_lock(xp));
    rh_stats_get(&xp->rh, &hs);
    c->helper_regs += hs.regs;
}

static int rdma_verbs_rh_stats(const rhelper_t * h, char *buf, size_t len)
{
    rh_stats_t s;

    rh_stats_get(h, &s);
    return snprintf(buf, len, "; helper: notes %llu (%llu lost), dropped %llu, registered "
                    "ahead %llu (%llu failed), kept %llu", (unsigned long long) s.notes,
                    (unsigned long long) s.dropped_notes, (unsigned long long) s.drops,
                    (unsigned long long) s.regs, (unsigned long long) s.reg_fails,
                    (unsigned long long) s.kept);
}

/* Called once the channel thread is stopped ([cm] fields too). */
int rdma_verbs_stats(const rdma_xport_t * xp, char *buf, size_t len)
{
    char cap[64] = "no cap";
    int n;

    if (xp->pinned.max)
        snprintf(cap, sizeof(cap), "cap %zu KiB", (xp->pinned.max + 1023) / 1024);
    n = snprintf(buf, len, "rcache %s, ", xp->memev_on ? "on" : "off");
    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_rc_stats(&xp->rc_src, "send", buf + n, len - n);
    if (n >= 0 && (size_t) n + 2 < len)
        n += snprintf(buf + n, len - n, "; ");
    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_rc_stats(&xp->rc_dst, "receive", buf + n, len - n);
    if (n >= 0 && (size_t) n + 2 < len)
        n += snprintf(buf + n, len - n, "; ");
    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_rc_stats(&xp->rc_win, "windows", buf + n, len - n);
    if (n >= 0 && (size_t) n < len)
        n += snprintf(buf + n, len - n, "; user memory pinned at most %zu KiB, on average "
                      "%.0f KiB (%s)", (xp->pinned.peak + 1023) / 1024,
                      rcache_pinned_avg(&xp->pinned) / 1024, cap);
    if (xp->rh_on && n >= 0 && (size_t) n < len)
        n += rdma_verbs_rh_stats(&xp->rh, buf + n, len - n);
    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_eager_stats(xp, buf + n, len - n);
    if (n >= 0 && (size_t) n < len)
        n += snprintf(buf + n, len - n, "; cm: %llu datagrams without our auth dropped, "
                      "%llu requests refused%s%s", (unsigned long long) xp->cm_dropped,
                      (unsigned long long) xp->cm_refused, xp->cm_refused ? ": " : "",
                      xp->cm_why);
    if (n >= 0 && (size_t) n < len)
        n += snprintf(buf + n, len - n, "; closes: %llu, %llu waited the drain bound",
                      (unsigned long long) xp->closes, (unsigned long long) xp->drain_bound);
    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_srq_stats(xp, buf + n, len - n);
    if (n >= 0 && (size_t) n < len)
        n += snprintf(buf + n, len - n, "; cq: %d entries", xp->cq_size);
    return n;
}
