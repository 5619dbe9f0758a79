/*
 * pipe_pair.h: an in-memory full-duplex connection for the pipe unit tests
 * (header-only; include once per test program).
 *
 * Sides A and B.  Each side's stage images the peer's ring; ops->write
 * copies stage[off, off+len) into the peer's ring at once, or (defer)
 * queues it to land later byte by byte in address order, like an RDMA
 * write; ops->credit and ops->head store into the peer's tail and head
 * words; max_end records how far into the ring writes reached.
 * ops->write_user lands like write, its user part from the user's memory
 * (which must stay unchanged until it landed).  Growing rings: ring_new
 * allocates (desc: the ring's address), ring_move points the peer's ring
 * and our stage at the new ones (deferred writes keep the ones they were
 * queued for; old stages are freed at the next init), ring_drop frees;
 * grow_refuse makes ring_new (1) or stage_new (2) fail.  A pipe whose
 * frames the flag publishes (cfg.flag_publishes) and whose ring does not
 * grow runs as over shm: each stage IS the peer's ring (alias), written in
 * place, and ops->write copies nothing.  scramble: deferred writes land
 * in no address order (byte i of a write at offset i * 9973 mod its length,
 * from a copy taken as its first byte lands) and the next write lands
 * alongside the first, while completions (landed) still come in write
 * order, as on an RC queue pair that promises no placement order.  Plus
 * deterministic data: rnd(), rnd_in(), pat().
 */
#ifndef PIPE_PAIR_H_INCLUDED
#define PIPE_PAIR_H_INCLUDED

#include <stdlib.h>
#include <string.h>
#include "rb_pipe.h"

#define QMAX 4096
#define BUFMAX 32768

typedef struct side side_t;
struct side {
    rb_pipe_t p;
    uint8_t *stage, *ring;
    int alias;                  /* stage == peer->ring */
    uint64_t tail_word, head_word;      /* stored by the peer's credit/head */
    side_t *peer;
    int defer, scramble;
    struct {
        uint8_t *dst, *src;     /* the peer's ring and our stage at the write */
        uint8_t *snap;          /* scramble: its bytes, once the first landed */
        size_t off, len;
        unsigned frames;
        rb_user_t u;            /* write_user: the user parts (u.n 0: none) */
    } q[QMAX];                  /* deferred writes, q[qh..qt) */
    size_t wlen[QMAX];          /* length of write k, at k % QMAX */
    uint64_t wend[QMAX];        /* its end position (tx.head: frames come first) */
    unsigned long wout, most;   /* first write not yet credited; most in flight */
    unsigned qh, qt;
    size_t qdone, qdone2;       /* bytes of q[qh] (and, scramble, q[qh+1]) landed */
    unsigned long writes, wframes, credits, heads, landed, user_writes;
    unsigned long plain;        /* writes reporting no frame (frames 0) */
    size_t max_end;             /* highest ring byte written + 1 */
    int grow_refuse;
    unsigned long ring_news, ring_drops, moves, told;
    uint8_t *new_ring, *new_stage, *old[64];    /* not yet in use; retired */
    unsigned n_old;
};

static side_t A, B;

/* Writes of s the peer has not credited (tail word or piggyback) after
 * one more: the most seen (rb_config_t.max_writes bounds it). */
static inline void t_window_note(side_t * s)
{
    uint64_t cr = (int64_t) (s->tail_word - s->p.tx.credit) > 0 ? s->tail_word : s->p.tx.credit;

    s->wend[s->writes % QMAX] = s->p.tx.head;
    while (s->wout <= s->writes && (int64_t) (cr - s->wend[s->wout % QMAX]) >= 0)
        s->wout++;
    if (s->writes + 1 - s->wout > s->most)
        s->most = s->writes + 1 - s->wout;
}

