/*
 * rdma_verbs.h -- internals of the verbs transport; only its own files
 * include it.  One job per file:
 *   rdma_xport_verbs.c  the rdma_xport_ops_t: open, connect, close,
 *                       finalize, describe
 *   rdma_verbs_dev.c    device, port and GID selection, memory, fork, the
 *                       connection manager's UD QP
 *   rdma_verbs_cm.c     connection manager (UD), run by the channel thread;
 *                       main's adoption of what it finished
 *   rdma_verbs_conn.c   connection objects, cards and peer addresses, the RC
 *                       QP state machine
 *   rdma_verbs_data.c   data path: writes, completions, progress, waiting
 *   rdma_verbs_reg.c    registration caches and zero-copy RDMA reads
 *   rdma_verbs_eager.c  eager sends from frequent user buffers (P2)
 *   rdma_verbs_grow.c   growing rings: new rings and stages, the switch
 *   rdma_verbs_srq.c    the shared receive queue, the device's async events
 *
 * Objects.  One device context and PD per process.  Two CQs: the data CQ
 * (every RC QP; its event channel wakes blocking waits, rdma_verbs_wait_arm)
 * and the CM CQ (the connection manager's UD QP; its event channel wakes
 * the channel thread).  Per connection:
 *   ring   ring_size bytes; the peer RDMA-writes frames into it
 *          (LOCAL_WRITE | REMOTE_WRITE, never RELAXED_ORDERING: see
 *          rdma_verbs_data.c); it grows up to ring_max when the peer's
 *          traffic fills it (ringbuf/rb_pipe.h, "Growing rings")
 *   stage  as large as the peer's ring; the local image of it, the source
 *          of our writes (local access only)
 *   ctl    one page: head word and tail word that the peer writes, plus the
 *          registered source words for credit/head writes that are not inline
 *   qp     RC QP, paired with the peer's by the CM (rdma_verbs_cm.c).
 *
 * Stale completions.  wr_id = (generation << 32) | slot: completions of a
 * closed connection still in the CQ are recognised and dropped.
 *
 * Threads.  Two run here: the owner's ("main": every op of rdma_xport_ops_t
 * but bg_run, serialised by the owner) and the channel thread (bg_run: the
 * CM, and the registration helper when MPIR_CVAR_CH3_RDMA_REG_HELPER is on,
 * rdma_verbs_reg.c).  The CM answers peers and brings QPs to RTS while main computes;
 * main adopts what the CM finished (binds the pipe, reports READY or
 * FAILED).  The rules, beside each field below:
 *   [cm]    guarded by xp->cm_lock (both threads take it);
 *   [rc]    guarded by xp->rc_lock (main, and the helper on the thread);
 *   [main]  main only, no lock;
 *   [fixed] written before the thread starts or before the connection is
 *           published, read-only after;
 *   [adopt] written under cm_lock until main adopts the connection, then
 *           [main] (the lock handoff orders the two).
 * Lock order: cm_lock and rc_lock are never held together; the provider's own locks
 * (verbs are thread-safe: the CM may create QPs and resize the data CQ
 * while main polls it) are below it.  The CM never calls the owner's
 * events but conn_of (a pure lookup); bind, ready, landed run on main.
 * The fields the peer writes by RDMA (ring, ctl words) are read by the
 * pipe, never here.  Hot paths (write, credit, head, progress) take no
 * lock (but rc_lock once per completed RDMA read, to release its region),
 * neither allocate nor print.
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
#include <sys/eventfd.h>
#include <pthread.h>
#include <infiniband/verbs.h>

#include "rdma_xport_verbs.h"
#include "rcache.h"
#include "rhelper.h"
#include "freq.h"
#include "memev.h"

#ifndef HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER
#define HAVE_DECL_IBV_QUERY_QP_DATA_IN_ORDER 1  /* rdma-core >= 33 */
#endif

