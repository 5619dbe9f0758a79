/*
 * t_zc: unit tests of the zero-copy rendezvous (zcopy/zc) over the
 * in-memory pipe pair.  Both ends live in this process, so the fake
 * transport's pull reads the sender's buffer at the REQ address directly:
 * at once (like CMA) or later, in pieces, when the test completes them
 * (like RDMA reads with a bounded number outstanding).
 */
#include <stdlib.h>
#include <string.h>
#include "pipe_pair.h"
#include "zc.h"
#include "tap.h"

#define PULLQ 64

typedef struct fake {
    zc_conn_t z;
    int async, refuse, expose_fail, hit, push_refuse;
    int busy;                   /* pull says "not now" (limits) */
    size_t refuse_after;        /* refuse once this many bytes are pulled and
                                 * none are in flight (verbs: the next window
                                 * cannot be pinned); 0: never */
    size_t pulled;
    size_t pull_max;            /* bytes per pull call (0: all) */
    int short_rand;             /* each pull moves 1..pull_max bytes at random,
                                 * like a capped process_vm_readv */
    int hold;                   /* hold: the buffer is frequent (eager from user memory) */
    unsigned holds;             /* hold calls */
    int sent_auto;              /* xfer_step reports the user write complete
                                 * and the receiver's credit (a reply would
                                 * carry it), so the pipe is idle again */
    struct fake *peer;          /* sync pulls let the peer run meanwhile (the
                                 * other core pushes while we copy) */
    struct {
        void *dst;
        const void *src;
        size_t len;
    } q[PULLQ];
    unsigned qh, qt;
    unsigned exposed, unexposed, pulls, pushes;
} fake_t;

static fake_t FA, FB;

static int f_expose(void *ctx, const void *addr, size_t len, uint64_t * key, void **handle,
                    int *hit)
{
    fake_t *f = ctx;

    (void) len;
    if (f->expose_fail)
        return -1;
    f->exposed++;
    *key = 0x5eed;
    *handle = (void *) addr;
    *hit = f->hit;
    return 0;
}

static void f_unexpose(void *ctx, void *handle)
{
    (void) handle;
    ((fake_t *) ctx)->unexposed++;
}

/* Queue (async) or copy now (sync) each dst piece from the peer's memory. */
static int f_pull(void *ctx, const struct iovec *dst, int n, uint64_t raddr, uint64_t key,
                  size_t len, size_t *posted)
{
    fake_t *f = ctx;
    const char *src = (const char *) (uintptr_t) raddr;
    int i;

    *posted = 0;
    if (f->refuse)
        return RDMA_ERR_REFUSED;
    if (f->busy)
        return RDMA_ERR_NOMEM;
    if (key != 0x5eed)
        return RDMA_ERR_XPORT;
    if (f->refuse_after && f->pulled >= f->refuse_after)
        return f->qt == f->qh ? RDMA_ERR_REFUSED : RDMA_OK;
    f->pulls++;
    if (f->pull_max && len > f->pull_max)
        len = f->short_rand ? rnd_in(1, f->pull_max) : f->pull_max;
    if (f->refuse_after && len > f->refuse_after - f->pulled)
        len = f->refuse_after - f->pulled;
    f->pulled += len;
    for (i = 0; i < n && *posted < len; i++) {
        size_t k = dst[i].iov_len < len - *posted ? dst[i].iov_len : len - *posted;
        if (f->async) {
            if (f->qt - f->qh == PULLQ)
                break;
            f->q[f->qt % PULLQ].dst = dst[i].iov_base;
            f->q[f->qt % PULLQ].src = src + *posted;
            f->q[f->qt++ % PULLQ].len = k;
        } else {
            memcpy(dst[i].iov_base, src + *posted, k);
            zc_pulled(&f->z, k);
        }
        *posted += k;
    }
    if (f->peer)
        zc_getv(&f->peer->z, NULL, 0, &(size_t) { 0 });
    return RDMA_OK;
}

