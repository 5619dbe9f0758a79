/*
 * t_xport_verbs: TAP test of the verbs transport (rdma_xport_verbs) on a
 * real verbs device (rxe0 inside the Soft-RoCE VM): the conformance
 * harness every transport passes (test/xport/conform.h), with peers in
 * the job and outside it (dynamic processes), then what is
 * verbs' own -- write-with-immediate arrivals, peer death and silence
 * noticed by the connection manager, forged connection requests,
 * zero-copy registration rights, open() failures and the fork decision.
 *
 * usage: t_xport_verbs [DEVICE]   (default: first device with an active port)
 *   CH3RDMA_T_XPORT_VERBS_ONLY=id,... runs only those scenarios (see the
 *   case tables).  Without a device only the open() and fork checks run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>

#include "conform.h"
#include "tap.h"
#include "rdma_verbs.h"         /* rdma_verbs_mtu_pick */

#define GROUP_LIMIT 90.0       /* seconds per scenario */
#define ZLEN (8u << 20)         /* zcopy scenario: bytes read */

enum { EXT_ZCOPY = 1, EXT_FORGE = 2, EXT_QUEUES = 3, EXT_WINDOW = 4, EXT_REJECTS = 5,
    EXT_TWIN = 6, EXT_VERSION = 7, EXT_SRQ = 8, EXT_ORPHAN = 9,
    EXT_ABORT = 10
};
#define REJECTS 100             /* refusals in a row: more than RDMA_VERBS_REJ_AH */

/* zcopy, rank 1: expose a send buffer (as zc does for a REQ) and, through
 * the test hook, register a receive-side region; tell rank 0 both keys. */
typedef struct zmsg {
    uint64_t src, src_key, dst, dst_key;
} zmsg_t;

static void rank_zcopy_offer(node_t * nd)
{
    rdma_link_t *c = &nd->conns[0];
    uint8_t *s = aligned_alloc(4096, ZLEN), *d = malloc(65536);
    zmsg_t m = { (uintptr_t) s, 0, (uintptr_t) d, 0 };
    struct iovec iov = { &m, sizeof(m) };
    size_t i, acc = 0;
    int hit;

    for (i = 0; s && i < ZLEN; i++)
        s[i] = conform_gen(1, 0, i);
    if (!s || !d || rdma_xport_verbs.zc->expose(c->xc.priv, s, ZLEN, &m.src_key, &nd->ext[1], &hit)
        || rdma_xport_verbs_dst_key(nd->xp, d, 65536, &m.dst_key, &nd->ext[2])) {
        conform_say(nd, "D cannot register the zcopy buffers: %s", rdma_xport_verbs.error(nd->xp));
        exit(1);
    }
    while (acc == 0 && !conform_progress(nd))
        if (rb_pipe_putv(&c->pipe, &iov, 1, &acc))
            exit(1);
    nd->ext[0] = s;
}

/* zcopy, rank 0: read len bytes at the peer's raddr into dst; 0 once all
 * have landed, -1 when the connection failed (diagnosis in *why). */
static int rank_zcopy_read(node_t * nd, uint8_t * dst, uint64_t raddr, uint64_t key,
                           size_t len, const char **why)
{
    rdma_link_t *c = &nd->conns[1];
    double limit = conform_now() + GROUP_LIMIT;
    size_t posted = 0, k;

    c->zc.rx.done = 0;
    while (c->zc.rx.done < len && conform_now() < limit) {
        struct iovec iov = { dst + posted, len - posted };

        if (posted < len && rdma_xport_verbs.zc->pull(c->xc.priv, &iov, 1, raddr + posted, key,
                                                      len - posted, &k) == RDMA_OK)
            posted += k;
        if (rdma_xport_verbs.progress(nd->xp) != RDMA_OK || c->xc.state == RDMA_CONN_FAILED) {
            *why = rdma_xport_verbs.error(nd->xp);
            return -1;
        }
    }
    *why = c->zc.rx.done < len ? "timed out" : "";
    return c->zc.rx.done < len ? -1 : 0;
}

