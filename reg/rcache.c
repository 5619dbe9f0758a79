/*
 * rcache.c: registration cache.  Design, region states and rules are in
 * rcache.h.  The tree is a recursive AVL tree over rcache_region_t.child;
 * the LRU and dead lists share the prev/next links (a region is never in
 * both).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "rcache.h"

typedef struct rcache_list {
    rcache_region_t *head, *tail;       /* LRU: head hot, tail cold */
} rcache_list_t;

struct rcache {
    rcache_config_t cfg;
    rcache_ops_t ops;
    void *ctx;
    uintptr_t page_mask;
    rcache_region_t *root;      /* live regions */
    rcache_list_t lru;          /* live idle regions */
    rcache_list_t dead;         /* dead busy regions */
    rcache_t *acct_next;        /* next cache on cfg.pinned */
    int reg_errno;
    rcache_stats_t stats;
};

/* --- AVL tree -------------------------------------------------------- */

static int rcache_tree_height(const rcache_region_t * n)
{
    return n ? n->height : 0;
}

static void rcache_tree_update(rcache_region_t * n)
{
    int l = rcache_tree_height(n->child[0]), r = rcache_tree_height(n->child[1]);

    n->height = 1 + (l > r ? l : r);
}

/* Raise n->child[up] into n's place; returns the new subtree root. */
static rcache_region_t *rcache_tree_rotate(rcache_region_t * n, int up)
{
    rcache_region_t *c = n->child[up];

    n->child[up] = c->child[!up];
    c->child[!up] = n;
    rcache_tree_update(n);
    rcache_tree_update(c);
    return c;
}

/* Restore the AVL balance at n, whose subtrees are balanced and differ in
 * height by at most 2. */
static rcache_region_t *rcache_tree_balance(rcache_region_t * n)
{
    int d = rcache_tree_height(n->child[1]) > rcache_tree_height(n->child[0]);
    rcache_region_t *c = n->child[d];

    if (rcache_tree_height(c) - rcache_tree_height(n->child[!d]) < 2) {
        rcache_tree_update(n);
        return n;
    }
    if (rcache_tree_height(c->child[!d]) > rcache_tree_height(c->child[d]))
        n->child[d] = rcache_tree_rotate(c, !d);
    return rcache_tree_rotate(n, d);
}

static rcache_region_t *rcache_tree_insert(rcache_region_t * n, rcache_region_t * r)
{
    int d;

    if (!n) {
        r->child[0] = r->child[1] = NULL;
        r->height = 1;
        return r;
    }
    d = r->start > n->start;
    n->child[d] = rcache_tree_insert(n->child[d], r);
    return rcache_tree_balance(n);
}

static rcache_region_t *rcache_tree_remove_min(rcache_region_t * n, rcache_region_t ** min)
{
    if (!n->child[0]) {
        *min = n;
        return n->child[1];
    }
    n->child[0] = rcache_tree_remove_min(n->child[0], min);
    return rcache_tree_balance(n);
}

/* Remove r, which is in the subtree at n. */
static rcache_region_t *rcache_tree_remove(rcache_region_t * n, const rcache_region_t * r)
{
    rcache_region_t *m;
    int d;

    if (n != r) {
        d = r->start > n->start;
        n->child[d] = rcache_tree_remove(n->child[d], r);
        return rcache_tree_balance(n);
    }
    if (!n->child[1])
        return n->child[0];
    n->child[1] = rcache_tree_remove_min(n->child[1], &m);
    m->child[0] = n->child[0];
    m->child[1] = n->child[1];
    return rcache_tree_balance(m);
}

/* The leftmost live region overlapping [s, e), or NULL.  Live regions do
 * not overlap, so the first one ending after s is the candidate. */
static rcache_region_t *rcache_tree_first(rcache_region_t * n, uintptr_t s, uintptr_t e)
{
    rcache_region_t *best = NULL;

    while (n) {
        if (n->end > s) {
            best = n;
            n = n->child[0];
        } else {
            n = n->child[1];
        }
    }
    return best && best->start < e ? best : NULL;
}

/* The rightmost live region overlapping [s, e), or NULL. */
static rcache_region_t *rcache_tree_last(rcache_region_t * n, uintptr_t s, uintptr_t e)
{
    rcache_region_t *best = NULL;

    while (n) {
        if (n->start < e) {
            best = n;
            n = n->child[1];
        } else {
            n = n->child[0];
        }
    }
    return best && best->end > s ? best : NULL;
}

/* --- lists ----------------------------------------------------------- */

static void rcache_list_push(rcache_list_t * l, rcache_region_t * r)
{
    r->prev = NULL;
    r->next = l->head;
    if (l->head)
        l->head->prev = r;
    else
        l->tail = r;
    l->head = r;
}

