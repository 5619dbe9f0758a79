/*
 * t_bufs: unit tests of the early-message buffer cache (src/core/rdma_bufs)
 * over a fake back-end that counts what it hands out and takes back: class
 * sizes, reuse (LIFO, within a class only), the cap, sizes it does not
 * cache, a failing back-end, and fini giving everything back.
 */
#include <stdlib.h>
#include <string.h>
#include "rdma_bufs.h"
#include "tap.h"

typedef struct fake {
    size_t live, allocs, releases, last_len;
    int fail;
} fake_t;

static void *fake_alloc(void *arg, size_t len)
{
    fake_t *f = arg;

    f->last_len = len;
    if (f->fail)
        return NULL;
    f->live += len;
    f->allocs++;
    return malloc(len);
}

static void fake_release(void *arg, void *p, size_t len)
{
    fake_t *f = arg;

    f->live -= len;
    f->releases++;
    free(p);
}

static rdma_bufs_t b;
static fake_t fk;

static void setup(size_t cap)
{
    const rdma_bufs_backend_t be = { fake_alloc, fake_release, &fk };

    memset(&fk, 0, sizeof(fk));
    rdma_bufs_init(&b, cap, &be);
}

/* What the back-end is asked for: the class size, at most 25% more. */
static void t_classes(void)
{
    static const size_t ask[] = { 8192, 8193, 10240, 10241, 14336, 14337, 65536, 100000,
        (size_t) 1 << 30
    };
    static const size_t got[] = { 8192, 10240, 10240, 12288, 14336, 16384, 65536, 114688,
        (size_t) 1 << 30
    };
    size_t i, bad = 0;

    setup(0);
    for (i = 0; i < sizeof(ask) / sizeof(ask[0]); i++) {
        void *p = i + 1 < sizeof(ask) / sizeof(ask[0]) ? rdma_bufs_get(&b, ask[i]) : NULL;

        if (!p) {               /* 1 GiB: only the size asked is checked */
            fk.fail = 1;
            rdma_bufs_get(&b, ask[i]);
            fk.fail = 0;
        }
        bad += fk.last_len != got[i];
        if (p)
            rdma_bufs_put(&b, p, ask[i]);
    }
    is_size(bad, 0, "each size is allocated at its class's size (2^k, 1.25, 1.5, 1.75 x 2^k)");
    is_size(fk.live, 0, "cap 0: every buffer goes back at once");
    rdma_bufs_fini(&b);
}

/* A burst, freed, then the same burst again: served from the cache, the
 * most recent buffer first; another class is not served from it. */
static void t_reuse(void)
{
    void *p[16], *q[16], *last, *big;
    size_t n = 0, i;

    setup((size_t) 4 << 20);
    for (i = 0; i < 16; i++)
        p[i] = rdma_bufs_get(&b, 65536);
    for (i = 0; i < 16; i++)
        rdma_bufs_put(&b, p[i], 65536);
    is_size(b.kept, (size_t) 16 * 65536, "16 freed 64 KiB buffers kept");
    last = p[15];
    for (i = 0; i < 16; i++) {
        q[i] = rdma_bufs_get(&b, 60000 + i);    /* same class: 57344 < len <= 65536 */
        for (size_t j = 0; j < 16; j++)
            n += q[i] == p[j];
    }
    ok(q[0] == last, "LIFO: the last buffer freed is the first one reused");
    is_size(n, 16, "the second burst reuses all 16");
    is_size(fk.allocs, 16, "and allocates nothing");
    is_size(b.reused, 16, "reused counted");
    big = rdma_bufs_get(&b, 131072);
    ok(big != NULL && fk.allocs == 17, "another class allocates");
    for (i = 0; i < 16; i++)
        rdma_bufs_put(&b, q[i], 60000 + i);
    rdma_bufs_fini(&b);
    is_size(fk.live, 131072, "fini gives every kept buffer back (the one in use stays)");
    fake_release(&fk, big, 131072);
}

/* Beyond the cap buffers go back; small and huge sizes are not cached. */
static void t_cap(void)
{
    void *p[8], *held;
    size_t i;

    setup((size_t) 3 * 65536);
    for (i = 0; i < 8; i++)
        p[i] = rdma_bufs_get(&b, 65536);
    for (i = 0; i < 8; i++)
        rdma_bufs_put(&b, p[i], 65536);
    is_size(b.kept, (size_t) 3 * 65536, "cap 192 KiB: three 64 KiB buffers kept");
    is_size(b.returned, 5, "five given back");
    is_size(fk.live, (size_t) 3 * 65536, "the back-end holds only what is kept");
    p[0] = rdma_bufs_get(&b, 4096);
    rdma_bufs_put(&b, p[0], 4096);
    is_size(fk.releases, 6, "4 KiB (below 8 KiB): straight back to the back-end");
    is_size(b.allocated, 8, "and not counted: the counts are the classes'");
    rdma_bufs_put(&b, NULL, 65536);
    is_size(b.kept, (size_t) 3 * 65536, "freeing NULL is nothing");
    fk.fail = 1;
    ok(rdma_bufs_get(&b, 131072) == NULL, "a back-end without memory: NULL (CH3 says **nomem)");
    held = rdma_bufs_get(&b, 65536);
    ok(held != NULL, "a kept buffer is still served");
    fk.fail = 0;
    rdma_bufs_fini(&b);
    is_size(fk.live, 65536, "fini: all kept buffers back");
    rdma_bufs_put(&b, held, 65536);
    is_size(fk.live, 0, "after fini, a free goes straight back (cap 0)");
}

int main(void)
{
    plan(19);
    t_classes();
    t_reuse();
    t_cap();
    return done_testing();
}
