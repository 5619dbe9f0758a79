/*
 * rdma_channel.c -- the five-function RDMA channel interface (seed 003, P3
 * sec. 2.2): init_process_group, init, finalize, put_datav, read_datav,
 * plus the per-VC connection management beneath them and the CVARs.
 *
 * Every VC owns one rdma_conn_t (vc->ch.conn).  Its transport is chosen
 * once, in init_process_group: shm for peers on this node, verbs for the
 * others (MPIR_CVAR_CH3_RDMA_TRANSPORT overrides).  Connections are made
 * on first use; the peer's business card comes from PMI (CH3's
 * P<rank>-businesscard key, published by MPIDI_PG_SetConnInfo).
 */
#include "mpidi_ch3_impl.h"
#include <sched.h>
#include <time.h>
#include <unistd.h>

/*
=== BEGIN_MPI_T_CVAR_INFO_BLOCK ===

categories:
    - name        : CH3_RDMA
      description : cvars that control the ch3:rdma channel

cvars:
    - name        : MPIR_CVAR_CH3_RDMA_TRANSPORT
      category    : CH3_RDMA
      type        : string
      default     : auto
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Transport per peer: auto (shared memory on the same node, verbs
        between nodes), shm (all peers must share this node) or verbs (every
        peer, on-node ones too; needs an RDMA device).

    - name        : MPIR_CVAR_CH3_RDMA_RING_SIZE
      category    : CH3_RDMA
      type        : int
      default     : 524288
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes of each connection's receive ring (one per direction); a power
        of two from 16384 to 67108864.

    - name        : MPIR_CVAR_CH3_RDMA_RING_CHUNK
      category    : CH3_RDMA
      type        : int
      default     : 512
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Ring slot size in bytes: every message starts in its own slot.  A
        power of two from 64 to RING_SIZE/4.

    - name        : MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK
      category    : CH3_RDMA
      type        : int
      default     : 16384
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        PIPELINE=fixed: largest frame (bytes, header included) written to
        the ring at once; longer messages are pipelined in frames of this
        size (seed 003 uses 16 KiB).  A multiple of RING_CHUNK, at most
        RING_SIZE/2.

    - name        : MPIR_CVAR_CH3_RDMA_PIPELINE
      category    : CH3_RDMA
      type        : string
      default     : auto
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How messages larger than a frame move through the ring.  fixed: one
        write per frame of PIPELINE_CHUNK bytes (seed 003).  super: the
        superpipeline (seeds 000/002): frames of SUPERPIPE_BLOCK bytes, each
        with its own flags, so the receiver copies one block behind the
        writer, written in groups of growing size, C_i = SUPERPIPE_C0 *
        SUPERPIPE_Q^i, at most RING_SIZE/4 (so three groups are in flight
        while the fourth's space comes back), restarting at every message.
        auto: super over verbs, fixed over shared memory (where a "write" is
        a store: grouping saves nothing and smaller frames cost more).

    - name        : MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0
      category    : CH3_RDMA
      type        : int
      default     : 12288
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        First superpipeline group, bytes (the paper's C_0 = 12 KB);
        1024..67108864, used up to RING_SIZE/4.

    - name        : MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q
      category    : CH3_RDMA
      type        : double
      default     : 1.5
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Growth factor of superpipeline groups (the paper's q = 1.5); 1..16
        (1: fixed groups of SUPERPIPE_C0 bytes).

    - name        : MPIR_CVAR_CH3_RDMA_SUPERPIPE_BLOCK
      category    : CH3_RDMA
      type        : int
      default     : 4096
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Superpipeline sub-block: frame size in bytes, header and flags
        included (the paper's b = 4 KB); 64..67108864, rounded up to a
        multiple of RING_CHUNK, at most RING_SIZE/2.

    - name        : MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD
      category    : CH3_RDMA
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Consumed-but-unreported ring bytes that trigger an explicit (coalesced)
        tail update when no reverse traffic carried it; 0 means RING_SIZE/4.
        From RING_CHUNK to RING_SIZE - PIPELINE_CHUNK.

    - name        : MPIR_CVAR_CH3_RDMA_PIPE_MODE
      category    : CH3_RDMA
      type        : string
      default     : piggyback
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        piggyback: head and tail updates ride on data (seed 003 sec. 4.3);
        basic: separate writes for data, head and tail (the paper's baseline,
        for comparison only).

    - name        : MPIR_CVAR_CH3_RDMA_WRITE_IMM
      category    : CH3_RDMA
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Detect arrivals from RDMA-write-with-immediate completions even when
        the device guarantees in-order placement (which allows flag polling).

    - name        : MPIR_CVAR_CH3_RDMA_INLINE_SIZE
      category    : CH3_RDMA
      type        : int
      default     : 256
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Frames up to this many bytes are posted inline when the device grants
        it (0..4096; the device may grant less).

    - name        : MPIR_CVAR_CH3_RDMA_DEVICE
      category    : CH3_RDMA
      type        : string
      default     : ""
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        RDMA device name (e.g. mlx5_0, rxe0); empty selects the first device
        with an active port.

    - name        : MPIR_CVAR_CH3_RDMA_PORT
      category    : CH3_RDMA
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Device port (1..255); 0 selects the first active port.

    - name        : MPIR_CVAR_CH3_RDMA_GID_INDEX
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        GID table index; -1 selects a RoCE v2 IPv4-mapped GID on Ethernet and
        GID 0 on InfiniBand.

    - name        : MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT
      category    : CH3_RDMA
      type        : int
      default     : 60
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Seconds a peer may stay silent during connection setup before it is
        reported dead (1..3600).

    - name        : MPIR_CVAR_CH3_RDMA_POLL_SPINS
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Idle polls of a blocking wait before it blocks in the kernel (woken by
        shared-memory peers; with verbs, short sleeps and, after about 150 ms
        idle, the completion queue's event when every verbs connection is
        completion-driven); 0..100000000.  -1
        (auto): 2000, or 0 when this node runs more ranks than it has cores
        (oversubscribed: the CPU is better spent on another rank).

    - name        : MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL
      category    : CH3_RDMA
      type        : string
      default     : auto
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How message parts of at least ZCOPY_THRESHOLD bytes move.  copy:
        through the ring (pipelined copy); zcopy: zero-copy rendezvous (the
        receiver pulls with RDMA read from a registered buffer, or with one
        process_vm_readv copy on the same node); auto: zcopy, except that a
        verbs connection whose registration-cache hit rate falls below 1/4
        copies for a while before trying again.

    - name        : MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD
      category    : CH3_RDMA
      type        : int
      default     : 32768
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes from which a contiguous message part takes the zero-copy
        rendezvous (unless LARGE_PROTOCOL=copy); 1024..1073741824.

    - name        : MPIR_CVAR_CH3_RDMA_CMA_SPLIT
      category    : CH3_RDMA
      type        : int
      default     : 131072
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Shared memory, zero-copy parts of at least this many bytes whose
        receive buffer is contiguous are copied by both ranks at once: the
        receiver pulls the first half (process_vm_readv) while the sender
        pushes the second (process_vm_writev).  0: the receiver copies
        alone; else 65536..1073741824.

    - name        : MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB
      category    : CH3_RDMA
      type        : int
      default     : 1024
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        MiB of idle zero-copy registrations the verbs registration cache keeps
        (least recently used ones are dropped beyond); 0..1048576.

    - name        : MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES
      category    : CH3_RDMA
      type        : int
      default     : 1024
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Idle registrations the verbs registration cache keeps; 0..1048576.

    - name        : MPIR_CVAR_CH3_RDMA_VERBOSE
      category    : CH3_RDMA
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Print one line to stderr per connection when it is established:
        transport, arrival detection (flag polling or write-with-immediate)
        and the device limits in use; at finalize, per connection, how many
        large message parts went zero-copy or through the ring, by size, and
        the registration-cache statistics.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

enum { XP_SHM = 0, XP_VERBS = 1, XP_N };

/* One transport in use by this process and the card key that names it. */
typedef struct {
    const rdma_xport_ops_t *ops;
    rdma_xport_t *xp;
    const char *key;
} rdma_xport_slot_t;

