/*
 * rdma_xport: what a transport (shm, verbs) provides under the channel.
 *
 * Plain C, no MPICH.  The layer below the protocol (docs/design.md):
 * the owner (the channel, rdma_link.c, or a test) calls down through this
 * table and hears back only through the events it registered in
 * rdma_xport_params_t.  A transport never names the pipe or the rendezvous:
 * it owns the memory a connection's pipe runs over (ring, stage, head/tail
 * words; handed up with the bind event) and implements the two ops tables
 * those protocols call downward (pipe_ops: make stage bytes visible at the
 * peer; zc: expose, pull, push), both with ctx = c->priv.
 *
 * Lifecycle:
 *   open()      once per process; returns this process's business-card
 *               fragment (one token without spaces), published by the owner
 *               (PMI KVS via CH3's business card) before anyone connects.
 *   connect()   starts connecting c->peer (asynchronous); progress() later
 *               calls ev.bind() (the pipe memory is known; arrivals may be
 *               reported from now on), then moves c to RDMA_CONN_READY and
 *               calls ev.ready().  A peer may also connect to us: progress()
 *               then asks the owner for the object with ev.conn_of() and
 *               readies it, if ev.admit lets it (the owner's cap on
 *               connections).  Whoever connects first wins; both sides end
 *               up READY once.
 *               Peers outside the job (dynamic processes) have ids from
 *               prm.size up, given by the owner, and c->hello set: what this
 *               side presents when it connects.  The peer's progress()
 *               hands it to its owner (ev.accept), which answers with the
 *               connection object, or NULL to refuse (the connector's
 *               connection then FAILS: "refused the connection").
 *   progress()  polls completions and connection requests; never blocks.
 *   closing()   (optional) the owner's close handshake on c begins: the
 *               frames it writes from now on are its last, and close()
 *               waits for nothing written after them.
 *   quiesce()   the owner's close handshake on c is done (READY or CLOSING
 *               -> CLOSED):
 *               liveness checks stop and a failure seen on c afterwards is
 *               not reported, since the peer may now exit.  c's memory stays
 *               valid (late credit writes of the peer land there).
 *   abort()     (optional) after quiesce(): the owner learnt that c's peer
 *               is dead (its process manager said so).  What is still in
 *               flight on c ends now: the device writes nothing more into
 *               our memory for it, and its one-sided operations fail
 *               through rma_done on the next progress(), not at the
 *               transport's own timeout.  c stays CLOSED.
 *   close()     releases one connection: first waits, bounded, until the
 *               writes already posted on it have landed (the peer may still
 *               wait for the last one), then frees it.  The owner may then
 *               set c IDLE and connect() it again (an evicted connection,
 *               a peer outside the job met again); a peer that connects to
 *               c while this side still holds the old connection is kept
 *               waiting, alive, until this side closed it.
 *   finalize()  releases everything; the xport pointer is dead after it.
 *
 * Errors (rdma_status.h): every call returns RDMA_OK or a negative status
 * and leaves a one-line diagnosis (naming the peer, the device, the
 * limit...) readable with rdma_xport_ops_t.error(); open() writes its
 * diagnosis into err; a connection that FAILED keeps its own in c->why
 * (rdma_conn_failed), which later failures of other peers do not overwrite.
 *
 * Threading: the owner serialises all calls on one xport, except bg_run,
 * which the channel thread (rdma_thread.h) calls concurrently with them;
 * the transport guards what bg_run shares (rdma_verbs.h: cm_lock).
 */
#ifndef RDMA_XPORT_H_INCLUDED
#define RDMA_XPORT_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "rdma_status.h"
#include "rb_pipe.h"            /* rb_xport_ops_t: implemented, never called */
#include "zc.h"                 /* zc_ops_t: likewise */

/* The version of everything the channel puts on the wire between
 * processes: the pipe's frames (ringbuf/), the verbs CM messages and
 * control words (verbs/rdma_verbs.h), the shm region header, mailbox and
 * link (shm/rdma_shm.h).  Builds connect only at the same version; at
 * another, each side refuses with one line that names both versions.
 * Change any of those layouts or encodings, change the version:
 * test/unit/t_wire.c fingerprints them (field offsets and sizes, frames as
 * written) and fails until the new fingerprint is recorded under a new
 * version.  The fields that carry the version itself (the verbs CM head,
 * the first words of shm_hdr_t and shm_link_t) never move. */
