/*
 * t_xport_shm: rdma_xport_shm between two forked processes (ranks 0 and 1,
 * cards exchanged over a socketpair).  Scenario "accept": rank 0 connects,
 * rank 1 must become READY through progress(); scenario "both": both
 * connect at once.  Each streams data both ways at once with random sizes
 * through 64 KiB rings (wraparound, full rings), verifies every byte and
 * runs a ping-pong.  Error paths and a self-connection run in-process.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "rdma_link.h"
#include "tap.h"

#define MAXRANK 4
#define CARDLEN 128
#define MSGMAX 20000

enum { R_READY, R_STREAM, R_PINGPONG, R_ONCE, R_NRES };
static const char *const res_name[R_NRES] = {
    "connection READY", "streamed both ways at once, every byte verified",
    "1000-message ping-pong", "conn_ready called exactly once",
};

typedef struct node {
    int rank, nready;
    char cards[MAXRANK][CARDLEN];
    rdma_link_t conn[MAXRANK];
    rdma_link_config_t link;
    rdma_xport_t *xp;
    uint64_t rng;
    double deadline;
} node_t;

static int t_card_of(void *arg, int rank, char *buf, size_t len)
{
    node_t *nd = arg;

    return snprintf(buf, len, "%s", nd->cards[rank]) >= (int) len || !nd->cards[rank][0];
}

static rdma_conn_t *t_conn_of(void *arg, int rank)
{
    return &((node_t *) arg)->conn[rank].xc;
}

static int t_bind(void *arg, rdma_conn_t * c, const rdma_conn_mem_t * mem)
{
    return rdma_link_bind(c, &((node_t *) arg)->link, mem);
}

static void t_conn_ready(void *arg, rdma_conn_t * c)
{
    (void) c;
    ((node_t *) arg)->nready++;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rnd(node_t * nd)
{
    nd->rng = nd->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return nd->rng >> 33;
}

/* byte i of the stream sent by rank r */
static uint8_t pat(int r, uint64_t i)
{
    return (uint8_t) ((i * 2654435761u) >> 13 ^ i ^ (uint64_t) r * 0x5bd1e995);
}

static int node_open(node_t * nd, int rank, int size, size_t ring, const char *job)
{
    rdma_xport_params_t prm = { 0 };
    char err[256];
    int i;

    memset(nd, 0, sizeof(*nd));
    nd->rank = rank;
    nd->rng = 12345 + rank;
    for (i = 0; i < MAXRANK; i++)
        nd->conn[i].xc.peer = i;
    nd->link.ring = (rb_config_t) { ring, 256, ring / 4, ring / 4, RB_MODE_PIGGYBACK, 0, 0, 0, 0 };
    prm.rank = rank;
    prm.size = size;
    prm.job = job;
    prm.ring_size = ring;
    prm.chunk_size = 256;
    prm.ev = (rdma_xport_events_t) { t_conn_of, t_card_of, t_bind, t_conn_ready,
        rdma_link_landed, rdma_link_pulled, nd };
    if (rdma_xport_shm.open(&prm, &nd->xp, nd->cards[rank], CARDLEN, err, sizeof(err))) {
        diag("rank %d: %s", rank, err);
        return -1;
    }
    return 0;
}

/* Send ours, receive the peer's fixed-size record. */
static int sock_swap(int sock, const void *out, void *in, size_t len)
{
    size_t got = 0;
    ssize_t n;

    if (write(sock, out, len) != (ssize_t) len)
        return -1;
    while (got < len && (n = read(sock, (char *) in + got, len - got)) > 0)
        got += n;
    return got == len ? 0 : -1;
}

/* One step: progress, then move up to len bytes between buf and the pipe
 * (getv when in), yielding the CPU when nothing moved (the machine may be
 * oversubscribed); -1 once the deadline passed. */
