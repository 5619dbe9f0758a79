/*
 * t_xport_verbs: TAP test of the verbs transport (rdma_xport_verbs) with
 * rb_pipe on a real verbs device (rxe0 inside the Soft-RoCE VM).
 *
 * The driver (this process) never touches the device: every scenario runs in
 * forked "ranks" that open the transport, send their card to the driver over
 * a socketpair (standing in for PMI), get everybody's cards back, connect and
 * stream through rb_pipe.  Ranks report "D text" diagnostics, "K t" (about to
 * be killed at CLOCK_MONOTONIC t), "P t text" (peer failure seen at t) and
 * "B" (barrier) lines; their exit status is the verdict.  Latencies are
 * reported, never asserted (TCG emulation on a loaded host).
 *
 * usage: t_xport_verbs [DEVICE]   (default: first device with an active port)
 *   CH3RDMA_T_XPORT_VERBS_ONLY=id,... runs only those scenarios (see cases[]).
 * Without a device only the two open() failure checks run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>

#include "rb_pipe.h"
#include "rdma_link.h"
#include "tap.h"


#define MAXP 4
#define CARD_LEN 256
#define GROUP_LIMIT 90.0       /* seconds per scenario */
#define RING (64 * 1024)
#define ZLEN (8u << 20)         /* zcopy scenario: bytes read */

typedef struct scen {
    int nprocs;
    int all_connect;            /* every rank connects to every other at once */
    rb_mode_t mode;
    int force_completion;
    int super;                  /* superpipeline groups: C0 2 KiB, q 2, 1 KiB frames */
    int unsafe_in_order;        /* CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER */
    size_t inline_size;
    size_t stream;              /* bytes per direction per pair */
    int pingpong;               /* 8-byte round trips, rank 0 <-> 1 */
    int block;                  /* ping-pong receivers sleep in wait() */
    int kill_rank;              /* this rank SIGKILLs itself mid-stream */
    int silent_rank;            /* this rank never calls progress */
    int late_rank;              /* this rank sleeps 1.5 s before progressing */
    int zcopy;                  /* rank 0 RDMA-reads rank 1's buffers (rank_zcopy) */
    int forge;                  /* rank 0 gets rank 1's card with a wrong auth */
    double timeout;
} scen_t;

typedef struct node {
    int rank, fd;
    const scen_t *sc;
    char cards[MAXP][CARD_LEN];
    rdma_link_t conns[MAXP];
    rdma_link_config_t link;
    int nready, ready_calls[MAXP];
    rdma_xport_t *xp;
    unsigned seed;
} node_t;

static const char *device;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------- rank side */

static void __attribute__((format(printf, 2, 3))) say(node_t * nd, const char *fmt, ...)
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

static int cb_card_of(void *arg, int rank, char *buf, size_t len)
{
    node_t *nd = arg;
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
    if (nd->ready_calls[c->peer]++ == 0)
        nd->nready++;
}

/* The pipe over every connection (the superpipeline in small steps). */
static void link_fill(const scen_t * sc, rdma_link_config_t * link)
{
    rb_config_t *r = &link->ring;

    memset(link, 0, sizeof(*link));
    *r = (rb_config_t) { RING, 256, 8192, RING / 4, sc->mode, 0, 0, 0, 0 };
    if (sc->super) {
        r->max_frame = 1024;
        r->sched_c0 = 2048;
        r->sched_q = 2.0;
        r->sched_max = RING / 4;
    }
}

static void params_fill(const scen_t * sc, node_t * nd, rdma_xport_params_t * prm)
{
    memset(prm, 0, sizeof(*prm));
    prm->rank = nd ? nd->rank : 0;
    prm->size = sc->nprocs;
    prm->job = "t_xport_verbs";
    prm->ring_size = RING;
    prm->chunk_size = 256;
    prm->head_writes = sc->mode == RB_MODE_BASIC;
    prm->ev = (rdma_xport_events_t) { cb_conn_of, cb_card_of, cb_bind, cb_conn_ready,
        rdma_link_landed, rdma_link_pulled, nd };
    prm->device = device;
    prm->gid_index = -1;
    prm->inline_size = sc->inline_size;
    prm->force_completion = sc->force_completion;
    prm->timeout = sc->timeout;
}

