/*
 * rb_pipe: one connection's pair of ring-buffer pipes (P3 sec. 4).
 *
 * Transport independent: the pipe never touches verbs or shared memory.  It
 * reads and writes four memory areas and calls the transport through
 * rb_xport_ops_t to make a local image visible at the peer.
 *
 *   send side (this process -> peer)        receive side (peer -> this process)
 *   tx.stage : image of the peer's ring     rx.ring  : ring the peer writes into
 *   tx.tail_word : peer's tail, written     rx.head_word : peer's head, written
 *                  by the peer's credits                   by the peer (basic mode)
 *
 * Positions (head, tail) are byte counters that only grow; offset = pos %
 * ring_size.  Head master is tx.head (sender), tail master is rx.tail
 * (receiver); each side only ever reads its own memory (replicas may be stale,
 * which only delays progress).
 *
 * Frame layout (each frame starts on a chunk boundary and never wraps):
 *
 *   +0   uint64 flag    = (seq << 32) | (len << 2) | alt,  alt in {1,2}
 *   +8   uint64 info    = credit (receiver tail of the reverse pipe, bytes,
 *                         low 53 bits; rebuilt against tx.head)
 *                         | RB_INFO_QUIET (bit 53: clear my flag word only)
 *                         | RB_INFO_WRAP (bit 54: the frame ends the lap)
 *                         | RB_INFO_GROW (bit 55: "grow my ring")
 *                         | (uint64)type << 56
 *   +16  payload[len], zero padded to 8 bytes
 *   +16+pad8(len)  uint64 tail flag == flag, only where nothing else
 *                  publishes the frame; or, on a verifying pipe, a check
 *                  (rb_pipe_t.tail_kind)
 *
 * seq starts at 1 and skips 0, so a flag word that has landed only in part
 * (its unwritten bytes still 0) never carries the expected seq.  A CTRL
 * frame that does not fit before the ring end, and a rewind to the hot
 * window (rb_config_t.hot_window), are preceded by a PAD frame (len 0) that
 * covers the rest of the ring; the receiver drops it.  Only a PAD's header
 * (and tail flag) is written, so only its first chunk-start word is cleared.
 *
 * Arrival (piggyback mode, flag polling): the receiver polls the flag word of
 * its next expected frame.  Every chunk-start word is cleared to 0 by the
 * receiver when the frame covering it is consumed, so a non-zero flag with the
 * expected seq is new; the frame is complete when the tail flag equals it.
 * The sender picks alt so the tail flag differs from the word its own stage
 * image holds at that position (the only non-zero value the receiver could
 * hold there), so a stale word or payload can never match.
 *
 * Ordering rules (enforced by the transports, see their headers):
 *  - verbs: one RDMA write per frame; flag polling requires that the QP place
 *    a write in increasing address order (ibv_query_qp_data_in_order WHOLE_MSG)
 *    plus an acquire barrier after the tail flag; otherwise the pipe runs
 *    completion-driven (cfg.completion_driven): the transport calls
 *    rb_pipe_landed() per frame on its write-with-immediate completion,
 *    which makes the whole write visible, so frames carry no tail flag --
 *    unless small frames verify themselves (cfg.verify, below).
 *  - shm: the stage IS the peer's ring; the pipe writes the payload, then
 *    stores the flag with release semantics (rb_pipe does this itself), and
 *    the receiver's acquire load of the flag orders its payload reads
 *    (cfg.flag_publishes: the tail flag is neither written nor checked).
 *
 * Self-verifying frames (cfg.verify, completion-driven pipes): a frame of
 * at most RB_VERIFY_MAX bytes (overhead included) whose payload is in the
 * stage goes out as a plain write, with no completion at the receiver; its
 * flag's alt is RB_ALT_VERIFIED and its tail word is rb_check() over its
 * position, flag, info and payload.  Every other frame keeps its write with
 * immediate (alt 1) and its tail word is rb_check() over position, flag and
 * info only.  The receiver trusts a frame only when the tail word matches
 * what it read: a verified frame is then complete, whatever order its
 * bytes landed in (a torn read fails the check; rb_check says how
 * surely); an authentic alt-1 header is complete once rb_pipe_landed
 * counted a frame the receiver has not consumed -- completions come in
 * write order and every earlier alt-1 frame is consumed, so that count is
 * this frame's.  Nothing relies on placement order, within one write or
 * between writes.  A verified frame counts as landed once, when it
 * verifies.
 *
 * Credits (tail updates): every frame carries the sender's current receive
 * tail (piggyback).  When unreported consumption reaches credit_threshold the
 * receiver sends one coalesced update through ops->credit, which writes the
 * 8-byte tail word in the peer's memory: it never consumes ring space, so the
 * two rings can never deadlock on credits.  Transports reserve send-queue
 * slots for credit writes.  A piggybacked credit counts as sent, but the
 * peer only sees it when it reads that frame: both ends must keep reading.
 *
 * Growing rings (cfg.ring_max > ring_size, the transport's ring_new,
 * ring_drop, stage_new and ring_move set): each direction starts at
 * ring_size and doubles, up to ring_max, when its traffic needs it:
 *  1. The sender meets a full ring (a put that cannot take all it was
 *     given): its next frame carries RB_INFO_GROW (once per size).
 *  2. The receiver allocates a ring twice the size (ops->ring_new) and
 *     sends MOVE {size, descriptor} on the reverse pipe.  The receiver's
 *     owner may also offer the first size again (rb_pipe_shrink) when the
 *     connection has been idle: the same steps follow.
 *  3. The sender, at its next frame boundary with a chunk free in the old
 *     ring (at once if it is idle: the MOVE is acted on where it is read),
 *     gets a new stage (ops->stage_new), writes SWITCH as the last
 *     frame of the old ring and moves its writes (ops->ring_move).  SWITCH
 *     spans up to the next multiple of the new size, P: both ends continue
 *     at position P, offset 0 of the new ring, which is empty (the sender
 *     sets its tail replica to P; older credits are below it and ignored).
 *  4. The receiver, having consumed every frame before SWITCH (all of the
 *     old ring's writes landed), reads on in the new ring and frees the old
 *     one (ops->ring_drop).
 * Nothing is lost or reordered: the stream's frames stay in seq order and
 * SWITCH is their boundary.  Each direction has its own geometry (tx.cfg,
 * rx.cfg: cfg fitted to the current ring by rb_config_fit); both ends of a
 * direction change it at SWITCH.  MOVE and SWITCH are internal frames, never
 * shown to the caller.  A failed allocation leaves the ring as it is: a
 * refused ring_new ends the asking at that size, a refused stage_new leaves
 * the receiver's new ring unused until the transport closes.
 *
 * Write window (cfg.max_writes = W > 0): at most W transport writes of
 * frames whose bytes the peer has not yet credited, so a transport can size
 * its queues by W, not by the frames a ring holds (a verbs write-with-
 * immediate takes one of the peer's receives until the peer polls it,
 * which it does before it can consume and credit the write's frames).  The
 * sender keeps the end position of each write (win_end) and retires those
 * at or below the newest credit (tail word or piggyback: tx.credit, which a
 * SWITCH does not move, unlike tx.tail).  A put that would open a write
 * beyond W takes nothing more (no GROW ask: the ring has room).  The
 * receiver returns credit once W/2 frames were consumed since the last
 * credit it sent: a blocked sender has W writes, so at least W frames,
 * uncredited, and their consumption always sends one.  Both ends use the
 * same W (the transport's constant).
 *
 * Basic mode (the paper's baseline, for ablation): no piggyback; after each
 * frame the sender writes its head with ops->head, the receiver detects data
 * by its head word only and returns every consumption with ops->credit.
 *
 * Not thread safe: the caller serialises all calls on one pipe.
 */
