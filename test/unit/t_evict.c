/*
 * t_evict: the cap on live connections (rdma_chan_evict.c) over the fake
 * transport, made a "wire" transport so that the cap counts its links:
 * least recently used quiet links close with a BYE each way and reopen on
 * demand, nothing is lost across the close (a frame racing the BYE, both
 * sides evicting at once), busy links stay, a peer dying mid-close fails
 * the link instead of hanging.  Four ranks live in this process; each has
 * an outbox and an inbox per peer, and the owner's quiet() is "nothing in
 * the outbox".
 */
#include "fake_xport.h"
#include "rdma_chan.h"
#include "tap.h"

enum { NR = FAKE_RANKS, RING = 1 << 14, BOX = 1 << 16 };

typedef struct rank {
    rdma_chan_t ch;
    rdma_link_t link[NR];
    char card[256];
    char out[NR][BOX], in[NR][BOX];
    size_t out_len[NR], out_at[NR], in_len[NR];
    int evicted[NR];
    int told[NR], dead[NR];     /* owner.failed calls; a read that failed */
} rank_t;

static rank_t R[NR];
static rdma_xport_ops_t wire_ops;      /* fake_xport2 that crosses a NIC */

static rdma_link_t *t_link_of(void *arg, int rank)
{
    return rank >= 0 && rank < NR ? &((rank_t *) arg)->link[rank] : NULL;
}

static rdma_status_t t_card_of(void *arg, int rank, char *buf, size_t len)
{
    (void) arg;
    return snprintf(buf, len, "%s", R[rank].card) >= (int) len ? RDMA_ERR_INVAL : RDMA_OK;
}

static void t_ready(void *arg, rdma_link_t * l)
{
    (void) arg, (void) l;
}

/* As CH3 with a link it polls: reads go on, their end says. */
static rdma_status_t t_failed(void *arg, rdma_link_t * l)
{
    ((rank_t *) arg)->told[l->xc.peer]++;
    return RDMA_OK;
}

static int t_quiet(void *arg, rdma_link_t * l, int answer)
{
    rank_t *r = arg;

    (void) answer;
    return r->out_at[l->xc.peer] == r->out_len[l->xc.peer];
}

static rdma_status_t t_evicted(void *arg, rdma_link_t * l)
{
    rank_t *r = arg;

    r->evicted[l->xc.peer]++;
    return t_quiet(arg, l, 0) ? RDMA_OK : rdma_chan_connect(&r->ch, l);
}

/* Four ranks, every peer over the wire; cap[r] is rank r's MAX_CONNS. */
static int world_open(const int *cap)
{
    static const int node[NR] = { 0, 1, 2, 3 };
    const rdma_xport_ops_t *ops[RDMA_XP_N] = { &fake_xport, &wire_ops };
    rdma_chan_owner_t own = { t_link_of, t_card_of, t_ready, t_failed, NULL, NULL, NULL, NULL,
        t_quiet, t_evicted
    };
    rdma_chan_config_t cfg;
    int r, k;

    memset(R, 0, sizeof(R));
    memset(&cfg, 0, sizeof(cfg));
    cfg.transport = RDMA_TRANSPORT_VERBS;
    cfg.poll_spins = -1;
    for (k = 0; k < RDMA_XP_N; k++) {
        cfg.link[k].ring = (rb_config_t) { .ring_size = RING, .chunk_size = 64,
            .max_frame = 2048, .credit_threshold = RING / 4, .mode = RB_MODE_PIGGYBACK };
        cfg.link[k].zc = (zc_config_t) { 8192, ZC_MODE_ZCOPY, 0, 0, 0 };
    }
    for (r = 0; r < NR; r++) {
        for (k = 0; k < NR; k++)
            R[r].link[k].fail_reads = 1;        /* as the CH3 glue's job VCs */
        cfg.max_conns = cap[r];
        own.arg = &R[r];
        rdma_chan_init(&R[r].ch, &cfg, ops, r, NR, "t_evict", &own);
        if (rdma_chan_assign(&R[r].ch, node) != RDMA_OK
            || rdma_chan_open(&R[r].ch, R[r].card, sizeof(R[r].card)) != RDMA_OK) {
            diag("rank %d: %s", r, R[r].ch.msg);
            return -1;
        }
    }
    return 0;
}

