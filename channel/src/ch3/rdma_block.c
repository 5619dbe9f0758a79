/*
 * rdma_block.c -- how long an idle rank polls, and how it blocks then.
 * The spin budget (rdma_chan_spins) weighs this node's ranks against the
 * CPUs they may run on; past it, MPIDI_CH3I_RDMA_block arms a waiter and
 * sleeps outside MPICH's global critical section (rdma_chan_wait_arm
 * chooses the waiter and the sleep).  All of it is cold: the idle path
 * must stay out of the hot poll code's way.
 */
#include "rdma_glue.h"
#include <sched.h>
#include <unistd.h>

/* KVS key of a rank's CPU set (MPIDI_CH3I_RDMA_cpus_publish, MPIDI_CH3I_RDMA_spins). */
#define RDMA_CPUS_KEY "P%d-rdma-cpus"

/* This process's CPU set; -1 if the kernel does not say. */
__attribute__ ((cold)) static int rdma_cpus_mine(rdma_chan_cpus_t * s)
{
    cpu_set_t set;
    int i;

    memset(s, 0, sizeof(*s));
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    for (i = 0; i < RDMA_CHAN_CPUS_MAX && i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set))
            s->w[i / 64] |= 1ull << (i % 64);
    return 0;
}

__attribute__ ((cold)) static int rdma_local_ranks(MPIDI_PG_t * pg, int pg_rank)
{
    int i, local = 0;

    for (i = 0; i < pg->size; i++)
        local += pg->vct[i].node_id == pg->vct[pg_rank].node_id;
    return local;
}

/* With node peers, this rank's CPU set goes into the KVS before the
 * card, whose commit and barrier publish both (MPIDI_PG_SetConnInfo). */
int MPIDI_CH3I_RDMA_cpus_publish(MPIDI_PG_t * pg, int pg_rank)
{
    char key[32], val[RDMA_CHAN_CPUS_MAX / 4 + 1];
    rdma_chan_cpus_t s;

    if (rdma_local_ranks(pg, pg_rank) < 2 || rdma_cpus_mine(&s))
        return MPI_SUCCESS;
    rdma_chan_cpus_format(&s, val, sizeof(val));
    snprintf(key, sizeof(key), RDMA_CPUS_KEY, pg_rank);
    return MPIR_pmi_kvs_put(key, val);
}

/* Spin budget of blocking waits (rdma_chan_spins): this node's ranks
 * against the CPUs they may run on together, the union of their sets.
 * A rank's own set alone makes ranks bound to cores of their own
 * (mpiexec -bind-to core, taskset) look oversubscribed, one CPU each,
 * and block on every wait: 8 B over shm took 30 us instead of 0.21.
 * A peer whose set is not known leaves the union smaller (blocking is
 * the safe side).  These run once: cold, out of the hot code's way. */
int MPIDI_CH3I_RDMA_spins(MPIDI_PG_t * pg, int pg_rank)
{
    char key[32], val[RDMA_CHAN_CPUS_MAX / 4 + 1];
    int i, local = rdma_local_ranks(pg, pg_rank);
    rdma_chan_cpus_t all;

    if (rdma_cpus_mine(&all))
        return rdma_chan_spins(&MPIDI_CH3I_chan.cfg, local,
                               (int) sysconf(_SC_NPROCESSORS_ONLN));
    for (i = 0; local > 1 && i < pg->size; i++) {
        if (i == pg_rank || pg->vct[i].node_id != pg->vct[pg_rank].node_id)
            continue;
        snprintf(key, sizeof(key), RDMA_CPUS_KEY, i);
        if (MPIR_pmi_kvs_get(i, key, val, sizeof(val)) != MPI_SUCCESS
            || rdma_chan_cpus_merge(&all, val))
            break;
    }
    return rdma_chan_spins(&MPIDI_CH3I_chan.cfg, local, rdma_chan_cpus_count(&all));
}

/* Idle for `over` polls past the spin phase: arm the transport that can
 * wake us, poll once more, then block until a peer writes to us or a
 * timeout passes (outside the global critical section); the choice of
 * waiter and sleep is rdma_chan_wait_arm's.  Cold (.text.unlikely): the
 * idle path must not move the hot poll code; a change of this function's
 * size once cost 0.1 us of 8-byte shm latency through code layout alone. */
__attribute__ ((cold)) int MPIDI_CH3I_RDMA_block(int (*poll) (int *), int *progressed, unsigned long over)
{
    long us;
    int k = rdma_chan_wait_arm(&MPIDI_CH3I_chan, over, MPIR_IS_THREADED, &us);
    int mpi_errno = poll(progressed);

    if (mpi_errno || *progressed) {
        rdma_chan_wait(&MPIDI_CH3I_chan, k, us, 0);
        return mpi_errno;
    }
    MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    rdma_chan_wait(&MPIDI_CH3I_chan, k, us, 1);
    MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    return MPI_SUCCESS;
}
