/*
 * verbs_selftest: check a verbs device (rxe0 by default) with plain libibverbs.
 *
 * Two processes (fork; QP info and check requests go over a socketpair) connect an RC QP
 * over the device. The client then does RDMA WRITE, RDMA READ and RDMA WRITE WITH
 * IMMEDIATE into/from the server's buffer for several sizes; every byte is verified and
 * so are the bytes just past the transfer. Prints "op <name>: PASS|FAIL" per operation
 * and what ibv_query_qp_data_in_order() reports. Exit status 0 if everything passed.
 *
 * With "lat", the two processes run a ping-pong instead, on ch3:rdma's wire pattern without
 * MPI: each message is one frame of SIZE + 40 bytes (48 for an 8-byte MPI message), inline
 * when it fits, in the next 64-byte-aligned slot of the peer's 512 KiB ring; every 16th send
 * signalled, receives reposted 16 at a time. "imm": RDMA WRITE WITH IMMEDIATE, found by its
 * receive completion (the channel's default); "write": RDMA WRITE, found by polling the
 * frame's last word (flag polling). The receiver verifies every frame. Prints "latency SIZE
 * US" (half a round trip, mean over ITERS after 200) per size, as mpi_bench does, and "# lat
 * ..." with the frames verified and the torn ones (last word seen first: re-read until whole).
 * A frame found by its completion that is wrong, or one not whole in 60 s, exits with 2.
 * After each frame it receives, each process writes LAT_TOUCH=N (0..65536) more pages and
 * calls LAT_CALLS=N (0..256) distinct functions (lat_calls.c).
 *
 * usage: verbs_selftest [DEVICE]
 *        verbs_selftest DEVICE lat imm|write ITERS SIZE...
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lat_calls.h"

#define MAX_SIZE (1u << 20)
#define GUARD 64
#define POLL_TIMEOUT_S 60
#define QDEPTH 64               /* send and receive queue depth */
#define LAT_INLINE 256          /* inline bytes requested (the channel's default) */

enum op { OP_WRITE, OP_READ, OP_WRITE_IMM, NUM_OPS };
static const char *op_name[NUM_OPS] = { "write", "read", "write_imm" };
static const uint32_t sizes[] = { 1, 4096, MAX_SIZE };
#define NUM_SIZES (sizeof(sizes) / sizeof(sizes[0]))

struct qp_info {
    uint32_t qpn, psn, rkey;
    uint64_t addr;
    union ibv_gid gid;
};

/* Client -> server: prepare for / check a transfer. Server -> client: ok flag. */
struct msg {
    uint32_t op, size, seed, check;
};

struct ctx {
    const char *role;
    struct ibv_context *dev;
    struct ibv_pd *pd;
    struct ibv_cq *send_cq, *recv_cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *buf;
    int gid_index, sock;
    enum ibv_mtu mtu;
    uint32_t max_inline;
};

static const char *role = "verbs_selftest";

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "verbs_selftest[%s]: ", role);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void xfer(int fd, void *p, size_t n, int out)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = out ? write(fd, (char *) p + done, n - done) : read(fd, (char *) p + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("peer connection %s", r == 0 ? "closed" : strerror(errno));
        done += (size_t) r;
    }
}

static uint8_t pattern(uint32_t seed, size_t i)
{
    return (uint8_t) (seed * 131u + i * 7u + (i >> 8) + (i >> 16));
}

static void fill(uint8_t *p, uint32_t size, uint32_t seed)
{
    for (uint32_t i = 0; i < size; i++)
        p[i] = pattern(seed, i);
}

/* Pattern in [0, size), sentinel 0xEE in the guard bytes after it. */
static int verify(const uint8_t *p, uint32_t size, uint32_t seed)
{
    for (uint32_t i = 0; i < size; i++)
        if (p[i] != pattern(seed, i)) {
            fprintf(stderr, "# mismatch at byte %u of %u: 0x%02x != 0x%02x\n", i, size, p[i],
                    pattern(seed, i));
            return 0;
        }
    for (uint32_t i = size; i < size + GUARD; i++)
        if (p[i] != 0xEE) {
            fprintf(stderr, "# byte %u past the end of a %u B transfer was overwritten\n", i, size);
            return 0;
        }
    return 1;
}

