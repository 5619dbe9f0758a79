/*
 * rdma_xport_verbs.h -- what the verbs transport offers beside the
 * contract (rdma_xport.h): its own settings, which the channel passes as
 * rdma_xport_params_t.own, and the hooks its tests use.  Its internals are
 * rdma_verbs.h's.
 */
#ifndef RDMA_XPORT_VERBS_H_INCLUDED
#define RDMA_XPORT_VERBS_H_INCLUDED

#include "rdma_xport.h"

typedef struct rdma_verbs_params {
    const char *device;         /* NULL or "": first active port */
    int port;                   /* 0: first active */
    int gid_index;              /* -1: auto (RoCE v2 IPv4, else 0) */
    size_t inline_size;         /* requested max inline bytes */
    int force_completion;       /* 1: write-with-imm even if in-order */
    size_t srq_size;            /* receives the shared receive queue starts
                                 * with room for; 0: a receive queue per QP */
    double timeout;             /* seconds before a silent peer is dead;
                                 * <= 0: 30 */
    /* registration cache of zero-copy buffers */
    size_t rcache_max_bytes, rcache_max_entries;
    size_t pinned_max_bytes;    /* cap on all memory pinned (rings, staging,
                                 * user buffers); 0: none */
    int reg_helper;             /* P4's registration helper runs in
                                 * the channel thread (rhelper.h) */
    int eager_reg_uses;         /* P2: register eager buffers after
                                 * this many uses; -1: by measured costs;
                                 * 0: never */
    size_t rma_bcopy_max;       /* one-sided gets, and puts too large to go
                                 * inline, of at most this many bytes are
                                 * copied through registered bounce
                                 * buffers; 0: never */
} rdma_verbs_params_t;

/* Test hook: register [addr, addr+len) as a zero-copy receive
 * destination (exactly as a pull does) and return its rkey, which the
 * protocol never sends, so that a test can show a peer cannot use it. */
rdma_status_t rdma_xport_verbs_dst_key(rdma_xport_t * xp, void *addr, size_t len, uint64_t * key,
                                       void **handle);
void rdma_xport_verbs_dst_put(rdma_xport_t * xp, void *handle);

/* Verbs fork protection as open() decides it: query returns an enum
 * ibv_fork_status (ibv_is_fork_initialized), init is ibv_fork_init; a test
 * passes fakes.  Returns "unneeded", "enabled" or "unprotected". */
const char *rdma_xport_verbs_fork_mode(int (*query)(void), int (*init)(void));

#endif /* RDMA_XPORT_VERBS_H_INCLUDED */
