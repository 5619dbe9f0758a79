/*
 * rhelper: the registration helper of P4 (Li et al., "Scalable
 * Memory Registration for High Performance Networks Using Helper
 * Threads", CF'11): it predicts when a registered region is used next,
 * drops the registration in between and registers it again just before the
 * predicted use, off the critical path.
 *
 * Plain C, no verbs, no MPICH.  Two threads:
 *   owner   rh_note() after each use of a region of at least RH_MIN_BYTES
 *           (the paper's 16 KB): one push into a single-producer /
 *           single-consumer ring (the paper's DQ); never blocks, drops the
 *           note when the ring is full.
 *   helper  rh_run(), from the channel thread: pops notes, predicts, and
 *           calls the owner's backend (rh_ops_t, on the helper thread) to
 *           drop or register a region.
 *
 * Predictor (paper 3.1): a note's signature hashes its call site, the
 * region and the previous note's call site (context window of 2).  The
 * table keeps, per signature, the time of the last use and the shortest
 * interval seen (the period).  A signature's first use has no period: its
 * region is dropped at once (a first registration is always deregistered).
 * Later uses: the next one is due at last + period; the region is dropped
 * now and queued (the RQ, ordered by time) to be registered at due -
 * 2 t_reg - RH_MARGIN, unless that is less than t_reg from now (then it
 * stays registered).  t_reg(pages) = a + b * pages, fitted by least
 * squares over the registrations the helper timed (the paper's linear
 * model); twice that, because a registration done much earlier only holds
 * memory, and under PINNED_MAX_MB it is evicted again before its use.
 *
 * Memory-ordering rule: the ring's head is written by the owner only
 * (release, after the slot), its tail by the helper only (release, after
 * reading the slot); each reads the other's with acquire.  The counters
 * (st) are written by one side each and read by anyone with relaxed
 * atomics.  Everything else is the helper's own.
 */
#ifndef RHELPER_H_INCLUDED
#define RHELPER_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "rdma_status.h"

enum {
    RH_MIN_BYTES = 16384,       /* P4: larger messages only */
    RH_RING = 256,              /* notes in flight (power of two) */
    RH_TABLE = 1024,            /* signatures kept (power of two) */
    RH_RQ = 256,                /* registrations queued */
    RH_FRAMES = 8,              /* call-site frames hashed */
    RH_SITE_MIN = 262144        /* smaller uses: no stack walk (backtrace()
                                 * costs about 3.5 us here; the context is
                                 * then the region and the previous note) */
};
#define RH_MARGIN 200e-6        /* seconds a registration is done early */

/* The owner's registrations, called on the helper thread.  drop: release
 * the idle registrations of cache within [start, start+len) (busy ones
 * stay).  reg: register [start, start+len) in cache ahead of use and leave
 * it idle; 1 if registered now, 0 if it already was, < 0 if it could not.
 * now: the clock of the notes' times, in seconds. */
typedef struct rh_ops {
    void (*drop)(void *ctx, int cache, uintptr_t start, size_t len);
    int (*reg)(void *ctx, int cache, uintptr_t start, size_t len);
    double (*now)(void);
} rh_ops_t;

typedef struct rh_note {
    double t;                   /* when the region was used */
    uintptr_t start;
    size_t len;
    uint64_t site;              /* rh_site() of the use */
    int cache;
} rh_note_t;

typedef struct rh_entry {
    uint64_t sig;               /* 0: free */
    double last, period;        /* period 0: seen once */
} rh_entry_t;

typedef struct rh_stats {
    uint64_t notes, dropped_notes;      /* pushed; lost to a full ring */
    uint64_t drops, regs, reg_fails;    /* backend calls that did something */
    uint64_t kept;              /* uses too close together to drop between */
} rh_stats_t;

typedef struct rhelper {
    rh_ops_t ops;
    void *ctx;
    /* the ring: head owner's, tail helper's (rule at the top) */
    rh_note_t ring[RH_RING];
    uint64_t head, tail;
    uint64_t prev_site;         /* owner's: the previous note's call site */
    /* the helper's own */
    rh_entry_t table[RH_TABLE];
    rh_note_t rq[RH_RQ];        /* binary heap on t (when to register) */
    int nrq;
    double fit[5];              /* n, sum x, sum y, sum xy, sum xx (x: pages) */
    rh_stats_t st;              /* dropped_notes the owner's, the rest the helper's */
} rhelper_t;

void rh_init(rhelper_t * h, const rh_ops_t * ops, void *ctx);

/* Owner: for a use of len bytes, a hash of the calling thread's RH_FRAMES
 * innermost frames; 0 below RH_SITE_MIN. */
uint64_t rh_site(size_t len);

/* Owner: region [start, start+len) of cache was used from time t (when
 * the use began; seconds, ops.now's clock) until now, from call site site.  1 when the helper had nothing
 * left to read (wake it: it may be asleep), else 0. */
int rh_note(rhelper_t * h, double t, int cache, uintptr_t start, size_t len, uint64_t site);

/* Helper: handle the notes and the registrations due by now; returns when
 * to run again (0: nothing queued). */
double rh_run(rhelper_t * h, double now);

/* Anyone: counters. */
void rh_stats_get(const rhelper_t * h, rh_stats_t * st);

/* The fitted registration time of len bytes, in seconds (0 before any
 * registration was timed). */
double rh_reg_time(const rhelper_t * h, size_t len);

#endif /* RHELPER_H_INCLUDED */
