/*
 * rdma_chan.c -- the channel's core over its links (rdma_chan.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include "rdma_chan.h"

static const char *const rdma_chan_keys[RDMA_XP_N] = { "shm", "ib" };

void rdma_chan_init(rdma_chan_t * ch, const rdma_chan_config_t * cfg,
                    const rdma_xport_ops_t * const ops[RDMA_XP_N], int rank, int size,
                    const char *job, const rdma_chan_owner_t * owner)
{
    int k;

    memset(ch, 0, sizeof(*ch));
    ch->cfg = *cfg;
    ch->rank = rank;
    ch->size = size;
    ch->job = job;
    ch->owner = *owner;
    rdma_thread_init(&ch->thread);
    for (k = 0; k < RDMA_XP_N; k++)
        ch->xp[k] = (rdma_chan_xport_t) { ops[k], NULL, rdma_chan_keys[k], ch };
}

rdma_status_t rdma_chan_assign(rdma_chan_t * ch, const int *node)
{
    rdma_transport_choice_t t = ch->cfg.transport;
    int i, k;

    for (i = 0; i < ch->size; i++) {
        rdma_link_t *l = ch->owner.link_of(ch->owner.arg, i);
        int local = node[i] == node[ch->rank];

        if (i == ch->rank)
            continue;
        if (!local && t == RDMA_TRANSPORT_SHM)
            return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_INVAL, "MPIR_CVAR_CH3_RDMA_"
                            "TRANSPORT=shm but the job spans several nodes");
        k = t == RDMA_TRANSPORT_VERBS || (!local && t != RDMA_TRANSPORT_SHM)
            ? RDMA_XP_VERBS : RDMA_XP_SHM;
        l->xc.ops = ch->xp[k].ops;
        l->xc.peer = i;
        ch->links[k]++;
    }
    return RDMA_OK;
}

/* Link i: the job's ranks below size (not this one), then the peers
 * outside the job (NULL where freed). */
static rdma_link_t *rdma_chan_link_at(const rdma_chan_t * ch, int i)
{
    if (i < ch->size)
        return i == ch->rank ? NULL : ch->owner.link_of(ch->owner.arg, i);
    return ch->dyn[i - ch->size].l;
}

/* --- events the transports report (rdma_xport_events_t) --------------- */

static rdma_conn_t *rdma_chan_conn_of(void *arg, int rank)
{
    rdma_chan_xport_t *x = arg;
    rdma_link_t *l;

    if (rank < 0 || rank >= x->ch->size || rank == x->ch->rank)
        return NULL;
    l = x->ch->owner.link_of(x->ch->owner.arg, rank);
    return l && l->xc.ops == x->ops ? &l->xc : NULL;
}

