/*
 * conform_rma.c: the one-sided part of the conformance harness
 * (rdma_xport_rma_ops_t).  Every rank exposes a window of WIN bytes: its
 * lower half is written by the peers (rank s writes the part numbered s,
 * WIN/2/CONFORM_MAXP bytes), its upper half holds the owner's own bytes
 * and is only read.  The window's address and key go to the peers through
 * the link (16 bytes each way).  Each rank then, with every peer:
 *   - puts 8 B (inline), 4 KiB and the rest of its part, each waited for
 *     with ev.rma_done, then gets its part back, whole and then in the same
 *     three pieces, and compares: what a put's completion reported is in
 *     the target's memory (and small gets, which verbs may bounce, land);
 *   - gets 16 x 8 B of it, all in flight at once, each to its own place;
 *   - gets the peer's upper half and checks it is the peer's own bytes;
 *   - after a barrier, checks its lower half holds what each peer put
 *     (its CPU sees the NIC's writes once the writer saw them complete).
 * Where the transport's atomics work (amo_ok), AMO_WORDS words past the
 * window take them: each rank fetch-and-adds 1 to word 0 of every rank
 * (its own through self) AMO_K times, then {1, 2, 3} to words 1-3 (one
 * atomic of 3 words), and compare-and-swaps word 4 from 0 to its rank + 1:
 * the values each fetch finds grow, the swap finds 0 or a rank + 1, and
 * after a barrier every word holds what all of them made it.
 * A transport without rma ops passes trivially (said).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "conform.h"

#define WIN (2u << 20)
#define PART (WIN / 2 / CONFORM_MAXP)

/* ev.rma_done of the conformance ranks: cookie is an int set to 1 (ok)
 * or -1 (failed); a second report of one operation is a failure. */
void conform_rma_done(void *arg, rdma_conn_t * c, void *cookie, rdma_status_t st)
{
    int *flag = cookie;

    (void) arg, (void) c;
    if (*flag)
        *flag = -2;
    else
        *flag = st == RDMA_OK ? 1 : -1;
}

/* Move n bytes of v through the link to/from p (the window's address and
 * key); 0 or -1. */
static int rma_xchg(node_t * nd, int p, void *v, size_t n, int send)
{
    double limit = conform_now() + 30;
    size_t done = 0, k;

    while (done < n) {
        struct iovec iov = { (char *) v + done, n - done };

        conform_progress(nd);
        if ((send ? rb_pipe_putv : rb_pipe_getv) (&nd->conns[p].pipe, &iov, 1, &k)
            || conform_now() > limit)
            return -1;
        done += k;
    }
    return 0;
}

/* One put or get started, without progress first (so that a caller's
 * operations are in flight together); retried with progress while the
 * transport has no room.  *flag becomes 1 when it completes, at once if
 * *done. */
static int rma_start(node_t * nd, int p, int get, void *local, size_t len, uint64_t raddr,
                     uint64_t key, int *flag, int *done)
{
    const rdma_xport_rma_ops_t *r = conform_t->ops->rma;
    double limit = conform_now() + 30;
    rdma_status_t st;

    *flag = 0;
    while ((st = get ? r->get(nd->conns[p].xc.priv, local, len, raddr, key, flag, done)
            : r->put(nd->conns[p].xc.priv, local, len, raddr, key, flag, done)) == RDMA_ERR_NOMEM
           && conform_now() < limit)
        conform_progress(nd);
    if (st != RDMA_OK)
        conform_say(nd, "D rma %s of %zu bytes to rank %d not started (%d): %s", get ? "get" : "put",
                    len, p, st, conform_t->ops->error(nd->xp));
    return st == RDMA_OK ? 0 : -1;
}

/* The operation rma_start reported with flag and done, waited for. */
static int rma_wait(node_t * nd, int p, int get, size_t len, const int *flag, int done)
{
    double limit = conform_now() + 30;

    while (!done && *flag == 0 && conform_now() < limit)
        conform_progress(nd);
    if (done ? *flag != 0 : *flag != 1) {
        conform_say(nd, "D rma %s of %zu bytes to rank %d: done %d, reported %d", get ? "get" : "put",
                    len, p, done, *flag);
        return -1;
    }
    return 0;
}