/* Prefer a RoCE v2 IPv4-mapped GID, then any RoCE v2 GID, then any valid one. */
static int pick_gid(struct ibv_context *dev, int gid_tbl_len, int verbose)
{
    static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    int best = -1, best_rank = 0;
    for (int i = 0; i < gid_tbl_len; i++) {
        struct ibv_gid_entry e;
        if (ibv_query_gid_ex(dev, 1, (uint32_t) i, &e, 0))
            continue;
        int v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
        int rank = v2 && !memcmp(e.gid.raw, v4mapped, sizeof(v4mapped)) ? 3 : v2 ? 2 : 1;
        if (rank > best_rank)
            best = i, best_rank = rank;
    }
    if (best < 0 && verbose)    /* no GID entry could be queried: try index 0 */
        printf("# no GID entry found, falling back to index 0\n");
    else if (verbose)
        printf("# gid index %d (%s)\n", best, best_rank == 3 ? "RoCE v2, IPv4-mapped" :
               best_rank == 2 ? "RoCE v2" : "fallback: first valid entry");
    return best < 0 ? 0 : best;
}

static void setup(struct ctx *c, const char *devname)
{
    int n;
    struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
    if (!list)
        die("ibv_get_device_list: %s", strerror(errno));
    for (int i = 0; i < n; i++)
        if (!devname || !strcmp(ibv_get_device_name(list[i]), devname))
            dev = dev ? dev : list[i];
    if (!dev)
        die("no verbs device %s", devname ? devname : "(any)");
    if (!(c->dev = ibv_open_device(dev)))
        die("ibv_open_device: %s", strerror(errno));
    ibv_free_device_list(list);

    struct ibv_port_attr port;
    if (ibv_query_port(c->dev, 1, &port))
        die("ibv_query_port failed");
    if (port.state != IBV_PORT_ACTIVE)
        die("port 1 is not active (state %d)", port.state);
    c->mtu = port.active_mtu;
    c->gid_index = pick_gid(c->dev, port.gid_tbl_len, !strcmp(c->role, "client"));

    if (!(c->buf = aligned_alloc(4096, MAX_SIZE + 4096)))
        die("out of memory");
    if (!(c->pd = ibv_alloc_pd(c->dev)))
        die("ibv_alloc_pd failed");
    c->mr = ibv_reg_mr(c->pd, c->buf, MAX_SIZE + GUARD, IBV_ACCESS_LOCAL_WRITE |
                       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!c->mr)
        die("ibv_reg_mr: %s (ulimit -l?)", strerror(errno));
    c->send_cq = ibv_create_cq(c->dev, 2 * QDEPTH, NULL, NULL, 0);
    c->recv_cq = ibv_create_cq(c->dev, 2 * QDEPTH, NULL, NULL, 0);
    if (!c->send_cq || !c->recv_cq)
        die("ibv_create_cq failed");
    struct ibv_qp_init_attr qa = {
        .send_cq = c->send_cq, .recv_cq = c->recv_cq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = QDEPTH, .max_recv_wr = QDEPTH, .max_send_sge = 1,
                 .max_recv_sge = 1, .max_inline_data = LAT_INLINE },
    };
    if (!(c->qp = ibv_create_qp(c->pd, &qa))) {
        qa.cap.max_inline_data = 0;     /* a device without inline sends */
        if (!(c->qp = ibv_create_qp(c->pd, &qa)))
            die("ibv_create_qp: %s", strerror(errno));
    }
    c->max_inline = qa.cap.max_inline_data;
}

