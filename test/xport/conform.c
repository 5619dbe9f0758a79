/*
 * conform.c -- the transport-conformance harness (conform.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "conform.h"
#include "tap.h"

#define GROUP_LIMIT 90.0       /* seconds per scenario */
#define RING (64 * 1024)

const conform_xport_t *conform_t;

double conform_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------- rank side */

void conform_say(node_t * nd, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n > (int) sizeof(buf) - 2)
        n = (int) sizeof(buf) - 2;
    buf[n++] = '\n';
    if (write(nd->fd, buf, (size_t) n) < 0)
        _exit(3);
}

static void str_copy(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int line_read(int fd, char *buf, size_t len)
{
    size_t n = 0;
    while (n + 1 < len) {
        ssize_t k = read(fd, buf + n, 1);
        if (k <= 0)
            return -1;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return 0;
}

static rdma_conn_t *cb_conn_of(void *arg, int rank)
{
    node_t *nd = arg;
    if (rank < 0 || rank >= nd->sc->nprocs || rank == nd->rank)
        return NULL;
    return &nd->conns[rank].xc;
}

/* The index of a connection's peer in nd->conns (dynamic: ids from 1). */
static int peer_index(const node_t * nd, int peer)
{
    return nd->sc->dynamic ? peer - 1 : peer;
}

/* Dynamic: a hello "conform:<rank>" names the connection to that rank. */
static rdma_conn_t *cb_accept(void *arg, const char *who)
{
    node_t *nd = arg;
    int p = -1;

    nd->accepts++;
    if (sscanf(who, "conform:%d", &p) != 1 || p < 0 || p >= nd->sc->nprocs || p == nd->rank
        || nd->rank == nd->sc->refuse_rank)
        return NULL;
    if (nd->rank == nd->sc->later_rank)
        return RDMA_CONN_LATER;
    return &nd->conns[p].xc;
}

/* ev.admit (the channel thread asks): wait_rank refuses until admit_until. */
static int cb_admit(void *arg, rdma_conn_t * c, int take)
{
    node_t *nd = arg;

    (void) c;
    if (!take || !nd->sc->wait_rank || nd->rank != nd->sc->wait_rank
        || conform_now() >= nd->admit_until)
        return 1;
    __atomic_fetch_add(&nd->admit_refused, 1, __ATOMIC_RELAXED);
    return 0;
}

static int cb_card_of(void *arg, int rank, char *buf, size_t len)
{
    node_t *nd = arg;
    rank = peer_index(nd, rank);
    if (rank < 0 || rank >= nd->sc->nprocs || strlen(nd->cards[rank]) >= len)
        return -1;
    strcpy(buf, nd->cards[rank]);
    return 0;
}

static int cb_bind(void *arg, rdma_conn_t * c, const rdma_conn_mem_t * mem)
{
    return rdma_link_bind(c, &((node_t *) arg)->link, mem);
}

static void cb_conn_ready(void *arg, rdma_conn_t * c)
{
    node_t *nd = arg;
    if (nd->ready_calls[peer_index(nd, c->peer)]++ == 0)
        nd->nready++;
}

/* The pipe over every connection (the superpipeline in small steps). */
static void link_fill(const scen_t * sc, rdma_link_config_t * link)
{
    rb_config_t *r = &link->ring;

    memset(link, 0, sizeof(*link));
    *r = (rb_config_t) { .ring_size = sc->ring, .chunk_size = 256, .max_frame = 8192,
        .credit_threshold = sc->ring / 4, .mode = sc->mode, .ring_max = sc->grow };
    if (sc->super) {
        r->max_frame = 1024;
        r->sched_c0 = 2048;
        r->sched_q = 2.0;
        r->sched_max = (sc->grow ? sc->grow : sc->ring) / 4;
    }
}

/* The verbs transport's own settings of the last conform_params (each
 * process opens one transport at a time); shm ignores them. */
static rdma_verbs_params_t conform_vp;

void conform_params(const scen_t * sc, node_t * nd, rdma_xport_params_t * prm)
{
    memset(prm, 0, sizeof(*prm));
    conform_vp = (rdma_verbs_params_t) {.device = conform_t->device, .gid_index = -1,
        .inline_size = sc->inline_size, .force_completion = sc->force_completion,
        .srq_size = sc->srq > 0 ? (size_t) sc->srq : 0,
        .timeout = sc->timeout, .rma_bcopy_max = sc->bcopy, .pinned_max_bytes = !sc->pinned_rank
        || (nd && nd->rank == sc->pinned_rank) ? sc->pinned_max : 0 };
    prm->own = &conform_vp;
    prm->rank = nd ? nd->rank : 0;
    prm->size = sc->nprocs;
    prm->job = conform_t->job;
    prm->ring_size = sc->ring;
    prm->chunk_size = 256;
    prm->ring_max = sc->grow;
    prm->head_writes = sc->mode == RB_MODE_BASIC;
    prm->timeout = sc->timeout;
    prm->ev = (rdma_xport_events_t) { cb_conn_of, cb_card_of, cb_bind, cb_conn_ready,
        rdma_link_landed, rdma_link_pulled, rdma_link_sent, cb_accept, conform_rma_done, cb_admit,
        nd };
    if (sc->dynamic && nd) {
        prm->rank = 0;
        prm->size = 1;
        prm->job = nd->job;
    }
}

rdma_status_t conform_open(node_t * nd, const scen_t * sc, int rank, char *card, char *err,
                           size_t errlen)
{
    rdma_xport_params_t prm;
    int p;

    memset(nd, 0, sizeof(*nd));
    nd->rank = rank;
    nd->sc = sc;
    nd->seed = 12345u + (unsigned) rank;
    snprintf(nd->job, sizeof(nd->job), "%s-%d", conform_t->job, rank);
    snprintf(nd->hello, sizeof(nd->hello), "conform:%d", rank);
    conform_params(sc, nd, &prm);
    link_fill(sc, &nd->link);
    for (p = 0; p < CONFORM_MAXP; p++) {
        nd->conns[p].xc.peer = sc->dynamic ? p + 1 : p;
        nd->conns[p].xc.hello = sc->dynamic ? nd->hello : NULL;
    }
    return conform_t->ops->open(&prm, &nd->xp, card, CONFORM_CARD_LEN, err, errlen);
}

/* Byte i of the stream from rank s to rank d. */
unsigned char conform_gen(int s, int d, size_t i)
{
    uint32_t x = (uint32_t) i * 2654435761u ^ (uint32_t) (s * 131 + d) * 0x85ebca6bu;
    return (uint8_t) (x >> 24 ^ x >> 11);
}

/* A scenario in which a connection must fail (no streams). */
static int fails_to_connect(const scen_t * sc)
{
    return sc->silent_rank > 0 || sc->refuse_rank > 0 || sc->later_rank > 0 || sc->ext_fails;
}

/* One progress call; a failure is fatal for the rank unless it is the
 * expected peer failure, which returns 1. */
int conform_progress(node_t * nd)
{
    int rc = conform_t->ops->progress(nd->xp);
    if (rc == RDMA_OK)
        return 0;
    if (rc == RDMA_ERR_PEER && (nd->sc->kill_rank > 0 || fails_to_connect(nd->sc))) {
        conform_say(nd, "P %.6f %s", conform_now(), conform_t->ops->error(nd->xp));
        return 1;
    }
    conform_say(nd, "D progress failed (%d): %s", rc, conform_t->ops->error(nd->xp));
    exit(1);
}

typedef struct flow {
    size_t sent, rcvd;
} flow_t;

static int flow_send(node_t * nd, int p, flow_t * f, size_t total)
{
    uint8_t buf[3 * 7000];
    struct iovec iov[3];
    size_t len, acc, j, k, n = 0;
    int i, niov = 1 + rand_r(&nd->seed) % 3;

    len = 1 + rand_r(&nd->seed) % (nd->sc->msg_max ? nd->sc->msg_max : (size_t) niov * 7000);
    if (len > total - f->sent)
        len = total - f->sent;
    for (j = 0; j < len; j++)
        buf[j] = conform_gen(nd->rank, p, f->sent + j);
    for (i = 0; i < niov; i++) {
        k = i == niov - 1 ? len - n : (len - n) / 2;
        iov[i].iov_base = buf + n;
        iov[i].iov_len = k;
        n += k;
    }
    if (rb_pipe_putv(&nd->conns[p].pipe, iov, niov, &acc)) {
        if (nd->conns[p].xc.state != RDMA_CONN_FAILED)
            conform_say(nd, "D rb_pipe_putv to rank %d failed: %s", p,
                        conform_t->ops->error(nd->xp));
        return -1;
    }
    f->sent += acc;
    return 0;
}

static int flow_recv(node_t * nd, int p, flow_t * f, size_t total)
{
    uint8_t buf[9000];
    struct iovec iov = { buf, 1 + rand_r(&nd->seed) % sizeof(buf) };
    size_t got, j;

    if (iov.iov_len > total - f->rcvd)
        iov.iov_len = total - f->rcvd;  /* what follows belongs to the ping-pong */
    if (rb_pipe_getv(&nd->conns[p].pipe, &iov, 1, &got)) {
        conform_say(nd, "D rb_pipe_getv from rank %d failed: %s", p, conform_t->ops->error(nd->xp));
        return -1;
    }
    for (j = 0; j < got; j++)
        if (buf[j] != conform_gen(p, nd->rank, f->rcvd + j)) {
            conform_say(nd, "D byte %zu from rank %d is %u, expected %u", f->rcvd + j, p, buf[j],
                conform_gen(p, nd->rank, f->rcvd + j));
            return -1;
        }
    f->rcvd += got;
    return 0;
}

/* A peer whose stream has all arrived is still read, as a channel reads
 * every pipe: the MOVE frames of growing rings come on it.  Its next data
 * (the ping-pong) stays unconsumed. */
static int flow_poll(node_t * nd, int p)
{
    const void *buf;
    size_t len;
    int type;

    if (rb_pipe_peek(&nd->conns[p].pipe, &type, &buf, &len) >= 0)
        return 0;
    conform_say(nd, "D rb_pipe_peek from rank %d failed: %s", p, conform_t->ops->error(nd->xp));
    return -1;
}

/* Stream sc->stream bytes to and from every peer at once, verified; the
 * kill rank dies half way.  Returns 1 if a peer failure was reported. */
static int rank_stream(node_t * nd)
{
    const scen_t *sc = nd->sc;
    flow_t fl[CONFORM_MAXP] = { {0, 0} };
    double limit = conform_now() + GROUP_LIMIT;
    int p, busy = 1, pause;

    while (busy) {
        busy = 0;
        /* grow scenarios: every other 10 ms (one clock for all ranks) reads
         * nothing, so each ring size meets a sender that fills it (a sender
         * asks only then) and the next 10 ms bring MOVE and SWITCH */
        pause = (sc->grow || sc->pause) && (long) (conform_now() * 100) % 2;
        if (conform_progress(nd))
            return 1;
        for (p = 0; p < sc->nprocs; p++) {
            if (p == nd->rank)
                continue;
            if ((fl[p].sent < sc->stream && flow_send(nd, p, &fl[p], sc->stream))
                || (fl[p].rcvd < sc->stream ? !pause && flow_recv(nd, p, &fl[p], sc->stream)
                    : flow_poll(nd, p))) {
                if (nd->conns[p].xc.state == RDMA_CONN_FAILED && conform_progress(nd))
                    return 1;   /* the write itself saw the failure */
                exit(1);
            }
            busy |= fl[p].sent < sc->stream || fl[p].rcvd < sc->stream;
            if (nd->rank == sc->kill_rank && fl[p].rcvd >= sc->stream / 4) {
                conform_say(nd, "K %.6f", conform_now());
                raise(SIGKILL);
            }
        }
        if (conform_now() > limit) {
            char desc[512];
            conform_t->ops->describe(&nd->conns[!nd->rank].xc, desc, sizeof(desc));
            conform_say(nd, "D stream stuck: sent %zu rcvd %zu of %zu; %s", fl[!nd->rank].sent,
                fl[!nd->rank].rcvd, sc->stream, desc);
            exit(1);
        }
    }
    for (p = 0; p < sc->nprocs; p++)
        if (p != nd->rank && rb_pipe_flush_credit(&nd->conns[p].pipe))
            exit(1);
    for (p = 0; sc->grow && p < sc->nprocs; p++) {
        const rb_pipe_t *pp = &nd->conns[p].pipe;
        size_t r = pp->tx.cfg.ring_size;

        if (p != nd->rank && (sc->pinned_max ? r >= sc->grow || r == sc->ring : r != sc->grow)) {
            conform_say(nd, "D the ring to %d is %zu bytes (from %zu, at most %zu, cap %zu; "
                        "%llu grows, %llu full stalls, asked at %zu, move %zu; from %d: %zu, "
                        "offer %zu)", p, r, sc->ring, sc->grow, sc->pinned_max,
                        (unsigned long long) pp->stats.grows,
                        (unsigned long long) pp->stats.full_stalls, pp->tx.asked,
                        pp->tx.move.size, p, pp->rx.cfg.ring_size, pp->rx.offer);
            exit(1);
        }
    }
    return 0;
}

/* Scenario block: sleep until the peer's write raises a CQ event.  A wait
 * that runs to its 5 s timeout is a lost wakeup. */
static void pp_wait(node_t * nd)
{
    double t = conform_now();

    conform_t->ops->wait(nd->xp, 5000000);
    if (conform_now() - t > 4.5) {
        conform_say(nd, "D lost wakeup: wait() ran to its 5 s timeout");
        exit(1);
    }
}

static void pp_move(node_t * nd, int p, int send)
{
    uint64_t v = 0x0123456789abcdefULL;
    struct iovec iov = { &v, 8 };
    size_t n = 0, k;
    double limit = conform_now() + 60;
    int armed;

    while (n < 8) {
        armed = nd->sc->block && !send;
        if (armed && !conform_t->ops->wait_arm(nd->xp)) {
            conform_say(nd, "D wait_arm() declined on a write-with-imm connection");
            exit(1);
        }
        conform_progress(nd);
        iov.iov_base = (char *) &v + n;
        iov.iov_len = 8 - n;
        if ((send ? rb_pipe_putv : rb_pipe_getv) (&nd->conns[p].pipe, &iov, 1, &k)
            || conform_now() > limit) {
            conform_say(nd, "D ping-pong stuck or failed: %s", conform_t->ops->error(nd->xp));
            exit(1);
        }
        n += k;
        if (armed && n < 8)
            pp_wait(nd);
    }
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* 8-byte ping-pong between ranks 0 and 1: half round trip in us (min,
 * median, mean: under a loaded TCG host only the min is near the truth). */
static void rank_pingpong(node_t * nd)
{
    int i, n = nd->sc->pingpong, warm = 20, peer = !nd->rank;
    double rtt[1000], t0 = 0, t;

    if (nd->rank > 1 || n > 1000)
        return;
    for (i = 0; i < n + warm; i++) {
        t = conform_now();
        if (i == warm)
            t0 = t;
        pp_move(nd, peer, nd->rank == 0);
        pp_move(nd, peer, nd->rank != 0);
        if (i >= warm)
            rtt[i - warm] = conform_now() - t;
    }
    qsort(rtt, (size_t) n, sizeof(rtt[0]), dbl_cmp);
    if (nd->rank == 0)
        conform_say(nd, "D ping-pong 8 B, half round trip: min %.1f us, median %.1f us, "
                    "mean %.1f us (%d iterations)", rtt[0] * 5e5, rtt[n / 2] * 5e5,
                    (conform_now() - t0) * 5e5 / n, n);
}

static void rank_connect(node_t * nd)
{
    const scen_t *sc = nd->sc;
    double limit = conform_now() + GROUP_LIMIT;
    char desc[512];
    int p;

    if (nd->rank == sc->late_rank)
        usleep((useconds_t) (sc->late * 1e6));
    conform_say(nd, "S %.6f", conform_now());
    for (p = 0; p < sc->nprocs; p++) {
        if (p == nd->rank || (!sc->all_connect && p < nd->rank))
            continue;
        if (conform_t->ops->connect(nd->xp, &nd->conns[p].xc)) {
            conform_say(nd, "D connect to rank %d: %s", p, conform_t->ops->error(nd->xp));
            exit(1);
        }
    }
    while (nd->nready < sc->nprocs - 1) {
        if (conform_progress(nd)) {
            if (fails_to_connect(sc))
                return;
            exit(1);
        }
        if (conform_now() > limit) {
            conform_say(nd, "D only %d of %d connections ready", nd->nready, sc->nprocs - 1);
            exit(1);
        }
    }
    for (p = 0; p < sc->nprocs && nd->rank == 0; p++) {
        if (p == nd->rank)
            continue;
        conform_t->ops->describe(&nd->conns[p].xc, desc, sizeof(desc));
        conform_say(nd, "D rank 0 -> %d: %s", p, desc);
    }
    if (nd->rank == 0) {
        const char *m, *io;

        conform_t->ops->describe(&nd->conns[1].xc, desc, sizeof(desc));
        m = strstr(desc, "mode=");
        io = strstr(desc, "in_order=");
        conform_say(nd, "M %.*s %.*s", m ? (int) strcspn(m + 5, " ") : 7, m ? m + 5 : "unknown",
                    io ? (int) strcspn(io + 9, " (") : 1, io ? io + 9 : "-");
    }
}

/* Every connection READY, announced exactly once (no duplicate pairing). */
static void rank_check_ready(node_t * nd)
{
    int p;

    for (p = 0; p < nd->sc->nprocs; p++) {
        if (p == nd->rank || (nd->conns[p].xc.state == RDMA_CONN_READY && nd->ready_calls[p] == 1))
            continue;
        conform_say(nd, "D rank %d: connection to rank %d in state %d, conn_ready called %d times",
            nd->rank, p, nd->conns[p].xc.state, nd->ready_calls[p]);
        exit(1);
    }
}

void conform_barrier(node_t * nd)
{
    char line[16];
    conform_say(nd, "B");
    if (line_read(nd->fd, line, sizeof(line)) || strcmp(line, "G"))
        exit(2);
}

/* The silent rank: holds its device open and never progresses until the
 * driver's barrier releases it. */
static void rank_silent(node_t * nd)
{
    conform_barrier(nd);
    conform_t->ops->finalize(nd->xp);
    exit(0);
}

/* The refusing rank: answers connection requests (refusing them) for
 * `late` s, then leaves. */
static void rank_refusing(node_t * nd)
{
    double until = conform_now() + nd->sc->late;

    while (conform_now() < until)
        conform_progress(nd);
    conform_barrier(nd);
    rdma_thread_stop(&nd->thr);
    conform_t->ops->finalize(nd->xp);
    exit(0);
}

/* The close handshake as CH3 does it: closing, a last message each way,
 * then quiesce.  The exit rank leaves at once (its last write may still be in
 * its send queue: close() must drain it); the others keep progressing for
 * `late` s, long enough for keepalives to come due on the closed link. */
static void rank_close_handshake(node_t * nd)
{
    const scen_t *sc = nd->sc;
    double until;
    int p;

    for (p = 0; p < sc->nprocs; p++) {
        if (p == nd->rank || (nd->rank != sc->exit_rank && p != sc->exit_rank))
            continue;
        rdma_link_closing(&nd->conns[p]);
        pp_move(nd, p, 1);
        pp_move(nd, p, 0);
        rdma_link_quiesce(&nd->conns[p]);
    }
    if (nd->rank == sc->exit_rank) {
        rdma_thread_stop(&nd->thr);
        for (p = 0; p < sc->nprocs; p++)
            if (p != nd->rank)
                conform_t->ops->close(nd->xp, &nd->conns[p].xc);
        conform_t->ops->finalize(nd->xp);
        exit(0);
    }
    for (until = conform_now() + sc->late; conform_now() < until;)
        conform_progress(nd);
}

/* Connecting again after a close (the channel's eviction, rdma_xport.h
 * close()): rank 0 reconnects while rank 1 still holds the old
 * connection for `late` s (more than the timeout: the transport must keep
 * the request alive), then both stream again.  Rank 1 quiesces the old one
 * first: its writes there (credits, keepalives) fail once rank 0's end is
 * gone, which the channel, having read rank 0's BYE, takes as the close. */
static void rank_reopen(node_t * nd)
{
    rdma_conn_t *c = &nd->conns[nd->rank == 0].xc;
    double limit = conform_now() + GROUP_LIMIT;

    conform_barrier(nd);
    if (nd->rank == 1) {
        rdma_link_quiesce(&nd->conns[0]);
        usleep((useconds_t) (nd->sc->late * 1e6));
    }
    conform_t->ops->close(nd->xp, c);
    c->state = RDMA_CONN_IDLE;
    if (nd->rank == 0 && conform_t->ops->connect(nd->xp, c)) {
        conform_say(nd, "D connect again: %s", conform_t->ops->error(nd->xp));
        exit(1);
    }
    while (c->state != RDMA_CONN_READY)
        if (conform_progress(nd) || conform_now() > limit) {
            conform_say(nd, "D the connection did not open again (state %d): %s", c->state,
                        c->why);
            exit(1);
        }
    if (rank_stream(nd))
        exit(1);
}

/* The transport's own scenario, if any, at this phase. */
static void rank_hook(node_t * nd, int phase)
{
    if (nd->sc->ext && conform_t->hook)
        conform_t->hook(nd, phase);
}

/* The channel thread on the transport's background work, as rdma_chan
 * starts it once the cards are known. */
static void rank_thread_start(node_t * nd)
{
    rdma_thread_src_t src;
    char err[RDMA_MSG_LEN];

    rdma_thread_init(&nd->thr);
    nd->admit_until = conform_now() + nd->sc->late;
    if (rdma_xport_bg_src(conform_t->ops, nd->xp, &src)
        && (rdma_thread_add(&nd->thr, &src) || rdma_thread_start(&nd->thr, err, sizeof(err)))) {
        conform_say(nd, "D channel thread: %s", err);
        exit(1);
    }
}

static void rank_main(const scen_t * sc, int rank, int fd)
{
    node_t nd;
    char card[CONFORM_CARD_LEN], err[512], line[CONFORM_MAXP * (CONFORM_CARD_LEN + 1) + 8];
    char *tok, *save;
    int p, rc;

    if (sc->unsafe_in_order)
        setenv("CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER", "1", 1);
    rc = conform_open(&nd, sc, rank, card, err, sizeof(err));
    nd.fd = fd;
    if (rc) {
        conform_say(&nd, "E open failed (%d): %s", rc, err);
        exit(1);
    }
    conform_say(&nd, "C %s", card);
    if (line_read(fd, line, sizeof(line)) || line[0] != 'T')
        exit(2);
    for (p = 0, tok = strtok_r(line + 1, " ", &save); tok && p < CONFORM_MAXP;
         tok = strtok_r(NULL, " ", &save))
        str_copy(nd.cards[p++], CONFORM_CARD_LEN, tok);
    if (rank == sc->silent_rank)
        rank_silent(&nd);
    rank_thread_start(&nd);
    if (rank == sc->refuse_rank || rank == sc->later_rank)
        rank_refusing(&nd);
    rank_hook(&nd, CONFORM_CARDS);
    rank_connect(&nd);
    if (sc->wait_rank && rank == sc->wait_rank
        && !__atomic_load_n(&nd.admit_refused, __ATOMIC_RELAXED)) {
        conform_say(&nd, "D ev.admit was never asked to refuse a request");
        exit(1);
    }
    if (!fails_to_connect(sc) && !rank_stream(&nd)) {
        if (sc->pingpong)
            rank_pingpong(&nd);
        rank_check_ready(&nd);
        if (sc->rma && conform_rma(&nd))
            exit(1);
        if (sc->reopen && rank < 2)
            rank_reopen(&nd);
        if (sc->exit_rank > 0)
            rank_close_handshake(&nd);
    }
    rank_hook(&nd, CONFORM_DATA);
    conform_barrier(&nd);
    rank_hook(&nd, CONFORM_DONE);
    rdma_thread_stop(&nd.thr);
    for (p = 0; p < sc->nprocs; p++)
        if (p != rank)
            conform_t->ops->close(nd.xp, &nd.conns[p].xc);
    conform_t->ops->finalize(nd.xp);
    exit(0);
}

/* ------------------------------------------------------- driver side */

typedef struct child {
    pid_t pid;
    int fd, eof, barrier, status;
    char buf[4096];
    size_t len;
    char card[CONFORM_CARD_LEN];
} child_t;

typedef struct group {
    const scen_t *sc;
    child_t ch[CONFORM_MAXP];
    double t_kill, t_peer, t_start;     /* t_peer: rank 0's first EPEER */
    char peer_msg[512], mode[32], in_order[16];       /* rank 0's first connection */
    int failed, ncards, open_err;
    int peer_blank;             /* 1 + a rank that reported EPEER without a diagnosis */
} group_t;

static void group_line(group_t * g, int r, const char *l)
{
    switch (l[0]) {
    case 'C':
        str_copy(g->ch[r].card, CONFORM_CARD_LEN, l + 2);
        g->ncards++;
        break;
    case 'E':
        g->open_err = 1;
        diag("rank %d: %s", r, l + 2);
        break;
    case 'D':
        diag("%s", l + 2);
        break;
    case 'M':
        if (sscanf(l + 2, "%31s %15s", g->mode, g->in_order) != 2)
            g->in_order[0] = '\0';
        break;
    case 'K':
        g->t_kill = atof(l + 2);
        break;
    case 'S':
        g->t_start = atof(l + 2);
        break;
    case 'P':
        if (!strchr(l + 2, ' ')[1])
            g->peer_blank = r + 1;
        if (r || g->t_peer > 0)
            break;
        g->t_peer = strtod(l + 2, NULL);
        str_copy(g->peer_msg, sizeof(g->peer_msg), strchr(l + 2, ' ') + 1);
        break;
    case 'B':
        g->ch[r].barrier = 1;
        break;
    }
}

/* Read what rank r sent; split lines. */
static void group_read(group_t * g, int r)
{
    child_t *c = &g->ch[r];
    ssize_t k = read(c->fd, c->buf + c->len, sizeof(c->buf) - 1 - c->len);
    char *nl;

    if (k <= 0) {
        c->eof = 1;
        return;
    }
    c->len += (size_t) k;
    c->buf[c->len] = '\0';
    while ((nl = strchr(c->buf, '\n'))) {
        char line[sizeof(c->buf)];

        *nl = '\0';
        memcpy(line, c->buf, (size_t) (nl - c->buf) + 1);
        group_line(g, r, line);
        c->len -= (size_t) (nl + 1 - c->buf);
        memmove(c->buf, nl + 1, c->len + 1);
    }
}

static void group_send_all(group_t * g, const char *s)
{
    int r;
    for (r = 0; r < g->sc->nprocs; r++)
        if (!g->ch[r].eof && write(g->ch[r].fd, s, strlen(s)) < 0)
            g->ch[r].eof = 1;
}

/* The driver's side of the exchange: cards out, barrier, until all EOF. */
static void group_pump(group_t * g)
{
    int n = g->sc->nprocs, r, open_fds, sent_table = 0;
    double limit = conform_now() + GROUP_LIMIT + 30;
    struct pollfd pf[CONFORM_MAXP];
    char table[CONFORM_MAXP * (CONFORM_CARD_LEN + 1) + 8];

    for (;;) {
        int nbar = 0, waiting = 0;
        for (r = 0, open_fds = 0; r < n; r++) {
            pf[r].fd = g->ch[r].eof ? -1 : g->ch[r].fd;
            pf[r].events = POLLIN;
            open_fds += !g->ch[r].eof;
            nbar += g->ch[r].barrier || g->ch[r].eof;
            waiting += g->ch[r].barrier;
        }
        if (!open_fds || conform_now() > limit)
            break;
        if (!sent_table && g->ncards == n) {
            strcpy(table, "T");
            for (r = 0; r < n; r++)
                strcat(strcat(table, " "), g->ch[r].card);
            group_send_all(g, strcat(table, "\n"));
            sent_table = 1;
        }
        if (waiting && nbar == n) {     /* a barrier: every rank there (or gone) */
            group_send_all(g, "G\n");
            for (r = 0; r < n; r++)
                g->ch[r].barrier = 0;
        }
        if (poll(pf, (nfds_t) n, 500) > 0)
            for (r = 0; r < n; r++)
                if (pf[r].revents)
                    group_read(g, r);
    }
}

static int group_run(const scen_t * sc, group_t * g)
{
    int r, sv[2], ok = 1;
    double t0 = conform_now();

    memset(g, 0, sizeof(*g));
    g->sc = sc;
    fflush(stdout);
    fflush(stderr);
    for (r = 0; r < sc->nprocs; r++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
            return 0;
        g->ch[r].pid = fork();
        if (g->ch[r].pid == 0) {
            int q;
            close(sv[0]);
            for (q = 0; q < r; q++)
                close(g->ch[q].fd);
            rank_main(sc, r, sv[1]);
        }
        close(sv[1]);
        g->ch[r].fd = sv[0];
    }
    group_pump(g);
    for (r = 0; r < sc->nprocs; r++) {
        if (!g->ch[r].eof)
            kill(g->ch[r].pid, SIGKILL);
        waitpid(g->ch[r].pid, &g->ch[r].status, 0);
        close(g->ch[r].fd);
        if (r == sc->kill_rank)
            ok &= WIFSIGNALED(g->ch[r].status) && WTERMSIG(g->ch[r].status) == SIGKILL;
        else if (!WIFEXITED(g->ch[r].status) || WEXITSTATUS(g->ch[r].status)) {
            diag("rank %d: %s %d", r, WIFEXITED(g->ch[r].status) ? "exit status" :
                 "killed by signal", WIFEXITED(g->ch[r].status) ?
                 WEXITSTATUS(g->ch[r].status) : WTERMSIG(g->ch[r].status));
            ok = 0;
        }
    }
    diag("(%.1f s)", conform_now() - t0);
    return ok;
}

/* ----------------------------------------------------------- scenarios */

/* A scenario with its zero fields set to the defaults (rank 0 is never the
 * kill, silent, late or exit rank, so 0 there means "none"). */
scen_t conform_defaults(const scen_t * in)
{
    scen_t sc = in ? *in : (scen_t) { 0 };

    sc.nprocs = sc.nprocs ? sc.nprocs : 2;
    sc.inline_size = sc.inline_size ? sc.inline_size : 256;
    sc.srq = sc.srq ? sc.srq : 256;
    sc.stream = sc.stream ? sc.stream : sc.grow ? 4 << 20 : 1 << 20;
    sc.ring = sc.ring ? sc.ring : RING;
    sc.timeout = sc.timeout > 0 ? sc.timeout : 30;
    sc.kill_rank = sc.kill_rank ? sc.kill_rank : -1;
    sc.silent_rank = sc.silent_rank ? sc.silent_rank : -1;
    sc.late_rank = sc.late_rank ? sc.late_rank : -1;
    sc.exit_rank = sc.exit_rank ? sc.exit_rank : -1;
    sc.refuse_rank = sc.refuse_rank ? sc.refuse_rank : -1;
    sc.later_rank = sc.later_rank ? sc.later_rank : -1;
    sc.late = sc.late > 0 ? sc.late : 1.5;
    return sc;
}

/* A scenario where rank 1 fails rank 0: pass if rank 0's progress reported
 * EPEER with a diagnosis containing want within 30 s of the kill (or of the
 * connect), and every rank that reported EPEER said why; a killed process
 * outside the job is named by its pid, a killed rank of the job by its
 * host (ours: the group runs on one), whole. */
static void run_peer_failure(const scen_t * sc, const char *want, const char *desc)
{
    group_t g;
    int pass = group_run(sc, &g);
    double t_ref = sc->kill_rank > 0 ? g.t_kill : g.t_start, dt = g.t_peer - t_ref;
    char who[HOST_NAME_MAX + 8] = "", host[HOST_NAME_MAX + 1];

    if (sc->dynamic && sc->kill_rank > 0)
        snprintf(who, sizeof(who), "process %d ", (int) g.ch[sc->kill_rank].pid);
    else if (sc->kill_rank > 0 && !gethostname(host, sizeof(host)))
        snprintf(who, sizeof(who), " on %s ", host);
    ok(pass && g.t_peer > 0 && t_ref > 0 && dt < 30 && strstr(g.peer_msg, want)
       && strstr(g.peer_msg, who) && !g.peer_blank,
       "%s: EPEER after %.1f s", desc, g.t_peer > 0 && t_ref > 0 ? dt : -1.0);
    diag("diagnosis: %s", g.peer_msg[0] ? g.peer_msg : "(none)");
    if (g.peer_blank)
        diag("rank %d reported EPEER without a diagnosis", g.peer_blank - 1);
}

/* Streams and ping-pong; for the default mode also the flag-polling story. */
static void run_stream(const scen_t * sc, const char *desc, int default_mode)
{
    scen_t unsafe = *sc;
    group_t g;
    int pass = group_run(sc, &g);

    ok(pass, "%s%s%s", desc, default_mode ? ": mode " : "", default_mode ? g.mode : "");
    if (!default_mode)
        return;
    if (!strcmp(g.mode, "flag-poll")) {
        ok(!conform_t->ops->wire || !strcmp(g.in_order, "1/1")
           || getenv("CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER"), "flag polling chosen: %s",
           conform_t->ops->wire ? "both ends report in-order RDMA writes" : "shared memory");
        return;
    }
    diag("the device does not report in-order RDMA writes: flag polling not used");
    unsafe.unsafe_in_order = 1;
    pass = group_run(&unsafe, &g);
    /* a record, not an assertion: nothing guarantees it on this device */
    diag("flag polling forced on a device without the in-order guarantee: data %s "
         "(unsafe by design, for the record only)", pass ? "intact" : "CORRUPT or lost");
}


/* What every transport passes. */
const conform_case_t conform_cases[] = {
    {"default", "2 ranks, 1 MiB random-size streams both ways verified, 8-byte ping-pong",
     {.pingpong = 300}, NULL},
    {"basic", "2 ranks, basic mode (separate head/tail writes): streams + ping-pong",
     {.mode = RB_MODE_BASIC, .pingpong = 300}, NULL},
    {"block", "2 ranks, receivers sleep in wait() until each ping-pong message arrives: "
     "no lost wakeup", {.force_completion = 1, .block = 1, .pingpong = 300}, NULL},
    {"super", "2 ranks, superpipeline groups (one write lands many frames): streams",
     {.super = 1, .force_completion = 1, .pingpong = 300}, NULL},
    {"simultaneous", "2 ranks connect to each other at the same time: one connection, streams",
     {.all_connect = 1}, NULL},
    {"simultaneous", "3 ranks, all pairs connect at once (inline 4096 requested): streams",
     {.nprocs = 3, .all_connect = 1, .inline_size = 4096}, NULL},
    {"late", "responder progresses 1.5 s late: one connection",
     {.late_rank = 1, .timeout = 10}, NULL},
    {"busy", "responder does not call the transport for 3x the timeout (2 s): its channel "
     "thread answers, nobody is reported dead, streams", {.late_rank = 1, .late = 6,
                                                          .timeout = 2}, NULL},
    {"closed", "3 ranks; rank 1 exits right after its close handshake with rank 0, which "
     "progresses 3x the timeout (2 s) more: its last message lands, nothing is reported",
     {.nprocs = 3, .exit_rank = 1, .late = 6, .timeout = 2}, NULL},
    {"rma", "2 ranks: one-sided puts (8 B inline, 4 KiB, the rest of 256 KiB) and gets into "
     "each other's exposed window at once, read back, and seen by the owner's CPU",
     {.rma = 1}, NULL},
    {"rma", "2 ranks, verbs bounce buffers up to 8 KiB: the 4 KiB put and the small gets go "
     "through them; atomics (where the device has them) on each other's words and our own",
     {.rma = 1, .bcopy = 8192}, NULL},
    {"rma", "3 ranks, bounce buffers: one-sided puts, gets and atomics between all pairs at once",
     {.nprocs = 3, .rma = 1, .bcopy = 8192}, NULL},
    {"kill", "peer SIGKILLed mid-stream, the survivor's progress reports it",
     {.kill_rank = 1, .timeout = 5}, "connection to rank 1 on "},
};
const size_t conform_ncases = sizeof(conform_cases) / sizeof(conform_cases[0]);

/* Growing rings (the transport's ring_new..ring_move). */
const conform_case_t conform_grow_cases[] = {
    {"grow", "2 ranks, rings start at 4 KiB and grow to 64 KiB under the streams (each a "
     "new ring offered, switched to and the old one freed): streams + ping-pong verified",
     {.ring = 4096, .grow = 65536, .pingpong = 300}, NULL},
    {"grow", "3 ranks, write-with-imm, superpipeline: rings grow 4 -> 64 KiB, streams",
     {.nprocs = 3, .ring = 4096, .grow = 65536, .force_completion = 1, .super = 1}, NULL},
    {"grow", "2 ranks, basic mode: rings grow 4 -> 64 KiB, streams",
     {.ring = 4096, .grow = 65536, .mode = RB_MODE_BASIC}, NULL},
    {"grow", "2 jobs of one rank (peers outside the job): rings grow 4 -> 64 KiB, streams",
     {.dynamic = 1, .ring = 4096, .grow = 65536}, NULL},
};
const size_t conform_ngrow_cases = sizeof(conform_grow_cases) / sizeof(conform_grow_cases[0]);

/* Peers outside the job (dynamic processes): every rank a job of its own. */
const conform_case_t conform_dyn_cases[] = {
    {"dyn", "2 jobs of one rank: connection through the transport's accept path, streams both "
     "ways verified, ping-pong", {.dynamic = 1, .pingpong = 300}, NULL},
    {"dyn", "2 jobs connect to each other at the same time: one connection wins, streams",
     {.dynamic = 1, .all_connect = 1}, NULL},
    {"dyn", "4 jobs, all pairs connect at once, basic mode: streams",
     {.dynamic = 1, .nprocs = 4, .all_connect = 1, .mode = RB_MODE_BASIC}, NULL},
    {"dyn", "2 jobs, receivers sleep in wait(): no lost wakeup",
     {.dynamic = 1, .block = 1, .force_completion = 1, .pingpong = 300}, NULL},
    {"dyn", "2 jobs, the acceptor refuses the connector's hello: the connector is told so",
     {.dynamic = 1, .refuse_rank = 1, .late = 3}, "refused the connection"},
    {"dyn", "2 jobs, the acceptor's owner answers the hello later, for ever: the connector "
     "gives up after the timeout (2 s)", {.dynamic = 1, .later_rank = 1, .late = 5,
                                           .timeout = 2}, "did not answer the connection request"},
    {"kill", "2 jobs of one rank: the peer SIGKILLed mid-stream, the survivor's progress "
     "reports it", {.dynamic = 1, .kill_rank = 1, .timeout = 5}, "outside the job"},
};
const size_t conform_ndyn_cases = sizeof(conform_dyn_cases) / sizeof(conform_dyn_cases[0]);

void conform_run(const conform_case_t * cases, size_t n, const char *only)
{
    size_t i;

    for (i = 0; i < n; i++) {
        scen_t sc = conform_defaults(&cases[i].sc);

        if (only && !strstr(only, cases[i].id))
            continue;
        if (cases[i].want)
            run_peer_failure(&sc, cases[i].want, cases[i].desc);
        else
            run_stream(&sc, cases[i].desc, cases == conform_cases && i == 0);
    }
}
