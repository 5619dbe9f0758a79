/*
 * t_rb_pipe: unit tests of rb_pipe over the in-memory transport of
 * pipe_pair.h (sides A and B, immediate or deferred byte-wise landing).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "pipe_pair.h"
#include "tap.h"

/* Split buf[0, len) into 1..max iov entries at random cuts, some empty. */
static int iov_split(uint8_t * buf, size_t len, struct iovec *iov, int max)
{
    int n = (int) rnd_in(1, max), i;
    size_t off = 0, k;

    for (i = 0; i < n; i++) {
        k = i == n - 1 ? len - off : rnd() % 4 ? rnd_in(0, (len - off) / 2) : 0;
        iov[i].iov_base = buf + off;
        iov[i].iov_len = k;
        off += k;
    }
    return n;
}

static size_t put1(side_t * s, const void *buf, size_t len)
{
    struct iovec v = { (void *) buf, len };
    size_t nb = 0;

    return rb_pipe_putv(&s->p, &v, 1, &nb) ? 0 : nb;
}

static size_t get1(side_t * s, void *buf, size_t len)
{
    struct iovec v = { buf, len };
    size_t nb = 0;

    return rb_pipe_getv(&s->p, &v, 1, &nb) ? 0 : nb;
}

/* ---- flows: one direction of patterned bytes, verified on arrival ---- */

typedef struct flow {
    side_t *tx, *rx;
    int dir;
    uint64_t total, sent, rcvd;
    int bad;                    /* corrupt bytes or errors */
} flow_t;

static int flow_put(flow_t * f, size_t maxlen, int maxiov)
{
    uint8_t buf[BUFMAX], *d;
    struct iovec iov[64];
    size_t len = rnd_in(0, maxlen), k, nb;
    int n;

    if (len > f->total - f->sent)
        len = f->total - f->sent;
    for (k = 0; k < len; k++)
        buf[k] = pat(f->dir, f->sent + k);
    n = iov_split(buf, len, iov, maxiov);
    /* puts at odd stream offsets by the small-message entry, a third of
     * them in two steps where a frame takes them: the same bytes */
    if (f->sent & 1 && rnd() % 3 == 0 && (d = rb_pipe_claim(&f->tx->p, len)) != NULL) {
        memcpy(d, buf, len);
        f->bad += rb_pipe_commit(&f->tx->p, len) != RDMA_OK;
        nb = len;
    } else
        f->bad += (f->sent & 1 ? rb_pipe_put_small(&f->tx->p, iov, n, len, &nb)
                   : rb_pipe_putv(&f->tx->p, iov, n, &nb)) != RDMA_OK;
    f->sent += nb;
    return nb > 0;
}

/* Half the reads by rb_pipe_getv, half by the small-message path; all by
 * it, whole frames only, while view_only is set. */
static int view_only;

/* Read through the small-message path (rb_pipe_view, rb_pipe_view_done):
 * the whole viewed frame or a part of it, verified where it lies. */
static int flow_view(flow_t * f, size_t maxlen)
{
    const uint8_t *v;
    size_t len, n, k;
    int rc = rb_pipe_view(&f->rx->p, (const void **) &v, &len);

    if (rc != 1) {
        f->bad += rc < 0;
        return 0;
    }
    n = view_only || rnd() % 2 ? len : rnd_in(0, len < maxlen ? len : maxlen);
    for (k = 0; k < n; k++)
        f->bad += v[k] != pat(f->dir, f->rcvd + k);
    f->bad += rb_pipe_view_done(&f->rx->p, n) != RDMA_OK;
    f->rcvd += n;
    return n > 0;
}

static int flow_get(flow_t * f, size_t maxlen, int maxiov)
{
    uint8_t buf[BUFMAX];
    struct iovec iov[64];
    size_t len, k, nb;
    int n;

    if (view_only || rnd() % 2)
        return flow_view(f, maxlen);
    len = rnd_in(0, maxlen);
    n = iov_split(buf, len, iov, maxiov);
    memset(buf, 0xa5, len);
    f->bad += rb_pipe_getv(&f->rx->p, iov, n, &nb) != RDMA_OK;
    for (k = 0; k < nb; k++)
        f->bad += buf[k] != pat(f->dir, f->rcvd + k);
    f->rcvd += nb;
    return nb > 0;
}

static void flows_land(side_t * s, int land);

/* Where the stage is the peer's ring (alias): the word at s's receive
 * tail is 0 or the flag of the frame s reads next (t_stale). */
static int tail_ok(const side_t * s)
{
    uint64_t w = *(const uint64_t *) (s->ring + (s->p.rx.tail & (s->p.rx.cfg.ring_size - 1)));

    return !s->alias || !w || (uint32_t) (w >> 32) == s->p.rx.seq;
}

/* Run flows to completion; -1 on corruption or 2000 idle rounds.  land
 * >= 0: after each put and get, report landed frames (flows_land). */
static int flows_drive(flow_t * f, int nf, size_t maxlen, int maxiov, int land)
{
    int idle = 0, i, busy = 1;

    while (busy) {
        int moved = land > 0 && (A.qh != A.qt || B.qh != B.qt);

        for (i = 0, busy = 0; i < nf; i++) {
            moved |= flow_put(&f[i], maxlen, maxiov);
            flows_land(f[i].tx, land);
            moved |= flow_get(&f[i], maxlen, maxiov);
            flows_land(f[i].rx, land);
            if (f[i].bad || !tail_ok(f[i].rx))
                return -1;
            busy |= f[i].rcvd < f[i].total;
        }
        idle = moved ? 0 : idle + 1;
        if (idle > 2000)
            return -1;
    }
    return 0;
}

static int flows_run(flow_t * f, int nf, size_t maxlen, int maxiov)
{
    return flows_drive(f, nf, maxlen, maxiov, -1);
}

/* fill: put until no sender has space; else get until all sent arrived. */
static int flows_settle(flow_t * f, int nf, int fill)
{
    int i, left = 1, rounds = 0;

    while (left && rounds++ < 100000)
        for (i = 0, left = 0; i < nf; i++) {
            if (fill) {
                flow_put(&f[i], BUFMAX, 4);
                left |= rb_pipe_tx_space(&f[i].tx->p) > 0;
            } else {
                flow_get(&f[i], BUFMAX, 4);
                left |= f[i].rcvd < f[i].sent;
            }
            left |= f[i].bad;
        }
    return left ? -1 : 0;
}

static void flows_init(flow_t * f, uint64_t total)
{
    flow_t ab = { &A, &B, 0, total, 0, 0, 0 }, ba = { &B, &A, 1, total, 0, 0, 0 };

    f[0] = ab;
    f[1] = ba;
}

/* ---- tests ---- */

static void t_config(void)
{
    static const rb_config_t bad[] = {
        {3000, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {128, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 48, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 32, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 2048, 2048, 2048, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 1000, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 0, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 4096, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 96, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 2048, 0, 0, 0},
        {4096, 64, 1024, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 3500, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 32, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 4096, 0, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, RB_WRITES_MAX + 1, 0},
        {4096, 64, 1024, 1024, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {4096, 64, 1024, 1024, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {4096, 64, 1024, 1024, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2},
    };
    static const char *const field[] = {
        "ring_size", "ring_size", "chunk_size", "chunk_size", "chunk_size", "max_frame",
        "max_frame", "max_frame", "quiet_frame", "quiet_frame", "credit_threshold",
        "credit_threshold", "mode",
        "completion_driven", "hot_window", "hot_window", "flag_publishes", "max_writes",
        "max_writes", "verify", "verify", "verify",
    };
    rb_config_t good = t_cfg(4096, 64, 1024, 3072, RB_MODE_BASIC);
    const char *what = "unset";
    size_t i;

    ok(rb_config_check(&good, &what) == RDMA_OK && what == NULL, "config: valid one accepted");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = rb_config_check(&bad[i], &what);

        ok(rc == RDMA_ERR_INVAL && what && !strcmp(what, field[i]),
           "config: case %zu rejected naming %s (got %s)", i, field[i], what ? what : "NULL");
    }
    ok(rb_config_check(NULL, &what) == RDMA_ERR_INVAL && !strcmp(what, "cfg"),
       "config: NULL rejected");
}

static void t_init(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_BASIC);
    rb_xport_ops_t nocredit = { t_write, NULL, t_head, NULL, NULL, NULL, NULL, NULL };
    rb_pipe_t p;
    uint64_t w = 0;

    ok(pair_init(&c) == 0, "init: basic pair");
    is_int(rb_pipe_init(&p, &c, &nocredit, NULL, A.stage, &w, A.ring, &w), RDMA_ERR_INVAL,
           "init: ops without credit rejected");
    is_int(rb_pipe_init(&p, &c, &t_ops, NULL, A.stage, &w, A.ring, NULL), RDMA_ERR_INVAL,
           "init: basic mode without head word rejected");
    is_int(rb_pipe_init(&p, &c, &t_ops, NULL, A.stage + 4, &w, A.ring, &w), RDMA_ERR_INVAL,
           "init: misaligned stage rejected");
}

static void t_small(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    struct iovec empty[3] = { {NULL, 0}, {NULL, 0}, {NULL, 0} };
    char out[64] = { 0 };
    uint8_t big[5000], back[5000];
    size_t nb = 7, k;
    int ty = -1;
    const void *v;

    pair_init(&c);
    ok(rb_pipe_putv(&A.p, NULL, 0, &nb) == RDMA_OK && nb == 0, "zero-length putv (n = 0)");
    nb = 7;
    ok(rb_pipe_putv(&A.p, empty, 3, &nb) == RDMA_OK && nb == 0 && A.writes == 0,
       "zero-length putv (empty entries) writes nothing");
    nb = 7;
    ok(rb_pipe_getv(&B.p, empty, 3, &nb) == RDMA_OK && nb == 0, "zero-length getv");
    is_size(get1(&B, out, sizeof(out)), 0, "getv on an empty ring returns 0");
    is_int(rb_pipe_peek(&B.p, &ty, &v, &nb), 0, "peek on an empty ring returns 0");
    is_int(rb_pipe_consume(&B.p, 0), RDMA_ERR_INVAL, "consume without a frame is an error");
    is_size(put1(&A, "hello", 5), 5, "putv of 5 bytes");
    ok(rb_pipe_peek(&B.p, &ty, &v, &nb) == 1 && ty == RB_FRAME_DATA && nb == 5
       && !memcmp(v, "hello", 5), "peek shows the DATA frame");
    ok(get1(&B, out, 3) == 3 && get1(&B, out + 3, sizeof(out)) == 2 && !memcmp(out, "hello", 5),
       "partial getv then the rest");
    for (k = 0; k < sizeof(big); k++)
        big[k] = pat(3, k);
    nb = put1(&A, big, sizeof(big));
    ok(nb > 0 && nb < sizeof(big) && rb_pipe_tx_space(&A.p) == 0,
       "partial putv: %zu of %zu bytes fill the ring", nb, sizeof(big));
    ok(get1(&B, back, sizeof(back)) == nb && !memcmp(big, back, nb)
       && put1(&A, big + nb, sizeof(big) - nb) == sizeof(big) - nb
       && get1(&B, back + nb, sizeof(back)) == sizeof(big) - nb && !memcmp(big, back, sizeof(big)),
       "the rest after the receiver drained");
}

static void t_many_iov(void)
{
    rb_config_t c = t_cfg(8192, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t src[4096] = { 0 }, dst[4096] = { 0 };
    struct iovec iv[64], ov[64];
    size_t total = 0, nb = 0, k;
    int i;

    pair_init(&c);
    for (i = 0; i < 64; i++) {
        size_t len = i % 5 == 3 ? 0 : rnd_in(1, 100);

        iv[i].iov_base = src + total;
        iv[i].iov_len = len;
        total += len;
    }
    for (k = 0; k < total; k++)
        src[k] = pat(7, k);
    for (i = 0, k = 0; i < 64; i++) {   /* 64 pieces, another split */
        size_t len = i == 63 ? total - k : rnd_in(0, (total - k) / 8);

        ov[i].iov_base = dst + k;
        ov[i].iov_len = len;
        k += len;
    }
    ok(rb_pipe_putv(&A.p, iv, 64, &nb) == RDMA_OK && nb == total,
       "putv gathers 64 entries (%zu bytes)", total);
    nb = 0;
    ok(rb_pipe_getv(&B.p, ov, 64, &nb) == RDMA_OK && nb == total && !memcmp(src, dst, total),
       "getv scatters into 64 entries");
}

static void t_full(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    flow_t f[2];
    uint64_t stalls;

    pair_init(&c);
    flows_init(f, 1 << 20);
    flows_settle(f, 1, 1);
    stalls = A.p.stats.full_stalls;
    ok(rb_pipe_tx_space(&A.p) == 0 && f[0].sent > 0 && f[0].sent < 4096,
       "ring full after %llu bytes", (unsigned long long) f[0].sent);
    is_size(put1(&A, "x", 1), 0, "putv on a full ring accepts 0 bytes");
    ok(A.p.stats.full_stalls > stalls, "full ring counted as a stall");
    while (f[0].rcvd < 100)
        flow_get(&f[0], 100 - f[0].rcvd, 1);
    is_size(rb_pipe_tx_space(&A.p), 0, "no space before the credit threshold");
    ok(flows_settle(f, 1, 0) == 0 && B.credits > 0
       && rb_pipe_tx_space(&A.p) > c.ring_size - c.credit_threshold,
       "drained: credits return the ring");
    ok(flows_run(f, 1, 3000, 8) == 0, "stream continues and verifies");
}

static void t_stream(rb_mode_t mode, const char *name)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, mode);
    flow_t f[2];

    c.quiet_frame = 256;        /* frames of both sizes */
    pair_init(&c);
    flows_init(f, 1 << 20);
    ok(flows_run(f, 2, 3000, 8) == 0,
       "%s: 1 MiB each way, random sizes and iov splits, 256 B frames on an empty ring", name);
    ok(A.p.tx.head / c.ring_size > 100 && B.p.tx.head / c.ring_size > 100,
       "%s: rings wrapped %llu times", name, (unsigned long long) (A.p.tx.head / c.ring_size));
    if (mode == RB_MODE_BASIC) {
        ok(A.heads == A.p.stats.frames_tx && B.heads == B.p.stats.frames_tx,
           "basic: one head write per frame (%lu)", A.heads);
        ok(B.credits == B.p.stats.frames_rx && A.credits == A.p.stats.frames_rx
           && B.p.stats.frames_rx == A.p.stats.frames_tx,
           "basic: one credit write per frame (%lu)", B.credits);
    }
}

