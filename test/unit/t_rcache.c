/*
 * t_rcache: unit tests of the registration cache over a fake backend.
 *
 * The fake backend records every registration (range, birth on a logical
 * clock, live or not) and never frees the records before the test ends, so
 * a deregistered region can still be inspected.  It fails with -ENOMEM once
 * more than F.limit bytes would be pinned, or with F.force_err for the next
 * F.force_n calls, and counts double deregistrations.  fake_drain reports
 * the ranges queued with fake_queue, as a memory hook would, and stamps
 * every page it invalidates on the clock (F.inv) for the staleness checks.
 * Addresses are synthetic and never touched, except in t_real_memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "rcache.h"
#include "tap.h"

#define QMAX 64
#define WIN 64                  /* pages of the synthetic window */
#define HEAD 16

typedef struct fake_mr fake_mr_t;
struct fake_mr {
    uintptr_t start, end;
    uint64_t born;              /* F.clock at registration */
    int live;
    unsigned char head[HEAD];   /* first bytes, when F.touch */
    fake_mr_t *all;
};

typedef struct fake {
    fake_mr_t *mrs;
    unsigned long regs, deregs, reg_calls, double_deregs, drains, reg_in_inval;
    size_t pinned, limit;
    int force_err, force_n;     /* fail the next force_n regs with -force_err */
    int touch;                  /* reg reads the memory (real pages) */
    int once;                   /* reg answers RCACHE_REG_ONCE */
    int in_inval;
    struct {
        uintptr_t start;
        size_t len;
    } q[QMAX];
    int nq;
    uint64_t clock;
    uint64_t inv[WIN];          /* clock of the last invalidation per page */
} fake_t;

static fake_t F;
static size_t PG;

#define BASE ((uintptr_t) 0x40000000)

static void *pg(size_t n)
{
    return (void *) (BASE + n * PG);
}

static int fake_reg(void *ctx, void *addr, size_t len, void **mr, uint64_t * key)
{
    fake_t *f = ctx;
    fake_mr_t *m;

    f->reg_calls++;
    f->reg_in_inval += f->in_inval;
    if (f->force_n) {
        f->force_n--;
        return -f->force_err;
    }
    if (f->pinned + len > f->limit || !(m = calloc(1, sizeof(*m))))
        return -ENOMEM;
    m->start = (uintptr_t) addr;
    m->end = m->start + len;
    m->born = ++f->clock;
    m->live = 1;
    if (f->touch)
        memcpy(m->head, addr, HEAD);
    m->all = f->mrs;
    f->mrs = m;
    f->pinned += len;
    *mr = m;
    *key = ++f->regs;
    return f->once ? RCACHE_REG_ONCE : 0;
}

static void fake_dereg(void *ctx, void *mr)
{
    fake_t *f = ctx;
    fake_mr_t *m = mr;

    if (!m->live) {
        f->double_deregs++;
        return;
    }
    m->live = 0;
    f->pinned -= m->end - m->start;
    f->deregs++;
}

/* Invalidate (len SIZE_MAX: flush) and stamp the window pages the range
 * touches. */
static void fake_invalidate(rcache_t * rc, uintptr_t start, size_t len)
{
    size_t p;

    F.clock++;
    for (p = 0; p < WIN; p++)
        if (start < BASE + (p + 1) * PG && BASE + p * PG < start + len)
            F.inv[p] = F.clock;
    F.in_inval = 1;
    if (len == SIZE_MAX)
        rcache_flush(rc);
    else
        rcache_invalidate(rc, start, len);
    F.in_inval = 0;
}

static void fake_queue(const void *start, size_t len)
{
    F.q[F.nq].start = (uintptr_t) start;
    F.q[F.nq++].len = len;
}

static void fake_drain(void *ctx, rcache_t * rc)
{
    fake_t *f = ctx;
    int i;

    f->drains++;
    for (i = 0; i < f->nq; i++)
        fake_invalidate(rc, f->q[i].start, f->q[i].len);
    f->nq = 0;
}

static void fake_free(void)
{
    while (F.mrs) {
        fake_mr_t *m = F.mrs;

        F.mrs = m->all;
        free(m);
    }
}

