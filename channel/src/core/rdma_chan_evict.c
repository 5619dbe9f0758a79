/*
 * rdma_chan_evict.c -- a cap on live connections (rdma_chan.h,
 * cfg.max_conns): above it the least recently used quiet connection over
 * the wire closes, and opens again on demand (rdma_chan_connect).  The
 * memory a process holds for its connections then follows the cap, not
 * the number of peers it ever talked to.  Only links of the job's ranks
 * over a transport that crosses a NIC (ops->wire) count; shm peers cost
 * little and a peer outside the job has a close protocol of its own.
 *
 * The close is a BYE frame each way in the pipe (zc.h, ZC_FRAME_BYE):
 *   - The evicting side picks a READY link that is quiet (its owner queued
 *     nothing, owner.quiet; no rendezvous or eager write under way,
 *     rdma_link_busy), sends BYE and goes CLOSING: from then on it writes
 *     no data, only the FIN and PUSHED of a rendezvous the peer began before
 *     it read the BYE.  Its puts wait (put_slow: 0 bytes) and it keeps
 *     reading what the peer wrote before the peer's own BYE.
 *   - The peer reads the BYE (rdma_chan_getv -> getv_end, also when the
 *     same read returned data: the owner reads again only once something
 *     lands, and nothing lands behind a BYE) and stays READY until it is
 *     quiet too (a message half sent finishes first, a stream
 *     drains), then answers BYE and goes CLOSING.
 *   - Each side closes once it has sent its BYE, read the peer's and no
 *     rendezvous is under way: everything either side wrote before its BYE
 *     was read, so no byte is lost; CH3's stream continues on the next
 *     connection where it stopped.  quiesce() first (the peer may close
 *     its end at once: late credit writes failing there are no error),
 *     then close() (waits until our last frames landed), then IDLE; the
 *     owner hears owner.evicted and reconnects if something waits.
 *   - Both sides evicting at once: each sent BYE and reads the other's:
 *     the same rule closes both.  A frame racing the BYE (the peer wrote it
 *     before reading our BYE) is read before the peer's BYE, as the pipe
 *     is ordered.
 *   - Reconnecting while the other side still holds the old connection
 *     (it has not polled since it sent its BYE): the transport keeps the
 *     new request waiting, alive, until that side closed (rdma_xport.h,
 *     close(); verbs: a WAIT answer extends the request's deadline).
 *   - A peer that dies meanwhile fails the link as any READY one: the
 *     transport treats CLOSING as READY.  A link that fails after it sent
 *     its BYE may only see the peer's orderly close (the peer read our BYE,
 *     answered and destroyed its end before we polled; our credit or
 *     keepalive writes then fail): if the peer's BYE is among what landed,
 *     the close completes and no failure is reported
 *     (rdma_chan_evict_failed).
 * Admission: a connection takes a slot of the cap at each end, and
 * holds it until it ends (rdma_chan_quiesce: evicted, closed by the
 * owner's close protocol, failed).  The lower rank's slot is taken
 * first: a connect to a higher rank takes ours before it starts (at the
 * cap it waits in waitq; CH3's puts return 0 bytes and queue), the
 * peer's then when it admits the request (ev.admit, which the channel
 * thread may ask); a connect to a lower rank starts without ours, and
 * takes it when the peer's answer arrives.  At most the cap of those
 * are under way at once (ch->low; the others wait in waitq): each holds
 * its transport's memory (a queue pair) while the peer keeps it
 * waiting.  A side not admitted keeps the other waiting, alive (verbs:
 * WAIT).  Any waiting makes the look close the least recently used
 * quiet link, one at a time; the freed slot goes to the oldest waiting
 * connect, or to the peer that asks again first.  So at most the cap
 * are ever READY or CLOSING (rdma_conns_live_max), and twice the cap
 * hold transport memory.
 * Deadlock: a side that holds slots waits only for a higher rank's slot, or for one of its own links to go quiet,
 * which needs only the peer's reads, never a message from a third
 * process (CH3's rendezvous queues its data only after the receiver's
 * CTS): no cycle of waits.  A connect held back by ch->low holds
 * nothing; it waits for connects that need only lower ranks' slots and
 * ours.  (Taking our own slot first whatever the peer, every process
 * could hold all its slots in connects that its peers, at their caps,
 * keep waiting.)
 * Without the cap no slot is taken.
 * LRU: each look (every 1024th poll, rdma_chan_live_look, every poll while
 * something waits, and each new connection) compares every live link's
 * frame count with the last one seen: links whose count moved are stamped
 * with this look; the oldest stamp among the quiet ones goes.
 * live[], waitq: owner only (the channel thread never reads them).
 */
