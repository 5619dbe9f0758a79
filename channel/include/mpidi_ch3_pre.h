/*
 * ch3:rdma -- channel types CH3 embeds in its own structures.
 */
#ifndef MPIDI_CH3_PRE_H_INCLUDED
#define MPIDI_CH3_PRE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>

#undef MPID_USE_SEQUENCE_NUMBERS
/* Process groups travel as strings in connect/accept (ch3u_port.c), as
 * in ch3:sock and ch3:nemesis. */
#define MPIDI_DEV_IMPLEMENTS_KVS

typedef struct {
    int dummy;
} MPIDI_CH3I_CH_comm_t;

/* The buffers of messages that arrive before their receives
 * (channel/patches/ch3-early-bufs.patch): kept for the next ones
 * (src/ch3/rdma_owner.c, src/core/rdma_bufs.h). */
void *MPIDI_CH3I_early_buf_alloc(size_t len);
void MPIDI_CH3I_early_buf_free(void *p, size_t len);
#define MPIDI_CH3_EARLY_BUF_ALLOC(sz_) MPIDI_CH3I_early_buf_alloc((size_t) (sz_))
#define MPIDI_CH3_EARLY_BUF_FREE(p_, sz_) MPIDI_CH3I_early_buf_free((p_), (size_t) (sz_))

/* CH3's eager limit for a send of sz_ bytes on vc, contiguous or not
 * (channel/patches/ch3-eager-limit.patch, src/ch3/rdma_rndv.c): from
 * eager_from bytes lower where the channel's rendezvous takes the message
 * now; below, or for a non-contiguous buffer (which the rendezvous leaves
 * to CH3's RTS/CTS), vc's (one compare on the small-message path). */
struct MPIDI_VC;
extern size_t MPIDI_CH3I_eager_from;
int MPIDI_CH3I_eager_limit(const struct MPIDI_VC *vc);
#define MPIDI_CH3_EAGER_LIMIT(vc_, sz_, contig_) \
    ((size_t) (sz_) < MPIDI_CH3I_eager_from || !(contig_) ? \
     (vc_)->eager_max_msg_sz : MPIDI_CH3I_eager_limit(vc_))

/* MPI_Alloc_mem and MPI_Free_mem (src/ch3/rdma_win.c): large blocks in
 * transparent huge pages. */
#define MPIDI_CH3I_HAS_ALLOC_MEM
#define MPIDI_CH3I_HAS_FREE_MEM

/* The VC's link (rdma_link_t, src/core/rdma_link.h: transport connection,
 * pipe, rendezvous) held in place but opaque: MPICH's translation units see
 * its size only, the channel reaches it through MPIDI_CH3I_link(vc)
 * (src/ch3/rdma_glue.h, which checks size and alignment).  In place, not
 * behind a pointer: the pipe's hot fields keep their cache lines in the VC. */
#define MPIDI_CH3I_LINK_BYTES 6440
typedef union MPIDI_CH3I_link_space {
    unsigned char bytes[MPIDI_CH3I_LINK_BYTES];
    uint64_t align;
} MPIDI_CH3I_link_space_t;

/* Where a VC's close stands (ch3_progress.c, ch3_fail.c). */
enum MPIDI_CH3I_term {
    MPIDI_CH3I_TERM_NONE = 0,
    MPIDI_CH3I_TERM_CLOSED = 1,         /* CH3's close protocol done */
    MPIDI_CH3I_TERM_DOWN = 2,           /* torn down */
    MPIDI_CH3I_TERM_FAILED = 3          /* its peer failed (MPIDI_CH3I_VC_fail) */
};

/* Per-VC channel state.  All fields are protected by the global critical
 * section that every CH3 entry point holds. */
typedef struct MPIDI_CH3I_VC {
    struct MPIR_Request *sendq_head;    /* requests waiting for pipe space */
    struct MPIR_Request *sendq_tail;
    struct MPIR_Request *recv_active;   /* request whose data is arriving */
    void *pkt;                  /* header being assembled (MPIDI_CH3_Pkt_t) */
    size_t pkt_off;             /* bytes of *pkt already read */
    MPIDI_CH3I_link_space_t link;       /* MPIDI_CH3I_link(vc) */
    struct MPIDI_VC *next_ready;        /* list of READY VCs polled by progress */
    /* packed into the 8 bytes two ints took before accept_tag: the VC
     * keeps its size, and the hot fields of pg->vct[] their placement */
    unsigned char on_ready_list;
    unsigned char terminating;  /* enum MPIDI_CH3I_term */
    unsigned char accepted;     /* made here for a connect-to-root: failing
                                 * before an accept call matched it, it goes
                                 * without an error (rdma_owner.c); after,
                                 * it fails like a group's VC */
    int accept_tag;             /* a connect-to-root accepted here: its port
                                 * tag + 1 until READY, when it goes to CH3's
                                 * accept queue; 0: none */
} MPIDI_CH3I_VC;