static void t_coalesce(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 2048, RB_MODE_PIGGYBACK);
    flow_t f[2];
    unsigned long n0;

    pair_init(&c);
    flows_init(f, 1 << 20);
    ok(flows_run(f, 1, 200, 2) == 0, "one-way stream of small messages");
    ok(B.credits > 0 && B.credits * 8 < A.p.stats.frames_tx,
       "credits coalesced: %lu credit writes for %llu frames", B.credits,
       (unsigned long long) A.p.stats.frames_tx);
    n0 = B.credits + (B.p.rx.tail != B.p.rx.tail_sent);
    ok(rb_pipe_flush_credit(&B.p) == RDMA_OK && rb_pipe_flush_credit(&B.p) == RDMA_OK
       && B.credits == n0 && A.tail_word == B.p.rx.tail, "flush_credit publishes the tail once");
}

/* put1, and in completion-driven mode tell the receiver what landed (the
 * writes land at once) */
static size_t put_landed(side_t * s, const void *buf, size_t len)
{
    unsigned long w = s->wframes;
    size_t n = put1(s, buf, len);

    if (s->peer->p.cfg.completion_driven)
        rb_pipe_landed(&s->peer->p, (unsigned) (s->wframes - w));
    return n;
}

/* msgs messages of 1..200 random bytes, A and B in turn; 1 if all verify */
static int pingpong_run(int msgs)
{
    uint8_t m[200], r[200];
    int i, good = 1;

    for (i = 0; i < msgs && good; i++) {
        size_t len = rnd_in(1, sizeof(m)), k;
        side_t *s = i & 1 ? &B : &A;

        for (k = 0; k < len; k++)
            m[k] = (uint8_t) rnd();
        good = put_landed(s, m, len) == len && get1(s->peer, r, sizeof(r)) == len
            && !memcmp(m, r, len);
    }
    return good;
}

static void t_pingpong(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);

    pair_init(&c);
    ok(pingpong_run(1000), "ping-pong: 1000 messages");
    ok(A.credits == 0 && B.credits == 0, "ping-pong: credits all piggybacked (%lu, %lu)",
       A.credits, B.credits);
}

/* Hot window: a quiet ping-pong stays in the first hot_window bytes (plus
 * one frame) in every mode, by PAD rewinds or lap ends; a ring with
 * unconsumed frames is not rewound and its lap does not end early. */
static void t_hot(rb_mode_t mode, int completion, const char *name)
{
    rb_config_t c = t_cfg(65536, 64, 1024, 16384, mode);
    uint8_t m[200] = { 0 }, r[200];
    uint64_t back;
    int i, good;

    c.hot_window = 1024;
    c.completion_driven = completion;
    pair_init(&c);
    ok(pingpong_run(5000), "hot window, %s: 5000 ping-pong messages verify", name);
    ok(A.max_end <= 1024 + 256 && B.max_end <= 1024 + 256
       && A.p.stats.rewinds + A.p.stats.wraps > 0,
       "hot window, %s: writes stay below %d bytes (%zu, %zu; %llu rewinds, %llu lap ends)", name,
       1024 + 256, A.max_end, B.max_end, (unsigned long long) A.p.stats.rewinds,
       (unsigned long long) A.p.stats.wraps);
    /* a fresh pair: whether the ping-pong left a rewind due depends on
     * where it stopped; no frame is consumed from here on */
    pair_init(&c);
    good = put_landed(&A, m, 100) == 100 && get1(&B, r, sizeof(r)) == 100;
    back = A.p.stats.rewinds + A.p.stats.wraps;
    for (i = 0; i < 40; i++)
        good &= put1(&A, m, 100) == 100;
    ok(good && A.max_end > 4096 && A.p.stats.rewinds + A.p.stats.wraps == back,
       "hot window, %s: a ring with frames in it is not rewound (%zu)", name, A.max_end);
}

/* flag_publishes (shm): the head flag alone publishes; no tail flag is
 * written, and streams in both directions still verify. */
static void t_publish(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    char out[16];
    flow_t f[2];

    c.flag_publishes = 1;
    c.hot_window = 1024;
    pair_init(&c);
    ok(put1(&A, "abcdefgh", 8) == 8 && *(uint64_t *) (B.ring + 16 + 8) == 0
       && get1(&B, out, sizeof(out)) == 8 && !memcmp(out, "abcdefgh", 8),
       "flag publishes: frame read, its tail-flag word never written");
    flows_init(f, 1 << 20);
    ok(flows_run(f, 2, 3000, 8) == 0, "flag publishes: 1 MiB each way, random sizes and iov splits");
}

/* A word at a frame start is 0 or the next frame's flag, never old bytes:
 * rb_rx_release clears a released frame's chunk words, on a lazy pipe
 * (rb_pipe_t.lazy) only the flag word of a frame over RB_CLEAR_ALL
 * chunks, and the sender zeroes such words before a frame can start there
 * (rb_tx_stale).  Frames of `len` bytes fill the 64 KiB ring, the first
 * holding at ring offset 64 the very flag the receiver expects there one
 * lap later; an 8-byte frame at 0 then leaves the receiver polling 64,
 * inside that old frame: it must find nothing. */
static void t_stale(size_t len, const char *what)
{
    rb_config_t c = t_cfg(65536, 64, 32768, 32768, RB_MODE_PIGGYBACK);
    uint32_t seq = 65536 / (16 + len) + 2;
    uint64_t fake[2] = { (uint64_t) seq << 32 | 8 << 2 | 1, 0 };   /* 8 B, DATA */
    uint8_t big[32752], r[32752];
    size_t i, good = 1;

    c.flag_publishes = 1;
    pair_init(&c);
    memset(big, 0x5a, len);
    memcpy(big + 64 - 16, fake, sizeof(fake));
    for (i = 0; i < 65536 / (16 + len) && good; i++)
        good = put1(&A, big, len) == len && get1(&B, r, len) == len;
    ok(good && A.p.lazy && put1(&A, "lap two!", 8) == 8 && get1(&B, r, 8) == 8
       && !memcmp(r, "lap two!", 8) && get1(&B, r, 8) == 0 && put1(&A, "and next", 8) == 8
       && get1(&B, r, 8) == 8 && !memcmp(r, "and next", 8),
       "flag publishes, %s: an old frame's bytes where the next frame starts are no frame", what);
}

/* The first small frame to an empty lazy ring after large ones zeroes
 * every stale word (rb_tx_stale), but not its own payload: two 32 KiB
 * frames fill the 64 KiB ring, a reply carries their credit, then a
 * 4 KiB frame at offset 0 lies over the first one's stale chunk words. */
static void t_sweep(void)
{
    rb_config_t c = t_cfg(65536, 64, 32768, 32768, RB_MODE_PIGGYBACK);
    uint8_t big[32752], r[32752];
    size_t i;
    int good = 1;

    c.flag_publishes = 1;
    pair_init(&c);
    for (i = 0; i < sizeof(big); i++)
        big[i] = pat(0, i);
    for (i = 0; i < 2 && good; i++)
        good = put1(&A, big, sizeof(big)) == sizeof(big) && get1(&B, r, sizeof(r)) == sizeof(r);
    good = good && put1(&B, "credit", 6) == 6 && get1(&A, r, 6) == 6 && A.p.tx.head == A.p.tx.tail
        && A.p.stale_from < 1024 && put1(&A, big, 4096) == 4096 && A.p.stale_from == 1024;
    memset(r, 0, 4096);
    ok(good && get1(&B, r, sizeof(r)) == 4096 && !memcmp(r, big, 4096) && tail_ok(&B),
       "lazy clearing: a small frame to an empty ring zeroes the stale words, not its own");
}

/* With a hot window the sweep zeroes only its stale words: each store is
 * to a line the receiver read last (2,048 for a 128 KiB message, 4x its
 * time when CH3's rendezvous followed every one with two small frames).
 * As there: a 32 KiB frame, a small one (rewound to 0 behind a PAD), then
 * a 4 KiB one to the empty ring: the words past the 16 KiB window stay
 * (stale_from is its end), and frames sent past it then, without reads
 * between, still arrive whole. */