static void rcache_list_del(rcache_list_t * l, rcache_region_t * r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        l->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        l->tail = r->prev;
}

static void rcache_lru_add(rcache_t * rc, rcache_region_t * r)
{
    rcache_list_push(&rc->lru, r);
    rc->stats.idle_regions++;
    rc->stats.idle_bytes += r->end - r->start;
}

static void rcache_lru_del(rcache_t * rc, rcache_region_t * r)
{
    rcache_list_del(&rc->lru, r);
    rc->stats.idle_regions--;
    rc->stats.idle_bytes -= r->end - r->start;
}

/* --- the pinned account's time average ------------------------------- */

void rcache_pinned_clock(rcache_pinned_t * p, double (*clock)(void))
{
    p->clock = clock;
    p->t0 = p->t_last = clock();
    p->area = 0;
}

double rcache_pinned_avg(const rcache_pinned_t * p)
{
    double t = p->clock ? p->clock() : 0;
    double area = p->area + (double) p->now * (t - p->t_last);

    return t > p->t0 ? area / (t - p->t0) : (double) p->now;
}

/* now += delta (signed), the average and the peak kept up. */
static void rcache_pinned_add(rcache_pinned_t * p, ptrdiff_t delta)
{
    if (p->clock) {
        double t = p->clock();

        p->area += (double) p->now * (t - p->t_last);
        p->t_last = t;
    }
    p->now += delta;
    if (p->now > p->peak)
        p->peak = p->now;
}

/* --- regions --------------------------------------------------------- */

static void rcache_region_destroy(rcache_t * rc, rcache_region_t * r)
{
    rc->ops.dereg(rc->ctx, r->mr);
    rc->stats.regions--;
    rc->stats.bytes -= r->end - r->start;
    if (rc->cfg.pinned)
        rcache_pinned_add(rc->cfg.pinned, -(ptrdiff_t) (r->end - r->start));
    free(r);
}

/* Take a live region out of the tree: deregister it if idle, else make it
 * dead (deregistered at its last put). */
static void rcache_region_retire(rcache_t * rc, rcache_region_t * r)
{
    rc->root = rcache_tree_remove(rc->root, r);
    if (r->refcount) {
        r->dead = 1;
        rcache_list_push(&rc->dead, r);
        return;
    }
    rcache_lru_del(rc, r);
    rcache_region_destroy(rc, r);
}

/* Evict idle regions from the cold end down to the given limits. */
static void rcache_lru_trim(rcache_t * rc, size_t max_bytes, size_t max_entries)
{
    while (rc->stats.idle_bytes > max_bytes || rc->stats.idle_regions > max_entries) {
        rc->stats.evictions++;
        rcache_region_retire(rc, rc->lru.tail);
    }
}

/* Evict rc's idle regions from the cold end until n more bytes fit p
 * (every idle byte evicted leaves p too). */
static void rcache_pinned_evict(rcache_t * rc, const rcache_pinned_t * p, size_t n)
{
    size_t over = p->now + n > p->max ? p->now + n - p->max : 0;

    rcache_lru_trim(rc, rc->stats.idle_bytes > over ? rc->stats.idle_bytes - over : 0, SIZE_MAX);
}

/* Room for n more registered bytes under the cap (see rcache.h), making
 * it by eviction; a request above the cap evicts nothing. */
static int rcache_pinned_room(rcache_t * rc, size_t n)
{
    rcache_pinned_t *p = rc->cfg.pinned;
    rcache_t *o;

    if (!p || !p->max)
        return 1;
    if (n > p->max)
        return 0;
    rcache_pinned_evict(rc, p, n);
    for (o = p->caches; o && p->now + n > p->max; o = o->acct_next)
        rcache_pinned_evict(o, p, n);
    return p->now + n <= p->max;
}

/* Allocate and register [s, e); refcount 1, in no tree or list. */
static int rcache_region_create(rcache_t * rc, uintptr_t s, uintptr_t e, rcache_region_t ** out)
{
    rcache_region_t *r;
    int ret;

    if (!rcache_pinned_room(rc, e - s))
        return RDMA_ERR_REFUSED;
    r = calloc(1, sizeof(*r));
    if (!r)
        return RDMA_ERR_NOMEM;
    ret = rc->ops.reg(rc->ctx, (void *) s, e - s, &r->mr, &r->key);
    if (ret < 0)
        goto err_free;
    r->dead = ret == RCACHE_REG_ONCE;
    rc->stats.uncached += r->dead;
    r->start = s;
    r->end = e;
    r->refcount = 1;
    rc->stats.regions++;
    rc->stats.bytes += e - s;
    if (rc->cfg.pinned)
        rcache_pinned_add(rc->cfg.pinned, (ptrdiff_t) (e - s));
    *out = r;
    return RDMA_OK;

  err_free:
    rc->reg_errno = ret < 0 ? -ret : ret;
    free(r);
    return RDMA_ERR_REG;
}

