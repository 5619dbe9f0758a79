/*
 * rdma_glue.h -- what the CH3 glue files (this folder) share: the
 * five-function RDMA channel interface (P3 sec. 2.2) over the plain-C core
 * (src/core/rdma_chan.h), the VC's link, and the send, receive and failure
 * sides of the glue.
 *
 * Layers (docs/design.md): the ch3_*.c files call only the MPIDI_CH3I_RDMA_*
 * functions below (rdma_channel.c, rdma_owner.c, rdma_block.c), which map
 * each VC to its link (rdma_link.h): a transport connection with its pipe
 * and rendezvous.  All of it runs under MPICH's global critical section.
 */
#ifndef RDMA_GLUE_H_INCLUDED
#define RDMA_GLUE_H_INCLUDED

#include "mpidi_ch3_impl.h"
#include "rdma_chan.h"
#include "rdma_bufs.h"

_Static_assert(sizeof(rdma_link_t) == MPIDI_CH3I_LINK_BYTES,
               "MPIDI_CH3I_LINK_BYTES (mpidi_ch3_pre.h) is sizeof(rdma_link_t)");
_Static_assert(_Alignof(rdma_link_t) <= _Alignof(MPIDI_CH3I_link_space_t),
               "the VC's link space is aligned for rdma_link_t");

/* The link a VC owns (mpidi_ch3_pre.h: opaque to the rest of MPICH). */
static inline rdma_link_t *MPIDI_CH3I_link(const MPIDI_VC_t * vc)
{
    return (rdma_link_t *) (void *) vc->ch.link.bytes;
}

/* MPI_COMM_TYPE_SHARED: node communicators when windows can share
 * memory (rdma_win.c, which also fills CH3's window hooks). */
extern MPIR_Commops MPIDI_CH3I_RDMA_comm_fns;

/* Direct one-sided operations (rdma_rma.c): CH3's gather_info with the
 * windows' keys, their release at MPI_Win_free, the transport's report
 * of a finished operation (owner.rma_done); a direct operation in flight
 * holds vc's later sends until req completes (ch3_send.c). */
int MPIDI_CH3I_RDMA_win_rma_init(MPIDI_CH3U_Win_fns_t * win_fns);
void MPIDI_CH3I_RDMA_win_rma_free(MPIR_Win * win);
void MPIDI_CH3I_RDMA_rma_done(void *arg, rdma_link_t * l, void *cookie, rdma_status_t st);
void MPIDI_CH3I_Sendq_hold(MPIDI_VC_t * vc, MPIR_Request * req);

/* The five-function RDMA channel interface (P3 sec. 2.2, rdma_channel.c). */
int MPIDI_CH3I_RDMA_init_process_group(MPIDI_PG_t * pg, int pg_rank);
int MPIDI_CH3I_RDMA_init(MPIDI_PG_t * pg, int pg_rank);
int MPIDI_CH3I_RDMA_finalize(void);
int MPIDI_CH3I_RDMA_read_datav(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * nbytes);

/* The channel core (rdma_channel.c) and, out of line, a failed status of
 * an operation on vc as an mpi_errno (RDMA_ERR_PEER fails vc first). */
extern rdma_chan_t MPIDI_CH3I_chan;
int MPIDI_CH3I_RDMA_errno(MPIDI_VC_t * vc, rdma_status_t st) __attribute__ ((cold));
int MPIDI_CH3I_RDMA_peer_errno(const char *why) __attribute__ ((cold));
void MPIDI_CH3I_RDMA_dead_why(MPIDI_VC_t * vc, char *why, size_t len) __attribute__ ((cold));

/* Put up to the iov total into vc's pipe; *nbytes = bytes accepted (0 while
 * the connection is being made, the ring is full or the peer is still
 * pulling a large part: zc.h); ring: through the ring whatever the sizes
 * (rdma_chan_putv_ring).  Inline: the small-message path runs down to
 * rb_pipe_put_small in the caller's code (docs/design.md, Layers). */
static inline int MPIDI_CH3I_RDMA_put_datav(MPIDI_VC_t * vc, int ring, struct iovec *iov, int n,
                                            size_t * nbytes)
{
    rdma_link_t *l = MPIDI_CH3I_link(vc);
    rdma_status_t st = unlikely(ring) ? rdma_chan_putv_ring(&MPIDI_CH3I_chan, l, iov, n, nbytes)
        : rdma_chan_putv(&MPIDI_CH3I_chan, l, iov, n, nbytes);

    return st == RDMA_OK ? MPI_SUCCESS : MPIDI_CH3I_RDMA_errno(vc, st);
}

