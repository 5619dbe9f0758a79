/*
 * rdma_shm_dyn.c: shared-memory connections to processes outside the job
 * (dynamic processes: spawn, connect/accept); rdma_shm.h.
 *
 * Such a peer has no slot in our region, nor we in its.  Each connection
 * has its own memfd, the link, made by the side that connects:
 *
 *   shm_link_t page | ring[0] (connector -> acceptor) | ring[1] (back)
 *
 * Handshake (each side's c->hello is its identity, defined by the owner):
 *   connector  maps the acceptor's header and mailbox (from its card),
 *              checks its wire version and ring size, makes the link,
 *              claims a mailbox entry (CAS), fills it, posts it (release)
 *              and rings the doorbell.  A full mailbox is retried at every
 *              progress(); no answer within CONNECT_TIMEOUT fails it.
 *   acceptor   progress() finds the entry posted (acquire), copies and
 *              frees it, maps the link and the connector's header, asks the
 *              owner for the connection (ev.accept(who)), binds the pipe to
 *              the link, stores link.state ACCEPTED (release) or REFUSED
 *              and rings the connector's doorbell.  A request the owner
 *              answers later keeps its entry and its link mapped (later[])
 *              and is refused after twice CONNECT_TIMEOUT; a link of another
 *              wire version is refused.
 *   connector  progress() reads the answer (acquire): ACCEPTED binds its
 *              end and is READY, REFUSED fails the connection.
 * Both sides connecting at once make two links for one pair: the link of
 * the smaller hello wins.  Its acceptor drops its own attempt; the other
 * side answers the loser's request CROSSED, and the loser, still
 * CONNECTING, waits for the winner's request.  A request names the link by pid and
 * fd (/proc) and its nonce: the fd may have been closed and reused since.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memfd_create */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "rdma_shm.h"

static double rdma_shm_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t rdma_shm_link_len(const rdma_xport_t * xp)
{
    return SHM_PAGE + 2 * xp->prm.ring_size;
}

/* Side pe->dir sends through ring[dir] and receives from ring[!dir]. */
static rdma_status_t rdma_shm_dyn_bind(rdma_xport_t * xp, rdma_conn_t * c, shm_peer_t * pe)
{
    shm_link_t *lk = (shm_link_t *) pe->link;
    uint8_t *rings = pe->link + SHM_PAGE;
    size_t ring = xp->prm.ring_size;
    int d = pe->dir;
    rdma_conn_mem_t mem = { 0 };

    pe->tx_ctl = &lk->ctl[d];
    pe->rx_ctl = &lk->ctl[!d];
    mem.stage = rings + d * ring;
    mem.tail_word = &pe->tx_ctl->tail;
    mem.ring = rings + !d * ring;
    mem.head_word = &pe->rx_ctl->head;
    return rdma_shm_bind(xp, c, pe, &mem);
}

static void rdma_shm_dyn_free(rdma_xport_t * xp, shm_peer_t * pe)
{
    shm_peer_t **pp;

    rdma_shm_unwatch_peer(xp, pe);
    rdma_shm_grow_free(pe);
    for (pp = &xp->dyn; *pp; pp = &(*pp)->next)
        if (*pp == pe) {
            *pp = pe->next;
            break;
        }
    if (pe->link)
        munmap(pe->link, pe->linklen);
    if (pe->map)
        munmap(pe->map, pe->maplen);
    if (pe->link_fd >= 0)
        close(pe->link_fd);
    free(pe);
}

/* The header and mailbox of process pid's region (fd), if it runs our
 * wire version with our pipe settings (rdma_shm_pipe_bad). */
static rdma_status_t rdma_shm_dyn_map_hdr(rdma_xport_t * xp, shm_peer_t * pe, int pid, int fd,
                                          const char *what)
{
    const shm_hdr_t *h;
    const char *bad;
    rdma_status_t rc = rdma_shm_map_fd(xp, pid, fd, SHM_HDR_BYTES, 0, what, &pe->map);

    if (rc)
        return rc;
    pe->maplen = SHM_HDR_BYTES;
    pe->pid = pid;
    h = (const shm_hdr_t *) pe->map;
    if (h->magic != SHM_MAGIC || h->version != RDMA_WIRE_VERSION)
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: %s (pid %d) runs ch3:rdma wire version %llu, "
                        "this process (pid %d) version %d: connect only builds of the same "
                        "wire version", what, pid, h->magic == SHM_MAGIC ?
                        (unsigned long long) h->version : 0ULL, (int) getpid(),
                        RDMA_WIRE_VERSION);
    bad = rdma_shm_pipe_bad(xp, h);
    if (!bad)
        return RDMA_OK;
    return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: %s uses other ring settings (ring %llu bytes, "
                    "chunk %llu, ours %zu, %zu): set %s alike", what,
                    (unsigned long long) h->ring_size, (unsigned long long) h->chunk_size,
                    xp->prm.ring_size, xp->prm.chunk_size, bad);
}