enum {
    RDMA_VERBS_UD_NRECV = 64,
    RDMA_VERBS_UD_NSEND = 32,
    RDMA_VERBS_UD_SLOT = 512,   /* GRH (40) + message */
    RDMA_VERBS_GRH = 40,
    RDMA_VERBS_HOST = 64,       /* host name in cards and CM messages */
    RDMA_VERBS_HELLO = 256,     /* a hello (peer outside the job), NUL included */
    RDMA_VERBS_DYN_SLOTS = 1024,        /* connections outside the job, at most */
    RDMA_VERBS_PARK = 16,       /* REQs from outside the job awaiting main */
    RDMA_VERBS_REJ_AH = 64,     /* address handles kept for REJs (per GID), at most */
    RDMA_VERBS_MAGIC = 0x63683373,    /* builds before wire versions: 0x63683372 */
    RDMA_VERBS_WINDOW = 64,     /* frame writes in flight (rb_config_t.max_writes):
                                 * a receive bound of 96 (rdma_verbs_data.c) */
    RDMA_VERBS_SQ_MAX = 63,     /* send queue entries: providers keep depth + 1
                                 * slots rounded up to a power of two */
    RDMA_VERBS_SQ_RESERVE = 8,
    RDMA_VERBS_RQ_RESERVE = 16,
    RDMA_VERBS_RQ_BATCH = 16,   /* consumed receives reposted together */
    RDMA_VERBS_SIG_EVERY = 16,
    RDMA_VERBS_POLL_BATCH = 32,
    RDMA_VERBS_CQ_BASE = 256,
    /* 6, not 7: rxe (kernel 6.1) never decrements a retry_cnt of 7, so a
     * dead peer would be retried forever (IB says 7 means 7 retries; only
     * rnr_retry 7 is infinite) */
    RDMA_VERBS_RETRY_CNT = 6,
    RDMA_VERBS_READS_MAX = 16,  /* RDMA reads in flight per connection */
    RDMA_VERBS_READ_MAX = 1 << 20,      /* bytes per RDMA read */
    RDMA_VERBS_REG_WINDOW = 64 << 20,   /* receive registration window */
    RDMA_VERBS_DRAIN_S = 2,     /* close(): a connection's last writes, waited for at least */
    RDMA_VERBS_USER_SGE = 2 * RB_USER_SEGS + 1, /* write_user's gather list */
    RDMA_VERBS_RMA_OPS = 16,    /* one-sided operations in flight per connection */
    RDMA_VERBS_RMA_CHUNK = 1 << 30,     /* bytes per one-sided WR (under every
                                         * device's max_msg_sz) */
    RDMA_VERBS_RMA_BOUNCE = 32, /* one-sided bounce slots per process */
    RDMA_VERBS_RETIRED = 16     /* replaced stages awaiting their writes (a ring
                                 * doubles at most log2(64 MiB / 4 KiB) times) */
};

/* rdma_verbs_post flags; a sig_fifo entry marked SIG_SENT reports ev.sent */
enum { RDMA_VERBS_POST_LEAVE_RESERVE = 1, RDMA_VERBS_POST_SIGNAL = 2, RDMA_VERBS_POST_SENT = 4,
    RDMA_VERBS_POST_LAST = 8,   /* a frame of the close handshake (frame_at) */
    RDMA_VERBS_POST_RMA = 16    /* the last WR of a one-sided operation */
};
/* wr_id of the SRQ's receives (a token's slot never reaches 2^32 - 1) */
#define RDMA_VERBS_SRQ_WRID UINT64_MAX
#define RDMA_VERBS_SIG_SENT (UINT32_C(1) << 31)
#define RDMA_VERBS_SIG_RMA (UINT32_C(1) << 30)  /* reports rdma_verbs_rma_done */
#define RDMA_VERBS_SIG_WRS(s) ((s) & ~(RDMA_VERBS_SIG_SENT | RDMA_VERBS_SIG_RMA))
/* seconds from a WAIT answer to the next REQ: the first, and the most
 * (the gap doubles; rdma_verbs_cm_wait) */
#define RDMA_VERBS_WAIT_FIRST 0.001
#define RDMA_VERBS_WAIT_MAX 0.1
/* seconds a closed connection's QP lingers (rdma_verbs_conn_linger) */
#define RDMA_VERBS_LINGER_S 0.1

/* Immediate data: kind in bits 0-1; a frame write carries its frame count
 * in bits 2-31 (a superpipeline group holds several frames). */
enum { RDMA_VERBS_IMM_FRAME = 1, RDMA_VERBS_IMM_CREDIT = 2, RDMA_VERBS_IMM_HEAD = 3 };
enum { RDMA_VERBS_MSG_REQ = 1, RDMA_VERBS_MSG_REP = 2, RDMA_VERBS_MSG_RTU = 3,
    RDMA_VERBS_MSG_REJ = 4,     /* a REQ from outside the job refused by the owner */
    RDMA_VERBS_MSG_WAIT = 5     /* a REQ to a connection still closing here */
};

