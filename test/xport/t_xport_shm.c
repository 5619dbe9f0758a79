/*
 * t_xport_shm: the shared-memory transport (rdma_xport_shm) through the
 * conformance harness every transport passes (test/xport/conform.h:
 * forked ranks, connect one way or both, streams both ways verified through
 * 64 KiB rings, both pipe modes, superpipeline groups, ping-pong, blocking
 * waits), then what is shm's own, in-process: refused peers name the rank
 * and the cause, a peer of another wire version is refused by either side
 * (a fake peer: its header or link patched), a self connection carries
 * data, and node segments (the
 * memory of MPI-3 shared windows) are shared with another process until
 * sealed.  As root it runs under a host name of the longest length.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "conform.h"
#include "rdma_shm.h"
#include "tap.h"

static const conform_xport_t shm = { &rdma_xport_shm, "t_xport_shm", NULL, NULL };

/* Move len bytes between buf and nd's link to peer (getv when in). */
static int move_all(node_t * nd, int peer, char *buf, size_t len, int in)
{
    struct iovec iov;
    size_t done = 0, nb;
    double limit = conform_now() + 5;
    rdma_status_t st;

    while (done < len && conform_now() < limit) {
        iov = (struct iovec) { buf + done, len - done };
        if (rdma_xport_shm.progress(nd->xp))
            return -1;
        st = in ? rdma_link_getv(&nd->conns[peer], &iov, 1, &nb)
            : rdma_link_putv(&nd->conns[peer], &iov, 1, &nb);
        if (st != RDMA_OK)
            return -1;
        done += nb;
        if (!nb)
            sched_yield();
    }
    return done == len ? 0 : -1;
}

static void run_refused(void)
{
    scen_t sa = conform_defaults(&(scen_t) {.nprocs = 2}), sb =
        conform_defaults(&(scen_t) {.nprocs = 4, .ring = 1 << 15});
    static node_t a, b;
    char ca[CONFORM_CARD_LEN], cb[CONFORM_CARD_LEN], err[256];
    rdma_conn_t *c = &a.conns[1].xc;
    rdma_status_t st;

    if (conform_open(&a, &sa, 0, ca, err, sizeof(err)) ||
        conform_open(&b, &sb, 1, cb, err, sizeof(err))) {
        ok(0, "local: open: %s", err);
        return;
    }
    strcpy(a.cards[1], cb);     /* same region length, other geometry */
    st = rdma_xport_shm.connect(a.xp, c);
    ok(st == RDMA_ERR_PEER && strstr(c->why, "rank 1") && strstr(c->why, "RING_SIZE")
       && c->state == RDMA_CONN_FAILED, "mismatched region refused: %s", c->why);
    rdma_xport_shm.finalize(b.xp);
    sb = conform_defaults(&(scen_t) {.nprocs = 2, .mode = RB_MODE_BASIC});
    if (conform_open(&b, &sb, 1, cb, err, sizeof(err))) {
        ok(0, "local: open: %s", err);
        return;
    }
    strcpy(a.cards[1], cb);     /* same ring, other pipe mode */
    c->state = RDMA_CONN_IDLE;
    st = rdma_xport_shm.connect(a.xp, c);
    ok(st == RDMA_ERR_PEER && strstr(c->why, "PIPE_MODE") && c->state == RDMA_CONN_FAILED,
       "a peer of another pipe mode refused (wire 9): %s", c->why);
    snprintf(a.cards[1], CONFORM_CARD_LEN, "999999999.3.%s", strrchr(cb, '.') + 1);
    c->state = RDMA_CONN_IDLE;
    st = rdma_xport_shm.connect(a.xp, c);
    ok(st == RDMA_ERR_PEER && strstr(c->why, "cannot open /proc/999999999/fd/3 of rank 1"),
       "dead peer refused: %s", c->why);
    rdma_xport_shm.finalize(a.xp);
    rdma_xport_shm.finalize(b.xp);
}

/* Another wire version, either side: a connector refuses an acceptor whose
 * region says so, naming both versions; an acceptor refuses a link that
 * says so, without asking its owner. */
static void run_other_version(void)
{
    scen_t sc = conform_defaults(&(scen_t) {.nprocs = 2, .dynamic = 1});
    static node_t a, b;
    char ca[CONFORM_CARD_LEN], cb[CONFORM_CARD_LEN], err[256], want[64];
    rdma_conn_t *c = &a.conns[1].xc;
    uint64_t *version;
    double limit;

    if (conform_open(&a, &sc, 0, ca, err, sizeof(err)) ||
        conform_open(&b, &sc, 1, cb, err, sizeof(err))) {
        ok(0, "versions: open: %s", err);
        return;
    }
    strcpy(a.cards[1], cb);
    version = &((shm_hdr_t *) b.xp->map)->version;
    *version = RDMA_WIRE_VERSION - 1;
    snprintf(want, sizeof(want), "wire version %d, this process", RDMA_WIRE_VERSION - 1);
    ok(rdma_xport_shm.connect(a.xp, c) == RDMA_ERR_PEER
       && strstr(rdma_xport_shm.error(a.xp), want), "an acceptor of another wire version is "
       "refused by the connector: %s", rdma_xport_shm.error(a.xp));
    *version = RDMA_WIRE_VERSION;
    if (rdma_xport_shm.connect(a.xp, c) != RDMA_OK || !c->priv) {
        ok(0, "versions: connect: %s", rdma_xport_shm.error(a.xp));
        return;
    }
    ((shm_link_t *) ((shm_peer_t *) c->priv)->link)->version = RDMA_WIRE_VERSION + 1;
    for (limit = conform_now() + 5; c->state == RDMA_CONN_CONNECTING && conform_now() < limit;) {
        rdma_xport_shm.progress(b.xp);
        rdma_xport_shm.progress(a.xp);
    }
    ok(c->state == RDMA_CONN_FAILED && strstr(c->why, "refused the connection")
       && b.conns[0].xc.state == RDMA_CONN_IDLE && b.nready == 0, "a link of another wire "
       "version is refused by the acceptor, its owner not asked: %s", c->why);
    rdma_xport_shm.finalize(a.xp);
    rdma_xport_shm.finalize(b.xp);
}