static const rcache_ops_t ops_plain = { fake_reg, fake_dereg, NULL };
static const rcache_ops_t ops_drain = { fake_reg, fake_dereg, fake_drain };

static rcache_pinned_t *ACCT;   /* the account mk() puts its cache on, or NULL */

/* A fresh fake backend pinning at most limit pages and a cache over it. */
static rcache_t *mk(size_t limit, size_t max_bytes, size_t max_entries, int cache,
                    const rcache_ops_t * ops)
{
    rcache_config_t cfg = { max_bytes, max_entries, cache, ACCT };
    rcache_t *rc = NULL;

    fake_free();
    memset(&F, 0, sizeof(F));
    F.limit = limit * PG;
    if (rcache_create(&cfg, ops, &F, &rc))
        diag("rcache_create failed");
    return rc;
}

static void fin(rcache_t * rc, const char *name)
{
    int check = rcache_check(rc);

    rcache_destroy(rc);
    ok(check == RDMA_OK && F.regs == F.deregs && !F.double_deregs && !F.pinned
       && !F.reg_in_inval, "%s: consistent; destroy deregisters every region once", name);
}

static rcache_stats_t stats(const rcache_t * rc)
{
    rcache_stats_t st;

    rcache_stats_get(rc, &st);
    return st;
}

/* Region for pages [first, first+n) or NULL; *hit as rcache_get sets it. */
static rcache_region_t *get(rcache_t * rc, size_t first, size_t n, int *hit)
{
    rcache_region_t *r = NULL;

    return rcache_get(rc, pg(first), n * PG, &r, hit) == RDMA_OK ? r : NULL;
}

static int is_range(const rcache_region_t * r, size_t first, size_t n)
{
    return r && r->start == (uintptr_t) pg(first) && r->end == (uintptr_t) pg(first + n);
}

static int mr_live(const rcache_region_t * r)
{
    return ((fake_mr_t *) r->mr)->live;
}

static void t_args(void)
{
    rcache_config_t cfg = { 0, 0, 1, NULL };
    rcache_ops_t bad = { NULL, fake_dereg, NULL };
    rcache_t *rc = NULL;
    rcache_region_t *r = NULL;

    ok(rcache_create(&cfg, &bad, NULL, &rc) == RDMA_ERR_INVAL
       && rcache_create(NULL, &ops_plain, NULL, &rc) == RDMA_ERR_INVAL && !rc,
       "create rejects a missing reg op or config");
    rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    ok(rcache_get(rc, pg(0), 0, &r, NULL) == RDMA_ERR_INVAL
       && rcache_get(rc, (void *) (UINTPTR_MAX - 10), 5, &r, NULL) == RDMA_ERR_INVAL
       && rcache_get(rc, pg(1), SIZE_MAX, &r, NULL) == RDMA_ERR_INVAL
       && rcache_get(NULL, pg(0), 1, &r, NULL) == RDMA_ERR_INVAL && !r && !F.reg_calls,
       "get rejects len 0, the top page, wrap-around and a NULL cache");
    fin(rc, "args");
}

static void t_hit_miss(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *a, *b, *c = NULL, *d, *e;
    rcache_stats_t st;
    int hit = -1;

    ok(rcache_get(rc, (char *) pg(0) + 100, 10, &a, &hit) == RDMA_OK && !hit
       && is_range(a, 0, 1) && a->key == 1 && F.regs == 1,
       "miss registers the request's page");
    ok((b = get(rc, 0, 1, &hit)) == a && hit && F.regs == 1, "same page: hit");
    ok(rcache_get(rc, (char *) pg(1) - 1, 2, &c, &hit) == RDMA_OK && !hit
       && is_range(c, 0, 2) && F.regs == 2 && mr_live(a),
       "request across a page boundary: two pages, merged with the busy first");
    ok((d = get(rc, 10, 8, &hit)) && !hit && is_range(d, 10, 8), "8-page region");
    ok(rcache_get(rc, (char *) pg(12) + 5, 3 * PG, &b, &hit) == RDMA_OK && hit && b == d,
       "contained request: hit on the covering region");
    st = stats(rc);
    ok(st.hits == 2 && st.misses == 3 && st.regions == 3 && st.bytes == 11 * PG
       && st.merges == 1 && st.idle_regions == 0, "stats: hits, misses, regions, bytes");
    rcache_put(rc, a);
    rcache_put(rc, c);
    rcache_put(rc, b);
    rcache_put(rc, d);
    st = stats(rc);
    ok(st.idle_regions == 2 && st.idle_bytes == 10 * PG && F.deregs == 0 && mr_live(a),
       "put: live regions idle, the merged-out one still busy");
    rcache_put(rc, a);
    ok(F.deregs == 1 && stats(rc).regions == 2, "merged-out region deregistered at its last put");
    ok((e = get(rc, 11, 1, &hit)) == d && hit && stats(rc).idle_regions == 1,
       "hit on an idle region takes it off the LRU");
    rcache_put(rc, e);
    rcache_put(rc, e);
    ok(stats(rc).idle_regions == 2 && rcache_check(rc) == RDMA_OK,
       "a put too many is ignored");
    fin(rc, "hit/miss");
}