typedef enum {
    RDMA_VERBS_CM_NONE = 0,     /* resources, no REQ sent or answered */
    RDMA_VERBS_CM_REQ_SENT,     /* initiator, waiting for REP */
    RDMA_VERBS_CM_REP_SENT,     /* responder, waiting for RTU */
    RDMA_VERBS_CM_READY,
    RDMA_VERBS_CM_DEAD
} rdma_verbs_cm_t;

/* CM message; both ends share byte order (homogeneous jobs).  Its head is
 * the same in every wire version (test/unit/t_wire.c pins it): magic,
 * version, type and what a reply needs, so two builds of different wire
 * versions (RDMA_WIRE_VERSION, rdma_xport.h) refuse each other by name (a REJ that is only a
 * head) instead of misreading the rest.  A REQ also carries the sender's
 * address, so the responder (the channel thread) needs no PMI lookup.
 * dyn: the sender's peer is outside its job; then src and dst are not
 * ranks of the receiver's job, a REQ carries the sender's hello
 * (c->hello), a REJ the reason, and a message is sent only up to that
 * string's NUL (rdma_verbs_msg_len); without dyn it ends before hello. */
typedef struct rdma_verbs_head {
    uint32_t magic, version;    /* RDMA_VERBS_MAGIC, RDMA_WIRE_VERSION */
    uint64_t auth;              /* the destination's auth (from its card) */
    uint64_t src_auth;          /* the sender's auth, GID, LID, CM QP, QKEY */
    uint64_t token, echo;       /* sender's / receiver's connection id */
    uint8_t gid[16];
    uint32_t udqpn, qkey;
    uint16_t lid;
    uint8_t type;               /* RDMA_VERBS_MSG_*: values never change */
    uint8_t dyn;
    uint32_t pid;               /* sender's process id (diagnoses) */
    char host[RDMA_VERBS_HOST];
} rdma_verbs_head_t;

typedef struct rdma_verbs_msg {
    rdma_verbs_head_t h;
    int32_t src, dst;
    uint32_t qpn, psn;
    uint64_t ring_addr, ctl_addr;
    uint32_t ring_rkey, ctl_rkey;
    uint64_t ring_size, chunk_size, ring_max;  /* ring_size: the first */
    uint64_t max_frame;         /* prm.max_frame: both ends use the smaller */
    uint8_t in_order, rd_atomic, basic;
    uint8_t mtu;                /* sender's port MTU (enum ibv_mtu) */
    char hello[RDMA_VERBS_HELLO];
} rdma_verbs_msg_t;
#define RDMA_VERBS_MSG_MIN offsetof(rdma_verbs_msg_t, hello)
_Static_assert(RDMA_VERBS_GRH + sizeof(rdma_verbs_msg_t) <= RDMA_VERBS_UD_SLOT,
               "a CM message must fit a UD receive slot");

/* What we know of a peer before its QP exists: from its card or REQ. */
typedef struct rdma_verbs_peer {
    uint8_t gid[16];
    uint16_t lid;
    uint32_t udqpn, qkey;
    uint64_t auth;
    uint32_t pid;               /* in diagnoses of a peer outside the job */
    char host[RDMA_VERBS_HOST];
} rdma_verbs_peer_t;

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
    const char *fallback;       /* what a refused registration falls back to */
    int said;                   /* [main] the limit's notice was printed */
} rdma_verbs_rc_t;

