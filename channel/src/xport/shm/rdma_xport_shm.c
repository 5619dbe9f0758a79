/*
 * rdma_xport_shm: the shared-memory transport (rdma_xport.h).
 *
 * Each process owns one receive region, a memfd mapped shared:
 *
 *   header page | ctl[size] (64 B each, page rounded) | ring[size]
 *
 * Slot s (ctl[s], ring[s]) carries the pipe s -> owner.  Sender s writes
 * its frames straight into ring[s] (its stage IS that ring, so the pipe's
 * release store of the head flag publishes a frame and ops->write has
 * nothing to do).  ctl[s] holds three words, each stored by one side only:
 *   head      stored by s (basic mode), read by the owner (rx.head_word)
 *   tail      stored by the owner (credits), read by s (tx.tail_word)
 *   attached  stored by s once its end of the connection is set up
 * The control blocks sit together so that scanning them touches few pages
 * and the region stays sparse: only rings of connected peers are touched.
 *
 * Connecting to q (connect(), or progress() accepting q): map q's region
 * through /proc/<pid>/fd/<fd> from q's card, hand the pipe's memory to the
 * owner (ev.bind), set q.ctl[me].attached and bump q's doorbell
 * (release).  q's progress() sees its doorbell move, finds ctl[me]
 * attached and readies its own end the same way.  Connecting once more after close() is not supported: the rings
 * of that slot are no longer zero.
 *
 * Zero-copy (zc.h) is CMA: the receiver copies the sender's buffer once with
 * process_vm_readv, the shm analogue of an RDMA read; nothing is registered.
 * CMA needs ptrace access to the peer.  Under Yama ptrace_scope 1 only an
 * ancestor may attach, and ranks are siblings, so the first expose() (this
 * process is about to be the target of a peer's CMA copy: a sender's REQ,
 * or a receiver's split PUSH) lets any process of the same user attach
 * (PR_SET_PTRACER_ANY), and finalize() resets that.  Linux has no
 * PR_GET_PTRACER, so the reset is to "none", not to what the process had
 * before.  A job that never moves a zero-copy part (LARGE_PROTOCOL=copy,
 * or only small messages) never opens itself.  Where CMA stays forbidden
 * (scope 2/3, seccomp, containers) the pull is refused, the sender falls
 * back to the ring (pipelined double copy) and we say so once.
 *
 * Fork: every region is MADV_DONTFORK (a child has no use for the rings).
 *
 * Liveness: progress() fails the connection to a job peer whose process
 * exited (rdma_shm_live.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memfd_create */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "rdma_shm.h"

static size_t rdma_shm_ctl_bytes(size_t nslots)
{
    return (nslots * sizeof(shm_ctl_t) + SHM_PAGE - 1) & ~(size_t) (SHM_PAGE - 1);
}

static size_t rdma_shm_region_len(size_t ring, size_t nslots)
{
    return SHM_HDR_BYTES + rdma_shm_ctl_bytes(nslots) + nslots * ring;
}

static shm_ctl_t *rdma_shm_ctl(uint8_t * map, int slot)
{
    return (shm_ctl_t *) (map + SHM_HDR_BYTES) + slot;
}

static uint8_t *rdma_shm_ring(uint8_t * map, size_t ring, size_t nslots, int slot)
{
    return map + SHM_HDR_BYTES + rdma_shm_ctl_bytes(nslots) + (size_t) slot * ring;
}

/* ---- pipe operations: the ring is already written ---- */

/* After a store the peer may be waiting for (frame, head or credit): wake
 * it if it sleeps.  The fence pairs with the one in rdma_shm_wait_arm
 * (Dekker): either the peer's last poll sees our store, or we see its
 * sleeping flag. */
RDMA_HOT int rdma_shm_wake(shm_peer_t * pe)
{
    shm_hdr_t *h = (shm_hdr_t *) pe->map;

    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->sleeping, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&h->wake_seq, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &h->wake_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
    return 0;
}