/* Split copy: write straight into the peer's memory (same process). */
static int f_push(void *ctx, const void *src, size_t len, uint64_t raddr)
{
    fake_t *f = ctx;

    if (f->push_refuse)
        return -1;
    f->pushes++;
    memcpy((void *) (uintptr_t) raddr, src, len);
    return 0;
}

static int f_hold(void *ctx, const void *addr, size_t len, void **handle)
{
    fake_t *f = ctx;

    (void) len;
    f->holds++;
    if (!f->hold)
        return -1;
    f->exposed++;
    *handle = (void *) addr;
    return 0;
}

static const zc_ops_t f_ops = { f_expose, f_unexpose, f_pull, f_push, f_hold };

/* Complete the oldest queued pull, like a read completion. */
static int f_complete(fake_t * f)
{
    if (f->qh == f->qt)
        return 0;
    memcpy(f->q[f->qh % PULLQ].dst, f->q[f->qh % PULLQ].src, f->q[f->qh % PULLQ].len);
    zc_pulled(&f->z, f->q[f->qh++ % PULLQ].len);
    return 1;
}

static size_t split_min;       /* zc_config_t.split_min for setup() */
static size_t eager_min;       /* zc_config_t.eager_min for setup() */

static int setup(size_t ring, size_t threshold, zc_mode_t mode)
{
    rb_config_t rc = t_cfg(ring, 256, ring / 4, ring / 4, RB_MODE_PIGGYBACK);
    zc_config_t zc = { threshold, mode, 0, split_min, eager_min };

    if (pair_init(&rc))
        return -1;
    memset(&FA, 0, sizeof(FA));
    memset(&FB, 0, sizeof(FB));
    FA.hit = FB.hit = 1;
    zc_init(&FA.z, &zc, &f_ops, &FA, &A.p);
    zc_init(&FB.z, &zc, &f_ops, &FB, &B.p);
    return 0;
}

static void fill(uint8_t * b, size_t n, int dir, uint64_t from)
{
    size_t i;

    for (i = 0; i < n; i++)
        b[i] = pat(dir, from + i);
}

static size_t bad_bytes(const uint8_t * b, size_t n, int dir, uint64_t from)
{
    size_t i, bad = 0;

    for (i = 0; i < n; i++)
        bad += b[i] != pat(dir, from + i);
    return bad;
}

/* ---- one message: header entry + large body, driven to the end ---- */

typedef struct xfer {
    struct iovec tx[2], rx[2];
    size_t sent, rcvd, total;
    int err;
} xfer_t;

static void iov_advance(struct iovec *v, int n, size_t k)
{
    int i;

    for (i = 0; i < n && k > 0; i++) {
        size_t d = v[i].iov_len < k ? v[i].iov_len : k;
        v[i].iov_base = (char *) v[i].iov_base + d;
        v[i].iov_len -= d;
        k -= d;
    }
}

/* Skip the leading empty entries (CH3 moves its iov offset the same way). */
static struct iovec *iov_live(struct iovec *v, int *n)
{
    while (*n > 0 && v->iov_len == 0) {
        v++;
        (*n)--;
    }
    return v;
}

static int xfer_step(xfer_t * x, fake_t * ft, fake_t * fr)
{
    size_t nb;
    int n = 2, moved = 0;
    struct iovec *v = iov_live(x->tx, &n);

    if (n > 0) {
        x->err |= zc_putv(&ft->z, v, n, &nb) != RDMA_OK;
        iov_advance(v, n, nb);
        x->sent += nb;
        moved |= nb > 0;
    }
    n = 2;
    v = iov_live(x->rx, &n);
    x->err |= zc_getv(&fr->z, v, n, &nb) != RDMA_OK;
    iov_advance(v, n, nb);
    x->rcvd += nb;
    moved |= nb > 0;
    moved |= f_complete(fr);
    if (ft->sent_auto) {
        zc_sent(&ft->z);
        rb_pipe_flush_credit(fr->z.pipe);
    }
    return moved;
}

