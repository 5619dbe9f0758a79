/*
 * t_chan: the channel core (rdma_chan.c) without MPICH, over the
 * in-process fake transport (fake_xport for "shm", fake_xport2 for
 * "verbs"): which transport serves which peer, the business card,
 * connecting on first use, data both ways with writes that land in two
 * parts or late, a dead peer that matters only while in use, one
 * diagnosis per connection, a pipe protocol error named by rank, the
 * frame size two ends agree on, the rendezvous' copies, the blocking-wait
 * decision and finalize.  Up to three ranks live in this process as three
 * rdma_chan_t.
 */
#include "fake_xport.h"
#include "rdma_chan.h"
#include "tap.h"

enum { NR = 3, RING = 1 << 16 };

typedef struct rank {
    rdma_chan_t ch;
    rdma_link_t link[NR];
    char card[256];
    int ready[NR], told[NR];      /* owner.ready, owner.failed calls per peer */
    rdma_status_t answer;       /* what owner.failed returns */
    int rma_calls;              /* owner.rma_done: calls, the last one's */
    void *rma_cookie;
    rdma_status_t rma_st;
} rank_t;

static rank_t R[NR];
static int nranks;
static size_t frame_of[NR];     /* a rank's max_frame (0: t_config's) */

static rdma_link_t *t_link_of(void *arg, int rank)
{
    return rank >= 0 && rank < nranks ? &((rank_t *) arg)->link[rank] : NULL;
}

static rdma_status_t t_card_of(void *arg, int rank, char *buf, size_t len)
{
    (void) arg;
    return snprintf(buf, len, "%s", R[rank].card) >= (int) len ? RDMA_ERR_INVAL : RDMA_OK;
}

static void t_ready(void *arg, rdma_link_t * l)
{
    ((rank_t *) arg)->ready[l->xc.peer]++;
}

static rdma_status_t t_failed(void *arg, rdma_link_t * l)
{
    ((rank_t *) arg)->told[l->xc.peer]++;
    return ((rank_t *) arg)->answer;
}

/* As the CH3 glue's for a rendezvous read: the copy ended. */
static void t_rma_done(void *arg, rdma_link_t * l, void *cookie, rdma_status_t st)
{
    rank_t *me = arg;

    me->rma_calls++;
    me->rma_cookie = cookie;
    me->rma_st = st;
    rdma_chan_rndv_copied(l);
}

static rdma_chan_config_t t_config(rdma_transport_choice_t t)
{
    rdma_chan_config_t cfg;
    int k;

    memset(&cfg, 0, sizeof(cfg));
    cfg.transport = t;
    cfg.poll_spins = -1;
    for (k = 0; k < RDMA_XP_N; k++) {
        /* slots differ per transport, as with RING_CHUNK auto */
        cfg.link[k].ring = (rb_config_t) { .ring_size = RING, .chunk_size = k ? 256 : 64,
            .max_frame = 4096, .credit_threshold = RING / 4, .mode = RB_MODE_PIGGYBACK };
        cfg.link[k].zc = (zc_config_t) { 16384, ZC_MODE_ZCOPY, 0, 0, 0 };
    }
    return cfg;
}

/* The transports world_open gives the ranks. */
static const rdma_xport_ops_t *world_ops[RDMA_XP_N] = { &fake_xport, &fake_xport2 };

/* n ranks on the nodes given; every rank assigned and opened. */
static int world_open(int n, const int *node, rdma_transport_choice_t t)
{
    rdma_chan_config_t cfg = t_config(t);
    rdma_chan_owner_t own = { t_link_of, t_card_of, t_ready, t_failed, NULL, NULL, t_rma_done,
        NULL, NULL, NULL
    };
    int r, q;

    memset(R, 0, sizeof(R));
    nranks = n;
    for (r = 0; r < n; r++) {
        for (q = 0; q < n; q++)
            R[r].link[q].fail_reads = 1;        /* as the CH3 glue's job VCs */
        own.arg = &R[r];
        for (q = 0; q < RDMA_XP_N; q++)
            cfg.link[q].ring.max_frame = frame_of[r] ? frame_of[r] : 4096;
        rdma_chan_init(&R[r].ch, &cfg, world_ops, r, n, "t_chan", &own);
        if (rdma_chan_assign(&R[r].ch, node) != RDMA_OK ||
            rdma_chan_open(&R[r].ch, R[r].card, sizeof(R[r].card)) != RDMA_OK) {
            diag("rank %d: %s", r, R[r].ch.msg);
            return -1;
        }
    }
    return 0;
}