static void world_close(void)
{
    int r;

    for (r = 0; r < NR; r++)
        rdma_chan_finalize(&R[r].ch);
    memset(&fake_faults, 0, sizeof(fake_faults));
}

/* Queue len bytes from a to b (a pattern that names both and the offset). */
static void post(int a, int b, size_t len)
{
    size_t i, at = R[a].out_len[b];

    for (i = 0; i < len; i++)
        R[a].out[b][at + i] = (char) ((at + i) * 7 + a * 31 + b);
    R[a].out_len[b] += len;
}

/* One step of rank r: its channel, then every link a peek finds something
 * on (as CH3 reads), then every outbox (a put on an IDLE link connects it). */
static int step(int r)
{
    rank_t *x = &R[r];
    int p;

    if (rdma_chan_poll(&x->ch) != RDMA_OK)
        return -1;
    for (p = 0; p < NR; p++) {
        rdma_link_t *l = &x->link[p];
        struct iovec iov;
        const void *view;
        size_t nb;

        if (p == r || x->dead[p])
            continue;
        iov = (struct iovec) { x->in[p] + x->in_len[p], BOX - x->in_len[p] };
        if (rdma_chan_peek(l, &view, &nb) == RB_PEEK_NONE)
            ;                   /* as ch3_progress.c: nothing landed, no read */
        else if (l->xc.state == RDMA_CONN_READY || l->xc.state == RDMA_CONN_CLOSING
            || l->xc.state == RDMA_CONN_FAILED) {
            if (rdma_chan_getv(&x->ch, l, &iov, 1, &nb) != RDMA_OK) {
                x->dead[p] = 1;
                continue;
            }
            x->in_len[p] += nb;
        }
        if (x->out_at[p] == x->out_len[p])
            continue;
        iov = (struct iovec) { x->out[p] + x->out_at[p], x->out_len[p] - x->out_at[p] };
        if (rdma_chan_putv(&x->ch, l, &iov, 1, &nb) != RDMA_OK)
            return -1;
        x->out_at[p] += nb;
    }
    return 0;
}

/* Run every rank (only those in `only`, a bit set) n times. */
static int pump(int n, unsigned only)
{
    int r;

    while (n-- > 0)
        for (r = 0; r < NR; r++)
            if ((only >> r & 1) && step(r))
                return -1;
    return 0;
}

/* Every byte queued so far arrived, in order and intact. */
static int delivered(void)
{
    int a, b;

    for (a = 0; a < NR; a++)
        for (b = 0; b < NR; b++)
            if (R[b].in_len[a] != R[a].out_len[b]
                || memcmp(R[b].in[a], R[a].out[b], R[a].out_len[b]))
                return 0;
    return 1;
}

static rdma_conn_state_t st(int a, int b)
{
    return R[a].link[b].xc.state;
}

static uint64_t counter(int r, int which)
{
    rdma_chan_counters_t c;

    rdma_chan_counters_get(&R[r].ch, &c);
    return which == 0 ? c.conns_opened : which == 1 ? c.conns_evicted : which == 2
        ? c.conns_live : c.conns_peak;
}