static RDMA_HOT rdma_status_t rdma_shm_write(void *ctx, size_t off, size_t len, unsigned frames)
{
    (void) off, (void) len, (void) frames;
    return rdma_shm_wake(ctx);
}

/* release: the pipe's chunk-word clears come before the sender reuses them */
static rdma_status_t rdma_shm_credit(void *ctx, uint64_t tail)
{
    __atomic_store_n(&((shm_peer_t *) ctx)->rx_ctl->tail, tail, __ATOMIC_RELEASE);
    return rdma_shm_wake(ctx);
}

/* release: the frame is in the ring before the head says so */
static rdma_status_t rdma_shm_head(void *ctx, uint64_t head)
{
    __atomic_store_n(&((shm_peer_t *) ctx)->tx_ctl->head, head, __ATOMIC_RELEASE);
    return rdma_shm_wake(ctx);
}

/* no write_user: the stage is the ring */
static const rb_xport_ops_t rdma_shm_pipe_ops = {
    .write = rdma_shm_write,
    .credit = rdma_shm_credit,
    .head = rdma_shm_head,
    .ring_new = rdma_shm_ring_new,
    .ring_drop = rdma_shm_ring_drop,
    .stage_new = rdma_shm_stage_new,
    .ring_move = rdma_shm_ring_move
};

/* ---- zero-copy: CMA ---- */

/* Nothing to register: the peer copies our memory directly, which Yama
 * scope 1 allows only once we say so (see the top). */
static rdma_status_t rdma_shm_expose(void *ctx, const void *addr, size_t len, uint64_t * key,
                                     void **handle, int *hit)
{
    rdma_xport_t *xp = ((shm_peer_t *) ctx)->xp;

    (void) addr, (void) len;
    if (xp->yama_scope == 1 && !xp->ptracer_any) {
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
        xp->ptracer_any = 1;
    }
    *key = 0;
    *handle = NULL;
    *hit = 1;
    return 0;
}

static void rdma_shm_unexpose(void *ctx, void *handle)
{
    (void) ctx, (void) handle;
}

/* One process_vm_readv, synchronous: the bytes are in dst on return. */
static rdma_status_t rdma_shm_pull(void *ctx, const struct iovec *dst, int n, uint64_t raddr,
                                   uint64_t key, size_t len, size_t *posted)
{
    static int said;
    shm_peer_t *pe = ctx;
    rdma_conn_t *c = pe->conn;
    struct iovec src = { (void *) (uintptr_t) raddr, len };
    ssize_t got = process_vm_readv(pe->pid, dst, (unsigned long) n, &src, 1, 0);
    int e = errno;

    (void) key;
    *posted = got > 0 ? (size_t) got : 0;
    if (got > 0) {
        pe->xp->prm.ev.pulled(c, (size_t) got);
        return RDMA_OK;
    }
    if (e == EPERM || e == EACCES || e == ENOSYS) {
        if (!said++)
            fprintf(stderr, "[ch3:rdma] rank %d: CMA (process_vm_readv) not permitted: %s; "
                    "large on-node messages use the ring (double copy)\n",
                    pe->xp->prm.rank, strerror(e));
        return RDMA_ERR_REFUSED;
    }
    SHM_FAIL(pe->xp, RDMA_ERR_PEER, "shm: process_vm_readv of %zu bytes from rank %d: %s",
             len, c->peer, strerror(e));
    return RDMA_ERR_XPORT;
}

/* Copy len bytes between local and the peer's raddr with CMA (write:
 * process_vm_writev, else readv), synchronously; 0, or the errno. */
static int rdma_shm_cma(const shm_peer_t * pe, void *local, size_t len, uint64_t raddr, int write)
{
    size_t done = 0;

    while (done < len) {
        struct iovec l = { (char *) local + done, len - done };
        struct iovec r = { (void *) (uintptr_t) (raddr + done), len - done };
        ssize_t k = write ? process_vm_writev(pe->pid, &l, 1, &r, 1, 0)
            : process_vm_readv(pe->pid, &l, 1, &r, 1, 0);

        if (k <= 0)
            return k < 0 ? errno : EIO;
        done += (size_t) k;
    }
    return 0;
}

