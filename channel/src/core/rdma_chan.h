/*
 * rdma_chan: the channel's core -- the paper's five functions (P3
 * sec. 2.2) over the links of one process, in plain C (no MPICH): which
 * transport serves each peer, opening the transports and composing this
 * process's business card, connecting on first use, put/get, polling,
 * the blocking-wait decision and finalize.  src/ch3/ is the thin CH3
 * glue around it (process group, VCs, MPICH errors); test/unit/t_chan.c
 * drives it over the fake transport.
 *
 * The owner keeps one rdma_link_t per rank (for CH3: in the VC) and hands
 * them out through link_of; it hears of a link becoming READY through
 * ready().  Transports are passed in (ops[RDMA_XP_SHM], ops[RDMA_XP_VERBS])
 * so that a test can put fakes in their place.
 *
 * Errors: rdma_status_t; the diagnosis of the failing call is in ch->msg
 * (a connection's own in l->xc.why).
 *
 * Threading: the owner serialises every call (today: MPICH's global
 * critical section).  rdma_chan_open starts the channel thread
 * (rdma_thread.h) when a transport has background work (bg_fds);
 * rdma_chan_finalize stops it before the transports go.  The thread runs
 * only the transports' bg_run, under their own locks.
 */
#ifndef RDMA_CHAN_H_INCLUDED
#define RDMA_CHAN_H_INCLUDED

#include "rdma_config.h"

typedef struct rdma_chan rdma_chan_t;

/* One transport in use: its ops, its instance, the card key naming it
 * and the protocol settings of its links (ev.arg of its events). */
typedef struct rdma_chan_xport {
    const rdma_xport_ops_t *ops;
    rdma_xport_t *xp;           /* NULL: not opened (no peer needs it) */
    const char *key;            /* "shm", "ib" */
    rdma_chan_t *ch;
} rdma_chan_xport_t;

/* What the owner provides. */
typedef struct rdma_chan_owner {
    rdma_link_t *(*link_of) (void *arg, int rank);      /* NULL: no such peer */
    /* rank's whole business card (";"-separated "<key>:<fragment>") */
    rdma_status_t (*card_of) (void *arg, int rank, char *buf, size_t len);
    void (*ready) (void *arg, rdma_link_t * l);
    /* Link l is FAILED (l->xc.why says why): told on every poll that
     * finds a transport reporting a failure, so it must be idempotent.
     * The owner decides what it means (nothing once its use of l ended:
     * a peer may exit after the close handshake). */
    rdma_status_t (*failed) (void *arg, rdma_link_t * l);
    /* Peers outside the job (dynamic processes).  resolve: l is about to
     * connect but is not known to the core yet (add it: rdma_chan_dyn_add)
     * or was CLOSED (rdma_chan_dyn_reopen).
     * accept: a process outside the job connects presenting `who`: its
     * link (added; without a card, the accepting transport serves it),
     * NULL to refuse, RDMA_LINK_LATER to be asked again.  Either may be
     * NULL: none. */
    rdma_status_t (*resolve) (void *arg, rdma_link_t * l);
    rdma_link_t *(*accept) (void *arg, const char *who);
    /* a one-sided operation started with rdma_chan_rma finished (NULL: the
     * owner starts none) */
    void (*rma_done) (void *arg, rdma_link_t * l, void *cookie, rdma_status_t st);
    void *arg;
    /* The cap on live connections (rdma_chan_evict.c).  quiet: 1 when the
     * owner has nothing queued on l, which may then close (NULL: always;
     * answer: the peer asked, else this side would start the close).
     * evicted: l closed and is IDLE: stop polling it, and connect it again
     * (rdma_chan_connect) if something waits to go.  NULL: nothing to do. */
    int (*quiet) (void *arg, rdma_link_t * l, int answer);
    rdma_status_t (*evicted) (void *arg, rdma_link_t * l);
} rdma_chan_owner_t;

/* owner.accept: not yet (a sentinel, never dereferenced). */
#define RDMA_LINK_LATER ((rdma_link_t *) (uintptr_t) 1)

