/*
 * rdma_shm.h: the shared-memory transport's internals, shared by its
 * files: rdma_xport_shm.c (the region, peers of the job, the ops table),
 * rdma_shm_dyn.c (peers outside the job: dynamic processes),
 * rdma_shm_grow.c (growing rings), rdma_shm_probe.c (zero-copy or not)
 * and rdma_shm_seg.c (node segments).
 *
 * Each process owns one region, a memfd mapped shared:
 *
 *   header page | mailbox page | ctl[size] (64 B each, page rounded) | ring[size]
 *
 * The header and the mailbox are what a process outside the job maps
 * (SHM_HDR_BYTES): doorbell, futex and connection requests
 * (rdma_shm_dyn.c).  ctl and ring serve the job's own peers.
 */
#ifndef RDMA_SHM_H_INCLUDED
#define RDMA_SHM_H_INCLUDED

#include <limits.h>
#include <poll.h>
#include <sys/types.h>
#include "rdma_xport.h"

#define SHM_MAGIC 0x6d68732d616d6472ULL /* "rdma-shm" */
#define SHM_PAGE 4096
#define SHM_HDR_BYTES (2 * SHM_PAGE)    /* header page, mailbox page */
#define SHM_JOB_LEN 64
#define SHM_HELLO_LEN 232

typedef struct shm_hdr {
    uint64_t magic, version;    /* SHM_MAGIC, RDMA_WIRE_VERSION: never move */
    uint64_t ring_size, nslots, rank;
    /* the pipe's settings (prm): a peer of other chunk_size or mode is
     * refused; both ends use the smaller max_frame (rdma_shm_bind) */
    uint64_t chunk_size, max_frame, head_writes;
    uint64_t doorbell;          /* bumped by every peer that attaches or
                                 * posts or answers a request (release) */
    char job[SHM_JOB_LEN];
    /* eventcount for blocking waits (rdma_shm_wait): the owner sets
     * sleeping before its last poll; a peer that wrote to it and then sees
     * sleeping bumps wake_seq and wakes the futex */
    uint32_t wake_seq __attribute__((aligned(64)));
    uint32_t sleeping;
} shm_hdr_t;

/* One connection request of a process outside the job (mailbox page).
 * state: FREE -> BUSY (a connector's CAS, acquire) -> POSTED (the
 * connector's release store after the fields) -> FREE (the owner's
 * release store once it copied them). */
enum { SHM_REQ_FREE = 0, SHM_REQ_BUSY, SHM_REQ_POSTED };
typedef struct shm_req {
    uint32_t state;
    int32_t pid, region_fd, link_fd;    /* the connector, its region, the link */
    uint64_t nonce;             /* the link's (shm_link_t.nonce) */
    char who[SHM_HELLO_LEN];    /* the connector's hello (rdma_conn_t) */
} shm_req_t;
#define SHM_NREQ (SHM_PAGE / sizeof(shm_req_t))

typedef struct shm_ctl {
    uint64_t head, tail, attached;
} __attribute__((aligned(64))) shm_ctl_t;

/* A connection's own memfd to a process outside the job, made by the
 * connector (rdma_shm_dyn.c): this page, then ring[0] (connector ->
 * acceptor) and ring[1].  magic, version and state never move, so an
 * acceptor of any version can refuse a link of another. */
#define SHM_LINK_MAGIC 0x6b6e696c2d616d72ULL    /* "rma-link" */
/* CROSSED: refused because the acceptor connects to the connector itself
 * and its link wins; the connector waits for that request instead. */
enum { SHM_LINK_POSTED = 0, SHM_LINK_ACCEPTED, SHM_LINK_REFUSED, SHM_LINK_CROSSED };
typedef struct shm_link {
    uint64_t magic, version;
    uint64_t state;             /* stored by the acceptor (release), read by
                                 * the connector (acquire) */
    uint64_t nonce, ring_size;
    shm_ctl_t ctl[2];           /* ctl[d]: the pipe from side d (0 connector,
                                 * 1 acceptor); head by d, tail by !d */
} shm_link_t;

/* A ring that is not a connection's first (rdma_shm_grow.c): its own
 * memfd (fd: ours, for our receive rings; -1 for a peer's we map; map
 * NULL: none). */
typedef struct shm_ring {
    uint8_t *map;
    size_t len;
    int fd;
} shm_ring_t;

typedef struct shm_peer {
    rdma_xport_t *xp;
    rdma_conn_t *conn;          /* READY connection, or NULL */
    int used;                   /* job peer: was connected once: never again */
    uint8_t *map;               /* the peer's region (dynamic: its header) */
    size_t maplen;
    pid_t pid;                  /* the peer's process, for CMA */
    shm_ctl_t *rx_ctl;          /* where I store credits for what I receive */
    shm_ctl_t *tx_ctl;          /* where I store my head */
    /* dynamic peers only (rdma_shm_dyn.c) */
    struct shm_peer *next;      /* xp->dyn */
    uint8_t *link;              /* the connection's own memfd (shm_link_t) */
    size_t linklen;
    int link_fd;                /* connector: open until the peer answered */
    int dir;                    /* 0: I connected, 1: I accepted */
    int posted;                 /* connector: request in the peer's mailbox */
    double t_deadline;          /* connector: no answer by then fails it */
    /* growing rings (rdma_shm_grow.c): our receive ring and the peer's we
     * write, where not the first; the ones offered or mapped, not yet in use */
    shm_ring_t rx, rx_next, tx, tx_next;
} shm_peer_t;

