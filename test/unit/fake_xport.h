/*
 * fake_xport: an in-process transport behind rdma_xport.h, for testing what
 * sits above the transport contract (rdma_link, the pipe, the rendezvous)
 * without MPICH, devices or other processes.  Header-only: include once per
 * test program.
 *
 * Every rank of a job is an rdma_xport_t in this process; ranks find each
 * other through a table per fabric: fake_xport and fake_xport2 are two
 * independent transports (to stand for shm and verbs side by side).
 * connect() creates this side's end and binds it at once; the peer's
 * progress() accepts (conn_of, admit, bind, ready), this side's next
 * progress() sees that and is ready too (once its owner admits it), so
 * every event comes from inside the rank's own calls, as the contract
 * says.  close() retires the end (c may connect again); a peer connecting
 * again while our old end is open waits until we closed it, as the
 * contract says.
 *
 * Faults (fake_faults, set by the test before traffic):
 *   defer_writes   writes land only at the receiver's next progress(), as
 *                  completion-driven arrivals (ev.landed), at most
 *                  FAKE_WINDOW uncredited (the pipe's write window)
 *   pull_max       bytes one pull() starts at most (0: all it is offered)
 *   defer_pulls    pulled bytes are reported at the next progress()
 *   refuse_pulls   pull() refuses (RDMA_ERR_REFUSED): the ring carries it
 *   fail_writes_after  the write after this many fails (0: never)
 *   split_writes   a write lands in two parts: its first half now, the
 *                  rest (with the frame's closing flag) at the receiver's
 *                  next progress() -- flag polling must wait for it
 *   kill_peer      rank+1: the next progress() of every other rank finds
 *                  its connection to that rank dead (FAILED, RDMA_ERR_PEER),
 *                  unless quiesce() closed it (the transport stopped looking)
 *   open2_fails    fake_xport2's open() fails as if there were no device
 *   zcopy_slow     what zcopy_slow() answers (LARGE_PROTOCOL=auto's probe)
 *   defer_rma      one-sided operations (rma ops: the peer's memory is
 *                  ours, copied at once) report rma_done at the next
 *                  progress(), in order, or RDMA_ERR_PEER when kill_peer
 *                  kills their connection first; else they finish at
 *                  once (*done); refuse_pulls refuses them too
 *   accept_at_close  close() admits the peer's new connect waiting for
 *                  that end at once (verbs: the channel thread answers its
 *                  REQ the moment close() let go of the connection, before
 *                  the owner's close returns); it is ready at our next
 *                  progress(), whatever c's state (verbs: adoption)
 */
#ifndef FAKE_XPORT_H_INCLUDED
#define FAKE_XPORT_H_INCLUDED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rdma_xport.h"

enum { FAKE_RANKS = 4, FAKE_QMAX = 1024, FAKE_WINDOW = 16 };

static struct fake_faults {
    int defer_writes, defer_pulls, refuse_pulls, split_writes, kill_peer, open2_fails;
    int zcopy_slow, accept_at_close, defer_rma;
    size_t pull_max;
    unsigned long fail_writes_after;
} fake_faults;

typedef struct fake_end fake_end_t;
struct fake_end {
    rdma_xport_t *xp;
    rdma_conn_t *c;
    fake_end_t *peer;           /* set by the accepting side */
    uint8_t *ring, *stage;      /* ring: the peer writes; stage: its image */
    volatile uint64_t tail_word, head_word;
    struct {
        size_t off, len;
        unsigned frames;
    } q[FAKE_QMAX];             /* deferred writes INTO this end's ring */
    unsigned qh, qt;
    size_t pulled_due;          /* deferred pull completions */
    void *rma_due[FAKE_QMAX];   /* deferred rma_done cookies */
    unsigned rh, rt;
    int accepted;
    int adopt;                  /* paired in close(): ready at next progress */
    fake_end_t *next_dead;      /* closed: kept until finalize (the peer's
                                 * late credit writes land here) */
};