/* What the channel publishes through MPI_T: sums over its links (since
 * they were bound) and its open transports. */
typedef struct rdma_chan_counters {
    uint64_t ring_frames, ring_writes;  /* frames sent; transport writes of them */
    uint64_t zcopy_parts, copy_parts;   /* large parts sent zero-copy; through the ring */
    uint64_t copy_fallbacks;    /* zero-copy parts the receiver refused to pull */
    uint64_t eager_zcopy_sends; /* eager sends whose payload went from user memory */
    uint64_t ring_grows;        /* moves of a send side to a larger ring */
    uint64_t ring_shrinks;      /* ... back to the first size (idle) */
    uint64_t ring_bytes;        /* receive rings, and send stages that are not
                                 * the peer's ring (verbs), now */
    uint64_t rma_puts, rma_gets;        /* one-sided operations started directly */
    uint64_t rma_atomics;       /* accumulates the NIC did (rdma_chan_atomic) */
    uint64_t rma_messages;      /* ... sent as messages (the owner counts them) */
    uint64_t rma_at_call;       /* puts and gets started at the call, without CH3's queue */
    uint64_t rndv_sends;        /* large messages sent by the channel's rendezvous */
    uint64_t rndv_fallbacks;    /* ... received through CH3's rendezvous instead */
    uint64_t conns_opened;      /* connections over the wire made READY */
    uint64_t conns_evicted;     /* ... closed for the cap (MAX_CONNS), either side */
    uint64_t conns_live;        /* ... READY now */
    uint64_t conns_peak;        /* ... READY at most, after each eviction began */
    rdma_xport_counters_t xp;
} rdma_chan_counters_t;

/* A connection over the wire that the cap counts or that closes
 * (rdma_chan_evict.c). */
typedef struct rdma_chan_live {
    rdma_link_t *l;
    uint64_t mark;              /* its frames both ways when last looked at */
    unsigned tick;              /* the look (ch->live_looks) that saw them move */
    unsigned char bye_in;       /* the peer's BYE was read */
    unsigned char bye_out;      /* ours: 0 not yet, 1 owed (no room), 2 sent */
} rdma_chan_live_t;

/* A link to a peer outside the job: peer id size + its index. */
typedef struct rdma_chan_dyn {
    rdma_link_t *l;             /* NULL: free */
    char *card, *hello;         /* the peer's business card; who we are to it */
} rdma_chan_dyn_t;

