/*
 * rdma_xport_verbs: the verbs transport of ch3:rdma (libibverbs only, no
 * rdma_cm, no MPICH).
 *
 * Objects.  One device context, PD and CQ per process.  The CQ serves every
 * RC QP and the connection-management (CM) UD QP; its event channel wakes
 * blocking waits (rdma_verbs_wait_arm).  Per connection:
 *   ring   ring_size bytes; the peer RDMA-writes frames into it
 *          (LOCAL_WRITE | REMOTE_WRITE, never RELAXED_ORDERING, see below)
 *   stage  ring_size bytes; the local image of the peer's ring, the source
 *          of our writes (local access only)
 *   ctl    one page: head word and tail word that the peer writes, plus the
 *          registered source words for credit/head writes that are not inline
 *   qp     RC QP, paired with the peer's through the CM exchange below.
 *
 * Connection management (UD, mimics a PMI exchange).  The card is
 * "<gid hex>.<lid>.<udqpn>.<port>.<qkey hex>.<auth hex>".  qkey and auth are
 * drawn at random by open() (getrandom), so only processes that read the
 * job's PMI KVS know them: the CM QP takes datagrams with our QKEY only
 * (bit 31 clear: kernels since 6.4 refuse privileged QKEYs without
 * CAP_NET_RAW), and every CM message carries the 64-bit auth of its
 * destination; one without ours is dropped and counted (stats), never
 * fatal, before anything is looked up or allocated.
 *   connect() creates the connection's memory and QP (INIT) and sends REQ
 * {rank, qpn, psn, ring and ctl
 * addr+rkey, max_rd_atomic, in-order capability}.  The responder gets the
 * object with conn_of(rank) (NULL: the REQ is ignored and the initiator times
 * out), creates the same if needed, goes RTR+RTS and answers REP.  The
 * initiator goes RTR+RTS on REP, sends RTU and is READY; the responder is
 * READY on RTU or, completion-driven, on the first receive completion of the
 * connection (the RTU is late or lost and the initiator already writes).
 *   Simultaneous connects: both sides sent REQ with their existing QP.  The
 * REQ of the lower rank wins: the lower rank ignores the higher rank's REQ,
 * the higher rank answers the lower rank's REQ as a responder, with the QP it
 * already has.  There is exactly one QP per peer, so no duplicates.
 *   UD is unreliable: REQ (initiator) and REP (responder) are retransmitted
 * with exponential backoff; a duplicate REQ is answered with the same REP, a
 * duplicate REP with the same RTU.  Without an answer for prm->timeout
 * seconds the connection fails with RDMA_XPORT_EPEER.
 *
 * Arrival detection and ordering -- read this before touching the code.
 *   Flag polling (rb_pipe piggyback/basic with cfg.completion_driven = 0) is
 * only correct if the responder places one RDMA write in increasing address
 * order, so that a frame's tail flag is never visible before its payload.
 * The verbs API does not promise that: data is defined only at completion.
 * ibv_query_qp_data_in_order(qp, IBV_WR_RDMA_WRITE, ...) is the one query that
 * says "the reader may poll for data": we use flag polling only when both
 * QPs report WHOLE_MSG and neither side set force_completion (the REQ/REP
 * carry each side's answer; both compute the same mode).  Otherwise the pipe
 * runs completion-driven: every frame is an RDMA_WRITE_WITH_IMM that consumes
 * a posted receive, and the CQE of that receive (data visible by definition)
 * calls rb_pipe_landed().  Credit and head writes are WITH_IMM too in that
 * mode so that their words are visible at their CQE (and pre-posted receives
 * are replenished).  The query describes ordering within ONE write only:
 * nothing here relies on ordering between separate WQEs.  Hence basic mode
 * (the receiver trusts a head word written by a LATER WQE than the data) is
 * always completion-driven here.
 *   The ring is never registered with IBV_ACCESS_RELAXED_ORDERING (which voids
 * the in-order answer), and the acquire barrier after the tail flag is in
 * rb_pipe; this file never reads ring memory.
 *   rdma-core >= 33 has the query; passing flags 0 is documented as equivalent
 * to RETURN_CAPS + WHOLE_MSG, so we use 0 (Debian 12 ships v44, which knows no
 * RETURN_CAPS).  Build without the function: HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER
 * = 0 (autoconf AC_CHECK_DECLS) => "unknown" => completion-driven.
 *
 * Send queue.  sq_depth >= frames that fit in the ring (x2 in basic mode for
 * head writes) + RDMA_VERBS_SQ_RESERVE; the last RESERVE slots are kept for
 * credit/head/keepalive writes so credit updates can always be posted.
 * Every RDMA_VERBS_SIG_EVERY-th WR is signalled, and every WR once the queue
 * is nearly full, so a full queue always ends in a signalled WR.  With no
 * free slot, writes poll the CQ (bounded by prm->timeout).  Stage bytes of
 * a non-inline write are rewritten only after the peer returned their
 * credit, i.e. after the write landed, so no completion is needed for that.
 *
 * Liveness.  RC retries: retry_cnt 6 (rxe retries 7 forever), ACK timeout
 * from prm->timeout (16..18), rnr_retry 7.  A peer that died while we wait
 * for credits leaves nothing in flight to fail, so progress() rewrites the
 * last credit value (idempotent, no immediate) on READY connections without
 * a signalled WR in flight every timeout/4 s; its retry exhaustion reports
 * the dead peer (IBV_WC_RETRY_EXC_ERR -> RDMA_XPORT_EPEER).
 *
 * Test hook: CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER=1 (read by open) makes the
 * local in-order answer 1, to measure flag polling on devices (rxe) that do
 * not promise it.  Never for production.
 *
 * describe() gives one line per connection: the mode ("flag-poll" |
 * "write-imm" | "unknown"), both in-order answers, inline granted,
 * max_rd_atomic, MTU and queue depths.
 *
 * Stale completions.  wr_id = (generation << 32) | slot: completions of a
 * closed connection still in the CQ are recognised and dropped.
 *
 * Zero-copy (zc.h): RDMA read.  The sender exposes its buffer through the
 * send registration cache (zcopy/rcache; regions REMOTE_READ only) and
 * sends the rkey; the receiver registers its destination through the
 * receive cache (LOCAL_WRITE only: no peer can read or write it) and posts
 * signalled RDMA reads of at most RDMA_VERBS_READ_MAX bytes, at most
 * min(negotiated max_rd_atomic, RDMA_VERBS_READS_MAX) outstanding, never
 * eating the send-queue reserve.  Destinations are registered in windows
 * aligned to RDMA_VERBS_REG_WINDOW in the address space: every read of a
 * window hits the region its first read registered, and windows share no
 * page, so an unaligned buffer never makes the cache merge ever-growing
 * regions.  Read completions arrive in order (one RC QP): each releases its
 * region and reports its bytes with zc_pulled().  Cached registrations are
 * only safe while the memory stays mapped: zcopy/memev reports unmaps (watch
 * before register, so none is missed) and the cache drains those events
 * before every lookup; without memev every registration is dropped after
 * use (rcache cache=0), said once.
 *
 * Fork.  A registered page that the parent writes after fork() is copied
 * (copy-on-write) while the device keeps the old page: received bytes land
 * in the child's copy, sent bytes come from stale memory.  Kernels >= 5.13
 * copy pinned pages at fork instead (rdma-core: IBV_FORK_UNNEEDED); on
 * older ones open() calls ibv_fork_init() before the first registration,
 * which makes every registered range MADV_DONTFORK (a child that touches
 * such a page faults).  RDMAV_FORK_SAFE/IBV_FORK_SAFE make rdma-core do the
 * same by itself.  Our rings, stages, ctl pages and CM buffers are
 * MADV_DONTFORK in every mode: a child has no use for them.  describe()
 * says which mode is in force.
 *
 * Hot paths (write, credit, head, progress) neither allocate nor print.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <infiniband/verbs.h>

#include "rdma_xport.h"
#include "rcache.h"
#include "memev.h"

#ifndef HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER
#define HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER 1  /* rdma-core >= 33 */
#endif

enum {
    RDMA_VERBS_UD_NRECV = 64,
    RDMA_VERBS_UD_NSEND = 32,
    RDMA_VERBS_UD_SLOT = 256,   /* GRH (40) + message */
    RDMA_VERBS_GRH = 40,
    RDMA_VERBS_MAGIC = 0x63683372,
    RDMA_VERBS_SQ_RESERVE = 8,
    RDMA_VERBS_RQ_RESERVE = 16,
    RDMA_VERBS_SIG_EVERY = 16,
    RDMA_VERBS_POLL_BATCH = 32,
    RDMA_VERBS_CQ_BASE = 256,
    /* 6, not 7: rxe (kernel 6.1) never decrements a retry_cnt of 7, so a
     * dead peer would be retried forever (IB says 7 means 7 retries; only
     * rnr_retry 7 is infinite) */
    RDMA_VERBS_RETRY_CNT = 6,
    RDMA_VERBS_READS_MAX = 16,  /* RDMA reads in flight per connection */
    RDMA_VERBS_READ_MAX = 1 << 20,      /* bytes per RDMA read */
    RDMA_VERBS_REG_WINDOW = 64 << 20    /* receive registration window */
};

/* rdma_verbs_post_write flags */
enum { RDMA_VERBS_POST_LEAVE_RESERVE = 1, RDMA_VERBS_POST_SIGNAL = 2 };