#ifndef RB_PIPE_H_INCLUDED
#define RB_PIPE_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "rdma_status.h"


typedef enum {
    RB_MODE_PIGGYBACK = 0,      /* head and credit piggybacked, flag polling */
    RB_MODE_BASIC = 1           /* separate data, head and tail writes */
} rb_mode_t;

/* Frame types: DATA, control types RB_FRAME_CTRL..RB_FRAME_MOVE-1 (the
 * caller's choice), and the internal MOVE, SWITCH (growing rings, see
 * above) and PAD, never returned by rb_pipe_peek. */
enum { RB_FRAME_DATA = 0, RB_FRAME_CTRL = 1, RB_FRAME_MOVE = 253, RB_FRAME_SWITCH = 254,
    RB_FRAME_PAD = 255
};

#define RB_FRAME_OVERHEAD 24    /* flag + info + tail flag (the most) */
#define RB_CREDIT_MASK ((UINT64_C(1) << 53) - 1)       /* info bits 0..52 */
#define RB_INFO_QUIET (UINT64_C(1) << 53)
#define RB_INFO_WRAP (UINT64_C(1) << 54)
#define RB_INFO_GROW (UINT64_C(1) << 55)
#define RB_DESC_MAX 32          /* a new ring's descriptor (ops->ring_new) */
#define RB_LEN_MAX ((1u << 30) - 1)
#define RB_WRITES_MAX 256       /* rb_config_t.max_writes, at most */
#define RB_VERIFY_MAX 512       /* cfg.verify: frame bytes checked whole, at most */
#define RB_ALT_VERIFIED 2       /* cfg.verify: a flag's alt for such a frame */
#define RB_STALE_BITS 16384     /* chunks a lazily cleared ring may have */
#define RB_CLEAR_ALL 256        /* lazy: frames up to this many chunks are
                                 * cleared whole at release: every default
                                 * shm frame (16 KiB); from 128, host G
                                 * doubled 8-16 KiB latency (docs/results/shm.md) */