static void connect_qp(struct ctx *c, const struct qp_info *remote, uint32_t my_psn)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };
    if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("modify_qp INIT failed");

    a = (struct ibv_qp_attr) { .qp_state = IBV_QPS_RTR, .path_mtu = c->mtu,
        .dest_qp_num = remote->qpn, .rq_psn = remote->psn, .max_dest_rd_atomic = 4,
        .min_rnr_timer = 12, .ah_attr = { .is_global = 1, .port_num = 1, .grh = {
            .dgid = remote->gid, .sgid_index = (uint8_t) c->gid_index, .hop_limit = 64 } } };
    if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify_qp RTR: %s", strerror(errno));

    /* timeout 17: ~0.5 s, generous, the peer may be slow under emulation */
    a = (struct ibv_qp_attr) { .qp_state = IBV_QPS_RTS, .timeout = 17, .retry_cnt = 7,
        .rnr_retry = 7, .sq_psn = my_psn, .max_rd_atomic = 4 };
    if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        die("modify_qp RTS: %s", strerror(errno));
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
    time_t end = time(NULL) + POLL_TIMEOUT_S;
    for (;;) {
        int n = ibv_poll_cq(cq, 1, wc);
        if (n < 0)
            die("ibv_poll_cq failed");
        if (n == 1)
            break;
        if (time(NULL) > end) {
            fprintf(stderr, "# no completion within %d s\n", POLL_TIMEOUT_S);
            return 0;
        }
        usleep(50);
    }
    if (wc->status != IBV_WC_SUCCESS) {
        fprintf(stderr, "# completion error: %s\n", ibv_wc_status_str(wc->status));
        return 0;
    }
    return 1;
}

/* Client: one transfer of size bytes at the start of both buffers. */
static int post_and_wait(struct ctx *c, const struct qp_info *remote, enum op op, uint32_t size,
                         uint32_t imm)
{
    static const enum ibv_wr_opcode opcode[NUM_OPS] = {
        IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE_WITH_IMM };
    static const enum ibv_wc_opcode wc_opcode[NUM_OPS] = {
        IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_RDMA_WRITE };
    struct ibv_sge sge = { .addr = (uintptr_t) c->buf, .length = size, .lkey = c->mr->lkey };
    struct ibv_send_wr wr = {
        .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = opcode[op],
        .send_flags = IBV_SEND_SIGNALED, .imm_data = imm,
        .wr.rdma = { .remote_addr = remote->addr, .rkey = remote->rkey },
    }, *bad;
    struct ibv_wc wc;
    if (ibv_post_send(c->qp, &wr, &bad))
        die("ibv_post_send: %s", strerror(errno));
    if (!poll_one(c->send_cq, &wc))
        return 0;
    if (wc.opcode != wc_opcode[op]) {
        fprintf(stderr, "# unexpected completion opcode %d\n", wc.opcode);
        return 0;
    }
    return 1;
}

static uint32_t imm_for(uint32_t size, uint32_t seed)
{
    return htonl(0xC3000000u ^ (seed << 20) ^ size);
}

static void server(struct ctx *c)
{
    struct msg m;
    for (;;) {
        xfer(c->sock, &m, sizeof(m), 0);
        uint32_t ok = 1;
        if (!m.check) { /* prepare */
            memset(c->buf, 0xEE, MAX_SIZE + GUARD);
            if (m.op == OP_READ)
                fill(c->buf, m.size, m.seed);
            if (m.op == OP_WRITE_IMM) {
                struct ibv_recv_wr wr = { .wr_id = 2, .num_sge = 0 }, *bad;
                if (ibv_post_recv(c->qp, &wr, &bad))
                    die("ibv_post_recv: %s", strerror(errno));
            }
        } else if (m.op == OP_WRITE_IMM) {
            struct ibv_wc wc;
            ok = poll_one(c->recv_cq, &wc);
            if (ok && (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
                       wc.imm_data != imm_for(m.size, m.seed) || wc.byte_len != m.size)) {
                fprintf(stderr, "# recv completion: opcode %d flags 0x%x imm 0x%08x (want 0x%08x) "
                        "byte_len %u (want %u)\n", wc.opcode, wc.wc_flags, ntohl(wc.imm_data),
                        ntohl(imm_for(m.size, m.seed)), wc.byte_len, m.size);
                ok = 0;
            }
            ok = ok && verify(c->buf, m.size, m.seed);
        } else if (m.op == OP_WRITE) {
            ok = verify(c->buf, m.size, m.seed);
        } else if (m.op == NUM_OPS) {
            return;     /* done */
        }
        xfer(c->sock, &ok, sizeof(ok), 1);
    }
}

static uint32_t request(struct ctx *c, enum op op, uint32_t size, uint32_t seed, uint32_t check)
{
    struct msg m = { op, size, seed, check };
    uint32_t ok;
    xfer(c->sock, &m, sizeof(m), 1);
    xfer(c->sock, &ok, sizeof(ok), 0);
    return ok;
}