/* Byte i of the stream from rank s to rank d. */
static uint8_t gen(int s, int d, size_t i)
{
    uint32_t x = (uint32_t) i * 2654435761u ^ (uint32_t) (s * 131 + d) * 0x85ebca6bu;
    return (uint8_t) (x >> 24 ^ x >> 11);
}

/* One progress call; a failure is fatal for the rank unless it is the
 * expected peer failure, which returns 1. */
static int rank_progress(node_t * nd)
{
    int rc = rdma_xport_verbs.progress(nd->xp);
    if (rc == RDMA_XPORT_OK)
        return 0;
    if (rc == RDMA_XPORT_EPEER && (nd->sc->kill_rank > 0 || nd->sc->silent_rank > 0
                                   || nd->sc->forge)) {
        say(nd, "P %.6f %s", now_s(), rdma_xport_verbs.error(nd->xp));
        return 1;
    }
    say(nd, "D progress failed (%d): %s", rc, rdma_xport_verbs.error(nd->xp));
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

    len = 1 + rand_r(&nd->seed) % (niov * 7000);
    if (len > total - f->sent)
        len = total - f->sent;
    for (j = 0; j < len; j++)
        buf[j] = gen(nd->rank, p, f->sent + j);
    for (i = 0; i < niov; i++) {
        k = i == niov - 1 ? len - n : (len - n) / 2;
        iov[i].iov_base = buf + n;
        iov[i].iov_len = k;
        n += k;
    }
    if (rb_pipe_putv(&nd->conns[p].pipe, iov, niov, &acc)) {
        if (nd->conns[p].xc.state != RDMA_CONN_FAILED)
            say(nd, "D rb_pipe_putv to rank %d failed: %s", p, rdma_xport_verbs.error(nd->xp));
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
        say(nd, "D rb_pipe_getv from rank %d failed: %s", p, rdma_xport_verbs.error(nd->xp));
        return -1;
    }
    for (j = 0; j < got; j++)
        if (buf[j] != gen(p, nd->rank, f->rcvd + j)) {
            say(nd, "D byte %zu from rank %d is %u, expected %u", f->rcvd + j, p, buf[j],
                gen(p, nd->rank, f->rcvd + j));
            return -1;
        }
    f->rcvd += got;
    return 0;
}

/* Stream sc->stream bytes to and from every peer at once, verified; the
 * kill rank dies half way.  Returns 1 if a peer failure was reported. */
static int rank_stream(node_t * nd)
{
    const scen_t *sc = nd->sc;
    flow_t fl[MAXP] = { {0, 0} };
    double limit = now_s() + GROUP_LIMIT;
    int p, busy = 1;

    while (busy) {
        busy = 0;
        if (rank_progress(nd))
            return 1;
        for (p = 0; p < sc->nprocs; p++) {
            if (p == nd->rank)
                continue;
            if ((fl[p].sent < sc->stream && flow_send(nd, p, &fl[p], sc->stream))
                || (fl[p].rcvd < sc->stream && flow_recv(nd, p, &fl[p], sc->stream))) {
                if (nd->conns[p].xc.state == RDMA_CONN_FAILED && rank_progress(nd))
                    return 1;   /* the write itself saw the failure */
                exit(1);
            }
            busy |= fl[p].sent < sc->stream || fl[p].rcvd < sc->stream;
            if (nd->rank == sc->kill_rank && fl[p].rcvd >= sc->stream / 4) {
                say(nd, "K %.6f", now_s());
                raise(SIGKILL);
            }
        }
        if (now_s() > limit) {
            char desc[512];
            rdma_xport_verbs.describe(&nd->conns[!nd->rank].xc, desc, sizeof(desc));
            say(nd, "D stream stuck: sent %zu rcvd %zu of %zu; %s", fl[!nd->rank].sent,
                fl[!nd->rank].rcvd, sc->stream, desc);
            exit(1);
        }
    }
    for (p = 0; p < sc->nprocs; p++)
        if (p != nd->rank && rb_pipe_flush_credit(&nd->conns[p].pipe))
            exit(1);
    return 0;
}