typedef struct rb_config {
    size_t ring_size;           /* bytes; power of two, <= 2^51; where the
                                 * ring grows (ring_max), its first size */
    size_t chunk_size;          /* ring slot; power of two, 64..ring_size/4 */
    size_t max_frame;           /* bytes incl. overhead; multiple of chunk_size,
                                 * chunk_size..ring_size/2 */
    size_t credit_threshold;    /* bytes; chunk_size..ring_size - max_frame */
    rb_mode_t mode;
    int completion_driven;      /* arrival from rb_pipe_landed(), not flags */
    /* Superpipeline (seeds 000/002): frames, at most max_frame bytes each
     * (the sub-blocks, each with its own flags), go out in groups of one
     * transport write; group i of a message closes once it holds
     * sched_c0 * sched_q^i bytes, at most sched_max (rb_sched_chunk).  A
     * message ends with a putv that accepts its whole iov.  sched_c0 = 0:
     * every frame is its own write (fixed-chunk pipeline, P3). */
    size_t sched_c0;            /* 0, or chunk_size..sched_max */
    size_t sched_max;           /* sched_c0..ring_size/2 */
    double sched_q;             /* 1..16 */
    /* Hot window: a frame that would start at ring offset >= hot_window,
     * or after hot_window/4 frame bytes were written since offset 0,
     * on a ring the sender knows to be empty (every frame consumed and its
     * credit seen) starts at offset 0 instead, after a PAD frame over the
     * ring end.  Small messages on a quiet connection then cycle through a
     * few cache lines that stay mapped and cached, as a fastbox does,
     * instead of walking (and page-faulting) the whole ring: tiny frames
     * rewind at the offset, so a PAD is rare; larger ones by the bytes
     * they touched, so the window stays small.  A busy ring is never
     * rewound.  Without a PAD, the common case: a one-frame message to an
     * empty ring that ends at or past the lap mark, hot_window/32, at an
     * offset of at least its own span, ends the lap (RB_INFO_WRAP: its
     * span runs to the ring end, for both sides), so a ping-pong cycles
     * through the slots below the mark; a frame over hot_window/4 also
     * past that many frame bytes, if it starts inside the window and the
     * message before it also found the ring empty (tx.quiet: a ping-pong,
     * not a burst's first).  Its release returns credit at
     * once (the skipped bytes pass credit_threshold): a sender that goes
     * on before the frame is consumed has its offset's bytes of room, so
     * one more frame of its size.  A fixed slot, 512 bytes and 1 KiB of
     * slots took 0.75, 0.76 and 0.85 of a 16 KiB walk's time per round
     * trip (npb-scripts/progs/ring_walk.c, 88 B).  A one-way stream of
     * frames over hot_window/32 bytes (no frame back since the sender's
     * last) neither rewinds nor ends laps (rb_tx_streams).
     * 0: off; otherwise chunk_size..ring_size/2. */
    size_t hot_window;
    /* 1 where the stage IS the peer's ring and the head flag's release
     * store publishes the frame (shm): no tail flag is written or checked,
     * and the sender never reads the peer's line to pick alt. */
    int flag_publishes;
    /* Frames of a message that starts on an empty ring (every frame
     * consumed, by the tail read as it starts): there the receiver
     * waits, and shorter frames let its copy start sooner.  A message
     * that finds frames unconsumed (a stream) has max_frame frames, fewer
     * per frame costs.  0: max_frame always; else a multiple of
     * chunk_size, chunk_size..max_frame (rb_config_fit: at most max_frame,
     * 0 becomes max_frame).  32 bits: it fills the padding after
     * flag_publishes. */
    uint32_t quiet_frame;
    /* 0 or ring_size: the ring keeps its size; else a power of two above
     * ring_size that it grows to at most (rb_pipe.h, "Growing rings"): the
     * sizes above are checked against it and fitted to each ring size
     * (rb_config_fit). */
    size_t ring_max;
    /* 0: no bound; else 2..RB_WRITES_MAX writes in flight (rb_pipe.h,
     * "Write window"); the same at both ends */
    unsigned max_writes;
    /* 1: small frames verify themselves (rb_pipe.h, "Self-verifying
     * frames"); completion-driven piggyback pipes only, the same at both
     * ends */
    int verify;
} rb_config_t;