/* Immediate data: kind in bits 0-1; a frame write carries its frame count
 * in bits 2-31 (a superpipeline group holds several frames). */
enum { RDMA_VERBS_IMM_FRAME = 1, RDMA_VERBS_IMM_CREDIT = 2, RDMA_VERBS_IMM_HEAD = 3 };
enum { RDMA_VERBS_MSG_REQ = 1, RDMA_VERBS_MSG_REP = 2, RDMA_VERBS_MSG_RTU = 3 };

typedef enum {
    RDMA_VERBS_CM_NONE = 0,     /* resources, no REQ sent or answered */
    RDMA_VERBS_CM_REQ_SENT,     /* initiator, waiting for REP */
    RDMA_VERBS_CM_REP_SENT,     /* responder, waiting for RTU */
    RDMA_VERBS_CM_READY,
    RDMA_VERBS_CM_DEAD
} rdma_verbs_cm_t;

/* CM message; both ends share byte order (homogeneous jobs) */
typedef struct rdma_verbs_msg {
    uint32_t magic;
    uint8_t type, in_order, rd_atomic, basic;
    uint64_t auth;              /* the destination's auth (from its card) */
    int32_t src, dst;
    uint32_t qpn, psn;
    uint64_t token, echo;       /* sender's / receiver's connection id */
    uint64_t ring_addr, ctl_addr;
    uint32_t ring_rkey, ctl_rkey;
    uint64_t ring_size, chunk_size;
} rdma_verbs_msg_t;

/* Words the peer writes (head, tail) and our registered write sources */
typedef struct rdma_verbs_ctl {
    volatile uint64_t head_word;
    volatile uint64_t tail_word;
    uint64_t src_credit;
    uint64_t src_head;
} rdma_verbs_ctl_t;

typedef struct rdma_verbs_mem {
    void *buf;
    size_t len;                 /* page multiple */
    struct ibv_mr *mr;
} rdma_verbs_mem_t;

/* A registration cache and the one access right its regions get. */
typedef struct rdma_verbs_rc {
    rdma_xport_t *xp;
    rcache_t *rc;
    int access;
} rdma_verbs_rc_t;

typedef struct rdma_verbs_conn {
    rdma_conn_t *c;
    rdma_xport_t *xp;
    uint64_t token;             /* wr_id: generation << 32 | slot */
    rdma_verbs_cm_t cm;
    int initiator, rtu_implied;
    struct ibv_qp *qp;
    struct ibv_ah *ah;          /* the peer's CM QP */
    struct ibv_ah_attr path;    /* RC path to the peer */
    uint32_t peer_udqpn, peer_qkey, psn;
    uint64_t peer_auth;         /* the peer's CM secret, from its card */
    rdma_verbs_mem_t ring, stage, ctl;
    rdma_verbs_msg_t remote;    /* the peer's REQ or REP */
    int completion, in_order_local, max_rd_atomic;
    uint32_t max_inline;
    uint32_t sq_depth, sq_free, unsig, rq_depth;
    int cq_share;               /* CQ entries reserved for this connection */
    uint32_t *sig_fifo, sig_head, sig_tail;     /* WRs covered per signal */
    uint64_t last_credit;
    double t_retx, t_deadline, backoff;
    struct {
        uint32_t len;
        rcache_region_t *reg;   /* destination, released at completion */
    } reads[RDMA_VERBS_READS_MAX];      /* in flight, FIFO */
    uint32_t rd_head, rd_tail;
} rdma_verbs_conn_t;

struct rdma_xport {
    rdma_xport_params_t prm;
    char err[320];
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_comp_channel *chan;      /* CQ events for blocking waits */
    int cq_size, cq_need;
    struct ibv_device_attr dev;
    struct ibv_port_attr pattr;
    uint8_t port;
    int gid_index;
    union ibv_gid gid;
    struct ibv_qp *ud;
    rdma_verbs_mem_t udm;
    uint32_t ud_send_next, ud_send_free;
    uint32_t ud_pending[RDMA_VERBS_UD_NRECV], n_pending;
    rdma_verbs_conn_t **slots;
    uint32_t *gens, nslots;
    uint32_t inline_req;
    uint32_t qkey;              /* our CM QP's QKEY (random, bit 31 clear) */
    uint64_t auth;              /* our CM secret (random); see the top */
    uint64_t cm_dropped;        /* CM datagrams without our auth */
    unsigned short rng[3];      /* PSNs; leaves the application's lrand48 alone */
    int qp_timeout, in_order_override, n_connecting, new_failures;
    int flag_polled;            /* a connection polls memory: no CQE per arrival */
    double t_keepalive;
    unsigned polls;             /* progress calls; clock read every 256th */
    rdma_verbs_rc_t rc_src;     /* send buffers the peer reads: REMOTE_READ */
    rdma_verbs_rc_t rc_dst;     /* receive buffers our reads fill: LOCAL_WRITE */
    int memev_on, said_reg, said_memev;
    char memev_err[160];        /* why registrations are not cached */
    const char *fork_mode;      /* rdma_xport_verbs_fork_mode() */
};

static int rdma_verbs_cq_poll(rdma_xport_t * xp);

/* ------------------------------------------------------------------ util */

static double rdma_verbs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void __attribute__((format(printf, 3, 4)))
rdma_verbs_err_set(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* Our CM QKEY and auth from the kernel's random source. */
static int rdma_verbs_cm_keys(rdma_xport_t * xp)
{
    uint64_t r[2];

    if (getrandom(r, sizeof(r), 0) != (ssize_t) sizeof(r))
        return -1;
    xp->qkey = (uint32_t) r[0] & 0x7fffffffu;
    xp->auth = r[1];
    return 0;
}

/* Zeroed, whole pages, not inherited by a child (see Fork), registered
 * (never with RELAXED_ORDERING). */
static int rdma_verbs_mem_alloc(rdma_xport_t * xp, rdma_verbs_mem_t * m, size_t len, int access)
{
    size_t page = (size_t) sysconf(_SC_PAGESIZE);

    m->len = (len + page - 1) & ~(page - 1);
    if (posix_memalign(&m->buf, page, m->len))
        m->buf = NULL;
    if (m->buf) {
        memset(m->buf, 0, m->len);
        madvise(m->buf, m->len, MADV_DONTFORK);
        m->mr = ibv_reg_mr(xp->pd, m->buf, len, access);
    }
    return m->buf && m->mr ? RDMA_XPORT_OK : RDMA_XPORT_ENOMEM;
}

/* The heap gets the pages back inheritable. */
static void rdma_verbs_mem_free(rdma_verbs_mem_t * m)
{
    if (m->mr)
        ibv_dereg_mr(m->mr);
    if (m->buf)
        madvise(m->buf, m->len, MADV_DOFORK);
    free(m->buf);
    m->mr = NULL;
    m->buf = NULL;
}

/* The fork mode (see Fork): "unneeded", "enabled" (by the environment, an
 * earlier call or init() now) or "unprotected" (init() failed).  query and
 * init are ibv_is_fork_initialized and ibv_fork_init, or a test's fakes. */
const char *rdma_xport_verbs_fork_mode(int (*query)(void), int (*init)(void))
{
    switch (query()) {
    case IBV_FORK_UNNEEDED:
        return "unneeded";
    case IBV_FORK_ENABLED:
        return "enabled";
    default:
        return init() ? "unprotected" : "enabled";
    }
}

static int rdma_verbs_fork_query(void)
{
    return (int) ibv_is_fork_initialized();
}

/* -------------------------------------------------------- device and port */

static int rdma_verbs_memlock_check(const rdma_xport_params_t * prm, char *err, size_t errlen)
{
    struct rlimit rl;
    size_t need = 2 * prm->ring_rdma.ring_size + (size_t) sysconf(_SC_PAGESIZE);

    if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return RDMA_XPORT_OK;
    rdma_verbs_err_set(err, errlen, "ulimit -l is %llu KiB but ch3:rdma needs at least %zu KiB "
                       "per connection; raise it (ulimit -l unlimited / limits.conf memlock)",
                       (unsigned long long) rl.rlim_cur / 1024, (need + 1023) / 1024);
    return RDMA_XPORT_ENOMEM;
}

/* First active port of ctx (or the requested one); 0 if none. */
static uint8_t rdma_verbs_port_find(struct ibv_context *ctx, int want, struct ibv_port_attr *pa)
{
    struct ibv_device_attr da;
    int p;

    if (ibv_query_device(ctx, &da))
        return 0;
    for (p = 1; p <= da.phys_port_cnt; p++) {
        if (want && p != want)
            continue;
        if (!ibv_query_port(ctx, p, pa) && pa->state == IBV_PORT_ACTIVE)
            return (uint8_t) p;
    }
    return 0;
}

static int rdma_verbs_dev_open(rdma_xport_t * xp, char *err, size_t errlen)
{
    const char *want = xp->prm.device;
    struct ibv_device **list;
    int i, n = 0;

    list = ibv_get_device_list(&n);
    for (i = 0; list && i < n && !xp->ctx; i++) {
        if (want && *want && strcmp(want, ibv_get_device_name(list[i])))
            continue;
        xp->ctx = ibv_open_device(list[i]);
        if (xp->ctx && !(xp->port = rdma_verbs_port_find(xp->ctx, xp->prm.port, &xp->pattr))) {
            ibv_close_device(xp->ctx);
            xp->ctx = NULL;
        }
    }
    if (list)
        ibv_free_device_list(list);
    if (xp->ctx)
        return RDMA_XPORT_OK;
    rdma_verbs_err_set(err, errlen, "no RDMA device with an active port (ibv_get_device_list "
                       "found %d devices; wanted device %s, port %d (0 = any)); check "
                       "ibv_devinfo, 'rdma link' and the device/port settings", n,
                       want && *want ? want : "any", xp->prm.port);
    return RDMA_XPORT_ENODEV;
}

static int rdma_verbs_gid_is_ipv4(const union ibv_gid *g)
{
    static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    return !memcmp(g->raw, pfx, sizeof(pfx));
}

/* RoCE: RoCE v2 IPv4-mapped, else any RoCE v2, else 0.  IB: GID 0 + LID. */
static int rdma_verbs_gid_pick(rdma_xport_t * xp)
{
    struct ibv_gid_entry e;
    int i, v2 = -1, v4 = -1;

    xp->gid_index = 0;
    if (xp->prm.gid_index >= 0)
        xp->gid_index = xp->prm.gid_index;
    else if (xp->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        for (i = 0; i < xp->pattr.gid_tbl_len && v4 < 0; i++) {
            if (ibv_query_gid_ex(xp->ctx, xp->port, i, &e, 0)
                || e.gid_type != IBV_GID_TYPE_ROCE_V2)
                continue;
            if (v2 < 0)
                v2 = i;
            if (rdma_verbs_gid_is_ipv4(&e.gid))
                v4 = i;
        }
        xp->gid_index = v4 >= 0 ? v4 : v2 >= 0 ? v2 : 0;
    }
    return ibv_query_gid(xp->ctx, xp->port, xp->gid_index, &xp->gid);
}

/* RC ACK timeout exponent: (retry_cnt + 1) tries fit in prm->timeout,
 * clamped to 16..18 (0.27..1.07 s per try) to survive TCG emulation. */
static int rdma_verbs_qp_timeout(double seconds)
{
    int t = 18;
    while (t > 16 && (RDMA_VERBS_RETRY_CNT + 1) * 4.096e-6 * (double) (1u << t) > seconds)
        t--;
    return t;
}

/* -------------------------------------------------------------- CM (UD) */

static uint8_t *rdma_verbs_ud_slot(rdma_xport_t * xp, uint32_t i)
{
    return (uint8_t *) xp->udm.buf + (size_t) i * RDMA_VERBS_UD_SLOT;
}

static int rdma_verbs_ud_post_recv(rdma_xport_t * xp, uint32_t i)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t) rdma_verbs_ud_slot(xp, i), .length = RDMA_VERBS_UD_SLOT,
        .lkey = xp->udm.mr->lkey
    };
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
    return ibv_post_recv(xp->ud, &wr, &bad);
}