static int xfer_run(fake_t * ft, fake_t * fr, size_t len, size_t *steps)
{
    static uint8_t src[1 << 20], dst[1 << 20];
    uint8_t hs[40], hr[40];
    xfer_t x = { {{hs, 40}, {src, len}}, {{hr, 40}, {dst, len}}, 0, 0, 40 + len, 0 };
    size_t i;

    fill(hs, 40, 1, 0);
    fill(src, len, 2, 0);
    memset(dst, 0, len);
    for (i = 0; i < 100000 && (x.sent < x.total || x.rcvd < x.total) && !x.err; i++) {
        xfer_step(&x, ft, fr);
        zc_getv(&ft->z, NULL, 0, &(size_t) { 0 });      /* the sender reads FINs */
    }
    if (steps)
        *steps = i;
    return !x.err && x.sent == x.total && x.rcvd == x.total && !bad_bytes(hr, 40, 1, 0)
        && !bad_bytes(dst, len, 2, 0) && !zc_busy(&ft->z) && !zc_busy(&fr->z);
}

static void test_basic(void)
{
    setup(16384, 4096, ZC_MODE_ZCOPY);
    ok(xfer_run(&FA, &FB, 100000, NULL), "100000 B body pulled synchronously, data intact");
    is_int((int) FA.z.stats.zc_msgs, 1, "one zero-copy entry");
    is_int((int) FB.z.stats.pulled_bytes, 100000, "receiver pulled the whole body");
    ok(FA.exposed == 1 && FA.unexposed == 1, "exposed once, released after FIN");
    is_int((int) A.p.stats.bytes_tx < 1000, 1, "body did not go through the ring");

    ok(xfer_run(&FA, &FB, 4095, NULL) && FA.z.stats.zc_msgs == 1
       && FA.z.stats.copy_msgs == 0, "below the threshold: ring only, no rendezvous");
    ok(xfer_run(&FA, &FB, 4096, NULL) && FA.z.stats.zc_msgs == 2, "at the threshold: zero-copy");
}

static void test_async(void)
{
    size_t steps;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    FB.async = 1;
    FB.pull_max = 3000;
    ok(xfer_run(&FA, &FB, 1 << 20, &steps), "1 MiB pulled in 3000 B pieces completing later");
    ok(FB.pulls > 300, "many pulls (%u)", FB.pulls);
    ok(FA.z.stats.zc_msgs == 1 && FA.unexposed == 1, "sender released after the last piece");
}

/* The sender may not learn that its entry is accepted before every byte
 * is at the receiver. */
static void test_hold(void)
{
    static uint8_t src[65536], dst[65536];
    struct iovec tv = { src, sizeof(src) }, rv = { dst, sizeof(dst) };
    size_t nb = 1, nr = 1;
    int i, early = 0;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    FB.async = 1;
    fill(src, sizeof(src), 3, 0);
    zc_putv(&FA.z, &tv, 1, &nb);
    zc_getv(&FB.z, &rv, 1, &nr);
    for (i = 0; i < 10; i++) {
        zc_getv(&FA.z, NULL, 0, &nr);
        zc_putv(&FA.z, &tv, 1, &nb);
        early |= nb != 0;
    }
    ok(!early && FB.qt - FB.qh > 0, "put reports 0 bytes while the pull is in flight");
    while (f_complete(&FB))
        ;
    zc_getv(&FB.z, &rv, 1, &nr);
    zc_getv(&FA.z, NULL, 0, &nb);
    zc_putv(&FA.z, &tv, 1, &nb);
    ok(nr == sizeof(dst) && nb == sizeof(src) && !bad_bytes(dst, sizeof(dst), 3, 0),
       "after completion: receiver has every byte, sender's entry accepted");
}

/* Seed 001: a frequent buffer's entry goes from user memory in one frame
 * with its header; it is accepted only once the write completed. */
