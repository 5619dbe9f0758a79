/*
 * t_link: rdma_link (the pipe and the rendezvous bound to a transport
 * connection through the transport contract's events) over the in-process
 * fake transport, with its faults: writes that land late (completion-
 * driven), pulls that are short and complete late, pulls refused, a
 * failing write.  Two ranks in this process stream messages both ways at
 * once, small ones through the ring and large ones by rendezvous, and
 * every byte is checked.  LARGE_PROTOCOL=auto on a transport whose
 * zero-copy path is slow (rdma_link_config_fit) sends them through the ring.
 */
#include "fake_xport.h"
#include "rdma_link.h"
#include "tap.h"

enum { NMSG = 40, BIG = 1 << 20, RING = 1 << 16 };

typedef struct node {
    rdma_xport_t *xp;
    rdma_link_t link[2];
    rdma_link_config_t cfg;
    int bound, ready;
} node_t;

static node_t N[2];
static zc_mode_t t_mode = ZC_MODE_ZCOPY;        /* the nodes' LARGE_PROTOCOL */

static rdma_conn_t *t_conn_of(void *arg, int rank)
{
    return rank >= 0 && rank < 2 ? &((node_t *) arg)->link[rank].xc : NULL;
}

static rdma_status_t t_card_of(void *arg, int rank, char *buf, size_t len)
{
    (void) arg;
    return snprintf(buf, len, "fake.%d", rank) >= (int) len ? RDMA_ERR_INVAL : RDMA_OK;
}

static int t_bind(void *arg, rdma_conn_t * c, const rdma_conn_mem_t * mem)
{
    ((node_t *) arg)->bound++;
    return rdma_link_bind(c, &((node_t *) arg)->cfg, mem);
}

static void t_ready(void *arg, rdma_conn_t * c)
{
    (void) c;
    ((node_t *) arg)->ready++;
}

static int node_open(int rank)
{
    node_t *nd = &N[rank];
    rdma_xport_params_t prm = { 0 };
    char card[32], err[128];

    memset(nd, 0, sizeof(*nd));
    nd->cfg.ring = (rb_config_t) { .ring_size = RING, .chunk_size = 256, .max_frame = 4096,
        .credit_threshold = RING / 4, .mode = RB_MODE_PIGGYBACK };
    nd->cfg.zc = (zc_config_t) { 16384, t_mode, 0, 0, 0 };
    nd->link[0].xc.peer = 0;
    nd->link[1].xc.peer = 1;
    nd->link[0].xc.ops = nd->link[1].xc.ops = &fake_xport;
    prm.rank = rank;
    prm.size = 2;
    prm.job = "t_link";
    prm.ring_size = RING;
    prm.chunk_size = 256;
    prm.ev = (rdma_xport_events_t) { t_conn_of, t_card_of, t_bind, t_ready, rdma_link_landed,
        rdma_link_pulled, rdma_link_sent, NULL, NULL, NULL, nd };
    if (fake_xport.open(&prm, &nd->xp, card, sizeof(card), err, sizeof(err)) != RDMA_OK)
        return -1;
    rdma_link_config_fit(&nd->cfg, &fake_xport, nd->xp, err, sizeof(err));
    return 0;
}

static void nodes_close(void)
{
    int r;

    for (r = 0; r < 2; r++) {
        fake_xport.close(N[r].xp, &N[r].link[!r].xc);
        fake_xport.finalize(N[r].xp);
    }
}

/* Connect 0 -> 1 (both, if both_connect); 1 when both ends are READY. */
static int nodes_connect(int both_connect)
{
    int i;

    if (node_open(0) || node_open(1) || fake_xport.connect(N[0].xp, &N[0].link[1].xc)
        || (both_connect && fake_xport.connect(N[1].xp, &N[1].link[0].xc)))
        return 0;
    for (i = 0; i < 4; i++) {
        fake_xport.progress(N[1].xp);
        fake_xport.progress(N[0].xp);
    }
    return N[0].link[1].xc.state == RDMA_CONN_READY && N[1].link[0].xc.state == RDMA_CONN_READY
        && N[0].ready == 1 && N[1].ready == 1 && N[0].bound == 1 && N[1].bound == 1;
}