/* put_datav of len bytes the caller copies in itself (a header of fixed
 * size): where they go in vc's pipe, or NULL (use put_datav); the caller
 * writes them there, then calls put_commit. */
static inline void *MPIDI_CH3I_RDMA_put_claim(MPIDI_VC_t * vc, size_t len)
{
    return rdma_chan_claim(MPIDI_CH3I_link(vc), len);
}

/* always_inline down to rb_tx_commit (rdma_chan_commit, rdma_link_commit,
 * zc_commit, rb_pipe_commit): with two callers in ch3_send.c, GCC would
 * otherwise take one level out of line (25 more instructions per shm
 * send, callgrind). */
static inline __attribute__ ((always_inline))
int MPIDI_CH3I_RDMA_put_commit(MPIDI_VC_t * vc, size_t len)
{
    rdma_status_t st = rdma_chan_commit(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), len);

    return st == RDMA_OK ? MPI_SUCCESS : MPIDI_CH3I_RDMA_errno(vc, st);
}

/* Receive fast path: *buf, *len view what vc's peer has put, where it
 * lies, until MPIDI_CH3I_RDMA_read_done (rb_peek_t; RB_PEEK_SLOW: use
 * read_datav).  Inline: the progress engine's idle poll. */
static inline rb_peek_t MPIDI_CH3I_RDMA_read_view(MPIDI_VC_t * vc, const void **buf, size_t * len)
{
    return rdma_chan_peek(MPIDI_CH3I_link(vc), buf, len);
}

/* Mark n bytes of the read_view read (a whole small frame is released
 * inline, rb_pipe_view_done). */
static inline int MPIDI_CH3I_RDMA_read_done(MPIDI_VC_t * vc, size_t n)
{
    rdma_status_t st = rdma_chan_consume(&MPIDI_CH3I_chan, MPIDI_CH3I_link(vc), n);

    return st == RDMA_OK ? MPI_SUCCESS : MPIDI_CH3I_RDMA_errno(vc, st);
}

/* The one place a channel status becomes an mpi_errno (rdma_channel.c),
 * under the error class of the phase it happened in. */
enum { RDMA_AT_CONFIG, RDMA_AT_INIT, RDMA_AT_RUN, RDMA_AT_VC };
int rdma_mpi_errno(rdma_status_t st, int at);

/* This process's process group and business card (set at init). */
extern MPIDI_PG_t *MPIDI_CH3I_RDMA_pg;
enum { MPIDI_CH3I_RDMA_CARD_LEN = 1024 };
extern char MPIDI_CH3I_RDMA_card[MPIDI_CH3I_RDMA_CARD_LEN];

/* What the core asks of its owner, CH3 (rdma_owner.c: VCs, cards, the
 * ready list, hellos of processes outside the job). */
extern const rdma_chan_owner_t MPIDI_CH3I_RDMA_owner;
void MPIDI_CH3I_RDMA_hello_init(MPIDI_PG_t * pg, int pg_rank);
void MPIDI_CH3I_RDMA_ready_drop(MPIDI_VC_t * vc);
void MPIDI_CH3I_RDMA_early_init(void);
void MPIDI_CH3I_RDMA_early_fini(void);
void MPIDI_CH3I_RDMA_eager_set(MPIDI_VC_t * vc);

/* A failure of vc's link fails vc (ch3_fail.c: its requests complete with
 * the error): a VC of a process group, ours or one connected to it
 * (spawned, connected), or a connect-to-root accepted here once an accept
 * call matched it and until it closes (MPIC_Sendrecv makes an error out of
 * its wait fatal, whatever the server's error handler).  Other temporary
 * connect-to-root VCs: CH3 waits on them through its own requests and
 * cannot fail them, so a failure there is the error of the MPI call that
 * sees it (a close waits for INACTIVE, which a failed VC never becomes). */
static inline int MPIDI_CH3I_RDMA_vc_fails(const MPIDI_VC_t * vc)
{
    return vc->pg != NULL || (vc->ch.accepted && vc->state == MPIDI_VC_STATE_ACTIVE
                              && !vc->connreq_obj);     /* matched: ch3-port-forget.patch */
}

/* The spin budget of blocking waits (rdma_block.c): cpus_publish puts this
 * rank's CPU set into the KVS before the card is committed; spins reads
 * the node's sets after. */