static void t_merge(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *a = get(rc, 0, 4, NULL), *b = get(rc, 6, 2, NULL), *m, *n;
    fake_mr_t *am = a->mr, *bm = b->mr;
    int hit = -1;

    rcache_put(rc, b);
    ok((m = get(rc, 2, 5, &hit)) && !hit && is_range(m, 0, 8) && stats(rc).merges == 2,
       "overlap with two regions: one region over the union");
    ok(!bm->live && am->live && F.deregs == 1,
       "merged-out idle region deregistered, busy one kept");
    rcache_put(rc, a);
    ok(!am->live && F.deregs == 2, "merged-out busy region deregistered at its put");
    ok(get(rc, 0, 8, &hit) == m && hit, "the union serves the whole range");
    ok((n = get(rc, 8, 1, &hit)) && !hit && is_range(n, 8, 1) && stats(rc).merges == 2,
       "adjacent request: a separate region");
    rcache_put(rc, m);
    rcache_put(rc, m);
    rcache_put(rc, n);
    fin(rc, "merge");

    rc = mk(9, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    a = get(rc, 0, 4, NULL);
    am = a->mr;
    ok((m = get(rc, 2, 4, &hit)) && !hit && is_range(m, 2, 4) && am->live
       && F.reg_calls == 3, "union refused: the request's pages alone");
    ok((n = get(rc, 0, 1, &hit)) && !hit && n != a && is_range(n, 0, 1),
       "replaced busy region no longer served");
    rcache_put(rc, a);
    rcache_put(rc, m);
    rcache_put(rc, n);
    ok(!am->live && rcache_check(rc) == RDMA_OK, "replaced region deregistered at its put");
    fin(rc, "merge fallback");
}

static void t_invalidate(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *a = get(rc, 0, 4, NULL), *b, *c;
    fake_mr_t *am = a->mr;
    int hit = -1;

    get(rc, 0, 4, NULL);
    rcache_invalidate(rc, (uintptr_t) pg(4), PG);
    rcache_invalidate(rc, (uintptr_t) pg(0), 0);
    ok(stats(rc).invalidations == 0 && get(rc, 1, 1, &hit) == a && hit,
       "adjacent or empty range: nothing invalidated");
    rcache_put(rc, a);
    rcache_invalidate(rc, (uintptr_t) pg(3) + PG - 1, 1);
    ok(stats(rc).invalidations == 1 && am->live, "one byte invalidated: busy region kept");
    ok((b = get(rc, 0, 1, &hit)) && !hit && b != a && ((fake_mr_t *) b->mr)->born > am->born,
       "get after invalidate: new registration");
    rcache_put(rc, a);
    ok(am->live, "still busy after one put");
    rcache_put(rc, a);
    ok(!am->live, "deregistered at the last put");
    rcache_put(rc, b);
    c = get(rc, 20, 2, NULL);
    rcache_put(rc, c);
    rcache_invalidate(rc, 0, SIZE_MAX);
    ok(F.deregs == 3 && stats(rc).regions == 0 && stats(rc).idle_regions == 0,
       "idle regions deregistered at once; a range to the end of memory");
    fin(rc, "invalidate");
}

static void t_lru(void)
{
    rcache_t *rc = mk(100, 4 * PG, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *r1 = get(rc, 0, 2, NULL), *r2 = get(rc, 10, 2, NULL), *r3;
    fake_mr_t *m1 = r1->mr, *m2 = r2->mr, *m3;
    int hit = -1;

    rcache_put(rc, r1);
    rcache_put(rc, r2);
    rcache_put(rc, get(rc, 0, 1, NULL));        /* r1 becomes the hottest */
    r3 = get(rc, 20, 2, NULL);
    m3 = r3->mr;
    rcache_put(rc, r3);
    ok(!m2->live && m1->live && m3->live && stats(rc).evictions == 1
       && stats(rc).idle_bytes == 4 * PG, "by bytes: the coldest region evicted");
    ok(get(rc, 0, 2, &hit) == r1 && hit, "hot region still cached");
    ok(get(rc, 10, 2, &hit) && !hit, "evicted region re-registered");
    r3 = get(rc, 30, 8, NULL);
    m3 = r3->mr;
    rcache_put(rc, r3);
    ok(!m3->live, "idle region larger than max_bytes: evicted at its put");
    fin(rc, "lru bytes");

    rc = mk(100, SIZE_MAX, 2, 1, &ops_plain);
    r1 = get(rc, 0, 1, NULL);
    r2 = get(rc, 2, 1, NULL);
    r3 = get(rc, 4, 1, NULL);
    m1 = r1->mr;
    m2 = r2->mr;
    m3 = r3->mr;
    rcache_put(rc, r2);
    rcache_put(rc, r1);
    ok(stats(rc).evictions == 0 && stats(rc).idle_regions == 2, "by count: 2 idle kept");
    rcache_put(rc, r3);
    ok(!m2->live && m1->live && m3->live && stats(rc).idle_regions == 2,
       "by count: the first one put evicted");
    fin(rc, "lru count");
}

static void t_drain(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_drain);
    rcache_region_t *a = get(rc, 0, 4, NULL), *b = get(rc, 8, 2, NULL), *c;
    fake_mr_t *am = a->mr, *bm = b->mr;
    int hit = -1;

    rcache_put(rc, a);
    fake_queue((char *) pg(1) + 7, 10);
    fake_queue(pg(9), PG);
    ok(stats(rc).invalidations == 0 && am->live, "queued ranges wait for the next get");
    ok((c = get(rc, 0, 4, &hit)) && !hit && !am->live && bm->live && F.drains == 3
       && stats(rc).invalidations == 2, "get drains: idle region gone, busy one kept, miss");
    ok(get(rc, 8, 1, &hit) != b && !hit, "drained busy region not served");
    rcache_put(rc, b);
    ok(!bm->live, "drained busy region deregistered at its put");
    fin(rc, "drain");
}

static void t_flush(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *r[6];
    int i, hit = -1;

    for (i = 0; i < 6; i++)
        r[i] = get(rc, 3 * i, 2, NULL);
    for (i = 0; i < 6; i += 2)
        rcache_put(rc, r[i]);
    rcache_flush(rc);
    ok(F.deregs == 3 && stats(rc).regions == 3 && stats(rc).invalidations == 6
       && mr_live(r[1]) && rcache_check(rc) == RDMA_OK,
       "flush: idle regions deregistered, busy ones dead");
    ok(get(rc, 3, 2, &hit) != r[1] && !hit, "flush: nothing served afterwards");
    for (i = 1; i < 6; i += 2)
        rcache_put(rc, r[i]);
    ok(F.deregs == 6 && stats(rc).regions == 1, "flushed busy regions deregistered at put");
    fin(rc, "flush");
}

static void t_nocache(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 0, &ops_plain);
    rcache_region_t *a, *b;
    int hit = -1;

    a = get(rc, 0, 4, NULL);
    ok((b = get(rc, 1, 1, &hit)) && b != a && !hit && is_range(b, 1, 1) && F.regs == 2,
       "no cache: every get registers");
    rcache_invalidate(rc, (uintptr_t) pg(0), 4 * PG);
    ok(mr_live(a) && mr_live(b) && stats(rc).invalidations == 0,
       "no cache: busy regions outlive invalidate");
    rcache_put(rc, a);
    ok(F.deregs == 1 && stats(rc).idle_regions == 0, "no cache: put deregisters");
    get(rc, 1, 1, NULL);
    fin(rc, "no cache (busy at destroy)");
}