static int client(struct ctx *c, const struct qp_info *remote)
{
    int all_ok = 1;
    for (int op = 0; op < NUM_OPS; op++) {
        int op_ok = 1;
        for (size_t s = 0; s < NUM_SIZES; s++) {
            uint32_t size = sizes[s], seed = (uint32_t) (op * 16 + s + 1);
            request(c, op, size, seed, 0);
            memset(c->buf, 0xEE, MAX_SIZE + GUARD);
            if (op != OP_READ)
                fill(c->buf, size, seed);
            int ok = post_and_wait(c, remote, op, size, imm_for(size, seed));
            if (op == OP_READ)
                ok = ok && verify(c->buf, size, seed);
            else
                ok = request(c, op, size, seed, 1) && ok;
            printf("%s %s %u B\n", ok ? "ok" : "FAILED", op_name[op], size);
            op_ok &= ok;
        }
        printf("op %s: %s\n", op_name[op], op_ok ? "PASS" : "FAIL");
        all_ok &= op_ok;
    }
    struct msg done = { NUM_OPS, 0, 0, 1 };
    xfer(c->sock, &done, sizeof(done), 1);

    static const struct { enum ibv_wr_opcode op; const char *name; } q[] = {
        { IBV_WR_RDMA_WRITE, "RDMA_WRITE" }, { IBV_WR_RDMA_WRITE_WITH_IMM, "RDMA_WRITE_WITH_IMM" },
        { IBV_WR_SEND, "SEND" }, { IBV_WR_RDMA_READ, "RDMA_READ" } };
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
        printf("data_in_order %s: %d\n", q[i].name, ibv_query_qp_data_in_order(c->qp, q[i].op, 0));
    return all_ok;
}

/* ---- lat: ping-pong on the channel's wire pattern (see the header) ---- */

#define LAT_WARMUP 200
#define LAT_HDR 40              /* frame bytes besides an eager-short message's data */
#define LAT_BATCH 16            /* signal every 16th send; repost receives 16 at a time */
#define LAT_RING (MAX_SIZE / 2) /* c->buf: the ring, then the frame being sent */

struct lat {
    struct ctx *c;
    const struct qp_info *remote;
    int imm;                    /* 1: write with immediate, found by completion; 0: flag polling */
    uint32_t len, span;         /* frame bytes (a multiple of 8), slot bytes (of 64) */
    uint64_t pos[2];            /* ring offset of the next frame: [0] sent, [1] received */
    uint32_t sent, owed;        /* sends posted; receives owed a repost */
    uint32_t touch, calls;      /* LAT_TOUCH, LAT_CALLS */
    unsigned long frames, torn;
    volatile uint64_t *pages;   /* touch pages, 4160 B apart */
};

static void lat_repost(struct lat *l, int n)
{
    struct ibv_recv_wr wr[LAT_BATCH], *bad;
    for (int i = 0; i < n; i++)
        wr[i] = (struct ibv_recv_wr) { .wr_id = 3, .next = i + 1 < n ? &wr[i + 1] : NULL };
    if (ibv_post_recv(l->c->qp, wr, &bad))
        die("ibv_post_recv: %s", strerror(errno));
}

static uint64_t lat_word(uint64_t seq, uint32_t k)
{
    return seq * 0x9e3779b97f4a7c15ull + k;
}

/* The ring offset of the frame at *pos; advance *pos past its slot. */
static uint64_t lat_slot(struct lat *l, uint64_t *pos)
{
    uint64_t at = *pos + l->span <= LAT_RING ? *pos : 0;
    *pos = at + l->span;
    return at;
}

/* Frame seq: words lat_word(seq, k), the last word seq itself (the flag). */
static void lat_send(struct lat *l, uint64_t seq)
{
    uint64_t *f = (uint64_t *) (l->c->buf + LAT_RING), n = l->len / 8;
    for (uint32_t k = 0; k + 1 < n; k++)
        f[k] = lat_word(seq, k);
    f[n - 1] = seq;
    struct ibv_sge sge = { .addr = (uintptr_t) f, .length = l->len, .lkey = l->c->mr->lkey };
    struct ibv_send_wr wr = {
        .wr_id = 4, .sg_list = &sge, .num_sge = 1,
        .opcode = l->imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
        .send_flags = (l->len <= l->c->max_inline ? IBV_SEND_INLINE : 0)
            | (++l->sent % LAT_BATCH ? 0 : IBV_SEND_SIGNALED),
        .imm_data = htonl((uint32_t) seq),
        .wr.rdma = { .remote_addr = l->remote->addr + lat_slot(l, &l->pos[0]), .rkey = l->remote->rkey },
    }, *bad;
    if (ibv_post_send(l->c->qp, &wr, &bad))
        die("ibv_post_send: %s", strerror(errno));
}