static int node_step(node_t * nd, int peer, uint8_t * buf, size_t len, int in, size_t * nb)
{
    struct iovec iov[2] = { {buf, len / 2}, {buf + len / 2, len - len / 2} };
    rb_pipe_t *p = &nd->conn[peer].pipe;
    int rc;

    *nb = 0;
    if (rdma_xport_shm.progress(nd->xp) || now() > nd->deadline)
        return -1;
    rc = in ? rb_pipe_getv(p, iov, 2, nb) : rb_pipe_putv(p, iov, 2, nb);
    if (!*nb)
        sched_yield();
    return rc;
}

static int node_all(node_t * nd, int peer, uint8_t * buf, size_t len, int in)
{
    size_t done = 0, nb;

    while (done < len) {
        if (node_step(nd, peer, buf + done, len - done, in, &nb))
            return -1;
        done += nb;
    }
    return 0;
}

static int node_stream(node_t * nd, int peer, uint64_t total)
{
    static uint8_t out[MSGMAX], in[MSGMAX];
    uint64_t sent = 0, rcvd = 0, k;
    size_t len, nb;

    while (sent < total || rcvd < total) {
        len = 1 + rnd(nd) % MSGMAX;
        if (len > total - sent)
            len = total - sent;
        for (k = 0; k < len; k++)
            out[k] = pat(nd->rank, sent + k);
        if (node_step(nd, peer, out, len, 0, &nb))
            return -1;
        sent += nb;
        len = 1 + rnd(nd) % MSGMAX;
        if (len > total - rcvd)     /* the ping-pong may follow */
            len = total - rcvd;
        if (node_step(nd, peer, in, len, 1, &nb))
            return -1;
        for (k = 0; k < nb; k++)
            if (in[k] != pat(peer, rcvd + k))
                return -1;
        rcvd += nb;
    }
    return 0;
}

/* Rank 0 sends message i (1..61 bytes), rank 1 echoes it back. */
static int node_pingpong(node_t * nd, int peer, int count)
{
    uint8_t m[64], r[64];
    int i;
    size_t k, len;

    for (i = 0; i < count; i++) {
        len = 1 + i % 61;
        for (k = 0; k < len; k++)
            m[k] = (uint8_t) rnd(nd);
        if (nd->rank == 0 ? node_all(nd, peer, m, len, 0) || node_all(nd, peer, r, len, 1)
            || memcmp(m, r, len)
            : node_all(nd, peer, r, len, 1) || node_all(nd, peer, r, len, 0))
            return -1;
    }
    return 0;
}

static void scenario(int rank, int sock, int both, int *res)
{
    static const char *const job[] = { "t_xport_shm.accept", "t_xport_shm.both" };
    node_t nd;
    int peer = 1 - rank, rc = 0;
    char sync = 0;

    memset(res, 0, R_NRES * sizeof(*res));
    if (node_open(&nd, rank, 2, 1 << 16, job[both])
        || sock_swap(sock, nd.cards[rank], nd.cards[peer], CARDLEN))
        return;
    nd.deadline = now() + 10;
    if (both || rank == 0)
        rc = rdma_xport_shm.connect(nd.xp, &nd.conn[peer].xc);
    while (!rc && nd.conn[peer].xc.state != RDMA_CONN_READY && now() < nd.deadline)
        rc = rdma_xport_shm.progress(nd.xp);
    if (rc)
        diag("rank %d: %s", rank, rdma_xport_shm.error(nd.xp));
    res[R_READY] = nd.conn[peer].xc.state == RDMA_CONN_READY;
    if (res[R_READY]) {
        res[R_STREAM] = node_stream(&nd, peer, both ? 1 << 20 : 4 << 20) == 0;
        res[R_PINGPONG] = node_pingpong(&nd, peer, 1000) == 0;
        diag("rank %d (%s): ring wrapped %llu times, %llu full stalls, %llu credit writes",
             rank, job[both], (unsigned long long) (nd.conn[peer].pipe.tx.head >> 16),
             (unsigned long long) nd.conn[peer].pipe.stats.full_stalls,
             (unsigned long long) nd.conn[peer].pipe.stats.credits_tx);
    }
    /* both attaches have been seen once both sides got here */
    sock_swap(sock, &sync, &sync, 1);
    rdma_xport_shm.progress(nd.xp);
    res[R_ONCE] = nd.nready == 1;
    sock_swap(sock, &sync, &sync, 1);
    rdma_xport_shm.close(nd.xp, &nd.conn[peer].xc);
    rdma_xport_shm.finalize(nd.xp);
}

