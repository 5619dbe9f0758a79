/*
 * rcache: a registration cache for zero-copy transfers.
 *
 * Transport independent: the cache never touches verbs.  It calls the
 * backend through rcache_ops_t to register and deregister page-aligned
 * ranges and keeps the registrations for reuse.
 *
 * Every region is in one of three states:
 *
 *   live busy   in the tree, refcount > 0
 *   live idle   in the tree and in the LRU list, refcount == 0
 *   dead busy   out of the tree, in the dead list, refcount > 0; it was
 *               invalidated or replaced while in use and is deregistered at
 *               its last rcache_put
 *
 * A dead region whose refcount reaches 0 is deregistered at once, so there
 * is no dead idle state.  With cfg.cache == 0 every region is born dead, and
 * so is one whose registration the backend marked RCACHE_REG_ONCE.
 *
 * Tree: an intrusive AVL tree of the live regions keyed by start.  Live
 * regions never overlap, so ends are sorted too and the leftmost region
 * overlapping a range is found in O(log n) without allocation.  A request
 * that only partly overlaps live regions gets one new region covering the
 * union of the request and all of them; the old ones leave the tree.  If
 * that fails, every idle region is evicted and the request's pages alone
 * are registered once more.  A backend failure with -ENOMEM or -EAGAIN
 * (limits) is retried the same way.  The cache never aborts: a failed
 * rcache_get returns RDMA_ERR_REG and rcache_reg_errno() tells why.
 *
 * LRU: after every rcache_put that leaves a live region idle, idle regions
 * are deregistered from the cold end while more than cfg.max_bytes idle
 * bytes or cfg.max_entries idle regions are kept.
 *
 * Cap (P4's bounded pinned memory): caches may share an account
 * (rcache_pinned_t) with a cap on the bytes they keep registered together.
 * A registration that would pass it first evicts idle regions, the
 * requesting cache's cold end first, then the other caches' on the
 * account; if busy regions alone leave no room, rcache_get returns
 * RDMA_ERR_REFUSED (nothing registered, no errno: the caller copies).  The
 * check comes before ops->reg, so the cap holds at all times.
 *
 * Invalidation: rcache_invalidate removes every live region that overlaps
 * the range from the tree at once, so no registration that covers a byte of
 * released memory is ever returned again.  Memory events are reported by
 * the caller, typically from ops->drain, which rcache_get calls first.
 *
 * Not thread safe: the caller serialises all calls on one cache.
 * rcache_invalidate and rcache_flush may be called re-entrantly from
 * ops->drain only, never from ops->reg or ops->dereg.
 */
#ifndef RCACHE_H_INCLUDED
#define RCACHE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "rdma_status.h"

typedef struct rcache rcache_t;

typedef struct rcache_region {
    /* read-only for users */
    uintptr_t start, end;       /* page-aligned registered range [start,end) */
    void *mr;                   /* backend handle */
    uint64_t key;               /* backend key (e.g. rkey/lkey packed) */
    double t_use;               /* the caller's (rcache never reads it): e.g.
                                 * when its current use began */
    /* private */
    struct rcache_region *child[2];     /* tree links, live only */
    struct rcache_region *prev, *next;  /* LRU (live idle) or dead list */
    unsigned refcount;
    int height;                 /* AVL subtree height, live only */
    int dead;                   /* out of the tree, deregistered at last put */
} rcache_region_t;

/* Users of r now (gets not yet put): 1 right after a get starts a use. */
static inline unsigned rcache_region_users(const rcache_region_t * r)
{
    return r->refcount;
}

/* rcache_ops_t.reg: registered, but the memory cannot be watched for
 * release (e.g. a file-backed mapping): use it once, never cache it. */
#define RCACHE_REG_ONCE 1

typedef struct rcache_ops {
    /* Register [addr,addr+len) (page aligned); 0, RCACHE_REG_ONCE or a
     * negative errno (-ENOMEM for memlock or NIC limits). */
    rdma_status_t (*reg)(void *ctx, void *addr, size_t len, void **mr, uint64_t * key);
    void (*dereg)(void *ctx, void *mr);
    /* Optional (may be NULL): called at the start of every rcache_get;
     * reports memory released to the OS since the last call by calling
     * rcache_invalidate()/rcache_flush() on rc. */
    void (*drain)(void *ctx, rcache_t * rc);
} rcache_ops_t;