static int lat_whole(const volatile uint64_t *f, uint64_t seq, uint32_t n)
{
    for (uint32_t k = 0; k + 1 < n; k++)
        if (f[k] != lat_word(seq, k))
            return 0;
    return 1;
}

/* One poll of both CQs: 1 if frame seq's receive completion came. */
static int lat_poll(struct lat *l, uint64_t seq)
{
    struct ibv_wc wc[LAT_BATCH];
    int got = 0, n = ibv_poll_cq(l->c->send_cq, LAT_BATCH, wc);
    for (int i = 0; i < n; i++)
        if (wc[i].status != IBV_WC_SUCCESS)
            die("send completion: %s", ibv_wc_status_str(wc[i].status));
    n = ibv_poll_cq(l->c->recv_cq, 1, wc);
    if (n < 0)
        die("ibv_poll_cq failed");
    if (n == 1) {
        if (wc[0].status != IBV_WC_SUCCESS || wc[0].opcode != IBV_WC_RECV_RDMA_WITH_IMM
            || ntohl(wc[0].imm_data) != (uint32_t) seq)
            die("frame %llu: receive completion %s, opcode %d, imm %u", (unsigned long long) seq,
                ibv_wc_status_str(wc[0].status), wc[0].opcode, ntohl(wc[0].imm_data));
        got = 1;
        if (++l->owed == LAT_BATCH) {
            l->owed = 0;
            lat_repost(l, LAT_BATCH);
        }
    }
    return got;
}

/* Wait for frame seq and verify it. */
static void lat_recv(struct lat *l, uint64_t seq)
{
    const volatile uint64_t *f = (const volatile uint64_t *) (l->c->buf + lat_slot(l, &l->pos[1]));
    uint32_t n = l->len / 8;
    unsigned long spins = 0;
    time_t end = time(NULL) + POLL_TIMEOUT_S;
    int torn = 0;

    for (;;) {
        if (lat_poll(l, seq) && l->imm)
            break;
        if (!l->imm && f[n - 1] == seq) {
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (lat_whole(f, seq, n))
                break;
            torn = 1;
        }
        if (++spins % 65536 == 0 && time(NULL) > end)
            die("frame %llu did not arrive whole within %d s", (unsigned long long) seq, POLL_TIMEOUT_S);
    }
    if (l->imm && !lat_whole(f, seq, n))
        die("frame %llu found by its completion is wrong", (unsigned long long) seq);
    l->frames++;
    l->torn += (unsigned long) torn;
    for (uint32_t k = 0; k < l->touch; k++)
        l->pages[k * 520]++;    /* 520 words: the next page */
    if (l->calls)
        l->pages[0] += lat_calls_run(l->calls);
}

/* Both processes are here (their rings are cleared, no frame in flight). */
static void lat_barrier(struct lat *l)
{
    uint32_t go = 1;
    xfer(l->c->sock, &go, sizeof(go), 1);
    xfer(l->c->sock, &go, sizeof(go), 0);
}