int rdma_chan_card_token(const char *card, const char *key, char *buf, size_t len)
{
    size_t klen = strlen(key), n;
    const char *p, *end;

    for (p = card; (p = strstr(p, key)) != NULL; p += klen)
        if ((p == card || p[-1] == ';') && p[klen] == ':')
            break;
    if (p == NULL)
        return -1;
    p += klen + 1;
    end = strchr(p, ';');
    n = end ? (size_t) (end - p) : strlen(p);
    if (n >= len)
        return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

static void rdma_chan_rma_done(void *arg, rdma_conn_t * c, void *cookie, rdma_status_t st)
{
    rdma_chan_t *ch = ((rdma_chan_xport_t *) arg)->ch;

    ch->owner.rma_done(ch->owner.arg, rdma_link_of(c), cookie, st);
}

/* Tokens are separated by ';': PMI-1 values cannot contain spaces. */
static rdma_status_t rdma_chan_card_of(void *arg, int rank, char *buf, size_t len)
{
    rdma_chan_xport_t *x = arg;
    rdma_chan_t *ch = x->ch;
    char card[1024];

    if (rank >= ch->size && rank < ch->size + ch->ndyn && ch->dyn[rank - ch->size].l)
        return rdma_chan_card_token(ch->dyn[rank - ch->size].card, x->key, buf, len)
            ? RDMA_ERR_PEER : RDMA_OK;
    if (ch->owner.card_of(ch->owner.arg, rank, card, sizeof(card)) != RDMA_OK ||
        rdma_chan_card_token(card, x->key, buf, len))
        return RDMA_ERR_PEER;
    return RDMA_OK;
}

static void rdma_chan_dyn_serve(rdma_chan_t * ch, rdma_link_t * l, int k);

/* A link the owner added without a card is served by the transport that
 * accepted it. */
static rdma_conn_t *rdma_chan_accept(void *arg, const char *who)
{
    rdma_chan_xport_t *x = arg;
    rdma_chan_t *ch = x->ch;
    rdma_link_t *l = ch->owner.accept ? ch->owner.accept(ch->owner.arg, who) : NULL;

    if (l == RDMA_LINK_LATER)
        return RDMA_CONN_LATER;
    if (l && !l->xc.ops && l->xc.peer >= ch->size)
        rdma_chan_dyn_serve(ch, l, (int) (x - ch->xp));
    return l && l->xc.ops == x->ops ? &l->xc : NULL;
}

/* ev.admit: the peer's request or answer for c (rdma_chan_evict.c); the
 * channel thread may call it: it reads cfg and c's transport and peer,
 * fixed before the thread starts, and the slots (atomic). */
static int rdma_chan_admit(void *arg, rdma_conn_t * c, int take)
{
    rdma_chan_t *ch = ((rdma_chan_xport_t *) arg)->ch;

    if (!take)
        rdma_chan_slot_give(ch, rdma_link_of(c));
    else if (rdma_chan_slot_take(ch, rdma_link_of(c)))
        __atomic_store_n(&ch->slot_want, 0, __ATOMIC_RELAXED);  /* others ask again */
    else {
        __atomic_store_n(&ch->slot_want, 1, __ATOMIC_RELAXED);
        return 0;
    }
    return 1;
}

static rdma_status_t rdma_chan_bind(void *arg, rdma_conn_t * c, const rdma_conn_mem_t * mem)
{
    rdma_chan_xport_t *x = arg;

    return rdma_link_bind(c, &x->ch->cfg.link[x - x->ch->xp], mem);
}

static void rdma_chan_ready(void *arg, rdma_conn_t * c)
{
    rdma_chan_xport_t *x = arg;
    char desc[256];

    if (x->ch->cfg.verbose) {
        c->ops->describe(c, desc, sizeof(desc));
        fprintf(stderr, "[ch3:rdma] rank %d -> %d: %s\n", x->ch->rank, c->peer, desc);
    }
    if (c->ops->wire && c->peer < x->ch->size)
        rdma_chan_live_add(x->ch, rdma_link_of(c));
    x->ch->owner.ready(x->ch->owner.arg, rdma_link_of(c));
}

/* --- open, finalize --------------------------------------------------- */

/* Transport k's parameters: its links' pipe geometry (the slot size
 * differs between shm and verbs, RING_CHUNK auto) and the device settings. */
static void rdma_chan_params(rdma_chan_t * ch, int k, rdma_xport_params_t * prm)
{
    const rdma_chan_config_t *cfg = &ch->cfg;
    const rb_config_t *ring = &cfg->link[k].ring;

    memset(prm, 0, sizeof(*prm));
    prm->rank = ch->rank;
    prm->size = ch->size;
    prm->job = ch->job;
    prm->ring_size = ring->ring_size;
    prm->chunk_size = ring->chunk_size;
    prm->ring_max = ring->ring_max;
    prm->max_frame = ring->max_frame;
    prm->head_writes = ring->mode == RB_MODE_BASIC;
    prm->ev = (rdma_xport_events_t) { rdma_chan_conn_of, rdma_chan_card_of, rdma_chan_bind,
        rdma_chan_ready, rdma_link_landed, rdma_link_pulled, rdma_link_sent, rdma_chan_accept,
        rdma_chan_rma_done, rdma_chan_admit, &ch->xp[k] };
    prm->own = k == RDMA_XP_VERBS ? &cfg->verbs : NULL;
    prm->timeout = cfg->verbs.timeout;  /* CONNECT_TIMEOUT, for every transport */
}

/* The links know their transport instance before the thread may look
 * them up (conn_of). */
static rdma_status_t rdma_chan_thread_start(rdma_chan_t * ch)
{
    rdma_thread_src_t src;
    int k;

    for (k = 0; k < RDMA_XP_N; k++)
        if (rdma_xport_bg_src(ch->xp[k].ops, ch->xp[k].xp, &src)
            && rdma_thread_add(&ch->thread, &src) != RDMA_OK)
            return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_INVAL, "%s: too many sources "
                            "for the channel thread", ch->xp[k].ops->name);
    return rdma_thread_start(&ch->thread, ch->msg, sizeof(ch->msg));
}

/* This process's secret: what a process outside the job must present to
 * connect to one of its ports (owner-checked hellos). */
static void rdma_chan_token_make(rdma_chan_t * ch)
{
    uint64_t r;
    struct timespec ts;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t) sizeof(r)) {
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint64_t) ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t) getpid() << 32;
    }
    snprintf(ch->token, sizeof(ch->token), "%016llx", (unsigned long long) r);
}