/* A new link: its own memfd, kept open until the peer answered. */
static rdma_status_t rdma_shm_dyn_link_make(rdma_xport_t * xp, shm_peer_t * pe)
{
    shm_link_t *lk;
    struct timespec ts;
    rdma_status_t rc;

    pe->linklen = rdma_shm_link_len(xp);
    rc = rdma_shm_memfd_make("ch3-rdma-link", pe->linklen, &pe->link_fd, &pe->link, xp->err,
                             sizeof(xp->err));
    if (rc)
        return rc;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lk = (shm_link_t *) pe->link;
    lk->magic = SHM_LINK_MAGIC;
    lk->version = RDMA_WIRE_VERSION;
    lk->nonce = ((uint64_t) getpid() << 40) ^ (uint64_t) ts.tv_nsec ^ ++xp->nonces << 20;
    lk->ring_size = xp->prm.ring_size;
    return RDMA_OK;
}

/* Put pe's request into the peer's mailbox; 0: no entry free (retried). */
static int rdma_shm_dyn_post(rdma_xport_t * xp, shm_peer_t * pe)
{
    shm_req_t *box = rdma_shm_mailbox(pe->map);
    uint32_t expect = SHM_REQ_FREE;
    size_t i;

    for (i = 0; i < SHM_NREQ; i++, expect = SHM_REQ_FREE)
        if (__atomic_compare_exchange_n(&box[i].state, &expect, SHM_REQ_BUSY, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            break;
    if (i == SHM_NREQ)
        return 0;
    box[i].pid = getpid();
    box[i].region_fd = xp->fd;
    box[i].link_fd = pe->link_fd;
    box[i].nonce = ((shm_link_t *) pe->link)->nonce;
    snprintf(box[i].who, sizeof(box[i].who), "%s", pe->conn->hello);
    /* release: the fields before the owner may read them */
    __atomic_store_n(&box[i].state, SHM_REQ_POSTED, __ATOMIC_RELEASE);
    __atomic_add_fetch(&((shm_hdr_t *) pe->map)->doorbell, 1, __ATOMIC_RELEASE);
    rdma_shm_wake(pe);
    pe->posted = 1;
    return 1;
}

rdma_status_t rdma_shm_dyn_connect(rdma_xport_t * xp, rdma_conn_t * c)
{
    char card[128], what[48];
    int pid, fd, n = 0;
    size_t len;
    shm_peer_t *pe;
    rdma_status_t rc;

    if (c->priv)
        return RDMA_OK;         /* connecting already */
    snprintf(what, sizeof(what), "process %d outside the job", c->peer);
    if (!c->hello || strlen(c->hello) >= SHM_HELLO_LEN)
        return SHM_FAIL(xp, RDMA_ERR_INVAL, "shm: %s: no hello, or one longer than %d bytes",
                        what, SHM_HELLO_LEN - 1);
    if (xp->prm.ev.card_of(xp->prm.ev.arg, c->peer, card, sizeof(card))
        || sscanf(card, "%d.%d.%zu%n", &pid, &fd, &len, &n) != 3 || card[n])
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: no usable business card for %s", what);
    pe = calloc(1, sizeof(*pe));
    if (!pe)
        return SHM_FAIL(xp, RDMA_ERR_NOMEM, "shm: out of memory");
    pe->link_fd = -1;
    rc = rdma_shm_dyn_map_hdr(xp, pe, pid, fd, what);
    if (rc == RDMA_OK)
        rc = rdma_shm_dyn_link_make(xp, pe);
    if (rc) {
        rdma_shm_dyn_free(xp, pe);
        return rc;
    }
    pe->xp = xp;
    pe->conn = c;
    pe->next = xp->dyn;
    xp->dyn = pe;
    c->ops = &rdma_xport_shm;
    c->xport = xp;
    c->priv = pe;
    c->state = RDMA_CONN_CONNECTING;
    pe->t_deadline = rdma_shm_now() + xp->prm.timeout;
    rdma_shm_dyn_post(xp, pe);
    xp->dyn_retry++;            /* progress() looks for the answer, and the deadline */
    return RDMA_OK;
}

/* Forget our attempt for c (its request, if the peer still reads it, no
 * longer matches a link of ours: nonce); c stays CONNECTING. */
static void rdma_shm_dyn_drop(rdma_xport_t * xp, rdma_conn_t * c)
{
    rdma_shm_dyn_free(xp, c->priv);
    c->priv = NULL;
}

/* Answer the connector of the link pe maps (release: our end is bound
 * before the connector may write) and ring its doorbell. */
static void rdma_shm_dyn_answer(shm_peer_t * pe, uint64_t answer)
{
    __atomic_store_n(&((shm_link_t *) pe->link)->state, answer, __ATOMIC_RELEASE);
    __atomic_add_fetch(&((shm_hdr_t *) pe->map)->doorbell, 1, __ATOMIC_RELEASE);
    rdma_shm_wake(pe);
}

/* The link of request rq (mailbox entry i): mapped again for a request the
 * owner answers later, else mapped now; NULL: gone (the connector went
 * away, or its fd was reused: nonce) or not of our wire version. */
static shm_peer_t *rdma_shm_dyn_link_of(rdma_xport_t * xp, size_t i, const shm_req_t * rq)
{
    struct shm_later *lt = &xp->later[i];
    size_t len = rdma_shm_link_len(xp);
    shm_peer_t *pe = lt->pe;
    const shm_link_t *lk;
    char what[48];

    lt->pe = NULL;
    if (pe && lt->nonce == rq->nonce)
        return pe;
    if (pe)
        rdma_shm_dyn_free(xp, pe);
    lt->t_expire = 0;
    snprintf(what, sizeof(what), "connecting process %d", rq->pid);
    if (!(pe = calloc(1, sizeof(*pe))))
        return NULL;
    pe->link_fd = -1;
    if (rdma_shm_dyn_map_hdr(xp, pe, rq->pid, rq->region_fd, what)
        || rdma_shm_map_fd(xp, rq->pid, rq->link_fd, len, len, what, &pe->link)) {
        rdma_shm_dyn_free(xp, pe);
        return NULL;
    }
    pe->linklen = len;
    pe->dir = 1;
    lk = (const shm_link_t *) pe->link;
    if (lk->magic == SHM_LINK_MAGIC && lk->nonce == rq->nonce && lk->version == RDMA_WIRE_VERSION)
        return pe;
    if (lk->magic == SHM_LINK_MAGIC && lk->nonce == rq->nonce)
        rdma_shm_dyn_answer(pe, SHM_LINK_REFUSED);      /* state never moves */
    rdma_shm_dyn_free(xp, pe);
    return NULL;
}

/* The owner answers request rq later: keep pe until it does, or until
 * twice CONNECT_TIMEOUT passed (0 then: refuse it; its connector gave up
 * after one, with its own diagnosis). */
static int rdma_shm_dyn_later(rdma_xport_t * xp, size_t i, const shm_req_t * rq, shm_peer_t * pe)
{
    struct shm_later *lt = &xp->later[i];
    double now = rdma_shm_now();

    if (lt->t_expire == 0 || lt->nonce != rq->nonce) {
        lt->nonce = rq->nonce;
        lt->t_expire = now + 2 * xp->prm.timeout;      /* the connector gave up */
    }
    if (now >= lt->t_expire) {
        lt->t_expire = 0;
        return 0;
    }
    lt->pe = pe;
    return 1;
}

/* Mailbox entry i holds the connection request rq: accept it for the
 * owner's connection, or refuse it; 0: the owner answers later (rq stays
 * posted).  One we cannot map (the connector went away) is dropped. */
static int rdma_shm_dyn_accept(rdma_xport_t * xp, size_t i, const shm_req_t * rq)
{
    shm_peer_t *pe = rdma_shm_dyn_link_of(xp, i, rq);
    uint64_t answer = SHM_LINK_REFUSED;
    rdma_conn_t *c;

    if (!pe)
        return 1;
    c = xp->prm.ev.accept(xp->prm.ev.arg, rq->who);
    if (c == RDMA_CONN_LATER && rdma_shm_dyn_later(xp, i, rq, pe))
        return 0;
    if (c == RDMA_CONN_LATER)
        c = NULL;       /* expired */
    if (c && c->state == RDMA_CONN_CONNECTING && c->priv && strcmp(rq->who, c->hello) < 0)
        rdma_shm_dyn_drop(xp, c);
    if (c && c->state == RDMA_CONN_CONNECTING && c->priv)
        answer = SHM_LINK_CROSSED;
    else if (c && (c->state == RDMA_CONN_IDLE || c->state == RDMA_CONN_CONNECTING)) {
        c->ops = &rdma_xport_shm;
        c->xport = xp;
        if (rdma_shm_dyn_bind(xp, c, pe) == RDMA_OK)
            answer = SHM_LINK_ACCEPTED;
        else {
            rdma_conn_failed(c, xp->err);
            xp->dyn_failed++;
        }
    }
    rdma_shm_dyn_answer(pe, answer);
    if (answer == SHM_LINK_ACCEPTED) {
        pe->next = xp->dyn;
        xp->dyn = pe;
        rdma_shm_ready(xp, c, pe);
    } else
        rdma_shm_dyn_free(xp, pe);
    return 1;
}

/* Our attempt pe was answered (or still waits for a mailbox entry):
 * RDMA_ERR_PEER if that failed its connection. */
static rdma_status_t rdma_shm_dyn_answered(rdma_xport_t * xp, shm_peer_t * pe)
{
    rdma_conn_t *c = pe->conn;
    uint64_t answer;

    if (!pe->posted && !rdma_shm_dyn_post(xp, pe))
        answer = SHM_LINK_POSTED;
    else
        answer = __atomic_load_n(&((shm_link_t *) pe->link)->state, __ATOMIC_ACQUIRE);
    if (answer == SHM_LINK_POSTED && rdma_shm_now() < pe->t_deadline) {
        xp->dyn_retry++;        /* looked at again: the deadline */
        return RDMA_OK;
    }
    if (answer == SHM_LINK_POSTED) {
        SHM_FAIL(xp, RDMA_ERR_PEER, "shm: process %d (pid %d) did not answer the connection "
                 "request within %g s (MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT)", c->peer,
                 (int) pe->pid, xp->prm.timeout);
        rdma_shm_dyn_drop(xp, c);
        return rdma_conn_failed(c, xp->err);
    }
    close(pe->link_fd);
    pe->link_fd = -1;
    if (answer == SHM_LINK_ACCEPTED && rdma_shm_dyn_bind(xp, c, pe) == RDMA_OK) {
        rdma_shm_ready(xp, c, pe);
        return RDMA_OK;
    }
    if (answer == SHM_LINK_REFUSED)
        SHM_FAIL(xp, RDMA_ERR_PEER, "shm: process %d (pid %d) refused the connection",
                 c->peer, (int) pe->pid);
    rdma_shm_dyn_drop(xp, c);
    return answer == SHM_LINK_CROSSED ? RDMA_OK : rdma_conn_failed(c, xp->err);
}

rdma_status_t rdma_shm_dyn_progress(rdma_xport_t * xp)
{
    shm_req_t *box = rdma_shm_mailbox(xp->map), rq;
    shm_peer_t *pe, *next;
    rdma_status_t rc = RDMA_OK;
    size_t i;

    xp->dyn_retry = 0;
    for (i = 0; i < SHM_NREQ; i++) {
        if (__atomic_load_n(&box[i].state, __ATOMIC_ACQUIRE) != SHM_REQ_POSTED)
            continue;
        rq = box[i];
        rq.who[SHM_HELLO_LEN - 1] = '\0';
        if (rdma_shm_dyn_accept(xp, i, &rq))
            __atomic_store_n(&box[i].state, SHM_REQ_FREE, __ATOMIC_RELEASE);
        else
            xp->dyn_retry++;
    }
    for (pe = xp->dyn; pe; pe = next) {
        next = pe->next;
        if (pe->dir == 0 && pe->conn->state == RDMA_CONN_CONNECTING
            && rdma_shm_dyn_answered(xp, pe))
            rc = RDMA_ERR_PEER;
    }
    if (xp->dyn_failed) {
        xp->dyn_failed = 0;
        rc = RDMA_ERR_PEER;
    }
    return rc;
}

rdma_status_t rdma_shm_dyn_close(rdma_xport_t * xp, rdma_conn_t * c)
{
    if (c->priv)
        rdma_shm_dyn_free(xp, c->priv);
    c->priv = NULL;
    c->state = RDMA_CONN_CLOSED;
    return RDMA_OK;
}

void rdma_shm_dyn_finalize(rdma_xport_t * xp)
{
    size_t i;

    for (i = 0; i < SHM_NREQ; i++)
        if (xp->later[i].pe)
            rdma_shm_dyn_free(xp, xp->later[i].pe);
    while (xp->dyn)
        rdma_shm_dyn_free(xp, xp->dyn);
}