/* Split copy: write our part straight into the receiver's buffer with
 * process_vm_writev while it pulls the other part.  Any failure: refused,
 * and the receiver pulls this part too. */
static rdma_status_t rdma_shm_push(void *ctx, const void *src, size_t len, uint64_t raddr)
{
    return rdma_shm_cma(ctx, (void *) src, len, raddr, 1) ? RDMA_ERR_REFUSED : RDMA_OK;
}

static const zc_ops_t rdma_shm_zc_ops = {
    rdma_shm_expose, rdma_shm_unexpose, rdma_shm_pull, rdma_shm_push, NULL
};

/* ---- one-sided: CMA into and out of window memory ---- */

/* A window is plain memory to CMA: nothing to register, only Yama's
 * permission to give (rdma_shm_expose). */
static rdma_status_t rdma_shm_win_expose(rdma_xport_t * xp, void *addr, size_t len,
                                         uint64_t * key, void **handle)
{
    shm_peer_t any = {.xp = xp };
    int hit;

    return rdma_shm_expose(&any, addr, len, key, handle, &hit);
}

static void rdma_shm_win_unexpose(rdma_xport_t * xp, void *handle)
{
    (void) xp, (void) handle;
}

/* Synchronous: the bytes are in place on return (*done).  CMA not
 * permitted: refused (the owner sends such operations as messages). */
static rdma_status_t rdma_shm_rma(shm_peer_t * pe, void *local, size_t len, uint64_t raddr,
                                  int write, int *done)
{
    int e = rdma_shm_cma(pe, local, len, raddr, write);

    *done = e == 0;
    if (e == 0)
        return RDMA_OK;
    if (e == EPERM || e == EACCES || e == ENOSYS)
        return RDMA_ERR_REFUSED;
    SHM_FAIL(pe->xp, RDMA_ERR_PEER, "shm: %s of %zu bytes %s rank %d's window: %s",
             write ? "process_vm_writev" : "process_vm_readv", len, write ? "into" : "from",
             pe->conn->peer, strerror(e));
    return RDMA_ERR_PEER;
}

static rdma_status_t rdma_shm_rma_put(void *ctx, const void *src, size_t len, uint64_t raddr,
                                      uint64_t key, void *cookie, int *done)
{
    (void) key, (void) cookie;
    return rdma_shm_rma(ctx, (void *) src, len, raddr, 1, done);
}

static rdma_status_t rdma_shm_rma_get(void *ctx, void *dst, size_t len, uint64_t raddr,
                                      uint64_t key, void *cookie, int *done)
{
    (void) key, (void) cookie;
    return rdma_shm_rma(ctx, dst, len, raddr, 0, done);
}

static const rdma_xport_rma_ops_t rdma_shm_rma_ops = {
    .expose = rdma_shm_win_expose, .unexpose = rdma_shm_win_unexpose, .put = rdma_shm_rma_put,
    .get = rdma_shm_rma_get, .all_memory = 1   /* no atomics: the CPU's are the owner's */
};

/* kernel.yama.ptrace_scope, -1 without Yama.  Scope 1 (only ancestors
 * may attach) forbids CMA between sibling ranks until rdma_shm_expose. */
static int rdma_shm_yama_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int scope = -1;

    if (!f)
        return -1;
    if (fscanf(f, "%d", &scope) != 1)
        scope = -1;
    fclose(f);
    return scope;
}

/* ---- lifecycle ---- */

/* This process's region: a memfd of maplen bytes, mapped, header set. */
rdma_status_t rdma_shm_memfd_make(const char *name, size_t len, int *fd, uint8_t ** map,
                                  char *err, size_t errlen)
{
    const char *step = "memfd_create";

    *fd = memfd_create(name, MFD_CLOEXEC);
    if (*fd < 0)
        goto fail;
    step = "ftruncate";
    if (ftruncate(*fd, len))
        goto fail_fd;
    step = "mmap";
    *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (*map == MAP_FAILED)
        goto fail_fd;
    madvise(*map, len, MADV_DONTFORK);
    return RDMA_OK;
  fail_fd:
    close(*fd);
    *fd = -1;
  fail:
    *map = NULL;
    return rdma_say(err, errlen, RDMA_ERR_NOMEM, "shm: cannot make the %zu-byte %s (%s): %s",
                    len, name, step, strerror(errno));
}