struct rdma_chan {
    rdma_chan_config_t cfg;
    int rank, size;
    const char *job;
    rdma_chan_xport_t xp[RDMA_XP_N];
    rdma_chan_owner_t owner;
    /* links, dyn, host, token: the owner's thread only (the channel
     * thread runs bg_run and conn_of, which never read them) */
    int links[RDMA_XP_N];       /* links each transport serves */
    /* idle rings (rdma_chan_idle_check): an open transport's rings can
     * grow and RING_IDLE is set */
    int ring_idle_on;
    /* rdma_chan_poll (owner only): the transports polled on every call
     * (bit k: open, serving links, progress carries data; set by
     * rdma_chan_poll_plan whenever links[] changes), and the calls so far:
     * the others are polled when it is 0 mod 64, the clock read for idle
     * rings when 0 mod 4096 */
    unsigned poll_every, polls;
    rdma_chan_dyn_t *dyn;       /* [ndyn] */
    int ndyn;
    char host[72];              /* host:<name> in the card: who shares shm */
    char token[24];             /* token:<hex> in the card: this process's
                                 * secret (rdma_chan_open) */
    rdma_thread_t thread;       /* the channel thread (owner only) */
    char msg[RDMA_MSG_LEN];     /* why the last call failed */
    char xp_why[RDMA_XP_N][RDMA_MSG_LEN];       /* xp[k] not opened: why (cold,
                                                 * off the poll's cache lines) */
    double ring_next;           /* when rdma_chan_idle_check looks next */
    /* one-sided operations (owner only): started by rdma_chan_rma (puts,
     * gets), those its owner sent as messages (rdma_chan_rma_message) and
     * of the started ones, those started at the call (rdma_chan_rma_at_call);
     * accumulates' calls of rdma_chan_atomic */
    uint64_t rma_count[4], amo_count;
    /* large messages (owner only): sent by the channel's rendezvous, and
     * of those received, taken through CH3's instead (rdma_rndv.c) */
    uint64_t rndv_count[2];
    /* Connections over the wire to the job's peers (rdma_chan_evict.c;
     * owner only): live[nlive] holds the READY and CLOSING ones while
     * cfg.max_conns caps them, else only the closing ones; nclosing of
     * them close (a BYE sent or read). */
    rdma_chan_live_t *live;
    int nlive, live_room, nclosing;
    int live_over;              /* a look is due at every poll: a connect
                                 * waits for a slot, or more than the cap
                                 * were READY at the last look */
    unsigned live_looks;        /* victim searches so far (LRU clock) */
    /* Admission: the cap's slots that links hold (l->slot: connecting,
     * READY or CLOSING), at most cfg.max_conns.  __atomic, relaxed (a
     * count; the transport's lock and adoption publish the connection
     * itself): taken by the owner's connects and by the channel thread's
     * ev.admit (a peer's request), given back by the owner (a closing
     * link's mark first, its count once close() returned: slots may
     * exceed the marked links meanwhile, never fall below).  slot_want: a
     * peer was kept waiting at the cap (set by either thread, cleared by
     * the owner's look).  low: connects to lower ranks under way without
     * a slot (l->slot 3), at most cfg.max_conns; taken by the owner, the
     * same atomics, given back by either thread as slots.  waitq[nwait]:
     * the owner's connects waiting for a slot, or for low, oldest first
     * (owner only). */
    int slots, slot_want, low;
    rdma_link_t **waitq;
    int nwait, wait_room;
    uint64_t conns_opened, conns_evicted, conns_peak;
    rdma_chan_counters_t gone;  /* what evicted links counted (rdma_chan_link_sum) */
};

/* Set up ch (nothing opened yet); ops[k] serves transport k. */
void rdma_chan_init(rdma_chan_t * ch, const rdma_chan_config_t * cfg,
                    const rdma_xport_ops_t * const ops[RDMA_XP_N], int rank, int size,
                    const char *job, const rdma_chan_owner_t * owner);

/* Choose each peer's transport from node[rank] (its node id): shm on this
 * node, verbs to the others, unless cfg.transport says otherwise. */
rdma_status_t rdma_chan_assign(rdma_chan_t * ch, const int *node);

/* Open the transports some peer needs, and for peers outside the job
 * (dynamic processes) shm unless cfg.transport is verbs and verbs unless
 * it is shm (if it can: no device is no error here); start the channel
 * thread if one has background work; card = this process's business card:
 * the opened transports' fragments, host:<name> and token:<secret>. */
rdma_status_t rdma_chan_open(rdma_chan_t * ch, char *card, size_t len);

/* Stop the channel thread, close every link and finalize the transports
 * (verbose: reports first). */
rdma_status_t rdma_chan_finalize(rdma_chan_t * ch);

/* Same caller rule as every other call: the owner serialises it. */
void rdma_chan_counters_get(const rdma_chan_t * ch, rdma_chan_counters_t * c);

/* Add what l's pipe and rendezvous counted since they were bound to *c. */
void rdma_chan_link_sum(rdma_chan_counters_t * c, const rdma_link_t * l);

/* Peers outside the job (dynamic processes): give l a peer id and the
 * transport its card calls for (shm on this host, else verbs), remembering
 * card and hello (rdma_conn_t); card NULL: l will be
 * accepted, not connected.  reopen: l, CLOSED by the owner's close
 * protocol, is used again: its connection is released and l is IDLE
 * (each connection outside the job has memory of its own).  del closes
 * l's connection and forgets it. */
rdma_status_t rdma_chan_dyn_add(rdma_chan_t * ch, rdma_link_t * l, const char *card,
                                const char *hello);
void rdma_chan_dyn_reopen(rdma_chan_t * ch, rdma_link_t * l);
void rdma_chan_dyn_del(rdma_chan_t * ch, rdma_link_t * l);

