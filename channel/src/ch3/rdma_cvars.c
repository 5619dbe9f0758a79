/*
 * rdma_cvars.c -- the channel's tunables: the MPI_T CVAR declarations (the
 * CVAR generator reads the YAML block below) and their validation into one
 * rdma_chan_config_t (rdma_config.h), the only form the rest of the channel
 * reads.  Every violation names the variable and its allowed range.
 */
#include "rdma_glue.h"
#include "freq.h"

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
        Bytes a connection's receive ring (one per direction) grows to at
        most; a power of two from 16384 to 67108864.

    - name        : MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes a ring starts with (it doubles up to RING_SIZE when full): -1
        (16384 over verbs, RING_SIZE on shm) or 4*RING_CHUNK..RING_SIZE.

    - name        : MPIR_CVAR_CH3_RDMA_RING_CHUNK
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Ring slot size in bytes (each message starts in its own slot): -1
        (64 on shared memory, 512 over verbs; docs/tuning.md says why) or a power
        of two from 64 to RING_SIZE/4.

    - name        : MPIR_CVAR_CH3_RDMA_RING_HOT
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Hot window of shared-memory rings, in bytes: a sender that finds its
        ring empty past this offset or a quarter of it in frame bytes starts
        at offset 0 again, or a one-frame message ends the lap past RING_HOT/32
        (docs/design.md: lap end), so small messages reuse a few warm lines.
        -1 (16384, at most RING_SIZE/4), 0 (off) or RING_CHUNK..RING_SIZE/2.

    - name        : MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        PIPELINE=fixed: largest frame (bytes, header included) written to
        the ring at once; longer messages are pipelined in frames of this
        size.  -1: on shared memory 32768 for a message that finds the
        ring empty (its receiver waits for it) and 65536 for one that
        finds earlier frames unread (a stream; docs/tuning.md says why),
        16384 over verbs (P3's), at most RING_SIZE/2; else one size, a
        multiple of RING_CHUNK, at most RING_SIZE/2.

    - name        : MPIR_CVAR_CH3_RDMA_PIPELINE
      category    : CH3_RDMA
      type        : string
      default     : auto
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        How messages larger than a frame move through the ring.  fixed: one
        write per PIPELINE_CHUNK frame (P3).  super: the
        superpipeline (P1): SUPERPIPE_BLOCK frames with their own
        flags, written in groups of C_i = SUPERPIPE_C0 * SUPERPIPE_Q^i bytes,
        at most RING_SIZE/4, restarting at every message.  auto: super over
        verbs, fixed on shared memory.

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
        Superpipeline group growth factor (the paper's q = 1.5); 1..16.

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
        piggyback: head and tail updates ride on data (P3 sec. 4.3);
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
        Detect every arrival from an RDMA-write-with-immediate completion:
        no flag polling, no self-verifying small frames.

    - name        : MPIR_CVAR_CH3_RDMA_SRQ_SIZE
      category    : CH3_RDMA
      type        : int
      default     : 256
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Verbs: one shared receive queue serves every connection that is
        driven by write-with-immediate completions, starting with room for
        this many receives; it doubles, up to what the connections can use,
        when its limit event fires.  0: a receive queue per connection
        (also used when the device has no SRQ).

    - name        : MPIR_CVAR_CH3_RDMA_MAX_CONNS
      category    : CH3_RDMA
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_LOCAL
      description : >-
        Connections over the network (verbs) to ranks of the job that a
        process holds at most, ready and closing ones included (as many
        again may be connecting to lower ranks): at the cap a connect, or
        a peer's, waits while the least recently used one with nothing
        under way closes (it reopens when next used), so queue and ring
        memory follow this cap, not the number of peers, MPI_Finalize
        included.  0: no cap; else 1..1048576.

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
        Seconds a silent peer has before it is reported dead: in connection
        setup, and through RC's retries during the job (1..3600).

    - name        : MPIR_CVAR_CH3_RDMA_RING_IDLE
      category    : CH3_RDMA
      type        : int
      default     : 10
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Seconds without messages before grown rings return to
        RING_INIT_SIZE; 0 (never) or 1..86400.

    - name        : MPIR_CVAR_CH3_RDMA_POLL_SPINS
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Idle polls of a blocking wait before it blocks in the kernel;
        0..100000000, or -1 (200000 with other ranks on the node, 2000
        alone, 0 when the node runs more ranks than it has cores).

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
        process_vm_readv copy on the same node); auto: zcopy, but the ring
        on shared memory where a 1 MiB process_vm_readv took over 2.5x the
        time of the ring's copy between two cores at start (VERBOSE says)
        and, for a while, on a verbs connection whose registration-cache
        hit rate fell below 1/4.

    - name        : MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes from which a contiguous message part takes the zero-copy
        rendezvous (unless LARGE_PROTOCOL=copy).  -1 (auto): 32768 over
        verbs, 196608 on shared memory (below it the ring's copy moved a
        stream of messages faster than a CMA rendezvous), there 65536 for
        a message to a peer that answered the sender's last one (a
        ping-pong, where one rendezvous took less time; below CH3's eager
        limit too); else
        1024..1073741824.  (One-sided operations on the node go direct
        from MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN instead; sent as messages, an
        accumulate's data and a put's of at most 384 KiB keep to the ring
        on shared memory.)

    - name        : MPIR_CVAR_CH3_RDMA_CMA_SPLIT
      category    : CH3_RDMA
      type        : int
      default     : 65536
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

    - name        : MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB
      category    : CH3_RDMA
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Cap, in MiB, on the memory the verbs transport keeps pinned at any
        time: the rings, staging areas and control pages of every verbs peer
        (pinned for good) plus the user buffers registered for zero-copy.
        Idle registrations are dropped (LRU) to make room; a buffer that
        still does not fit is copied.  RCACHE_MAX_MB is clamped to what the
        rings leave, and MPI_Init fails if they leave nothing.  0: no cap
        (ulimit -l still applies); else 1..1048576.

    - name        : MPIR_CVAR_CH3_RDMA_REG_HELPER
      category    : CH3_RDMA
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Verbs: the channel thread predicts when each zero-copy buffer of at
        least 16 KiB is used next (per call site, the shortest interval
        seen), deregisters it in between and registers it again ahead of the
        predicted use (P4); a buffer's first use is always followed by
        its deregistration.  Needs the registration cache.

    - name        : MPIR_CVAR_CH3_RDMA_EAGER_REG_USES
      category    : CH3_RDMA
      type        : int
      default     : -1
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Verbs: an eager message of at least 128 B whose buffer has been sent
        from this many times is sent straight from it, registered, with one
        gathered RDMA write (header from the staging area, payload from the
        buffer): no copy on the sending side (P2), on an idle
        connection.  -1: the paper's rule, 25% of n_min = Rm / (Cm - V) with
        registration, copy and lookup costs measured at MPI_Init (never where
        copying is cheaper than the lookups, nor on a software device such
        as rxe, which copies anyway); 0: never; else 1..1000000.  Needs the
        registration cache.

    - name        : MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX
      category    : CH3_RDMA
      type        : int
      default     : 8192
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Verbs: a direct MPI_Get, and an MPI_Put too large to go inline, of
        at most this many bytes is copied through registered bounce buffers
        (32 per process, made at the first such operation and charged to
        the pinned-memory cap) instead of registering the user's buffer
        through the cache; 0: never; else 1..65536.

    - name        : MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN
      category    : CH3_RDMA
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        On a node, a contiguous MPI_Put or MPI_Get of at least this many
        bytes into a window over user memory (MPI_Win_create, dynamic)
        is one process_vm_writev/readv, without the target's CPU; 0
        (default): never, such operations are active messages, whose
        large parts the target pulls with a copy split over both
        processes' cores, twice as fast where the target is in MPI;
        else 1..1073741824.

    - name        : MPIR_CVAR_CH3_RDMA_EAGER_MAX
      category    : CH3_RDMA
      type        : int
      default     : 0
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Payload bytes up to which CH3 sends a message at once, without its
        own rendezvous (RTS/CTS): the data then goes through the ring or,
        from ZCOPY_THRESHOLD, by the channel's zero-copy rendezvous, one
        control round trip.  A message that arrives before its receive is
        posted is buffered whole at the receiver, in memory CH3 allocates
        (kept for the next: EARLY_BUFS) and copied again: a stream of
        them moves fewer bytes.  0: CH3's limit,
        MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE; else 1..1073741824.

    - name        : MPIR_CVAR_CH3_RDMA_EARLY_BUFS
      category    : CH3_RDMA
      type        : int
      default     : 67108864
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Bytes of freed buffers of early messages (messages that arrived
        before their receives, which CH3 buffers whole) the channel keeps
        for the next ones, in classes of 8 KiB to 1 GiB.  Given back to
        malloc, a stream of early messages faulted every page in again
        (64 KiB messages: 3.2 GB/s instead of 21).  0: keep none (CH3
        allocates and frees each); else 1..1073741824.

    - name        : MPIR_CVAR_CH3_RDMA_VERBOSE
      category    : CH3_RDMA
      type        : boolean
      default     : false
      class       : none
      verbosity   : MPI_T_VERBOSITY_USER_BASIC
      scope       : MPI_T_SCOPE_ALL_EQ
      description : >-
        Print one line to stderr per connection when it is established:
        transport, arrival detection (flag-poll, verified or write-imm)
        and the device limits in use; at finalize, per connection, how many
        large message parts went zero-copy or through the ring, by size, and
        the registration-cache statistics.