static void world_close(void)
{
    int r;

    for (r = 0; r < nranks; r++)
        rdma_chan_finalize(&R[r].ch);
    nranks = 0;
    memset(frame_of, 0, sizeof(frame_of));
    memset(&fake_faults, 0, sizeof(fake_faults));
}

static int world_poll(void)
{
    int r;

    for (r = 0; r < nranks; r++)
        if (rdma_chan_poll(&R[r].ch) != RDMA_OK)
            return -1;
    return 0;
}

static void test_assign(void)
{
    static const int one_node[NR] = { 0, 0, 0 }, split[NR] = { 0, 0, 1 };
    static rdma_xport_ops_t lazy;
    unsigned long n;
    long us;
    int i;

    ok(world_open(3, split, RDMA_TRANSPORT_AUTO) == 0
       && R[0].link[1].xc.ops == &fake_xport && R[0].link[2].xc.ops == &fake_xport2
       && R[2].link[0].xc.ops == &fake_xport2, "auto: shm on the node, verbs to the other node");
    ok(!strncmp(R[0].card, "shm:fake0.0;ib:fake1.0;host:", 28)
       && !strncmp(R[2].card, "shm:fake0.2;ib:fake1.2;host:", 28),
       "card names the transports opened and the host: %s | %s", R[0].card, R[2].card);
    ok(R[0].ch.xp[RDMA_XP_SHM].xp->prm.chunk_size == 64
       && R[0].ch.xp[RDMA_XP_VERBS].xp->prm.chunk_size == 256,
       "each transport is opened with its own links' slot size (%zu, %zu)",
       R[0].ch.xp[RDMA_XP_SHM].xp->prm.chunk_size, R[0].ch.xp[RDMA_XP_VERBS].xp->prm.chunk_size);
    ok(R[2].ch.xp[RDMA_XP_SHM].xp != NULL && R[2].ch.links[RDMA_XP_SHM] == 0,
       "shm is opened without shm peers in the job (for processes outside it)");
    world_close();
    ok(world_open(3, one_node, RDMA_TRANSPORT_VERBS) == 0
       && R[0].link[1].xc.ops == &fake_xport2 && !strncmp(R[1].card, "ib:fake1.1;host:", 16)
       && R[1].ch.xp[RDMA_XP_SHM].xp == NULL, "TRANSPORT=verbs: verbs on the node too, no shm");
    world_close();
    ok(world_open(3, split, RDMA_TRANSPORT_SHM) == -1
       && strstr(R[0].ch.msg, "MPIR_CVAR_CH3_RDMA_TRANSPORT=shm") != NULL,
       "TRANSPORT=shm across nodes refused: %s", R[0].ch.msg);
    world_close();
    ok(world_open(1, one_node, RDMA_TRANSPORT_AUTO) == 0
       && !strncmp(R[0].card, "shm:fake0.0;ib:fake1.0;host:", 28) && R[0].ch.links[RDMA_XP_VERBS] == 0,
       "a single process opens shm and verbs (for processes it may spawn): card %s", R[0].card);
    for (i = 0; i < 640; i++)
        rdma_chan_poll(&R[0].ch);
    ok(R[0].ch.xp[RDMA_XP_VERBS].xp->progress == 10, "a transport serving no link is polled "
       "every 64th call (%lu of 640)", R[0].ch.xp[RDMA_XP_VERBS].xp->progress);
    rdma_chan_poll(&R[0].ch);
    rdma_chan_wait_arm(&R[0].ch, 5000, 0, &us);
    rdma_chan_poll(&R[0].ch);
    ok(R[0].ch.xp[RDMA_XP_VERBS].xp->progress == 11, "... and by the poll before a sleep");
    world_close();
    lazy = fake_xport;
    lazy.conn_only = 1;
    world_ops[RDMA_XP_SHM] = &lazy;
    ok(world_open(2, one_node, RDMA_TRANSPORT_AUTO) == 0 && R[0].ch.links[RDMA_XP_SHM] == 1,
       "two processes on a node: one shm link each");
    n = R[0].ch.xp[RDMA_XP_SHM].xp->progress;
    for (i = 0; i < 640; i++)
        rdma_chan_poll(&R[0].ch);
    ok(R[0].ch.xp[RDMA_XP_SHM].xp->progress - n == 10, "a conn_only transport serving links "
       "is polled every 64th call (%lu of 640)", R[0].ch.xp[RDMA_XP_SHM].xp->progress - n);
    rdma_chan_wait_arm(&R[0].ch, 5000, 0, &us);
    rdma_chan_poll(&R[0].ch);
    ok(R[0].ch.xp[RDMA_XP_SHM].xp->progress - n == 11, "... and by the poll before a sleep");
    world_close();
    world_ops[RDMA_XP_SHM] = &fake_xport;
    ok(world_open(1, one_node, RDMA_TRANSPORT_SHM) == 0 && !strncmp(R[0].card, "shm:fake0.0;host:", 17)
       && R[0].ch.xp[RDMA_XP_VERBS].xp == NULL, "TRANSPORT=shm: no verbs for them");
    world_close();
    fake_faults.open2_fails = 1;
    ok(world_open(1, one_node, RDMA_TRANSPORT_AUTO) == 0 && !strncmp(R[0].card, "shm:fake0.0;host:", 17)
       && R[0].ch.xp[RDMA_XP_VERBS].xp == NULL, "verbs that cannot open is no error there: card %s",
       R[0].card);
    world_close();
}