static rdma_status_t rdma_shm_region_make(rdma_xport_t * xp, char *err, size_t errlen)
{
    const rdma_xport_params_t *prm = &xp->prm;
    char name[SHM_JOB_LEN + 32];
    shm_hdr_t *h;
    rdma_status_t rc;

    xp->maplen = rdma_shm_region_len(prm->ring_size, prm->size);
    snprintf(name, sizeof(name), "ch3-rdma.%s.%d", prm->job ? prm->job : "", prm->rank);
    rc = rdma_shm_memfd_make(name, xp->maplen, &xp->fd, &xp->map, err, errlen);
    if (rc)
        return rc;
    h = (shm_hdr_t *) xp->map;
    h->version = RDMA_WIRE_VERSION;
    h->ring_size = prm->ring_size;
    h->chunk_size = prm->chunk_size;
    h->max_frame = prm->max_frame;
    h->head_writes = (uint64_t) prm->head_writes;
    h->nslots = prm->size;
    h->rank = prm->rank;
    snprintf(h->job, sizeof(h->job), "%s", prm->job ? prm->job : "");
    h->magic = SHM_MAGIC;
    return RDMA_OK;
}

static rdma_status_t rdma_shm_open(const rdma_xport_params_t * prm, rdma_xport_t ** xpp,
                                   char *card, size_t cardlen, char *err, size_t errlen)
{
    rdma_xport_t *xp;
    rdma_status_t rc = RDMA_ERR_NOMEM;

    if (prm->ring_size == 0 || prm->ring_size % 8)
        return rdma_say(err, errlen, RDMA_ERR_INVAL, "shm: bad ring size %zu", prm->ring_size);
    if (prm->size <= 0 || prm->rank < 0 || prm->rank >= prm->size)
        return rdma_say(err, errlen, RDMA_ERR_INVAL, "shm: rank %d outside job of size %d",
                        prm->rank, prm->size);
    xp = calloc(1, sizeof(*xp));
    if (!xp)
        return rdma_say(err, errlen, rc, "shm: out of memory");
    xp->prm = *prm;
    if (xp->prm.timeout <= 0)
        xp->prm.timeout = RDMA_XPORT_TIMEOUT;
    xp->peer = calloc(prm->size, sizeof(*xp->peer));
    if (!xp->peer) {
        rdma_say(err, errlen, rc, "shm: out of memory for %d peers", prm->size);
        goto fail_xp;
    }
    rc = rdma_shm_region_make(xp, err, errlen);
    if (rc != RDMA_OK)
        goto fail_peer;
    if ((size_t) snprintf(card, cardlen, "%d.%d.%zu", (int) getpid(), xp->fd, xp->maplen)
        >= cardlen) {
        rc = rdma_say(err, errlen, RDMA_ERR_INVAL, "shm: card buffer of %zu bytes too small",
                      cardlen);
        goto fail_map;
    }
    xp->yama_scope = rdma_shm_yama_scope();
    if (gethostname(xp->host, sizeof(xp->host)))
        snprintf(xp->host, sizeof(xp->host), "this node");
    *xpp = xp;
    return RDMA_OK;
  fail_map:
    munmap(xp->map, xp->maplen);
    close(xp->fd);
  fail_peer:
    free(xp->peer);
  fail_xp:
    free(xp);
    return rc;
}