/* The parts of a write that come from the user's memory, not the stage
 * (rb_pipe_put_user): per frame, ring bytes [at, at + len) are read from
 * addr, which the caller registered (handle); in ring order. */
enum { RB_USER_SEGS = 4 };      /* frames of one rb_pipe_put_user, at most */
typedef struct rb_user {
    unsigned n;
    struct {
        size_t at;
        const void *addr;
        size_t len;
    } seg[RB_USER_SEGS];
    void *handle;
} rb_user_t;

typedef struct rb_xport_ops {
    /* Make stage[off, off+len) visible in the peer's ring at the same offset
     * with one write of consecutive frames, `frames` of which the receiver
     * learns of by completion (rb_pipe_landed; all of them but
     * self-verifying ones, data only in basic mode): 0 on a completion-
     * driven pipe means a plain write.  Asynchronous is fine. */
    rdma_status_t (*write)(void *ctx, size_t off, size_t len, unsigned frames);
    /* Store this side's receive tail into the peer's tail word. */
    rdma_status_t (*credit)(void *ctx, uint64_t tail);
    /* Basic mode only: store the send head into the peer's head word. */
    rdma_status_t (*head)(void *ctx, uint64_t head);
    /* Optional (NULL: rb_pipe_put_user refuses).  As write, but the ring
     * bytes of u's segments come from user memory: one gather list (stage,
     * user, stage, ..., stage; at most 2 RB_USER_SEGS + 1 entries).  The
     * transport reads the user memory until the write completes and tells
     * its owner then, not the pipe. */
    rdma_status_t (*write_user)(void *ctx, size_t off, size_t len, unsigned frames,
                                const rb_user_t * u);
    /* Growing rings: all four, or NULL (the rings keep their size).
     * Receiver: a new zeroed ring of size bytes (*ring), and in desc[*dlen]
     * (at most RB_DESC_MAX) what the peer's ring_move needs to write it. */
    rdma_status_t (*ring_new)(void *ctx, size_t size, void *desc, size_t *dlen,
                              volatile void **ring);
    /* Receiver: ring `old` is done with (the peer moved to the new one). */
    void (*ring_drop)(void *ctx, volatile void *old);
    /* Sender: a new zeroed stage of size bytes for the peer's new ring
     * (desc from its ring_new; where the stage IS the peer's ring, this
     * maps it), not yet written from. */
    rdma_status_t (*stage_new)(void *ctx, size_t size, const void *desc, size_t dlen,
                               void **stage);
    /* Sender: later writes go to the peer's new ring (desc from its
     * ring_new) from the stage stage_new returned; the old stage is read
     * until the writes already handed over complete. */
    void (*ring_move)(void *ctx, size_t size, const void *desc, size_t dlen);
} rb_xport_ops_t;

typedef struct rb_stats {
    uint64_t frames_tx, frames_rx, bytes_tx, bytes_rx;
    uint64_t writes_tx;         /* transport writes of frames */
    uint64_t credits_tx;        /* explicit credit updates sent */
    uint64_t full_stalls;       /* putv calls that found no space */
    uint64_t window_stalls;     /* puts stopped by the write window */
    uint64_t rewinds;           /* PAD frames sent to rewind to the hot window */
    uint64_t wraps;             /* frames that ended their lap (hot window) */
    uint64_t grows, shrinks;    /* moves of the send side to a larger, a
                                 * smaller ring */
} rb_stats_t;