/* Is transport k opened?  1: for the links of the job, or shm for peers
 * outside it (dynamic processes) unless every peer is forced to verbs;
 * 2: verbs for peers outside the job only, if it can be. */
static int rdma_chan_opens(const rdma_chan_t * ch, int k)
{
    rdma_transport_choice_t t = ch->cfg.transport;

    if (ch->links[k])
        return 1;
    if (k == RDMA_XP_SHM)
        return t != RDMA_TRANSPORT_VERBS;
    return t != RDMA_TRANSPORT_SHM ? 2 : 0;
}

/* A transport serving no link yet has at most requests from outside the
 * job, one whose progress carries no data (conn_only) connection
 * requests: those are polled every 64th call, and before each sleep
 * (rdma_chan_wait_arm), the others on every call. */
static void rdma_chan_poll_plan(rdma_chan_t * ch)
{
    int k;

    ch->poll_every = 0;
    for (k = 0; k < RDMA_XP_N; k++)
        if (ch->xp[k].xp && ch->links[k] && !ch->xp[k].ops->conn_only)
            ch->poll_every |= 1u << k;
}

rdma_status_t rdma_chan_open(rdma_chan_t * ch, char *card, size_t len)
{
    int i, k, opens;
    rdma_xport_params_t prm;
    char frag[512];
    size_t n = 0;
    rdma_status_t st;

    for (k = 0; k < RDMA_XP_N; k++) {
        if (!(opens = rdma_chan_opens(ch, k))) {
            snprintf(ch->xp_why[k], sizeof(ch->xp_why[k]), "MPIR_CVAR_CH3_RDMA_TRANSPORT="
                     "%s", k == RDMA_XP_SHM ? "verbs" : "shm");
            continue;
        }
        rdma_chan_params(ch, k, &prm);
        prm.peers = ch->links[k];
        ch->msg[0] = '\0';
        st = ch->xp[k].ops->open(&prm, &ch->xp[k].xp, frag, sizeof(frag), ch->msg,
                                 sizeof(ch->msg));
        if (st != RDMA_OK && opens == 2) {
            snprintf(ch->xp_why[k], sizeof(ch->xp_why[k]), "%s", ch->msg);
            continue;
        }
        if (st != RDMA_OK)
            return st;
        if (rdma_link_config_fit(&ch->cfg.link[k], ch->xp[k].ops, ch->xp[k].xp, ch->msg,
                                 sizeof(ch->msg)) && ch->cfg.verbose)
            fprintf(stderr, "[ch3:rdma] rank %d: %s\n", ch->rank, ch->msg);
        n += snprintf(card + n, n < len ? len - n : 0, "%s:%s;", ch->xp[k].key, frag);
        ch->ring_idle_on |= ch->cfg.ring_idle > 0
            && ch->cfg.link[k].ring.ring_max > ch->cfg.link[k].ring.ring_size;
    }
    rdma_chan_poll_plan(ch);
    for (i = 0; i < ch->size; i++) {
        rdma_link_t *l = rdma_chan_link_at(ch, i);
        for (k = 0; l && k < RDMA_XP_N; k++)
            if (l->xc.ops == ch->xp[k].ops)
                l->xc.xport = ch->xp[k].xp;
    }
    strcpy(ch->host, "host:");
    gethostname(ch->host + 5, sizeof(ch->host) - 6);
    ch->host[sizeof(ch->host) - 1] = '\0';
    rdma_chan_token_make(ch);
    n += snprintf(card + n, n < len ? len - n : 0, "%s;token:%s", ch->host, ch->token);
    if (n >= len)
        return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_INVAL, "business card longer than "
                        "%zu bytes", len);
    return rdma_chan_thread_start(ch);
}

void rdma_chan_link_sum(rdma_chan_counters_t * c, const rdma_link_t * l)
{
    c->ring_frames += l->pipe.stats.frames_tx;
    c->ring_writes += l->pipe.stats.writes_tx;
    c->zcopy_parts += l->zc.stats.zc_msgs;
    c->copy_parts += l->zc.stats.copy_msgs;
    c->copy_fallbacks += l->zc.stats.refused_rx;
    c->eager_zcopy_sends += l->zc.stats.eager_zc;
    c->ring_grows += l->pipe.stats.grows;
    c->ring_shrinks += l->pipe.stats.shrinks;
}