=== END_MPI_T_CVAR_INFO_BLOCK ===
*/

static int is_pow2(long v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

/* A violated condition: the diagnosis goes to msg[len], status INVAL. */
#define CVAR_CHECK(cond_, ...)                                          \
    do {                                                                \
        if (!(cond_)) {                                                 \
            st = rdma_say(msg, len, RDMA_ERR_INVAL, __VA_ARGS__);       \
            goto fn_fail;                                               \
        }                                                               \
    } while (0)

/* An int CVAR within [lo_, hi_]; allowed_ says so in words. */
#define CVAR_IN(var_, lo_, hi_, allowed_)                               \
    CVAR_CHECK((var_) >= (lo_) && (var_) <= (hi_), #var_ "=%d: allowed " allowed_, (var_))

/* The superpipeline CVARs; applied to cfg (sub-block frames, group
 * schedule fitted to the ring) if apply. */
static rdma_status_t rdma_superpipe_config(rb_config_t * cfg, int apply, char *msg, size_t len)
{
    rdma_status_t st = RDMA_OK;
    long c0 = MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0, block = MPIR_CVAR_CH3_RDMA_SUPERPIPE_BLOCK;
    long ring = (long) (cfg->ring_max ? cfg->ring_max : cfg->ring_size);
    long chunk = (long) cfg->chunk_size;
    double q = MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q;

    CVAR_CHECK(c0 >= 1024 && c0 <= 67108864,
               "MPIR_CVAR_CH3_RDMA_SUPERPIPE_C0=%ld: allowed 1024..67108864", c0);
    CVAR_CHECK(q >= 1.0 && q <= 16.0, "MPIR_CVAR_CH3_RDMA_SUPERPIPE_Q=%g: allowed 1..16", q);
    CVAR_CHECK(block >= 64 && block <= 67108864,
               "MPIR_CVAR_CH3_RDMA_SUPERPIPE_BLOCK=%ld: allowed 64..67108864", block);
    if (!apply)
        goto fn_exit;
    cfg->max_frame = MPL_MIN((block + chunk - 1) / chunk * chunk, ring / 2);
    cfg->quiet_frame = 0;       /* sub-blocks: one size */
    cfg->sched_max = ring / 4;
    cfg->sched_c0 = MPL_MAX(MPL_MIN(c0, ring / 4), chunk);
    cfg->sched_q = q;

  fn_exit:
    return st;
  fn_fail:
    goto fn_exit;
}

/* PIPELINE_CHUNK -1.  Verbs keeps P3's 16 KiB (PIPELINE=fixed only: auto
 * runs the superpipeline there).  Shared memory: 32 KiB frames, host H
 * 2026-12-05 against 16 KiB (same build, 5 alternating pairs): latency
 * 0.83-0.94 at 16-128 KiB, bandwidth 1.17-1.22x, bidirectional 1.38-1.54x;
 * 64 KiB frames moved 5-10% more in a stream but took 1.09-1.18x 32 KiB's
 * latency at 64-128 KiB (docs/results/shm.md).  So both: 32 KiB frames for
 * a message that finds the ring empty (its receiver waits), 64 KiB in a
 * stream (rb_config_t.quiet_frame; host H 2026-12-06, docs/results/rma.md). */
enum { RDMA_FRAME_SHM = 65536, RDMA_FRAME_SHM_QUIET = 32768, RDMA_FRAME_VERBS = 16384 };

/* Pipe geometry from the CVARs, for shm and for verbs connections (which
 * differ in the pipeline: PIPELINE=auto runs the superpipeline over verbs
 * only); every violation names the variable and its allowed range. */
static rdma_status_t rdma_ring_config(rb_config_t * shm, rb_config_t * rdma, char *msg, size_t len)
{
    rdma_status_t st = RDMA_OK;
    long ring = MPIR_CVAR_CH3_RDMA_RING_SIZE, chunk = MPIR_CVAR_CH3_RDMA_RING_CHUNK;
    long frame = MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK, thr = MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD;
    long hot = MPIR_CVAR_CH3_RDMA_RING_HOT, shm_chunk = chunk == -1 ? 64 : chunk;
    long init = MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE, shm_init = init == -1 ? ring : init;
    const char *pl = MPIR_CVAR_CH3_RDMA_PIPELINE;

    CVAR_CHECK(is_pow2(ring) && ring >= 16384 && ring <= 67108864,
               "MPIR_CVAR_CH3_RDMA_RING_SIZE=%ld: allowed a power of two in 16384..67108864", ring);
    CVAR_CHECK(chunk == -1 || (is_pow2(chunk) && chunk >= 64 && chunk <= ring / 4),
               "MPIR_CVAR_CH3_RDMA_RING_CHUNK=%ld: allowed -1 (auto) or a power of two in 64..%ld (RING_SIZE/4)",
               chunk, ring / 4);
    if (chunk == -1)
        chunk = 512;            /* verbs; the checks below hold for shm_chunk too */
    if (init == -1)
        init = MPL_MIN(16384, ring);
    CVAR_CHECK(is_pow2(init) && init >= 4 * chunk && init <= ring,
               "MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE=%d: allowed -1 (auto) or a power of two in "
               "%ld..%ld (4*RING_CHUNK..RING_SIZE)", MPIR_CVAR_CH3_RDMA_RING_INIT_SIZE,
               4 * chunk, ring);
    CVAR_CHECK(!strcmp(pl, "auto") || !strcmp(pl, "super") || !strcmp(pl, "fixed"),
               "MPIR_CVAR_CH3_RDMA_PIPELINE=%s: allowed auto, super or fixed", pl);
    CVAR_CHECK(frame == -1 || !strcmp(pl, "super")
               || (frame >= chunk && frame <= ring / 2 && frame % chunk == 0),
               "MPIR_CVAR_CH3_RDMA_PIPELINE_CHUNK=%ld: allowed -1 (auto) or a multiple of %ld (RING_CHUNK) in %ld..%ld (RING_SIZE/2)",
               frame, chunk, chunk, ring / 2);
    if (thr == 0)
        thr = ring / 4;
    CVAR_CHECK(thr >= chunk && thr <= ring / 2,
               "MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD=%d: allowed 0 (auto) or %ld..%ld",
               MPIR_CVAR_CH3_RDMA_CREDIT_THRESHOLD, chunk, ring / 2);
    if (hot == -1)
        hot = MPL_MAX(MPL_MIN(16384, ring / 4), shm_chunk);
    CVAR_CHECK(hot == 0 || (hot >= shm_chunk && hot <= ring / 2),
               "MPIR_CVAR_CH3_RDMA_RING_HOT=%d: allowed -1 (auto), 0 (off) or %ld..%ld",
               MPIR_CVAR_CH3_RDMA_RING_HOT, shm_chunk, ring / 2);
    CVAR_CHECK(!strcmp(MPIR_CVAR_CH3_RDMA_PIPE_MODE, "piggyback") ||
               !strcmp(MPIR_CVAR_CH3_RDMA_PIPE_MODE, "basic"),
               "MPIR_CVAR_CH3_RDMA_PIPE_MODE=%s: allowed piggyback or basic",
               MPIR_CVAR_CH3_RDMA_PIPE_MODE);

    memset(shm, 0, sizeof(*shm));
    shm->ring_size = shm_init;  /* rings grow (rb_pipe.h) from the first size */
    shm->ring_max = ring > shm_init ? ring : 0;
    shm->chunk_size = shm_chunk;
    shm->max_frame = frame == -1 ? MPL_MIN(RDMA_FRAME_SHM, ring / 2) : frame;
    shm->quiet_frame = frame == -1
        ? (uint32_t) MPL_MIN(MPL_MAX(RDMA_FRAME_SHM_QUIET, shm_chunk), shm->max_frame) : 0;
    shm->credit_threshold = thr;
    shm->hot_window = hot;
    shm->mode = strcmp(MPIR_CVAR_CH3_RDMA_PIPE_MODE, "basic") ? RB_MODE_PIGGYBACK : RB_MODE_BASIC;
    shm->flag_publishes = 1;    /* the stage is the peer's ring (rdma_xport_shm.c) */
    *rdma = *shm;
    rdma->chunk_size = chunk;
    rdma->hot_window = 0;       /* RING_HOT is for shm rings (see its description) */
    rdma->ring_size = init;
    rdma->ring_max = ring > init ? ring : 0;
    rdma->flag_publishes = 0;
    rdma->max_frame = frame == -1 ? MPL_MIN(RDMA_FRAME_VERBS, ring / 2) : frame;
    rdma->quiet_frame = 0;
    st = rdma_superpipe_config(rdma, strcmp(pl, "fixed") != 0, msg, len);
    if (st != RDMA_OK)
        goto fn_fail;
    st = rdma_superpipe_config(shm, strcmp(pl, "super") == 0, msg, len);
    if (st != RDMA_OK)
        goto fn_fail;

  fn_exit:
    return st;
  fn_fail:
    goto fn_exit;
}

/* Transport choice, verbs device settings, waiting, reporting. */
static rdma_status_t rdma_other_cvars_get(rdma_chan_config_t * cfg, char *msg, size_t len)
{
    rdma_status_t st = RDMA_OK;
    const char *t = MPIR_CVAR_CH3_RDMA_TRANSPORT;

    CVAR_CHECK(!strcmp(t, "auto") || !strcmp(t, "shm") || !strcmp(t, "verbs"),
               "MPIR_CVAR_CH3_RDMA_TRANSPORT=%s: allowed auto, shm or verbs", t);
    CVAR_IN(MPIR_CVAR_CH3_RDMA_INLINE_SIZE, 0, 4096, "0..4096");
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_SRQ_SIZE == 0 || (MPIR_CVAR_CH3_RDMA_SRQ_SIZE >= 16 &&
                                                    MPIR_CVAR_CH3_RDMA_SRQ_SIZE <= 1048576),
               "MPIR_CVAR_CH3_RDMA_SRQ_SIZE=%d: allowed 0 (a receive queue per connection) "
               "or 16..1048576", MPIR_CVAR_CH3_RDMA_SRQ_SIZE);
    CVAR_IN(MPIR_CVAR_CH3_RDMA_PORT, 0, 255, "0 (first active) or 1..255");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_GID_INDEX, -1, 255, "-1 (auto) or 0..255");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT, 1, 3600, "1..3600 (seconds)");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_POLL_SPINS, -1, 100000000, "-1 (auto) or 0..100000000");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_RING_IDLE, 0, 86400, "0 (never) or 1..86400 (seconds)");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_MAX_CONNS, 0, 1048576, "0 (no cap) or 1..1048576");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB, 0, 1048576, "0..1048576");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES, 0, 1048576, "0..1048576");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB, 0, 1048576, "0 (no cap) or 1..1048576");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_EAGER_REG_USES, -1, 1000000, "-1 (auto), 0 (never) or 1..1000000");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX, 0, 65536, "0 (never) or 1..65536 (bytes)");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN, 0, 1073741824, "0 (never) or 1..1073741824 (bytes)");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_EAGER_MAX, 0, 1073741824, "0 (CH3's) or "
            "1..1073741824 (bytes)");
    CVAR_IN(MPIR_CVAR_CH3_RDMA_EARLY_BUFS, 0, 1073741824, "0 (keep none) or "
            "1..1073741824 (bytes)");
    cfg->transport = !strcmp(t, "shm") ? RDMA_TRANSPORT_SHM : !strcmp(t, "verbs")
        ? RDMA_TRANSPORT_VERBS : RDMA_TRANSPORT_AUTO;
    cfg->verbs.device = MPIR_CVAR_CH3_RDMA_DEVICE;
    cfg->verbs.port = MPIR_CVAR_CH3_RDMA_PORT;
    cfg->verbs.gid_index = MPIR_CVAR_CH3_RDMA_GID_INDEX;
    cfg->verbs.inline_size = MPIR_CVAR_CH3_RDMA_INLINE_SIZE;
    cfg->verbs.force_completion = MPIR_CVAR_CH3_RDMA_WRITE_IMM;
    cfg->verbs.srq_size = (size_t) MPIR_CVAR_CH3_RDMA_SRQ_SIZE;
    cfg->verbs.timeout = MPIR_CVAR_CH3_RDMA_CONNECT_TIMEOUT;
    cfg->verbs.rcache_max_bytes = (size_t) MPIR_CVAR_CH3_RDMA_RCACHE_MAX_MB << 20;
    cfg->verbs.rcache_max_entries = MPIR_CVAR_CH3_RDMA_RCACHE_MAX_ENTRIES;
    cfg->verbs.pinned_max_bytes = (size_t) MPIR_CVAR_CH3_RDMA_PINNED_MAX_MB << 20;
    cfg->verbs.reg_helper = MPIR_CVAR_CH3_RDMA_REG_HELPER;
    cfg->verbs.eager_reg_uses = MPIR_CVAR_CH3_RDMA_EAGER_REG_USES;
    cfg->verbs.rma_bcopy_max = (size_t) MPIR_CVAR_CH3_RDMA_RMA_BCOPY_MAX;
    cfg->rma_cma_min = MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN ? (size_t) MPIR_CVAR_CH3_RDMA_RMA_CMA_MIN
        : SIZE_MAX;
    cfg->eager_max = MPIR_CVAR_CH3_RDMA_EAGER_MAX;
    cfg->early_bufs = (size_t) MPIR_CVAR_CH3_RDMA_EARLY_BUFS;
    cfg->poll_spins = MPIR_CVAR_CH3_RDMA_POLL_SPINS;
    cfg->ring_idle = MPIR_CVAR_CH3_RDMA_RING_IDLE;
    cfg->max_conns = MPIR_CVAR_CH3_RDMA_MAX_CONNS;
    cfg->verbose = MPIR_CVAR_CH3_RDMA_VERBOSE;

  fn_exit:
    return st;
  fn_fail:
    goto fn_exit;
}