/* ITERS round trips after LAT_WARMUP; the client sends first and prints. */
static void lat_size(struct lat *l, uint32_t size, long iters, int client)
{
    struct timespec t0 = { 0, 0 }, t1;
    uint64_t seq = 1;

    l->len = (size + LAT_HDR + 7) & ~7u;
    l->span = (l->len + 63) & ~63u;
    l->pos[0] = l->pos[1] = 0;
    memset(l->c->buf, 0, LAT_RING);
    l->frames = l->torn = 0;
    lat_barrier(l);
    for (long i = -LAT_WARMUP; i < iters; i++, seq += 2) {
        if (i == 0)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        if (client) {
            lat_send(l, seq);
            lat_recv(l, seq + 1);
        } else {
            lat_recv(l, seq);
            lat_send(l, seq + 1);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    lat_barrier(l);
    if (client)
        printf("latency %u %.3f\n# lat %s %u B: frame %u B, %lu frames verified, %lu torn\n", size,
               ((double) (t1.tv_sec - t0.tv_sec) * 1e6 + (double) (t1.tv_nsec - t0.tv_nsec) * 1e-3)
               / (double) iters / 2, l->imm ? "imm" : "write", size, l->len, l->frames, l->torn);
}

/* Knob NAME: 0 if unset; a value that is not 0..MAX exits naming the range. */
static uint32_t lat_knob(const char *name, unsigned long max, const char *unit)
{
    const char *t = getenv(name);

    if (t && (!*t || t[strspn(t, "0123456789")] || strtoul(t, NULL, 10) > max))
        die("lat: %s=%s is not 0..%lu (%s)", name, t, max, unit);
    return t ? (uint32_t) strtoul(t, NULL, 10) : 0;
}

/* "lat" arguments, checked before the fork: ITERS then the sizes, and the knobs. */
static long lat_args(int argc, char **argv)
{
    long iters = argc > 4 ? strtol(argv[4], NULL, 10) : 0;

    lat_knob("LAT_TOUCH", 65536, "pages");
    lat_knob("LAT_CALLS", LAT_CALLS_MAX, "functions");
    if (argc < 6 || (strcmp(argv[3], "imm") && strcmp(argv[3], "write")) || iters < 1)
        die("usage: verbs_selftest DEVICE lat imm|write ITERS SIZE...");
    for (int a = 5; a < argc; a++)
        if (strtol(argv[a], NULL, 10) < 1 || strtol(argv[a], NULL, 10) > 65536)
            die("lat: SIZE %s is not 1..65536", argv[a]);
    return iters;
}

static void lat(struct ctx *c, const struct qp_info *remote, int argc, char **argv, int client)
{
    struct lat l = { .c = c, .remote = remote, .imm = !strcmp(argv[3], "imm"),
        .touch = lat_knob("LAT_TOUCH", 65536, "pages"),
        .calls = lat_knob("LAT_CALLS", LAT_CALLS_MAX, "functions") };
    long iters = strtol(argv[4], NULL, 10);

    if (!(l.pages = calloc((size_t) l.touch + 1, 4160)))
        die("lat: no memory for LAT_TOUCH=%u pages", l.touch);
    for (int i = 0; i < 2; i++)
        lat_repost(&l, LAT_BATCH);
    for (int a = 5; a < argc; a++)
        lat_size(&l, (uint32_t) strtol(argv[a], NULL, 10), iters, client);
}

int main(int argc, char **argv)
{
    const char *devname = argc > 1 ? argv[1] : "rxe0";
    int sv[2], latency = argc > 2 && !strcmp(argv[2], "lat");
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (latency)
        lat_args(argc, argv);
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        die("socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));

    struct ctx c = { .role = pid == 0 ? "client" : "server", .sock = pid == 0 ? sv[0] : sv[1] };
    role = c.role;
    close(pid == 0 ? sv[1] : sv[0]);
    setup(&c, devname);
    if (pid == 0)
        printf("# device %s, path mtu %d, qp %u\n", devname, 128 << c.mtu, c.qp->qp_num);

    srand((unsigned) getpid());
    struct qp_info mine = { .qpn = c.qp->qp_num, .psn = (uint32_t) rand() & 0xffffff,
                            .rkey = c.mr->rkey, .addr = (uintptr_t) c.buf }, theirs;
    if (ibv_query_gid(c.dev, 1, c.gid_index, &mine.gid))
        die("ibv_query_gid failed");
    xfer(c.sock, &mine, sizeof(mine), 1);
    xfer(c.sock, &theirs, sizeof(theirs), 0);
    connect_qp(&c, &theirs, mine.psn);

    if (latency)
        lat(&c, &theirs, argc, argv, pid == 0);
    else if (pid == 0)
        return client(&c, &theirs) ? 0 : 1;
    else
        server(&c);
    if (pid == 0)
        return 0;
    int status;
    if (waitpid(pid, &status, 0) < 0)
        die("waitpid: %s", strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}