static int rdma_verbs_ud_modify(rdma_xport_t * xp, enum ibv_qp_state s)
{
    struct ibv_qp_attr a = {.qp_state = s, .port_num = xp->port, .qkey = xp->qkey };
    int mask = IBV_QP_STATE;

    if (s == IBV_QPS_INIT)
        mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
    else if (s == IBV_QPS_RTS)
        mask |= IBV_QP_SQ_PSN;
    return ibv_modify_qp(xp->ud, &a, mask);
}

static int rdma_verbs_ud_create(rdma_xport_t * xp)
{
    struct ibv_qp_init_attr ia = {
        .send_cq = xp->cq, .recv_cq = xp->cq, .qp_type = IBV_QPT_UD,
        .cap = {.max_send_wr = RDMA_VERBS_UD_NSEND, .max_recv_wr = RDMA_VERBS_UD_NRECV,
                .max_send_sge = 1, .max_recv_sge = 1}
    };
    uint32_t i;

    if (rdma_verbs_mem_alloc(xp, &xp->udm, (size_t) RDMA_VERBS_UD_SLOT *
                             (RDMA_VERBS_UD_NRECV + RDMA_VERBS_UD_NSEND), IBV_ACCESS_LOCAL_WRITE))
        return -1;
    xp->ud = ibv_create_qp(xp->pd, &ia);
    if (!xp->ud || rdma_verbs_ud_modify(xp, IBV_QPS_INIT) || rdma_verbs_ud_modify(xp, IBV_QPS_RTR)
        || rdma_verbs_ud_modify(xp, IBV_QPS_RTS))
        return -1;
    for (i = 0; i < RDMA_VERBS_UD_NRECV; i++)
        if (rdma_verbs_ud_post_recv(xp, i))
            return -1;
    xp->ud_send_free = RDMA_VERBS_UD_NSEND;
    return 0;
}

static void rdma_verbs_card_format(rdma_xport_t * xp, char *card, size_t len)
{
    char hex[33];
    int i;

    for (i = 0; i < 16; i++)
        sprintf(hex + 2 * i, "%02x", xp->gid.raw[i]);
    snprintf(card, len, "%s.%u.%u.%u.%x.%016llx", hex, xp->pattr.lid, xp->ud->qp_num, xp->port,
             xp->qkey, (unsigned long long) xp->auth);
}

/* Card -> the peer's CM QP number, QKEY and auth, and an address vector
 * through our port. */
static int rdma_verbs_card_parse(rdma_verbs_conn_t * vc, const char *card)
{
    struct ibv_ah_attr *ah = &vc->path;
    unsigned lid, qpn, port, qkey, b, i;
    unsigned long long auth;
    char hex[33];

    if (sscanf(card, "%32[0-9a-f].%u.%u.%u.%x.%llx", hex, &lid, &qpn, &port, &qkey, &auth) != 6
        || strlen(hex) != 32)
        return -1;
    memset(ah, 0, sizeof(*ah));
    for (i = 0; i < 16; i++) {
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return -1;
        ah->grh.dgid.raw[i] = (uint8_t) b;
    }
    ah->port_num = vc->xp->port;
    ah->dlid = (uint16_t) lid;
    if (vc->xp->pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        ah->is_global = 1;
        ah->grh.sgid_index = (uint8_t) vc->xp->gid_index;
        ah->grh.hop_limit = 64;
    }
    vc->peer_udqpn = qpn;
    vc->peer_qkey = qkey;
    vc->peer_auth = auth;
    return 0;
}

static void rdma_verbs_msg_fill(rdma_verbs_conn_t * vc, rdma_verbs_msg_t * m, int type)
{
    rdma_xport_t *xp = vc->xp;

    memset(m, 0, sizeof(*m));
    m->magic = RDMA_VERBS_MAGIC;
    m->auth = vc->peer_auth;
    m->type = (uint8_t) type;
    m->in_order = (uint8_t) vc->in_order_local;
    m->rd_atomic = (uint8_t) vc->max_rd_atomic;
    m->basic = xp->prm.ring_rdma.mode == RB_MODE_BASIC;
    m->src = xp->prm.rank;
    m->dst = vc->c->peer;
    m->qpn = vc->qp->qp_num;
    m->psn = vc->psn;
    m->token = vc->token;
    m->echo = vc->remote.token;
    m->ring_addr = (uintptr_t) vc->ring.buf;
    m->ring_rkey = vc->ring.mr->rkey;
    m->ctl_addr = (uintptr_t) vc->ctl.buf;
    m->ctl_rkey = vc->ctl.mr->rkey;
    m->ring_size = xp->prm.ring_rdma.ring_size;
    m->chunk_size = xp->prm.ring_rdma.chunk_size;
}

/* Best effort: a message lost here is retransmitted by the timers. */
static void rdma_verbs_ud_send(rdma_verbs_conn_t * vc, int type)
{
    rdma_xport_t *xp = vc->xp;
    uint32_t i = RDMA_VERBS_UD_NRECV + xp->ud_send_next % RDMA_VERBS_UD_NSEND;
    struct ibv_sge sge = {
        .addr = (uintptr_t) rdma_verbs_ud_slot(xp, i), .length = sizeof(rdma_verbs_msg_t),
        .lkey = xp->udm.mr->lkey
    };
    struct ibv_send_wr wr = {
        .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
        .wr.ud = {.ah = vc->ah, .remote_qpn = vc->peer_udqpn, .remote_qkey = vc->peer_qkey}
    }, *bad;

    if (!xp->ud_send_free)
        rdma_verbs_cq_poll(xp);
    if (!xp->ud_send_free)
        return;
    rdma_verbs_msg_fill(vc, (rdma_verbs_msg_t *) rdma_verbs_ud_slot(xp, i), type);
    if (!ibv_post_send(xp->ud, &wr, &bad)) {
        xp->ud_send_next++;
        xp->ud_send_free--;
    }
}

/* --------------------------------------------------------- connections */

static void __attribute__((format(printf, 2, 3)))
rdma_verbs_conn_fail(rdma_verbs_conn_t * vc, const char *fmt, ...)
{
    va_list ap;

    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return;
    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        vc->xp->n_connecting--;
    vc->cm = RDMA_VERBS_CM_DEAD;
    vc->c->state = RDMA_CONN_FAILED;
    vc->xp->new_failures++;
    va_start(ap, fmt);
    vsnprintf(vc->xp->err, sizeof(vc->xp->err), fmt, ap);
    va_end(ap);
}

static rdma_verbs_conn_t *rdma_verbs_conn_lookup(rdma_xport_t * xp, uint64_t token)
{
    uint32_t slot = (uint32_t) token;
    if (slot >= xp->nslots || xp->gens[slot] != (uint32_t) (token >> 32))
        return NULL;
    return xp->slots[slot];
}

