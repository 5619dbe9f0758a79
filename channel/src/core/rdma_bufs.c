/*
 * rdma_bufs.c -- the early-message buffer cache (rdma_bufs.h).
 */
#include "rdma_bufs.h"
#include <string.h>

/* The class of len (RDMA_BUFS_MIN <= len <= RDMA_BUFS_MAX) and its size. */
static int bufs_class(size_t len, size_t *size)
{
    int k = 63 - __builtin_clzll((unsigned long long) len);     /* 2^k <= len */
    size_t base = (size_t) 1 << k, step = base >> 2, q = (len - base + step - 1) / step;

    *size = base + q * step;    /* q == 4: the next power of two */
    return (k - 13) * 4 + (int) q;
}

static int bufs_cached(size_t len)
{
    return len >= RDMA_BUFS_MIN && len <= RDMA_BUFS_MAX;
}

void rdma_bufs_init(rdma_bufs_t * b, size_t cap, const rdma_bufs_backend_t * be)
{
    memset(b, 0, sizeof(*b));
    b->be = *be;
    b->cap = cap;
}

void *rdma_bufs_get(rdma_bufs_t * b, size_t len)
{
    size_t size = len;
    int c = bufs_cached(len) ? bufs_class(len, &size) : -1;
    void *p = c >= 0 ? b->head[c] : NULL;

    if (p) {
        memcpy(&b->head[c], p, sizeof(void *));
        b->kept -= size;
        b->reused++;
        return p;
    }
    p = b->be.alloc(b->be.arg, size);
    b->allocated += p != NULL && c >= 0;
    return p;
}

void rdma_bufs_put(rdma_bufs_t * b, void *p, size_t len)
{
    size_t size = len;
    int c = bufs_cached(len) ? bufs_class(len, &size) : -1;

    if (p == NULL)
        return;
    if (c < 0 || b->kept + size > b->cap) {
        b->returned += c >= 0;
        b->be.release(b->be.arg, p, size);
        return;
    }
    memcpy(p, &b->head[c], sizeof(void *));
    b->head[c] = p;
    b->kept += size;
}

void rdma_bufs_fini(rdma_bufs_t * b)
{
    int c;

    for (c = 0; c < RDMA_BUFS_NCLASS; c++)
        while (b->head[c]) {
            void *p = b->head[c];
            size_t size;

            memcpy(&b->head[c], p, sizeof(void *));
            /* the class's size, from its index: base 2^(13 + c/4), quarter c%4 */
            size = ((size_t) 1 << (13 + c / 4)) + (size_t) (c % 4) * ((size_t) 1 << (11 + c / 4));
            b->be.release(b->be.arg, p, size);
        }
    b->kept = 0;
    b->cap = 0;                 /* a buffer freed later goes straight back */
}