#define RDMA_WIRE_VERSION 9     /* 3 and below: shm only (SHM_VERSION); 5: BYE frames, WAIT;
                                 * 6: the channel's rendezvous packets (rdma_rndv.c);
                                 * 7: RDMA_RTS over verbs too (its key an rkey to read);
                                 * 8: shm frames up to 32 KiB by default (a 7 drops them);
                                 * 9: the handshakes agree on the frame size (shm: and check
                                 * the slot size and pipe mode) */
#include "rdma_thread.h"        /* rdma_thread_src_t: bg_fds, bg_run */

typedef enum {                  /* in this order: rdma_chan_getv compares */
    RDMA_CONN_IDLE = 0,
    RDMA_CONN_CONNECTING,
    RDMA_CONN_READY,
    RDMA_CONN_CLOSING,          /* the owner evicts it (rdma_chan_evict.c): the
                                 * transport treats it as READY (liveness,
                                 * failures), the owner sends only its close */
    RDMA_CONN_CLOSED,
    RDMA_CONN_FAILED
} rdma_conn_state_t;

typedef struct rdma_xport rdma_xport_t;
typedef struct rdma_xport_ops rdma_xport_ops_t;

/* The transport's part of one connection; the owner embeds it. */
typedef struct rdma_conn {
    int peer;                   /* rank of the peer in the job; from the
                                 * job size up: a peer outside the job */
    rdma_conn_state_t state;
    const rdma_xport_ops_t *ops;        /* transport serving this peer */
    rdma_xport_t *xport;
    void *priv;                 /* transport's per-connection state: the ctx
                                 * of pipe_ops and zc */
    void *owner;                /* owner's back pointer (the CH3 VC) */
    const char *hello;          /* peer outside the job: who we say we are
                                 * when we connect (owner's, NUL-terminated) */
    /* FAILED: why, one line naming the peer; 8 bytes short of RDMA_MSG_LEN
     * so that hello leaves the size of the VC that embeds this unchanged */
    char why[RDMA_MSG_LEN - sizeof(const char *)];
} rdma_conn_t;

/* ev.accept: not yet (a sentinel, never dereferenced). */
#define RDMA_CONN_LATER ((rdma_conn_t *) (uintptr_t) 1)

/* Mark c FAILED for the reason `why` (kept in c->why). */
static inline rdma_status_t rdma_conn_failed(rdma_conn_t * c, const char *why)
{
    c->state = RDMA_CONN_FAILED;
    snprintf(c->why, sizeof(c->why), "%.*s", (int) sizeof(c->why) - 1, why);
    return RDMA_ERR_PEER;
}

/* quiesce() of a transport whose writes land when posted and whose
 * liveness checks, if any, look at READY connections only (shm, fakes). */
static inline rdma_status_t rdma_xport_quiesce_plain(rdma_xport_t * xp, rdma_conn_t * c)
{
    (void) xp;
    if (c->state == RDMA_CONN_READY || c->state == RDMA_CONN_CLOSING)
        c->state = RDMA_CONN_CLOSED;
    return RDMA_OK;
}

/* The memory one connection's pipe runs over (rb_pipe_init's areas) and
 * how arrivals are detected there. */
typedef struct rdma_conn_mem {
    void *stage;                /* local image of the peer's ring */
    volatile uint64_t *tail_word;       /* the peer's credits land here */
    volatile void *ring;        /* the peer's frames land here */
    volatile uint64_t *head_word;       /* the peer's head (head_writes) */
    int completion_driven;      /* arrivals come as ev.landed(), not flags */
    unsigned max_writes;        /* the pipe's write window (rb_config_t); 0: none */
    int verify;                 /* completion-driven, small frames verify
                                 * themselves (rb_config_t.verify) */
    size_t peer_max_frame;      /* the peer's prm.max_frame, from the
                                 * handshake (0: unknown); both ends' pipes
                                 * use the smaller (rdma_link_bind) */
} rdma_conn_mem_t;