/* A READY peer's process, watched (rdma_shm_live.c). */
typedef struct shm_watch {
    shm_peer_t *pe;             /* xp->peer[rank] or a dynamic peer (xp->dyn) */
    int pidfd;                  /* readable once the process has exited */
    int gone;                   /* found exited by the last look */
} shm_watch_t;

struct rdma_xport {
    rdma_xport_params_t prm;
    int fd;                     /* my memfd, open until finalize */
    uint8_t *map;
    size_t maplen;
    uint64_t doorbell;          /* last value seen */
    uint32_t wake_key;          /* wake_seq when the wait was armed */
    shm_peer_t *peer;           /* [size] */
    shm_peer_t *dyn;            /* dynamic peers, connecting or connected */
    int dyn_retry;              /* our requests waiting for an answer (or a
                                 * free mailbox entry), and requests to us the
                                 * owner will answer later: progress() looks
                                 * again */
    uint64_t nonces;            /* links made */
    int dyn_failed;             /* connections accepted that could not be
                                 * bound: progress() reports RDMA_ERR_PEER */
    /* mailbox entries the owner answers later: entry i's link stays mapped
     * (pe) until answered, refused once t_expire passed */
    struct shm_later {
        uint64_t nonce;
        double t_expire;
        shm_peer_t *pe;
    } later[SHM_NREQ];
    int yama_scope;             /* kernel.yama.ptrace_scope at open, -1: no Yama */
    int ptracer_any;            /* PR_SET_PTRACER_ANY set by us (rdma_shm_expose) */
    shm_watch_t *watch;         /* [nwatch]: peers whose exit we watch */
    struct pollfd *watch_pfd;   /* [nwatch], filled at each look */
    int nwatch, watch_cap;
    double watch_next;          /* time of the next look */
    char host[HOST_NAME_MAX + 1];       /* ours, for diagnoses */
    char err[RDMA_MSG_LEN];
};

#define SHM_FAIL(xp, code, ...) rdma_say((xp)->err, sizeof((xp)->err), code, __VA_ARGS__)

static inline shm_req_t *rdma_shm_mailbox(uint8_t * map)
{
    return (shm_req_t *) (map + SHM_PAGE);
}

/* Wake pe's owner if it sleeps (after a store it may wait for). */
int rdma_shm_wake(shm_peer_t * pe);

/* rdma_shm_seg.c: node segments (MPI-3 shared windows) */
extern const rdma_xport_seg_ops_t rdma_shm_seg_ops;

/* A new memfd of len bytes (named name), mapped shared; on failure
 * nothing is left and err says why. */
rdma_status_t rdma_shm_memfd_make(const char *name, size_t len, int *fd, uint8_t ** map,
                                  char *err, size_t errlen);

/* Liveness of peers (rdma_shm_live.c): watch pe's process (pe->pid),
 * stop watching it, look (due at xp->watch_next; fails the READY peers
 * found gone by the look before), release all. */
void rdma_shm_watch(rdma_xport_t * xp, shm_peer_t * pe);
void rdma_shm_unwatch_peer(rdma_xport_t * xp, const shm_peer_t * pe);
rdma_status_t rdma_shm_look(rdma_xport_t * xp, double now);
void rdma_shm_watch_free(rdma_xport_t * xp);

/* Map len bytes of memfd fd of process pid (/proc/<pid>/fd/<fd>), whose
 * size must be exactly size (0: at least len); what names it in errors. */
rdma_status_t rdma_shm_map_fd(rdma_xport_t * xp, int pid, int fd, size_t len, size_t size,
                              const char *what, uint8_t ** map);

/* Which pipe setting in peer header h differs from ours (the CVARs'
 * names), or NULL. */
const char *rdma_shm_pipe_bad(const rdma_xport_t * xp, const shm_hdr_t * h);

/* Hand pe's pipe memory to the owner for c (ev.bind), both kinds of peers,
 * with the peer's max_frame from its header (pe->map). */
rdma_status_t rdma_shm_bind(rdma_xport_t * xp, rdma_conn_t * c, shm_peer_t * pe,
                            const rdma_conn_mem_t * mem);
/* c, bound to pe, is READY (ev.ready), and pe's process watched from now
 * on; both kinds of peers. */
void rdma_shm_ready(rdma_xport_t * xp, rdma_conn_t * c, shm_peer_t * pe);

/* Growing rings (rdma_shm_grow.c): the pipe's ring_new..ring_move, and
 * what frees a peer's rings at its close. */
void rdma_shm_grow_free(shm_peer_t * pe);
rdma_status_t rdma_shm_ring_new(void *ctx, size_t size, void *desc, size_t *dlen,
                                volatile void **ring);
void rdma_shm_ring_drop(void *ctx, volatile void *old);
rdma_status_t rdma_shm_stage_new(void *ctx, size_t size, const void *desc, size_t dlen,
                                 void **stage);
void rdma_shm_ring_move(void *ctx, size_t size, const void *desc, size_t dlen);

/* Dynamic peers (rdma_shm_dyn.c): c->peer >= the job size. */
rdma_status_t rdma_shm_dyn_connect(rdma_xport_t * xp, rdma_conn_t * c);
rdma_status_t rdma_shm_dyn_progress(rdma_xport_t * xp);
rdma_status_t rdma_shm_dyn_close(rdma_xport_t * xp, rdma_conn_t * c);
void rdma_shm_dyn_finalize(rdma_xport_t * xp);

/* rdma_shm_probe.c: rdma_xport_ops.zcopy_slow */
int rdma_shm_zcopy_slow(rdma_xport_t * xp, char *why, size_t len);

#endif /* RDMA_SHM_H_INCLUDED */