typedef struct rdma_verbs_conn {
    rdma_conn_t *c;             /* [fixed] */
    rdma_xport_t *xp;           /* [fixed] */
    uint64_t token;             /* [fixed] wr_id: generation << 32 | slot */
    rdma_verbs_cm_t cm;         /* [adopt]; main writes DEAD under cm_lock */
    int initiator;              /* [cm] */
    int adopted;                /* [main] bound and reported */
    size_t charged;             /* [fixed] bytes of the pinned cap its first
                                 * rings hold (outside the job only) */
    unsigned early;             /* [main] frames landed before adoption */
    struct rdma_verbs_conn *next_adopt; /* [cm] xp->adopt list */
    struct ibv_qp *qp;          /* [fixed] */
    struct ibv_ah *ah;          /* [fixed] the peer's CM QP */
    struct ibv_ah_attr path;    /* [fixed] RC path to the peer */
    uint32_t peer_udqpn, peer_qkey, psn;        /* [fixed] */
    uint64_t peer_auth;         /* [fixed] the peer's CM secret */
    char host[RDMA_VERBS_HOST]; /* [fixed] the peer's host name */
    char who[40];               /* [fixed] the peer in diagnoses: "rank R",
                                 * or "process P outside the job" */
    rdma_verbs_mem_t ctl;       /* [fixed] */
    /* [fixed] until adoption, then [main]: a growing ring replaces them;
     * the CM sends the first ring's address and key (ring_addr0, _rkey0) */
    rdma_verbs_mem_t ring, stage;
    uint64_t ring_addr0;        /* [fixed] */
    uint32_t ring_rkey0;        /* [fixed] */
    rdma_verbs_msg_t remote;    /* [adopt] the peer's REQ or REP */
    enum ibv_mtu mtu;           /* [adopt] min(ours, the peer's) */
    int completion, verify, in_order_local, max_rd_atomic;      /* [adopt] */
    uint32_t max_inline;        /* [fixed] */
    uint32_t max_send_sge;      /* [fixed] RDMA_VERBS_USER_SGE: eager sends
                                 * gather (write_user); 1: they copy */
    uint32_t sq_depth, rq_depth;        /* [fixed] */
    struct rdma_verbs_conn *qpn_next;   /* [cm] writes, main reads: xp->qpn_bkt's
                                         * chain (rdma_verbs_srq.c) */
    int srq_attached;           /* [cm] its receives count in srq_want */
    int cq_share;               /* [cm] CQ entries reserved for this connection */
    double t_retx, t_deadline, backoff; /* [cm] */
    double wait_gap;            /* [cm] the last WAIT's retry gap (0: no WAIT yet) */
    /* [main] from here on */
    struct rdma_verbs_conn *next_linger;        /* xp->linger list */
    double t_linger;            /* its QP goes then */
    uint32_t sq_free, unsig;
    uint32_t rq_owed;           /* receives consumed, not yet reposted (< RQ_BATCH) */
    uint32_t *sig_fifo, sig_head, sig_tail;     /* WRs covered per signal
                                                 * (| RDMA_VERBS_SIG_SENT) */
    uint64_t last_credit;
    /* Growing rings (rdma_verbs_data.c): the new ring and stage until the
     * switch; stages replaced while writes from them may be in flight,
     * freed once wr_done reaches their done_at (send WRs completed: a
     * signalled completion retires the WRs before it too) */
    rdma_verbs_mem_t next_ring, next_stage;
    struct {
        rdma_verbs_mem_t m;
        uint64_t done_at;
    } retired[RDMA_VERBS_RETIRED];
    uint32_t n_retired;
    uint64_t wr_done;
    /* [main] closing (rdma_verbs_drain): last_frames, the close handshake
     * began and frame writes are signalled; frame_at, send WRs posted up
     * to the last of them (counted as wr_done is) */
    uint64_t frame_at;
    int last_frames;
    char why[RDMA_MSG_LEN];     /* [adopt] why it is DEAD */
    struct {
        uint32_t len;
        rcache_region_t *reg;   /* destination, released at completion */
    } reads[RDMA_VERBS_READS_MAX];      /* in flight, FIFO */
    uint32_t rd_head, rd_tail;
    struct {
        void *cookie;           /* the owner's (ev.rma_done) */
        rcache_region_t *reg;   /* local buffer, released at completion; NULL:
                                 * inline or bounced */
        int read;               /* a get: reg is of the receive cache */
        int slot;               /* bounce slot (xp->bounce), -1: none */
        void *dst;              /* a bounced get's bytes or an atomic's words
                                 * are copied here at completion (NULL: not) */
        uint32_t len;
    } rma[RDMA_VERBS_RMA_OPS];  /* [main] one-sided operations in flight, FIFO */
    uint32_t rma_head, rma_tail;        /* [main] */
} rdma_verbs_conn_t;