/* How many of `calls` polls of rank r's channel reached transport k. */
static unsigned long polls_reaching(int r, int k, int calls)
{
    unsigned long n = R[r].ch.xp[k].xp->progress;

    while (calls-- > 0)
        rdma_chan_poll(&R[r].ch);
    return R[r].ch.xp[k].xp->progress - n;
}

/* Links to processes outside the job: ids from the job size up, shm on
 * this host, verbs to others, freed slots reused. */
static void test_dyn(void)
{
    static const int one_node[NR] = { 0, 0, 0 };
    rdma_link_t a, b, c, d;
    char card[300];
    rdma_chan_t *ch = &R[0].ch;

    memset(&a, 0, sizeof(a)), memset(&b, 0, sizeof(b)), memset(&c, 0, sizeof(c));
    memset(&d, 0, sizeof(d));
    world_open(2, one_node, RDMA_TRANSPORT_AUTO);
    snprintf(card, sizeof(card), "shm:fake0.9;%s", ch->host);
    ok(rdma_chan_dyn_add(ch, &a, card, "me") == RDMA_OK && a.xc.peer == 2
       && a.xc.ops == &fake_xport && !strcmp(a.xc.hello, "me")
       && rdma_chan_dyn_add(ch, &b, card, "me") == RDMA_OK && b.xc.peer == 3,
       "processes outside the job on this host: shm, ids 2 and 3 (job of 2)");
    ok(rdma_chan_dyn_add(ch, &c, "shm:fake0.9;ib:fake1.9;host:elsewhere", "me") == RDMA_OK
       && c.xc.ops == &fake_xport2 && c.xc.peer == 4, "one on another host: verbs");
    ok(polls_reaching(0, RDMA_XP_VERBS, 640) == 640 && polls_reaching(0, RDMA_XP_SHM, 640) == 640,
       "transports carrying data are polled on every call, verbs once it serves a link");
    ok(rdma_chan_dyn_add(ch, &d, "shm:fake0.9;host:elsewhere", "me") == RDMA_ERR_INVAL
       && strstr(ch->msg, "on elsewhere") && strstr(ch->msg, "no verbs address"),
       "one on another host without a verbs address is refused: %s", ch->msg);
    rdma_chan_dyn_del(ch, &a);
    rdma_chan_dyn_del(ch, &c);
    ok(polls_reaching(0, RDMA_XP_VERBS, 640) == 10, "verbs, its link gone, every 64th call again");
    ok(rdma_chan_dyn_add(ch, &c, card, "me") == RDMA_OK && c.xc.peer == 2 && a.xc.hello == NULL,
       "a freed id is given again");
    world_close();
    fake_faults.open2_fails = 1;
    world_open(1, one_node, RDMA_TRANSPORT_AUTO);
    ok(rdma_chan_dyn_add(&R[0].ch, &d, "ib:fake1.9;host:elsewhere", "me") == RDMA_ERR_INVAL
       && strstr(R[0].ch.msg, "fake2: no device"), "verbs that could not open: the connection "
       "says why: %s", R[0].ch.msg);
    world_close();
}