void rdma_chan_counters_get(const rdma_chan_t * ch, rdma_chan_counters_t * c)
{
    int i, k;

    *c = ch->gone;
    for (i = 0; i < ch->size + ch->ndyn; i++) {
        const rdma_link_t *l = rdma_chan_link_at(ch, i);

        if (!l)
            continue;
        rdma_chan_link_sum(c, l);
        if (l->xc.state != RDMA_CONN_IDLE)     /* evicted: its rings are gone */
            c->ring_bytes += l->pipe.rx.cfg.ring_size
                + (l->pipe.cfg.flag_publishes ? 0 : l->pipe.tx.cfg.ring_size);
        c->conns_live += l->xc.ops && l->xc.ops->wire && l->xc.state == RDMA_CONN_READY;
    }
    c->conns_opened = ch->conns_opened;
    c->conns_evicted = ch->conns_evicted;
    c->conns_peak = ch->conns_peak;
    c->rma_puts = ch->rma_count[0];
    c->rma_gets = ch->rma_count[1];
    c->rma_messages = ch->rma_count[2];
    c->rma_at_call = ch->rma_count[3];
    c->rma_atomics = ch->amo_count;
    c->rndv_sends = ch->rndv_count[0];
    c->rndv_fallbacks = ch->rndv_count[1];
    for (k = 0; k < RDMA_XP_N; k++)
        if (ch->xp[k].xp && ch->xp[k].ops->counters)
            ch->xp[k].ops->counters(ch->xp[k].xp, &c->xp);
}

/* MPIR_CVAR_CH3_RDMA_VERBOSE at finalize: per link, which path large
 * parts took, by size; per transport, its statistics. */
static void rdma_chan_link_report(const rdma_chan_t * ch, const rdma_link_t * l)
{
    char line[1024];

    if (ch->cfg.verbose && rdma_link_report(l, line, sizeof(line)) > 0)
        fprintf(stderr, "[ch3:rdma] rank %d -> %d: %s\n", ch->rank, l->xc.peer, line);
}

static void rdma_chan_xport_report(const rdma_chan_t * ch, const rdma_chan_xport_t * x)
{
    char line[2048];

    if (ch->cfg.verbose && x->xp && x->ops->stats && x->ops->stats(x->xp, line, sizeof(line)) > 0)
        fprintf(stderr, "[ch3:rdma] rank %d %s: %s\n", ch->rank, x->ops->name, line);
}

rdma_status_t rdma_chan_finalize(rdma_chan_t * ch)
{
    rdma_status_t st = RDMA_OK;
    int i, k;

    rdma_thread_stop(&ch->thread);
    for (i = 0; i < ch->size + ch->ndyn; i++) {
        rdma_link_t *l = rdma_chan_link_at(ch, i);
        if (!l)
            continue;
        rdma_chan_link_report(ch, l);
        if (i >= ch->size)
            rdma_chan_dyn_del(ch, l);
        else if (l->xc.xport && l->xc.state != RDMA_CONN_IDLE)
            l->xc.ops->close(l->xc.xport, &l->xc);
    }
    free(ch->dyn);
    ch->dyn = NULL;
    ch->ndyn = 0;
    rdma_chan_live_free(ch);
    for (k = 0; k < RDMA_XP_N; k++) {
        rdma_chan_xport_report(ch, &ch->xp[k]);
        if (ch->xp[k].xp && ch->xp[k].ops->finalize(ch->xp[k].xp) != RDMA_OK)
            st = rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_XPORT,
                          "%s transport finalization failed", ch->xp[k].ops->name);
        ch->xp[k].xp = NULL;
    }
    return st;
}

/* --- peers outside the job ------------------------------------------- */

/* A free index of the dynamic table (grown as needed), or -1. */
static int rdma_chan_dyn_slot(rdma_chan_t * ch)
{
    rdma_chan_dyn_t *d;
    int i;

    for (i = 0; i < ch->ndyn; i++)
        if (!ch->dyn[i].l)
            return i;
    d = realloc(ch->dyn, (size_t) (ch->ndyn + 1) * sizeof(*d));
    if (!d)
        return -1;
    ch->dyn = d;
    memset(&d[ch->ndyn], 0, sizeof(*d));
    return ch->ndyn++;
}

static void rdma_chan_dyn_serve(rdma_chan_t * ch, rdma_link_t * l, int k)
{
    l->xc.ops = ch->xp[k].ops;
    l->xc.xport = ch->xp[k].xp;
    ch->links[k]++;
    rdma_chan_poll_plan(ch);
}

/* Does the card hold an address of transport k, opened here? */
static int rdma_chan_card_serves(const rdma_chan_t * ch, const char *card, int k)
{
    char frag[256];

    return ch->xp[k].xp && !rdma_chan_card_token(card, ch->xp[k].key, frag, sizeof(frag));
}

/* The transport for a process outside the job with that card: shm on
 * this host, else verbs; -1 (ch->msg says why) otherwise. */
