/*
 * freq: which small send buffers are used often enough to register (P2
 * sec. 2.4-2.8): a use count per buffer (address, length) in a
 * hash table -- a multiplicative hash of the address into 2^bits buckets
 * (the paper's 20-bit index), entries chained per bucket -- and the
 * paper's break-even rule.  Registering a buffer that is used n times
 * costs Rm once and saves the send copy Cm minus the lookups V each time,
 * so it pays from n_min = Rm / (Cm - V) uses (eq. 3); the paper registers
 * speculatively at 25% of n_min (sec. 2.6).  Below 128 B nothing is
 * counted (sec. 2.7: no gain).
 *
 * Growth stop (sec. 2.8): a buffer not yet in the table is no longer
 * counted once fewer than 20% of the entries are frequent and a bucket has
 * chained; counting goes on for the buffers already in it.  max_entries
 * bounds the table's memory in any case.
 *
 * Addresses are only counted: a freed and reused address keeps its count,
 * which just registers it earlier; whether a registration is still valid
 * is the registration cache's business (rcache, memev).
 *
 * Plain C, one owner, no locks.
 */
#ifndef FREQ_H_INCLUDED
#define FREQ_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "rdma_status.h"

enum { FREQ_MIN_LEN = 128, FREQ_PCT_SPECULATE = 25, FREQ_PCT_STOP = 20 };

typedef struct freq_entry {
    uintptr_t addr;
    size_t len;
    uint32_t count;
    int frequent;
    struct freq_entry *next;
} freq_entry_t;

typedef struct freq_stats {
    uint64_t uses;              /* freq_use calls */
    uint64_t entries, frequent; /* buffers counted, and of those frequent */
    uint64_t chained;           /* entries added to a non-empty bucket */
    uint64_t uncounted;         /* uses of new buffers after growth stopped */
} freq_stats_t;

typedef struct freq {
    freq_entry_t **bucket;
    unsigned bits;
    size_t max_entries;
    int stopped;
    freq_stats_t st;
} freq_t;

/* The costs of eq. 3, in seconds: Rm (one registration and
 * deregistration of a small buffer), Cm per byte (the copy), V (one
 * table lookup and one registration-cache hit). */
typedef struct freq_cost {
    double reg, copy_per_byte, lookup;
} freq_cost_t;

rdma_status_t freq_init(freq_t * f, unsigned bits, size_t max_entries);
void freq_destroy(freq_t * f);

/* Count a use of the len bytes at addr; 1 if it has now been used `uses`
 * times or more (register it), else 0.  uses 0: count only. */
int freq_use(freq_t * f, const void *addr, size_t len, uint32_t uses);

/* The paper's speculative threshold for len bytes: ceil(25% of n_min),
 * at least 1; 0 (never) where Cm <= V or len < FREQ_MIN_LEN. */
uint32_t freq_uses_auto(const freq_cost_t * c, size_t len);

#endif /* FREQ_H_INCLUDED */