/* One put or get, waited for. */
static int rma_op(node_t * nd, int p, int get, void *local, size_t len, uint64_t raddr,
                  uint64_t key)
{
    int flag, done;

    return rma_start(nd, p, get, local, len, raddr, key, &flag, &done)
        || rma_wait(nd, p, get, len, &flag, done) ? -1 : 0;
}

/* Bytes [from, to) of tmp are what we put into our part of p's window. */
static int rma_check_part(node_t * nd, int p, const uint8_t * tmp, size_t from, size_t to)
{
    size_t i;

    for (i = from; i < to; i++)
        if (tmp[i] != conform_gen(nd->rank, p, i)) {
            conform_say(nd, "D byte %zu read back from rank %d is %u, put %u", i, p, tmp[i],
                        conform_gen(nd->rank, p, i));
            return -1;
        }
    return 0;
}

/* RMA_BURST gets of 8 B from our part, all in flight at once, then
 * waited for: each lands in its own destination (small gets may be
 * bounced, each through its own slot). */
enum { RMA_BURST = 16 };
static int rma_burst(node_t * nd, int p, uint64_t part, uint64_t key, uint8_t * tmp)
{
    int flag[RMA_BURST], done[RMA_BURST], k;

    memset(tmp, 0, RMA_BURST * 8);
    for (k = 0; k < RMA_BURST; k++)
        if (rma_start(nd, p, 1, tmp + 8 * k, 8, part + 8 * (uint64_t) k, key, &flag[k],
                      &done[k]))
            return -1;
    for (k = 0; k < RMA_BURST; k++)
        if (rma_wait(nd, p, 1, 8, &flag[k], done[k]))
            return -1;
    return rma_check_part(nd, p, tmp, 0, RMA_BURST * 8);
}

/* With peer p: puts of our part, read back; a read of p's own half. */
static int rma_with(node_t * nd, int p, uint64_t raddr, uint64_t key, uint8_t * tmp)
{
    static const size_t cut[] = { 0, 8, 8 + 4096, PART };
    uint64_t part = raddr + (uint64_t) nd->rank * PART;
    size_t i;
    int j;

    for (i = 0; i < PART; i++)
        tmp[i] = conform_gen(nd->rank, p, i);
    for (j = 0; j < 3; j++)
        if (rma_op(nd, p, 0, tmp + cut[j], cut[j + 1] - cut[j], part + cut[j], key))
            return -1;
    memset(tmp, 0, PART);
    if (rma_op(nd, p, 1, tmp, PART, part, key) || rma_check_part(nd, p, tmp, 0, PART))
        return -1;
    memset(tmp, 0, PART);
    for (j = 0; j < 3; j++)
        if (rma_op(nd, p, 1, tmp + cut[j], cut[j + 1] - cut[j], part + cut[j], key))
            return -1;
    if (rma_check_part(nd, p, tmp, 0, PART) || rma_burst(nd, p, part, key, tmp))
        return -1;
    if (rma_op(nd, p, 1, tmp, WIN / 2, raddr + WIN / 2, key))
        return -1;
    for (i = 0; i < WIN / 2; i++)
        if (tmp[i] != conform_gen(p, p, i)) {
            conform_say(nd, "D byte %zu of rank %d's window is %u, expected %u", i, p, tmp[i],
                        conform_gen(p, p, i));
            return -1;
        }
    return 0;
}

enum { AMO_WORDS = 8, AMO_K = 50 };

/* One atomic on rank p's words (p == ours: through self), waited for. */
static int amo_op(node_t * nd, int p, const rdma_xport_amo_t * a, uint64_t raddr, uint64_t key)
{
    const rdma_xport_rma_ops_t *r = conform_t->ops->rma;
    double limit = conform_now() + 30;
    int flag = 0;

    if (p == nd->rank ? r->self(nd->xp, a, raddr, key)
        : r->atomic(nd->conns[p].xc.priv, a, raddr, key, &flag)) {
        conform_say(nd, "D atomic on rank %d not started: %s", p, conform_t->ops->error(nd->xp));
        return -1;
    }
    while (p != nd->rank && flag == 0 && conform_now() < limit)
        conform_progress(nd);
    if (p != nd->rank && flag != 1) {
        conform_say(nd, "D atomic on rank %d reported %d", p, flag);
        return -1;
    }
    return 0;
}