/* What a transport tells its owner.  Called from inside connect(),
 * progress() and the ops tables, on the owner's thread; only conn_of and
 * admit may also be called from bg_run (the channel thread): conn_of must
 * be a pure lookup. */
typedef struct rdma_xport_events {
    rdma_conn_t *(*conn_of) (void *arg, int rank);      /* NULL: refuse */
    rdma_status_t (*card_of) (void *arg, int rank, char *buf, size_t len);
    /* c's pipe memory is known (before any arrival can be reported);
     * non-zero: the owner cannot use it, the connection fails */
    rdma_status_t (*bind) (void *arg, rdma_conn_t * c, const rdma_conn_mem_t * mem);
    void (*ready) (void *arg, rdma_conn_t * c);         /* c is READY */
    void (*landed) (rdma_conn_t * c, unsigned frames);  /* completion-driven */
    void (*pulled) (rdma_conn_t * c, size_t bytes);     /* zc pulls, in order */
    void (*sent) (rdma_conn_t * c);     /* the pipe's write_user completed */
    /* a process outside the job connects, presenting `who` (its hello):
     * the owner's connection for it (peer id and hello set; IDLE, or
     * CONNECTING to it), NULL to refuse, or RDMA_CONN_LATER: ask again
     * later (the owner does not know that peer yet) */
    rdma_conn_t *(*accept) (void *arg, const char *who);
    /* a one-sided operation started with rma.put/get on c finished (st:
     * RDMA_OK, or the connection failed); once per started operation, in
     * the order they were started on c */
    void (*rma_done) (void *arg, rdma_conn_t * c, void *cookie, rdma_status_t st);
    /* admission (NULL: always): a peer's request would make c, which has
     * no connection here, a new one: take 1 asks for a slot (1: taken,
     * the owner gives it back when c ends; 0: not now, the transport keeps
     * the peer waiting, alive, and it asks again); take 0 gives back a
     * slot taken for a connection that could not be made.  May be called
     * from bg_run (the channel thread): thread-safe, never blocks. */
    int (*admit) (void *arg, rdma_conn_t * c, int take);
    void *arg;
} rdma_xport_events_t;

/* ev.admit for c (take 1: may it pair? take 0: give back); 1 without one. */
static inline int rdma_xport_admit(const rdma_xport_events_t * ev, rdma_conn_t * c, int take)
{
    return !ev->admit || ev->admit(ev->arg, c, take);
}

#define RDMA_XPORT_TIMEOUT 60.0  /* CONNECT_TIMEOUT's default */

typedef struct rdma_xport_params {
    int rank, size;
    const char *job;            /* unique job id; names shared objects */
    /* the pipe's geometry, which sizes the memory and the queues: rings
     * start at ring_size and may grow to ring_max (0: they keep their size;
     * the pipe's ops then need no ring_new..ring_move) */
    size_t ring_size, chunk_size, ring_max;
    size_t max_frame;           /* the largest frame this end's settings send
                                 * (PIPELINE_CHUNK); a connection uses the
                                 * smaller of its two ends' (mem.peer_max_frame) */
    int head_writes;            /* the pipe writes its head separately
                                 * (basic mode): twice the writes per frame */
    rdma_xport_events_t ev;
    /* the transport's own settings, of the type its header names
     * (verbs: rdma_verbs_params_t, rdma_xport_verbs.h); NULL: none */
    const void *own;
    int peers;                  /* peers this transport serves */
    double timeout;             /* seconds a connection request waits for its
                                 * answer (CONNECT_TIMEOUT; 0: RDMA_XPORT_TIMEOUT) */
} rdma_xport_params_t;

/* What a transport adds to the channel's MPI_T counters. */
typedef struct rdma_xport_counters {
    uint64_t reg_hits, reg_misses;      /* registration-cache lookups */
    uint64_t pinned_bytes;      /* user memory registered now (cached too) */
    uint64_t pinned_bytes_max;  /* its peak since the transport opened
                                 * (only verbs pins: no sum of peaks) */
    uint64_t helper_regs;       /* registrations the helper made ahead of use */
} rdma_xport_counters_t;