static void t_sweep_hot(void)
{
    rb_config_t c = t_cfg(65536, 64, 32768, 32768, RB_MODE_PIGGYBACK);
    uint8_t big[32752], r[32752];
    size_t i;
    int good;

    c.flag_publishes = 1;
    c.hot_window = 16384;
    pair_init(&c);
    for (i = 0; i < sizeof(big); i++)
        big[i] = pat(1, i);
    good = put1(&A, big, sizeof(big)) == sizeof(big) && get1(&B, r, sizeof(r)) == sizeof(r)
        && put1(&A, "cts", 3) == 3 && get1(&B, r, 3) == 3 && put1(&B, "credit", 6) == 6
        && get1(&A, r, 6) == 6 && A.p.tx.head == A.p.tx.tail && A.p.stale_from == 1
        && put1(&A, big, 4096) == 4096 && get1(&B, r, sizeof(r)) == 4096 && !memcmp(r, big, 4096);
    ok(good && A.p.stale_from == 256 && *(uint64_t *) (void *) (B.ring + 300 * 64) != 0,
       "lazy clearing, hot window: the sweep leaves the stale words past the window (from %d)",
       A.p.stale_from);
    for (i = 0; i < 8 && good; i++)
        good = put1(&A, big + i, 4000) == 4000;
    for (i = 0; i < 8 && good; i++)
        good = get1(&B, r, 4000) == 4000 && !memcmp(r, big + i, 4000) && tail_ok(&B);
    ok(good && get1(&B, r, sizeof(r)) == 0, "lazy clearing, hot window: 8 frames past it arrive whole");
}

/* Lazy clearing in random flows with frames up to 32 KiB and a hot
 * window: every byte verified, and after every get the word at the
 * receiver's tail is 0 or the next frame's flag (flows_drive's tail_ok). */
static void t_lazy(void)
{
    rb_config_t c = t_cfg(131072, 64, 32768, 32768, RB_MODE_PIGGYBACK);
    flow_t f[2];

    c.flag_publishes = 1;
    c.hot_window = 16384;
    pair_init(&c);
    flows_init(f, 1 << 23);
    ok(A.p.lazy && flows_run(f, 2, BUFMAX, 8) == 0 && A.p.stale_from < 2048
       && B.p.stale_from < 2048,
       "lazy clearing: 8 MiB each way, frames up to 32 KiB, tail words always 0 or a flag");
}

/* A flag-publishing pair whose small frames end laps at 1024/32 bytes. */
static void pair_init_lap(rb_config_t * c)
{
    c->flag_publishes = 1;
    c->hot_window = 1024;
    pair_init(c);
}

/* Quiet frames (rb_tx_quiet) in a ping-pong of random sizes, 1 to 200
 * bytes (one to four 64-byte chunks; lap ends at 1024/32): a frame of two
 * chunks goes to an empty ring and is cleared at its flag only, and its
 * second chunk's word must read as no frame wherever a later frame ends
 * (tail_ok after every get). */