static int rdma_chan_dyn_xport(rdma_chan_t * ch, const char *card)
{
    char host[sizeof(ch->host)] = "host:";
    const char *why = ch->xp_why[RDMA_XP_VERBS];

    if (rdma_chan_card_token(card, "host", host + 5, sizeof(host) - 5)) {
        rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_PEER, "business card \"%.200s\" of a "
                 "process outside the job names no host", card);
        return -1;
    }
    if (!strcmp(host, ch->host) && rdma_chan_card_serves(ch, card, RDMA_XP_SHM))
        return RDMA_XP_SHM;
    if (rdma_chan_card_serves(ch, card, RDMA_XP_VERBS))
        return RDMA_XP_VERBS;
    if (ch->xp[RDMA_XP_VERBS].xp)
        why = "it has no verbs address (no RDMA device there, or "
            "MPIR_CVAR_CH3_RDMA_TRANSPORT=shm)";
    rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_INVAL, "cannot reach a process outside the "
             "job (dynamic processes) on %s from %s: shared memory only on one host, and "
             "verbs: %s", host + 5, ch->host + 5, why);
    return -1;
}

static char *rdma_chan_strdup(const char *s, int *fail)
{
    char *d = s ? strdup(s) : NULL;

    *fail |= s && !d;
    return d;
}

rdma_status_t rdma_chan_dyn_add(rdma_chan_t * ch, rdma_link_t * l, const char *card,
                                const char *hello)
{
    int i, k = card ? rdma_chan_dyn_xport(ch, card) : -1, fail = 0;
    rdma_chan_dyn_t *d;

    if (card && k < 0)
        return RDMA_ERR_INVAL;
    i = rdma_chan_dyn_slot(ch);
    if (i < 0)
        return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_NOMEM, "out of memory");
    d = &ch->dyn[i];
    d->card = rdma_chan_strdup(card, &fail);
    d->hello = rdma_chan_strdup(hello, &fail);
    if (fail) {
        free(d->card);
        free(d->hello);
        memset(d, 0, sizeof(*d));
        return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_NOMEM, "out of memory");
    }
    d->l = l;
    l->xc.peer = ch->size + i;
    l->xc.hello = d->hello;
    if (card)
        rdma_chan_dyn_serve(ch, l, k);
    return RDMA_OK;
}

void rdma_chan_dyn_reopen(rdma_chan_t * ch, rdma_link_t * l)
{
    rdma_conn_t *c = &l->xc;

    (void) ch;
    if (c->state != RDMA_CONN_CLOSED)
        return;
    c->ops->close(c->xport, c);
    c->state = RDMA_CONN_IDLE;
}

void rdma_chan_dyn_del(rdma_chan_t * ch, rdma_link_t * l)
{
    int i = l->xc.peer - ch->size, k;
    rdma_chan_dyn_t *d;

    if (i < 0 || i >= ch->ndyn || ch->dyn[i].l != l)
        return;
    d = &ch->dyn[i];
    if (l->xc.xport && l->xc.state != RDMA_CONN_IDLE)
        l->xc.ops->close(l->xc.xport, &l->xc);
    for (k = 0; k < RDMA_XP_N; k++)
        ch->links[k] -= l->xc.ops == ch->xp[k].ops;
    rdma_chan_poll_plan(ch);
    free(d->card);
    free(d->hello);
    memset(d, 0, sizeof(*d));
    l->xc.hello = NULL;
}

/* --- connections, data ------------------------------------------------ */

/* Why l FAILED (its own line), or what its transport last said. */
static rdma_status_t rdma_chan_conn_error(rdma_chan_t * ch, const rdma_conn_t * c,
                                          rdma_status_t st)
{
    const char *why = c->state == RDMA_CONN_FAILED && c->why[0] ? c->why : c->ops->error(c->xport);

    return rdma_say(ch->msg, sizeof(ch->msg), st, "%s", why);
}

rdma_status_t rdma_chan_connect(rdma_chan_t * ch, rdma_link_t * l)
{
    rdma_conn_t *c = &l->xc;
    rdma_status_t st;
    int go;

    if (c->state == RDMA_CONN_FAILED)
        return rdma_chan_conn_error(ch, c, RDMA_ERR_PEER);
    /* a peer outside the job not known yet, or used again after a close */
    if (ch->owner.resolve && ((c->state == RDMA_CONN_IDLE && !c->ops)
                              || (c->state == RDMA_CONN_CLOSED && c->peer >= ch->size))) {
        st = ch->owner.resolve(ch->owner.arg, l);
        if (st != RDMA_OK)
            return st;
    }
    if (c->state != RDMA_CONN_IDLE)
        return RDMA_OK;
    if (!c->ops)
        return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_INVAL, "no transport for peer %d",
                        c->peer);
    if ((st = rdma_chan_slot_get(ch, l, &go)) != RDMA_OK || !go)
        return st;
    st = c->ops->connect(c->xport, c);
    if (st == RDMA_OK)
        return RDMA_OK;
    rdma_chan_slot_give(ch, l);
    return rdma_chan_conn_error(ch, c, st);
}