static void run_pair(int both)
{
    static const char *const name[] = { "connect + accept", "both connect" };
    int sv[2], res[2][R_NRES] = { {0} }, status = -1, i, r;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || (pid = fork()) < 0) {
        ok(0, "%s: socketpair/fork", name[both]);
        return;
    }
    if (pid == 0) {
        close(sv[0]);
        alarm(30);
        scenario(1, sv[1], both, res[1]);
        _exit(write(sv[1], res[1], sizeof(res[1])) != sizeof(res[1]));
    }
    close(sv[1]);
    scenario(0, sv[0], both, res[0]);
    if (read(sv[0], res[1], sizeof(res[1])) != sizeof(res[1]))
        memset(res[1], 0, sizeof(res[1]));
    waitpid(pid, &status, 0);
    close(sv[0]);
    for (i = 0; i < R_NRES; i++)
        for (r = 0; r < 2; r++)
            ok(res[r][i], "%s, rank %d: %s", name[both], r, res_name[i]);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: rank 1 exited cleanly", name[both]);
}

/* In-process: refused peers name the rank and the cause; a self
 * connection carries data. */
static void run_local(void)
{
    node_t a, b, s;
    char m[32] = "to myself", r[32] = "";
    const char *e;
    int rc;

    if (node_open(&a, 0, 2, 1 << 16, "t_xport_shm.local")
        || node_open(&b, 1, 4, 1 << 15, "t_xport_shm.local")) {
        ok(0, "local: open");
        return;
    }
    strcpy(a.cards[1], b.cards[1]);     /* same length, other geometry */
    rc = rdma_xport_shm.connect(a.xp, &a.conn[1].xc);
    e = rdma_xport_shm.error(a.xp);
    ok(rc == RDMA_XPORT_EPEER && strstr(e, "rank 1") && strstr(e, "ring_size")
       && a.conn[1].xc.state == RDMA_CONN_FAILED, "mismatched region refused: %s", e);
    snprintf(a.cards[1], CARDLEN, "999999999.3.%s", strrchr(b.cards[1], '.') + 1);
    a.conn[1].xc.state = RDMA_CONN_IDLE;
    rc = rdma_xport_shm.connect(a.xp, &a.conn[1].xc);
    ok(rc == RDMA_XPORT_EPEER && strstr(e, "cannot open /proc/999999999/fd/3 of rank 1"),
       "dead peer refused: %s", e);
    rdma_xport_shm.finalize(a.xp);
    rdma_xport_shm.finalize(b.xp);

    if (node_open(&s, 0, 1, 1 << 16, "t_xport_shm.self")) {
        ok(0, "self: open");
        return;
    }
    s.deadline = now() + 5;
    ok(rdma_xport_shm.connect(s.xp, &s.conn[0].xc) == RDMA_XPORT_OK
       && node_all(&s, 0, (uint8_t *) m, sizeof(m), 0) == 0
       && node_all(&s, 0, (uint8_t *) r, sizeof(r), 1) == 0 && !strcmp(m, r) && s.nready == 1,
       "self connection carries data");
    rdma_xport_shm.close(s.xp, &s.conn[0].xc);
    rdma_xport_shm.finalize(s.xp);
}

int main(void)
{
    alarm(60);
    run_pair(0);
    run_pair(1);
    run_local();
    return done_testing();
}