static void test_eager(void)
{
    static uint8_t hdr[16], body[3000], out[3016];
    struct iovec tv[2] = { {hdr, 16}, {body, 1000} }, rv = { out, 1016 };
    size_t nb = 1, nr = 0, len;
    uint64_t head;
    void *d;
    int good = 1;

    eager_min = 128;
    setup(16384, 4096, ZC_MODE_ZCOPY);
    FA.hold = 1;
    fill(hdr, 16, 4, 0);
    fill(body, 1000, 4, 16);
    is_int((int) FA.z.put_small_max, 128, "eager: puts below eager_min are small puts");
    is_int(zc_put_small(&FA.z, tv, 2, 1016, &nb), RDMA_OK, "eager from user memory: put ok");
    ok(nb == 16 && A.user_writes == 1 && FA.holds == 1,
       "eager: one gathered write; only the header accepted (%zu)", nb);
    is_int(zc_put_small(&FA.z, tv, 1, 16, &nb), RDMA_ERR_PROTO,
           "eager: a small put meanwhile is checked by zc_putv too");
    head = FA.z.pipe->tx.head;
    ok(zc_claim(&FA.z, 16) == NULL && FA.z.pipe->tx.head == head,
       "eager: no two-step small put meanwhile either (the pipe unchanged)");
    zc_getv(&FB.z, &rv, 1, &nr);
    ok(nr == 1016 && !bad_bytes(out, 1016, 4, 0), "eager: the receiver has all 1016 bytes");
    zc_putv(&FA.z, tv + 1, 1, &nb);
    ok(nb == 0 && zc_busy(&FA.z) && FA.unexposed == 0,
       "eager: the entry is not accepted before the write completed");
    is_int(zc_putv(&FA.z, tv, 2, &nb), RDMA_ERR_PROTO, "eager: another iov meanwhile is a bug");
    zc_sent(&FA.z);
    zc_putv(&FA.z, tv + 1, 1, &nb);
    ok(nb == 1000 && FA.unexposed == 1 && FA.z.stats.eager_zc == 1 && !zc_busy(&FA.z),
       "eager: accepted and released after completion, counted");
    head = FA.z.pipe->tx.head;
    if ((d = zc_claim(&FA.z, 16)) != NULL)
        memcpy(d, hdr, 16);
    ok(zc_claim(&FA.z, 128) == NULL && d && zc_commit(&FA.z, 16) == RDMA_OK
       && FA.z.pipe->tx.head > head && zc_getv(&FB.z, &rv, 1, &nr) == RDMA_OK && nr == 16
       && !bad_bytes(out, 16, 4, 0), "eager: two-step small puts below eager_min only, once idle");

    zc_putv(&FA.z, tv, 2, &nb);
    ok(nb == 1016 && A.user_writes == 1 && FA.holds == 1,
       "eager: frames not yet credited (a stream): copied, nobody asked");
    zc_getv(&FB.z, &rv, 1, &nr);
    rb_pipe_flush_credit(&B.p);
    FA.hold = 0;
    zc_putv(&FA.z, tv, 2, &nb);
    ok(nb == 1016 && A.user_writes == 1 && FA.holds == 2,
       "eager: idle pipe, a buffer that is not frequent is copied");
    zc_getv(&FB.z, &rv, 1, &nr);
    rb_pipe_flush_credit(&B.p);
    tv[1].iov_len = 127;
    zc_putv(&FA.z, tv, 2, &nb);
    ok(nb == 143 && FA.holds == 2, "eager: below eager_min nobody is asked");
    zc_getv(&FB.z, &rv, 1, &nr);
    rb_pipe_flush_credit(&B.p);

    /* every size from 128 to 3000 B (frame max 4072 here), data intact */
    FA.hold = FA.sent_auto = 1;
    for (len = 128; len <= 3000 && good; len += 97)
        good = xfer_run(&FA, &FB, len, NULL);
    ok(good && FA.z.stats.eager_zc == 1 + 30 && FA.exposed == FA.unexposed,
       "eager: 30 sizes of 128..3000 B intact, each from user memory (%llu)",
       (unsigned long long) FA.z.stats.eager_zc);
    eager_min = 0;
}

