/*
 * ch3:rdma -- what CH3's own files take from the channel (CH3 includes this
 * header in its RMA, port and spawn code): nothing of the channel's
 * internals, which the glue shares through src/ch3/rdma_glue.h.
 */
#ifndef MPIDI_CH3_IMPL_H_INCLUDED
#define MPIDI_CH3_IMPL_H_INCLUDED

#include "mpidimpl.h"

/* Shared-memory windows are not implemented by this channel. */
#define MPIDI_CH3I_SHM_MUTEX_LOCK(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_UNLOCK(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_INIT(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_DESTROY(win_ptr)

#endif /* MPIDI_CH3_IMPL_H_INCLUDED */