/* A complete frame at rx.tail, as the receiver parsed it (rb_pipe.c). */
typedef struct rb_frame {
    uint8_t *payload;
    size_t len;
    int type;
    int quiet;                  /* RB_INFO_QUIET: cleared at its flag only */
    uint64_t span;              /* ring bytes the frame covers; 0: none */
} rb_frame_t;

/* rb_pipe_t.tail_kind */
enum { RB_TAIL_NONE = 0, RB_TAIL_FLAG = 1, RB_TAIL_CHECK = 2 };

/* rb_pipe_t.express: how the common frame is known complete (from LANDED on: in rb_pipe_peek) */
enum { RB_EXPRESS_FLAG = 1, RB_EXPRESS_LANDED = 2, RB_EXPRESS_TAIL = 3 };

typedef struct rb_pipe {
    rb_config_t cfg;            /* as configured (checked against ring_max) */
    const rb_xport_ops_t *ops;
    void *ctx;
    /* From cfg at init, what a frame's tail word is: RB_TAIL_FLAG, a copy of
     * its flag, unless the head flag's store (flag_publishes) or the
     * transport's completion (completion_driven) tells the receiver the
     * frame is complete (RB_TAIL_NONE: no tail word), or RB_TAIL_CHECK on a
     * verifying pipe (cfg.verify); ovh is a frame's bytes besides its
     * padded payload (16, or 24 with a tail word). */
    int tail_kind;
    unsigned ovh;
    /* From cfg at init (0 in basic mode): credits are piggybacked, so the
     * common frame is parsed the express way (rb_frame.h): inline in
     * rb_pipe_view where the head flag's release store publishes it
     * (RB_EXPRESS_FLAG, flag_publishes), in rb_pipe_peek once it landed
     * (RB_EXPRESS_LANDED, completion_driven) or its tail flag came
     * (RB_EXPRESS_TAIL; both out of line, so that the shared-memory poll
     * loop keeps its code); released inline by rb_pipe_view_done. */
    int express;
    /* Grow work owed (rx.offer, tx.move.size): the entry points do it
     * first (rb_grow_step). */
    int pend;
    /* From cfg at init, the same at both ends: the stage is the peer's ring
     * (flag_publishes), which does not grow and has at most RB_STALE_BITS
     * chunks.  The receiver then clears only the flag word of a frame over
     * RB_CLEAR_ALL chunks (rb_rx_release): its other stores would leave
     * every line of a large frame modified in its cache, for the sender to
     * fetch back.  The sender zeroes such a word before a frame can start
     * there (rb_tx_stale, stale[]); so for a quiet frame (rb_tx_quiet). */
    int lazy;
    int stale_from;             /* stale[] has no bit below this chunk
                                 * (rb_tx_stale lowers it, its sweep
                                 * raises it) */
    struct {
        rb_config_t cfg;        /* fitted to the peer's ring (rb_config_fit) */
        uint8_t *stage;
        volatile uint64_t *tail_word;
        uint64_t head;          /* master */
        uint64_t tail;          /* best known peer tail (replica) */
        uint64_t credit;        /* newest tail the peer sent (window) */
        unsigned win_in, win_out;       /* uncredited writes: win_end[out..in) */
        uint64_t hot_bytes;     /* frame bytes written since offset 0 */
        uint32_t seq;
        int quiet;              /* the last message found the ring empty */
        size_t wr_off, wr_len;  /* frames built, not yet written */
        unsigned wr_frames, wr_landed;  /* of them, those not self-verifying */
        double wr_target;       /* bytes that close the current group (rb_sched_chunk) */
        uint64_t ask;           /* RB_INFO_GROW on the next frame, or 0 */
        uint64_t wrap;          /* RB_INFO_WRAP on the next frame, or 0 */
        size_t asked;           /* ring size we asked to grow from (0 after
                                 * each switch) */
        struct {
            size_t size, dlen;  /* size 0: no MOVE pending */
            uint8_t desc[RB_DESC_MAX];
            void *stage;        /* from ops->stage_new, or NULL */
        } move;                 /* the peer's MOVE, SWITCH not yet sent */
    } tx;
    struct {
        rb_config_t cfg;        /* fitted to our ring (rb_config_fit) */
        volatile uint8_t *ring;
        volatile uint64_t *head_word;
        uint64_t tail;          /* master: start of the current frame */
        uint64_t tail_sent;     /* last tail published to the peer */
        size_t off;             /* payload bytes of current frame consumed */
        uint32_t seq;
        uint64_t landed, consumed;      /* frames (landed: completion-driven;
                                         * a verified one when it verifies) */
        uint64_t consumed_sent; /* consumed when tail_sent was published */
        int at_ctrl;            /* the last getv stopped at a CTRL frame */
        rb_frame_t seen;        /* what rb_pipe_peek parsed at tail, until
                                 * its release (span 0: nothing) */
        struct {
            volatile uint8_t *ring;     /* the peer will SWITCH to it; or NULL */
            size_t size, dlen;
            uint8_t desc[RB_DESC_MAX];
        } next;
        size_t offer;           /* ring size to offer with MOVE, or 0 */
        uint32_t grow_seq;      /* seq of the frame whose GROW was taken (a
                                 * frame read in parts is parsed again) */
    } rx;
    rb_stats_t stats;
    /* End positions of the uncredited writes (cfg.max_writes), indices
     * mod RB_WRITES_MAX; last, away from the fields every put touches. */
    uint64_t win_end[RB_WRITES_MAX];
    /* lazy, sender's: bit i set while chunk i's first word may hold an
     * older frame's payload (rb_tx_stale). */
    uint64_t stale[RB_STALE_BITS / 64];
    /* Verifying pipe, receiver's: rx.tail + 1 of the frame that verified
     * last (counted in rx.landed), or 0.  Here, and stale_from by lazy (in
     * a hole), so that no field the shared-memory paths touch moved. */
    uint64_t rx_verified;
    size_t quiet_stale;         /* lazy, sender's: ring offset + 1 of the word
                                 * the last quiet frame left stale, or 0 */
    uint64_t quiet_rx;          /* rx.consumed when our last frame went out
                                 * (rb_tx_answered) */
} rb_pipe_t;

