/*
 * rdma_shm_live.c -- the shared-memory transport: liveness of peers.
 *
 * A peer that dies leaves its rings intact and writes nothing more, so
 * without a check a rank waiting for it waits forever (Hydra under
 * -disable-auto-cleanup, a launcher that does not end the job).  Each READY
 * peer's process, of the job or outside it (rdma_shm_dyn.c: spawned,
 * connected), is watched through a pidfd (Linux >= 5.3), readable once the
 * process has exited, never while it runs, however busy.  progress() looks
 * every SHM_WATCH_EVERY s, one poll(2) for all.  A peer found gone is
 * failed at the next look, not at once: the owner's passes in between
 * read every frame it completed before it died (each pass reads all READY
 * pipes), and a peer whose close handshake ends meanwhile is CLOSED by
 * then and not failed.  No pidfd (an older kernel, seccomp): that peer is
 * not watched, as before.  All calls come from the owner (rdma_xport.h:
 * threading).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "rdma_shm.h"

#define SHM_WATCH_EVERY 0.25    /* s between looks: a death is reported in 0.25-0.5 s */

/* Watch pe's process; without a pidfd, or memory for the entry, pe is
 * not watched.  pe stays where it is until rdma_shm_unwatch_peer. */
void rdma_shm_watch(rdma_xport_t * xp, shm_peer_t * pe)
{
    int fd = (int) syscall(SYS_pidfd_open, pe->pid, 0);

    if (fd < 0)
        return;
    if (xp->nwatch == xp->watch_cap) {
        int cap = xp->watch_cap ? 2 * xp->watch_cap : 8;
        shm_watch_t *w = realloc(xp->watch, cap * sizeof(*w));
        struct pollfd *p = w ? realloc(xp->watch_pfd, cap * sizeof(*p)) : NULL;

        if (w)
            xp->watch = w;
        if (!p) {
            close(fd);
            return;
        }
        xp->watch_pfd = p;
        xp->watch_cap = cap;
    }
    xp->watch[xp->nwatch++] = (shm_watch_t) {.pe = pe, .pidfd = fd };
}

static void rdma_shm_unwatch(rdma_xport_t * xp, int i)
{
    close(xp->watch[i].pidfd);
    xp->watch[i] = xp->watch[--xp->nwatch];
}

void rdma_shm_unwatch_peer(rdma_xport_t * xp, const shm_peer_t * pe)
{
    int i;

    for (i = 0; i < xp->nwatch; i++)
        if (xp->watch[i].pe == pe) {
            rdma_shm_unwatch(xp, i);
            return;
        }
}

/* Fail the READY peers found gone by the last look, then look again. */
__attribute__ ((cold, noinline))
rdma_status_t rdma_shm_look(rdma_xport_t * xp, double now)
{
    rdma_status_t rc = RDMA_OK;
    int i;

    xp->watch_next = now + SHM_WATCH_EVERY;
    for (i = xp->nwatch - 1; i >= 0; i--) {
        shm_peer_t *pe = xp->watch[i].pe;

        if (!xp->watch[i].gone)
            continue;
        rdma_shm_unwatch(xp, i);
        if (!pe->conn || pe->conn->state != RDMA_CONN_READY)
            continue;
        if (pe->conn->peer < xp->prm.size)
            SHM_FAIL(xp, RDMA_ERR_PEER, "connection to rank %d on %s failed: its process %d "
                     "exited (process gone)", pe->conn->peer, xp->host, (int) pe->pid);
        else
            SHM_FAIL(xp, RDMA_ERR_PEER, "connection to process %d on %s (outside the job) "
                     "failed: it exited (process gone)", (int) pe->pid, xp->host);
        rc = rdma_conn_failed(pe->conn, xp->err);
    }
    for (i = 0; i < xp->nwatch; i++)
        xp->watch_pfd[i] = (struct pollfd) {.fd = xp->watch[i].pidfd, .events = POLLIN };
    if (poll(xp->watch_pfd, (nfds_t) xp->nwatch, 0) > 0)
        for (i = 0; i < xp->nwatch; i++)
            xp->watch[i].gone = (xp->watch_pfd[i].revents & POLLIN) != 0;
    return rc;
}

void rdma_shm_watch_free(rdma_xport_t * xp)
{
    while (xp->nwatch)
        rdma_shm_unwatch(xp, 0);
    free(xp->watch);
    free(xp->watch_pfd);
}