const char *rdma_shm_pipe_bad(const rdma_xport_t * xp, const shm_hdr_t * h)
{
    const shm_hdr_t *mine = (const shm_hdr_t *) xp->map;

    return h->ring_size != mine->ring_size ? "MPIR_CVAR_CH3_RDMA_RING_SIZE and _RING_INIT_SIZE"
        : h->chunk_size != mine->chunk_size ? "MPIR_CVAR_CH3_RDMA_RING_CHUNK"
        : h->head_writes != mine->head_writes ? "MPIR_CVAR_CH3_RDMA_PIPE_MODE" : NULL;
}

/* What makes the region at map unusable for us as rank q's, or NULL. */
static const char *rdma_shm_check(const rdma_xport_t * xp, const uint8_t * map, int q)
{
    const shm_hdr_t *h = (const shm_hdr_t *) map, *mine = (const shm_hdr_t *) xp->map;
    const char *pipe = h->magic == SHM_MAGIC && h->version == RDMA_WIRE_VERSION
        ? rdma_shm_pipe_bad(xp, h) : NULL;

    return h->magic != SHM_MAGIC ? "magic"
        : h->version != RDMA_WIRE_VERSION ? "wire version"
        : pipe ? pipe
        : h->nslots != mine->nslots ? "job size"
        : h->rank != (uint64_t) q ? "rank"
        : strncmp(h->job, mine->job, SHM_JOB_LEN) ? "job id" : NULL;
}

rdma_status_t rdma_shm_map_fd(rdma_xport_t * xp, int pid, int fd, size_t len, size_t size,
                              const char *what, uint8_t ** map)
{
    char path[64];
    struct stat st;
    int e;

    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        e = errno;
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: cannot open %s of %s: %s%s", path, what,
                        strerror(e), e == EACCES || e == EPERM
                        ? " (ptrace scope / different user?)"
                        : e == ENOENT ? " (peer exited, or on another host?)" : "");
    }
    if (fstat(fd, &st) || (size ? (size_t) st.st_size != size : (size_t) st.st_size < len)) {
        close(fd);
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: %s of %s is not a %zu-byte region", path,
                        what, size ? size : len);
    }
    *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    e = errno;
    close(fd);
    if (*map == MAP_FAILED)
        return SHM_FAIL(xp, RDMA_ERR_NOMEM, "shm: cannot map %zu bytes of %s: %s", len, what,
                        strerror(e));
    madvise(*map, len, MADV_DONTFORK);
    return RDMA_OK;
}

/* Map rank q's region as its card describes it. */
static int rdma_shm_map(rdma_xport_t * xp, int q, shm_peer_t * pe)
{
    char card[128], what[32];
    int pid, fd, n = 0, rc;
    size_t len;
    uint8_t *map;
    const char *bad;

    if (xp->prm.ev.card_of(xp->prm.ev.arg, q, card, sizeof(card)))
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: no business card for rank %d", q);
    if (sscanf(card, "%d.%d.%zu%n", &pid, &fd, &len, &n) != 3 || card[n] || len != xp->maplen)
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: card \"%s\" of rank %d is not ours "
                        "(region of %zu bytes expected)", card, q, xp->maplen);
    snprintf(what, sizeof(what), "rank %d", q);
    rc = rdma_shm_map_fd(xp, pid, fd, len, len, what, &map);
    if (rc)
        return rc;
    bad = rdma_shm_check(xp, map, q);
    if (bad) {
        munmap(map, len);
        return SHM_FAIL(xp, RDMA_ERR_PEER, "shm: region of rank %d does not match ours (%s)",
                        q, bad);
    }
    pe->map = map;
    pe->maplen = len;
    pe->pid = pid;
    return RDMA_OK;
}

static void rdma_shm_unmap(shm_peer_t * pe)
{
    rdma_shm_grow_free(pe);
    if (pe->map)
        munmap(pe->map, pe->maplen);
    pe->map = NULL;
    pe->conn = NULL;
}

rdma_status_t rdma_shm_bind(rdma_xport_t * xp, rdma_conn_t * c, shm_peer_t * pe,
                            const rdma_conn_mem_t * mem)
{
    rdma_conn_mem_t m = *mem;

    m.peer_max_frame = ((const shm_hdr_t *) pe->map)->max_frame;
    pe->xp = xp;
    pe->conn = c;
    c->priv = pe;
    if (!xp->prm.ev.bind(xp->prm.ev.arg, c, &m))
        return RDMA_OK;
    c->priv = NULL;
    pe->conn = NULL;
    return SHM_FAIL(xp, RDMA_ERR_XPORT, "shm: cannot set up the pipe to peer %d", c->peer);
}