/* Start connecting l (a no-op once connecting or READY). */
rdma_status_t rdma_chan_connect(rdma_chan_t * ch, rdma_link_t * l);

/* rdma_chan_poll's call n when it polls a transport. */
rdma_status_t rdma_chan_poll_due(rdma_chan_t * ch, unsigned n);

/* Progress the transports (poll_every on each call, the others every 64th);
 * a failed link is told to the owner (owner.failed), not returned. */
static inline rdma_status_t rdma_chan_poll(rdma_chan_t * ch)
{
    unsigned n = ++ch->polls;

    return ch->poll_every || !(n & 63) ? rdma_chan_poll_due(ch, n) : RDMA_OK;
}

/* The cap on live connections (rdma_chan_evict.c).  live_add: l (over the
 * wire, to a rank of the job) became READY: counted, and above the cap the
 * least recently used quiet link begins to close (without memory to count
 * it, l stays uncounted).  live_look: every 1024th poll and every poll
 * while live_over, the LRU clock; a quiet link closes while a connect
 * waits for a slot, and waiting connects start once slots are free.
 * evict_run: every poll while links close.  getv_end: a read found
 * nothing and l FAILED, or its peer's BYE came (behind data or not).
 * live_free: at finalize. */
void rdma_chan_live_add(rdma_chan_t * ch, rdma_link_t * l);
rdma_status_t rdma_chan_live_look(rdma_chan_t * ch);
rdma_status_t rdma_chan_evict_run(rdma_chan_t * ch);
rdma_status_t rdma_chan_getv_end(rdma_chan_t * ch, rdma_link_t * l);
void rdma_chan_live_free(rdma_chan_t * ch);

/* Admission (rdma_chan_evict.c).  slot_take: 1 if l may connect (it
 * holds a slot, takes a free one, or the cap does not count it), else 0;
 * owner or channel thread; slot_give undoes it.  Owner only: slot_get,
 * before a connect: *go 1 as slot_take, else l waits for a slot (queued
 * once; the look connects it in turn); quiesce: l's connection ends
 * (rdma_link_quiesce) and gives its slot back. */
int rdma_chan_slot_take(rdma_chan_t * ch, rdma_link_t * l);
void rdma_chan_slot_give(rdma_chan_t * ch, rdma_link_t * l);
rdma_status_t rdma_chan_slot_get(rdma_chan_t * ch, rdma_link_t * l, int *go);
void rdma_chan_quiesce(rdma_chan_t * ch, rdma_link_t * l);

/* The owner's close protocol (CH3's CLOSE each way, as at MPI_Finalize)
 * is done with l: quiesced, and the transport keeps its memory until
 * finalize, so that the peer's late credit writes land somewhere valid;
 * under the cap, a connection the cap counts closes now, as an evicted
 * one does (its peer's late writes then fail at its end, after its own
 * close, as they do once this process exits), and l is IDLE: else
 * MPI_Finalize, which closes every connection CH3 ever opened, would end
 * holding one per peer touched. */
void rdma_chan_close(rdma_chan_t * ch, rdma_link_t * l);

/* Out of line: connect first, or say why a put/get failed. */
rdma_status_t rdma_chan_put_slow(rdma_chan_t * ch, rdma_link_t * l, const struct iovec *iov,
                                 int n, size_t *nbytes);
rdma_status_t rdma_chan_fail(rdma_chan_t * ch, rdma_link_t * l, rdma_status_t st);

/* Put up to the iov total into l's pipe; *nbytes = bytes accepted (0 while
 * connecting, while the ring is full or the peer still pulls: zc.h). */
static inline rdma_status_t rdma_chan_putv(rdma_chan_t * ch, rdma_link_t * l,
                                           const struct iovec *iov, int n, size_t *nbytes)
{
    rdma_status_t st;

    if (l->xc.state != RDMA_CONN_READY)
        return rdma_chan_put_slow(ch, l, iov, n, nbytes);
    st = rdma_link_putv(l, iov, n, nbytes);
    return st == RDMA_OK ? RDMA_OK : rdma_chan_fail(ch, l, st);
}