struct rdma_xport {
    rdma_xport_params_t prm;    /* [fixed] */
    rdma_verbs_params_t vp;     /* [fixed] prm.own's copy */
    char err[RDMA_MSG_LEN];     /* [main] */
    struct ibv_context *ctx;    /* [fixed] */
    struct ibv_pd *pd;          /* [fixed] */
    struct ibv_cq *cq;          /* [fixed] data CQ: RC QPs; polled by main */
    struct ibv_comp_channel *chan;      /* [fixed] data CQ events (main's waits) */
    struct ibv_cq *cm_cq;       /* [fixed] CM CQ: the UD QP; polled under cm_lock */
    struct ibv_comp_channel *cm_chan;   /* [fixed] CM CQ events (the thread) */
    int kick_fd;                /* [fixed] eventfd: main wakes the thread */
    int wake_fd;                /* [fixed] eventfd: the thread wakes main's wait */
    pthread_mutex_t cm_lock;
    int cq_size, cq_need;       /* [cm] */
    /* The shared receive queue (rdma_verbs_srq.c has the rules): NULL when
     * each QP has its own receive queue. */
    struct ibv_srq *srq;        /* [fixed] */
    uint32_t srq_size;          /* [cm] writes (release, after the CQ grew),
                                 * main reads (acquire): receives it has room for */
    uint32_t srq_want;          /* [cm] writes, atomic: rq_depth over attached connections */
    uint32_t srq_out;           /* atomic (CAS): posted, completion not yet polled */
    uint32_t srq_owed;          /* [main] polled, not yet taken off srq_out */
    int srq_said;               /* [main] a failed post was reported */
    int srq_armed;              /* [cm] the limit event is armed */
    uint64_t srq_limits, srq_grows;     /* [cm] limit events seen; the grows they made */
    rdma_verbs_conn_t **qpn_bkt;        /* [cm] writes (release), main reads: chains by QP number */
    uint32_t qpn_nbkt;          /* [fixed] a power of two */
    struct ibv_device_attr dev; /* [fixed] */
    struct ibv_port_attr pattr; /* [fixed] */
    uint8_t port;               /* [fixed] */
    int gid_index;              /* [fixed] */
    union ibv_gid gid;          /* [fixed] */
    char host[RDMA_VERBS_HOST]; /* [fixed] gethostname() */
    struct ibv_qp *ud;          /* [fixed] */
    rdma_verbs_mem_t udm;       /* [fixed] */
    uint32_t ud_send_next, ud_send_free;        /* [cm] */
    /* slots[] has prm.size + RDMA_VERBS_DYN_SLOTS entries (at most one
     * connection per peer), so it never moves: main reads an entry without
     * the lock (atomic acquire; the CM publishes with release after gens[]). */
    rdma_verbs_conn_t **slots;
    uint32_t *gens, nslots;     /* [cm]; nslots [fixed] */
    rdma_verbs_conn_t *adopt;   /* [cm] finished by the CM, for main */
    int n_adopt;                /* [cm]; main peeks with a relaxed atomic load */
    uint32_t inline_req;        /* [cm] */
    uint32_t qkey;              /* [fixed] our CM QP's QKEY (random, bit 31 clear) */
    uint64_t auth;              /* [fixed] our CM secret (random); see the top */
    uint64_t cm_dropped;        /* [cm] CM datagrams without our auth */
    uint64_t cm_refused;        /* [cm] REQs we could not accept; the last why: */
    char cm_why[RDMA_MSG_LEN];  /* [cm] */
    /* REQs from outside the job: the CM parks them, main asks its owner
     * (ev.accept may call into MPICH: never on the thread) */
    struct rdma_verbs_parked {
        rdma_verbs_msg_t m;
        double t_expire;        /* dropped after: the connector gave up */
    } parked[RDMA_VERBS_PARK];  /* [cm] */
    int n_parked;               /* [cm]; main peeks with a relaxed atomic load */
    /* address handles of REJs, one per port address (REJs go to strangers):
     * the oldest is replaced once no send is in flight (one may use it) */
    struct rdma_verbs_rej_ah {
        uint8_t gid[16];
        uint16_t lid;
        struct ibv_ah *ah;
    } rej_ah[RDMA_VERBS_REJ_AH];        /* [cm] */
    int n_rej_ah, rej_next;     /* [cm] entries used; the next replaced */
    unsigned short rng[3];      /* [cm] PSNs; leaves the application's lrand48 alone */
    int qp_timeout, in_order_override;  /* [fixed] */
    int n_connecting;           /* [cm] */
    int new_failures;           /* [main] */
    int rma_orphans;            /* [main] quiesced connections found dead with
                                 * one-sided operations in flight: progress()
                                 * fails those without reporting the peer */
    int flag_polled;            /* [main] a connection polls memory: no CQE per arrival */
    double t_keepalive;         /* [main] */
    /* closed connections whose QP lingers, oldest first (rdma_verbs_conn_linger) */
    rdma_verbs_conn_t *linger, **linger_tail;   /* [main] */
    uint64_t closes, drain_bound;       /* [main] close()s; drains that ended at their bound */
    unsigned polls;             /* [main] progress calls; clock read every 256th */
    pthread_mutex_t rc_lock;
    rdma_verbs_rc_t rc_src;     /* [rc] send buffers the peer reads: REMOTE_READ */
    rdma_verbs_rc_t rc_dst;     /* [rc] receive buffers our reads fill: LOCAL_WRITE */
    rdma_verbs_rc_t rc_win;     /* [rc] window memory peers write and read
                                 * (rdma_verbs_rma.c) */
    rcache_pinned_t pinned;     /* [rc] user memory both caches keep
                                 * registered; .max [fixed]: the cap's rest */
    int rh_on;                  /* [fixed] the registration helper runs */
    rhelper_t rh;               /* its own rules (rhelper.h): notes from main,
                                 * the rest on the thread, rc_lock in its ops */
    int memev_on, said_memev;   /* [main] */
    /* one-sided bounce buffers (rdma_verbs_rma.c), made at first use */
    rdma_verbs_mem_t bounce;    /* [main] RMA_BOUNCE slots of vp.rma_bcopy_max */
    int bounce_state;           /* [main] 0 not made yet, 1 made, -1 refused */
    int bounce_nfree;           /* [main] */
    uint8_t bounce_free[RDMA_VERBS_RMA_BOUNCE]; /* [main] free slots, a stack */
    int amo;                    /* [fixed] the device has atomics: windows and
                                 * QPs allow REMOTE_ATOMIC (rdma_verbs_rma.c) */
    int amo_state;              /* [main] loopback QP: 0 not made, 1 made, -1 refused */
    struct ibv_qp *amo_qp;      /* [main] connected to itself: atomics on our memory */
    struct ibv_cq *amo_cq;      /* [main] its own, polled by the caller */
    rdma_verbs_mem_t amo_mem;   /* [main] the words it finds */
    int eager_uses;             /* [fixed] register eager buffers after this
                                 * many uses; -1: eager_cost decides; 0: never */
    freq_cost_t eager_cost;     /* [fixed] measured at open (eager_uses -1) */
    int eager_soft;             /* [fixed] a software device (rxe, siw) */
    freq_t freq;                /* [main] eager buffers' uses */
    char memev_err[160];        /* [main] why registrations are not cached */
    const char *fork_mode;      /* [fixed] rdma_xport_verbs_fork_mode() */
};

