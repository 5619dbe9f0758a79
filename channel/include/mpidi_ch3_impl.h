/*
 * ch3:rdma -- what CH3's own files take from the channel (CH3 includes this
 * header in its RMA, port and spawn code): nothing of the channel's
 * internals, which the glue shares through src/ch3/rdma_glue.h.
 */
#ifndef MPIDI_CH3_IMPL_H_INCLUDED
#define MPIDI_CH3_IMPL_H_INCLUDED

#include "mpidimpl.h"

/* Accumulates to a target on this node, in a window in a node segment
 * (src/ch3/rdma_win.c): CH3 takes the window's process-shared mutex
 * around each one. */
#define MPIDI_CH3I_SHM_MUTEX_CALL(op, win_ptr)                                  \
    do {                                                                        \
        int mutex_err_;                                                         \
        op((win_ptr)->shm_mutex, &mutex_err_);                                  \
        MPIR_Assert(mutex_err_ == MPL_SUCCESS);                                 \
    } while (0)
#define MPIDI_CH3I_SHM_MUTEX_LOCK(win_ptr) MPIDI_CH3I_SHM_MUTEX_CALL(MPL_proc_mutex_lock, win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_UNLOCK(win_ptr) MPIDI_CH3I_SHM_MUTEX_CALL(MPL_proc_mutex_unlock, win_ptr)

#endif /* MPIDI_CH3_IMPL_H_INCLUDED */