int MPIDI_CH3I_RDMA_cpus_publish(MPIDI_PG_t * pg, int pg_rank) __attribute__ ((cold));
int MPIDI_CH3I_RDMA_spins(MPIDI_PG_t * pg, int pg_rank) __attribute__ ((cold));

/* Connection management under the interface (rdma_channel.c; the blocking
 * wait rdma_block.c, vc_destroy rdma_owner.c). */
int MPIDI_CH3I_RDMA_connect(MPIDI_VC_t * vc);
int MPIDI_CH3I_RDMA_poll_transports(void);
int MPIDI_CH3I_RDMA_close(MPIDI_VC_t * vc);
void MPIDI_CH3I_RDMA_closing(MPIDI_VC_t * vc);
int MPIDI_CH3I_RDMA_busy(MPIDI_VC_t * vc);
int MPIDI_CH3I_RDMA_block(int (*poll) (int *), int *progressed, unsigned long over);
void MPIDI_CH3I_RDMA_vc_destroy(MPIDI_VC_t * vc);
int MPIDI_CH3I_Acceptq_forget(MPIDI_VC_t * vc);        /* ch3-port-forget.patch: 0, 1, 2 */
extern struct MPIDI_VC *MPIDI_CH3I_ready_vcs;  /* READY VCs, polled by progress */
extern int MPIDI_CH3I_poll_spins;      /* idle polls before blocking */

/* The channel's MPI_T performance variables, from init to finalize
 * (rdma_pvars.c). */
void MPIDI_CH3I_RDMA_pvars_start(void);
void MPIDI_CH3I_RDMA_pvars_stop(void);

/* The CVARs, validated (rdma_cvars.c); a violation names the variable and
 * its allowed range in msg. */
rdma_status_t MPIDI_CH3I_RDMA_config_get(rdma_chan_config_t * cfg, char *msg, size_t len);

/* Send side (ch3_send.c) and receive side (ch3_progress.c). */
int MPIDI_CH3I_Send_progress(MPIDI_VC_t * vc, int *progressed);
int MPIDI_CH3I_Recv_progress(MPIDI_VC_t * vc, int *progressed);
int MPIDI_CH3I_Progress_init(void);
int MPIDI_CH3I_Progress_finalize(void);
void MPIDI_CH3I_Sendq_fail(MPIDI_VC_t * vc, int err);

/* A peer that dies (ch3_fail.c): its VC fails once, naming it (why), and
 * what waits on it completes with MPIX_ERR_PROC_FAILED; VC_dead when the
 * process manager reports the death; Hydra's SIGUSR1 notices counted
 * (usr1_count) and handled (usr1_seen) by Fault_notice. */
void MPIDI_CH3I_Fault_init(void);
int MPIDI_CH3I_Fault_notice(void) __attribute__ ((cold));
int MPIDI_CH3I_VC_fail(MPIDI_VC_t * vc, const char *why) __attribute__ ((cold));
int MPIDI_CH3I_VC_dead(MPIDI_VC_t * vc) __attribute__ ((cold));
void MPIDI_CH3I_Owed_init(MPIDI_CH3_PktHandler_Fcn ** pkt);
void MPIDI_CH3I_Owed_end(MPIDI_VC_t * vc, int err);
void MPIDI_CH3I_Owed_pkt(MPIDI_VC_t * vc, const MPIDI_CH3_Pkt_t * pkt) __attribute__ ((cold));
void MPIDI_CH3I_Owed_add(MPIDI_VC_t * vc, MPIR_Request * req);
void MPIDI_CH3I_Owed_paid(MPI_Request handle);
/* CH3's rendezvous send (MPIDI_CH3_RndvSend), its request owed. */
int MPIDI_CH3I_Owed_rndv_send(MPIR_Request ** sreq_p, const void *buf, MPI_Aint count,
                              MPI_Datatype datatype, int dt_contig, intptr_t data_sz,
                              MPI_Aint dt_true_lb, int rank, int tag, MPIR_Comm * comm,
                              int context_offset);

/* The rendezvous of large messages (rdma_rndv.c): vc's rndvSend_fn and
 * rndvRecv_fn (vc), or the packet handlers and the progress hook (vc
 * NULL); the size from which CH3's eager limit asks it (config, at init);
 * a receive's read finished (rma_done); a send's exposure released (CH3's
 * CTS); the hook gone (MPI_Finalize). */