static uint8_t pat(int from, size_t msg, size_t i)
{
    return (uint8_t) ((i * 131 + msg * 7 + (size_t) from * 101) >> 1);
}

static size_t msg_len(size_t m)
{
    return m % 3 == 2 ? BIG + m * 17 : 1 + m * 211;     /* every third one large */
}

/* One direction's stream: message m in two iov entries (a small header,
 * then the body), offered until the sender's side accepted all of it
 * (large bodies: once the receiver's FIN came back); the receiver reads
 * message m in its own time into one buffer. */
typedef struct stream {
    int from;
    size_t tm, sent;            /* sender: message, bytes accepted */
    size_t rm, got;             /* receiver: message, bytes read */
    uint8_t *tx, *rx;
    size_t bad;
} stream_t;

static void stream_fill(stream_t * s)
{
    size_t i, len = msg_len(s->tm);

    for (i = 0; i < len; i++)
        s->tx[i] = pat(s->from, s->tm, i);
}

static int stream_send(stream_t * s, rdma_link_t * out)
{
    size_t len = msg_len(s->tm), hdr = len < 8 ? len : 8, nb;
    struct iovec v[2] = { {s->tx + s->sent, hdr - s->sent}, {s->tx + hdr, len - hdr} };
    int rc;

    if (s->tm == NMSG)
        return RDMA_OK;
    if (s->sent >= hdr)
        v[1] = (struct iovec) { s->tx + s->sent, len - s->sent };
    rc = rdma_link_putv(out, s->sent < hdr ? v : &v[1], s->sent < hdr ? 2 : 1, &nb);
    s->sent += nb;
    if (rc == RDMA_OK && s->sent == len) {
        s->sent = 0;
        if (++s->tm < NMSG)
            stream_fill(s);
    }
    return rc;
}

static int stream_recv(stream_t * s, rdma_link_t * in)
{
    size_t len = msg_len(s->rm), nb, i;
    struct iovec r = { s->rx + s->got, len - s->got };
    int rc;

    if (s->rm == NMSG)
        return RDMA_OK;
    rc = rdma_link_getv(in, &r, 1, &nb);
    s->got += nb;
    if (rc == RDMA_OK && s->got == len) {
        for (i = 0; i < len; i++)
            s->bad += s->rx[i] != pat(s->from, s->rm, i);
        s->rm++;
        s->got = 0;
    }
    return rc;
}

/* Both directions at once until NMSG messages each; the first error. */
static int streams_run(size_t *bad, unsigned long *steps)
{
    stream_t s[2] = { {0}, {0} };
    int k, rc = RDMA_OK;

    for (k = 0; k < 2; k++) {
        s[k].from = k;
        s[k].tx = malloc(BIG + NMSG * 17);
        s[k].rx = malloc(BIG + NMSG * 17);
        stream_fill(&s[k]);
    }
    for (*steps = 0; rc == RDMA_OK && s[0].rm + s[1].rm + s[0].tm + s[1].tm < 4 * NMSG
         && *steps < 1000000; ++*steps) {
        fake_xport.progress(N[0].xp);
        fake_xport.progress(N[1].xp);
        for (k = 0; k < 2 && rc == RDMA_OK; k++) {
            rc = stream_send(&s[k], &N[k].link[!k]);
            if (rc == RDMA_OK)
                rc = stream_recv(&s[k], &N[!k].link[k]);
        }
    }
    *bad = s[0].bad + s[1].bad + 4 * NMSG - (s[0].rm + s[1].rm + s[0].tm + s[1].tm);
    for (k = 0; k < 2; k++) {
        free(s[k].tx);
        free(s[k].rx);
    }
    return rc;
}