/* Check a configuration; on error *what names the offending field. */
rdma_status_t rb_config_check(const rb_config_t * cfg, const char **what);

/* cfg (checked) fitted to a ring of `ring` bytes (ring_size..ring_max):
 * max_frame and hot_window at most ring/2, credit_threshold at most ring -
 * max_frame (not scaled down: an explicit credit per small message would
 * cost a write on the latency path), sched_max scaled with the ring (a
 * quarter of a quarter-size ring where the largest had a quarter), never
 * below a chunk. */
rb_config_t rb_config_fit(const rb_config_t * cfg, size_t ring);

/* The four areas must be zeroed by their owners before either side writes.
 * stage and ring are ring_size bytes, 8-byte aligned. */
rdma_status_t rb_pipe_init(rb_pipe_t * p, const rb_config_t * cfg, const rb_xport_ops_t * ops,
                           void *ctx, void *stage, volatile uint64_t * tail_word,
                           volatile void *ring, volatile uint64_t * head_word);

/* Bytes in iov[0..n). */
static inline size_t rb_iov_total(const struct iovec *iov, int n)
{
    size_t t = 0;

    if (n == 1)                 /* the common header alone */
        return iov->iov_len;
    while (n-- > 0)
        t += iov[n].iov_len;
    return t;
}

/* Copy up to the iov total into as many frames as fit (each at most
 * max_frame), write each frame as soon as it is copied.  *nbytes = bytes
 * accepted (0 when the ring is full).  Non-blocking. */
rdma_status_t rb_pipe_putv(rb_pipe_t * p, const struct iovec *iov, int n, size_t * nbytes);

/* Bytes rb_pipe_put_user takes at most: RB_USER_SEGS full frames. */
size_t rb_pipe_user_max(const rb_pipe_t * p);

/* Send the iov as DATA frames (as many as its total needs, at most
 * RB_USER_SEGS) in one write, its last entry not copied: the transport
 * gathers it from the caller's memory (handle: its registration, for
 * ops->write_user), which must stay unchanged until the transport says the
 * write completed.  All or nothing: *nbytes = the iov total, or 0 when the
 * frames do not fit now (nothing sent; a PAD frame may have gone out).
 * The bytes on the wire are those rb_pipe_putv would send without a
 * superpipeline schedule.
 *   Flag-poll mode needs the stage to mirror the peer's ring (the tail
 * flag's alt is chosen against it, see the top): there the entry is also
 * copied into the stage, after the write is posted, so the copy overlaps
 * the transfer instead of preceding it; the bytes are the ones the NIC
 * reads, since the caller keeps them until completion.  Completion-driven
 * pipes never read the stage's payload back: no copy at all.  Not for
 * flag_publishes pipes, whose stage is the peer's ring. */