/* Memory the backend cannot watch: registered per use, never cached, and
 * cached neighbours stay. */
static void t_once(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *a, *b;
    int hit = -1;

    rcache_put(rc, get(rc, 0, 2, NULL));
    F.once = 1;
    a = get(rc, 10, 2, NULL);
    rcache_put(rc, a);
    ok(F.deregs == 1 && stats(rc).idle_regions == 1 && stats(rc).uncached == 1,
       "REG_ONCE: deregistered at its put, not cached");
    ok((b = get(rc, 10, 2, &hit)) && !hit && F.regs == 3, "REG_ONCE: the next get registers anew");
    rcache_put(rc, b);
    F.once = 0;
    ok(get(rc, 0, 2, &hit) && hit, "REG_ONCE: the cached neighbour still hits");
    fin(rc, "register once");
}

static void t_reg_fail(void)
{
    rcache_t *rc = mk(8, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *a, *b, *c = NULL;
    int hit = -1;

    rcache_put(rc, get(rc, 0, 4, NULL));
    rcache_put(rc, get(rc, 10, 4, NULL));
    ok((a = get(rc, 20, 4, &hit)) && !hit && F.reg_calls == 4 && stats(rc).evictions == 2
       && stats(rc).reg_failures == 0, "-ENOMEM: idle regions evicted, retry succeeds");
    b = get(rc, 30, 4, NULL);
    ok(rcache_get(rc, pg(40), 1, &c, &hit) == RDMA_ERR_REG && !c
       && rcache_reg_errno(rc) == ENOMEM && stats(rc).reg_failures == 1,
       "-ENOMEM with nothing to evict: RDMA_ERR_REG, errno ENOMEM");
    rcache_put(rc, b);
    F.force_err = EINVAL;
    F.force_n = 1;
    ok(rcache_get(rc, pg(40), 1, &c, &hit) == RDMA_ERR_REG && rcache_reg_errno(rc) == EINVAL
       && stats(rc).evictions == 2 && mr_live(b), "-EINVAL: no eviction, no retry");
    F.force_err = EAGAIN;
    F.force_n = 1;
    ok((c = get(rc, 40, 1, &hit)) && !hit && stats(rc).evictions == 3,
       "-EAGAIN: evict and retry");
    rcache_put(rc, a);
    rcache_put(rc, c);
    fin(rc, "reg failure");
}

static void t_destroy_busy(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);

    get(rc, 0, 2, NULL);
    get(rc, 4, 2, NULL);
    rcache_put(rc, get(rc, 8, 2, NULL));
    get(rc, 1, 4, NULL);        /* replaces the first two, busy: dead */
    ok(stats(rc).regions == 4 && stats(rc).idle_regions == 1,
       "live busy, dead busy and idle regions");
    fin(rc, "destroy busy");
}