rdma_status_t rdma_chan_put_slow(rdma_chan_t * ch, rdma_link_t * l, const struct iovec *iov,
                                 int n, size_t *nbytes)
{
    rdma_status_t st = rdma_chan_connect(ch, l);

    *nbytes = 0;
    if (st != RDMA_OK || l->xc.state != RDMA_CONN_READY)
        return st;              /* shm connects at once, verbs later */
    return rdma_chan_putv(ch, l, iov, n, nbytes);
}

rdma_status_t rdma_chan_fail(rdma_chan_t * ch, rdma_link_t * l, rdma_status_t st)
{
    if (st == RDMA_ERR_XPORT || l->xc.state == RDMA_CONN_FAILED)
        return rdma_chan_conn_error(ch, &l->xc, st);
    return rdma_say(ch->msg, sizeof(ch->msg), st, "pipe to rank %d: %s", l->xc.peer,
                    rdma_status_str(st));
}

/* Every cfg.ring_idle seconds (looked at every 4096th poll and before each
 * sleep): links idle for a whole period offer their grown rings back small
 * (rdma_link_idle). */
__attribute__ ((cold)) static rdma_status_t rdma_chan_idle_check(rdma_chan_t * ch)
{
    struct timespec ts;
    double now;
    int i;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    now = (double) ts.tv_sec + ts.tv_nsec * 1e-9;
    if (now < ch->ring_next)
        return RDMA_OK;
    ch->ring_next = now + ch->cfg.ring_idle;
    for (i = 0; i < ch->size + ch->ndyn; i++) {
        rdma_link_t *l = rdma_chan_link_at(ch, i);
        rdma_status_t st = l ? rdma_link_idle(l) : RDMA_OK;

        if (st != RDMA_OK)
            return rdma_chan_fail(ch, l, st);
    }
    return RDMA_OK;
}

/* Transport k's progress failed with st (cold: off the poll path). */
__attribute__ ((cold, noinline))
static rdma_status_t rdma_chan_poll_fail(rdma_chan_t * ch, int k, rdma_status_t st)
{
    int i;

    if (st != RDMA_ERR_PEER)
        return rdma_say(ch->msg, sizeof(ch->msg), st, "%s", ch->xp[k].ops->error(ch->xp[k].xp));
    for (i = 0, st = RDMA_OK; i < ch->size + ch->ndyn && st == RDMA_OK; i++) {
        rdma_link_t *l = rdma_chan_link_at(ch, i);
        if (l && l->xc.state == RDMA_CONN_FAILED)
            st = ch->owner.failed(ch->owner.arg, l);
    }
    return st;
}

RDMA_HOT rdma_status_t rdma_chan_poll_due(rdma_chan_t * ch, unsigned n)
{
    rdma_status_t st;
    int k;

    if (ch->ring_idle_on && !(n & 4095) && (st = rdma_chan_idle_check(ch)) != RDMA_OK)
        return st;
    if ((ch->live_over || (ch->nlive && !(n & 1023)))
        && (st = rdma_chan_live_look(ch)) != RDMA_OK)
        return st;
    if (ch->nclosing && (st = rdma_chan_evict_run(ch)) != RDMA_OK)
        return st;
    for (k = 0; k < RDMA_XP_N; k++) {
        if (!ch->xp[k].xp || (!(ch->poll_every >> k & 1) && (n & 63)))
            continue;
        st = ch->xp[k].ops->progress(ch->xp[k].xp);
        if (st != RDMA_OK && (st = rdma_chan_poll_fail(ch, k, st)) != RDMA_OK)
            return st;
    }
    return RDMA_OK;
}

/* --- node segments (MPI-3 shared windows) ------------------------------ */

static const rdma_chan_xport_t *rdma_chan_seg_xport(const rdma_chan_t * ch)
{
    const rdma_chan_xport_t *x = &ch->xp[RDMA_XP_SHM];

    return x->xp && x->ops->seg ? x : NULL;
}

int rdma_chan_seg_usable(const rdma_chan_t * ch)
{
    return rdma_chan_seg_xport(ch) != NULL;
}