/* One scenario under the current faults: connect, stream, check. */
static void scenario(const char *what, int both_connect)
{
    size_t bad = 0;
    unsigned long steps = 0;
    int rc = -1, conn = nodes_connect(both_connect);

    if (conn)
        rc = streams_run(&bad, &steps);
    ok(conn && rc == RDMA_OK && bad == 0, "%s: %d messages each way, every byte checked "
       "(%lu steps, rc %d, %zu bad)", what, NMSG, steps, rc, bad);
    if (conn && t_mode == ZC_MODE_AUTO && fake_faults.zcopy_slow)
        ok(N[0].link[1].zc.stats.zc_msgs == 0 && N[0].link[1].zc.stats.copy_msgs > 0
           && N[0].link[1].zc.cfg.mode == ZC_MODE_COPY, "%s: large parts went through the ring "
           "(%llu)", what, (unsigned long long) N[0].link[1].zc.stats.copy_msgs);
    else if (conn && !fake_faults.refuse_pulls)
        ok(N[0].link[1].zc.stats.zc_msgs > 0 && N[1].link[0].zc.stats.pulled_msgs > 0,
           "%s: large parts went by rendezvous (%llu)", what,
           (unsigned long long) N[0].link[1].zc.stats.zc_msgs);
    else if (conn)
        ok(N[0].link[1].zc.stats.refused_rx > 0 && N[0].link[1].zc.stats.zc_msgs == 0,
           "%s: refused pulls fell back to the ring", what);
    nodes_close();
    memset(&fake_faults, 0, sizeof(fake_faults));
}

static void test_write_fails(void)
{
    size_t bad;
    unsigned long steps;
    int rc;

    fake_faults.fail_writes_after = 5;
    rc = nodes_connect(0) ? streams_run(&bad, &steps) : -1;
    ok(rc == RDMA_ERR_XPORT && strstr(fake_xport.error(N[0].xp), "failed") != NULL,
       "a failing transport write surfaces as RDMA_ERR_XPORT with the transport's diagnosis "
       "(rc %d: %s)", rc, fake_xport.error(N[0].xp));
    nodes_close();
    memset(&fake_faults, 0, sizeof(fake_faults));
}

/* rdma_link_config_fit: only auto follows the probe; forced modes stay. */
static void test_config_fit(void)
{
    static const zc_mode_t modes[] = { ZC_MODE_AUTO, ZC_MODE_AUTO, ZC_MODE_ZCOPY, ZC_MODE_COPY };
    static const zc_mode_t want[] = { ZC_MODE_COPY, ZC_MODE_AUTO, ZC_MODE_ZCOPY, ZC_MODE_COPY };
    rdma_xport_ops_t no_probe = fake_xport;
    rdma_link_config_t cfg;
    char why[64] = "";
    int i, good = 1, asked;

    for (i = 0; i < 4; i++) {
        cfg.zc.mode = modes[i];
        fake_faults.zcopy_slow = i != 1;
        asked = rdma_link_config_fit(&cfg, &fake_xport, NULL, why, sizeof(why));
        good &= cfg.zc.mode == want[i] && asked == (modes[i] == ZC_MODE_AUTO);
    }
    no_probe.zcopy_slow = NULL;
    cfg.zc.mode = ZC_MODE_AUTO;
    good &= !rdma_link_config_fit(&cfg, &no_probe, NULL, why, sizeof(why))
        && cfg.zc.mode == ZC_MODE_AUTO;
    ok(good, "auto copies through the ring only where the transport's zero-copy is slow; "
       "zcopy and copy forced stay; no probe, auto stays (%s)", why);
    fake_faults.zcopy_slow = 0;
}

int main(void)
{
    plan(16);
    test_config_fit();
    scenario("flag polling, pulls at once", 0);
    scenario("both connect at once", 1);
    fake_faults.defer_writes = 1;
    scenario("completion-driven (writes land at the next progress)", 0);
    fake_faults.pull_max = 4096 + 3;
    fake_faults.defer_pulls = 1;
    scenario("short pulls completing at the next progress", 0);
    fake_faults.refuse_pulls = 1;
    scenario("pulls refused", 0);
    test_write_fails();
    t_mode = ZC_MODE_AUTO;
    fake_faults.zcopy_slow = 1;
    scenario("auto, zero-copy slow on this host", 0);
    scenario("auto, zero-copy fast on this host", 0);   /* faults cleared */
    return done_testing();
}
