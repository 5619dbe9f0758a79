/*
 * rdma_config: the channel's settings, validated (from the CVARs, by
 * rdma_cvars.c) before anything is opened.  Plain C.
 */
#ifndef RDMA_CONFIG_H_INCLUDED
#define RDMA_CONFIG_H_INCLUDED

#include "rdma_link.h"
#include "rdma_xport_verbs.h"

enum { RDMA_XP_SHM = 0, RDMA_XP_VERBS = 1, RDMA_XP_N };

typedef enum {
    RDMA_TRANSPORT_AUTO = 0,    /* shm on the node, verbs between nodes */
    RDMA_TRANSPORT_SHM,         /* every peer on this node */
    RDMA_TRANSPORT_VERBS        /* every peer, on-node ones too */
} rdma_transport_choice_t;

typedef struct rdma_chan_config {
    rdma_transport_choice_t transport;
    rdma_link_config_t link[RDMA_XP_N]; /* pipe and rendezvous, per transport */
    rdma_verbs_params_t verbs;  /* the verbs transport's own (timeout: CONNECT_TIMEOUT) */
    int eager_max;              /* EAGER_MAX: 0 CH3's, else bytes (rdma_owner.c) */
    size_t early_bufs;          /* EARLY_BUFS: bytes of early-message buffers
                                 * kept (rdma_bufs.h), 0: none */
    size_t rma_cma_min;         /* shm: direct one-sided operations from this size
                                 * (RMA_CMA_MIN; SIZE_MAX: never) */
    /* progress */
    int poll_spins;             /* -1: auto (rdma_block.c: MPIDI_CH3I_RDMA_spins) */
    double ring_idle;           /* seconds without frames before a grown
                                 * ring is offered back small; 0: never */
    int max_conns;              /* MAX_CONNS: READY connections over the wire
                                 * kept at most (rdma_chan_evict.c); 0: no cap */
    int verbose;
} rdma_chan_config_t;

#endif /* RDMA_CONFIG_H_INCLUDED */