/* rdma_chan_putv of len bytes in two steps, for a caller that copies them
 * in itself: where they go in l's pipe, or NULL (not READY, or not the
 * small-message path: use rdma_chan_putv); then rdma_chan_commit. */
static inline void *rdma_chan_claim(rdma_link_t * l, size_t len)
{
    return l->xc.state == RDMA_CONN_READY ? rdma_link_claim(l, len) : NULL;
}

static inline __attribute__ ((always_inline))
rdma_status_t rdma_chan_commit(rdma_chan_t * ch, rdma_link_t * l, size_t len)
{
    rdma_status_t st = rdma_link_commit(l, len);

    return st == RDMA_OK ? RDMA_OK : rdma_chan_fail(ch, l, st);
}

/* Read what l's peer has put into the iov; *nbytes may be 0.  A FAILED
 * link keeps giving what its peer wrote before, then RDMA_ERR_PEER if its
 * owner set l->fail_reads, else nothing more.  A CLOSING one gives what
 * its peer wrote before its BYE (rdma_chan_evict.c), one not yet READY nothing. */
static inline rdma_status_t rdma_chan_getv(rdma_chan_t * ch, rdma_link_t * l,
                                           const struct iovec *iov, int n, size_t *nbytes)
{
    rdma_status_t st;

    *nbytes = 0;
    if (__builtin_expect(l->xc.state < RDMA_CONN_READY, 0))
        return RDMA_OK;         /* IDLE, CONNECTING: no pipe (evicted: its memory is gone) */
    st = rdma_link_getv(l, iov, n, nbytes);
    /* The peer's BYE is taken here even behind data read in this call: the
     * owner reads again only once a peek finds something, and nothing lands
     * behind a BYE.  A FAILED link ends once its reads give nothing. */
    if (st == RDMA_OK && (*nbytes == 0 ? l->xc.state == RDMA_CONN_FAILED || l->zc.bye_rx
                          : __builtin_expect(l->zc.bye_rx, 0) && l->xc.state == RDMA_CONN_READY))
        return rdma_chan_getv_end(ch, l);
    return st == RDMA_OK ? RDMA_OK : rdma_chan_fail(ch, l, st);
}

/* Receive fast path: a view of what l's peer has put, valid until
 * rdma_chan_consume (rb_peek_t; RB_PEEK_SLOW: rdma_chan_getv). */
static inline rb_peek_t rdma_chan_peek(rdma_link_t * l, const void **buf, size_t *len)
{
    return l->xc.state == RDMA_CONN_READY ? rdma_link_peek(l, buf, len) : RB_PEEK_SLOW;
}

/* Do l's frames cross a NIC, where every byte costs?  (Known from init.) */
static inline int rdma_chan_over_wire(const rdma_link_t * l)
{
    return l->xc.ops && l->xc.ops->wire;
}

/* rdma_chan_putv through the ring whatever the sizes, on shared memory:
 * for data its receiver processes as each part arrives (an accumulate's
 * stream unit), where a rendezvous per part only delays it.  Over the
 * wire the rendezvous stays (not measured there). */
static inline rdma_status_t rdma_chan_putv_ring(rdma_chan_t * ch, rdma_link_t * l,
                                                const struct iovec *iov, int n, size_t *nbytes)
{
    rdma_status_t st;

    l->zc.keep = !rdma_chan_over_wire(l);
    st = rdma_chan_putv(ch, l, iov, n, nbytes);
    l->zc.keep = 0;
    return st;
}

static inline rdma_status_t rdma_chan_consume(rdma_chan_t * ch, rdma_link_t * l, size_t n)
{
    rdma_status_t st = rdma_link_consume(l, n);

    return st == RDMA_OK ? RDMA_OK : rdma_chan_fail(ch, l, st);
}

/* Blocking wait, step 1 (after `over` idle polls past the spin phase):
 * arm the transport that can wake us and say how long to sleep; returns
 * the armed transport's index or -1 (then just sleep *us). */
