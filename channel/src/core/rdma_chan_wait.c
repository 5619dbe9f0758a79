/*
 * rdma_chan_wait.c -- the channel core's waiting (rdma_chan.h): how long
 * to spin, and which transport's waiter a blocking wait sleeps in.
 */
#include <string.h>
#include <time.h>
#include "rdma_chan.h"

/* Auto spin budget with a core per rank.  With peers on the node it is
 * long enough to outlast an application's own imbalance between
 * exchanges before the futex sleep (ch3:nemesis never blocks).  Host D,
 * NAS cg class A np=2 (a wait per 56 KB exchange): 2000 polls blocked
 * on the futex about 350 times a run (strace) and took 1.10-1.17x
 * ch3:nemesis' time; 200,000 blocked once: 1.00 (11 alternating pairs
 * each).  A rank alone on its node keeps 2000: its waits end in 50 us
 * naps, then the CQ event, not measured this way. */
enum { RDMA_SPINS_PEERS = 200000, RDMA_SPINS_ALONE = 2000 };

int rdma_chan_spins(const rdma_chan_config_t * cfg, int local, int cores)
{
    if (cfg->poll_spins >= 0)
        return cfg->poll_spins;
    return local > cores ? 0 : local > 1 ? RDMA_SPINS_PEERS : RDMA_SPINS_ALONE;
}

/* Node CPU sets (rdma_chan.h): used once at init, so cold, which keeps
 * them out of the hot code's layout. */
static const char rdma_chan_hex[] = "0123456789abcdef";

__attribute__ ((cold)) int rdma_chan_cpus_format(const rdma_chan_cpus_t * s, char *buf, size_t len)
{
    size_t k, n = 0;

    for (k = 0; k < RDMA_CHAN_CPUS_MAX / 4; k++)
        if (s->w[k / 16] >> (k % 16 * 4) & 15)
            n = k + 1;
    if (n >= len)
        return -1;
    for (k = 0; k < n; k++)
        buf[k] = rdma_chan_hex[s->w[k / 16] >> (k % 16 * 4) & 15];
    buf[n] = '\0';
    return 0;
}

__attribute__ ((cold)) int rdma_chan_cpus_merge(rdma_chan_cpus_t * s, const char *text)
{
    rdma_chan_cpus_t t = { {0} };
    size_t k;

    for (k = 0; text[k]; k++) {
        const char *d = strchr(rdma_chan_hex, text[k]);

        if (!d || k >= RDMA_CHAN_CPUS_MAX / 4)
            return -1;
        t.w[k / 16] |= (uint64_t) (d - rdma_chan_hex) << (k % 16 * 4);
    }
    for (k = 0; k < RDMA_CHAN_CPUS_MAX / 64; k++)
        s->w[k] |= t.w[k];
    return 0;
}

__attribute__ ((cold)) int rdma_chan_cpus_count(const rdma_chan_cpus_t * s)
{
    int k, n = 0;

    for (k = 0; k < RDMA_CHAN_CPUS_MAX / 64; k++)
        n += __builtin_popcountll(s->w[k]);
    return n;
}

/* With shm peers the waiter is shm's futex, which verbs arrivals cannot
 * wake: with both, the sleep is short.  Verbs alone: short sleeps for the
 * first RDMA_BLOCK_SHORT sleeps (on Soft-RoCE a CQ-event wakeup measured
 * slower than a 50 us sleep), then the CQ event, unless a flag-polled
 * connection makes the waiter decline (no event per arrival: 500 us
 * sleeps).  With several threads sharing the waiter a wakeup may be
 * missed, so the sleep is bounded there too. */
enum { RDMA_BLOCK_SHORT = 3000 };
__attribute__ ((cold)) int rdma_chan_wait_arm(rdma_chan_t * ch, unsigned long over, int threaded, long *us)
{
    int shm = ch->links[RDMA_XP_SHM] > 0, verbs = ch->links[RDMA_XP_VERBS] > 0;
    int k = shm ? RDMA_XP_SHM : verbs && over >= RDMA_BLOCK_SHORT ? RDMA_XP_VERBS : -1;
    int armed = k >= 0 && ch->xp[k].ops->wait_arm(ch->xp[k].xp);

    ch->polls |= 4095;          /* the poll before the sleep reaches all */

    *us = armed && !(shm && verbs) ? (threaded ? 1000 : 20000) : over < RDMA_BLOCK_SHORT ? 50
        : 500;
    return armed ? k : -1;
}

__attribute__ ((cold)) void rdma_chan_wait(rdma_chan_t * ch, int k, long us, int sleep)
{
    struct timespec ts = { 0, us * 1000 };

    if (k >= 0 && !sleep)
        ch->xp[k].ops->wait_disarm(ch->xp[k].xp);
    else if (k >= 0)
        ch->xp[k].ops->wait(ch->xp[k].xp, us);
    else if (sleep)
        nanosleep(&ts, NULL);
}