/* zcopy, rank 0: rank 1's offer. */
static void rank_zcopy_offered(node_t * nd, zmsg_t * m)
{
    struct iovec iov;
    size_t got = 0, i;

    while (got < sizeof(*m) && !conform_progress(nd)) {
        iov = (struct iovec) { (char *) m + got, sizeof(*m) - got };
        if (rb_pipe_getv(&nd->conns[1].pipe, &iov, 1, &i))
            exit(1);
        got += i;
    }
}

/* zcopy, rank 0: the send buffer arrives intact in an unaligned
 * destination, registered once (not once per read); the receive-side
 * region is not readable. */
static void rank_zcopy_take(node_t * nd)
{
    uint8_t *buf = malloc(ZLEN + 16), *dst = buf + 16;
    unsigned long long hits = 0, misses = 99;
    char stats[1024];
    const char *why, *r;
    size_t i, bad = 0;
    zmsg_t m;

    rank_zcopy_offered(nd, &m);
    if (rank_zcopy_read(nd, dst, m.src, m.src_key, ZLEN, &why)) {
        conform_say(nd, "D RDMA read of the exposed send buffer failed: %s", why);
        exit(1);
    }
    for (i = 0; i < ZLEN; i++)
        bad += dst[i] != conform_gen(1, 0, i);
    rdma_xport_verbs.stats(nd->xp, stats, sizeof(stats));
    r = strstr(stats, "receive: ");
    if (r)
        sscanf(r, "receive: hits %llu misses %llu", &hits, &misses);
    conform_say(nd, "D zcopy: %u B read into offset 16, %zu bad bytes, receive registrations: "
        "%llu misses, %llu hits (%s)", ZLEN, bad, misses, hits, stats);
    if (bad || misses > 2)
        exit(1);
    if (rank_zcopy_read(nd, buf, m.dst, m.dst_key, 65536, &why) == 0) {
        conform_say(nd, "D the peer's receive-side region could be read with RDMA: it grants "
            "REMOTE_READ");
        exit(1);
    }
    conform_say(nd, "D RDMA read of a receive-side region failed as it must: %s", why);
    free(buf);
}

/* orphan, rank 0: rank 1 offered its send buffer and exited; a one-sided
 * get from it is posted, then the connection quiesced (as the channel
 * does when the process manager reports the peer dead): the get still
 * fails, reported once by rma_done within the connection timeout, and
 * progress() reports nothing (the owner knows already).  abort: the owner
 * then aborts the connection too (the process manager said the peer
 * died): the get fails within 2 s, long before the timeout (30 s). */
static void rank_orphan_get(node_t * nd)
{
    rdma_link_t *c = &nd->conns[1];
    double t0, limit;
    int flag = 0, done = 0;
    uint8_t *dst = malloc(ZLEN);
    rdma_status_t st;
    zmsg_t m;

    rank_zcopy_offered(nd, &m);
    usleep(500 * 1000);         /* rank 1 is gone */
    st = rdma_xport_verbs.rma->get(c->xc.priv, dst, ZLEN, m.src, m.src_key, &flag, &done);
    if (st != RDMA_OK || done) {
        conform_say(nd, "D the get from the exited peer did not start (%d, done %d): %s", st,
                    done, rdma_xport_verbs.error(nd->xp));
        exit(1);
    }
    rdma_xport_verbs.quiesce(nd->xp, &c->xc);
    t0 = conform_now();
    limit = t0 + 4 * nd->sc->timeout;
    if (nd->sc->ext == EXT_ABORT) {
        rdma_xport_verbs.abort(nd->xp, &c->xc);
        limit = t0 + 2;
    }
    while (flag == 0 && conform_now() < limit)
        conform_progress(nd);
    conform_say(nd, "D get from the exited peer on the quiesced connection: %s after %.1f s "
                "(state %d)", flag == -1 ? "failed" : flag ? "reported twice or ok" :
                "never reported", conform_now() - t0, c->xc.state);
    if (flag != -1 || c->xc.state != RDMA_CONN_CLOSED)
        exit(1);
    free(dst);
}

/* Progress for secs s, then the statistics (the channel thread stopped:
 * they read the CM's counters). */
static void rank_stats_after(node_t * nd, double secs, char *stats, size_t len)
{
    double until = conform_now() + secs;

    while (conform_now() < until)
        if (conform_progress(nd))
            exit(1);
    rdma_thread_stop(&nd->thr);
    rdma_xport_verbs.stats(nd->xp, stats, len);
}