static inline int t_write(void *ctx, size_t off, size_t len, unsigned frames)
{
    side_t *s = ctx;

    t_window_note(s);
    s->q[s->qt % QMAX].u.n = 0;
    s->wlen[s->writes++ % QMAX] = len;
    s->wframes += frames;
    s->plain += !frames;
    if (off + len > s->max_end)
        s->max_end = off + len;
    if (!s->defer) {
        if (!s->alias)
            memcpy(s->peer->ring + off, s->stage + off, len);
        return 0;
    }
    if (s->qt - s->qh == QMAX)
        return -1;
    s->q[s->qt % QMAX].dst = s->peer->ring;
    s->q[s->qt % QMAX].src = s->stage;
    s->q[s->qt % QMAX].snap = NULL;
    s->q[s->qt % QMAX].off = off;
    s->q[s->qt % QMAX].frames = frames;
    s->q[s->qt++ % QMAX].len = len;
    return 0;
}

static inline int t_credit(void *ctx, uint64_t tail)
{
    side_t *s = ctx;

    s->credits++;
    s->peer->tail_word = tail;
    return 0;
}

static inline int t_head(void *ctx, uint64_t head)
{
    side_t *s = ctx;

    s->heads++;
    s->peer->head_word = head;
    return 0;
}

static inline int t_write_user(void *ctx, size_t off, size_t len, unsigned frames,
                               const rb_user_t * u)
{
    side_t *s = ctx;
    unsigned j;
    int rc;

    s->user_writes++;
    for (j = 0; j < u->n; j++)
        if (u->seg[j].at < off || u->seg[j].at + u->seg[j].len > off + len)
            return -1;
    rc = t_write(ctx, off, len, frames);
    for (j = 0; !rc && !s->defer && j < u->n; j++)
        memcpy(s->peer->ring + u->seg[j].at, u->seg[j].addr, u->seg[j].len);
    if (!rc && s->defer)
        s->q[(s->qt - 1) % QMAX].u = *u;
    return rc;
}

/* The byte a deferred write from stage src puts at ring offset at. */
static inline uint8_t t_src_byte(const uint8_t * src, const rb_user_t * u, size_t at)
{
    unsigned j;

    for (j = 0; j < u->n; j++)
        if (at - u->seg[j].at < u->seg[j].len)
            return ((const uint8_t *) u->seg[j].addr)[at - u->seg[j].at];
    return src[at];
}

static inline uint8_t *t_zalloc(size_t n);

static inline int t_ring_new(void *ctx, size_t size, void *desc, size_t *dlen,
                             volatile void **ring)
{
    side_t *s = ctx;

    s->ring_news++;
    if (s->grow_refuse == 1 || s->new_ring || !(s->new_ring = t_zalloc(size)))
        return RDMA_ERR_NOMEM;
    memcpy(desc, &s->new_ring, sizeof(s->new_ring));
    *dlen = sizeof(s->new_ring);
    *ring = s->new_ring;
    return 0;
}

static inline void t_ring_drop(void *ctx, volatile void *old)
{
    side_t *s = ctx;

    s->ring_drops++;
    free((void *) old);
}

static inline int t_stage_new(void *ctx, size_t size, const void *desc, size_t dlen,
                              void **stage)
{
    side_t *s = ctx;

    (void) desc, (void) dlen;
    if (s->grow_refuse == 2 || !(s->new_stage = t_zalloc(size)))
        return RDMA_ERR_NOMEM;
    *stage = s->new_stage;
    return 0;
}

static inline void t_ring_move(void *ctx, size_t size, const void *desc, size_t dlen)
{
    side_t *s = ctx;

    (void) size;
    if (dlen == sizeof(s->peer->ring) && s->n_old < 64) {
        s->old[s->n_old++] = s->stage;
        s->stage = s->new_stage;
        memcpy(&s->peer->ring, desc, dlen);
        s->peer->new_ring = s->new_stage = NULL;
        s->moves++;
    }
}

static const rb_xport_ops_t t_ops = { t_write, t_credit, t_head, t_write_user, NULL, NULL,
    NULL, NULL
};

static const rb_xport_ops_t t_grow_ops = { t_write, t_credit, t_head, t_write_user,
    t_ring_new, t_ring_drop, t_stage_new, t_ring_move
};