static void run_self(void)
{
    scen_t sc = conform_defaults(&(scen_t) {.nprocs = 1});
    static node_t s;
    char card[CONFORM_CARD_LEN], err[256], m[32] = "to myself", r[32] = "";

    if (conform_open(&s, &sc, 0, card, err, sizeof(err))) {
        ok(0, "self: open: %s", err);
        return;
    }
    strcpy(s.cards[0], card);
    ok(rdma_xport_shm.connect(s.xp, &s.conns[0].xc) == RDMA_OK
       && move_all(&s, 0, m, sizeof(m), 0) == 0 && move_all(&s, 0, r, sizeof(r), 1) == 0
       && !strcmp(m, r) && s.nready == 1, "self connection carries data");
    rdma_xport_shm.close(s.xp, &s.conns[0].xc);
    rdma_xport_shm.finalize(s.xp);
}

/* A child maps seg (given its pid and fd) and writes its bytes + 1 there:
 * its exit status, 0 if it could, else 1 (and why on stderr). */
static int seg_child(rdma_xport_t * xp, rdma_seg_t seg)
{
    pid_t pid = fork();
    int status;

    if (pid == 0) {
        const rdma_xport_seg_ops_t *so = rdma_xport_shm.seg;
        if (so->map(xp, &seg) != RDMA_OK) {
            fprintf(stderr, "%s\n", rdma_xport_shm.error(xp));
            _exit(1);
        }
        for (size_t i = 0; i < seg.len; i++)
            ((unsigned char *) seg.map)[i] += 1;
        so->free(&seg);
        _exit(0);
    }
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

static void run_seg(void)
{
    scen_t sc = conform_defaults(&(scen_t) {.nprocs = 1});
    const rdma_xport_seg_ops_t *so = rdma_xport_shm.seg;
    static node_t s;
    char card[CONFORM_CARD_LEN], err[256];
    rdma_seg_t seg = { 0 }, gone;
    size_t bad = 0, len = 3 * 4096 + 100;

    if (conform_open(&s, &sc, 0, card, err, sizeof(err)) || !so) {
        ok(0, "segments: open: %s", so ? err : "shm has no seg ops");
        return;
    }
    ok(so->make(s.xp, len, &seg) == RDMA_OK && seg.map && seg.len == len && seg.fd >= 0
       && seg.pid == getpid(), "a node segment is made (%zu bytes)", len);
    for (size_t i = 0; i < len; i++)
        ((unsigned char *) seg.map)[i] = (unsigned char) (i * 7);
    ok(seg_child(s.xp, seg) == 0, "another process maps it through the maker's pid and fd");
    for (size_t i = 0; i < len; i++)
        bad += ((unsigned char *) seg.map)[i] != (unsigned char) (i * 7 + 1);
    ok(bad == 0, "its stores are the maker's loads (%zu bytes differ)", bad);
    gone = seg;
    so->seal(&seg);
    ok(seg.fd == -1 && seg.map && seg_child(s.xp, gone) == 1,
       "sealed: the maker keeps its mapping, nobody maps it any more");
    so->free(&seg);
    ok(seg.map == NULL, "freed: unmapped");
    rdma_xport_shm.finalize(s.xp);
}

/* Run under a host name of HOST_NAME_MAX characters (a UTS namespace of
 * our own; root only), so that diagnoses naming the host are seen to hold
 * the longest one. */
static void long_host_name(void)
{
    char name[HOST_NAME_MAX + 1];

    memset(name, 'h', HOST_NAME_MAX);
    name[HOST_NAME_MAX] = '\0';
    if (unshare(CLONE_NEWUTS) || sethostname(name, HOST_NAME_MAX))
        diag("host name left as it is (%s): no UTS namespace of our own", strerror(errno));
}

int main(void)
{
    alarm(300);
    setvbuf(stdout, NULL, _IOLBF, 0);
    long_host_name();
    conform_t = &shm;
    conform_run(conform_cases, conform_ncases, getenv("CH3RDMA_T_XPORT_ONLY"));
    conform_run(conform_grow_cases, conform_ngrow_cases, getenv("CH3RDMA_T_XPORT_ONLY"));
    conform_run(conform_dyn_cases, conform_ndyn_cases,
                getenv("CH3RDMA_T_XPORT_ONLY"));
    run_refused();
    run_other_version();
    run_self();
    run_seg();
    return done_testing();
}