/* rdma_verbs_dev.c */
double rdma_verbs_now(void);

size_t rdma_verbs_page_round(size_t len);
int rdma_verbs_mem_alloc(rdma_xport_t * xp, rdma_verbs_mem_t * m, size_t len, int access);
void rdma_verbs_mem_free(rdma_verbs_mem_t * m);
int rdma_verbs_fork_query(void);
int rdma_verbs_memlock_check(const rdma_xport_params_t * prm, char *err, size_t errlen);
int rdma_verbs_pinned_check(const rdma_xport_params_t * prm, size_t *user, char *err,
                            size_t errlen);
int rdma_verbs_dev_open(rdma_xport_t * xp, char *err, size_t errlen);
int rdma_verbs_gid_pick(rdma_xport_t * xp);
double rdma_verbs_ack_s(int t);
int rdma_verbs_qp_timeout(double seconds);
double rdma_verbs_drain_bound(double seconds, int qp_timeout);
size_t rdma_verbs_conn_pinned(const rdma_xport_params_t * prm);
struct ibv_comp_channel *rdma_verbs_chan_open(rdma_xport_t * xp);
int rdma_verbs_dev_setup(rdma_xport_t * xp, char *err, size_t errlen);
void rdma_verbs_dev_teardown(rdma_xport_t * xp);
rdma_status_t rdma_verbs_cm_keys(rdma_xport_t * xp);
uint8_t *rdma_verbs_ud_slot(rdma_xport_t * xp, uint32_t i);
int rdma_verbs_ud_post_recv(rdma_xport_t * xp, uint32_t i);
rdma_status_t rdma_verbs_ud_create(rdma_xport_t * xp);