static int rdma_verbs_slot_grow(rdma_xport_t * xp)
{
    uint32_t n = xp->nslots ? 2 * xp->nslots : 16;
    rdma_verbs_conn_t **s = realloc(xp->slots, n * sizeof(*s));
    uint32_t *g;

    if (!s)
        return -1;
    xp->slots = s;
    g = realloc(xp->gens, n * sizeof(*g));
    if (!g)
        return -1;
    xp->gens = g;
    memset(s + xp->nslots, 0, (n - xp->nslots) * sizeof(*s));
    memset(g + xp->nslots, 0, (n - xp->nslots) * sizeof(*g));
    xp->nslots = n;
    return 0;
}

static int rdma_verbs_slot_get(rdma_xport_t * xp, rdma_verbs_conn_t * vc)
{
    uint32_t i = 0;

    while (i < xp->nslots && xp->slots[i])
        i++;
    if (i == xp->nslots && rdma_verbs_slot_grow(xp))
        return -1;
    xp->slots[i] = vc;
    vc->token = ((uint64_t) ++xp->gens[i] << 32) | i;
    return 0;
}

/* Grow the shared CQ so it holds every completion vc can have in flight. */
static int rdma_verbs_cq_reserve(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    int n = (int) (vc->sq_depth + vc->rq_depth), want = xp->cq_need + n;

    if (want > xp->cq_size) {
        if (want > xp->dev.max_cqe || ibv_resize_cq(xp->cq, want))
            return -1;
        xp->cq_size = want;
    }
    xp->cq_need = want;
    vc->cq_share = n;
    return 0;
}

/* Create the RC QP, probing the inline size: irdma rejects any, rxe grants
 * about 400; start from what worked last time. */
static int rdma_verbs_qp_create(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    struct ibv_qp_init_attr ia;
    uint32_t req = xp->inline_req;

    for (;;) {
        memset(&ia, 0, sizeof(ia));
        ia.send_cq = ia.recv_cq = xp->cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = vc->sq_depth;
        ia.cap.max_recv_wr = vc->rq_depth;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = req;
        vc->qp = ibv_create_qp(xp->pd, &ia);
        if (vc->qp || !req)
            break;
        req = req > 64 ? req / 2 : 0;
    }
    if (!vc->qp)
        return -1;
    xp->inline_req = req;
    vc->max_inline = req ? ia.cap.max_inline_data : 0;
    return 0;
}

static int rdma_verbs_qp_in_order(rdma_verbs_conn_t * vc)
{
    if (vc->xp->prm.force_completion)
        return 0;
    if (vc->xp->in_order_override)
        return 1;
#if HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER
    return ibv_query_qp_data_in_order(vc->qp, IBV_WR_RDMA_WRITE, 0) == 1;
#else
    return 0;
#endif
}

static int rdma_verbs_qp_init(rdma_verbs_conn_t * vc)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = vc->xp->port,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
            IBV_ACCESS_REMOTE_READ
    };
    return ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                         IBV_QP_ACCESS_FLAGS);
}

static int rdma_verbs_qp_rtr_rts(rdma_verbs_conn_t * vc)
{
    struct ibv_qp_attr a = {
        /* active_mtu <= IBV_MTU_4096 by definition: min(active, 4096) */
        .qp_state = IBV_QPS_RTR, .path_mtu = vc->xp->pattr.active_mtu, .ah_attr = vc->path,
        .dest_qp_num = vc->remote.qpn, .rq_psn = vc->remote.psn,
        .max_dest_rd_atomic = (uint8_t) vc->max_rd_atomic, .min_rnr_timer = 12
    };

    if (ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                      IBV_QP_MIN_RNR_TIMER))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = (uint8_t) vc->xp->qp_timeout;
    a.retry_cnt = RDMA_VERBS_RETRY_CNT;
    a.rnr_retry = 7;
    a.sq_psn = vc->psn;
    a.max_rd_atomic = (uint8_t) vc->max_rd_atomic;
    return ibv_modify_qp(vc->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int rdma_verbs_rq_post(rdma_verbs_conn_t * vc)
{
    struct ibv_recv_wr wr = {.wr_id = vc->token, .num_sge = 0 }, *bad;
    return ibv_post_recv(vc->qp, &wr, &bad);
}

static void rdma_verbs_conn_release(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;

    if (vc->cm == RDMA_VERBS_CM_REQ_SENT || vc->cm == RDMA_VERBS_CM_REP_SENT)
        xp->n_connecting--;
    if (vc->qp)
        ibv_destroy_qp(vc->qp);
    xp->cq_need -= vc->cq_share;
    if (vc->ah)
        ibv_destroy_ah(vc->ah);
    rdma_verbs_mem_free(&vc->ctl);
    rdma_verbs_mem_free(&vc->stage);
    rdma_verbs_mem_free(&vc->ring);
    if (vc->token)
        xp->slots[(uint32_t) vc->token] = NULL;
    vc->c->priv = NULL;
    free(vc->sig_fifo);
    free(vc);
}

static int rdma_verbs_conn_resources(rdma_verbs_conn_t * vc)
{
    rdma_xport_t *xp = vc->xp;
    size_t rs = xp->prm.ring_rdma.ring_size;
    uint32_t frames = (uint32_t) (rs / xp->prm.ring_rdma.chunk_size);
    uint32_t per = xp->prm.ring_rdma.mode == RB_MODE_BASIC ? 2 : 1;
    uint32_t max_wr = (uint32_t) xp->dev.max_qp_wr;
    int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

    vc->sq_depth = frames * per + RDMA_VERBS_SQ_RESERVE + RDMA_VERBS_READS_MAX;
    vc->sq_depth = vc->sq_depth < max_wr ? vc->sq_depth : max_wr;
    vc->rq_depth = frames * per + RDMA_VERBS_RQ_RESERVE;
    vc->rq_depth = vc->rq_depth < max_wr ? vc->rq_depth : max_wr;
    vc->sq_free = vc->sq_depth;
    vc->sig_fifo = calloc(vc->sq_depth, sizeof(*vc->sig_fifo));
    if (!vc->sig_fifo || rdma_verbs_mem_alloc(xp, &vc->ring, rs, rw)
        || rdma_verbs_mem_alloc(xp, &vc->stage, rs, IBV_ACCESS_LOCAL_WRITE)
        || rdma_verbs_mem_alloc(xp, &vc->ctl, (size_t) sysconf(_SC_PAGESIZE), rw))
        return RDMA_XPORT_ENOMEM;
    if (rdma_verbs_cq_reserve(vc)
        || rdma_verbs_qp_create(vc) || rdma_verbs_qp_init(vc))
        return RDMA_XPORT_ENOMEM;
    vc->in_order_local = rdma_verbs_qp_in_order(vc);
    vc->max_rd_atomic = xp->dev.max_qp_rd_atom < xp->dev.max_qp_init_rd_atom ?
        xp->dev.max_qp_rd_atom : xp->dev.max_qp_init_rd_atom;
    vc->psn = (uint32_t) (nrand48(xp->rng) & 0xffffff);
    return RDMA_XPORT_OK;
}

/* Allocate the connection's memory, QP and the peer's address. */
static int rdma_verbs_conn_create(rdma_xport_t * xp, rdma_conn_t * c, rdma_verbs_conn_t ** vcp)
{
    rdma_verbs_conn_t *vc = calloc(1, sizeof(*vc));
    char card[256];
    int rc;

    if (!vc)
        return RDMA_XPORT_ENOMEM;
    vc->c = c;
    vc->xp = xp;
    c->priv = vc;
    c->xport = xp;
    c->ops = &rdma_xport_verbs;
    rc = rdma_verbs_slot_get(xp, vc) ? RDMA_XPORT_ENOMEM : rdma_verbs_conn_resources(vc);
    if (rc) {
        rdma_verbs_err_set(xp->err, sizeof(xp->err), "cannot create the connection to rank %d "
                           "(memory registration, QP or CQ limits: %s)", c->peer, strerror(errno));
        goto fail;
    }
    rc = RDMA_XPORT_ERR;
    card[0] = '\0';
    if (xp->prm.card_of(xp->prm.arg, c->peer, card, sizeof(card))
        || rdma_verbs_card_parse(vc, card)) {
        rdma_verbs_err_set(xp->err, sizeof(xp->err), "no valid verbs address for rank %d "
                           "(business card fragment '%s')", c->peer, card);
        goto fail;
    }
    vc->ah = ibv_create_ah(xp->pd, &vc->path);
    if (!vc->ah) {
        rdma_verbs_err_set(xp->err, sizeof(xp->err), "cannot create an address handle for "
                           "rank %d: %s", c->peer, strerror(errno));
        goto fail;
    }
    *vcp = vc;
    return RDMA_XPORT_OK;
  fail:
    rdma_verbs_conn_release(vc);
    return rc;
}

static void rdma_verbs_timer_arm(rdma_verbs_conn_t * vc, rdma_verbs_cm_t cm)
{
    double now = rdma_verbs_now();

    if (vc->cm != RDMA_VERBS_CM_REQ_SENT && vc->cm != RDMA_VERBS_CM_REP_SENT)
        vc->xp->n_connecting++;
    vc->cm = cm;
    vc->backoff = 0.1;
    vc->t_retx = now + vc->backoff;
    vc->t_deadline = now + vc->xp->prm.timeout;
}

static void rdma_verbs_conn_ready(rdma_verbs_conn_t * vc)
{
    vc->xp->n_connecting--;
    vc->cm = RDMA_VERBS_CM_READY;
    vc->c->state = RDMA_CONN_READY;
    if (vc->xp->prm.conn_ready)
        vc->xp->prm.conn_ready(vc->xp->prm.arg, vc->c);
}

static const rb_xport_ops_t rdma_verbs_pipe_ops;

/* The peer's REQ or REP is known: pick the mode, set up the pipe and the
 * receives (before RTR, so nothing can land before), go RTR + RTS. */
static int rdma_verbs_conn_pair(rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    rdma_xport_t *xp = vc->xp;
    rb_config_t cfg = xp->prm.ring_rdma;
    uint32_t i;

    if (m->ring_size != cfg.ring_size || m->chunk_size != cfg.chunk_size
        || m->basic != (cfg.mode == RB_MODE_BASIC)) {
        rdma_verbs_conn_fail(vc, "rank %d uses another ring geometry or mode (ring %llu, chunk "
                             "%llu)", vc->c->peer, (unsigned long long) m->ring_size,
                             (unsigned long long) m->chunk_size);
        return -1;
    }
    vc->remote = *m;
    vc->completion = m->basic || !(vc->in_order_local && m->in_order);
    if (m->rd_atomic < vc->max_rd_atomic)
        vc->max_rd_atomic = m->rd_atomic;
    cfg.completion_driven = vc->completion;
    xp->flag_polled |= !vc->completion;     /* sticky: see rdma_verbs_wait_arm */
    if (rb_pipe_init(&vc->c->pipe, &cfg, &rdma_verbs_pipe_ops, vc, vc->stage.buf,
                     &((rdma_verbs_ctl_t *) vc->ctl.buf)->tail_word, vc->ring.buf,
                     &((rdma_verbs_ctl_t *) vc->ctl.buf)->head_word)) {
        rdma_verbs_conn_fail(vc, "rb_pipe_init failed for rank %d", vc->c->peer);
        return -1;
    }
    for (i = 0; vc->completion && i < vc->rq_depth; i++)
        if (rdma_verbs_rq_post(vc))
            break;
    if ((vc->completion && i < vc->rq_depth) || rdma_verbs_qp_rtr_rts(vc)) {
        rdma_verbs_conn_fail(vc, "cannot connect the QP to rank %d: %s", vc->c->peer,
                             strerror(errno));
        return -1;
    }
    return 0;
}

static void rdma_verbs_cm_req(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_conn_t *c = xp->prm.conn_of(xp->prm.arg, m->src);
    rdma_verbs_conn_t *vc;

    if (!c || (c->priv && c->xport != xp))
        return;
    vc = c->priv;
    if (!vc) {
        if (rdma_verbs_conn_create(xp, c, &vc)) {
            c->state = RDMA_CONN_FAILED;
            xp->new_failures++;
            return;
        }
        c->state = RDMA_CONN_CONNECTING;
    }
    switch (vc->cm) {
    case RDMA_VERBS_CM_REQ_SENT:
        if (xp->prm.rank < m->src)
            return;     /* our REQ wins; the peer answers it */
        /* fallthrough */
    case RDMA_VERBS_CM_NONE:
        vc->initiator = 0;
        if (rdma_verbs_conn_pair(vc, m))
            return;
        rdma_verbs_timer_arm(vc, RDMA_VERBS_CM_REP_SENT);
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REP);
        return;
    case RDMA_VERBS_CM_REP_SENT:
    case RDMA_VERBS_CM_READY:
        if (m->qpn == vc->remote.qpn && m->token == vc->remote.token)
            rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REP);
        return;
    case RDMA_VERBS_CM_DEAD:
        return;
    }
}