static void test_card_token(void)
{
    char b[32];

    ok(rdma_chan_card_token("shm:a.1;ib:b.2", "ib", b, sizeof(b)) == 0 && !strcmp(b, "b.2"),
       "card token found after ';'");
    ok(rdma_chan_card_token("shmx:a;xib:c", "ib", b, sizeof(b)) == -1,
       "a key inside another key is not a match");
    ok(rdma_chan_card_token("ib:0123456789", "ib", b, 4) == -1, "a token too long is refused");
}

/* Put msg from a to b on first use, then read it at b, polling all. */
static int send_recv(int a, int b, const char *msg, char *got, size_t len)
{
    struct iovec in = { got, len }, out = { (void *) msg, len };
    size_t sent = 0, rcvd = 0, nb;
    int i;

    for (i = 0; i < 100000 && rcvd < len; i++) {
        if (sent < len) {
            if (rdma_chan_putv(&R[a].ch, &R[a].link[b], &out, 1, &nb) != RDMA_OK)
                return -1;
            sent += nb;
            out.iov_base = (char *) out.iov_base + nb;
            out.iov_len -= nb;
        }
        if (world_poll())
            return -1;
        if (R[b].link[a].xc.state != RDMA_CONN_READY)
            continue;
        if (rdma_chan_getv(&R[b].ch, &R[b].link[a], &in, 1, &nb) != RDMA_OK)
            return -1;
        rcvd += nb;
        in.iov_base = (char *) in.iov_base + nb;
        in.iov_len -= nb;
    }
    return rcvd == len ? 0 : -1;
}

/* Finish a's rendezvous to b, whose data b has read: b's reads send the
 * FIN, a's reads take it in, and a's put of the same buffer then takes
 * the entry whole. */
static int put_finish(int a, int b, const void *buf, size_t len)
{
    struct iovec out = { (void *) buf, len };
    char none;
    struct iovec in = { &none, 1 };
    size_t nb = 0, got;
    int i;

    for (i = 0; i < 100000 && nb < len; i++)
        if (world_poll() || rdma_chan_getv(&R[b].ch, &R[b].link[a], &in, 1, &got) != RDMA_OK
            || rdma_chan_getv(&R[a].ch, &R[a].link[b], &in, 1, &got) != RDMA_OK
            || rdma_chan_putv(&R[a].ch, &R[a].link[b], &out, 1, &nb) != RDMA_OK)
            return -1;
    return nb == len ? 0 : -1;
}

static void test_data(void)
{
    static const int node[NR] = { 0, 0, 1 };
    static char big[200000], got[200000];
    char m[64];
    size_t i, nb;
    struct iovec iov = { m, 8 };
    rdma_chan_counters_t c0, c2;
    int fin;

    for (i = 0; i < sizeof(big); i++)
        big[i] = (char) (i * 131 + (i >> 9));
    if (world_open(3, node, RDMA_TRANSPORT_AUTO)) {
        ok(0, "open");
        return;
    }
    ok(rdma_chan_putv(&R[0].ch, &R[0].link[1], &iov, 1, &nb) == RDMA_OK && nb == 0
       && R[0].link[1].xc.state == RDMA_CONN_CONNECTING, "first put connects, moves nothing yet");
    ok(send_recv(0, 1, "hello over fake shm", m, 20) == 0 && !strcmp(m, "hello over fake shm")
       && R[0].ready[1] == 1 && R[1].ready[0] == 1, "connect on first use; ready once per side");
    ok(send_recv(2, 0, big, got, sizeof(big)) == 0 && !memcmp(big, got, sizeof(big)),
       "200000 bytes over the other transport (rendezvous)");
    fake_faults.split_writes = 1;
    ok(send_recv(1, 0, big, got, 50000) == 0 && !memcmp(big, got, 50000),
       "writes landing in two parts: flag polling waits for the rest");
    fake_faults.split_writes = 0;
    rdma_chan_counters_get(&R[0].ch, &c0);
    fin = put_finish(2, 0, big, sizeof(big));
    rdma_chan_counters_get(&R[2].ch, &c2);
    ok(fin == 0 && c2.zcopy_parts == 1 && c2.ring_frames >= 1 && c2.ring_writes >= 1
       && c0.ring_frames == R[0].link[1].pipe.stats.frames_tx + R[0].link[2].pipe.stats.frames_tx
       && c0.copy_fallbacks == 0 && c2.xp.pinned_bytes_max == 0,
       "counters sum the links: rank 2 sent %llu zero-copy part in %llu frames",
       (unsigned long long) c2.zcopy_parts, (unsigned long long) c2.ring_frames);
    world_close();
}