struct rdma_xport {
    rdma_xport_params_t prm;
    int fabric;                 /* 0: fake_xport, 1: fake_xport2 */
    unsigned waits[3];          /* wait_arm, wait, wait_disarm calls */
    fake_end_t *end[FAKE_RANKS];
    fake_end_t *dead;           /* closed ends */
    unsigned long writes, progress;     /* write and progress() calls */
    char err[128];
};

static rdma_xport_t *fake_world[2][FAKE_RANKS];        /* one job at a time */

/* Queue [off, off+len) of e's stage to land in its peer's ring later. */
static int fake_defer(fake_end_t * e, size_t off, size_t len, unsigned frames)
{
    fake_end_t *p = e->peer;

    if (p->qt - p->qh == FAKE_QMAX)
        return -1;
    p->q[p->qt % FAKE_QMAX].off = off;
    p->q[p->qt % FAKE_QMAX].len = len;
    p->q[p->qt++ % FAKE_QMAX].frames = frames;
    return 0;
}

static rdma_status_t fake_write(void *ctx, size_t off, size_t len, unsigned frames)
{
    fake_end_t *e = ctx, *p = e->peer;

    if (fake_faults.fail_writes_after && ++e->xp->writes > fake_faults.fail_writes_after) {
        snprintf(e->xp->err, sizeof(e->xp->err), "fake: write to rank %d failed", e->c->peer);
        return -1;
    }
    if (fake_faults.split_writes) {
        memcpy(p->ring + off, e->stage + off, len / 2);
        return fake_defer(e, off + len / 2, len - len / 2, 0);
    }
    if (!fake_faults.defer_writes) {
        memcpy(p->ring + off, e->stage + off, len);
        return 0;
    }
    return fake_defer(e, off, len, frames);
}

static rdma_status_t fake_credit(void *ctx, uint64_t tail)
{
    ((fake_end_t *) ctx)->peer->tail_word = tail;
    return 0;
}

static rdma_status_t fake_head(void *ctx, uint64_t head)
{
    ((fake_end_t *) ctx)->peer->head_word = head;
    return 0;
}

static const rb_xport_ops_t fake_pipe_ops = { fake_write, fake_credit, fake_head, NULL, NULL, NULL, NULL, NULL };

static rdma_status_t fake_expose(void *ctx, const void *addr, size_t len, uint64_t * key,
                                 void **handle, int *hit)
{
    (void) ctx, (void) len;
    *key = 0;
    *handle = (void *) addr;
    *hit = 1;
    return 0;
}

static void fake_unexpose(void *ctx, void *handle)
{
    (void) ctx, (void) handle;
}

/* The peer's memory is ours: copy now, report now or at progress(). */
static rdma_status_t fake_pull(void *ctx, const struct iovec *dst, int n, uint64_t raddr,
                               uint64_t key, size_t len, size_t *posted)
{
    fake_end_t *e = ctx;
    size_t cap = fake_faults.pull_max ? fake_faults.pull_max : len, k;
    int i;

    (void) key;
    *posted = 0;
    if (fake_faults.refuse_pulls)
        return RDMA_ERR_REFUSED;
    for (i = 0; i < n && *posted < len && *posted < cap; i++) {
        k = dst[i].iov_len;
        k = k < len - *posted ? k : len - *posted;
        k = k < cap - *posted ? k : cap - *posted;
        memcpy(dst[i].iov_base, (const char *) (uintptr_t) raddr + *posted, k);
        *posted += k;
    }
    if (fake_faults.defer_pulls)
        e->pulled_due += *posted;
    else
        e->xp->prm.ev.pulled(e->c, *posted);
    return RDMA_OK;
}

static const zc_ops_t fake_zc_ops = { fake_expose, fake_unexpose, fake_pull, NULL, NULL };

static rdma_status_t fake_win_expose(rdma_xport_t * xp, void *addr, size_t len, uint64_t * key,
                                     void **handle)
{
    int hit;

    (void) xp;
    return fake_expose(NULL, addr, len, key, handle, &hit);
}

static void fake_win_unexpose(rdma_xport_t * xp, void *handle)
{
    (void) xp, (void) handle;
}