static void rdma_verbs_cm_rep(rdma_verbs_conn_t * vc, const rdma_verbs_msg_t * m)
{
    if (vc->cm == RDMA_VERBS_CM_REQ_SENT) {
        if (rdma_verbs_conn_pair(vc, m))
            return;
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_RTU);
        rdma_verbs_conn_ready(vc);
    } else if (vc->cm == RDMA_VERBS_CM_READY && vc->initiator && m->qpn == vc->remote.qpn)
        rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_RTU);
}

static void rdma_verbs_cm_dispatch(rdma_xport_t * xp, const rdma_verbs_msg_t * m)
{
    rdma_verbs_conn_t *vc;

    if (m->magic != RDMA_VERBS_MAGIC || m->auth != xp->auth) {
        xp->cm_dropped++;
        return;
    }
    if (m->dst != xp->prm.rank || m->src < 0 || m->src >= xp->prm.size)
        return;
    if (m->type == RDMA_VERBS_MSG_REQ) {
        rdma_verbs_cm_req(xp, m);
        return;
    }
    vc = rdma_verbs_conn_lookup(xp, m->echo);
    if (!vc || vc->c->peer != m->src)
        return;
    if (m->type == RDMA_VERBS_MSG_REP)
        rdma_verbs_cm_rep(vc, m);
    else if (m->type == RDMA_VERBS_MSG_RTU && vc->cm == RDMA_VERBS_CM_REP_SENT
             && m->qpn == vc->remote.qpn)
        rdma_verbs_conn_ready(vc);
}

/* Retransmissions, deadlines and implied RTUs of connecting connections. */
static void rdma_verbs_timer_run(rdma_xport_t * xp, double now)
{
    uint32_t i;

    for (i = 0; i < xp->nslots && xp->n_connecting > 0; i++) {
        rdma_verbs_conn_t *vc = xp->slots[i];
        if (!vc || (vc->cm != RDMA_VERBS_CM_REQ_SENT && vc->cm != RDMA_VERBS_CM_REP_SENT))
            continue;
        if (vc->rtu_implied && vc->cm == RDMA_VERBS_CM_REP_SENT)
            rdma_verbs_conn_ready(vc);
        else if (now >= vc->t_deadline)
            rdma_verbs_conn_fail(vc, "rank %d did not answer the connection request within "
                                 "%g s (dead peer or unreachable)", vc->c->peer,
                                 xp->prm.timeout);
        else if (now >= vc->t_retx) {
            vc->backoff = vc->backoff < 1.0 ? 2 * vc->backoff : 2.0;
            vc->t_retx = now + vc->backoff;
            rdma_verbs_ud_send(vc, vc->cm == RDMA_VERBS_CM_REQ_SENT ?
                               RDMA_VERBS_MSG_REQ : RDMA_VERBS_MSG_REP);
        }
    }
}

/* ------------------------------------------------------ posting writes */

/* Wait (polling the CQ, bounded by prm->timeout) until more than keep
 * send-queue slots are free. */
static int rdma_verbs_sq_wait(rdma_verbs_conn_t * vc, uint32_t keep)
{
    double limit = 0;
    unsigned spins = 0;

    while (vc->sq_free <= keep) {
        if (vc->cm == RDMA_VERBS_CM_DEAD)
            return -1;
        rdma_verbs_cq_poll(vc->xp);
        if ((++spins & 1023) == 0) {
            double now = rdma_verbs_now();
            if (limit == 0)
                limit = now + vc->xp->prm.timeout;
            else if (now > limit) {
                rdma_verbs_conn_fail(vc, "send queue to rank %d made no progress for %g s",
                                     vc->c->peer, vc->xp->prm.timeout);
                return -1;
            }
        }
    }
    return 0;
}

/* One RDMA write (with immediate imm if imm != 0) of a frame or a word, or
 * (imm < 0) one RDMA read.  Data writes and reads leave the reserve free
 * for credit/head/keepalive words. */
static int rdma_verbs_post(rdma_verbs_conn_t * vc, uint64_t laddr, uint32_t lkey,
                           uint32_t len, uint64_t raddr, uint32_t rkey, int imm, int flags)
{
    uint32_t keep = flags & RDMA_VERBS_POST_LEAVE_RESERVE ? RDMA_VERBS_SQ_RESERVE : 0;
    struct ibv_sge sge = {.addr = laddr, .length = len, .lkey = lkey };
    struct ibv_send_wr wr = {
        .wr_id = vc->token, .sg_list = &sge, .num_sge = 1,
        .opcode = imm < 0 ? IBV_WR_RDMA_READ : imm ? IBV_WR_RDMA_WRITE_WITH_IMM :
            IBV_WR_RDMA_WRITE,
        .imm_data = htonl((uint32_t) (imm > 0 ? imm : 0)),
        .send_flags = imm >= 0 && len <= vc->max_inline ? IBV_SEND_INLINE : 0,
        .wr.rdma = {.remote_addr = raddr, .rkey = rkey}
    }, *bad;
    int rc;

    if (vc->sq_free <= keep && rdma_verbs_sq_wait(vc, keep))
        return -1;
    vc->sq_free--;
    if (++vc->unsig >= RDMA_VERBS_SIG_EVERY || vc->sq_free <= RDMA_VERBS_SQ_RESERVE
        || (flags & RDMA_VERBS_POST_SIGNAL)) {
        wr.send_flags |= IBV_SEND_SIGNALED;
        vc->sig_fifo[vc->sig_head++ % vc->sq_depth] = vc->unsig;
        vc->unsig = 0;
    }
    rc = ibv_post_send(vc->qp, &wr, &bad);
    if (rc)
        rdma_verbs_conn_fail(vc, "connection to rank %d failed: ibv_post_send: %s", vc->c->peer,
                             strerror(rc));
    return rc ? -1 : 0;
}