/* forge, rank 1: progress while rank 0's REQs (with a wrong auth) come
 * in and go unanswered; they must have been counted as dropped. */
static void rank_forged(node_t * nd)
{
    unsigned long long dropped = 0;
    char stats[2048];
    const char *d;

    rank_stats_after(nd, nd->sc->timeout + 1, stats, sizeof(stats));
    d = strstr(stats, "cm: ");
    if (d)
        sscanf(d, "cm: %llu", &dropped);
    conform_say(nd, "D rank 1: %llu CM datagrams without its auth dropped", dropped);
    conform_barrier(nd);
    rdma_xport_verbs.finalize(nd->xp);
    exit(dropped ? 0 : 1);
}

/* rejects, rank 0: connect REJECTS times to rank 1, which refuses every
 * hello; each attempt must fail with its REJ, not a timeout (before
 * 2026-12-02 a process sent 64 REJs in its life, then none). */
static void rank_rejected(node_t * nd)
{
    rdma_conn_t *c = &nd->conns[1].xc;
    double limit;
    int k;

    for (k = 0; k < REJECTS; k++) {
        c->state = RDMA_CONN_IDLE;
        if (rdma_xport_verbs.connect(nd->xp, c))
            break;
        for (limit = conform_now() + 2; c->state == RDMA_CONN_CONNECTING
             && conform_now() < limit;)
            rdma_xport_verbs.progress(nd->xp);
        if (c->state != RDMA_CONN_FAILED || !strstr(c->why, "refused the connection"))
            break;
        rdma_xport_verbs.close(nd->xp, c);
    }
    conform_say(nd, "D rank 0: %d of %d connection attempts refused by a REJ%s%s", k, REJECTS,
                k < REJECTS ? "; then: " : "", k < REJECTS ? c->why : "");
    if (k < REJECTS)
        exit(1);
    c->state = RDMA_CONN_IDLE;
}

/* Rank 0, connected: send rank 1 a REQ as another process would (its CM
 * secret and CM QP differ from ours), with that version and token. */
static void rank_send_req(node_t * nd, unsigned version, uint64_t token)
{
    rdma_verbs_conn_t *vc = nd->conns[1].xc.priv;
    rdma_xport_t *xp = nd->xp;
    static rdma_verbs_msg_t m;
    struct ibv_mr *mr = ibv_reg_mr(xp->pd, &m, sizeof(m), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_sge sge = {.addr = (uintptr_t) & m, .length = sizeof(m) };
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
        .wr_id = ~0ull }, *bad;

    if (!mr || !vc) {
        conform_say(nd, "D no registration or no connection");
        exit(1);
    }
    m.h = (rdma_verbs_head_t) {.magic = RDMA_VERBS_MAGIC, .version = version,
        .type = RDMA_VERBS_MSG_REQ, .dyn = 1, .auth = vc->peer_auth, .src_auth = xp->auth ^ 1,
        .token = token, .udqpn = xp->ud->qp_num + 1, .qkey = xp->qkey,
        .lid = xp->pattr.lid, .pid = 1};
    memcpy(m.h.gid, xp->gid.raw, sizeof(m.h.gid));
    snprintf(m.h.host, sizeof(m.h.host), "elsewhere");
    m.qpn = vc->qp->qp_num;
    m.ring_size = xp->prm.ring_size;
    m.chunk_size = xp->prm.chunk_size;
    m.ring_max = xp->prm.ring_max;
    snprintf(m.hello, sizeof(m.hello), "%s", nd->hello);
    sge.lkey = mr->lkey;
    wr.wr.ud.ah = vc->ah;
    wr.wr.ud.remote_qpn = vc->peer_udqpn;
    wr.wr.ud.remote_qkey = vc->peer_qkey;
    pthread_mutex_lock(&xp->cm_lock);
    if (ibv_post_send(xp->ud, &wr, &bad))
        exit(1);
    pthread_mutex_unlock(&xp->cm_lock);
}

/* twin, rank 0: a copy of our REQ from another process (token and QPN
 * collide, as they may across hosts). */
static void rank_twin_req(node_t * nd)
{
    rank_send_req(nd, RDMA_WIRE_VERSION, ((rdma_verbs_conn_t *) nd->conns[1].xc.priv)->token);
    conform_say(nd, "D rank 0: sent a REQ with our token and QPN from another process");
}