int rdma_chan_wait_arm(rdma_chan_t * ch, unsigned long over, int threaded, long *us);
/* Step 2: sleep in transport k (-1: nanosleep) for up to us, or, when the
 * last poll moved something, disarm k instead (sleep = 0). */
void rdma_chan_wait(rdma_chan_t * ch, int k, long us, int sleep);

/* Idle polls before blocking: cfg.poll_spins, or none when the node's
 * `local` ranks share `cores` CPUs (oversubscribed: the union of their
 * CPU sets, rdma_chan_cpus_t), else more with node peers than without
 * (rdma_chan_wait.c). */
int rdma_chan_spins(const rdma_chan_config_t * cfg, int local, int cores);

/* A CPU set as node peers exchange it: CPUs 0..RDMA_CHAN_CPUS_MAX-1.  As
 * text, character k is the hex digit of CPUs 4k..4k+3 (lowest bit the
 * lowest CPU), up to the last non-zero digit. */
enum { RDMA_CHAN_CPUS_MAX = 1024 };
typedef struct rdma_chan_cpus {
    uint64_t w[RDMA_CHAN_CPUS_MAX / 64];
} rdma_chan_cpus_t;
/* 0, or -1 when len is too small. */
int rdma_chan_cpus_format(const rdma_chan_cpus_t * s, char *buf, size_t len);
/* OR the set `text` describes into *s; 0, or -1 (not a set: *s unchanged). */
int rdma_chan_cpus_merge(rdma_chan_cpus_t * s, const char *text);
int rdma_chan_cpus_count(const rdma_chan_cpus_t * s);

/* Node segments (rdma_seg_t, rdma_xport.h: MPI-3 shared windows) over
 * the shm transport.  usable: it is open (cfg.transport is not verbs).
 * make: a new segment of len bytes; map: the one seg's len, pid and fd
 * name (made by another process of the node); seal: once every process
 * mapped it; free: unmap.  Failures say why in ch->msg. */
int rdma_chan_seg_usable(const rdma_chan_t * ch);
rdma_status_t rdma_chan_seg_make(rdma_chan_t * ch, size_t len, rdma_seg_t * seg);
rdma_status_t rdma_chan_seg_map(rdma_chan_t * ch, rdma_seg_t * seg);
void rdma_chan_seg_seal(rdma_chan_t * ch, rdma_seg_t * seg);
void rdma_chan_seg_free(rdma_chan_t * ch, rdma_seg_t * seg);

/* One-sided operations on window memory (rdma_xport_rma_ops_t).
 * win_expose makes [addr, addr+len) accessible over every open transport
 * that has them (len RDMA_CHAN_WIN_ALL: all of this process's memory, a
 * dynamic window's, over the transports that register nothing); *w
 * (plain data, the same size everywhere) is what the peers need (the
 * owner sends it to them), *h what unexpose needs.  A
 * transport that cannot expose (limits, said once in ch->msg) is left out
 * of w->ok: the peers it serves use messages.
 * rdma_chan_rma starts a put (get 0) or get of len bytes between local and
 * raddr in the memory l's peer exposed as *peer: RDMA_OK and *done = 1
 * when finished, *done = 0 when owner.rma_done(cookie) will say; else
 * the operation was not started (RDMA_ERR_NOMEM: not now; RDMA_ERR_REFUSED:
 * not over this link, or on a node below the link's zero-copy threshold or
 * where its large messages take the copy path; RDMA_ERR_PEER: it failed)
 * and the owner sends it as a message. */
typedef struct rdma_chan_wkey {
    uint64_t key[RDMA_XP_N];
    uint32_t ok;                /* bit k: exposed over transport k */
    uint32_t amo;               /* bit k: and its atomics work on it */
} rdma_chan_wkey_t;
#define RDMA_CHAN_WIN_ALL ((size_t) -1)
typedef struct rdma_chan_wh {
    void *h[RDMA_XP_N];
} rdma_chan_wh_t;

void rdma_chan_win_expose(rdma_chan_t * ch, void *addr, size_t len, rdma_chan_wkey_t * w,
                          rdma_chan_wh_t * h);