static rdma_status_t fake_rma(fake_end_t * e, void *dst, const void *src, size_t len,
                              void *cookie, int *done)
{
    *done = 0;
    if (fake_faults.refuse_pulls)
        return RDMA_ERR_REFUSED;
    memcpy(dst, src, len);
    *done = !fake_faults.defer_rma;
    if (!*done)
        e->rma_due[e->rh++ % FAKE_QMAX] = cookie;
    return RDMA_OK;
}

static rdma_status_t fake_rma_put(void *ctx, const void *src, size_t len, uint64_t raddr,
                                  uint64_t key, void *cookie, int *done)
{
    (void) key;
    return fake_rma(ctx, (void *) (uintptr_t) raddr, src, len, cookie, done);
}

static rdma_status_t fake_rma_get(void *ctx, void *dst, size_t len, uint64_t raddr,
                                  uint64_t key, void *cookie, int *done)
{
    (void) key;
    return fake_rma(ctx, dst, (const void *) (uintptr_t) raddr, len, cookie, done);
}

/* e's deferred one-sided operations end with st. */
static void fake_rma_report(fake_end_t * e, rdma_status_t st)
{
    for (; e->rt != e->rh; e->rt++)
        e->xp->prm.ev.rma_done(e->xp->prm.ev.arg, e->c, e->rma_due[e->rt % FAKE_QMAX], st);
}

static const rdma_xport_rma_ops_t fake_rma_ops = {
    .expose = fake_win_expose, .unexpose = fake_win_unexpose, .put = fake_rma_put,
    .get = fake_rma_get, .all_memory = 1
};

static rdma_status_t fake_open_in(int fabric, const rdma_xport_params_t * prm, rdma_xport_t ** xpp,
                                  char *card, size_t cardlen, char *err, size_t errlen)
{
    rdma_xport_t *xp;

    if (prm->rank < 0 || prm->rank >= FAKE_RANKS || fake_world[fabric][prm->rank]) {
        snprintf(err, errlen, "fake: rank %d taken or out of range", prm->rank);
        return RDMA_ERR_XPORT;
    }
    xp = calloc(1, sizeof(*xp));
    if (!xp)
        return RDMA_ERR_NOMEM;
    xp->prm = *prm;
    xp->fabric = fabric;
    fake_world[fabric][prm->rank] = xp;
    snprintf(card, cardlen, "fake%d.%d", fabric, prm->rank);
    *xpp = xp;
    return RDMA_OK;
}

static rdma_status_t fake_open(const rdma_xport_params_t * prm, rdma_xport_t ** xpp, char *card,
                               size_t cardlen, char *err, size_t errlen)
{
    return fake_open_in(0, prm, xpp, card, cardlen, err, errlen);
}

static __attribute__((unused))
rdma_status_t fake_open2(const rdma_xport_params_t * prm, rdma_xport_t ** xpp, char *card,
                         size_t cardlen, char *err, size_t errlen)
{
    if (fake_faults.open2_fails)
        return rdma_say(err, errlen, RDMA_ERR_NODEV, "fake2: no device");
    return fake_open_in(1, prm, xpp, card, cardlen, err, errlen);
}

static fake_end_t *fake_end_new(rdma_xport_t * xp, rdma_conn_t * c)
{
    fake_end_t *e = calloc(1, sizeof(*e));
    rdma_xport_t *px = fake_world[xp->fabric][c->peer];
    rdma_conn_mem_t mem = { 0 };

    if (!e || !(e->ring = calloc(1, xp->prm.ring_size)) || !(e->stage =
                                                               calloc(1, xp->prm.ring_size)))
        return NULL;
    e->xp = xp;
    e->c = c;
    c->priv = e;
    c->xport = xp;
    xp->end[c->peer] = e;
    mem = (rdma_conn_mem_t) { e->stage, &e->tail_word, e->ring, &e->head_word,
        fake_faults.defer_writes, fake_faults.defer_writes ? FAKE_WINDOW : 0, 0,
        px->prm.max_frame };
    return xp->prm.ev.bind(xp->prm.ev.arg, c, &mem) ? NULL : e;
}