static void t_quiet(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t m[200], r[256];
    uint64_t x = 1, n = 0;
    unsigned long quiet = 0;
    int i, good = 1;

    pair_init_lap(&c);
    for (i = 0; i < 20000 && good; i++) {
        side_t *s = i & 1 ? &B : &A;
        size_t len = 1 + ((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % 200;
        size_t j;

        for (j = 0; j < len; j++)
            m[j] = pat(i & 1, n++);
        quiet += rb_tx_quiet(&s->p, s->p.ovh + rb_pad8(len)) != 0;
        good = put1(s, m, len) == len && get1(s->peer, r, sizeof(r)) == len
            && !memcmp(m, r, len) && tail_ok(s->peer);
    }
    ok(good && A.p.lazy && quiet > 4000,
       "quiet frames: 20,000 random sizes ping-pong, %lu quiet, no stale word taken", quiet);
    /* one way, each frame taken before the next goes: the ring is empty,
     * but no frame came back, so none is quiet after the first */
    for (i = 0, quiet = 0; i < 100 && good; i++) {
        quiet += rb_tx_quiet(&A.p, A.p.ovh + rb_pad8(100)) != 0;
        good = put1(&A, m, 100) == 100 && get1(&B, r, sizeof(r)) == 100 && tail_ok(&B);
    }
    ok(good && quiet <= 1, "quiet frames: a stream that the receiver keeps up with has none (%lu)",
       quiet);
}

/* Lap ends (RB_INFO_WRAP) on a flag-publishing pipe, lap mark 1024/32 = 32
 * bytes, 64-byte slots: an 8-byte ping-pong takes the slots at 0 and 64
 * alone.  After a lap end the sender has the frame's offset (64 bytes) of
 * room; the receiver's release of it returns credit at once, so a one-way
 * stream from there (the receiver never sends) goes on. */
static void t_lap(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t m[8] = "lap-end", r[16];
    unsigned long credits;
    flow_t f[2];
    int i, good = 1;

    pair_init_lap(&c);
    for (i = 0; i < 198 && good; i++) {
        side_t *s = i & 1 ? &B : &A;

        good = put1(s, m, 8) == 8 && get1(s->peer, r, sizeof(r)) == 8 && !memcmp(m, r, 8);
    }
    ok(good && A.max_end <= 128 && B.max_end <= 128 && A.p.stats.wraps == 49
       && B.p.stats.wraps == 49 && A.p.stats.rewinds + B.p.stats.rewinds == 0
       && A.credits == 49 && B.credits == 49,
       "lap ends: an 8-byte ping-pong uses two slots (%zu, %zu; %llu lap ends, %lu credits)",
       A.max_end, B.max_end, (unsigned long long) A.p.stats.wraps, B.credits);
    /* A's next frame goes to the empty ring at 64: it ends the lap */
    good = put1(&A, m, 8) == 8 && A.p.stats.wraps == 50 && put1(&A, m, 8) == 8
        && put1(&A, m, 8) == 0;
    credits = B.credits;
    ok(good && get1(&B, r, 8) == 8 && B.credits == credits + 1 && put1(&A, m, 8) == 8,
       "lap ends: 64 bytes of room after one, credit at its release");
    flows_init(f, 1 << 18);
    ok(get1(&B, r, 8) == 8 && get1(&B, r, 8) == 8 && flows_run(f, 1, 200, 2) == 0,
       "lap ends: a one-way stream of small messages after one verifies");
}

/* Lap ends past the hot window's frame bytes: an 8 KiB ping-pong (frames
 * over hot_window/4) on a 16 KiB window takes the
 * slots at 0 and 8256, every second frame ending the lap, with no PAD;
 * the bytes verify.  Bursts (8 KiB, then 100 B before the reply) never end
 * the lap there: the 8 KiB message finds the ring empty, the one before it
 * did not (rb_tx_one_fits).  A small frame past the quarter rewinds as
 * before, even after a ping-pong (rb_tx_one_fits). */
static void t_lap_big(void)
{
    rb_config_t c = t_cfg(65536, 64, 16384, 16384, RB_MODE_PIGGYBACK);
    uint8_t m[8192], r[8192];
    size_t i;
    int good = 1;

    c.flag_publishes = 1;
    c.hot_window = 16384;
    pair_init(&c);
    for (i = 0; i < 200 && good; i++) {
        side_t *s = i & 1 ? &B : &A;

        memset(m, (int) i, sizeof(m));
        good = put1(s, m, sizeof(m)) == sizeof(m) && get1(s->peer, r, sizeof(r)) == sizeof(r)
            && !memcmp(m, r, sizeof(m));
    }
    ok(good && A.max_end <= 2 * 8256 && B.max_end <= 2 * 8256 && A.p.stats.wraps == 50
       && B.p.stats.wraps == 50 && A.p.stats.rewinds + B.p.stats.rewinds == 0,
       "lap ends: an 8 KiB ping-pong uses two slots, no PAD (%zu, %zu; %llu lap ends, "
       "%llu rewinds)", A.max_end, B.max_end, (unsigned long long) A.p.stats.wraps,
       (unsigned long long) (A.p.stats.rewinds + B.p.stats.rewinds));
    pair_init(&c);
    for (i = 0; i < 50 && good; i++)
        good = put1(&A, m, sizeof(m)) == sizeof(m) && put1(&A, m, 100) == 100
            && get1(&B, r, sizeof(r)) == sizeof(r) && get1(&B, r, 100) == 100
            && put1(&B, m, 8) == 8 && get1(&A, r, 8) == 8;
    ok(good && A.p.stats.wraps == 0 && A.p.stats.rewinds > 0,
       "lap ends: bursts of 8 KiB and 100 B do not end the lap (%llu lap ends, %llu rewinds)",
       (unsigned long long) A.p.stats.wraps, (unsigned long long) A.p.stats.rewinds);
    pair_init(&c);
    good = put1(&A, m, sizeof(m)) == sizeof(m) && get1(&B, r, sizeof(r)) == sizeof(r)
        && put1(&B, m, 8) == 8 && get1(&A, r, 8) == 8 && put1(&A, m, 100) == 100;
    ok(good && A.p.stats.wraps == 0 && A.p.stats.rewinds == 1,
       "lap ends: a small message after an 8 KiB ping-pong rewinds (%llu lap ends, %llu rewinds)",
       (unsigned long long) A.p.stats.wraps, (unsigned long long) A.p.stats.rewinds);
}

/* One-way streams (rb_tx_streams): a receiver that keeps up empties the
 * ring before each message, yet frames over hot_window/32 bytes walk the
 * ring, no lap end or rewind holding the sender back, while 8-byte frames
 * keep to the window's slots. */
static void t_hot_stream(void)
{
    rb_config_t c = t_cfg(65536, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t m[100] = { 0 }, r[128];
    int i, good = 1;

    pair_init_lap(&c);
    for (i = 0; i < 400 && good; i++)
        good = put1(&A, m, 100) == 100 && get1(&B, r, sizeof(r)) == 100;
    ok(good && A.p.stats.wraps + A.p.stats.rewinds == 0 && A.max_end > 16384,
       "hot stream: 100-byte frames taken one by one walk the ring (%zu; %llu lap ends, "
       "%llu rewinds)", A.max_end, (unsigned long long) A.p.stats.wraps,
       (unsigned long long) A.p.stats.rewinds);
    for (i = 0; i < 16 && good; i++)
        good = put1(&A, m, 100) == 100;
    ok(good, "hot stream: then 16 more go before the receiver takes any");
    pair_init_lap(&c);
    for (i = 0, good = 1; i < 400 && good; i++)
        good = put1(&A, m, 8) == 8 && get1(&B, r, sizeof(r)) == 8;
    ok(good && A.max_end <= 1024 + 64 && A.p.stats.wraps + A.p.stats.rewinds > 0,
       "hot stream: 8-byte frames keep to the window (%zu; %llu lap ends, %llu rewinds)",
       A.max_end, (unsigned long long) A.p.stats.wraps, (unsigned long long) A.p.stats.rewinds);
}

/* Answers to a burst (rb_rx_queued): B answers each of A's requests while
 * it still holds it, as CH3 answers a get in its handler (answer_held),
 * and A sent them all after taking B's last answer, so B finds its ring
 * empty and each request answered by the one before.  With requests
 * queued behind the one in hand, B's 100-byte answers walk the ring: no
 * lap end leaves it only the lap's offset of room, which held a target's
 * answers to a lock epoch of gets to a few until a credit came
 * (0.59-0.80x the get bandwidth, docs/results/rma.md).  A held answer
 * with nothing behind it (a ping-pong) still ends the lap. */
static int answer_held(side_t * s, const void *m, size_t len)
{
    const void *v;
    size_t nb;
    int ty;

    return rb_pipe_peek(&s->p, &ty, &v, &nb) == RB_PEEK_READY && put1(s, m, len) == len
        && rb_pipe_consume(&s->p, nb) == RDMA_OK;
}

/* A fresh pair after three held answers (B's head leaves offset 0), then
 * `burst` requests from A. */
static int answers_init(rb_config_t * c, int burst)
{
    uint8_t m[100] = { 0 }, r[100];
    int i, good = 1;

    pair_init_lap(c);
    for (i = 0; i < 3 && good; i++)
        good = put1(&A, m, 8) == 8 && answer_held(&B, m, 100) && get1(&A, r, 100) == 100;
    for (i = 0; i < burst && good; i++)
        good = put1(&A, m, 8) == 8;
    return good;
}

static void t_hot_answers(void)
{
    rb_config_t c = t_cfg(65536, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t m[100] = { 0 }, r[100];
    unsigned long long wraps;
    int i, good = answers_init(&c, 16);

    wraps = B.p.stats.wraps;
    for (i = 0; i < 15 && good; i++)
        good = answer_held(&B, m, 100);
    ok(good && B.p.stats.wraps == wraps, "hot answers: 15 answers to a burst of 16, each sent "
       "before its request is released, go before A takes any, none ending the lap (%d; %llu "
       "lap ends)", i, (unsigned long long) (B.p.stats.wraps - wraps));
    for (i = 0; i < 15 && good; i++)
        good = get1(&A, r, 100) == 100;
    ok(good && answer_held(&B, m, 100) && get1(&A, r, 100) == 100 && put1(&A, m, 8) == 8
       && answer_held(&B, m, 100) && get1(&A, r, 100) == 100,
       "hot answers: they arrive, and a ping-pong goes on");
    good = answers_init(&c, 1);
    wraps = B.p.stats.wraps;
    ok(good && answer_held(&B, m, 100) && B.p.stats.wraps == wraps + 1
       && get1(&A, r, 100) == 100, "hot answers: a held answer with nothing behind it still "
       "ends the lap");
}

/* quiet_frame: a message that finds the ring empty goes in frames of at
 * most quiet_frame bytes, one that finds frames unread in max_frame ones
 * (the multi-frame and the one-frame path); the data arrives whole. */
static void t_quiet_frame(void)
{
    rb_config_t c = t_cfg(16384, 64, 4096, 64, RB_MODE_BASIC);
    uint8_t src[3000], dst[9000];
    unsigned long f[4];
    size_t k, got = 0, n;
    int i, same = 1;

    for (k = 0; k < sizeof(src); k++)
        src[k] = pat(0, k);
    c.quiet_frame = 1024;
    pair_init(&c);
    for (i = 0; i < 3; i++) {   /* empty ring, then two with frames unread */
        f[i] = A.p.stats.frames_tx;
        put1(&A, src, sizeof(src));
    }
    f[3] = A.p.stats.frames_tx;
    while ((n = get1(&B, dst + got, sizeof(dst) - got)) > 0)
        got += n;
    for (i = 0; i < 3; i++)
        same = same && !memcmp(dst + i * sizeof(src), src, sizeof(src));
    is_int((int) (f[1] - f[0]), (int) ((sizeof(src) + 1024 - A.p.ovh - 1) / (1024 - A.p.ovh)),
           "quiet_frame: 3000 B to an empty ring in frames of at most 1 KiB");
    ok(f[2] - f[1] == 1 && f[3] - f[2] == 1,
       "quiet_frame: 3000 B behind unread frames in one max_frame frame (%lu, %lu)",
       f[2] - f[1], f[3] - f[2]);
    ok(got == sizeof(dst) && same, "quiet_frame: all 9000 B arrive in order (%zu)", got);
    f[0] = A.p.stats.frames_tx;
    put1(&A, src, 2000);        /* everything read and credited: empty again */
    ok(A.p.stats.frames_tx - f[0] == 2 && get1(&B, dst, sizeof(dst)) == 2000
       && !memcmp(dst, src, 2000), "quiet_frame: the ring read empty: 2000 B in 2 frames again");
}

/* The express receive path (rb_pipe_t.express): taken on a flag-
 * publishing pipe for a whole DATA frame (rb_pipe_peek's record of the
 * frame, rx.seen, stays unused), with the piggybacked credit read and the
 * frame released as rb_pipe_consume would; not taken on other pipes, for a
 * frame read in part or one that asks to grow. */
static void t_express(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    const char *v;
    uint8_t *d = NULL;
    size_t len;

    c.flag_publishes = 1;
    pair_init(&c);
    ok(A.p.express && put1(&A, "abcdefgh", 8) == 8
       && rb_pipe_view(&B.p, (const void **) &v, &len) == 1 && len == 8
       && !memcmp(v, "abcdefgh", 8) && B.p.rx.seen.span == 0, "express: a whole DATA frame viewed");
    ok(rb_pipe_view_done(&B.p, 8) == RDMA_OK && B.p.rx.tail == 64 && B.p.rx.seq == 2
       && B.p.stats.frames_rx == 1 && B.p.stats.bytes_rx == 8 && *(uint64_t *) B.ring == 0,
       "express: released whole (tail, seq, counters, chunk word cleared)");
    ok(put1(&B, "r", 1) == 1 && rb_pipe_view(&A.p, (const void **) &v, &len) == 1
       && A.p.tx.tail == 64 && A.p.tx.credit == 64, "express: the piggybacked credit is read");
    ok(rb_pipe_view_done(&A.p, 1) == RDMA_OK && put1(&A, "hello", 5) == 5
       && rb_pipe_view(&B.p, (const void **) &v, &len) == 1 && rb_pipe_view_done(&B.p, 2) == RDMA_OK
       && B.p.rx.off == 2 && rb_pipe_view(&B.p, (const void **) &v, &len) == 1
       && B.p.rx.seen.span != 0 && len == 3 && !memcmp(v, "llo", 3)
       && rb_pipe_view_done(&B.p, 3) == RDMA_OK && B.p.rx.off == 0 && B.p.rx.tail == 128,
       "express: a frame read in part goes the general way, then is released");
    A.p.tx.ask = RB_INFO_GROW;
    ok(put1(&A, "grow", 4) == 4 && rb_pipe_view(&B.p, (const void **) &v, &len) == 1
       && B.p.rx.seen.span != 0 && !memcmp(v, "grow", 4) && rb_pipe_view_done(&B.p, 4) == RDMA_OK,
       "express: a frame asking to grow goes the general way");
    ok(rb_pipe_claim(&A.p, 0) == NULL && rb_pipe_claim(&A.p, 2000) == NULL
       && (d = rb_pipe_claim(&A.p, 6)) == (uint8_t *) A.stage + 192 + 16 && A.p.tx.head == 192,
       "claim: none for 0 bytes or more than a frame; a fitting one changes nothing");
    if (d)
        memcpy(d, "claimd", 6);
    ok(d && rb_pipe_commit(&A.p, 6) == RDMA_OK && A.p.tx.head == 256 && A.p.stats.frames_tx == 4
       && rb_pipe_view(&B.p, (const void **) &v, &len) == 1 && len == 6 && !memcmp(v, "claimd", 6)
       && rb_pipe_view_done(&B.p, 6) == RDMA_OK, "claim, commit: the frame put_small would send");
}

/* The express path where a tail flag completes the frame (flag polling
 * over a NIC): a frame landing byte-wise in address order is viewed only
 * once its bytes hold their final values (its tail flag's last bytes may
 * hold them before they land), then whole; its release and the
 * piggybacked credit as on a flag-publishing pipe. */
static void t_express_tail(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    const char *v = NULL;
    size_t len = 0;
    int early = 0, seen = 0;

    pair_init(&c);
    A.defer = 1;
    ok(B.p.express == RB_EXPRESS_TAIL && put1(&A, "abcdefghij", 10) == 10,
       "express tail: taken where a tail flag completes the frame");
    while (t_land_byte(&A)) {
        int r = rb_pipe_view(&B.p, (const void **) &v, &len);

        early += r != 0 && memcmp(B.ring, A.stage, A.q[0].len);
        seen += r == 1;
    }
    ok(!early && seen && rb_pipe_view(&B.p, (const void **) &v, &len) == 1 && len == 10
       && !memcmp(v, "abcdefghij", 10) && B.p.rx.seen.span == 0,
       "express tail: not viewed before its tail flag landed, then viewed whole "
       "(%d early, %d seen)", early, seen);
    ok(rb_pipe_view_done(&B.p, 10) == RDMA_OK && B.p.rx.tail == 64 && B.p.stats.frames_rx == 1
       && *(uint64_t *) B.ring == 0 && put1(&B, "r", 1) == 1
       && rb_pipe_view(&A.p, (const void **) &v, &len) == 1 && A.p.tx.credit == 64
       && rb_pipe_view_done(&A.p, 1) == RDMA_OK, "express tail: released whole, credit read");
}

static void t_both_full(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 3072, RB_MODE_PIGGYBACK);
    flow_t f[2];

    pair_init(&c);
    flows_init(f, 1 << 18);
    ok(flows_settle(f, 2, 1) == 0 && !rb_pipe_tx_space(&A.p) && !rb_pipe_tx_space(&B.p),
       "both rings full at once");
    ok(flows_settle(f, 2, 0) == 0, "both sides drain");
    ok(rb_pipe_tx_space(&A.p) > 0 && rb_pipe_tx_space(&B.p) > 0,
       "both drained: both sides can send again (no credit deadlock)");
    ok(flows_run(f, 2, BUFMAX, 4) == 0, "both streams complete and verify");
}

/* Land A's deferred writes byte by byte.  After each byte B may show only a
 * frame whose bytes all hold their final values (a byte still in flight may
 * already hold it: then it is landed in all but name).  Returns the frames
 * shown early. */
static int land_all(void)
{
    int ty, early = 0;
    const void *v;
    size_t len;

    while (t_land_byte(&A)) {
        int shown = rb_pipe_peek(&B.p, &ty, &v, &len) == 1;
        long ahead = (long) (B.p.stats.frames_rx - A.landed);
        size_t off = A.q[A.qh % QMAX].off;

        if (shown && ahead >= 0)
            early += ahead > 0 || A.qh == A.qt
                || memcmp(B.ring + off, A.stage + off, A.q[A.qh % QMAX].len);
    }
    return early;
}

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t) 7;
}

/* Land A's deferred writes byte by byte; whenever B shows a frame, check
 * that it holds its final bytes (else ++*early), count it if its write is
 * still landing (*inside), and read it into dst (at most cap bytes).
 * Returns the bytes read. */
static size_t land_read(uint8_t * dst, size_t cap, int *early, int *inside)
{
    size_t got = 0, nb, off;
    const void *v;
    int ty;

    while (t_land_byte(&A)) {
        off = B.p.rx.tail % B.p.cfg.ring_size;
        if (rb_pipe_peek(&B.p, &ty, &v, &nb) != 1)
            continue;
        *early += memcmp(B.ring + off, A.stage + off, 24 + pad8(nb)) != 0;
        *inside += A.qh != A.qt && A.qdone > 0;
        got += get1(&B, dst + got, cap - got);
    }
    return got;
}

static void t_deferred(void)
{
    rb_config_t c = t_cfg(2048, 64, 512, 512, RB_MODE_PIGGYBACK);
    flow_t f[2];
    int early = 0, idle = 0;

    pair_init(&c);
    A.defer = 1;
    flows_init(f, 1 << 17);
    while (f[0].rcvd < f[0].total && idle < 100) {
        flow_put(&f[0], 700, 3);
        early += land_all();
        idle = flow_get(&f[0], 900, 3) ? 0 : idle + 1;
    }
    ok(f[0].rcvd == f[0].total && !f[0].bad, "deferred byte-wise landing: stream verifies");
    is_int(early, 0, "deferred: no frame accepted before its last byte landed");
}

static uint32_t seq_next(uint32_t s)
{
    return s + 1 ? s + 1 : 1;
}

/* Store v at ring offset at if that word lies in payload m (ring offset
 * base, len bytes). */
static void plant(uint8_t * m, size_t base, size_t len, size_t at, uint64_t v)
{
    if (at >= base && at + 8 <= base + len)
        memcpy(m + at - base, &v, 8);
}

/* Payloads carry, where later frames' head and tail flags will be read,
 * exactly those flags (alt 1; odd frames), or, where a head flag torn after
 * 1..3 bytes points its tail, that torn flag (even frames).  Frames land
 * byte by byte; B must never accept one early.  Crosses the seq wrap with a
 * frame long enough for a torn flag to misread its len. */
static size_t put_user1(side_t * s, const void *buf, size_t len)
{
    size_t h = len / 4, nb = 0;
    struct iovec v[2] = { {(void *) buf, h}, {(char *) buf + h, len - h} };

    return rb_pipe_put_user(&s->p, v, 2, (void *) buf, &nb) == RDMA_OK ? nb : 0;
}

/* user: every other frame's payload (but its first quarter) is gathered
 * from the caller's buffer (rb_pipe_put_user), not copied: the stage must
 * still mirror the ring, or a tail flag is chosen against stale bytes. */
static void t_alias(int user)
{
    enum { N = 600, R = 1024, AHEAD = 40 };
    rb_config_t c = t_cfg(R, 64, 256, 64, RB_MODE_PIGGYBACK);
    static size_t pos[N], len[N];
    static uint32_t seq[N];
    uint64_t head = 0;
    uint8_t m[256], r[256];
    int i, j, early = 0, good = 1;

    pair_init(&c);
    A.defer = 1;
    A.p.tx.seq = B.p.rx.seq = seq[0] = 0xfffffff0u;
    for (i = 0; i < N; i++) {   /* the frames putv will make, as the header says */
        size_t off = head % R, span;

        len[i] = i == 16 ? 100 : rnd_in(1, 232);
        span = (24 + pad8(len[i]) + 63) & ~(size_t) 63;
        if (off + span > R)
            len[i] = R - off - 24, span = R - off;
        pos[i] = off;
        head += span;
        if (i + 1 < N)
            seq[i + 1] = seq_next(seq[i]);
    }
    for (i = 0; i < N && good; i++) {
        for (j = 0; j < (int) len[i]; j++)
            m[j] = (uint8_t) rnd();
        for (j = i + AHEAD < N ? i + AHEAD : N - 1; j > i; j--) {
            uint64_t flag = (uint64_t) seq[j] << 32 | len[j] << 2 | 1, t;
            int k;

            if (j & 1) {        /* the flags themselves */
                plant(m, pos[i] + 16, len[i], pos[j], flag);
                plant(m, pos[i] + 16, len[i], pos[j] + 16 + pad8(len[j]), flag);
            } else              /* the head flag torn after k bytes */
                for (k = 1; k < 4; k++) {
                    t = flag & ((UINT64_C(1) << 8 * k) - 1);
                    if (pad8(t >> 2 & RB_LEN_MAX) != pad8(len[j]))
                        plant(m, pos[i] + 16, len[i], pos[j] + 16 + pad8(t >> 2 & RB_LEN_MAX), t);
                }
        }
        good = (user && (i & 1) ? put_user1(&A, m, len[i]) : put1(&A, m, len[i])) == len[i]
            && A.p.stats.frames_tx == (uint64_t) i + 1;
        early += land_all();
        good = good && get1(&B, r, sizeof(r)) == len[i] && !memcmp(m, r, len[i]);
    }
    ok(good && i == N, "aliasing payloads%s: %d frames delivered intact", user ? ", gathered" : "",
       i);
    is_int(early, 0, "aliasing payloads%s: no frame accepted early", user ? ", gathered" : "");
    ok(A.p.tx.seq < 0xfffffff0u && A.p.tx.seq == B.p.rx.seq, "seq wrapped (skipping 0)");
    if (user)
        is_int((int) A.user_writes, N / 2, "gathered: every other frame went by write_user");
}

/* put_user: all or nothing, the same bytes as putv, in every mode; up to
 * RB_USER_SEGS frames in one write; the ring end is padded, not split. */
static void t_user_mode(rb_mode_t mode, int completion, const char *name)
{
    rb_config_t c = t_cfg(16384, 64, 1024, 1024, mode);
    uint8_t m[4200], r[4200];
    struct iovec v[2] = { {m, 40}, {m + 40, 0} };
    size_t nb, len, got, j;
    unsigned long sent = 0;
    int i, good = 1, rc;

    c.completion_driven = completion;
    pair_init(&c);
    for (i = 0; i < 200 && good; i++) {
        len = rnd_in(41, sizeof(m));
        A.defer = i & 1;
        for (j = 0; j < len; j++)
            m[j] = (uint8_t) rnd();
        v[1].iov_len = len - 40;
        rc = rb_pipe_put_user(&A.p, v, 2, m, &nb);
        if (len > rb_pipe_user_max(&A.p)) {
            good = rc == RDMA_ERR_INVAL && nb == 0;
            continue;
        }
        while (t_land_byte(&A))
            ;
        if (completion)
            rb_pipe_landed(&B.p, (unsigned) (A.wframes - B.p.rx.landed));
        got = get1(&B, r, sizeof(r));
        good = rc == RDMA_OK && nb == len && got == len && !memcmp(m, r, len);
        sent++;
    }
    ok(good, "put_user, %s: 200 messages of 41..4200 bytes intact, or refused whole above %zu",
       name, rb_pipe_user_max(&A.p));
    ok(sent > 100 && A.user_writes == sent && A.p.stats.frames_tx > sent + sent / 2,
       "put_user, %s: one write_user per message (%lu, %lu), %llu frames", name, A.user_writes,
       sent, (unsigned long long) A.p.stats.frames_tx);
}

/* Gathered messages of up to 4 frames, landing byte by byte, in flag-poll
 * mode: every frame B shows holds its final bytes (a frame may be read
 * while the rest of its write lands), every byte arrives. */
static void t_user_deferred(void)
{
    rb_config_t c = t_cfg(4096, 64, 256, 256, RB_MODE_PIGGYBACK);
    uint8_t m[1000], r[1000];
    size_t len, got, nb, j;
    int i, early = 0, inside = 0, good = 1;

    pair_init(&c);
    A.defer = 1;
    for (i = 0; i < 300 && good; i++) {
        struct iovec v[2] = { {m, 24}, {m + 24, 0} };

        len = rnd_in(100, 900);
        v[1].iov_len = len - 24;
        for (j = 0; j < len; j++)
            m[j] = (uint8_t) rnd();
        good = rb_pipe_put_user(&A.p, v, 2, m, &nb) == RDMA_OK && nb == len;
        got = land_read(r, len, &early, &inside);
        good = good && got == len && !memcmp(m, r, len);
    }
    ok(good, "gathered, byte-wise landing: 300 messages of 100..900 B (1-4 frames) intact");
    is_int(early, 0, "gathered, byte-wise landing: no frame accepted before its last byte");
    ok(inside > 0, "gathered: %d frames read while their write was still landing", inside);
}

static void t_user(void)
{
    rb_config_t c = t_cfg(1024, 64, 512, 512, RB_MODE_PIGGYBACK);
    uint8_t m[400];
    struct iovec v[2] = { {m, 8}, {m + 8, 392} };
    size_t nb = 1;

    t_user_mode(RB_MODE_PIGGYBACK, 0, "flags");
    t_user_mode(RB_MODE_PIGGYBACK, 1, "completion-driven");
    t_user_mode(RB_MODE_BASIC, 1, "basic");
    t_user_deferred();
    pair_init(&c);
    memset(m, 7, sizeof(m));
    ok(put_user1(&A, m, 400) == 400 && put_user1(&A, m, 400) == 400,
       "put_user: two 400-byte frames fit a 1024-byte ring");
    is_int(rb_pipe_put_user(&A.p, v, 2, m, &nb), RDMA_OK, "put_user on a full ring: no error");
    is_size(nb, 0, "put_user on a full ring: nothing sent");
    c.flag_publishes = 1;
    pair_init(&c);
    is_int(rb_pipe_put_user(&A.p, v, 2, m, &nb), RDMA_ERR_INVAL,
           "put_user: refused where the stage is the peer's ring");
}

static void t_completion(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    char out[16] = { 0 };
    size_t nb;

    c.completion_driven = 1;
    pair_init(&c);
    put1(&A, "abc", 3);
    put1(&A, "defg", 4);
    ok(A.writes == 2 && A.wlen[0] == 24 && A.wlen[1] == 24,
       "completion-driven: a 3-byte frame is one 24-byte write, no tail flag (%zu, %zu)",
       A.wlen[0], A.wlen[1]);
    is_size(get1(&B, out, sizeof(out)), 0, "completion-driven: frames invisible before landed");
    rb_pipe_landed(&B.p, 1);
    ok(get1(&B, out, sizeof(out)) == 3 && !memcmp(out, "abc", 3),
       "completion-driven: one landed, one frame visible");
    rb_pipe_landed(&B.p, 1);
    ok(get1(&B, out, sizeof(out)) == 4 && !memcmp(out, "defg", 4), "completion-driven: second");
    rb_pipe_landed(&B.p, 1);
    is_int(rb_pipe_getv(&B.p, &(struct iovec) { out, 1 }, 1, &nb), RDMA_ERR_PROTO,
           "completion-driven: landed without a frame is a protocol error");
}

/* The express receive path on a completion-driven pipe: a frame is viewed
 * once it landed, never before, and released whole; a landed count with
 * no frame behind it is left to rb_rx_parse, which reports it. */
static void t_completion_express(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    const char *v = NULL;
    char out[4];
    size_t len = 0, nb;

    c.completion_driven = 1;
    pair_init(&c);
    ok(B.p.express && put1(&A, "abcdefgh", 8) == 8
       && rb_pipe_view(&B.p, (const void **) &v, &len) == 0,
       "completion-driven express: a frame not landed is not viewed");
    rb_pipe_landed(&B.p, 1);
    ok(rb_pipe_view(&B.p, (const void **) &v, &len) == 1 && len == 8 && !memcmp(v, "abcdefgh", 8)
       && B.p.rx.seen.span == 0, "completion-driven express: a landed DATA frame viewed whole");
    ok(rb_pipe_view_done(&B.p, 8) == RDMA_OK && B.p.rx.tail == 64 && B.p.rx.consumed == 1
       && B.p.stats.frames_rx == 1 && rb_pipe_view(&B.p, (const void **) &v, &len) == 0,
       "completion-driven express: released whole, nothing more to view");
    rb_pipe_landed(&B.p, 1);
    ok(rb_pipe_view(&B.p, (const void **) &v, &len) == -1
       && rb_pipe_getv(&B.p, &(struct iovec) { out, 1 }, 1, &nb) == RDMA_ERR_PROTO,
       "completion-driven express: landed without a frame is still a protocol error");
}

static void t_ctrl(void)
{
    rb_config_t c = t_cfg(1024, 64, 256, 256, RB_MODE_PIGGYBACK);
    char out[256], big[200];
    int ty = -1, sent = 0;
    const void *v;
    size_t len;
    uint64_t pads;

    pair_init(&c);
    put1(&A, "hello", 5);
    ok(rb_pipe_put_ctrl(&A.p, RB_FRAME_CTRL, "ctl", 3, &sent) == RDMA_OK && sent, "put_ctrl");
    put1(&A, "world", 5);
    ok(get1(&B, out, sizeof(out)) == 5 && get1(&B, out, sizeof(out)) == 0,
       "getv stops at the CTRL frame");
    ok(rb_pipe_peek(&B.p, &ty, &v, &len) == 1 && ty == RB_FRAME_CTRL && len == 3
       && !memcmp(v, "ctl", 3), "peek returns the CTRL frame");
    ok(rb_pipe_consume(&B.p, 1) == RDMA_OK && rb_pipe_peek(&B.p, &ty, &v, &len) == 1 && len == 2
       && rb_pipe_consume(&B.p, 3) == RDMA_ERR_INVAL && rb_pipe_consume(&B.p, 2) == RDMA_OK,
       "consume in parts; over-consume rejected");
    ok(get1(&B, out, sizeof(out)) == 5 && !memcmp(out, "world", 5), "DATA after CTRL");
    while (A.p.tx.head % c.ring_size != c.ring_size - 64)       /* one chunk left */
        put1(&A, "x", 1), get1(&B, out, sizeof(out));
    memset(big, 'c', sizeof(big));
    pads = A.p.stats.frames_tx;
    ok(rb_pipe_put_ctrl(&A.p, 7, big, sizeof(big), &sent) == RDMA_OK && sent
       && A.p.stats.frames_tx == pads + 2, "CTRL at the ring end goes after a PAD frame");
    ok(rb_pipe_peek(&B.p, &ty, &v, &len) == 1 && ty == 7 && len == sizeof(big)
       && !memcmp(v, big, len) && rb_pipe_consume(&B.p, len) == RDMA_OK,
       "PAD frame skipped; CTRL type 7 intact");
    ok(rb_pipe_put_ctrl(&A.p, RB_FRAME_DATA, "x", 1, &sent) == RDMA_ERR_INVAL
       && rb_pipe_put_ctrl(&A.p, RB_FRAME_PAD, "x", 1, &sent) == RDMA_ERR_INVAL
       && rb_pipe_put_ctrl(&A.p, RB_FRAME_CTRL, out, 233, &sent) == RDMA_ERR_INVAL,
       "put_ctrl rejects DATA, PAD and oversize");
    while (put1(&A, big, sizeof(big)))
        continue;
    sent = 1;
    ok(rb_pipe_put_ctrl(&A.p, RB_FRAME_CTRL, "z", 1, &sent) == RDMA_OK && !sent,
       "put_ctrl on a full ring sends nothing");
}

static void t_proto(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint64_t bad = (uint64_t) 1 << 32 | 2000 << 2 | 1;
    char out[8];
    size_t nb;

    pair_init(&c);
    memcpy(B.ring, &bad, 8);
    is_int(rb_pipe_getv(&B.p, &(struct iovec) { out, 8 }, 1, &nb), RDMA_ERR_PROTO,
           "frame longer than max_frame is a protocol error");
}

/* A peer that rewrites a frame we already read part of with a shorter
 * length (consistent flags) must not make the unread length wrap. */
static void t_proto_shrunk(void)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t msg[600], out[700];
    uint64_t flag, shrunk;
    const void *buf;
    size_t nb, len = 0;
    int type, rc;

    pair_init(&c);
    memset(msg, 7, sizeof(msg));
    rb_pipe_putv(&A.p, &(struct iovec) { msg, sizeof(msg) }, 1, &nb);
    rb_pipe_getv(&B.p, &(struct iovec) { out, 500 }, 1, &nb);
    memcpy(&flag, B.ring, 8);
    shrunk = (flag & ~((uint64_t) RB_LEN_MAX << 2)) | 100 << 2;
    memcpy(B.ring, &shrunk, 8);
    memcpy(B.ring + 16 + 104, &shrunk, 8);
    rc = rb_pipe_peek(&B.p, &type, &buf, &len);
    ok(rc == RDMA_ERR_PROTO, "peek of a frame shrunk below what was read: protocol error "
       "(rc %d, len %zu)", rc, len);
    is_int(rb_pipe_getv(&B.p, &(struct iovec) { out, sizeof(out) }, 1, &nb), RDMA_ERR_PROTO,
           "getv of the shrunk frame: protocol error");
    is_int(rb_pipe_consume(&B.p, 1), RDMA_ERR_PROTO, "consume of the shrunk frame: protocol error");
}