/* ZCOPY_THRESHOLD=-1.  Over verbs the RDMA-read rendezvous pays from 32
 * KiB.  On shared memory the one-rendezvous CMA copy (rdma_rndv.c) took
 * less time than CH3's RTS/CTS and the ring's copy from 128 KiB, but moved
 * a stream of messages slower up to about 185 KB; from 192 KiB it took
 * 0.82-0.89 of the time and moved a stream as fast (0.91-1.05; sizes left
 * alone 0.95-1.11) (host H, 2026-12-05, ab.sh 9 pairs, same build;
 * docs/results/shm.md). */
#define RDMA_ZCOPY_MIN_VERBS 32768
#define RDMA_ZCOPY_MIN_SHM 196608
/* ...but a message to a peer that answered our last frame (a ping-pong:
 * its time is its latency) takes the channel's rendezvous from 64 KiB,
 * below CH3's eager limit too (MPIDI_CH3I_eager_limit): with its copy
 * split (CMA_SPLIT) a ping-pong took 0.41 / 0.50 of the ring's time at 64
 * / 128 KiB.  Not lower: 33-64 KiB unsplit took 0.71-0.79, and behind
 * CH3's RTS/CTS a stream of them moved 0.87-0.96 of the bytes (host H,
 * 2026-12-07, docs/results/shm.md). */