static void test_refused(void)
{
    setup(16384, 4096, ZC_MODE_ZCOPY);
    FB.refuse = 1;
    ok(xfer_run(&FA, &FB, 200000, NULL), "receiver refuses: body goes through the ring, intact");
    ok(FB.z.stats.refused_tx == 1 && FA.z.stats.refused_rx == 1 && FA.z.refused,
       "refusal counted on both sides, sender stops asking");
    ok(FA.exposed == 1 && FA.unexposed == 1, "refused exposure released");
    ok(xfer_run(&FA, &FB, 200000, NULL) && FA.exposed == 1 && FA.z.stats.copy_msgs == 2,
       "later large entries take the copy path at once");
}

/* The receiver cannot pin now (limits): the body goes through the ring
 * and the sender backs off instead of giving up zero-copy for good. */
static void test_busy(void)
{
    int i, ok_all = 1;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    FB.busy = 1;
    ok(xfer_run(&FA, &FB, 200000, NULL), "receiver busy: body goes through the ring, intact");
    ok(FB.z.stats.refused_tx == 1 && FA.z.stats.refused_rx == 1 && !FA.z.refused
       && FA.z.backoff == ZC_AUTO_BACKOFF - 1 && FA.unexposed == 1,
       "busy counted on both sides, exposure released, the sender backs off (this entry "
       "is the first of %d)", ZC_AUTO_BACKOFF);
    FB.busy = 0;
    for (i = 1; i < ZC_AUTO_BACKOFF; i++)
        ok_all &= xfer_run(&FA, &FB, 200000, NULL);
    ok(ok_all && FA.exposed == 1 && FA.z.backoff == 0, "the other %d copy as well",
       ZC_AUTO_BACKOFF - 1);
    ok(xfer_run(&FA, &FB, 200000, NULL) && FA.exposed == 2 && FA.z.stats.zc_msgs == 1,
       "then zero-copy again");
}

/* The receiver pulls part of the body, then can pin no more (verbs: the
 * next registration window fails): the rest comes through the ring. */
static void test_refused_late(void)
{
    int async;

    for (async = 0; async < 2; async++) {
        setup(16384, 4096, ZC_MODE_ZCOPY);
        FB.async = async;
        FB.pull_max = 3000;
        FB.refuse_after = 100000;
        ok(xfer_run(&FA, &FB, 1 << 20, NULL), "%s pulls refused after 100000 B: the rest "
           "goes through the ring, 1 MiB intact", async ? "async" : "sync");
        ok(FB.z.stats.refused_tx == 1 && FA.z.stats.refused_rx == 1 && FA.unexposed == 1
           && FA.z.stats.zc_msgs == 0 && FA.z.stats.zc_bytes == 100000
           && FB.z.stats.pulled_bytes == 100000, "counted as refused, exposure released");
        ok(A.p.stats.bytes_tx > (1 << 20) - 100000 && A.p.stats.bytes_tx < (1 << 20),
           "only the part not pulled crossed the ring");
    }
}

static void test_expose_fail(void)
{
    setup(16384, 4096, ZC_MODE_ZCOPY);
    FA.expose_fail = 1;
    ok(xfer_run(&FA, &FB, 300000, NULL), "expose fails: copy path, data intact");
    ok(FA.z.stats.copy_msgs == 1 && FA.z.backoff == ZC_AUTO_BACKOFF,
       "counted as copy, backing off %d entries", ZC_AUTO_BACKOFF);
    FA.expose_fail = 0;
    ok(xfer_run(&FA, &FB, 300000, NULL) && FA.z.stats.copy_msgs == 2
       && FA.z.backoff == ZC_AUTO_BACKOFF - 1, "next entry still copies during the backoff");
}