/* version, rank 0: a REQ of the next wire version, from another process. */
static void rank_version_req(node_t * nd)
{
    rank_send_req(nd, RDMA_WIRE_VERSION + 1,
                  ((rdma_verbs_conn_t *) nd->conns[1].xc.priv)->token + 1);
    conform_say(nd, "D rank 0: sent a REQ of wire version %u", RDMA_WIRE_VERSION + 1);
}

/* version, rank 1: the REQ of another version is refused (counted, the
 * reason names both versions and the sender's host) without asking the
 * owner; the job's connection is untouched (its close follows). */
static void rank_version_seen(node_t * nd)
{
    char stats[2048], want[64];
    const char *why;

    rank_stats_after(nd, 3, stats, sizeof(stats));
    why = strstr(stats, "requests refused");
    snprintf(want, sizeof(want), "on elsewhere runs ch3:rdma wire version %u",
             RDMA_WIRE_VERSION + 1);
    conform_say(nd, "D rank 1: %s; the owner was asked %d times", why ? why : "?", nd->accepts);
    if (!why || !strstr(why, want) || nd->accepts != 1 || nd->conns[0].xc.state != RDMA_CONN_READY)
        exit(1);
}

/* twin, rank 1: progress while the twin REQ comes in: it is a new request
 * (the owner is asked again), not a repeat of rank 0's. */
static void rank_twin_seen(node_t * nd)
{
    double until = conform_now() + 4;

    while (conform_now() < until && nd->accepts < 2)
        if (conform_progress(nd))
            exit(1);
    conform_say(nd, "D rank 1: the owner was asked %d times", nd->accepts);
    if (nd->accepts < 2)
        exit(1);
}

/* Change the last hex digit of the card's auth (its sixth field). */
static void forge_auth(char *card)
{
    char *p = card;
    int dots = 0;

    while (*p && !(*p == '.' && ++dots == 6))
        p++;
    if (dots == 6)
        p[-1] = p[-1] == '0' ? '1' : '0';
}

/* Queues sized by the write window, not the ring (rdma_verbs_data.c):
 * once the rings grew to 64 KiB (256 frames of 256 B), each queue holds
 * fewer entries than the ring has frames, and the pipe's window is
 * RDMA_VERBS_WINDOW. */
static void rank_queues_check(node_t * nd)
{
    const rdma_verbs_conn_t *vc = nd->conns[!nd->rank].xc.priv;
    const rb_pipe_t *pp = &nd->conns[!nd->rank].pipe;
    size_t frames = pp->rx.cfg.ring_size / pp->rx.cfg.chunk_size;

    conform_say(nd, "D rank %d: sq %u rq %u entries for a ring of %zu frames; window %u, "
                "%llu window stalls", nd->rank, vc->sq_depth, vc->rq_depth, frames,
                pp->tx.cfg.max_writes, (unsigned long long) pp->stats.window_stalls);
    if (vc->sq_depth >= frames || vc->rq_depth >= frames
        || pp->tx.cfg.max_writes != RDMA_VERBS_WINDOW)
        exit(1);
}

/* Small messages to a receiver that pauses: the write window, not the
 * ring (256 frames), stopped the sender, and the streams still verified
 * (the receiver's credit every WINDOW/2 frames releases it). */
static void rank_window_check(node_t * nd)
{
    const rb_pipe_t *pp = &nd->conns[!nd->rank].pipe;

    conform_say(nd, "D rank %d: %llu window stalls, %llu full stalls, %llu credits sent",
                nd->rank, (unsigned long long) pp->stats.window_stalls,
                (unsigned long long) pp->stats.full_stalls,
                (unsigned long long) pp->stats.credits_tx);
    if (!pp->stats.window_stalls || pp->stats.full_stalls)
        exit(1);
}

/* Every QP takes its receives from the process's SRQ (none of its own),
 * or, with srq -1, from a receive queue of its own; with a small SRQ under
 * load, its limit event fired and grew it; posted receives never exceed
 * its room. */