#define RDMA_ZCOPY_ANSWERED_SHM 65536

static rdma_status_t rdma_zc_config_get(zc_config_t * zc, char *msg, size_t len)
{
    rdma_status_t st = RDMA_OK;
    const char *p = MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL;

    CVAR_CHECK(!strcmp(p, "auto") || !strcmp(p, "copy") || !strcmp(p, "zcopy"),
               "MPIR_CVAR_CH3_RDMA_LARGE_PROTOCOL=%s: allowed auto, copy or zcopy", p);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD == -1 ||
               (MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD >= 1024 &&
                MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD <= 1073741824),
               "MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD=%d: allowed -1 (auto) or 1024..1073741824",
               MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD);
    CVAR_CHECK(MPIR_CVAR_CH3_RDMA_CMA_SPLIT == 0 || (MPIR_CVAR_CH3_RDMA_CMA_SPLIT >= 65536 &&
                                                      MPIR_CVAR_CH3_RDMA_CMA_SPLIT <= 1073741824),
               "MPIR_CVAR_CH3_RDMA_CMA_SPLIT=%d: allowed 0 or 65536..1073741824",
               MPIR_CVAR_CH3_RDMA_CMA_SPLIT);
    zc->threshold = MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD < 0 ? RDMA_ZCOPY_MIN_VERBS
        : (size_t) MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD;
    zc->split_min = (size_t) MPIR_CVAR_CH3_RDMA_CMA_SPLIT;
    zc->mode = !strcmp(p, "copy") ? ZC_MODE_COPY : !strcmp(p, "zcopy") ? ZC_MODE_ZCOPY
        : ZC_MODE_AUTO;
  fn_exit:
    return st;
  fn_fail:
    goto fn_exit;
}