/* Byte i of deferred write k lands: at offset i, or (scramble) at a
 * scattered offset, from the copy taken as its first byte lands (the
 * sender reuses stage bytes once the receiver took the frame). */
static inline void t_land_at(side_t * s, unsigned k, size_t i)
{
    __typeof__(s->q[0]) *e = &s->q[k % QMAX];
    size_t j;

    if (!s->scramble) {
        e->dst[e->off + i] = t_src_byte(e->src, &e->u, e->off + i);
        return;
    }
    if (!e->snap && (e->snap = malloc(e->len)) != NULL)
        for (j = 0; j < e->len; j++)
            e->snap[j] = t_src_byte(e->src, &e->u, e->off + j);
    j = (size_t) ((uint64_t) i * 9973 % e->len);
    e->dst[e->off + j] = e->snap ? e->snap[j] : t_src_byte(e->src, &e->u, e->off + j);
}

/* Land one deferred byte (scramble: also one of the next write); a write
 * whose bytes all landed completes, in write order.  0 when nothing is
 * pending. */
static inline int t_land_byte(side_t * s)
{
    if (s->qh == s->qt)
        return 0;
    t_land_at(s, s->qh, s->qdone++);
    if (s->scramble && s->qt - s->qh > 1 && s->qdone2 < s->q[(s->qh + 1) % QMAX].len)
        t_land_at(s, s->qh + 1, s->qdone2++);
    while (s->qh != s->qt && s->qdone == s->q[s->qh % QMAX].len) {
        free(s->q[s->qh % QMAX].snap);
        s->qdone = s->qdone2;
        s->qdone2 = 0;
        s->landed += s->q[s->qh++ % QMAX].frames;
    }
    return 1;
}

static inline uint8_t *t_zalloc(size_t n)
{
    uint8_t *b = aligned_alloc(64, n);

    if (b)
        memset(b, 0, n);
    return b;
}

static inline rb_config_t t_cfg(size_t ring, size_t chunk, size_t maxf, size_t thr, rb_mode_t mode)
{
    rb_config_t c = { .ring_size = ring, .chunk_size = chunk, .max_frame = maxf,
        .credit_threshold = thr, .mode = mode };

    return c;
}

/* Memory of s, freed first; the stage stays NULL where it will alias. */
static inline int side_alloc(side_t * s, side_t * peer, const rb_config_t * cfg)
{
    if (!s->alias)
        free(s->stage);
    free(s->ring);
    free(s->new_ring);
    free(s->new_stage);
    while (s->n_old)
        free(s->old[--s->n_old]);
    memset(s, 0, sizeof(*s));
    s->peer = peer;
    s->alias = cfg->flag_publishes && cfg->ring_max <= cfg->ring_size;
    s->stage = s->alias ? NULL : t_zalloc(cfg->ring_size);
    s->ring = t_zalloc(cfg->ring_size);
    return (s->alias || s->stage) && s->ring ? 0 : -1;
}

static inline int side_init(side_t * s, const rb_config_t * cfg)
{
    if (s->alias)
        s->stage = s->peer->ring;
    return rb_pipe_init(&s->p, cfg, cfg->ring_max > cfg->ring_size ? &t_grow_ops : &t_ops, s,
                        s->stage, &s->tail_word, s->ring, &s->head_word);
}

static inline int pair_init(const rb_config_t * cfg)
{
    return side_alloc(&A, &B, cfg) || side_alloc(&B, &A, cfg) || side_init(&A, cfg)
        || side_init(&B, cfg) ? -1 : 0;
}

/* ---- deterministic data ---- */

static uint64_t rng = 88172645463325252ULL;

static inline uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    return rng ^= rng << 17;
}

static inline size_t rnd_in(size_t lo, size_t hi)
{
    return lo + rnd() % (hi - lo + 1);
}

static inline uint8_t pat(int dir, uint64_t i)
{
    return (uint8_t) (((i + 1) * 0x9E3779B97F4A7C15ULL + (uint64_t) dir * 0x632BE5AB) >> 56);
}

#endif /* PIPE_PAIR_H_INCLUDED */