/* Limits (memlock, NIC) may be relieved by evicting idle regions; EFAULT
 * (read-only or unmapped memory) never is, and must not flush the cache. */
static int rcache_errno_retry_is(int err)
{
    return err == ENOMEM || err == EAGAIN;
}

/* Register a new region for the page range [s, e): the union with the live
 * regions it overlaps, else [s, e) alone (after evicting every idle region
 * if the backend refused).  The new region replaces every live region it
 * overlaps. */
static int rcache_region_new(rcache_t * rc, uintptr_t s, uintptr_t e, rcache_region_t ** out)
{
    uintptr_t ms = s, me = e;
    rcache_region_t *r, *o;
    int st, merged;

    if ((o = rcache_tree_first(rc->root, s, e)) && o->start < ms)
        ms = o->start;
    if ((o = rcache_tree_last(rc->root, s, e)) && o->end > me)
        me = o->end;
    merged = ms != s || me != e;
    st = rcache_region_create(rc, ms, me, &r);
    if (st == RDMA_ERR_REG && (merged || rcache_errno_retry_is(rc->reg_errno))) {
        rcache_lru_trim(rc, 0, 0);
        st = rcache_region_create(rc, s, e, &r);
    } else if (st == RDMA_ERR_REFUSED && merged) {
        st = rcache_region_create(rc, s, e, &r);
    }
    if (st) {
        rc->stats.reg_failures += st == RDMA_ERR_REG;
        rc->stats.over_cap += st == RDMA_ERR_REFUSED;
        return st;
    }
    if (!rc->cfg.cache || r->dead) {
        r->dead = 1;
        rcache_list_push(&rc->dead, r);
    } else {
        while ((o = rcache_tree_first(rc->root, r->start, r->end))) {
            rc->stats.merges++;
            rcache_region_retire(rc, o);
        }
        rc->root = rcache_tree_insert(rc->root, r);
    }
    *out = r;
    return RDMA_OK;
}

/* --- API ------------------------------------------------------------- */

rdma_status_t rcache_create(const rcache_config_t * cfg, const rcache_ops_t * ops, void *ctx,
                            rcache_t ** out)
{
    long page = sysconf(_SC_PAGESIZE);
    rcache_t *rc;

    if (!cfg || !ops || !ops->reg || !ops->dereg || !out || page <= 0)
        return RDMA_ERR_INVAL;
    rc = calloc(1, sizeof(*rc));
    if (!rc)
        return RDMA_ERR_NOMEM;
    rc->cfg = *cfg;
    rc->ops = *ops;
    rc->ctx = ctx;
    rc->page_mask = (uintptr_t) page - 1;
    if (cfg->pinned) {
        rc->acct_next = cfg->pinned->caches;
        cfg->pinned->caches = rc;
    }
    *out = rc;
    return RDMA_OK;
}

static void rcache_tree_destroy(rcache_t * rc, rcache_region_t * n)
{
    if (!n)
        return;
    rcache_tree_destroy(rc, n->child[0]);
    rcache_tree_destroy(rc, n->child[1]);
    rcache_region_destroy(rc, n);
}

void rcache_destroy(rcache_t * rc)
{
    rcache_t **p;

    if (!rc)
        return;
    for (p = rc->cfg.pinned ? &rc->cfg.pinned->caches : NULL; p && *p; p = &(*p)->acct_next)
        if (*p == rc) {
            *p = rc->acct_next;
            break;
        }
    rcache_tree_destroy(rc, rc->root);
    while (rc->dead.head) {
        rcache_region_t *r = rc->dead.head;

        rcache_list_del(&rc->dead, r);
        rcache_region_destroy(rc, r);
    }
    free(rc);
}

rdma_status_t rcache_get(rcache_t * rc, const void *addr, size_t len, rcache_region_t ** out,
                         int *hit)
{
    uintptr_t a = (uintptr_t) addr, last = a + len - 1, s, e;
    rcache_region_t *r;
    int st, h = 0;

    /* the last byte may not wrap nor lie in the top page (e would be 0) */
    if (!rc || !out || !len || last < a || (last | rc->page_mask) == UINTPTR_MAX)
        return RDMA_ERR_INVAL;
    if (rc->ops.drain)
        rc->ops.drain(rc->ctx, rc);
    s = a & ~rc->page_mask;
    e = (last | rc->page_mask) + 1;
    r = rcache_tree_first(rc->root, s, e);
    if (r && r->start <= s && r->end >= e) {
        if (!r->refcount++)
            rcache_lru_del(rc, r);
        rc->stats.hits++;
        h = 1;
    } else {
        st = rcache_region_new(rc, s, e, &r);
        if (st)
            return st;
        rc->stats.misses++;
    }
    if (hit)
        *hit = h;
    *out = r;
    return RDMA_OK;
}