static rdma_status_t fake_connect(rdma_xport_t * xp, rdma_conn_t * c)
{
    if (c->peer < 0 || c->peer >= FAKE_RANKS || !fake_world[xp->fabric][c->peer])
        return snprintf(xp->err, sizeof(xp->err), "fake: no rank %d", c->peer), RDMA_ERR_PEER;
    if (xp->end[c->peer])
        return RDMA_OK;
    if (!fake_end_new(xp, c))
        return RDMA_ERR_NOMEM;
    c->state = RDMA_CONN_CONNECTING;
    return RDMA_OK;
}

static void fake_ready(rdma_xport_t * xp, fake_end_t * e)
{
    e->c->state = RDMA_CONN_READY;
    xp->prm.ev.ready(xp->prm.ev.arg, e->c);
}

/* A peer's connect makes c's end if the owner admits it (else it waits:
 * asked again at our next progress). */
static fake_end_t *fake_admit(rdma_xport_t * xp, rdma_conn_t * c)
{
    fake_end_t *e;

    if (!rdma_xport_admit(&xp->prm.ev, c, 1))
        return NULL;
    if (!(e = fake_end_new(xp, c)))
        rdma_xport_admit(&xp->prm.ev, c, 0);
    return e;
}

static void fake_pair(fake_end_t * mine, fake_end_t * theirs)
{
    mine->peer = theirs;
    theirs->peer = mine;
    theirs->accepted = 1;
}

/* Accept peers that connected to us; finish our own connects. */
static void fake_accept(rdma_xport_t * xp)
{
    int r;

    for (r = 0; r < FAKE_RANKS; r++) {
        rdma_xport_t *px = fake_world[xp->fabric][r];
        fake_end_t *theirs = px && r != xp->prm.rank ? px->end[xp->prm.rank] : NULL, *mine;
        rdma_conn_t *c;

        if (!theirs || theirs->peer)
            continue;
        mine = xp->end[r];
        if (mine && mine->peer)
            continue;           /* they connect again; our old end is still open */
        /* both connect at once: ours pairs too, once admitted */
        if (mine ? !rdma_xport_admit(&xp->prm.ev, mine->c, 1)
            : !(c = xp->prm.ev.conn_of(xp->prm.ev.arg, r)) || !(mine = fake_admit(xp, c)))
            continue;
        fake_pair(mine, theirs);
        fake_ready(xp, mine);
    }
    for (r = 0; r < FAKE_RANKS; r++) {
        fake_end_t *e = xp->end[r];

        if (e && (e->adopt || (e->accepted && e->c->state == RDMA_CONN_CONNECTING
                               && rdma_xport_admit(&xp->prm.ev, e->c, 1)))) {
            e->adopt = 0;
            fake_ready(xp, e);
        }
    }
}

/* accept_at_close: the peer's connect that waited for c's old end. */
static void fake_accept_at_close(rdma_xport_t * xp, rdma_conn_t * c)
{
    rdma_xport_t *px = fake_world[xp->fabric][c->peer];
    fake_end_t *theirs = px ? px->end[xp->prm.rank] : NULL, *mine;

    if (!theirs || theirs->peer || !(mine = fake_admit(xp, c)))
        return;
    fake_pair(mine, theirs);
    mine->adopt = 1;
}

/* kill_peer: our connection to that rank dies. */
static rdma_status_t fake_kill(rdma_xport_t * xp)
{
    int r = fake_faults.kill_peer - 1;
    char why[64];

    if (r < 0 || r == xp->prm.rank || !xp->end[r] || xp->end[r]->c->state == RDMA_CONN_FAILED
        || xp->end[r]->c->state == RDMA_CONN_CLOSED)
        return RDMA_OK;
    snprintf(why, sizeof(why), "fake: connection to rank %d died", r);
    snprintf(xp->err, sizeof(xp->err), "%s", why);
    fake_rma_report(xp->end[r], RDMA_ERR_PEER);
    return rdma_conn_failed(xp->end[r]->c, why);
}

/* Land deferred writes into our rings, report deferred pulls and
 * one-sided operations (those of a connection kill_peer kills: fake_kill). */