/* Scenario block: sleep until the peer's write raises a CQ event.  A wait
 * that runs to its 5 s timeout is a lost wakeup. */
static void pp_wait(node_t * nd)
{
    double t = now_s();

    rdma_xport_verbs.wait(nd->xp, 5000000);
    if (now_s() - t > 4.5) {
        say(nd, "D lost wakeup: wait() ran to its 5 s timeout");
        exit(1);
    }
}

static void pp_move(node_t * nd, int p, int send)
{
    uint64_t v = 0x0123456789abcdefULL;
    struct iovec iov = { &v, 8 };
    size_t n = 0, k;
    double limit = now_s() + 60;
    int armed;

    while (n < 8) {
        armed = nd->sc->block && !send;
        if (armed && !rdma_xport_verbs.wait_arm(nd->xp)) {
            say(nd, "D wait_arm() declined on a write-with-imm connection");
            exit(1);
        }
        rank_progress(nd);
        iov.iov_base = (char *) &v + n;
        iov.iov_len = 8 - n;
        if ((send ? rb_pipe_putv : rb_pipe_getv) (&nd->conns[p].pipe, &iov, 1, &k)
            || now_s() > limit) {
            say(nd, "D ping-pong stuck or failed: %s", rdma_xport_verbs.error(nd->xp));
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
        t = now_s();
        if (i == warm)
            t0 = t;
        pp_move(nd, peer, nd->rank == 0);
        pp_move(nd, peer, nd->rank != 0);
        if (i >= warm)
            rtt[i - warm] = now_s() - t;
    }
    qsort(rtt, (size_t) n, sizeof(rtt[0]), dbl_cmp);
    if (nd->rank == 0)
        say(nd, "D ping-pong 8 B, half round trip: min %.1f us, median %.1f us, mean %.1f us "
            "(%d iterations)", rtt[0] * 5e5, rtt[n / 2] * 5e5, (now_s() - t0) * 5e5 / n, n);
}

/* zcopy, rank 1: expose a send buffer (as zc does for a REQ) and, through
 * the test hook, register a receive-side region; tell rank 0 both keys. */
typedef struct zmsg {
    uint64_t src, src_key, dst, dst_key;
} zmsg_t;

static void rank_zcopy_offer(node_t * nd, void **src, void **hs, void **hd)
{
    rdma_link_t *c = &nd->conns[0];
    uint8_t *s = aligned_alloc(4096, ZLEN), *d = malloc(65536);
    zmsg_t m = { (uintptr_t) s, 0, (uintptr_t) d, 0 };
    struct iovec iov = { &m, sizeof(m) };
    size_t i, acc = 0;
    int hit;

    for (i = 0; s && i < ZLEN; i++)
        s[i] = gen(1, 0, i);
    if (!s || !d || rdma_xport_verbs.zc->expose(c->xc.priv, s, ZLEN, &m.src_key, hs, &hit)
        || rdma_xport_verbs_dst_key(nd->xp, d, 65536, &m.dst_key, hd)) {
        say(nd, "D cannot register the zcopy buffers: %s", rdma_xport_verbs.error(nd->xp));
        exit(1);
    }
    while (acc == 0 && !rank_progress(nd))
        if (rb_pipe_putv(&c->pipe, &iov, 1, &acc))
            exit(1);
    *src = s;
}

/* zcopy, rank 0: read len bytes at the peer's raddr into dst; 0 once all
 * have landed, -1 when the connection failed (diagnosis in *why). */
static int rank_zcopy_read(node_t * nd, uint8_t * dst, uint64_t raddr, uint64_t key,
                           size_t len, const char **why)
{
    rdma_link_t *c = &nd->conns[1];
    double limit = now_s() + GROUP_LIMIT;
    size_t posted = 0, k;

    c->zc.rx.done = 0;
    while (c->zc.rx.done < len && now_s() < limit) {
        struct iovec iov = { dst + posted, len - posted };

        if (posted < len && rdma_xport_verbs.zc->pull(c->xc.priv, &iov, 1, raddr + posted, key,
                                                      len - posted, &k) == ZC_PULL_OK)
            posted += k;
        if (rdma_xport_verbs.progress(nd->xp) != RDMA_XPORT_OK || c->xc.state == RDMA_CONN_FAILED) {
            *why = rdma_xport_verbs.error(nd->xp);
            return -1;
        }
    }
    *why = c->zc.rx.done < len ? "timed out" : "";
    return c->zc.rx.done < len ? -1 : 0;
}

/* zcopy, rank 0: the send buffer arrives intact in an unaligned
 * destination, registered once (not once per read); the receive-side
 * region is not readable. */
static void rank_zcopy_take(node_t * nd)
{
    uint8_t *buf = malloc(ZLEN + 16), *dst = buf + 16;
    unsigned long long hits = 0, misses = 99;
    struct iovec iov;
    char stats[1024];
    const char *why, *r;
    size_t got = 0, i, bad = 0;
    zmsg_t m;

    while (got < sizeof(m) && !rank_progress(nd)) {
        iov = (struct iovec) { (char *) &m + got, sizeof(m) - got };
        if (rb_pipe_getv(&nd->conns[1].pipe, &iov, 1, &i))
            exit(1);
        got += i;
    }
    if (rank_zcopy_read(nd, dst, m.src, m.src_key, ZLEN, &why)) {
        say(nd, "D RDMA read of the exposed send buffer failed: %s", why);
        exit(1);
    }
    for (i = 0; i < ZLEN; i++)
        bad += dst[i] != gen(1, 0, i);
    rdma_xport_verbs.stats(nd->xp, stats, sizeof(stats));
    r = strstr(stats, "receive: ");
    if (r)
        sscanf(r, "receive: hits %llu misses %llu", &hits, &misses);
    say(nd, "D zcopy: %u B read into offset 16, %zu bad bytes, receive registrations: "
        "%llu misses, %llu hits (%s)", ZLEN, bad, misses, hits, stats);
    if (bad || misses > 2)
        exit(1);
    if (rank_zcopy_read(nd, buf, m.dst, m.dst_key, 65536, &why) == 0) {
        say(nd, "D the peer's receive-side region could be read with RDMA: it grants "
            "REMOTE_READ");
        exit(1);
    }
    say(nd, "D RDMA read of a receive-side region failed as it must: %s", why);
    free(buf);
}

static void rank_connect(node_t * nd)
{
    const scen_t *sc = nd->sc;
    double limit = now_s() + GROUP_LIMIT;
    char desc[512];
    int p;

    if (nd->rank == sc->late_rank)
        usleep(1500 * 1000);
    say(nd, "S %.6f", now_s());
    for (p = 0; p < sc->nprocs; p++) {
        if (p == nd->rank || (!sc->all_connect && p < nd->rank))
            continue;
        if (rdma_xport_verbs.connect(nd->xp, &nd->conns[p].xc)) {
            say(nd, "D connect to rank %d: %s", p, rdma_xport_verbs.error(nd->xp));
            exit(1);
        }
    }
    while (nd->nready < sc->nprocs - 1) {
        if (rank_progress(nd)) {
            if (sc->silent_rank > 0 || sc->forge)
                return;
            exit(1);
        }
        if (now_s() > limit) {
            say(nd, "D only %d of %d connections ready", nd->nready, sc->nprocs - 1);
            exit(1);
        }
    }
    for (p = 0; p < sc->nprocs && nd->rank == 0; p++) {
        if (p == nd->rank)
            continue;
        rdma_xport_verbs.describe(&nd->conns[p].xc, desc, sizeof(desc));
        say(nd, "D rank 0 -> %d: %s", p, desc);
    }
    if (nd->rank == 0) {
        const char *m;

        rdma_xport_verbs.describe(&nd->conns[1].xc, desc, sizeof(desc));
        m = strstr(desc, "mode=");
        say(nd, "M %.*s", m ? (int) strcspn(m + 5, " ") : 7, m ? m + 5 : "unknown");
    }
}

/* Every connection READY, announced exactly once (no duplicate pairing). */
static void rank_check_ready(node_t * nd)
{
    int p;

    for (p = 0; p < nd->sc->nprocs; p++) {
        if (p == nd->rank || (nd->conns[p].xc.state == RDMA_CONN_READY && nd->ready_calls[p] == 1))
            continue;
        say(nd, "D rank %d: connection to rank %d in state %d, conn_ready called %d times",
            nd->rank, p, nd->conns[p].xc.state, nd->ready_calls[p]);
        exit(1);
    }
}

static void rank_barrier(node_t * nd)
{
    char line[16];
    say(nd, "B");
    if (line_read(nd->fd, line, sizeof(line)) || strcmp(line, "G"))
        exit(2);
}

/* forge, rank 1: progress while rank 0's REQs (with a wrong auth) come
 * in and go unanswered; they must have been counted as dropped. */
static void rank_forged(node_t * nd)
{
    double until = now_s() + nd->sc->timeout + 1;
    unsigned long long dropped = 0;
    char stats[1024];
    const char *d;

    while (now_s() < until)
        if (rank_progress(nd))
            exit(1);
    rdma_xport_verbs.stats(nd->xp, stats, sizeof(stats));
    d = strstr(stats, "cm: ");
    if (d)
        sscanf(d, "cm: %llu", &dropped);
    say(nd, "D rank 1: %llu CM datagrams without its auth dropped", dropped);
    rank_barrier(nd);
    rdma_xport_verbs.finalize(nd->xp);
    exit(dropped ? 0 : 1);
}

/* The silent rank: holds its device open and never progresses until the
 * driver's barrier releases it. */
static void rank_silent(node_t * nd)
{
    rank_barrier(nd);
    rdma_xport_verbs.finalize(nd->xp);
    exit(0);
}

static void rank_main(const scen_t * sc, int rank, int fd)
{
    node_t nd = {.rank = rank, .fd = fd, .sc = sc, .seed = 12345u + (unsigned) rank };
    rdma_xport_params_t prm;
    char card[CARD_LEN], err[512], line[MAXP * (CARD_LEN + 1) + 8], *tok, *save;
    void *zsrc = NULL, *zh[2];
    int p, rc;

    if (sc->unsafe_in_order)
        setenv("CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER", "1", 1);
    params_fill(sc, &nd, &prm);
    link_fill(sc, &nd.link);
    for (p = 0; p < MAXP; p++)
        nd.conns[p].xc.peer = p;
    rc = rdma_xport_verbs.open(&prm, &nd.xp, card, sizeof(card), err, sizeof(err));
    if (rc) {
        say(&nd, "E open failed (%d): %s", rc, err);
        exit(1);
    }
    say(&nd, "C %s", card);
    if (line_read(fd, line, sizeof(line)) || line[0] != 'T')
        exit(2);
    for (p = 0, tok = strtok_r(line + 1, " ", &save); tok && p < MAXP;
         tok = strtok_r(NULL, " ", &save))
        str_copy(nd.cards[p++], CARD_LEN, tok);
    if (rank == sc->silent_rank)
        rank_silent(&nd);
    if (sc->forge && rank == 1)
        rank_forged(&nd);
    if (sc->forge)      /* the auth is the card's last hex digits */
        nd.cards[1][strlen(nd.cards[1]) - 1] ^= 1;
    rank_connect(&nd);
    if (sc->silent_rank <= 0 && !sc->forge && !rank_stream(&nd)) {
        if (sc->pingpong)
            rank_pingpong(&nd);
        rank_check_ready(&nd);
    }
    if (sc->zcopy && rank == 1)
        rank_zcopy_offer(&nd, &zsrc, &zh[0], &zh[1]);
    if (sc->zcopy && rank == 0)
        rank_zcopy_take(&nd);
    rank_barrier(&nd);
    if (zsrc) {
        rdma_xport_verbs.zc->unexpose(nd.conns[0].xc.priv, zh[0]);
        rdma_xport_verbs_dst_put(nd.xp, zh[1]);
        free(zsrc);
    }
    for (p = 0; p < sc->nprocs; p++)
        if (p != rank)
            rdma_xport_verbs.close(nd.xp, &nd.conns[p].xc);
    rdma_xport_verbs.finalize(nd.xp);
    exit(0);
}

/* ------------------------------------------------------- driver side */

typedef struct child {
    pid_t pid;
    int fd, eof, barrier, status;
    char buf[4096];
    size_t len;
    char card[CARD_LEN];
} child_t;

typedef struct group {
    const scen_t *sc;
    child_t ch[MAXP];
    double t_kill, t_peer, t_start;
    char peer_msg[512], mode[32];
    int failed, ncards, open_err;
} group_t;

static void group_line(group_t * g, int r, const char *l)
{
    switch (l[0]) {
    case 'C':
        str_copy(g->ch[r].card, CARD_LEN, l + 2);
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
        str_copy(g->mode, sizeof(g->mode), l + 2);
        break;
    case 'K':
        g->t_kill = atof(l + 2);
        break;
    case 'S':
        g->t_start = atof(l + 2);
        break;
    case 'P':
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
    int n = g->sc->nprocs, r, open_fds, sent_table = 0, sent_go = 0;
    double limit = now_s() + GROUP_LIMIT + 30;
    struct pollfd pf[MAXP];
    char table[MAXP * (CARD_LEN + 1) + 8];

    for (;;) {
        int nbar = 0;
        for (r = 0, open_fds = 0; r < n; r++) {
            pf[r].fd = g->ch[r].eof ? -1 : g->ch[r].fd;
            pf[r].events = POLLIN;
            open_fds += !g->ch[r].eof;
            nbar += g->ch[r].barrier || g->ch[r].eof;
        }
        if (!open_fds || now_s() > limit)
            break;
        if (!sent_table && g->ncards == n) {
            strcpy(table, "T");
            for (r = 0; r < n; r++)
                strcat(strcat(table, " "), g->ch[r].card);
            group_send_all(g, strcat(table, "\n"));
            sent_table = 1;
        }
        if (!sent_go && nbar == n) {
            group_send_all(g, "G\n");
            sent_go = 1;
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
    double t0 = now_s();

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
    diag("(%.1f s)", now_s() - t0);
    return ok;
}

/* ----------------------------------------------------------- scenarios */

/* A scenario with its zero fields set to the defaults (rank 0 is never the
 * kill, silent or late rank, so 0 there means "none"). */
static scen_t scen_defaults(const scen_t * in)
{
    scen_t sc = in ? *in : (scen_t) { 0 };

    sc.nprocs = sc.nprocs ? sc.nprocs : 2;
    sc.inline_size = sc.inline_size ? sc.inline_size : 256;
    sc.stream = sc.stream ? sc.stream : 1 << 20;
    sc.timeout = sc.timeout > 0 ? sc.timeout : 30;
    sc.kill_rank = sc.kill_rank ? sc.kill_rank : -1;
    sc.silent_rank = sc.silent_rank ? sc.silent_rank : -1;
    sc.late_rank = sc.late_rank ? sc.late_rank : -1;
    return sc;
}

static int check_open_fails(const char *what, const char *dev, rlim_t memlock, int want_rc,
                            const char *want_msg)
{
    int sv[2], status, rc;
    char line[600] = "";
    pid_t pid;

    if (pipe(sv))
        return 0;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        scen_t sc = scen_defaults(NULL);
        rdma_xport_params_t prm;
        rdma_xport_t *xp = NULL;
        char card[CARD_LEN], err[512] = "";
        struct rlimit rl = { memlock, memlock };

        close(sv[0]);
        params_fill(&sc, NULL, &prm);
        prm.device = dev;
        if (memlock && setrlimit(RLIMIT_MEMLOCK, &rl))
            _exit(2);
        rc = rdma_xport_verbs.open(&prm, &xp, card, sizeof(card), err, sizeof(err));
        dprintf(sv[1], "%d %s", rc, err);
        _exit(0);
    }
    close(sv[1]);
    if (read(sv[0], line, sizeof(line) - 1) < 0)
        line[0] = '\0';
    close(sv[0]);
    waitpid(pid, &status, 0);
    rc = atoi(line);
    diag("%s: rc %d, \"%s\"", what, rc, strchr(line, ' ') ? strchr(line, ' ') + 1 : "");
    return rc == want_rc && strstr(line, want_msg) != NULL;
}

static int device_present(void)
{
    return !check_open_fails("device probe", device, 0, RDMA_XPORT_ENODEV, "no RDMA device");
}

/* A scenario where rank 1 fails rank 0: pass if rank 0's progress reported
 * EPEER with a diagnosis containing want within 30 s of the kill (or of the
 * connect). */
static void run_peer_failure(const scen_t * sc, const char *want, const char *desc)
{
    group_t g;
    int pass = group_run(sc, &g);
    double t_ref = sc->kill_rank > 0 ? g.t_kill : g.t_start, dt = g.t_peer - t_ref;

    ok(pass && g.t_peer > 0 && t_ref > 0 && dt < 30 && strstr(g.peer_msg, want),
       "%s: EPEER after %.1f s", desc, g.t_peer > 0 && t_ref > 0 ? dt : -1.0);
    diag("diagnosis: %s", g.peer_msg[0] ? g.peer_msg : "(none)");
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
        ok(1, "flag polling chosen: the device reports in-order RDMA writes");
        return;
    }
    diag("the device does not report in-order RDMA writes: flag polling not used");
    unsafe.unsafe_in_order = 1;
    pass = group_run(&unsafe, &g);
    /* a record, not an assertion: nothing guarantees it on this device */
    diag("flag polling forced on a device without the in-order guarantee: data %s "
         "(unsafe by design, for the record only)", pass ? "intact" : "CORRUPT or lost");
}

static const struct {
    const char *id, *desc;
    scen_t sc;                  /* zero fields: scen_defaults */
    const char *want;           /* expected peer failure, or NULL */
} cases[] = {
    {"default", "2 ranks, 1 MiB random-size streams both ways verified, 8-byte ping-pong",
     {.pingpong = 300}, NULL},
    {"write-imm", "2 ranks, force_completion=1 (write-with-imm): streams + ping-pong",
     {.force_completion = 1, .pingpong = 300}, NULL},
    {"basic", "2 ranks, basic mode (separate head/tail writes): streams + ping-pong",
     {.mode = RB_MODE_BASIC, .pingpong = 300}, NULL},
    {"block", "2 ranks, write-with-imm, receivers sleep in wait() until each ping-pong "
     "message's CQ event: no lost wakeup", {.force_completion = 1, .block = 1, .pingpong = 300},
     NULL},
    {"super", "2 ranks, superpipeline groups (one write-with-imm lands many frames): streams",
     {.super = 1, .force_completion = 1, .pingpong = 300}, NULL},
    {"simultaneous", "2 ranks connect to each other at the same time: one QP pair, streams",
     {.all_connect = 1}, NULL},
    {"simultaneous", "3 ranks, all pairs connect at once (inline 4096 requested): streams",
     {.nprocs = 3, .all_connect = 1, .inline_size = 4096}, NULL},
    {"late", "responder progresses 1.5 s late (duplicate REQs queued): one connection",
     {.late_rank = 1, .timeout = 10}, NULL},
    {"zcopy", "2 ranks, RDMA read of an exposed 8 MiB send buffer into an unaligned "
     "destination, registered once, not per read; a receive-side region cannot be read",
     {.zcopy = 1}, NULL},
    {"kill", "peer SIGKILLed mid-stream, the survivor's progress reports it",
     {.kill_rank = 1, .timeout = 5}, "connection to rank 1 failed: "},
    {"forged", "connection requests without the peer's auth are dropped and counted "
     "(timeout 3 s)", {.forge = 1, .timeout = 3}, "rank 1 did not answer the connection request"},
    {"silent", "connect to a rank that never answers (timeout 3 s)",
     {.silent_rank = 1, .timeout = 3}, "rank 1 did not answer the connection request within 3 s"}
};

/* The fork decision of open() with ibv_is_fork_initialized and
 * ibv_fork_init faked: init only where the kernel does not copy pinned
 * pages and nobody enabled it yet. */
static int fake_fork_status, fake_fork_init_rc, fake_fork_inits;

static int fake_fork_query(void)
{
    return fake_fork_status;
}

static int fake_fork_init(void)
{
    fake_fork_inits++;
    return fake_fork_init_rc;
}

static int fork_mode_is(int status, int init_rc, const char *want, int inits)
{
    const char *got;

    fake_fork_status = status;
    fake_fork_init_rc = init_rc;
    fake_fork_inits = 0;
    got = rdma_xport_verbs_fork_mode(fake_fork_query, fake_fork_init);
    return !strcmp(got, want) && fake_fork_inits == inits;
}

static void check_fork_mode(void)
{
    ok(fork_mode_is(IBV_FORK_UNNEEDED, 0, "unneeded", 0),
       "fork: kernel copies pinned pages (>= 5.13): no ibv_fork_init");
    ok(fork_mode_is(IBV_FORK_ENABLED, 0, "enabled", 0),
       "fork: already enabled (RDMAV_FORK_SAFE): no second ibv_fork_init");
    ok(fork_mode_is(IBV_FORK_DISABLED, 0, "enabled", 1),
       "fork: older kernel: ibv_fork_init before the first registration");
    ok(fork_mode_is(IBV_FORK_DISABLED, EINVAL, "unprotected", 1),
       "fork: ibv_fork_init fails: reported unprotected");
}

int main(int argc, char **argv)
{
    const char *only = getenv("CH3RDMA_T_XPORT_VERBS_ONLY");    /* e.g. "kill,basic" */
    size_t i;

    device = argc > 1 && *argv[1] ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_fork_mode();
    ok(check_open_fails("open(device=nosuchdev)", "nosuchdev", 0, RDMA_XPORT_ENODEV,
                        "no RDMA device with an active port (ibv_get_device_list found"),
       "open() with device=nosuchdev fails with the no-device diagnosis");
    ok(check_open_fails("open() with ulimit -l 64 KiB", device, 64 * 1024, RDMA_XPORT_ENOMEM,
                        "ulimit -l is 64 KiB but ch3:rdma needs at least"),
       "open() with RLIMIT_MEMLOCK 64 KiB fails with the memlock diagnosis");
    if (!device_present()) {
        printf("ok %d # SKIP no RDMA device with an active port here (run via run-vm)\n",
               ++tap_run);
        return done_testing();
    }
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        scen_t sc = scen_defaults(&cases[i].sc);

        if (only && !strstr(only, cases[i].id))
            continue;
        if (cases[i].want)
            run_peer_failure(&sc, cases[i].want, cases[i].desc);
        else
            run_stream(&sc, cases[i].desc, i == 0);
    }
    return done_testing();
}
