/*
 * t_srq: unit tests of the shared receive queue's accounting
 * (channel/src/xport/verbs/rdma_verbs_srq.c) over a fake device: the
 * verbs calls it makes are defined here and model an SRQ (room, receives
 * queued, peers' writes consuming them or meeting an RNR NAK, the limit
 * event as rxe raises it: once armed, when a consumption leaves fewer than
 * the limit).  Checked after every step: out == queued + unpolled
 * completions + owed (nothing lost or counted twice), out <= room (neither
 * the SRQ nor its CQ entries overflow), no post beyond the room.
 */
#include <fcntl.h>
#include <unistd.h>
#include "rdma_verbs.h"
#include "tap.h"

typedef struct fake_dev {
    uint32_t room, queued, limit;
    int event, resize, fail_post, refuse;
    uint64_t posted, consumed, rnr, unpolled, overflows;
    int cq_room;                /* entries rdma_verbs_cq_room reserved */
} fake_dev_t;

static fake_dev_t fd_;
static struct ibv_context ctx;
static struct ibv_srq srq_obj;

static int fake_post(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    uint32_t n = 0;

    (void) srq;
    for (*bad = NULL; wr; wr = wr->next)
        n += wr->wr_id == RDMA_VERBS_SRQ_WRID;
    if (fd_.fail_post)
        return ENOMEM;
    if (fd_.queued + n > fd_.room) {
        fd_.overflows++;
        return ENOMEM;
    }
    fd_.queued += n;
    fd_.posted += n;
    return 0;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *ia)
{
    (void) pd;
    if (fd_.refuse)
        return NULL;
    fd_.room = ia->attr.max_wr;
    srq_obj.context = &ctx;
    return &srq_obj;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
    (void) srq;
    return 0;
}

int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
    (void) srq;
    if ((mask & IBV_SRQ_MAX_WR) && (!fd_.resize || a->max_wr < fd_.room))
        return EINVAL;
    if (mask & IBV_SRQ_MAX_WR)
        fd_.room = a->max_wr;
    if (mask & IBV_SRQ_LIMIT)
        fd_.limit = a->srq_limit;
    return 0;
}

int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
    (void) c;
    if (!fd_.event)
        return -1;
    fd_.event = 0;
    ev->event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
    return 0;
}

void ibv_ack_async_event(struct ibv_async_event *ev)
{
    (void) ev;
}

rdma_status_t rdma_verbs_cq_room(rdma_xport_t * xp, int n)
{
    xp->cq_need += n;
    fd_.cq_room += n;
    return RDMA_OK;
}

/* A peer's write with immediate: takes a receive, or meets an RNR NAK. */
static void peer_writes(unsigned n)
{
    while (n--) {
        if (!fd_.queued) {
            fd_.rnr++;
            continue;
        }
        fd_.queued--;
        fd_.consumed++;
        fd_.unpolled++;
        if (fd_.limit && fd_.queued < fd_.limit) {
            fd_.event = 1;
            fd_.limit = 0;
        }
    }
}

static void main_polls(rdma_xport_t * xp, unsigned n)
{
    while (n-- && fd_.unpolled) {
        fd_.unpolled--;
        rdma_verbs_srq_polled(xp);
    }
}

static int sound(const rdma_xport_t * xp)
{
    return xp->srq_out == fd_.queued + fd_.unpolled + xp->srq_owed
        && xp->srq_out <= xp->srq_size && !fd_.overflows && (int) xp->srq_size <= fd_.cq_room
        && fd_.consumed <= fd_.posted;
}

static rdma_xport_t *xp_new(uint32_t size, int resize, int refuse)
{
    rdma_xport_t *xp = calloc(1, sizeof(*xp));
    int pfd[2];

    memset(&fd_, 0, sizeof(fd_));
    fd_.resize = resize;
    fd_.refuse = refuse;
    ctx.ops.post_srq_recv = fake_post;
    if (pipe(pfd))
        return NULL;
    ctx.async_fd = pfd[0];
    xp->ctx = &ctx;
    xp->dev.max_srq = 1;
    xp->dev.max_srq_wr = 1 << 20;
    xp->dev.device_cap_flags = resize ? IBV_DEVICE_SRQ_RESIZE : 0;
    xp->vp.srq_size = size;
    xp->nslots = 100;
    return rdma_verbs_srq_open(xp) ? NULL : xp;
}

static rdma_verbs_conn_t *vc_new(rdma_xport_t * xp, uint32_t qpn)
{
    rdma_verbs_conn_t *vc = calloc(1, sizeof(*vc));

    vc->xp = xp;
    vc->qp = calloc(1, sizeof(*vc->qp));
    vc->qp->qp_num = qpn;
    vc->rq_depth = 96;
    return vc;
}