static rdma_status_t fake_progress(rdma_xport_t * xp)
{
    int r;

    xp->progress++;
    fake_accept(xp);
    for (r = 0; r < FAKE_RANKS; r++) {
        fake_end_t *e = xp->end[r];

        for (; e && e->peer && e->qh != e->qt; e->qh++) {
            size_t off = e->q[e->qh % FAKE_QMAX].off;

            memcpy(e->ring + off, e->peer->stage + off, e->q[e->qh % FAKE_QMAX].len);
            if (e->q[e->qh % FAKE_QMAX].frames)
                xp->prm.ev.landed(e->c, e->q[e->qh % FAKE_QMAX].frames);
        }
        if (e && e->pulled_due) {
            size_t k = e->pulled_due;

            e->pulled_due = 0;
            xp->prm.ev.pulled(e->c, k);
        }
        if (e && r != fake_faults.kill_peer - 1)
            fake_rma_report(e, RDMA_OK);
    }
    return fake_kill(xp) != RDMA_OK ? RDMA_ERR_PEER : RDMA_OK;    /* after what landed */
}

/* The end goes (c may connect again); its memory stays until finalize. */
static rdma_status_t fake_close(rdma_xport_t * xp, rdma_conn_t * c)
{
    fake_end_t *e = c->priv;

    if (e && xp->end[c->peer] == e) {
        xp->end[c->peer] = NULL;
        e->next_dead = xp->dead;
        xp->dead = e;
        c->priv = NULL;
    }
    c->state = RDMA_CONN_CLOSED;
    if (fake_faults.accept_at_close)
        fake_accept_at_close(xp, c);
    return RDMA_OK;
}

static void fake_end_free(fake_end_t * e)
{
    free(e->ring);
    free(e->stage);
    free(e);
}

static rdma_status_t fake_finalize(rdma_xport_t * xp)
{
    fake_end_t *e;
    int r;

    for (r = 0; r < FAKE_RANKS; r++)
        if (xp->end[r])
            fake_end_free(xp->end[r]);
    while ((e = xp->dead)) {
        xp->dead = e->next_dead;
        fake_end_free(e);
    }
    fake_world[xp->fabric][xp->prm.rank] = NULL;
    free(xp);
    return RDMA_OK;
}

static const char *fake_error(const rdma_xport_t * xp)
{
    return xp->err;
}

static int fake_describe(const rdma_conn_t * c, char *buf, size_t len)
{
    return snprintf(buf, len, "fake peer=%d", c->peer);
}

/* Blocking waits only count (a test checks which transport was asked). */
static int fake_wait_arm(rdma_xport_t * xp)
{
    return ++xp->waits[0] > 0;
}

static void fake_wait(rdma_xport_t * xp, long timeout_us)
{
    (void) timeout_us;
    xp->waits[1]++;
}

static void fake_wait_disarm(rdma_xport_t * xp)
{
    xp->waits[2]++;
}

static int fake_zcopy_slow(rdma_xport_t * xp, char *why, size_t len)
{
    (void) xp;
    snprintf(why, len, "fake: zero-copy %s", fake_faults.zcopy_slow ? "slow" : "fast");
    return fake_faults.zcopy_slow;
}

#define FAKE_OPS(name_, open_)                                                  \
    {.name = name_,.open = open_,.connect = fake_connect,.progress = fake_progress, \
     .quiesce = rdma_xport_quiesce_plain,                                        \
     .close = fake_close,.finalize = fake_finalize,.error = fake_error,            \
     .describe = fake_describe,.wait_arm = fake_wait_arm,.wait = fake_wait,        \
     .wait_disarm = fake_wait_disarm,.pipe_ops = &fake_pipe_ops,.zc = &fake_zc_ops, \
     .rma = &fake_rma_ops,.zcopy_slow = fake_zcopy_slow}
static const rdma_xport_ops_t fake_xport = FAKE_OPS("fake", fake_open);
static const __attribute__((unused)) rdma_xport_ops_t fake_xport2 = FAKE_OPS("fake2", fake_open2);

#endif /* FAKE_XPORT_H_INCLUDED */