static void test_modes(void)
{
    int i;

    setup(16384, 4096, ZC_MODE_COPY);
    ok(xfer_run(&FA, &FB, 50000, NULL) && FA.exposed == 0 && FA.z.stats.copy_msgs == 1,
       "mode copy: never exposes");
    ok(FA.z.stats.copy_by_log2[15] == 1, "decision counted under 2^15");

    setup(16384, 4096, ZC_MODE_ZCOPY);
    FA.z.keep = 1;
    ok(xfer_run(&FA, &FB, 50000, NULL) && FA.exposed == 0 && FA.z.stats.copy_msgs == 1
       && FA.z.stats.zc_msgs == 0, "keep: an entry above the threshold takes the ring");
    FA.z.keep = 0;
    ok(xfer_run(&FA, &FB, 50000, NULL) && FA.exposed == 1 && FA.z.stats.zc_msgs == 1,
       "keep cleared: the next one goes zero-copy");

    setup(16384, 4096, ZC_MODE_AUTO);
    FA.hit = 0;
    for (i = 0; i < ZC_AUTO_WINDOW; i++)
        xfer_run(&FA, &FB, 8192, NULL);
    ok(FA.z.stats.zc_msgs == ZC_AUTO_WINDOW && FA.z.backoff == ZC_AUTO_BACKOFF,
       "auto: a window of misses starts a backoff");
    for (i = 0; i < ZC_AUTO_BACKOFF; i++)
        xfer_run(&FA, &FB, 8192, NULL);
    ok(FA.z.stats.copy_msgs == ZC_AUTO_BACKOFF && FA.z.stats.zc_msgs == ZC_AUTO_WINDOW,
       "auto: backoff entries copy");
    FA.hit = 1;
    for (i = 0; i < ZC_AUTO_WINDOW; i++)
        xfer_run(&FA, &FB, 8192, NULL);
    ok(FA.z.stats.zc_msgs == 2 * ZC_AUTO_WINDOW && FA.z.backoff == 0,
       "auto: zero-copy again, hits keep it on");
}

/* Both ends send a large body at once; each reads the other's. */
static void test_crossing(void)
{
    static uint8_t s1[300000], s2[300000], d1[300000], d2[300000];
    xfer_t x1 = { {{s1, 0}, {s1, sizeof(s1)}}, {{d1, 0}, {d1, sizeof(d1)}}, 0, 0, sizeof(s1), 0 };
    xfer_t x2 = { {{s2, 0}, {s2, sizeof(s2)}}, {{d2, 0}, {d2, sizeof(d2)}}, 0, 0, sizeof(s2), 0 };
    int i;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    FA.async = FB.async = 1;
    FA.pull_max = FB.pull_max = 50000;
    fill(s1, sizeof(s1), 4, 0);
    fill(s2, sizeof(s2), 5, 0);
    for (i = 0; i < 10000 && (x1.rcvd < x1.total || x2.rcvd < x2.total
                              || x1.sent < x1.total || x2.sent < x2.total); i++) {
        xfer_step(&x1, &FA, &FB);
        xfer_step(&x2, &FB, &FA);
    }
    ok(!x1.err && !x2.err && x1.sent == x1.total && x2.sent == x2.total
       && !bad_bytes(d1, sizeof(d1), 4, 0) && !bad_bytes(d2, sizeof(d2), 5, 0),
       "crossing rendezvous both complete, data intact (%d steps)", i);
}

/* Random stream: entries of random sizes, the receiver's iov cut at random
 * (CH3 reloading its iov), pulls in random pieces; the byte stream must
 * come out unchanged. */
