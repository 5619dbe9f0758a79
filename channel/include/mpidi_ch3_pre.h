/*
 * ch3:rdma -- channel types CH3 embeds in its own structures.
 */
#ifndef MPIDI_CH3_PRE_H_INCLUDED
#define MPIDI_CH3_PRE_H_INCLUDED

#include "rdma_link.h"

#undef MPID_USE_SEQUENCE_NUMBERS
/* Process groups travel as strings in connect/accept (ch3u_port.c), as
 * in ch3:sock and ch3:nemesis. */
#define MPIDI_DEV_IMPLEMENTS_KVS

typedef struct {
    int dummy;
} MPIDI_CH3I_CH_comm_t;

/* Per-VC channel state.  All fields are protected by the global critical
 * section that every CH3 entry point holds. */
typedef struct MPIDI_CH3I_VC {
    struct MPIR_Request *sendq_head;    /* requests waiting for pipe space */
    struct MPIR_Request *sendq_tail;
    struct MPIR_Request *recv_active;   /* request whose data is arriving */
    void *pkt;                  /* header being assembled (MPIDI_CH3_Pkt_t) */
    size_t pkt_off;             /* bytes of *pkt already read */
    rdma_link_t conn;           /* transport connection, pipe, rendezvous */
    struct MPIDI_VC *next_ready;        /* list of READY VCs polled by progress */
    /* packed into the 8 bytes two ints took before accept_tag: the VC
     * keeps its size, and the hot fields of pg->vct[] their placement */
    unsigned char on_ready_list;
    unsigned char terminating;  /* 1: close protocol done, 2: torn down */
    int accept_tag;             /* a connect-to-root accepted here: its port
                                 * tag + 1 until READY, when it goes to CH3's
                                 * accept queue; 0: none */
} MPIDI_CH3I_VC;

#define MPIDI_CH3_VC_DECL struct MPIDI_CH3I_VC ch;

typedef struct MPIDI_CH3I_Progress_state {
    int completion_count;
} MPIDI_CH3I_Progress_state;

#define MPIDI_CH3_PROGRESS_STATE_DECL MPIDI_CH3I_Progress_state ch;

extern volatile unsigned int MPIDI_CH3I_progress_completion_count;

#endif /* MPIDI_CH3_PRE_H_INCLUDED */
