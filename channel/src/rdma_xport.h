/*
 * rdma_xport: what a transport (shm, verbs) provides under the channel.
 *
 * Plain C, no MPICH: the CH3 glue (ch3_*.c) and the standalone tests both
 * drive transports through this table.  A transport owns the memory behind
 * each connection's rb_pipe (ring, stage, head/tail words) and makes stage
 * writes visible at the peer; everything else (framing, credits, flow
 * control) is the pipe's.
 *
 * Lifecycle:
 *   open()      once per process; returns this process's business-card
 *               fragment (one token without spaces), published by the owner
 *               (PMI KVS via CH3's business card) before anyone connects.
 *   connect()   starts connecting c->peer (asynchronous); progress() later
 *               moves c to RDMA_CONN_READY and calls prm->conn_ready().
 *               A peer may also connect to us: progress() then asks the
 *               owner for the object with prm->conn_of() and readies it.
 *               Whoever connects first wins; both sides end up READY once.
 *   progress()  polls completions and connection requests; never blocks.
 *   close()     releases one connection (after the CH3 close protocol).
 *   finalize()  releases everything; the xport pointer is dead after it.
 *
 * Errors: every call returns RDMA_XPORT_OK or a negative status and leaves a
 * one-line diagnosis (naming the peer, the device, the limit...) readable with
 * rdma_xport_ops_t.error(); open() writes its diagnosis into err.
 *
 * Threading: the owner serialises all calls on one xport.
 */
#ifndef RDMA_XPORT_H_INCLUDED
#define RDMA_XPORT_H_INCLUDED

#include <stddef.h>
#include "rb_pipe.h"
#include "zc.h"

enum {
    RDMA_XPORT_OK = 0,
    RDMA_XPORT_ERR = -1,        /* see error() */
    RDMA_XPORT_ENODEV = -2,     /* no usable device (verbs) */
    RDMA_XPORT_ENOMEM = -3,     /* memory, memlock or device limits */
    RDMA_XPORT_EPEER = -4       /* peer unreachable or dead */
};

typedef enum {
    RDMA_CONN_IDLE = 0,
    RDMA_CONN_CONNECTING,
    RDMA_CONN_READY,
    RDMA_CONN_CLOSED,
    RDMA_CONN_FAILED
} rdma_conn_state_t;

typedef struct rdma_xport rdma_xport_t;
typedef struct rdma_xport_ops rdma_xport_ops_t;

typedef struct rdma_conn {
    rb_pipe_t pipe;             /* valid once READY */
    zc_conn_t zc;               /* rendezvous over pipe, set up by the owner
                                 * in conn_ready (ops->zc, ctx = this conn) */
    int peer;                   /* rank of the peer in the job */
    rdma_conn_state_t state;
    const rdma_xport_ops_t *ops;        /* transport serving this peer */
    rdma_xport_t *xport;
    void *priv;                 /* transport's per-connection state */
    void *owner;                /* owner's back pointer (the CH3 VC) */
} rdma_conn_t;

typedef struct rdma_xport_params {
    int rank, size;
    const char *job;            /* unique job id; names shared objects */
    rb_config_t ring;           /* pipe geometry of shm connections */
    rb_config_t ring_rdma;      /* of verbs connections: the same ring, maybe
                                 * another pipeline (superpipeline groups) */
    /* owner callbacks */
    rdma_conn_t *(*conn_of) (void *arg, int rank);      /* NULL: refuse */
    int (*card_of) (void *arg, int rank, char *buf, size_t len); /* 0 = ok */
    void (*conn_ready) (void *arg, rdma_conn_t * c);
    void *arg;
    /* verbs only */
    const char *device;         /* NULL or "": first active port */
    int port;                   /* 0: first active */
    int gid_index;              /* -1: auto (RoCE v2 IPv4, else 0) */
    size_t inline_size;         /* requested max inline bytes */
    int force_completion;       /* 1: write-with-imm even if in-order */
    double timeout;             /* seconds before a silent peer is dead */
    /* verbs only: registration cache of zero-copy buffers */
    size_t rcache_max_bytes, rcache_max_entries;
} rdma_xport_params_t;

struct rdma_xport_ops {
    const char *name;
    int (*open) (const rdma_xport_params_t * prm, rdma_xport_t ** xp,
                 char *card, size_t cardlen, char *err, size_t errlen);
    int (*connect) (rdma_xport_t * xp, rdma_conn_t * c);
    int (*progress) (rdma_xport_t * xp);
    int (*close) (rdma_xport_t * xp, rdma_conn_t * c);
    int (*finalize) (rdma_xport_t * xp);
    const char *(*error) (const rdma_xport_t * xp);
    /* One line about a connection (transport, arrival mode, limits). */
    int (*describe) (const rdma_conn_t * c, char *buf, size_t len);
    /* Blocking wait (optional; NULL: the owner sleeps for a while).  The
     * owner calls wait_arm(), polls everything once more, then wait_disarm()
     * if something moved, else wait(), which returns once a peer wrote to
     * this process after wait_arm() (no lost wakeups) or after timeout_us.
     * wait_arm() returns 0 when some arrivals cannot wake wait() (the owner
     * then sleeps in short steps instead), else 1. */
    int (*wait_arm) (rdma_xport_t * xp);
    void (*wait) (rdma_xport_t * xp, long timeout_us);
    void (*wait_disarm) (rdma_xport_t * xp);
    /* Zero-copy rendezvous (zc.h), ctx = the rdma_conn_t; NULL: none.
     * shm pulls with process_vm_readv, verbs with RDMA read. */
    const zc_ops_t *zc;
    /* One line of statistics about the transport (e.g. its registration
     * cache), or NULL. */
    int (*stats) (const rdma_xport_t * xp, char *buf, size_t len);
};

extern const rdma_xport_ops_t rdma_xport_shm;
extern const rdma_xport_ops_t rdma_xport_verbs;

/* Verbs test hook: register [addr, addr+len) as a zero-copy receive
 * destination (exactly as a pull does) and return its rkey, which the
 * protocol never sends, so that a test can show a peer cannot use it. */
int rdma_xport_verbs_dst_key(rdma_xport_t * xp, void *addr, size_t len, uint64_t * key,
                             void **handle);
void rdma_xport_verbs_dst_put(rdma_xport_t * xp, void *handle);

/* Verbs fork protection as open() decides it: query returns an enum
 * ibv_fork_status (ibv_is_fork_initialized), init is ibv_fork_init; a test
 * passes fakes.  Returns "unneeded", "enabled" or "unprotected". */
const char *rdma_xport_verbs_fork_mode(int (*query)(void), int (*init)(void));

#endif /* RDMA_XPORT_H_INCLUDED */