/* make (len bytes) or map seg over the shm transport. */
static rdma_status_t rdma_chan_seg_get(rdma_chan_t * ch, rdma_seg_t * seg, size_t len, int make)
{
    const rdma_chan_xport_t *x = rdma_chan_seg_xport(ch);
    rdma_status_t st;

    if (make || !x) {
        seg->map = NULL;
        seg->fd = -1;
    }
    if (!x)
        return rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_NOSYS, "no node segments: %s",
                        ch->xp[RDMA_XP_SHM].xp ? "the shm transport has none"
                        : "the shm transport is not open (MPIR_CVAR_CH3_RDMA_TRANSPORT=verbs)");
    st = make ? x->ops->seg->make(x->xp, len, seg) : x->ops->seg->map(x->xp, seg);
    return st == RDMA_OK ? st : rdma_say(ch->msg, sizeof(ch->msg), st, "%s",
                                         x->ops->error(x->xp));
}

rdma_status_t rdma_chan_seg_make(rdma_chan_t * ch, size_t len, rdma_seg_t * seg)
{
    return rdma_chan_seg_get(ch, seg, len, 1);
}

rdma_status_t rdma_chan_seg_map(rdma_chan_t * ch, rdma_seg_t * seg)
{
    return rdma_chan_seg_get(ch, seg, seg->len, 0);
}

void rdma_chan_seg_seal(rdma_chan_t * ch, rdma_seg_t * seg)
{
    if (seg->fd >= 0)
        ch->xp[RDMA_XP_SHM].ops->seg->seal(seg);
}

void rdma_chan_seg_free(rdma_chan_t * ch, rdma_seg_t * seg)
{
    if (seg->map || seg->fd >= 0)
        ch->xp[RDMA_XP_SHM].ops->seg->free(seg);
}

/* --- one-sided operations (MPI windows) -------------------------------- */

void rdma_chan_win_expose(rdma_chan_t * ch, void *addr, size_t len, rdma_chan_wkey_t * w,
                          rdma_chan_wh_t * h)
{
    int k;

    memset(w, 0, sizeof(*w));
    memset(h, 0, sizeof(*h));
    for (k = 0; k < RDMA_XP_N; k++) {
        const rdma_chan_xport_t *x = &ch->xp[k];

        if (!x->xp || !x->ops->rma || !ch->owner.rma_done || len == 0
            || (len == RDMA_CHAN_WIN_ALL && !x->ops->rma->all_memory))
            continue;
        if (x->ops->rma->expose(x->xp, addr, len, &w->key[k], &h->h[k]) == RDMA_OK) {
            w->ok |= 1u << k;
            if (x->ops->rma->amo_ok && x->ops->rma->amo_ok(x->xp))
                w->amo |= 1u << k;
        } else
            rdma_say(ch->msg, sizeof(ch->msg), RDMA_ERR_NOMEM, "%s", x->ops->error(x->xp));
    }
}

void rdma_chan_win_unexpose(rdma_chan_t * ch, const rdma_chan_wkey_t * w, rdma_chan_wh_t * h)
{
    int k;

    for (k = 0; k < RDMA_XP_N; k++)
        if (w->ok & 1u << k)
            ch->xp[k].ops->rma->unexpose(ch->xp[k].xp, h->h[k]);
    memset(h, 0, sizeof(*h));
}

/* The transport (RDMA_XP_*) that serves l. */
static int rdma_chan_xp_of(const rdma_chan_t * ch, const rdma_link_t * l)
{
    return l->xc.ops == ch->xp[RDMA_XP_VERBS].ops ? RDMA_XP_VERBS : RDMA_XP_SHM;
}

static rdma_status_t rdma_chan_xfer(rdma_link_t * l, int get, void *local, size_t len,
                                    uint64_t raddr, uint64_t key, void *cookie, int *done)
{
    const rdma_xport_rma_ops_t *r = l->xc.ops->rma;

    return get ? r->get(l->xc.priv, local, len, raddr, key, cookie, done)
        : r->put(l->xc.priv, local, len, raddr, key, cookie, done);
}

int rdma_chan_rma_ok(const rdma_chan_t * ch, const rdma_link_t * l, size_t len,
                     const rdma_chan_wkey_t * peer)
{
    if (!l->xc.ops || !l->xc.ops->rma || l->xc.state != RDMA_CONN_READY
        || !(peer->ok & 1u << rdma_chan_xp_of(ch, l)))
        return 0;
    /* On a node a direct operation is one CMA system call on one core: dearer
     * than a ring frame for small ones, and for large ones slower than the
     * active message, whose parts the target pulls with a copy split over
     * both cores (host H: 1.4-2x the time from 1 MiB, a third to a half of
     * the bandwidth from 32 KiB).  It pays only where the target computes
     * outside MPI, so it waits for RMA_CMA_MIN.  An RDMA write or read wins
     * at every size. */
    return rdma_chan_over_wire(l) || len >= ch->cfg.rma_cma_min;
}