#define MPIDI_CH3_VC_DECL struct MPIDI_CH3I_VC ch;

/* The channel's rendezvous (src/ch3/rdma_rndv.c): CH3's RTS
 * with the send buffer's address (the receiver copies from it), and the
 * control packets that follow.  RDMA_WIRE_VERSION 6; 7: over verbs too. */
#define MPIDI_CH3_PKT_ENUM MPIDI_CH3_PKT_RDMA_RTS, MPIDI_CH3_PKT_RDMA_PUSH, \
        MPIDI_CH3_PKT_RDMA_PUSHED, MPIDI_CH3_PKT_RDMA_DONE
#define MPIDI_CH3_PKT_DEFS                                                     \
    typedef struct MPIDI_CH3I_Pkt_rts {                                        \
        MPIDI_CH3_Pkt_send_t rts;       /* CH3's RTS, type RDMA_RTS */         \
        uint64_t addr, key;     /* the send buffer, as the sender exposed it */ \
    } MPIDI_CH3I_Pkt_rts_t;                                                    \
    typedef struct MPIDI_CH3I_Pkt_rctl {                                       \
        MPIDI_CH3_Pkt_type_t type;      /* RDMA_PUSH, _PUSHED or _DONE */      \
        MPI_Request sender_req_id, receiver_req_id;                            \
        int status;             /* PUSHED, DONE: 0 ok, else refused */         \
        uint64_t raddr, key, off, len;  /* PUSH: bytes [off, off+len) of the   \
                                         * message to the receiver's raddr */  \
    } MPIDI_CH3I_Pkt_rctl_t;
#define MPIDI_CH3_PKT_DECL MPIDI_CH3I_Pkt_rts_t rdma_rts; MPIDI_CH3I_Pkt_rctl_t rdma_ctl;

/* Per-request channel state.  ring (ch3_send.c): set when the request's
 * iov first meets the pipe, read when its queued rest goes on.  rndv*
 * (rdma_rndv.c): a receive's rendezvous, set by its RTS; a send's
 * exposure. */
typedef struct MPIDI_CH3I_Request {
    int ring;                   /* its data keeps to the ring: an accumulate */
    int rndv;                   /* RNDV_* (rdma_rndv.c) */
    uint64_t rndv_addr, rndv_key;       /* RDMA_RTS: the sender's buffer */
    union {
        void *handle;           /* a send's exposure, released at DONE or CTS */
        struct MPIR_Request *next;      /* a receive's: in the list of reads done */
    } rndv_u;
} MPIDI_CH3I_Request;

#define MPIDI_CH3_REQUEST_DECL MPIDI_CH3I_Request ch;

typedef struct MPIDI_CH3I_Progress_state {
    int completion_count;
} MPIDI_CH3I_Progress_state;

#define MPIDI_CH3_PROGRESS_STATE_DECL MPIDI_CH3I_Progress_state ch;

extern volatile unsigned int MPIDI_CH3I_progress_completion_count;

/* Per-window channel state: a window in a node segment (MPI-3 shared
 * memory, src/ch3/rdma_win.c) and the keys of direct operations
 * (src/ch3/rdma_rma.c).  Set at creation, read-only until
 * MPI_Win_free. */
#define MPIDI_CH3_WIN_DECL                                                      \
    void *shm_seg;              /* the node segment, mapped; NULL: none */     \
    size_t shm_seg_len;                                                         \
    MPL_proc_mutex_t *shm_mutex;        /* accumulates to node targets: in     \
                                         * shm_seg's header page */            \
    struct MPIDI_CH3I_win_rma *rma;     /* direct operations (rdma_rma.c)     \
                                         * NULL: none */

#endif /* MPIDI_CH3_PRE_H_INCLUDED */
