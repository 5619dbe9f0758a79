/*
 * rdma_verbs.h -- internals of the verbs transport; only its own files
 * include it.  One job per file:
 *   rdma_xport_verbs.c  the rdma_xport_ops_t: open, connect, close,
 *                       finalize, describe
 *   rdma_verbs_dev.c    device, port and GID selection, memory, fork
 *   rdma_verbs_cm.c     connection manager (UD) and the RC QP state machine
 *   rdma_verbs_data.c   data path: writes, completions, progress, waiting
 *   rdma_verbs_reg.c    registration caches and zero-copy RDMA reads
 *
 * Objects.  One device context, PD and CQ per process.  The CQ serves every
 * RC QP and the connection-management (CM) UD QP; its event channel wakes
 * blocking waits (rdma_verbs_wait_arm).  Per connection:
 *   ring   ring_size bytes; the peer RDMA-writes frames into it
 *          (LOCAL_WRITE | REMOTE_WRITE, never RELAXED_ORDERING: see
 *          rdma_verbs_data.c)
 *   stage  ring_size bytes; the local image of the peer's ring, the source
 *          of our writes (local access only)
 *   ctl    one page: head word and tail word that the peer writes, plus the
 *          registered source words for credit/head writes that are not inline
 *   qp     RC QP, paired with the peer's by the CM (rdma_verbs_cm.c).
 *
 * Stale completions.  wr_id = (generation << 32) | slot: completions of a
 * closed connection still in the CQ are recognised and dropped.
 *
 * Threading: none of its own.  The owner serialises every call on one
 * xport (rdma_xport.h), so no field here has a lock or an atomic; the
 * fields the peer writes by RDMA (ring, ctl words) are read by the pipe,
 * never here.  Hot paths (write, credit, head, progress) neither allocate nor print.
 */
#ifndef RDMA_VERBS_H_INCLUDED
#define RDMA_VERBS_H_INCLUDED

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
    char err[RDMA_MSG_LEN];
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

/* rdma_verbs_dev.c */
double rdma_verbs_now(void);

int rdma_verbs_mem_alloc(rdma_xport_t * xp, rdma_verbs_mem_t * m, size_t len, int access);
void rdma_verbs_mem_free(rdma_verbs_mem_t * m);
int rdma_verbs_fork_query(void);
int rdma_verbs_memlock_check(const rdma_xport_params_t * prm, char *err, size_t errlen);
int rdma_verbs_dev_open(rdma_xport_t * xp, char *err, size_t errlen);
int rdma_verbs_gid_pick(rdma_xport_t * xp);
int rdma_verbs_qp_timeout(double seconds);
rdma_status_t rdma_verbs_chan_open(rdma_xport_t * xp);
int rdma_verbs_dev_setup(rdma_xport_t * xp, char *err, size_t errlen);
void rdma_verbs_dev_teardown(rdma_xport_t * xp);
rdma_status_t rdma_verbs_cm_keys(rdma_xport_t * xp);

/* rdma_verbs_cm.c */
uint8_t *rdma_verbs_ud_slot(rdma_xport_t * xp, uint32_t i);
int rdma_verbs_ud_post_recv(rdma_xport_t * xp, uint32_t i);
rdma_status_t rdma_verbs_ud_create(rdma_xport_t * xp);
void rdma_verbs_card_format(rdma_xport_t * xp, char *card, size_t len);
void rdma_verbs_ud_send(rdma_verbs_conn_t * vc, int type);
void __attribute__((format(printf, 2, 3)))
rdma_verbs_conn_fail(rdma_verbs_conn_t * vc, const char *fmt, ...);
rdma_verbs_conn_t *rdma_verbs_conn_lookup(rdma_xport_t * xp, uint64_t token);
int rdma_verbs_conn_create(rdma_xport_t * xp, rdma_conn_t * c, rdma_verbs_conn_t ** vcp);
void rdma_verbs_conn_release(rdma_verbs_conn_t * vc);
int rdma_verbs_rq_post(rdma_verbs_conn_t * vc);
void rdma_verbs_timer_arm(rdma_verbs_conn_t * vc, rdma_verbs_cm_t cm);
void rdma_verbs_timer_run(rdma_xport_t * xp, double now);
void rdma_verbs_cm_dispatch(rdma_xport_t * xp, const rdma_verbs_msg_t * m);

/* rdma_verbs_data.c */
rdma_status_t rdma_verbs_post(rdma_verbs_conn_t * vc, uint64_t laddr, uint32_t lkey, uint32_t len,
                              uint64_t raddr, uint32_t rkey, int imm, int flags);
int rdma_verbs_cq_poll(rdma_xport_t * xp);
rdma_status_t rdma_verbs_progress(rdma_xport_t * xp);
int rdma_verbs_wait_arm(rdma_xport_t * xp);
void rdma_verbs_wait_disarm(rdma_xport_t * xp);
void rdma_verbs_wait(rdma_xport_t * xp, long timeout_us);
extern const rb_xport_ops_t rdma_verbs_pipe_ops;

/* rdma_verbs_reg.c */
rdma_status_t rdma_verbs_rc_open(rdma_xport_t * xp);
void rdma_verbs_rc_close(rdma_xport_t * xp);
void rdma_verbs_read_done(rdma_verbs_conn_t * vc);
int rdma_verbs_stats(const rdma_xport_t * xp, char *buf, size_t len);
extern const zc_ops_t rdma_verbs_zc_ops;

#endif /* RDMA_VERBS_H_INCLUDED */