static int rdma_verbs_pipe_write(void *ctx, size_t off, size_t len, unsigned frames)
{
    rdma_verbs_conn_t *vc = ctx;

    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return -1;
    return rdma_verbs_post(vc, (uintptr_t) vc->stage.buf + off, vc->stage.mr->lkey,
                                 (uint32_t) len, vc->remote.ring_addr + off,
                                 vc->remote.ring_rkey,
                                 vc->completion ? RDMA_VERBS_IMM_FRAME | (int) frames << 2 : 0,
                                 RDMA_VERBS_POST_LEAVE_RESERVE);
}

/* Credit/head: 8 bytes into the peer's ctl block, from our registered word
 * (values only grow, so a later value in the source slot is harmless). */
static int rdma_verbs_word_write(rdma_verbs_conn_t * vc, uint64_t * src, size_t roff, int imm,
                                 int flags)
{
    if (vc->cm == RDMA_VERBS_CM_DEAD)
        return -1;
    return rdma_verbs_post(vc, (uintptr_t) src, vc->ctl.mr->lkey, sizeof(*src),
                                 vc->remote.ctl_addr + roff, vc->remote.ctl_rkey,
                                 vc->completion ? imm : 0, flags);
}

static int rdma_verbs_pipe_credit(void *ctx, uint64_t tail)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;

    ctl->src_credit = vc->last_credit = tail;
    return rdma_verbs_word_write(vc, &ctl->src_credit, offsetof(rdma_verbs_ctl_t, tail_word),
                                 RDMA_VERBS_IMM_CREDIT, 0);
}

static int rdma_verbs_pipe_head(void *ctx, uint64_t head)
{
    rdma_verbs_conn_t *vc = ctx;
    rdma_verbs_ctl_t *ctl = vc->ctl.buf;

    ctl->src_head = head;
    return rdma_verbs_word_write(vc, &ctl->src_head, offsetof(rdma_verbs_ctl_t, head_word),
                                 RDMA_VERBS_IMM_HEAD, 0);
}

static const rb_xport_ops_t rdma_verbs_pipe_ops = {
    .write = rdma_verbs_pipe_write,
    .credit = rdma_verbs_pipe_credit,
    .head = rdma_verbs_pipe_head
};

/* READY connections without a signalled WR in flight: rewrite the last
 * credit (signalled, no immediate) so that a dead peer shows up as a
 * retry-exceeded completion; this also reclaims unsignalled slots. */
static void rdma_verbs_keepalive(rdma_xport_t * xp)
{
    uint32_t i;

    for (i = 0; i < xp->nslots; i++) {
        rdma_verbs_conn_t *vc = xp->slots[i];
        if (!vc || vc->cm != RDMA_VERBS_CM_READY || vc->sig_head != vc->sig_tail)
            continue;
        rdma_verbs_ctl_t *ctl = vc->ctl.buf;
        ctl->src_credit = vc->last_credit;
        rdma_verbs_word_write(vc, &ctl->src_credit, offsetof(rdma_verbs_ctl_t, tail_word), 0,
                              RDMA_VERBS_POST_SIGNAL);
    }
}

/* ----------------------------------------------- zero-copy: RDMA read */

/* rcache backend (ctx: rdma_verbs_rc_t).  Watch before registering: an
 * unmap in between cannot be missed (the registration then fails or its
 * event is queued).  Memory that cannot be watched (file-backed, e.g. an
 * executable's .data) is registered for one use only. */
static int rdma_verbs_rc_reg(void *ctx, void *addr, size_t len, void **mr, uint64_t * key)
{
    rdma_verbs_rc_t *vr = ctx;
    int once = vr->xp->memev_on && memev_watch(addr, len) != MEMEV_OK;
    struct ibv_mr *m = ibv_reg_mr(vr->xp->pd, addr, len, vr->access);

    if (!m)
        return errno ? -errno : -ENOMEM;
    *mr = m;
    *key = m->rkey;
    return once ? RCACHE_REG_ONCE : 0;
}

static void rdma_verbs_rc_dereg(void *ctx, void *mr)
{
    (void) ctx;
    ibv_dereg_mr(mr);
}

/* A released range invalidates both caches (arg: the xport). */
static void rdma_verbs_rc_inval(void *arg, uintptr_t start, size_t len)
{
    rdma_xport_t *xp = arg;

    rcache_invalidate(xp->rc_src.rc, start, len);
    rcache_invalidate(xp->rc_dst.rc, start, len);
}

static void rdma_verbs_rc_flush(void *arg)
{
    rdma_xport_t *xp = arg;

    rcache_flush(xp->rc_src.rc);
    rcache_flush(xp->rc_dst.rc);
}

static void rdma_verbs_rc_drain(void *ctx, rcache_t * rc)
{
    rdma_xport_t *xp = ((rdma_verbs_rc_t *) ctx)->xp;

    (void) rc;
    if (xp->memev_on)
        memev_drain(rdma_verbs_rc_inval, rdma_verbs_rc_flush, xp);
}

static const rcache_ops_t rdma_verbs_rc_ops = {
    rdma_verbs_rc_reg, rdma_verbs_rc_dereg, rdma_verbs_rc_drain
};

static int rdma_verbs_rc_open(rdma_xport_t * xp)
{
    rcache_config_t cfg = { xp->prm.rcache_max_bytes, xp->prm.rcache_max_entries, 1 };

    xp->memev_on = memev_open(xp->memev_err, sizeof(xp->memev_err)) == MEMEV_OK;
    cfg.cache = xp->memev_on;
    xp->rc_src = (rdma_verbs_rc_t) { xp, NULL, IBV_ACCESS_REMOTE_READ };
    xp->rc_dst = (rdma_verbs_rc_t) { xp, NULL, IBV_ACCESS_LOCAL_WRITE };
    if (rcache_create(&cfg, &rdma_verbs_rc_ops, &xp->rc_src, &xp->rc_src.rc))
        return -1;
    if (rcache_create(&cfg, &rdma_verbs_rc_ops, &xp->rc_dst, &xp->rc_dst.rc) == RCACHE_OK)
        return 0;
    rcache_destroy(xp->rc_src.rc);
    return -1;
}

static void rdma_verbs_rc_close(rdma_xport_t * xp)
{
    rcache_destroy(xp->rc_src.rc);
    rcache_destroy(xp->rc_dst.rc);
    if (xp->memev_on)
        memev_close();
}

/* A region of cache vr for [addr, addr+len), or -1 after saying once why
 * not. */
static int rdma_verbs_rc_get(rdma_verbs_rc_t * vr, const void *addr, size_t len,
                             rcache_region_t ** r, int *hit)
{
    rdma_xport_t *xp = vr->xp;
    int e;

    if (!xp->memev_on && !xp->said_memev++)
        fprintf(stderr, "[ch3:rdma] rank %d: registration cache off (%s): every zero-copy "
                "message registers its buffers anew\n", xp->prm.rank, xp->memev_err);
    e = rcache_get(vr->rc, addr, len, r, hit);
    if (e == RCACHE_OK)
        return 0;
    e = e == RCACHE_ERR_REG ? rcache_reg_errno(vr->rc) : ENOMEM;
    rdma_verbs_err_set(xp->err, sizeof(xp->err), "cannot register %zu bytes at %p: %s%s", len,
                       addr, strerror(e), e == ENOMEM || e == EAGAIN ?
                       " (memlock or NIC limit: raise ulimit -l or lower "
                       "MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB)" : "");
    /* limits deserve a notice; memory that cannot be registered at all
     * (e.g. read-only) just takes the copy path (VERBOSE counts it) */
    if ((e == ENOMEM || e == EAGAIN) && !xp->said_reg++)
        fprintf(stderr, "[ch3:rdma] rank %d: %s; using the copy path\n", xp->prm.rank, xp->err);
    return -1;
}

static int rdma_verbs_expose(void *ctx, const void *addr, size_t len, uint64_t * key,
                             void **handle, int *hit)
{
    rdma_conn_t *c = ctx;
    rcache_region_t *r;

    if (rdma_verbs_rc_get(&c->xport->rc_src, addr, len, &r, hit))
        return -1;
    *key = r->key;
    *handle = r;
    return 0;
}

static void rdma_verbs_unexpose(void *ctx, void *handle)
{
    rcache_put(((rdma_conn_t *) ctx)->xport->rc_src.rc, handle);
}

/* The receive region for a read into [at, at+len): registered for the
 * rest of len within at's window (see the top), so the window's later
 * reads hit it.  *k is cut back to end at the window's end. */
static int rdma_verbs_dst_get(rdma_xport_t * xp, char *at, size_t len, size_t *k,
                              rcache_region_t ** r)
{
    size_t w = RDMA_VERBS_REG_WINDOW - ((uintptr_t) at & (RDMA_VERBS_REG_WINDOW - 1));

    w = w < len ? w : len;
    *k = *k < w ? *k : w;
    return rdma_verbs_rc_get(&xp->rc_dst, at, w, r, NULL);
}

int rdma_xport_verbs_dst_key(rdma_xport_t * xp, void *addr, size_t len, uint64_t * key,
                             void **handle)
{
    size_t k = len;
    rcache_region_t *r;

    if (rdma_verbs_dst_get(xp, addr, len, &k, &r))
        return -1;
    *key = r->key;
    *handle = r;
    return 0;
}

