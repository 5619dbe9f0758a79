/*
 * rdma_pvars.c -- the channel's counters (rdma_chan_counters_get, summed
 * over the links) as MPI_T performance variables of category CH3_RDMA,
 * registered at init; after finalize a read returns the last values.
 */
#include "rdma_glue.h"

/* After finalize a read returns the last values (the links are gone).
 * Both written at init/finalize and read by rdma_pvar_read, all inside
 * the global critical section. */
static rdma_chan_counters_t rdma_final_counters;
static int rdma_chan_live;

typedef struct rdma_pvar {
    const char *name;
    size_t off;                 /* of its uint64_t in rdma_chan_counters_t */
    MPIR_T_pvar_class_t varclass;
    const char *desc;
} rdma_pvar_t;

#define RDMA_PVAR(name_, field_, class_, desc_) \
    { name_, offsetof(rdma_chan_counters_t, field_), MPI_T_PVAR_CLASS_##class_, desc_ }
static const rdma_pvar_t rdma_pvars[] = {
    RDMA_PVAR("rdma_rcache_hits", xp.reg_hits, COUNTER,
              "Registrations of user buffers served by the registration cache (verbs)"),
    RDMA_PVAR("rdma_rcache_misses", xp.reg_misses, COUNTER,
              "Registrations of user buffers the registration cache had to make (verbs)"),
    RDMA_PVAR("rdma_zcopy_parts", zcopy_parts, COUNTER,
              "Large message parts sent zero-copy (RDMA read, or CMA on shared memory)"),
    RDMA_PVAR("rdma_copy_parts", copy_parts, COUNTER,
              "Large message parts sent through the ring (copy path)"),
    RDMA_PVAR("rdma_copy_fallbacks", copy_fallbacks, COUNTER,
              "Zero-copy parts the receiver could not pull, sent through the ring instead"),
    RDMA_PVAR("rdma_ring_frames", ring_frames, COUNTER, "Ring frames sent"),
    RDMA_PVAR("rdma_ring_writes", ring_writes, COUNTER,
              "Transport writes of ring frames (one RDMA write may carry several frames)"),
    RDMA_PVAR("rdma_ring_grows", ring_grows, COUNTER,
              "Send sides moved to a ring twice the size (verbs, MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE)"),
    RDMA_PVAR("rdma_ring_shrinks", ring_shrinks, COUNTER,
              "Send sides moved back to a ring of the first size (MPIR_CVAR_CH3_RDMA_RING_IDLE)"),
    RDMA_PVAR("rdma_ring_bytes", ring_bytes, LEVEL,
              "Ring memory of this process's connections now: receive rings, and over verbs "
              "the send stages (pinned); shared-memory rings are resident only where used"),
    RDMA_PVAR("rdma_eager_zcopy_sends", eager_zcopy_sends, COUNTER,
              "Eager sends whose payload went straight from a registered user buffer "
              "(MPIR_CVAR_CH3_RDMA_EAGER_REG_USES)"),
    RDMA_PVAR("rdma_helper_registrations", xp.helper_regs, COUNTER,
              "Registrations the helper thread made ahead of use (MPIR_CVAR_CH3_RDMA_REG_HELPER)"),
    RDMA_PVAR("rdma_rma_direct_puts", rma_puts, COUNTER,
              "MPI_Put operations the NIC (RDMA write) or CMA did without the target's CPU"),
    RDMA_PVAR("rdma_rma_direct_gets", rma_gets, COUNTER,
              "MPI_Get operations the NIC (RDMA read) or CMA did without the target's CPU"),
    RDMA_PVAR("rdma_rma_direct_atomics", rma_atomics, COUNTER,
              "Accumulates, fetch-and-ops and compare-and-swaps the NIC did (windows with "
              "the info keys which_accumulate_ops and disable_shm_accumulate whose ranks all reach "
              "each other over verbs)"),
    RDMA_PVAR("rdma_rma_direct_at_call", rma_at_call, COUNTER,
              "Of rdma_rma_direct_puts and _gets, those started at the call, to a target whose "
              "epoch was granted with no operation queued (the rest wait in CH3's queue)"),
    RDMA_PVAR("rdma_rma_messages", rma_messages, COUNTER,
              "One-sided operations to other nodes or to user-memory windows sent as CH3 "
              "messages (accumulates, derived datatypes, lock requests, no direct path)"),
    RDMA_PVAR("rdma_rndv_sends", rndv_sends, COUNTER,
              "Large messages sent by the channel's rendezvous (one round trip: the receiver "
              "copies from the send buffer, with CMA or an RDMA read)"),
    RDMA_PVAR("rdma_rndv_fallbacks", rndv_fallbacks, COUNTER,
              "Large messages that arrived by the channel's rendezvous but took CH3's (a "
              "non-contiguous or short receive buffer, or a copy not permitted)"),
    RDMA_PVAR("rdma_conns_opened", conns_opened, COUNTER,
              "Connections over the network to ranks of the job made ready (again after an "
              "eviction)"),
    RDMA_PVAR("rdma_conns_evicted", conns_evicted, COUNTER,
              "Connections over the network closed for the cap (MPIR_CVAR_CH3_RDMA_MAX_CONNS), "
              "by this side or its peer; they reopen on demand"),
    RDMA_PVAR("rdma_conns_live", conns_live, LEVEL,
              "Connections over the network ready now"),
    RDMA_PVAR("rdma_conns_live_max", conns_peak, HIGHWATERMARK,
              "Most connections over the network open at once (ready or closing) under "
              "MPIR_CVAR_CH3_RDMA_MAX_CONNS: at most the cap, as connects and peers' requests "
              "wait for a slot (0 without the cap)"),
    RDMA_PVAR("rdma_pinned_bytes", xp.pinned_bytes, LEVEL,
              "User memory registered with the NIC now, cached registrations included"),
    /* MPICH 4.0.2 drops the watermark flag of a handle (pvar_impl.c,
     * MPIR_T_pvar_handle_alloc_impl overwrites hnd->flags), so a read
     * calls get_value, which returns the channel's own peak */
    RDMA_PVAR("rdma_pinned_bytes_max", xp.pinned_bytes_max, HIGHWATERMARK,
              "Peak of rdma_pinned_bytes since MPI_Init")
};

/* The counters change with progress and MPI_T holds only its own lock:
 * read them inside the global critical section. */
static void rdma_pvar_read(void *addr, void *obj_handle, int count, void *buf)
{
    const rdma_pvar_t *v = addr;
    rdma_chan_counters_t c;

    (void) obj_handle, (void) count;
    MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    if (rdma_chan_live)
        rdma_chan_counters_get(&MPIDI_CH3I_chan, &c);
    else
        c = rdma_final_counters;
    MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    *(unsigned long long *) buf = *(const uint64_t *) ((const char *) &c + v->off);
}

void MPIDI_CH3I_RDMA_pvars_start(void)
{
    size_t i;

    rdma_chan_live = 1;
    for (i = 0; i < sizeof(rdma_pvars) / sizeof(rdma_pvars[0]); i++)
        MPIR_T_PVAR_REGISTER_impl(rdma_pvars[i].varclass, MPI_UNSIGNED_LONG_LONG, rdma_pvars[i].name,
                                  (void *) &rdma_pvars[i], 1, MPI_T_ENUM_NULL,
                                  MPI_T_VERBOSITY_USER_BASIC, MPI_T_BIND_NO_OBJECT,
                                  MPIR_T_PVAR_FLAG_READONLY | MPIR_T_PVAR_FLAG_CONTINUOUS,
                                  rdma_pvar_read, NULL, "CH3_RDMA", rdma_pvars[i].desc);
}

void MPIDI_CH3I_RDMA_pvars_stop(void)
{
    if (rdma_chan_live)
        rdma_chan_counters_get(&MPIDI_CH3I_chan, &rdma_final_counters);
    rdma_chan_live = 0;
}