/* Registered bytes of the caches that share this account (e.g. one
 * transport's send and receive caches): now, and the peak since zeroed;
 * max caps now (0: no cap).  Guarded like those caches (their caller
 * serialises them all); zero it, set max, then create the caches. */
typedef struct rcache_pinned {
    size_t now, peak;
    size_t max;
    /* Time average of now (rcache_pinned_avg): clock set by the owner
     * (NULL: none), area = integral of now dt since t0. */
    double (*clock)(void);
    double t0, t_last, area;
    rcache_t *caches;           /* private: the caches on the account */
} rcache_pinned_t;

/* Start the account's time average now (clock: seconds). */
void rcache_pinned_clock(rcache_pinned_t * p, double (*clock)(void));

/* Bytes pinned on average since rcache_pinned_clock (0 without a clock). */
double rcache_pinned_avg(const rcache_pinned_t * p);

typedef struct rcache_config {
    size_t max_bytes;           /* idle registered bytes kept (SIZE_MAX: no
                                 * limit); beyond: evict LRU */
    size_t max_entries;         /* idle regions kept; beyond: evict LRU */
    int cache;                  /* 0: no caching: every get registers, the
                                 * last put deregisters (for when no
                                 * invalidation mechanism exists) */
    rcache_pinned_t *pinned;    /* NULL, or the account this cache's
                                 * registrations and deregistrations add to */
} rcache_config_t;

typedef struct rcache_stats {
    uint64_t hits, misses;
    uint64_t evictions;         /* idle regions dropped by the LRU */
    uint64_t invalidations;     /* live regions removed by invalidate/flush */
    uint64_t merges;            /* live regions replaced by a new region */
    uint64_t reg_failures;      /* rcache_get calls that returned ERR_REG */
    uint64_t over_cap;          /* rcache_get calls refused by the cap */
    uint64_t uncached;          /* registrations the backend said not to cache */
    size_t regions, bytes;      /* registered now: live and dead */
    size_t idle_regions, idle_bytes;    /* in the LRU */
} rcache_stats_t;

rdma_status_t rcache_create(const rcache_config_t * cfg, const rcache_ops_t * ops, void *ctx,
                            rcache_t ** out);

/* Deregister everything (busy regions too: the caller's bug, but no leak). */
void rcache_destroy(rcache_t * rc);

/* A region covering [addr, addr+len) (len > 0), reference taken.  *hit
 * (hit may be NULL) = 1 when served from the cache.  RDMA_ERR_REG: the
 * backend refused (rcache_reg_errno); RDMA_ERR_REFUSED: over the cap. */
rdma_status_t rcache_get(rcache_t * rc, const void *addr, size_t len, rcache_region_t ** out,
                         int *hit);

/* Drop a reference; an idle live region joins the LRU, an idle dead one is
 * deregistered.  A put on an idle region is ignored.  1 when this put
 * dropped the last reference (r may be gone). */
int rcache_put(rcache_t * rc, rcache_region_t * r);

/* Deregister the idle live regions overlapping [start, start+len) (a
 * registration helper's "not needed until later"); busy ones stay. */
void rcache_drop_idle(rcache_t * rc, uintptr_t start, size_t len);

/* Memory [start, start+len) was unmapped or released: every overlapping
 * region leaves the tree at once (never served again); idle ones are
 * deregistered now, busy ones at their last put.  Never calls ops->reg. */
void rcache_invalidate(rcache_t * rc, uintptr_t start, size_t len);

/* Invalidate everything. */
void rcache_flush(rcache_t * rc);

/* Positive errno of the last failed backend registration, 0 if none. */
int rcache_reg_errno(const rcache_t * rc);

void rcache_stats_get(const rcache_t * rc, rcache_stats_t * st);

/* Check the invariants (tree order, balance and non-overlap, lists,
 * accounting); RDMA_OK or RDMA_ERR_INVAL.  O(n): tests and debugging. */
rdma_status_t rcache_check(const rcache_t * rc);

#endif /* RCACHE_H_INCLUDED */