void rdma_xport_verbs_dst_put(rdma_xport_t * xp, void *handle)
{
    rcache_put(xp->rc_dst.rc, handle);
}

static uint32_t rdma_verbs_reads_max(const rdma_verbs_conn_t * vc)
{
    return vc->max_rd_atomic < RDMA_VERBS_READS_MAX ? (uint32_t) vc->max_rd_atomic :
        RDMA_VERBS_READS_MAX;
}

/* Post reads into dst while the read and send-queue limits allow.  A
 * destination that cannot be registered refuses the pull if nothing of
 * it is in flight (the sender then uses the ring), else waits. */
static int rdma_verbs_pull(void *ctx, const struct iovec *dst, int n, uint64_t raddr,
                           uint64_t key, size_t len, size_t *posted)
{
    rdma_conn_t *c = ctx;
    rdma_verbs_conn_t *vc = c->priv;
    size_t off = 0, k;
    rcache_region_t *r;
    int i = 0;

    *posted = 0;
    if (rdma_verbs_reads_max(vc) == 0)
        return ZC_PULL_REFUSED;
    while (i < n && *posted < len && vc->rd_head - vc->rd_tail < rdma_verbs_reads_max(vc)
           && vc->sq_free > RDMA_VERBS_SQ_RESERVE + 1) {
        char *at = (char *) dst[i].iov_base + off;
        size_t rest = dst[i].iov_len - off;

        rest = rest < len - *posted ? rest : len - *posted;
        k = rest < RDMA_VERBS_READ_MAX ? rest : RDMA_VERBS_READ_MAX;
        if (rdma_verbs_dst_get(vc->xp, at, rest, &k, &r))
            return *posted == 0 && vc->rd_head == vc->rd_tail ? ZC_PULL_REFUSED : ZC_PULL_OK;
        if (rdma_verbs_post(vc, (uintptr_t) at, ((struct ibv_mr *) r->mr)->lkey, (uint32_t) k,
                            raddr + *posted, (uint32_t) key, -1,
                            RDMA_VERBS_POST_LEAVE_RESERVE | RDMA_VERBS_POST_SIGNAL)) {
            rcache_put(vc->xp->rc_dst.rc, r);
            return ZC_PULL_FAILED;
        }
        vc->reads[vc->rd_head % RDMA_VERBS_READS_MAX].len = (uint32_t) k;
        vc->reads[vc->rd_head++ % RDMA_VERBS_READS_MAX].reg = r;
        *posted += k;
        off += k;
        if (off == dst[i].iov_len) {
            i++;
            off = 0;
        }
    }
    return ZC_PULL_OK;
}

static void rdma_verbs_read_done(rdma_verbs_conn_t * vc)
{
    uint32_t t = vc->rd_tail++ % RDMA_VERBS_READS_MAX;

    rcache_put(vc->xp->rc_dst.rc, vc->reads[t].reg);
    zc_pulled(&vc->c->zc, vc->reads[t].len);
}

/* No split copy: both halves would cross the same link. */
static const zc_ops_t rdma_verbs_zc_ops = {
    rdma_verbs_expose, rdma_verbs_unexpose, rdma_verbs_pull, NULL
};

static int rdma_verbs_rc_stats(const rdma_verbs_rc_t * vr, const char *what, char *buf,
                               size_t len)
{
    rcache_stats_t st;

    rcache_stats_get(vr->rc, &st);
    return snprintf(buf, len, "%s: hits %llu misses %llu evictions %llu invalidations "
                    "%llu uncached %llu failures %llu; %zu regions (%zu B), %zu idle", what,
                    (unsigned long long) st.hits, (unsigned long long) st.misses,
                    (unsigned long long) st.evictions, (unsigned long long) st.invalidations,
                    (unsigned long long) st.uncached, (unsigned long long) st.reg_failures,
                    st.regions, st.bytes, st.idle_regions);
}

static int rdma_verbs_stats(const rdma_xport_t * xp, char *buf, size_t len)
{
    int n = snprintf(buf, len, "rcache %s, ", xp->memev_on ? "on" : "off");

    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_rc_stats(&xp->rc_src, "send", buf + n, len - n);
    if (n >= 0 && (size_t) n + 2 < len)
        n += snprintf(buf + n, len - n, "; ");
    if (n >= 0 && (size_t) n < len)
        n += rdma_verbs_rc_stats(&xp->rc_dst, "receive", buf + n, len - n);
    if (n >= 0 && (size_t) n < len)
        n += snprintf(buf + n, len - n, "; cm: %llu datagrams without our auth dropped",
                      (unsigned long long) xp->cm_dropped);
    return n;
}

/* --------------------------------------------------------- completions */

static void rdma_verbs_wc_ud(rdma_xport_t * xp, const struct ibv_wc *wc)
{
    if (wc->wr_id >= RDMA_VERBS_UD_NRECV)
        xp->ud_send_free++;
    else if (wc->status == IBV_WC_SUCCESS && wc->byte_len >= RDMA_VERBS_GRH +
             sizeof(rdma_verbs_msg_t))
        xp->ud_pending[xp->n_pending++] = (uint32_t) wc->wr_id; /* handled by progress */
    else
        rdma_verbs_ud_post_recv(xp, (uint32_t) wc->wr_id);
}

static void rdma_verbs_wc_rc(rdma_verbs_conn_t * vc, const struct ibv_wc *wc)
{
    if (wc->status != IBV_WC_SUCCESS) {
        rdma_verbs_conn_fail(vc, "connection to rank %d failed: %s (peer dead or unreachable)",
                             vc->c->peer, ibv_wc_status_str(wc->status));
        return;
    }
    if (!(wc->opcode & IBV_WC_RECV)) {
        vc->sq_free += vc->sig_fifo[vc->sig_tail++ % vc->sq_depth];
        if (wc->opcode == IBV_WC_RDMA_READ)
            rdma_verbs_read_done(vc);
        return;
    }
    if (vc->cm == RDMA_VERBS_CM_REP_SENT)
        vc->rtu_implied = 1;
    if ((ntohl(wc->imm_data) & 3) == RDMA_VERBS_IMM_FRAME)
        rb_pipe_landed(&vc->c->pipe, ntohl(wc->imm_data) >> 2);
    if (rdma_verbs_rq_post(vc))
        rdma_verbs_conn_fail(vc, "connection to rank %d failed: cannot repost a receive",
                             vc->c->peer);
}

/* One batch.  Safe to call from inside a pipe write: it only updates
 * counters, lands frames and queues CM messages for progress(). */
static int rdma_verbs_cq_poll(rdma_xport_t * xp)
{
    struct ibv_wc wc[RDMA_VERBS_POLL_BATCH];
    int i, n = ibv_poll_cq(xp->cq, RDMA_VERBS_POLL_BATCH, wc);

    for (i = 0; i < n; i++) {
        if (wc[i].qp_num == xp->ud->qp_num)
            rdma_verbs_wc_ud(xp, &wc[i]);
        else {
            rdma_verbs_conn_t *vc = rdma_verbs_conn_lookup(xp, wc[i].wr_id);
            if (vc && vc->cm != RDMA_VERBS_CM_DEAD)
                rdma_verbs_wc_rc(vc, &wc[i]);
        }
    }
    return n;
}

/* -------------------------------------------------------------- ops */