/* The core's part of the rendezvous (rdma_rndv.c): which links take it,
 * a copy done at once (CMA) or reported later (RDMA read: the link busy
 * meanwhile), refused, or ended by the peer's death. */
static void test_rndv(void)
{
    static const int node[NR] = { 0, 0, 0 };
    static char src[65536], dst[65536];
    rdma_link_t *l;
    uint64_t key = 0;
    void *h = NULL;
    int done = -1, cookie, busy, i, copyok, ans[3];
    char m[4];
    rdma_status_t st;

    for (i = 0; i < (int) sizeof(src); i++)
        src[i] = (char) (i * 7 + (i >> 8));
    if (world_open(2, node, RDMA_TRANSPORT_AUTO) || send_recv(0, 1, "abc", m, 4)) {
        ok(0, "open");
        world_close();
        return;
    }
    l = &R[1].link[0];
    ok(rdma_chan_rndv_ok(l, 16384) && !rdma_chan_rndv_ok(l, 16383)
       && !rdma_chan_rndv_ok(&R[1].link[1], 1 << 20),
       "a ready link takes the rendezvous from zc's threshold, a link not connected does not");
    l->zc.cfg.answered_min = 8192;
    ans[0] = rdma_chan_rndv_ok(l, 8192) && !rdma_chan_rndv_ok(l, 8191);
    ans[1] = !send_recv(1, 0, "abc", m, 4) && !rdma_chan_rndv_ok(l, 8192)
        && rdma_chan_rndv_ok(l, 16384);
    ans[2] = !send_recv(0, 1, "abc", m, 4) && rdma_chan_rndv_ok(l, 8192);
    l->zc.cfg.answered_min = 0;
    ok(ans[0] && ans[1] && ans[2] && !rdma_chan_rndv_ok(l, 8192),
       "from answered_min where the peer answered our last frame (%d), not after a frame of "
       "ours went unanswered (%d), again once answered (%d); never with answered_min 0",
       ans[0], ans[1], ans[2]);
    l->zc.cfg.mode = ZC_MODE_COPY;
    copyok = rdma_chan_rndv_ok(l, 1 << 20);
    l->zc.cfg.mode = ZC_MODE_ZCOPY;
    l->zc.refused = 1;
    ok(!copyok && !rdma_chan_rndv_ok(l, 1 << 20), "not on the copy path, not once refused");
    l->zc.refused = 0;
    ok(rdma_chan_rndv_expose(&R[0].link[1], src, sizeof(src), &key, &h) == RDMA_OK
       && rdma_chan_rndv_split(l, sizeof(src)) == sizeof(src),
       "the sender exposes its buffer; no split copy without the transport's push");
    rdma_chan_rndv_unexpose(&R[0].link[1], h);
    st = rdma_chan_rndv_copy(l, 1, dst, sizeof(dst), (uintptr_t) src, key, &cookie, &done);
    ok(st == RDMA_OK && done == 1 && !memcmp(src, dst, sizeof(src)) && !rdma_link_busy(l)
       && R[1].rma_calls == 0, "a synchronous copy (CMA) is done on return");
    fake_faults.refuse_pulls = 1;
    st = rdma_chan_rndv_copy(l, 1, dst, sizeof(dst), (uintptr_t) src, key, &cookie, &done);
    fake_faults.refuse_pulls = 0;
    ok(st == RDMA_ERR_REFUSED && !rdma_link_busy(l), "a refused copy: RDMA_ERR_REFUSED, not busy");
    fake_faults.defer_rma = 1;
    memset(dst, 0, sizeof(dst));
    st = rdma_chan_rndv_copy(l, 1, dst, sizeof(dst), (uintptr_t) src, key, &cookie, &done);
    busy = rdma_link_busy(l);
    world_poll();
    ok(st == RDMA_OK && done == 0 && busy && R[1].rma_calls == 1 && R[1].rma_cookie == &cookie
       && R[1].rma_st == RDMA_OK && !rdma_link_busy(l) && !memcmp(src, dst, sizeof(src)),
       "an asynchronous copy (RDMA read): the link is busy until rma_done reports it");
    st = rdma_chan_rndv_copy(l, 1, dst, sizeof(dst), (uintptr_t) src, key, &cookie, &done);
    fake_faults.kill_peer = 1;
    rdma_chan_poll(&R[1].ch);
    ok(st == RDMA_OK && R[1].rma_calls == 2 && R[1].rma_st == RDMA_ERR_PEER
       && l->rndv_copies == 0 && l->xc.state == RDMA_CONN_FAILED,
       "the peer dies with a copy in flight: rma_done says RDMA_ERR_PEER, nothing left busy");
    world_close();
}