/* The idle-poll check is 0 exactly when getv would find nothing. */
static void t_rx_maybe(rb_mode_t mode, int completion, const char *name)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, mode);
    char out[8];
    int n = 0;

    c.completion_driven = completion;
    pair_init(&c);
    n += rb_pipe_rx_maybe(&B.p) == 0;
    put1(&A, "abcdef", 6);
    if (completion) {
        n += rb_pipe_rx_maybe(&B.p) == 0;
        rb_pipe_landed(&B.p, 1);
    } else {
        n++;
    }
    n += rb_pipe_rx_maybe(&B.p) == 1;
    n += get1(&B, out, 4) == 4 && rb_pipe_rx_maybe(&B.p) == 1;
    n += get1(&B, out, 4) == 2 && rb_pipe_rx_maybe(&B.p) == 0;
    is_int(n, 5, "rx_maybe (%s): 0 when empty, 1 from arrival until consumed", name);
}

/* ---- superpipeline (P1) ---- */

static rb_config_t sp_cfg(size_t ring, size_t c0, double q, size_t max)
{
    rb_config_t c = t_cfg(ring, 512, 4096, ring / 4, RB_MODE_PIGGYBACK);

    c.sched_c0 = c0;
    c.sched_q = q;
    c.sched_max = max;
    return c;
}