#include <stdlib.h>
#include <string.h>
#include "rdma_chan.h"

/* v (*room entries of `size` bytes) with twice the room, 8 at first; NULL:
 * no memory (said in ch->msg; v stays). */
static void *rdma_chan_grow(rdma_chan_t * ch, void *v, int *room, size_t size)
{
    int n = *room ? 2 * *room : 8;
    void *p = realloc(v, (size_t) n * size);

    if (!p)
        rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_NOMEM, "out of memory");
    else
        *room = n;
    return p;
}

/* --- admission: the cap's slots ------------------------------------------ */

/* l->slot: 0 none, 1 held, 2 waiting in waitq (the owner's mark; a slot
 * taken by the thread meanwhile turns it into 1), 3 connecting to a lower
 * rank without a slot, counted in ch->low (slot_take turns it into 1). */
enum { RDMA_SLOT_NONE, RDMA_SLOT_HELD, RDMA_SLOT_WAIT, RDMA_SLOT_LOW };

static int rdma_chan_capped(const rdma_chan_t * ch, const rdma_link_t * l)
{
    return ch->cfg.max_conns && l->xc.peer < ch->size && l->xc.ops && l->xc.ops->wire;
}

int rdma_chan_slot_take(rdma_chan_t * ch, rdma_link_t * l)
{
    int n = __atomic_load_n(&ch->slots, __ATOMIC_RELAXED);

    if (!rdma_chan_capped(ch, l) || __atomic_load_n(&l->slot, __ATOMIC_RELAXED) == RDMA_SLOT_HELD)
        return 1;
    do {
        if (n >= ch->cfg.max_conns)
            return 0;
    } while (!__atomic_compare_exchange_n(&ch->slots, &n, n + 1, 0, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    switch (__atomic_exchange_n(&l->slot, RDMA_SLOT_HELD, __ATOMIC_RELAXED)) {
    case RDMA_SLOT_HELD:       /* the other thread took one for l meanwhile */
        __atomic_fetch_sub(&ch->slots, 1, __ATOMIC_RELAXED);
        break;
    case RDMA_SLOT_LOW:        /* its connect is counted by the slot now */
        __atomic_fetch_sub(&ch->low, 1, __ATOMIC_RELAXED);
        break;
    }
    return 1;
}

/* Clear l's mark: the count its slot (or connect to a lower rank) is in,
 * NULL if none.  A slot_take for l after this takes a slot of its own. */
static int *rdma_chan_slot_unmark(rdma_chan_t * ch, rdma_link_t * l)
{
    int held = RDMA_SLOT_HELD, low = RDMA_SLOT_LOW;

    if (__atomic_compare_exchange_n(&l->slot, &held, RDMA_SLOT_NONE, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        return &ch->slots;
    if (__atomic_compare_exchange_n(&l->slot, &low, RDMA_SLOT_NONE, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        return &ch->low;
    return NULL;
}

static void rdma_chan_slot_put(int *count)
{
    if (count)
        __atomic_fetch_sub(count, 1, __ATOMIC_RELAXED);
}

void rdma_chan_slot_give(rdma_chan_t * ch, rdma_link_t * l)
{
    rdma_chan_slot_put(rdma_chan_slot_unmark(ch, l));
}

/* A connect to a lower rank starts without a slot while fewer than the
 * cap do (owner only: ch->low only falls meanwhile); 1 if l may go. */
static int rdma_chan_low_take(rdma_chan_t * ch, rdma_link_t * l)
{
    int none = RDMA_SLOT_NONE;

    if (!rdma_chan_capped(ch, l))
        return 1;
    if (__atomic_load_n(&ch->low, __ATOMIC_RELAXED) >= ch->cfg.max_conns)
        return 0;
    __atomic_fetch_add(&ch->low, 1, __ATOMIC_RELAXED);
    /* a peer's request took a slot for l meanwhile (or it held one) */
    if (!__atomic_compare_exchange_n(&l->slot, &none, RDMA_SLOT_LOW, 0, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        __atomic_fetch_sub(&ch->low, 1, __ATOMIC_RELAXED);
    return 1;
}

/* Whether l's connect could start now (the oldest waiting one goes). */
static int rdma_chan_slot_free(const rdma_chan_t * ch, const rdma_link_t * l)
{
    return __atomic_load_n(l->xc.peer < ch->rank ? &ch->low : &ch->slots, __ATOMIC_RELAXED)
        < ch->cfg.max_conns;
}

/* l waits for a slot: queued once, connected by wait_run. */
static rdma_status_t rdma_chan_slot_wait(rdma_chan_t * ch, rdma_link_t * l)
{
    int none = RDMA_SLOT_NONE;
    rdma_link_t **q = ch->waitq;

    if (ch->nwait == ch->wait_room && !(q = rdma_chan_grow(ch, q, &ch->wait_room, sizeof(*q))))
        return RDMA_ERR_NOMEM;
    ch->waitq = q;
    /* queued already, or a peer's request took a slot for l: it connects */
    if (__atomic_compare_exchange_n(&l->slot, &none, RDMA_SLOT_WAIT, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
        ch->waitq[ch->nwait++] = l;
    ch->live_over = 1;
    return RDMA_OK;
}

rdma_status_t rdma_chan_slot_get(rdma_chan_t * ch, rdma_link_t * l, int *go)
{
    /* to a lower rank: its slot first (ev.admit there), then ours (ev.admit
     * here, on its answer); a waiting link connects in turn, not when its
     * owner retries a put */
    *go = __atomic_load_n(&l->slot, __ATOMIC_RELAXED) != RDMA_SLOT_WAIT
        && (l->xc.peer < ch->rank ? rdma_chan_low_take(ch, l) : rdma_chan_slot_take(ch, l));
    return *go ? RDMA_OK : rdma_chan_slot_wait(ch, l);
}

void rdma_chan_quiesce(rdma_chan_t * ch, rdma_link_t * l)
{
    rdma_chan_slot_give(ch, l);
    rdma_link_quiesce(l);
}

/* Drop the links that wait no more from waitq: the peer's request took a
 * slot for them, or they failed meanwhile. */
static void rdma_chan_wait_prune(rdma_chan_t * ch)
{
    int i, n = 0;

    for (i = 0; i < ch->nwait; i++) {
        rdma_link_t *l = ch->waitq[i];
        int wait = RDMA_SLOT_WAIT;

        if (l->xc.state == RDMA_CONN_IDLE
            && __atomic_load_n(&l->slot, __ATOMIC_RELAXED) == RDMA_SLOT_WAIT)
            ch->waitq[n++] = l;
        else
            __atomic_compare_exchange_n(&l->slot, &wait, RDMA_SLOT_NONE, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
    }
    ch->nwait = n;
}

/* Connect the oldest waiting links while they may start.  A connect that
 * fails now fails its link, as a failed connection would (owner.failed). */
static rdma_status_t rdma_chan_wait_run(rdma_chan_t * ch)
{
    rdma_status_t st = RDMA_OK;
    int i = 0;

    while (i < ch->nwait && st == RDMA_OK && rdma_chan_slot_free(ch, ch->waitq[i])) {
        rdma_link_t *l = ch->waitq[i++];
        int wait = RDMA_SLOT_WAIT;

        if (!__atomic_compare_exchange_n(&l->slot, &wait, RDMA_SLOT_NONE, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED) || l->xc.state != RDMA_CONN_IDLE)
            continue;           /* waits no more (rdma_chan_wait_prune) */
        if (rdma_chan_connect(ch, l) != RDMA_OK) {
            rdma_conn_failed(&l->xc, ch->msg);
            st = ch->owner.failed(ch->owner.arg, l);
        }
    }
    memmove(ch->waitq, ch->waitq + i, (size_t) (ch->nwait - i) * sizeof(*ch->waitq));
    ch->nwait -= i;
    return st;
}

static int rdma_chan_live_find(const rdma_chan_t * ch, const rdma_link_t * l)
{
    int i;

    for (i = 0; i < ch->nlive && ch->live[i].l != l; i++)
        ;
    return i < ch->nlive ? i : -1;
}

static rdma_status_t rdma_chan_live_push(rdma_chan_t * ch, rdma_link_t * l)
{
    rdma_chan_live_t *v = ch->live;

    if (ch->nlive == ch->live_room && !(v = rdma_chan_grow(ch, v, &ch->live_room, sizeof(*v))))
        return RDMA_ERR_NOMEM;
    ch->live = v;
    ch->live[ch->nlive++] = (rdma_chan_live_t) { l, l->pipe.stats.frames_tx
        + l->pipe.stats.frames_rx, ch->live_looks, 0, 0 };
    return RDMA_OK;
}

static void rdma_chan_live_drop(rdma_chan_t * ch, int i)
{
    ch->nclosing -= ch->live[i].bye_in || ch->live[i].bye_out;
    ch->live[i] = ch->live[--ch->nlive];
}

static int rdma_chan_quiet(const rdma_chan_t * ch, rdma_link_t * l, int answer)
{
    return !rdma_link_busy(l) && (!ch->owner.quiet || ch->owner.quiet(ch->owner.arg, l, answer));
}

/* The least recently used quiet READY link but `keep`, or -1. */
static int rdma_chan_victim(rdma_chan_t * ch, const rdma_link_t * keep)
{
    unsigned best = 0;
    int i, v = -1;

    for (i = 0; i < ch->nlive; i++) {
        const rdma_chan_live_t *e = &ch->live[i];

        if (e->l != keep && e->l->xc.state == RDMA_CONN_READY && !e->bye_in
            && (v < 0 || ch->live_looks - e->tick > best) && rdma_chan_quiet(ch, e->l, 0)) {
            v = i;
            best = ch->live_looks - e->tick;
        }
    }
    return v;
}

/* Send our BYE (once there is room) and go CLOSING. */
static rdma_status_t rdma_chan_bye(rdma_chan_t * ch, rdma_chan_live_t * e)
{
    int sent = 0;
    rdma_status_t st;

    if (!e->bye_in && !e->bye_out)
        ch->nclosing++;
    if (e->l->xc.state == RDMA_CONN_READY) {
        rdma_link_closing(e->l);        /* our last frames: their landing is awaited */
        e->l->xc.state = RDMA_CONN_CLOSING;
    }
    e->bye_out = 1;
    st = zc_bye(&e->l->zc, &sent);
    if (sent)
        e->bye_out = 2;
    return st == RDMA_OK ? RDMA_OK : rdma_chan_fail(ch, e->l, st);
}

/* Close the least recently used quiet links but keep while more than the
 * cap are READY (a link uncounted for want of memory), or one while
 * something waits for a slot and none closes yet (FAILED ones leave
 * live[]: they stay so); the peak counts the READY and CLOSING ones. */
static void rdma_chan_live_trim(rdma_chan_t * ch, const rdma_link_t * keep)
{
    unsigned look = ++ch->live_looks;
    int ready = 0, i = 0, evict, want;

    rdma_chan_wait_prune(ch);
    want = ch->nwait || __atomic_exchange_n(&ch->slot_want, 0, __ATOMIC_RELAXED);

    while (i < ch->nlive) {
        rdma_chan_live_t *e = &ch->live[i];
        uint64_t m = e->l->pipe.stats.frames_tx + e->l->pipe.stats.frames_rx;

        if (e->l->xc.state != RDMA_CONN_READY && e->l->xc.state != RDMA_CONN_CLOSING) {
            rdma_chan_live_drop(ch, i);
            continue;
        }
        if (m != e->mark) {
            e->mark = m;
            e->tick = look;
        }
        ready += e->l->xc.state == RDMA_CONN_READY && !e->bye_in;
        i++;
    }
    if ((uint64_t) ch->nlive > ch->conns_peak)
        ch->conns_peak = (uint64_t) ch->nlive;
    evict = ready - ch->cfg.max_conns;
    if (evict < 1 && want && !ch->nclosing
        && __atomic_load_n(&ch->slots, __ATOMIC_RELAXED) >= ch->cfg.max_conns)
        evict = 1;
    /* a failed BYE write fails the link: the transport reports it */
    for (; evict > 0 && (i = rdma_chan_victim(ch, keep)) >= 0
         && rdma_chan_bye(ch, &ch->live[i]) == RDMA_OK; evict--)
        ready--;
    ch->live_over = ready > ch->cfg.max_conns || ch->nwait;
}

/* Without memory for its entry l is not counted (it stays open). */
void rdma_chan_live_add(rdma_chan_t * ch, rdma_link_t * l)
{
    ch->conns_opened++;
    if (ch->cfg.max_conns && rdma_chan_live_push(ch, l) == RDMA_OK)
        rdma_chan_live_trim(ch, l);
}

rdma_status_t rdma_chan_live_look(rdma_chan_t * ch)
{
    rdma_status_t st;

    if (!ch->cfg.max_conns)
        return RDMA_OK;
    st = rdma_chan_wait_run(ch);
    rdma_chan_live_trim(ch, NULL);
    return st;
}

/* l's connection ends for good: its counts kept, closed, IDLE (a later
 * use connects again); its slot counts until its memory went.  l's mark
 * goes first: the channel thread may admit the peer's next request the
 * moment close() let go of the connection (verbs: c->priv cleared under
 * cm_lock), and that one must take a slot of its own, not find the old
 * one's still held (it did, and ran without one: 3 open at a cap of 2). */
static void rdma_chan_shut(rdma_chan_t * ch, rdma_link_t * l)
{
    int *count = rdma_chan_slot_unmark(ch, l);

    rdma_chan_link_sum(&ch->gone, l);
    rdma_link_quiesce(l);
    l->xc.ops->close(l->xc.xport, &l->xc);
    l->xc.state = RDMA_CONN_IDLE;
    rdma_chan_slot_put(count);
}

/* Both BYEs passed and nothing is under way: close, IDLE, tell the owner. */
static rdma_status_t rdma_chan_evict_done(rdma_chan_t * ch, int i)
{
    rdma_link_t *l = ch->live[i].l;

    rdma_chan_shut(ch, l);
    rdma_chan_live_drop(ch, i);
    ch->conns_evicted++;
    return ch->owner.evicted ? ch->owner.evicted(ch->owner.arg, l) : RDMA_OK;
}

void rdma_chan_close(rdma_chan_t * ch, rdma_link_t * l)
{
    int i;

    if (!rdma_chan_capped(ch, l)
        || (l->xc.state != RDMA_CONN_READY && l->xc.state != RDMA_CONN_CLOSING)) {
        rdma_chan_quiesce(ch, l);
        return;
    }
    if ((i = rdma_chan_live_find(ch, l)) >= 0)
        rdma_chan_live_drop(ch, i);
    rdma_chan_shut(ch, l);
}

/* live[i] sent its BYE, then FAILED: the peer may have closed in order
 * (it read our BYE, answered and destroyed its end, and our credit or
 * keepalive writes to it failed), or died.  Its BYE, if it came, landed
 * before its end went (close() waits for that), so: BYE read -> the
 * close completes, no failure; nothing more to read without it -> a real
 * failure, which the owner's reads report (rdma_chan_getv); else the
 * owner reads what landed first. */
static rdma_status_t rdma_chan_evict_failed(rdma_chan_t * ch, int i, int *gone)
{
    rdma_link_t *l = ch->live[i].l;
    size_t nb;

    if (!l->zc.rx.active && rdma_link_getv(l, NULL, 0, &nb) != RDMA_OK)
        l->zc.bye_rx = 0;       /* a broken pipe: no BYE to trust */
    if (l->zc.bye_rx || ch->live[i].bye_in) {
        l->zc.bye_rx = 0;
        *gone = 1;
        return rdma_chan_evict_done(ch, i);
    }
    if (!rb_pipe_rx_maybe(&l->pipe)) {
        rdma_chan_live_drop(ch, i);
        *gone = 1;
    }
    return RDMA_OK;
}

/* One step of live[i]'s close; *gone: it left live[]. */
static rdma_status_t rdma_chan_evict_step(rdma_chan_t * ch, int i, int *gone)
{
    rdma_chan_live_t *e = &ch->live[i];
    rdma_link_t *l = e->l;
    size_t nb;
    rdma_status_t st = RDMA_OK;

    *gone = 0;
    if (l->xc.state == RDMA_CONN_FAILED && e->bye_out == 2)
        return rdma_chan_evict_failed(ch, i, gone);
    if (l->xc.state != RDMA_CONN_READY && l->xc.state != RDMA_CONN_CLOSING) {
        rdma_chan_live_drop(ch, i);     /* FAILED (the owner was told) or quiesced */
        *gone = 1;
        return RDMA_OK;
    }
    /* control frames only (FIN, BYE); a pull under way reads into the
     * owner's iov, whose reads take them then */
    if (l->xc.state == RDMA_CONN_CLOSING && !l->zc.rx.active
        && (st = rdma_link_getv(l, NULL, 0, &nb)) != RDMA_OK)
        return rdma_chan_fail(ch, l, st);
    e->bye_in |= l->zc.bye_rx;
    l->zc.bye_rx = 0;
    if (e->bye_out < 2 && (e->bye_out || rdma_chan_quiet(ch, l, 1))
        && (st = rdma_chan_bye(ch, e)) != RDMA_OK)
        return st;
    if (e->bye_out == 2 && e->bye_in && !rdma_link_busy(l)) {
        *gone = 1;
        return rdma_chan_evict_done(ch, i);
    }
    return RDMA_OK;
}

rdma_status_t rdma_chan_evict_run(rdma_chan_t * ch)
{
    rdma_status_t st = RDMA_OK;
    int i = 0, gone;

    while (i < ch->nlive && st == RDMA_OK) {
        if (!ch->live[i].bye_in && !ch->live[i].bye_out) {
            i++;
            continue;
        }
        st = rdma_chan_evict_step(ch, i, &gone);
        i += !gone;
    }
    return st;
}

rdma_status_t rdma_chan_getv_end(rdma_chan_t * ch, rdma_link_t * l)
{
    int i;

    if (l->xc.state == RDMA_CONN_FAILED) {
        int gone;
        rdma_status_t st;

        i = rdma_chan_live_find(ch, l);
        if (i >= 0 && ch->live[i].bye_out == 2
            && ((st = rdma_chan_evict_failed(ch, i, &gone)) != RDMA_OK
                || l->xc.state == RDMA_CONN_IDLE))
            return st;          /* closed in order after all */
        return l->fail_reads ? rdma_chan_fail(ch, l, RDMA_ERR_PEER) : RDMA_OK;
    }
    if (l->xc.state != RDMA_CONN_READY)
        return RDMA_OK;         /* CLOSING: rdma_chan_evict_step takes the BYE */
    l->zc.bye_rx = 0;           /* the peer's BYE: close once quiet */
    if ((i = rdma_chan_live_find(ch, l)) < 0) {
        rdma_status_t st = rdma_chan_live_push(ch, l);

        if (st != RDMA_OK)
            return st;
        i = ch->nlive - 1;
    }
    ch->live[i].bye_in = 1;
    ch->nclosing++;
    return RDMA_OK;
}

void rdma_chan_live_free(rdma_chan_t * ch)
{
    free(ch->live);
    free(ch->waitq);
    ch->live = NULL;
    ch->waitq = NULL;
    ch->nlive = ch->live_room = ch->nclosing = ch->nwait = ch->wait_room = 0;
}