/* rdma_verbs_cm.c: [cm] unless marked */
void rdma_verbs_ud_send(rdma_verbs_conn_t * vc, int type);
enum ibv_mtu rdma_verbs_mtu_pick(enum ibv_mtu local, unsigned remote);
void rdma_verbs_cm_dispatch(rdma_xport_t * xp, const rdma_verbs_msg_t * m);
double rdma_verbs_cm_run(void *xp, double now);  /* the thread's bg_run; locks */
void rdma_verbs_fd_poke(int fd);
rdma_status_t rdma_verbs_cm_connect(rdma_xport_t * xp, rdma_conn_t * c);       /* main; locks */
void rdma_verbs_cm_parked(rdma_xport_t * xp);   /* main; locks */
void rdma_verbs_rtu_implied(rdma_verbs_conn_t * vc);    /* main; locks */

/* rdma_verbs_conn.c: [cm] but lookup and the card and message readers */
void rdma_verbs_card_format(rdma_xport_t * xp, char *card, size_t len);
rdma_status_t rdma_verbs_card_parse(const char *card, rdma_verbs_peer_t * p);
void rdma_verbs_msg_peer(const rdma_verbs_msg_t * m, rdma_verbs_peer_t * p);
rdma_verbs_conn_t *rdma_verbs_conn_lookup(rdma_xport_t * xp, uint64_t token);
void rdma_verbs_depths(const rdma_xport_t * xp, uint32_t * sq, uint32_t * rq);

/* vc's write window (rb_config_t.max_writes): completion-driven only;
 * flag polling is bounded by its send queue (rdma_verbs_data.c). */
/* wr[0..n) chained as n receives without SGE (they only take
 * write-with-immediate completions), each with wr_id: for a QP's own
 * receive queue or the SRQ. */
static inline struct ibv_recv_wr *rdma_verbs_recv_chain(struct ibv_recv_wr *wr, uint32_t n,
                                                        uint64_t wr_id)
{
    uint32_t i;

    for (i = 0; i < n; i++)
        wr[i] = (struct ibv_recv_wr) {.wr_id = wr_id, .next = i + 1 < n ? &wr[i + 1] : NULL};
    return wr;
}

static inline unsigned rdma_verbs_window(const rdma_verbs_conn_t * vc)
{
    return vc->completion ? RDMA_VERBS_WINDOW : 0;
}
rdma_status_t rdma_verbs_conn_create(rdma_xport_t * xp, rdma_conn_t * c,
                                     const rdma_verbs_peer_t * peer, rdma_verbs_conn_t ** vcp,
                                     char *why, size_t len);
void rdma_verbs_conn_release(rdma_verbs_conn_t * vc);
void rdma_verbs_conn_linger(rdma_verbs_conn_t * vc);
void rdma_verbs_linger_reap(rdma_xport_t * xp, double now);
void rdma_verbs_path_of(rdma_xport_t * xp, const rdma_verbs_peer_t * p, struct ibv_ah_attr *ah);
int rdma_verbs_rq_post(rdma_verbs_conn_t * vc, uint32_t n);
int rdma_verbs_rq_fill(rdma_verbs_conn_t * vc);
rdma_status_t rdma_verbs_cq_room(rdma_xport_t * xp, int n);
rdma_status_t rdma_verbs_cq_reserve(rdma_verbs_conn_t * vc);

/* rdma_verbs_srq.c */
rdma_verbs_conn_t *rdma_verbs_qpn_lookup(rdma_xport_t * xp, uint32_t qpn);
int rdma_verbs_srq_fill(rdma_xport_t * xp);
void rdma_verbs_srq_polled(rdma_xport_t * xp);
int rdma_verbs_srq_attach(rdma_verbs_conn_t * vc);
void rdma_verbs_srq_detach(rdma_verbs_conn_t * vc);
void rdma_verbs_async_run(rdma_xport_t * xp);
int rdma_verbs_srq_open(rdma_xport_t * xp);
void rdma_verbs_srq_close(rdma_xport_t * xp);
int rdma_verbs_srq_stats(const rdma_xport_t * xp, char *buf, size_t len);
rdma_status_t rdma_verbs_qp_rtr_rts(rdma_verbs_conn_t * vc);

/* rdma_verbs_data.c (main) */
/* Send WRs posted on vc so far, counted as wr_done counts completed ones. */
static inline uint64_t rdma_verbs_wr_posted(const rdma_verbs_conn_t * vc)
{
    return vc->wr_done + (vc->sq_depth - vc->sq_free);
}