/* Real pages: a registration taken before munmap must not survive a new
 * mapping at the same address once the unmap is reported. */
static void t_real_memory(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_drain);
    size_t len = 4 * PG;
    char *a, *b;
    rcache_region_t *r = NULL;
    int hit = -1;

    F.touch = 1;
    a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(a, 'A', len);
    ok(rcache_get(rc, a + 10, len - 20, &r, &hit) == RDMA_OK && !hit
       && ((fake_mr_t *) r->mr)->head[0] == 'A', "real pages registered");
    rcache_put(rc, r);
    munmap(a, len);
    b = mmap(a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
             -1, 0);
    if (b == MAP_FAILED)
        b = mmap(a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(b, 'B', len);
    if (b == a) {
        ok(rcache_get(rc, b, len, &r, &hit) == RDMA_OK && hit
           && ((fake_mr_t *) r->mr)->head[0] == 'A',
           "control: unreported unmap leaves a stale registration");
        rcache_put(rc, r);
    } else {
        ok(1, "# SKIP the new mapping is at another address");
    }
    fake_queue(a, len);
    ok(rcache_get(rc, b, len, &r, &hit) == RDMA_OK && !hit
       && ((fake_mr_t *) r->mr)->head[0] == 'B', "reported unmap: new registration");
    rcache_put(rc, r);
    munmap(b, len);
    fin(rc, "real memory");
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* Shuffle 0..n-1 into v. */
static void rnd_perm(size_t * v, size_t n)
{
    size_t i, j, t;

    for (i = 0; i < n; i++)
        v[i] = i;
    for (i = n - 1; i > 0; i--) {
        j = rnd() % (i + 1);
        t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* A large tree: disjoint regions in random order in and out; the AVL
 * invariants checked after every change. */
static void t_tree(void)
{
    enum { N = 1024 };
    rcache_t *rc = mk(2 * N, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    size_t v[N], i, bad = 0, hits = 0;
    int hit;

    rnd_perm(v, N);
    for (i = 0; i < N; i++) {
        rcache_put(rc, get(rc, 2 * v[i], 1, NULL));
        bad += rcache_check(rc) != RDMA_OK;
    }
    for (i = 0; i < N; i++) {
        rcache_put(rc, get(rc, 2 * i, 1, &hit));
        hits += hit;
    }
    ok(!bad && hits == N && stats(rc).idle_regions == N, "tree: %d regions inserted", N);
    rnd_perm(v, N);
    for (i = 0; i < N; i++) {
        rcache_invalidate(rc, (uintptr_t) pg(2 * v[i]), 1);
        bad += rcache_check(rc) != RDMA_OK || stats(rc).regions != N - 1 - i;
    }
    ok(!bad && F.deregs == N, "tree: %d regions removed in random order", N);
    fin(rc, "tree");
}

typedef struct rnd_counts {
    unsigned long contain, stale, live, hit, acct, errs, fails;
} rnd_counts_t;

/* One random get; checks the region against the model and holds it. */
static void rnd_get(rcache_t * rc, rcache_region_t ** held, int *nheld, rnd_counts_t * bad)
{
    size_t p = rnd() % WIN, off = rnd() % PG, len = 1 + rnd() % (8 * PG), regs = F.regs, q;
    uintptr_t a = (uintptr_t) pg(p) + off;
    rcache_region_t *r;
    fake_mr_t *m;
    int hit, st;

    if (len > (WIN - p) * PG - off)
        len = (WIN - p) * PG - off;
    st = rcache_get(rc, (void *) a, len, &r, &hit);
    if (st == RDMA_ERR_REFUSED && ACCT) {
        bad->errs += F.regs != regs;
        return;
    }
    if (st) {
        bad->errs += st != RDMA_ERR_REG || rcache_reg_errno(rc) != ENOMEM;
        bad->fails++;
        return;
    }
    m = r->mr;
    bad->contain += r->start > a || r->end < a + len || m->start != r->start
        || m->end != r->end;
    bad->live += !m->live;
    bad->hit += hit ? F.regs != regs : F.regs == regs;
    for (q = (r->start - BASE) / PG; q < (r->end - BASE) / PG; q++)
        bad->stale += F.inv[q] > m->born;
    held[(*nheld)++] = r;
}

/* cap: the cache is on an account capped at 40 pages, below the
 * backend's 48, and the cap must hold after every call. */
static void t_random(int cache, int cap)
{
    rcache_pinned_t acct = {.max = 40 * PG };
    rcache_t *rc = (ACCT = cap ? &acct : NULL, mk(48, 16 * PG, 6, cache, &ops_drain));
    rcache_region_t *held[24];
    rnd_counts_t bad = { 0 };
    rcache_stats_t st;
    int i, nheld = 0, k;

    for (i = 0; i < 10000; i++) {
        unsigned op = rnd() % 16;
        uintptr_t s = (uintptr_t) pg(rnd() % WIN) + rnd() % PG;
        size_t len = 1 + rnd() % (6 * PG);

        if (op < 6 && nheld < 24) {
            rnd_get(rc, held, &nheld, &bad);
        } else if (op < 12 && nheld) {
            k = rnd() % nheld;
            bad.live += !mr_live(held[k]);
            rcache_put(rc, held[k]);
            held[k] = held[--nheld];
        } else if (op < 13 && F.nq < QMAX) {
            fake_queue((void *) s, len);
        } else if (op < 14) {
            fake_invalidate(rc, s, len);
        } else if (rnd() % 8 == 0) {
            fake_invalidate(rc, 0, SIZE_MAX);
        }
        st = stats(rc);
        bad.acct += rcache_check(rc) != RDMA_OK || st.regions != F.regs - F.deregs
            || st.bytes != F.pinned || F.double_deregs
            || (cap && (acct.now != F.pinned || acct.now > acct.max));
    }
    while (nheld)
        rcache_put(rc, held[--nheld]);
    st = stats(rc);
    diag("random cache=%d cap=%d: hits %lu misses %lu merges %lu evictions %lu "
         "invalidations %lu failed gets %lu, over the cap %lu", cache, cap,
         (unsigned long) st.hits, (unsigned long) st.misses, (unsigned long) st.merges,
         (unsigned long) st.evictions, (unsigned long) st.invalidations, bad.fails,
         (unsigned long) st.over_cap);
    ok(!bad.contain, "random cache=%d cap=%d: every region contains its request", cache, cap);
    ok(!bad.stale, "random cache=%d cap=%d: no region served after an overlapping invalidate",
       cache, cap);
    ok(!bad.live, "random cache=%d cap=%d: held regions stay registered", cache, cap);
    ok(!bad.hit, "random cache=%d cap=%d: hit exactly when nothing was registered", cache, cap);
    ok(!bad.acct, "random cache=%d cap=%d: tree, lists, accounting and cap consistent", cache,
       cap);
    ok(!bad.errs && st.reg_failures == bad.fails, "random cache=%d cap=%d: failures are -ENOMEM, "
       "or over the cap without a registration", cache, cap);
    ok((cache ? st.hits && st.merges && st.evictions && st.invalidations
        : !st.hits && !st.idle_regions) && (cap ? st.over_cap : bad.fails),
       "random cache=%d cap=%d: every path taken", cache, cap);
    fin(rc, "random");
    ACCT = NULL;
}

static double T_NOW;            /* the fake clock of the pinned average */

static double t_clock(void)
{
    return T_NOW;
}

/* Two caches sharing one pinned account: it sums their registered bytes
 * and keeps the peak while evictions and invalidations lower them; its
 * time average follows a fake clock. */
static void t_pinned(void)
{
    rcache_pinned_t acct = {.max = 0 };
    rcache_config_t cfg = { SIZE_MAX, SIZE_MAX, 1, &acct };
    rcache_t *a = NULL, *b = NULL;
    rcache_region_t *ra, *rb;

    fake_free();
    memset(&F, 0, sizeof(F));
    F.limit = 100 * PG;
    if (rcache_create(&cfg, &ops_plain, &F, &a) || rcache_create(&cfg, &ops_plain, &F, &b))
        diag("rcache_create failed");
    T_NOW = 100;
    rcache_pinned_clock(&acct, t_clock);
    ra = get(a, 0, 4, NULL);    /* 4 pages for 1 s, then 6 for 3 s: 22/4 */
    T_NOW = 101;
    rb = get(b, 10, 2, NULL);
    T_NOW = 104;
    ok(rcache_pinned_avg(&acct) == 5.5 * PG, "pinned: time average 5.5 pages (%g)",
       rcache_pinned_avg(&acct) / PG);
    ok(acct.now == 6 * PG && acct.peak == 6 * PG, "pinned: two caches add up (%zu pages)",
       acct.now / PG);
    rcache_put(a, ra);
    rcache_put(b, rb);
    ok(acct.now == 6 * PG, "pinned: idle cached regions stay pinned");
    rcache_invalidate(a, (uintptr_t) pg(0), 4 * PG);
    ok(acct.now == 2 * PG && acct.peak == 6 * PG,
       "pinned: an invalidation unpins, the peak stays (%zu / %zu pages)", acct.now / PG,
       acct.peak / PG);
    rcache_destroy(a);
    rcache_destroy(b);
    ok(acct.now == 0 && acct.peak == 6 * PG && F.regs == F.deregs,
       "pinned: destroy leaves nothing pinned");
}

/* Two caches on an account capped at max pages (backend limit 100). */
static void cap_mk(rcache_pinned_t * acct, size_t max, rcache_t ** a, rcache_t ** b)
{
    rcache_config_t cfg = { SIZE_MAX, SIZE_MAX, 1, acct };

    fake_free();
    memset(&F, 0, sizeof(F));
    F.limit = 100 * PG;
    *acct = (rcache_pinned_t) {.max = max * PG };
    if (rcache_create(&cfg, &ops_plain, &F, a) || rcache_create(&cfg, &ops_plain, &F, b))
        diag("rcache_create failed");
}

/* The cap: room is made by evicting idle regions of either cache; busy
 * ones leave none and the get is refused before the backend is asked. */
static void t_cap(void)
{
    rcache_pinned_t acct;
    rcache_t *a, *b;
    rcache_region_t *ra, *rb, *r = NULL;
    size_t regs;

    cap_mk(&acct, 8, &a, &b);
    ra = get(a, 0, 4, NULL);
    rb = get(b, 10, 3, NULL);
    regs = F.regs;
    ok(rcache_get(a, pg(20), 2 * PG, &r, NULL) == RDMA_ERR_REFUSED && F.regs == regs
       && stats(a).over_cap == 1 && !stats(a).reg_failures && acct.now == 7 * PG,
       "cap: busy regions leave no room: refused, the backend is not asked");
    rcache_put(b, rb);
    r = get(a, 20, 2, NULL);
    ok(r && stats(b).evictions == 1 && acct.now == 6 * PG && acct.peak <= 8 * PG,
       "cap: another cache's idle region is evicted to make room");
    rcache_put(a, r);
    ok(rcache_get(a, pg(30), 9 * PG, &r, NULL) == RDMA_ERR_REFUSED && stats(a).idle_regions == 1,
       "cap: a request above the cap is refused without evicting anything");
    rcache_put(a, ra);
    rcache_destroy(a);
    rcache_destroy(b);
    ok(acct.now == 0 && !acct.caches && F.regs == F.deregs, "cap: destroy unlinks both caches");

    cap_mk(&acct, 10, &a, &b);
    ra = get(a, 0, 4, NULL);
    r = get(a, 3, 5, NULL);
    ok(is_range(r, 3, 5) && acct.now == 9 * PG && stats(a).merges == 1,
       "cap: the union with a busy region would pass it, the request alone fits");
    rcache_put(a, r);
    rcache_put(a, ra);
    ok(acct.now == 5 * PG && acct.peak == 9 * PG, "cap: the replaced region leaves at its put");
    fin(a, "cap");
    rcache_destroy(b);
}

/* rcache_drop_idle: idle regions in the range go, busy ones and those
 * outside stay; the last put says so. */
static void t_drop_idle(void)
{
    rcache_t *rc = mk(100, SIZE_MAX, SIZE_MAX, 1, &ops_plain);
    rcache_region_t *a = get(rc, 0, 2, NULL), *b = get(rc, 4, 2, NULL), *c = get(rc, 8, 2, NULL);
    rcache_region_t *b2 = get(rc, 4, 1, NULL);

    ok(rcache_put(rc, a) == 1 && rcache_put(rc, b) == 0 && rcache_put(rc, c) == 1,
       "drop_idle: put returns 1 only for the last reference");
    rcache_drop_idle(rc, (uintptr_t) pg(1), 6 * PG);
    ok(stats(rc).regions == 2 && F.deregs == 1 && mr_live(b2) && stats(rc).idle_regions == 1,
       "drop_idle: the idle region in range is deregistered, the busy one stays, the one "
       "beyond too");
    rcache_put(rc, b2);
    fin(rc, "drop_idle");
}

int main(void)
{
    PG = (size_t) sysconf(_SC_PAGESIZE);
    t_args();
    t_hit_miss();
    t_merge();
    t_invalidate();
    t_lru();
    t_drain();
    t_flush();
    t_nocache();
    t_once();
    t_reg_fail();
    t_destroy_busy();
    t_real_memory();
    t_tree();
    t_random(1, 0);
    t_random(0, 0);
    t_random(1, 1);
    t_pinned();
    t_cap();
    t_drop_idle();
    fake_free();
    return done_testing();
}
