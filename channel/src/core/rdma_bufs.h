/*
 * rdma_bufs: a bounded cache of freed buffers by size class, for CH3's
 * early messages.  CH3 buffers a message that arrives before its receive
 * in memory it allocates, and frees it once the receive copies it out
 * (channel/patches/ch3-early-bufs.patch routes both here).  Given back to
 * malloc, a burst of them let glibc trim its heap, and the next burst
 * faulted every page in again; kept here, the next burst reuses them and
 * the application's heap is left as it is.
 *
 * Classes: below RDMA_BUFS_MIN and above RDMA_BUFS_MAX bytes, buffers go
 * straight to the back-end.  Between, four classes per power of two (2^k,
 * 1.25, 1.5, 1.75 x 2^k): a buffer is allocated at its class's size, at
 * most 25% more than asked, and a freed one serves any request of its
 * class.  Each class is a LIFO (the most recently used buffer is the one
 * in cache), linked through the buffers' first bytes.  At most cap bytes
 * are kept; a buffer freed beyond that goes back to the back-end.
 *
 * Plain C; the back-end (malloc/free, or a test's fake) is passed in.  Not
 * thread safe: the caller's lock (in the channel: MPICH's global critical
 * section, which CH3 holds wherever it allocates or frees these).
 */
#ifndef RDMA_BUFS_H_INCLUDED
#define RDMA_BUFS_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#define RDMA_BUFS_MIN ((size_t) 8192)
#define RDMA_BUFS_MAX ((size_t) 1 << 30)
#define RDMA_BUFS_NCLASS (4 * 18)       /* 2^13 .. 1.75 x 2^30 */

typedef struct rdma_bufs_backend {
    void *(*alloc) (void *arg, size_t len);
    void (*release) (void *arg, void *p, size_t len);
    void *arg;
} rdma_bufs_backend_t;

typedef struct rdma_bufs {
    rdma_bufs_backend_t be;
    size_t cap;                 /* bytes kept at most; 0: keep none */
    size_t kept;                /* bytes in the lists now */
    void *head[RDMA_BUFS_NCLASS];       /* per class, the last buffer freed */
    uint64_t reused, allocated, returned;       /* buffers of the classes: gets
                                                 * served from a list, from the
                                                 * back-end; puts over cap */
} rdma_bufs_t;

void rdma_bufs_init(rdma_bufs_t * b, size_t cap, const rdma_bufs_backend_t * be);
/* A buffer of at least len bytes (NULL: the back-end has none). */
void *rdma_bufs_get(rdma_bufs_t * b, size_t len);
/* p, got for len bytes, is free: kept, or given back beyond cap. */
void rdma_bufs_put(rdma_bufs_t * b, void *p, size_t len);
/* Give every kept buffer back; later puts go straight to the back-end. */
void rdma_bufs_fini(rdma_bufs_t * b);

#endif /* RDMA_BUFS_H_INCLUDED */