static void test_failures(void)
{
    static const int node[NR] = { 0, 0, 0 };
    char m[8];
    rdma_status_t st;

    if (world_open(3, node, RDMA_TRANSPORT_AUTO) || send_recv(0, 1, "a", m, 2)
        || send_recv(0, 2, "b", m, 2)) {
        ok(0, "set up");
        return;
    }
    fake_faults.kill_peer = 2;  /* rank 1 */
    ok(rdma_chan_poll(&R[0].ch) == RDMA_OK && R[0].link[1].xc.state == RDMA_CONN_FAILED
       && R[0].told[1] == 1 && R[0].told[2] == 0,
       "a dead peer is told to the owner, not returned from the poll");
    fake_faults.kill_peer = 3;  /* rank 2 */
    ok(rdma_chan_poll(&R[0].ch) == RDMA_OK && R[0].told[2] == 1 && R[0].told[1] == 2,
       "the next one too, and the first again (the owner's part is idempotent)");
    ok(strstr(R[0].link[1].xc.why, "rank 1") && strstr(R[0].link[2].xc.why, "rank 2"),
       "each connection keeps its own diagnosis");
    st = rdma_chan_connect(&R[0].ch, &R[0].link[1]);
    ok(st == RDMA_ERR_PEER && strstr(R[0].ch.msg, "rank 1") != NULL,
       "reusing a failed connection says why it failed: %s", R[0].ch.msg);
    fake_faults.kill_peer = 0;
    world_close();
}

/* Rank 1 puts a message into rank 0's pipe and dies before rank 0 reads
 * it: rank 0 still reads it whole, then the failure (no byte lost). */
static void test_failed_drain(void)
{
    static const int node[NR] = { 0, 0, 0 };
    char m[8], got[8] = "";
    struct iovec in = { got, sizeof(got) }, out = { "last", 5 };
    size_t nb = 0, rd = 0;
    rdma_status_t st;

    if (world_open(2, node, RDMA_TRANSPORT_AUTO) || send_recv(1, 0, "a", m, 2)
        || rdma_chan_putv(&R[1].ch, &R[1].link[0], &out, 1, &nb) != RDMA_OK || nb != 5) {
        ok(0, "set up");
        return;
    }
    fake_faults.kill_peer = 2;  /* rank 1 */
    ok(rdma_chan_poll(&R[0].ch) == RDMA_OK && R[0].link[1].xc.state == RDMA_CONN_FAILED,
       "rank 1 dies with a message in rank 0's pipe");
    st = rdma_chan_getv(&R[0].ch, &R[0].link[1], &in, 1, &rd);
    ok(st == RDMA_OK && rd == 5 && !strcmp(got, "last"), "the failed link still gives it (%zu B)",
       rd);
    st = rdma_chan_getv(&R[0].ch, &R[0].link[1], &in, 1, &rd);
    ok(st == RDMA_ERR_PEER && rd == 0 && strstr(R[0].ch.msg, "rank 1 died"),
       "then the failure, naming the peer: %s", R[0].ch.msg);
    fake_faults.kill_peer = 0;
    world_close();
}

/* CH3's close handshake with rank 1 is done and rank 1 exits while rank
 * 0 still waits for rank 2: the closed connection's death is no failure;
 * rank 2's still is. */
static void test_closing_window(void)
{
    static const int node[NR] = { 0, 0, 0 };
    char m[8];

    if (world_open(3, node, RDMA_TRANSPORT_AUTO) || send_recv(0, 1, "a", m, 2)
        || send_recv(0, 2, "b", m, 2)) {
        ok(0, "set up");
        return;
    }
    rdma_link_quiesce(&R[0].link[1]);
    ok(R[0].link[1].xc.state == RDMA_CONN_CLOSED && R[0].link[2].xc.state == RDMA_CONN_READY,
       "quiesce closes that connection only");
    fake_faults.kill_peer = 2;  /* rank 1 */
    ok(rdma_chan_poll(&R[0].ch) == RDMA_OK && R[0].link[1].xc.state == RDMA_CONN_CLOSED
       && R[0].told[1] == 0, "a peer that exits after the close handshake is no failure");
    fake_faults.kill_peer = 3;  /* rank 2 */
    R[0].answer = RDMA_ERR_SYS;
    ok(rdma_chan_poll(&R[0].ch) == RDMA_ERR_SYS && R[0].told[2] == 1 && R[0].told[1] == 0,
       "a peer still connected that dies is one, told to the owner; its answer is the poll's");
    fake_faults.kill_peer = 0;
    world_close();
}