/* The CQ's event channel, non-blocking: rdma_verbs_wait polls its fd. */
static int rdma_verbs_chan_open(rdma_xport_t * xp)
{
    int fl;

    if (!(xp->chan = ibv_create_comp_channel(xp->ctx)))
        return -1;
    fl = fcntl(xp->chan->fd, F_GETFL);
    return fl < 0 || fcntl(xp->chan->fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : 0;
}

static int rdma_verbs_open(const rdma_xport_params_t * prm, rdma_xport_t ** xpp, char *card,
                           size_t cardlen, char *err, size_t errlen)
{
    rdma_xport_t *xp;
    const char *what = "?";
    int rc;

    if (rb_config_check(&prm->ring_rdma, &what)) {
        rdma_verbs_err_set(err, errlen, "invalid ring configuration (%s)", what);
        return RDMA_XPORT_ERR;
    }
    if ((rc = rdma_verbs_memlock_check(prm, err, errlen)))
        return rc;
    xp = calloc(1, sizeof(*xp));
    if (!xp) {
        rdma_verbs_err_set(err, errlen, "out of memory");
        return RDMA_XPORT_ENOMEM;
    }
    xp->prm = *prm;
    if (xp->prm.timeout <= 0)
        xp->prm.timeout = 30;
    xp->qp_timeout = rdma_verbs_qp_timeout(xp->prm.timeout);
    xp->inline_req = (uint32_t) prm->inline_size;
    /* test/diagnostic only: flag polling although the device does not say
     * it is safe (see the ordering notes at the top) */
    xp->in_order_override = getenv("CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER") != NULL;
    xp->t_keepalive = rdma_verbs_now() + xp->prm.timeout / 4;
    xp->rng[0] = (unsigned short) getpid();
    xp->rng[1] = (unsigned short) time(NULL);
    xp->rng[2] = (unsigned short) (uintptr_t) xp;
    if (rdma_verbs_cm_keys(xp)) {
        rdma_verbs_err_set(err, errlen, "cannot draw the connection keys: getrandom: %s",
                           strerror(errno));
        rc = RDMA_XPORT_ERR;
        goto err_free;
    }
    xp->fork_mode = rdma_xport_verbs_fork_mode(rdma_verbs_fork_query, ibv_fork_init);
    if (!strcmp(xp->fork_mode, "unprotected"))
        fprintf(stderr, "[ch3:rdma] rank %d: ibv_fork_init failed: memory registered for RDMA "
                "is not protected against fork() (system(), popen()) on this kernel\n",
                prm->rank);
    if ((rc = rdma_verbs_dev_open(xp, err, errlen)))
        goto err_free;
    rc = RDMA_XPORT_ERR;
    if (ibv_query_device(xp->ctx, &xp->dev) || rdma_verbs_gid_pick(xp)) {
        rdma_verbs_err_set(err, errlen, "cannot query %s port %u: %s",
                           ibv_get_device_name(xp->ctx->device), xp->port, strerror(errno));
        goto err_close;
    }
    xp->cq_size = xp->cq_need = RDMA_VERBS_CQ_BASE;
    if (!(xp->pd = ibv_alloc_pd(xp->ctx)))
        what = "ibv_alloc_pd";
    else if (rdma_verbs_chan_open(xp))
        what = "ibv_create_comp_channel";
    else if (!(xp->cq = ibv_create_cq(xp->ctx, xp->cq_size, NULL, xp->chan, 0)))
        what = "ibv_create_cq";
    else if (rdma_verbs_ud_create(xp))
        what = "the connection-manager UD QP";
    else if (rdma_verbs_rc_open(xp))
        what = "the registration cache";
    else {
        rdma_verbs_card_format(xp, card, cardlen);
        *xpp = xp;
        return RDMA_XPORT_OK;
    }
    rdma_verbs_err_set(err, errlen, "cannot set up %s: %s failed: %s",
                       ibv_get_device_name(xp->ctx->device), what, strerror(errno));
    rc = RDMA_XPORT_ENOMEM;
    if (xp->memev_on)   /* unwind in reverse order; the caches failed */
        memev_close();
    if (xp->ud)
        ibv_destroy_qp(xp->ud);
    rdma_verbs_mem_free(&xp->udm);
    if (xp->cq)
        ibv_destroy_cq(xp->cq);
    if (xp->chan)
        ibv_destroy_comp_channel(xp->chan);
    if (xp->pd)
        ibv_dealloc_pd(xp->pd);
  err_close:
    ibv_close_device(xp->ctx);
  err_free:
    free(xp);
    return rc;
}

static int rdma_verbs_connect(rdma_xport_t * xp, rdma_conn_t * c)
{
    rdma_verbs_conn_t *vc = c->priv;
    int rc;

    if (vc)     /* the peer connected to us first */
        return vc->cm == RDMA_VERBS_CM_DEAD ? RDMA_XPORT_EPEER : RDMA_XPORT_OK;
    if ((rc = rdma_verbs_conn_create(xp, c, &vc)))
        return rc;
    c->state = RDMA_CONN_CONNECTING;
    vc->initiator = 1;
    rdma_verbs_timer_arm(vc, RDMA_VERBS_CM_REQ_SENT);
    rdma_verbs_ud_send(vc, RDMA_VERBS_MSG_REQ);
    return RDMA_XPORT_OK;
}

static int rdma_verbs_progress(rdma_xport_t * xp)
{
    int i, n;
    double now;

    for (i = 0; i < 4; i++) {
        n = rdma_verbs_cq_poll(xp);
        if (n < 0) {
            rdma_verbs_err_set(xp->err, sizeof(xp->err), "ibv_poll_cq failed on %s",
                               ibv_get_device_name(xp->ctx->device));
            return RDMA_XPORT_ERR;
        }
        if (n < RDMA_VERBS_POLL_BATCH)
            break;
    }
    while (xp->n_pending) {
        uint32_t b = xp->ud_pending[--xp->n_pending];
        rdma_verbs_cm_dispatch(xp, (const rdma_verbs_msg_t *)
                               (rdma_verbs_ud_slot(xp, b) + RDMA_VERBS_GRH));
        rdma_verbs_ud_post_recv(xp, b);
    }
    /* Timers need the clock; keepalives (every timeout/4 s) only now and
     * then: keep clock_gettime off most polls of READY connections. */
    if (xp->n_connecting || (xp->nslots && (++xp->polls & 255) == 0)) {
        now = rdma_verbs_now();
        if (xp->n_connecting)
            rdma_verbs_timer_run(xp, now);
        if (now >= xp->t_keepalive) {
            xp->t_keepalive = now + xp->prm.timeout / 4;
            rdma_verbs_keepalive(xp);
        }
    }
    if (xp->new_failures) {
        xp->new_failures = 0;
        return RDMA_XPORT_EPEER;
    }
    return RDMA_XPORT_OK;
}

static int rdma_verbs_close(rdma_xport_t * xp, rdma_conn_t * c)
{
    (void) xp;
    if (c->priv)
        rdma_verbs_conn_release(c->priv);
    c->state = RDMA_CONN_CLOSED;
    return RDMA_XPORT_OK;
}

static int rdma_verbs_finalize(rdma_xport_t * xp)
{
    uint32_t i;

    for (i = 0; i < xp->nslots; i++)
        if (xp->slots[i])
            rdma_verbs_close(xp, xp->slots[i]->c);
    free(xp->slots);
    free(xp->gens);
    rdma_verbs_rc_close(xp);
    ibv_destroy_qp(xp->ud);
    rdma_verbs_mem_free(&xp->udm);
    ibv_destroy_cq(xp->cq);
    ibv_destroy_comp_channel(xp->chan);
    ibv_dealloc_pd(xp->pd);
    ibv_close_device(xp->ctx);
    free(xp);
    return RDMA_XPORT_OK;
}

/* ---- blocking wait ----
 * Every arrival on a completion-driven connection, every read or
 * signalled-write completion and every CM datagram is a CQE on xp->cq, so
 * a CQ event wakes the waiter.  Arm, then the owner polls once more (a CQE
 * that came before the arm is found by that poll, one after it raises the
 * event).  Flag-polled arrivals raise nothing: once a connection polls
 * memory, wait_arm declines and the owner sleeps in short steps. */
static int rdma_verbs_wait_arm(rdma_xport_t * xp)
{
    return !xp->flag_polled && ibv_req_notify_cq(xp->cq, 0) == 0;
}

/* Nothing to undo: an event that fires later makes one wait return early. */
static void rdma_verbs_wait_disarm(rdma_xport_t * xp)
{
    (void) xp;
}

/* Sleep until a CQ event or timeout_us; consume every pending event. */
static void rdma_verbs_wait(rdma_xport_t * xp, long timeout_us)
{
    struct pollfd p = { .fd = xp->chan->fd, .events = POLLIN };
    struct timespec ts = { timeout_us / 1000000, (timeout_us % 1000000) * 1000 };
    struct ibv_cq *cq;
    void *ctx;

    if (ppoll(&p, 1, &ts, NULL) != 1) {
        xp->polls |= 255;       /* idle: the next progress runs the timers */
        return;
    }
    while (ibv_get_cq_event(xp->chan, &cq, &ctx) == 0)
        ibv_ack_cq_events(cq, 1);
}

static const char *rdma_verbs_error(const rdma_xport_t * xp)
{
    return xp->err;
}

/* "flag-poll" or "write-imm" once READY; "unknown" before */
static const char *rdma_verbs_mode(const rdma_conn_t * c)
{
    const rdma_verbs_conn_t *vc = c->priv;
    if (!vc || vc->cm != RDMA_VERBS_CM_READY)
        return "unknown";
    return vc->completion ? "write-imm" : "flag-poll";
}

/* One line: mode, in-order answers, inline granted, max_rd_atomic, MTU. */
static int rdma_verbs_describe(const rdma_conn_t * c, char *buf, size_t len)
{
    const rdma_verbs_conn_t *vc = c->priv;
    if (!vc)
        return snprintf(buf, len, "not connected");
    return snprintf(buf, len, "verbs mode=%s in_order=%d/%d%s inline=%u max_rd_atomic=%d mtu=%d "
                    "sq=%u/%u signalled=%u rq=%u qp_timeout=%d dev=%s gid_index=%d cm=%d "
                    "fork=%s",
                    rdma_verbs_mode(c), vc->in_order_local, vc->remote.in_order,
                    vc->xp->in_order_override ? "(unsafe override)" : "", vc->max_inline,
                    vc->max_rd_atomic, 128 << vc->xp->pattr.active_mtu, vc->sq_free,
                    vc->sq_depth, vc->sig_head - vc->sig_tail, vc->rq_depth, vc->xp->qp_timeout,
                    ibv_get_device_name(vc->xp->ctx->device), vc->xp->gid_index, vc->cm,
                    vc->xp->fork_mode);
}

const rdma_xport_ops_t rdma_xport_verbs = {
    .name = "verbs",
    .open = rdma_verbs_open,
    .connect = rdma_verbs_connect,
    .progress = rdma_verbs_progress,
    .close = rdma_verbs_close,
    .finalize = rdma_verbs_finalize,
    .error = rdma_verbs_error,
    .describe = rdma_verbs_describe,
    .wait_arm = rdma_verbs_wait_arm,
    .wait = rdma_verbs_wait,
    .wait_disarm = rdma_verbs_wait_disarm,
    .zc = &rdma_verbs_zc_ops,
    .stats = rdma_verbs_stats
};