static void test_lru(void)
{
    static const int cap[NR] = { 2, 0, 0, 0 };

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(0, 1, 100), post(0, 2, 100);
    pump(2000, 0xf);
    post(0, 1, 50);             /* 1 used after 2: 2 is the least recent */
    pump(2000, 0xf);
    ok(delivered() && st(0, 1) == RDMA_CONN_READY && st(0, 2) == RDMA_CONN_READY
       && counter(0, 1) == 0, "two peers under a cap of 2: both stay");
    post(0, 3, 100);
    pump(3000, 0xf);
    ok(delivered() && st(0, 2) == RDMA_CONN_IDLE && st(2, 0) == RDMA_CONN_IDLE
       && st(0, 1) == RDMA_CONN_READY && st(0, 3) == RDMA_CONN_READY,
       "a third: the least recently used (rank 2) closes at both ends");
    ok(counter(0, 1) == 1 && counter(2, 1) == 1 && counter(0, 0) == 3 && counter(0, 2) == 2
       && counter(0, 3) == 2 && R[0].evicted[2] == 1 && R[2].evicted[0] == 1,
       "counted: opened 3, evicted 1 on each side, 2 live, peak 2");
    post(0, 2, 3000), post(2, 0, 3000);
    pump(4000, 0xf);
    ok(delivered() && st(0, 2) == RDMA_CONN_READY && st(0, 1) == RDMA_CONN_IDLE
       && counter(0, 0) == 4 && counter(0, 3) == 2,
       "rank 2 again: reopened on demand, rank 1 (now least recent) closes, 3000 B each way");
    world_close();
}

/* Rank 0 (cap 1), talking to rank 1, connects to rank 2 and sends BYE to
 * rank 1, which has not polled since; 0 when it got there. */
static int bye_sent(void)
{
    static const int cap[NR] = { 1, 0, 0, 0 };

    if (world_open(cap))
        return -1;
    post(0, 1, 10);
    pump(2000, 0xf);
    post(0, 2, 10);
    pump(3, 1 << 0);            /* rank 0 connects to 2 */
    pump(3, 1 << 2);            /* rank 2 accepts */
    pump(3, 1 << 0);            /* rank 0: ready, above the cap: BYE to 1 */
    return st(0, 1) == RDMA_CONN_CLOSING && st(1, 0) == RDMA_CONN_READY ? 0 : -1;
}

static void test_race(void)
{
    ok(bye_sent() == 0, "rank 0 sent BYE to rank 1, which has not read it yet");
    post(1, 0, 5000);           /* written before rank 1 reads the BYE */
    pump(4000, 0xf);
    ok(delivered() && R[0].in_len[1] == 5000, "a stream racing the BYE arrives whole first");
    ok(R[0].evicted[1] == 1 && R[1].evicted[0] == 1 && st(0, 2) == RDMA_CONN_READY,
       "then both ends closed; rank 1's stream ended before its BYE");
    world_close();
}

/* CH3 reads a link only while its peek finds something (ch3_progress.c),
 * and nothing lands behind a BYE: a BYE read behind data in one call must
 * be taken there (it was not: alltoall1 with 8 ranks at a cap of 2 hung
 * with the evicting side CLOSING for good). */
static void test_bye_behind_data(void)
{
    static const int cap[NR] = { 1, 0, 0, 0 };
    int unread;

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(0, 1, 10);
    pump(2000, 0xf);
    post(0, 1, 100), post(0, 2, 10);
    pump(6, 1 << 0);            /* 100 bytes to rank 1, then BYE: rank 2 waits */
    unread = st(0, 1) == RDMA_CONN_CLOSING && R[1].in_len[0] == 10;
    pump(4000, 0xf);
    ok(unread && delivered() && R[0].evicted[1] == 1 && R[1].evicted[0] == 1
       && st(0, 2) == RDMA_CONN_READY,
       "a BYE read behind data in the same call is answered: the close completes");
    world_close();
}

static void test_both(void)
{
    static const int cap[NR] = { 1, 1, 0, 0 };

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(0, 1, 10), post(1, 0, 10);
    pump(2000, 0xf);
    post(0, 2, 10), post(1, 3, 10);
    pump(4000, 0xf);
    ok(delivered() && R[0].evicted[1] == 1 && R[1].evicted[0] == 1
       && st(0, 1) == RDMA_CONN_IDLE && st(1, 0) == RDMA_CONN_IDLE,
       "both ends evict the same link at once: one close each");
    ok(R[0].ch.nclosing == 0 && R[1].ch.nclosing == 0, "nothing left closing");
    post(1, 0, 2000), post(0, 1, 2000);
    pump(4000, 0xf);
    ok(delivered() && st(0, 1) == RDMA_CONN_READY, "and it reopens with data both ways");
    world_close();
}