static void test_proto_error(void)
{
    static const int node[NR] = { 0, 0, 0 };
    char m[8];
    size_t nb;
    struct iovec iov = { m, sizeof(m) };
    rdma_status_t st;
    uint64_t *flag;

    if (world_open(2, node, RDMA_TRANSPORT_AUTO) || send_recv(0, 1, "x", m, 2)) {
        ok(0, "set up");
        return;
    }
    /* the next frame's flag at rank 1: the expected seq, an invalid kind */
    flag = (uint64_t *) (void *) ((char *) R[1].link[0].pipe.rx.ring +
                                  (R[1].link[0].pipe.rx.tail & (RING - 1)));
    *flag = (uint64_t) R[1].link[0].pipe.rx.seq << 32 | 3;
    st = rdma_chan_getv(&R[1].ch, &R[1].link[0], &iov, 1, &nb);
    ok(st == RDMA_ERR_PROTO && strstr(R[1].ch.msg, "pipe to rank 0") != NULL,
       "a corrupt frame is a protocol error naming the peer: %s", R[1].ch.msg);
    world_close();
}

/* Ranks whose settings allow other frame sizes (two jobs that connect):
 * both ends of a connection send frames of the smaller, which the other
 * accepts (before wire version 9 the larger end's frames were a protocol
 * error at the other). */
static void test_frames(void)
{
    static const int node[NR] = { 0, 0, 1 };
    static char msg[15000], got[15000];
    size_t i;
    int r, ok_all = 1;

    for (i = 0; i < sizeof(msg); i++)
        msg[i] = (char) (i * 7 + (i >> 8));
    frame_of[0] = 4096;
    frame_of[1] = frame_of[2] = 16384;
    if (world_open(3, node, RDMA_TRANSPORT_AUTO)) {
        ok(0, "open");
        return;
    }
    for (r = 1; r < 3; r++) {
        ok_all = send_recv(r, 0, msg, got, sizeof(msg)) == 0 && !memcmp(msg, got, sizeof(msg))
            && send_recv(0, r, msg, got, sizeof(msg)) == 0 && !memcmp(msg, got, sizeof(msg));
        ok(ok_all && R[r].link[0].pipe.tx.cfg.max_frame == 4096
           && R[0].link[r].pipe.rx.cfg.max_frame == 4096,
           "%s: 16 KiB frames meet 4 KiB ones: both send 4 KiB, 15000 bytes both ways",
           r == 1 ? "shm" : "verbs");
    }
    ok(send_recv(1, 2, msg, got, sizeof(msg)) == 0
       && R[1].link[2].pipe.tx.cfg.max_frame == 16384, "16 KiB meets 16 KiB: unchanged");
    world_close();
}

static void test_wait(void)
{
    static const int same[NR] = { 0, 0, 0 }, split[NR] = { 0, 0, 1 }, apart[NR] = { 0, 1, 2 };
    long us;
    int k;

    world_open(2, same, RDMA_TRANSPORT_AUTO);
    k = rdma_chan_wait_arm(&R[0].ch, 0, 0, &us);
    ok(k == RDMA_XP_SHM && us == 20000, "shm only: shm's waiter, 20 ms (%d, %ld)", k, us);
    rdma_chan_wait(&R[0].ch, k, us, 0);
    ok(R[0].ch.xp[RDMA_XP_SHM].xp->waits[2] == 1, "something moved: disarmed, no sleep");
    k = rdma_chan_wait_arm(&R[0].ch, 0, 1, &us);
    ok(k == RDMA_XP_SHM && us == 1000, "threaded: the sleep is bounded (1 ms)");
    rdma_chan_wait(&R[0].ch, k, us, 1);
    ok(R[0].ch.xp[RDMA_XP_SHM].xp->waits[1] == 1, "nothing moved: sleeps in the waiter");
    world_close();
    world_open(3, split, RDMA_TRANSPORT_AUTO);
    k = rdma_chan_wait_arm(&R[0].ch, 5000, 0, &us);
    ok(k == RDMA_XP_SHM && us == 500, "shm and verbs: shm's waiter, short sleeps (%ld us)", us);
    world_close();
    world_open(3, apart, RDMA_TRANSPORT_AUTO);
    k = rdma_chan_wait_arm(&R[0].ch, 10, 0, &us);
    ok(k == -1 && us == 50, "verbs only, just idle: 50 us naps (%d, %ld)", k, us);
    k = rdma_chan_wait_arm(&R[0].ch, 3000, 0, &us);
    ok(k == RDMA_XP_VERBS && us == 20000, "verbs only, idle long: the CQ event (%d)", k);
    world_close();
    ok(rdma_chan_spins(&R[0].ch.cfg, 3, 2) == 0 && rdma_chan_spins(&R[0].ch.cfg, 2, 2) == 200000
       && rdma_chan_spins(&R[0].ch.cfg, 1, 2) == 2000,
       "no spinning when oversubscribed; long with node peers, short alone");
}

