/*
 * rdma_link: one peer as the channel sees it -- the transport's connection
 * (rdma_conn_t), the pipe over the memory the transport bound (ringbuf/)
 * and the zero-copy rendezvous over that pipe (zcopy/).  Plain C, no MPICH:
 * the channel (rdma_channel.c) and the transport tests use it alike.
 *
 * Calls go down only: channel -> rdma_link_* -> zc_* / rb_pipe_* -> the
 * transport's pipe_ops / zc ops.  What the transport has to say comes back
 * through the events the owner registered (rdma_xport_events_t): bind,
 * landed and pulled end here, in rdma_link_bind/landed/pulled.
 *
 * Threading: none of its own; the owner serialises all calls on a link
 * with the transport's progress() (today: MPICH's global critical section).
 */
#ifndef RDMA_LINK_H_INCLUDED
#define RDMA_LINK_H_INCLUDED

#include <stddef.h>
#include "rdma_xport.h"

/* The protocol settings of the links one transport serves. */
typedef struct rdma_link_config {
    rb_config_t ring;           /* completion_driven: set per link at bind */
    zc_config_t zc;
} rdma_link_config_t;

/* The pipe comes first: its hot fields then keep the cache-line placement
 * they had in the VC before links existed.  With the 48-byte rdma_conn_t
 * in front, 8-byte shm latency measured 1.32x (0.43 -> 0.57 us, median of
 * 15 alternating pairs); pipe first, 1.02x. */
typedef struct rdma_link {
    rb_pipe_t pipe;             /* valid from bind */
    zc_conn_t zc;               /* valid from bind */
    rdma_conn_t xc;             /* what the transport sees (rdma_link_of) */
    uint64_t idle_mark;         /* frames both ways at the last idle check
                                 * (rdma_link_idle) */
    int fail_reads;             /* the owner's, set before first use, then
                                 * read-only: once FAILED, reads end in
                                 * RDMA_ERR_PEER after what the peer wrote
                                 * (rdma_chan_getv); else nothing more */
    int rndv_copies;            /* the owner's: rendezvous copies in flight
                                 * (rdma_chan_rndv_copy); the link is busy */
    int slot;                   /* the cap's slot: 0 none, 1 held, 2 its
                                 * connect waits for one, 3 it connects to a
                                 * lower rank without one (rdma_chan_evict.c:
                                 * __atomic CAS; taken by the owner or the
                                 * channel thread, given back by the owner) */
} rdma_link_t;

static inline rdma_link_t *rdma_link_of(rdma_conn_t * c)
{
    return (rdma_link_t *) ((char *) c - offsetof(rdma_link_t, xc));
}

/* Called every idle period (the owner's clock): a link whose pipe carried
 * no frame since the last call offers its peer its ring's first size
 * again if it grew (rb_pipe_shrink). */
rdma_status_t rdma_link_idle(rdma_link_t * l);

/* cfg as rdma_link_bind will check it (rb_config_check); *what names
 * the rule it breaks. */
rdma_status_t rdma_link_config_check(const rdma_link_config_t * cfg, const char **what);

/* LARGE_PROTOCOL=auto: the links of a transport whose zero-copy path is
 * slow on this host (rdma_xport_ops.zcopy_slow) copy through the ring.
 * 1: it was asked (why says what it measured), 0: not auto or no probe. */
int rdma_link_config_fit(rdma_link_config_t * cfg, const rdma_xport_ops_t * ops,
                         rdma_xport_t * xp, char *why, size_t len);

/* Events (rdma_xport_events_t): bind the pipe and rendezvous of c to mem;
 * a completion-driven write of `frames` frames landed; pulls finished; an
 * eager write from user memory completed. */
rdma_status_t rdma_link_bind(rdma_conn_t * c, const rdma_link_config_t * cfg,
                             const rdma_conn_mem_t * mem);
void rdma_link_landed(rdma_conn_t * c, unsigned frames);
void rdma_link_pulled(rdma_conn_t * c, size_t bytes);
void rdma_link_sent(rdma_conn_t * c);

/* Put/get up to the iov total (zc.h: large entries by rendezvous, small
 * puts by zc_put_small); RDMA_OK or an rdma_status_t.  The link must be
 * READY. */
static inline rdma_status_t rdma_link_putv(rdma_link_t * l, const struct iovec *iov, int n,
                                           size_t *nb)
{
    return zc_put_small(&l->zc, iov, n, rb_iov_total(iov, n), nb);
}

/* rdma_link_putv of len bytes in two steps (zc_claim, zc_commit). */
static inline void *rdma_link_claim(rdma_link_t * l, size_t len)
{
    return zc_claim(&l->zc, len);
}

static inline __attribute__ ((always_inline))
rdma_status_t rdma_link_commit(rdma_link_t * l, size_t len)
{
    return zc_commit(&l->zc, len);
}

static inline rdma_status_t rdma_link_getv(rdma_link_t * l, const struct iovec *iov, int n,
                                           size_t *nb)
{
    return zc_getv(&l->zc, iov, n, nb);
}

/* Receive fast path (zc_peek/zc_consume): a view of the bytes the peer put,
 * where they lie (rb_peek_t; RB_PEEK_SLOW: rdma_link_getv). */
static inline rb_peek_t rdma_link_peek(rdma_link_t * l, const void **buf, size_t *len)
{
    return zc_peek(&l->zc, buf, len);
}

static inline rdma_status_t rdma_link_consume(rdma_link_t * l, size_t n)
{
    return zc_consume(&l->zc, n);
}

/* 1 while a READY link has a rendezvous unfinished (a pull, or a copy of
 * rdma_chan_rndv_copy, in flight; a FIN or PUSHED still owed): it must
 * not be torn down yet. */
int rdma_link_busy(const rdma_link_t * l);

/* The close handshake on l begins: what l writes from now on is its last
 * (the transport makes those writes' landing observable, xport closing()). */
void rdma_link_closing(rdma_link_t * l);

/* The close handshake on l is done: publish the receive tail, then let the
 * transport stop watching the connection (quiesce: the peer may exit now;
 * nothing that fails on it from here on is an error). */
void rdma_link_quiesce(rdma_link_t * l);

/* l's peer is dead (its process manager said so), l quiesced: what is in
 * flight on it ends now (xport abort()) instead of at the transport's
 * timeout. */
void rdma_link_abort(rdma_link_t * l);

/* One line: which path large parts took (by size), ring frames and
 * writes; 0 (nothing written) if no large part moved. */
int rdma_link_report(const rdma_link_t * l, char *buf, size_t len);

#endif /* RDMA_LINK_H_INCLUDED */