static void test_busy(void)
{
    static const int cap[NR] = { 1, 0, 0, 0 };

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(0, 1, 10);
    pump(2000, 0xf);
    post(0, 1, 60000);          /* a stream: rank 0 is not quiet towards 1 */
    post(0, 2, 10);
    pump(2, 1 << 0);
    pump(2, 1 << 2);
    pump(2, 1 << 0);
    ok(st(0, 1) == RDMA_CONN_READY && st(0, 2) == RDMA_CONN_IDLE && R[0].ch.nwait == 1
       && counter(0, 3) == 1, "a link with data queued stays; the connect to rank 2 waits");
    pump(6000, 0xf);
    ok(delivered() && R[0].evicted[1] == 1 && st(0, 2) == RDMA_CONN_READY
       && counter(0, 2) == 1 && counter(0, 3) == 1,
       "once quiet, it closes and rank 2 connects: never above the cap of 1");
    world_close();
}

/* Links of r that are OPEN: READY or CLOSING (a connect to a lower rank
 * holds no slot until that rank admitted it); HELD: CONNECTING too; ENDS:
 * whose transport still holds the connection's memory (c->priv). */
enum { OPEN, HELD, ENDS };

static int links(int r, int kind)
{
    int p, n = 0;

    for (p = 0; p < NR; p++) {
        rdma_conn_state_t s = st(r, p);

        n += p != r && (kind == ENDS ? R[r].link[p].xc.priv != NULL
                        : s >= (kind == HELD ? RDMA_CONN_CONNECTING : RDMA_CONN_READY)
                        && s <= RDMA_CONN_CLOSING);
    }
    return n;
}

/* Rank 3 (cap 1) sends to ranks 0-2 at once: its connects to these lower
 * ranks hold no slot until they answer, but at most the cap of them start
 * at a time (their queue pairs are memory too); the rest wait in turn. */
static void test_low_gate(void)
{
    static const int cap[NR] = { 0, 0, 0, 1 };
    int most = 0, i;

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(3, 0, 3000), post(3, 1, 3000), post(3, 2, 3000);
    for (i = 0; i < 20000 && !delivered(); i++) {
        pump(1, 0xf);
        most = links(3, HELD) > most ? links(3, HELD) : most;
    }
    ok(delivered() && most <= 2 && R[3].ch.low == 0 && R[3].ch.nwait == 0,
       "connects to lower ranks: at most the cap in flight without a slot (%d links held at "
       "most, cap 1)", most);
    world_close();
}

/* As MPI_Finalize: rank 0 (cap 1) talks to ranks 1-3 in turn and CH3's
 * close protocol ends each connection (the owner's close at both ends):
 * under the cap the connection goes then, not at finalize, or a process
 * would end holding one per peer it ever talked to. */
static void test_owner_close(void)
{
    static const int cap[NR] = { 1, 0, 0, 0 };
    int p, most = 0, i;

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    for (p = 1; p < NR; p++) {
        post(0, p, 2000);
        for (i = 0; i < 4000 && !delivered(); i++) {
            pump(1, 0xf);
            most = links(0, ENDS) > most ? links(0, ENDS) : most;
        }
        rdma_chan_close(&R[0].ch, &R[0].link[p]);
        rdma_chan_close(&R[p].ch, &R[p].link[0]);
        pump(10, 0xf);
    }
    ok(delivered() && most <= 1 && links(0, ENDS) == 0 && st(0, 3) == RDMA_CONN_IDLE
       && R[0].ch.slots == 0, "the owner's close under the cap ends the connection: rank 0 "
       "held %d at most, %d after three closes", most, links(0, ENDS));
    world_close();
}

/* Rank 2 connects to rank 0 (cap 1), which talks to rank 1: kept waiting
 * until rank 0 closed its link to 1 (the next look, within 1024 polls,
 * sees slot_want). */
