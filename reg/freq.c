/*
 * freq.c -- frequent-buffer table (see freq.h).
 */
#include <stdlib.h>
#include "freq.h"

rdma_status_t freq_init(freq_t * f, unsigned bits, size_t max_entries)
{
    if (!f || bits < 1 || bits > 24 || !max_entries)
        return RDMA_ERR_INVAL;
    f->bucket = calloc((size_t) 1 << bits, sizeof(*f->bucket));
    if (!f->bucket)
        return RDMA_ERR_NOMEM;
    f->bits = bits;
    f->max_entries = max_entries;
    f->stopped = 0;
    f->st = (freq_stats_t) { 0 };
    return RDMA_OK;
}

void freq_destroy(freq_t * f)
{
    size_t i;
    freq_entry_t *e, *next;

    if (!f || !f->bucket)
        return;
    for (i = 0; i < (size_t) 1 << f->bits; i++)
        for (e = f->bucket[i]; e; e = next) {
            next = e->next;
            free(e);
        }
    free(f->bucket);
    f->bucket = NULL;
}

/* Multiplicative (Fibonacci) hashing: the top bits of addr * 2^64/phi. */
static size_t freq_hash(const freq_t * f, uintptr_t addr)
{
    return (size_t) (((uint64_t) addr * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - f->bits));
}

/* A new entry at the head of bucket b, unless growth has stopped. */
static freq_entry_t *freq_add(freq_t * f, size_t b, uintptr_t addr, size_t len)
{
    freq_entry_t *e;

    if (!f->stopped && f->st.chained
        && f->st.frequent * 100 < f->st.entries * FREQ_PCT_STOP)
        f->stopped = 1;
    if (f->stopped || f->st.entries >= f->max_entries || !(e = calloc(1, sizeof(*e)))) {
        f->st.uncounted++;
        return NULL;
    }
    e->addr = addr;
    e->len = len;
    e->next = f->bucket[b];
    f->st.chained += e->next != NULL;
    f->st.entries++;
    return f->bucket[b] = e;
}

int freq_use(freq_t * f, const void *addr, size_t len, uint32_t uses)
{
    uintptr_t a = (uintptr_t) addr;
    size_t b = freq_hash(f, a);
    freq_entry_t *e;

    f->st.uses++;
    for (e = f->bucket[b]; e && (e->addr != a || e->len != len); e = e->next)
        ;
    if (!e && !(e = freq_add(f, b, a, len)))
        return 0;
    e->count += e->count < UINT32_MAX;
    if (!uses || e->count < uses)
        return 0;
    f->st.frequent += !e->frequent;
    e->frequent = 1;
    return 1;
}

uint32_t freq_uses_auto(const freq_cost_t * c, size_t len)
{
    double gain = c->copy_per_byte * (double) len - c->lookup, n;
    uint32_t k;

    if (len < FREQ_MIN_LEN || gain <= 0 || c->reg < 0)
        return 0;
    n = c->reg / gain * FREQ_PCT_SPECULATE / 100;
    if (n >= UINT32_MAX)
        return UINT32_MAX;
    k = (uint32_t) n;
    k += k < n;                 /* ceil */
    return k < 1 ? 1 : k;
}