void rdma_chan_win_unexpose(rdma_chan_t * ch, const rdma_chan_wkey_t * w, rdma_chan_wh_t * h);
rdma_status_t rdma_chan_rma(rdma_chan_t * ch, rdma_link_t * l, int get, void *local, size_t len,
                            uint64_t raddr, const rdma_chan_wkey_t * peer, void *cookie,
                            int *done);
/* Would rdma_chan_rma take len bytes over l into *peer, or refuse
 * (RDMA_ERR_REFUSED)?  Asked before making the operation's cookie. */
int rdma_chan_rma_ok(const rdma_chan_t * ch, const rdma_link_t * l, size_t len,
                     const rdma_chan_wkey_t * peer);

/* Atomics (rdma_xport_amo_t) on window memory, where the transport's
 * atomics work on it (peer->amo).  Over l, at raddr of what its peer
 * exposed as *peer, reported by owner.rma_done(cookie); RDMA_ERR_NOMEM:
 * not yet, l is not connected (it starts connecting).  l NULL: on our own
 * memory (*peer ours), through the device, finished on return.
 * RDMA_ERR_REFUSED: not so (no atomics there).  amo_link: l (NULL:
 * ourselves) is served by a transport whose atomics work. */
rdma_status_t rdma_chan_atomic(rdma_chan_t * ch, rdma_link_t * l, const rdma_xport_amo_t * a,
                               uint64_t raddr, const rdma_chan_wkey_t * peer, void *cookie);
int rdma_chan_amo_link(const rdma_chan_t * ch, const rdma_link_t * l);

/* The rendezvous of large messages (src/ch3/rdma_rndv.c): the sender
 * exposes its buffer in the RTS, the receiver copies from it.
 * rndv_ok: may a message of len bytes to l's peer go this way?  Where l's
 * large parts go zero-copy (zc.h: not the copy path, not refused, not
 * backing off), from its threshold (from answered_min where the peer
 * answered our last frame), on a transport with rma ops.
 * rndv_expose: make [addr, addr+len) readable by l's peer (zc's expose:
 * the send cache over verbs, nothing on shm), *key for it, *handle for
 * rndv_unexpose (NULL: nothing to release).  rndv_split: where the
 * sender's part of a split copy starts (shm from zc's split_min; len: no
 * split).  rndv_copy: move len bytes between local and the peer's raddr
 * (get: from it); *done = 1: finished (CMA), else the transport reports
 * it with owner.rma_done(cookie) and l counts as busy until
 * rndv_copied.  RDMA_ERR_REFUSED: not permitted, RDMA_ERR_NOMEM: not now
 * (limits, queues), nothing moved either way. */
int rdma_chan_rndv_ok(const rdma_link_t * l, size_t len);
rdma_status_t rdma_chan_rndv_expose(rdma_link_t * l, const void *addr, size_t len,
                                    uint64_t * key, void **handle);
void rdma_chan_rndv_unexpose(rdma_link_t * l, void *handle);
size_t rdma_chan_rndv_split(const rdma_link_t * l, size_t len);
rdma_status_t rdma_chan_rndv_copy(rdma_link_t * l, int get, void *local, size_t len,
                                  uint64_t raddr, uint64_t key, void *cookie, int *done);
void rdma_chan_rndv_copied(rdma_link_t * l);

/* Count a large message sent by the channel's rendezvous (fallback 0),
 * or one that arrived so but went through CH3's (1). */
static inline void rdma_chan_rndv_count(rdma_chan_t * ch, int fallback)
{
    ch->rndv_count[fallback]++;
}

/* The owner sent a one-sided operation as a message (counted). */
static inline void rdma_chan_rma_message(rdma_chan_t * ch)
{
    ch->rma_count[2]++;
}

/* The owner started a put or get at the call, without CH3's queue. */
static inline void rdma_chan_rma_at_call(rdma_chan_t * ch)
{
    ch->rma_count[3]++;
}

/* The "<key>:<fragment>" token of card for key, copied to buf; 0 = ok. */
int rdma_chan_card_token(const char *card, const char *key, char *buf, size_t len);

#endif /* RDMA_CHAN_H_INCLUDED */