/* Node peers' CPU sets: text round trip, union, refusals. */
static void test_cpus(void)
{
    rdma_chan_cpus_t a = { {0} }, b = { {0} };
    char t[RDMA_CHAN_CPUS_MAX / 4 + 1], small[1];

    a.w[0] = 1ull << 0 | 1ull << 5;
    a.w[15] = 1ull << 63;       /* CPU 1023 */
    ok(rdma_chan_cpus_format(&a, t, sizeof(t)) == 0 && strlen(t) == 256
       && !strncmp(t, "12", 2) && t[255] == '8', "a set as text: CPU 0 and 5 lead, CPU 1023 ends");
    ok(rdma_chan_cpus_merge(&b, t) == 0 && !memcmp(&a, &b, sizeof(a))
       && rdma_chan_cpus_count(&b) == 3, "text back to the same set (3 CPUs)");
    memset(&b, 0, sizeof(b));
    ok(rdma_chan_cpus_format(&b, t, sizeof(t)) == 0 && t[0] == '\0', "the empty set is empty text");
    a = b;
    a.w[0] = 1;                 /* rank bound to CPU 0 */
    b.w[0] = 2;                 /* rank bound to CPU 1 */
    rdma_chan_cpus_format(&b, t, sizeof(t));
    ok(rdma_chan_cpus_merge(&a, t) == 0 && rdma_chan_cpus_count(&a) == 2
       && rdma_chan_spins(&R[0].ch.cfg, 2, rdma_chan_cpus_count(&a)) == 200000,
       "two ranks bound to cores of their own: a union of 2 CPUs, not oversubscribed");
    ok(rdma_chan_cpus_merge(&a, "1x") == -1 && rdma_chan_cpus_count(&a) == 2
       && rdma_chan_cpus_format(&a, small, sizeof(small)) == -1,
       "bad text and a buffer without room for the text and its NUL are refused, the set unchanged");
}

/* Node segments need the shm transport's seg ops: the fakes have none. */
static void test_seg(void)
{
    static const int one_node[NR] = { 0, 0, 0 };
    rdma_seg_t seg = {.map = &seg,.fd = 7 };

    ok(world_open(2, one_node, RDMA_TRANSPORT_AUTO) == 0 && !rdma_chan_seg_usable(&R[0].ch)
       && rdma_chan_seg_make(&R[0].ch, 4096, &seg) == RDMA_ERR_NOSYS && !seg.map && seg.fd == -1
       && strstr(R[0].ch.msg, "no node segments: the shm transport has none"),
       "a shm transport without node segments: none made, and why: %s", R[0].ch.msg);
    world_close();
    ok(world_open(2, one_node, RDMA_TRANSPORT_VERBS) == 0 && !rdma_chan_seg_usable(&R[0].ch)
       && rdma_chan_seg_map(&R[0].ch, &seg) == RDMA_ERR_NOSYS
       && strstr(R[0].ch.msg, "TRANSPORT=verbs"), "TRANSPORT=verbs: no node segments: %s",
       R[0].ch.msg);
    world_close();
}

int main(void)
{
    test_assign();
    test_seg();
    test_card_token();
    test_dyn();
    test_data();
    test_rndv();
    test_failures();
    test_failed_drain();
    test_closing_window();
    test_proto_error();
    test_frames();
    test_wait();
    test_cpus();
    return done_testing();
}