static rdma_xport_slot_t xports[XP_N] = {
    {&rdma_xport_shm, NULL, "shm"},
    {&rdma_xport_verbs, NULL, "ib"}
};

static MPIDI_PG_t *rdma_pg;
static zc_config_t rdma_zc_config;
struct MPIDI_VC *MPIDI_CH3I_ready_vcs;
int MPIDI_CH3I_poll_spins;

/* --- tunables ------------------------------------------------------- */

static int is_pow2(long v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

#define CVAR_CHECK(cond_, ...)                                          \
    do {                                                                \
        if (!(cond_)) {                                                 \
            char msg_[256];                                             \
            snprintf(msg_, sizeof(msg_), __VA_ARGS__);                  \
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|cvar", \
                                 "**ch3|rdma|cvar %s", msg_);           \
        }                                                               \
    } while (0)

/* The superpipeline CVARs; applied to cfg (sub-block frames, group
 * schedule fitted to the ring) if apply. */
static int rdma_superpipe_config(rb_config_t * cfg, int apply)
{
    int mpi_errno = MPI_SUCCESS;
    long c0 = MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0, block = MPIR_CVAR_CH3_RDMA_SUPERPIPE_BLOCK;
    long ring = (long) cfg->ring_size, chunk = (long) cfg->chunk_size;
    double q = MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q;

    CVAR_CHECK(c0 >= 1024 && c0 <= 67108864,
               "MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0=%ld: allowed 1024..67108864", c0);
    CVAR_CHECK(q >= 1.0 && q <= 16.0, "MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q=%g: allowed 1..16", q);
    CVAR_CHECK(block >= 64 && block <= 67108864,
               "MPIR_CVAR_CH3_RDMA_SUPERPIPE_BLOCK=%ld: allowed 64..67108864", block);
    if (!apply)
        goto fn_exit;
    cfg->max_frame = MPL_MIN((block + chunk - 1) / chunk * chunk, ring / 2);
    cfg->sched_max = ring / 4;
    cfg->sched_c0 = MPL_MAX(MPL_MIN(c0, ring / 4), chunk);
    cfg->sched_q = q;

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Pipe geometry from the CVARs, for shm and for verbs connections (which
 * differ in the pipeline: PIPELINE=auto runs the superpipeline over verbs
 * only); every violation names the variable and its allowed range. */
static int rdma_ring_config(rb_config_t * shm, rb_config_t * rdma)
{
    int mpi_errno = MPI_SUCCESS;
    long ring = MPIR_CVAR_CH3_RDMA_RING_SIZE, chunk = MPIR_CVAR_CH3_RDMA_RING_CHUNK;
    long frame = MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK, thr = MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD;
    const char *pl = MPIR_CVAR_CH3_RDMA_PIPELINE;

    CVAR_CHECK(is_pow2(ring) && ring >= 16384 && ring <= 67108864,
               "MPIR_CVAR_CH3_RDMA_RING_SIZE=%ld: allowed a power of two in 16384..67108864", ring);
    CVAR_CHECK(is_pow2(chunk) && chunk >= 64 && chunk <= ring / 4,
               "MPIR_CVAR_CH3_RDMA_RING_CHUNK=%ld: allowed a power of two in 64..%ld (RING_SIZE/4)",
               chunk, ring / 4);
    CVAR_CHECK(!strcmp(pl, "auto") || !strcmp(pl, "super") || !strcmp(pl, "fixed"),
               "MPIR_CVAR_CH3_RDMA_PIPELINE=%s: allowed auto, super or fixed", pl);
    CVAR_CHECK(!strcmp(pl, "super") || (frame >= chunk && frame <= ring / 2 && frame % chunk == 0),
               "MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=%ld: allowed a multiple of %ld (RING_CHUNK) in %ld..%ld (RING_SIZE/2)",
               frame, chunk, chunk, ring / 2);
    if (thr == 0)
        thr = ring / 4;
    CVAR_CHECK(thr >= chunk && thr <= ring / 2,
               "MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD=%d: allowed 0 (auto) or %ld..%ld",
               MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD, chunk, ring / 2);
    CVAR_CHECK(!strcmp(MPIR_CVAR_CH3_RDMA_PIPE_MODE, "piggyback") ||
               !strcmp(MPIR_CVAR_CH3_RDMA_PIPE_MODE, "basic"),
               "MPIR_CVAR_CH3_RDMA_PIPE_MODE=%s: allowed piggyback or basic",
               MPIR_CVAR_CH3_RDMA_PIPE_MODE);

    memset(shm, 0, sizeof(*shm));
    shm->ring_size = ring;
    shm->chunk_size = chunk;
    shm->max_frame = frame;
    shm->credit_threshold = thr;
    shm->mode = strcmp(MPIR_CVAR_CH3_RDMA_PIPE_MODE, "basic") ? RB_MODE_PIGGYBACK : RB_MODE_BASIC;
    *rdma = *shm;
    mpi_errno = rdma_superpipe_config(rdma, strcmp(pl, "fixed") != 0);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = rdma_superpipe_config(shm, strcmp(pl, "super") == 0);
    MPIR_ERR_CHECK(mpi_errno);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int rdma_other_cvars_check(void)
{
    int mpi_errno = MPI_SUCCESS;
    const char *t = MPIR_CVAR_CH3_RDMA_TRANSPORT;

    CVAR_CHECK(!strcmp(t, "auto") || !strcmp(t, "shm") || !strcmp(t, "verbs"),
               "MPIR_CVAR_CH3_RDMA_TRANSPORT=%s: allowed auto, shm or verbs", t);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_INLINE_SIZE >= 0 && MPIR_CVAR_CH3_RDMA_INLINE_SIZE <= 4096,
               "MPIR_CVAR_CH3_RDMA_INLINE_SIZE=%d: allowed 0..4096", MPIR_CVAR_CH3_RDMA_INLINE_SIZE);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_PORT >= 0 && MPIR_CVAR_CH3_RDMA_PORT <= 255,
               "MPIR_CVAR_CH3_RDMA_PORT=%d: allowed 0 (first active) or 1..255",
               MPIR_CVAR_CH3_RDMA_PORT);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_GID_INDEX >= -1 && MPIR_CVAR_CH3_RDMA_GID_INDEX <= 255,
               "MPIR_CVAR_CH3_RDMA_GID_INDEX=%d: allowed -1 (auto) or 0..255",
               MPIR_CVAR_CH3_RDMA_GID_INDEX);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT >= 1 &&
               MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT <= 3600,
               "MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT=%d: allowed 1..3600 (seconds)",
               MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_POLL_SPINS >= -1 && MPIR_CVAR_CH3_RDMA_POLL_SPINS <= 100000000,
               "MPIR_CVAR_CH3_RDMA_POLL_SPINS=%d: allowed -1 (auto) or 0..100000000",
               MPIR_CVAR_CH3_RDMA_POLL_SPINS);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB >= 0 &&
               MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB <= 1048576,
               "MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB=%d: allowed 0..1048576",
               MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES >= 0 &&
               MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES <= 1048576,
               "MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES=%d: allowed 0..1048576",
               MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int rdma_zc_config_get(zc_config_t * zc)
{
    int mpi_errno = MPI_SUCCESS;
    const char *p = MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL;

    CVAR_CHECK(!strcmp(p, "auto") || !strcmp(p, "copy") || !strcmp(p, "zcopy"),
               "MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=%s: allowed auto, copy or zcopy", p);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD >= 1024 &&
               MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD <= 1073741824,
               "MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD=%d: allowed 1024..1073741824",
               MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_CMA_SPLIT == 0 || (MPIR_CVAR_CH3_RDMA_CMA_SPLIT >= 65536 &&
                                                      MPIR_CVAR_CH3_RDMA_CMA_SPLIT <= 1073741824),
               "MPIR_CVAR_CH3_RDMA_CMA_SPLIT=%d: allowed 0 or 65536..1073741824",
               MPIR_CVAR_CH3_RDMA_CMA_SPLIT);
    zc->threshold = MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD;
    zc->split_min = (size_t) MPIR_CVAR_CH3_RDMA_CMA_SPLIT;
    zc->mode = !strcmp(p, "copy") ? ZC_MODE_COPY : !strcmp(p, "zcopy") ? ZC_MODE_ZCOPY
        : ZC_MODE_AUTO;
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Spin budget of blocking waits: none when this node's ranks outnumber
 * the cores this process may run on. */
static int rdma_poll_spins(MPIDI_PG_t * pg, int pg_rank)
{
    cpu_set_t set;
    int i, local = 0, cores;

    if (MPIR_CVAR_CH3_RDMA_POLL_SPINS >= 0)
        return MPIR_CVAR_CH3_RDMA_POLL_SPINS;
    for (i = 0; i < pg->size; i++)
        local += pg->vct[i].node_id == pg->vct[pg_rank].node_id;
    cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
        : (int) sysconf(_SC_NPROCESSORS_ONLN);
    return local > cores ? 0 : 2000;
}

/* --- owner callbacks handed to the transports ------------------------ */

static rdma_conn_t *rdma_conn_of(void *arg, int rank)
{
    rdma_xport_slot_t *slot = arg;
    MPIDI_VC_t *vc;

    if (rank < 0 || rank >= rdma_pg->size || rank == MPIR_Process.rank)
        return NULL;
    vc = &rdma_pg->vct[rank];
    return vc->ch.conn.ops == slot->ops ? &vc->ch.conn : NULL;
}

/* Copy the "<key>:<fragment>" token of rank's business card into buf.
 * Tokens are separated by ';': PMI-1 values cannot contain spaces. */
static int rdma_card_of(void *arg, int rank, char *buf, size_t len)
{
    rdma_xport_slot_t *slot = arg;
    char card[1024], *p, *end;
    size_t klen = strlen(slot->key), n;

    if (MPIDI_PG_GetConnString(rdma_pg, rank, card, sizeof(card)) != MPI_SUCCESS)
        return -1;
    for (p = card; (p = strstr(p, slot->key)) != NULL; p += klen) {
        if ((p == card || p[-1] == ';') && p[klen] == ':')
            break;
    }
    if (p == NULL)
        return -1;
    p += klen + 1;
    end = strchr(p, ';');
    n = end ? (size_t) (end - p) : strlen(p);
    if (n >= len)
        return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

static void rdma_conn_ready(void *arg, rdma_conn_t * c)
{
    MPIDI_VC_t *vc = c->owner;
    char desc[256];

    (void) arg;
    if (MPIR_CVAR_CH3_RDMA_VERBOSE) {
        c->ops->describe(c, desc, sizeof(desc));
        fprintf(stderr, "[ch3:rdma] rank %d -> %d: %s\n", MPIR_Process.rank, c->peer, desc);
    }
    zc_init(&c->zc, &rdma_zc_config, c->ops->zc, c, &c->pipe);
    /* A passively connected VC takes part in CH3's close protocol too. */
    if (vc->state == MPIDI_VC_STATE_INACTIVE)
        MPIDI_CHANGE_VC_STATE(vc, ACTIVE);
    if (!vc->ch.on_ready_list) {
        vc->ch.on_ready_list = 1;
        vc->ch.next_ready = MPIDI_CH3I_ready_vcs;
        MPIDI_CH3I_ready_vcs = vc;
    }
}

/* --- the five functions ---------------------------------------------- */

/* Assign each peer its transport.  (CH3 itself creates the process group
 * through PMI; what is left for the channel is the per-peer choice.) */
int MPIDI_CH3I_RDMA_init_process_group(MPIDI_PG_t * pg, int pg_rank)
{
    int mpi_errno = MPI_SUCCESS, i;
    const char *t = MPIR_CVAR_CH3_RDMA_TRANSPORT;
    int my_node = pg->vct[pg_rank].node_id;

    for (i = 0; i < pg->size; i++) {
        MPIDI_VC_t *vc = &pg->vct[i];
        int local = vc->node_id == my_node;
        int k = (!strcmp(t, "verbs") || (!local && strcmp(t, "shm"))) ? XP_VERBS : XP_SHM;

        if (i == pg_rank)
            continue;
        MPIR_ERR_CHKANDJUMP1(!local && !strcmp(t, "shm"), mpi_errno, MPI_ERR_OTHER,
                             "**ch3|rdma|init", "**ch3|rdma|init %s",
                             "MPIR_CVAR_CH3_RDMA_TRANSPORT=shm but the job spans several nodes");
        vc->ch.conn.ops = xports[k].ops;
        vc->ch.conn.peer = i;
        vc->ch.conn.owner = vc;
    }
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* Open the transports some peer needs and publish the business card. */
int MPIDI_CH3I_RDMA_init(MPIDI_PG_t * pg, int pg_rank)
{
    int mpi_errno = MPI_SUCCESS, i, k;
    rdma_xport_params_t prm = { 0 };
    char card[1024] = "", frag[512], err[512];
    int needed[XP_N] = { 0 };

    rdma_pg = pg;
    mpi_errno = rdma_other_cvars_check();
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = rdma_ring_config(&prm.ring, &prm.ring_rdma);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = rdma_zc_config_get(&rdma_zc_config);
    MPIR_ERR_CHECK(mpi_errno);
    mpi_errno = MPIDI_CH3I_RDMA_init_process_group(pg, pg_rank);
    MPIR_ERR_CHECK(mpi_errno);
    MPIDI_CH3I_poll_spins = rdma_poll_spins(pg, pg_rank);

    for (i = 0; i < pg->size; i++)
        for (k = 0; k < XP_N; k++)
            needed[k] |= (i != pg_rank && pg->vct[i].ch.conn.ops == xports[k].ops);

    prm.rank = pg_rank;
    prm.size = pg->size;
    prm.job = (const char *) pg->id;
    prm.conn_of = rdma_conn_of;
    prm.card_of = rdma_card_of;
    prm.conn_ready = rdma_conn_ready;
    prm.device = MPIR_CVAR_CH3_RDMA_DEVICE;
    prm.port = MPIR_CVAR_CH3_RDMA_PORT;
    prm.gid_index = MPIR_CVAR_CH3_RDMA_GID_INDEX;
    prm.inline_size = MPIR_CVAR_CH3_RDMA_INLINE_SIZE;
    prm.force_completion = MPIR_CVAR_CH3_RDMA_WRITE_IMM;
    prm.timeout = MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT;
    prm.rcache_max_bytes = (size_t) MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB << 20;
    prm.rcache_max_entries = MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES;

    for (k = 0; k < XP_N; k++) {
        if (!needed[k])
            continue;
        prm.arg = &xports[k];
        err[0] = '\0';
        if (xports[k].ops->open(&prm, &xports[k].xp, frag, sizeof(frag), err, sizeof(err))) {
            MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|init",
                                 "**ch3|rdma|init %s", err);
        }
        MPL_snprintf(card + strlen(card), sizeof(card) - strlen(card), "%s%s:%s",
                     card[0] ? ";" : "", xports[k].key, frag);
    }
    for (i = 0; i < pg->size; i++)
        if (i != pg_rank)
            pg->vct[i].ch.conn.xport = xports[pg->vct[i].ch.conn.ops == &rdma_xport_verbs].xp;

    mpi_errno = MPIDI_PG_SetConnInfo(pg_rank, card[0] ? card : "none");
    MPIR_ERR_CHECK(mpi_errno);

  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

/* MPIR_CVAR_CH3_RDMA_VERBOSE: which path large parts took, per size. */
static void rdma_zc_report(const rdma_conn_t * c)
{
    const zc_stats_t *st = &c->zc.stats;
    char line[1024];
    size_t n;
    int k;

    if (c->state != RDMA_CONN_READY || st->zc_msgs + st->copy_msgs + st->pulled_msgs == 0)
        return;
    n = snprintf(line, sizeof(line), "[ch3:rdma] rank %d -> %d: zero-copy %llu (%llu B, "
                 "cache hits %llu/%llu), copy %llu (%llu B), pulled %llu (%llu B), refused "
                 "%llu/%llu, split %llu (pushed %llu B); ring frames %llu in %llu writes; by size 2^k "
                 "zcopy/copy:",
                 MPIR_Process.rank, c->peer,
                 (unsigned long long) st->zc_msgs, (unsigned long long) st->zc_bytes,
                 (unsigned long long) st->hits, (unsigned long long) (st->hits + st->misses),
                 (unsigned long long) st->copy_msgs, (unsigned long long) st->copy_bytes,
                 (unsigned long long) st->pulled_msgs, (unsigned long long) st->pulled_bytes,
                 (unsigned long long) st->refused_tx, (unsigned long long) st->refused_rx,
                 (unsigned long long) st->split_msgs, (unsigned long long) st->pushed_bytes,
                 (unsigned long long) c->pipe.stats.frames_tx,
                 (unsigned long long) c->pipe.stats.writes_tx);
    for (k = 0; k < ZC_LOG2_MAX && n < sizeof(line); k++)
        if (st->zc_by_log2[k] + st->copy_by_log2[k])
            n += snprintf(line + n, sizeof(line) - n, " %d:%llu/%llu", k,
                          (unsigned long long) st->zc_by_log2[k],
                          (unsigned long long) st->copy_by_log2[k]);
    fprintf(stderr, "%s\n", line);
}

static void rdma_xport_report(const rdma_xport_slot_t * slot)
{
    char line[512];

    if (slot->xp && slot->ops->stats && slot->ops->stats(slot->xp, line, sizeof(line)) > 0)
        fprintf(stderr, "[ch3:rdma] rank %d %s: %s\n", MPIR_Process.rank, slot->ops->name, line);
}

int MPIDI_CH3I_RDMA_finalize(void)
{
    int mpi_errno = MPI_SUCCESS, i, k;

    for (i = 0; rdma_pg && i < rdma_pg->size; i++) {
        rdma_conn_t *c = &rdma_pg->vct[i].ch.conn;
        if (MPIR_CVAR_CH3_RDMA_VERBOSE && i != MPIR_Process.rank)
            rdma_zc_report(c);
        if (c->xport && c->state != RDMA_CONN_IDLE)
            c->ops->close(c->xport, c);
    }
    for (k = 0; k < XP_N; k++) {
        if (MPIR_CVAR_CH3_RDMA_VERBOSE)
            rdma_xport_report(&xports[k]);
        if (xports[k].xp && xports[k].ops->finalize(xports[k].xp) != RDMA_XPORT_OK)
            mpi_errno = MPI_ERR_OTHER;
        xports[k].xp = NULL;
    }
    MPIDI_CH3I_ready_vcs = NULL;
    MPIR_ERR_CHKANDJUMP1(mpi_errno, mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport",
                         "**ch3|rdma|xport %s", "transport finalization failed");
  fn_exit:
    return mpi_errno;
  fn_fail:
    goto fn_exit;
}

static int rdma_xport_error(rdma_conn_t * c)
{
    int mpi_errno = MPI_SUCCESS;

    MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport", "**ch3|rdma|xport %s",
                  c->ops->error(c->xport));
    return mpi_errno;
}

static int rdma_pipe_error(MPIDI_VC_t * vc, int rc)
{
    int mpi_errno = MPI_SUCCESS;
    rdma_conn_t *c = &vc->ch.conn;

    if (rc == RB_ERR_XPORT)
        return rdma_xport_error(c);
    MPIR_ERR_SET2(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|pipe", "**ch3|rdma|pipe %d %d",
                  c->peer, rc);
    return mpi_errno;
}

/* Put up to the iov total into vc's pipe; *nbytes = bytes accepted (0 while
 * the connection is being made, the ring is full or the peer is still
 * pulling a large part: zc.h). */
int MPIDI_CH3I_RDMA_put_datav(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * nbytes)
{
    int mpi_errno = MPI_SUCCESS, rc;

    *nbytes = 0;
    if (vc->ch.conn.state != RDMA_CONN_READY) {
        mpi_errno = MPIDI_CH3I_RDMA_connect(vc);
        if (mpi_errno || vc->ch.conn.state != RDMA_CONN_READY)
            goto fn_exit;       /* shm connects at once, verbs later */
    }
    rc = zc_putv(&vc->ch.conn.zc, iov, n, nbytes);
    if (rc != RB_OK)
        mpi_errno = rdma_pipe_error(vc, rc);
  fn_exit:
    return mpi_errno;
}

/* Read what vc's peer has put into the iov, pulling large parts (zc.h);
 * *nbytes may be 0. */
int MPIDI_CH3I_RDMA_read_datav(MPIDI_VC_t * vc, struct iovec *iov, int n, size_t * nbytes)
{
    int rc = zc_getv(&vc->ch.conn.zc, iov, n, nbytes);

    return rc == RB_OK ? MPI_SUCCESS : rdma_pipe_error(vc, rc);
}

/* --- connections ------------------------------------------------------ */

int MPIDI_CH3I_RDMA_connect(MPIDI_VC_t * vc)
{
    rdma_conn_t *c = &vc->ch.conn;

    if (c->state == RDMA_CONN_FAILED ||
        (c->state == RDMA_CONN_IDLE && c->ops->connect(c->xport, c) != RDMA_XPORT_OK))
        return rdma_xport_error(c);
    return MPI_SUCCESS;
}

/* A failed connection only matters while CH3 still uses the VC: the peer
 * may tear down its side once the close protocol is done. */
static int rdma_failed_conn_check(void)
{
    int i;

    for (i = 0; i < rdma_pg->size; i++) {
        MPIDI_VC_t *vc = &rdma_pg->vct[i];
        if (vc->ch.conn.state == RDMA_CONN_FAILED &&
            (vc->state == MPIDI_VC_STATE_ACTIVE || vc->state == MPIDI_VC_STATE_INACTIVE))
            return rdma_xport_error(&vc->ch.conn);
    }
    return MPI_SUCCESS;
}

int MPIDI_CH3I_RDMA_poll_transports(void)
{
    int mpi_errno = MPI_SUCCESS, k, rc;

    for (k = 0; k < XP_N && mpi_errno == MPI_SUCCESS; k++) {
        if (!xports[k].xp)
            continue;
        rc = xports[k].ops->progress(xports[k].xp);
        if (rc == RDMA_XPORT_EPEER)
            mpi_errno = rdma_failed_conn_check();
        else if (rc != RDMA_XPORT_OK)
            MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**ch3|rdma|xport", "**ch3|rdma|xport %s",
                          xports[k].ops->error(xports[k].xp));
    }
    return mpi_errno;
}

/* Idle for `over` polls past the spin phase: arm the transport that can
 * wake us, poll once more, then block until a peer writes to us or a
 * timeout passes (outside the global critical section).  With shm peers
 * the waiter is shm's futex, which verbs arrivals cannot wake: with both,
 * the sleep is short.  Verbs alone: short sleeps for the first
 * RDMA_BLOCK_SHORT sleeps (on Soft-RoCE a CQ-event wakeup measured slower
 * than a 50 us sleep), then the CQ event, unless a flag-polled connection
 * makes the waiter decline (no event per arrival: 500 us sleeps).  With
 * several threads sharing the waiter a wakeup may be missed, so the sleep
 * is bounded there too.  Cold (.text.unlikely): the idle path must not
 * move the hot poll code; a change of this function's size once cost
 * 0.1 us of 8-byte shm latency through code layout alone. */
enum { RDMA_BLOCK_SHORT = 3000 };
__attribute__ ((cold)) int MPIDI_CH3I_RDMA_block(int (*poll) (int *), int *progressed, unsigned long over)
{
    int shm = xports[XP_SHM].xp != NULL, verbs = xports[XP_VERBS].xp != NULL;
    rdma_xport_slot_t *w = shm ? &xports[XP_SHM] :
        verbs && over >= RDMA_BLOCK_SHORT ? &xports[XP_VERBS] : NULL;
    int armed = w && w->ops->wait_arm(w->xp);
    long us = armed && !(shm && verbs) ? (MPIR_IS_THREADED ? 1000 : 20000) :
        over < RDMA_BLOCK_SHORT ? 50 : 500;
    int mpi_errno;

    mpi_errno = poll(progressed);
    if (mpi_errno || *progressed) {
        if (armed)
            w->ops->wait_disarm(w->xp);
        return mpi_errno;
    }
    MPID_THREAD_CS_EXIT(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    if (armed) {
        w->ops->wait(w->xp, us);
    } else {
        struct timespec ts = { 0, us * 1000 };
        nanosleep(&ts, NULL);
    }
    MPID_THREAD_CS_ENTER(GLOBAL, MPIR_THREAD_GLOBAL_ALLFUNC_MUTEX);
    return MPI_SUCCESS;
}

/* CH3's close protocol is done: stop polling vc.  The transport keeps the
 * connection's memory until finalize so late credit writes from the peer
 * still land somewhere valid. */
int MPIDI_CH3I_RDMA_close(MPIDI_VC_t * vc)
{
    MPIDI_VC_t **pp;

    for (pp = &MPIDI_CH3I_ready_vcs; *pp; pp = &(*pp)->ch.next_ready) {
        if (*pp == vc) {
            *pp = vc->ch.next_ready;
            break;
        }
    }
    vc->ch.on_ready_list = 0;
    if (vc->ch.conn.state == RDMA_CONN_READY)
        rb_pipe_flush_credit(&vc->ch.conn.pipe);
    return MPI_SUCCESS;
}