rdma_status_t rdma_chan_rma(rdma_chan_t * ch, rdma_link_t * l, int get, void *local, size_t len,
                            uint64_t raddr, const rdma_chan_wkey_t * peer, void *cookie,
                            int *done)
{
    rdma_status_t st;

    *done = 0;
    if (!rdma_chan_rma_ok(ch, l, len, peer))
        return RDMA_ERR_REFUSED;
    st = rdma_chan_xfer(l, get, local, len, raddr, peer->key[rdma_chan_xp_of(ch, l)], cookie,
                        done);
    if (st == RDMA_OK)
        ch->rma_count[get ? 1 : 0]++;
    return st;
}

int rdma_chan_amo_link(const rdma_chan_t * ch, const rdma_link_t * l)
{
    const rdma_chan_xport_t *x = &ch->xp[RDMA_XP_VERBS];

    return x->xp && x->ops->rma && x->ops->rma->amo_ok && (!l || l->xc.ops == x->ops)
        && x->ops->rma->amo_ok(x->xp);
}

rdma_status_t rdma_chan_atomic(rdma_chan_t * ch, rdma_link_t * l, const rdma_xport_amo_t * a,
                               uint64_t raddr, const rdma_chan_wkey_t * peer, void *cookie)
{
    const rdma_chan_xport_t *x = &ch->xp[RDMA_XP_VERBS];
    rdma_status_t st;

    if (!rdma_chan_amo_link(ch, l) || !(peer->amo & 1u << RDMA_XP_VERBS))
        return RDMA_ERR_REFUSED;
    if (!l) {
        st = x->ops->rma->self(x->xp, a, raddr, peer->key[RDMA_XP_VERBS]);
        if (st != RDMA_OK)
            rdma_say(ch->msg, sizeof(ch->msg), st, "%s", x->ops->error(x->xp));
    } else if (l->xc.state != RDMA_CONN_READY)
        return rdma_chan_connect(ch, l) == RDMA_OK ? RDMA_ERR_NOMEM : RDMA_ERR_PEER;
    else
        st = x->ops->rma->atomic(l->xc.priv, a, raddr, peer->key[RDMA_XP_VERBS], cookie);
    if (st == RDMA_OK)
        ch->amo_count++;
    return st;
}

/* --- the rendezvous of large messages (rdma_rndv.c) -------------------- */

/* From answered_min on a link whose peer answered our last frame (a
 * ping-pong, where the message's time is its latency), else from zc's
 * threshold: a stream of messages moves faster through the ring below it
 * (rdma_cvars.c, RDMA_ZCOPY_ANSWERED_SHM). */
int rdma_chan_rndv_ok(const rdma_link_t * l, size_t len)
{
    const zc_config_t *c = &l->zc.cfg;

    return l->xc.state == RDMA_CONN_READY && l->xc.ops->rma && l->zc.ops
        && c->mode != ZC_MODE_COPY && !l->zc.refused && !l->zc.backoff
        && (len >= c->threshold || (c->answered_min && len >= c->answered_min
                                    && rb_pipe_answered(&l->pipe)));
}

rdma_status_t rdma_chan_rndv_expose(rdma_link_t * l, const void *addr, size_t len,
                                    uint64_t * key, void **handle)
{
    int hit;

    *handle = NULL;
    return l->zc.ops->expose(l->zc.ctx, addr, len, key, handle, &hit);
}

void rdma_chan_rndv_unexpose(rdma_link_t * l, void *handle)
{
    if (handle)
        l->zc.ops->unexpose(l->zc.ctx, handle);
}

size_t rdma_chan_rndv_split(const rdma_link_t * l, size_t len)
{
    return l->zc.ops->push && l->zc.cfg.split_min && len >= l->zc.cfg.split_min
        ? (len / 2) & ~(size_t) 63 : len;
}

rdma_status_t rdma_chan_rndv_copy(rdma_link_t * l, int get, void *local, size_t len,
                                  uint64_t raddr, uint64_t key, void *cookie, int *done)
{
    rdma_status_t st = rdma_chan_xfer(l, get, local, len, raddr, key, cookie, done);

    if (st == RDMA_OK && !*done)
        l->rndv_copies++;
    return st;
}

void rdma_chan_rndv_copied(rdma_link_t * l)
{
    l->rndv_copies--;
}