/* The schedule against the paper's closed forms (eqs. 5-7). */
static void t_sched(void)
{
    static const double qs[] = { 1.25, 1.5, 2.0 };
    size_t L;
    int i, bad = 0, n = 0;
    rb_config_t c = sp_cfg(1 << 20, 12288, 1.5, 1 << 18);
    const char *what;

    ok(fabs(rb_sched_chunk(12288, 1.5, 1 << 20, 0) - 12288) < 1e-6
       && fabs(rb_sched_chunk(12288, 1.5, 1 << 20, 1) - 18432) < 1e-6
       && fabs(rb_sched_chunk(12288, 1.5, 1 << 20, 4) - 62208) < 1e-6
       && fabs(rb_sched_chunk(12288, 1.5, 65536, 9) - 65536) < 1e-6,
       "C_i = C0 q^i: 12 KiB, 18 KiB, 60.75 KiB; capped at the maximum");
    for (i = 0; i < 3; i++)
        for (L = 1; L < ((size_t) 1 << 31); L = L * 5 / 4 + 1, n++) {
            double f = ceil(log(1 + (double) L / 12288 * (qs[i] - 1)) / log(qs[i]) - 1e-9);
            bad += rb_sched_count(L, 12288, qs[i]) != (unsigned) f;
        }
    is_int(bad, 0, "n = ceil(log_q(1 + (L/C0)(q - 1))) for %d (L, q) pairs", n);
    is_int(rb_sched_count(16 << 20, 12288, 1.0), 1366, "q = 1: ceil(L / C0) chunks");
    is_int(rb_sched_count(1 << 20, 12288, 1.5), 10,
           "1 MiB in 10 chunks at C0 = 12 KiB, q = 1.5 (n = 9.3, the last one truncated)");
    is_int(rb_sched_count(16 << 20, 12288, 1.5), 17, "16 MiB in 17 chunks (n = 16.1)");
    ok(rb_config_check(&c, NULL) == RDMA_OK, "superpipeline configuration accepted");
    c.sched_q = 0.5;
    ok(rb_config_check(&c, &what) == RDMA_ERR_INVAL && !strcmp(what, "sched_q"), "q < 1 rejected");
    c.sched_q = 1.5;
    c.sched_max = 1 << 20;
    ok(rb_config_check(&c, &what) == RDMA_ERR_INVAL && !strcmp(what, "sched_max"),
       "maximum chunk above ring/2 rejected");
    c.sched_max = 1 << 18;
    c.sched_c0 = 100;
    ok(rb_config_check(&c, &what) == RDMA_ERR_INVAL && !strcmp(what, "sched_c0"),
       "C0 below a ring chunk rejected");
}

/* One message of len bytes through A -> B with B draining as it goes;
 * returns 0 if it arrives intact.  Writes are recorded in A.wlen. */
static int sp_message(uint8_t * src, uint8_t * dst, size_t len)
{
    size_t sent = 0, rcvd = 0, nb;
    int spins = 0;

    while (rcvd < len && spins++ < 1000000) {
        struct iovec in = { src + sent, len - sent }, out = { dst + rcvd, len - rcvd };

        if (sent < len && rb_pipe_putv(&A.p, &in, 1, &nb) == RDMA_OK)
            sent += nb;
        if (rb_pipe_getv(&B.p, &out, 1, &nb) != RDMA_OK)
            return -1;
        rcvd += nb;
    }
    return rcvd == len && !memcmp(src, dst, len) ? 0 : -1;
}

/* Writes grow by q from C0 up to the cap (whole sub-blocks: a group closes
 * at the first frame that reaches its target), restart per message, and
 * the fixed pipeline writes frame by frame. */
static void t_superpipe(void)
{
    size_t L = 3 << 20, k, w0;
    uint8_t *src = malloc(L), *dst = malloc(L);
    rb_config_t c = sp_cfg(1 << 20, 12288, 1.5, 1 << 18);
    double target = 12288;
    int bad = 0, i;

    for (k = 0; k < L; k++)
        src[k] = pat(7, k);
    pair_init(&c);
    ok(sp_message(src, dst, L) == 0, "superpipeline: 3 MiB message verifies");
    /* the first 9 groups (898 KiB) fit in the 1 MiB ring; later ones may
     * close early when it is full */
    for (i = 0; i < 9 && (unsigned long) i < A.writes; i++) {
        bad += A.wlen[i] < target || A.wlen[i] >= target + 4096;
        target = target * 1.5 < (1 << 18) ? target * 1.5 : (1 << 18);
    }
    is_int(bad, 0, "superpipeline: write i is C0 q^i (capped at 256 KiB) to within a sub-block");
    ok(A.writes < 30 && A.wframes == A.p.stats.frames_tx && A.wframes > 700,
       "superpipeline: %lu frames in %lu writes", A.wframes, A.writes);
    w0 = A.writes;
    bad = sp_message(src, dst, 100000);
    ok(!bad && A.wlen[w0 % QMAX] >= 12288 && A.wlen[w0 % QMAX] < 16384,
       "superpipeline: the next message starts again at C0 (%zu B)", A.wlen[w0 % QMAX]);
    c.sched_c0 = 0;
    pair_init(&c);
    bad = sp_message(src, dst, 1 << 20);
    ok(!bad && A.writes == A.p.stats.frames_tx && A.writes > 256,
       "fixed pipeline: one write per frame (%lu)", A.writes);
    free(src);
    free(dst);
}

/* Byte-wise landing of grouped writes: a sub-block is accepted only once
 * all its bytes landed, and sub-blocks are accepted while the rest of
 * their write is still landing (the pipeline in the pipeline). */
