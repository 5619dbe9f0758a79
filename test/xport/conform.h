/*
 * conform: the transport-conformance harness (rdma_xport.h contract), one
 * for every transport: t_xport_shm runs it natively against
 * rdma_xport_shm, t_xport_verbs against rdma_xport_verbs on a real verbs
 * device (rxe0 in the Soft-RoCE VM).
 *
 * The driver (the test process) never touches the transport: every
 * scenario runs in forked "ranks" that open the transport, send their card
 * to the driver over a socketpair (standing in for PMI), get everybody's
 * cards back, connect and stream through their links (rdma_link.h: pipe
 * and rendezvous over the transport's events).  Ranks report "D text"
 * diagnostics, "K t" (about to be killed at CLOCK_MONOTONIC t), "P t text"
 * (peer failure seen at t), "M mode" and "B" (barrier) lines; their exit
 * status is the verdict.  Latencies are reported, never asserted.
 *
 * What every transport must do: connect one way (the peer accepts in
 * progress()) or both ways at once, announce READY exactly once per peer,
 * carry random-size streams both ways at once through a small ring
 * (wraparound, full rings) with every byte verified, in both pipe modes,
 * with superpipeline groups, a ping-pong, and a blocking receiver that
 * sleeps in wait() without losing a wakeup, and a peer that does not call
 * the transport for three times the timeout (its channel thread runs, as
 * in rdma_chan) is waited for, not reported dead, and a peer that exits
 * right after the close handshake is no failure (its last write still
 * lands), and puts and gets into a peer's exposed window land where and
 * when they say (conform_rma.c).  A transport adds its own
 * scenarios (peer death, zero-copy rights...) through conform_xport_t.
 */
#ifndef CONFORM_H_INCLUDED
#define CONFORM_H_INCLUDED

#include <stddef.h>
#include "rdma_link.h"
#include "rdma_xport_verbs.h"  /* rdma_verbs_params_t: prm.own */

#define CONFORM_MAXP 4
#define CONFORM_CARD_LEN 256

typedef struct scen {
    int nprocs;
    int all_connect;            /* every rank connects to every other at once */
    rb_mode_t mode;
    int force_completion;
    int super;                  /* superpipeline groups: C0 2 KiB, q 2, 1 KiB frames */
    int unsafe_in_order;        /* CH3RDMA_VERBS_UNSAFE_ASSUME_IN_ORDER */
    size_t inline_size;
    int srq;                    /* verbs: receives the shared receive queue
                                 * starts with (0: 256, as the channel);
                                 * -1: a receive queue per QP */
    size_t ring;                /* ring bytes (default 64 KiB) */
    size_t grow;                /* 0, or rings start at `ring` and must have
                                 * grown to this (ring_max) by the streams' end */
    size_t pinned_max;          /* a pinned-memory cap; with grow: the rings
                                 * must have stopped short of it */
    int pinned_rank;            /* the cap is this rank's only (0: every rank's) */
    size_t stream;              /* bytes per direction per pair (1 MiB; 4 MiB
                                 * with grow) */
    size_t msg_max;             /* stream messages of 1..msg_max bytes (0: 21000) */
    int pause;                  /* receivers read nothing every other 10 ms
                                 * (always with grow) */
    int pingpong;               /* 8-byte round trips, rank 0 <-> 1 */
    int block;                  /* ping-pong receivers sleep in wait() */
    int kill_rank;              /* this rank SIGKILLs itself mid-stream */
    int silent_rank;            /* this rank never calls progress and runs no
                                 * channel thread: nothing answers for it */
    int late_rank;              /* this rank sleeps `late` s before it calls
                                 * the transport (its channel thread runs) */
    double late;                /* default 1.5 s */
    int exit_rank;              /* after the close handshake (8 bytes each
                                 * way, then quiesce) this rank closes and
                                 * exits at once; the others progress `late`
                                 * s more: no failure may be reported */
    int dynamic;                /* every rank is a job of its own: its peers are
                                 * outside the job (ids from 1 up, hellos,
                                 * ev.accept), as for dynamic processes */
    int refuse_rank;            /* dynamic: this rank's ev.accept refuses every
                                 * hello; it answers for `late` s, then leaves */
    int later_rank;             /* dynamic: as refuse_rank, but its ev.accept
                                 * answers every hello "later" */
    int reopen;                 /* after the streams rank 0 closes its connection
                                 * to rank 1 and connects again at once; rank 1
                                 * holds its old one `late` s more without
                                 * calling the transport, then closes it; the
                                 * streams run again on the new connection */
    int wait_rank;              /* this rank (0: none) turns peers' requests
                                 * away in ev.admit for `late` s (its cap is
                                 * full), then takes them: they wait, alive */
    int rma;                    /* one-sided operations (conform_rma.c) after the streams */
    size_t bcopy;               /* verbs: one-sided bounce buffers up to this size */
    int ext;                    /* the transport's own scenario (hook), 0: none */
    int ext_fails;              /* ... in which connections fail (no streams) */
    double timeout;
} scen_t;