static void test_random_stream(void)
{
    enum { TOTAL = 3 << 20 };
    static uint8_t src[TOTAL], dst[TOTAL];
    size_t sent = 0, rcvd = 0, nb;
    struct iovec tv[4], rv[8];
    int tn = 0, rn = 0, i, err = 0, k;

    setup(32768, 2048, ZC_MODE_ZCOPY);
    FB.async = 1;
    fill(src, TOTAL, 6, 0);
    for (i = 0; i < 2000000 && (rcvd < TOTAL || sent < TOTAL) && !err; i++) {
        if (tn == 0 && sent < TOTAL) {
            size_t left = TOTAL - sent, off = sent;
            for (tn = 0; tn < 4 && left; tn++) {
                size_t len = rnd() % 3 ? rnd_in(1, 3000) : rnd_in(2048, 70000);
                len = len < left ? len : left;
                tv[tn].iov_base = src + off;
                tv[tn].iov_len = len;
                off += len;
                left -= len;
            }
        }
        if (rn == 0) {
            size_t left = TOTAL - rcvd, off = rcvd;
            for (rn = 0; rn < 8 && left; rn++) {
                size_t len = rnd_in(1, 40000);
                len = len < left ? len : left;
                rv[rn].iov_base = dst + off;
                rv[rn].iov_len = len;
                off += len;
                left -= len;
            }
        }
        FB.pull_max = rnd_in(1, 20000);
        if (tn) {
            struct iovec *v = iov_live(tv, &tn);
            err |= zc_putv(&FA.z, v, tn, &nb) != RDMA_OK;
            iov_advance(v, tn, nb);
            memmove(tv, v, tn * sizeof(*v));
            v = iov_live(tv, &tn);
            memmove(tv, v, tn * sizeof(*v));
            sent += nb;
        }
        err |= zc_getv(&FB.z, rv, rn, &nb) != RDMA_OK;
        iov_advance(rv, rn, nb);
        {
            struct iovec *v = iov_live(rv, &rn);
            memmove(rv, v, rn * sizeof(*v));
        }
        rcvd += nb;
        for (k = (int) rnd_in(0, 3); k > 0; k--)
            f_complete(&FB);
        zc_getv(&FA.z, NULL, 0, &nb);
    }
    ok(!err && sent == TOTAL && rcvd == TOTAL && !bad_bytes(dst, TOTAL, 6, 0),
       "3 MiB random stream, mixed ring and zero-copy entries, intact");
    ok(FA.z.stats.zc_msgs > 20 && FB.z.stats.pulled_msgs == FA.z.stats.zc_msgs,
       "%llu zero-copy entries, all pulled", (unsigned long long) FA.z.stats.zc_msgs);
}

/* A receiver that drops the data reads it into one small scratch buffer
 * again and again (CH3's drop_data). */
static void test_sink(void)
{
    static uint8_t src[100000], sink[1000];
    struct iovec tv = { src, sizeof(src) }, sv = { sink, sizeof(sink) };
    size_t nb, got = 0;
    int i;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    FB.async = 1;
    for (i = 0; i < 100000 && got < sizeof(src); i++) {
        zc_putv(&FA.z, &tv, 1, &nb);
        zc_getv(&FB.z, &sv, 1, &nb);
        got += nb;
        f_complete(&FB);
        zc_getv(&FA.z, NULL, 0, &nb);
    }
    zc_putv(&FA.z, &tv, 1, &nb);
    ok(got == sizeof(src) && nb == sizeof(src) && !zc_busy(&FA.z) && !zc_busy(&FB.z),
       "100000 B pulled through a 1000 B scratch buffer");
}

/* Split copy: the sender pushes the second half while the receiver pulls
 * the first; refused pushes are pulled; small REQs are not split. */
static void test_split(void)
{
    split_min = 65536;
    setup(16384, 4096, ZC_MODE_ZCOPY);
    ok(xfer_run(&FA, &FB, 1 << 20, NULL), "split copy: 1 MiB intact");
    ok(FB.z.stats.split_msgs == 1 && FA.z.stats.pushed_bytes == 1 << 19 && FA.pushes == 1,
       "split copy: the sender pushed the second half (%llu B)",
       (unsigned long long) FA.z.stats.pushed_bytes);
    ok(FB.exposed == 1 && FB.unexposed == 1,
       "split copy: the receiver exposed the pushed half until PUSHED");
    ok(xfer_run(&FA, &FB, 65535, NULL) && FB.z.stats.split_msgs == 1,
       "below split_min: pulled whole");
    FA.push_refuse = 1;
    ok(xfer_run(&FA, &FB, 200000, NULL) && FB.z.stats.split_msgs == 2
       && FA.z.stats.pushed_bytes == 1 << 19, "push refused: the receiver pulls that half too");
    FB.async = 1;
    FA.push_refuse = 0;
    ok(xfer_run(&FA, &FB, 300000, NULL), "split copy with pieces completing later: intact");
    setup(16384, 4096, ZC_MODE_ZCOPY);
    FB.refuse = 1;
    ok(xfer_run(&FA, &FB, 300000, NULL) && FB.z.stats.split_msgs == 1
       && FA.z.stats.refused_rx == 1, "pull refused after the PUSH: ring fallback, late PUSHED dropped");
    split_min = 0;
}