void MPIDI_CH3I_Rndv_init(MPIDI_VC_t * vc, MPIDI_CH3_PktHandler_Fcn ** pkt);
void MPIDI_CH3I_Rndv_config(const rdma_chan_config_t * cfg);
void MPIDI_CH3I_Rndv_read_done(rdma_link_t * l, MPIR_Request * rreq, rdma_status_t st);
void MPIDI_CH3I_Rndv_release(MPIDI_VC_t * vc, MPIR_Request * sreq);
void MPIDI_CH3I_Rndv_finalize(void);
extern MPL_atomic_int_t MPIDI_CH3I_usr1_count;
extern int MPIDI_CH3I_usr1_seen;

#if defined(USE_EAGER_SHORT)
/* An eager-short packet on the wire ends with its data_sz data bytes.
 * Until `have` bytes reach its data, only that prefix is asked for; a
 * data_sz out of range (never sent) reads as the whole struct. */
static inline size_t MPIDI_CH3I_eagershort_wire_len(const MPIDI_CH3_Pkt_eagershort_send_t * pkt,
                                                    size_t have)
{
    const size_t hdr = offsetof(MPIDI_CH3_Pkt_eagershort_send_t, data);

    if (have < hdr)
        return hdr;
    if (pkt->data_sz < 0 || pkt->data_sz > MPIDI_EAGER_SHORT_SIZE)
        return sizeof(*pkt);
    return hdr + (size_t) pkt->data_sz;
}
#endif

/* Shared memory: a send packet (eager, ready, synchronous) travels as its
 * struct padded to MPIDI_CH3I_SHM_SEND_HDR bytes, so that its data starts
 * 64 bytes into the frame (after the pipe's RB_HDR), on a cache line:
 * frames start on RING_CHUNK boundaries, 64 bytes or more.  Behind the
 * whole 80-byte union the data started 32 bytes into a line; aligned, the
 * ping-pong measured 0.96-0.98x the time from 512 B to 8 KiB (11 pairs).
 * Other packets, eager-short ones included, keep the union there. */
#define MPIDI_CH3I_SHM_SEND_HDR (64 - RB_HDR)
_Static_assert(sizeof(MPIDI_CH3_Pkt_send_t) <= MPIDI_CH3I_SHM_SEND_HDR,
               "a send packet fits the shared-memory send header");

static inline size_t MPIDI_CH3I_shm_hdr_len(const MPIDI_CH3_Pkt_t * pkt)
{
    return pkt->type == MPIDI_CH3_PKT_EAGER_SEND || pkt->type == MPIDI_CH3_PKT_READY_SEND
        || pkt->type == MPIDI_CH3_PKT_EAGER_SYNC_SEND
        ? MPIDI_CH3I_SHM_SEND_HDR : sizeof(MPIDI_CH3_Pkt_t);
}

/* Bytes of a CH3 header in vc's pipe, given `have` bytes of it at pkt
 * (at least its type).  Over a NIC, point-to-point packets travel as their
 * own struct, not the whole MPIDI_CH3_Pkt_t union (80 B), and an
 * eager-short one only as far as its data: an 8-byte message is a 48-byte
 * frame instead of 104 on the wire (completion-driven; 56 with a tail
 * flag).  Both sides derive the length from the link's transport (the same
 * at both ends) and the header alone.  Shared memory pads send packets to
 * a cache line's data offset instead (MPIDI_CH3I_shm_hdr_len): packed
 * short, they measured 0.93-0.99x at 128 B-8 KiB but 1.43x at 32 B and
 * 1.15x at 64 B (ping-pong latency ratios, 21 pairs, 512-byte slots). */
static inline size_t MPIDI_CH3I_pkt_wire_len(const MPIDI_VC_t * vc, const MPIDI_CH3_Pkt_t * pkt,
                                             size_t have)
{
    if (!rdma_chan_over_wire(MPIDI_CH3I_link(vc)))
        return MPIDI_CH3I_shm_hdr_len(pkt);
    switch (pkt->type) {
#if defined(USE_EAGER_SHORT)
        case MPIDI_CH3_PKT_EAGERSHORT_SEND:
            return MPIDI_CH3I_eagershort_wire_len(&pkt->eagershort_send, have);
#endif
        case MPIDI_CH3_PKT_EAGER_SEND:
        case MPIDI_CH3_PKT_READY_SEND:
        case MPIDI_CH3_PKT_EAGER_SYNC_SEND:
            return sizeof(MPIDI_CH3_Pkt_send_t);
        case MPIDI_CH3_PKT_EAGER_SYNC_ACK:
            return sizeof(MPIDI_CH3_Pkt_eager_sync_ack_t);
        default:
            return sizeof(MPIDI_CH3_Pkt_t);
    }
}

#endif /* RDMA_GLUE_H_INCLUDED */