rdma_status_t rb_pipe_put_user(rb_pipe_t * p, const struct iovec *iov, int n, void *handle,
                               size_t *nbytes);

/* Send one control message of type t (RB_FRAME_CTRL <= t < RB_FRAME_PAD,
 * len <= max_frame - overhead) as a single frame, or return RDMA_OK with
 * *sent = 0 when there is no space (a PAD frame may have gone out). */
rdma_status_t rb_pipe_put_ctrl(rb_pipe_t * p, int type, const void *buf, size_t len, int *sent);

/* Copy arrived DATA bytes into the iov, across frames.  Stops at a CTRL
 * frame.  *nbytes may be 0.  Non-blocking. */
rdma_status_t rb_pipe_getv(rb_pipe_t * p, const struct iovec *iov, int n, size_t * nbytes);

/* What the receive probes return (rb_pipe_peek, rb_pipe_view and the
 * inline probes of the layers above, up to the glue's read_view):
 * RB_PEEK_READY a frame (*buf, *len set), RB_PEEK_NONE nothing has
 * arrived yet, and below 0: from rb_pipe_peek the rdma_status_t of a
 * failed pipe, from the others RB_PEEK_SLOW, take the general path (the
 * frame is not DATA, or the pipe failed: getv says which). */
typedef int rb_peek_t;
enum { RB_PEEK_SLOW = -1, RB_PEEK_NONE = 0, RB_PEEK_READY = 1 };

/* The current frame, if complete: its type and the unconsumed part of its
 * payload (zero-copy view, valid until rb_pipe_consume). */
rb_peek_t rb_pipe_peek(rb_pipe_t * p, int *type, const void **buf, size_t * len);

/* Consume n bytes of the current frame's payload (n <= peeked len); a frame
 * fully consumed is released (chunk-start words cleared, tail advanced,
 * credit sent if the threshold is reached). */
rdma_status_t rb_pipe_consume(rb_pipe_t * p, size_t n);

/* The chunk-start word at rx.tail is not 0: a frame may be landing. */
static inline int rb_pipe_rx_head(const rb_pipe_t * p)
{
    return *(volatile const uint64_t *) (p->rx.ring + (p->rx.tail & (p->rx.cfg.ring_size - 1)))
        != 0;
}

/* For the idle poll: 0 if nothing can have arrived since the last getv
 * (chunk-start word still 0, no landed completion, head word unmoved); 1
 * if a frame may be there (rb_pipe_getv/peek then decide, with acquire). */
static inline int rb_pipe_rx_maybe(const rb_pipe_t * p)
{
    if (p->rx.cfg.completion_driven)    /* a verified frame comes without one */
        return p->rx.landed != p->rx.consumed
            || (p->tail_kind == RB_TAIL_CHECK && rb_pipe_rx_head(p));
    if (p->rx.cfg.mode == RB_MODE_BASIC)
        return *p->rx.head_word != p->rx.tail;
    return rb_pipe_rx_head(p);
}

/* 1 if the last getv stopped at a CTRL frame (the caller's to peek). */
static inline int rb_pipe_rx_at_ctrl(const rb_pipe_t * p)
{
    return p->rx.at_ctrl;
}

/* Completion-driven mode: the transport saw a write of `frames` frames
 * land. */
void rb_pipe_landed(rb_pipe_t * p, unsigned frames);

/* The superpipeline's one growth rule: C_(i+1) = min(C_i * q, max).  O(1)
 * per group, so q near 1 (many groups per message) costs nothing extra. */
static inline double rb_sched_next(double c, double q, size_t max)
{
    return c * q < (double) max ? c * q : (double) max;
}

/* Superpipeline schedule: C_i = c0 * q^i bytes, capped at max. */
double rb_sched_chunk(size_t c0, double q, size_t max, unsigned i);