void rdma_verbs_adopt(rdma_xport_t * xp);       /* locks */
void __attribute__((format(printf, 2, 3)))
rdma_verbs_conn_fail(rdma_verbs_conn_t * vc, const char *fmt, ...);     /* locks */
rdma_status_t rdma_verbs_post_wr(rdma_verbs_conn_t * vc, struct ibv_send_wr *wr, int flags);
rdma_status_t rdma_verbs_wait_room(rdma_verbs_conn_t * vc,
                                   int (*ready) (const rdma_verbs_conn_t *, uint32_t), uint32_t n,
                                   const char *what);
rdma_status_t rdma_verbs_post_sg(rdma_verbs_conn_t * vc, struct ibv_sge *sg, int n,
                                 uint64_t raddr, uint32_t rkey, int imm, int flags);
rdma_status_t rdma_verbs_post(rdma_verbs_conn_t * vc, uint64_t laddr, uint32_t lkey, uint32_t len,
                              uint64_t raddr, uint32_t rkey, int imm, int flags);
int rdma_verbs_cq_poll(rdma_xport_t * xp);
void rdma_verbs_closing(rdma_xport_t * xp, rdma_conn_t * c);
void rdma_verbs_abort(rdma_xport_t * xp, rdma_conn_t * c);
int rdma_verbs_drain(rdma_verbs_conn_t * vc);
rdma_status_t rdma_verbs_progress(rdma_xport_t * xp);
int rdma_verbs_wait_arm(rdma_xport_t * xp);
void rdma_verbs_wait_disarm(rdma_xport_t * xp);
void rdma_verbs_wait(rdma_xport_t * xp, long timeout_us);
extern const rb_xport_ops_t rdma_verbs_pipe_ops;

/* rdma_verbs_grow.c (main): growing rings, the pipe's ring_new..ring_move */
rdma_status_t rdma_verbs_ring_new(void *ctx, size_t size, void *desc, size_t *dlen,
                                  volatile void **ring);
void rdma_verbs_ring_drop(void *ctx, volatile void *old);
rdma_status_t rdma_verbs_stage_new(void *ctx, size_t size, const void *desc, size_t dlen,
                                   void **stage);
void rdma_verbs_ring_move(void *ctx, size_t size, const void *desc, size_t dlen);
void rdma_verbs_retire(rdma_verbs_conn_t * vc);
void rdma_verbs_grow_release(rdma_verbs_conn_t * vc);

/* rdma_verbs_reg.c */
rdma_status_t rdma_verbs_rc_open(rdma_xport_t * xp);
rdma_status_t rdma_verbs_rc_get(rdma_verbs_rc_t * vr, const void *addr, size_t len,
                                rcache_region_t ** r, int *hit);
void rdma_verbs_rc_put(rdma_xport_t * xp, int k, rcache_region_t * r);
void rdma_verbs_rc_close(rdma_xport_t * xp);
void rdma_verbs_read_done(rdma_verbs_conn_t * vc);
rdma_status_t rdma_verbs_ring_charge(rdma_xport_t * xp, long long delta);
/* rdma_verbs_grow.c: memory charged to the pinned cap (main) */
rdma_status_t rdma_verbs_grow_alloc(rdma_xport_t * xp, rdma_verbs_mem_t * m, size_t size,
                                    int access);
void rdma_verbs_grow_free(rdma_xport_t * xp, rdma_verbs_mem_t * m);
int rdma_verbs_stats(const rdma_xport_t * xp, char *buf, size_t len);
void rdma_verbs_counters(const rdma_xport_t * xp, rdma_xport_counters_t * c);
extern const zc_ops_t rdma_verbs_zc_ops;

/* rdma_verbs_rma.c (main) */
void rdma_verbs_rma_done(rdma_verbs_conn_t * vc);
void rdma_verbs_rma_fail(rdma_verbs_conn_t * vc);
void rdma_verbs_rma_close(rdma_xport_t * xp);
extern const rdma_xport_rma_ops_t rdma_verbs_rma_ops;

/* rdma_verbs_eager.c (main) */
void rdma_verbs_eager_open(rdma_xport_t * xp, const rcache_ops_t * ops);
void rdma_verbs_eager_close(rdma_xport_t * xp);
rdma_status_t rdma_verbs_hold(void *ctx, const void *addr, size_t len, void **handle);
int rdma_verbs_eager_stats(const rdma_xport_t * xp, char *buf, size_t len);

#endif /* RDMA_VERBS_H_INCLUDED */