/* Split copy whose own pulls come back short (a CMA copy capped by the
 * kernel) while the push completes: PUSHED arrives before the receiver
 * has the first half, and only bytes that really arrived may count. */
static void test_split_short(void)
{
    int i, good = 0;

    split_min = 65536;
    for (i = 0; i < 20; i++) {
        setup(16384, 4096, ZC_MODE_ZCOPY);
        FB.short_rand = 1;
        FB.peer = &FA;
        FB.pull_max = rnd_in(1000, 200000);
        good += xfer_run(&FA, &FB, 1 << 20, NULL) && FB.z.stats.split_msgs == 1
            && FA.z.stats.pushed_bytes == 1 << 19;
    }
    is_int(good, 20, "split copy, short pulls, PUSHED before the first half: 20 x 1 MiB intact");
    split_min = 0;
}

static void test_proto(void)
{
    uint32_t fin[4] = { 77, 0, 0, 0 };      /* zc_fin_t: id, status, done */
    int sent = 0;
    size_t nb;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    rb_pipe_put_ctrl(&B.p, ZC_FRAME_FIN, fin, sizeof(fin), &sent);
    is_int(zc_getv(&FA.z, NULL, 0, &nb), RDMA_ERR_PROTO, "FIN without a REQ is a protocol error");
    setup(16384, 4096, ZC_MODE_ZCOPY);
    rb_pipe_put_ctrl(&B.p, 9, fin, sizeof(fin), &sent);
    is_int(zc_getv(&FA.z, NULL, 0, &nb), RDMA_ERR_PROTO, "unknown control frame is an error");
    setup(16384, 4096, ZC_MODE_ZCOPY);
    rb_pipe_put_ctrl(&B.p, ZC_FRAME_PUSHED, fin, sizeof(fin), &sent);
    is_int(zc_getv(&FA.z, NULL, 0, &nb), RDMA_ERR_PROTO, "PUSHED without a split is an error");
}

/* The receive fast path: a view of DATA where it lies; -1 (use zc_getv)
 * at a rendezvous REQ; 0 when nothing has arrived. */
static void test_peek(void)
{
    static uint8_t big[8192];
    struct iovec v = { "hello", 5 }, b = { big, sizeof(big) };
    const void *buf;
    size_t len, nb;

    setup(16384, 4096, ZC_MODE_ZCOPY);
    is_int(zc_peek(&FB.z, &buf, &len), 0, "peek: nothing arrived");
    ok(zc_putv(&FA.z, &v, 1, &nb) == RDMA_OK && nb == 5 && zc_peek(&FB.z, &buf, &len) == 1
       && len == 5 && !memcmp(buf, "hello", 5), "peek: DATA bytes where they lie");
    ok(zc_consume(&FB.z, 2) == RDMA_OK && zc_peek(&FB.z, &buf, &len) == 1 && len == 3
       && !memcmp(buf, "llo", 3), "peek: consumed in parts");
    ok(zc_consume(&FB.z, 3) == RDMA_OK && zc_peek(&FB.z, &buf, &len) == 0,
       "peek: all consumed, nothing more");
    ok(zc_putv(&FA.z, &b, 1, &nb) == RDMA_OK && nb == 0 && zc_peek(&FB.z, &buf, &len) == -1,
       "peek at a rendezvous REQ: -1, zc_getv serves it");
}

int main(void)
{
    test_basic();
    test_async();
    test_hold();
    test_eager();
    test_refused();
    test_refused_late();
    test_busy();
    test_expose_fail();
    test_modes();
    test_crossing();
    test_random_stream();
    test_sink();
    test_split();
    test_split_short();
    test_proto();
    test_peek();
    return done_testing();
}