typedef struct node {
    int rank, fd;
    const scen_t *sc;
    char cards[CONFORM_MAXP][CONFORM_CARD_LEN];
    rdma_link_t conns[CONFORM_MAXP];
    rdma_link_config_t link;
    int nready, ready_calls[CONFORM_MAXP];
    int accepts;                /* dynamic: hellos this rank's owner was asked about */
    double admit_until;         /* wait_rank: refuse until then (set before the
                                 * channel thread starts, read-only after) */
    int admit_refused;          /* ... requests refused (__atomic: the thread's) */
    rdma_xport_t *xp;
    rdma_thread_t thr;          /* the channel thread, as rdma_chan runs it */
    char job[64], hello[32];    /* dynamic: this rank's job and hello */
    unsigned seed;
    void *ext[4];               /* the hook's state */
} node_t;

/* Where a rank calls the transport's hook. */
enum { CONFORM_CARDS, CONFORM_DATA, CONFORM_DONE };

typedef struct conform_case {
    const char *id, *desc;
    scen_t sc;                  /* zero fields: conform_defaults */
    const char *want;           /* expected peer failure, or NULL */
} conform_case_t;

typedef struct conform_xport {
    const rdma_xport_ops_t *ops;
    const char *job;            /* names the transport's shared objects */
    const char *device;         /* verbs: NULL = first active port */
    /* the transport's scenarios (sc->ext) at each phase; NULL: none */
    void (*hook)(node_t * nd, int phase);
} conform_xport_t;

extern const conform_xport_t *conform_t;
extern const conform_case_t conform_cases[];    /* what every transport passes */
extern const size_t conform_ncases;
extern const conform_case_t conform_dyn_cases[];        /* ... with peers outside the job */
extern const size_t conform_ndyn_cases;
extern const conform_case_t conform_grow_cases[];       /* ... with growing rings */
extern const size_t conform_ngrow_cases;

double conform_now(void);
void conform_say(node_t * nd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One progress call; 1 on the peer failure the scenario expects. */
int conform_progress(node_t * nd);
void conform_barrier(node_t * nd);
/* Byte i of the stream from rank s to rank d. */
unsigned char conform_gen(int s, int d, size_t i);
scen_t conform_defaults(const scen_t * in);
void conform_params(const scen_t * sc, node_t * nd, rdma_xport_params_t * prm);
/* Set up nd as rank of sc and open conform_t's transport (card: its
 * CONFORM_CARD_LEN-byte business card). */
rdma_status_t conform_open(node_t * nd, const scen_t * sc, int rank, char *card, char *err,
                           size_t errlen);

/* One-sided operations (conform_rma.c): ev.rma_done, and the scenario
 * (0, or -1 with a diagnosis said). */
void conform_rma_done(void *arg, rdma_conn_t * c, void *cookie, rdma_status_t st);
int conform_rma(node_t * nd);

/* Run the cases (ids listed in only, NULL: all) against conform_t. */
void conform_run(const conform_case_t * cases, size_t n, const char *only);

#endif /* CONFORM_H_INCLUDED */