void rdma_shm_ready(rdma_xport_t * xp, rdma_conn_t * c, shm_peer_t * pe)
{
    rdma_shm_watch(xp, pe);
    c->state = RDMA_CONN_READY;
    xp->prm.ev.ready(xp->prm.ev.arg, c);
}

/* Set up our end of the connection to c->peer and tell the peer: the one
 * path for connect() and for peers found by progress(). */
static int rdma_shm_attach(rdma_xport_t * xp, rdma_conn_t * c)
{
    int me = xp->prm.rank, q = c->peer, rc;
    size_t ring = xp->prm.ring_size, n = xp->prm.size;
    shm_peer_t *pe = &xp->peer[q];
    rdma_conn_mem_t mem = { 0 };

    c->ops = &rdma_xport_shm;
    c->xport = xp;
    rc = rdma_shm_map(xp, q, pe);
    if (rc)
        goto fail;
    pe->rx_ctl = rdma_shm_ctl(xp->map, q);
    pe->tx_ctl = rdma_shm_ctl(pe->map, me);
    mem.stage = rdma_shm_ring(pe->map, ring, n, me);
    mem.tail_word = &pe->tx_ctl->tail;
    mem.ring = rdma_shm_ring(xp->map, ring, n, q);
    mem.head_word = &pe->rx_ctl->head;
    rc = rdma_shm_bind(xp, c, pe, &mem);
    if (rc) {
        rdma_shm_unmap(pe);
        goto fail;
    }
    /* release: our end is set up before the peer may see it */
    __atomic_store_n(&pe->tx_ctl->attached, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&((shm_hdr_t *) pe->map)->doorbell, 1, __ATOMIC_RELEASE);
    pe->used = 1;
    rdma_shm_ready(xp, c, pe);
    return RDMA_OK;
  fail:
    rdma_conn_failed(c, xp->err);
    return rc;
}

static rdma_status_t rdma_shm_connect(rdma_xport_t * xp, rdma_conn_t * c)
{
    if (c->peer >= xp->prm.size)
        return rdma_shm_dyn_connect(xp, c);
    if (c->peer < 0)
        return SHM_FAIL(xp, RDMA_ERR_XPORT, "shm: no rank %d in a job of size %d", c->peer,
                        xp->prm.size);
    if (xp->peer[c->peer].conn == c)
        return RDMA_OK;
    if (xp->peer[c->peer].used)
        return SHM_FAIL(xp, RDMA_ERR_XPORT, "shm: rank %d was connected already (reconnecting "
                        "is not supported)", c->peer);
    return rdma_shm_attach(xp, c);
}

/* Ready the peers that attached to us since the doorbell last moved. */
static RDMA_HOT rdma_status_t rdma_shm_progress(rdma_xport_t * xp)
{
    uint64_t bell = __atomic_load_n(&((shm_hdr_t *) xp->map)->doorbell, __ATOMIC_ACQUIRE);
    int r, rc = RDMA_OK;
    double now;

    if (xp->nwatch && (now = rdma_thread_now()) >= xp->watch_next)
        rc = rdma_shm_look(xp, now);
    if (bell == xp->doorbell && !xp->dyn_retry)
        return rc;
    xp->doorbell = bell;
    for (r = 0; r < xp->prm.size; r++) {
        rdma_conn_t *c;

        if (xp->peer[r].used
            || !__atomic_load_n(&rdma_shm_ctl(xp->map, r)->attached, __ATOMIC_ACQUIRE))
            continue;
        c = xp->prm.ev.conn_of(xp->prm.ev.arg, r);
        if (!c || (c->state != RDMA_CONN_IDLE && c->state != RDMA_CONN_CONNECTING))
            continue;
        c->peer = r;
        if (rdma_shm_attach(xp, c) && rc == RDMA_OK)
            rc = RDMA_ERR_PEER;
    }
    return rdma_shm_dyn_progress(xp) && rc == RDMA_OK ? RDMA_ERR_PEER : rc;
}