static void accounting(void)
{
    rdma_xport_t *xp = xp_new(256, 1, 0);
    rdma_verbs_conn_t *vc[8];
    int i;

    ok(xp && xp->srq && fd_.room == 256 && fd_.cq_room == 256 && fd_.posted == 0,
       "open: an SRQ of 256 and 256 CQ entries, no receive posted before a connection");
    vc[0] = vc_new(xp, 100);
    ok(rdma_verbs_srq_attach(vc[0]) == 0 && fd_.queued == 96 && fd_.limit == 64 && sound(xp),
       "one connection: its 96 receives posted, the limit armed at a quarter of 256");
    peer_writes(96);
    main_polls(xp, 96);
    ok(fd_.queued == 96 && fd_.rnr == 0 && sound(xp), "96 writes polled: all 96 reposted");
    for (i = 1; i < 8; i++)
        rdma_verbs_srq_attach(vc[i] = vc_new(xp, 100 + (uint32_t) i));
    ok(xp->srq_want == 768 && fd_.queued == 256 && sound(xp),
       "8 connections want 768: 256 posted, the room");
    peer_writes(300);
    ok(fd_.rnr == 44 && fd_.event && sound(xp),
       "a burst of 300 unpolled writes: 44 meet an RNR NAK, the limit event fires");
    rdma_verbs_async_run(xp);
    ok(xp->srq_size == 512 && fd_.room == 512 && fd_.cq_room == 512 && xp->srq_limits == 1
       && xp->srq_grows == 1 && fd_.limit == 128 && sound(xp),
       "the event: the SRQ and its CQ entries doubled to 512, re-armed at 128");
    ok(fd_.queued == 256 && xp->srq_out == 512, "its 256 new receives posted");
    peer_writes(44);
    ok(fd_.queued == 212 && sound(xp), "the 44 retried writes land");
    main_polls(xp, 400);
    ok(fd_.unpolled == 0 && xp->srq_out == 512 && fd_.queued == 512 - xp->srq_owed && sound(xp),
       "main polls 300: refilled to 512 (%u owed)", xp->srq_owed);
    for (i = 4; i < 8; i++)
        rdma_verbs_srq_detach(vc[i]);
    peer_writes(200);
    main_polls(xp, 200);
    ok(xp->srq_want == 384 && xp->srq_out <= 384 + RDMA_VERBS_RQ_BATCH && sound(xp),
       "4 connections closed (want 384): 200 completions polled, %u out", xp->srq_out);
    peer_writes(400);
    main_polls(xp, 400);
    ok(xp->srq_out <= 384 && sound(xp), "and no more than 384 out after the next 400 (%u)",
       xp->srq_out);
    fd_.fail_post = 1;
    peer_writes(32);
    main_polls(xp, 32);
    ok(xp->srq_said == 1 && sound(xp), "a failed post: reported once, its count not lost");
    fd_.fail_post = 0;
    peer_writes(16);
    main_polls(xp, 16);
    ok(sound(xp) && xp->srq_out > xp->srq_want / 2, "the next batch refills (%u out)",
       xp->srq_out);
    rdma_verbs_srq_close(xp);
}

static void no_resize(void)
{
    rdma_xport_t *xp = xp_new(16, 0, 0);

    rdma_verbs_srq_attach(vc_new(xp, 7));
    rdma_verbs_srq_attach(vc_new(xp, 8));
    ok(fd_.queued == 16 && fd_.limit == 4, "room 16 for want 192: 16 posted, limit 4");
    peer_writes(20);
    rdma_verbs_async_run(xp);
    ok(xp->srq_limits == 1 && xp->srq_grows == 0 && xp->srq_size == 16 && fd_.limit == 4
       && fd_.rnr == 4 && sound(xp),
       "no SRQ resize on the device: the event is counted and re-armed, the room stays");
    main_polls(xp, 16);
    ok(fd_.queued == 16 && sound(xp), "polling refills the 16");
    rdma_verbs_srq_close(xp);
}

static void lookup(void)
{
    rdma_xport_t *xp = xp_new(256, 1, 0);
    rdma_verbs_conn_t *vc[4];
    uint32_t q, qpn[4], n = 0, h0 = 0;

    /* three QP numbers in one chain, one in another */
    for (q = 1; n < 3; q++) {
        uint32_t h = (q * 2654435761u) & (xp->qpn_nbkt - 1);
        if (n == 0)
            h0 = h;
        if (h == h0)
            qpn[n++] = q;
    }
    for (q = qpn[2] + 1; ((q * 2654435761u) & (xp->qpn_nbkt - 1)) == h0; q++)
        ;
    qpn[3] = q;
    for (n = 0; n < 4; n++)
        rdma_verbs_srq_attach(vc[n] = vc_new(xp, qpn[n]));
    ok(rdma_verbs_qpn_lookup(xp, qpn[0]) == vc[0] && rdma_verbs_qpn_lookup(xp, qpn[1]) == vc[1]
       && rdma_verbs_qpn_lookup(xp, qpn[2]) == vc[2] && rdma_verbs_qpn_lookup(xp, qpn[3]) == vc[3],
       "QP numbers %u %u %u (one chain) and %u: each finds its connection", qpn[0], qpn[1],
       qpn[2], qpn[3]);
    rdma_verbs_srq_detach(vc[1]);
    ok(!rdma_verbs_qpn_lookup(xp, qpn[1]) && rdma_verbs_qpn_lookup(xp, qpn[0]) == vc[0]
       && rdma_verbs_qpn_lookup(xp, qpn[2]) == vc[2] && xp->srq_want == 3 * 96,
       "the middle of the chain detached: gone, its neighbours found, want 288");
    rdma_verbs_srq_detach(vc[1]);
    ok(xp->srq_want == 3 * 96 && !rdma_verbs_qpn_lookup(xp, 12345),
       "a second detach changes nothing; an unknown QP number finds none");
    rdma_verbs_srq_close(xp);
}

static void none(void)
{
    rdma_xport_t *xp = xp_new(0, 1, 0);

    ok(xp && !xp->srq && fd_.cq_room == 0, "SRQ_SIZE 0: no SRQ, no CQ entries reserved");
    xp = xp_new(256, 1, 1);
    ok(xp && !xp->srq && xp->cq_need == 0,
       "a device that refuses the SRQ: per-QP receive queues, its CQ entries given back");
}

int main(void)
{
    accounting();
    no_resize();
    lookup();
    none();
    return done_testing();
}