/* Both link configurations as the links will check them at bind. */
static rdma_status_t rdma_ring_check(const rdma_chan_config_t * cfg, char *msg, size_t len)
{
    rdma_status_t st = RDMA_OK;
    int k;
    const char *what;

    for (k = 0; k < RDMA_XP_N; k++)
        CVAR_CHECK(rdma_link_config_check(&cfg->link[k], &what) == RDMA_OK,
                   "ring configuration rejected (%s): check MPIR_CVAR_CH3_RDMA_RING_* and "
                   "_PIPELINE*", what);
  fn_exit:
    return st;
  fn_fail:
    goto fn_exit;
}

rdma_status_t MPIDI_CH3I_RDMA_config_get(rdma_chan_config_t * cfg, char *msg, size_t len)
{
    rdma_status_t st;

    memset(cfg, 0, sizeof(*cfg));
    st = rdma_other_cvars_get(cfg, msg, len);
    if (st != RDMA_OK)
        goto fn_fail;
    st = rdma_ring_config(&cfg->link[RDMA_XP_SHM].ring, &cfg->link[RDMA_XP_VERBS].ring, msg, len);
    if (st != RDMA_OK)
        goto fn_fail;
    st = rdma_zc_config_get(&cfg->link[RDMA_XP_SHM].zc, msg, len);
    if (st != RDMA_OK)
        goto fn_fail;
    cfg->link[RDMA_XP_VERBS].zc = cfg->link[RDMA_XP_SHM].zc;
    cfg->link[RDMA_XP_VERBS].zc.eager_min = cfg->verbs.eager_reg_uses ? FREQ_MIN_LEN : 0;
    if (MPIR_CVAR_CH3_RDMA_ZCOPY_THRESHOLD < 0) {
        cfg->link[RDMA_XP_SHM].zc.threshold = RDMA_ZCOPY_MIN_SHM;
        cfg->link[RDMA_XP_SHM].zc.answered_min = RDMA_ZCOPY_ANSWERED_SHM;
    }
    st = rdma_ring_check(cfg, msg, len);
    if (st != RDMA_OK)
        goto fn_fail;
  fn_exit:
    return st;
  fn_fail:
    goto fn_exit;
}