static rdma_status_t rdma_shm_close(rdma_xport_t * xp, rdma_conn_t * c)
{
    if (c->peer >= xp->prm.size)
        return rdma_shm_dyn_close(xp, c);
    if (c->peer < 0 || xp->peer[c->peer].conn != c)
        return SHM_FAIL(xp, RDMA_ERR_XPORT, "shm: close of rank %d, which is not connected",
                        c->peer);
    rdma_shm_unwatch_peer(xp, &xp->peer[c->peer]);
    rdma_shm_unmap(&xp->peer[c->peer]);
    c->priv = NULL;
    c->state = RDMA_CONN_CLOSED;
    return RDMA_OK;
}

static rdma_status_t rdma_shm_finalize(rdma_xport_t * xp)
{
    int r;

    for (r = 0; r < xp->prm.size; r++)
        rdma_shm_unmap(&xp->peer[r]);
    rdma_shm_watch_free(xp);
    rdma_shm_dyn_finalize(xp);
    if (xp->ptracer_any)        /* to "none": see the top */
        prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    munmap(xp->map, xp->maplen);
    close(xp->fd);
    free(xp->peer);
    free(xp);
    return RDMA_OK;
}

static const char *rdma_shm_error(const rdma_xport_t * xp)
{
    return xp ? xp->err : "shm: no transport";
}

/* ---- blocking wait (see shm_hdr_t) ---- */

static int rdma_shm_wait_arm(rdma_xport_t * xp)
{
    shm_hdr_t *h = (shm_hdr_t *) xp->map;

    xp->wake_key = __atomic_load_n(&h->wake_seq, __ATOMIC_ACQUIRE);
    __atomic_store_n(&h->sleeping, 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return 1;
}

static void rdma_shm_wait_disarm(rdma_xport_t * xp)
{
    __atomic_store_n(&((shm_hdr_t *) xp->map)->sleeping, 0, __ATOMIC_RELAXED);
}

/* Sleep until a peer wrote to us since wait_arm, or timeout_us passed. */
static void rdma_shm_wait(rdma_xport_t * xp, long timeout_us)
{
    shm_hdr_t *h = (shm_hdr_t *) xp->map;
    struct timespec ts = { timeout_us / 1000000, (timeout_us % 1000000) * 1000 };

    syscall(SYS_futex, &h->wake_seq, FUTEX_WAIT, xp->wake_key, &ts, NULL, 0);
    rdma_shm_wait_disarm(xp);
}

static int rdma_shm_describe(const rdma_conn_t * c, char *buf, size_t len)
{
    const rdma_xport_params_t *prm = &c->xport->prm;

    return snprintf(buf, len, "shm mode=%s ring=%zu chunk=%zu",
                    prm->head_writes ? "basic" : "flag-poll", prm->ring_size, prm->chunk_size);
}

const rdma_xport_ops_t rdma_xport_shm = {
    .name = "shm",
    .wire = 0,
    .conn_only = 1,
    .open = rdma_shm_open,
    .connect = rdma_shm_connect,
    .progress = rdma_shm_progress,
    .quiesce = rdma_xport_quiesce_plain,
    .close = rdma_shm_close,
    .finalize = rdma_shm_finalize,
    .error = rdma_shm_error,
    .describe = rdma_shm_describe,
    .wait_arm = rdma_shm_wait_arm,
    .wait = rdma_shm_wait,
    .wait_disarm = rdma_shm_wait_disarm,
    .pipe_ops = &rdma_shm_pipe_ops,
    .zc = &rdma_shm_zc_ops,
    .zcopy_slow = rdma_shm_zcopy_slow,
    .seg = &rdma_shm_seg_ops,
    .rma = &rdma_shm_rma_ops,
};