/* Memory the processes of one node share (MPI-3 shared windows): one
 * process makes it (make: map, len, and pid/fd through which the
 * others map it), the others map it (map, given len, pid and fd),
 * then the maker seals it (seal: closes its fd; the mappings stay).  free
 * unmaps (and seals).  A process that dies leaves nothing behind in the
 * file system.  Errors: the transport's error(). */
typedef struct rdma_seg {
    void *map;                  /* NULL: not mapped */
    size_t len;
    int32_t pid, fd;            /* the maker's; fd -1 once sealed */
} rdma_seg_t;

typedef struct rdma_xport_seg_ops {
    rdma_status_t (*make) (rdma_xport_t * xp, size_t len, rdma_seg_t * seg);
    rdma_status_t (*map) (rdma_xport_t * xp, rdma_seg_t * seg);
    void (*seal) (rdma_seg_t * seg);
    void (*free) (rdma_seg_t * seg);
} rdma_xport_seg_ops_t;

/* One-sided access to the memory of MPI windows (NULL: none).
 *   expose    makes [addr, addr+len) of this process writable and readable
 *             by every peer of the transport: *key for the peers, *handle
 *             for unexpose.  RDMA_ERR_NOMEM: limits (memlock, the pinned
 *             cap), said in error().
 *   put/get   start moving len bytes between src/dst here and the peer's
 *             [raddr, raddr+len) (its key), on connection ctx (c->priv).
 *             *done = 1: finished already (the bytes are in place at both
 *             ends); else ev.rma_done(cookie) reports it, once (also
 *             after quiesce(), when the peer turns out dead).  When
 *             rma_done says RDMA_OK after a put, the bytes are in the
 *             peer's memory: a later access by any process sees them.
 *             RDMA_ERR_NOMEM: not now (queues, registration limits: the
 *             owner sends the operation another way); RDMA_ERR_REFUSED:
 *             never on this connection; RDMA_ERR_PEER: the connection broke.
 *   atomic    (NULL: none) start n (<= RDMA_XP_AMO_MAX) 8-byte atomics on
 *             the peer's 8-aligned words raddr, raddr+8, ...: fetch-and-add
 *             of a->add[i], or (a->cas, n 1) compare-and-swap of a->cmp for
 *             a->add[0]; the words found land in a->result[0..n) (NULL:
 *             dropped) before rma_done(cookie) reports it.  Waits for room
 *             in the queues (bounded by the peer's timeout), so only
 *             RDMA_ERR_REFUSED (not on this connection) or RDMA_ERR_PEER.
 *             They are atomic with each other, not with the CPU's accesses
 *             (IBV_ATOMIC_HCA): the owner uses them only on memory every
 *             accumulate reaches this way.
 *   self      (NULL: none) the same on this process's memory (the key expose
 *             gave), through the device: finished on return, RDMA_OK or
 *             RDMA_ERR_REFUSED (no atomics here) or RDMA_ERR_XPORT.
 *   amo_ok    1 if atomic and self can work on this transport (the device
 *             has atomics), so memory exposed now allows them.
 * Nothing written this way orders anything else: a frame written after a
 * put may land before it.  The owner waits for rma_done where it needs
 * the bytes in place. */
enum { RDMA_XP_AMO_MAX = 16 };
typedef struct rdma_xport_amo {
    int cas, n;
    uint64_t add[RDMA_XP_AMO_MAX], cmp;
    void *result;               /* n words, any alignment; NULL: dropped */
} rdma_xport_amo_t;
typedef struct rdma_xport_rma_ops {
    rdma_status_t (*expose) (rdma_xport_t * xp, void *addr, size_t len, uint64_t * key,
                             void **handle);
    void (*unexpose) (rdma_xport_t * xp, void *handle);
    rdma_status_t (*put) (void *ctx, const void *src, size_t len, uint64_t raddr, uint64_t key,
                          void *cookie, int *done);
    rdma_status_t (*get) (void *ctx, void *dst, size_t len, uint64_t raddr, uint64_t key,
                          void *cookie, int *done);
    int all_memory;
    rdma_status_t (*atomic) (void *ctx, const rdma_xport_amo_t * a, uint64_t raddr,
                             uint64_t key, void *cookie);
    rdma_status_t (*self) (rdma_xport_t * xp, const rdma_xport_amo_t * a, uint64_t addr,
                           uint64_t key);
    int (*amo_ok) (rdma_xport_t * xp);  /* atomic and self can work here */
} rdma_xport_rma_ops_t;