static void rank_srq_check(node_t * nd)
{
    rdma_xport_t *xp = nd->xp;
    int p, bad = 0;

    for (p = 0; p < nd->sc->nprocs; p++) {
        const rdma_verbs_conn_t *vc = nd->conns[p].xc.priv;
        struct ibv_qp_attr a;
        struct ibv_qp_init_attr ia;

        if (p == nd->rank || !vc)
            continue;
        if (ibv_query_qp(vc->qp, &a, IBV_QP_CAP, &ia))
            exit(1);
        bad += nd->sc->srq > 0 ? ia.srq != xp->srq || ia.cap.max_recv_wr != 0
            : ia.srq != NULL || ia.cap.max_recv_wr < vc->rq_depth;
    }
    conform_say(nd, "D rank %d: srq %s, room %u, want %u, out %u, %llu limit events, "
                "%llu grows; %d QPs not as expected", nd->rank, xp->srq ? "yes" : "no",
                xp->srq_size, xp->srq_want, xp->srq_out, (unsigned long long) xp->srq_limits,
                (unsigned long long) xp->srq_grows, bad);
    if (bad || (nd->sc->srq > 0) != (xp->srq != NULL) || xp->srq_out > xp->srq_size
        || (nd->sc->srq > 0 && nd->sc->srq < 64 && (!xp->srq_limits || !xp->srq_grows)))
        exit(1);
}

/* The verbs scenarios of conform's ranks. */
static void verbs_hook(node_t * nd, int phase)
{
    if (nd->sc->ext == EXT_FORGE && phase == CONFORM_CARDS) {
        if (nd->rank == 1)
            rank_forged(nd);
        forge_auth(nd->cards[1]);
    }
    if (nd->sc->ext == EXT_REJECTS && phase == CONFORM_CARDS && nd->rank == 0)
        rank_rejected(nd);
    if (nd->sc->ext == EXT_TWIN && phase == CONFORM_DATA)
        nd->rank == 0 ? rank_twin_req(nd) : rank_twin_seen(nd);
    if (nd->sc->ext == EXT_VERSION && phase == CONFORM_DATA)
        nd->rank == 0 ? rank_version_req(nd) : rank_version_seen(nd);
    if (nd->sc->ext == EXT_QUEUES && phase == CONFORM_DATA)
        rank_queues_check(nd);
    if (nd->sc->ext == EXT_SRQ && phase == CONFORM_DATA)
        rank_srq_check(nd);
    if (nd->sc->ext == EXT_WINDOW && phase == CONFORM_DATA)
        rank_window_check(nd);
    if (nd->sc->ext == EXT_ZCOPY && phase == CONFORM_DATA)
        nd->rank == 1 ? rank_zcopy_offer(nd) : rank_zcopy_take(nd);
    if ((nd->sc->ext == EXT_ORPHAN || nd->sc->ext == EXT_ABORT) && phase == CONFORM_DATA) {
        if (nd->rank == 1) {
            rank_zcopy_offer(nd);
            _exit(0);
        }
        rank_orphan_get(nd);
    }
    if (nd->sc->ext == EXT_ZCOPY && phase == CONFORM_DONE && nd->ext[0]) {
        rdma_xport_verbs.zc->unexpose(nd->conns[0].xc.priv, nd->ext[1]);
        rdma_xport_verbs_dst_put(nd->xp, nd->ext[2]);
        free(nd->ext[0]);
    }
}

static const conform_xport_t verbs = { &rdma_xport_verbs, "t_xport_verbs", NULL, verbs_hook };
static conform_xport_t verbs_dev;

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
        scen_t sc = conform_defaults(NULL);
        rdma_xport_params_t prm;
        rdma_xport_t *xp = NULL;
        char card[CONFORM_CARD_LEN], err[512] = "";
        struct rlimit rl = { memlock, memlock };

        close(sv[0]);
        rdma_verbs_params_t vp;

        conform_params(&sc, NULL, &prm);
        vp = *(const rdma_verbs_params_t *) prm.own;
        vp.device = dev;
        prm.own = &vp;
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
    return !check_open_fails("device probe", verbs_dev.device, 0, RDMA_ERR_NODEV,
                             "no RDMA device");
}