/* Chunks of the uncapped schedule that carry len bytes: the least n with
 * c0 (q^n - 1)/(q - 1) >= len, i.e. ceil(log_q(1 + (len/c0)(q - 1))) (seeds
 * 000/002, eq. 7); ceil(len/c0) for q = 1. */
unsigned rb_sched_count(size_t len, size_t c0, double q);

/* The owner found the connection idle for long: if this side's receive
 * ring grew, offer the peer a ring of the first size again (rb_pipe.h,
 * "Growing rings"); the rest happens as the two ends poll. */
rdma_status_t rb_pipe_shrink(rb_pipe_t * p);

/* Publish the receive tail now if anything is unreported (e.g. when idle
 * or before closing). */
rdma_status_t rb_pipe_flush_credit(rb_pipe_t * p);

/* Ring bytes the sender may still write, frame overhead included (for
 * schedulers and tests). */
size_t rb_pipe_tx_space(const rb_pipe_t * p);

/* ---- The small-message path, inline in the caller ----
 * The same frames, bytes and pipe state as the general entry points above:
 * the common case (one frame that fits now; a complete DATA frame at the
 * tail) runs the frame rules of rb_frame.h in the caller's code, anything
 * else calls the general path.  No argument checks: for callers on the
 * latency path. */
#include "rb_frame.h"

/* Has a frame come back since our last one went out (a ping-pong, not a
 * one-way stream: the peer waits for what we send next)? */
static inline int rb_pipe_answered(const rb_pipe_t * p)
{
    return rb_tx_answered(p);
}

/* rb_pipe_putv of an iov whose total the caller knows. */
static inline rdma_status_t rb_pipe_put_small(rb_pipe_t * p, const struct iovec *iov, int n,
                                              size_t total, size_t *nbytes)
{
    if (!p->pend && rb_tx_one_fits(p, total))
        return rb_tx_one(p, iov, n, total, nbytes);
    return rb_pipe_putv(p, iov, n, nbytes);
}

/* rb_pipe_put_small in two steps, for a caller that copies its bytes in
 * itself (a header of fixed size): where the len bytes of a DATA frame go
 * now, or NULL (nothing sent: use rb_pipe_put_small).  The caller writes
 * exactly len bytes there, then calls rb_pipe_commit(p, len) before any
 * other call on p.  On a flag-publishing pipe the receiver polls the
 * cache line that holds the head flag and the first 64 - RB_HDR bytes:
 * writing those last keeps the line from crossing over while the rest is
 * copied. */
static inline void *rb_pipe_claim(rb_pipe_t * p, size_t len)
{
    return !p->pend && rb_tx_one_fits(p, len) ? rb_tx_payload(p, len) : NULL;
}

static inline __attribute__ ((always_inline))
rdma_status_t rb_pipe_commit(rb_pipe_t * p, size_t len)
{
    return rb_tx_commit(p, len);
}

/* The current DATA frame's unconsumed payload, where it lies, valid until
 * rb_pipe_view_done (rb_peek_t; RB_PEEK_SLOW: rb_pipe_getv). */
static inline rb_peek_t rb_pipe_view(rb_pipe_t * p, const void **buf, size_t *len)
{
    int type;
    rb_peek_t rc;

    if (p->express == RB_EXPRESS_FLAG
        && (rc = rb_rx_parse_express(p, buf, len, RB_EXPRESS_FLAG)) >= 0)
        return rc;
    if (!rb_pipe_rx_maybe(p))
        return RB_PEEK_NONE;
    rc = rb_pipe_peek(p, &type, buf, len);
    return rc < 0 || (rc == RB_PEEK_READY && type != RB_FRAME_DATA) ? RB_PEEK_SLOW : rc;
}

/* Consume n bytes of the rb_pipe_view payload (rb_pipe_consume): a whole
 * frame on an express pipe is released inline. */
static inline rdma_status_t rb_pipe_view_done(rb_pipe_t * p, size_t n)
{
    if (p->express && !p->rx.off) {
        size_t off = rb_ring_off(&p->rx.cfg, p->rx.tail);
        volatile uint64_t *fr = (volatile uint64_t *) (p->rx.ring + off);
        size_t len = rb_flag_len(fr[0]);

        if (n == len && n)
            return rb_rx_advance_data(p, off, len, fr[1]);
    }
    return rb_pipe_consume(p, n);
}

#endif /* RB_PIPE_H_INCLUDED */