struct rdma_xport_ops {
    const char *name;
    int wire;                   /* frames cross a NIC: every byte on them costs */
    int conn_only;              /* progress() only makes and ends connections
                                 * (the owner polls the rings themselves):
                                 * called every 64th poll and before a sleep */
    rdma_status_t (*open) (const rdma_xport_params_t * prm, rdma_xport_t ** xp,
                 char *card, size_t cardlen, char *err, size_t errlen);
    rdma_status_t (*connect) (rdma_xport_t * xp, rdma_conn_t * c);
    rdma_status_t (*progress) (rdma_xport_t * xp);
    void (*closing) (rdma_xport_t * xp, rdma_conn_t * c);      /* NULL: nothing to do */
    rdma_status_t (*quiesce) (rdma_xport_t * xp, rdma_conn_t * c);
    void (*abort) (rdma_xport_t * xp, rdma_conn_t * c); /* NULL: nothing in flight */
    rdma_status_t (*close) (rdma_xport_t * xp, rdma_conn_t * c);
    rdma_status_t (*finalize) (rdma_xport_t * xp);
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
    /* Background work (optional; NULL: none).  bg_fds() gives the fds the
     * channel thread sleeps on (at most max); the thread calls bg_run()
     * when one is readable or when the deadline bg_run() last returned
     * (CLOCK_MONOTONIC seconds; 0: none) has passed.  The owner stops the
     * thread before finalize(). */
    int (*bg_fds) (rdma_xport_t * xp, int *fds, int max);
    rdma_thread_run_t bg_run;   /* arg: the rdma_xport_t */
    /* What the pipe calls to make stage bytes visible (ctx = c->priv). */
    const rb_xport_ops_t *pipe_ops;
    /* Zero-copy rendezvous (zc.h), ctx = c->priv; NULL: none.  shm pulls
     * with process_vm_readv, verbs with RDMA read; completed bytes are
     * reported with ev.pulled(). */
    const zc_ops_t *zc;
    /* One line of statistics about the transport (e.g. its registration
     * cache), or NULL. */
    int (*stats) (const rdma_xport_t * xp, char *buf, size_t len);
    /* Add the transport's counters to *c (same thread rule as progress),
     * or NULL: it has none. */
    void (*counters) (const rdma_xport_t * xp, rdma_xport_counters_t * c);
    /* LARGE_PROTOCOL=auto, asked once after open (NULL: never slow): 1 if
     * this host's zero-copy path is slower than the ring's pipelined copy,
     * else 0; why: one line of what was measured. */
    int (*zcopy_slow) (rdma_xport_t * xp, char *why, size_t len);
    /* Node segments (NULL: the transport has none). */
    const rdma_xport_seg_ops_t *seg;
    /* One-sided operations on window memory (NULL: none). */
    const rdma_xport_rma_ops_t *rma;
};

/* The channel-thread source of xp (bg_fds, bg_run); 0: it has none. */
static inline int rdma_xport_bg_src(const rdma_xport_ops_t * ops, rdma_xport_t * xp,
                                    rdma_thread_src_t * src)
{
    if (!ops->bg_fds || !xp)
        return 0;
    src->nfd = ops->bg_fds(xp, src->fd, RDMA_THREAD_MAX_FD);
    src->run = ops->bg_run;
    src->arg = xp;
    return 1;
}

extern const rdma_xport_ops_t rdma_xport_shm;
extern const rdma_xport_ops_t rdma_xport_verbs;

#endif /* RDMA_XPORT_H_INCLUDED */