/* What is verbs' own. */
static const conform_case_t verbs_cases[] = {
    {"reopen", "2 ranks: rank 0 closes its connection and connects again while rank 1 "
     "holds the old one 4 s without polling (timeout 2 s): kept waiting, then streams on the "
     "new one", {.reopen = 1, .late = 4, .timeout = 2}, NULL},
    {"admit", "3 ranks: rank 1's owner admits no connection for 4 s (its cap is full; "
     "timeout 2 s): rank 0's request to it, and rank 2's answer to its own request, wait "
     "alive (WAIT); then they connect and stream", {.nprocs = 3, .wait_rank = 1, .late = 4,
                                                    .timeout = 2}, NULL},
    {"write-imm", "2 ranks, force_completion=1 (write-with-imm): streams + ping-pong",
     {.force_completion = 1, .pingpong = 300}, NULL},
    {"srq", "4 ranks, write-with-imm, receivers pause, a shared receive queue of 16: no QP "
     "has a receive queue of its own, writes that find it empty are retried, its limit "
     "event grows it; streams verify", {.nprocs = 4, .all_connect = 1, .force_completion = 1,
                                        .pause = 1, .srq = 16, .ext = EXT_SRQ}, NULL},
    {"rq-per-qp", "3 ranks, write-with-imm, no shared receive queue (SRQ_SIZE=0): each QP "
     "has its own; streams + ping-pong", {.nprocs = 3, .force_completion = 1, .srq = -1,
                                          .pingpong = 300, .ext = EXT_SRQ}, NULL},
    {"zcopy", "2 ranks, RDMA read of an exposed 8 MiB send buffer into an unaligned "
     "destination, registered once, not per read; a receive-side region cannot be read",
     {.ext = EXT_ZCOPY}, NULL},
    {"orphan", "2 ranks: a get from a peer that exited, posted just before the owner "
     "quiesced the connection (the process manager said the peer died): rma_done fails it "
     "within the timeout (3 s), progress reports nothing", {.ext = EXT_ORPHAN, .timeout = 3},
     NULL},
    {"abort", "orphan, then the owner aborts the connection (timeout 30 s): the get fails "
     "within 2 s, not at the retries' end; progress reports nothing",
     {.ext = EXT_ABORT, .timeout = 30}, NULL},
    {"forged", "connection requests without the peer's auth are dropped and counted "
     "(timeout 3 s)", {.ext = EXT_FORGE, .ext_fails = 1, .timeout = 3},
     "did not answer the connection request"},
    {"silent", "connect to a rank that never answers (timeout 3 s)",
     {.silent_rank = 1, .timeout = 3}, "did not answer the connection request within 3 s"},
    {"queues", "2 ranks, write-with-imm, rings grow 4 -> 64 KiB (256 frames): the queue "
     "pairs hold fewer entries than that (sized by the pipe's write window), streams verify",
     {.ring = 4096, .grow = 65536, .force_completion = 1, .ext = EXT_QUEUES}, NULL},
    {"window", "2 ranks, write-with-imm, 64 KiB rings (256 frames), messages of 1-200 B, "
     "receivers pause: the write window (64) stops the senders, never a full ring; "
     "streams verify", {.force_completion = 1, .msg_max = 200, .pause = 1,
                        .stream = 1 << 20, .ext = EXT_WINDOW}, NULL},
    {"grow", "2 ranks under a 128 KiB pinned cap: the rings grow from 4 KiB until the cap "
     "refuses, short of 64 KiB; streams verify", {.ring = 4096, .grow = 65536,
                                                   .pinned_max = 128 * 1024}, NULL},
    {"rejects", "2 jobs, the acceptor refuses every hello: 100 attempts in a row each get "
     "their REJ (more than the 64 REJ address handles a process once had)",
     {.dynamic = 1, .refuse_rank = 1, .late = 60, .timeout = 5, .ext = EXT_REJECTS},
     "refused the connection"},
    {"twin", "2 jobs: a REQ with a connection's token and QPN from another process is a new "
     "request, not a repeat (tokens and QPNs repeat across hosts)",
     {.dynamic = 1, .ext = EXT_TWIN}, NULL},
    {"version", "2 jobs: a REQ of another wire version gets a REJ naming both versions "
     "and its host; the job's connection goes on",
     {.dynamic = 1, .ext = EXT_VERSION}, NULL},
    {"dyn-cap", "2 jobs, the acceptor's pinned cap (128 KiB) has no room for a connection "
     "outside the job: it refuses with the reason, which the connector reports",
     {.dynamic = 1, .pinned_max = 128 * 1024, .pinned_rank = 1, .ext_fails = 1},
     "refused the connection: cannot create the connection"}
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

/* Path MTU: the smaller of both ports' (a REQ/REP carries the sender's). */
static void check_mtu_pick(void)
{
    ok(rdma_verbs_mtu_pick(IBV_MTU_4096, IBV_MTU_1024) == IBV_MTU_1024
       && rdma_verbs_mtu_pick(IBV_MTU_1024, IBV_MTU_4096) == IBV_MTU_1024
       && rdma_verbs_mtu_pick(IBV_MTU_2048, IBV_MTU_2048) == IBV_MTU_2048,
       "path MTU: the smaller of the local and the peer's port MTU");
    ok(rdma_verbs_mtu_pick(IBV_MTU_4096, 0) == IBV_MTU_4096
       && rdma_verbs_mtu_pick(IBV_MTU_1024, 9) == IBV_MTU_1024,
       "path MTU: a message without a valid MTU leaves the local one");
}

/* ACK timeout: (retry_cnt + 1) tries fit in CONNECT_TIMEOUT, retry_cnt tries
 * outlast a 15 s link outage at its default (18, 1.07 s per try, did not:
 * the job failed 7.5 s into the outage); at least 16 under TCG. */
static void check_qp_timeout(void)
{
    int t60 = rdma_verbs_qp_timeout(60);
    double try60 = rdma_verbs_ack_s(t60);

    ok(t60 == 20 && RDMA_VERBS_RETRY_CNT * try60 > 15.0
       && (RDMA_VERBS_RETRY_CNT + 1) * try60 <= 60.0,
       "ACK timeout at CONNECT_TIMEOUT 60 s: exponent %d, %d retries span %.1f s "
       "(a 15 s outage is ridden out), all tries %.1f s", t60, RDMA_VERBS_RETRY_CNT,
       RDMA_VERBS_RETRY_CNT * try60, (RDMA_VERBS_RETRY_CNT + 1) * try60);
    ok(rdma_verbs_qp_timeout(10) == 18 && rdma_verbs_qp_timeout(1) == 16
       && rdma_verbs_qp_timeout(3600) == 26,
       "ACK timeout: 18 at 10 s, at least 16 (1 s), 26 at 3600 s");
    ok(rdma_verbs_drain_bound(60, t60) == 2 * try60 && rdma_verbs_drain_bound(60, 16) == 2.0
       && rdma_verbs_drain_bound(1, 16) == 1.0,
       "close()'s drain bound: two ACK timeouts (%.1f s at 60 s), at least 2 s, at most the "
       "timeout", rdma_verbs_drain_bound(60, t60));
}

int main(int argc, char **argv)
{
    const char *only = getenv("CH3RDMA_T_XPORT_VERBS_ONLY");    /* e.g. "kill,basic" */

    verbs_dev = verbs;
    verbs_dev.device = argc > 1 && *argv[1] ? argv[1] : NULL;
    conform_t = &verbs_dev;
    setvbuf(stdout, NULL, _IOLBF, 0);
    check_fork_mode();
    check_mtu_pick();
    check_qp_timeout();
    ok(check_open_fails("open(device=nosuchdev)", "nosuchdev", 0, RDMA_ERR_NODEV,
                        "no RDMA device with an active port (ibv_get_device_list found"),
       "open() with device=nosuchdev fails with the no-device diagnosis");
    ok(check_open_fails("open() with ulimit -l 64 KiB", verbs_dev.device, 64 * 1024,
                        RDMA_ERR_NOMEM, "ulimit -l is 64 KiB but ch3:rdma needs at least"),
       "open() with RLIMIT_MEMLOCK 64 KiB fails with the memlock diagnosis");
    if (!device_present()) {
        printf("ok %d # SKIP no RDMA device with an active port here (run via run-vm)\n",
               ++tap_run);
        return done_testing();
    }
    conform_run(conform_cases, conform_ncases, only);
    conform_run(conform_dyn_cases, conform_ndyn_cases, only);
    conform_run(conform_grow_cases, conform_ngrow_cases, only);
    conform_run(verbs_cases, sizeof(verbs_cases) / sizeof(verbs_cases[0]), only);
    return done_testing();
}