/* The atomics with rank p (addr, key: its words); 0 or -1. */
static int amo_with(node_t * nd, int p, uint64_t addr, uint64_t key)
{
    rdma_xport_amo_t a = {.n = 1, .add = {1} };
    uint64_t got[3], last = 0;
    int k;

    for (k = 0; k < AMO_K; k++) {
        a.result = got;
        if (amo_op(nd, p, &a, addr, key) || (k && got[0] <= last))
            return -1;
        last = got[0];
    }
    a = (rdma_xport_amo_t) {.n = 3, .add = {1, 2, 3}, .result = got };
    if (amo_op(nd, p, &a, addr + 8, key) || got[1] % 2 || got[2] % 3)
        return -1;
    a = (rdma_xport_amo_t) {.cas = 1, .n = 1, .cmp = 0, .add = {(uint64_t) nd->rank + 1},
        .result = got };
    if (amo_op(nd, p, &a, addr + 32, key) || got[0] > (uint64_t) nd->sc->nprocs)
        return -1;
    return 0;
}

/* After the barrier: our words hold what every rank's atomics made them. */
static int amo_check_own(node_t * nd, const uint64_t * w)
{
    uint64_t n = (uint64_t) nd->sc->nprocs;

    if (w[0] == n * AMO_K && w[1] == n && w[2] == 2 * n && w[3] == 3 * n && w[4] && w[4] <= n)
        return 0;
    conform_say(nd, "D our atomic words are %llu %llu %llu %llu %llu", (unsigned long long) w[0],
                (unsigned long long) w[1], (unsigned long long) w[2], (unsigned long long) w[3],
                (unsigned long long) w[4]);
    return -1;
}

/* After the barrier: our lower half holds what every peer put there. */
static int rma_check_own(node_t * nd, const uint8_t * win)
{
    size_t i;
    int p;

    for (p = 0; p < nd->sc->nprocs; p++)
        for (i = 0; p != nd->rank && i < PART; i++)
            if (win[(size_t) p * PART + i] != conform_gen(p, nd->rank, i)) {
                conform_say(nd, "D byte %zu rank %d put into our window is %u, expected %u",
                            i, p, win[(size_t) p * PART + i], conform_gen(p, nd->rank, i));
                return -1;
            }
    return 0;
}

int conform_rma(node_t * nd)
{
    const rdma_xport_rma_ops_t *r = conform_t->ops->rma;
    uint8_t *win, *tmp;
    uint64_t mine[2], theirs[CONFORM_MAXP][2];
    void *h;
    int p, amo, rc = -1;
    size_t i;

    if (!r) {
        conform_say(nd, "D rma: the transport has no one-sided operations");
        conform_barrier(nd);
        return 0;
    }
    amo = r->amo_ok && r->amo_ok(nd->xp);
    conform_say(nd, "D rma: atomics %s", amo ? "too" : "not here");
    win = aligned_alloc(4096, WIN + 4096);
    tmp = malloc(WIN / 2);
    if (!win || !tmp)
        exit(2);
    memset(win, 0, WIN / 2);
    memset(win + WIN, 0, AMO_WORDS * 8);
    for (i = 0; i < WIN / 2; i++)
        win[WIN / 2 + i] = conform_gen(nd->rank, nd->rank, i);
    if (r->expose(nd->xp, win, WIN + AMO_WORDS * 8, &mine[1], &h)) {
        conform_say(nd, "D rma expose failed: %s", conform_t->ops->error(nd->xp));
        exit(1);
    }
    mine[0] = (uintptr_t) win;
    for (p = 0; p < nd->sc->nprocs; p++)
        if (p != nd->rank && (rma_xchg(nd, p, mine, sizeof(mine), 1)
                              || rma_xchg(nd, p, theirs[p], sizeof(mine), 0)))
            goto out;
    for (p = 0; p < nd->sc->nprocs; p++)
        if (p != nd->rank && rma_with(nd, p, theirs[p][0], theirs[p][1], tmp))
            goto out;
    for (p = 0; amo && p < nd->sc->nprocs; p++)
        if (amo_with(nd, p, p == nd->rank ? mine[0] + WIN : theirs[p][0] + WIN,
                     p == nd->rank ? mine[1] : theirs[p][1]))
            goto out;
    conform_barrier(nd);
    rc = rma_check_own(nd, win) || (amo && amo_check_own(nd, (const uint64_t *) (win + WIN)));
    conform_barrier(nd);        /* nobody accesses our window any more */
  out:
    r->unexpose(nd->xp, h);
    free(win);
    free(tmp);
    return rc;
}