static void test_admit(void)
{
    static const int cap[NR] = { 1, 0, 0, 0 };
    int most = 0, i;

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(0, 1, 10), post(1, 0, 10);
    pump(2000, 0xf);
    post(2, 0, 4000);
    pump(3, 1 << 2);            /* rank 2 connects */
    pump(1100, 1 << 0);         /* at its cap: not admitted; a look comes */
    ok(st(0, 2) == RDMA_CONN_IDLE && st(2, 0) == RDMA_CONN_CONNECTING
       && st(0, 1) == RDMA_CONN_CLOSING,
       "a peer's connect at the cap waits, and the least recently used link closes");
    for (i = 0; i < 4000; i++) {
        pump(1, 0xf);
        most = links(0, OPEN) > most ? links(0, OPEN) : most;
    }
    ok(delivered() && st(0, 2) == RDMA_CONN_READY && st(0, 1) == RDMA_CONN_IDLE && most == 1
       && counter(0, 3) == 1 && R[0].ch.slots == 1,
       "then admitted: 4000 B arrive, rank 0 never held more than one link");
    world_close();
}

/* Rank 1 closed its end of an evicted link and connects again while rank
 * 0 still holds its own; the verbs channel thread admits that connect the
 * moment rank 0's close() let go (accept_at_close).  It must take a slot
 * of its own: it found the old connection's still held and ran without
 * one, so rank 0 opened rank 2 beside it (t-verbs-mpi.t: 3 open at a cap
 * of 2). */
static void test_admit_at_close(void)
{
    static const int cap[NR] = { 1, 0, 0, 0 };
    int most = 0, again, i;

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    fake_faults.accept_at_close = 1;
    post(0, 1, 10), post(1, 0, 10);
    pump(2000, 0xf);
    post(0, 2, 10);             /* rank 0 at its cap: BYE to rank 1 */
    for (i = 0; i < 100 && st(0, 1) != RDMA_CONN_CLOSING; i++)
        pump(1, 1 << 0);
    for (i = 0; i < 100 && st(1, 0) != RDMA_CONN_IDLE; i++)
        pump(1, 1 << 1);        /* rank 1 answers BYE and closes */
    post(1, 0, 500);
    pump(1, 1 << 1);            /* ... and connects again */
    again = st(1, 0) == RDMA_CONN_CONNECTING && st(0, 1) == RDMA_CONN_CLOSING;
    for (i = 0; i < 6000; i++) {
        pump(1, 0xf);
        most = links(0, OPEN) > most ? links(0, OPEN) : most;
    }
    fake_faults.accept_at_close = 0;
    ok(again && delivered() && most == 1 && counter(0, 3) == 1
       && R[0].ch.slots == links(0, HELD), "a connect admitted inside close() takes a slot "
       "of its own: rank 0 held %d at most (cap 1), %d slots for %d links", most,
       R[0].ch.slots, links(0, HELD));
    world_close();
}

/* Every rank sends to every other at once (an all-to-all), cap[r] each:
 * all arrives, no rank ever holds more than its cap, slots match the
 * links; 0 if so. */
static int all_to_all(const int *cap, int rounds)
{
    int a, b, i, most[NR] = { 0 };

    if (world_open(cap))
        return -1;
    for (i = 0; i < rounds; i++)
        for (a = 0; a < NR; a++)
            for (b = 0; b < NR; b++)
                if (a != b)
                    post(a, b, 1500 + 100 * (size_t) (a + b + i));
    for (i = 0; i < 40000 && !delivered(); i++) {
        if (pump(1, 0xf))
            return -1;
        for (a = 0; a < NR; a++) {
            most[a] = links(a, OPEN) > most[a] ? links(a, OPEN) : most[a];
            if (links(a, HELD) > 2 * cap[a]) {
                diag("rank %d: %d links hold memory, cap %d", a, links(a, HELD), cap[a]);
                return -1;
            }
        }
    }
    pump(2000, 0xf);
    for (a = 0; a < NR; a++)
        if (most[a] > cap[a] || counter(a, 3) > (uint64_t) cap[a]
            || R[a].ch.slots != links(a, OPEN) || R[a].ch.nwait || R[a].ch.low) {
            diag("rank %d: %d open at most, peak %d, %d slots for %d links, %d waiting", a,
                 most[a], (int) counter(a, 3), R[a].ch.slots, links(a, OPEN), R[a].ch.nwait);
            return -1;
        }
    return delivered() ? 0 : -1;
}