static void t_superpipe_deferred(void)
{
    size_t L = 200000, sent = 0, rcvd = 0, nb, k;
    uint8_t *src = malloc(L), *dst = malloc(L);
    rb_config_t c = sp_cfg(1 << 16, 4096, 2.0, 1 << 14);
    int early = 0, inside = 0, spins = 0;

    for (k = 0; k < L; k++)
        src[k] = pat(8, k);
    pair_init(&c);
    A.defer = 1;
    while (rcvd < L && spins++ < 100000) {
        struct iovec in = { src + sent, L - sent };

        if (sent < L && rb_pipe_putv(&A.p, &in, 1, &nb) == RDMA_OK)
            sent += nb;
        rcvd += land_read(dst + rcvd, L - rcvd, &early, &inside);
    }
    ok(rcvd == L && !memcmp(src, dst, L), "superpipeline, byte-wise landing: data verifies");
    is_int(early, 0, "superpipeline: no sub-block accepted before its last byte landed");
    ok(inside > 0, "superpipeline: %d sub-blocks consumed while their write was still landing",
       inside);
    free(src);
    free(dst);
}

/* Every frame built is written before putv/put_ctrl return (a PAD frame
 * ahead of a control frame that then finds no room included), across
 * random data and control traffic with a slow reader. */
static void t_superpipe_flushed(void)
{
    rb_config_t c = sp_cfg(1 << 14, 1024, 2.0, 1 << 12);
    uint8_t buf[6000], out[6000];
    int i, bad = 0, sent;
    size_t nb;

    c.max_frame = 2048;
    pair_init(&c);
    memset(buf, 0x5a, sizeof(buf));
    for (i = 0; i < 3000; i++) {
        struct iovec in = { buf, rnd_in(0, sizeof(buf)) }, o = { out, rnd_in(0, sizeof(out)) };

        if (rnd() % 3 == 0)
            rb_pipe_put_ctrl(&A.p, RB_FRAME_CTRL, buf, rnd_in(0, 2000), &sent);
        else
            rb_pipe_putv(&A.p, &in, 1, &nb);
        bad += A.wframes != A.p.stats.frames_tx;
        if (rnd() % 2) {
            int ty;
            const void *v;
            if (rb_pipe_peek(&B.p, &ty, &v, &nb) == 1 && ty != RB_FRAME_DATA)
                rb_pipe_consume(&B.p, nb);
            else
                rb_pipe_getv(&B.p, &o, 1, &nb);
        }
    }
    is_int(bad, 0, "superpipeline: every frame built is written when putv/put_ctrl return");
}

/* Completion-driven: one completion per write makes all its frames
 * visible. */
static void t_superpipe_completion(void)
{
    uint8_t src[40000], dst[40000];
    rb_config_t c = sp_cfg(1 << 16, 12288, 1.5, 1 << 14);
    struct iovec in = { src, sizeof(src) }, out = { dst, sizeof(dst) };
    size_t nb, k;

    for (k = 0; k < sizeof(src); k++)
        src[k] = pat(9, k);
    c.completion_driven = 1;
    pair_init(&c);
    rb_pipe_putv(&A.p, &in, 1, &nb);
    ok(nb == sizeof(src) && A.writes == 3, "completion-driven superpipeline: 40000 B in 3 writes");
    rb_pipe_landed(&B.p, (unsigned) A.p.stats.frames_tx);
    ok(rb_pipe_getv(&B.p, &out, 1, &nb) == RDMA_OK && nb == sizeof(src) && !memcmp(src, dst, nb),
       "completion-driven superpipeline: %lu frames landed by count", A.wframes);
}

/* ---- growing rings ---- */

static rb_config_t grow_cfg(rb_mode_t mode, int completion)
{
    rb_config_t c = t_cfg(1024, 64, 512, 256, mode);

    c.ring_max = 16384;
    c.completion_driven = completion;
    return c;
}

/* Pair with grow_cfg and max_writes; defer 2: the superpipeline (its
 * groups fitted too), writes landing at once.  Returns flows_drive's land. */
static int grow_pair_init(rb_mode_t mode, int completion, int defer, unsigned max_writes)
{
    rb_config_t c = grow_cfg(mode, completion);

    c.max_writes = max_writes;
    if (defer == 2) {
        c.sched_c0 = 128;
        c.sched_max = 4096;
        c.sched_q = 1.5;
        defer = 0;
    }
    pair_init(&c);
    A.defer = B.defer = defer;
    return defer;
}

/* land 0: writes land at once; 1: (deferred) a few hundred bytes land in
 * address order, or a few dozen scattered (scramble: more polls see a
 * write half landed); completion-driven receivers are told what landed. */
static void flows_land(side_t * s, int land)
{
    unsigned long done;
    int k;

    if (land < 0)
        return;
    for (k = 0; land && k < (s->scramble ? 24 : 700); k++)
        t_land_byte(s);
    done = land ? s->landed : s->wframes;
    if (s->peer->p.cfg.completion_driven)
        rb_pipe_landed(&s->peer->p, (unsigned) (done - s->told));
    s->told = done;
}

/* Write window (rb_pipe.h): a one-way stream of one-frame messages with
 * max_writes 8 and a credit threshold far above 8 frames; the receiver
 * reads now and then.  At most 8 writes are ever uncredited, the stream
 * completes (the receiver credits every 4 frames), and a window stall
 * asks for no larger ring. */
static void t_window(int completion, const char *name)
{
    rb_config_t c = t_cfg(16384, 64, 1024, 8192, RB_MODE_PIGGYBACK);
    uint8_t m[40], r[64];
    uint64_t sent = 0, rcvd = 0, bad = 0;
    unsigned stuck = 0;
    size_t k, n, got;

    c.ring_max = 65536;
    c.completion_driven = completion;
    c.max_writes = 8;
    pair_init(&c);
    while (rcvd < (1 << 18) && stuck < 100) {
        size_t len = rnd_in(1, sizeof(m));

        for (k = 0; k < len; k++)
            m[k] = pat(0, sent + k);
        sent += n = put_landed(&A, m, len);
        stuck = n ? 0 : stuck + 1;
        while ((!n || !(rnd() & 7)) && (got = get1(&B, r, sizeof(r))) > 0)
            for (k = 0; k < got; k++, rcvd++)
                bad += r[k] != pat(0, rcvd);
    }
    ok(rcvd >= 1 << 18 && !bad, "window, %s: 256 KiB of small messages verify (%llu bad)",
       name, (unsigned long long) bad);
    ok(A.most == 8, "window, %s: at most 8 writes uncredited (%lu)", name, A.most);
    ok(A.p.stats.window_stalls > 0 && A.p.stats.full_stalls == 0 && A.p.stats.grows == 0,
       "window, %s: %llu window stalls, none full, no grow", name,
       (unsigned long long) A.p.stats.window_stalls);
    ok(B.credits * 4 <= B.p.stats.frames_rx + 4 && B.credits * 8 >= B.p.stats.frames_rx,
       "window, %s: a credit per 4 frames (%lu for %llu)", name, B.credits,
       (unsigned long long) B.p.stats.frames_rx);
}

/* The smallest window (2) under random two-way traffic that grows the
 * rings, in every mode: every byte verifies, never more than 2 in flight. */
static void t_window_flows(rb_mode_t mode, int completion, int defer, const char *name)
{
    flow_t f[2];

    defer = grow_pair_init(mode, completion, defer, 2);
    flows_init(f, 1 << 19);
    ok(flows_drive(f, 2, 3000, 8, defer) == 0, "window 2, %s: 512 KiB each way verifies", name);
    ok(A.most <= 2 && B.most <= 2 && A.p.stats.window_stalls + B.p.stats.window_stalls > 0,
       "window 2, %s: at most 2 in flight (%lu, %lu), %llu stalls", name, A.most, B.most,
       (unsigned long long) (A.p.stats.window_stalls + B.p.stats.window_stalls));
}

/* ---- self-verifying frames (rb_config_t.verify) ---- */

/* A 100-byte message whose write lands byte by byte in scattered order:
 * polled after every byte, the receiver takes the frame exactly when its
 * ring bytes equal the sent ones, never torn, never later.  verify 0 is
 * flag polling, which this landing defeats (so the fake does tear). */
static int torn_taken(int verify, int *late)
{
    rb_config_t c = t_cfg(4096, 64, 1024, 1024, RB_MODE_PIGGYBACK);
    uint8_t m[100];
    const void *v;
    size_t len, k, bytes = RB_FRAME_OVERHEAD + sizeof(m);
    int torn = 0, rc = 0, whole;

    for (k = 0; k < sizeof(m); k++)
        m[k] = (uint8_t) (k + 1);
    c.completion_driven = c.verify = verify;
    pair_init(&c);
    A.defer = A.scramble = 1;
    put1(&A, m, sizeof(m));
    *late = 0;
    while (rc != 1 && t_land_byte(&A)) {
        whole = !memcmp(B.ring, A.stage, bytes);
        rc = rb_pipe_view(&B.p, &v, &len);
        torn += rc == 1 && !whole;
        *late += rc != 1 && whole;
    }
    if (rc == 1 && !torn)
        torn = len != sizeof(m) || memcmp(v, m, len) || rb_pipe_view_done(&B.p, len);
    return torn;
}

static void t_verify_torn(void)
{
    int late, torn = torn_taken(1, &late);

    ok(A.plain == 1 && A.wframes == 0, "verify: a small frame is a plain write, no completion");
    ok(!torn && !late && B.p.rx.landed == 1 && B.p.rx.consumed == 1,
       "verify: scattered landing, taken exactly when whole (late %d, landed %llu)", late,
       (unsigned long long) B.p.rx.landed);
    torn = torn_taken(0, &late);
    ok(torn > 0, "flag polling under the same landing takes a torn frame (%d polls)", torn);
}

/* Random two-way traffic on verifying pipes, writes landing deferred and
 * (scramble) scattered, rings growing, a write window, and (sched) the
 * superpipeline, whose groups hold large frames and small ones: every
 * byte verifies, and both kinds of frame went out. */
static void t_verify_flows(int scramble, int sched, const char *name)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 1);
    flow_t f[2];

    c.verify = 1;
    c.max_frame = 2 * RB_VERIFY_MAX;    /* frames of both kinds */
    c.ring_size = 4 * RB_VERIFY_MAX;
    c.max_writes = 8;
    c.hot_window = 512;
    if (sched) {
        c.sched_c0 = 128;
        c.sched_max = 4096;
        c.sched_q = 1.5;
    }
    pair_init(&c);
    A.defer = B.defer = 1;
    A.scramble = B.scramble = scramble;
    flows_init(f, 1 << 19);
    ok(flows_drive(f, 2, 3000, 8, 1) == 0, "verify, %s: 512 KiB each way verifies", name);
    ok(A.plain > 50 && B.plain > 50 && A.wframes > 500 && B.wframes > 500
       && A.p.stats.grows > 0 && B.p.stats.grows > 0,
       "verify, %s: plain writes %lu, %lu; frames by completion %lu, %lu; grows %llu, %llu",
       name, A.plain, B.plain, A.wframes, B.wframes, (unsigned long long) A.p.stats.grows,
       (unsigned long long) B.p.stats.grows);
}

/* The same traffic with flag polling fails under scattered landing: the
 * flows above can fail. */
static void t_verify_control(void)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0);
    flow_t f[2];

    pair_init(&c);
    A.defer = B.defer = A.scramble = B.scramble = 1;
    flows_init(f, 1 << 19);
    ok(flows_drive(f, 2, 3000, 8, 1) != 0,
       "flag polling, scattered landing: the flows fail (corrupt bytes or a protocol error)");
}