int rcache_put(rcache_t * rc, rcache_region_t * r)
{
    if (!rc || !r || !r->refcount || --r->refcount)
        return 0;
    if (r->dead) {
        rcache_list_del(&rc->dead, r);
        rcache_region_destroy(rc, r);
        return 1;
    }
    rcache_lru_add(rc, r);
    rcache_lru_trim(rc, rc->cfg.max_bytes, rc->cfg.max_entries);
    return 1;
}

void rcache_drop_idle(rcache_t * rc, uintptr_t start, size_t len)
{
    uintptr_t end = start + len < start ? UINTPTR_MAX : start + len;
    rcache_region_t *r;

    while (rc && (r = rcache_tree_first(rc->root, start, end))) {
        start = r->end;
        if (!r->refcount) {
            rc->stats.evictions++;
            rcache_region_retire(rc, r);
        }
    }
}

void rcache_invalidate(rcache_t * rc, uintptr_t start, size_t len)
{
    uintptr_t end = start + len < start ? UINTPTR_MAX : start + len;
    rcache_region_t *r;

    if (!rc || !len)
        return;
    while ((r = rcache_tree_first(rc->root, start, end))) {
        rc->stats.invalidations++;
        rcache_region_retire(rc, r);
    }
}

void rcache_flush(rcache_t * rc)
{
    while (rc && rc->root) {
        rc->stats.invalidations++;
        rcache_region_retire(rc, rc->root);
    }
}

int rcache_reg_errno(const rcache_t * rc)
{
    return rc ? rc->reg_errno : 0;
}

void rcache_stats_get(const rcache_t * rc, rcache_stats_t * st)
{
    *st = rc->stats;
}

/* Check the subtree at n, whose regions must lie in [lo, hi); returns its
 * height or -1.  Adds its regions, bytes and idle regions to cnt[0..2]. */
static rdma_status_t rcache_tree_check(const rcache_t * rc, const rcache_region_t * n,
                                       uintptr_t lo, uintptr_t hi, size_t cnt[3])
{
    int l, r;

    if (!n)
        return RDMA_OK;
    if (n->start < lo || n->end > hi || n->start >= n->end || n->dead
        || ((n->start | n->end) & rc->page_mask))
        return RDMA_ERR_INVAL;
    l = rcache_tree_check(rc, n->child[0], lo, n->start, cnt);
    r = rcache_tree_check(rc, n->child[1], n->end, hi, cnt);
    if (l < 0 || r < 0 || l - r > 1 || r - l > 1 || n->height != 1 + (l > r ? l : r))
        return RDMA_ERR_INVAL;
    cnt[0]++;
    cnt[1] += n->end - n->start;
    cnt[2] += !n->refcount;
    return n->height;
}

/* Check links and states of a list (dead: the dead list, else the LRU);
 * adds its regions and bytes to cnt[0..1]. */
static rdma_status_t rcache_list_check(const rcache_list_t * l, int dead, size_t cnt[2])
{
    const rcache_region_t *r, *prev = NULL;

    for (r = l->head; r; prev = r, r = r->next) {
        if (r->prev != prev || r->dead != dead || (dead ? !r->refcount : !!r->refcount))
            return RDMA_ERR_INVAL;
        cnt[0]++;
        cnt[1] += r->end - r->start;
    }
    return prev == l->tail ? 0 : -1;
}

rdma_status_t rcache_check(const rcache_t * rc)
{
    size_t t[3] = { 0 }, lru[2] = { 0 }, dead[2] = { 0 };
    const rcache_stats_t *st = &rc->stats;

    if (rcache_tree_check(rc, rc->root, 0, UINTPTR_MAX, t) < 0
        || rcache_list_check(&rc->lru, 0, lru) || rcache_list_check(&rc->dead, 1, dead))
        return RDMA_ERR_INVAL;
    if (t[2] != lru[0] || lru[0] != st->idle_regions || lru[1] != st->idle_bytes
        || t[0] + dead[0] != st->regions || t[1] + dead[1] != st->bytes)
        return RDMA_ERR_INVAL;
    return RDMA_OK;
}