/* Connects in a ring at once, cap 1 (0 -> 1 -> 2 -> 0): were each to take
 * its own slot first, each would wait for the next one's, held the same
 * way, forever; slots are taken lower rank first. */
static void test_ring(void)
{
    static const int cap[NR] = { 1, 1, 1, 1 };
    int i;

    if (world_open(cap)) {
        ok(0, "open");
        return;
    }
    post(0, 1, 3000), post(1, 2, 3000), post(2, 0, 3000);
    for (i = 0; i < 3; i++)     /* all connect before anyone polls */
        rdma_chan_connect(&R[i].ch, &R[i].link[(i + 1) % 3]);
    for (i = 0; i < 20000 && !delivered(); i++)
        pump(1, 0xf);
    ok(delivered() && counter(0, 3) == 1 && counter(1, 3) == 1 && counter(2, 3) == 1,
       "connects in a ring at cap 1: no cycle of waits, every byte arrives");
    world_close();
}

static void test_all_to_all(void)
{
    static const int cap1[NR] = { 1, 1, 1, 1 }, cap2[NR] = { 2, 2, 2, 2 };
    static const int mixed[NR] = { 1, 2, 3, 1 };
    int r1 = all_to_all(cap1, 3);

    world_close();
    ok(r1 == 0, "all-to-all, cap 1 everywhere: every byte arrives, one link per rank at most");
    r1 = all_to_all(cap2, 3);
    world_close();
    ok(r1 == 0, "cap 2 everywhere: likewise");
    r1 = all_to_all(mixed, 3);
    world_close();
    ok(r1 == 0, "caps 1, 2, 3, 1: likewise");
}

static void test_dead(void)
{
    int sent = bye_sent();

    fake_faults.kill_peer = 1 + 1;      /* rank 1 dies before it answers */
    pump(200, 1 << 0 | 1 << 2);
    ok(sent == 0 && st(0, 1) == RDMA_CONN_FAILED && R[0].told[1] && R[0].dead[1]
       && R[0].ch.nclosing == 0,
       "the peer dies mid-close: the link fails, its reads end in the failure, nothing waits "
       "for its BYE");
    world_close();
}

/* Completion-driven (writes land at the receiver's progress): rank 1's
 * BYE lands in the same progress call of rank 0 that finds its link dead,
 * as a keepalive to rank 1's destroyed end would. */
static void test_lagging(void)
{
    int sent, closed;

    fake_faults.defer_writes = 1;
    sent = bye_sent();
    pump(50, 1 << 1);           /* rank 1 reads the BYE, answers, closes its end */
    closed = st(1, 0) == RDMA_CONN_IDLE;
    fake_faults.kill_peer = 1 + 1;      /* rank 0's writes to that end fail */
    pump(200, 1 << 0 | 1 << 2);
    ok(sent == 0 && closed && st(0, 1) == RDMA_CONN_IDLE && R[0].evicted[1] == 1
       && R[0].told[1] && !R[0].dead[1] && R[0].ch.nclosing == 0,
       "the peer closed in order before we polled, and our link failed: its BYE had landed, "
       "the close completes, no failure");
    world_close();
}

int main(void)
{
    wire_ops = fake_xport2;
    wire_ops.wire = 1;
    plan(24);
    test_lru();
    test_race();
    test_bye_behind_data();
    test_both();
    test_busy();
    test_admit();
    test_admit_at_close();
    test_low_gate();
    test_owner_close();
    test_ring();
    test_all_to_all();
    test_dead();
    test_lagging();
    return done_testing();
}