static void t_grow_config(void)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0), f;
    const char *what = NULL;
    rb_pipe_t p;
    uint64_t w = 0;

    c.max_frame = 4096;         /* above ring_size/2, within ring_max/2 */
    c.credit_threshold = 4096;
    ok(rb_config_check(&c, &what) == RDMA_OK, "grow config: sizes checked against ring_max");
    f = rb_config_fit(&c, 1024);
    ok(f.ring_size == 1024 && f.max_frame == 512 && f.credit_threshold == 512,
       "grow config: fitted to 1 KiB: frame 512, credit 512 (%zu, %zu)", f.max_frame,
       f.credit_threshold);
    f = rb_config_fit(&c, 16384);
    ok(f.max_frame == 4096 && f.credit_threshold == 4096, "grow config: at ring_max as given");
    c.ring_max = 3000;
    ok(rb_config_check(&c, &what) == RDMA_ERR_INVAL && !strcmp(what, "ring_max"),
       "grow config: ring_max not a power of two rejected");
    c.ring_max = 512;
    ok(rb_config_check(&c, &what) == RDMA_ERR_INVAL && !strcmp(what, "ring_max"),
       "grow config: ring_max below ring_size rejected");
    c = grow_cfg(RB_MODE_PIGGYBACK, 0);
    pair_init(&c);
    is_int(rb_pipe_init(&p, &c, &t_ops, NULL, A.stage, &w, A.ring, &w), RDMA_ERR_INVAL,
           "grow config: a transport without the grow ops refused");
    is_int(rb_pipe_put_ctrl(&A.p, RB_FRAME_MOVE, "x", 1, &(int) { 0 }), RDMA_ERR_INVAL,
           "grow config: MOVE is not the caller's to send");
}

/* Both directions grow 1 KiB -> 16 KiB under a stream; every byte
 * verifies, each end moved four times and dropped four rings. */
static void t_grow_stream(rb_mode_t mode, int completion, int defer, const char *name)
{
    flow_t f[2];

    defer = grow_pair_init(mode, completion, defer, 0);
    flows_init(f, 1 << 20);
    ok(flows_drive(f, 2, 3000, 8, defer) == 0, "grow, %s: 1 MiB each way verifies", name);
    ok(A.p.tx.cfg.ring_size == 16384 && B.p.tx.cfg.ring_size == 16384
       && A.p.rx.cfg.ring_size == 16384 && B.p.rx.cfg.ring_size == 16384,
       "grow, %s: both rings at ring_max (%zu, %zu)", name, A.p.tx.cfg.ring_size,
       B.p.tx.cfg.ring_size);
    ok(A.moves == 4 && B.moves == 4 && A.p.stats.grows == 4 && A.ring_drops == 4
       && B.ring_drops == 4 && A.ring_news == 4 && B.ring_news == 4,
       "grow, %s: four moves, rings made and dropped each way (%lu %lu %lu)", name, A.moves,
       A.ring_drops, A.ring_news);
    ok(A.p.tx.cfg.max_frame == 512 && B.p.rx.cfg.credit_threshold == 256,
       "grow, %s: geometry fitted to the new size", name);
}

/* Growing rings on a flag-publishing pipe with a hot window (shm with
 * RING_INIT_SIZE set): the express path meets MOVE, SWITCH, PAD and
 * grow asks among the frames. */
static void t_grow_publish(void)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0);
    flow_t f[2];
    const void *v;
    size_t len;
    int rounds;

    c.flag_publishes = 1;
    c.hot_window = 256;
    pair_init(&c);
    flows_init(f, 1 << 20);
    ok(flows_run(f, 2, 3000, 8) == 0 && A.p.tx.cfg.ring_size == 16384
       && B.p.tx.cfg.ring_size == 16384, "grow, flag publishes: 1 MiB each way verifies");
    /* a receiver that never puts sends its MOVE from a view (grow work
     * first, as at every entry point; no PAD or part read to do it
     * otherwise); the sender meets it in a view */
    c.hot_window = 0;
    pair_init(&c);
    flows_init(f, 1 << 18);
    view_only = 1;
    for (rounds = 0; f[0].rcvd < f[0].total && !f[0].bad && rounds < 100000; rounds++) {
        flow_put(&f[0], 3000, 8);
        flow_get(&f[0], 3000, 8);
        f[0].bad += rb_pipe_view(&A.p, &v, &len) != 0;
    }
    view_only = 0;
    ok(f[0].rcvd == f[0].total && !f[0].bad && A.p.tx.cfg.ring_size == 16384,
       "grow, flag publishes: a stream read only through views grows its ring (%zu)",
       A.p.tx.cfg.ring_size);
}

/* Small messages never fill a ring: it keeps its first size. */
static void t_grow_quiet(void)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0);

    pair_init(&c);
    ok(pingpong_run(5000) && A.p.tx.cfg.ring_size == 1024 && B.p.tx.cfg.ring_size == 1024
       && !A.ring_news && !B.ring_news, "grow: 5000 ping-pong messages, rings stay at 1 KiB");
}

/* A refused allocation leaves the ring as it is; nothing is lost. */
static void t_grow_refused(int which, const char *name)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0);
    flow_t f[2];

    int rc;

    pair_init(&c);
    (which == 1 ? &B : &A)->grow_refuse = which;
    flows_init(f, 1 << 18);
    rc = flows_drive(f, 1, 3000, 8, 0);
    ok(rc == 0 && A.p.tx.cfg.ring_size == 1024
       && B.p.rx.cfg.ring_size == 1024 && B.ring_news == 1 && !A.moves,
       "grow, %s refused: 256 KiB verifies at 1 KiB, asked once (%lu)", name, B.ring_news);
}

/* After a stream, idle: B offers the first size again; A, which only polls,
 * switches where it reads the MOVE; both grow again under the next stream. */
static void t_grow_shrink(void)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0);
    flow_t f[2];
    uint8_t m[8];
    unsigned long drops;
    int rc;

    pair_init(&c);
    flows_init(f, 1 << 20);
    ok(flows_drive(f, 2, 3000, 8, 0) == 0 && B.p.rx.cfg.ring_size == 16384,
       "shrink: a stream grew the rings");
    drops = B.ring_drops;
    ok(rb_pipe_shrink(&B.p) == RDMA_OK && rb_pipe_shrink(&B.p) == RDMA_OK
       && B.p.rx.next.ring && B.ring_news == 5, "shrink: B offers a 1 KiB ring, once");
    get1(&A, m, sizeof(m));
    get1(&B, m, sizeof(m));
    ok(A.p.tx.cfg.ring_size == 1024 && B.p.rx.cfg.ring_size == 1024 && B.ring_drops == drops + 1
       && A.p.rx.cfg.ring_size == 16384 && A.p.stats.shrinks == 1 && A.p.stats.grows == 4, "shrink: one poll on each side moves A -> B back to "
       "1 KiB, the other way stays (%zu, %zu)", A.p.tx.cfg.ring_size, B.p.rx.cfg.ring_size);
    ok(rb_pipe_shrink(&A.p) == RDMA_OK && get1(&B, m, sizeof(m)) == 0
       && get1(&A, m, sizeof(m)) == 0 && B.p.tx.cfg.ring_size == 1024,
       "shrink: and B -> A when A offers");
    flows_init(f, 1 << 18);
    rc = flows_drive(f, 2, 3000, 8, 0);
    ok(rc == 0 && A.p.tx.cfg.ring_size > 1024 && B.p.tx.cfg.ring_size > 1024,
       "shrink: the next stream verifies and grows them again (%d, %zu, %zu)", rc,
       A.p.tx.cfg.ring_size, B.p.tx.cfg.ring_size);
}

/* SWITCH where no MOVE was offered is a protocol error. */
static void t_grow_proto(void)
{
    rb_config_t c = grow_cfg(RB_MODE_PIGGYBACK, 0);
    uint8_t m[3000];
    size_t nb;

    pair_init(&c);
    memset(m, 7, sizeof(m));
    ok(put1(&A, m, sizeof(m)) < sizeof(m) && put1(&A, m, 100) == 0,
       "grow proto: ring full, GROW asked");
    while (get1(&B, m, sizeof(m)) > 0)
        ;
    put1(&A, m, 10);            /* carries GROW */
    get1(&B, m, sizeof(m));
    get1(&B, m, sizeof(m));     /* offers */
    ok(B.p.rx.next.ring && B.ring_news == 1, "grow proto: B made a ring and offered it");
    B.p.rx.next.ring = NULL;    /* B forgets its offer (its ring leaks) */
    get1(&A, m, 1);             /* reads MOVE */
    put1(&A, m, 1);             /* sends SWITCH */
    is_int(rb_pipe_getv(&B.p, &(struct iovec) { m, 1 }, 1, &nb), RDMA_ERR_PROTO,
           "grow proto: a SWITCH to no offered ring is refused");
}

int main(void)
{
    t_config();
    t_init();
    t_small();
    t_many_iov();
    t_full();
    t_stream(RB_MODE_PIGGYBACK, "piggyback");
    t_stream(RB_MODE_BASIC, "basic");
    t_coalesce();
    t_pingpong();
    t_hot(RB_MODE_PIGGYBACK, 0, "flags");
    t_hot(RB_MODE_BASIC, 0, "basic");
    t_hot(RB_MODE_PIGGYBACK, 1, "completion-driven");
    t_lap();
    t_lap_big();
    t_hot_stream();
    t_hot_answers();
    t_publish();
    t_stale(1008, "frames cleared whole");
    t_stale(32752, "frames cleared lazily");
    t_sweep();
    t_sweep_hot();
    t_lazy();
    t_quiet();
    t_quiet_frame();
    t_express();
    t_express_tail();
    t_both_full();
    t_deferred();
    t_alias(0);
    t_alias(1);
    t_user();
    t_completion();
    t_completion_express();
    t_ctrl();
    t_proto();
    t_proto_shrunk();
    t_rx_maybe(RB_MODE_PIGGYBACK, 0, "flags");
    t_rx_maybe(RB_MODE_BASIC, 0, "basic");
    t_rx_maybe(RB_MODE_PIGGYBACK, 1, "completion-driven");
    t_sched();
    t_superpipe();
    t_superpipe_deferred();
    t_superpipe_completion();
    t_superpipe_flushed();
    t_grow_config();
    t_grow_stream(RB_MODE_PIGGYBACK, 0, 0, "flags");
    t_grow_stream(RB_MODE_PIGGYBACK, 0, 1, "flags, byte-wise landing");
    t_grow_stream(RB_MODE_PIGGYBACK, 1, 1, "completion-driven, byte-wise landing");
    t_grow_stream(RB_MODE_BASIC, 0, 0, "basic");
    t_grow_stream(RB_MODE_PIGGYBACK, 1, 2, "superpipeline, completion-driven");
    t_grow_publish();
    t_grow_quiet();
    t_grow_refused(1, "ring");
    t_grow_refused(2, "stage");
    t_grow_shrink();
    t_grow_proto();
    t_window(0, "flags");
    t_window(1, "completion-driven");
    t_window_flows(RB_MODE_PIGGYBACK, 0, 0, "flags");
    t_window_flows(RB_MODE_PIGGYBACK, 1, 1, "completion-driven, byte-wise landing");
    t_window_flows(RB_MODE_BASIC, 0, 0, "basic");
    t_window_flows(RB_MODE_PIGGYBACK, 1, 2, "superpipeline, completion-driven");
    t_verify_torn();
    t_verify_flows(0, 0, "byte-wise landing");
    t_verify_flows(1, 0, "scattered landing");
    t_verify_flows(1, 1, "scattered landing, superpipeline");
    t_verify_control();
    if (!A.alias)
        free(A.stage);
    free(A.ring);
    if (!B.alias)
        free(B.stage);
    free(B.ring);
    return done_testing();
}
